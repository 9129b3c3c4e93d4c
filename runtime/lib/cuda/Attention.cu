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
// A query row with every key masked writes output 0 and the largest float
// as its logsumexp (the CPU kernel's rule; torch's `_safe_softmax`): its
// running sum stays 0, and the backward kernels' exp(s - lse) is exactly 0.
//
// Sinks (GPT-OSS: a learned logit per query head in each row's softmax
// denominator) change only the forward kernels' last step: the sum and
// logsumexp take the sink in (attentionSinkScale, the CPU kernel's), and
// the backward kernels recompute each probability from that logsumexp as
// before.
//
// These f32 kernels on CUDA cores serve f32 plans and head sizes the
// tensor-core kernels below do not take.
//
// Query, key, value and out (and their gradients) may be bf16 / f16, as
// mixed-precision plans give them: every load widens, every store rounds
// once; logsumexp is f32.
//
// The tensor-core kernels (mixed precision, compute_dtype bf16) are
// FlashAttention-2's: mma.sync with the scores kept in registers, tiles of
// 64, the next tile's copies in flight (see "bf16 tensor cores" below).
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"
#include "KernelVariants.h"
#include "WarpMma.cuh"
#include "../KernelChecks.h"

#include <algorithm>
#include <cfloat>


namespace fsdpc::runtime::cuda {

namespace {

constexpr int kTile = 32;               // queries or keys per tile
constexpr int kWarps = 8;               // per block
constexpr int kRowsPerWarp = kTile / kWarps;
constexpr int kMaxHeadDim = 256;

/// Sizes and strides of one attention call, passed by value to the kernels.
struct AttentionShape {
  long long batch, heads, group, tq, tk, d, dv; // group: query heads to a key and value head
  bool keyTransposed;
  bool causal; // the mask masks exactly key > query: decided by index, not read
  // Every key after its query is masked (causal, or a mask that covers the
  // causal one: mask_covers_causal): those keys are left out unread, whole
  // tiles of them skipped; with a mask, the other keys read it.
  bool hidesFuture;
  // Every row of q, k, v, out (and their gradients) starts 16-byte aligned
  // and keys are not transposed: the tensor-core kernels load rows 8
  // elements at a time (loadVector).
  bool vectorRows;
  float scale, softcap;                 // a score is scale (q . k), or softcap tanh(scale (q . k) / softcap)
  const float *sinks;                   // forward: a logit per query head in each row's denominator, or null
  AttentionRows query, key, value, out; // a gradient's rows are its operand's
  Operand mask;
  Layout<1> maskBatch; // batch index -> offset of the mask's (0, 0) for it
  long long maskRowStride, maskColStride;

