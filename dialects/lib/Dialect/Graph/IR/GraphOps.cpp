#include "fsdpc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace fsdpc::graph;

namespace {

/// Whether a hyperparameter is a finite number >= 0: NaN compares false with
/// everything, so `value < 0` alone would let it through.
bool isNonNegativeFinite(const APFloat &value) {
  const double d = value.convertToDouble();
  return std::isfinite(d) && d >= 0;
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

ArrayRef<int64_t> shapeOf(Value value) { return cast<RankedTensorType>(value.getType()).getShape(); }

LogicalResult verifyStaticShape(Operation *op) {
  for (Type type : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (auto tensor = dyn_cast<RankedTensorType>(type); tensor && !tensor.hasStaticShape())
      return op->emitOpError("requires static shapes, got ") << tensor;
  return success();
}

LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return op->emitOpError("axis ") << axis << " is out of range for rank " << rank;
  return success();
}

} // namespace

FailureOr<SmallVector<int64_t>> fsdpc::graph::broadcastShapes(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t b = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (a != b && a != 1 && b != 1)
      return failure();
    result[rank - 1 - i] = a == 1 ? b : a;
  }
  return result;
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value type ") << getValue().getType() << " differs from result type " << getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  if (failed(verifyStaticShape(*this)))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs()), result = shapeOf(getResult());
  if (lhs.size() < 2)
    return emitOpError("lhs must have rank 2 or more, got ") << lhs.size();
  if (rhs.size() != 2)
    return emitOpError("rhs must have rank 2, got ") << rhs.size();
  if (getTransposeA() && lhs.size() != 2)
    return emitOpError("transpose_a requires a rank-2 lhs");
  int64_t k = getTransposeA() ? lhs[0] : lhs.back();
  int64_t m = getTransposeA() ? lhs[1] : lhs[lhs.size() - 2];
  int64_t kRhs = getTransposeB() ? rhs[1] : rhs[0];
  int64_t n = getTransposeB() ? rhs[0] : rhs[1];
  if (k != kRhs)
    return emitOpError("contracting dimensions differ: ") << k << " vs " << kRhs;
  SmallVector<int64_t> expected(lhs.begin(), lhs.end());
  if (getTransposeA())
    expected = {m, n};
  else
    expected.back() = n;
  if (result != ArrayRef<int64_t>(expected))
    return emitOpError("result shape ") << shapeString(result) << " should be " << shapeString(expected);
  return success();
}

//===----------------------------------------------------------------------===//
// BatchMatmulOp
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>> BatchMatmulOp::inferShape(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                                                          bool transposeA, bool transposeB) {
  if (lhs.size() < 2 || rhs.size() < 2)
    return failure();
  int64_t m = transposeA ? lhs.back() : lhs[lhs.size() - 2], k = transposeA ? lhs[lhs.size() - 2] : lhs.back();
  int64_t kRhs = transposeB ? rhs.back() : rhs[rhs.size() - 2], n = transposeB ? rhs[rhs.size() - 2] : rhs.back();
  if (k != kRhs)
    return failure();
  FailureOr<SmallVector<int64_t>> batch = broadcastShapes(lhs.drop_back(2), rhs.drop_back(2));
  if (failed(batch))
    return failure();
  batch->append({m, n});
  return batch;
}

LogicalResult BatchMatmulOp::verify() {
  if (failed(verifyStaticShape(*this)))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs()), result = shapeOf(getResult());
  FailureOr<SmallVector<int64_t>> expected = inferShape(lhs, rhs, getTransposeA(), getTransposeB());
  if (failed(expected))
    return emitOpError("operands ") << shapeString(lhs) << " and " << shapeString(rhs)
                                    << " are not batched matrices with matching contracting and batch dimensions";
  if (result != ArrayRef<int64_t>(*expected))
    return emitOpError("result shape ") << shapeString(result) << " should be " << shapeString(*expected);
  return success();
}

/// Whether lhs [N, M, K], a weight stack [E, K, F] ([E, F, K] transposed),
/// experts [N] and result [N, M, F] fit expert_matmul.
static LogicalResult verifyExpertMatmul(Operation *op, ArrayRef<int64_t> lhs, ArrayRef<int64_t> weights,
                                        ArrayRef<int64_t> experts, ArrayRef<int64_t> result, bool transposed,
                                        StringRef resultName) {
  if (lhs.size() != 3 || weights.size() != 3 || experts.size() != 1 || result.size() != 3)
    return op->emitOpError("takes lhs [N, M, K], weights [E, K, F], experts [N] and ")
           << resultName << " [N, M, F], not " << shapeString(lhs) << ", " << shapeString(weights) << ", "
           << shapeString(experts) << ", " << shapeString(result);
  const int64_t k = transposed ? weights[2] : weights[1], f = transposed ? weights[1] : weights[2];
  if (lhs[2] != k || experts[0] != lhs[0] || result != ArrayRef<int64_t>{lhs[0], lhs[1], f})
    return op->emitOpError("lhs ") << shapeString(lhs) << ", weights " << shapeString(weights) << ", experts "
                                   << shapeString(experts) << " and " << resultName << " " << shapeString(result)
                                   << " do not fit together";
  return success();
}

LogicalResult ExpertMatmulOp::verify() {
  return verifyExpertMatmul(*this, shapeOf(getLhs()), shapeOf(getWeights()), shapeOf(getExperts()),
                            shapeOf(getResult()), getTransposeWeights(), "result");
}

LogicalResult ExpertMatmulWeightGradOp::verify() {
  return verifyExpertMatmul(*this, shapeOf(getLhs()), shapeOf(getResult()), shapeOf(getExperts()),
                            shapeOf(getDresult()), getTransposeWeights(), "dresult");
}

//===----------------------------------------------------------------------===//
// Shape and reduction ops
//===----------------------------------------------------------------------===//

namespace {
Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }
bool broadcastsTo(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  FailureOr<SmallVector<int64_t>> joined = broadcastShapes(shape, target);
  return succeeded(joined) && ArrayRef<int64_t>(*joined) == target;
}
} // namespace

LogicalResult ReduceSumOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  SmallVector<int64_t> expected;
  ArrayRef<int64_t> axes = getAxes();
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(in.size()) || (i && axes[i] <= axes[i - 1]))
      return emitOpError("axes must be ascending dimensions in [0, ") << in.size() << ")";
  for (auto [d, size] : llvm::enumerate(in)) {
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(d));
    if (!reduced)
      expected.push_back(size);
    else if (getKeepdims())
      expected.push_back(1);
  }
  if (out != ArrayRef<int64_t>(expected))
    return emitOpError("result shape ") << shapeString(out) << " should be " << shapeString(expected);
  return success();
}

LogicalResult BroadcastToOp::verify() {
  if (elementOf(getInput()) != elementOf(getResult()))
    return emitOpError("element types differ");
  if (!broadcastsTo(shapeOf(getInput()), shapeOf(getResult())))
    return emitOpError("input ") << shapeString(shapeOf(getInput())) << " does not broadcast to "
                                 << shapeString(shapeOf(getResult()));
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t axis = getAxis(), total = 0;
  if (axis < 0 || axis >= static_cast<int64_t>(out.size()))
    return emitOpError("axis ") << axis << " is out of range for rank " << out.size();
  for (Value input : getInputs()) {
    ArrayRef<int64_t> in = shapeOf(input);
    if (in.size() != out.size() || elementOf(input) != elementOf(getResult()))
      return emitOpError("inputs must have the result's rank and element type");
    for (size_t d = 0; d < in.size(); ++d)
      if (static_cast<int64_t>(d) != axis && in[d] != out[d])
        return emitOpError("input ") << shapeString(in) << " differs from the result " << shapeString(out)
                                     << " outside the axis";
    total += in[axis];
  }
  if (total != out[axis])
    return emitOpError("the inputs' sizes along the axis add up to ") << total << ", not " << out[axis];
  return success();
}

/// A slice of `in` with these starts and steps fits and has shape `out`.
static LogicalResult verifySlice(Operation *op, ArrayRef<int64_t> in, ArrayRef<int64_t> out, ArrayRef<int64_t> starts,
                                 ArrayRef<int64_t> steps) {
  if (in.size() != out.size() || starts.size() != in.size() || steps.size() != in.size())
    return op->emitOpError("starts and steps need one entry per dimension of rank ") << in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (steps[d] == 0)
      return op->emitOpError("steps must be non-zero");
    int64_t last = starts[d] + (out[d] - 1) * steps[d];
    if (out[d] > 0 && (starts[d] < 0 || starts[d] >= in[d] || last < 0 || last >= in[d]))
      return op->emitOpError("dimension ") << d << " reads outside [0, " << in[d] << ")";
  }
  return success();
}

LogicalResult SliceOp::verify() {
  if (elementOf(getInput()) != elementOf(getResult()))
    return emitOpError("element types differ");
  return verifySlice(*this, shapeOf(getInput()), shapeOf(getResult()), getStarts(), getSteps());
}

