//===- CpuDevice.cpp - The CPU backend as a Device ------------------------===//
#include "fsdpc/runtime/CpuDevice.h"

#include "Indexing.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
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

/// bf16, f16, i32 and bool are storage types on the CPU: a kernel call on
/// them runs the f32 / i64 kernel on widened copies of its operands, and its
/// outputs are narrowed back (bf16 and f16 rounded to nearest even), so every
/// kernel is written once and computes in f32, as torch does on the CPU.
struct Widening {
  struct Operand {
    bool output;
    size_t index;       // in the call's inputs or outputs
    TensorView storage; // the tensor in the plan's region
    TensorView wide;    // its f32 / i64 copy in the scratch pool
    uint64_t scratchOffset;
  };
  std::vector<Operand> operands;
  KernelCall call; // the kernel's call, on the wide copies

  bool active() const { return !operands.empty(); }
};

bool isNarrow(plan::DType dtype) { return isNarrowFloat(dtype) || dtype == plan::I32 || dtype == plan::BOOL; }
plan::DType wideOf(plan::DType dtype) { return isNarrowFloat(dtype) ? plan::F32 : plan::I64; }

/// The widening of `r`'s call, with scratch offsets from 0; empty if the
/// kernel needs none (cast and copy handle every dtype themselves).
Widening planWidening(const ResolvedInstruction &r, uint64_t &scratchBytes) {
  Widening w;
  scratchBytes = 0;
  if (r.kind != ResolvedInstruction::Kind::kKernel || r.instruction->op() == "cast" || r.instruction->op() == "copy")
    return w;
  bool any = false;
  for (const auto *views : {&r.call.inputs, &r.call.outputs})
    for (const TensorView &v : *views)
      any |= isNarrow(v.dtype);
  if (!any)
    return w;
  w.call = r.call;
  auto widen = [&](const TensorView &view, bool output, size_t index) {
    if (!isNarrow(view.dtype))
      return;
    // An output written in place over an input shares the input's copy.
    for (const Widening::Operand &o : w.operands)
      if (!o.output && o.storage.data == view.data && o.storage.dtype == view.dtype) {
        w.operands.push_back({output, index, view, o.wide, o.scratchOffset});
        return;
      }
    TensorView wide = view;
    wide.dtype = wideOf(view.dtype);
    w.operands.push_back({output, index, view, wide, scratchBytes});
    scratchBytes += (view.numElements() * dtypeSize(wide.dtype) + 63) / 64 * 64;
  };
  for (size_t i = 0; i < r.call.inputs.size(); ++i)
    widen(r.call.inputs[i], false, i);
  for (size_t i = 0; i < r.call.outputs.size(); ++i)
    widen(r.call.outputs[i], true, i);
  return w;
}

/// One stream's instructions, and the time each took when profiling.
struct Stream {
  std::vector<ResolvedInstruction> instructions;
  std::vector<size_t> planIndex;   // each instruction's place in the plan
  std::vector<Widening> widenings; // per instruction; inactive for most
  std::vector<double> seconds;
};

using Clock = std::chrono::steady_clock;

class CpuDevice final : public Device {
public:
  CpuDevice() {
    if (openblas_set_num_threads)
      openblas_set_num_threads(1);
  }
  ~CpuDevice() override { stopWorker(); }

  std::string name() const override { return "cpu"; }
  /// Host memory, shared by every rank on the host.
  MemoryPool memoryPool() const override {
    const std::string host = hostName();
    return {"host:" + host, "host " + host, hostMemoryAvailable(), /*holdsHostRegion=*/true};
  }

  // The host region of an offloaded plan is one more region of host
  // memory here: its copies are memcpy and its host kernels run as any.
  Status allocateRegions(uint64_t persistentBytes, uint64_t transientBytes, uint64_t hostBytes,
                         uint64_t alignment) override {
    if (pageSize() % alignment != 0)
      return FSDPC_ERROR(kInvalidArgument, "the CPU device aligns regions to pages, not to ", alignment, " bytes");
    if (!persistent_.map(persistentBytes) || !transient_.map(transientBytes) || !host_.map(hostBytes))
      return FSDPC_ERROR(kInvalidArgument, "cannot allocate ", persistentBytes + transientBytes + hostBytes,
                         " bytes of tensor memory");
    return Status::ok();
  }
  void *address(plan::Region region, uint64_t offset) const override {
    const MappedRegion &base = region == plan::PERSISTENT ? persistent_ : region == plan::HOST ? host_ : transient_;
    return base.base + offset;
  }
  // An empty tensor's host side may be a null pointer, which memcpy must
  // not be given even for 0 bytes.
  Status upload(void *device, const void *host, uint64_t bytes) override {
    if (bytes > 0)
      std::memcpy(device, host, bytes);
    return Status::ok();
  }
  Status download(void *host, const void *device, uint64_t bytes) override {
    if (bytes > 0)
      std::memcpy(host, device, bytes);
    return Status::ok();
  }
  uint64_t residentBytes() const override { return persistent_.resident() + transient_.resident(); }

  KernelFn kernel(const std::string &name) const override { return lookupKernel(name); }
  KernelFn hostKernel(const std::string &name) const override { return lookupKernel(name); }

