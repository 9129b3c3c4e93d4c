//===- Autodiff.cpp - graph-autodiff --------------------------------------===//
//
// Reverse-mode differentiation of @train_step's straight-line body: walk the
// ops backwards from the loss, apply each op's gradient rule, and sum the
// gradients of values with several uses.
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
    llvm::DenseMap<Value, Value> grads;
    auto scalarType = RankedTensorType::get({}, builder.getF32Type());
    grads[loss] = ConstantOp::create(builder, NameLoc::get(builder.getStringAttr("loss_seed")), scalarType,
                                     DenseElementsAttr::get(scalarType, 1.0f));

    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);
    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool anyResultGrad = false;
      for (Value result : op->getResults()) {
        resultGrads.push_back(grads.lookup(result));
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
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!grad)
          continue;
        Value &total = grads[operand];
        total = total ? AddOp::create(builder, op->getLoc(), total.getType(), total, grad).getResult() : grad;
      }
    }

    SmallVector<Value> returned = {loss};
    SmallVector<DictionaryAttr> attrs = {train.getResultAttrDict(lossIndex)};
    for (BlockArgument param : params) {
      Value grad = grads.lookup(param);
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
