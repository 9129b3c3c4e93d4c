//===- CublasLt.cpp - the CUDA emulator's cuBLASLt matmul ------------------===//
//
// Column-major, as the library: element (r, c) of a layout with leading
// dimension ld sits at r + c * ld, and batch i at i * stride. The product
// accumulates in double (the tests compare against BLAS in f32, so the
// accumulation order is not what they check: shapes, transposes, strides,
// the epilogue and the dtypes are).
//
//===----------------------------------------------------------------------===//
#include "cublasLt.h"

#include <cstdio>
#include <string>

namespace fsdpc_cuda_emulator {
cudaError_t enqueueHostWork(cudaStream_t stream, std::function<void()> work);
}

struct cublasLtContext {};
struct cublasLtMatmulDescOpaque {
  cublasComputeType_t compute;
  cudaDataType_t scaleType;
  int32_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1; // -1: the type of D
};
struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};
struct cublasLtMatmulPreferenceOpaque {
  uint64_t workspace = 0;
};

namespace {

cublasStatus_t invalid(const std::string &why) {
  std::fprintf(stderr, "cuda emulator: cuBLASLt: %s\n", why.c_str());
  return CUBLAS_STATUS_INVALID_VALUE;
}

/// Copies an attribute's value after checking its size, as the library does.
template <typename T> cublasStatus_t setValue(T &field, const void *value, size_t bytes, const char *name) {
  if (bytes != sizeof(T))
    return invalid(std::string(name) + " takes " + std::to_string(sizeof(T)) + " bytes, not " +
                   std::to_string(bytes));
  std::memcpy(&field, value, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

double load(int type, const void *base, int64_t index) {
  switch (type) {
  case CUDA_R_32F:
    return static_cast<const float *>(base)[index];
  case CUDA_R_16BF:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[index]);
  case CUDA_R_16F:
    return __half2float(static_cast<const __half *>(base)[index]);
  default:
    return static_cast<const double *>(base)[index];
  }
}
void store(int type, void *base, int64_t index, double value) {
  switch (type) {
  case CUDA_R_32F:
    static_cast<float *>(base)[index] = static_cast<float>(value);
    break;
  case CUDA_R_16BF:
    static_cast<__nv_bfloat16 *>(base)[index] = __float2bfloat16_rn(static_cast<float>(value));
    break;
  case CUDA_R_16F:
    static_cast<__half *>(base)[index] = __float2half_rn(static_cast<float>(value));
    break;
  default:
    static_cast<double *>(base)[index] = value;
  }
}

bool supportedType(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF || t == CUDA_R_16F; }

bool isBiasGradient(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BGRADA || epilogue == CUBLASLT_EPILOGUE_BGRADB;
}

/// The shapes of one matmul, checked: op(A) is m x k, op(B) k x n, C and D
/// m x n, every layout's ld at least its rows, batch counts equal.
cublasStatus_t checkShapes(const cublasLtMatmulDescOpaque &desc, const cublasLtMatrixLayoutOpaque &a,
                           const cublasLtMatrixLayoutOpaque &b, const cublasLtMatrixLayoutOpaque &c,
                           const cublasLtMatrixLayoutOpaque &d) {
  const uint64_t m = desc.transA == CUBLAS_OP_T ? a.cols : a.rows, k = desc.transA == CUBLAS_OP_T ? a.rows : a.cols;
  const uint64_t kb = desc.transB == CUBLAS_OP_T ? b.cols : b.rows, n = desc.transB == CUBLAS_OP_T ? b.rows : b.cols;
  if (k != kb || d.rows != m || d.cols != n || c.rows != m || c.cols != n)
    return invalid("op(A) " + std::to_string(m) + "x" + std::to_string(k) + " times op(B) " + std::to_string(kb) +
                   "x" + std::to_string(n) + " into D " + std::to_string(d.rows) + "x" + std::to_string(d.cols));
  for (const auto *l : {&a, &b, &c, &d}) {
    if (l->ld < static_cast<int64_t>(std::max<uint64_t>(l->rows, 1)))
      return invalid("a leading dimension of " + std::to_string(l->ld) + " below its " + std::to_string(l->rows) +
                     " rows");
    if (!supportedType(l->type))
      return invalid("a matrix type the emulator does not multiply");
  }
  if (a.batch != d.batch || b.batch != d.batch || c.batch != d.batch)
    return invalid("batch counts differ between the layouts");
  if (a.type != b.type)
    return invalid("A and B of different types");
  if (desc.compute != CUBLAS_COMPUTE_32F && desc.compute != CUBLAS_COMPUTE_32F_FAST_TF32)
    return invalid("a compute type the emulator does not have");
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT && desc.epilogue != CUBLASLT_EPILOGUE_BIAS &&
      !isBiasGradient(desc.epilogue))
    return invalid("an epilogue the emulator does not have");
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT && !desc.bias)
    return invalid("a bias epilogue without CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  return CUBLAS_STATUS_SUCCESS;
}

/// What the library's documentation leaves out of the bias-gradient
/// epilogues, refused so that the backend's path without them runs here
/// too: a gradient type other than D's ("the same type as the output
/// elements"), and batches.
bool biasGradientSupported(const cublasLtMatmulDescOpaque &desc, const cublasLtMatrixLayoutOpaque &d) {
  return !isBiasGradient(desc.epilogue) ||
         ((desc.biasType < 0 || desc.biasType == static_cast<int32_t>(d.type)) && d.batch == 1);
}

} // namespace