  Status prepare(std::vector<ResolvedInstruction> step, int numEvents, CollectiveChannel *channel) override {
    channel_ = channel;
    for (size_t i = 0; i < step.size(); ++i) {
      ResolvedInstruction &r = step[i];
      r.call.context = &context_;
      if (r.kind == ResolvedInstruction::Kind::kCollective && !channel_)
        return FSDPC_ERROR(kInvalidArgument, "plan has collective '", r.instruction->op(),
                           "' but no collective channel was given");
      Stream &stream = r.stream == plan::COMMUNICATION ? comm_ : compute_;
      stream.instructions.push_back(std::move(r));
      stream.planIndex.push_back(i);
    }
    compute_.seconds.assign(compute_.instructions.size(), 0.0);
    comm_.seconds.assign(comm_.instructions.size(), 0.0);
    // Kernels on narrow dtypes: one scratch pool, as large as the largest
    // call's copies, shared since each stream runs one kernel at a time.
    uint64_t poolBytes = 0;
    for (Stream *stream : {&compute_, &comm_}) {
      for (const ResolvedInstruction &r : stream->instructions) {
        uint64_t bytes = 0;
        stream->widenings.push_back(planWidening(r, bytes));
        poolBytes = std::max(poolBytes, bytes);
      }
    }
    scratch_.assign(poolBytes + 64, 0);
    uint8_t *pool = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(scratch_.data()) + 63) / 64 * 64);
    for (Stream *stream : {&compute_, &comm_})
      for (Widening &w : stream->widenings)
        for (Widening::Operand &o : w.operands) {
          o.wide.data = pool + o.scratchOffset;
          (o.output ? w.call.outputs : w.call.inputs)[o.index] = o.wide;
        }
    eventRecordedInRun_.assign(numEvents, 0);
    if (!comm_.instructions.empty())
      worker_ = std::thread([this] { commWorker(); });
    return Status::ok();
  }

  Status runStep(const StepContext &context) override {
    return runPrefix(context, static_cast<int64_t>(compute_.instructions.size() + comm_.instructions.size()));
  }

  Status runPrefix(const StepContext &context, int64_t count) override {
    context_ = context;
    stepStart_ = Clock::now();
    computeWaitSeconds_ = 0;
    nonfiniteIndex_ = -1;
    // Events are matched by run, not by the optimizer step: an evaluation
    // pass runs between two steps.
    const int64_t run = ++runs_;
    if (worker_.joinable()) {
      std::lock_guard<std::mutex> lock(mutex_);
      requestedRun_ = run;
      requestedCount_ = count;
    }
    signal_.notify_all();
    Status computeStatus = runStream(compute_, run, count);
    if (worker_.joinable()) {
      std::unique_lock<std::mutex> lock(mutex_);
      signal_.wait(lock, [&] { return finishedRun_ == run; });
    }
    FSDPC_RETURN_IF_ERROR(computeStatus);
    return commStatus_;
  }

  void enableProfiling() override { profile_ = true; }

  bool enableNonfiniteCheck() override {
    checkNonfinite_ = true;
    return true;
  }
  std::string firstNonfinite() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (nonfiniteIndex_ < 0)
      return "";
    return describeInstruction(nonfiniteIndex_, *nonfiniteInstruction_);
  }

  void enableTracing() override {
    trace_ = true;
    timings_.assign(compute_.instructions.size() + comm_.instructions.size(), InstructionTiming());
  }
  std::vector<InstructionTiming> lastStepTrace() const override { return timings_; }
  double lastStepExposedCommSeconds() const override { return computeWaitSeconds_; }

  std::vector<double> instructionSeconds() const override {
    if (!profile_)
      return {};
    std::vector<double> seconds(compute_.instructions.size() + comm_.instructions.size(), 0.0);
    for (const Stream *stream : {&compute_, &comm_})
      for (size_t i = 0; i < stream->instructions.size(); ++i)
        seconds[stream->planIndex[i]] = stream->seconds[i];
    return seconds;
  }

