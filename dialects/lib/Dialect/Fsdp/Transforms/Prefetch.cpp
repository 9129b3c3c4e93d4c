//===- Prefetch.cpp - fsdp-prefetch ---------------------------------------===//
//
// Issues each unit's all_gather one unit early, as FSDP's forward_prefetch
// and backward_prefetch=BACKWARD_PRE do: while compute runs unit k, the
// communication stream already gathers unit k+1. At most two units are
// gathered at a time.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace fsdpc::fsdp {
#define GEN_PASS_DEF_FSDPPREFETCH
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"
} // namespace fsdpc::fsdp

using namespace mlir;
using namespace fsdpc;

namespace {

struct FsdpPrefetchPass : public fsdpc::fsdp::impl::FsdpPrefetchBase<FsdpPrefetchPass> {
  using Base::Base;

  void runOnOperation() override {
    if (depth < 1) {
      getOperation().emitError() << "fsdp-prefetch: depth must be at least 1, got " << static_cast<int64_t>(depth);
      return signalPassFailure();
    }
    // Each round moves every gather one unit earlier than it is now.
    for (int64_t round = 0; round < depth; ++round)
      if (failed(moveOneUnitEarly()))
        return signalPassFailure();
  }

  LogicalResult moveOneUnitEarly() {
    func::FuncOp train = graph::lookupFunction(getOperation(), graph::kTrainStepFunc, "fsdp-prefetch");
    if (!train)
      return failure();
    Block &body = train.getBody().front();
    const graph::StepPhases phases(train);

    SmallVector<fsdp::AllGatherOp> gathers(body.getOps<fsdp::AllGatherOp>());
    // Walk backwards so that each gather moves next to its predecessor's
    // original place.
    for (size_t i = gathers.size(); i-- > 1;) {
      fsdp::AllGatherOp previous = gathers[i - 1], current = gathers[i];
      if (phases.phaseOf(previous) != phases.phaseOf(current))
        continue; // backward's first gather stays in backward (and each micro-batch's in it)
      // The gather and its views move together, right after the previous
      // gather's views.
      Operation *anchor = previous;
      while (isa<fsdp::ParamViewOp>(anchor->getNextNode()) &&
             cast<fsdp::ParamViewOp>(anchor->getNextNode()).getFlat() == previous.getResult())
        anchor = anchor->getNextNode();
      // Under mixed precision the gather reads a cast of the shard: it moves
      // along.
      SmallVector<Operation *> moving;
      if (Operation *shardCast = current.getShard().getDefiningOp())
        if (isa<graph::CastOp>(shardCast) && shardCast->hasOneUse())
          moving.push_back(shardCast);
      moving.push_back(current);
      for (Operation *next = current->getNextNode(); isa<fsdp::ParamViewOp>(next); next = next->getNextNode())
        if (cast<fsdp::ParamViewOp>(next).getFlat() == current.getResult())
          moving.push_back(next);
      for (Operation *op : llvm::reverse(moving))
        op->moveAfter(anchor);
    }
    return success();
  }
};

} // namespace
