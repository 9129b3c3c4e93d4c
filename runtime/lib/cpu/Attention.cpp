//===- Attention.cpp - scaled dot-product attention -----------------------===//
//
// For each batch index (batch and head): its scores, masked softmax and
// output, through BLAS like the unfused batch_matmul / masked_softmax /
// batch_matmul. Only each query row's logsumexp is kept for the gradient,
// which recomputes the probabilities from it: the tq x tk block lives in
// per-thread scratch, never in the plan's memory.
//
// A query row with every key masked (a left-padded sequence's padding
// sees no key) gets probabilities 0 and output 0, as masked_softmax gives
// zeros for it and torch's SDPA its `_safe_softmax`, and the largest float
// as its logsumexp: every recomputed probability exp(s - lse) is exactly 0,
// and the value is finite (--check-nonfinite looks for the first infinity).
//
// With sinks (a learned logit per query head in each row's denominator,
// GPT-OSS), each row's probabilities and logsumexp take the sink in
// (attentionSinkScale): the gradient recomputes them from that logsumexp
// as it is, and the sinks' own gradient is the graph's.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "../KernelChecks.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace fsdpc::runtime::cpu {

namespace {

/// Sizes and strides of one attention call: the shared sizes
/// (KernelChecks.h) and where each batch index reads the mask.
struct AttentionLayout : AttentionDims {
  std::vector<int64_t> maskBase; // per batch index: the mask's offset
  int64_t maskRowStride = 0, maskColStride = 0;

  int64_t start(const AttentionRows &rows, int64_t b) const { return rowsStart(rows, heads, b); }
};

/// The shared sizes of an attention (`packed` false) or packed_attention
/// call, and where each batch index reads the mask.
Status layoutOf(const KernelCall &call, bool packed, AttentionLayout &l) {
  FSDPC_RETURN_IF_ERROR(packed ? packedAttentionDims(call, l) : attentionDims(call, l));
  const size_t rank = l.scores.size();
  l.maskRowStride = l.maskStrides[rank - 2];
  l.maskColStride = l.maskStrides[rank - 1];
  l.maskBase.resize(l.batch);
  for (int64_t b = 0; b < l.batch; ++b) // where score (b, 0, 0) reads the mask
    l.maskBase[b] = offsetOf(b * l.tq * l.tk, l.scores, l.maskStrides);
  return Status::ok();
}

/// The buffers of one call. attention's are separate tensors;
/// packed_attention's query, key and value (and their gradients) are one
/// buffer, each read at its own offset (AttentionRows).
struct AttentionBuffers {
  const float *q, *k, *v;
  const int64_t *mask;
  const float *out = nullptr, *lse = nullptr, *dout = nullptr; // the gradient's inputs
  const float *sinks = nullptr;                                // the forward's: per query head, or none
};

/// C (m x n, leading dimension ldc) = op(A) op(B), or C += op(A) op(B)
/// with `accumulate`, row-major, with op(A) m x k and A, B at leading
/// dimensions lda, ldb.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
          int64_t ldb, float *c, int64_t ldc, bool accumulate = false) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
}

/// Batch b's scores S = Q K^T (tq x tk), through BLAS as batch_matmul does.
void scores(const AttentionLayout &l, const AttentionBuffers &in, int64_t b, float *s) {
  const float *qb = in.q + l.start(l.query, b), *kb = in.k + l.start(l.key, b);
  if (l.keyTransposed) // [d, tk]
    gemm(false, false, l.tq, l.tk, l.d, qb, l.query.row, kb, l.tk, s, l.tk);
  else
    gemm(false, true, l.tq, l.tk, l.d, qb, l.query.row, kb, l.key.row, s, l.tk);
}

// Per batch index: the scores by GEMM, the masked softmax row by row (as
// masked_softmax computes it), the output by GEMM. The tq x tk block is
// per-thread scratch, never a tensor of the plan.
void forward(const AttentionLayout &l, const AttentionBuffers &in, float *out, float *lse) {
#pragma omp parallel
  {
    std::vector<float> p(l.tq * l.tk);
#pragma omp for
    for (int64_t b = 0; b < l.batch; ++b) {
      scores(l, in, b, p.data());
      for (int64_t i = 0; i < l.tq; ++i) {
        float *row = p.data() + i * l.tk;
        const int64_t *maskRow = in.mask + l.maskBase[b] + i * l.maskRowStride;
        float maxValue = -INFINITY;
        for (int64_t j = 0; j < l.tk; ++j) {
          row[j] = maskRow[j * l.maskColStride] ? -INFINITY : attentionScore(row[j], l.scale, l.softcap);
          maxValue = std::max(maxValue, row[j]);
        }
        const float *sink = in.sinks ? in.sinks + b % l.heads : nullptr;
        if (maxValue == -INFINITY && !sink) { // every key masked
          std::fill(row, row + l.tk, 0.0f);
          lse[b * l.tq + i] = std::numeric_limits<float>::max();
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < l.tk; ++j) {
          row[j] = maxValue == -INFINITY ? 0.0f : vectorExp(row[j] - maxValue);
          sum += row[j];
        }
        float inv = static_cast<float>(1.0 / sum);
        if (sink)
          inv = attentionSinkScale(maxValue, static_cast<float>(sum), *sink, &lse[b * l.tq + i]);
        else
          lse[b * l.tq + i] = maxValue + static_cast<float>(std::log(sum));
        for (int64_t j = 0; j < l.tk; ++j)
          row[j] *= inv;
      }
      gemm(false, false, l.tq, l.dv, l.tk, p.data(), l.tk, in.v + l.start(l.value, b), l.value.row,
           out + l.start(l.out, b), l.out.row);
    }
  }
}

