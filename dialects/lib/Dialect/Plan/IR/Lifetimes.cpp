//===- Lifetimes.cpp - When each transient tensor is live -----------------===//
#include "fsdpc/Dialect/Plan/IR/Lifetimes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <climits>

using namespace mlir;

namespace fsdpc::plan_ir {

std::pair<TensorOp, int64_t> storageOf(TensorOp tensor, const llvm::StringMap<TensorOp> &tensors) {
  int64_t offset = 0;
  for (int depth = 0; tensor && tensor.getKind() == TensorKind::view && depth < 64; ++depth) {
    offset += *tensor.getViewOffset();
    tensor = tensors.lookup(*tensor.getViewOf());
  }
  return {tensor, offset};
}

ProgramLifetimes computeLifetimes(ProgramOp program) {
  Block &block = program.getBlock();
  ProgramLifetimes result;
  llvm::StringMap<TensorOp> tensors;
  llvm::StringMap<size_t> index;
  for (TensorOp tensor : block.getOps<TensorOp>()) {
    tensors[tensor.getSymName()] = tensor;
    if (tensor.getKind() == TensorKind::view || tensor.isPersistent() || tensor.getHost())
      continue;
    index[tensor.getSymName()] = result.transients.size();
    const bool isInput = tensor.getKind() == TensorKind::input;
    // Inputs are filled before the first instruction runs.
    result.transients.push_back(
        {tensor, tensor.getByteSize(), isInput ? -1 : INT64_MAX, isInput ? -1 : INT64_MIN});
  }

  llvm::DenseMap<int64_t, int64_t> computeWaitIndex;
  for (Operation &op : block) {
    if (isa<TensorOp, UnitOp>(op)) // declarations, not instructions
      continue;
    if (auto wait = dyn_cast<WaitEventOp>(op); wait && wait.getStream() == Stream::compute)
      computeWaitIndex.try_emplace(wait.getEvent(), result.instructions.size());
    result.instructions.push_back(&op);
  }
  // Pass an ArrayAttr's getValue(): the ArrayAttr itself would convert to a
  // one-element list of itself.
  auto touch = [&](ArrayRef<Attribute> refs, int64_t from, int64_t to) {
    for (Attribute ref : refs) {
      auto it =
          index.find(storageOf(tensors.lookup(cast<FlatSymbolRefAttr>(ref).getValue()), tensors).first.getSymName());
      if (it == index.end())
        continue;
      TensorLifetime &lifetime = result.transients[it->second];
      lifetime.first = std::min(lifetime.first, from);
      lifetime.last = std::max(lifetime.last, to);
    }
  };
  const std::vector<Operation *> &instructions = result.instructions;
  const int64_t end = instructions.size();
  for (int64_t i = 0; i < end; ++i) {
    Operation *op = instructions[i];
    if (auto kernel = dyn_cast<KernelOp>(op)) {
      touch(kernel.getInputs().getValue(), i, i);
      touch(kernel.getOutputs().getValue(), i, i);
    } else if (isa<CollectiveOp, CopyOp>(op)) {
      // On the communication stream, compute does not wait for it until the
      // wait_event of the record that follows it there.
      int64_t until = i;
      auto collective = dyn_cast<CollectiveOp>(op);
      auto copy = dyn_cast<CopyOp>(op);
      const Stream stream = collective ? collective.getStream() : copy.getStream();
      if (stream == Stream::communication) {
        until = end;
        for (int64_t next = i + 1; next < end; ++next)
          if (auto record = dyn_cast<RecordEventOp>(instructions[next]);
              record && record.getStream() == Stream::communication) {
            until = computeWaitIndex.lookup_or(record.getEvent(), end);
            break;
          }
      }
      if (collective) {
        touch(collective.getInputs().getValue(), i, until);
        touch(collective.getOutputs().getValue(), i, until);
      } else {
        touch({copy.getSourceAttr(), copy.getTargetAttr()}, i, until);
      }
    }
  }
  // The loss and outputs are read after the step; unused tensors still get
  // a slot at the end.
  llvm::StringSet<> readAfterStep;
  auto readAfter = [&](StringRef name) {
    readAfterStep.insert(storageOf(tensors.lookup(name), tensors).first.getSymName());
  };
  if (program.getLoss())
    readAfter(*program.getLoss());
  if (program.getGradNorm())
    readAfter(*program.getGradNorm());
  if (std::optional<ArrayAttr> outputs = program.getOutputs())
    for (Attribute output : *outputs)
      readAfter(cast<FlatSymbolRefAttr>(output).getValue());
  for (TensorLifetime &lifetime : result.transients) {
    if (lifetime.first == INT64_MAX)
      lifetime.first = lifetime.last = end;
    if (readAfterStep.contains(lifetime.tensor.getSymName()))
      lifetime.last = end;
  }
  return result;
}

ForwardPrefix forwardPrefix(ProgramOp program) {
  ForwardPrefix prefix;
  std::optional<StringRef> loss = program.getForwardLoss();
  if (!loss)
    return prefix;
  llvm::StringMap<TensorOp> tensors;
  for (TensorOp tensor : program.getBlock().getOps<TensorOp>())
    tensors[tensor.getSymName()] = tensor;
  auto storageName = [&](StringRef name) -> StringRef {
    TensorOp tensor = tensors.lookup(name);
    TensorOp storage = tensor ? storageOf(tensor, tensors).first : TensorOp();
    return storage ? storage.getSymName() : StringRef();
  };
  const StringRef lossStorage = storageName(*loss);
  const StringRef outputStorage = program.getForwardOutput() ? storageName(*program.getForwardOutput()) : StringRef();
  int64_t index = 0, lastOutputWrite = -1;
  for (Operation &op : program.getBlock()) {
    if (isa<TensorOp, UnitOp>(op))
      continue;
    SmallVector<Attribute> written;
    if (auto kernel = dyn_cast<KernelOp>(op))
      llvm::append_range(written, kernel.getOutputs().getValue());
    else if (auto collective = dyn_cast<CollectiveOp>(op))
      llvm::append_range(written, collective.getOutputs().getValue());
    else if (auto copy = dyn_cast<CopyOp>(op))
      written.push_back(copy.getTargetAttr());
    bool writesLoss = false, writesOutput = false;
    for (Attribute ref : written) {
      StringRef storage = storageName(cast<FlatSymbolRefAttr>(ref).getValue());
      writesLoss |= !storage.empty() && storage == lossStorage;
      writesOutput |= !storage.empty() && storage == outputStorage;
    }
    if (writesLoss) {
      prefix.loss = index + 1;
      prefix.output = lastOutputWrite >= 0 ? lastOutputWrite + 1 : prefix.loss;
      return prefix;
    }
    if (writesOutput)
      lastOutputWrite = index;
    ++index;
  }
  return prefix;
}

} // namespace fsdpc::plan_ir
