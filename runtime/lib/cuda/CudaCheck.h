//===- CudaCheck.h - CUDA, cuBLASLt and NCCL errors as Status --*- C++ -*-===//
//
// Every CUDA runtime, cuBLASLt and NCCL call returns through one of these
// macros, so a failure becomes a Status that names the call, the library's
// own message, and our file and line (as llm.c's cudaCheck and
// nccl-tests' CUDACHECK do), instead of being ignored.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CUDA_CUDACHECK_H
#define FSDPC_RUNTIME_CUDA_CUDACHECK_H

#include "fsdpc/runtime/Status.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#define FSDPC_CUDA_RETURN_IF_ERROR(expr)                                                                        \
  do {                                                                                                          \
    cudaError_t fsdpcCudaError = (expr);                                                                        \
    if (fsdpcCudaError != cudaSuccess)                                                                          \
      return ::fsdpc::runtime::Status::error(::fsdpc::runtime::StatusCode::kInternal,                           \
                                             std::string(#expr) + ": " + cudaGetErrorString(fsdpcCudaError),    \
                                             __FILE__, __LINE__);                                               \
  } while (0)

#define FSDPC_CUBLAS_RETURN_IF_ERROR(expr)                                                                      \
  do {                                                                                                          \
    cublasStatus_t fsdpcCublasStatus = (expr);                                                                  \
    if (fsdpcCublasStatus != CUBLAS_STATUS_SUCCESS)                                                             \
      return ::fsdpc::runtime::Status::error(::fsdpc::runtime::StatusCode::kInternal,                           \
                                             std::string(#expr) + ": " + cublasLtGetStatusString(fsdpcCublasStatus), \
                                             __FILE__, __LINE__);                                               \
  } while (0)

/// After a kernel launch: a bad configuration (too many threads, too much
/// shared memory) shows only in the last error.
#define FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED() FSDPC_CUDA_RETURN_IF_ERROR(cudaGetLastError())

namespace fsdpc::runtime::cuda {

/// A CUDA runtime call's result as a Status naming `call`, for code that
/// must go on after a failure (to release what it made) instead of
/// returning at once as the macros above do.
inline Status cudaStatus(cudaError_t error, const char *call) {
  return error == cudaSuccess ? Status::ok() : FSDPC_ERROR(kInternal, call, ": ", cudaGetErrorString(error));
}

} // namespace fsdpc::runtime::cuda

#endif // FSDPC_RUNTIME_CUDA_CUDACHECK_H
