//===- LossPatterns.cpp - ONNX loss ops -----------------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss. The common case,
// cross entropy without class weights reduced to a mean or a sum (torch's
// F.cross_entropy), is one fused graph.softmax_cross_entropy whose kernel
// never writes the log-probabilities. Everything else, class weights and
// reduction "none", and every NegativeLogLikelihoodLoss, is the label's
// entry of each row picked by a graph.one_hot mask: the loss is
// -sum(logp * mask) with the class weights folded into the mask, and the
// weighted mean divides by the mask's sum, as torch's nll_loss does. The mask
// costs the scores' memory again; autodiff sees products and sums only.
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "Compose.h"

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

struct LossOperands {
  Value scores, labels, weight;
  std::string reduction;
  IntegerAttr ignoreIndex;
};

/// Reads and checks the operands both losses share: scores [N, C, d...],
/// int64 labels [N, d...], optional class weights [C], the reduction and
/// ignore_index.
FailureOr<LossOperands> readLossOperands(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  LossOperands ops;
  ops.scores = n.input(0);
  ops.labels = n.input(1);
  if (!ops.labels || !cast<RankedTensorType>(ops.labels.getType()).getElementType().isInteger(64))
    return n.fail("labels must be an int64 tensor");
  ops.reduction = n.stringAttr("reduction", "mean");
  if (ops.reduction != "mean" && ops.reduction != "sum" && ops.reduction != "none")
    return n.fail("reduction must be mean, sum or none, got '" + ops.reduction + "'");
  ArrayRef<int64_t> shape = shapeOf(ops.scores);
  if (shape.size() < 2)
    return n.fail("scores must be [N, C] or [N, C, d1, ...]");
  SmallVector<int64_t> labelShape(shape);
  labelShape.erase(labelShape.begin() + 1);
  if (shapeOf(ops.labels) != ArrayRef<int64_t>(labelShape))
    return n.fail("labels must have shape " + shapeString(labelShape));
  if (n.hasInput(2)) {
    ops.weight = n.input(2);
    if (!isF32(ops.weight) || shapeOf(ops.weight) != ArrayRef<int64_t>{shape[1]})
      return n.fail("class weights must be a float tensor [" + Twine(shape[1]) + "]");
  }
  if (const onnx::AttributeProto *attr = n.attribute("ignore_index"))
    ops.ignoreIndex = n.builder.getI64IntegerAttr(attr->i());
  return ops;
}

/// -logp[n, label, d...] (times the label's class weight), reduced as
/// asked; logp is [N, C, d...].
Value negativeLogLikelihood(NodeImporter &n, const LossOperands &ops, Value logp) {
  Compose b{n};
  ArrayRef<int64_t> shape = shapeOf(logp);
  const int64_t rank = shape.size(), classes = shape[1];
  SmallVector<int64_t> maskShape(shapeOf(ops.labels));
  maskShape.push_back(classes);
  Value mask = graph::OneHotOp::create(n.builder, n.loc, n.f32Tensor(maskShape), ops.labels, ops.ignoreIndex);
  if (rank > 2) { // [N, d..., C] -> [N, C, d...]
    SmallVector<int64_t> perm = {0, rank - 1};
    for (int64_t d = 1; d < rank - 1; ++d)
      perm.push_back(d);
    mask = b.transpose(mask, perm);
  }
  if (ops.weight) {
    SmallVector<int64_t> weightShape(rank, 1);
    weightShape[1] = classes;
    mask = b.mul(mask, b.reshape(ops.weight, weightShape));
  }
  Value losses = b.neg(b.sum(b.mul(logp, mask), {1}, /*keepdims=*/false));
  if (ops.reduction == "none")
    return losses;
  Value total = b.sumAll(losses);
  if (ops.reduction == "sum")
    return total;
  // The mean over what counts: the labels' weights, or the labels that are
  // not ignored; without either, the label count, known now.
  if (!ops.weight && !ops.ignoreIndex)
    return b.scale(total, 1.0 / static_cast<double>(product(shapeOf(ops.labels))));
  return b.div(total, b.sumAll(mask));
}

} // namespace

LogicalResult fsdpc::import::convertSoftmaxCrossEntropyLoss(NodeImporter &n) {
  FailureOr<LossOperands> ops = readLossOperands(n);
  if (failed(ops))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(ops->scores);
  Value logp;
  if (n.wantsOutput(1) || ops->weight || ops->reduction == "none")
    logp = graph::LogSoftmaxOp::create(n.builder, n.loc, ops->scores, n.builder.getI64IntegerAttr(1));
  if (n.wantsOutput(1))
    n.setOutput(1, logp);
  if (ops->weight || ops->reduction == "none") {
    n.setOutput(0, negativeLogLikelihood(n, *ops, logp));
    return success();
  }

  // The fused kernel: [N, C, d...] -> [N, d..., C] -> [N * prod(d), C].
  const int64_t classes = shape[1];
  Value logits = ops->scores;
  if (shape.size() > 2) {
    SmallVector<int64_t> perm = {0};
    for (size_t d = 2; d < shape.size(); ++d)
      perm.push_back(d);
    perm.push_back(1);
    logits = Compose{n}.transpose(ops->scores, perm);
  }
  const int64_t rows = product(shapeOf(ops->labels));
  logits = reshape(n, logits, {rows, classes});
  Value flatLabels = reshape(n, ops->labels, {rows});
  // mean or sum here: none went to the decomposition above.
  auto reduction =
      graph::LossReductionAttr::get(n.builder.getContext(), *graph::symbolizeLossReduction(ops->reduction));
  n.setOutput(0, graph::SoftmaxCrossEntropyOp::create(n.builder, n.loc, n.f32Tensor({}), logits, flatLabels,
                                                      reduction, ops->ignoreIndex, IntegerAttr()));
  return success();
}

LogicalResult fsdpc::import::convertNegativeLogLikelihoodLoss(NodeImporter &n) {
  FailureOr<LossOperands> ops = readLossOperands(n);
  if (failed(ops))
    return failure();
  n.setOutput(0, negativeLogLikelihood(n, *ops, ops->scores));
  return success();
}
