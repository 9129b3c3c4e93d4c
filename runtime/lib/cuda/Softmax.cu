//===- Softmax.cu - softmax kernels ---------------------------------------===//
//
// Along the last axis (every softmax a model exports): one block per row,
// block reductions for the maximum and the sum. Along another axis: one
// thread per slice, which is rare and small.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"

namespace fsdpc::runtime::cuda {

namespace {

enum class Mode { kSoftmax, kLogSoftmax };

template <Mode M>
__global__ void softmaxRowsKernel(const float *x, float *y, long long rows, long long cols, Operand mask,
                                  Layout<1> maskLayout, float scale, bool masked) {
  __shared__ float shared[32];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const float *in = x + row * cols;
    float *out = y + row * cols;
    auto value = [&](long long j) {
      if (!masked)
        return in[j];
      long long offset[1];
      maskLayout.offsets(row * cols + j, offset);
      return loadInteger(mask, offset[0]) ? -INFINITY : in[j] * scale;
    };
    float localMax = -INFINITY;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x)
      localMax = fmaxf(localMax, value(j));
    const float rowMax = blockMax(localMax, shared);
    // Every score -inf (every key masked): zeros, as the CPU kernel and
    // torch's SDPA give; log_softmax keeps NaN, and so does a row of NaNs
    // (fmaxf skips them, so its maximum is -inf too).
    if (M == Mode::kSoftmax && rowMax == -INFINITY) {
      float localOther = 0.0f;
      for (long long j = threadIdx.x; j < cols; j += blockDim.x)
        localOther = value(j) != -INFINITY ? 1.0f : localOther;
      if (blockMax(localOther, shared) == 0.0f) {
        for (long long j = threadIdx.x; j < cols; j += blockDim.x)
          out[j] = 0.0f;
        continue;
      }
    }
    float localSum = 0.0f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x)
      localSum += expf(value(j) - rowMax);
    const float sum = blockSum(localSum, shared);
    if constexpr (M == Mode::kLogSoftmax) {
      const float logSum = logf(sum);
      for (long long j = threadIdx.x; j < cols; j += blockDim.x)
        out[j] = value(j) - rowMax - logSum;
    } else {
      const float inv = 1.0f / sum;
      for (long long j = threadIdx.x; j < cols; j += blockDim.x)
        out[j] = expf(value(j) - rowMax) * inv;
    }
  }
}

template <Mode M>
__global__ void softmaxStridedKernel(const float *x, float *y, long long outer, long long size, long long inner) {
  FSDPC_GRID_STRIDE_LOOP(slice, outer * inner) {
    const long long base = (slice / inner) * size * inner + slice % inner;
    float rowMax = -INFINITY;
    for (long long j = 0; j < size; ++j)
      rowMax = fmaxf(rowMax, x[base + j * inner]);
    bool allNegativeInfinity = M == Mode::kSoftmax && rowMax == -INFINITY;
    for (long long j = 0; allNegativeInfinity && j < size; ++j)
      allNegativeInfinity = x[base + j * inner] == -INFINITY;
    if (allNegativeInfinity) { // every score -inf: zeros
      for (long long j = 0; j < size; ++j)
        y[base + j * inner] = 0.0f;
      continue;
    }
    double sum = 0;
    for (long long j = 0; j < size; ++j)
      sum += expf(x[base + j * inner] - rowMax);
    const float logSum = static_cast<float>(log(sum)), inv = static_cast<float>(1.0 / sum);
    for (long long j = 0; j < size; ++j) {
      const float v = x[base + j * inner];
      y[base + j * inner] = M == Mode::kLogSoftmax ? v - rowMax - logSum : expf(v - rowMax) * inv;
    }
  }
}

/// softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy).
template <Mode M>
__global__ void softmaxGradRowsKernel(const float *y, const float *dy, float *dx, long long rows, long long cols) {
  __shared__ float shared[32];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const float *py = y + row * cols, *pdy = dy + row * cols;
    float local = 0.0f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x)
      local += M == Mode::kLogSoftmax ? pdy[j] : pdy[j] * py[j];
    const float s = blockSum(local, shared);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x)
      dx[row * cols + j] = M == Mode::kLogSoftmax ? pdy[j] - expf(py[j]) * s : py[j] * (pdy[j] - s);
  }
}

template <Mode M>
__global__ void softmaxGradStridedKernel(const float *y, const float *dy, float *dx, long long outer, long long size,
                                         long long inner) {
  FSDPC_GRID_STRIDE_LOOP(slice, outer * inner) {
    const long long base = (slice / inner) * size * inner + slice % inner;
    double sum = 0;
    for (long long j = 0; j < size; ++j) {
      const long long k = base + j * inner;
      sum += M == Mode::kLogSoftmax ? dy[k] : dy[k] * y[k];
    }
    const float s = static_cast<float>(sum);
    for (long long j = 0; j < size; ++j) {
      const long long k = base + j * inner;
      dx[k] = M == Mode::kLogSoftmax ? dy[k] - expf(y[k]) * s : y[k] * (dy[k] - s);
    }
  }
}

