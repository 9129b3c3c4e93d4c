//===- CpuDevice.cpp - The CPU backend as a Device ------------------------===//
#include "fsdpc/runtime/CpuDevice.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

// OpenBLAS's own thread pool spins between calls; next to OpenMP's it
// makes both pools fight over the cores (elementwise kernels ran 40x
// slower). So BLAS runs single-threaded and the kernels split GEMMs across
// OpenMP threads themselves. Weak, so another BLAS still links.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace fsdpc::runtime {

namespace {

uint64_t pageSize() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

/// A zeroed region whose pages become resident only when first touched, so
/// residency measures what the plan really uses.
struct MappedRegion {
  uint8_t *base = nullptr;
  uint64_t mapped = 0;

  ~MappedRegion() {
    if (base)
      munmap(base, mapped);
  }
  bool map(uint64_t bytes) {
    mapped = std::max<uint64_t>((bytes + pageSize() - 1) / pageSize() * pageSize(), pageSize());
    void *region = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = region == MAP_FAILED ? nullptr : static_cast<uint8_t *>(region);
    return base != nullptr;
  }
  uint64_t resident() const {
    if (!base)
      return 0;
    std::vector<unsigned char> pages(mapped / pageSize());
    if (mincore(base, mapped, pages.data()) != 0)
      return 0;
    uint64_t bytes = 0;
    for (unsigned char page : pages)
      bytes += (page & 1) ? pageSize() : 0;
    return bytes;
  }
};

/// One stream's instructions, and the time each took when profiling.
struct Stream {
  std::vector<ResolvedInstruction> instructions;
  std::vector<double> seconds;
};

class CpuDevice final : public Device {
public:
  CpuDevice() {
    if (openblas_set_num_threads)
      openblas_set_num_threads(1);
  }
  ~CpuDevice() override { stopWorker(); }

  std::string name() const override { return "cpu"; }

  Status allocateRegions(uint64_t persistentBytes, uint64_t transientBytes, uint64_t alignment) override {
    if (pageSize() % alignment != 0)
      return FSDPC_ERROR(kInvalidArgument, "the CPU device aligns regions to pages, not to ", alignment, " bytes");
    if (!persistent_.map(persistentBytes) || !transient_.map(transientBytes))
      return FSDPC_ERROR(kInvalidArgument, "cannot allocate ", persistentBytes + transientBytes,
                         " bytes of tensor memory");
    return Status::ok();
  }
  void *address(plan::Region region, uint64_t offset) const override {
    return (region == plan::PERSISTENT ? persistent_.base : transient_.base) + offset;
  }
  Status upload(void *device, const void *host, uint64_t bytes) override {
    std::memcpy(device, host, bytes);
    return Status::ok();
  }
  Status download(void *host, const void *device, uint64_t bytes) override {
    std::memcpy(host, device, bytes);
    return Status::ok();
  }
  uint64_t residentBytes() const override { return persistent_.resident() + transient_.resident(); }

  KernelFn kernel(const std::string &name) const override { return lookupKernel(name); }

  Status prepare(std::vector<ResolvedInstruction> step, int numEvents, CollectiveChannel *channel) override {
    channel_ = channel;
    for (ResolvedInstruction &r : step) {
      r.call.context = &context_;
      if (r.kind == ResolvedInstruction::Kind::kCollective && !channel_)
        return FSDPC_ERROR(kInvalidArgument, "plan has collective '", r.instruction->op(),
                           "' but no collective channel was given");
      (r.stream == plan::COMMUNICATION ? comm_ : compute_).instructions.push_back(std::move(r));
    }
    compute_.seconds.assign(compute_.instructions.size(), 0.0);
    comm_.seconds.assign(comm_.instructions.size(), 0.0);
    eventRecordedAtStep_.assign(numEvents, 0);
    if (!comm_.instructions.empty())
      worker_ = std::thread([this] { commWorker(); });
    return Status::ok();
  }

  Status runStep(const StepContext &context) override {
    context_ = context;
    if (worker_.joinable()) {
      std::lock_guard<std::mutex> lock(mutex_);
      requestedStep_ = context.step;
    }
    signal_.notify_all();
    Status computeStatus = runStream(compute_, context.step);
    if (worker_.joinable()) {
      std::unique_lock<std::mutex> lock(mutex_);
      signal_.wait(lock, [&] { return finishedStep_ == context.step; });
    }
    FSDPC_RETURN_IF_ERROR(computeStatus);
    return commStatus_;
  }

