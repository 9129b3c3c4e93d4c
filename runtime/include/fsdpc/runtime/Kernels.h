//===- Kernels.h - CPU kernels named by plan instructions -------*- C++ -*-===//
//
// Every compute instruction in a plan names a kernel ("matmul", "relu_grad",
// "adamw_update", ...). A kernel sees its operands as views of arena memory
// plus the instruction's attributes, and reports bad data (say, a label out of
// range) as a Status instead of crashing.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_KERNELS_H
#define FSDPC_RUNTIME_KERNELS_H

#include "fsdpc/runtime/HostArray.h"
#include "fsdpc/runtime/KernelContract.h"
#include "fsdpc/runtime/Status.h"
#include "plan.pb.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fsdpc::runtime {

struct TensorView {
  void *data = nullptr;
  plan::DType dtype = plan::F32;
  std::vector<int64_t> shape;

  int64_t numElements() const { return elementCount(shape); }
  float *f32() const { return static_cast<float *>(data); }
  int64_t *i64() const { return static_cast<int64_t *>(data); }
};

/// What a kernel may know about the step it runs in (random masks depend
/// on it, so that backward reproduces forward's and every rank differs).
struct StepContext {
  int64_t step = 0;
  int rank = 0;
};

/// One kernel parameter, decoded from the plan: bool and int parameters in
/// `i`, floats in `f`, int lists in `list`, strings in `s`.
struct ParamValue {
  bool present = false;
  double f = 0;
  int64_t i = 0;
  std::vector<int64_t> list;
  std::string s;
};
using DecodedParams = std::array<ParamValue, static_cast<size_t>(contract::Param::kCount)>;

/// An instruction's kernel parameters by id, decoded once when the plan
/// loads (validatePlan has checked them against the kernel contract).
DecodedParams decodeParams(const plan::Instruction &inst);

struct KernelCall {
  const plan::Instruction *instruction; // for the op name in messages
  const DecodedParams *params = nullptr;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  const StepContext *context = nullptr;
  /// The backend's per-instruction launch state, set by the device when it
  /// prepares the step (the CUDA backend's stream, error word, scratch and
  /// cached GEMM algorithm); null on the CPU.
  void *backend = nullptr;

  double floatParam(contract::Param p, double fallback) const {
    const ParamValue &v = (*params)[static_cast<size_t>(p)];
    return v.present ? v.f : fallback;
  }
  int64_t intParam(contract::Param p, int64_t fallback) const {
    const ParamValue &v = (*params)[static_cast<size_t>(p)];
    return v.present ? v.i : fallback;
  }
  const std::vector<int64_t> &intListParam(contract::Param p) const { return (*params)[static_cast<size_t>(p)].list; }
  std::string stringParam(contract::Param p, const std::string &fallback) const {
    const ParamValue &v = (*params)[static_cast<size_t>(p)];
    return v.present ? v.s : fallback;
  }
  /// What an `accumulate` kernel (KernelContract.cpp: matmul, matmul_bias,
  /// the norm gradients) adds to its first output: its last input; null
  /// without accumulate.
  const TensorView *addend() const {
    return intParam(contract::Param::kAccumulate, 0) && !inputs.empty() ? &inputs.back() : nullptr;
  }
  /// The inputs before the addend (all of them without accumulate): a
  /// kernel's own operands, which tell matmul from matmul_bias and
  /// layer_norm_grad from rms_norm_grad.
  size_t ownInputs() const { return inputs.size() - (addend() ? 1 : 0); }
};

using KernelFn = Status (*)(const KernelCall &call);

/// The CPU kernel registered under `name`, or nullptr. Its operand counts
/// and parameters are the kernel contract's (KernelContract.h).
KernelFn lookupKernel(const std::string &name);
/// Every kernel the CPU backend has, sorted.
std::vector<std::string> cpuKernelNames();

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_KERNELS_H