private:
  /// The communication stream's persistent thread: runs the stream once for
  /// every run runPrefix asks for.
  void commWorker() {
    int64_t lastRun = 0;
    for (;;) {
      int64_t run, count;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        signal_.wait(lock, [&] { return stopping_ || requestedRun_ != lastRun; });
        if (stopping_)
          return;
        run = lastRun = requestedRun_;
        count = requestedCount_;
      }
      Status status = runStream(comm_, run, count);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        commStatus_ = status;
        finishedRun_ = run;
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

  void recordEvent(int event, int64_t run) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      eventRecordedInRun_[event] = run;
    }
    signal_.notify_all();
  }

  /// Waits until `event` was recorded in this run; false if the other
  /// stream failed instead.
  bool waitEvent(int event, int64_t run) {
    std::unique_lock<std::mutex> lock(mutex_);
    signal_.wait(lock, [&] { return eventRecordedInRun_[event] >= run || streamFailed_; });
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

  /// copy_to_device / copy_to_host: both sides are host memory here.
  static Status copyBetweenRegions(const ResolvedInstruction &r) {
    const TensorView &from = r.call.inputs[0], &to = r.call.outputs[0];
    const uint64_t bytes = from.numElements() * dtypeSize(from.dtype);
    if (bytes > 0)
      std::memmove(to.data, from.data, bytes);
    return Status::ok();
  }

  Status runWidened(const ResolvedInstruction &r, const Widening &w) {
    for (const Widening::Operand &o : w.operands)
      if (!o.output)
        cpu::castElements(o.storage, o.wide);
    FSDPC_RETURN_IF_ERROR(r.kernel(w.call));
    for (const Widening::Operand &o : w.operands)
      if (o.output)
        cpu::castElements(o.wide, o.storage);
    return Status::ok();
  }

  double sinceStepStart(Clock::time_point t) const { return std::chrono::duration<double>(t - stepStart_).count(); }

  /// The stream's instructions among the plan's first `count`, in order;
  /// events carry `run`.
  Status runStream(Stream &stream, int64_t run, int64_t count) {
    const bool isCompute = &stream == &compute_;
    for (size_t i = 0; i < stream.instructions.size() && static_cast<int64_t>(stream.planIndex[i]) < count; ++i) {
      const ResolvedInstruction &r = stream.instructions[i];
      InstructionTiming *timing = trace_ ? &timings_[stream.planIndex[i]] : nullptr;
      if (r.kind == ResolvedInstruction::Kind::kRecordEvent) {
        // Read the clock first: once recorded, the waiting thread may run
        // before this one reads it.
        if (timing)
          timing->start = timing->end = sinceStepStart(Clock::now());
        recordEvent(r.event, run);
        continue;
      }
      if (r.kind == ResolvedInstruction::Kind::kWaitEvent) {
        // Waits on the compute stream are for the communication stream's
        // records: the communication that computation did not hide.
        const Clock::time_point waitStart = Clock::now();
        if (!waitEvent(r.event, run))
          return FSDPC_ERROR(kInternal, "the other stream failed");
        const Clock::time_point waitEnd = Clock::now();
        if (isCompute)
          computeWaitSeconds_ += std::chrono::duration<double>(waitEnd - waitStart).count();
        if (timing) {
          timing->start = sinceStepStart(waitStart);
          timing->end = sinceStepStart(waitEnd);
        }
        continue;
      }
      const bool timed = profile_ || timing;
      const Clock::time_point start = timed ? Clock::now() : Clock::time_point();
      Status status = r.kind == ResolvedInstruction::Kind::kCollective ? runCollective(r)
                      : r.kind != ResolvedInstruction::Kind::kKernel   ? copyBetweenRegions(r)
                      : stream.widenings[i].active()                   ? runWidened(r, stream.widenings[i])
                                                                       : r.kernel(r.call);
      if (timed) {
        const Clock::time_point end = Clock::now();
        if (profile_)
          stream.seconds[i] += std::chrono::duration<double>(end - start).count();
        if (timing) {
          timing->start = sinceStepStart(start);
          timing->end = sinceStepStart(end);
        }
      }
      if (status.isOk() && checkNonfinite_)
        noteNonfinite(r, static_cast<int64_t>(stream.planIndex[i]));
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

  MappedRegion persistent_, transient_, host_;
  std::vector<uint8_t> scratch_; // widened copies of narrow operands
  CollectiveChannel *channel_ = nullptr;
  Stream compute_, comm_;
  StepContext context_;
  /// Records `r` (plan index `index`) if it wrote a non-finite float and
  /// comes before what was recorded this step.
  void noteNonfinite(const ResolvedInstruction &r, int64_t index) {
    for (const TensorView &out : r.call.outputs) {
      if (out.dtype != plan::F32 && !isNarrowFloat(out.dtype))
        continue;
      bool bad = false;
      for (int64_t e = 0, n = out.numElements(); e < n && !bad; ++e)
        bad = !std::isfinite(cpu::loadFloat(out, e));
      if (bad) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (nonfiniteIndex_ < 0 || index < nonfiniteIndex_) {
          nonfiniteIndex_ = index;
          nonfiniteInstruction_ = r.instruction;
        }
        return;
      }
    }
  }

  bool profile_ = false;
  bool checkNonfinite_ = false;
  int64_t nonfiniteIndex_ = -1;
  const plan::Instruction *nonfiniteInstruction_ = nullptr;
  bool trace_ = false;
  std::vector<InstructionTiming> timings_; // per plan instruction, last step
  Clock::time_point stepStart_;
  double computeWaitSeconds_ = 0; // written by the compute stream only

  // Events and the worker's hand-over, under one mutex.
  mutable std::mutex mutex_;
  std::condition_variable signal_;
  std::vector<int64_t> eventRecordedInRun_;
  bool streamFailed_ = false;
  std::thread worker_;
  int64_t runs_ = 0, requestedRun_ = 0, requestedCount_ = 0, finishedRun_ = 0;
  bool stopping_ = false;
  Status commStatus_;
};

} // namespace

std::unique_ptr<Device> createCpuDevice() { return std::make_unique<CpuDevice>(); }

} // namespace fsdpc::runtime
