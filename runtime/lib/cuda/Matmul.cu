//===- Matmul.cu - GEMMs through cuBLASLt ---------------------------------===//
//
// Plans are row-major, cuBLASLt is column-major: C = op(A) op(B) is computed
// as C^T = op(B)^T op(A)^T, so B's buffer is cuBLASLt's first operand and
// A's the second, with no copy.
//
// Precision follows torch's defaults: f32 GEMMs use CUBLAS_COMPUTE_32F, not
// TF32 (torch.backends.cuda.matmul.allow_tf32 is False); bf16 and f16
// inputs accumulate in f32 and write bf16, f16 or f32. matmul_bias adds
// its bias in cuBLASLt's epilogue (torch's addmm does the same), and
// matmul_bias_grad sums its bias gradient in another (BGRADA: the rows of
// B, which is cuBLASLt's A; BGRADB with bias_grad_of_a: the rows of A,
// cuBLASLt's B) where the heuristic offers one for the shape and dtypes,
// else in a separate reduction after the GEMM. An
// accumulating matmul (a residual add or a gradient sum the lowering
// folded in) reads its addend as cuBLASLt's C with beta = 1, so the sum
// is formed in f32 and rounded once, and the add's pass over memory and
// its launch are gone.
//
// The descriptors and the algorithm cuBLASLt's heuristic picks are made on
// an instruction's first call and kept in its launch cache: shapes and
// addresses never change between steps.
//
// A 16-bit GEMM whose N or K is not a multiple of 8 (GPT-2's logits: 50257
// columns) runs on slow kernels. On the H200 the logits GEMM and its input
// gradient took 15 and 12 ms (84 and 108 TFLOP/s), and padding only their
// strides to 16 bytes changed nothing; the weight gradient, whose odd
// extent is cut into blocks of 8192, ran at 359. matmul stages such GEMMs
// (stagedMatmul): it copies the operands into scratch padded with zeros to
// multiples of 8, runs the GEMM on the padded extents, and copies C's real
// columns back, one block of C's rows at a time so that the scratch stays
// bounded.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace fsdpc::runtime::cuda {

namespace {

StatusOr<cudaDataType_t> cudaTypeOf(const KernelCall &call, plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return CUDA_R_32F;
  case plan::BF16:
    return CUDA_R_16BF;
  case plan::F16:
    return CUDA_R_16F;
  default:
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": GEMM operands must be f32, bf16 or f16");
  }
}

uint64_t bytesOf(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

/// Largest power of two (up to 256) dividing every address and stride:
/// cuBLASLt's heuristic must only offer algorithms that can run on them.
uint32_t alignmentOf(std::initializer_list<uint64_t> values) {
  uint32_t alignment = 256;
  for (uint64_t v : values)
    while (alignment > 1 && v % alignment != 0)
      alignment /= 2;
  return alignment;
}

/// One GEMM shape, its descriptors and the chosen algorithm.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // matmul_bias_grad whose epilogue cuBLASLt did not offer: the bias
  // gradient is summed after the GEMM (sumRows).
  bool separateBiasGrad = false;

  ~GemmPlan() {
    if (desc)
      cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t layout : {x, y, d})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
  }
};

/// What one cublasLtMatmul call computes, in the plan's row-major terms:
/// `batch` products C_i = op(A_i) op(B_i) (+ bias), operands `stride*`
/// elements apart (0: the same matrix for every i).
struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  /// Elements between the operands of consecutive batches (0: the same
  /// matrix for every i); in a staged GEMM, between consecutive row blocks'
  /// operands, which the algorithm's alignment must cover too.
  int64_t strideA = 0, strideB = 0, strideC = 0;
  /// Elements between the rows of each operand as stored (row-major: A is
  /// [m, k], or [k, m] transposed; B is [k, n], or [n, k]; C is [m, n]);
  /// 0: packed rows.
  int64_t lda = 0, ldb = 0, ldc = 0;
  cudaDataType_t typeA = CUDA_R_32F, typeB = CUDA_R_32F, typeC = CUDA_R_32F, typeBias = CUDA_R_32F;
  bool bias = false;     // the bias epilogue: `bias` is read
  bool biasGrad = false; // the bias-gradient epilogue: `bias` is written
  bool biasGradOfA = false; // with biasGrad: A's rows summed (one per row of C), not B's

  int64_t rowLengthA() const { return transA ? m : k; }
  int64_t rowLengthB() const { return transB ? k : n; }
  int64_t ldA() const { return lda ? lda : rowLengthA(); }
  int64_t ldB() const { return ldb ? ldb : rowLengthB(); }
  int64_t ldC() const { return ldc ? ldc : n; }
};

