//===- Executor.h - Runs a plan's training step on the CPU ------*- C++ -*-===//
//
// The executor owns two memory regions, sized by the compiler: a persistent
// region (parameters, optimizer state, constants) and a transient arena whose
// offsets the compiler already reused across disjoint lifetimes. It runs the
// instruction list on two streams, compute and communication, each in program
// order on its own thread; `record_event` / `wait_event` pairs order them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_EXECUTOR_H
#define FSDPC_RUNTIME_EXECUTOR_H

#include "fsdpc/runtime/HostArray.h"
#include "fsdpc/runtime/Kernels.h"
#include "fsdpc/runtime/PlanFile.h"
#include "fsdpc/runtime/Safetensors.h"
#include "fsdpc/runtime/Status.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fsdpc::runtime {

class Executor {
public:
  ~Executor();
  static StatusOr<std::unique_ptr<Executor>> create(PlanFile plan);

  const plan::PlanHeader &header() const { return plan_.header; }
  /// Indices of INPUT tensors (graph inputs and labels), in plan order.
  const std::vector<int> &inputTensors() const { return inputTensors_; }
  TensorView view(int tensorIndex) const;

  /// Runs one training step; `step` is 1-based as torch's optimizer counts.
  StatusOr<float> runStep(int64_t step);

  /// Copies of the trainable and frozen parameters under their ONNX names.
  NamedArrays parameters() const;
  /// Bytes of tensor memory this executor holds: both regions.
  uint64_t tensorBytes() const { return plan_.header.persistent_bytes() + plan_.header.transient_bytes(); }

private:
  struct Resolved {
    const plan::Instruction *instruction;
    KernelFn kernel; // null for event instructions
    KernelCall call;
  };

  Executor() = default;
  Status runStream(std::vector<Resolved> &stream, int64_t step);
  void recordEvent(int event, int64_t step);
  void waitEvent(int event, int64_t step);

  PlanFile plan_;
  uint8_t *persistent_ = nullptr;
  uint8_t *transient_ = nullptr;
  std::vector<int> inputTensors_;
  int stepTensor_ = -1;
  std::vector<Resolved> computeStream_;
  std::vector<Resolved> commStream_;

  std::mutex eventMutex_;
  std::condition_variable eventSignal_;
  std::vector<int64_t> eventRecordedAtStep_;
  bool streamFailed_ = false;
};

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_EXECUTOR_H
