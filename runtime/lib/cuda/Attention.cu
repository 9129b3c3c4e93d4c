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
// Query, key, value and out (and their gradients) may be bf16 / f16, as
// mixed-precision plans give them: every load widens, every store rounds
// once; logsumexp is f32.
//
// The tensor-core kernels know their head size at compile time (16 Tiles):
// their tile loops index with shifts, and rows whose starts are 16-byte
// aligned load 8 elements per access. 64-bit divisions by a run-time head
// size cost each lane more instructions per tile than its products.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"
#include "../KernelChecks.h"

#include <mma.h>

namespace fsdpc::runtime::cuda {

namespace {

constexpr int kTile = 32;               // queries or keys per tile
constexpr int kWarps = 8;               // per block
constexpr int kRowsPerWarp = kTile / kWarps;
constexpr int kMaxHeadDim = 256;

/// Sizes and strides of one attention call, passed by value to the kernels.
struct AttentionShape {
  long long batch, heads, tq, tk, d, dv;
  bool keyTransposed;
  bool causal; // the mask masks exactly key > query: decided by index, not read
  // Every row of q, k, v, out (and their gradients) starts 16-byte aligned
  // and keys are not transposed: the tensor-core kernels load rows 8
  // elements at a time (loadVector).
  bool vectorRows;
  float scale;
  AttentionRows query, key, value, out; // a gradient's rows are its operand's
  Operand mask;
  Layout<1> maskBatch; // batch index -> offset of the mask's (0, 0) for it
  long long maskRowStride, maskColStride;

  /// Where row 0 of batch index b lies (KernelChecks.h).
  __device__ __forceinline__ long long start(const AttentionRows &rows, long long b) const {
    return rowsStart(rows, heads, b);
  }
};

/// The shape of an attention (`packed` false) or packed_attention call.
Status attentionShape(const KernelCall &call, bool packed, AttentionShape &s) {
  // The activations, which may be low precision: query, key, value and out
  // (qkv and out); for the gradient, out, dout and the operands' gradients
  // too. The mask is integer, logsumexp f32.
  const bool gradient = packed ? call.inputs.size() == 5 : call.outputs.size() == 3;
  if (packed)
    FSDPC_RETURN_IF_ERROR(gradient ? requireF32Except(call, {0, 2, 4}, {0}) : requireF32Except(call, {0}, {0}));
  else
    FSDPC_RETURN_IF_ERROR(gradient ? requireF32Except(call, {0, 1, 2, 4, 6}, {0, 1, 2})
                                   : requireF32Except(call, {0, 1, 2}, {0}));
  AttentionDims a;
  FSDPC_RETURN_IF_ERROR(packed ? packedAttentionDims(call, a) : attentionDims(call, a));
  s.batch = a.batch;
  s.heads = a.heads;
  s.query = a.query;
  s.key = a.key;
  s.value = a.value;
  s.out = a.out;
  s.tq = a.tq;
  s.tk = a.tk;
  s.d = a.d;
  s.dv = a.dv;
  s.keyTransposed = a.keyTransposed;
  if (s.d > kMaxHeadDim || s.dv > kMaxHeadDim)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA kernel takes head sizes up to ",
                       kMaxHeadDim, ", not ", std::max(s.d, s.dv));
  if (!packed &&
      (call.inputs[1].numElements() != s.batch * s.tk * s.d || call.inputs[2].numElements() != s.batch * s.tk * s.dv))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": key and value do not fit the query");
  const size_t rank = a.scores.size();
  s.maskRowStride = a.maskStrides[rank - 2];
  s.maskColStride = a.maskStrides[rank - 1];
  // Batch index -> the mask's offset of its (0, 0) score.
  const std::vector<int64_t> batchShape(a.scores.begin(), a.scores.end() - 2);
  if (!makeLayout(batchShape, {std::vector<int64_t>(a.maskStrides.begin(), a.maskStrides.end() - 2)}, s.maskBatch))
    return rankError(call, rank);
  s.mask = operandOf(call.inputs[packed ? 1 : 3]);
  s.causal = call.intParam(contract::Param::kCausal, 0) != 0;
  s.vectorRows = !s.keyTransposed;
  for (const AttentionRows &rows : {s.query, s.key, s.value, s.out})
    s.vectorRows = s.vectorRows && rows.offset % kVectorElements == 0 && rows.outer % kVectorElements == 0 &&
                   rows.head % kVectorElements == 0 && rows.row % kVectorElements == 0;
  for (const auto *views : {&call.inputs, &call.outputs})
    for (const TensorView &view : *views)
      s.vectorRows = s.vectorRows && (!isFloatDtype(view.dtype) || vectorAligned({&view}));
  s.scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
  return Status::ok();
}

__device__ __forceinline__ long long maskBase(const AttentionShape &s, long long b) {
  long long offset[1];
  s.maskBatch.offsets(b, offset);
  return offset[0];
}

/// Whether the mask excludes (query, key). A causal mask is not read: an
/// i64 load per score, from L2, cost the kernels more than their products.
__device__ __forceinline__ bool isMasked(const AttentionShape &s, long long maskOffset, long long query,
                                         long long key) {
  if (s.causal)
    return key > query;
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

/// Key j's element c of one batch index, in either key layout.
__device__ __forceinline__ float keyAt(Operand k, const AttentionShape &s, long long j, long long c) {
  return loadFloat(k, s.keyTransposed ? c * s.tk + j : j * s.key.row + c);
}

/// Loads `rows` rows (from `first`) of a matrix of `cols` columns, rows
/// `stride` elements apart, into a shared tile with a padded pitch; rows
/// past the end are zeros.
__device__ __forceinline__ void loadTile(float *tile, int pitch, Operand src, long long first, long long rows,
                                         long long cols, long long stride) {
  for (int e = threadIdx.x; e < kTile * cols; e += blockDim.x) {
    const int r = e / cols, c = e % cols;
    tile[r * pitch + c] = first + r < rows ? loadFloat(src, (first + r) * stride + c) : 0.0f;
  }
}

__device__ __forceinline__ void loadKeyTile(float *tile, int pitch, Operand k, const AttentionShape &s,
                                            long long first) {
  for (int e = threadIdx.x; e < kTile * s.d; e += blockDim.x) {
    const int r = e / s.d, c = e % s.d;
    tile[r * pitch + c] = first + r < s.tk ? keyAt(k, s, first + r, c) : 0.0f;
  }
}

template <int Cols>
__global__ void __launch_bounds__(kWarps * 32)
    attentionForwardKernel(Operand q, Operand k, Operand v, Operand out, float *lse, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(float, shared);
  const int pitchD = s.d + 1, pitchV = s.dv + 1;
  float *qTile = shared, *keyTile = qTile + kTile * pitchD, *vTile = keyTile + kTile * pitchD;
  const long long b = blockIdx.y, firstQuery = static_cast<long long>(blockIdx.x) * kTile;
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const long long maskOffset = maskBase(s, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadTile(qTile, pitchD, qb, firstQuery, s.tq, s.d, s.query.row);
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
    loadTile(vTile, pitchV, vb, firstKey, s.tk, s.dv, s.value.row);
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
        storeFloat(out, s.start(s.out, b) + query * s.out.row + c, acc[r][t] * inv);
    }
    if (lane == 0)
      lse[b * s.tq + query] = rowMax[r] + logf(rowSum[r]);
  }
}

/// delta[row] = sum_c dO[row, c] O[row, c] over the batch * tq query rows:
/// one warp per row.
__global__ void attentionDeltaKernel(Operand out, Operand dout, float *delta, AttentionShape s) {
  const long long warpsTotal = static_cast<long long>(gridDim.x) * (blockDim.x / 32), rows = s.batch * s.tq;
  for (long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += warpsTotal) {
    const long long first = s.start(s.out, row / s.tq) + (row % s.tq) * s.out.row;
    float sum = 0.0f;
    for (long long c = threadIdx.x % 32; c < s.dv; c += 32)
      sum += loadFloat(dout, first + c) * loadFloat(out, first + c);
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
    attentionKeyGradKernel(Operand q, Operand k, Operand v, const float *lse, const float *delta, Operand dout,
                           Operand dk, Operand dv, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(float, shared);
  const int pitchD = s.d + 1, pitchV = s.dv + 1;
  float *keyTile = shared, *vTile = keyTile + kTile * pitchD, *qTile = vTile + kTile * pitchV,
        *doTile = qTile + kTile * pitchD, *lseTile = doTile + kTile * pitchV, *deltaTile = lseTile + kTile;
  const long long b = blockIdx.y, firstKey = static_cast<long long>(blockIdx.x) * kTile;
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const Operand dob = advanced(dout, s.start(s.out, b));
  const long long maskOffset = maskBase(s, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadKeyTile(keyTile, pitchD, kb, s, firstKey);
  loadTile(vTile, pitchV, vb, firstKey, s.tk, s.dv, s.value.row);
  float dkAcc[kRowsPerWarp][Cols], dvAcc[kRowsPerWarp][Cols];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < Cols; ++t)
      dkAcc[r][t] = dvAcc[r][t] = 0.0f;
  for (long long firstQuery = 0; firstQuery < s.tq; firstQuery += kTile) {
    __syncthreads();
    loadTile(qTile, pitchD, qb, firstQuery, s.tq, s.d, s.query.row);
    loadTile(doTile, pitchV, dob, firstQuery, s.tq, s.dv, s.out.row);
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
        storeFloat(dv, s.start(s.value, b) + key * s.value.row + c, dvAcc[r][t]);
      if (c < s.d)
        storeFloat(advanced(dk, s.start(s.key, b)), s.keyTransposed ? c * s.tk + key : key * s.key.row + c,
                   dkAcc[r][t]);
    }
  }
}

/// dQ for one tile of 32 queries: a warp owns 4 queries; lane j scores key
/// j of each key tile.
template <int Cols>
__global__ void __launch_bounds__(kWarps * 32)
    attentionQueryGradKernel(Operand q, Operand k, Operand v, const float *lse, const float *delta, Operand dout,
                             Operand dq, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(float, shared);
  const int pitchD = s.d + 1, pitchV = s.dv + 1;
  float *qTile = shared, *doTile = qTile + kTile * pitchD, *keyTile = doTile + kTile * pitchV,
        *vTile = keyTile + kTile * pitchD;
  const long long b = blockIdx.y, firstQuery = static_cast<long long>(blockIdx.x) * kTile;
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const Operand dob = advanced(dout, s.start(s.out, b));
  const long long maskOffset = maskBase(s, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadTile(qTile, pitchD, qb, firstQuery, s.tq, s.d, s.query.row);
  loadTile(doTile, pitchV, dob, firstQuery, s.tq, s.dv, s.out.row);
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
    loadTile(vTile, pitchV, vb, firstKey, s.tk, s.dv, s.value.row);
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
        storeFloat(dq, s.start(s.query, b) + query * s.query.row + c, dqAcc[r][t]);
    }
  }
}

/// Columns per lane the accumulators need: 32 output columns each.
int columnsPerLane(long long width) { return width <= 64 ? 2 : width <= 128 ? 4 : 8; }

dim3 tilesOf(long long rows, long long batch) {
  return dim3(static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>(batch));
}

// ---- bf16 tensor cores (compute_dtype = "bf16") --------------------------
//
// The mixed-precision plans' attention: Q, K, V and dO are rounded to bf16
// as each tile is loaded, every product runs on the tensor cores (wmma,
// 16x16x16, f32 accumulation) and the softmax stays in f32, as torch's
// flash attention does under bf16 autocast. A block holds 64 query rows
// (or 64 key rows), a warp 16 of them; the other side streams through in
// tiles of 64. Between products, scores go through the warp's own shared
// memory: which element of a fragment a lane holds is not specified, so
// the row-wise softmax reads them from there (two lanes per row, 32 columns
// each, in a rotated order that keeps the 32 lanes on 32 banks: LaneRow).
// The forward pass keeps each row's output in those two lanes' registers;
// the gradients accumulate in fragments. A product loads its A fragments
// once for all its column tiles. Query, key and value need one head size,
// 32, 64 or 128 (a template parameter, so the accumulators stay in
// registers); other shapes take the f32 kernels above.

namespace tc {

using namespace nvcuda;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr int kRows = 64;  // a block's queries or keys
constexpr int kWarps = 4;  // 16 of them each
constexpr int kTile = 64;  // the streamed side's tile
static_assert(kRows == kTile, "tileMasked takes a block's rows and a streamed tile as one square");

/// Padded pitches (elements): wmma needs 16-byte multiples; the pad also
/// spreads rows over the shared-memory banks.
__host__ __device__ __forceinline__ int bf16Pitch(long long cols) { return static_cast<int>(cols) + 8; }
__host__ __device__ __forceinline__ int f32Pitch(long long cols) { return static_cast<int>(cols) + 4; }

/// Shared memory, carved in 128-byte aligned pieces.
struct Carver {
  unsigned char *next;
  template <typename T> __device__ __forceinline__ T *take(long long count) {
    T *p = reinterpret_cast<T *>(next);
    next += (count * sizeof(T) + 127) / 128 * 128;
    return p;
  }
};
__host__ __device__ __forceinline__ size_t piece(size_t bytes) { return (bytes + 127) / 128 * 128; }

/// kRows rows from `first` of a matrix of Cols columns (the head size, a
/// compile-time constant: the index arithmetic is shifts, not 64-bit
/// divisions), rows `stride` elements apart, as bf16, into a tile; rows
/// past `limit` are zeros. With vectorRows, 8 elements per access.
template <int Cols>
__device__ __forceinline__ void loadRows(__nv_bfloat16 *tile, int pitch, Operand src, long long first, long long limit,
                                         long long stride, bool vectorRows) {
  if (vectorRows) {
    constexpr int kVectors = Cols / kVectorElements;
    for (int e = threadIdx.x; e < kRows * kVectors; e += blockDim.x) {
      const int r = e / kVectors, c = e % kVectors * kVectorElements;
      float v[kVectorElements] = {};
      if (first + r < limit)
        loadVector(src, (first + r) * stride + c, v);
      *reinterpret_cast<uint4 *>(tile + r * pitch + c) = narrowWord<__nv_bfloat16>(v);
    }
    return;
  }
  for (int e = threadIdx.x; e < kRows * Cols; e += blockDim.x) {
    const int r = e / Cols, c = e % Cols;
    tile[r * pitch + c] = __float2bfloat16_rn(first + r < limit ? loadFloat(src, (first + r) * stride + c) : 0.0f);
  }
}
template <int Cols>
__device__ __forceinline__ void loadKeys(__nv_bfloat16 *tile, int pitch, Operand k, const AttentionShape &s,
                                         long long first) {
  if (!s.keyTransposed) {
    loadRows<Cols>(tile, pitch, k, first, s.tk, s.key.row, s.vectorRows);
    return;
  }
  for (int e = threadIdx.x; e < kRows * Cols; e += blockDim.x) {
    const int r = e / Cols, c = e % Cols;
    tile[r * pitch + c] = __float2bfloat16_rn(first + r < s.tk ? keyAt(k, s, first + r, c) : 0.0f);
  }
}

/// A streamed tile (kRows rows of Cols columns) held in registers between
/// its global loads and its store into shared memory, 16-byte words spread
/// over the block's threads: a thread issues all its loads of a tile before
/// its first store. Loading and storing
/// one word at a time, each thread waited on every load in turn (its store
/// to shared memory might alias the next load, for all the compiler knows);
/// on the H200 the kernels ran at 60-70 TFLOP/s. Loading the next tile
/// during the current one's products would hide the latency entirely, but
/// its registers cost a block per multiprocessor at head size 64 (ptxas:
/// forward 128 -> 168 registers, query gradient 160 -> 224). Rows past
/// `limit` hold zeros. For vectorRows operands only (the other loads are
/// scalar). The forward kernel is held to 4 blocks per multiprocessor up to
/// head size 64 (128 registers, 8 bytes spilled; unbounded it took 168).
template <int Cols> struct TileRegisters {
  static constexpr int kWordsPerRow = Cols / kVectorElements;
  static constexpr int kWords = kRows * kWordsPerRow / (kWarps * 32);
  static_assert(kWords * kWarps * 32 == kRows * kWordsPerRow, "whole words per thread");
  uint4 word[kWords];

  __device__ __forceinline__ void load(Operand src, long long first, long long limit, long long stride) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      const int e = threadIdx.x + i * kWarps * 32, r = e / kWordsPerRow, c = e % kWordsPerRow * kVectorElements;
      if (first + r >= limit) {
        word[i] = uint4{0, 0, 0, 0};
      } else if (src.dtype == plan::BF16) { // as stored: no widening and rounding back
        word[i] = *reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(src.data) +
                                                   (first + r) * stride + c);
      } else {
        float v[kVectorElements];
        loadVector(src, (first + r) * stride + c, v);
        word[i] = narrowWord<__nv_bfloat16>(v);
      }
    }
  }
  __device__ __forceinline__ void store(__nv_bfloat16 *tile, int pitch) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      const int e = threadIdx.x + i * kWarps * 32, r = e / kWordsPerRow, c = e % kWordsPerRow * kVectorElements;
      *reinterpret_cast<uint4 *>(tile + r * pitch + c) = word[i];
    }
  }
};

/// The key and value tiles from `firstKey`, as the forward and the query
/// gradient stream them: through TileRegisters, every load of a tile in
/// flight at once, where rows are vectorRows; one element at a time else.
template <int D>
__device__ __forceinline__ void loadKeysAndValues(__nv_bfloat16 *ks, int pK, __nv_bfloat16 *vs, int pV, Operand k,
                                                  Operand v, const AttentionShape &s, long long firstKey) {
  if (!s.vectorRows) {
    loadKeys<D>(ks, pK, k, s, firstKey);
    loadRows<D>(vs, pV, v, firstKey, s.tk, s.value.row, s.vectorRows);
    return;
  }
  TileRegisters<D> tile;
  tile.load(k, firstKey, s.tk, s.key.row);
  tile.store(ks, pK);
  tile.load(v, firstKey, s.tk, s.value.row);
  tile.store(vs, pV);
}