/// The concatenation of constant operands along `axis`, or null where one is
/// not a dense constant, its elements are not whole bytes (booleans), or
/// the result is over 2^22 elements (a step's work is not worth the plan's
/// bytes beyond that). GPT-OSS's rotation in halves repeats constant
/// half-width tables, which would otherwise be concatenated every step.
static Attribute concatConstants(RankedTensorType type, ArrayRef<Attribute> operands, int64_t axis) {
  constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;
  if (type.getNumElements() > kMaxFoldedElements || !type.getElementType().isIntOrFloat() ||
      type.getElementTypeBitWidth() % 8 != 0)
    return {};
  const int64_t elementBytes = type.getElementTypeBitWidth() / 8;
  int64_t outer = 1, inner = elementBytes;
  for (int64_t d = 0; d < axis; ++d)
    outer *= type.getDimSize(d);
  for (int64_t d = axis + 1; d < type.getRank(); ++d)
    inner *= type.getDimSize(d);
  SmallVector<DenseElementsAttr> inputs;
  for (Attribute operand : operands) {
    auto elements = dyn_cast_if_present<DenseElementsAttr>(operand);
    if (!elements || elements.getElementType() != type.getElementType())
      return {};
    inputs.push_back(elements);
  }
  std::vector<char> data;
  data.reserve(type.getNumElements() * elementBytes);
  for (int64_t o = 0; o < outer; ++o)
    for (DenseElementsAttr input : inputs) {
      const int64_t block = input.getType().getDimSize(axis) * inner;
      ArrayRef<char> raw = input.getRawData();
      if (input.isSplat()) // one element, repeated
        for (int64_t b = 0; b < block; b += elementBytes)
          data.insert(data.end(), raw.begin(), raw.begin() + elementBytes);
      else
        data.insert(data.end(), raw.begin() + o * block, raw.begin() + (o + 1) * block);
    }
  return DenseElementsAttr::getFromRawBuffer(type, data);
}

// A concat whose inputs but one hold no elements is that input: Phi-3's
// partial rotation with every column rotated passes an empty slice on. A
// concat of constants is a constant.
OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (Attribute folded = concatConstants(cast<RankedTensorType>(getType()), adaptor.getInputs(), getAxis()))
    return folded;
  Value kept;
  for (Value input : getInputs()) {
    if (cast<RankedTensorType>(input.getType()).getNumElements() == 0)
      continue;
    if (kept)
      return {};
    kept = input;
  }
  if (kept && kept.getType() == getType())
    return kept;
  return {};
}

// A permutation that keeps every axis in place is the input (the dynamo
// exporter writes them for MoE experts' weights), and a transpose of a
// transpose is one transpose by the composed permutation.
OpFoldResult TransposeOp::fold(FoldAdaptor) {
  if (isIdentityPermutation(getPerm()) && getInput().getType() == getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    // Result axis i is this op's input axis perm[i], the inner input's
    // axis inner.perm[perm[i]].
    SmallVector<int64_t> composed = applyPermutation(inner.getPerm(), getPerm());
    getInputMutable().assign(inner.getInput());
    setPerm(composed);
    return getResult();
  }
  return {};
}

// The input's shape from every start at 0: the verifier's bounds leave only
// steps of 1 (or any step over a dimension of 1), so every element in place.
OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType() && llvm::all_of(getStarts(), [](int64_t start) { return start == 0; }))
    return getInput();
  return {};
}

LogicalResult SliceGradOp::verify() {
  return verifySlice(*this, shapeOf(getResult()), shapeOf(getGrad()), getStarts(), getSteps());
}

/// The shape of gathering `indices` from `data` along `axis`.
static FailureOr<SmallVector<int64_t>> gatherShape(ArrayRef<int64_t> data, ArrayRef<int64_t> indices, int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(data.size()))
    return failure();
  SmallVector<int64_t> shape(data.begin(), data.begin() + axis);
  shape.append(indices.begin(), indices.end());
  shape.append(data.begin() + axis + 1, data.end());
  return shape;
}

LogicalResult GatherOp::verify() {
  FailureOr<SmallVector<int64_t>> expected = gatherShape(shapeOf(getData()), shapeOf(getIndices()), getAxis());
  if (failed(expected))
    return emitOpError("axis ") << getAxis() << " is out of range";
  if (shapeOf(getResult()) != ArrayRef<int64_t>(*expected) || elementOf(getData()) != elementOf(getResult()))
    return emitOpError("result should be ") << shapeString(*expected) << " of the data's element type";
  if (std::optional<int64_t> padding = getPaddingIndex()) {
    if (getAxis() != 0)
      return emitOpError("padding_index needs axis 0");
    if (*padding < 0 || *padding >= shapeOf(getData())[0])
      return emitOpError("padding_index ") << *padding << " is not a row of the data";
  }
  return success();
}

LogicalResult GatherGradOp::verify() {
  FailureOr<SmallVector<int64_t>> expected = gatherShape(shapeOf(getResult()), shapeOf(getIndices()), getAxis());
  if (failed(expected) || shapeOf(getGrad()) != ArrayRef<int64_t>(*expected))
    return emitOpError("grad must have the shape of the gather's result");
  return success();
}

LogicalResult SelectOp::verify() {
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(shapeOf(getLhs()), shapeOf(getRhs()));
  if (succeeded(shape))
    shape = broadcastShapes(*shape, shapeOf(getCondition()));
  if (failed(shape) || shapeOf(getResult()) != ArrayRef<int64_t>(*shape))
    return emitOpError("condition, lhs and rhs must broadcast to the result's shape");
  return success();
}

LogicalResult CompareOp::verify() {
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(shapeOf(getLhs()), shapeOf(getRhs()));
  if (failed(shape) || shapeOf(getResult()) != ArrayRef<int64_t>(*shape))
    return emitOpError("lhs and rhs must broadcast to the result's shape");
  if (cast<RankedTensorType>(getLhs().getType()).getElementType() !=
      cast<RankedTensorType>(getRhs().getType()).getElementType())
    return emitOpError("lhs and rhs must have one element type");
  return success();
}

LogicalResult IsNanOp::verify() {
  if (shapeOf(getResult()) != shapeOf(getInput()))
    return emitOpError("result must have the input's shape");
  return success();
}

LogicalResult OneHotOp::verify() {
  ArrayRef<int64_t> labels = shapeOf(getLabels()), result = shapeOf(getResult());
  if (result.size() != labels.size() + 1 || result.drop_back() != labels)
    return emitOpError("result must be the labels' shape with the class count appended");
  if (result.back() < 1)
    return emitOpError("needs at least one class, got ") << result.back();
  return success();
}

static LogicalResult verifyArgReduce(Operation *op, Value input, Value result, int64_t axis) {
  ArrayRef<int64_t> shape = shapeOf(input);
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return op->emitOpError("axis ") << axis << " is outside [0, " << shape.size() << ")";
  if (shape[axis] < 1)
    return op->emitOpError("axis ") << axis << " is empty";
  SmallVector<int64_t> expected(shape);
  expected[axis] = 1;
  if (shapeOf(result) != ArrayRef<int64_t>(expected))
    return op->emitOpError("result must have the input's shape with axis ") << axis << " of size 1";
  return success();
}
LogicalResult ArgMaxOp::verify() { return verifyArgReduce(*this, getInput(), getResult(), getAxis()); }
LogicalResult ArgMinOp::verify() { return verifyArgReduce(*this, getInput(), getResult(), getAxis()); }

static LogicalResult verifyDropout(Operation *op, double ratio) {
  if (!(ratio >= 0 && ratio < 1)) // NaN fails both
    return op->emitOpError("ratio must be in [0, 1), got ") << ratio;
  return success();
}
LogicalResult DropoutOp::verify() { return verifyDropout(*this, getRatio().convertToDouble()); }
LogicalResult DropoutGradOp::verify() { return verifyDropout(*this, getRatio().convertToDouble()); }

LogicalResult CastOp::verify() {
  if (shapeOf(getInput()) != shapeOf(getResult()))
    return emitOpError("shapes differ");
  for (Type t : {elementOf(getInput()), elementOf(getResult())})
    if (!t.isF32() && !t.isBF16() && !t.isF16() && !t.isInteger(64))
      return emitOpError("casts between f32, bf16, f16 and i64, got ") << t;
  if (getToBool() && !(elementOf(getInput()).isInteger(64) && elementOf(getResult()).isInteger(64)))
    return emitOpError("to_bool casts i64 to i64");
  return success();
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops
//===----------------------------------------------------------------------===//

static LogicalResult verifyBroadcastBinary(Operation *op) {
  if (failed(verifyStaticShape(op)))
    return failure();
  Type element = elementOf(op->getResult(0));
  for (Value operand : op->getOperands())
    if (elementOf(operand) != element)
      return op->emitOpError("operands and result must share one element type, got ") << elementOf(operand)
                                                                                       << " and " << element;
  ArrayRef<int64_t> lhs = shapeOf(op->getOperand(0)), rhs = shapeOf(op->getOperand(1));
  FailureOr<SmallVector<int64_t>> expected = broadcastShapes(lhs, rhs);
  if (failed(expected))
    return op->emitOpError("operand shapes ") << shapeString(lhs) << " and " << shapeString(rhs)
                                             << " do not broadcast";
  ArrayRef<int64_t> result = shapeOf(op->getResult(0));
  if (result != ArrayRef<int64_t>(*expected))
    return op->emitOpError("result shape ") << shapeString(result) << " should be " << shapeString(*expected);
  return success();
}

LogicalResult AddOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult SubOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MulOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult DivOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult PowOp::verify() { return verifyBroadcastBinary(*this); }

//===----------------------------------------------------------------------===//
// ReshapeOp, TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (failed(verifyStaticShape(*this)))
    return failure();
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getType());
  if (input.getElementType() != result.getElementType())
    return emitOpError("element types differ: ") << input.getElementType() << " vs " << result.getElementType();
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("element counts differ: ") << input.getNumElements() << " vs " << result.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto elements = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return elements.reshape(cast<ShapedType>(getType()));
  return {};
}

