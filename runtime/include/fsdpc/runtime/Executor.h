//===- Executor.h - Runs a plan's training step on a Device -----*- C++ -*-===//
//
// The executor is device-neutral. It validates the plan, asks the Device for
// the plan's two memory regions (a persistent region for parameters,
// optimizer state and constants, and a transient arena whose offsets the
// compiler already reused across disjoint lifetimes), uploads initial values,
// resolves every instruction once, and hands the step to the device, which
// runs the compute and communication streams ordered by the plan's events.
//
// A unit's parameters live as this rank's shard of the unit's flat
// parameter; the executor cuts that shard from the plan's full initial value
// when it loads, and can gather the full parameters back for a state dict.
// Everything the host reads or writes (batches, the loss, state dicts,
// checkpoints, forward outputs) goes through the device's upload and
// download.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_EXECUTOR_H
#define FSDPC_RUNTIME_EXECUTOR_H

#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/Device.h"
#include "fsdpc/runtime/HostArray.h"
#include "fsdpc/runtime/PlanFile.h"
#include "fsdpc/runtime/Profile.h"
#include "fsdpc/runtime/Safetensors.h"
#include "fsdpc/runtime/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdpc::runtime {

/// Every parameter of the plan (whole ones and each unit's) drawn from
/// N(0, std^2), deterministically from (seed, parameter name, element): the
/// same on every rank and for every sharding (fsdp-run --init normal:STD,SEED).
NamedArrays normalInitialParameters(const plan::PlanHeader &header, double std, uint64_t seed);

class Executor {
public:
  /// `device` runs the step. `control` tells this rank's place and decides
  /// which shard of each unit it holds; `channel` runs the plan's
  /// collectives. Both may be null for a one-rank plan without collectives.
  static StatusOr<std::unique_ptr<Executor>> create(PlanFile plan, std::unique_ptr<Device> device,
                                                    HostControl *control = nullptr,
                                                    CollectiveChannel *channel = nullptr);

  const plan::PlanHeader &header() const { return plan_.header; }
  const Device &device() const { return *device_; }
  /// Indices of INPUT tensors (graph inputs and labels), in plan order.
  const std::vector<int> &inputTensors() const { return inputTensors_; }
  /// LABEL_COUNT tensors (fsdpc --loss-mean global), each with the INPUT
  /// tensor whose labels it counts over the step's global batch.
  const std::vector<std::pair<int, int>> &labelCounts() const { return labelCounts_; }

  /// Copies a tensor's bytes in from the host / out to the host.
  Status uploadTensor(int tensorIndex, const void *host, uint64_t bytes);
  StatusOr<HostArray> downloadTensor(int tensorIndex) const;

  /// Runs one training step; `step` is 1-based as torch's optimizer counts.
  /// Returns the loss (0 for a forward-only plan).
  StatusOr<float> runStep(int64_t step);
  /// Whether the plan clips gradients, and the last step's global gradient
  /// norm before clipping (the same on every rank).
  bool clipsGradients() const { return plan_.header.has_grad_norm_tensor(); }
  /// The forward pass alone, as evaluation runs it: the plan's marked
  /// prefix (gathers, forward, loss; no backward, no update) on the inputs
  /// uploaded; returns this rank's loss. The parameters do not change.
  StatusOr<float> runForwardPass(int64_t step);
  /// The forward pass up to the model output (forward_output_tensor), as
  /// `fsdp-run --forward` on a training plan runs it: it may stop before
  /// the loss, whose kernel may write over the output.
  Status runForwardToOutput(int64_t step);
  StatusOr<float> lastGradNorm();

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
  StatusOr<NamedArrays> localState() const;
  /// Restores what localState() returned, checking names and shapes.
  Status loadLocalState(const NamedArrays &arrays);

  /// Bytes of tensor memory the plan reserves on the device: both regions
  /// (the host region of --offload apart: hostRegionBytes).
  uint64_t tensorBytes() const { return plan_.header.persistent_bytes() + plan_.header.transient_bytes(); }
  uint64_t hostRegionBytes() const { return plan_.header.host_bytes(); }
  /// Bytes of both regions the device has really used: the peak.
  uint64_t residentTensorBytes() const { return device_->residentBytes(); }

  /// Times every instruction from now on (a little overhead per call).
  void enableProfiling() { device_->enableProfiling(); }
  /// Time and work per kernel (or collective, " (comm)") over the `steps`
  /// steps profiled, largest first.
  std::vector<KernelProfile> profile(int64_t steps) const {
    return summarizeProfile(plan_.header, device_->instructionSeconds(), steps);
  }
  /// The `count` instructions that took longest per step.
  std::vector<InstructionProfile> slowestInstructions(int64_t steps, int count) const {
    return runtime::slowestInstructions(plan_.header, device_->instructionSeconds(), steps, count);
  }
  /// Records when every instruction runs, from now on (see Device).
  void enableTracing() { device_->enableTracing(); }
  std::vector<InstructionTiming> lastStepTrace() const { return device_->lastStepTrace(); }
  double lastStepExposedCommSeconds() const { return device_->lastStepExposedCommSeconds(); }
  bool enableNonfiniteCheck() { return device_->enableNonfiniteCheck(); }
  bool enableStepCapture() { return device_->enableStepCapture(); }
  std::string firstNonfinite() const { return device_->firstNonfinite(); }

private:
  Executor() = default;
  /// The tensor as its kernels see it: shape, dtype and device address.
  TensorView deviceView(int tensorIndex) const;
  /// Member index of this rank in its shard group.
  int shardIndex() const;
  StatusOr<ResolvedInstruction> resolve(const plan::Instruction &inst) const;
  /// The first `instructions` of a training step, on this rank, as the
  /// forward passes run them.
  Status runForwardPrefix(int64_t step, int64_t instructions);

  PlanFile plan_;
  std::unique_ptr<Device> device_;
  HostControl *control_ = nullptr;
  std::vector<int> inputTensors_;
  std::vector<std::pair<int, int>> labelCounts_; // (count, labels)
  int stepTensor_ = -1;
};

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_EXECUTOR_H
