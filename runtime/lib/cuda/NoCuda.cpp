//===- NoCuda.cpp - the CUDA entry points where nvcc was not found -------===//
#include "fsdpc/runtime/CudaDevice.h"

namespace fsdpc::runtime {

bool cudaBackendBuilt() { return false; }

int cudaDeviceCount() { return 0; }

StatusOr<std::unique_ptr<Device>> createCudaDevice(HostControl *) {
  return FSDPC_ERROR(kUnimplemented, "this fsdp-run was built without the CUDA backend (no nvcc was found)");
}

std::vector<std::string> cudaKernelNames() { return {}; }

} // namespace fsdpc::runtime
