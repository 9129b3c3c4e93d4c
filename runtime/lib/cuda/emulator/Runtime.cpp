//===- Runtime.cpp - the CUDA emulator: memory, streams, events, grids -----===//
//
// See include/cuda_runtime.h for what the emulator is for. Here:
// - device memory: aligned host allocations in a registry, filled with
//   0xff bytes (NaN, -1) so that an element a kernel forgets to write shows;
// - streams: queues of operations run lazily, when the host waits, in a
//   random order (fixed seed) among the streams whose head may run, so
//   only the orderings events enforce are guaranteed;
// - grids: blocks one after another, the threads of a block as fibers on
//   their own stacks, switched only at barriers (__syncthreads, shuffles).
//   Neither order is the index order, because a GPU promises neither: the
//   blocks of a grid run in a shuffled order, the threads between barriers
//   in an order shuffled anew each time, and one warp of the block may lag
//   behind the others until the next __syncthreads (fixed seeds, runBlock).
//   A read that misses its barrier then sees a value written too early or
//   too late, whichever thread index or warp wrote it.
//
//===----------------------------------------------------------------------===//
#include "cuda_runtime.h"
#include "fsdpc/runtime/Float16.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FSDPC_EMULATOR_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FSDPC_EMULATOR_ASAN 1
#endif
#ifdef FSDPC_EMULATOR_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "the CUDA emulator switches fiber stacks with x86-64 code"
#endif

struct CUstream_st {
  struct Operation {
    std::function<void()> run;  // empty for a wait
    CUstream_st *after = nullptr; // runs once `after` completed `count`
    uint64_t count = 0;
  };
  std::deque<Operation> queue;
  uint64_t enqueued = 0, completed = 0;
};

struct CUevent_st {
  CUstream_st *stream = nullptr; // of the last record; null before any
  uint64_t count = 0;            // the record's position in it, plus one
  bool timing = true;
  double seconds = 0; // host clock when the record ran
  // Recorded during a capture: the graph and the index of its record there.
  struct CUgraph_st *graph = nullptr;
  int capturedIndex = -1;
};

/// A captured stream operation: what it runs, or (after >= 0) a wait for
/// the graph's operation `after`.
struct CapturedOperation {
  CUstream_st *stream;
  std::function<void()> run;
  int after = -1;
};
struct CUgraph_st {
  std::vector<CapturedOperation> operations;
};
struct CUgraphExec_st {
  CUgraph_st graph;
};

// Switches to the context whose stack pointer is `to`, saving this one's in
// `*from`: the callee-saved registers go on the stack being left.
extern "C" void fsdpc_emulator_switch(void **from, void *to);
asm(R"(
  .pushsection .text
  .globl fsdpc_emulator_switch
  .type fsdpc_emulator_switch, @function
fsdpc_emulator_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size fsdpc_emulator_switch, .-fsdpc_emulator_switch
  .popsection
)");

