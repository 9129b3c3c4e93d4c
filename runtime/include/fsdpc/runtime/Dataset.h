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
  /// A token stream for a language model (nanoGPT / llm.c layout): one flat
  /// file of token ids, `.npy` (1-D, uint16, int32, uint32 or int64) or
  /// `.bin` (llm.c's 256-int32 header then uint16 tokens, or raw uint16),
  /// memory-mapped, so it may be larger than memory. The plan must read one
  /// integer input [batch, T] besides `labels` [batch, T]: sample i is
  /// tokens [i T, i T + T), its labels the same shifted by one.
  static StatusOr<std::unique_ptr<Dataset>> fromTokenFile(const std::string &path, const Executor &executor);

  /// Visits the samples in a new order every epoch: a permutation drawn
  /// from `seed` and the epoch, the same for every rank count (ranks cut
  /// their slices from the same global order).
  void shuffleEveryEpoch(uint64_t seed) {
    shuffle_ = true;
    shuffleSeed_ = seed;
    epoch_ = -1;
  }
  /// The sample global position `position` (step * global batch + j)
  /// reads.
  int64_t sampleAt(int64_t position) const;

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
  // Token streams: the mapped file, its element size, and the input and
  // labels tensors the windows go to.
  /// Writes each LABEL_COUNT tensor: the labels of step `stepIndex`'s
  /// global batch that are not -100.
  Status fillLabelCounts(Executor &executor, int64_t stepIndex, int worldSize) const;
  struct TokenStream {
    /// Token `i` of the file, widened.
    int64_t token(int64_t i) const;
    const uint8_t *tokens = nullptr;
    int64_t count = 0;
    int elementBytes = 2;
    bool isSigned = false;
    int64_t context = 0;
    int inputTensor = -1, labelsTensor = -1;
    void *mapping = nullptr;
    size_t mappingBytes = 0;
  };
  std::unique_ptr<TokenStream, void (*)(TokenStream *)> tokens_{nullptr, nullptr};
  bool shuffle_ = false;
  uint64_t shuffleSeed_ = 0;
  mutable int64_t epoch_ = -1;
  mutable std::vector<int64_t> order_; // this epoch's permutation
  mutable std::vector<uint8_t> staging_; // one input's batch on the host
};

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_DATASET_H