// Per batch index: P again from the scores and logsumexp, then
// dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)) * slope (the
// score's derivative: scale, or under a softcap scale (1 - tanh^2)),
// dQ = dS K, dK = dS^T Q (in the key's layout), each a GEMM. With grouped
// heads, a key and value head's gradients are the sums over the query
// heads of its group, added in head order by one thread.
void backward(const AttentionLayout &l, const AttentionBuffers &in, float *dq, float *dk, float *dv) {
#pragma omp parallel
  {
    std::vector<float> p(l.tq * l.tk), ds(l.tq * l.tk), slope(l.tq * l.tk);
#pragma omp for
    for (int64_t kvb = 0; kvb < l.batch / l.group; ++kvb)
      for (int64_t g = 0; g < l.group; ++g) {
        const int64_t b = groupQueryIndex(l.heads, l.group, kvb, g);
        const bool accumulate = g > 0;
        const float *qb = in.q + l.start(l.query, b), *kb = in.k + l.start(l.key, b), *vb = in.v + l.start(l.value, b);
        const float *ob = in.out + l.start(l.out, b), *dob = in.dout + l.start(l.out, b);
        scores(l, in, b, p.data());
        for (int64_t i = 0; i < l.tq; ++i) {
          float *row = p.data() + i * l.tk;
          const int64_t *maskRow = in.mask + l.maskBase[b] + i * l.maskRowStride;
          const float rowLse = in.lse[b * l.tq + i];
          float *rowSlope = slope.data() + i * l.tk;
          for (int64_t j = 0; j < l.tk; ++j) {
            rowSlope[j] = 0.0f; // a masked score's probability is 0, and so its gradient
            if (!maskRow[j * l.maskColStride])
              row[j] = vectorExp(attentionScore(row[j], l.scale, l.softcap, &rowSlope[j]) - rowLse);
            else
              row[j] = 0.0f;
          }
        }
        const int64_t ldo = l.out.row;
        // dV = P^T dO, dP = dO V^T
        gemm(true, false, l.tk, l.dv, l.tq, p.data(), l.tk, dob, ldo, dv + l.start(l.value, b), l.value.row,
             accumulate);
        gemm(false, true, l.tq, l.tk, l.dv, dob, ldo, vb, l.value.row, ds.data(), l.tk);
        for (int64_t i = 0; i < l.tq; ++i) {
          float rowDot = 0; // sum_j P_ij dP_ij = sum_c dO_ic O_ic
          for (int64_t c = 0; c < l.dv; ++c)
            rowDot += dob[i * ldo + c] * ob[i * ldo + c];
          for (int64_t j = 0; j < l.tk; ++j)
            ds[i * l.tk + j] = p[i * l.tk + j] * (ds[i * l.tk + j] - rowDot) * slope[i * l.tk + j];
        }
        float *dqb = dq + l.start(l.query, b), *dkb = dk + l.start(l.key, b);
        if (l.keyTransposed) {
          gemm(false, true, l.tq, l.d, l.tk, ds.data(), l.tk, kb, l.tk, dqb, l.query.row); // dQ = dS K, K^T stored
          gemm(true, false, l.d, l.tk, l.tq, qb, l.query.row, ds.data(), l.tk, dkb, l.tk, accumulate); // dK^T = Q^T dS
        } else {
          gemm(false, false, l.tq, l.d, l.tk, ds.data(), l.tk, kb, l.key.row, dqb, l.query.row); // dQ = dS K
          gemm(true, false, l.tk, l.d, l.tq, ds.data(), l.tk, qb, l.query.row, dkb, l.key.row,
               accumulate); // dK = dS^T Q
        }
      }
  }
}

} // namespace

Status attention(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(layoutOf(call, false, l));
  AttentionBuffers in{call.inputs[0].f32(), call.inputs[1].f32(), call.inputs[2].f32(), call.inputs[3].i64()};
  if (call.inputs.size() > 4)
    in.sinks = call.inputs[4].f32();
  forward(l, in, call.outputs[0].f32(), call.outputs[1].f32());
  return Status::ok();
}

Status attentionGrad(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(layoutOf(call, false, l));
  const AttentionBuffers in{call.inputs[0].f32(), call.inputs[1].f32(), call.inputs[2].f32(), call.inputs[3].i64(),
                            call.inputs[4].f32(), call.inputs[5].f32(), call.inputs[6].f32()};
  backward(l, in, call.outputs[0].f32(), call.outputs[1].f32(), call.outputs[2].f32());
  return Status::ok();
}

Status packedAttention(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(layoutOf(call, true, l));
  const float *qkv = call.inputs[0].f32();
  const AttentionBuffers in{qkv, qkv, qkv, call.inputs[1].i64()};
  forward(l, in, call.outputs[0].f32(), call.outputs[1].f32());
  return Status::ok();
}

// Every element of dqkv is one head's dQ, dK or dV, each written whole.
Status packedAttentionGrad(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(layoutOf(call, true, l));
  const float *qkv = call.inputs[0].f32();
  const AttentionBuffers in{
      qkv, qkv, qkv, call.inputs[1].i64(), call.inputs[2].f32(), call.inputs[3].f32(), call.inputs[4].f32()};
  float *dqkv = call.outputs[0].f32();
  backward(l, in, dqkv, dqkv, dqkv);
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu
