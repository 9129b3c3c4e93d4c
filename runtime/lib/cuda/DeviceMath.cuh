//===- DeviceMath.cuh - what the CUDA kernels share -------------*- CUDA -*-===//
//
// Loads and stores of any plan dtype as f32 / i64 (bf16 and f16 round to
// nearest even, as the CPU's Float16.h), the broadcast index arithmetic of
// up to kMaxRank dimensions, grid sizing, block reductions and the device
// error word.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CUDA_DEVICEMATH_CUH
#define FSDPC_RUNTIME_CUDA_DEVICEMATH_CUH

#include "CudaCheck.h"
#include "CudaKernels.h"
#include "../cpu/Indexing.h" // host-side shape helpers: broadcastsTo, stridesOf, ...

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace fsdpc::runtime::cuda {

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

/// A tensor operand as kernels see it: its address, dtype and element size
/// (dtypeSize, which device code cannot call).
struct Operand {
  void *data;
  int dtype;
  int elementBytes;
};
inline Operand operandOf(const TensorView &v) {
  return {v.data, static_cast<int>(v.dtype), static_cast<int>(dtypeSize(v.dtype))};
}

__device__ __forceinline__ float loadFloat(Operand o, long long i) {
  if (o.dtype == plan::BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(o.data)[i]);
  if (o.dtype == plan::F16)
    return __half2float(static_cast<const __half *>(o.data)[i]);
  return static_cast<const float *>(o.data)[i];
}
__device__ __forceinline__ void storeFloat(Operand o, long long i, float value) {
  if (o.dtype == plan::BF16)
    static_cast<__nv_bfloat16 *>(o.data)[i] = __float2bfloat16_rn(value);
  else if (o.dtype == plan::F16)
    static_cast<__half *>(o.data)[i] = __float2half_rn(value);
  else
    static_cast<float *>(o.data)[i] = value;
}
/// Elements one thread moves at once in the vectorised elementwise kernels:
/// one 16-byte access of bf16 or f16, two of f32. One 2-byte access per
/// thread at a time (loadFloat in a grid-stride loop, whose store may alias
/// the next load) leaves too few bytes in flight to keep HBM busy.
constexpr int kVectorElements = 8;

/// Whether every view's data is 16-byte aligned, so that element 8 j of
/// each starts a 16-byte word: the vectorised kernels' condition (arena
/// tensors are; a parameter's view inside a flat shard may not be).
inline bool vectorAligned(std::initializer_list<const TensorView *> views) {
  for (const TensorView *v : views)
    if (reinterpret_cast<uintptr_t>(v->data) % 16 != 0)
      return false;
  return true;
}

__device__ __forceinline__ float widen(__nv_bfloat16 h) { return __bfloat162float(h); }
__device__ __forceinline__ float widen(__half h) { return __half2float(h); }
template <typename Half> __device__ __forceinline__ Half narrow(float v);
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }

/// 8 bf16 or f16 values of one 16-byte word, widened / rounded (storeFloat's
/// rounding).
template <typename Half> __device__ __forceinline__ void widenWord(uint4 word, float (&v)[kVectorElements]) {
  Half h[kVectorElements];
  memcpy(h, &word, sizeof(word));
#pragma unroll
  for (int k = 0; k < kVectorElements; ++k)
    v[k] = widen(h[k]);
}
template <typename Half> __device__ __forceinline__ uint4 narrowWord(const float (&v)[kVectorElements]) {
  Half h[kVectorElements];
#pragma unroll
  for (int k = 0; k < kVectorElements; ++k)
    h[k] = narrow<Half>(v[k]);
  uint4 word;
  memcpy(&word, h, sizeof(word));
  return word;
}

/// Elements first .. first + 7 of `o` (first a multiple of 8, the data
/// vectorAligned) as f32, in 16-byte loads.
__device__ __forceinline__ void loadVector(Operand o, long long first, float (&v)[kVectorElements]) {
  const uint4 *words = reinterpret_cast<const uint4 *>(static_cast<const char *>(o.data) + first * o.elementBytes);
  if (o.dtype == plan::BF16) {
    widenWord<__nv_bfloat16>(words[0], v);
  } else if (o.dtype == plan::F16) {
    widenWord<__half>(words[0], v);
  } else {
    const uint4 low = words[0], high = words[1];
    memcpy(v, &low, sizeof(low));
    memcpy(v + 4, &high, sizeof(high));
  }
}
/// The store of loadVector, rounding as storeFloat does.
__device__ __forceinline__ void storeVector(Operand o, long long first, const float (&v)[kVectorElements]) {
  uint4 *words = reinterpret_cast<uint4 *>(static_cast<char *>(o.data) + first * o.elementBytes);
  if (o.dtype == plan::BF16) {
    words[0] = narrowWord<__nv_bfloat16>(v);
  } else if (o.dtype == plan::F16) {
    words[0] = narrowWord<__half>(v);
  } else {
    uint4 low, high;
    memcpy(&low, v, sizeof(low));
    memcpy(&high, v + 4, sizeof(high));
    words[0] = low;
    words[1] = high;
  }
}

