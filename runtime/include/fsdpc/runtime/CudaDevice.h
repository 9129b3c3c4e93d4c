//===- CudaDevice.h - The CUDA backend as a Device --------------*- C++ -*-===//
//
// One cudaMalloc per plan region; the plan's compute and communication
// streams are CUDA streams, its events CUDA events; the host thread that
// calls runStep enqueues the whole step in plan order and then waits for
// both streams. Kernels are the CUDA kernel table (cuBLASLt GEMMs, fused
// norms, softmax, losses, optimizers and a flash-attention style kernel).
//
// Collectives run on NCCL when every rank has a GPU of its own; when ranks
// share a GPU (NCCL refuses that) they fall back, with a note, to the
// host channel given to prepare (MPI) on pinned host copies.
//
// Built only where nvcc is found; elsewhere these functions say so.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CUDADEVICE_H
#define FSDPC_RUNTIME_CUDADEVICE_H

#include "fsdpc/runtime/Device.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdpc::runtime {

/// Whether this runtime was built with the CUDA backend.
bool cudaBackendBuilt();

/// The CUDA devices this process sees: 0 without the backend, a driver or
/// a GPU.
int cudaDeviceCount();

/// This rank's CUDA device: LOCAL_RANK (or OMPI_COMM_WORLD_LOCAL_RANK)
/// modulo the visible devices. `control` (may be null for one rank) lets
/// the device set up NCCL and find ranks that share a GPU.
StatusOr<std::unique_ptr<Device>> createCudaDevice(HostControl *control);

/// Every kernel the CUDA backend has, sorted (empty without the backend).
std::vector<std::string> cudaKernelNames();

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_CUDADEVICE_H