/// The warp's A operand, 16 x 16 KSteps row-major at `a`, as fragments:
/// loaded once for every column tile of a product.
template <int KSteps>
__device__ __forceinline__ void loadRowFragments(FragA (&fa)[KSteps], const __nv_bfloat16 *a, int aPitch) {
#pragma unroll
  for (int kt = 0; kt < KSteps; ++kt)
    wmma::load_matrix_sync(fa[kt], a + kt * 16, aPitch);
}

/// out (16 x 16 NTiles) = a (16 x 16 KSteps, row-major at `a`) times b, where b
/// is k x n: row-major at `b` (bRowMajor) or the transpose of a row-major
/// n x k matrix at `b`. Stored to `out` (f32, row-major, pitch outPitch).
template <bool BRowMajor, int KSteps, int NTiles>
__device__ __forceinline__ void warpProduct(const __nv_bfloat16 *a, int aPitch, const __nv_bfloat16 *b, int bPitch,
                                            float *out, int outPitch) {
  FragA fa[KSteps];
  loadRowFragments(fa, a, aPitch);
#pragma unroll
  for (int nt = 0; nt < NTiles; ++nt) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kt = 0; kt < KSteps; ++kt) {
      if constexpr (BRowMajor) {
        FragBRow fb;
        wmma::load_matrix_sync(fb, b + kt * 16 * bPitch + nt * 16, bPitch);
        wmma::mma_sync(acc, fa[kt], fb, acc);
      } else {
        FragBCol fb;
        wmma::load_matrix_sync(fb, b + nt * 16 * bPitch + kt * 16, bPitch);
        wmma::mma_sync(acc, fa[kt], fb, acc);
      }
    }
    wmma::store_matrix_sync(out + nt * 16, acc, outPitch, wmma::mem_row_major);
  }
}

/// acc[nt] += a (16 x 16 KSteps) times b (row-major k x n).
template <int KSteps, int NTiles>
__device__ __forceinline__ void warpAccumulate(FragC (&acc)[NTiles], const __nv_bfloat16 *a, int aPitch,
                                               const __nv_bfloat16 *b, int bPitch) {
  FragA fa[KSteps];
  loadRowFragments(fa, a, aPitch);
#pragma unroll
  for (int nt = 0; nt < NTiles; ++nt)
#pragma unroll
    for (int kt = 0; kt < KSteps; ++kt) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + kt * 16 * bPitch + nt * 16, bPitch);
      wmma::mma_sync(acc[nt], fa[kt], fb, acc[nt]);
    }
}

/// A lane's share of a warp's 16-row staging tile of Width columns, as the
/// row-wise softmax and its gradients read it: lanes 2r and 2r + 1 own row
/// r, one half of its columns each. Lane (r, h) visits its half in an
/// order rotated by 2 (r / 8) + h. The f32 tiles' pitch is 4 words modulo
/// the 32 banks (f32Pitch), so without the rotation rows r and r + 8 and
/// the two halves of a row would read the same bank at once (4 ways);
/// with it, the 32 lanes' j-th reads fall in 32 different banks.
template <int Width> struct LaneRow {
  static constexpr int kColumns = Width / 2; // visited by each lane, a power of two
  int r, h, rotation;
  __device__ explicit LaneRow(int lane) : r(lane / 2), h(lane % 2), rotation(2 * (lane / 16) + lane % 2) {}
  /// The column of the lane's j-th visit, j in [0, kColumns).
  __device__ __forceinline__ int column(int j) const { return h * kColumns + ((j + rotation) & (kColumns - 1)); }
};

/// Whether every (query, key) pair of the tile of queries [firstQuery,
/// firstQuery + kRows) and keys [firstKey, firstKey + kTile) is masked or
/// out of range: the block's common answer (every thread must call it; it
/// syncs). Such a tile adds exactly nothing (probabilities of zero), so the
/// kernels skip it: with a causal mask, about half of all tiles. `flag` is
/// a __shared__ int of the kernel's.
__device__ __forceinline__ bool tileMasked(const AttentionShape &s, long long maskOffset, long long firstQuery,
                                           long long firstKey, int *flag) {
  if (s.causal) { // every thread computes the same answer: no scan, no barrier
    const long long lastQuery = min(firstQuery + kRows, s.tq) - 1;
    return firstQuery >= s.tq || firstKey >= s.tk || firstKey > lastQuery;
  }
  if (threadIdx.x == 0)
    *flag = 0;
  __syncthreads();
  const volatile int *found = flag;
  for (int e = threadIdx.x; e < kRows * kTile && *found == 0; e += blockDim.x) {
    const long long query = firstQuery + e / kTile, key = firstKey + e % kTile;
    if (query < s.tq && key < s.tk && !isMasked(s, maskOffset, query, key)) {
      *flag = 1;
      break;
    }
  }
  __syncthreads();
  const bool masked = *flag == 0;
  __syncthreads(); // read by all before the next call resets it
  return masked;
}

/// Bytes of shared memory for each kernel.
size_t forwardBytes(const AttentionShape &s) {
  const int pS = f32Pitch(std::max<long long>(kTile, s.dv));
  return piece(2 * kRows * bf16Pitch(s.d)) * 2 + piece(2 * kRows * bf16Pitch(s.dv)) +
         kWarps * (piece(4 * 16 * pS) + piece(2 * 16 * bf16Pitch(kTile)));
}
size_t keyGradBytes(const AttentionShape &s) {
  const int pS = f32Pitch(std::max<long long>(kTile, std::max(s.d, s.dv)));
  return piece(2 * kRows * bf16Pitch(s.d)) * 2 + piece(2 * kRows * bf16Pitch(s.dv)) * 2 + 2 * piece(4 * kTile) +
         kWarps * (piece(4 * 16 * pS) + 2 * piece(2 * 16 * bf16Pitch(kTile)));
}
size_t queryGradBytes(const AttentionShape &s) {
  const int pS = f32Pitch(std::max<long long>(kTile, s.d));
  return piece(2 * kRows * bf16Pitch(s.d)) * 2 + piece(2 * kRows * bf16Pitch(s.dv)) * 2 +
         kWarps * (piece(4 * 16 * pS) + piece(2 * 16 * bf16Pitch(kTile)));
}

