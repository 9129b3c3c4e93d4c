//===- KernelVariants.h - interchangeable launches, chosen by timing ------===//
//
// Some kernels come in variants that compute the same bits (every output
// element from the same operations in the same order) in different shapes
// for the hardware: rows per warp, what stays in registers. Which one is
// fastest depends on the GPU (registers against warps per multiprocessor,
// shared-memory bandwidth against latency), so the device times them on a
// call's own operands at its instruction's first call, as cuDNN's benchmark
// mode and Triton's autotuner do, and keeps the fastest. The choice cannot
// change a result, so runs stay reproducible whichever variant wins.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CUDA_KERNELVARIANTS_H
#define FSDPC_RUNTIME_CUDA_KERNELVARIANTS_H

#include "CudaKernels.h"

#include <functional>
#include <string>
#include <vector>

namespace fsdpc::runtime::cuda {

/// One way to run a call: enqueues its kernels on the call's stream.
struct KernelVariant {
  std::string name;
  std::function<Status()> launch;
};

/// Runs the call's variant: the one its instruction chose before (its
/// CudaLaunch::cache holds a VariantChoice), else the one chosen for calls
/// of the same `shape` (what the speed depends on, as text) earlier in the
/// process, else the fastest by timing: each variant runs once (the first
/// launch of a kernel loads it) and then twice between two events, and the
/// fastest runs last, so the outputs are its own. The first timing for a
/// shape says on stderr what it chose. A stream being captured into a
/// CUDA graph cannot be timed: the first variant runs then, unrecorded.
/// Nor can a call whose outputs share bytes with its inputs (a kernel that
/// works in place): a second run would read what the first wrote. It keeps
/// the first variant.
Status runFastestVariant(const KernelCall &call, const std::string &shape, const std::vector<KernelVariant> &variants);

/// A dtype as the notes name it: "bf16".
std::string dtypeName(plan::DType dtype);

} // namespace fsdpc::runtime::cuda

#endif // FSDPC_RUNTIME_CUDA_KERNELVARIANTS_H