  /// Where row 0 of batch index b lies (KernelChecks.h).
  __device__ __forceinline__ long long start(const AttentionRows &rows, long long b) const {
    return rowsStart(rows, heads, b);
  }
  /// The batch index of query head g of key and value batch index kb's
  /// group (the dK and dV kernels run one block per key tile of a key
  /// head, over every query head that reads it).
  __device__ __forceinline__ long long queryIndex(long long kb, long long g) const {
    return groupQueryIndex(heads, group, kb, g);
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
  s.group = a.group;
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
      (call.inputs[1].numElements() != s.batch / s.group * s.tk * s.d ||
       call.inputs[2].numElements() != s.batch / s.group * s.tk * s.dv))
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
  s.hidesFuture = s.causal || call.intParam(contract::Param::kMaskCoversCausal, 0) != 0;
  s.vectorRows = !s.keyTransposed;
  for (const AttentionRows &rows : {s.query, s.key, s.value, s.out})
    s.vectorRows = s.vectorRows && rows.offset % kVectorElements == 0 && rows.outer % kVectorElements == 0 &&
                   rows.head % kVectorElements == 0 && rows.row % kVectorElements == 0;
  // The rows' tensors; not the forward's sinks, a parameter that FSDP's
  // flat buffer places at any offset and that is read one float a row.
  const size_t rowInputs = !packed && !gradient ? std::min<size_t>(call.inputs.size(), 4) : call.inputs.size();
  for (size_t i = 0; i < rowInputs; ++i)
    s.vectorRows = s.vectorRows && (!isFloatDtype(call.inputs[i].dtype) || vectorAligned({&call.inputs[i]}));
  for (const TensorView &view : call.outputs)
    s.vectorRows = s.vectorRows && (!isFloatDtype(view.dtype) || vectorAligned({&view}));
  s.scale = a.scale;
  s.softcap = a.softcap;
  s.sinks = nullptr; // attention() sets them
  return Status::ok();
}

__device__ __forceinline__ long long maskBase(const AttentionShape &s, long long b) {
  long long offset[1];
  s.maskBatch.offsets(b, offset);
  return offset[0];
}

/// Whether the mask excludes (query, key). A causal mask is not read: an
/// i64 load per score, from L2, cost the kernels more than their products.
/// A mask that covers the causal one is read only at or before the query.
__device__ __forceinline__ bool isMasked(const AttentionShape &s, long long maskOffset, long long query,
                                         long long key) {
  if (s.hidesFuture && key > query)
    return true;
  if (s.causal)
    return false;
  return loadInteger(s.mask, maskOffset + query * s.maskRowStride + key * s.maskColStride) != 0;
}

/// For one unmasked (query, key) pair, from their rows in shared memory:
/// the probability p recomputed from the query's logsumexp, and the score
/// gradient dS = p (dO . V - delta) * slope (attentionScore). Both backward
/// kernels use it.
__device__ __forceinline__ void scoreGradient(const AttentionShape &s, const float *qRow, const float *kRow,
                                              const float *doRow, const float *vRow, float lse, float delta, float &p,
                                              float &ds) {
  float dot = 0.0f, dp = 0.0f;
  for (int c = 0; c < s.d; ++c)
    dot += qRow[c] * kRow[c];
  for (int c = 0; c < s.dv; ++c)
    dp += doRow[c] * vRow[c];
  float slope;
  p = expf(attentionScore(dot, s.scale, s.softcap, &slope) - lse);
  ds = p * (dp - delta) * slope;
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
          score = attentionScore(dot, s.scale, s.softcap);
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
    const bool anyKey = rowSum[r] != 0.0f; // a NaN sum (NaN scores) stays NaN
    float inv = anyKey ? 1.0f / rowSum[r] : 0.0f, rowLse = anyKey ? rowMax[r] + logf(rowSum[r]) : FLT_MAX;
    if (s.sinks)
      inv = attentionSinkScale(rowMax[r], rowSum[r], s.sinks[b % s.heads], &rowLse);
#pragma unroll
    for (int t = 0; t < Cols; ++t) {
      const int c = lane + 32 * t;
      if (c < s.dv)
        storeFloat(out, s.start(s.out, b) + query * s.out.row + c, acc[r][t] * inv);
    }
    if (lane == 0)
      lse[b * s.tq + query] = rowLse;
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

/// dK and dV for one tile of 32 keys of one key head: a warp owns 4 keys;
/// lane i scores query i of each query tile, of each query head that reads
/// the key head in turn (one, but for grouped heads).
template <int Cols>
__global__ void __launch_bounds__(kWarps * 32)
    attentionKeyGradKernel(Operand q, Operand k, Operand v, const float *lse, const float *delta, Operand dout,
                           Operand dk, Operand dv, AttentionShape s) {
  FSDPC_DYNAMIC_SHARED(float, shared);
  const int pitchD = s.d + 1, pitchV = s.dv + 1;
  float *keyTile = shared, *vTile = keyTile + kTile * pitchD, *qTile = vTile + kTile * pitchV,
        *doTile = qTile + kTile * pitchD, *lseTile = doTile + kTile * pitchV, *deltaTile = lseTile + kTile;
  const long long firstB = s.queryIndex(blockIdx.y, 0), firstKey = static_cast<long long>(blockIdx.x) * kTile;
  const Operand kb = advanced(k, s.start(s.key, firstB)), vb = advanced(v, s.start(s.value, firstB));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadKeyTile(keyTile, pitchD, kb, s, firstKey);
  loadTile(vTile, pitchV, vb, firstKey, s.tk, s.dv, s.value.row);
  float dkAcc[kRowsPerWarp][Cols], dvAcc[kRowsPerWarp][Cols];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < Cols; ++t)
      dkAcc[r][t] = dvAcc[r][t] = 0.0f;
  for (long long g = 0; g < s.group; ++g) {
    const long long b = firstB + g;
    const Operand qb = advanced(q, s.start(s.query, b)), dob = advanced(dout, s.start(s.out, b));
    const long long maskOffset = maskBase(s, b);
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
        storeFloat(dv, s.start(s.value, firstB) + key * s.value.row + c, dvAcc[r][t]);
      if (c < s.d)
        storeFloat(advanced(dk, s.start(s.key, firstB)), s.keyTransposed ? c * s.tk + key : key * s.key.row + c,
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
// The mixed-precision plans' attention, FlashAttention-2's way: Q, K, V and
// dO are rounded to bf16 as each tile is loaded, every product runs on the
// tensor cores (mma.sync m16n8k16, f32 accumulation; WarpMma.cuh) and the
// softmax stays in f32, as torch's flash attention does under bf16
// autocast. A block holds 64 or 128 query rows (or 64 key rows), a warp
// 16 or 32 of them; the other side streams through in tiles of 64, the
// next tile's copies (cp.async) in flight while the block computes on the
// current one.
//
// The layouts of mma.sync are documented, so a product's result stays in
// the registers of the lanes that own its rows: a lane holds two rows
// (g and g + 8) of every 8-column tile, its max and sum come from its quad
// by two shuffles, and the probabilities, rounded to bf16, are the A
// operand of the next product as they are (aFromAccumulators). Nothing of
// a score tile goes through shared memory. Operands come from the shared
// tiles through ldmatrix: row-major tiles give A fragments and the B
// fragments of a transposed operand; ldmatrix.trans gives B fragments of
// an operand used as it is stored (V in P V, dO in P^T dO, ...).
//
// Query, key and value need one head size, 32, 64 or 128 (a template
// parameter, so the accumulators stay in registers); other shapes take the
// f32 kernels above.
//
// Each kernel comes in variants that compute the same bits (rows per warp,
// a warp's own fragments held in registers or reread), and the first call
// of a shape keeps the fastest by timing (KernelVariants.h): which wins
// depends on registers against warps per multiprocessor, which only the
// GPU can say.

namespace tc {

constexpr int kWarps = 4;  // per block
constexpr int kTile = 64;  // the streamed side's tile
constexpr int kStages = 2; // streamed tiles in shared memory: one computed on, the next landing
constexpr int kScoreTiles = kTile / 8; // a warp's 16 x kTile scores, in 16 x 8 accumulator tiles
constexpr float kLog2e = 1.4426950408889634f;

/// A block's own rows (queries, or keys for dK and dV) come in 16-row mma
/// tiles, M per warp. Every B fragment a warp reads from shared memory (K
/// in Q K^T, V in P V) feeds M products, so M = 2 halves the shared-memory
/// reads per product, which bound one-tile warps (about 1.4 cycles of
/// ldmatrix per cycle of mma at head size 64), at the price of registers
/// (ptxas, head size 64: 242 against 118), so of warps per multiprocessor.
/// The forward and dQ kernels come with M = 2 up to head size 64 and with
/// M = 1; the dK and dV kernel with M = 1 only: its dK and dV accumulators
/// and two score tiles fill the registers already.
__host__ __device__ constexpr int rowsPerBlock(int rowTiles, int warps = kWarps) { return warps * 16 * rowTiles; }
constexpr int kGradRows = rowsPerBlock(1); // the dK and dV kernel's keys per block

/// A tile row's pitch in elements: 16 bytes of padding put the 8 rows an
/// ldmatrix reads on 8 different groups of 4 banks (the pitch is 4 words
/// modulo 32 for every head size here).
__host__ __device__ constexpr int pitchOf(int cols) { return cols + 8; }

/// Starts loading rows [first, first + Rows) of a matrix of D columns,
/// rows `stride` elements apart, into `tile` as bf16; rows past `limit` are
/// zeros (finite: a probability of zero times them is zero). Rows of bf16
/// that start 16-byte aligned (vectorRows) are copied by cp.async and land
/// by the next waitAsyncCopies; other rows are loaded, rounded and stored
/// now. Either way they are visible to the block after a __syncthreads.
template <int D, int Rows>
__device__ __forceinline__ void startTile(__nv_bfloat16 *tile, Operand src, long long first, long long limit,
                                          long long stride, bool vectorRows) {
  constexpr int P = pitchOf(D);
  if (vectorRows) {
    constexpr int kWordsPerRow = D / kVectorElements;
    for (int e = threadIdx.x; e < Rows * kWordsPerRow; e += blockDim.x) {
      const int r = e / kWordsPerRow, c = e % kWordsPerRow * kVectorElements;
      __nv_bfloat16 *to = tile + r * P + c;
      if (first + r >= limit) {
        *reinterpret_cast<uint4 *>(to) = uint4{0, 0, 0, 0};
      } else if (src.dtype == plan::BF16) {
        copyAsync16(to, static_cast<const __nv_bfloat16 *>(src.data) + (first + r) * stride + c);
      } else {
        float v[kVectorElements];
        loadVector(src, (first + r) * stride + c, v);
        *reinterpret_cast<uint4 *>(to) = narrowWord<__nv_bfloat16>(v);
      }
    }
    return;
  }
  for (int e = threadIdx.x; e < Rows * D; e += blockDim.x) {
    const int r = e / D, c = e % D;
    tile[r * P + c] = __float2bfloat16_rn(first + r < limit ? loadFloat(src, (first + r) * stride + c) : 0.0f);
  }
}

/// startTile for keys, which may be stored transposed ([d, tk]): the tile
/// holds them as rows either way.
template <int D, int Rows>
__device__ __forceinline__ void startKeyTile(__nv_bfloat16 *tile, Operand k, const AttentionShape &s,
                                             long long first) {
  if (!s.keyTransposed)
    return startTile<D, Rows>(tile, k, first, s.tk, s.key.row, s.vectorRows);
  for (int e = threadIdx.x; e < Rows * D; e += blockDim.x) {
    const int r = e / D, c = e % D;
    tile[r * pitchOf(D) + c] = __float2bfloat16_rn(first + r < s.tk ? keyAt(k, s, first + r, c) : 0.0f);
  }
}

/// A warp's own rows, M 16-row tiles of a shared tile from row0 (all D
/// columns), as the A operand of its products. Where Hold, their fragments
/// are loaded once (load, after the tile has landed) and kept in registers
/// while the other side streams through; else a product reads each
/// fragment from shared memory when it needs it, so one is live at a time.
template <int D, int M, bool Hold>
struct OwnRows {
  const __nv_bfloat16 *tile;
  int row0, lane;
  uint32_t held[Hold ? M : 1][Hold ? D / 16 : 1][4];

  __device__ __forceinline__ void load() {
    if constexpr (Hold) {
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int kt = 0; kt < D / 16; ++kt)
          loadA<pitchOf(D)>(held[m][kt], tile, row0 + 16 * m, kt * 16, lane);
    }
  }
  /// The fragment of row tile m, columns [16 kt, 16 kt + 16).
  __device__ __forceinline__ void fragment(uint32_t (&a)[4], int m, int kt) const {
    if constexpr (Hold) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        a[i] = held[m][kt][i];
    } else {
      loadA<pitchOf(D)>(a, tile, row0 + 16 * m, kt * 16, lane);
    }
  }
};

/// acc (M x 16 x kTile) = the warp's own rows times the transpose of the
/// kTile rows of `other`: Q K^T, K Q^T, dO V^T, V dO^T. Each B fragment
/// serves all M row tiles.
template <int D, int M, bool Hold>
__device__ __forceinline__ void productWithRows(float (&acc)[M][kScoreTiles][4], const OwnRows<D, M, Hold> &rows,
                                                const __nv_bfloat16 *other, int lane) {
  constexpr int P = pitchOf(D);
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int n = 0; n < kScoreTiles; ++n)
      acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.0f;
#pragma unroll
  for (int kt = 0; kt < D / 16; ++kt) {
    uint32_t a[M][4];
#pragma unroll
    for (int m = 0; m < M; ++m)
      rows.fragment(a[m], m, kt);
#pragma unroll
    for (int np = 0; np < kScoreTiles / 2; ++np) {
      uint32_t b[2][2];
      loadBOfRows<P>(b, other, np * 16, kt * 16, lane);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mmaBf16(acc[m][2 * np], a[m], b[0]);
        mmaBf16(acc[m][2 * np + 1], a[m], b[1]);
      }
    }
  }
}

/// acc (M x 16 x D) += scores (M x 16 x kTile, in registers, rounded to
/// bf16) times the kTile x D tile `values` as stored: P V, P^T dO, dS K,
/// dS^T Q. Each B fragment serves all M row tiles.
template <int D, int M>
__device__ __forceinline__ void accumulateScoresTimes(float (&acc)[M][D / 8][4],
                                                      const float (&scores)[M][kScoreTiles][4],
                                                      const __nv_bfloat16 *values, int lane) {
  constexpr int P = pitchOf(D);
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    uint32_t a[M][4];
#pragma unroll
    for (int m = 0; m < M; ++m)
      aFromAccumulators(a[m], scores[m][2 * kk], scores[m][2 * kk + 1]);
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t b[2][2];
      loadBAsStored<P>(b, values, kk * 16, np * 16, lane);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mmaBf16(acc[m][2 * np], a[m], b[0]);
        mmaBf16(acc[m][2 * np + 1], a[m], b[1]);
      }
    }
  }
}