/// The operand `elements` elements further on.
__host__ __device__ __forceinline__ Operand advanced(Operand o, long long elements) {
  return {static_cast<char *>(o.data) + elements * o.elementBytes, o.dtype, o.elementBytes};
}
__device__ __forceinline__ long long loadInteger(Operand o, long long i) {
  if (o.dtype == plan::I32)
    return static_cast<const int *>(o.data)[i];
  if (o.dtype == plan::BOOL)
    return static_cast<const unsigned char *>(o.data)[i] != 0;
  return static_cast<const long long *>(o.data)[i];
}
__device__ __forceinline__ void storeInteger(Operand o, long long i, long long value) {
  if (o.dtype == plan::I32)
    static_cast<int *>(o.data)[i] = static_cast<int>(value);
  else if (o.dtype == plan::BOOL)
    static_cast<unsigned char *>(o.data)[i] = value != 0;
  else
    static_cast<long long *>(o.data)[i] = value;
}
__host__ __device__ __forceinline__ bool isFloatDtype(int dtype) {
  return dtype == plan::F32 || dtype == plan::BF16 || dtype == plan::F16;
}

/// An index space of up to kMaxRank dimensions and, for up to N operands,
/// each one's stride per dimension (0 where it broadcasts): element `flat`
/// of the space reads operand j at offset(j, flat). Passed by value.
template <int N> struct Layout {
  int rank = 0;
  long long dims[kMaxRank] = {};
  long long strides[N][kMaxRank] = {};

  __device__ __forceinline__ void offsets(long long flat, long long (&out)[N]) const {
#pragma unroll
    for (int j = 0; j < N; ++j)
      out[j] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const long long index = flat % dims[d];
      flat /= dims[d];
#pragma unroll
      for (int j = 0; j < N; ++j)
        out[j] += index * strides[j][d];
    }
  }
};

/// A layout over `shape` with each operand's strides (as many entries as
/// `shape`); false if the rank is above kMaxRank.
template <int N>
bool makeLayout(const std::vector<int64_t> &shape, const std::vector<std::vector<int64_t>> &strides, Layout<N> &l) {
  if (shape.size() > static_cast<size_t>(kMaxRank) || strides.size() != static_cast<size_t>(N))
    return false;
  l.rank = static_cast<int>(shape.size());
  for (int d = 0; d < l.rank; ++d) {
    l.dims[d] = shape[d];
    for (int j = 0; j < N; ++j)
      l.strides[j][d] = strides[j][d];
  }
  return true;
}

/// first[col] = the sum of partial[c * cols + col] over the chunks c, added
/// in double in a fixed order (Reductions.cu); with `second` (data not
/// null), second[col] the same of the next chunks x cols partials, in the
/// same launch. The last step of the column sums of sum_to and of the
/// norms' scale and bias gradients.
Status sumChunks(const CudaLaunch &launch, const double *partial, long long chunks, long long cols, Operand first,
                 Operand second);

inline Status rankError(const KernelCall &call, size_t rank) {
  return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA backend handles up to ", kMaxRank,
                     " dimensions, not ", rank);
}

/// The most blocks a grid-stride launch takes: enough to fill the device.
inline int64_t maxGridBlocks(const CudaLaunch &launch) { return static_cast<int64_t>(launch.multiprocessors) * 16; }

/// Blocks of kThreads for a grid-stride loop over n elements: enough to
/// fill the device, no more.
inline unsigned blocksFor(int64_t n, const CudaLaunch &launch) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, maxGridBlocks(launch))));
}

/// Blocks for a kernel whose block takes rows blockIdx.x, + gridDim.x, and
/// so on: a row each up to maxGridBlocks, and from there a block takes
/// several. Then a block's second row is an everyday path, tested on the
/// emulator's 3 multiprocessors (and on one, CudaKernelsTest's
/// onOneMultiprocessor cases), not one taken above a million rows.
inline unsigned rowBlocks(int64_t rows, const CudaLaunch &launch) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(rows, maxGridBlocks(launch))));
}

