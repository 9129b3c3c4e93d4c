//===- Allocate.cpp - plan-allocate ---------------------------------------===//
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"

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

    llvm::StringMap<size_t> intervalIndex;
    std::vector<Interval> intervals;
    int64_t persistentBytes = 0;
    llvm::StringMap<TensorOp> tensors;
    SmallVector<TensorOp> views;
    for (TensorOp tensor : block.getOps<TensorOp>()) {
      tensors[tensor.getSymName()] = tensor;
      if (tensor.getKind() == TensorKind::view) {
        views.push_back(tensor);
        continue;
      }
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

    // Lifetimes in program order; a view's uses are its storage's. A
    // collective runs on the communication stream, which compute does not
    // wait for until its `wait_event`: its tensors stay live until then.
    SmallVector<Operation *> instructions;
    llvm::DenseMap<int64_t, int64_t> computeWaitIndex;
    for (Operation &op : block) {
      if (isa<TensorOp>(op))
        continue;
      if (auto wait = dyn_cast<WaitEventOp>(op); wait && wait.getStream() == Stream::compute)
        computeWaitIndex.try_emplace(wait.getEvent(), instructions.size());
      instructions.push_back(&op);
    }
    // The tensor owning a tensor's bytes (through views of views; the
    // verifier has checked every base exists), and the byte offset in it.
    auto storageOf = [&](TensorOp tensor) {
      int64_t offset = 0;
      for (int depth = 0; tensor.getKind() == TensorKind::view && depth < 64; ++depth) {
        offset += *tensor.getViewOffset();
        tensor = tensors.lookup(*tensor.getViewOf());
      }
      return std::make_pair(tensor, offset);
    };
    auto touch = [&](ArrayAttr refs, int64_t from, int64_t to) {
      for (Attribute ref : refs) {
        TensorOp storage = storageOf(tensors.lookup(cast<FlatSymbolRefAttr>(ref).getValue())).first;
        auto it = intervalIndex.find(storage.getSymName());
        if (it == intervalIndex.end())
          continue;
        Interval &interval = intervals[it->second];
        interval.first = std::min(interval.first, from);
        interval.last = std::max(interval.last, to);
      }
    };
    const int64_t end = instructions.size();
    for (int64_t index = 0; index < end; ++index) {
      Operation *op = instructions[index];
      if (auto kernel = dyn_cast<KernelOp>(op)) {
        touch(kernel.getInputs(), index, index);
        touch(kernel.getOutputs(), index, index);
      } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
        int64_t until = index;
        if (collective.getStream() == Stream::communication) {
          until = end;
          for (int64_t next = index + 1; next < end; ++next)
            if (auto record = dyn_cast<RecordEventOp>(instructions[next]);
                record && record.getStream() == Stream::communication) {
              until = computeWaitIndex.lookup_or(record.getEvent(), end);
              break;
            }
        }
        touch(collective.getInputs(), index, until);
        touch(collective.getOutputs(), index, until);
      }
    }
    // The loss and outputs (or the tensors they view) are read after the
    // step; unused tensors still get a slot.
    llvm::StringSet<> readAfterStep;
    auto readAfter = [&](StringRef name) {
      readAfterStep.insert(storageOf(tensors.lookup(name)).first.getSymName());
    };
    if (program.getLoss())
      readAfter(*program.getLoss());
    if (std::optional<ArrayAttr> outputs = program.getOutputs())
      for (Attribute output : *outputs)
        readAfter(cast<FlatSymbolRefAttr>(output).getValue());
    for (Interval &interval : intervals) {
      if (interval.first == INT64_MAX)
        interval.first = interval.last = end;
      if (readAfterStep.contains(interval.tensor.getSymName()))
        interval.last = end;
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

    // Views sit inside their storage.
    for (TensorOp view : views) {
      auto [storage, offset] = storageOf(view);
      view.setOffset(*storage.getOffset() + offset);
    }

    program.setPersistentBytes(persistentBytes);
    program.setTransientBytes(transientBytes);
  }
};

} // namespace