/// Accumulator element e of an 8-column tile n: its row among a 16-row
/// tile's (g or g + 8) and its column (n * 8 + 2t or the next).
__device__ __forceinline__ int rowOf(int e, int lane) { return lane / 4 + e / 2 * 8; }
__device__ __forceinline__ int columnOf(int n, int e, int lane) { return n * 8 + lane % 4 * 2 + e % 2; }

/// Writes a warp's accumulators (M x 16 rows x D): element (row, column),
/// row counted from the warp's first, goes to `store(row, column, value,
/// m, r)`, where the row is row r of the lane's two in row tile m.
template <int D, int M, typename Store>
__device__ __forceinline__ void writeAccumulators(const float (&acc)[M][D / 8][4], int lane, Store store) {
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        store(16 * m + rowOf(e, lane), columnOf(n, e, lane), acc[m][n][e], m, e / 2);
}

/// Bytes of shared memory: the block's own tiles, then kStages of each
/// streamed tile (and, for dK and dV, the streamed queries' logsumexp and
/// delta).
constexpr size_t rowsBytes(int rows, int d) { return sizeof(__nv_bfloat16) * rows * pitchOf(d); }
constexpr size_t forwardBytes(int d, int rows) { return rowsBytes(rows + 2 * kStages * kTile, d); }
constexpr size_t keyGradBytes(int d) {
  return rowsBytes(2 * kGradRows + 2 * kStages * kTile, d) + sizeof(float) * 2 * kStages * kTile;
}
constexpr size_t queryGradBytes(int d, int rowTiles, int warps) {
  return rowsBytes(2 * rowsPerBlock(rowTiles, warps) + 2 * kStages * kTile, d);
}

/// Starts the key and value tiles from firstKey into stage `stage` of ks
/// and vs: the streamed side of the forward and dQ kernels.
template <int D>
__device__ __forceinline__ void startKeysAndValues(__nv_bfloat16 *ks, __nv_bfloat16 *vs, int stage, Operand k,
                                                   Operand v, const AttentionShape &s, long long firstKey) {
  startKeyTile<D, kTile>(ks + stage * kTile * pitchOf(D), k, s, firstKey);
  startTile<D, kTile>(vs + stage * kTile * pitchOf(D), v, firstKey, s.tk, s.value.row, s.vectorRows);
}

/// The forward and dQ kernels' key loop, at key tile i of keyTiles: waits
/// until tile i has landed for the whole block (and every warp is done with
/// tile i - 1's stage), starts tile i + 1 into that stage, and gives tile
/// i's key and value rows. Every thread of the block calls it.
template <int D>
__device__ __forceinline__ void nextKeyTile(int i, int keyTiles, __nv_bfloat16 *ks, __nv_bfloat16 *vs, Operand k,
                                            Operand v, const AttentionShape &s, const __nv_bfloat16 *&keyRows,
                                            const __nv_bfloat16 *&valueRows) {
  waitAsyncCopies<0>();
  __syncthreads();
  if (i + 1 < keyTiles)
    startKeysAndValues<D>(ks, vs, (i + 1) % kStages, k, v, s, (i + 1) * static_cast<long long>(kTile));
  commitAsyncCopies();
  keyRows = ks + i % kStages * kTile * pitchOf(D);
  valueRows = vs + i % kStages * kTile * pitchOf(D);
}

/// Waits until the block's first copies (its own rows and the first
/// streamed tile) have landed for every thread, so that a warp may load its
/// own rows' fragments.
__device__ __forceinline__ void waitForFirstTiles() {
  waitAsyncCopies<0>();
  __syncthreads();
}

/// A score times log2 e (the exponent base 2 of its softmax term) from its
/// product q . k, given scaleLog2 = scale log2 e; where `slope` is given,
/// the score's derivative by the product (attentionScore, HostDevice.h,
/// the CPU kernel's formula). Capped: the call has a
/// softcap, a template argument so that the kernels without one keep
/// their registers (the tanh, unrolled over a warp's 32 or 64 scores, cost
/// the backward kernels up to 56 registers even where never taken).
template <bool Capped>
__device__ __forceinline__ float log2Score(const AttentionShape &s, float scaleLog2, float product,
                                           float *slope = nullptr) {
  if constexpr (Capped)
    return attentionScore(product, s.scale, s.softcap, slope) * kLog2e;
  if (slope)
    *slope = s.scale;
  return product * scaleLog2;
}

