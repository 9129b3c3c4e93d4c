//===- HostDevice.h - functions both the CPU and CUDA backends compile -*- C++ -*-===//
//
// FSDPC_HOST_DEVICE marks an inline function that the CPU kernels and the
// CUDA kernels share, so that both backends compute the same thing from one
// definition (the learning-rate schedule, arg_max's tie and NaN rules).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_HOSTDEVICE_H
#define FSDPC_RUNTIME_HOSTDEVICE_H

#include <cstdint>

#if defined(__CUDACC__)
#define FSDPC_HOST_DEVICE __host__ __device__
#else
#define FSDPC_HOST_DEVICE
#endif

namespace fsdpc::runtime {

/// A float cast to an integer, truncated toward zero, defined for every
/// value: NaN, the infinities and anything outside int64 give INT64_MIN, as
/// x86's conversion (and so torch on the CPU) does. C++ leaves those
/// undefined and CUDA's conversion saturates, so the cast kernels of both
/// backends and the importer's constant folding use this one.
FSDPC_HOST_DEVICE inline int64_t truncateToInt64(double value) {
  if (value >= -9223372036854775808.0 && value < 9223372036854775808.0)
    return static_cast<int64_t>(value);
  return INT64_MIN;
}

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_HOSTDEVICE_H
