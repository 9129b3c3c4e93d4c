//===- KernelTable.cpp - the CPU backend's kernel table -------------------===//
#include "CpuKernels.h"

#include <algorithm>
#include <unordered_map>

namespace fsdpc::runtime {

namespace {

// One entry for every signature of the kernel contract
// (test/unit/KernelsTest.cpp checks both ways).
const std::unordered_map<std::string, KernelFn> &registry() {
  using namespace cpu;
  static const std::unordered_map<std::string, KernelFn> table = {
      {"matmul", matmul},
      {"matmul_bias", matmul},
      {"matmul_bias_grad", matmulBiasGrad},
      {"batch_matmul", batchMatmul},
      {"expert_matmul", expertMatmul},
      {"expert_matmul_weight_grad", expertMatmulWeightGrad},
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
      {"sin", sine},
      {"cos", cosine},
      {"atan", arctangent},
      {"floor", roundDown},
      {"ceil", roundUp},
      {"round", roundToNearestEven},
      {"scale", scale},
      {"relu", relu},
      {"tanh", hyperbolicTangent},
      {"sigmoid", sigmoid},
      {"relu_grad", reluGrad},
      {"tanh_grad", tanhGrad},
      {"sigmoid_grad", sigmoidGrad},
      {"gelu", gelu},
      {"gelu_grad", geluGrad},
      {"gated_activation", gatedActivation},
      {"gated_activation_grad", gatedActivationGrad},
      {"rotary", rotary},
      {"rotary_grad", rotaryGrad},
      {"reduce_sum", reduceSum},
      {"broadcast_to", broadcastTo},
      {"sum_to", sumTo},
      {"concat", concat},
      {"slice", slice},
      {"slice_grad", sliceGrad},
      {"gather", gather},
      {"gather_grad", gatherGrad},
      {"select", select},
      {"is_nan", isNan},
      {"compare", compare},
      {"cast", cast},
      {"one_hot", oneHot},
      {"arg_max", argReduce},
      {"arg_min", argReduce},
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
      {"attention", attention},
      {"attention_grad", attentionGrad},
      {"packed_attention", packedAttention},
      {"packed_attention_grad", packedAttentionGrad},
      {"layer_norm", layerNorm},
      {"layer_norm_grad", layerNormGrad},
      {"rms_norm", rmsNorm},
      {"rms_norm_grad", rmsNormGrad},
      {"softmax_cross_entropy", softmaxCrossEntropy},
      {"softmax_cross_entropy_grad", softmaxCrossEntropyGrad},
      {"softmax_cross_entropy_with_grad", softmaxCrossEntropyWithGrad},
      {"mse_loss", mseLoss},
      {"mse_loss_grad", mseLossGrad},
      {"sgd_update", sgdUpdate},
      {"adamw_update", adamwUpdate},
      {"sum_squares", sumSquares},
      {"clip_coefficient", clipCoefficient},
  };
  return table;
}

} // namespace

KernelFn lookupKernel(const std::string &name) {
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