/// Calls visit(n, e, valid) for each score a lane holds in one 16-row tile
/// (accumulator tile n, element e): its row is rows[e / 2], its column
/// firstColumn + columnOf(n, e); rows are queries and columns keys, or the
/// other way round where KeyRows (S^T). valid: the pair is in range and
/// unmasked; `visible` (allVisible) says so for every pair without looking.
template <bool KeyRows, typename Visit>
__device__ __forceinline__ void forEachScore(const AttentionShape &s, long long maskOffset, const int (&rows)[2],
                                             int firstColumn, bool visible, int lane, Visit visit) {
  const int tq = static_cast<int>(s.tq), tk = static_cast<int>(s.tk);
#pragma unroll
  for (int n = 0; n < kScoreTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = rows[e / 2], column = firstColumn + columnOf(n, e, lane);
      const int query = KeyRows ? column : row, key = KeyRows ? row : column;
      visit(n, e, visible || (query < tq && key < tk && !isMasked(s, maskOffset, query, key)));
    }
}

/// Whether every (query, key) pair of `queries` queries from firstQuery and
/// `keys` keys from firstKey is in range and seen under a causal mask: a
/// warp then leaves out the per-score checks (for a long causal sequence,
/// most of its tiles lie wholly below the diagonal).
__device__ __forceinline__ bool allVisible(const AttentionShape &s, int firstQuery, int queries, int firstKey,
                                           int keys) {
  return s.causal && firstQuery + queries <= s.tq && firstKey + keys <= s.tk && firstKey + keys - 1 <= firstQuery;
}

/// The last key (exclusive) any query of [firstQuery, firstQuery + rows)
/// sees: a causal mask hides every key after the last of them.
__device__ __forceinline__ int keysSeen(const AttentionShape &s, int firstQuery, int rows) {
  const int tq = static_cast<int>(s.tq), tk = static_cast<int>(s.tk);
  return s.hidesFuture ? min(tk, min(firstQuery + rows, tq)) : tk;
}

/// The key tiles a warp's queries [firstQuery, firstQuery + rows) see, of
/// the block's keyTiles: under a causal mask a warp leaves out the tiles
/// after its last query (they would add exactly zero), though it still
/// loads them with the block.
__device__ __forceinline__ int keyTilesSeen(const AttentionShape &s, int firstQuery, int rows, int keyTiles) {
  return min(keyTiles, (keysSeen(s, firstQuery, rows) + kTile - 1) / kTile);
}

/// Output and logsumexp for rowsPerBlock(M, Warps) queries: a warp owns M
/// tiles of 16; the keys stream through. A lane keeps rows g and g + 8 of
/// each tile: their running maximum (base 2: scores are scaled by scale log2 e,
/// so that exp is one exp2), its part of their sums (the quad adds them up
/// at the end) and their output columns. Where Hold, a warp keeps its
/// query fragments in registers too, else it rereads them for each key
/// tile (with two row tiles, holding them would spill).
template <int Tiles, int M, bool Hold, int Warps, bool Capped>
__global__ void __launch_bounds__(Warps * 32)
    forwardKernel(Operand q, Operand k, Operand v, Operand out, float *lse, AttentionShape s) {
  constexpr int D = 16 * Tiles, P = pitchOf(D), Rows = rowsPerBlock(M, Warps);
  FSDPC_DYNAMIC_SHARED(uint4, tcWords); // 16-byte aligned, as cp.async and ldmatrix need
  __nv_bfloat16 *qs = reinterpret_cast<__nv_bfloat16 *>(tcWords), *ks = qs + Rows * P, *vs = ks + kStages * kTile * P;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long b = blockIdx.y;
  const int firstQuery = blockIdx.x * Rows, warpQuery = firstQuery + warp * 16 * M; // the block's, the warp's first
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const long long maskOffset = maskBase(s, b);
  int queries[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < 2; ++r)
      queries[m][r] = warpQuery + 16 * m + rowOf(2 * r, lane);
  const float scaleLog2 = s.scale * kLog2e;
  const int keyTiles = (keysSeen(s, firstQuery, Rows) + kTile - 1) / kTile;
  const int warpKeyTiles = keyTilesSeen(s, warpQuery, 16 * M, keyTiles);

  startTile<D, Rows>(qs, qb, firstQuery, s.tq, s.query.row, s.vectorRows);
  startKeysAndValues<D>(ks, vs, 0, kb, vb, s, 0);
  commitAsyncCopies();
  OwnRows<D, M, Hold> queryRows{qs, warp * 16 * M, lane, {}};
  if constexpr (Hold) {
    waitForFirstTiles();
    queryRows.load();
  }
  float o[M][D / 8][4] = {}, rowMax[M][2], rowSum[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < 2; ++r) {
      rowMax[m][r] = -INFINITY;
      rowSum[m][r] = 0.0f;
    }
  for (int i = 0; i < keyTiles; ++i) {
    const __nv_bfloat16 *kTileRows, *vTileRows;
    nextKeyTile<D>(i, keyTiles, ks, vs, kb, vb, s, kTileRows, vTileRows);
    // In a block of kTile queries every warp sees every key tile of the
    // block; the test would only cost registers there.
    if (Rows > kTile && i >= warpKeyTiles)
      continue;
    const int firstKey = i * kTile;
    float sc[M][kScoreTiles][4];
    productWithRows(sc, queryRows, kTileRows, lane); // S = Q K^T
    const bool visible = allVisible(s, warpQuery, 16 * M, firstKey, kTile);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float tileMax[2] = {-INFINITY, -INFINITY};
      forEachScore<false>(s, maskOffset, queries[m], firstKey, visible, lane, [&](int n, int e, bool valid) {
        sc[m][n][e] = valid ? log2Score<Capped>(s, scaleLog2, sc[m][n][e]) : -INFINITY;
        tileMax[e / 2] = fmaxf(tileMax[e / 2], sc[m][n][e]);
      });
      float correction[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 1));
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 2));
        const float newMax = fmaxf(rowMax[m][r], tileMax[r]);
        // Nothing unmasked yet: keep everything at zero, nothing to rescale.
        correction[r] = newMax == -INFINITY ? 1.0f : exp2f(rowMax[m][r] - newMax);
        rowMax[m][r] = newMax;
        rowSum[m][r] *= correction[r];
      }