namespace fsdpc_cuda_emulator {

thread_local ThreadPlace *current = nullptr;

namespace {

constexpr size_t kDefaultDynamicShared = 48 * 1024;
constexpr size_t kMaxDynamicShared = 227 * 1024; // an H100 / H200 block's opt-in limit
#ifdef FSDPC_EMULATOR_ASAN
constexpr size_t kFiberStack = 512 * 1024;
#else
constexpr size_t kFiberStack = 128 * 1024;
#endif

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Emulator {
  std::map<uintptr_t, size_t> device, pinned; // allocation start -> bytes
  size_t deviceBytes = 0;
  std::vector<CUstream_st *> streams;
  CUstream_st legacy; // stream 0
  cudaError_t lastError = cudaSuccess;
  cudaError_t sticky = cudaSuccess; // a failed kernel: every later call fails
  std::mt19937 order{20261202};
  std::map<const void *, size_t> dynamicSharedLimit;
  // The capture under way, if any: its graph, the stream it began on, the
  // streams that joined it and the index of each one's last operation.
  CUgraph_st *capture = nullptr;
  CUstream_st *captureOrigin = nullptr;
  std::map<CUstream_st *, int> captured;

  Emulator() { streams.push_back(&legacy); }
};
Emulator &emulator() {
  static Emulator *e = new Emulator(); // never destroyed: streams may outlive statics
  return *e;
}

cudaError_t fail(cudaError_t error, const std::string &why) {
  std::fprintf(stderr, "cuda emulator: %s\n", why.c_str());
  emulator().lastError = error;
  return error;
}

bool within(const std::map<uintptr_t, size_t> &registry, const void *pointer, size_t bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(pointer);
  auto it = registry.upper_bound(p);
  if (it == registry.begin())
    return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second;
}
bool isDevice(const void *pointer, size_t bytes) { return within(emulator().device, pointer, bytes); }
bool touchesDevice(const void *pointer, size_t bytes) {
  // Any byte of [pointer, pointer + bytes) in device memory.
  const uintptr_t p = reinterpret_cast<uintptr_t>(pointer);
  const auto &registry = emulator().device;
  auto it = registry.upper_bound(p + std::max<size_t>(bytes, 1) - 1);
  if (it == registry.begin())
    return false;
  --it;
  return it->first + it->second > p;
}
bool isPinned(const void *pointer, size_t bytes) { return within(emulator().pinned, pointer, bytes); }

const char *kindName(cudaMemcpyKind kind) {
  switch (kind) {
  case cudaMemcpyHostToHost:
    return "HostToHost";
  case cudaMemcpyHostToDevice:
    return "HostToDevice";
  case cudaMemcpyDeviceToHost:
    return "DeviceToHost";
  case cudaMemcpyDeviceToDevice:
    return "DeviceToDevice";
  default:
    return "Default";
  }
}

/// Whether a copy's two sides are the memory its kind says.
cudaError_t checkCopy(const char *api, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0)
    return cudaSuccess;
  bool dstOk = true, srcOk = true;
  switch (kind) {
  case cudaMemcpyHostToDevice:
    dstOk = isDevice(dst, bytes);
    srcOk = !touchesDevice(src, bytes);
    break;
  case cudaMemcpyDeviceToHost:
    dstOk = !touchesDevice(dst, bytes);
    srcOk = isDevice(src, bytes);
    break;
  case cudaMemcpyDeviceToDevice:
    dstOk = isDevice(dst, bytes);
    srcOk = isDevice(src, bytes);
    break;
  case cudaMemcpyHostToHost:
    dstOk = !touchesDevice(dst, bytes);
    srcOk = !touchesDevice(src, bytes);
    break;
  default:
    break;
  }
  if (!dstOk || !srcOk)
    return fail(cudaErrorInvalidValue, std::string(api) + " " + kindName(kind) + " of " + std::to_string(bytes) +
                                           " bytes: the " + (dstOk ? "source" : "destination") +
                                           " is not the memory the direction names");
  return cudaSuccess;
}

CUstream_st *streamOf(cudaStream_t stream) { return stream ? stream : &emulator().legacy; }

bool mayRun(const CUstream_st &s) {
  if (s.queue.empty())
    return false;
  const CUstream_st::Operation &head = s.queue.front();
  return !head.after || head.after->completed >= head.count;
}

/// Runs queued operations, in a random order that keeps each stream's own
/// order and every event wait, until `target` (every stream, if null) is
/// empty.
cudaError_t drain(CUstream_st *target) {
  Emulator &e = emulator();
  std::vector<CUstream_st *> ready;
  while (true) {
    bool pending = false;
    ready.clear();
    for (CUstream_st *s : e.streams) {
      pending |= !s->queue.empty();
      if (mayRun(*s))
        ready.push_back(s);
    }
    if (target ? target->queue.empty() : !pending)
      break;
    if (ready.empty())
      return fail(cudaErrorLaunchFailure, "the streams wait on each other in a cycle");
    CUstream_st *s = ready[e.order() % ready.size()];
    CUstream_st::Operation op = std::move(s->queue.front());
    s->queue.pop_front();
    if (op.run && e.sticky == cudaSuccess)
      op.run();
    ++s->completed;
  }
  return e.sticky;
}

/// Records into the capture under way when `s` takes part in it; returns
/// the operation's index there, or -1 when it does not.
int recordIfCaptured(CUstream_st *s, std::function<void()> run, int after = -1) {
  Emulator &e = emulator();
  auto it = e.captured.find(s);
  if (it == e.captured.end())
    return -1;
  e.capture->operations.push_back({s, std::move(run), after});
  it->second = static_cast<int>(e.capture->operations.size()) - 1;
  return it->second;
}

/// Set while a cudaLaunchHostFunc function runs: CUDA calls are not allowed there.
bool inHostFunction = false;

void enqueue(cudaStream_t stream, std::function<void()> run) {
  if (inHostFunction) {
    fail(cudaErrorNotPermitted, "a CUDA call enqueued work from inside a host function (cudaLaunchHostFunc)");
    return;
  }
  CUstream_st *s = streamOf(stream);
  if (recordIfCaptured(s, run) >= 0)
    return;
  s->queue.push_back({std::move(run), nullptr, 0});
  ++s->enqueued;
}

/// What a capture forbids: calls that wait for the device or allocate.
cudaError_t refusedWhileCapturing(const char *api) {
  if (!emulator().capture)
    return cudaSuccess;
  return fail(cudaErrorStreamCaptureUnsupported,
              std::string(api) + " while a stream is being captured (it would wait for the device)");
}

// ---- Fibers --------------------------------------------------------------

struct Fiber {
  void *stackPointer = nullptr;
  void *stackBottom = nullptr;
  ThreadPlace place;
  int warp = 0, lane = 0;
  enum Status { kReady, kAtBlockBarrier, kAtWarpBarrier, kDone } status = kReady;
  uint64_t generation = 0; // of the barrier it waits at
  // cp.async copies (WarpMma.cuh): started since the last commit, and the
  // committed groups not yet landed, oldest first.
  struct AsyncCopy {
    void *destination;
    const void *source;
  };
  std::vector<AsyncCopy> uncommitted;
  std::deque<std::vector<AsyncCopy>> inFlight;
#ifdef FSDPC_EMULATOR_ASAN
  void *fakeStack = nullptr;
#endif
};

struct Warp {
  unsigned existing = 0, done = 0; // lanes
  unsigned mask = 0;               // of the exchange under way
  int arrived = 0;
  uint64_t generation = 0;
  unsigned char slots[32][8];
  float matrices[2][256]; // A and B of the warp's mma.sync
};

/// The block being run on this host thread.
struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  void *schedulerStack = nullptr; // saved stack pointer of the scheduler
  const std::function<void()> *body = nullptr;
  int live = 0, arrived = 0;
  uint64_t generation = 0;
  std::string error;
  std::vector<unsigned char> sharedStorage; // dynamic shared memory, 256-byte aligned in it
  unsigned char *shared = nullptr;
  size_t sharedBytes = 0;
  char *stacks = nullptr;
  size_t stackCount = 0;
#ifdef FSDPC_EMULATOR_ASAN
  const void *schedulerBottom = nullptr;
  size_t schedulerSize = 0;
#endif
  ~Block() {
    if (stacks)
      munmap(stacks, stackCount * kFiberStack);
  }
};
thread_local Block *block = nullptr;
thread_local Fiber *fiber = nullptr;