LogicalResult TransposeOp::verify() {
  if (failed(verifyStaticShape(*this)))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput()), result = shapeOf(getResult());
  ArrayRef<int64_t> perm = getPerm();
  if (perm.size() != input.size())
    return emitOpError("perm has ") << perm.size() << " entries for rank " << input.size();
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p])
      return emitOpError("perm is not a permutation of [0, ") << perm.size() << ")";
    seen[p] = true;
    expected.push_back(input[p]);
  }
  if (result != ArrayRef<int64_t>(expected))
    return emitOpError("result shape ") << shapeString(result) << " should be " << shapeString(expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax family and losses
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this, getAxis(), shapeOf(getInput()).size()); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this, getAxis(), shapeOf(getInput()).size()); }

static LogicalResult verifyCrossEntropy(Operation *op, Value logits, Value labels, std::optional<int64_t> classes) {
  ArrayRef<int64_t> logitsShape = shapeOf(logits), labelsShape = shapeOf(labels);
  if (logitsShape.size() != 2)
    return op->emitOpError("logits must be [N, C], got ") << shapeString(logitsShape);
  if (classes && (*classes < 1 || *classes > logitsShape[1]))
    return op->emitOpError("classes must be in [1, ") << logitsShape[1] << "], got " << *classes;
  if (labelsShape.size() != 1 || labelsShape[0] != logitsShape[0])
    return op->emitOpError("labels must be [") << logitsShape[0] << "], got " << shapeString(labelsShape);
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  return verifyCrossEntropy(*this, getLogits(), getLabels(), getClasses());
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  if (getResult().getType() != getLogits().getType())
    return emitOpError("result type must equal the logits type");
  return verifyCrossEntropy(*this, getLogits(), getLabels(), getClasses());
}

LogicalResult MseLossOp::verify() {
  if (getPrediction().getType() != getTarget().getType())
    return emitOpError("prediction and target types differ: ") << getPrediction().getType() << " vs "
                                                               << getTarget().getType();
  return success();
}

LogicalResult MseLossGradOp::verify() {
  if (getPrediction().getType() != getTarget().getType() || getResult().getType() != getPrediction().getType())
    return emitOpError("prediction, target and result types must be equal");
  return success();
}

//===----------------------------------------------------------------------===//
// SumToOp
//===----------------------------------------------------------------------===//

