//===- CudaDevice.cpp - The CUDA backend as a Device ----------------------===//
//
// Enqueue model: runStep walks the plan once, in plan order, on the calling
// thread. Kernels go to their instruction's stream, record_event /
// wait_event become cudaEventRecord / cudaStreamWaitEvent, collectives go
// to NCCL on the communication stream. The plan is a valid serial order of
// both streams, so every wait is enqueued after the record it waits for
// (prepare checks it). The step ends with both streams synchronised and the
// device error word read.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/runtime/CudaDevice.h"

#include "CudaCheck.h"
#include "CudaKernels.h"

#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#define FSDPC_NCCL_RETURN_IF_ERROR(expr)                                                                        \
  do {                                                                                                          \
    ncclResult_t fsdpcNcclResult = (expr);                                                                      \
    if (fsdpcNcclResult != ncclSuccess)                                                                         \
      return ::fsdpc::runtime::Status::error(::fsdpc::runtime::StatusCode::kInternal,                           \
                                             std::string(#expr) + ": " + ncclGetErrorString(fsdpcNcclResult),   \
                                             __FILE__, __LINE__);                                               \
  } while (0)

namespace fsdpc::runtime {

namespace {

using cuda::CudaLaunch;
using cuda::cudaStatus;
using cuda::DeviceError;

/// cuBLASLt's workspace per stream (its heuristics assume some; 32 MiB is
/// what PyTorch gives it on Hopper).
constexpr size_t kGemmWorkspaceBytes = 32ull << 20;

int localRankFromLaunch() {
  // The launch variables of torchrun / srun (LOCAL_RANK) and of Open MPI.
  for (const char *name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return 0;
}

StatusOr<ncclDataType_t> ncclTypeOf(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return ncclFloat32;
  case plan::BF16:
    return ncclBfloat16;
  case plan::F16:
    return ncclFloat16;
  case plan::I64:
    return ncclInt64;
  case plan::I32:
    return ncclInt32;
  case plan::BOOL:
    return ncclUint8;
  default:
    return FSDPC_ERROR(kInvalidArgument, "no NCCL type for dtype ", static_cast<int>(dtype));
  }
}

/// Device memory freed with its owner.
struct DeviceBuffer {
  void *data = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() {
    if (data)
      cudaFree(data);
  }
  Status allocate(size_t size) {
    bytes = std::max<size_t>(size, 256);
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes));
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemset(data, 0, bytes));
    return Status::ok();
  }
};

/// Pinned host memory, for the staged collectives.
struct PinnedBuffer {
  void *data = nullptr;
  ~PinnedBuffer() {
    if (data)
      cudaFreeHost(data);
  }
  Status allocate(size_t bytes) {
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMallocHost(&data, std::max<size_t>(bytes, 256)));
    return Status::ok();
  }
};

/// The first member of `group` that contains world rank `rank`: the NCCL
/// split colour of that group.
int groupFirstMember(int rank, Group group) {
  const int span = group.size * group.stride;
  return (rank / span) * span + rank % group.stride;
}