[[noreturn]] void fiberMain();

/// From a fiber back to the scheduler; returns when the scheduler resumes it.
void yieldToScheduler(bool exiting = false) {
  Fiber &f = *fiber;
#ifdef FSDPC_EMULATOR_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &f.fakeStack, block->schedulerBottom, block->schedulerSize);
#endif
  fsdpc_emulator_switch(&f.stackPointer, block->schedulerStack);
#ifdef FSDPC_EMULATOR_ASAN
  __sanitizer_finish_switch_fiber(f.fakeStack, nullptr, nullptr);
#endif
  (void)exiting;
}

/// From the scheduler into fiber `f` until it waits or ends.
void resume(Fiber &f) {
  fiber = &f;
  current = &f.place;
#ifdef FSDPC_EMULATOR_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stackBottom, kFiberStack);
#endif
  fsdpc_emulator_switch(&block->schedulerStack, f.stackPointer);
#ifdef FSDPC_EMULATOR_ASAN
  __sanitizer_finish_switch_fiber(fake, &block->schedulerBottom, &block->schedulerSize);
#endif
  fiber = nullptr;
  current = nullptr;
}

void fiberMain() {
#ifdef FSDPC_EMULATOR_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &block->schedulerBottom, &block->schedulerSize);
#endif
  (*block->body)();
  fiber->status = Fiber::kDone;
  yieldToScheduler(/*exiting=*/true);
  std::abort(); // never resumed
}

/// A fresh stack for `f` whose first switch enters fiberMain.
void prepareStack(Fiber &f, char *stack) {
  f.stackBottom = stack;
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + kFiberStack) & ~uintptr_t(15);
  void **sp = reinterpret_cast<void **>(top);
  *--sp = nullptr;                                 // fiberMain's return address (it never returns)
  *--sp = reinterpret_cast<void *>(&fiberMain);    // popped by the switch's ret
  for (int r = 0; r < 6; ++r)                      // rbp rbx r12 r13 r14 r15
    *--sp = nullptr;
  f.stackPointer = sp;
}

std::string blockName(const ThreadPlace &p) {
  return "block (" + std::to_string(p.block.x) + ", " + std::to_string(p.block.y) + ", " +
         std::to_string(p.block.z) + ")";
}

void setError(const std::string &why) {
  if (block->error.empty())
    block->error = blockName(fiber ? fiber->place : block->fibers[0].place) + ": " + why;
}

void threadExited(Fiber &f) {
  Block &b = *block;
  --b.live;
  Warp &w = b.warps[f.warp];
  w.done |= 1u << f.lane;
  if (w.arrived > 0 && (w.mask >> f.lane & 1u))
    setError("thread " + std::to_string(f.place.thread.x) + " exited while lanes of its warp wait for it in a "
             "shuffle");
  if (b.arrived > 0 && b.arrived == b.live) { // exited threads no longer count at __syncthreads
    b.arrived = 0;
    ++b.generation;
  }
}

/// The order of the blocks of a grid and of the threads between barriers.
thread_local std::mt19937 scheduleOrder{20261205};