/// Shared by layer_norm, rms_norm and their gradients: `scale` (and `bias`)
/// cover the normalised dimensions, the saved statistics keep the others.
static LogicalResult verifyNormOperands(Operation *op, Value input, int64_t axis, ArrayRef<Value> affine,
                                        ArrayRef<Value> statistics) {
  if (failed(verifyStaticShape(op)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(input);
  int64_t rank = shape.size();
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ") << axis << " is out of range [0, " << rank << ")";
  ArrayRef<int64_t> normalized = shape.drop_front(axis);
  for (Value v : affine)
    if (shapeOf(v) != normalized)
      return op->emitOpError("scale and bias must have the normalised shape ")
             << shapeString(normalized) << ", got " << shapeString(shapeOf(v));
  SmallVector<int64_t> kept(shape.begin(), shape.end());
  std::fill(kept.begin() + axis, kept.end(), 1);
  for (Value v : statistics)
    if (shapeOf(v) != ArrayRef<int64_t>(kept))
      return op->emitOpError("per-slice statistics must have shape ")
             << shapeString(kept) << ", got " << shapeString(shapeOf(v));
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError("result type must equal the input type");
  if (!isNonNegativeFinite(getEpsilon()))
    return emitOpError("epsilon must be a finite number >= 0, got ") << getEpsilon().convertToDouble();
  if (getBias().getType() != getScale().getType())
    return emitOpError("scale and bias must have one type");
  return verifyNormOperands(*this, getInput(), getAxis(), {getScale(), getBias()}, {getMean(), getInvStdDev()});
}

LogicalResult LayerNormGradOp::verify() {
  if (getDy().getType() != getInput().getType() || getDinput().getType() != getInput().getType())
    return emitOpError("dy and dinput types must equal the input type");
  if (getDscale().getType() != getScale().getType() || getDbias().getType() != getScale().getType())
    return emitOpError("dscale and dbias types must equal the scale type");
  return verifyNormOperands(*this, getInput(), getAxis(), {getScale()}, {getMean(), getInvStdDev()});
}

LogicalResult RmsNormOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError("result type must equal the input type");
  if (!isNonNegativeFinite(getEpsilon()))
    return emitOpError("epsilon must be a finite number >= 0, got ") << getEpsilon().convertToDouble();
  return verifyNormOperands(*this, getInput(), getAxis(), {getScale()}, {getInvRms()});
}

LogicalResult RmsNormGradOp::verify() {
  if (getDy().getType() != getInput().getType() || getDinput().getType() != getInput().getType())
    return emitOpError("dy and dinput types must equal the input type");
  if (getDscale().getType() != getScale().getType())
    return emitOpError("dscale type must equal the scale type");
  return verifyNormOperands(*this, getInput(), getAxis(), {getScale()}, {getInvRms()});
}

/// rotary and rotary_grad: an input whose last dimension D is even, and cos
/// and sin of its rank with last dimension D, broadcast along the others.
static LogicalResult verifyRotary(Operation *op, Value input, Value cos, Value sin, Value result) {
  if (failed(verifyStaticShape(op)))
    return failure();
  if (result.getType() != input.getType())
    return op->emitOpError("result type must equal the input type");
  ArrayRef<int64_t> shape = shapeOf(input);
  if (shape.empty() || shape.back() % 2 != 0)
    return op->emitOpError("needs an input whose last dimension is even, got ") << shapeString(shape);
  for (auto [name, table] : {std::pair<const char *, Value>{"cos", cos}, {"sin", sin}}) {
    ArrayRef<int64_t> tableShape = shapeOf(table);
    bool fits = tableShape.size() == shape.size() && tableShape.back() == shape.back();
    for (size_t i = 0; fits && i + 1 < shape.size(); ++i)
      fits = tableShape[i] == 1 || tableShape[i] == shape[i];
    if (!fits)
      return op->emitOpError(name) << " shape " << shapeString(tableShape) << " must have the input's rank and last "
                                   << "dimension and broadcast to " << shapeString(shape);
  }
  return success();
}

LogicalResult RotaryOp::verify() { return verifyRotary(*this, getInput(), getCos(), getSin(), getResult()); }

LogicalResult RotaryGradOp::verify() { return verifyRotary(*this, getDy(), getCos(), getSin(), getResult()); }

LogicalResult MaskedSoftmaxOp::verify() {
  if (failed(verifyStaticShape(*this)))
    return failure();
  if (getResult().getType() != getInput().getType())
    return emitOpError("result type must equal the input type");
  ArrayRef<int64_t> shape = shapeOf(getInput());
  if (shape.empty())
    return emitOpError("needs an input of rank 1 or more");
  FailureOr<SmallVector<int64_t>> joined = broadcastShapes(shapeOf(getMask()), shape);
  if (failed(joined) || ArrayRef<int64_t>(*joined) != shape)
    return emitOpError("mask shape ") << shapeString(shapeOf(getMask())) << " does not broadcast to the input shape "
                                      << shapeString(shape);
  return success();
}

/// The shapes attention's operands must have: equal leading axes, but for
/// key and value heads (axis rank - 3) that divide the query's, query
/// [Tq, D], key [Tk, D] (or [D, Tk]), value [Tk, Dv], a mask broadcasting to
/// [Tq, Tk]; `out` [Tq, Dv] and `logsumexp` [Tq].
/// The mask broadcasts to the scores' shape, without widening it.
static LogicalResult verifyMaskFitsScores(Operation *op, Value mask, ArrayRef<int64_t> scores) {
  FailureOr<SmallVector<int64_t>> joined = broadcastShapes(shapeOf(mask), scores);
  if (failed(joined) || ArrayRef<int64_t>(*joined) != scores)
    return op->emitOpError("mask ") << shapeString(shapeOf(mask)) << " does not broadcast to the scores "
                                    << shapeString(scores);
  return success();
}

/// An attention operand's shape as [..., H, T, D]: a token-major one
/// ([..., T, H, D]) with its heads and sequence axes swapped back.
static SmallVector<int64_t> headMajorShape(Value operand, bool tokenMajor) {
  SmallVector<int64_t> shape(shapeOf(operand));
  if (tokenMajor && shape.size() >= 3)
    std::swap(shape[shape.size() - 3], shape[shape.size() - 2]);
  return shape;
}

static LogicalResult verifyAttention(Operation *op, Value query, Value key, Value value, Value mask, Value out,
                                     Value logsumexp, bool keyTransposed, std::optional<ArrayRef<bool>> tokenMajor) {
  bool layouts[4] = {false, false, false, false}; // query, key, value, out
  if (tokenMajor) {
    if (tokenMajor->size() != 4)
      return op->emitOpError("token_major needs 4 flags (query, key, value, out), not ") << tokenMajor->size();
    llvm::copy(*tokenMajor, layouts);
    if (llvm::is_contained(*tokenMajor, true) && shapeOf(query).size() < 3)
      return op->emitOpError("token-major operands need a heads axis (rank 3 or more)");
    if (keyTransposed && layouts[1])
      return op->emitOpError("a transposed key is not token-major");
  }
  SmallVector<int64_t> qShape = headMajorShape(query, layouts[0]), kShape = headMajorShape(key, layouts[1]),
                       vShape = headMajorShape(value, layouts[2]);
  ArrayRef<int64_t> q = qShape, k = kShape, v = vShape;
  size_t rank = q.size();
  if (rank < 2 || k.size() != rank || v.size() != rank)
    return op->emitOpError("query, key and value need one rank of 2 or more");
  ArrayRef<int64_t> batch = q.drop_back(2);
  if (rank < 3) {
    if (k.drop_back(2) != batch || v.drop_back(2) != batch)
      return op->emitOpError("query, key and value need the same leading axes");
  } else {
    const int64_t heads = q[rank - 3], keyHeads = k[rank - 3];
    if (k.drop_back(3) != q.drop_back(3) || v.drop_back(3) != q.drop_back(3) || v[rank - 3] != keyHeads)
      return op->emitOpError("query, key and value need the same leading axes but for grouped heads");
    if (keyHeads <= 0 || heads % keyHeads != 0)
      return op->emitOpError("key and value heads (") << keyHeads << ") must divide the query's (" << heads << ")";
  }
  int64_t tq = q[rank - 2], d = q[rank - 1];
  int64_t tk = keyTransposed ? k[rank - 1] : k[rank - 2], kd = keyTransposed ? k[rank - 2] : k[rank - 1];
  if (kd != d || v[rank - 2] != tk)
    return op->emitOpError("key ") << shapeString(k) << " and value " << shapeString(v)
                                   << " do not fit query " << shapeString(q);
  SmallVector<int64_t> scores(batch.begin(), batch.end());
  scores.append({tq, tk});
  if (failed(verifyMaskFitsScores(op, mask, scores)))
    return failure();
  SmallVector<int64_t> outShape(batch.begin(), batch.end());
  outShape.append({tq, v[rank - 1]});
  SmallVector<int64_t> lseShape(batch.begin(), batch.end());
  lseShape.push_back(tq);
  if (layouts[3])
    std::swap(outShape[rank - 3], outShape[rank - 2]);
  if (shapeOf(out) != ArrayRef<int64_t>(outShape) || shapeOf(logsumexp) != ArrayRef<int64_t>(lseShape))
    return op->emitOpError("out must be ") << shapeString(outShape) << " and logsumexp " << shapeString(lseShape);
  return success();
}

/// A score cap is 0 (none) or a positive finite number.
static LogicalResult verifySoftcap(Operation *op, double softcap) {
  if (!(softcap >= 0) || std::isinf(softcap))
    return op->emitOpError("softcap must be 0 (none) or positive and finite, not ") << softcap;
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifySoftcap(*this, getSoftcap().convertToDouble())) ||
      failed(verifyAttention(*this, getQuery(), getKey(), getValue(), getMask(), getOut(), getLogsumexp(),
                             getKeyTransposed(), getTokenMajor())))
    return failure();
  if (Value sinks = getSinks()) {
    // One sink per query head: logsumexp is [..., H, Tq] in every layout.
    ArrayRef<int64_t> lse = shapeOf(getLogsumexp());
    const int64_t heads = lse.size() >= 2 ? lse[lse.size() - 2] : 1;
    if (shapeOf(sinks) != ArrayRef<int64_t>{heads})
      return emitOpError("sinks must be [") << heads << "], one per query head, not " << shapeString(shapeOf(sinks));
  }
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifySoftcap(*this, getSoftcap().convertToDouble())))
    return failure();
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(), getMask(), getOut(), getLogsumexp(),
                             getKeyTransposed(), getTokenMajor())))
    return failure();
  if (getDout().getType() != getOut().getType() || getDquery().getType() != getQuery().getType() ||
      getDkey().getType() != getKey().getType() || getDvalue().getType() != getValue().getType())
    return emitOpError("gradients must have the types of dout's and the operands'");
  return success();
}

