//===- Device.h - What runs a plan: memory, streams, kernels ----*- C++ -*-===//
//
// A Device owns everything a plan's step touches: the plan's memory regions
// (persistent and transient arena, sized by the compiler, and the host
// region of an offloaded plan, in pinned host memory on a GPU), the two
// streams (compute and communication) and their events, the kernels that
// implement the kernel contract, and the collective channel the
// communication stream calls. The Executor is device-neutral: it validates
// the plan, asks the device for memory, uploads initial values, resolves
// every instruction once (kernel entry, tensor views, stream, event,
// collective group) and hands the resolved step to the device, which runs it
// each step.
//
// Device memory is addressed by raw pointers that only the device and its
// kernels may dereference; the host moves bytes in and out through upload
// and download (state dicts, checkpoints, batches, the loss).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_DEVICE_H
#define FSDPC_RUNTIME_DEVICE_H

#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/Kernels.h"
#include "fsdpc/runtime/Status.h"
#include "plan.pb.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fsdpc::runtime {

enum class Collective { kAllGather, kReduceScatter, kAllReduce };

/// One plan instruction, decoded once when the plan loads.
struct ResolvedInstruction {
  enum class Kind { kKernel, kCollective, kRecordEvent, kWaitEvent, kCopyToDevice, kCopyToHost };

  const plan::Instruction *instruction = nullptr;
  Kind kind = Kind::kKernel;
  plan::Stream stream = plan::COMPUTE;
  int event = -1; // record / wait
  // Kernels: the device's implementation, its operands (device views) and
  // its parameters, decoded once (shared, so the call's pointer stays valid
  // when the instruction moves).
  KernelFn kernel = nullptr;
  /// A host kernel (plan instruction on_host): `kernel` is hostKernel's,
  /// its operands are in the host region, and the device runs it on the
  /// host in its stream's order.
  bool onHost = false;
  KernelCall call;
  std::shared_ptr<const DecodedParams> params;
  // Collectives.
  Collective collective = Collective::kAllGather;
  Group group;
  Reduction reduction = Reduction::kSum;
  plan::DType dtype = plan::F32;
};

/// When one instruction ran in a step, in seconds since the step began on
/// the host (record and wait instructions: where the stream reached them).
struct InstructionTiming {
  double start = 0, end = 0;
};

/// The memory a device allocates its regions from, so that the ranks
/// sharing it can check before anything is allocated that they fit.
struct MemoryPool {
  std::string id;              // ranks whose pools have one id share the memory
  std::string description;     // "host h1", "GPU cuda:0 (NVIDIA H200) of host h1"
  uint64_t availableBytes = 0; // what is free now; 0 for unknown
  /// Whether the plan's host region (--offload) comes from this pool too:
  /// on the CPU device it is host memory like the other regions.
  bool holdsHostRegion = false;
};

/// This host's name, as ranks compare it to find who shares a host.
std::string hostName();
/// Bytes the kernel reports available for new allocations (MemAvailable),
/// or 0 when it cannot be read.
uint64_t hostMemoryAvailable();

class Device {
public:
  virtual ~Device() = default;
  /// "cpu", "cuda:0", ...
  virtual std::string name() const = 0;
  virtual MemoryPool memoryPool() const = 0;

  /// Reserves the plan's regions, zero-filled; each starts at a multiple of
  /// `alignment` bytes. The host region (0 bytes without --offload) is host
  /// memory the device copies from and to asynchronously: pinned on a GPU.
  virtual Status allocateRegions(uint64_t persistentBytes, uint64_t transientBytes, uint64_t hostBytes,
                                 uint64_t alignment) = 0;
  /// The device address of byte `offset` of `region`.
  virtual void *address(plan::Region region, uint64_t offset) const = 0;
  /// Host to device and back; `bytes` bytes at a device address.
  virtual Status upload(void *device, const void *host, uint64_t bytes) = 0;
  virtual Status download(void *host, const void *device, uint64_t bytes) = 0;
  /// Bytes of the regions the step has really used so far (the peak).
  virtual uint64_t residentBytes() const = 0;
  /// Device memory the step holds besides the plan's regions: kernel
  /// scratch and library workspaces (cuBLASLt's), which the plan does not
  /// count. 0 on the CPU, whose kernels allocate nothing.
  virtual uint64_t auxiliaryBytes() const { return 0; }

  /// This device's kernel for a signature of the kernel contract, or null.
  virtual KernelFn kernel(const std::string &name) const = 0;
  /// The kernel a host instruction (plan on_host) of an offloaded plan
  /// runs: the CPU backend's, on host-region operands; null where the
  /// device cannot run host kernels.
  virtual KernelFn hostKernel(const std::string &name) const { return nullptr; }

  /// Takes the resolved step (in plan order) once, with the number of
  /// events it uses and the channel its collectives go to (null: a plan
  /// without collectives).
  virtual Status prepare(std::vector<ResolvedInstruction> step, int numEvents, CollectiveChannel *channel) = 0;
  /// Runs the prepared step once: each stream in plan order, ordered against
  /// the other by the events; returns when both are done. A failing
  /// instruction's error names its ONNX node.
  virtual Status runStep(const StepContext &context) = 0;
  /// Runs the prepared step's first `count` instructions in plan order (a
  /// prefix the plan marks: the forward pass and loss, for evaluation),
  /// each stream up to there; returns when both are done. A prefix of a
  /// valid step is one: its waits follow their records.
  virtual Status runPrefix(const StepContext &context, int64_t count) = 0;

  /// From now on, times every instruction (a little overhead per call).
  virtual void enableProfiling() = 0;
  /// Seconds spent in each plan instruction (plan order) since profiling
  /// began; record and wait instructions count 0. Empty unless profiling.
  virtual std::vector<double> instructionSeconds() const = 0;

  /// From now on, records when each instruction of every step runs.
  virtual void enableTracing() = 0;
  /// The last step's timings, one per plan instruction in plan order
  /// (empty unless tracing).
  virtual std::vector<InstructionTiming> lastStepTrace() const = 0;
  /// Seconds the compute stream spent waiting, in wait_event, for the
  /// communication stream during the last step: communication that
  /// computation did not hide.
  virtual double lastStepExposedCommSeconds() const = 0;

  /// From now on, checks every float output of every instruction for NaN
  /// and infinities (a pass over the data per instruction); false where the
  /// device cannot.
  virtual bool enableNonfiniteCheck() { return false; }
  /// fsdp-run --cuda-graph: record the whole step once and replay the
  /// recording each step (its shapes and addresses never change). False
  /// where the device has no such thing; it then runs the step as it is.
  virtual bool enableStepCapture() { return false; }
  /// The first instruction, in plan order, of the last step that wrote a
  /// NaN or an infinity: "instruction K 'op'" and its ONNX node; empty when
  /// none did or the check is off.
  virtual std::string firstNonfinite() const { return ""; }
};

/// "instruction K 'op' (at ONNX node N)": how --check-nonfinite names the
/// instruction at plan index `index` on every device.
inline std::string describeInstruction(int64_t index, const plan::Instruction &instruction) {
  return "instruction " + std::to_string(index) + " '" + instruction.op() + "'" +
         (instruction.location().empty() ? std::string() : " (at ONNX node " + instruction.location() + ")");
}

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_DEVICE_H