/// Runs one block of `threads` fibers to the end.
void runBlock(Block &b, dim3 grid, dim3 blockShape, uint3 index) {
  const int threads = static_cast<int>(blockShape.x * blockShape.y * blockShape.z);
  b.fibers.assign(threads, Fiber());
  b.warps.assign((threads + 31) / 32, Warp());
  b.live = threads;
  b.arrived = 0;
  b.error.clear();
  std::fill(b.shared, b.shared + b.sharedBytes, 0xff);
  for (int t = 0; t < threads; ++t) {
    Fiber &f = b.fibers[t];
    f.place.thread = {t % blockShape.x, (t / blockShape.x) % blockShape.y, t / (blockShape.x * blockShape.y)};
    f.place.block = index;
    f.place.blockShape = blockShape;
    f.place.grid = grid;
    f.warp = t / 32;
    f.lane = t % 32;
    b.warps[f.warp].existing |= 1u << f.lane;
    prepareStack(f, b.stacks + static_cast<size_t>(t) * kFiberStack);
  }
  // A round runs each thread that can run up to its next barrier, in an
  // order shuffled each round. And between two __syncthreads one warp,
  // drawn anew each time (or none), lags: it runs only when no other
  // thread can, so it does its part of the interval after every other warp
  // has done all of its own (up to the next __syncthreads, across any
  // number of warp shuffles). A GPU may schedule warps so, and a thread
  // that reads shared memory without the barrier it needs then sees what
  // another warp wrote too early or too late. Without the laggard such a
  // read went unseen: removing blockSum's first barrier, behind which a
  // slow warp still reads the previous call's partial sums, failed no case.
  std::vector<int> order(threads);
  for (int t = 0; t < threads; ++t)
    order[t] = t;
  const int warps = static_cast<int>(b.warps.size());
  int laggard = -1;
  uint64_t laggardInterval = ~uint64_t(0);
  bool laggardRuns = false;
  while (b.live > 0 && b.error.empty()) {
    bool progressed = false, heldBack = false;
    if (laggardInterval != b.generation) {
      laggardInterval = b.generation;
      const int draw = static_cast<int>(scheduleOrder() % static_cast<unsigned>(warps + 1));
      laggard = draw < warps ? draw : -1;
    }
    std::shuffle(order.begin(), order.end(), scheduleOrder);
    for (int t : order) {
      Fiber &f = b.fibers[t];
      if (f.status == Fiber::kDone)
        continue;
      if (f.status == Fiber::kAtBlockBarrier && f.generation == b.generation)
        continue;
      if (f.status == Fiber::kAtWarpBarrier && f.generation == b.warps[f.warp].generation)
        continue;
      if (f.warp == laggard && !laggardRuns) {
        heldBack = true;
        continue;
      }
      f.status = Fiber::kReady;
      resume(f);
      progressed = true;
      if (f.status == Fiber::kDone)
        threadExited(f);
      if (!b.error.empty())
        break;
    }
    laggardRuns = !progressed && heldBack; // only the laggard can run: it does
    if (laggardRuns)
      continue;
    if (!progressed && b.error.empty()) {
      int atBlock = 0, atWarp = 0;
      for (const Fiber &f : b.fibers) {
        atBlock += f.status == Fiber::kAtBlockBarrier;
        atWarp += f.status == Fiber::kAtWarpBarrier;
      }
      b.error = blockName(b.fibers[0].place) + ": deadlock: " + std::to_string(atBlock) +
                " threads wait at __syncthreads and " + std::to_string(atWarp) +
                " in a warp shuffle, and neither barrier can complete (a barrier in divergent code)";
    }
  }
}

/// Runs a whole grid; on a fault inside it, reports and makes it sticky.
void runGrid(dim3 grid, dim3 blockShape, size_t sharedBytes, const std::function<void()> &body) {
  Block b;
  const int threads = static_cast<int>(blockShape.x * blockShape.y * blockShape.z);
  b.stackCount = threads;
  void *stacks = mmap(nullptr, b.stackCount * kFiberStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stacks == MAP_FAILED) {
    fail(cudaErrorMemoryAllocation, "no memory for the fiber stacks of a block of " + std::to_string(threads));
    emulator().sticky = cudaErrorLaunchFailure;
    return;
  }
  b.stacks = static_cast<char *>(stacks);
  b.body = &body;
  // As on a GPU, the dynamic shared memory starts on a large alignment.
  b.sharedStorage.assign(sharedBytes + 256, 0xff);
  b.shared = reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(b.sharedStorage.data()) + 255) &
                                               ~uintptr_t(255));
  b.sharedBytes = sharedBytes;
  Block *outer = block;
  block = &b;
  // The blocks in a shuffled order: a kernel whose block reads what another
  // block of the same launch writes is wrong on a GPU in any order.
  // Large grids take index order or its reverse, by a coin, rather than a
  // permutation as large as the grid.
  const uint64_t blocks = 1ull * grid.x * grid.y * grid.z;
  auto place = [&](uint64_t i) {
    return uint3{static_cast<unsigned>(i % grid.x), static_cast<unsigned>(i / grid.x % grid.y),
                 static_cast<unsigned>(i / (1ull * grid.x * grid.y))};
  };
  if (blocks <= (1u << 16)) {
    std::vector<uint32_t> order(blocks);
    for (uint32_t i = 0; i < blocks; ++i)
      order[i] = i;
    std::shuffle(order.begin(), order.end(), scheduleOrder);
    for (uint32_t i : order) {
      runBlock(b, grid, blockShape, place(i));
      if (!b.error.empty())
        break;
    }
  } else {
    const bool reversed = scheduleOrder() & 1u;
    for (uint64_t i = 0; i < blocks && b.error.empty(); ++i)
      runBlock(b, grid, blockShape, place(reversed ? blocks - 1 - i : i));
  }
  block = outer;
  if (!b.error.empty()) {
    fail(cudaErrorLaunchFailure, "kernel fault in " + b.error);
    emulator().sticky = cudaErrorLaunchFailure;
  }
}

} // namespace

