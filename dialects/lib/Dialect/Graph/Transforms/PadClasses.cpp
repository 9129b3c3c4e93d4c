//===- PadClasses.cpp - graph-pad-classes ---------------------------------===//
//
// Pads a 16-bit cross entropy's classes, and the weight of the matmul that
// makes its logits, to a multiple of 8, so that the logits GEMMs run on the
// tensor cores' fast kernels; the loss is told the real count.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHPADCLASSES
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc::graph;

namespace {

/// `type` with its last dimension `last`.
RankedTensorType withLastDim(Type type, int64_t last) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape.back() = last;
  return RankedTensorType::get(shape, ranked.getElementType());
}

/// The matmul whose result reaches `logits` through single-use reshapes
/// that keep the last dimension (the classes), and those reshapes, from
/// the matmul's side; or null. The matmul's weight must be 2-D and its
/// result read only on the way to the loss.
MatmulOp producerOf(Value logits, SmallVectorImpl<ReshapeOp> &reshapes) {
  const int64_t classes = cast<RankedTensorType>(logits.getType()).getShape().back();
  Value value = logits;
  while (auto reshape = value.getDefiningOp<ReshapeOp>()) {
    if (!reshape.getResult().hasOneUse() ||
        cast<RankedTensorType>(reshape.getInput().getType()).getShape().back() != classes)
      return {};
    reshapes.insert(reshapes.begin(), reshape);
    value = reshape.getInput();
  }
  auto matmul = value.getDefiningOp<MatmulOp>();
  if (!matmul || !matmul.getResult().hasOneUse() || matmul.getTransposeA() ||
      cast<RankedTensorType>(matmul.getRhs().getType()).getRank() != 2)
    return {};
  return matmul;
}

struct GraphPadClassesPass : public fsdpc::graph::impl::GraphPadClassesBase<GraphPadClassesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (multiple < 1) {
      getOperation().emitError() << "graph-pad-classes: multiple must be positive, got " << multiple;
      return signalPassFailure();
    }
    func::FuncOp train = getOperation().lookupSymbol<func::FuncOp>(kTrainStepFunc);
    if (!train)
      return; // nothing to train: nothing to pad
    SmallVector<SoftmaxCrossEntropyOp> losses;
    train.walk([&](SoftmaxCrossEntropyOp loss) { losses.push_back(loss); });
    for (SoftmaxCrossEntropyOp loss : losses)
      pad(loss);
  }

  void pad(SoftmaxCrossEntropyOp loss) {
    auto logitsType = cast<RankedTensorType>(loss.getLogits().getType());
    const int64_t classes = logitsType.getShape().back();
    // Only 16-bit logits: their GEMMs are the tensor cores'.
    if (loss.getClasses() || logitsType.getElementType().getIntOrFloatBitWidth() != 16 || classes % multiple == 0)
      return;
    SmallVector<ReshapeOp> reshapes;
    MatmulOp matmul = producerOf(loss.getLogits(), reshapes);
    if (!matmul)
      return;
    const int64_t padded = (classes + multiple - 1) / multiple * multiple;
    // The weight is [C, K] (transpose_b) or [K, C]: zero rows or columns.
    Value weight = matmul.getRhs();
    auto weightType = cast<RankedTensorType>(weight.getType());
    const int64_t axis = matmul.getTransposeB() ? 0 : 1;
    SmallVector<int64_t> zerosShape(weightType.getShape());
    zerosShape[axis] = padded - classes;
    auto zerosType = RankedTensorType::get(zerosShape, weightType.getElementType());
    SmallVector<int64_t> paddedShape(weightType.getShape());
    paddedShape[axis] = padded;

    OpBuilder builder(matmul);
    Location loc = matmul.getLoc();
    Value zeros = ConstantOp::create(builder, loc, zerosType, cast<DenseElementsAttr>(builder.getZeroAttr(zerosType)));
    Value paddedWeight =
        ConcatOp::create(builder, loc, RankedTensorType::get(paddedShape, weightType.getElementType()),
                         ValueRange{weight, zeros}, builder.getI64IntegerAttr(axis));
    auto paddedMatmul = MatmulOp::create(builder, loc, withLastDim(matmul.getType(), padded), matmul.getLhs(),
                                         paddedWeight, matmul.getTransposeAAttr(), matmul.getTransposeBAttr());
    paddedMatmul->setDiscardableAttrs(matmul->getDiscardableAttrDictionary());
    Value logits = paddedMatmul.getResult();
    for (ReshapeOp reshape : reshapes) {
      builder.setInsertionPoint(reshape);
      logits = ReshapeOp::create(builder, reshape.getLoc(), withLastDim(reshape.getType(), padded), logits);
    }
    builder.setInsertionPoint(loss);
    auto paddedLoss =
        SoftmaxCrossEntropyOp::create(builder, loss.getLoc(), loss.getType(), logits, loss.getLabels(),
                                      loss.getReductionAttr(), loss.getIgnoreIndexAttr(),
                                      builder.getI64IntegerAttr(classes));
    paddedLoss->setDiscardableAttrs(loss->getDiscardableAttrDictionary());
    loss.getResult().replaceAllUsesWith(paddedLoss.getResult());
    loss.erase();
    for (auto it = reshapes.rbegin(); it != reshapes.rend(); ++it)
      it->erase();
    matmul.erase();
  }
};

} // namespace
