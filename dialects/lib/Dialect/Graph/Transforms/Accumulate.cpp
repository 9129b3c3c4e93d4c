//===- Accumulate.cpp - graph-accumulate ----------------------------------===//
//
// Gradient accumulation as an unrolled step: K micro-batches of forward
// and backward, one after the other, then one optimizer update on the
// gradients summed over them. Unrolling at compile time keeps the runtime
// unchanged (one step, K micro-batches of input) and lets the memory
// planner see that only one micro-batch's activations are live at a time,
// next to the gradient sums (FSDP's no_sync keeps the same unsharded
// gradients).
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHACCUMULATE
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc;

namespace {

bool isUpdate(Operation *op) { return isa<graph::AdamwUpdateOp, graph::SgdUpdateOp>(op); }

/// Dropout layers of different micro-batches draw different masks: the
/// seed moves by a large odd stride per micro-batch.
constexpr int64_t kSeedStride = 1000003;

struct GraphAccumulatePass : public fsdpc::graph::impl::GraphAccumulateBase<GraphAccumulatePass> {
  using Base::Base;

  void runOnOperation() override {
    const int64_t k = microBatches;
    if (k < 1) {
      getOperation().emitError() << "graph-accumulate: micro-batches must be at least 1, got " << k;
      return signalPassFailure();
    }
    if (k == 1)
      return;
    func::FuncOp train = graph::lookupFunction(getOperation(), graph::kTrainStepFunc, "graph-accumulate");
    if (!train)
      return signalPassFailure();
    if (failed(unroll(train, k)))
      signalPassFailure();
  }

  LogicalResult unroll(func::FuncOp train, int64_t k) {
    Block &body = train.getBody().front();
    Operation *terminator = body.getTerminator();
    const int lossIndex = graph::findResultWithAttr(train, graph::kLossAttr);
    if (lossIndex < 0)
      return train.emitError("graph-accumulate: @train_step returns no graph.loss result");
    for (Operation &op : body)
      if (op.hasAttr(graph::kMicroLossAttr))
        return train.emitError("graph-accumulate: @train_step already accumulates gradients");

    // The step: everything but the updates, which must come last and read
    // only the step's gradients.
    SmallVector<Operation *> stepOps, updates;
    for (Operation &op : body.without_terminator())
      (isUpdate(&op) ? updates : stepOps).push_back(&op);
    for (Operation *op : stepOps)
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && isUpdate(def))
          return op->emitOpError("graph-accumulate: reads an optimizer update's result");
    if (updates.empty())
      return train.emitError("graph-accumulate: @train_step has no optimizer update to accumulate for");

    // Inputs grow to K micro-batches.
    SmallVector<BlockArgument> inputs;
    for (BlockArgument arg : train.getArguments())
      if (train.getArgAttr(arg.getArgNumber(), graph::kInputAttr)) {
        auto type = cast<RankedTensorType>(arg.getType());
        if (type.getRank() < 1 || type.isDynamicDim(0))
          return train.emitError("graph-accumulate: input ")
                 << arg.getArgNumber() << " has no static batch dimension: " << type;
        inputs.push_back(arg);
      }
    if (inputs.empty())
      return train.emitError("graph-accumulate: @train_step has no input to split into micro-batches");

    OpBuilder builder(train.getContext());
    Value loss = terminator->getOperand(lossIndex);
    // Each update's gradient operand, summed over the micro-batches.
    SmallVector<Value> grads;
    for (Operation *update : updates)
      grads.push_back(update->getOperand(1));
    SmallVector<Value> gradSums(grads.size());
    Value lossSum;
    auto accumulate = [&](Value sum, Value value) -> Value {
      if (!sum)
        return value;
      // Right after the later of the two: as soon as micro-batch m's part exists.
      Operation *def = value.getDefiningOp(), *sumDef = sum.getDefiningOp();
      if (!def || (sumDef && def->isBeforeInBlock(sumDef)))
        def = sumDef;
      if (def)
        builder.setInsertionPointAfter(def);
      else
        builder.setInsertionPointToStart(&body);
      auto add = graph::AddOp::create(builder, value.getLoc(), value.getType(), sum, value);
      add->setAttr(graph::kAccumulateAttr, builder.getUnitAttr());
      return add.getResult();
    };

