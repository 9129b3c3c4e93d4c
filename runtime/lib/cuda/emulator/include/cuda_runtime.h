//===- cuda_runtime.h - the CUDA emulator's runtime API and device builtins ===//
//
// The CUDA emulator runs the CUDA backend's own sources (the .cu kernels,
// CudaDevice.cpp) on the CPU, compiled by the host compiler against these
// headers instead of the toolkit's, so that CI, which has no GPU, checks
// every CUDA kernel against its CPU kernel and runs whole plans on the
// CUDA device. It is a test instrument, in the spirit of Triton's
// interpreter mode, not a backend anyone trains on.
//
// What it models, and why:
// - Threads of a block are fibers: __syncthreads and warp shuffles are
//   barriers, so divergent barriers and shuffles whose mask names a missing
//   or exited lane are reported instead of silently hanging.
// - Device memory is host memory the emulator knows: copies check that
//   each side is the kind its direction says; ASan sees every access.
// - Streams are queues run lazily in a random order that respects every
//   event wait, so a missing cudaStreamWaitEvent changes results instead
//   of passing by luck.
// - cuBLASLt and NCCL keep their documented semantics (column-major GEMMs
//   with checked attribute sizes; a communicator of one rank).
//
// Only the part of the API the backend uses is here; a call outside it
// fails to compile, which is the point.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_CUDA_EMULATOR_CUDA_RUNTIME_H
#define FSDPC_CUDA_EMULATOR_CUDA_RUNTIME_H

#define FSDPC_CUDA_EMULATOR 1

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

// ---- Qualifiers -----------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Blocks of one launch run one after another on one host thread, whose
// fibers are the block's threads: a thread_local static is one block's.
#define __shared__ static thread_local

// ---- Errors -------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorNotPermitted = 800,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorStreamCaptureWrongThread = 908,
};
typedef cudaError_t cudaError;
const char *cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();

// ---- Types ----------------------------------------------------------------
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
};
struct uint3 {
  unsigned x, y, z;
};
// 16-byte vector accesses: aligned as the toolkit's (UBSan checks it in
// the sanitizer build, as a misaligned address faults on a GPU).
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
typedef CUstream_st *cudaStream_t;
typedef CUevent_st *cudaEvent_t;
typedef CUgraph_st *cudaGraph_t;
typedef CUgraphExec_st *cudaGraphExec_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
enum { cudaEventDefault = 0, cudaEventBlockingSync = 1, cudaEventDisableTiming = 2 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

// library_types.h
enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
};
typedef cudaDataType_t cudaDataType;

struct cudaUUID_t {
  char bytes[16];
};
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int maxThreadsPerBlock;
  int multiProcessorCount;
  int major, minor;
  int warpSize;
};

// ---- Runtime API (host) ---------------------------------------------------
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *props, int device);
cudaError_t cudaMemGetInfo(size_t *freeBytes, size_t *totalBytes);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void **pointer, size_t bytes);
cudaError_t cudaFree(void *pointer);
cudaError_t cudaMallocHost(void **pointer, size_t bytes);
cudaError_t cudaFreeHost(void *pointer);
template <typename T> cudaError_t cudaMalloc(T **pointer, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(pointer), bytes);
}
template <typename T> cudaError_t cudaMallocHost(T **pointer, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void **>(pointer), bytes);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemset(void *dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream = 0);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
/// Runs `fn(userData)` on the host when the stream reaches it; the stream
/// waits for it to return. It may not call CUDA (the emulator reports an
/// enqueue from inside one).
typedef void (*cudaHostFn_t)(void *userData);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData);

// Stream capture: what the captured streams are given between begin and
// end becomes a graph instead of running; a launch of the instantiated
// graph queues it again, with the arguments it was captured with.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