#pragma unroll
      for (int n = 0; n < kScoreTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float rowMaximum = rowMax[m][e / 2];
          sc[m][n][e] = rowMaximum == -INFINITY ? 0.0f : exp2f(sc[m][n][e] - rowMaximum);
          rowSum[m][e / 2] += sc[m][n][e];
        }
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[m][n][e] *= correction[e / 2];
    }
    accumulateScoresTimes<D, M>(o, sc, vTileRows, lane); // O += P V
  }
  float inverse[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rowSum[m][r] += __shfl_xor_sync(0xffffffffu, rowSum[m][r], 1);
      rowSum[m][r] += __shfl_xor_sync(0xffffffffu, rowSum[m][r], 2);
      const bool anyKey = rowSum[m][r] != 0.0f; // else every key masked; a NaN sum stays NaN
      inverse[m][r] = anyKey ? 1.0f / rowSum[m][r] : 0.0f;
      float rowLse = anyKey ? rowMax[m][r] / kLog2e + logf(rowSum[m][r]) : FLT_MAX;
      if (s.sinks)
        inverse[m][r] = attentionSinkScale(rowMax[m][r] / kLog2e, rowSum[m][r], s.sinks[b % s.heads], &rowLse);
      if (lane % 4 == 0 && queries[m][r] < s.tq)
        lse[b * s.tq + queries[m][r]] = rowLse;
    }
  const Operand ob = advanced(out, s.start(s.out, b));
  writeAccumulators<D, M>(o, lane, [&](int row, int c, float value, int m, int r) {
    const int query = warpQuery + row;
    if (query < s.tq)
      storeFloat(ob, query * s.out.row + c, value * inverse[m][r]);
  });
}

/// dK and dV for kGradRows keys: a warp owns 16 (its scores are S^T: rows
/// keys, columns queries); the queries stream through, with their
/// logsumexp (times log2 e) and delta. Where Hold, a warp keeps its K and V
/// fragments in registers, else it reads them for each query tile (at head
/// size 128 the kernel fills its 255 registers without them).
template <int Tiles, bool Hold, bool Capped>
__global__ void __launch_bounds__(kWarps * 32)
    keyGradKernel(Operand q, Operand k, Operand v, const float *lse, const float *delta, Operand dout, Operand dk,
                  Operand dv, AttentionShape s) {
  constexpr int D = 16 * Tiles, P = pitchOf(D);
  FSDPC_DYNAMIC_SHARED(uint4, tcWords); // 16-byte aligned, as cp.async and ldmatrix need
  __nv_bfloat16 *ks = reinterpret_cast<__nv_bfloat16 *>(tcWords), *vs = ks + kGradRows * P, *qs = vs + kGradRows * P,
                *dos = qs + kStages * kTile * P;
  float *lseTile = reinterpret_cast<float *>(dos + kStages * kTile * P), *deltaTile = lseTile + kStages * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // The block's key head is read by s.group query heads (grouped-query
  // attention; one otherwise): their query tiles stream through in turn,
  // into the same accumulators.
  const long long firstB = s.queryIndex(blockIdx.y, 0);
  const int firstKey = blockIdx.x * kGradRows;
  const Operand kb = advanced(k, s.start(s.key, firstB)), vb = advanced(v, s.start(s.value, firstB));
  const int keys[2] = {firstKey + warp * 16 + rowOf(0, lane), firstKey + warp * 16 + rowOf(2, lane)};
  const float scaleLog2 = s.scale * kLog2e;
  // A causal mask hides every query before the block's first key.
  const int tq = static_cast<int>(s.tq), firstQuery = s.hidesFuture ? firstKey : 0;
  const int queryTiles = firstQuery < tq ? (tq - firstQuery + kTile - 1) / kTile : 0;
  // Step i: query head i / queryTiles of the group, its tile i % queryTiles.
  auto startQueries = [&](int i) {
    const int stage = i % kStages;
    const long long b = firstB + i / queryTiles;
    const int first = firstQuery + (i % queryTiles) * kTile;
    startTile<D, kTile>(qs + stage * kTile * P, advanced(q, s.start(s.query, b)), first, s.tq, s.query.row,
                        s.vectorRows);
    startTile<D, kTile>(dos + stage * kTile * P, advanced(dout, s.start(s.out, b)), first, s.tq, s.out.row,
                        s.vectorRows);
    for (int j = threadIdx.x; j < kTile; j += blockDim.x) {
      const int query = first + j;
      lseTile[stage * kTile + j] = query < s.tq ? lse[b * s.tq + query] * kLog2e : 0.0f;
      deltaTile[stage * kTile + j] = query < s.tq ? delta[b * s.tq + query] : 0.0f;
    }
  };
  const int steps = static_cast<int>(s.group) * queryTiles;

  startKeyTile<D, kGradRows>(ks, kb, s, firstKey);
  startTile<D, kGradRows>(vs, vb, firstKey, s.tk, s.value.row, s.vectorRows);
  if (queryTiles > 0)
    startQueries(0);
  commitAsyncCopies();
  OwnRows<D, 1, Hold> keyRows{ks, warp * 16, lane, {}}, valueRows{vs, warp * 16, lane, {}};
  if constexpr (Hold) {
    waitForFirstTiles();
    keyRows.load();
    valueRows.load();
  }
  float dkAcc[1][D / 8][4] = {}, dvAcc[1][D / 8][4] = {};
  for (int i = 0; i < steps; ++i) {
    waitAsyncCopies<0>();
    __syncthreads(); // tile i landed for all; everyone is done with tile i - 1's stage
    if (i + 1 < steps)
      startQueries(i + 1);
    commitAsyncCopies();
    const int stage = i % kStages;
    const __nv_bfloat16 *qTileRows = qs + stage * kTile * P, *doTileRows = dos + stage * kTile * P;
    const float *lseRow = lseTile + stage * kTile, *deltaRow = deltaTile + stage * kTile;
    const int first = firstQuery + (i % queryTiles) * kTile;
    const long long maskOffset = maskBase(s, firstB + i / queryTiles);
    float p[1][kScoreTiles][4], ds[1][kScoreTiles][4];
    if constexpr (Capped) {
      // dP^T first: a capped score's slope needs its product, so p and dS
      // come from it in one pass.
      productWithRows(ds, valueRows, doTileRows, lane); // dP^T = V dO^T
      productWithRows(p, keyRows, qTileRows, lane);     // S^T = K Q^T
      const bool visible = allVisible(s, first, kTile, firstKey + warp * 16, 16);
      forEachScore<true>(s, maskOffset, keys, first, visible, lane, [&](int n, int e, bool valid) {
        const int column = columnOf(n, e, lane);
        float slope = 0.0f;
        p[0][n][e] = valid ? exp2f(log2Score<true>(s, scaleLog2, p[0][n][e], &slope) - lseRow[column]) : 0.0f;
        ds[0][n][e] = p[0][n][e] * (ds[0][n][e] - deltaRow[column]) * slope;
      });
    } else {
      productWithRows(p, keyRows, qTileRows, lane); // S^T = K Q^T
      const bool visible = allVisible(s, first, kTile, firstKey + warp * 16, 16);
      forEachScore<true>(s, maskOffset, keys, first, visible, lane, [&](int n, int e, bool valid) {
        p[0][n][e] = valid ? exp2f(p[0][n][e] * scaleLog2 - lseRow[columnOf(n, e, lane)]) : 0.0f;
      });
      productWithRows(ds, valueRows, doTileRows, lane); // dP^T = V dO^T
#pragma unroll
      for (int n = 0; n < kScoreTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ds[0][n][e] = p[0][n][e] * (ds[0][n][e] - deltaRow[columnOf(n, e, lane)]) * s.scale;
    }
    accumulateScoresTimes<D, 1>(dvAcc, p, doTileRows, lane); // dV += P^T dO
    accumulateScoresTimes<D, 1>(dkAcc, ds, qTileRows, lane); // dK += dS^T Q
  }
  const Operand dkb = advanced(dk, s.start(s.key, firstB)), dvb = advanced(dv, s.start(s.value, firstB));
  const int base = firstKey + warp * 16;
  writeAccumulators<D, 1>(dvAcc, lane, [&](int row, int c, float value, int, int) {
    if (base + row < s.tk)
      storeFloat(dvb, (base + row) * s.value.row + c, value);
  });
  writeAccumulators<D, 1>(dkAcc, lane, [&](int row, int c, float value, int, int) {
    if (base + row < s.tk)
      storeFloat(dkb, s.keyTransposed ? c * s.tk + base + row : (base + row) * s.key.row + c, value);
  });
}

/// dQ for rowsPerBlock(M, Warps) queries: a warp owns M tiles of 16 and
/// rereads its Q and dO fragments for each key tile; the keys stream
/// through. With one row tile up to head size 64 it fits 128 registers, 16
/// warps a multiprocessor; the bound keeps ptxas there (left to itself it
/// took 129, which costs a block).
template <int Tiles, int M, int Warps, bool Capped>
__global__ void __launch_bounds__(Warps * 32, M == 1 && Tiles <= 4 ? 16 / Warps : 1)
    queryGradKernel(Operand q, Operand k, Operand v, const float *lse, const float *delta, Operand dout, Operand dq,
                    AttentionShape s) {
  constexpr int D = 16 * Tiles, P = pitchOf(D), Rows = rowsPerBlock(M, Warps);
  FSDPC_DYNAMIC_SHARED(uint4, tcWords); // 16-byte aligned, as cp.async and ldmatrix need
  __nv_bfloat16 *qs = reinterpret_cast<__nv_bfloat16 *>(tcWords), *dos = qs + Rows * P, *ks = dos + Rows * P,
                *vs = ks + kStages * kTile * P;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long b = blockIdx.y;
  const int firstQuery = blockIdx.x * Rows, warpQuery = firstQuery + warp * 16 * M;
  const Operand qb = advanced(q, s.start(s.query, b)), kb = advanced(k, s.start(s.key, b)),
                vb = advanced(v, s.start(s.value, b));
  const Operand dob = advanced(dout, s.start(s.out, b));
  const long long maskOffset = maskBase(s, b);
  int queries[M][2];
  float rowLse[M][2], rowDelta[M][2]; // logsumexp times log2 e
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      queries[m][r] = warpQuery + 16 * m + rowOf(2 * r, lane);
      rowLse[m][r] = queries[m][r] < s.tq ? lse[b * s.tq + queries[m][r]] * kLog2e : 0.0f;
      rowDelta[m][r] = queries[m][r] < s.tq ? delta[b * s.tq + queries[m][r]] : 0.0f;
    }
  const float scaleLog2 = s.scale * kLog2e;
  const int keyTiles = (keysSeen(s, firstQuery, Rows) + kTile - 1) / kTile;
  const int warpKeyTiles = keyTilesSeen(s, warpQuery, 16 * M, keyTiles);

  startTile<D, Rows>(qs, qb, firstQuery, s.tq, s.query.row, s.vectorRows);
  startTile<D, Rows>(dos, dob, firstQuery, s.tq, s.out.row, s.vectorRows);
  startKeysAndValues<D>(ks, vs, 0, kb, vb, s, 0);
  commitAsyncCopies();
  const OwnRows<D, M, false> queryRows{qs, warp * 16 * M, lane, {}}, outGradRows{dos, warp * 16 * M, lane, {}};
  float dqAcc[M][D / 8][4] = {};
  for (int i = 0; i < keyTiles; ++i) {
    const __nv_bfloat16 *kTileRows, *vTileRows;
    nextKeyTile<D>(i, keyTiles, ks, vs, kb, vb, s, kTileRows, vTileRows);
    // As in the forward kernel, but only with two row tiles: in a block of
    // 8 warps of one, held to 128 registers, the test spilled 84 bytes at
    // head size 64 (its warps then add the zeros of those tiles).
    if (M > 1 && i >= warpKeyTiles)
      continue;
    const int firstKey = i * kTile;
    // dP first, then each score's p and dS from its product in one pass
    // (a capped score's slope needs the product); P itself is not kept.
    // In this order ptxas spills less (head size 64, 16 queries a warp: 16
    // bytes against 60) for the same bits.
    float sc[M][kScoreTiles][4], ds[M][kScoreTiles][4];
    productWithRows(ds, outGradRows, vTileRows, lane); // dP = dO V^T
    productWithRows(sc, queryRows, kTileRows, lane);   // S = Q K^T
    const bool visible = allVisible(s, warpQuery, 16 * M, firstKey, kTile);
#pragma unroll
    for (int m = 0; m < M; ++m)
      forEachScore<false>(s, maskOffset, queries[m], firstKey, visible, lane, [&](int n, int e, bool valid) {
        float slope = 0.0f;
        const float p = valid ? exp2f(log2Score<Capped>(s, scaleLog2, sc[m][n][e], &slope) - rowLse[m][e / 2]) : 0.0f;
        ds[m][n][e] = p * (ds[m][n][e] - rowDelta[m][e / 2]) * slope;
      });
    accumulateScoresTimes<D, M>(dqAcc, ds, kTileRows, lane); // dQ += dS K
  }
  const Operand dqb = advanced(dq, s.start(s.query, b));
  writeAccumulators<D, M>(dqAcc, lane, [&](int row, int c, float value, int, int) {
    if (warpQuery + row < s.tq)
      storeFloat(dqb, (warpQuery + row) * s.query.row + c, value);
  });
}