/// Head size 16 Tiles. A lane keeps its row's running maximum and sum and
/// its half of the row's output in registers (LaneRow's columns), so the
/// rescaling of the output by each tile's correction needs no shared
/// memory: the tile's P V comes through the warp's staging area once.
template <int Tiles>
__global__ void __launch_bounds__(kWarps * 32, Tiles <= 4 ? 4 : 1)
    forwardKernel(Operand q, Operand k, Operand v, Operand out, float *lse, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(unsigned char, tcShared);
  constexpr int D = 16 * Tiles; // the head size of q, k and v (tilesFor)
  const int pQ = bf16Pitch(s.d), pV = bf16Pitch(s.dv), pP = bf16Pitch(kTile);
  const int pS = f32Pitch(std::max<long long>(kTile, s.dv));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carver carve{tcShared};
  __nv_bfloat16 *qs = carve.take<__nv_bfloat16>(kRows * pQ), *ks = carve.take<__nv_bfloat16>(kRows * pQ);
  __nv_bfloat16 *vs = carve.take<__nv_bfloat16>(kRows * pV);
  for (int w = 0; w < warp; ++w) { // skip the earlier warps' pieces
    carve.take<float>(16 * pS);
    carve.take<__nv_bfloat16>(16 * pP);
  }
  float *sc = carve.take<float>(16 * pS);
  __nv_bfloat16 *ps = carve.take<__nv_bfloat16>(16 * pP);

  const long long b = blockIdx.y, firstQuery = static_cast<long long>(blockIdx.x) * kRows;
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const long long maskOffset = maskBase(s, b);
  loadRows<D>(qs, pQ, qb, firstQuery, s.tq, s.query.row, s.vectorRows);
  const LaneRow<kTile> scoreRow(lane);
  const LaneRow<D> outRow(lane);
  const int r = scoreRow.r;
  const long long query = firstQuery + warp * 16 + r;
  float rowMax = -INFINITY, rowSum = 0.0f;
  float o[LaneRow<D>::kColumns] = {}; // columns outRow.column(j) of the row's output, unnormalised
  __shared__ int unmaskedFound;
  for (long long firstKey = 0; firstKey < s.tk; firstKey += kTile) {
    if (tileMasked(s, maskOffset, firstQuery, firstKey, &unmaskedFound))
      continue;
    __syncthreads(); // the previous tiles are no longer read
    loadKeysAndValues<D>(ks, pQ, vs, pV, kb, vb, s, firstKey);
    __syncthreads();
    warpProduct<false, Tiles, kTile / 16>(qs + warp * 16 * pQ, pQ, ks, pQ, sc, pS); // S = Q K^T
    __syncwarp();
    float score[LaneRow<kTile>::kColumns], tileMax = -INFINITY;
#pragma unroll
    for (int j = 0; j < LaneRow<kTile>::kColumns; ++j) {
      const int col = scoreRow.column(j);
      const long long key = firstKey + col;
      const bool valid = query < s.tq && key < s.tk && !isMasked(s, maskOffset, query, key);
      score[j] = valid ? sc[r * pS + col] * s.scale : -INFINITY;
      tileMax = fmaxf(tileMax, score[j]);
    }
    tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
    const float newMax = fmaxf(rowMax, tileMax);
    // Nothing unmasked yet: keep everything at zero, nothing to rescale.
    const float correction = newMax == -INFINITY ? 1.0f : expf(rowMax - newMax);
    float pSum = 0.0f;
#pragma unroll
    for (int j = 0; j < LaneRow<kTile>::kColumns; ++j) {
      const float p = newMax == -INFINITY ? 0.0f : expf(score[j] - newMax);
      pSum += p;
      ps[r * pP + scoreRow.column(j)] = __float2bfloat16_rn(p);
    }
    pSum += __shfl_xor_sync(0xffffffffu, pSum, 1);
    rowSum = rowSum * correction + pSum;
    rowMax = newMax;
    __syncwarp();
    warpProduct<true, kTile / 16, Tiles>(ps, pP, vs, pV, sc, pS); // P V, into the scores' place
    __syncwarp();
#pragma unroll
    for (int j = 0; j < LaneRow<D>::kColumns; ++j)
      o[j] = o[j] * correction + sc[r * pS + outRow.column(j)];
    __syncwarp(); // read before the next tile's scores overwrite them
  }
  if (outRow.h == 0 && query < s.tq)
    lse[b * s.tq + query] = rowMax + logf(rowSum);
  // Normalised, through the staging area, so that a warp stores whole rows
  // at once.
#pragma unroll
  for (int j = 0; j < LaneRow<D>::kColumns; ++j)
    sc[r * pS + outRow.column(j)] = o[j] / rowSum;
  __syncwarp();
  for (int e = lane; e < 16 * D; e += 32) {
    const int rr = e / D, c = e % D;
    const long long row = firstQuery + warp * 16 + rr;
    if (row < s.tq)
      storeFloat(out, s.start(s.out, b) + row * s.out.row + c, sc[rr * pS + c]);
  }
}

/// Writes a warp's accumulators (16 rows x 16 nTiles) through its staging
/// area: element (row, c) goes to `store(row, c, value)`.
template <int NTiles, typename Store>
__device__ __forceinline__ void writeAccumulators(const FragC (&acc)[NTiles], float *staging, int pitch, Store store) {
  constexpr int kCols = 16 * NTiles;
  __syncwarp();
#pragma unroll
  for (int nt = 0; nt < NTiles; ++nt)
    wmma::store_matrix_sync(staging + nt * 16, acc[nt], pitch, wmma::mem_row_major);
  __syncwarp();
  for (int e = threadIdx.x % 32; e < 16 * kCols; e += 32)
    store(e / kCols, e % kCols, staging[(e / kCols) * pitch + e % kCols]);
}

