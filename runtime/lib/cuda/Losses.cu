//===- Losses.cu - loss kernels -------------------------------------------===//
//
// Cross entropy: one block per row writes the row's loss (in double) and
// whether its label counts into scratch; one block then sums the rows in a
// fixed order, so the loss has the same bits every run. A label outside
// [0, classes) goes to the device error word and the step fails with it.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"

#include <climits>

namespace fsdpc::runtime::cuda {

namespace {

constexpr int kReduceThreads = 1024;

Status crossEntropyShapes(const KernelCall &call, int64_t &rows, int64_t &classes) {
  const TensorView &logits = call.inputs[0], &labels = call.inputs[1];
  if (logits.shape.size() != 2 || labels.numElements() != logits.shape[0] || labels.dtype != plan::I64 ||
      !isFloatDtype(logits.dtype))
    return FSDPC_ERROR(kInvalidArgument, "softmax_cross_entropy: float logits ", cpu::shapeString(logits.shape),
                       " and int64 labels ", cpu::shapeString(labels.shape), " do not match");
  rows = logits.shape[0];
  classes = logits.shape[1];
  return Status::ok();
}

/// The maximum and sum of exp(x - max) of the row starting at element
/// `first` of the logits (f32, or bf16 / f16 read as f32), block-wide.
__device__ void rowExpSum(Operand logits, long long first, long long classes, float *sharedFloat, double *sharedDouble,
                          float &rowMax, double &sum) {
  float localMax = -INFINITY;
  for (long long c = threadIdx.x; c < classes; c += blockDim.x)
    localMax = fmaxf(localMax, loadFloat(logits, first + c));
  rowMax = blockMax(localMax, sharedFloat);
  double local = 0;
  for (long long c = threadIdx.x; c < classes; c += blockDim.x)
    local += expf(loadFloat(logits, first + c) - rowMax);
  sum = blockSum(local, sharedDouble);
}

__global__ void crossEntropyRowsKernel(Operand logits, const long long *labels, long long rows, long long classes,
                                       long long ignoreIndex, double *rowLoss, long long *rowCounts, DeviceError *error,
                                       int instruction) {
  __shared__ float sharedFloat[32];
  __shared__ double sharedDouble[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long label = labels[r];
    const bool ignored = label == ignoreIndex, outside = !ignored && (label < 0 || label >= classes);
    if (ignored || outside) {
      if (threadIdx.x == 0) {
        if (outside)
          reportDataError(error, instruction, label, r, classes);
        rowLoss[r] = 0;
        rowCounts[r] = 0;
      }
      continue;
    }
    float rowMax;
    double sum;
    rowExpSum(logits, r * classes, classes, sharedFloat, sharedDouble, rowMax, sum);
    if (threadIdx.x == 0) {
      rowLoss[r] = log(sum) + rowMax - loadFloat(logits, r * classes + label);
      rowCounts[r] = 1;
    }
  }
}

__global__ void crossEntropyTotalKernel(const double *rowLoss, const long long *rowCounts, long long rows, bool mean,
                                        float *loss) {
  __shared__ double shared[32];
  __shared__ long long sharedCounts[32];
  double local = 0;
  long long localCount = 0;
  for (long long r = threadIdx.x; r < rows; r += blockDim.x) {
    local += rowLoss[r];
    localCount += rowCounts[r];
  }
  const double total = blockSum(local, shared);
  const long long counted = blockSum(localCount, sharedCounts);
  // torch returns NaN for a mean over zero labels; so does 0.0 / 0.
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(mean ? total / static_cast<double>(counted) : total);
}

__global__ void countLabelsKernel(const long long *labels, long long rows, long long ignoreIndex, long long *counted) {
  __shared__ long long shared[32];
  long long local = 0;
  for (long long r = threadIdx.x; r < rows; r += blockDim.x)
    local += labels[r] != ignoreIndex;
  const long long total = blockSum(local, shared);
  if (threadIdx.x == 0)
    counted[0] = total;
}

/// dlogits has the logits' dtype: under mixed precision the gradient is
/// rounded to bf16 once, on the store, as a cast of the f32 one would.
__global__ void crossEntropyGradKernel(Operand logits, const long long *labels, const float *seed,
                                       const long long *counted, long long rows, long long classes,
                                       long long ignoreIndex, bool mean, Operand dlogits, DeviceError *error,
                                       int instruction) {
  __shared__ float sharedFloat[32];
  __shared__ double sharedDouble[32];
  const float scale = mean ? seed[0] / static_cast<float>(counted[0]) : seed[0];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long label = labels[r];
    const long long first = r * classes;
    const bool ignored = label == ignoreIndex, outside = !ignored && (label < 0 || label >= classes);
    if (ignored || outside) {
      if (outside && threadIdx.x == 0)
        reportDataError(error, instruction, label, r, classes);
      for (long long c = threadIdx.x; c < classes; c += blockDim.x)
        storeFloat(dlogits, first + c, 0.0f);
      continue;
    }
    float rowMax;
    double sum;
    rowExpSum(logits, first, classes, sharedFloat, sharedDouble, rowMax, sum);
    const float factor = static_cast<float>(scale / sum);
    for (long long c = threadIdx.x; c < classes; c += blockDim.x)
      storeFloat(dlogits, first + c,
                 expf(loadFloat(logits, first + c) - rowMax) * factor - (c == label ? scale : 0.0f));
  }
}

__global__ void mseLossKernel(const float *pred, const float *target, long long n, float *loss) {
  __shared__ double shared[32];
  double local = 0;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = pred[i] - target[i];
    local += d * d;
  }
  const double total = blockSum(local, shared);
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(total / n);
}

