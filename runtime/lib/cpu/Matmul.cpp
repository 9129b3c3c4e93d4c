//===- Matmul.cpp - GEMM kernels --------------------------------------------===//
#include "../KernelChecks.h"
#include "CpuKernels.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

Status matmul(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  bool transA = call.intParam(contract::Param::kTransposeA, 0), transB = call.intParam(contract::Param::kTransposeB, 0);
  if (a.shape.size() < 2 || b.shape.size() != 2 || (transA && a.shape.size() != 2))
    return FSDPC_ERROR(kInvalidArgument, "matmul: unsupported operand ranks ", shapeString(a.shape), " x ",
                       shapeString(b.shape));
  int64_t k = transA ? a.shape[0] : a.shape.back();
  int64_t m = transA ? a.shape[1] : elementCount(std::vector<int64_t>(a.shape.begin(), a.shape.end() - 1));
  int64_t kb = transB ? b.shape[1] : b.shape[0];
  int64_t n = transB ? b.shape[0] : b.shape[1];
  if (k != kb || c.numElements() != m * n)
    return FSDPC_ERROR(kInvalidArgument, "matmul: shapes ", shapeString(a.shape), " x ", shapeString(b.shape),
                       " do not match output ", shapeString(c.shape));
  // matmul_bias: C starts as the bias in every row and the GEMM adds to it,
  // as torch's addmm does for a Linear layer.
  const float *bias = call.ownInputs() > 2 ? call.inputs[2].f32() : nullptr;
  // accumulate: the addend is added after the GEMM, as the add it replaces
  // did (the same f32 bits; a bf16 output is rounded once, after both, as
  // the CUDA backend's epilogue does).
  const float *addend = call.addend() ? call.addend()->f32() : nullptr;
  if (bias && call.inputs[2].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, "matmul_bias: bias of ", call.inputs[2].numElements(),
                       " elements for ", n, " columns");
  if (m == 0 || n == 0)
    return Status::ok();
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c.f32()[i * n + j] = (bias ? bias[j] : 0.0f) + (addend ? addend[i * n + j] : 0.0f);
    return Status::ok();
  }
  // Row blocks of C, one per thread: rows of op(A) start at row r of A, or
  // at column r when A is transposed.
  int threads = m * n * k >= (1 << 18) ? std::min<int64_t>(omp_get_max_threads(), m) : 1;
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    int64_t begin = m * t / threads, end = m * (t + 1) / threads;
    if (begin == end)
      continue;
    if (bias)
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(c.f32() + i * n, bias, n * sizeof(float));
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, end - begin, n,
                k, 1.0f, a.f32() + (transA ? begin : begin * k), transA ? m : k, b.f32(), transB ? k : n,
                bias ? 1.0f : 0.0f, c.f32() + begin * n, n);
    if (addend)
      for (int64_t i = begin * n; i < end * n; ++i)
        c.f32()[i] += addend[i];
  }
  return Status::ok();
}

Status matmulBiasGrad(const KernelCall &call) {
  KernelCall gemm = call;
  gemm.outputs.resize(1);
  FSDPC_RETURN_IF_ERROR(matmul(gemm));
  // dY: B, or A with bias_grad_of_a; [rows, N] either way (A is transposed).
  const TensorView &dy = call.inputs[call.intParam(contract::Param::kBiasGradOfA, 0) ? 0 : 1];
  sumRows(dy.f32(), dy.shape[0], dy.shape[1], call.outputs[1].f32());
  return Status::ok();
}

/// One sgemm per index of the broadcast batch dimensions.
Status batchMatmul(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  bool transA = call.intParam(contract::Param::kTransposeA, 0), transB = call.intParam(contract::Param::kTransposeB, 0);
  size_t ra = a.shape.size(), rb = b.shape.size(), rc = c.shape.size();
  if (ra < 2 || rb < 2 || rc < 2)
    return FSDPC_ERROR(kInvalidArgument, "batch_matmul: operands must have rank 2 or more");
  int64_t m = transA ? a.shape[ra - 1] : a.shape[ra - 2], k = transA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = transB ? b.shape[rb - 1] : b.shape[rb - 2], n = transB ? b.shape[rb - 2] : b.shape[rb - 1];
  std::vector<int64_t> batch(c.shape.begin(), c.shape.end() - 2);
  std::vector<int64_t> batchA(a.shape.begin(), a.shape.end() - 2), batchB(b.shape.begin(), b.shape.end() - 2);
  if (k != kb || c.shape[rc - 2] != m || c.shape[rc - 1] != n || !broadcastsTo(batchA, batch) ||
      !broadcastsTo(batchB, batch))
    return FSDPC_ERROR(kInvalidArgument, "batch_matmul: shapes ", shapeString(a.shape), " x ", shapeString(b.shape),
                       " do not match output ", shapeString(c.shape));
  std::vector<int64_t> stridesA = broadcastStrides(batchA, batch), stridesB = broadcastStrides(batchB, batch);
  int64_t count = elementCount(batch);
  const float *pa = a.f32(), *pb = b.f32();
  float *pc = c.f32();
#pragma omp parallel for if (count > 1 && m * n * k > 4096)
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offA = 0, offB = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t index = rest % batch[d];
      rest /= batch[d];
      offA += index * stridesA[d];
      offB += index * stridesB[d];
    }
    float *out = pc + i * m * n;
    if (k == 0) {
      std::fill(out, out + m * n, 0.0f);
      continue;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                pa + offA * m * k, transA ? m : k, pb + offB * k * n, transB ? k : n, 0.0f, out, n);
  }
  return Status::ok();
}