/// dK and dV for 64 keys: a warp owns 16; the queries stream through.
template <int Tiles>
__global__ void __launch_bounds__(kWarps * 32)
    keyGradKernel(Operand q, Operand k, Operand v, const float *lse, const float *delta, Operand dout, Operand dk,
                  Operand dv, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(unsigned char, tcShared);
  constexpr int D = 16 * Tiles; // the head size of q, k and v (tilesFor)
  const int pK = bf16Pitch(s.d), pV = bf16Pitch(s.dv), pP = bf16Pitch(kTile);
  const int pS = f32Pitch(std::max<long long>(kTile, std::max(s.d, s.dv)));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carver carve{tcShared};
  __nv_bfloat16 *ks = carve.take<__nv_bfloat16>(kRows * pK), *qs = carve.take<__nv_bfloat16>(kRows * pK);
  __nv_bfloat16 *vs = carve.take<__nv_bfloat16>(kRows * pV), *dos = carve.take<__nv_bfloat16>(kRows * pV);
  float *lseTile = carve.take<float>(kTile), *deltaTile = carve.take<float>(kTile);
  for (int w = 0; w < warp; ++w) {
    carve.take<float>(16 * pS);
    carve.take<__nv_bfloat16>(16 * pP);
    carve.take<__nv_bfloat16>(16 * pP);
  }
  float *st = carve.take<float>(16 * pS);
  __nv_bfloat16 *pt = carve.take<__nv_bfloat16>(16 * pP), *dst = carve.take<__nv_bfloat16>(16 * pP);

  const long long b = blockIdx.y, firstKey = static_cast<long long>(blockIdx.x) * kRows;
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const Operand dob = advanced(dout, s.start(s.out, b));
  const long long maskOffset = maskBase(s, b);
  loadKeys<D>(ks, pK, kb, s, firstKey);
  loadRows<D>(vs, pV, vb, firstKey, s.tk, s.value.row, s.vectorRows);
  const LaneRow<kTile> scoreRow(lane); // a key's row of S^T, its columns queries
  const int r = scoreRow.r;
  const long long key = firstKey + warp * 16 + r;
  FragC dkAcc[Tiles], dvAcc[Tiles];
#pragma unroll
  for (int t = 0; t < Tiles; ++t) {
    wmma::fill_fragment(dkAcc[t], 0.0f);
    wmma::fill_fragment(dvAcc[t], 0.0f);
  }
  __shared__ int unmaskedFound;
  // A causal mask hides every query before the block's first key: start at
  // its tile.
  const long long startQuery = s.causal ? firstKey / kTile * kTile : 0;
  for (long long firstQuery = startQuery; firstQuery < s.tq; firstQuery += kTile) {
    if (tileMasked(s, maskOffset, firstQuery, firstKey, &unmaskedFound))
      continue;
    __syncthreads();
    if (s.vectorRows) { // every load of a tile in flight at once (TileRegisters)
      TileRegisters<D> tile;
      tile.load(qb, firstQuery, s.tq, s.query.row);
      tile.store(qs, pK);
      tile.load(dob, firstQuery, s.tq, s.out.row);
      tile.store(dos, pV);
    } else {
      loadRows<D>(qs, pK, qb, firstQuery, s.tq, s.query.row, s.vectorRows);
      loadRows<D>(dos, pV, dob, firstQuery, s.tq, s.out.row, s.vectorRows);
    }
    for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
      const long long query = firstQuery + i;
      lseTile[i] = query < s.tq ? lse[b * s.tq + query] : 0.0f;
      deltaTile[i] = query < s.tq ? delta[b * s.tq + query] : 0.0f;
    }
    __syncthreads();
    warpProduct<false, Tiles, kTile / 16>(ks + warp * 16 * pK, pK, qs, pK, st, pS); // S^T = K Q^T
    __syncwarp();
    float p[LaneRow<kTile>::kColumns];
#pragma unroll
    for (int j = 0; j < LaneRow<kTile>::kColumns; ++j) {
      const int col = scoreRow.column(j);
      const long long query = firstQuery + col;
      const bool valid = key < s.tk && query < s.tq && !isMasked(s, maskOffset, query, key);
      p[j] = valid ? expf(st[r * pS + col] * s.scale - lseTile[col]) : 0.0f;
      pt[r * pP + col] = __float2bfloat16_rn(p[j]);
    }
    __syncwarp();
    warpProduct<false, Tiles, kTile / 16>(vs + warp * 16 * pV, pV, dos, pV, st, pS); // dP^T = V dO^T
    __syncwarp();
#pragma unroll
    for (int j = 0; j < LaneRow<kTile>::kColumns; ++j) {
      const int col = scoreRow.column(j);
      dst[r * pP + col] = __float2bfloat16_rn(p[j] * (st[r * pS + col] - deltaTile[col]) * s.scale);
    }
    __syncwarp();
    warpAccumulate<kTile / 16>(dvAcc, pt, pP, dos, pV); // dV += P^T dO
    warpAccumulate<kTile / 16>(dkAcc, dst, pP, qs, pK); // dK += dS^T Q
  }
  const Operand dkb = advanced(dk, s.start(s.key, b)), dvb = advanced(dv, s.start(s.value, b));
  const long long base = firstKey + warp * 16;
  writeAccumulators(dvAcc, st, pS, [&](long long row, long long c, float value) {
    if (base + row < s.tk)
      storeFloat(dvb, (base + row) * s.value.row + c, value);
  });
  writeAccumulators(dkAcc, st, pS, [&](long long row, long long c, float value) {
    if (base + row < s.tk)
      storeFloat(dkb, s.keyTransposed ? c * s.tk + base + row : (base + row) * s.key.row + c, value);
  });
}

