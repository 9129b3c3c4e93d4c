//===- Bucket.cpp - fsdp-bucket -------------------------------------------===//
//
// Groups the collectives of small units into fsdp.bucket ops, so that they
// cost one collective's latency instead of one each (DDP's bucket_cap_mb,
// DeepSpeed's allgather / reduce bucket sizes).
//
// Walking the collectives of one kind in program order, a bucket takes the
// next one while it has the same group, reduction and element type, another
// unit, and the total full bytes (gathered result, or reduced input) stay
// within `bucket-bytes`. A collective larger than that on its own stays
// alone. Where a bucket runs:
//
// - all_gather: at its first member. The later members move up to it, so
//   their units are gathered earlier than they were (the price of fewer
//   messages, visible in the memory report). Forward and backward gathers
//   are not mixed.
// - reduce_scatter, all_reduce: at its last member, when every member's
//   gradient is complete. The earlier members move down to it, with the ops
//   between that read their results.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"

#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace fsdpc::fsdp {
#define GEN_PASS_DEF_FSDPBUCKET
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"
} // namespace fsdpc::fsdp

using namespace mlir;
using namespace fsdpc;

namespace {

int64_t bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getNumElements() * ((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

struct Member {
  Operation *op;
  fsdp::CollectiveShape shape;
  int64_t bytes; // the full (unsharded) tensor the collective moves
  /// Whether the two may share a bucket: one kind, group, reduction and dtype.
  bool matches(const Member &other) const {
    return op->getName() == other.op->getName() && shape.sharesGroupWith(other.shape);
  }
};

std::optional<Member> memberOf(Operation *op) {
  std::optional<fsdp::CollectiveShape> shape = fsdp::collectiveShapeOf(op);
  if (!shape || !shape->unit) // not the step's gradient norm
    return std::nullopt;
  return Member{op, *shape, bytesOf(shape->full)};
}

/// Whether `value` is available before `point`.
bool availableBefore(Value value, Operation *point) {
  Operation *def = value.getDefiningOp();
  return !def || def->isBeforeInBlock(point);
}

/// The ops to move so that gather `op` can run at `anchor`, earlier in the
/// block: the single-use cast of its shard (mixed precision) if that comes
/// after the anchor. Fails if the shard is not available there otherwise.
FailureOr<SmallVector<Operation *>> hoistable(Operation *op, Operation *anchor) {
  SmallVector<Operation *> moving;
  Value shard = cast<fsdp::AllGatherOp>(op).getShard();
  if (!availableBefore(shard, anchor)) {
    Operation *cast = shard.getDefiningOp();
    if (!isa<graph::CastOp>(cast) || !cast->hasOneUse() || !availableBefore(cast->getOperand(0), anchor))
      return failure();
    moving.push_back(cast);
  }
  return moving;
}

/// The ops that must follow reduction `op` when it moves down to `anchor`:
/// its users, and theirs, that come before the anchor, in block order.
/// Fails if the anchor itself depends on `op`.
FailureOr<SmallVector<Operation *>> sinkable(Operation *op, Operation *anchor) {
  llvm::SetVector<Operation *> followers;
  SmallVector<Operation *> work = {op};
  while (!work.empty()) {
    Operation *current = work.pop_back_val();
    for (Operation *user : current->getUsers()) {
      if (user->getBlock() != anchor->getBlock())
        user = anchor->getBlock()->findAncestorOpInBlock(*user);
      if (!user || (user != anchor && !user->isBeforeInBlock(anchor)))
        continue;
      if (user == anchor)
        return failure();
      if (followers.insert(user))
        work.push_back(user);
    }
  }
  SmallVector<Operation *> ordered(followers.begin(), followers.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

struct FsdpBucketPass : public fsdpc::fsdp::impl::FsdpBucketBase<FsdpBucketPass> {
  using Base::Base;

  void runOnOperation() override {
    if (bucketBytes < 0) {
      getOperation().emitError() << "fsdp-bucket: bucket-bytes must be non-negative, got "
                                 << static_cast<int64_t>(bucketBytes);
      return signalPassFailure();
    }
    if (bucketBytes == 0)
      return; // no bucketing
    func::FuncOp train = graph::lookupFunction(getOperation(), graph::kTrainStepFunc, "fsdp-bucket");
    if (!train)
      return signalPassFailure();
    Block &body = train.getBody().front();
    const graph::StepPhases phases(train);

    // Gathers first, then reduce-scatters, then all-reduces: hybrid
    // sharding's all-reduces read the reduce-scatters' results, and line up
    // once those are bucketed.
    for (StringRef kind : {fsdp::AllGatherOp::getOperationName(), fsdp::ReduceScatterOp::getOperationName(),
                           fsdp::AllReduceOp::getOperationName()}) {
      const bool gathers = kind == fsdp::AllGatherOp::getOperationName();
      SmallVector<Member> members;
      for (Operation &op : body)
        if (op.getName().getStringRef() == kind)
          if (std::optional<Member> member = memberOf(&op))
            members.push_back(*member);
      SmallVector<Member> bucket;
      int64_t bytes = 0;
      auto close = [&] {
        if (bucket.size() > 1)
          formBucket(bucket, gathers);
        bucket.clear();
        bytes = 0;
      };
      for (const Member &m : members) {
        bool fits = !bucket.empty() && m.matches(bucket.front()) && bytes + m.bytes <= bucketBytes &&
                    llvm::none_of(bucket, [&](const Member &b) { return b.shape.unit == m.shape.unit; }) &&
                    (!gathers || phases.phaseOf(m.op) == phases.phaseOf(bucket.front().op)) &&
                    (gathers ? succeeded(hoistable(m.op, bucket.front().op))
                             : llvm::all_of(bucket, [&](const Member &b) { return succeeded(sinkable(b.op, m.op)); }));
        if (!fits)
          close();
        if (m.bytes > bucketBytes)
          continue; // too large to share a bucket: stays alone
        bucket.push_back(m);
        bytes += m.bytes;
      }
      close();
    }
  }

  /// Rewrites `members` into one fsdp.bucket where the bucket runs.
  void formBucket(ArrayRef<Member> members, bool gathers) {
    Operation *anchor = gathers ? members.front().op : members.back().op;
    SmallVector<Operation *> followers;
    for (const Member &m : members) {
      if (m.op == anchor)
        continue;
      if (gathers) {
        SmallVector<Operation *> casts = *hoistable(m.op, anchor);
        for (Operation *op : casts)
          op->moveBefore(anchor);
      } else {
        llvm::append_range(followers, *sinkable(m.op, anchor));
      }
    }
    llvm::sort(followers, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    followers.erase(std::unique(followers.begin(), followers.end()), followers.end());

    OpBuilder builder(anchor);
    SmallVector<Type> types;
    SmallVector<Location> locations;
    for (const Member &m : members) {
      types.push_back(m.op->getResult(0).getType());
      locations.push_back(m.op->getLoc());
    }
    auto bucket = fsdp::BucketOp::create(builder, builder.getFusedLoc(locations), types);
    Block *block = builder.createBlock(&bucket.getBody());
    SmallVector<Value> yielded;
    for (const Member &m : members) {
      m.op->moveBefore(block, block->end());
      yielded.push_back(m.op->getResult(0));
    }
    builder.setInsertionPointToEnd(block);
    auto yield = fsdp::YieldOp::create(builder, bucket.getLoc(), yielded);
    for (auto [i, value] : llvm::enumerate(yielded))
      value.replaceUsesWithIf(bucket.getResult(i), [&](OpOperand &use) { return use.getOwner() != yield; });
    // What read an earlier reduction's result now follows the bucket.
    Operation *previous = bucket;
    for (Operation *op : followers) {
      op->moveAfter(previous);
      previous = op;
    }
  }
};

} // namespace