static LogicalResult verifyPackedAttention(Operation *op, Value qkv, Value mask, Value out, Value logsumexp,
                                           int64_t heads) {
  ArrayRef<int64_t> packed = shapeOf(qkv);
  if (packed.size() < 2)
    return op->emitOpError("qkv needs a rank of 2 or more, not ") << packed.size();
  if (heads <= 0 || packed.back() % (3 * heads) != 0)
    return op->emitOpError("qkv's last axis ") << packed.back() << " is not 3 x " << heads << " heads of one size";
  ArrayRef<int64_t> batch = packed.drop_back(2);
  const int64_t t = packed[packed.size() - 2];
  SmallVector<int64_t> scores(batch.begin(), batch.end());
  scores.append({heads, t, t});
  if (failed(verifyMaskFitsScores(op, mask, scores)))
    return failure();
  SmallVector<int64_t> outShape(batch.begin(), batch.end());
  outShape.append({t, packed.back() / 3});
  SmallVector<int64_t> lseShape(batch.begin(), batch.end());
  lseShape.append({heads, t});
  if (shapeOf(out) != ArrayRef<int64_t>(outShape) || shapeOf(logsumexp) != ArrayRef<int64_t>(lseShape))
    return op->emitOpError("out must be ") << shapeString(outShape) << " and logsumexp " << shapeString(lseShape);
  return success();
}

LogicalResult PackedAttentionOp::verify() {
  if (failed(verifySoftcap(*this, getSoftcap().convertToDouble())))
    return failure();
  return verifyPackedAttention(*this, getQkv(), getMask(), getOut(), getLogsumexp(), getHeads());
}

