//===- CudaKernels.h - the CUDA backend's kernels, by family ---*- C++ -*-===//
//
// Each function implements one signature of the kernel contract on device
// memory, as the CPU kernel of the same name does on host memory (the CUDA
// kernel tests check every one against the CPU kernel on odd sizes). A
// function checks shapes on the host, enqueues its kernels on the
// instruction's stream and returns at once; data errors found inside a
// kernel (a label out of range) go to the device error word, which the
// device reads when the step ends.
//
// Plain C++ (the device compiles with g++ against it); device code lives in
// the .cu files and DeviceMath.cuh.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CUDA_CUDAKERNELS_H
#define FSDPC_RUNTIME_CUDA_CUDAKERNELS_H

#include "fsdpc/runtime/Kernels.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>

namespace fsdpc::runtime::cuda {

/// What a kernel found wrong with its data. The first failing instruction
/// wins the compare-and-swap on `instruction` (its plan index + 1) and
/// fills in the rest; the device reports it after the step.
struct DeviceError {
  unsigned long long instruction;
  long long value;    // the bad label or index
  long long position; // where it was read
  long long limit;    // the size it had to lie in
};

/// One instruction's launch state, made when the device prepares the step;
/// KernelCall::backend points to it.
struct CudaLaunch {
  cudaStream_t stream = nullptr;
  DeviceError *error = nullptr;
  int instruction = 0; // index in the plan's instruction list
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr; // cuBLASLt's, one per stream
  size_t workspaceBytes = 0;
  void *scratch = nullptr; // this kernel's own, as its scratch function asked
  size_t scratchBytes = 0;
  int multiprocessors = 1;
  /// The step's StepContext in device memory, written before each step: a
  /// kernel that needs the step number reads it there, not from the host
  /// call, so that a captured step (a CUDA graph) replays with the new one.
  const StepContext *context = nullptr;
  /// State a kernel keeps between steps (the GEMM algorithm cuBLASLt chose).
  std::shared_ptr<void> cache;
};

inline CudaLaunch &launchOf(const KernelCall &call) { return *static_cast<CudaLaunch *>(call.backend); }

/// Device scratch bytes a kernel needs for a call (0 for most).
using ScratchFn = uint64_t (*)(const KernelCall &call);
/// How many interchangeable variants a kernel has for a call
/// (KernelVariants.h): launches that compute the same bits, one of which
/// the first call chooses by timing.
using VariantsFn = int (*)(const KernelCall &call);

/// An instruction's choice among its kernel's variants, kept in
/// CudaLaunch::cache once made. A test puts one there to run that variant.
struct VariantChoice {
  int index = 0;
};

struct CudaKernel {
  KernelFn run = nullptr;
  ScratchFn scratch = nullptr;
  VariantsFn variants = nullptr; // none: one way to run
};

/// The CUDA kernel for a contract signature, or {} for none.
CudaKernel lookupCudaKernel(const std::string &name);
std::vector<std::string> cudaKernelNames();

// Elementwise.cu: broadcasting binary ops, unary ops and activation
// gradients, select, cast, dropout, GELU, fill. The ops whose operands all
// have the output's elements (and casts between float dtypes) come in
// variants: vectors a thread loads at a time.
int elementwiseVariants(const KernelCall &call);
int castVariants(const KernelCall &call);
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
Status gelu(const KernelCall &call);
Status geluGrad(const KernelCall &call);
/// act(gate) * up, forward (the vector kernel's variants, as GELU) and
/// both gradients in one pass.
Status gatedActivation(const KernelCall &call);
Status gatedActivationGrad(const KernelCall &call);
Status rotary(const KernelCall &call);
Status rotaryGrad(const KernelCall &call);
Status select(const KernelCall &call);
Status cast(const KernelCall &call);
Status dropout(const KernelCall &call);
Status fill(const KernelCall &call);
/// fsdp-run --check-nonfinite, after an instruction on its stream: where an
/// element of the float tensor `output` is NaN or infinite, lowers `*first`
/// to the instruction's plan index (atomicMin), so that after the step it
/// holds the first instruction in plan order that wrote one, as on the CPU.
Status noteNonfinite(const TensorView &output, const CudaLaunch &launch, unsigned long long *first);

// Matmul.cu: cuBLASLt GEMMs (fp32 without TF32, or bf16 / f16 inputs with
// fp32 accumulation), the bias as an epilogue.
Status matmul(const KernelCall &call);
/// Scratch for the operands matmul stages: 16-bit rows that are not a
/// multiple of 16 bytes, copied into padded rows (blocks of C's rows).
uint64_t matmulScratch(const KernelCall &call);
/// matmul_bias_grad: cuBLASLt's bias-gradient epilogue where its heuristic
/// offers one, else the GEMM and then sumRows.
Status matmulBiasGrad(const KernelCall &call);
uint64_t matmulBiasGradScratch(const KernelCall &call);
Status batchMatmul(const KernelCall &call);

// Reductions.cu: sums in double, in a fixed order (bit-stable run to run).
Status reduceSum(const KernelCall &call);
uint64_t reduceSumScratch(const KernelCall &call);
Status broadcastTo(const KernelCall &call);
Status sumTo(const KernelCall &call);
uint64_t sumToScratch(const KernelCall &call);
/// The sums of the rows of `x` ([rows, cols], any float dtype) into `out`
/// ([cols]), as sum_to sums a bias gradient, with the call's scratch
/// (sumRowsScratch).
Status sumRows(const KernelCall &call, const TensorView &x, const TensorView &out);
uint64_t sumRowsScratch(int64_t rows, int64_t cols);

// Shape.cu.
Status concat(const KernelCall &call);
Status slice(const KernelCall &call);
Status sliceGrad(const KernelCall &call);
Status gather(const KernelCall &call);
Status gatherGrad(const KernelCall &call);
uint64_t gatherGradScratch(const KernelCall &call);
Status expertMatmul(const KernelCall &call);
Status expertMatmulWeightGrad(const KernelCall &call);
uint64_t expertMatmulScratch(const KernelCall &call);
uint64_t expertMatmulWeightGradScratch(const KernelCall &call);
Status oneHot(const KernelCall &call);
Status argReduce(const KernelCall &call);
Status trilu(const KernelCall &call);
Status transpose(const KernelCall &call);
Status copy(const KernelCall &call);

// Softmax.cu.
Status softmax(const KernelCall &call);
Status maskedSoftmax(const KernelCall &call);
Status softmaxGrad(const KernelCall &call);

// Attention.cu: flash-attention style, memory linear in the sequence.
// The tensor-core kernels come in variants (rows per warp, fragments kept
// in registers or reread), chosen by timing at the first call.
Status attention(const KernelCall &call);
Status attentionGrad(const KernelCall &call);
uint64_t attentionGradScratch(const KernelCall &call);
Status packedAttention(const KernelCall &call);
Status packedAttentionGrad(const KernelCall &call);
uint64_t packedAttentionGradScratch(const KernelCall &call);
int attentionVariants(const KernelCall &call);
int attentionGradVariants(const KernelCall &call);
int packedAttentionVariants(const KernelCall &call);
int packedAttentionGradVariants(const KernelCall &call);

// Norms.cu.
Status layerNorm(const KernelCall &call);
Status layerNormGrad(const KernelCall &call);
uint64_t normGradScratch(const KernelCall &call);
Status rmsNorm(const KernelCall &call);
Status rmsNormGrad(const KernelCall &call);

// Losses.cu.
Status softmaxCrossEntropy(const KernelCall &call);
Status softmaxCrossEntropyGrad(const KernelCall &call);
Status softmaxCrossEntropyWithGrad(const KernelCall &call);
uint64_t crossEntropyScratch(const KernelCall &call);
Status mseLoss(const KernelCall &call);
Status mseLossGrad(const KernelCall &call);

// Optimizers.cu: one launch over a unit's flat shard, torch's float order.
Status sgdUpdate(const KernelCall &call);
Status adamwUpdate(const KernelCall &call);
Status sumSquares(const KernelCall &call);
uint64_t sumSquaresScratch(const KernelCall &call);
Status clipCoefficient(const KernelCall &call);

} // namespace fsdpc::runtime::cuda

#endif // FSDPC_RUNTIME_CUDA_CUDAKERNELS_H
