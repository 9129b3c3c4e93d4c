//===- MemoryReport.cpp - What each rank needs, before it runs ------------===//
#include "fsdpc/Export/MemoryReport.h"

#include "fsdpc/Dialect/Plan/IR/Lifetimes.h"
#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "fsdpc/Export/PlanWriter.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace fsdpc;
using plan_ir::TensorKind;

namespace {

/// The live bytes after every instruction, from the same lifetimes
/// plan-allocate packed, and what is live at their largest.
void addTimeline(plan_ir::ProgramOp program, const llvm::StringMap<plan_ir::TensorOp> &tensors, MemoryReport &report) {
  const plan_ir::ProgramLifetimes lifetimes = plan_ir::computeLifetimes(program);
  const int64_t count = lifetimes.instructions.size();
  // What each transient tensor holds, from the collectives that touch it.
  llvm::StringMap<int> role; // 1 gathered unit, 2 flat gradient
  auto storageName = [&](Attribute ref) -> StringRef {
    plan_ir::TensorOp tensor = plan_ir::storageOf(tensors.lookup(cast<FlatSymbolRefAttr>(ref).getValue()), tensors).first;
    return tensor ? tensor.getSymName() : StringRef();
  };
  for (auto collective : program.getBlock().getOps<plan_ir::CollectiveOp>()) {
    const bool gather = collective.getCollective() == plan_ir::CollectiveKind::all_gather;
    // Gathered units are all_gather outputs; flat gradients what the
    // reductions read and write.
    for (Attribute ref : gather ? collective.getOutputs() : collective.getInputs())
      role[storageName(ref)] = gather ? 1 : 2;
    if (!gather)
      for (Attribute ref : collective.getOutputs())
        role[storageName(ref)] = 2;
  }
  // A bucket (fsdp-bucket) packs its members' flat gradients with a concat
  // into the buffer it reduces, and slices its gathered buffer into each
  // unit's full parameter: those tensors have the buffer's role.
  for (auto kernel : program.getBlock().getOps<plan_ir::KernelOp>()) {
    if (kernel.getKernel() == "concat" && role.lookup(storageName(kernel.getOutputs()[0])) == 2)
      for (Attribute ref : kernel.getInputs())
        role[storageName(ref)] = 2;
    if (kernel.getKernel() == "slice" && role.lookup(storageName(kernel.getInputs()[0])) == 1 &&
        tensors.lookup(cast<FlatSymbolRefAttr>(kernel.getOutputs()[0]).getValue()).getKind() == TensorKind::view)
      role[storageName(kernel.getOutputs()[0])] = 1;
  }
  // Live bytes after instruction i: a difference array over [first, last].
  std::vector<int64_t> delta(count + 2, 0);
  for (const plan_ir::TensorLifetime &t : lifetimes.transients) {
    const int64_t first = std::max<int64_t>(t.first, 0), last = std::min<int64_t>(t.last, count - 1);
    if (first > last)
      continue;
    delta[first] += t.bytes;
    delta[last + 1] -= t.bytes;
  }
  report.liveAfter.assign(count, 0);
  int64_t live = 0, peak = -1;
  for (int64_t i = 0; i < count; ++i) {
    live += delta[i];
    report.liveAfter[i] = report.persistent + live;
    if (report.liveAfter[i] > peak) {
      peak = report.liveAfter[i];
      report.peakInstruction = i;
    }
  }
  if (report.peakInstruction < 0)
    return;
  Operation *op = lifetimes.instructions[report.peakInstruction];
  if (auto kernel = dyn_cast<plan_ir::KernelOp>(op))
    report.peakOp = kernel.getKernel().str();
  else if (auto collective = dyn_cast<plan_ir::CollectiveOp>(op))
    report.peakOp = plan_ir::stringifyCollectiveKind(collective.getCollective()).str();
  else
    report.peakOp = op->getName().stripDialect().str();
  report.peakNode = onnxNodeNames(op->getLoc());
  for (plan_ir::TensorLifetime t : lifetimes.transients) {
    if (t.first > report.peakInstruction || t.last < report.peakInstruction)
      continue;
    const int kind = role.lookup(t.tensor.getSymName());
    (t.tensor.getKind() == TensorKind::input ? report.liveAtPeak.inputs
     : kind == 1                              ? report.liveAtPeak.gatheredUnits
     : kind == 2                              ? report.liveAtPeak.flatGradients
                                              : report.liveAtPeak.activations) += t.bytes;
  }
}

} // namespace

std::optional<MemoryReport> fsdpc::buildMemoryReport(ModuleOp module, std::string &error) {
  auto programs = module.getOps<plan_ir::ProgramOp>();
  if (programs.empty() || !(*programs.begin()).getPersistentBytes()) {
    error = "the module holds no allocated plan.program";
    return std::nullopt;
  }
  plan_ir::ProgramOp program = *programs.begin();
  MemoryReport report;
  report.worldSize = program.getWorldSize();
  if (std::optional<Strategy> strategy = program.getStrategy())
    report.strategy = stringifyStrategy(*strategy).str();
  if (std::optional<int64_t> group = program.getShardGroupSize())
    report.shardGroupSize = *group;
  for (plan_ir::UnitOp unit : program.getBlock().getOps<plan_ir::UnitOp>()) {
    report.parameters += unit.getFlatSize();
    report.paddingElements += unit.getPaddedSize() - unit.getFlatSize();
  }

  llvm::StringMap<plan_ir::TensorOp> tensors;
  for (plan_ir::TensorOp tensor : program.getBlock().getOps<plan_ir::TensorOp>()) {
    tensors[tensor.getSymName()] = tensor;
    int64_t bytes = tensor.getByteSize();
    switch (tensor.getKind()) {
    case TensorKind::parameter:
      report.parameterShards += bytes;
      if (!tensor.getUnit())
        report.parameters += tensor.getTensorType().getNumElements();
      break;
    case TensorKind::gradient:
      report.gradientShards += bytes;
      break;
    case TensorKind::optimizer_state:
      report.optimizerStateShards += bytes;
      break;
    case TensorKind::frozen_parameter:
    case TensorKind::buffer:
    case TensorKind::constant:
    case TensorKind::step_counter:
    case TensorKind::label_count:
      report.otherPersistent += bytes;
      break;
    case TensorKind::input:
    case TensorKind::transient:
    case TensorKind::view:
      break;
    }
  }
  report.persistent = *program.getPersistentBytes();
  report.hostBytes = program.getHostBytes().value_or(0);
  report.transientPeak = *program.getTransientBytes();
  report.predictedPeak = report.persistent + report.transientPeak;

  for (auto collective : program.getBlock().getOps<plan_ir::CollectiveOp>()) {
    auto bytesOf = [&](ArrayAttr refs) {
      return tensors.lookup(cast<FlatSymbolRefAttr>(refs[0]).getValue()).getByteSize();
    };
    StringRef kind = plan_ir::stringifyCollectiveKind(collective.getCollective());
    int64_t group = collective.getGroupSize();
    int64_t full = collective.getCollective() == plan_ir::CollectiveKind::reduce_scatter
                       ? bytesOf(collective.getInputs())
                       : bytesOf(collective.getOutputs());
    CollectiveVolume &volume = report.communication[kind.str()];
    volume.count += 1;
    volume.tensorBytes += full;
    volume.ringBytesPerRank += (kind == "all_reduce" ? 2 : 1) * full * (group - 1) / group;
    if (kind == "all_gather")
      report.largestGatheredUnit = std::max(report.largestGatheredUnit, full);
  }
  addTimeline(program, tensors, report);
  return report;
}

namespace {
std::string mib(int64_t bytes) { return llvm::formatv("{0,10:F3} MiB", bytes / 1048576.0).str(); }
} // namespace

