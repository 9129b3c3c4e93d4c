//===- KernelTable.cpp - the CPU backend's kernel table -------------------===//
#include "CpuKernels.h"

#include <algorithm>
#include <unordered_map>

// OpenBLAS's own thread pool spins between calls; next to OpenMP's it
// makes both pools fight over the cores (elementwise kernels ran 40x
// slower). So BLAS runs single-threaded and the kernels split GEMMs across
// OpenMP threads themselves. Weak, so another BLAS still links.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace fsdpc::runtime {

double KernelCall::floatAttr(const std::string &name, double fallback) const {
  auto it = instruction->float_attrs().find(name);
  return it == instruction->float_attrs().end() ? fallback : it->second;
}

int64_t KernelCall::intAttr(const std::string &name, int64_t fallback) const {
  auto it = instruction->int_attrs().find(name);
  return it == instruction->int_attrs().end() ? fallback : it->second;
}

std::vector<int64_t> KernelCall::intListAttr(const std::string &name) const {
  auto it = instruction->int_list_attrs().find(name);
  if (it == instruction->int_list_attrs().end())
    return {};
  return {it->second.values().begin(), it->second.values().end()};
}

std::string KernelCall::stringAttr(const std::string &name, const std::string &fallback) const {
  auto it = instruction->string_attrs().find(name);
  return it == instruction->string_attrs().end() ? fallback : it->second;
}

namespace {

// One entry for every signature of the kernel contract
// (test/unit/KernelsTest.cpp checks both ways).
const std::unordered_map<std::string, KernelFn> &registry() {
  using namespace cpu;
  static const std::unordered_map<std::string, KernelFn> table = {
      {"matmul", matmul},
      {"matmul_bias", matmul},
      {"batch_matmul", batchMatmul},
      {"add", add},
      {"sub", sub},
      {"mul", mul},
      {"div", div},
      {"pow", power},
      {"neg", negate},
      {"exp", exponential},
      {"log", logarithm},
      {"sqrt", squareRoot},
      {"erf", errorFunction},
      {"reciprocal", reciprocal},
      {"scale", scale},
      {"relu", relu},
      {"tanh", hyperbolicTangent},
      {"sigmoid", sigmoid},
      {"relu_grad", reluGrad},
      {"tanh_grad", tanhGrad},
      {"sigmoid_grad", sigmoidGrad},
      {"gelu", gelu},
      {"gelu_grad", geluGrad},
      {"reduce_sum", reduceSum},
      {"broadcast_to", broadcastTo},
      {"sum_to", sumTo},
      {"concat", concat},
      {"slice", slice},
      {"slice_grad", sliceGrad},
      {"gather", gather},
      {"gather_grad", gatherGrad},
      {"select", select},
      {"cast", cast},
      {"trilu", trilu},
      {"transpose", transpose},
      {"copy", copy},
      {"fill", fill},
      {"dropout", dropout},
      {"dropout_grad", dropout},
      {"softmax", softmax},
      {"log_softmax", softmax},
      {"softmax_grad", softmaxGrad},
      {"log_softmax_grad", softmaxGrad},
      {"masked_softmax", maskedSoftmax},
      {"layer_norm", layerNorm},
      {"layer_norm_grad", layerNormGrad},
      {"rms_norm", rmsNorm},
      {"rms_norm_grad", rmsNormGrad},
      {"softmax_cross_entropy", softmaxCrossEntropy},
      {"softmax_cross_entropy_grad", softmaxCrossEntropyGrad},
      {"mse_loss", mseLoss},
      {"mse_loss_grad", mseLossGrad},
      {"sgd_update", sgdUpdate},
      {"adamw_update", adamwUpdate},
  };
  return table;
}

} // namespace

KernelFn lookupKernel(const std::string &name) {
  static const bool blasSingleThreaded = [] {
    if (openblas_set_num_threads)
      openblas_set_num_threads(1);
    return true;
  }();
  (void)blasSingleThreaded;
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

std::vector<std::string> cpuKernelNames() {
  std::vector<std::string> names;
  for (const auto &entry : registry())
    names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace fsdpc::runtime