namespace fsdpc_cuda_emulator {

/// Queues one launch of `body` on `stream`; a bad configuration sets the
/// last error, as a real launch does.
void enqueueKernel(const void *kernel, dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t stream,
                   std::function<void()> body);
/// The dynamic shared memory of the running block.
void *dynamicShared();
cudaError_t setMaxDynamicShared(const void *kernel, int bytes);

/// Where a thread of the running kernel stands.
struct ThreadPlace {
  uint3 thread, block;    // threadIdx, blockIdx
  dim3 blockShape, grid; // blockDim, gridDim
};
extern thread_local ThreadPlace *current;

void syncThreads();
void syncWarp(unsigned mask);
/// The warp exchange under __shfl_sync / __shfl_xor_sync: every lane of
/// `mask` offers `bytes` (at most 8) and reads lane `source`'s.
void warpExchange(unsigned mask, const void *mine, void *theirs, size_t bytes, int source);
int laneId();
// The PTX instructions of WarpMma.cuh, with their lane layouts.
/// mma.sync.m16n8k16 (bf16 in, f32 accumulators): d += a b over the warp.
void warpMmaM16N8K16(const uint32_t (&a)[4], const uint32_t (&b)[2], float (&d)[4]);
/// ldmatrix.x4 (.trans): four 8 x 8 matrices of 16-bit elements, lanes 8m
/// to 8m + 7 naming matrix m's rows.
void warpLoadMatrices(uint32_t (&r)[4], bool transposed, const void *row);
/// cp.async of 16 bytes, commit_group and wait_group.
void asyncCopy16(void *destination, const void *source);
void asyncCommit();
void asyncWait(int pending);

} // namespace fsdpc_cuda_emulator

template <typename Kernel> cudaError_t cudaFuncSetAttribute(Kernel *kernel, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return cudaErrorInvalidValue;
  return fsdpc_cuda_emulator::setMaxDynamicShared(reinterpret_cast<const void *>(kernel), value);
}

// ---- Device builtins ------------------------------------------------------
#define threadIdx (::fsdpc_cuda_emulator::current->thread)
#define blockIdx (::fsdpc_cuda_emulator::current->block)
#define blockDim (::fsdpc_cuda_emulator::current->blockShape)
#define gridDim (::fsdpc_cuda_emulator::current->grid)
constexpr int warpSize = 32;

inline void __syncthreads() { fsdpc_cuda_emulator::syncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { fsdpc_cuda_emulator::syncWarp(mask); }

template <typename T> T __shfl_sync(unsigned mask, T value, int sourceLane, int width = 32) {
  const int lane = fsdpc_cuda_emulator::laneId();
  const int source = (lane & ~(width - 1)) + (sourceLane & (width - 1));
  T theirs;
  fsdpc_cuda_emulator::warpExchange(mask, &value, &theirs, sizeof(T), source);
  return theirs;
}
template <typename T> T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = 32) {
  const int lane = fsdpc_cuda_emulator::laneId();
  int source = lane ^ laneMask;
  if ((source & ~(width - 1)) > (lane & ~(width - 1))) // a later group: the caller's own value
    source = lane;
  T theirs;
  fsdpc_cuda_emulator::warpExchange(mask, &value, &theirs, sizeof(T), source);
  return theirs;
}

// Atomics: a fiber switches only at a barrier, so a read-modify-write here
// is indivisible.
inline unsigned long long atomicCAS(unsigned long long *address, unsigned long long compare, unsigned long long value) {
  const unsigned long long old = *address;
  if (old == compare)
    *address = value;
  return old;
}
inline int atomicCAS(int *address, int compare, int value) {
  const int old = *address;
  if (old == compare)
    *address = value;
  return old;
}
inline unsigned long long atomicMin(unsigned long long *address, unsigned long long value) {
  const unsigned long long old = *address;
  if (value < old)
    *address = value;
  return old;
}
template <typename T> T atomicAdd(T *address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}

// Arithmetic with explicit rounding (no contraction into FMA).
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fdiv_rn(float a, float b) {
  volatile float r = a / b;
  return r;
}
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

// CUDA's math library in the global namespace, as device code calls it.
using std::isfinite;
using std::isinf;
using std::isnan;

// CUDA's device overloads of min and max.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- Kernel launch (see DeviceMath.cuh's launchKernel) -------------------
namespace fsdpc_cuda_emulator {
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t stream,
            Args... args) {
  enqueueKernel(reinterpret_cast<const void *>(kernel), grid, block, sharedBytes, stream, [=] { kernel(args...); });
}
} // namespace fsdpc_cuda_emulator

#include "cuda_bf16.h"
#include "cuda_fp16.h"

#endif // FSDPC_CUDA_EMULATOR_CUDA_RUNTIME_H