/// Whether the call asks for bf16 tensor cores and its head size is one of
/// the kernels': 16 Tiles with Tiles 2, 4 or 8 (0 for none).
int tilesFor(const KernelCall &call, const AttentionShape &s) {
  // Positions within a sequence are ints in these kernels (64-bit ones
  // cost registers in every score's mask check).
  constexpr long long kMaxLength = 1LL << 30;
  if (call.stringParam(contract::Param::kComputeDtype, "f32") != "bf16" || s.d != s.dv || s.tq > kMaxLength ||
      s.tk > kMaxLength)
    return 0;
  return s.d == 32 || s.d == 64 || s.d == 128 ? static_cast<int>(s.d / 16) : 0;
}

/// The grid of a kernel whose blocks hold `blockRows` of `rows` each.
dim3 blocksOf(long long rows, long long batch, int blockRows) {
  return dim3(static_cast<unsigned>((rows + blockRows - 1) / blockRows), static_cast<unsigned>(batch));
}

} // namespace tc

} // namespace

namespace {

/// The operands of one forward call (q, k and v one buffer for
/// packed_attention, each read at its rows' offset).
struct ForwardOperands {
  Operand q, k, v, out;
  float *lse;
};

/// The operands of one backward call (for packed_attention_grad, dq, dk and
/// dv are one buffer: disjoint columns), delta in the call's scratch.
struct BackwardOperands {
  Operand q, k, v, out;
  const float *lse;
  Operand dout, dq, dk, dv;
  float *delta;
};

template <int Tiles, int M, bool Hold, int Warps = tc::kWarps, bool Capped = false>
Status launchTensorCoreForward(cudaStream_t stream, const AttentionShape &s, const ForwardOperands &o) {
  constexpr int rows = tc::rowsPerBlock(M, Warps);
  return launchWithDynamicShared(tc::forwardKernel<Tiles, M, Hold, Warps, Capped>, tc::blocksOf(s.tq, s.batch, rows),
                                 Warps * 32, tc::forwardBytes(16 * Tiles, rows), stream, o.q, o.k, o.v, o.out, o.lse,
                                 s);
}

/// The dK and dV kernel (own fragments held or not), then the dQ kernel
/// (QueryRowTiles a warp, QueryWarps a block, fragments reread).
template <int Tiles, bool HoldKeys, int QueryRowTiles, int QueryWarps = tc::kWarps, bool Capped = false>
Status launchTensorCoreBackward(cudaStream_t stream, const AttentionShape &s, const BackwardOperands &o) {
  const dim3 keyBlocks = tc::blocksOf(s.tk, s.batch / s.group, tc::kGradRows),
             queryBlocks = tc::blocksOf(s.tq, s.batch, tc::rowsPerBlock(QueryRowTiles, QueryWarps));
  FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(tc::keyGradKernel<Tiles, HoldKeys, Capped>, keyBlocks, tc::kWarps * 32,
                                                tc::keyGradBytes(16 * Tiles), stream, o.q, o.k, o.v, o.lse, o.delta,
                                                o.dout, o.dk, o.dv, s));
  return launchWithDynamicShared(tc::queryGradKernel<Tiles, QueryRowTiles, QueryWarps, Capped>, queryBlocks,
                                 QueryWarps * 32, tc::queryGradBytes(16 * Tiles, QueryRowTiles, QueryWarps), stream,
                                 o.q, o.k, o.v, o.lse, o.delta, o.dout, o.dq, s);
}