cublasStatus_t setLayoutBatch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride) {
  int count = static_cast<int>(batch);
  cublasStatus_t status = cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                           sizeof(count));
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  return cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                          sizeof(stride));
}

StatusOr<std::shared_ptr<GemmPlan>> makeGemmPlan(const KernelCall &call, const GemmShape &s, const void *a,
                                                 const void *b, const void *bias, const void *addend, void *c) {
  const CudaLaunch &launch = launchOf(call);
  auto plan = std::make_shared<GemmPlan>();
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major: X = B's buffer, Y = A's buffer, D = C^T (n x m).
  const cublasOperation_t opX = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N, opY = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  FSDPC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opX, sizeof(opX)));
  FSDPC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opY, sizeof(opY)));
  if (s.bias || s.biasGrad) {
    // The bias (gradient) has one value per row of D, which is C^T; a
    // gradient of A's rows one per column of D, summed from cuBLASLt's B.
    const cublasLtEpilogue_t epilogue = s.bias          ? CUBLASLT_EPILOGUE_BIAS
                                        : s.biasGradOfA ? CUBLASLT_EPILOGUE_BGRADB
                                                        : CUBLASLT_EPILOGUE_BGRADA;
    FSDPC_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    FSDPC_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                                &s.typeBias, sizeof(s.typeBias)));
  }
  FSDPC_CUBLAS_RETURN_IF_ERROR(s.transB ? cublasLtMatrixLayoutCreate(&plan->x, s.typeB, s.k, s.n, s.ldB())
                                        : cublasLtMatrixLayoutCreate(&plan->x, s.typeB, s.n, s.k, s.ldB()));
  FSDPC_CUBLAS_RETURN_IF_ERROR(s.transA ? cublasLtMatrixLayoutCreate(&plan->y, s.typeA, s.m, s.k, s.ldA())
                                        : cublasLtMatrixLayoutCreate(&plan->y, s.typeA, s.k, s.m, s.ldA()));
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->d, s.typeC, s.n, s.m, s.ldC()));
  if (s.batch > 1) {
    FSDPC_CUBLAS_RETURN_IF_ERROR(setLayoutBatch(plan->x, s.batch, s.strideB));
    FSDPC_CUBLAS_RETURN_IF_ERROR(setLayoutBatch(plan->y, s.batch, s.strideA));
    FSDPC_CUBLAS_RETURN_IF_ERROR(setLayoutBatch(plan->d, s.batch, s.strideC));
  }

  cublasLtMatmulPreference_t preference;
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&preference));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      preferenceOwner(preference, cublasLtMatmulPreferenceDestroy);
  const uint64_t workspace = launch.workspaceBytes;
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  const uint32_t alignX = alignmentOf({reinterpret_cast<uint64_t>(b), s.strideB * bytesOf(s.typeB),
                                       s.ldB() * bytesOf(s.typeB)});
  const uint32_t alignY = alignmentOf({reinterpret_cast<uint64_t>(a), s.strideA * bytesOf(s.typeA),
                                       s.ldA() * bytesOf(s.typeA)});
  // C (the addend, when there is one: null adds no constraint) has D's
  // type and layout, so one alignment covers both.
  const uint32_t alignD = alignmentOf({reinterpret_cast<uint64_t>(c), reinterpret_cast<uint64_t>(addend),
                                       s.strideC * bytesOf(s.typeC), s.ldC() * bytesOf(s.typeC)});
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignX, sizeof(alignX)));
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignY, sizeof(alignY)));
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD, sizeof(alignD)));
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, sizeof(alignD)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(launch.lt, plan->desc, plan->x, plan->y, plan->d,
                                                              plan->d, preference, 1, &result, &found));
  if (found == 0)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": cuBLASLt has no algorithm for ", s.m, "x", s.n,
                       "x", s.k, " (batch ", s.batch, ")");
  plan->algo = result.algo;
  return plan;
}

