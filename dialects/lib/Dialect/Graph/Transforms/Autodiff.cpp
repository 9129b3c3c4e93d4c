//===- Autodiff.cpp - graph-autodiff --------------------------------------===//
//
// Reverse-mode differentiation of @train_step's straight-line body: walk the
// ops backwards from the loss, apply each op's gradient rule, and sum the
// gradients of values with several uses. A value cut into slices that tile
// one axis (the fused QKV projection split into query, key and value) gets
// the concat of their gradients, not a sum of zero-padded slice_grads.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHAUTODIFF
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc::graph;

namespace {

bool isSliceGrad(Value grad) { return static_cast<bool>(grad.getDefiningOp<SliceGradOp>()); }

/// If `grads` are slice_grads, used only here, whose slices cut `type`
/// along one axis into pieces that cover it exactly, their gradients
/// concatenated along it (the same values as their sum, in which each
/// element adds zeros to one gradient); otherwise nothing.
Value concatOfTilingSlices(OpBuilder &builder, ArrayRef<Value> grads, RankedTensorType type) {
  std::optional<int64_t> axis;
  SmallVector<std::pair<int64_t, Value>> pieces;
  for (Value grad : grads) {
    auto sliceGrad = grad.getDefiningOp<SliceGradOp>();
    // Only the contributions list holds it: no op reads it yet.
    if (!sliceGrad || !grad.use_empty() || grad.getType() != type)
      return {};
    ArrayRef<int64_t> starts = sliceGrad.getStarts(), steps = sliceGrad.getSteps();
    ArrayRef<int64_t> piece = cast<RankedTensorType>(sliceGrad.getGrad().getType()).getShape();
    ArrayRef<int64_t> whole = type.getShape();
    if (starts.size() != whole.size() || steps.size() != whole.size())
      return {};
    for (size_t d = 0; d < whole.size(); ++d) {
      if (steps[d] != 1)
        return {};
      if (piece[d] == whole[d] && starts[d] == 0)
        continue;
      if (axis && *axis != static_cast<int64_t>(d))
        return {};
      axis = d;
    }
    if (!axis)
      return {};
    pieces.push_back({starts[*axis], sliceGrad.getGrad()});
  }
  llvm::stable_sort(pieces, [](const auto &a, const auto &b) { return a.first < b.first; });
  int64_t next = 0;
  SmallVector<Value> inputs;
  for (auto [start, piece] : pieces) {
    if (start != next)
      return {};
    next += cast<RankedTensorType>(piece.getType()).getDimSize(*axis);
    inputs.push_back(piece);
  }
  if (next != type.getDimSize(*axis))
    return {};
  return ConcatOp::create(builder, grads.front().getLoc(), type, inputs, builder.getI64IntegerAttr(*axis));
}

struct GraphAutodiffPass : public fsdpc::graph::impl::GraphAutodiffBase<GraphAutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp train = lookupFunction(module, kTrainStepFunc, "graph-autodiff");
    if (!train)
      return signalPassFailure();
    int lossIndex = findResultWithAttr(train, kLossAttr);
    if (lossIndex < 0) {
      train.emitError("graph-autodiff: @train_step returns no graph.loss result; run graph-append-loss first");
      return signalPassFailure();
    }
    Block &body = train.getBody().front();
    Operation *terminator = body.getTerminator();
    Value loss = terminator->getOperand(lossIndex);

    // Values that depend on a trainable parameter: only they need gradients.
    llvm::DenseSet<Value> active;
    SmallVector<BlockArgument> params;
    for (BlockArgument arg : train.getArguments()) {
      if (train.getArgAttr(arg.getArgNumber(), kParamAttr)) {
        active.insert(arg);
        params.push_back(arg);
      }
    }
    for (Operation &op : body.without_terminator())
      if (llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); }))
        for (Value result : op.getResults())
          active.insert(result);

    OpBuilder builder(terminator);
    // The gradients contributed to each value, summed as they arrive; from
    // the first of a slice on, held back until the value's gradient is read,
    // to see whether the slices tile it.
    llvm::DenseMap<Value, SmallVector<Value>> grads;
    auto scalarType = RankedTensorType::get({}, builder.getF32Type());
    grads[loss].push_back(ConstantOp::create(builder, NameLoc::get(builder.getStringAttr("loss_seed")), scalarType,
                                             DenseElementsAttr::get(scalarType, 1.0f)));
    auto add = [&](Value a, Value b, Location loc) {
      return AddOp::create(builder, loc, a.getType(), a, b).getResult();
    };
    auto contribute = [&](Value operand, Value grad, Location loc) {
      SmallVector<Value> &held = grads[operand];
      if (!held.empty() && !isSliceGrad(grad) && !llvm::any_of(held, isSliceGrad))
        held.front() = add(held.front(), grad, loc);
      else
        held.push_back(grad);
    };
    // The value's whole gradient: the held-back contributions as one concat
    // where their slices tile it, else summed in the order they came.
    auto gradOf = [&](Value value) -> Value {
      auto it = grads.find(value);
      if (it == grads.end() || it->second.empty())
        return {};
      SmallVector<Value> &held = it->second;
      if (held.size() > 1) {
        Value total = concatOfTilingSlices(builder, held, cast<RankedTensorType>(held.front().getType()));
        if (total) {
          for (Value grad : held)
            grad.getDefiningOp()->erase();
        } else {
          total = held.front();
          for (Value grad : ArrayRef<Value>(held).drop_front())
            total = add(total, grad, grad.getLoc());
        }
        held = {total};
      }
      return held.front();
    };

    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);
    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool anyResultGrad = false;
      for (Value result : op->getResults()) {
        resultGrads.push_back(gradOf(result));
        anyResultGrad |= static_cast<bool>(resultGrads.back());
      }
      if (!anyResultGrad)
        continue;
      SmallVector<bool> needsGrad;
      for (Value operand : op->getOperands())
        needsGrad.push_back(active.contains(operand));
      if (llvm::none_of(needsGrad, [](bool b) { return b; }))
        continue;
      SmallVector<Value> operandGrads;
      if (failed(buildGradient(builder, op, resultGrads, needsGrad, operandGrads)))
        return signalPassFailure();
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
        if (grad)
          contribute(operand, grad, op->getLoc());
    }

    SmallVector<Value> returned = {loss};
    SmallVector<DictionaryAttr> attrs = {train.getResultAttrDict(lossIndex)};
    for (BlockArgument param : params) {
      Value grad = gradOf(param);
      if (!grad) {
        // The loss does not depend on this parameter: its gradient is zero.
        auto type = cast<RankedTensorType>(param.getType());
        grad = ConstantOp::create(builder, param.getLoc(), type, DenseElementsAttr::get(type, 0.0f));
      }
      returned.push_back(grad);
      attrs.push_back(builder.getDictionaryAttr(
          builder.getNamedAttr(kGradOfAttr, train.getArgAttr(param.getArgNumber(), kParamAttr))));
    }
    appendBufferUpdates(train, returned, attrs);
    setReturnedValues(train, returned, attrs);
  }
};

} // namespace
