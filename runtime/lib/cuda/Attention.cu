//===- Attention.cu - flash-attention style scaled dot-product attention --===//
//
// The tq x tk score matrix never exists in memory: each block holds a tile
// of 32 query rows (or 32 key rows) in shared memory and streams the other
// side through in tiles of 32, as FlashAttention does.
//
// - Forward: one block per (32 queries, batch index). A warp owns 4 query
//   rows; lane j scores key j of the tile; the running maximum and sum
//   rescale the output accumulator (one register per 32 output columns per
//   lane), and each row's logsumexp is kept for backward.
// - Backward, FlashAttention-2's split: delta_i = sum_c dO_ic O_ic first;
//   then one pass per key tile accumulates dK and dV (lane i scores query
//   i), and one pass per query tile accumulates dQ. Both recompute the
//   probabilities from the logsumexp; no atomics, so the same bits every run.
//
// f32 on CUDA cores, written for correctness first: the tensor-core version
// (or cuDNN's fused SDPA) is the performance work still to do (docs/).
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"
#include "../KernelChecks.h"

namespace fsdpc::runtime::cuda {

namespace {

constexpr int kTile = 32;               // queries or keys per tile
constexpr int kWarps = 8;               // per block
constexpr int kRowsPerWarp = kTile / kWarps;
constexpr int kMaxHeadDim = 256;

/// Sizes and strides of one attention call, passed by value to the kernels.
struct AttentionShape {
  long long batch, tq, tk, d, dv;
  bool keyTransposed;
  float scale;
  Operand mask;
  Layout<1> maskBatch; // batch index -> offset of the mask's (0, 0) for it
  long long maskRowStride, maskColStride;
};

Status attentionShape(const KernelCall &call, AttentionShape &s) {
  FSDPC_RETURN_IF_ERROR(requireF32(call));
  AttentionDims a;
  FSDPC_RETURN_IF_ERROR(attentionDims(call, a));
  s.batch = a.batch;
  s.tq = a.tq;
  s.tk = a.tk;
  s.d = a.d;
  s.dv = a.dv;
  s.keyTransposed = a.keyTransposed;
  if (s.d > kMaxHeadDim || s.dv > kMaxHeadDim)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA kernel takes head sizes up to ",
                       kMaxHeadDim, ", not ", std::max(s.d, s.dv));
  const TensorView &k = call.inputs[1], &v = call.inputs[2];
  if (k.numElements() != s.batch * s.tk * s.d || v.numElements() != s.batch * s.tk * s.dv)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": key and value do not fit the query");
  const size_t rank = a.scores.size();
  s.maskRowStride = a.maskStrides[rank - 2];
  s.maskColStride = a.maskStrides[rank - 1];
  // Batch index -> the mask's offset of its (0, 0) score.
  const std::vector<int64_t> batchShape(a.scores.begin(), a.scores.end() - 2);
  if (!makeLayout(batchShape, {std::vector<int64_t>(a.maskStrides.begin(), a.maskStrides.end() - 2)}, s.maskBatch))
    return rankError(call, rank);
  s.mask = operandOf(call.inputs[3]);
  s.scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
  return Status::ok();
}

__device__ __forceinline__ long long maskBase(const AttentionShape &s, long long b) {
  long long offset[1];
  s.maskBatch.offsets(b, offset);
  return offset[0];
}

__device__ __forceinline__ bool isMasked(const AttentionShape &s, long long maskOffset, long long query,
                                         long long key) {
  return loadInteger(s.mask, maskOffset + query * s.maskRowStride + key * s.maskColStride) != 0;
}

/// For one unmasked (query, key) pair, from their rows in shared memory:
/// the probability p recomputed from the query's logsumexp, and the score
/// gradient dS = p (dO . V - delta) * scale. Both backward kernels use it.
__device__ __forceinline__ void scoreGradient(const AttentionShape &s, const float *qRow, const float *kRow,
                                              const float *doRow, const float *vRow, float lse, float delta, float &p,
                                              float &ds) {
  float dot = 0.0f, dp = 0.0f;
  for (int c = 0; c < s.d; ++c)
    dot += qRow[c] * kRow[c];
  for (int c = 0; c < s.dv; ++c)
    dp += doRow[c] * vRow[c];
  p = expf(dot * s.scale - lse);
  ds = p * (dp - delta) * s.scale;
}