/// D = c = op(A) op(B) (+ the bias epilogue's), plus `addend` where it is
/// not null (beta = 1; it may be c itself).
Status enqueueGemm(const CudaLaunch &launch, const GemmPlan &plan, const void *a, const void *b, const void *addend,
                   void *c) {
  const float alpha = 1.0f, beta = addend ? 1.0f : 0.0f;
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(launch.lt, plan.desc, &alpha, b, plan.x, a, plan.y, &beta,
                                              addend ? addend : c, plan.d, c, plan.d, &plan.algo, launch.workspace,
                                              launch.workspaceBytes, launch.stream));
  return Status::ok();
}

Status runGemm(const KernelCall &call, const GemmShape &s, const void *a, const void *b, const void *bias,
               const void *addend, void *c) {
  CudaLaunch &launch = launchOf(call);
  if (!launch.cache) {
    StatusOr<std::shared_ptr<GemmPlan>> made = makeGemmPlan(call, s, a, b, bias, addend, c);
    if (!made.isOk())
      return made.status();
    launch.cache = *made;
  }
  return enqueueGemm(launch, *static_cast<const GemmPlan *>(launch.cache.get()), a, b, addend, c);
}

// ---- Staging GEMMs whose extents are not multiples of 8 ----------------

/// Scratch a staged GEMM asks for: enough for blocks of a few thousand rows
/// of GPT-2's logits (100 KB each), little beside an 8 GB step.
constexpr uint64_t kStagingBytes = 256ull << 20;
constexpr uint64_t kRegionAlignment = 256;
/// 16-bit elements per 16 bytes: the extents and strides the fast kernels take.
constexpr int64_t kPadTo = 8;

uint64_t alignRegion(uint64_t bytes) { return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment; }
int64_t roundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

/// How a 16-bit GEMM is staged (f32 GEMMs, without TF32, do not run on the
/// kernels that need this and are never staged). N and K are padded to
/// multiples of 8 with zeros, which add nothing to any sum: B whole, and the
/// bias, once per call; A (padded along K, and along M when it is stored
/// transposed with rows of M) and C (padded along N) per block of C's rows.
/// Padded columns of C are computed and dropped.
struct Staging {
  int64_t nPadded = 0, kPadded = 0;
  bool a = false, b = false, c = false, bias = false;
  uint64_t bBytes = 0, biasBytes = 0;
  uint64_t aBytesPerRow = 0, cBytesPerRow = 0; // per row of a block (its rows rounded up to 8)

