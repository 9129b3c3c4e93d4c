//===- CpuKernels.h - the CPU backend's kernels, by family -----*- C++ -*-===//
//
// Each kernel implements one signature of the kernel contract
// (fsdpc/runtime/KernelContract.h); KernelTable.cpp maps the contract's
// names to these functions. Operand counts and parameter types were checked
// when the plan loaded, so a kernel checks only what depends on the data
// (shapes, label ranges).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CPU_CPUKERNELS_H
#define FSDPC_RUNTIME_CPU_CPUKERNELS_H

#include "fsdpc/runtime/Kernels.h"

namespace fsdpc::runtime::cpu {

// Elementwise.cpp: binary ops with numpy broadcasting, unary ops and the
// gradients of activations from (y, dy), select, cast, dropout, GELU.
Status add(const KernelCall &call);
Status sub(const KernelCall &call);
Status mul(const KernelCall &call);
Status div(const KernelCall &call);
Status power(const KernelCall &call);
Status negate(const KernelCall &call);
Status exponential(const KernelCall &call);
Status logarithm(const KernelCall &call);
Status squareRoot(const KernelCall &call);
Status errorFunction(const KernelCall &call);
Status reciprocal(const KernelCall &call);
Status sine(const KernelCall &call);
Status cosine(const KernelCall &call);
Status arctangent(const KernelCall &call);
Status roundDown(const KernelCall &call);
Status roundUp(const KernelCall &call);
Status roundToNearestEven(const KernelCall &call);
Status isNan(const KernelCall &call);
Status compare(const KernelCall &call);
Status scale(const KernelCall &call);
Status relu(const KernelCall &call);
Status hyperbolicTangent(const KernelCall &call);
Status sigmoid(const KernelCall &call);
Status reluGrad(const KernelCall &call);
Status tanhGrad(const KernelCall &call);
Status sigmoidGrad(const KernelCall &call);
Status select(const KernelCall &call);
Status cast(const KernelCall &call);
/// dropout and dropout_grad: the same mask, redrawn from (seed, step, rank).
Status dropout(const KernelCall &call);
Status gelu(const KernelCall &call);
Status geluGrad(const KernelCall &call);
/// gated_activation(_grad): act(gate) * up, and its gradients computed as
/// the export's unfused ops compute them (the same bits in f32).
Status gatedActivation(const KernelCall &call);
Status gatedActivationGrad(const KernelCall &call);
Status rotary(const KernelCall &call);
Status rotaryGrad(const KernelCall &call);

// Matmul.cpp: sgemm through BLAS, split by rows across OpenMP threads.
/// matmul and matmul_bias (C starts as the bias, as torch's addmm).
Status matmul(const KernelCall &call);
/// matmul_bias_grad: matmul, then the sums of dY's rows (B, or A with bias_grad_of_a) as sum_to adds them.
Status matmulBiasGrad(const KernelCall &call);
Status batchMatmul(const KernelCall &call);

// Reductions.cpp.
Status reduceSum(const KernelCall &call);
Status broadcastTo(const KernelCall &call);
/// The gradient of a broadcast: sums over the broadcast dimensions.
Status sumTo(const KernelCall &call);
/// out[j] = the sum over r of x[r * cols + j], row by row in f32: sum_to's
/// bias gradient, and matmul_bias_grad's, so the two give the same bits.
void sumRows(const float *x, int64_t rows, int64_t cols, float *out);

// Shape.cpp: shape and indexing.
Status concat(const KernelCall &call);
Status slice(const KernelCall &call);
Status sliceGrad(const KernelCall &call);
Status gather(const KernelCall &call);
Status oneHot(const KernelCall &call);
Status argReduce(const KernelCall &call);
Status gatherGrad(const KernelCall &call);
Status expertMatmul(const KernelCall &call);
Status expertMatmulWeightGrad(const KernelCall &call);
Status trilu(const KernelCall &call);
Status transpose(const KernelCall &call);
Status copy(const KernelCall &call);
Status fill(const KernelCall &call);

// Softmax.cpp.
/// softmax and log_softmax.
Status softmax(const KernelCall &call);
Status maskedSoftmax(const KernelCall &call);
/// softmax_grad and log_softmax_grad.
Status softmaxGrad(const KernelCall &call);

// Attention.cpp: scaled dot-product attention per batch index, keeping only
// each query row's logsumexp for the gradient.
Status attention(const KernelCall &call);
Status attentionGrad(const KernelCall &call);
Status packedAttention(const KernelCall &call);
Status packedAttentionGrad(const KernelCall &call);

// Norms.cpp.
Status layerNorm(const KernelCall &call);
Status layerNormGrad(const KernelCall &call);
Status rmsNorm(const KernelCall &call);
Status rmsNormGrad(const KernelCall &call);

// Losses.cpp.
Status softmaxCrossEntropy(const KernelCall &call);
Status softmaxCrossEntropyGrad(const KernelCall &call);
Status softmaxCrossEntropyWithGrad(const KernelCall &call);
Status mseLoss(const KernelCall &call);
Status mseLossGrad(const KernelCall &call);

// Optimizers.cpp: torch.optim's float operations, in torch's order.
Status sgdUpdate(const KernelCall &call);
Status adamwUpdate(const KernelCall &call);
Status sumSquares(const KernelCall &call);
Status clipCoefficient(const KernelCall &call);

} // namespace fsdpc::runtime::cpu

#endif // FSDPC_RUNTIME_CPU_CPUKERNELS_H
