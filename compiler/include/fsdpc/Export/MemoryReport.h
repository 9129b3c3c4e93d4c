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
};

/// The report of the allocated program in `module`, or nothing (with
/// `error` set) if there is none.
std::optional<MemoryReport> buildMemoryReport(mlir::ModuleOp module, std::string &error);

void printMemoryReport(const MemoryReport &report, llvm::raw_ostream &os);
void printMemoryReportJson(const MemoryReport &report, llvm::raw_ostream &os);

} // namespace fsdpc

#endif // FSDPC_EXPORT_MEMORYREPORT_H