namespace {

/// expert_matmul's sizes (KernelChecks.h) and each expert's rows in
/// ascending order, every row's expert checked (negative indices count
/// from the end).
struct ExpertLayout : ExpertDims {
  std::vector<std::vector<int64_t>> rowsOf;
};

Status expertLayout(const KernelCall &call, const TensorView &lhs, const TensorView &weights, const TensorView &experts,
                    ExpertLayout &l) {
  FSDPC_RETURN_IF_ERROR(expertDims(call, lhs, weights, l));
  l.rowsOf.assign(l.experts, {});
  for (int64_t r = 0; r < l.n; ++r) {
    const int64_t e = experts.i64()[r];
    if (e < -l.experts || e >= l.experts)
      return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": expert ", e, " of row ", r, " is outside [",
                         -l.experts, ", ", l.experts, ")");
    l.rowsOf[e < 0 ? e + l.experts : e].push_back(r);
  }
  return Status::ok();
}

/// Copies `rows` (each `width` floats, `m` sub-rows of a row of `source`)
/// into consecutive rows of `packed`, or back with `unpack`.
void packRows(const std::vector<int64_t> &rows, int64_t m, int64_t width, float *source, float *packed, bool unpack) {
  const int64_t block = m * width;
  for (int64_t i = 0; i < static_cast<int64_t>(rows.size()); ++i) {
    float *row = source + rows[i] * block, *slot = packed + i * block;
    if (unpack)
      std::memcpy(row, slot, block * sizeof(float));
    else
      std::memcpy(slot, row, block * sizeof(float));
  }
}

/// work(e, rows, tokens) for each expert e with rows (`tokens` sub-rows in
/// all), a thread an expert.
template <typename Work> void forEachExpert(const ExpertLayout &l, Work work) {
#pragma omp parallel for schedule(dynamic) if (l.experts > 1 && l.n * l.m * l.k * l.f > 65536)
  for (int64_t e = 0; e < l.experts; ++e) {
    const int64_t tokens = static_cast<int64_t>(l.rowsOf[e].size()) * l.m;
    if (tokens > 0)
      work(e, l.rowsOf[e], tokens);
  }
}

} // namespace

// A mixture of experts' projections as grouped GEMMs: each expert's rows
// are copied together, multiplied by its matrix in one sgemm, and (for the
// result) copied back, instead of one GEMV-shaped sgemm a row (a row is
// usually one token: batched_mm's M is 1), which read the expert's whole
// matrix again for every row. A thread an expert (BLAS runs one thread
// a call on the CPU device), so the same bits whatever the thread count.

/// result[r] = lhs[r] op(weights[expert of r]).
Status expertMatmul(const KernelCall &call) {
  const TensorView &lhs = call.inputs[0], &weights = call.inputs[1], &out = call.outputs[0];
  ExpertLayout l;
  FSDPC_RETURN_IF_ERROR(expertLayout(call, lhs, weights, call.inputs[2], l));
  if (out.numElements() == 0)
    return Status::ok();
  if (l.k == 0) {
    std::fill(out.f32(), out.f32() + out.numElements(), 0.0f);
    return Status::ok();
  }
  forEachExpert(l, [&](int64_t e, const std::vector<int64_t> &rows, int64_t tokens) {
    std::vector<float> packedLhs(tokens * l.k), packedOut(tokens * l.f);
    packRows(rows, l.m, l.k, lhs.f32(), packedLhs.data(), /*unpack=*/false);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, l.transposed ? CblasTrans : CblasNoTrans, tokens, l.f, l.k, 1.0f,
                packedLhs.data(), l.k, weights.f32() + e * l.k * l.f, l.transposed ? l.k : l.f, 0.0f, packedOut.data(),
                l.f);
    packRows(rows, l.m, l.f, out.f32(), packedOut.data(), /*unpack=*/true);
  });
  return Status::ok();
}

/// dW[e] = lhs[rows of e]^T dresult[rows of e] (dresult^T lhs, transposed):
/// one sgemm an expert over its rows copied together; an expert without
/// rows gets zeros.
Status expertMatmulWeightGrad(const KernelCall &call) {
  const TensorView &lhs = call.inputs[0], &dresult = call.inputs[1], &dw = call.outputs[0];
  ExpertLayout l;
  FSDPC_RETURN_IF_ERROR(expertLayout(call, lhs, dw, call.inputs[2], l));
  if (dw.numElements() == 0)
    return Status::ok();
  std::fill(dw.f32(), dw.f32() + dw.numElements(), 0.0f);
  forEachExpert(l, [&](int64_t e, const std::vector<int64_t> &rows, int64_t tokens) {
    std::vector<float> packedLhs(tokens * l.k), packedGrad(tokens * l.f);
    packRows(rows, l.m, l.k, lhs.f32(), packedLhs.data(), /*unpack=*/false);
    packRows(rows, l.m, l.f, dresult.f32(), packedGrad.data(), /*unpack=*/false);
    float *out = dw.f32() + e * l.k * l.f;
    if (l.transposed) // [f, k] = dy^T a
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l.f, l.k, tokens, 1.0f, packedGrad.data(), l.f,
                  packedLhs.data(), l.k, 0.0f, out, l.k);
    else // [k, f] = a^T dy
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l.k, l.f, tokens, 1.0f, packedLhs.data(), l.k,
                  packedGrad.data(), l.f, 0.0f, out, l.f);
  });
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu
