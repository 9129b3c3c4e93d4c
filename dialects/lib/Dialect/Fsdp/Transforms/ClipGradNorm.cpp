//===- ClipGradNorm.cpp - fsdp-clip-grad-norm -----------------------------===//
//
// Gradient clipping by the global L2 norm, as FSDP's clip_grad_norm_ does
// over shards: each rank sums the squares of its gradient shards, one
// all_reduce over the shard group adds the partial sums (the other replica
// groups of hybrid sharding hold the same shards, so they agree without
// one), and every gradient shard is multiplied by
// min(1, max_norm / (norm + 1e-6)) before the optimizer reads it. The norm
// before clipping becomes a result of the step, for the metrics.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"

#include "fsdpc/Dialect/Fsdp/IR/FsdpDialect.h"
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace fsdpc::fsdp {
#define GEN_PASS_DEF_FSDPCLIPGRADNORM
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"
} // namespace fsdpc::fsdp

using namespace mlir;
using namespace fsdpc;

namespace {

struct FsdpClipGradNormPass : public fsdpc::fsdp::impl::FsdpClipGradNormBase<FsdpClipGradNormPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!(maxNorm > 0)) {
      module.emitError() << "fsdp-clip-grad-norm: max-norm must be positive, got " << static_cast<double>(maxNorm);
      return signalPassFailure();
    }
    func::FuncOp train = graph::lookupFunction(module, graph::kTrainStepFunc, "fsdp-clip-grad-norm");
    if (!train)
      return signalPassFailure();
    if (graph::findResultWithAttr(train, graph::kGradNormAttr) >= 0) {
      train.emitError("fsdp-clip-grad-norm: @train_step already clips its gradients");
      return signalPassFailure();
    }
    SmallVector<Operation *> updates;
    for (Operation &op : train.getBody().front())
      if (isa<graph::AdamwUpdateOp, graph::SgdUpdateOp>(op))
        updates.push_back(&op);
    if (updates.empty()) {
      train.emitError("fsdp-clip-grad-norm: @train_step has no optimizer update whose gradients could be clipped");
      return signalPassFailure();
    }

    // The norm is complete once every gradient is. The updates read nothing
    // but their unit's shards, so they move to the end, after every
    // gradient, and the norm goes just before them.
    Operation *terminator = train.getBody().front().getTerminator();
    for (Operation *update : updates)
      update->moveBefore(terminator);
    OpBuilder builder(updates.front());
    Location loc = NameLoc::get(builder.getStringAttr("clip_grad_norm"), train.getLoc());
    auto scalar = RankedTensorType::get({1}, builder.getF32Type());
    SmallVector<Value> grads;
    for (Operation *update : updates)
      grads.push_back(update->getOperand(1));
    Value sumSquares = graph::SumSquaresOp::create(builder, loc, scalar, grads).getResult();
    auto shardGroup = module->getAttrOfType<IntegerAttr>(fsdp::kShardGroupSizeAttr);
    if (shardGroup && shardGroup.getInt() > 1)
      sumSquares = fsdp::AllReduceOp::create(builder, loc, sumSquares, FlatSymbolRefAttr(),
                                             fsdp::ReductionAttr::get(builder.getContext(), Reduction::sum),
                                             builder.getI64IntegerAttr(shardGroup.getInt()),
                                             builder.getI64IntegerAttr(1))
                       .getResult();
    auto clip = graph::ClipCoefficientOp::create(builder, loc, scalar, scalar, sumSquares,
                                                 builder.getF64FloatAttr(maxNorm));
    for (Operation *update : updates) {
      builder.setInsertionPoint(update);
      Value grad = update->getOperand(1);
      update->setOperand(1, graph::MulOp::create(builder, loc, grad.getType(), grad, clip.getScale()).getResult());
    }

    // The norm before clipping, returned for fsdp-run's metrics.
    SmallVector<Value> values(terminator->getOperands());
    SmallVector<DictionaryAttr> attrs;
    for (unsigned i = 0; i < train.getNumResults(); ++i)
      attrs.push_back(train.getResultAttrDict(i));
    values.push_back(clip.getNorm());
    attrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(graph::kGradNormAttr, builder.getUnitAttr())));
    graph::setReturnedValues(train, values, attrs);
  }
};

} // namespace