/// dQ for 64 queries: a warp owns 16; the keys stream through.
template <int Tiles>
__global__ void __launch_bounds__(kWarps * 32)
    queryGradKernel(Operand q, Operand k, Operand v, const float *lse, const float *delta, Operand dout, Operand dq,
                    AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(unsigned char, tcShared);
  constexpr int D = 16 * Tiles; // the head size of q, k and v (tilesFor)
  const int pQ = bf16Pitch(s.d), pV = bf16Pitch(s.dv), pP = bf16Pitch(kTile);
  const int pS = f32Pitch(std::max<long long>(kTile, s.d));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carver carve{tcShared};
  __nv_bfloat16 *qs = carve.take<__nv_bfloat16>(kRows * pQ), *ks = carve.take<__nv_bfloat16>(kRows * pQ);
  __nv_bfloat16 *dos = carve.take<__nv_bfloat16>(kRows * pV), *vs = carve.take<__nv_bfloat16>(kRows * pV);
  for (int w = 0; w < warp; ++w) {
    carve.take<float>(16 * pS);
    carve.take<__nv_bfloat16>(16 * pP);
  }
  float *sc = carve.take<float>(16 * pS);
  __nv_bfloat16 *ds = carve.take<__nv_bfloat16>(16 * pP);

  const long long b = blockIdx.y, firstQuery = static_cast<long long>(blockIdx.x) * kRows;
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const Operand dob = advanced(dout, s.start(s.out, b));
  const long long maskOffset = maskBase(s, b);
  loadRows<D>(qs, pQ, qb, firstQuery, s.tq, s.query.row, s.vectorRows);
  loadRows<D>(dos, pV, dob, firstQuery, s.tq, s.out.row, s.vectorRows);
  const LaneRow<kTile> scoreRow(lane);
  const int r = scoreRow.r;
  const long long query = firstQuery + warp * 16 + r;
  const float rowLse = query < s.tq ? lse[b * s.tq + query] : 0.0f;
  const float rowDelta = query < s.tq ? delta[b * s.tq + query] : 0.0f;
  FragC dqAcc[Tiles];
#pragma unroll
  for (int t = 0; t < Tiles; ++t)
    wmma::fill_fragment(dqAcc[t], 0.0f);
  __shared__ int unmaskedFound;
  for (long long firstKey = 0; firstKey < s.tk; firstKey += kTile) {
    if (tileMasked(s, maskOffset, firstQuery, firstKey, &unmaskedFound))
      continue;
    __syncthreads();
    loadKeysAndValues<D>(ks, pQ, vs, pV, kb, vb, s, firstKey);
    __syncthreads();
    warpProduct<false, Tiles, kTile / 16>(qs + warp * 16 * pQ, pQ, ks, pQ, sc, pS); // S = Q K^T
    __syncwarp();
    float p[LaneRow<kTile>::kColumns];
#pragma unroll
    for (int j = 0; j < LaneRow<kTile>::kColumns; ++j) {
      const int col = scoreRow.column(j);
      const long long key = firstKey + col;
      const bool valid = query < s.tq && key < s.tk && !isMasked(s, maskOffset, query, key);
      p[j] = valid ? expf(sc[r * pS + col] * s.scale - rowLse) : 0.0f;
    }
    __syncwarp();
    warpProduct<false, Tiles, kTile / 16>(dos + warp * 16 * pV, pV, vs, pV, sc, pS); // dP = dO V^T
    __syncwarp();
#pragma unroll
    for (int j = 0; j < LaneRow<kTile>::kColumns; ++j) {
      const int col = scoreRow.column(j);
      ds[r * pP + col] = __float2bfloat16_rn(p[j] * (sc[r * pS + col] - rowDelta) * s.scale);
    }
    __syncwarp();
    warpAccumulate<kTile / 16>(dqAcc, ds, pP, ks, pQ); // dQ += dS K
  }
  const long long base = firstQuery + warp * 16;
  const Operand dqb = advanced(dq, s.start(s.query, b));
  writeAccumulators(dqAcc, sc, pS, [&](long long row, long long c, float value) {
    if (base + row < s.tq)
      storeFloat(dqb, (base + row) * s.query.row + c, value);
  });
}

/// Whether the call asks for bf16 tensor cores and its head size is one of
/// the kernels': 16 Tiles with Tiles 2, 4 or 8 (0 for none).
int tilesFor(const KernelCall &call, const AttentionShape &s) {
  if (call.stringParam(contract::Param::kComputeDtype, "f32") != "bf16" || s.d != s.dv)
    return 0;
  return s.d == 32 || s.d == 64 || s.d == 128 ? static_cast<int>(s.d / 16) : 0;
}

dim3 blocksOf(long long rows, long long batch) {
  return dim3(static_cast<unsigned>((rows + kRows - 1) / kRows), static_cast<unsigned>(batch));
}

} // namespace tc

} // namespace

namespace {

/// The forward kernels on one call's operands (q, k and v one buffer for
/// packed_attention, each read at its rows' offset).
Status launchForward(const KernelCall &call, const AttentionShape &s, Operand q, Operand k, Operand v, Operand out,
                     float *lse) {
  if (s.batch == 0 || s.tq == 0)
    return Status::ok();
  if (s.tk == 0)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": no keys");
  const CudaLaunch &launch = launchOf(call);
  switch (tc::tilesFor(call, s)) {
  case 2:
    return launchWithDynamicShared(tc::forwardKernel<2>, tc::blocksOf(s.tq, s.batch), tc::kWarps * 32,
                                   tc::forwardBytes(s), launch.stream, q, k, v, out, lse, s);
  case 4:
    return launchWithDynamicShared(tc::forwardKernel<4>, tc::blocksOf(s.tq, s.batch), tc::kWarps * 32,
                                   tc::forwardBytes(s), launch.stream, q, k, v, out, lse, s);
  case 8:
    return launchWithDynamicShared(tc::forwardKernel<8>, tc::blocksOf(s.tq, s.batch), tc::kWarps * 32,
                                   tc::forwardBytes(s), launch.stream, q, k, v, out, lse, s);
  }
  const size_t bytes = sizeof(float) * kTile * (2 * (s.d + 1) + (s.dv + 1));
  const dim3 grid = tilesOf(s.tq, s.batch);
  switch (columnsPerLane(s.dv)) {
  case 2:
    return launchWithDynamicShared(attentionForwardKernel<2>, grid, kWarps * 32, bytes, launch.stream, q, k, v, out,
                                   lse, s);
  case 4:
    return launchWithDynamicShared(attentionForwardKernel<4>, grid, kWarps * 32, bytes, launch.stream, q, k, v, out,
                                   lse, s);
  default:
    return launchWithDynamicShared(attentionForwardKernel<8>, grid, kWarps * 32, bytes, launch.stream, q, k, v, out,
                                   lse, s);
  }
}