__global__ void mseLossGradKernel(const float *pred, const float *target, const float *seed, long long n,
                                  float *out) {
  const float scale = 2.0f * seed[0] / static_cast<float>(n);
  FSDPC_GRID_STRIDE_LOOP(i, n) { out[i] = (pred[i] - target[i]) * scale; }
}

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)); }

} // namespace

uint64_t crossEntropyScratch(const KernelCall &call) {
  const int64_t rows = call.inputs[0].shape.empty() ? 0 : call.inputs[0].shape[0];
  return static_cast<uint64_t>(rows) * (sizeof(double) + sizeof(long long)) + sizeof(long long);
}

Status softmaxCrossEntropy(const KernelCall &call) {
  int64_t rows, classes;
  FSDPC_RETURN_IF_ERROR(crossEntropyShapes(call, rows, classes));
  const CudaLaunch &launch = launchOf(call);
  if (launch.scratchBytes < crossEntropyScratch(call))
    return FSDPC_ERROR(kInternal, "softmax_cross_entropy: scratch too small");
  auto *rowLoss = static_cast<double *>(launch.scratch);
  auto *rowCounts = reinterpret_cast<long long *>(rowLoss + rows);
  const long long ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
  const bool mean = call.stringParam(contract::Param::kReduction, "mean") == "mean";
  const auto *labels = static_cast<const long long *>(call.inputs[1].data);
  if (rows > 0) {
    launchKernel(crossEntropyRowsKernel, rowBlocks(rows), kThreads, 0, launch.stream, operandOf(call.inputs[0]), labels,
                 rows, classes, ignoreIndex, rowLoss, rowCounts, launch.error, launch.instruction);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  launchKernel(crossEntropyTotalKernel, 1, kReduceThreads, 0, launch.stream, rowLoss, rowCounts, rows, mean,
               call.outputs[0].f32());
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status softmaxCrossEntropyGrad(const KernelCall &call) {
  int64_t rows, classes;
  FSDPC_RETURN_IF_ERROR(crossEntropyShapes(call, rows, classes));
  const CudaLaunch &launch = launchOf(call);
  if (launch.scratchBytes < crossEntropyScratch(call))
    return FSDPC_ERROR(kInternal, "softmax_cross_entropy_grad: scratch too small");
  if (rows == 0)
    return Status::ok();
  auto *counted = static_cast<long long *>(launch.scratch);
  const long long ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
  const bool mean = call.stringParam(contract::Param::kReduction, "mean") == "mean";
  const auto *labels = static_cast<const long long *>(call.inputs[1].data);
  launchKernel(countLabelsKernel, 1, kReduceThreads, 0, launch.stream, labels, rows, ignoreIndex, counted);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  if (call.outputs[0].dtype != call.inputs[0].dtype)
    return FSDPC_ERROR(kInvalidArgument, "softmax_cross_entropy_grad: the gradient's dtype is not the logits'");
  launchKernel(crossEntropyGradKernel, rowBlocks(rows), kThreads, 0, launch.stream, operandOf(call.inputs[0]), labels,
               call.inputs[2].f32(), counted, rows, classes, ignoreIndex, mean, operandOf(call.outputs[0]),
               launch.error, launch.instruction);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status mseLoss(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(requireF32(call));
  const TensorView &pred = call.inputs[0], &target = call.inputs[1];
  if (pred.numElements() != target.numElements())
    return FSDPC_ERROR(kInvalidArgument, "mse_loss: prediction ", cpu::shapeString(pred.shape), " and target ",
                       cpu::shapeString(target.shape), " differ");
  const CudaLaunch &launch = launchOf(call);
  launchKernel(mseLossKernel, 1, kReduceThreads, 0, launch.stream, pred.f32(), target.f32(), pred.numElements(),
               call.outputs[0].f32());
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status mseLossGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(requireF32(call));
  const int64_t n = call.inputs[0].numElements();
  if (call.inputs[1].numElements() != n || call.outputs[0].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, "mse_loss_grad: operand sizes differ");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(mseLossGradKernel, blocksFor(n, launch), kThreads, 0, launch.stream, call.inputs[0].f32(),
               call.inputs[1].f32(), call.inputs[2].f32(), n, call.outputs[0].f32());
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

} // namespace fsdpc::runtime::cuda