  explicit Staging(const GemmShape &s) {
    if (s.typeA == CUDA_R_32F)
      return;
    nPadded = roundUp(s.n, kPadTo);
    kPadded = roundUp(s.k, kPadTo);
    const bool padN = nPadded != s.n, padK = kPadded != s.k;
    a = padK || (s.transA && s.m % kPadTo != 0);
    b = padK || padN;
    c = padN;
    bias = s.bias && padN;
    if (b)
      bBytes = static_cast<uint64_t>(nPadded * kPadded) * bytesOf(s.typeB);
    if (bias)
      biasBytes = static_cast<uint64_t>(nPadded) * bytesOf(s.typeBias);
    if (a)
      aBytesPerRow = static_cast<uint64_t>(kPadded) * bytesOf(s.typeA);
    if (c)
      cBytesPerRow = static_cast<uint64_t>(nPadded) * bytesOf(s.typeC);
  }
  bool any() const { return a || b || c; }
  /// Where each staged operand lies in the scratch: B, the bias, A's block, C's block.
  uint64_t aOffset() const { return alignRegion(bBytes) + alignRegion(biasBytes); }
  uint64_t cOffset(int64_t rows) const {
    return aOffset() + alignRegion(static_cast<uint64_t>(roundUp(rows, kPadTo)) * aBytesPerRow);
  }
  uint64_t bytesFor(int64_t rows) const {
    return cOffset(rows) + alignRegion(static_cast<uint64_t>(roundUp(rows, kPadTo)) * cBytesPerRow);
  }
  /// The most rows of C (of m) whose block fits in `bytes`, a multiple of
  /// 128 (or 8, for small blocks) unless it is all of them; 0: none fits.
  int64_t rowsFitting(uint64_t bytes, int64_t m) const {
    if (bytesFor(m) <= bytes)
      return m;
    const uint64_t perRow = aBytesPerRow + cBytesPerRow;
    if (perRow == 0 || bytes < aOffset())
      return 0;
    int64_t rows = std::min<int64_t>(m, static_cast<int64_t>((bytes - aOffset()) / perRow));
    rows = rows >= 128 ? rows / 128 * 128 : rows / kPadTo * kPadTo;
    while (rows > 0 && bytesFor(rows) > bytes)
      rows -= rows > 128 ? 128 : kPadTo;
    return std::max<int64_t>(rows, 0);
  }
};

/// dst[r, c] = src[r, c] for r < height and c < width, 0 elsewhere in
/// dst's dstHeight x dstWidth (strides in elements).
template <typename Word>
__global__ void copyRowsKernel(Word *dst, long long dstLd, long long dstWidth, long long dstHeight, const Word *src,
                               long long srcLd, long long width, long long height) {
  for (long long row = blockIdx.y; row < dstHeight; row += gridDim.y)
    for (long long col = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; col < dstWidth;
         col += static_cast<long long>(blockDim.x) * gridDim.x)
      dst[row * dstLd + col] = row < height && col < width ? src[row * srcLd + col] : Word(0);
}

/// A matrix of `height` rows of `width` elements (`elementBytes` each,
/// rows `ld` elements apart).
struct Rows {
  const void *data;
  int64_t ld, width, height;
};

/// Copies `src` into dst's dstHeight x dstWidth, zeros past src's edges.
Status copyRows(const CudaLaunch &launch, void *dst, int64_t dstLd, int64_t dstWidth, int64_t dstHeight, Rows src,
                uint64_t elementBytes) {
  if (dstWidth == 0 || dstHeight == 0)
    return Status::ok();
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((dstWidth + kThreads - 1) / kThreads, 16)),
                  static_cast<unsigned>(std::min<int64_t>(dstHeight, 4096)));
  if (elementBytes == 2)
    launchKernel(copyRowsKernel<uint16_t>, grid, kThreads, 0, launch.stream, static_cast<uint16_t *>(dst),
                 static_cast<long long>(dstLd), static_cast<long long>(dstWidth), static_cast<long long>(dstHeight),
                 static_cast<const uint16_t *>(src.data), static_cast<long long>(src.ld),
                 static_cast<long long>(src.width), static_cast<long long>(src.height));
  else
    launchKernel(copyRowsKernel<uint32_t>, grid, kThreads, 0, launch.stream, static_cast<uint32_t *>(dst),
                 static_cast<long long>(dstLd), static_cast<long long>(dstWidth), static_cast<long long>(dstHeight),
                 static_cast<const uint32_t *>(src.data), static_cast<long long>(src.ld),
                 static_cast<long long>(src.width), static_cast<long long>(src.height));
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

/// A staged GEMM's algorithms: one for full blocks of C's rows, one for
/// the last, shorter block (its staged A may be padded differently).
struct StagedGemmPlans {
  int64_t rows = 0;
  std::shared_ptr<GemmPlan> full, last;
};

