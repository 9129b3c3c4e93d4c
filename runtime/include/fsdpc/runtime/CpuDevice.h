//===- CpuDevice.h - The CPU backend as a Device ----------------*- C++ -*-===//
//
// Device memory is host memory: each region is a fresh anonymous mapping,
// whose touched pages measure the plan's real peak. The compute stream runs
// on the thread that calls runStep (so kernels' OpenMP teams stay warm); the
// communication stream runs on one persistent worker thread that waits for
// each step. Kernels are the CPU kernel table (BLAS single-threaded, GEMMs
// split by rows across OpenMP threads).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CPUDEVICE_H
#define FSDPC_RUNTIME_CPUDEVICE_H

#include "fsdpc/runtime/Device.h"

#include <memory>

namespace fsdpc::runtime {

std::unique_ptr<Device> createCpuDevice();

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_CPUDEVICE_H