// ---- Device-side entry points ---------------------------------------------

void *dynamicShared() { return block->shared; }

int laneId() { return fiber->lane; }

void syncThreads() {
  Block &b = *block;
  Fiber &f = *fiber;
  if (++b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  f.status = Fiber::kAtBlockBarrier;
  f.generation = b.generation;
  yieldToScheduler();
}

namespace {
/// All lanes of `mask` arrive before any leaves.
void warpBarrier(unsigned mask) {
  Warp &w = block->warps[fiber->warp];
  if (w.arrived == 0)
    w.mask = mask;
  else if (w.mask != mask)
    setError("lanes of a warp disagree on a shuffle's mask");
  if (++w.arrived == __builtin_popcount(mask)) {
    w.arrived = 0;
    ++w.generation;
    return;
  }
  fiber->status = Fiber::kAtWarpBarrier;
  fiber->generation = w.generation;
  yieldToScheduler();
}
} // namespace

void kernelFault(const char *what) { setError(what); }

void syncWarp(unsigned mask) {
  Warp &w = block->warps[fiber->warp];
  if (mask & ~w.existing)
    return setError("__syncwarp's mask names lanes past the end of the block");
  if (mask & w.done)
    return setError("__syncwarp's mask names lanes that have exited");
  warpBarrier(mask);
}

namespace {
float bf16Low(uint32_t v) { return fsdpc::runtime::bf16ToFloat(static_cast<uint16_t>(v & 0xffffu)); }
float bf16High(uint32_t v) { return fsdpc::runtime::bf16ToFloat(static_cast<uint16_t>(v >> 16)); }
bool wholeWarp(const char *instruction) {
  const Warp &w = block->warps[fiber->warp];
  if (w.existing == 0xffffffffu && w.done == 0)
    return true;
  setError(std::string(instruction) + " needs all 32 lanes of the warp");
  return false;
}
} // namespace

void warpMmaM16N8K16(const uint32_t (&a)[4], const uint32_t (&b)[2], float (&d)[4]) {
  if (!wholeWarp("mma.sync"))
    return;
  Warp &w = block->warps[fiber->warp];
  const int lane = fiber->lane, g = lane / 4, t = lane % 4;
  float *am = w.matrices[0], *bm = w.matrices[1]; // A 16 x 16 and B 16 x 8, row-major
  for (int i = 0; i < 4; ++i) { // a_i: row g (+8 for odd i), columns 2t (+8 for i >= 2)
    const int row = g + (i % 2) * 8, col = 2 * t + (i / 2) * 8;
    am[row * 16 + col] = bf16Low(a[i]);
    am[row * 16 + col + 1] = bf16High(a[i]);
  }
  for (int i = 0; i < 2; ++i) { // b_i: rows 2t, 2t + 1 (+8 for b1), column g
    bm[(2 * t + 8 * i) * 8 + g] = bf16Low(b[i]);
    bm[(2 * t + 8 * i + 1) * 8 + g] = bf16High(b[i]);
  }
  warpBarrier(0xffffffffu);
  for (int i = 0; i < 4; ++i) { // c_i: row g (+8 for i >= 2), column 2t (+1 for odd i)
    const int row = g + (i / 2) * 8, col = 2 * t + i % 2;
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k)
      sum += am[row * 16 + k] * bm[k * 8 + col];
    d[i] += sum;
  }
  warpBarrier(0xffffffffu); // nobody overwrites the matrices before every lane read them
}

void warpLoadMatrices(uint32_t (&r)[4], bool transposed, const void *row) {
  r[0] = r[1] = r[2] = r[3] = 0;
  if (!wholeWarp("ldmatrix"))
    return;
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0)
    return setError("ldmatrix: a row address not aligned to 16 bytes");
  Warp &w = block->warps[fiber->warp];
  const int lane = fiber->lane, g = lane / 4, t = lane % 4;
  std::memcpy(w.slots[lane], &row, sizeof row);
  warpBarrier(0xffffffffu);
  auto rowOf = [&](int source) {
    const uint16_t *p;
    std::memcpy(&p, w.slots[source], sizeof p);
    return p;
  };
  for (int m = 0; m < 4; ++m) {
    // Lane l gets row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1, of
    // matrix m (rows from lanes 8m ..); transposed, column l / 4 of rows
    // 2 (l % 4) and 2 (l % 4) + 1.
    const uint16_t low = transposed ? rowOf(8 * m + 2 * t)[g] : rowOf(8 * m + g)[2 * t];
    const uint16_t high = transposed ? rowOf(8 * m + 2 * t + 1)[g] : rowOf(8 * m + g)[2 * t + 1];
    r[m] = static_cast<uint32_t>(low) | static_cast<uint32_t>(high) << 16;
  }
  warpBarrier(0xffffffffu); // nobody writes its slot again before every lane read
}