/// matmul with staged operands (see the file comment): B and the bias are
/// copied into padded scratch once, then for each block of C's rows A's
/// block is copied into padded rows, the GEMM runs on the padded extents,
/// and C's block is copied out of padded rows. The padding holds zeros,
/// which add nothing to any sum, so each row of C is the unstaged GEMM's
/// up to the algorithm cuBLASLt picks. An addend is read in place where C
/// is, else copied into C's padded block first, which the GEMM then adds
/// to (C and D the same matrix).
Status stagedMatmul(const KernelCall &call, const GemmShape &s, const Staging &staging, const void *a,
                    const void *b, const void *bias, const void *addend, void *c) {
  CudaLaunch &launch = launchOf(call);
  if (!launch.cache) {
    auto plans = std::make_shared<StagedGemmPlans>();
    plans->rows = staging.rowsFitting(launch.scratchBytes, s.m);
    if (plans->rows == 0)
      return FSDPC_ERROR(kInternal, call.instruction->op(), ": ", launch.scratchBytes,
                         " bytes of scratch hold no block of the staged GEMM");
    launch.cache = plans;
  }
  StagedGemmPlans &plans = *static_cast<StagedGemmPlans *>(launch.cache.get());
  const uint64_t ea = bytesOf(s.typeA), eb = bytesOf(s.typeB), ec = bytesOf(s.typeC);
  uint8_t *scratch = static_cast<uint8_t *>(launch.scratch);
  uint8_t *stagedB = scratch, *stagedBias = scratch + alignRegion(staging.bBytes);
  uint8_t *stagedA = scratch + staging.aOffset(), *stagedC = scratch + staging.cOffset(plans.rows);

  GemmShape block = s;
  const void *blockB = b, *blockBias = bias;
  if (staging.b) {
    block.n = staging.nPadded;
    block.k = staging.kPadded;
    block.ldb = s.transB ? staging.kPadded : staging.nPadded;
    const Rows from{b, s.ldB(), s.rowLengthB(), s.transB ? s.n : s.k};
    FSDPC_RETURN_IF_ERROR(s.transB ? copyRows(launch, stagedB, block.ldb, staging.kPadded, staging.nPadded, from, eb)
                                   : copyRows(launch, stagedB, block.ldb, staging.nPadded, staging.kPadded, from, eb));
    blockB = stagedB;
  }
  if (staging.bias) {
    FSDPC_RETURN_IF_ERROR(copyRows(launch, stagedBias, staging.nPadded, staging.nPadded, 1,
                                   Rows{bias, s.n, s.n, 1}, bytesOf(s.typeBias)));
    blockBias = stagedBias;
  }
  // Blocks that read A and write C in place step through them; the
  // algorithm's alignment must hold at every step.
  block.strideA = staging.a ? 0 : (s.transA ? plans.rows : plans.rows * s.ldA());
  block.strideC = staging.c ? 0 : plans.rows * s.ldC();
  if (staging.c)
    block.ldc = staging.nPadded;
  for (int64_t first = 0; first < s.m; first += plans.rows) {
    const int64_t rows = std::min(plans.rows, s.m - first);
    block.m = rows;
    const void *blockA;
    if (staging.a && s.transA) { // A is [k, m]: its columns [first, first + rows), K padded
      block.lda = roundUp(rows, kPadTo);
      FSDPC_RETURN_IF_ERROR(copyRows(launch, stagedA, block.lda, block.lda, staging.kPadded,
                                     Rows{static_cast<const uint8_t *>(a) + first * ea, s.ldA(), rows, s.k}, ea));
      blockA = stagedA;
    } else if (staging.a) { // A is [m, k]: its rows [first, first + rows), K padded
      block.lda = staging.kPadded;
      FSDPC_RETURN_IF_ERROR(copyRows(launch, stagedA, block.lda, staging.kPadded, rows,
                                     Rows{static_cast<const uint8_t *>(a) + first * s.ldA() * ea, s.ldA(), s.k, rows},
                                     ea));
      blockA = stagedA;
    } else {
      blockA = static_cast<const uint8_t *>(a) + (s.transA ? first : first * s.ldA()) * ea;
    }
    uint8_t *outC = static_cast<uint8_t *>(c) + first * s.ldC() * ec;
    void *blockC = staging.c ? stagedC : outC;
    const void *blockAddend = nullptr;
    if (addend && staging.c) {
      FSDPC_RETURN_IF_ERROR(copyRows(launch, stagedC, block.ldc, block.ldc, rows,
                                     Rows{static_cast<const uint8_t *>(addend) + first * s.ldC() * ec, s.ldC(), s.n,
                                          rows},
                                     ec));
      blockAddend = stagedC;
    } else if (addend) {
      blockAddend = static_cast<const uint8_t *>(addend) + first * s.ldC() * ec;
    }
    std::shared_ptr<GemmPlan> &plan = rows == plans.rows ? plans.full : plans.last;
    if (!plan) {
      StatusOr<std::shared_ptr<GemmPlan>> made =
          makeGemmPlan(call, block, blockA, blockB, blockBias, blockAddend, blockC);
      if (!made.isOk())
        return made.status();
      plan = *made;
    }
    FSDPC_RETURN_IF_ERROR(enqueueGemm(launch, *plan, blockA, blockB, blockAddend, blockC));
    if (staging.c)
      FSDPC_RETURN_IF_ERROR(copyRows(launch, outC, s.ldC(), s.n, rows, Rows{stagedC, block.ldc, s.n, rows}, ec));
  }
  return Status::ok();
}