const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scaleType) {
  if (scaleType != CUDA_R_32F)
    return invalid("a scale type other than CUDA_R_32F with CUBLAS_COMPUTE_32F");
  *desc = new cublasLtMatmulDescOpaque{compute, scaleType};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void *value, size_t bytes) {
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setValue(desc->transA, value, bytes, "CUBLASLT_MATMUL_DESC_TRANSA");
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setValue(desc->transB, value, bytes, "CUBLASLT_MATMUL_DESC_TRANSB");
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setValue(desc->epilogue, value, bytes, "CUBLASLT_MATMUL_DESC_EPILOGUE");
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setValue(desc->bias, value, bytes, "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return setValue(desc->biasType, value, bytes, "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
  }
  return invalid("a matmul attribute the emulator does not have");
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute, const void *value,
                                                size_t bytes) {
  switch (attribute) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return setValue(layout->batch, value, bytes, "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return setValue(layout->stride, value, bytes, "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET");
  case CUBLASLT_MATRIX_LAYOUT_LD:
    return setValue(layout->ld, value, bytes, "CUBLASLT_MATRIX_LAYOUT_LD");
  default:
    return invalid("a layout attribute the emulator does not set");
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  *preference = new cublasLtMatmulPreferenceOpaque();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void *value, size_t bytes) {
  uint32_t alignment = 0;
  switch (attribute) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setValue(preference->workspace, value, bytes, "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setValue(alignment, value, bytes, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES");
  }
  return invalid("a preference the emulator does not have");
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t,
                                              int requested, cublasLtMatmulHeuristicResult_t *results, int *found) {
  *found = 0;
  if (requested < 1)
    return invalid("a heuristic asked for no algorithm");
  if (cublasStatus_t status = checkShapes(*desc, *a, *b, *c, *d))
    return status;
  if (!biasGradientSupported(*desc, *d))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = 0xfeedull; // the one algorithm: marks a result this heuristic gave
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *a,
                              cublasLtMatrixLayout_t aLayout, const void *b, cublasLtMatrixLayout_t bLayout,
                              const void *beta, const void *c, cublasLtMatrixLayout_t cLayout, void *d,
                              cublasLtMatrixLayout_t dLayout, const cublasLtMatmulAlgo_t *algo, void *, size_t,
                              cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo && algo->data[0] != 0xfeedull)
    return invalid("an algorithm the heuristic did not return");
  if (cublasStatus_t status = checkShapes(*desc, *aLayout, *bLayout, *cLayout, *dLayout))
    return status;
  if (!biasGradientSupported(*desc, *dLayout))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const float alphaValue = *static_cast<const float *>(alpha), betaValue = *static_cast<const float *>(beta);
  // By value: the descriptors may change or go before the stream runs this.
  const cublasLtMatmulDescOpaque op = *desc;
  const cublasLtMatrixLayoutOpaque la = *aLayout, lb = *bLayout, lc = *cLayout, ld = *dLayout;
  const bool transA = op.transA == CUBLAS_OP_T, transB = op.transB == CUBLAS_OP_T;
  const int biasType = op.biasType >= 0 ? op.biasType : ld.type;
  cudaError_t queued = fsdpc_cuda_emulator::enqueueHostWork(stream, [=] {
    const int64_t m = static_cast<int64_t>(ld.rows), n = static_cast<int64_t>(ld.cols);
    const int64_t k = static_cast<int64_t>(transA ? la.rows : la.cols);
    for (int32_t i = 0; i < ld.batch; ++i) {
      const int64_t baseA = i * la.stride, baseB = i * lb.stride, baseC = i * lc.stride, baseD = i * ld.stride;
      // op(A)[row, j] and op(B)[j, col] of batch i.
      auto elementA = [&](int64_t row, int64_t j) {
        return load(la.type, a, baseA + (transA ? j + row * la.ld : row + j * la.ld));
      };
      auto elementB = [&](int64_t j, int64_t col) {
        return load(lb.type, b, baseB + (transB ? col + j * lb.ld : j + col * lb.ld));
      };
      for (int64_t col = 0; col < n; ++col)
        for (int64_t row = 0; row < m; ++row) {
          double sum = 0;
          for (int64_t j = 0; j < k; ++j)
            sum += elementA(row, j) * elementB(j, col);
          double value = alphaValue * sum;
          if (betaValue != 0.0f)
            value += betaValue * load(lc.type, c, baseC + row + col * lc.ld);
          if (op.epilogue == CUBLASLT_EPILOGUE_BIAS)
            value += load(biasType, op.bias, row);
          store(ld.type, d, baseD + row + col * ld.ld, value);
        }
      // The bias gradient: op(A) summed over k for each row of D (BGRADA),
      // or op(B) for each column (BGRADB); one batch (biasGradientSupported).
      if (isBiasGradient(op.epilogue)) {
        const bool ofA = op.epilogue == CUBLASLT_EPILOGUE_BGRADA;
        for (int64_t e = 0; e < (ofA ? m : n); ++e) {
          double sum = 0;
          for (int64_t j = 0; j < k; ++j)
            sum += ofA ? elementA(e, j) : elementB(j, e);
          store(biasType, const_cast<void *>(op.bias), e, sum);
        }
      }
    }
  });
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