/// acc[t] += sum over the tile's 32 rows j of value_j * tile[j][lane + 32 t]
/// (columns below `width`), value_j being lane j's `value`: one warp's row
/// of P or dS times a tile (P V, P^T dO, dS K, dS^T Q).
template <int Cols>
__device__ __forceinline__ void accumulateRowTimesTile(float (&acc)[Cols], float value, const float *tile, int pitch,
                                                       long long width, int lane) {
  for (int j = 0; j < kTile; ++j) {
    const float vj = __shfl_sync(0xffffffffu, value, j);
#pragma unroll
    for (int t = 0; t < Cols; ++t) {
      const int c = lane + 32 * t;
      if (c < width)
        acc[t] += vj * tile[j * pitch + c];
    }
  }
}

/// Key j's element c, in either key layout.
__device__ __forceinline__ float keyAt(const float *k, const AttentionShape &s, long long j, long long c) {
  return s.keyTransposed ? k[c * s.tk + j] : k[j * s.d + c];
}

/// Loads `rows` rows (from `first`) of a [*, cols] matrix into a shared
/// tile with a padded pitch; rows past the end are zeros.
__device__ __forceinline__ void loadTile(float *tile, int pitch, const float *src, long long first, long long rows,
                                         long long cols) {
  for (int e = threadIdx.x; e < kTile * cols; e += blockDim.x) {
    const int r = e / cols, c = e % cols;
    tile[r * pitch + c] = first + r < rows ? src[(first + r) * cols + c] : 0.0f;
  }
}

__device__ __forceinline__ void loadKeyTile(float *tile, int pitch, const float *k, const AttentionShape &s,
                                            long long first) {
  for (int e = threadIdx.x; e < kTile * s.d; e += blockDim.x) {
    const int r = e / s.d, c = e % s.d;
    tile[r * pitch + c] = first + r < s.tk ? keyAt(k, s, first + r, c) : 0.0f;
  }
}

template <int Cols>
__global__ void __launch_bounds__(kWarps * 32) attentionForwardKernel(const float *q, const float *k, const float *v,
                                                                       float *out, float *lse, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(float, shared);
  const int pitchD = s.d + 1, pitchV = s.dv + 1;
  float *qTile = shared, *keyTile = qTile + kTile * pitchD, *vTile = keyTile + kTile * pitchD;
  const long long b = blockIdx.y, firstQuery = static_cast<long long>(blockIdx.x) * kTile;
  const float *qb = q + b * s.tq * s.d, *kb = k + b * s.tk * s.d, *vb = v + b * s.tk * s.dv;
  const long long maskOffset = maskBase(s, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadTile(qTile, pitchD, qb, firstQuery, s.tq, s.d);
  float acc[kRowsPerWarp][Cols], rowMax[kRowsPerWarp], rowSum[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    rowMax[r] = -INFINITY;
    rowSum[r] = 0.0f;
#pragma unroll
    for (int t = 0; t < Cols; ++t)
      acc[r][t] = 0.0f;
  }
  for (long long firstKey = 0; firstKey < s.tk; firstKey += kTile) {
    __syncthreads(); // the previous tile is no longer read
    loadKeyTile(keyTile, pitchD, kb, s, firstKey);
    loadTile(vTile, pitchV, vb, firstKey, s.tk, s.dv);
    __syncthreads();
    const long long key = firstKey + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const long long query = firstQuery + row;
      float score = -INFINITY;
      if (key < s.tk && query < s.tq) {
        if (!isMasked(s, maskOffset, query, key)) {
          float dot = 0.0f;
          for (int c = 0; c < s.d; ++c)
            dot += qTile[row * pitchD + c] * keyTile[lane * pitchD + c];
          score = dot * s.scale;
        }
      }
      float tileMax = score;
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)
        tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, offset));
      const float newMax = fmaxf(rowMax[r], tileMax);
      // Nothing unmasked yet: keep everything at zero, nothing to rescale.
      const float correction = newMax == -INFINITY ? 1.0f : expf(rowMax[r] - newMax);
      const float p = newMax == -INFINITY ? 0.0f : expf(score - newMax);
      float pSum = p;
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)
        pSum += __shfl_xor_sync(0xffffffffu, pSum, offset);
      rowSum[r] = rowSum[r] * correction + pSum;
      rowMax[r] = newMax;