Status axisSplit(const KernelCall &call, int64_t &outer, int64_t &size, int64_t &inner) {
  if (!cpu::splitAroundAxis(call.outputs[0].shape, call.intParam(contract::Param::kAxis, -1), outer, size, inner))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": axis out of range");
  return Status::ok();
}

} // namespace

Status softmax(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(requireF32(call));
  int64_t outer, size, inner;
  FSDPC_RETURN_IF_ERROR(axisSplit(call, outer, size, inner));
  if (call.inputs[0].numElements() != call.outputs[0].numElements())
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": input and output sizes differ");
  if (outer * size * inner == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const bool logOutput = call.instruction->op() == "log_softmax";
  const float *x = call.inputs[0].f32();
  float *y = call.outputs[0].f32();
  if (inner == 1) {
    const Operand none{nullptr, plan::I64, 8};
    if (logOutput)
      launchKernel(softmaxRowsKernel<Mode::kLogSoftmax>, rowBlocks(outer, launch), kThreads, 0, launch.stream, x, y,
                   outer, size, none, Layout<1>(), 1.0f, false);
    else
      launchKernel(softmaxRowsKernel<Mode::kSoftmax>, rowBlocks(outer, launch), kThreads, 0, launch.stream, x, y, outer,
                   size, none, Layout<1>(), 1.0f, false);
  } else if (logOutput) {
    launchKernel(softmaxStridedKernel<Mode::kLogSoftmax>, blocksFor(outer * inner, launch), kThreads, 0, launch.stream,
                 x, y, outer, size, inner);
  } else {
    launchKernel(softmaxStridedKernel<Mode::kSoftmax>, blocksFor(outer * inner, launch), kThreads, 0, launch.stream, x,
                 y, outer, size, inner);
  }
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status maskedSoftmax(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &mask = call.inputs[1], &y = call.outputs[0];
  if (x.dtype != plan::F32 || y.dtype != plan::F32)
    return FSDPC_ERROR(kInvalidArgument, "masked_softmax: the CUDA kernel takes f32 tensors");
  if (x.shape.empty() || x.shape != y.shape || !cpu::broadcastsTo(mask.shape, y.shape))
    return FSDPC_ERROR(kInvalidArgument, "masked_softmax: mask ", cpu::shapeString(mask.shape), " and input ",
                       cpu::shapeString(x.shape), " do not fit the output ", cpu::shapeString(y.shape));
  Layout<1> maskLayout;
  if (!makeLayout(y.shape, {cpu::broadcastStrides(mask.shape, y.shape)}, maskLayout))
    return rankError(call, y.shape.size());
  const int64_t cols = y.shape.back(), rows = cols == 0 ? 0 : y.numElements() / cols;
  if (rows == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(softmaxRowsKernel<Mode::kSoftmax>, rowBlocks(rows, launch), kThreads, 0, launch.stream, x.f32(), y.f32(),
               rows, cols, operandOf(mask), maskLayout,
               static_cast<float>(call.floatParam(contract::Param::kScale, 1.0)), true);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status softmaxGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(requireF32(call));
  int64_t outer, size, inner;
  FSDPC_RETURN_IF_ERROR(axisSplit(call, outer, size, inner));
  const int64_t n = outer * size * inner;
  if (call.inputs[0].numElements() != n || call.inputs[1].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": operand sizes differ");
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const bool logInput = call.instruction->op() == "log_softmax_grad";
  const float *y = call.inputs[0].f32(), *dy = call.inputs[1].f32();
  float *dx = call.outputs[0].f32();
  if (inner == 1) {
    if (logInput)
      launchKernel(softmaxGradRowsKernel<Mode::kLogSoftmax>, rowBlocks(outer, launch), kThreads, 0, launch.stream, y,
                   dy, dx, outer, size);
    else
      launchKernel(softmaxGradRowsKernel<Mode::kSoftmax>, rowBlocks(outer, launch), kThreads, 0, launch.stream, y, dy,
                   dx, outer, size);
  } else if (logInput) {
    launchKernel(softmaxGradStridedKernel<Mode::kLogSoftmax>, blocksFor(outer * inner, launch), kThreads, 0,
                 launch.stream, y, dy, dx, outer, size, inner);
  } else {
    launchKernel(softmaxGradStridedKernel<Mode::kSoftmax>, blocksFor(outer * inner, launch), kThreads, 0, launch.stream,
                 y, dy, dx, outer, size, inner);
  }
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

} // namespace fsdpc::runtime::cuda