class CudaDevice final : public Device {
public:
  CudaDevice(int ordinal, HostControl *control) : ordinal_(ordinal), control_(control) {}

  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    if (compute_)
      cudaStreamSynchronize(compute_);
    if (comm_)
      cudaStreamSynchronize(comm_);
    for (auto &[key, comm] : groupComms_)
      ncclCommDestroy(comm);
    if (worldComm_)
      ncclCommDestroy(worldComm_);
    for (cudaEvent_t e : events_)
      cudaEventDestroy(e);
    for (const auto *pairs : {&timers_, &waitTimers_})
      for (const auto &[start, stop] : *pairs) {
        if (start)
          cudaEventDestroy(start);
        if (stop)
          cudaEventDestroy(stop);
      }
    if (origin_)
      cudaEventDestroy(origin_);
    if (graph_)
      cudaGraphExecDestroy(graph_);
    for (cudaEvent_t e : {fork_, join_})
      if (e)
        cudaEventDestroy(e);
    if (lt_)
      cublasLtDestroy(lt_);
    if (compute_)
      cudaStreamDestroy(compute_);
    if (comm_)
      cudaStreamDestroy(comm_);
  }

  Status initialize() {
    FSDPC_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
    cudaDeviceProp props;
    FSDPC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, ordinal_));
    name_ = "cuda:" + std::to_string(ordinal_) + " (" + props.name + ")";
    multiprocessors_ = props.multiProcessorCount;
    std::memcpy(uuid_, props.uuid.bytes, sizeof(uuid_));
    FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&lt_));
    FSDPC_RETURN_IF_ERROR(errorWord_.allocate(sizeof(DeviceError)));
    FSDPC_RETURN_IF_ERROR(contextWord_.allocate(sizeof(StepContext)));
    FSDPC_RETURN_IF_ERROR(hostContext_.allocate(sizeof(StepContext)));
    return Status::ok();
  }

  std::string name() const override { return name_; }
  /// This GPU's memory, which the ranks given the same GPU share.
  MemoryPool memoryPool() const override {
    char uuid[2 * sizeof(uuid_) + 1] = {};
    for (size_t i = 0; i < sizeof(uuid_); ++i)
      std::snprintf(uuid + 2 * i, 3, "%02x", uuid_[i]);
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaSetDevice(ordinal_) != cudaSuccess || cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
      freeBytes = 0;
    return {std::string("gpu:") + uuid, "GPU " + name_ + " of host " + hostName(), freeBytes};
  }

  Status allocateRegions(uint64_t persistentBytes, uint64_t transientBytes, uint64_t hostBytes,
                         uint64_t alignment) override {
    if (256 % alignment != 0)
      return FSDPC_ERROR(kInvalidArgument, "the CUDA device aligns regions to 256 bytes, not to ", alignment);
    FSDPC_RETURN_IF_ERROR(persistent_.allocate(persistentBytes));
    FSDPC_RETURN_IF_ERROR(transient_.allocate(transientBytes));
    // The host region is pinned, so its copies are asynchronous and a CUDA
    // graph can hold them.
    if (hostBytes > 0) {
      FSDPC_RETURN_IF_ERROR(host_.allocate(hostBytes));
      std::memset(host_.data, 0, hostBytes);
      hostBytes_ = hostBytes;
    }
    return Status::ok();
  }
  void *address(plan::Region region, uint64_t offset) const override {
    void *base = region == plan::PERSISTENT ? persistent_.data : region == plan::HOST ? host_.data : transient_.data;
    return static_cast<uint8_t *>(base) + offset;
  }
  // Between steps nothing runs on the device (runStep returns after both
  // streams finish), so plain synchronous copies are ordered correctly.
  Status upload(void *device, const void *host, uint64_t bytes) override {
    if (inHostRegion(device, bytes)) {
      if (bytes > 0)
        std::memcpy(device, host, bytes);
      return Status::ok();
    }
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
    return Status::ok();
  }
  Status download(void *host, const void *device, uint64_t bytes) override {
    if (inHostRegion(device, bytes)) {
      if (bytes > 0)
        std::memcpy(host, device, bytes);
      return Status::ok();
    }
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
    return Status::ok();
  }
  /// The plan's regions, whole: cudaMalloc has no untouched pages.
  uint64_t residentBytes() const override { return persistent_.bytes + transient_.bytes; }
  /// The kernels' scratch and cuBLASLt's workspaces, one per stream.
  uint64_t auxiliaryBytes() const override {
    uint64_t bytes = 0;
    for (const DeviceBuffer *b : {&computeScratch_, &commScratch_, &computeWorkspace_, &commWorkspace_})
      bytes += b->data ? b->bytes : 0;
    return bytes;
  }

  KernelFn kernel(const std::string &name) const override { return cuda::lookupCudaKernel(name).run; }
  /// The CPU backend's kernels, run as host functions on the streams.
  KernelFn hostKernel(const std::string &name) const override { return lookupKernel(name); }

  Status prepare(std::vector<ResolvedInstruction> step, int numEvents, CollectiveChannel *hostChannel) override {
    FSDPC_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
    step_ = std::move(step);
    hostChannel_ = hostChannel;
    events_.assign(numEvents, nullptr);
    for (cudaEvent_t &e : events_)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

    // Every wait must come after the record it waits for, in plan order.
    std::vector<bool> recorded(numEvents, false);
    uint64_t computeScratch = 0, commScratch = 0, collectiveBytes = 0;
    bool commKernels = false;
    for (const ResolvedInstruction &r : step_) {
      if (r.kind == ResolvedInstruction::Kind::kRecordEvent)
        recorded[r.event] = true;
      if (r.kind == ResolvedInstruction::Kind::kWaitEvent && !recorded[r.event])
        return FSDPC_ERROR(kInvalidArgument, "the plan waits on event ", r.event,
                           " before recording it; the CUDA device enqueues in plan order");
      FSDPC_RETURN_IF_ERROR(checkPlacement(r));
      if (r.kind == ResolvedInstruction::Kind::kKernel && !r.onHost) {
        const cuda::ScratchFn scratch = cuda::lookupCudaKernel(r.instruction->op()).scratch;
        const uint64_t bytes = scratch ? scratch(r.call) : 0;
        if (r.stream == plan::COMMUNICATION) {
          commScratch = std::max(commScratch, bytes);
          commKernels = true;
        } else {
          computeScratch = std::max(computeScratch, bytes);
        }
      }
      if (r.kind == ResolvedInstruction::Kind::kCollective) {
        if (!hostChannel_ && !control_)
          return FSDPC_ERROR(kInvalidArgument, "plan has collective '", r.instruction->op(),
                             "' but no other ranks were given");
        const TensorView &in = r.call.inputs[0], &out = r.call.outputs[0];
        collectiveBytes = std::max<uint64_t>(
            collectiveBytes, std::max(in.numElements(), out.numElements()) * dtypeSize(in.dtype));
      }
    }
    // Kernels on one stream run one at a time, so they share its scratch.
    FSDPC_RETURN_IF_ERROR(computeScratch_.allocate(computeScratch));
    FSDPC_RETURN_IF_ERROR(computeWorkspace_.allocate(kGemmWorkspaceBytes));
    if (commKernels) {
      FSDPC_RETURN_IF_ERROR(commScratch_.allocate(commScratch));
      FSDPC_RETURN_IF_ERROR(commWorkspace_.allocate(kGemmWorkspaceBytes));
    }
    // Exposed communication: two timing events around each wait of the
    // compute stream measure how long it stalled there.
    waitTimers_.assign(step_.size(), {nullptr, nullptr});
    for (size_t i = 0; i < step_.size(); ++i)
      if (step_[i].kind == ResolvedInstruction::Kind::kWaitEvent && step_[i].stream != plan::COMMUNICATION) {
        FSDPC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&waitTimers_[i].first));
        FSDPC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&waitTimers_[i].second));
      }
    launches_.resize(step_.size());
    hostLaunches_.assign(step_.size(), HostLaunch());
    for (size_t i = 0; i < step_.size(); ++i) {
      ResolvedInstruction &r = step_[i];
      r.call.context = &context_;
      if (r.onHost) { // a CPU kernel: no CUDA launch state
        hostLaunches_[i].kernel = r.kernel;
        hostLaunches_[i].call = &r.call;
        continue;
      }
      CudaLaunch &launch = launches_[i];
      const bool onComm = r.stream == plan::COMMUNICATION;
      launch.stream = onComm ? comm_ : compute_;
      launch.error = static_cast<DeviceError *>(errorWord_.data);
      launch.instruction = static_cast<int>(i);
      launch.lt = lt_;
      const DeviceBuffer &workspace = onComm ? commWorkspace_ : computeWorkspace_;
      const DeviceBuffer &scratch = onComm ? commScratch_ : computeScratch_;
      launch.workspace = workspace.data;
      launch.workspaceBytes = workspace.data ? workspace.bytes : 0;
      launch.scratch = scratch.data;
      launch.scratchBytes = scratch.data ? scratch.bytes : 0;
      launch.multiprocessors = multiprocessors_;
      launch.context = static_cast<const StepContext *>(contextWord_.data);
      r.call.backend = &launch;
    }
    if (collectiveBytes > 0)
      FSDPC_RETURN_IF_ERROR(prepareCollectives(collectiveBytes));
    return Status::ok();
  }

  Status runStep(const StepContext &context) override {
    return runPrefix(context, static_cast<int64_t>(step_.size()));
  }

  Status runPrefix(const StepContext &context, int64_t count) override {
    FSDPC_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
    context_ = context;
    // The step's context for the kernels that read it on the device; the
    // previous step's copy has finished (every step ends synchronised).
    *static_cast<StepContext *>(hostContext_.data) = context;
    FSDPC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(contextWord_.data, hostContext_.data, sizeof(StepContext), cudaMemcpyHostToDevice, compute_));
    const bool timed = profile_ || trace_;
    const size_t limit = std::min(step_.size(), static_cast<size_t>(std::max<int64_t>(count, 0)));
    // --cuda-graph: the first whole step runs as it is (cuBLASLt makes its
    // plans, nothing is captured half-made), the second is captured, and
    // from then on the graph replays. Host work inside the step (the
    // host-staged collectives) and per-instruction timing or checks cannot
    // be in a graph: those runs stay as they are.
    const bool replayable = capture_ && limit == step_.size() && !timed && !checkNonfinite_ && !sharedGpu_;
    if (replayable && !graph_ && completedSteps_ >= 1) {
      Status captured = captureStep();
      if (!captured.isOk()) {
        capture_ = false;
        std::fprintf(stderr, "fsdp-run: note: the step cannot be captured as a CUDA graph (%s); it runs as it is\n",
                     captured.toString().c_str());
      }
    }
    if (replayable && graph_) {
      FSDPC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_, compute_));
      FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_));
      FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(comm_));
      FSDPC_RETURN_IF_ERROR(checkDeviceError());
      FSDPC_RETURN_IF_ERROR(checkHostKernels());
      nonfiniteIndex_ = -1;
      exposedCommSeconds_ = 0; // a graph's waits are not timed
      ++completedSteps_;
      return Status::ok();
    }

    if (trace_)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(origin_, compute_));
    nonfiniteIndex_ = -1;
    if (checkNonfinite_) {
      // Done before either stream starts, so no check can see last step's.
      FSDPC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(firstNonfiniteWord_.data, 0xff, sizeof(unsigned long long), compute_));
      FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_));
    }
    for (size_t i = 0; i < limit; ++i) {
      Status status = enqueueInstruction(i, timed, /*timeWaits=*/true);
      if (!status.isOk()) {
        cudaStreamSynchronize(compute_);
        cudaStreamSynchronize(comm_);
        return atNode(status, step_[i]);
      }
    }
    FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_));
    FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(comm_));
    FSDPC_RETURN_IF_ERROR(checkDeviceError());
    FSDPC_RETURN_IF_ERROR(checkHostKernels());
    if (checkNonfinite_) {
      unsigned long long first = 0;
      FSDPC_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(&first, firstNonfiniteWord_.data, sizeof(first), cudaMemcpyDeviceToHost));
      if (first < step_.size())
        nonfiniteIndex_ = static_cast<int64_t>(first);
    }
    exposedCommSeconds_ = 0;
    // Only what ran: a prefix leaves the later events unrecorded.
    for (size_t i = 0; i < limit; ++i)
      if (const auto &[start, stop] = waitTimers_[i]; start) {
        float ms = 0;
        FSDPC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
        exposedCommSeconds_ += ms / 1000.0;
      }
    for (size_t i = 0; timed && i < limit; ++i) {
      float ms = 0;
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, timers_[i].first, timers_[i].second));
      const ResolvedInstruction::Kind kind = step_[i].kind;
      if (profile_ && kind != ResolvedInstruction::Kind::kRecordEvent && kind != ResolvedInstruction::Kind::kWaitEvent)
        seconds_[i] += ms / 1000.0;
      if (trace_) {
        float startMs = 0;
        FSDPC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&startMs, origin_, timers_[i].first));
        timings_[i] = {startMs / 1000.0, (startMs + ms) / 1000.0};
      }
    }
    if (limit == step_.size())
      ++completedSteps_;
    return Status::ok();
  }

  bool enableStepCapture() override {
    capture_ = true;
    return true;
  }

  void enableProfiling() override {
    if (createTimers()) {
      seconds_.assign(step_.size(), 0.0);
      profile_ = true;
    }
  }

  void enableTracing() override {
    if (!origin_ && cudaEventCreate(&origin_) != cudaSuccess)
      return;
    if (createTimers()) {
      timings_.assign(step_.size(), InstructionTiming());
      trace_ = true;
    }
  }
  std::vector<InstructionTiming> lastStepTrace() const override { return timings_; }

  bool enableNonfiniteCheck() override {
    if (!firstNonfiniteWord_.data && !firstNonfiniteWord_.allocate(sizeof(unsigned long long)).isOk())
      return false;
    checkNonfinite_ = true;
    return true;
  }
  std::string firstNonfinite() const override {
    if (nonfiniteIndex_ < 0) // runPrefix sets it only to an index of step_
      return "";
    return describeInstruction(nonfiniteIndex_, *step_[nonfiniteIndex_].instruction);
  }
  double lastStepExposedCommSeconds() const override { return exposedCommSeconds_; }

  std::vector<double> instructionSeconds() const override { return profile_ ? seconds_ : std::vector<double>(); }