#pragma unroll
      for (int t = 0; t < Cols; ++t)
        acc[r][t] *= correction;
      accumulateRowTimesTile<Cols>(acc[r], p, vTile, pitchV, s.dv, lane);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const long long query = firstQuery + warp * kRowsPerWarp + r;
    if (query >= s.tq)
      continue;
    const float inv = 1.0f / rowSum[r];
#pragma unroll
    for (int t = 0; t < Cols; ++t) {
      const int c = lane + 32 * t;
      if (c < s.dv)
        out[(b * s.tq + query) * s.dv + c] = acc[r][t] * inv;
    }
    if (lane == 0)
      lse[b * s.tq + query] = rowMax[r] + logf(rowSum[r]);
  }
}

/// delta[row] = sum_c dO[row, c] O[row, c]: one warp per row.
__global__ void attentionDeltaKernel(const float *out, const float *dout, float *delta, long long rows, long long dv) {
  const long long warpsTotal = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  for (long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += warpsTotal) {
    float sum = 0.0f;
    for (long long c = threadIdx.x % 32; c < dv; c += 32)
      sum += dout[row * dv + c] * out[row * dv + c];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (threadIdx.x % 32 == 0)
      delta[row] = sum;
  }
}

/// dK and dV for one tile of 32 keys: a warp owns 4 keys; lane i scores
/// query i of each query tile.
template <int Cols>
__global__ void __launch_bounds__(kWarps * 32)
    attentionKeyGradKernel(const float *q, const float *k, const float *v, const float *lse, const float *delta,
                           const float *dout, float *dk, float *dv, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(float, shared);
  const int pitchD = s.d + 1, pitchV = s.dv + 1;
  float *keyTile = shared, *vTile = keyTile + kTile * pitchD, *qTile = vTile + kTile * pitchV,
        *doTile = qTile + kTile * pitchD, *lseTile = doTile + kTile * pitchV, *deltaTile = lseTile + kTile;
  const long long b = blockIdx.y, firstKey = static_cast<long long>(blockIdx.x) * kTile;
  const float *qb = q + b * s.tq * s.d, *kb = k + b * s.tk * s.d, *vb = v + b * s.tk * s.dv;
  const float *dob = dout + b * s.tq * s.dv;
  const long long maskOffset = maskBase(s, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadKeyTile(keyTile, pitchD, kb, s, firstKey);
  loadTile(vTile, pitchV, vb, firstKey, s.tk, s.dv);
  float dkAcc[kRowsPerWarp][Cols], dvAcc[kRowsPerWarp][Cols];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < Cols; ++t)
      dkAcc[r][t] = dvAcc[r][t] = 0.0f;
  for (long long firstQuery = 0; firstQuery < s.tq; firstQuery += kTile) {
    __syncthreads();
    loadTile(qTile, pitchD, qb, firstQuery, s.tq, s.d);
    loadTile(doTile, pitchV, dob, firstQuery, s.tq, s.dv);
    if (threadIdx.x < kTile) {
      const long long query = firstQuery + threadIdx.x;
      lseTile[threadIdx.x] = query < s.tq ? lse[b * s.tq + query] : 0.0f;
      deltaTile[threadIdx.x] = query < s.tq ? delta[b * s.tq + query] : 0.0f;
    }
    __syncthreads();
    const long long query = firstQuery + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const long long key = firstKey + row;
      float p = 0.0f, ds = 0.0f;
      if (key < s.tk && query < s.tq && !isMasked(s, maskOffset, query, key))
        scoreGradient(s, qTile + lane * pitchD, keyTile + row * pitchD, doTile + lane * pitchV, vTile + row * pitchV,
                      lseTile[lane], deltaTile[lane], p, ds);
      accumulateRowTimesTile<Cols>(dvAcc[r], p, doTile, pitchV, s.dv, lane);
      accumulateRowTimesTile<Cols>(dkAcc[r], ds, qTile, pitchD, s.d, lane);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const long long key = firstKey + warp * kRowsPerWarp + r;
    if (key >= s.tk)
      continue;
#pragma unroll
    for (int t = 0; t < Cols; ++t) {
      const int c = lane + 32 * t;
      if (c < s.dv)
        dv[(b * s.tk + key) * s.dv + c] = dvAcc[r][t];
      if (c < s.d) {
        float *dkb = dk + b * s.tk * s.d;
        (s.keyTransposed ? dkb[c * s.tk + key] : dkb[key * s.d + c]) = dkAcc[r][t];
      }
    }
  }
}

