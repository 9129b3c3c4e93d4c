//===- AppendLoss.cpp - graph-append-loss ---------------------------------===//
//
// Builds @train_step from the imported @forward by appending the loss that
// torch users would compute in their training loop.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHAPPENDLOSS
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc::graph;

namespace {

/// The label F.cross_entropy skips by default (ignore_index=-100).
constexpr int64_t kTorchIgnoreIndex = -100;

struct GraphAppendLossPass : public fsdpc::graph::impl::GraphAppendLossBase<GraphAppendLossPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp forward = lookupFunction(module, kForwardFunc, "graph-append-loss");
    if (!forward)
      return signalPassFailure();
    if (forward.getNumResults() == 0) {
      forward.emitError("graph-append-loss: the model has no outputs");
      return signalPassFailure();
    }

    // Decide which loss and which model output it reads.
    std::string kind = loss;
    unsigned outputIndex = 0;
    unsigned numOutputs = 0; // the model's outputs; buffer updates follow
    while (numOutputs < forward.getNumResults() && !isBufferUpdate(forward, numOutputs))
      ++numOutputs;
    if (kind == "auto") {
      auto type = cast<RankedTensorType>(forward.getResultTypes()[0]);
      kind = numOutputs == 1 && type.getRank() == 0 ? "output" : "cross_entropy";
    } else if (StringRef(kind).starts_with("output:")) {
      StringRef name = StringRef(kind).drop_front(strlen("output:"));
      bool found = false;
      for (unsigned i = 0; i < numOutputs; ++i) {
        auto attr = forward.getResultAttrOfType<StringAttr>(i, kOutputAttr);
        if (attr && attr.getValue() == name) {
          outputIndex = i;
          found = true;
        }
      }
      if (!found) {
        forward.emitError() << "graph-append-loss: --loss output:" << name << " names no model output";
        return signalPassFailure();
      }
      kind = "output";
    } else if (kind != "cross_entropy" && kind != "mse") {
      module.emitError() << "graph-append-loss: unknown loss '" << kind
                         << "' (expected cross_entropy, mse, output:NAME or auto)";
      return signalPassFailure();
    }

    func::FuncOp train = forward.clone();
    train.setSymName(kTrainStepFunc);
    module.insert(std::next(Block::iterator(forward)), train);
    forward.erase();

    MLIRContext *ctx = &getContext();
    Value output = train.getBody().front().getTerminator()->getOperand(outputIndex);
    if (Operation *producer = output.getDefiningOp())
      if (auto name = train.getResultAttrOfType<StringAttr>(outputIndex, kOutputAttr); name && kind != "output")
        producer->setAttr(kPredictionAttr, name);
    auto outputType = cast<RankedTensorType>(output.getType());
    OpBuilder builder(train.getBody().front().getTerminator());
    Location loc = NameLoc::get(StringAttr::get(ctx, "loss"));
    auto scalarType = RankedTensorType::get({}, builder.getF32Type());
    auto labelsAttrs = builder.getDictionaryAttr(builder.getNamedAttr(kInputAttr, builder.getStringAttr("labels")));
    Value lossValue;
    int64_t numClasses = 0;

    if (kind == "output") {
      if (outputType.getRank() != 0 || !outputType.getElementType().isF32()) {
        train.emitError() << "graph-append-loss: the loss output must be a scalar f32, got " << outputType;
        return signalPassFailure();
      }
      lossValue = output;
    } else if (kind == "cross_entropy") {
      if (outputType.getRank() != 2 && outputType.getRank() != 3) {
        train.emitError() << "graph-append-loss: cross_entropy needs logits [B, C] or [B, T, C], the model output is "
                          << outputType << "; pass --loss mse or --loss output:NAME";
        return signalPassFailure();
      }
      ArrayRef<int64_t> shape = outputType.getShape();
      numClasses = shape.back();
      SmallVector<int64_t> labelShape(shape.drop_back());
      auto labelsType = RankedTensorType::get(labelShape, builder.getI64Type());
      Value labels = appendArgument(train, labelsType, labelsAttrs);
      Value logits = output;
      if (outputType.getRank() == 3) {
        int64_t rows = shape[0] * shape[1];
        logits = ReshapeOp::create(builder, loc, RankedTensorType::get({rows, numClasses}, builder.getF32Type()), logits);
        labels = ReshapeOp::create(builder, loc, RankedTensorType::get({rows}, builder.getI64Type()), labels);
      }
      // torch's F.cross_entropy: the mean over the labels that are not
      // -100, the value Hugging Face's collators give padding positions
      // and the tokens a masked LM does not predict.
      auto mean = LossReductionAttr::get(builder.getContext(), LossReduction::mean);
      lossValue = SoftmaxCrossEntropyOp::create(builder, loc, scalarType, logits, labels, mean,
                                                builder.getI64IntegerAttr(kTorchIgnoreIndex), IntegerAttr());
    } else {
      Value labels = appendArgument(train, outputType, labelsAttrs);
      lossValue = MseLossOp::create(builder, loc, scalarType, output, labels);
    }

    SmallVector<Value> returned = {lossValue};
    SmallVector<DictionaryAttr> attrs = {builder.getDictionaryAttr(builder.getNamedAttr(kLossAttr, builder.getUnitAttr()))};
    appendBufferUpdates(train, returned, attrs);
    setReturnedValues(train, returned, attrs);
    module->setAttr(kLossKindAttr, builder.getStringAttr(kind));
    module->setAttr(kNumClassesAttr, builder.getI64IntegerAttr(numClasses));
  }
};

} // namespace
