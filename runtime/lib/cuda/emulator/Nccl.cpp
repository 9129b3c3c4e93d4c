//===- Nccl.cpp - the CUDA emulator's NCCL: a communicator of one rank -----===//
#include "nccl.h"

#include <cstdio>
#include <string>

namespace fsdpc_cuda_emulator {
cudaError_t enqueueHostWork(cudaStream_t stream, std::function<void()> work);
}

struct ncclComm {
  int ranks;
};

namespace {

ncclResult_t usage(const std::string &why) {
  std::fprintf(stderr, "cuda emulator: NCCL: %s\n", why.c_str());
  return ncclInvalidUsage;
}

size_t typeBytes(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

/// With one rank every collective copies its input to its output.
ncclResult_t copy(const void *send, void *recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                  cudaStream_t stream) {
  if (!comm)
    return usage("a collective on a null communicator");
  const size_t bytes = count * typeBytes(type);
  if (send == recv || bytes == 0)
    return ncclSuccess;
  return cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess
             ? ncclSuccess
             : ncclUnhandledCudaError;
}

} // namespace

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  default:
    return "NCCL error";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, "fsdpc-emulator", 14);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int ranks, ncclUniqueId id, int rank) {
  if (std::memcmp(id.internal, "fsdpc-emulator", 14) != 0)
    return usage("an id ncclGetUniqueId did not make");
  if (ranks != 1 || rank != 0)
    return usage("the emulator's NCCL has communicators of one rank, not rank " + std::to_string(rank) + " of " +
                 std::to_string(ranks) + " (ranks that share the emulated GPU use the host channel)");
  *comm = new ncclComm{ranks};
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int, int, ncclComm_t *newComm, ncclConfig_t *) {
  if (!comm)
    return usage("ncclCommSplit of a null communicator");
  *newComm = new ncclComm{1};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendCount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return copy(send, recv, sendCount, type, comm, stream);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvCount, ncclDataType_t type, ncclRedOp_t,
                               ncclComm_t comm, cudaStream_t stream) {
  return copy(send, recv, recvCount, type, comm, stream);
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                           ncclComm_t comm, cudaStream_t stream) {
  return copy(send, recv, count, type, comm, stream);
}