LogicalResult PackedAttentionGradOp::verify() {
  if (failed(verifySoftcap(*this, getSoftcap().convertToDouble())))
    return failure();
  if (failed(
          verifyPackedAttention(*this, getQkv(), getMask(), getOut(), getLogsumexp(), getHeads())))
    return failure();
  if (getDout().getType() != getOut().getType() || getDqkv().getType() != getQkv().getType())
    return emitOpError("dout must have out's type and dqkv qkv's");
  return success();
}

LogicalResult SumToOp::verify() {
  if (failed(verifyStaticShape(*this)))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput()), result = shapeOf(getResult());
  FailureOr<SmallVector<int64_t>> joined = broadcastShapes(result, input);
  if (failed(joined) || ArrayRef<int64_t>(*joined) != input)
    return emitOpError("result shape ") << shapeString(result) << " does not broadcast to the input shape "
                                        << shapeString(input);
  return success();
}

OpFoldResult SumToOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

namespace {
/// The learning-rate schedule attributes of an optimizer update.
LogicalResult verifySchedule(Operation *op, std::optional<LrSchedule> schedule, std::optional<int64_t> warmup,
                             std::optional<int64_t> total, std::optional<APFloat> minLr) {
  const LrSchedule kind = schedule.value_or(LrSchedule::constant);
  if (warmup.value_or(0) < 0 || (minLr && !isNonNegativeFinite(*minLr)))
    return op->emitOpError("warmup_steps and min_lr must be non-negative");
  if (kind != LrSchedule::constant && total.value_or(0) <= warmup.value_or(0))
    return op->emitOpError("a ") << stringifyLrSchedule(kind) << " schedule needs total_steps above warmup_steps";
  return success();
}
} // namespace

LogicalResult SgdUpdateOp::verify() {
  if (failed(verifySchedule(*this, getLrSchedule(), getWarmupSteps(), getTotalSteps(), getMinLr())))
    return failure();
  Type type = getParam().getType();
  if (getGrad().getType() != type || getNewParam().getType() != type)
    return emitOpError("param, grad and new_param types must be equal");
  // As torch's SGD checks lr, momentum and weight_decay; dampening only
  // needs to be a number.
  if (!isNonNegativeFinite(getLr()) || !isNonNegativeFinite(getMomentum()) ||
      !isNonNegativeFinite(getWeightDecay()) || !std::isfinite(getDampening().convertToDouble()))
    return emitOpError("lr, momentum and weight_decay must be finite numbers >= 0, and dampening finite");
  size_t expectedState = getMomentum().convertToDouble() != 0.0 ? 1 : 0;
  if (getState().size() != expectedState)
    return emitOpError("expects ") << expectedState << " state operand(s) for momentum " << getMomentum().convertToDouble()
                                   << ", got " << getState().size();
  if (getNewState().size() != getState().size())
    return emitOpError("expects one new_state result per state operand");
  for (Value v : llvm::concat<Value>(getState(), getNewState()))
    if (v.getType() != type)
      return emitOpError("state types must equal the param type");
  return success();
}

LogicalResult AdamwUpdateOp::verify() {
  if (failed(verifySchedule(*this, getLrSchedule(), getWarmupSteps(), getTotalSteps(), getMinLr())))
    return failure();
  Type type = getParam().getType();
  for (Value v : {getGrad(), getExpAvg(), getExpAvgSq(), getNewParam(), getNewExpAvg(), getNewExpAvgSq()})
    if (v.getType() != type)
      return emitOpError("all tensor operands and results must have the param type ") << type;
  double beta1 = getBeta1().convertToDouble(), beta2 = getBeta2().convertToDouble();
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) // NaN fails both
    return emitOpError("betas must lie in [0, 1), got ") << beta1 << ", " << beta2;
  if (!isNonNegativeFinite(getLr()) || !isNonNegativeFinite(getEps()) || !isNonNegativeFinite(getWeightDecay()))
    return emitOpError("lr, eps and weight_decay must be finite numbers >= 0");
  return success();
}

static bool isOneElementVector(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 1 && tensor.getDimSize(0) == 1;
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (!isOneElementVector(getResult().getType()))
    return emitOpError("result must be tensor<1xf32>, got ") << getResult().getType();
  return success();
}

LogicalResult ClipCoefficientOp::verify() {
  for (Value v : {getSumSquares(), getScale(), getNorm()})
    if (!isOneElementVector(v.getType()))
      return emitOpError("operand and results must be tensor<1xf32>, got ") << v.getType();
  if (!(getMaxNorm().convertToDouble() > 0))
    return emitOpError("max_norm must be positive, got ") << getMaxNorm().convertToDouble();
  return success();
}

#define GET_OP_CLASSES
#include "fsdpc/Dialect/Graph/IR/GraphOps.cpp.inc"
