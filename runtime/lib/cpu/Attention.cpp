//===- Attention.cpp - scaled dot-product attention -----------------------===//
//
// For each batch index (batch and head): its scores, masked softmax and
// output, through BLAS like the unfused batch_matmul / masked_softmax /
// batch_matmul. Only each query row's logsumexp is kept for the gradient,
// which recomputes the probabilities from it: the tq x tk block lives in
// per-thread scratch, never in the plan's memory.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "../KernelChecks.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <cblas.h>

#include <cmath>
#include <vector>

namespace fsdpc::runtime::cpu {

namespace {

/// Sizes and strides of one attention call: the shared sizes
/// (KernelChecks.h) and where each batch index reads the mask.
struct AttentionLayout : AttentionDims {
  std::vector<int64_t> maskBase; // per batch index: the mask's offset
  int64_t maskRowStride = 0, maskColStride = 0;
};

Status attentionLayout(const KernelCall &call, AttentionLayout &l) {
  FSDPC_RETURN_IF_ERROR(attentionDims(call, l));
  const size_t rank = l.scores.size();
  l.maskRowStride = l.maskStrides[rank - 2];
  l.maskColStride = l.maskStrides[rank - 1];
  l.maskBase.resize(l.batch);
  for (int64_t b = 0; b < l.batch; ++b) // where score (b, 0, 0) reads the mask
    l.maskBase[b] = offsetOf(b * l.tq * l.tk, l.scores, l.maskStrides);
  return Status::ok();
}

/// C (m x n) = op(A) op(B), row-major, with op(A) m x k.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              transA ? m : k, b, transB ? k : n, 0.0f, c, n);
}

/// Batch b's scores S = Q K^T (tq x tk), through BLAS as batch_matmul does.
void scores(const AttentionLayout &l, const float *q, const float *k, int64_t b, float *s) {
  const float *qb = q + b * l.tq * l.d, *kb = k + b * l.tk * l.d;
  gemm(false, !l.keyTransposed, l.tq, l.tk, l.d, qb, kb, s);
}

} // namespace

// Per batch index: the scores by GEMM, the masked softmax row by row (as
// masked_softmax computes it), the output by GEMM. The tq x tk block is
// per-thread scratch, never a tensor of the plan.
Status attention(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(attentionLayout(call, l));
  const float *q = call.inputs[0].f32(), *k = call.inputs[1].f32(), *v = call.inputs[2].f32();
  const int64_t *mask = call.inputs[3].i64();
  float *out = call.outputs[0].f32(), *lse = call.outputs[1].f32();
  const float scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
#pragma omp parallel
  {
    std::vector<float> p(l.tq * l.tk);
#pragma omp for
    for (int64_t b = 0; b < l.batch; ++b) {
      scores(l, q, k, b, p.data());
      for (int64_t i = 0; i < l.tq; ++i) {
        float *row = p.data() + i * l.tk;
        const int64_t *maskRow = mask + l.maskBase[b] + i * l.maskRowStride;
        float maxValue = -INFINITY;
        for (int64_t j = 0; j < l.tk; ++j) {
          row[j] = maskRow[j * l.maskColStride] ? -INFINITY : row[j] * scale;
          maxValue = std::max(maxValue, row[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < l.tk; ++j) {
          row[j] = vectorExp(row[j] - maxValue);
          sum += row[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < l.tk; ++j)
          row[j] *= inv;
        lse[b * l.tq + i] = maxValue + static_cast<float>(std::log(sum));
      }
      gemm(false, false, l.tq, l.dv, l.tk, p.data(), v + b * l.tk * l.dv, out + b * l.tq * l.dv);
    }
  }
  return Status::ok();
}

// Per batch index: P again from the scores and logsumexp, then
// dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)) * scale,
// dQ = dS K, dK = dS^T Q (in the key's layout), each a GEMM.
Status attentionGrad(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(attentionLayout(call, l));
  const float *q = call.inputs[0].f32(), *k = call.inputs[1].f32(), *v = call.inputs[2].f32();
  const int64_t *mask = call.inputs[3].i64();
  const float *out = call.inputs[4].f32(), *lse = call.inputs[5].f32(), *dout = call.inputs[6].f32();
  float *dq = call.outputs[0].f32(), *dk = call.outputs[1].f32(), *dv = call.outputs[2].f32();
  const float scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
#pragma omp parallel
  {
    std::vector<float> p(l.tq * l.tk), ds(l.tq * l.tk);
#pragma omp for
    for (int64_t b = 0; b < l.batch; ++b) {
      const float *qb = q + b * l.tq * l.d, *kb = k + b * l.tk * l.d, *vb = v + b * l.tk * l.dv;
      const float *ob = out + b * l.tq * l.dv, *dob = dout + b * l.tq * l.dv;
      scores(l, q, k, b, p.data());
      for (int64_t i = 0; i < l.tq; ++i) {
        float *row = p.data() + i * l.tk;
        const int64_t *maskRow = mask + l.maskBase[b] + i * l.maskRowStride;
        const float rowLse = lse[b * l.tq + i];
        for (int64_t j = 0; j < l.tk; ++j)
          row[j] = maskRow[j * l.maskColStride] ? 0.0f : vectorExp(row[j] * scale - rowLse);
      }
      gemm(true, false, l.tk, l.dv, l.tq, p.data(), dob, dv + b * l.tk * l.dv); // dV = P^T dO
      gemm(false, true, l.tq, l.tk, l.dv, dob, vb, ds.data());                  // dP = dO V^T
      for (int64_t i = 0; i < l.tq; ++i) {
        float rowDot = 0; // sum_j P_ij dP_ij = sum_c dO_ic O_ic
        for (int64_t c = 0; c < l.dv; ++c)
          rowDot += dob[i * l.dv + c] * ob[i * l.dv + c];
        for (int64_t j = 0; j < l.tk; ++j)
          ds[i * l.tk + j] = p[i * l.tk + j] * (ds[i * l.tk + j] - rowDot) * scale;
      }
      // dQ = dS K: K is [tk, d], or [d, tk] when transposed.
      gemm(false, l.keyTransposed, l.tq, l.d, l.tk, ds.data(), kb, dq + b * l.tq * l.d);
      if (l.keyTransposed) // dK^T = Q^T dS : [d, tk]
        gemm(true, false, l.d, l.tk, l.tq, qb, ds.data(), dk + b * l.tk * l.d);
      else // dK = dS^T Q : [tk, d]
        gemm(true, false, l.tk, l.d, l.tq, ds.data(), qb, dk + b * l.tk * l.d);
    }
  }
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu
