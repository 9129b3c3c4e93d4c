//===- MemoryReport.cpp - What each rank needs, before it runs ------------===//
#include "fsdpc/Export/MemoryReport.h"

#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace fsdpc;
using plan_ir::TensorKind;

std::optional<MemoryReport> fsdpc::buildMemoryReport(ModuleOp module, std::string &error) {
  auto programs = module.getOps<plan_ir::ProgramOp>();
  if (programs.empty() || !(*programs.begin()).getPersistentBytes()) {
    error = "the module holds no allocated plan.program";
    return std::nullopt;
  }
  plan_ir::ProgramOp program = *programs.begin();
  MemoryReport report;
  report.worldSize = program.getWorldSize();
  if (std::optional<StringRef> strategy = program.getStrategy())
    report.strategy = strategy->str();
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
    case TensorKind::constant:
    case TensorKind::step_counter:
      report.otherPersistent += bytes;
      break;
    case TensorKind::input:
    case TensorKind::transient:
    case TensorKind::view:
      break;
    }
  }
  report.persistent = *program.getPersistentBytes();
  report.transientPeak = *program.getTransientBytes();
  report.predictedPeak = report.persistent + report.transientPeak;

  for (auto collective : program.getBlock().getOps<plan_ir::CollectiveOp>()) {
    auto bytesOf = [&](ArrayAttr refs) {
      return tensors.lookup(cast<FlatSymbolRefAttr>(refs[0]).getValue()).getByteSize();
    };
    StringRef kind = collective.getCollective();
    int64_t group = collective.getGroupSize();
    int64_t full = kind == "reduce_scatter" ? bytesOf(collective.getInputs()) : bytesOf(collective.getOutputs());
    CollectiveVolume &volume = report.communication[kind.str()];
    volume.count += 1;
    volume.tensorBytes += full;
    volume.ringBytesPerRank += (kind == "all_reduce" ? 2 : 1) * full * (group - 1) / group;
    if (kind == "all_gather")
      report.largestGatheredUnit = std::max(report.largestGatheredUnit, full);
  }
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
  };
  os << llvm::formatv("{0:2}", value) << "\n";
}