void fsdpc::printMemoryReport(const MemoryReport &r, llvm::raw_ostream &os) {
  os << "memory per rank (" << (r.strategy.empty() ? "unsharded" : r.strategy) << ", world size " << r.worldSize
     << ", shard group " << r.shardGroupSize << "; every rank holds the same):\n";
  os << "  parameters            " << r.parameters << " trainable, " << r.paddingElements << " padding\n";
  os << "  parameter shards      " << mib(r.parameterShards) << "\n";
  os << "  gradient shards       " << mib(r.gradientShards) << "\n";
  os << "  optimizer state shards" << mib(r.optimizerStateShards) << "\n";
  os << "  other persistent      " << mib(r.otherPersistent) << "   (frozen parameters, constants, step)\n";
  os << "  persistent total      " << mib(r.persistent) << "   (with 64-byte alignment)\n";
  os << "  largest gathered unit " << mib(r.largestGatheredUnit) << "\n";
  os << "  transient arena       " << mib(r.transientPeak)
     << "   (activations, gathered units, flat gradients, at their peak)\n";
  os << "  predicted peak        " << mib(r.predictedPeak) << "\n";
  if (r.peakInstruction >= 0) {
    const int64_t live = r.persistent + r.liveAtPeak.total();
    os << "live at the peak:       " << mib(live) << "   after instruction " << r.peakInstruction + 1 << " of "
       << r.liveAfter.size() << " (" << r.peakOp << (r.peakNode.empty() ? "" : " at " + r.peakNode) << ")\n";
    os << "  activations           " << mib(r.liveAtPeak.activations) << "\n";
    os << "  gathered units        " << mib(r.liveAtPeak.gatheredUnits) << "\n";
    os << "  flat gradients        " << mib(r.liveAtPeak.flatGradients) << "\n";
    os << "  inputs                " << mib(r.liveAtPeak.inputs) << "\n";
    os << "  persistent state      " << mib(r.persistent) << "   (shards, optimizer state, constants)\n";
    os << "  arena fragmentation   " << mib(r.predictedPeak - live) << "\n";
  }
  if (!r.offload.empty())
    os << "offload (" << r.offload << "):     " << mib(r.hostBytes)
       << "   in host memory (the offloaded shards and their staging copies); the regions above are "
          "device memory\n";
  os << "communication per step per rank:\n";
  if (r.communication.empty())
    os << "  none\n";
  for (const auto &[kind, volume] : r.communication)
    os << llvm::formatv("  {0,-15} {1,3} calls  {2} of tensors  {3} sent (ring)\n", kind, volume.count,
                        mib(volume.tensorBytes), mib(volume.ringBytesPerRank));
}

void fsdpc::printMemoryReportJson(const MemoryReport &r, llvm::raw_ostream &os) {
  llvm::json::Object communication;
  for (const auto &[kind, volume] : r.communication)
    communication[kind] = llvm::json::Object{{"count", volume.count},
                                             {"tensor_bytes", volume.tensorBytes},
                                             {"ring_bytes_per_rank", volume.ringBytesPerRank}};
  llvm::json::Value value = llvm::json::Object{
      {"strategy", r.strategy},
      {"world_size", r.worldSize},
      {"shard_group_size", r.shardGroupSize},
      {"parameters", r.parameters},
      {"padding_elements", r.paddingElements},
      {"per_rank",
       llvm::json::Object{{"parameter_shard_bytes", r.parameterShards},
                          {"gradient_shard_bytes", r.gradientShards},
                          {"optimizer_state_shard_bytes", r.optimizerStateShards},
                          {"other_persistent_bytes", r.otherPersistent},
                          {"persistent_bytes", r.persistent},
                          {"largest_gathered_unit_bytes", r.largestGatheredUnit},
                          {"transient_bytes", r.transientPeak},
                          {"predicted_peak_bytes", r.predictedPeak}}},
      {"communication_per_step", std::move(communication)},
      {"offload", llvm::json::Object{{"kind", r.offload.empty() ? "none" : r.offload},
                                     {"host_bytes", r.hostBytes},
                                     {"device_peak_bytes", r.predictedPeak}}},
      {"timeline",
       llvm::json::Object{
           {"live_bytes_after_instruction", llvm::json::Array(r.liveAfter)},
           {"peak",
            llvm::json::Object{{"instruction", r.peakInstruction},
                               {"op", r.peakOp},
                               {"node", r.peakNode},
                               {"live_bytes", r.persistent + r.liveAtPeak.total()},
                               {"activation_bytes", r.liveAtPeak.activations},
                               {"gathered_unit_bytes", r.liveAtPeak.gatheredUnits},
                               {"flat_gradient_bytes", r.liveAtPeak.flatGradients},
                               {"input_bytes", r.liveAtPeak.inputs},
                               {"persistent_bytes", r.persistent}}}}},
  };
  os << llvm::formatv("{0:2}", value) << "\n";
}