/// Launches `kernel` on `stream`: `kernel<<<grid, block, sharedBytes,
/// stream>>>(args...)` under nvcc; under the CUDA emulator (CI, no GPU) the
/// same kernel runs on the CPU. Check FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED after.
template <typename... Params, typename... Args>
inline void launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t stream,
                         Args... args) {
#ifdef FSDPC_CUDA_EMULATOR
  fsdpc_cuda_emulator::launch(kernel, grid, block, sharedBytes, stream, args...);
#else
  kernel<<<grid, block, sharedBytes, stream>>>(args...);
#endif
}

/// Launches `kernel` with `threads` per block and `bytes` of dynamic shared
/// memory, raising the kernel's limit above the default 48 KB where it
/// needs more (at most 227 KB on sm_90).
template <typename Kernel, typename... Args>
Status launchWithDynamicShared(Kernel kernel, dim3 grid, int threads, size_t bytes, cudaStream_t stream, Args... args) {
  if (bytes > 48 * 1024)
    FSDPC_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  launchKernel(kernel, grid, threads, bytes, stream, args...);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

/// The block's dynamic shared memory (the launch's sharedBytes) as `type name[]`.
#ifdef FSDPC_CUDA_EMULATOR
#define FSDPC_DYNAMIC_SHARED(type, name) type *name = static_cast<type *>(::fsdpc_cuda_emulator::dynamicShared())
#else
#define FSDPC_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#define FSDPC_GRID_STRIDE_LOOP(i, n)                                                                            \
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                    \
       i += static_cast<long long>(blockDim.x) * gridDim.x)

/// Records bad data for the step's error report; the first report wins.
__device__ __forceinline__ void reportDataError(DeviceError *error, int instruction, long long value,
                                                long long position, long long limit) {
  if (atomicCAS(&error->instruction, 0ull, static_cast<unsigned long long>(instruction) + 1) == 0ull) {
    error->value = value;
    error->position = position;
    error->limit = limit;
  }
}

/// Sum over the warp in a fixed butterfly order; every lane gets the total.
template <typename T> __device__ __forceinline__ T warpSum(T value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024), in a
/// fixed order; every thread gets the total. `shared` holds 32 values.
template <typename T> __device__ __forceinline__ T blockSum(T value, T *shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  value = warpSum(value);
  __syncthreads(); // `shared` may still be read from a previous call
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < warps; ++w)
    total += shared[w];
  return total;
}

template <typename T> __device__ __forceinline__ T blockMax(T value, T *shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value = max(value, __shfl_xor_sync(0xffffffffu, value, offset));
  __syncthreads();
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  T total = shared[0];
  for (int w = 1; w < warps; ++w)
    total = max(total, shared[w]);
  return total;
}

/// Element i of `out` = `in` at `layout`'s offset i, for elements of 1, 2,
/// 4 or 8 bytes (broadcast_to, slice and transpose; Reductions.cu).
Status gatherElements(const KernelCall &call, const void *in, void *out, int64_t n, size_t bytes,
                      const Layout<1> &layout);

/// f32 (or i64) operands only, but the inputs and outputs named, which may
/// be any float dtype: the activations a kernel reads and writes through
/// Operand.
inline Status requireF32Except(const KernelCall &call, std::initializer_list<size_t> anyInputs,
                               std::initializer_list<size_t> anyOutputs) {
  auto check = [&](const std::vector<TensorView> &views, std::initializer_list<size_t> any,
                   const char *side) -> Status {
    for (size_t i = 0; i < views.size(); ++i) {
      if (std::find(any.begin(), any.end(), i) == any.end()) {
        if (views[i].dtype != plan::F32 && views[i].dtype != plan::I64)
          return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": the CUDA kernel takes f32 tensors");
      } else if (!isFloatDtype(views[i].dtype)) {
        return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": the CUDA kernel takes a float tensor as ", side,
                           " ", i);
      }
    }
    return Status::ok();
  };
  FSDPC_RETURN_IF_ERROR(check(call.inputs, anyInputs, "input"));
  return check(call.outputs, anyOutputs, "output");
}
inline Status requireF32(const KernelCall &call) { return requireF32Except(call, {}, {}); }

} // namespace fsdpc::runtime::cuda

#endif // FSDPC_RUNTIME_CUDA_DEVICEMATH_CUH