Status operandTypes(const KernelCall &call, GemmShape &s) {
  StatusOr<cudaDataType_t> ta = cudaTypeOf(call, call.inputs[0].dtype), tb = cudaTypeOf(call, call.inputs[1].dtype),
                           tc = cudaTypeOf(call, call.outputs[0].dtype);
  for (const auto *t : {&ta, &tb, &tc})
    if (!t->isOk())
      return t->status();
  s.typeA = *ta;
  s.typeB = *tb;
  s.typeC = *tc;
  if (s.typeA != s.typeB || (s.typeC != s.typeA && s.typeC != CUDA_R_32F))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(),
                       ": GEMM inputs need one dtype, and the output that dtype or f32");
  return Status::ok();
}

/// The shape and dtypes of a 2-D GEMM call (matmul and its bias forms):
/// A may have leading dimensions, which fold into M.
Status gemmShapeOf(const KernelCall &call, GemmShape &s) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  s.transA = call.intParam(contract::Param::kTransposeA, 0);
  s.transB = call.intParam(contract::Param::kTransposeB, 0);
  if (a.shape.size() < 2 || b.shape.size() != 2 || (s.transA && a.shape.size() != 2))
    return FSDPC_ERROR(kInvalidArgument, "matmul: unsupported operand ranks ", cpu::shapeString(a.shape), " x ",
                       cpu::shapeString(b.shape));
  s.k = s.transA ? a.shape[0] : a.shape.back();
  s.m = s.transA ? a.shape[1] : a.numElements() / std::max<int64_t>(s.k, 1);
  const int64_t kb = s.transB ? b.shape[1] : b.shape[0];
  s.n = s.transB ? b.shape[0] : b.shape[1];
  if (s.k != kb || c.numElements() != s.m * s.n)
    return FSDPC_ERROR(kInvalidArgument, "matmul: shapes ", cpu::shapeString(a.shape), " x ",
                       cpu::shapeString(b.shape), " do not match output ", cpu::shapeString(c.shape));
  return operandTypes(call, s);
}