Status launchF32Forward(cudaStream_t stream, const AttentionShape &s, const ForwardOperands &o) {
  const size_t bytes = sizeof(float) * kTile * (2 * (s.d + 1) + (s.dv + 1));
  const dim3 grid = tilesOf(s.tq, s.batch);
  switch (columnsPerLane(s.dv)) {
  case 2:
    return launchWithDynamicShared(attentionForwardKernel<2>, grid, kWarps * 32, bytes, stream, o.q, o.k, o.v, o.out,
                                   o.lse, s);
  case 4:
    return launchWithDynamicShared(attentionForwardKernel<4>, grid, kWarps * 32, bytes, stream, o.q, o.k, o.v, o.out,
                                   o.lse, s);
  default:
    return launchWithDynamicShared(attentionForwardKernel<8>, grid, kWarps * 32, bytes, stream, o.q, o.k, o.v, o.out,
                                   o.lse, s);
  }
}

Status launchF32Backward(cudaStream_t stream, const AttentionShape &s, const BackwardOperands &o) {
  const size_t tileBytes = sizeof(float) * kTile * (2 * (s.d + 1) + 2 * (s.dv + 1));
  const size_t keyBytes = tileBytes + sizeof(float) * 2 * kTile;
  const dim3 keyGrid = tilesOf(s.tk, s.batch / s.group), queryGrid = tilesOf(s.tq, s.batch);
  switch (columnsPerLane(std::max(s.d, s.dv))) {
  case 2:
    FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(attentionKeyGradKernel<2>, keyGrid, kWarps * 32, keyBytes, stream,
                                                  o.q, o.k, o.v, o.lse, o.delta, o.dout, o.dk, o.dv, s));
    return launchWithDynamicShared(attentionQueryGradKernel<2>, queryGrid, kWarps * 32, tileBytes, stream, o.q, o.k,
                                   o.v, o.lse, o.delta, o.dout, o.dq, s);
  case 4:
    FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(attentionKeyGradKernel<4>, keyGrid, kWarps * 32, keyBytes, stream,
                                                  o.q, o.k, o.v, o.lse, o.delta, o.dout, o.dk, o.dv, s));
    return launchWithDynamicShared(attentionQueryGradKernel<4>, queryGrid, kWarps * 32, tileBytes, stream, o.q, o.k,
                                   o.v, o.lse, o.delta, o.dout, o.dq, s);
  default:
    FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(attentionKeyGradKernel<8>, keyGrid, kWarps * 32, keyBytes, stream,
                                                  o.q, o.k, o.v, o.lse, o.delta, o.dout, o.dk, o.dv, s));
    return launchWithDynamicShared(attentionQueryGradKernel<8>, queryGrid, kWarps * 32, tileBytes, stream, o.q, o.k,
                                   o.v, o.lse, o.delta, o.dout, o.dq, s);
  }
}

/// The forward variants of a tensor-core call, up to head size 64:
///
/// - 128 queries a block of 4 warps, 32 a warp (query fragments reread for
///   each key tile: holding them too would spill);
/// - 128 queries a block of 8 warps, 16 a warp, fragments reread (held,
///   135 registers leave one block of 8 warps a multiprocessor);
/// - 64 queries a block of 4 warps, 16 a warp, fragments held or reread.
///
/// ptxas at head size 64: 242, 124, 135 and 118 registers, so 8, 16, 12
/// and 16 warps a multiprocessor. A block of 128 queries copies each key
/// and value tile from L2 once for twice the queries. At 128, the last
/// only.
/// Each gives a query the same products in the same order (a warp's second
/// row tile only shares its B fragments), and the key tiles a larger block
/// adds for a query lie wholly after it under a causal mask, so they add
/// exp2(-inf) = 0 and rescale by exp2(0) = 1: the same bits.
template <int Tiles>
std::vector<KernelVariant> tensorCoreForwardVariants(cudaStream_t stream, const AttentionShape &s,
                                                     const ForwardOperands &o) {
  const KernelVariant reread{"64 queries a block, 16 a warp, fragments reread",
                             [=] { return launchTensorCoreForward<Tiles, 1, false>(stream, s, o); }};
  if (s.softcap != 0.0f) // soft-capped scores (Gemma 2): one variant, built for them
    return {{"64 queries a block, 16 a warp, fragments reread, scores capped",
             [=] { return launchTensorCoreForward<Tiles, 1, false, tc::kWarps, true>(stream, s, o); }}};
  if constexpr (Tiles > 4)
    return {reread};
  else
    return {{"128 queries a block, 32 a warp", [=] { return launchTensorCoreForward<Tiles, 2, false>(stream, s, o); }},
            {"128 queries a block, 16 a warp",
             [=] { return launchTensorCoreForward<Tiles, 1, false, 8>(stream, s, o); }},
            {"64 queries a block, 16 a warp, fragments held",
             [=] { return launchTensorCoreForward<Tiles, 1, true>(stream, s, o); }},
            reread};
}

