//===- Allocate.cpp - plan-allocate ---------------------------------------===//
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"

#include "fsdpc/Dialect/Plan/IR/Lifetimes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace fsdpc::plan_ir {
#define GEN_PASS_DEF_PLANALLOCATE
#include "fsdpc/Dialect/Plan/Transforms/Passes.h.inc"
} // namespace fsdpc::plan_ir

using namespace mlir;
using namespace fsdpc::plan_ir;

namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t value) { return (value + kAlignment - 1) / kAlignment * kAlignment; }

struct Interval {
  TensorOp tensor;
  int64_t bytes;
  int64_t first; // instruction index of the first touch
  int64_t last;  // instruction index of the last touch
  int64_t offset = -1;

  bool overlapsInTime(const Interval &other) const { return first <= other.last && other.first <= last; }
};

struct PlanAllocatePass : public fsdpc::plan_ir::impl::PlanAllocateBase<PlanAllocatePass> {
  void runOnOperation() override {
    ProgramOp program = getOperation();
    Block &block = program.getBlock();

    int64_t persistentBytes = 0, hostBytes = 0;
    llvm::StringMap<TensorOp> tensors;
    SmallVector<TensorOp> views;
    for (TensorOp tensor : block.getOps<TensorOp>()) {
      tensors[tensor.getSymName()] = tensor;
      if (tensor.getKind() == TensorKind::view) {
        views.push_back(tensor);
        continue;
      }
      // Host tensors (plan-offload) are few and live through the step: laid
      // out one after another, like the persistent region.
      if (tensor.getHost()) {
        tensor.setOffset(hostBytes);
        hostBytes = alignUp(hostBytes + tensor.getByteSize());
      } else if (tensor.isPersistent()) {
        tensor.setOffset(persistentBytes);
        persistentBytes = alignUp(persistentBytes + tensor.getByteSize());
      }
    }
    // The transient tensors' lifetimes (Lifetimes.h: the memory report's
    // timeline adds up the same intervals).
    std::vector<Interval> intervals;
    for (const TensorLifetime &lifetime : computeLifetimes(program).transients)
      intervals.push_back({lifetime.tensor, lifetime.bytes, lifetime.first, lifetime.last});

    // Largest first, each at the lowest offset free for its whole lifetime.
    std::vector<size_t> order(intervals.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return intervals[a].bytes > intervals[b].bytes; });
    std::vector<size_t> placed;
    int64_t transientBytes = 0;
    for (size_t i : order) {
      Interval &interval = intervals[i];
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (size_t j : placed)
        if (intervals[j].overlapsInTime(interval))
          busy.emplace_back(intervals[j].offset, intervals[j].offset + intervals[j].bytes);
      llvm::sort(busy);
      int64_t offset = 0;
      for (auto [begin, end] : busy) {
        if (offset + interval.bytes <= begin)
          break;
        offset = std::max(offset, alignUp(end));
      }
      interval.offset = offset;
      interval.tensor.setOffset(offset);
      transientBytes = std::max(transientBytes, alignUp(offset + interval.bytes));
      placed.push_back(i);
    }

    // Views sit inside their storage.
    for (TensorOp view : views) {
      // A view's bytes sit inside its storage, at the sum of the view offsets.
      auto [storage, offset] = storageOf(view, tensors);
      view.setOffset(*storage.getOffset() + offset);
    }

    program.setPersistentBytes(persistentBytes);
    program.setTransientBytes(transientBytes);
    if (hostBytes > 0)
      program.setHostBytes(hostBytes);
  }
};

} // namespace