/// gemmShapeOf, and for matmul_bias its bias (one per column of C). An
/// addend has C's shape and dtype (cuBLASLt reads C as D's type), which the
/// plan loader's operand rule checked.
Status matmulShapeOf(const KernelCall &call, GemmShape &s) {
  FSDPC_RETURN_IF_ERROR(gemmShapeOf(call, s));
  if (call.ownInputs() <= 2)
    return Status::ok();
  const TensorView &bias = call.inputs[2];
  if (bias.numElements() != s.n)
    return FSDPC_ERROR(kInvalidArgument, "matmul_bias: bias of ", bias.numElements(), " elements for ", s.n,
                       " columns");
  StatusOr<cudaDataType_t> typeBias = cudaTypeOf(call, bias.dtype);
  if (!typeBias.isOk())
    return typeBias.status();
  s.typeBias = *typeBias;
  s.bias = true;
  return Status::ok();
}

} // namespace

Status matmul(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  GemmShape s;
  FSDPC_RETURN_IF_ERROR(matmulShapeOf(call, s));
  const void *bias = s.bias ? call.inputs[2].data : nullptr;
  const void *addend = call.addend() ? call.addend()->data : nullptr;
  if (s.m == 0 || s.n == 0)
    return Status::ok();
  if (s.k == 0)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA backend has no GEMM with k = 0");
  const Staging staging(s);
  if (staging.any())
    return stagedMatmul(call, s, staging, a.data, b.data, bias, addend, c.data);
  return runGemm(call, s, a.data, b.data, bias, addend, c.data);
}

uint64_t matmulScratch(const KernelCall &call) {
  GemmShape s;
  if (!matmulShapeOf(call, s).isOk() || s.m == 0 || s.n == 0 || s.k == 0)
    return 0; // the call itself reports what is wrong
  const Staging staging(s);
  if (!staging.any())
    return 0;
  const int64_t rows = std::max<int64_t>(std::min<int64_t>(s.m, 8), staging.rowsFitting(kStagingBytes, s.m));
  return staging.bytesFor(rows);
}

Status matmulBiasGrad(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0], &biasGrad = call.outputs[1];
  GemmShape s;
  FSDPC_RETURN_IF_ERROR(gemmShapeOf(call, s));
  // dY, whose rows the bias gradient sums: B, or A with bias_grad_of_a.
  const bool ofA = call.intParam(contract::Param::kBiasGradOfA, 0);
  const TensorView &dy = ofA ? a : b;
  if (ofA ? !s.transA || biasGrad.numElements() != s.m : s.transB || biasGrad.numElements() != s.n)
    return FSDPC_ERROR(kInvalidArgument, "matmul_bias_grad: a bias gradient of ", biasGrad.numElements(),
                       " elements for the rows of ", ofA ? "A " : "B ", cpu::shapeString(dy.shape),
                       ofA ? " (transposed)" : " (not transposed)");
  StatusOr<cudaDataType_t> typeBias = cudaTypeOf(call, biasGrad.dtype);
  if (!typeBias.isOk())
    return typeBias.status();
  s.typeBias = *typeBias;
  if (s.m == 0 || s.n == 0)
    return sumRows(call, dy, biasGrad); // no GEMM, still a sum
  if (s.k == 0)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA backend has no GEMM with k = 0");
  CudaLaunch &launch = launchOf(call);
  // Not every shape, dtype and alignment has the epilogue. Where the
  // heuristic offers none, or the first call with it fails, the GEMM runs
  // plain and a reduction sums the bias gradient: the same numbers.
  auto separate = [&]() -> Status {
    StatusOr<std::shared_ptr<GemmPlan>> plain = makeGemmPlan(call, s, a.data, b.data, nullptr, nullptr, c.data);
    if (!plain.isOk())
      return plain.status();
    // Said once per process: which path ran is what a GPU run must tell.
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr,
                   "fsdp-run: note: cuBLASLt has no bias-gradient epilogue for matmul_bias_grad (%lldx%lldx%lld, "
                   "%s inputs, %s weight gradient, %s bias gradient); such bias gradients are summed after the "
                   "GEMM\n",
                   static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                   plan::DType_Name(a.dtype).c_str(), plan::DType_Name(c.dtype).c_str(),
                   plan::DType_Name(biasGrad.dtype).c_str());
    (*plain)->separateBiasGrad = true;
    launch.cache = *plain;
    return Status::ok();
  };
  if (!launch.cache) {
    GemmShape fused = s;
    fused.biasGrad = true;
    fused.biasGradOfA = ofA;
    StatusOr<std::shared_ptr<GemmPlan>> made =
        makeGemmPlan(call, fused, a.data, b.data, biasGrad.data, nullptr, c.data);
    if (made.isOk()) {
      launch.cache = *made;
      if (runGemm(call, s, a.data, b.data, biasGrad.data, nullptr, c.data).isOk())
        return Status::ok();
    }
    FSDPC_RETURN_IF_ERROR(separate());
  } else if (!static_cast<const GemmPlan *>(launch.cache.get())->separateBiasGrad) {
    return runGemm(call, s, a.data, b.data, biasGrad.data, nullptr, c.data);
  }
  FSDPC_RETURN_IF_ERROR(runGemm(call, s, a.data, b.data, nullptr, nullptr, c.data));
  return sumRows(call, dy, biasGrad);
}