/// dQ for one tile of 32 queries: a warp owns 4 queries; lane j scores key
/// j of each key tile.
template <int Cols>
__global__ void __launch_bounds__(kWarps * 32)
    attentionQueryGradKernel(const float *q, const float *k, const float *v, const float *lse, const float *delta,
                             const float *dout, float *dq, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(float, shared);
  const int pitchD = s.d + 1, pitchV = s.dv + 1;
  float *qTile = shared, *doTile = qTile + kTile * pitchD, *keyTile = doTile + kTile * pitchV,
        *vTile = keyTile + kTile * pitchD;
  const long long b = blockIdx.y, firstQuery = static_cast<long long>(blockIdx.x) * kTile;
  const float *qb = q + b * s.tq * s.d, *kb = k + b * s.tk * s.d, *vb = v + b * s.tk * s.dv;
  const float *dob = dout + b * s.tq * s.dv;
  const long long maskOffset = maskBase(s, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadTile(qTile, pitchD, qb, firstQuery, s.tq, s.d);
  loadTile(doTile, pitchV, dob, firstQuery, s.tq, s.dv);
  float rowLse[kRowsPerWarp], rowDelta[kRowsPerWarp], dqAcc[kRowsPerWarp][Cols];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const long long query = firstQuery + warp * kRowsPerWarp + r;
    rowLse[r] = query < s.tq ? lse[b * s.tq + query] : 0.0f;
    rowDelta[r] = query < s.tq ? delta[b * s.tq + query] : 0.0f;
#pragma unroll
    for (int t = 0; t < Cols; ++t)
      dqAcc[r][t] = 0.0f;
  }
  for (long long firstKey = 0; firstKey < s.tk; firstKey += kTile) {
    __syncthreads();
    loadKeyTile(keyTile, pitchD, kb, s, firstKey);
    loadTile(vTile, pitchV, vb, firstKey, s.tk, s.dv);
    __syncthreads();
    const long long key = firstKey + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const long long query = firstQuery + row;
      float p = 0.0f, ds = 0.0f;
      if (key < s.tk && query < s.tq && !isMasked(s, maskOffset, query, key))
        scoreGradient(s, qTile + row * pitchD, keyTile + lane * pitchD, doTile + row * pitchV, vTile + lane * pitchV,
                      rowLse[r], rowDelta[r], p, ds);
      accumulateRowTimesTile<Cols>(dqAcc[r], ds, keyTile, pitchD, s.d, lane);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const long long query = firstQuery + warp * kRowsPerWarp + r;
    if (query >= s.tq)
      continue;
#pragma unroll
    for (int t = 0; t < Cols; ++t) {
      const int c = lane + 32 * t;
      if (c < s.d)
        dq[(b * s.tq + query) * s.d + c] = dqAcc[r][t];
    }
  }
}

/// Launches `kernel` with `bytes` of dynamic shared memory, raising the
/// kernel's limit above the default 48 KB where it needs more.
template <typename Kernel, typename... Args>
Status launchTiled(Kernel kernel, dim3 grid, size_t bytes, cudaStream_t stream, Args... args) {
  if (bytes > 48 * 1024)
    FSDPC_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  launchKernel(kernel, grid, kWarps * 32, bytes, stream, args...);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

/// Columns per lane the accumulators need: 32 output columns each.
int columnsPerLane(long long width) { return width <= 64 ? 2 : width <= 128 ? 4 : 8; }

dim3 tilesOf(long long rows, long long batch) {
  return dim3(static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>(batch));
}

} // namespace

