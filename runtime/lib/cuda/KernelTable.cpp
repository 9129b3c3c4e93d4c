//===- KernelTable.cpp - the CUDA backend's kernel table ------------------===//
#include "CudaKernels.h"

#include <algorithm>
#include <unordered_map>

namespace fsdpc::runtime::cuda {

namespace {

// One entry for every signature of the kernel contract, as the CPU table
// (the CUDA kernel test checks both ways), with the scratch each needs.
const std::unordered_map<std::string, CudaKernel> &registry() {
  static const std::unordered_map<std::string, CudaKernel> table = {
      {"matmul", {matmul, matmulScratch}},
      {"matmul_bias", {matmul, matmulScratch}},
      {"matmul_bias_grad", {matmulBiasGrad, matmulBiasGradScratch}},
      {"batch_matmul", {batchMatmul}},
      {"add", {add, nullptr, elementwiseVariants}},
      {"sub", {sub, nullptr, elementwiseVariants}},
      {"mul", {mul, nullptr, elementwiseVariants}},
      {"div", {div, nullptr, elementwiseVariants}},
      {"pow", {power, nullptr, elementwiseVariants}},
      {"neg", {negate, nullptr, elementwiseVariants}},
      {"exp", {exponential, nullptr, elementwiseVariants}},
      {"log", {logarithm, nullptr, elementwiseVariants}},
      {"sqrt", {squareRoot, nullptr, elementwiseVariants}},
      {"erf", {errorFunction, nullptr, elementwiseVariants}},
      {"reciprocal", {reciprocal, nullptr, elementwiseVariants}},
      {"sin", {sine, nullptr, elementwiseVariants}},
      {"cos", {cosine, nullptr, elementwiseVariants}},
      {"atan", {arctangent, nullptr, elementwiseVariants}},
      {"floor", {roundDown, nullptr, elementwiseVariants}},
      {"ceil", {roundUp, nullptr, elementwiseVariants}},
      {"round", {roundToNearestEven, nullptr, elementwiseVariants}},
      {"scale", {scale, nullptr, elementwiseVariants}},
      {"relu", {relu, nullptr, elementwiseVariants}},
      {"tanh", {hyperbolicTangent, nullptr, elementwiseVariants}},
      {"sigmoid", {sigmoid, nullptr, elementwiseVariants}},
      {"relu_grad", {reluGrad, nullptr, elementwiseVariants}},
      {"tanh_grad", {tanhGrad, nullptr, elementwiseVariants}},
      {"sigmoid_grad", {sigmoidGrad, nullptr, elementwiseVariants}},
      {"gelu", {gelu, nullptr, elementwiseVariants}},
      {"gelu_grad", {geluGrad, nullptr, elementwiseVariants}},
      {"gated_activation", {gatedActivation, nullptr, elementwiseVariants}},
      {"gated_activation_grad", {gatedActivationGrad}},
      {"rotary", {rotary}},
      {"rotary_grad", {rotaryGrad}},
      {"reduce_sum", {reduceSum, reduceSumScratch}},
      {"broadcast_to", {broadcastTo}},
      {"sum_to", {sumTo, sumToScratch}},
      {"concat", {concat}},
      {"slice", {slice}},
      {"slice_grad", {sliceGrad}},
      {"gather", {gather}},
      {"gather_grad", {gatherGrad, gatherGradScratch}},
      {"expert_matmul", {expertMatmul, expertMatmulScratch}},
      {"expert_matmul_weight_grad", {expertMatmulWeightGrad, expertMatmulWeightGradScratch}},
      {"select", {select}},
      {"is_nan", {isNan}},
      {"compare", {compare}},
      {"cast", {cast, nullptr, castVariants}},
      {"one_hot", {oneHot}},
      {"arg_max", {argReduce}},
      {"arg_min", {argReduce}},
      {"trilu", {trilu}},
      {"transpose", {transpose}},
      {"copy", {copy}},
      {"fill", {fill}},
      {"dropout", {dropout}},
      {"dropout_grad", {dropout}},
      {"softmax", {softmax}},
      {"log_softmax", {softmax}},
      {"softmax_grad", {softmaxGrad}},
      {"log_softmax_grad", {softmaxGrad}},
      {"masked_softmax", {maskedSoftmax}},
      {"attention", {attention, nullptr, attentionVariants}},
      {"attention_grad", {attentionGrad, attentionGradScratch, attentionGradVariants}},
      {"packed_attention", {packedAttention, nullptr, packedAttentionVariants}},
      {"packed_attention_grad", {packedAttentionGrad, packedAttentionGradScratch, packedAttentionGradVariants}},
      {"layer_norm", {layerNorm}},
      {"layer_norm_grad", {layerNormGrad, normGradScratch}},
      {"rms_norm", {rmsNorm}},
      {"rms_norm_grad", {rmsNormGrad, normGradScratch}},
      {"softmax_cross_entropy", {softmaxCrossEntropy, crossEntropyScratch}},
      {"softmax_cross_entropy_grad", {softmaxCrossEntropyGrad, crossEntropyScratch}},
      {"softmax_cross_entropy_with_grad", {softmaxCrossEntropyWithGrad, crossEntropyScratch}},
      {"mse_loss", {mseLoss}},
      {"mse_loss_grad", {mseLossGrad}},
      {"sgd_update", {sgdUpdate}},
      {"adamw_update", {adamwUpdate}},
      {"sum_squares", {sumSquares, sumSquaresScratch}},
      {"clip_coefficient", {clipCoefficient}},
  };
  return table;
}

} // namespace

CudaKernel lookupCudaKernel(const std::string &name) {
  auto it = registry().find(name);
  return it == registry().end() ? CudaKernel() : it->second;
}

std::vector<std::string> cudaKernelNames() {
  std::vector<std::string> names;
  for (const auto &entry : registry())
    names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace fsdpc::runtime::cuda