uint64_t matmulBiasGradScratch(const KernelCall &call) {
  const TensorView &dy = call.inputs[call.intParam(contract::Param::kBiasGradOfA, 0) ? 0 : 1];
  return dy.shape.size() == 2 ? sumRowsScratch(dy.shape[0], dy.shape[1]) : 0;
}

Status batchMatmul(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  GemmShape s;
  s.transA = call.intParam(contract::Param::kTransposeA, 0);
  s.transB = call.intParam(contract::Param::kTransposeB, 0);
  const size_t ra = a.shape.size(), rb = b.shape.size(), rc = c.shape.size();
  if (ra < 2 || rb < 2 || rc < 2)
    return FSDPC_ERROR(kInvalidArgument, "batch_matmul: operands must have rank 2 or more");
  s.m = s.transA ? a.shape[ra - 1] : a.shape[ra - 2];
  s.k = s.transA ? a.shape[ra - 2] : a.shape[ra - 1];
  const int64_t kb = s.transB ? b.shape[rb - 1] : b.shape[rb - 2];
  s.n = s.transB ? b.shape[rb - 2] : b.shape[rb - 1];
  std::vector<int64_t> batch(c.shape.begin(), c.shape.end() - 2);
  std::vector<int64_t> batchA(a.shape.begin(), a.shape.end() - 2), batchB(b.shape.begin(), b.shape.end() - 2);
  if (s.k != kb || c.shape[rc - 2] != s.m || c.shape[rc - 1] != s.n || !cpu::broadcastsTo(batchA, batch) ||
      !cpu::broadcastsTo(batchB, batch))
    return FSDPC_ERROR(kInvalidArgument, "batch_matmul: shapes ", cpu::shapeString(a.shape), " x ",
                       cpu::shapeString(b.shape), " do not match output ", cpu::shapeString(c.shape));
  FSDPC_RETURN_IF_ERROR(operandTypes(call, s));
  const int64_t count = elementCount(batch), countA = elementCount(batchA), countB = elementCount(batchB);
  if (count == 0 || s.m == 0 || s.n == 0)
    return Status::ok();
  if (s.k == 0)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA backend has no GEMM with k = 0");
  // One strided-batched call when each operand is either every batch's own
  // matrix or one matrix for all (attention's K shared across heads is not
  // a plan shape today); other broadcasts are refused rather than slow.
  if ((countA != count && countA != 1) || (countB != count && countB != 1))
    return FSDPC_ERROR(kUnimplemented, "batch_matmul: the CUDA backend broadcasts a batch operand only whole, not ",
                       cpu::shapeString(a.shape), " x ", cpu::shapeString(b.shape));
  s.batch = count;
  s.strideA = countA == 1 ? 0 : s.m * s.k;
  s.strideB = countB == 1 ? 0 : s.k * s.n;
  s.strideC = s.m * s.n;
  return runGemm(call, s, a.data, b.data, nullptr, nullptr, c.data);
}

} // namespace fsdpc::runtime::cuda
