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
// B, which is cuBLASLt's A) where the heuristic offers one for the shape
// and dtypes, else in a separate reduction after the GEMM.
//
// The descriptors and the algorithm cuBLASLt's heuristic picks are made on
// an instruction's first call and kept in its launch cache: shapes and
// addresses never change between steps.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"

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
  int64_t strideA = 0, strideB = 0, strideC = 0;
  cudaDataType_t typeA = CUDA_R_32F, typeB = CUDA_R_32F, typeC = CUDA_R_32F, typeBias = CUDA_R_32F;
  bool bias = false;     // the bias epilogue: `bias` is read
  bool biasGrad = false; // the bias-gradient epilogue: `bias` is written
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
                                                 const void *b, const void *bias, void *c) {
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
    // The bias (gradient) has one value per row of D, which is C^T.
    const cublasLtEpilogue_t epilogue = s.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADA;
    FSDPC_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    FSDPC_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                                &s.typeBias, sizeof(s.typeBias)));
  }
  FSDPC_CUBLAS_RETURN_IF_ERROR(s.transB ? cublasLtMatrixLayoutCreate(&plan->x, s.typeB, s.k, s.n, s.k)
                                        : cublasLtMatrixLayoutCreate(&plan->x, s.typeB, s.n, s.k, s.n));
  FSDPC_CUBLAS_RETURN_IF_ERROR(s.transA ? cublasLtMatrixLayoutCreate(&plan->y, s.typeA, s.m, s.k, s.m)
                                        : cublasLtMatrixLayoutCreate(&plan->y, s.typeA, s.k, s.m, s.k));
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->d, s.typeC, s.n, s.m, s.n));
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
  auto bytesOf = [](cudaDataType_t t) -> uint64_t { return t == CUDA_R_32F ? 4 : 2; };
  const uint32_t alignX = alignmentOf({reinterpret_cast<uint64_t>(b), s.strideB * bytesOf(s.typeB)});
  const uint32_t alignY = alignmentOf({reinterpret_cast<uint64_t>(a), s.strideA * bytesOf(s.typeA)});
  const uint32_t alignD = alignmentOf({reinterpret_cast<uint64_t>(c), s.strideC * bytesOf(s.typeC)});
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

Status runGemm(const KernelCall &call, const GemmShape &s, const void *a, const void *b, const void *bias, void *c) {
  CudaLaunch &launch = launchOf(call);
  if (!launch.cache) {
    StatusOr<std::shared_ptr<GemmPlan>> made = makeGemmPlan(call, s, a, b, bias, c);
    if (!made.isOk())
      return made.status();
    launch.cache = *made;
  }
  const GemmPlan &plan = *static_cast<const GemmPlan *>(launch.cache.get());
  const float alpha = 1.0f, beta = 0.0f;
  FSDPC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(launch.lt, plan.desc, &alpha, b, plan.x, a, plan.y, &beta, c, plan.d, c,
                                              plan.d, &plan.algo, launch.workspace, launch.workspaceBytes,
                                              launch.stream));
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

} // namespace

Status matmul(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  GemmShape s;
  FSDPC_RETURN_IF_ERROR(gemmShapeOf(call, s));
  const void *bias = nullptr;
  if (call.inputs.size() > 2) {
    const TensorView &biasView = call.inputs[2];
    if (biasView.numElements() != s.n)
      return FSDPC_ERROR(kInvalidArgument, "matmul_bias: bias of ", biasView.numElements(), " elements for ", s.n,
                         " columns");
    StatusOr<cudaDataType_t> typeBias = cudaTypeOf(call, biasView.dtype);
    if (!typeBias.isOk())
      return typeBias.status();
    s.typeBias = *typeBias;
    s.bias = true;
    bias = biasView.data;
  }
  if (s.m == 0 || s.n == 0)
    return Status::ok();
  if (s.k == 0)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA backend has no GEMM with k = 0");
  return runGemm(call, s, a.data, b.data, bias, c.data);
}

Status matmulBiasGrad(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0], &biasGrad = call.outputs[1];
  GemmShape s;
  FSDPC_RETURN_IF_ERROR(gemmShapeOf(call, s));
  if (s.transB || biasGrad.numElements() != s.n)
    return FSDPC_ERROR(kInvalidArgument, "matmul_bias_grad: a bias gradient of ", biasGrad.numElements(),
                       " elements for the rows of B ", cpu::shapeString(b.shape), " (not transposed)");
  StatusOr<cudaDataType_t> typeBias = cudaTypeOf(call, biasGrad.dtype);
  if (!typeBias.isOk())
    return typeBias.status();
  s.typeBias = *typeBias;
  if (s.m == 0 || s.n == 0)
    return sumRows(call, b, biasGrad); // no GEMM, still a sum
  if (s.k == 0)
    return FSDPC_ERROR(kUnimplemented, call.instruction->op(), ": the CUDA backend has no GEMM with k = 0");
  CudaLaunch &launch = launchOf(call);
  // Not every shape, dtype and alignment has the epilogue. Where the
  // heuristic offers none, or the first call with it fails, the GEMM runs
  // plain and a reduction sums the bias gradient: the same numbers.
  auto separate = [&]() -> Status {
    StatusOr<std::shared_ptr<GemmPlan>> plain = makeGemmPlan(call, s, a.data, b.data, nullptr, c.data);
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
    StatusOr<std::shared_ptr<GemmPlan>> made = makeGemmPlan(call, fused, a.data, b.data, biasGrad.data, c.data);
    if (made.isOk()) {
      launch.cache = *made;
      if (runGemm(call, s, a.data, b.data, biasGrad.data, c.data).isOk())
        return Status::ok();
    }
    FSDPC_RETURN_IF_ERROR(separate());
  } else if (!static_cast<const GemmPlan *>(launch.cache.get())->separateBiasGrad) {
    return runGemm(call, s, a.data, b.data, biasGrad.data, c.data);
  }
  FSDPC_RETURN_IF_ERROR(runGemm(call, s, a.data, b.data, nullptr, c.data));
  return sumRows(call, b, biasGrad);
}

uint64_t matmulBiasGradScratch(const KernelCall &call) {
  const TensorView &b = call.inputs[1];
  return b.shape.size() == 2 ? sumRowsScratch(b.shape[0], b.shape[1]) : 0;
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
  return runGemm(call, s, a.data, b.data, nullptr, c.data);
}

} // namespace fsdpc::runtime::cuda