Status attention(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, s));
  if (s.batch == 0 || s.tq == 0)
    return Status::ok();
  if (s.tk == 0)
    return FSDPC_ERROR(kInvalidArgument, "attention: no keys");
  const CudaLaunch &launch = launchOf(call);
  const float *q = call.inputs[0].f32(), *k = call.inputs[1].f32(), *v = call.inputs[2].f32();
  float *out = call.outputs[0].f32(), *lse = call.outputs[1].f32();
  const size_t bytes = sizeof(float) * kTile * (2 * (s.d + 1) + (s.dv + 1));
  const dim3 grid = tilesOf(s.tq, s.batch);
  switch (columnsPerLane(s.dv)) {
  case 2:
    return launchTiled(attentionForwardKernel<2>, grid, bytes, launch.stream, q, k, v, out, lse, s);
  case 4:
    return launchTiled(attentionForwardKernel<4>, grid, bytes, launch.stream, q, k, v, out, lse, s);
  default:
    return launchTiled(attentionForwardKernel<8>, grid, bytes, launch.stream, q, k, v, out, lse, s);
  }
}

uint64_t attentionGradScratch(const KernelCall &call) {
  // delta: one float per query row.
  return static_cast<uint64_t>(call.inputs[5].numElements()) * sizeof(float);
}

Status attentionGrad(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, s));
  if (s.batch == 0 || s.tq == 0 || s.tk == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  if (launch.scratchBytes < attentionGradScratch(call))
    return FSDPC_ERROR(kInternal, "attention_grad: scratch too small");
  const float *q = call.inputs[0].f32(), *k = call.inputs[1].f32(), *v = call.inputs[2].f32();
  const float *out = call.inputs[4].f32(), *lse = call.inputs[5].f32(), *dout = call.inputs[6].f32();
  float *dq = call.outputs[0].f32(), *dk = call.outputs[1].f32(), *dv = call.outputs[2].f32();
  float *delta = static_cast<float *>(launch.scratch);
  const long long rows = s.batch * s.tq;
  launchKernel(attentionDeltaKernel, blocksFor(rows * 32, launch), kThreads, 0, launch.stream, out, dout, delta, rows,
               s.dv);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  const size_t tileBytes = sizeof(float) * kTile * (2 * (s.d + 1) + 2 * (s.dv + 1));
  const size_t keyBytes = tileBytes + sizeof(float) * 2 * kTile;
  const int cols = columnsPerLane(std::max(s.d, s.dv));
  const dim3 keyGrid = tilesOf(s.tk, s.batch), queryGrid = tilesOf(s.tq, s.batch);
  switch (cols) {
  case 2:
    FSDPC_RETURN_IF_ERROR(launchTiled(attentionKeyGradKernel<2>, keyGrid, keyBytes, launch.stream, q, k, v, lse,
                                      delta, dout, dk, dv, s));
    return launchTiled(attentionQueryGradKernel<2>, queryGrid, tileBytes, launch.stream, q, k, v, lse, delta, dout,
                       dq, s);
  case 4:
    FSDPC_RETURN_IF_ERROR(launchTiled(attentionKeyGradKernel<4>, keyGrid, keyBytes, launch.stream, q, k, v, lse,
                                      delta, dout, dk, dv, s));
    return launchTiled(attentionQueryGradKernel<4>, queryGrid, tileBytes, launch.stream, q, k, v, lse, delta, dout,
                       dq, s);
  default:
    FSDPC_RETURN_IF_ERROR(launchTiled(attentionKeyGradKernel<8>, keyGrid, keyBytes, launch.stream, q, k, v, lse,
                                      delta, dout, dk, dv, s));
    return launchTiled(attentionQueryGradKernel<8>, queryGrid, tileBytes, launch.stream, q, k, v, lse, delta, dout,
                       dq, s);
  }
}

} // namespace fsdpc::runtime::cuda