namespace {
/// Whether a committed group of copies lands at once (else at its wait):
/// either is what a GPU may do, and a kernel must be right under both.
thread_local std::mt19937 landingCoin{20261204};
void land(const std::vector<Fiber::AsyncCopy> &group) {
  for (const Fiber::AsyncCopy &c : group)
    std::memcpy(c.destination, c.source, 16);
}
} // namespace

void asyncCopy16(void *destination, const void *source) {
  if (reinterpret_cast<uintptr_t>(destination) % 16 != 0 || reinterpret_cast<uintptr_t>(source) % 16 != 0)
    return setError("cp.async of 16 bytes between addresses not aligned to 16 bytes");
  fiber->uncommitted.push_back({destination, source});
}

void asyncCommit() {
  Fiber &f = *fiber;
  if (landingCoin() & 1u)
    land(f.uncommitted);
  else
    f.inFlight.push_back(std::move(f.uncommitted));
  f.uncommitted.clear(); // a moved-from vector is valid but unspecified
}

void asyncWait(int pending) {
  Fiber &f = *fiber;
  while (static_cast<int>(f.inFlight.size()) > pending) {
    land(f.inFlight.front());
    f.inFlight.pop_front();
  }
}

void warpExchange(unsigned mask, const void *mine, void *theirs, size_t bytes, int source) {
  Warp &w = block->warps[fiber->warp];
  const int lane = fiber->lane;
  std::memcpy(theirs, mine, bytes);
  if (mask & ~w.existing) {
    setError("a shuffle's mask names lanes past the end of the block (blockDim not a multiple of 32?)");
    return;
  }
  if (mask & w.done) {
    setError("a shuffle's mask names lanes that have exited");
    return;
  }
  if (!(mask >> lane & 1u)) {
    setError("a lane outside its shuffle's mask calls it");
    return;
  }
  std::memcpy(w.slots[lane], mine, bytes);
  warpBarrier(mask);
  if (!(mask >> source & 1u))
    setError("a shuffle reads lane " + std::to_string(source) + ", outside its mask");
  else
    std::memcpy(theirs, w.slots[source], bytes);
  warpBarrier(mask); // nobody writes its slot again before every lane read
}

void enqueueKernel(const void *kernel, dim3 grid, dim3 blockShape, size_t sharedBytes, cudaStream_t stream,
                   std::function<void()> body) {
  const unsigned long long threads = 1ull * blockShape.x * blockShape.y * blockShape.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 || threads == 0 ||
      threads > 1024 || blockShape.z > 64) {
    fail(cudaErrorInvalidConfiguration,
         "launch of grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " + std::to_string(grid.z) +
             ") x block (" + std::to_string(blockShape.x) + ", " + std::to_string(blockShape.y) + ", " +
             std::to_string(blockShape.z) + "): invalid configuration");
    return;
  }
  Emulator &e = emulator();
  auto raised = e.dynamicSharedLimit.find(kernel);
  const size_t limit = raised == e.dynamicSharedLimit.end() ? kDefaultDynamicShared : raised->second;
  if (sharedBytes > limit) {
    fail(cudaErrorInvalidValue, "launch with " + std::to_string(sharedBytes) +
                                    " bytes of dynamic shared memory, above the kernel's limit of " +
                                    std::to_string(limit) + " (cudaFuncSetAttribute raises it)");
    return;
  }
  enqueue(stream, [grid, blockShape, sharedBytes, body = std::move(body)] {
    runGrid(grid, blockShape, sharedBytes, body);
  });
}

cudaError_t enqueueHostWork(cudaStream_t stream, std::function<void()> work) {
  enqueue(stream, std::move(work));
  return cudaSuccess;
}

cudaError_t setMaxDynamicShared(const void *kernel, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxDynamicShared)
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(bytes) +
                                           " bytes of dynamic shared memory is above the device's " +
                                           std::to_string(kMaxDynamicShared));
  emulator().dynamicSharedLimit[kernel] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

} // namespace fsdpc_cuda_emulator

using namespace fsdpc_cuda_emulator;

// ---- Runtime API ------------------------------------------------------------

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidMemcpyDirection:
    return "invalid copy direction for memcpy";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorNotPermitted:
    return "operation not permitted";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureUnjoined:
    return "capturing stream has unjoined work";
  case cudaErrorStreamCaptureWrongThread:
    return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  Emulator &e = emulator();
  const cudaError_t error = e.lastError != cudaSuccess ? e.lastError : e.sticky;
  e.lastError = cudaSuccess;
  return error;
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice, "cudaSetDevice: the emulator has device 0 only");
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *props, int device) {
  if (device != 0)
    return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: the emulator has device 0 only");
  std::memset(props, 0, sizeof(*props));
  std::snprintf(props->name, sizeof(props->name), "fsdpc CUDA emulator");
  std::memcpy(props->uuid.bytes, "fsdpc-emulator-0", 16);
  props->totalGlobalMem = 16ull << 30;
  props->sharedMemPerBlock = kDefaultDynamicShared;
  props->sharedMemPerBlockOptin = kMaxDynamicShared;
  props->maxThreadsPerBlock = 1024;
  props->multiProcessorCount = 3; // few: grid-stride loops take several turns
  props->major = 9;
  props->warpSize = 32;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *freeBytes, size_t *totalBytes) {
  *totalBytes = 16ull << 30;
  *freeBytes = *totalBytes - std::min(*totalBytes, emulator().deviceBytes);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t error = refusedWhileCapturing("cudaDeviceSynchronize"))
    return error;
  return drain(nullptr);
}

cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  *pointer = nullptr;
  if (cudaError_t error = refusedWhileCapturing("cudaMalloc"))
    return error;
  if (bytes == 0)
    return cudaSuccess;
  const size_t rounded = (bytes + 255) / 256 * 256;
  void *p = std::aligned_alloc(256, rounded);
  if (!p)
    return fail(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) + " bytes");
  std::memset(p, 0xff, rounded); // what a kernel forgets to write reads as NaN or -1
  emulator().device[reinterpret_cast<uintptr_t>(p)] = bytes;
  emulator().deviceBytes += bytes;
  *pointer = p;
  return cudaSuccess;
}
cudaError_t cudaFree(void *pointer) {
  if (!pointer)
    return cudaSuccess;
  if (cudaError_t error = refusedWhileCapturing("cudaFree"))
    return error;
  Emulator &e = emulator();
  drain(nullptr); // cudaFree waits for the device
  auto it = e.device.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == e.device.end())
    return fail(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
  e.deviceBytes -= it->second;
  e.device.erase(it);
  std::free(pointer);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void **pointer, size_t bytes) {
  void *p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!p)
    return fail(cudaErrorMemoryAllocation, "cudaMallocHost of " + std::to_string(bytes) + " bytes");
  emulator().pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  *pointer = p;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void *pointer) {
  if (!pointer)
    return cudaSuccess;
  drain(nullptr);
  if (!emulator().pinned.erase(reinterpret_cast<uintptr_t>(pointer)))
    return fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer cudaMallocHost did not return");
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  // On the legacy stream; the backend's streams are non-blocking, so it
  // waits for none of them, as on a GPU.
  if (cudaError_t error = checkCopy("cudaMemcpy", dst, src, bytes, kind))
    return error;
  if (cudaError_t error = refusedWhileCapturing("cudaMemcpy"))
    return error;
  if (cudaError_t error = drain(&emulator().legacy))
    return error;
  if (bytes)
    std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t error = checkCopy("cudaMemcpyAsync", dst, src, bytes, kind))
    return error;
  if (bytes == 0)
    return cudaSuccess;
  if (kind == cudaMemcpyHostToDevice && !isPinned(src, bytes)) {
    // Pageable memory is staged before the call returns.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char *>(src),
                                                               static_cast<const unsigned char *>(src) + bytes);
    enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  }
  if (kind == cudaMemcpyDeviceToHost && !isPinned(dst, bytes)) {
    // Into pageable memory the call returns when the copy is done.
    if (cudaError_t error = refusedWhileCapturing("cudaMemcpyAsync into pageable memory"))
      return error;
    enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
    return drain(streamOf(stream));
  }
  enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (width > dpitch || width > spitch)
    return fail(cudaErrorInvalidValue, "cudaMemcpy2DAsync: width above a pitch");
  if (width == 0 || height == 0)
    return cudaSuccess;
  const size_t dstSpan = dpitch * (height - 1) + width, srcSpan = spitch * (height - 1) + width;
  if (kind != cudaMemcpyDeviceToDevice)
    return fail(cudaErrorInvalidValue, "cudaMemcpy2DAsync: the emulator copies device to device only");
  if (!isDevice(dst, dstSpan) || !isDevice(src, srcSpan))
    return fail(cudaErrorInvalidValue, "cudaMemcpy2DAsync DeviceToDevice: a side is not device memory over its " +
                                           std::to_string(height) + " rows");
  auto *d = static_cast<unsigned char *>(dst);
  auto *s = static_cast<const unsigned char *>(src);
  enqueue(stream, [=] {
    for (size_t row = 0; row < height; ++row)
      std::memmove(d + row * dpitch, s + row * spitch, width);
  });
  return cudaSuccess;
}
cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
  if (bytes && !isDevice(dst, bytes))
    return fail(cudaErrorInvalidValue, "cudaMemset of " + std::to_string(bytes) + " bytes outside device memory");
  if (cudaError_t error = refusedWhileCapturing("cudaMemset"))
    return error;
  if (cudaError_t error = drain(&emulator().legacy))
    return error;
  std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes && !isDevice(dst, bytes))
    return fail(cudaErrorInvalidValue,
                "cudaMemsetAsync of " + std::to_string(bytes) + " bytes outside device memory");
  enqueue(stream, [=] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  *stream = new CUstream_st();
  emulator().streams.push_back(*stream);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Emulator &e = emulator();
  auto it = std::find(e.streams.begin(), e.streams.end(), stream);
  if (!stream || it == e.streams.end())
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of an unknown stream");
  drain(stream);
  e.streams.erase(it);
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t error = refusedWhileCapturing("cudaStreamSynchronize"))
    return error;
  return drain(streamOf(stream));
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event)
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent on a null event");
  CUstream_st *s = streamOf(stream);
  Emulator &e = emulator();
  if (e.capture && event->graph == e.capture) {
    // An event recorded in the capture: the waiting stream joins it.
    e.captured.emplace(s, -1);
    recordIfCaptured(s, {}, event->capturedIndex);
    return cudaSuccess;
  }
  if (e.captured.count(s))
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaStreamWaitEvent in a capture on an event recorded outside it");
  if (event->stream) { // waiting on an event never recorded is a no-op
    s->queue.push_back({{}, event->stream, event->count});
    ++s->enqueued;
  }
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
  if (!fn)
    return fail(cudaErrorInvalidValue, "cudaLaunchHostFunc without a function");
  enqueue(stream, [fn, userData] {
    inHostFunction = true;
    fn(userData);
    inHostFunction = false;
  });
  return emulator().sticky;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  *event = new CUevent_st();
  (*event)->timing = !(flags & cudaEventDisableTiming);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy of a null event");
  drain(nullptr);
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord of a null event");
  CUstream_st *s = streamOf(stream);
  const int index = recordIfCaptured(s, [event] { event->seconds = now(); });
  if (index >= 0) {
    event->graph = emulator().capture;
    event->capturedIndex = index;
    return cudaSuccess;
  }
  event->graph = nullptr;
  event->stream = s;
  event->count = s->enqueued + 1;
  enqueue(stream, [event] { event->seconds = now(); });
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  while (event->stream && event->stream->completed < event->count)
    if (cudaError_t error = drain(nullptr))
      return error;
  return emulator().sticky;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start || !end || !start->timing || !end->timing)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime needs two timing events");
  for (cudaEvent_t e : {start, end})
    if (!e->stream || e->stream->completed < e->count)
      return fail(cudaErrorNotReady, "cudaEventElapsedTime of an event that has not completed");
  *ms = static_cast<float>((end->seconds - start->seconds) * 1000.0);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status) {
  *status = emulator().captured.count(streamOf(stream)) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  Emulator &e = emulator();
  if (e.capture)
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture while another capture is under way");
  CUstream_st *s = streamOf(stream);
  if (s == &e.legacy)
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the legacy stream");
  e.capture = new CUgraph_st();
  e.captureOrigin = s;
  e.captured[s] = -1;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  Emulator &e = emulator();
  CUstream_st *s = streamOf(stream);
  if (!e.capture || s != e.captureOrigin)
    return fail(cudaErrorStreamCaptureWrongThread, "cudaStreamEndCapture on a stream that began no capture");
  // Every stream that joined must be joined back: the origin waits on an
  // event recorded after that stream's last captured operation.
  std::string unjoined;
  for (const auto &[other, last] : e.captured) {
    if (other == s || last < 0)
      continue;
    bool joined = false;
    for (const CapturedOperation &op : e.capture->operations)
      joined |= op.stream == s && op.after >= last && e.capture->operations[op.after].stream == other;
    if (!joined)
      unjoined = "a stream that joined the capture was not joined back to its origin before cudaStreamEndCapture";
  }
  CUgraph_st *made = e.capture;
  e.capture = nullptr;
  e.captureOrigin = nullptr;
  e.captured.clear();
  if (!unjoined.empty()) {
    delete made;
    *graph = nullptr;
    return fail(cudaErrorStreamCaptureUnjoined, unjoined);
  }
  *graph = made;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
  if (!graph)
    return fail(cudaErrorInvalidValue, "cudaGraphInstantiate of a null graph");
  *exec = new CUgraphExec_st{*graph};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec)
    return fail(cudaErrorInvalidValue, "cudaGraphLaunch of a null graph");
  if (cudaError_t error = refusedWhileCapturing("cudaGraphLaunch"))
    return error;
  CUstream_st *launch = streamOf(stream);
  // Each captured stream's operations go back onto it, in order, after the
  // work queued on the launch stream so far; waits point at the new
  // positions; the launch stream then waits for every one of them.
  std::map<CUstream_st *, bool> started;
  std::vector<std::pair<CUstream_st *, uint64_t>> placed; // per operation: its stream and position + 1
  const uint64_t before = launch->enqueued;
  auto push = [](CUstream_st *s, CUstream_st::Operation op) {
    s->queue.push_back(std::move(op));
    return ++s->enqueued;
  };
  for (const CapturedOperation &op : exec->graph.operations) {
    CUstream_st *s = op.stream;
    if (!started[s] && s != launch)
      push(s, {{}, launch, before});
    started[s] = true;
    if (op.after >= 0)
      placed.push_back({s, push(s, {{}, placed[op.after].first, placed[op.after].second})});
    else
      placed.push_back({s, push(s, {op.run, nullptr, 0})});
  }
  for (const auto &[s, _] : started)
    if (s != launch)
      push(launch, {{}, s, s->enqueued});
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
