//===- HostDevice.h - functions both the CPU and CUDA backends compile -*- C++ -*-===//
//
// FSDPC_HOST_DEVICE marks an inline function that the CPU kernels and the
// CUDA kernels share, so that both backends compute the same thing from one
// definition (the learning-rate schedule, arg_max's tie and NaN rules).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_HOSTDEVICE_H
#define FSDPC_RUNTIME_HOSTDEVICE_H

#if defined(__CUDACC__)
#define FSDPC_HOST_DEVICE __host__ __device__
#else
#define FSDPC_HOST_DEVICE
#endif

#endif // FSDPC_RUNTIME_HOSTDEVICE_H