private:
  /// Enqueues instruction `i` on its stream, with its timing events when
  /// `timed`, the compute stream's wait timers when `timeWaits`, and the
  /// non-finite check when on.
  Status enqueueInstruction(size_t i, bool timed, bool timeWaits) {
    const ResolvedInstruction &r = step_[i];
    const cudaStream_t stream = r.stream == plan::COMMUNICATION ? comm_ : compute_;
    Status status;
    if (timed)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(timers_[i].first, stream));
    if (timeWaits && waitTimers_[i].first)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(waitTimers_[i].first, stream));
    switch (r.kind) {
    case ResolvedInstruction::Kind::kRecordEvent:
      status = cudaStatus(cudaEventRecord(events_[r.event], stream), "cudaEventRecord");
      break;
    case ResolvedInstruction::Kind::kWaitEvent:
      status = cudaStatus(cudaStreamWaitEvent(stream, events_[r.event], 0), "cudaStreamWaitEvent");
      break;
    case ResolvedInstruction::Kind::kCollective:
      status = runCollective(r, stream);
      break;
    case ResolvedInstruction::Kind::kCopyToDevice:
    case ResolvedInstruction::Kind::kCopyToHost: {
      const TensorView &from = r.call.inputs[0], &to = r.call.outputs[0];
      const cudaMemcpyKind direction =
          r.kind == ResolvedInstruction::Kind::kCopyToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
      status =
          cudaStatus(cudaMemcpyAsync(to.data, from.data, from.numElements() * dtypeSize(from.dtype), direction, stream),
                     "cudaMemcpyAsync");
      break;
    }
    case ResolvedInstruction::Kind::kKernel:
      // A host kernel runs when the stream reaches it, and holds the stream
      // until it returns (its failure is read after the step).
      status = r.onHost ? cudaStatus(cudaLaunchHostFunc(stream, runHostKernel, &hostLaunches_[i]), "cudaLaunchHostFunc")
                        : r.kernel(r.call);
      break;
    }
    if (timeWaits && waitTimers_[i].second)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(waitTimers_[i].second, stream));
    if (timed)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventRecord(timers_[i].second, stream));
    // On the instruction's stream, so it reads the outputs before any
    // later instruction reuses their memory.
    // Only device memory: the host kernels' outputs are checked once a
    // copy brings them to the device.
    const bool wrote = (r.kind == ResolvedInstruction::Kind::kKernel && !r.onHost) ||
                       r.kind == ResolvedInstruction::Kind::kCollective ||
                       r.kind == ResolvedInstruction::Kind::kCopyToDevice;
    for (size_t o = 0; status.isOk() && checkNonfinite_ && wrote && o < r.call.outputs.size(); ++o)
      status = cuda::noteNonfinite(r.call.outputs[o], launches_[i],
                                   static_cast<unsigned long long *>(firstNonfiniteWord_.data));
    return status;
  }

  /// Records the whole step, both streams, into graph_. The communication
  /// stream joins the capture through fork_ and is joined back through
  /// join_, as CUDA requires of a capture that spans streams.
  Status captureStep() {
    if (!fork_)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    if (!join_)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
    FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
    Status status = cudaStatus(cudaEventRecord(fork_, compute_), "cudaEventRecord");
    if (status.isOk())
      status = cudaStatus(cudaStreamWaitEvent(comm_, fork_, 0), "cudaStreamWaitEvent");
    for (size_t i = 0; status.isOk() && i < step_.size(); ++i) {
      status = enqueueInstruction(i, /*timed=*/false, /*timeWaits=*/false);
      if (!status.isOk())
        status = atNode(status, step_[i]);
    }
    if (status.isOk())
      status = cudaStatus(cudaEventRecord(join_, comm_), "cudaEventRecord");
    if (status.isOk())
      status = cudaStatus(cudaStreamWaitEvent(compute_, join_, 0), "cudaStreamWaitEvent");
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(compute_, &graph);
    if (status.isOk() && ended != cudaSuccess)
      status = cudaStatus(ended, "cudaStreamEndCapture");
    if (status.isOk())
      status = cudaStatus(cudaGraphInstantiate(&graph_, graph, 0), "cudaGraphInstantiate");
    if (graph)
      cudaGraphDestroy(graph);
    if (!status.isOk()) {
      cudaGetLastError(); // a failed capture leaves its error behind
      graph_ = nullptr;
    }
    return status;
  }

  /// Timing events around every instruction, for profiling and tracing;
  /// false (and both stay off) if they cannot be made.
  bool createTimers() {
    if (!timers_.empty())
      return true;
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timers(step_.size(), {nullptr, nullptr});
    for (auto &[start, stop] : timers)
      if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess)
        return false;
    timers_ = std::move(timers);
    return true;
  }

  static Status atNode(const Status &status, const ResolvedInstruction &r) {
    const std::string &location = r.instruction->location();
    if (location.empty())
      return status;
    return Status::error(status.code(), status.message() + " (at ONNX node " + location + ")", status.file(),
                         status.line());
  }

  /// A host kernel's call, as the host function the stream runs gets it.
  struct HostLaunch {
    KernelFn kernel = nullptr;
    const KernelCall *call = nullptr;
    Status status;
  };
  static void runHostKernel(void *launch) {
    auto *host = static_cast<HostLaunch *>(launch);
    host->status = host->kernel(*host->call);
  }

  /// The first host kernel of the step that failed, in plan order; clears
  /// every status for the next step.
  Status checkHostKernels() {
    Status first;
    for (size_t i = 0; i < hostLaunches_.size(); ++i) {
      if (first.isOk() && !hostLaunches_[i].status.isOk())
        first = atNode(hostLaunches_[i].status, step_[i]);
      hostLaunches_[i].status = Status::ok();
    }
    return first;
  }

  bool inHostRegion(const void *pointer, uint64_t bytes) const {
    const auto *p = static_cast<const uint8_t *>(pointer), *base = static_cast<const uint8_t *>(host_.data);
    return host_.data && p >= base && bytes <= hostBytes_ && static_cast<uint64_t>(p - base) <= hostBytes_ - bytes;
  }

  /// Host kernels touch the host region only, and in f32 / i64 (the CPU
  /// kernels' types; the CPU device widens narrow ones, a host function
  /// here does not); device work never touches it. validatePlan checked
  /// the plan's regions; this checks the addresses the kernels get.
  Status checkPlacement(const ResolvedInstruction &r) const {
    const bool copy =
        r.kind == ResolvedInstruction::Kind::kCopyToDevice || r.kind == ResolvedInstruction::Kind::kCopyToHost;
    if (r.kind == ResolvedInstruction::Kind::kRecordEvent || r.kind == ResolvedInstruction::Kind::kWaitEvent)
      return Status::ok();
    for (const auto *views : {&r.call.inputs, &r.call.outputs})
      for (size_t k = 0; k < views->size(); ++k) {
        const TensorView &v = (*views)[k];
        const bool wantHost =
            copy ? (views == &r.call.inputs) == (r.kind == ResolvedInstruction::Kind::kCopyToDevice) : r.onHost;
        if (inHostRegion(v.data, v.numElements() * dtypeSize(v.dtype)) != wantHost)
          return atNode(FSDPC_ERROR(kInvalidArgument, "'", r.instruction->op(), "' runs on the ",
                                    wantHost ? "host" : "device", " but its ",
                                    views == &r.call.inputs ? "input" : "output", " ", k, " is in ",
                                    wantHost ? "device" : "host", " memory"),
                        r);
        if (r.onHost && (isNarrowFloat(v.dtype) || v.dtype == plan::I32 || v.dtype == plan::BOOL))
          return atNode(FSDPC_ERROR(kUnimplemented, "host kernel '", r.instruction->op(), "' has a ",
                                    plan::DType_Name(v.dtype),
                                    " operand; host kernels on the CUDA device take f32 and i64"),
                        r);
      }
    return Status::ok();
  }

  /// Reads the error word the kernels report bad data through, and clears it.
  Status checkDeviceError() {
    DeviceError error;
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpy(&error, errorWord_.data, sizeof(error), cudaMemcpyDeviceToHost));
    if (error.instruction == 0)
      return Status::ok();
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemset(errorWord_.data, 0, sizeof(error)));
    const size_t index = static_cast<size_t>(error.instruction - 1);
    if (index >= step_.size())
      return FSDPC_ERROR(kInternal, "the device error word names no instruction");
    const ResolvedInstruction &r = step_[index];
    const std::string &op = r.instruction->op();
    Status status = op.find("cross_entropy") != std::string::npos
                        ? FSDPC_ERROR(kInvalidArgument, op, ": label ", error.value, " at row ", error.position,
                                      " is outside [0, ", error.limit, ")")
                        : FSDPC_ERROR(kInvalidArgument, op, ": index ", error.value, " at position ", error.position,
                                      " is outside [", -error.limit, ", ", error.limit, ")");
    return atNode(status, r);
  }

  /// NCCL when every rank has a GPU of its own, else MPI on pinned host
  /// copies (NCCL refuses two ranks on one GPU).
  Status prepareCollectives(uint64_t collectiveBytes) {
    const int worldSize = control_ ? control_->worldSize() : 1;
    const int rank = control_ ? control_->rank() : 0;
    sharedGpu_ = false;
    size_t gpus = 1;
    if (worldSize > 1) {
      std::vector<unsigned char> all(16 * worldSize);
      FSDPC_RETURN_IF_ERROR(control_->allGatherBytes(uuid_, all.data(), 16));
      std::set<std::string> distinct;
      for (int r = 0; r < worldSize; ++r)
        distinct.insert(std::string(reinterpret_cast<const char *>(all.data() + 16 * r), 16));
      gpus = distinct.size();
      sharedGpu_ = static_cast<int>(gpus) < worldSize;
    }
    if (sharedGpu_) {
      if (!hostChannel_)
        return FSDPC_ERROR(kInvalidArgument, "ranks share a GPU and no host channel was given");
      if (rank == 0)
        std::fprintf(stderr, "fsdp-run: %d ranks share %zu GPU(s); NCCL refuses that, so collectives go through "
                             "MPI on host-staged buffers\n",
                     worldSize, gpus);
      FSDPC_RETURN_IF_ERROR(stagingIn_.allocate(collectiveBytes));
      FSDPC_RETURN_IF_ERROR(stagingOut_.allocate(collectiveBytes));
      return Status::ok();
    }
    ncclUniqueId id;
    if (rank == 0)
      FSDPC_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    if (control_ && worldSize > 1)
      FSDPC_RETURN_IF_ERROR(control_->broadcastBytes(&id, sizeof(id), 0));
    FSDPC_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&worldComm_, worldSize, id, rank));
    // One communicator per group shape the plan uses, split from the world
    // in plan order (the same on every rank).
    for (const ResolvedInstruction &r : step_) {
      if (r.kind != ResolvedInstruction::Kind::kCollective || r.group.size <= 1)
        continue;
      const std::pair<int, int> key(r.group.size, r.group.stride);
      if (groupComms_.count(key))
        continue;
      ncclComm_t comm;
      if (r.group.size == worldSize)
        FSDPC_NCCL_RETURN_IF_ERROR(ncclCommSplit(worldComm_, 0, rank, &comm, nullptr));
      else
        FSDPC_NCCL_RETURN_IF_ERROR(ncclCommSplit(worldComm_, groupFirstMember(rank, r.group), rank, &comm, nullptr));
      groupComms_[key] = comm;
    }
    return Status::ok();
  }

  Status runCollective(const ResolvedInstruction &r, cudaStream_t stream) {
    const TensorView &in = r.call.inputs[0], &out = r.call.outputs[0];
    const uint64_t inBytes = in.numElements() * dtypeSize(in.dtype), outBytes = out.numElements() * dtypeSize(out.dtype);
    if (r.group.size <= 1) { // a group of one: the collective is a copy
      if (in.data != out.data)
        FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.data, in.data, outBytes, cudaMemcpyDeviceToDevice, stream));
      return Status::ok();
    }
    if (sharedGpu_)
      return runStagedCollective(r, stream, inBytes, outBytes);
    StatusOr<ncclDataType_t> type = ncclTypeOf(r.dtype);
    if (!type.isOk())
      return type.status();
    ncclComm_t comm = groupComms_.at({r.group.size, r.group.stride});
    const ncclRedOp_t op = r.reduction == Reduction::kAvg ? ncclAvg : ncclSum;
    switch (r.collective) {
    case Collective::kAllGather:
      FSDPC_NCCL_RETURN_IF_ERROR(ncclAllGather(in.data, out.data, in.numElements(), *type, comm, stream));
      break;
    case Collective::kReduceScatter:
      FSDPC_NCCL_RETURN_IF_ERROR(ncclReduceScatter(in.data, out.data, out.numElements(), *type, op, comm, stream));
      break;
    case Collective::kAllReduce:
      FSDPC_NCCL_RETURN_IF_ERROR(ncclAllReduce(in.data, out.data, out.numElements(), *type, op, comm, stream));
      break;
    }
    return Status::ok();
  }

  /// Waits for the stream, copies the input to pinned memory, runs the
  /// host channel's collective and copies the result back.
  Status runStagedCollective(const ResolvedInstruction &r, cudaStream_t stream, uint64_t inBytes, uint64_t outBytes) {
    const TensorView &in = r.call.inputs[0], &out = r.call.outputs[0];
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(stagingIn_.data, in.data, inBytes, cudaMemcpyDeviceToHost, stream));
    FSDPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    switch (r.collective) {
    case Collective::kAllGather:
      FSDPC_RETURN_IF_ERROR(
          hostChannel_->allGather(stagingIn_.data, stagingOut_.data, in.numElements(), r.dtype, r.group));
      break;
    case Collective::kReduceScatter:
      FSDPC_RETURN_IF_ERROR(hostChannel_->reduceScatter(stagingIn_.data, stagingOut_.data, out.numElements(), r.dtype,
                                                        r.reduction, r.group));
      break;
    case Collective::kAllReduce:
      std::memcpy(stagingOut_.data, stagingIn_.data, inBytes);
      FSDPC_RETURN_IF_ERROR(
          hostChannel_->allReduce(stagingOut_.data, out.numElements(), r.dtype, r.reduction, r.group));
      break;
    }
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.data, stagingOut_.data, outBytes, cudaMemcpyHostToDevice, stream));
    return Status::ok();
  }

  int ordinal_;
  HostControl *control_;
  std::string name_;
  int multiprocessors_ = 1;
  unsigned char uuid_[16] = {};
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer persistent_, transient_, errorWord_;
  /// The host region (fsdpc --offload), pinned, and the host kernels' calls.
  PinnedBuffer host_;
  uint64_t hostBytes_ = 0;
  std::vector<HostLaunch> hostLaunches_;
  DeviceBuffer computeScratch_, commScratch_, computeWorkspace_, commWorkspace_;
  std::vector<ResolvedInstruction> step_;
  std::vector<CudaLaunch> launches_;
  std::vector<cudaEvent_t> events_;
  StepContext context_;
  CollectiveChannel *hostChannel_ = nullptr;
  bool sharedGpu_ = false;
  PinnedBuffer stagingIn_, stagingOut_;
  ncclComm_t worldComm_ = nullptr;
  std::map<std::pair<int, int>, ncclComm_t> groupComms_;
  bool profile_ = false, trace_ = false;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timers_, waitTimers_;
  cudaEvent_t origin_ = nullptr; // the step's start, for the trace
  std::vector<double> seconds_;
  std::vector<InstructionTiming> timings_;
  double exposedCommSeconds_ = 0;
  /// --check-nonfinite: the plan index of the first instruction of the
  /// step that wrote a NaN or an infinity (all ones for none) on the
  /// device, and what the host read of it after the step.
  DeviceBuffer firstNonfiniteWord_;
  bool checkNonfinite_ = false;
  int64_t nonfiniteIndex_ = -1;
  /// The step's StepContext on the device, and its pinned host copy.
  DeviceBuffer contextWord_;
  PinnedBuffer hostContext_;
  /// --cuda-graph: whether to capture, the instantiated step, and the
  /// events that fork the communication stream into the capture and join
  /// it back.
  bool capture_ = false;
  cudaGraphExec_t graph_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  int64_t completedSteps_ = 0;
};

} // namespace

bool cudaBackendBuilt() { return true; }

int cudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // no driver or no GPU: clear the sticky error
    return 0;
  }
  return count;
}

StatusOr<std::unique_ptr<Device>> createCudaDevice(HostControl *control) {
  const int count = cudaDeviceCount();
  if (count == 0)
    return FSDPC_ERROR(kUnimplemented, "no CUDA device is visible");
  auto device = std::make_unique<CudaDevice>(localRankFromLaunch() % count, control);
  FSDPC_RETURN_IF_ERROR(device->initialize());
  return std::unique_ptr<Device>(std::move(device));
}

std::vector<std::string> cudaKernelNames() { return cuda::cudaKernelNames(); }

} // namespace fsdpc::runtime
