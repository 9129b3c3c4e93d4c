//===- Dataset.h - Where each step's batch comes from -----------*- C++ -*-===//
//
// A plan's INPUT tensors (the model's graph inputs and `labels`) are filled
// before every step. Step i uses global samples [i*B, (i+1)*B), wrapping
// around the dataset; a rank of a sharded run takes its contiguous slice.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_DATASET_H
#define FSDPC_RUNTIME_DATASET_H

#include "fsdpc/runtime/Executor.h"
#include "fsdpc/runtime/HostArray.h"
#include "fsdpc/runtime/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdpc::runtime {

class Dataset {
public:
  /// Reads `<input name>.npy` for every INPUT tensor of the plan from `dir`,
  /// checking dtypes, per-sample shapes and that all hold as many samples.
  static StatusOr<std::unique_ptr<Dataset>> fromNpyDirectory(const std::string &dir, const Executor &executor);
  /// A deterministic dataset of `numSamples` samples: float inputs drawn from
  /// N(0,1), labels given by a fixed random linear teacher, so training
  /// really lowers the loss.
  static StatusOr<std::unique_ptr<Dataset>> synthetic(const Executor &executor, uint64_t seed, int64_t numSamples);

  int64_t numSamples() const { return numSamples_; }
  /// Copies the samples of global step `stepIndex` (0-based) for `rank` of
  /// `worldSize` into the executor's input tensors (through the device's
  /// upload).
  Status fillBatch(Executor &executor, int64_t stepIndex, int rank, int worldSize) const;

private:
  struct Column {
    int tensorIndex;
    HostArray samples; // [numSamples, ...per-sample shape]
  };
  std::vector<Column> columns_;
  int64_t numSamples_ = 0;
  mutable std::vector<uint8_t> staging_; // one input's batch on the host
};

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_DATASET_H