    // Buffers (BatchNorm's running statistics) are updated by every
    // micro-batch's forward, as in torch: micro-batch m reads what m - 1
    // wrote, and the step returns what the last one wrote.
    SmallVector<std::tuple<unsigned, BlockArgument, Value>> buffers; // result, buffer, its value now
    for (unsigned i = 0; i < train.getNumResults(); ++i)
      if (graph::isBufferUpdate(train, i)) {
        auto target = train.getResultAttrOfType<IntegerAttr>(i, graph::kUpdatesAttr);
        buffers.emplace_back(i, train.getArgument(target.getInt()), train.getArgument(target.getInt()));
      }

    builder.setInsertionPoint(stepOps.empty() ? updates.front() : stepOps.front());
    for (int64_t m = 0; m < k; ++m) {
      IRMapping mapping;
      for (auto &[result, buffer, current] : buffers)
        mapping.map(buffer, current);
      // Micro-batch m's rows of every input.
      for (BlockArgument input : inputs) {
        auto type = cast<RankedTensorType>(input.getType());
        SmallVector<int64_t> starts(type.getRank(), 0), steps(type.getRank(), 1);
        starts[0] = m * type.getDimSize(0);
        auto slice = graph::SliceOp::create(builder, input.getLoc(), type, input,
                                            builder.getDenseI64ArrayAttr(starts), builder.getDenseI64ArrayAttr(steps));
        slice->setAttr(graph::kMicroBatchAttr, builder.getI64IntegerAttr(m));
        mapping.map(input, slice.getResult());
      }
      for (Operation *op : stepOps) {
        if (isa<graph::ConstantOp>(op)) {
          if (m == 0)
            builder.setInsertionPointAfter(op); // shared by every micro-batch, where it is
          continue;
        }
        Operation *clone = builder.clone(*op, mapping);
        if (m > 0)
          if (auto seed = clone->getAttrOfType<IntegerAttr>("seed"); seed && isa<graph::DropoutOp, graph::DropoutGradOp>(clone))
            clone->setAttr("seed", builder.getI64IntegerAttr(seed.getInt() + m * kSeedStride));
        if (op == loss.getDefiningOp())
          clone->setAttr(graph::kMicroLossAttr, builder.getUnitAttr());
      }
      for (auto &[result, buffer, current] : buffers)
        current = mapping.lookupOrDefault(terminator->getOperand(result));
      OpBuilder::InsertPoint end = builder.saveInsertionPoint();
      lossSum = accumulate(lossSum, mapping.lookupOrDefault(loss));
      for (auto [sum, grad] : llvm::zip(gradSums, grads))
        sum = accumulate(sum, mapping.lookupOrDefault(grad));
      builder.restoreInsertionPoint(end);
    }
    // Their mean: the gradient of the mean loss over the K micro-batches.
    auto mean = [&](Value sum) -> Value {
      builder.setInsertionPointAfter(sum.getDefiningOp());
      auto scale = graph::ScaleOp::create(builder, sum.getLoc(), sum, builder.getF64FloatAttr(1.0 / k));
      scale->setAttr(graph::kAccumulateAttr, builder.getI64IntegerAttr(k));
      return scale.getResult();
    };
    for (auto [update, sum] : llvm::zip(updates, gradSums))
      update->setOperand(1, mean(sum));
    terminator->setOperand(lossIndex, mean(lossSum));
    for (auto &[result, buffer, current] : buffers)
      terminator->setOperand(result, current);

    // The single-micro-batch originals go; constants stay.
    for (Operation *op : llvm::reverse(stepOps))
      if (!isa<graph::ConstantOp>(op)) {
        if (!op->use_empty())
          return op->emitOpError("graph-accumulate: still used after unrolling");
        op->erase();
      }
    for (BlockArgument input : inputs) {
      auto type = cast<RankedTensorType>(input.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= k;
      input.setType(RankedTensorType::get(shape, type.getElementType()));
    }
    train.setType(FunctionType::get(train.getContext(), body.getArgumentTypes(), train.getResultTypes()));
    return success();
  }
};

} // namespace
