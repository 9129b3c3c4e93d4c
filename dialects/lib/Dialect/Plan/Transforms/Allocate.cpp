//===- Allocate.cpp - plan-allocate ---------------------------------------===//
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

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

    llvm::StringMap<size_t> intervalIndex;
    std::vector<Interval> intervals;
    int64_t persistentBytes = 0;
    for (TensorOp tensor : block.getOps<TensorOp>()) {
      if (tensor.isPersistent()) {
        tensor.setOffset(persistentBytes);
        persistentBytes = alignUp(persistentBytes + tensor.getByteSize());
        continue;
      }
      intervalIndex[tensor.getSymName()] = intervals.size();
      bool isInput = tensor.getKind() == TensorKind::input;
      // Inputs are filled before the first instruction runs.
      intervals.push_back({tensor, tensor.getByteSize(), isInput ? -1 : INT64_MAX, isInput ? -1 : INT64_MIN});
    }

    // Lifetimes in program order.
    int64_t index = 0;
    auto touch = [&](ArrayAttr refs) {
      for (Attribute ref : refs) {
        auto it = intervalIndex.find(cast<FlatSymbolRefAttr>(ref).getValue());
        if (it == intervalIndex.end())
          continue;
        Interval &interval = intervals[it->second];
        interval.first = std::min(interval.first, index);
        interval.last = std::max(interval.last, index);
      }
    };
    for (Operation &op : block) {
      if (auto kernel = dyn_cast<KernelOp>(op)) {
        touch(kernel.getInputs());
        touch(kernel.getOutputs());
      } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
        touch(collective.getInputs());
        touch(collective.getOutputs());
      } else {
        continue;
      }
      ++index;
    }
    // The loss is read after the step; unused tensors still get a slot.
    auto lossIt = intervalIndex.find(program.getLoss());
    for (Interval &interval : intervals) {
      if (interval.first == INT64_MAX)
        interval.first = interval.last = index;
      if (lossIt != intervalIndex.end() && &interval == &intervals[lossIt->second])
        interval.last = index;
    }

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

    program.setPersistentBytes(persistentBytes);
    program.setTransientBytes(transientBytes);
  }
};

} // namespace