/// The backward kernels: delta, then dK and dV, then dQ (for
/// packed_attention_grad, dq, dk and dv are one buffer: disjoint columns).
Status launchBackward(const KernelCall &call, const AttentionShape &s, Operand q, Operand k, Operand v, Operand out,
                      const float *lse, Operand dout, Operand dq, Operand dk, Operand dv) {
  if (s.batch == 0 || s.tq == 0 || s.tk == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  if (launch.scratchBytes < static_cast<uint64_t>(s.batch * s.tq) * sizeof(float))
    return FSDPC_ERROR(kInternal, call.instruction->op(), ": scratch too small");
  float *delta = static_cast<float *>(launch.scratch);
  launchKernel(attentionDeltaKernel, blocksFor(s.batch * s.tq * 32, launch), kThreads, 0, launch.stream, out, dout,
               delta, s);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  if (const int tiles = tc::tilesFor(call, s)) {
    const dim3 keyBlocks = tc::blocksOf(s.tk, s.batch), queryBlocks = tc::blocksOf(s.tq, s.batch);
    const size_t keyBytes = tc::keyGradBytes(s), queryBytes = tc::queryGradBytes(s);
    const cudaStream_t stream = launch.stream;
    switch (tiles) {
    case 2:
      FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(tc::keyGradKernel<2>, keyBlocks, tc::kWarps * 32, keyBytes, stream,
                                                    q, k, v, lse, delta, dout, dk, dv, s));
      return launchWithDynamicShared(tc::queryGradKernel<2>, queryBlocks, tc::kWarps * 32, queryBytes, stream, q, k, v,
                                     lse, delta, dout, dq, s);
    case 4:
      FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(tc::keyGradKernel<4>, keyBlocks, tc::kWarps * 32, keyBytes, stream,
                                                    q, k, v, lse, delta, dout, dk, dv, s));
      return launchWithDynamicShared(tc::queryGradKernel<4>, queryBlocks, tc::kWarps * 32, queryBytes, stream, q, k, v,
                                     lse, delta, dout, dq, s);
    default:
      FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(tc::keyGradKernel<8>, keyBlocks, tc::kWarps * 32, keyBytes, stream,
                                                    q, k, v, lse, delta, dout, dk, dv, s));
      return launchWithDynamicShared(tc::queryGradKernel<8>, queryBlocks, tc::kWarps * 32, queryBytes, stream, q, k, v,
                                     lse, delta, dout, dq, s);
    }
  }
  const size_t tileBytes = sizeof(float) * kTile * (2 * (s.d + 1) + 2 * (s.dv + 1));
  const size_t keyBytes = tileBytes + sizeof(float) * 2 * kTile;
  const int cols = columnsPerLane(std::max(s.d, s.dv));
  const dim3 keyGrid = tilesOf(s.tk, s.batch), queryGrid = tilesOf(s.tq, s.batch);
  switch (cols) {
  case 2:
    FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(attentionKeyGradKernel<2>, keyGrid, kWarps * 32, keyBytes,
                                                  launch.stream, q, k, v, lse, delta, dout, dk, dv, s));
    return launchWithDynamicShared(attentionQueryGradKernel<2>, queryGrid, kWarps * 32, tileBytes, launch.stream, q, k,
                                   v, lse, delta, dout, dq, s);
  case 4:
    FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(attentionKeyGradKernel<4>, keyGrid, kWarps * 32, keyBytes,
                                                  launch.stream, q, k, v, lse, delta, dout, dk, dv, s));
    return launchWithDynamicShared(attentionQueryGradKernel<4>, queryGrid, kWarps * 32, tileBytes, launch.stream, q, k,
                                   v, lse, delta, dout, dq, s);
  default:
    FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(attentionKeyGradKernel<8>, keyGrid, kWarps * 32, keyBytes,
                                                  launch.stream, q, k, v, lse, delta, dout, dk, dv, s));
    return launchWithDynamicShared(attentionQueryGradKernel<8>, queryGrid, kWarps * 32, tileBytes, launch.stream, q, k,
                                   v, lse, delta, dout, dq, s);
  }
}

} // namespace

Status attention(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, false, s));
  return launchForward(call, s, operandOf(call.inputs[0]), operandOf(call.inputs[1]), operandOf(call.inputs[2]),
                       operandOf(call.outputs[0]), call.outputs[1].f32());
}

// delta: one float per query row, as many as logsumexp holds.
uint64_t attentionGradScratch(const KernelCall &call) {
  return static_cast<uint64_t>(call.inputs[5].numElements()) * sizeof(float);
}

Status attentionGrad(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, false, s));
  return launchBackward(call, s, operandOf(call.inputs[0]), operandOf(call.inputs[1]), operandOf(call.inputs[2]),
                        operandOf(call.inputs[4]), call.inputs[5].f32(), operandOf(call.inputs[6]),
                        operandOf(call.outputs[0]), operandOf(call.outputs[1]), operandOf(call.outputs[2]));
}

Status packedAttention(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, true, s));
  const Operand qkv = operandOf(call.inputs[0]);
  return launchForward(call, s, qkv, qkv, qkv, operandOf(call.outputs[0]), call.outputs[1].f32());
}

uint64_t packedAttentionGradScratch(const KernelCall &call) {
  return static_cast<uint64_t>(call.inputs[3].numElements()) * sizeof(float);
}

Status packedAttentionGrad(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, true, s));
  const Operand qkv = operandOf(call.inputs[0]), dqkv = operandOf(call.outputs[0]);
  return launchBackward(call, s, qkv, qkv, qkv, operandOf(call.inputs[2]), call.inputs[3].f32(),
                        operandOf(call.inputs[4]), dqkv, dqkv, dqkv);
}

} // namespace fsdpc::runtime::cuda
