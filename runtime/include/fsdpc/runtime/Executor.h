//===- Executor.h - Runs a plan's training step on the CPU ------*- C++ -*-===//
//
// The executor owns two memory regions, sized by the compiler: a persistent
// region (parameters, optimizer state, constants) and a transient arena whose
// offsets the compiler already reused across disjoint lifetimes. It runs the
// instruction list on two streams, compute and communication, each in program
// order on its own thread; `record_event` / `wait_event` pairs order them.
// Collectives on the communication stream go to the Communicator.
//
// A unit's parameters live as this rank's shard of the unit's flat
// parameter; the executor cuts that shard from the plan's full initial value
// when it loads, and can gather the full parameters back for a state dict.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_EXECUTOR_H
#define FSDPC_RUNTIME_EXECUTOR_H

#include "fsdpc/runtime/Communicator.h"
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
  /// `communicator` runs the plan's collectives and decides which shard of
  /// each unit this rank holds; it may be null for a plan without units.
  static StatusOr<std::unique_ptr<Executor>> create(PlanFile plan, Communicator *communicator = nullptr);

  const plan::PlanHeader &header() const { return plan_.header; }
  /// Indices of INPUT tensors (graph inputs and labels), in plan order.
  const std::vector<int> &inputTensors() const { return inputTensors_; }
  TensorView view(int tensorIndex) const;

  /// Runs one training step; `step` is 1-based as torch's optimizer counts.
  /// Returns the loss (0 for a forward-only plan).
  StatusOr<float> runStep(int64_t step);

  /// The full trainable and frozen parameters under their ONNX names. The
  /// unit shards are gathered to the first rank of each shard group; every
  /// rank must call this, and only world rank 0 gets the result (others get
  /// an empty list).
  StatusOr<NamedArrays> gatherFullParameters();
  /// Sets the full parameters by ONNX name (each rank keeps its shard);
  /// every parameter of the plan must be present with its shape.
  Status loadFullParameters(const NamedArrays &arrays);
  /// This rank's persistent tensors (parameter, gradient and optimizer-state
  /// shards, frozen parameters, the step counter), by plan tensor name.
  NamedArrays localState() const;
  /// Restores what localState() returned, checking names and shapes.
  Status loadLocalState(const NamedArrays &arrays);

  /// Bytes of tensor memory the plan reserves: both regions.
  uint64_t tensorBytes() const { return plan_.header.persistent_bytes() + plan_.header.transient_bytes(); }
  /// Bytes of both regions that are backed by physical memory now: the pages
  /// kernels and collectives have actually touched. The regions are fresh
  /// mappings that are never released, so this is also the peak.
  uint64_t residentTensorBytes() const;

  /// Times every instruction from now on (a little overhead per call).
  void enableProfiling() { profile_ = true; }
  /// Seconds spent per instruction kind (kernel name, or collective with
  /// " (comm)"), largest first.
  std::vector<std::pair<std::string, double>> profile() const;

private:
  struct Resolved {
    const plan::Instruction *instruction;
    KernelFn kernel; // null for events and collectives
    KernelCall call;
    bool collective = false;
    Group group;                          // for collectives
    Reduction reduction = Reduction::kSum; // for reducing collectives
    double seconds = 0; // with profiling on: time spent in it so far
  };

  Executor() = default;
  Status runCollective(const Resolved &r);
  /// Member index of this rank in its shard group.
  int shardIndex() const;
  Status runStream(std::vector<Resolved> &stream, int64_t step);
  void recordEvent(int event, int64_t step);
  void waitEvent(int event, int64_t step);

  PlanFile plan_;
  Communicator *communicator_ = nullptr;
  uint8_t *persistent_ = nullptr;
  uint8_t *transient_ = nullptr;
  uint64_t persistentMapped_ = 0;
  uint64_t transientMapped_ = 0;
  std::vector<int> inputTensors_;
  int stepTensor_ = -1;
  std::vector<Resolved> computeStream_;
  std::vector<Resolved> commStream_;

  std::mutex eventMutex_;
  std::condition_variable eventSignal_;
  std::vector<int64_t> eventRecordedAtStep_;
  bool streamFailed_ = false;
  bool profile_ = false;
  StepContext context_;
};

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_EXECUTOR_H
