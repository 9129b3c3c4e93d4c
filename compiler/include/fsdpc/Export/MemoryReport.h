//===- MemoryReport.h - What each rank needs, before it runs ----*- C++ -*-===//
//
// Reads an allocated plan.program (and the fsdp.unit ops beside it) and
// states what every rank will hold: parameter, gradient and optimizer-state
// shards, the largest gathered unit, the predicted peak of tensor memory, and
// the bytes each collective moves per step. All ranks run the same plan, so
// one column describes each of them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_EXPORT_MEMORYREPORT_H
#define FSDPC_EXPORT_MEMORYREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fsdpc {

struct CollectiveVolume {
  int64_t count = 0;
  /// Bytes of the full tensors involved (a gather's output, a reduce-scatter's
  /// input, an all-reduce's buffer).
  int64_t tensorBytes = 0;
  /// Bytes each rank sends with a ring algorithm: (G-1)/G of the full tensor
  /// for gather and reduce-scatter, twice that for all-reduce.
  int64_t ringBytesPerRank = 0;
};

/// Transient bytes live at one point of the step, by what they hold.
struct LiveBytes {
  int64_t activations = 0;   // everything else: activations, their gradients, temporaries
  int64_t gatheredUnits = 0; // all_gather outputs: a unit's full parameters
  int64_t flatGradients = 0; // reduce_scatter inputs: a unit's full gradient
  int64_t inputs = 0;        // the batch
  int64_t total() const { return activations + gatheredUnits + flatGradients + inputs; }
};

struct MemoryReport {
  std::string strategy;
  int64_t worldSize = 1;
  int64_t shardGroupSize = 1;
  int64_t parameters = 0;      // trainable elements, without padding
  int64_t paddingElements = 0; // added to make units divide by the shard group
  // Per rank, in bytes.
  int64_t parameterShards = 0;
  int64_t gradientShards = 0;
  int64_t optimizerStateShards = 0;
  int64_t otherPersistent = 0; // frozen parameters, constants, the step counter
  int64_t persistent = 0;      // the persistent region, with alignment
  int64_t largestGatheredUnit = 0;
  int64_t transientPeak = 0;   // the transient arena: activations, gathered units, flat gradients
  int64_t predictedPeak = 0;   // persistent + transient
  std::map<std::string, CollectiveVolume> communication;
  /// --offload: "", "optimizer" or "params"; hostBytes: the host region
  /// (the offloaded shards and their host staging copies). The persistent
  /// region, the arena and the predicted peak are device memory only.
  std::string offload;
  int64_t hostBytes = 0;

  // The timeline: live bytes (persistent + live transient tensors) after
  // every instruction, and what is live at the largest of them. The arena
  // (transientPeak) is at least the live peak; the rest is fragmentation.
  std::vector<int64_t> liveAfter;
  int64_t peakInstruction = -1;
  std::string peakOp, peakNode;
  LiveBytes liveAtPeak;
};

/// The report of the allocated program in `module`, or nothing (with
/// `error` set) if there is none.
std::optional<MemoryReport> buildMemoryReport(mlir::ModuleOp module, std::string &error);

void printMemoryReport(const MemoryReport &report, llvm::raw_ostream &os);
void printMemoryReportJson(const MemoryReport &report, llvm::raw_ostream &os);

} // namespace fsdpc

#endif // FSDPC_EXPORT_MEMORYREPORT_H