  void enableProfiling() override { profile_ = true; }

  std::vector<std::pair<std::string, double>> profile() const override {
    std::map<std::string, double> byOp;
    for (const Stream *stream : {&compute_, &comm_})
      for (size_t i = 0; i < stream->instructions.size(); ++i)
        if (stream->seconds[i] > 0) {
          const plan::Instruction &inst = *stream->instructions[i].instruction;
          byOp[inst.op() + (inst.stream() == plan::COMMUNICATION ? " (comm)" : "")] += stream->seconds[i];
        }
    std::vector<std::pair<std::string, double>> sorted(byOp.begin(), byOp.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
    return sorted;
  }

private:
  /// The communication stream's persistent thread: runs the stream once for
  /// every step runStep asks for.
  void commWorker() {
    int64_t lastStep = -1;
    for (;;) {
      int64_t step;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        signal_.wait(lock, [&] { return stopping_ || requestedStep_ != lastStep; });
        if (stopping_)
          return;
        step = lastStep = requestedStep_;
      }
      Status status = runStream(comm_, step);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        commStatus_ = status;
        finishedStep_ = step;
      }
      signal_.notify_all();
    }
  }

  void stopWorker() {
    if (!worker_.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    signal_.notify_all();
    worker_.join();
  }

  void recordEvent(int event, int64_t step) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      eventRecordedAtStep_[event] = step;
    }
    signal_.notify_all();
  }

  /// Waits until `event` was recorded in this step; false if the other
  /// stream failed instead.
  bool waitEvent(int event, int64_t step) {
    std::unique_lock<std::mutex> lock(mutex_);
    signal_.wait(lock, [&] { return eventRecordedAtStep_[event] >= step || streamFailed_; });
    return !streamFailed_;
  }

  Status runCollective(const ResolvedInstruction &r) {
    const TensorView &in = r.call.inputs[0], &out = r.call.outputs[0];
    switch (r.collective) {
    case Collective::kAllGather:
      return channel_->allGather(in.data, out.data, in.numElements(), r.dtype, r.group);
    case Collective::kReduceScatter:
      return channel_->reduceScatter(in.data, out.data, out.numElements(), r.dtype, r.reduction, r.group);
    case Collective::kAllReduce:
      if (in.data != out.data)
        std::memcpy(out.data, in.data, in.numElements() * dtypeSize(in.dtype));
      return channel_->allReduce(out.data, out.numElements(), r.dtype, r.reduction, r.group);
    }
    return FSDPC_ERROR(kInternal, "unknown collective");
  }

  Status runStream(Stream &stream, int64_t step) {
    for (size_t i = 0; i < stream.instructions.size(); ++i) {
      const ResolvedInstruction &r = stream.instructions[i];
      if (r.kind == ResolvedInstruction::Kind::kRecordEvent) {
        recordEvent(r.event, step);
        continue;
      }
      if (r.kind == ResolvedInstruction::Kind::kWaitEvent) {
        if (!waitEvent(r.event, step))
          return FSDPC_ERROR(kInternal, "the other stream failed");
        continue;
      }
      auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Status status = r.kind == ResolvedInstruction::Kind::kCollective ? runCollective(r) : r.kernel(r.call);
      if (profile_)
        stream.seconds[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!status.isOk()) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          streamFailed_ = true;
        }
        signal_.notify_all();
        const std::string &location = r.instruction->location();
        if (!location.empty())
          return Status::error(status.code(), status.message() + " (at ONNX node " + location + ")", status.file(),
                               status.line());
        return status;
      }
    }
    return Status::ok();
  }

  MappedRegion persistent_, transient_;
  CollectiveChannel *channel_ = nullptr;
  Stream compute_, comm_;
  StepContext context_;
  bool profile_ = false;

  // Events and the worker's hand-over, under one mutex.
  std::mutex mutex_;
  std::condition_variable signal_;
  std::vector<int64_t> eventRecordedAtStep_;
  bool streamFailed_ = false;
  std::thread worker_;
  int64_t requestedStep_ = -1, finishedStep_ = -1;
  bool stopping_ = false;
  Status commStatus_;
};

} // namespace

std::unique_ptr<Device> createCpuDevice() { return std::make_unique<CpuDevice>(); }

} // namespace fsdpc::runtime