/// The backward variants of a tensor-core call, up to head size 64: the dK
/// and dV kernel with its key and value fragments held in registers or
/// reread for each query tile, and the dQ kernel with 128 queries a block
/// of 4 warps (32 a warp) or of 8 warps (16 a warp), or 64 queries a block
/// of 4 warps: the six pairs. The dQ kernel rereads its own fragments
/// (holding them took 188 registers, 2 blocks of 4 warps a multiprocessor).
/// At 128, one row tile and rereading only. As in forward, the same
/// products in the same order for each row, and a larger dQ block's extra
/// key tiles add exactly zero: the same bits.
template <int Tiles>
std::vector<KernelVariant> tensorCoreBackwardVariants(cudaStream_t stream, const AttentionShape &s,
                                                      const BackwardOperands &o) {
  const KernelVariant reread{"dK dV fragments reread, dQ 64 queries a block",
                             [=] { return launchTensorCoreBackward<Tiles, false, 1>(stream, s, o); }};
  if (s.softcap != 0.0f)
    return {{"dK dV fragments reread, dQ 64 queries a block, scores capped",
             [=] { return launchTensorCoreBackward<Tiles, false, 1, tc::kWarps, true>(stream, s, o); }}};
  if constexpr (Tiles > 4)
    return {reread};
  else
    return {{"dK dV fragments held, dQ 128 queries a block, 32 a warp",
             [=] { return launchTensorCoreBackward<Tiles, true, 2>(stream, s, o); }},
            {"dK dV fragments held, dQ 128 queries a block, 16 a warp",
             [=] { return launchTensorCoreBackward<Tiles, true, 1, 8>(stream, s, o); }},
            {"dK dV fragments held, dQ 64 queries a block",
             [=] { return launchTensorCoreBackward<Tiles, true, 1>(stream, s, o); }},
            {"dK dV fragments reread, dQ 128 queries a block, 32 a warp",
             [=] { return launchTensorCoreBackward<Tiles, false, 2>(stream, s, o); }},
            {"dK dV fragments reread, dQ 128 queries a block, 16 a warp",
             [=] { return launchTensorCoreBackward<Tiles, false, 1, 8>(stream, s, o); }},
            reread};
}

std::vector<KernelVariant> forwardVariants(const KernelCall &call, const AttentionShape &s, const ForwardOperands &o,
                                            cudaStream_t stream) {
  switch (tc::tilesFor(call, s)) {
  case 2:
    return tensorCoreForwardVariants<2>(stream, s, o);
  case 4:
    return tensorCoreForwardVariants<4>(stream, s, o);
  case 8:
    return tensorCoreForwardVariants<8>(stream, s, o);
  }
  return {{"f32", [=] { return launchF32Forward(stream, s, o); }}};
}

std::vector<KernelVariant> backwardVariants(const KernelCall &call, const AttentionShape &s, const BackwardOperands &o,
                                            cudaStream_t stream) {
  switch (tc::tilesFor(call, s)) {
  case 2:
    return tensorCoreBackwardVariants<2>(stream, s, o);
  case 4:
    return tensorCoreBackwardVariants<4>(stream, s, o);
  case 8:
    return tensorCoreBackwardVariants<8>(stream, s, o);
  }
  return {{"f32", [=] { return launchF32Backward(stream, s, o); }}};
}

/// What the variants' speed depends on, as the note on stderr names it.
std::string variantShape(const KernelCall &call, const AttentionShape &s) {
  const std::string dtype = dtypeName(call.inputs[0].dtype);
  return call.instruction->op() + " (" + std::to_string(s.batch) + " heads, " + std::to_string(s.tq) + " queries, " +
         std::to_string(s.tk) + " keys, head size " + std::to_string(s.d) + ", " + dtype +
         (s.causal ? ", causal" : s.hidesFuture ? ", mask covers causal" : "") + (s.vectorRows ? "" : ", unaligned") + ")";
}

Status runForward(const KernelCall &call, const AttentionShape &s, const ForwardOperands &o) {
  if (s.batch == 0 || s.tq == 0)
    return Status::ok();
  if (s.tk == 0)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": no keys");
  return runFastestVariant(call, variantShape(call, s), forwardVariants(call, s, o, launchOf(call).stream));
}

/// delta first, then the dK and dV kernel and the dQ kernel of the chosen
/// variant (delta is the same for every variant, so it is not timed).
Status runBackward(const KernelCall &call, const AttentionShape &s, BackwardOperands o) {
  if (s.batch == 0 || s.tq == 0 || s.tk == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  if (launch.scratchBytes < static_cast<uint64_t>(s.batch * s.tq) * sizeof(float))
    return FSDPC_ERROR(kInternal, call.instruction->op(), ": scratch too small");
  o.delta = static_cast<float *>(launch.scratch);
  launchKernel(attentionDeltaKernel, blocksFor(s.batch * s.tq * 32, launch), kThreads, 0, launch.stream, o.out,
               o.dout, o.delta, s);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return runFastestVariant(call, variantShape(call, s), backwardVariants(call, s, o, launch.stream));
}

ForwardOperands attentionOperands(const KernelCall &call) {
  return {operandOf(call.inputs[0]), operandOf(call.inputs[1]), operandOf(call.inputs[2]),
          operandOf(call.outputs[0]), call.outputs[1].f32()};
}
BackwardOperands attentionGradOperands(const KernelCall &call) {
  return {operandOf(call.inputs[0]),  operandOf(call.inputs[1]),  operandOf(call.inputs[2]),
          operandOf(call.inputs[4]),  call.inputs[5].f32(),       operandOf(call.inputs[6]),
          operandOf(call.outputs[0]), operandOf(call.outputs[1]), operandOf(call.outputs[2]),
          nullptr};
}
ForwardOperands packedAttentionOperands(const KernelCall &call) {
  const Operand qkv = operandOf(call.inputs[0]);
  return {qkv, qkv, qkv, operandOf(call.outputs[0]), call.outputs[1].f32()};
}
BackwardOperands packedAttentionGradOperands(const KernelCall &call) {
  const Operand qkv = operandOf(call.inputs[0]), dqkv = operandOf(call.outputs[0]);
  return {qkv, qkv, qkv, operandOf(call.inputs[2]), call.inputs[3].f32(), operandOf(call.inputs[4]),
          dqkv, dqkv, dqkv, nullptr};
}

/// How many variants a call has; 1 where its shape is refused (the call
/// itself then says why).
int forwardVariantCount(const KernelCall &call, bool packed) {
  AttentionShape s;
  if (!attentionShape(call, packed, s).isOk())
    return 1;
  return static_cast<int>(forwardVariants(call, s, {}, nullptr).size());
}
int backwardVariantCount(const KernelCall &call, bool packed) {
  AttentionShape s;
  if (!attentionShape(call, packed, s).isOk())
    return 1;
  return static_cast<int>(backwardVariants(call, s, {}, nullptr).size());
}

} // namespace

Status attention(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, false, s));
  if (call.inputs.size() > 4)
    s.sinks = call.inputs[4].f32();
  return runForward(call, s, attentionOperands(call));
}

// delta: one float per query row, as many as logsumexp holds.
uint64_t attentionGradScratch(const KernelCall &call) {
  return static_cast<uint64_t>(call.inputs[5].numElements()) * sizeof(float);
}

Status attentionGrad(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, false, s));
  return runBackward(call, s, attentionGradOperands(call));
}

Status packedAttention(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, true, s));
  return runForward(call, s, packedAttentionOperands(call));
}

uint64_t packedAttentionGradScratch(const KernelCall &call) {
  return static_cast<uint64_t>(call.inputs[3].numElements()) * sizeof(float);
}

Status packedAttentionGrad(const KernelCall &call) {
  AttentionShape s;
  FSDPC_RETURN_IF_ERROR(attentionShape(call, true, s));
  return runBackward(call, s, packedAttentionGradOperands(call));
}

int attentionVariants(const KernelCall &call) { return forwardVariantCount(call, false); }
int attentionGradVariants(const KernelCall &call) { return backwardVariantCount(call, false); }
int packedAttentionVariants(const KernelCall &call) { return forwardVariantCount(call, true); }
int packedAttentionGradVariants(const KernelCall &call) { return backwardVariantCount(call, true); }

} // namespace fsdpc::runtime::cuda
