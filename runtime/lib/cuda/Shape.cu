//===- Shape.cu - shape and indexing kernels ------------------------------===//
#include "DeviceMath.cuh"
#include "../KernelChecks.h"

#include <climits>

namespace fsdpc::runtime::cuda {

namespace {

__global__ void scatterSliceKernel(Operand dy, Operand dx, long long base, long long n, Layout<1> layout) {
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    long long offset[1];
    layout.offsets(i, offset);
    storeFloat(dx, base + offset[0], loadFloat(dy, i));
  }
}

/// out[r, c] = labels[r] == c; an ignored label leaves a row of zeros, any
/// other label outside [0, depth) is reported (and its row left zero).
__global__ void oneHotKernel(Operand labels, float *out, long long rows, long long depth, long long ignoreIndex,
                             DeviceError *error, int instruction) {
  FSDPC_GRID_STRIDE_LOOP(i, rows * depth) {
    const long long r = i / depth, c = i % depth, label = loadInteger(labels, r);
    if (c == 0 && label != ignoreIndex && (label < 0 || label >= depth))
      reportDataError(error, instruction, label, r, depth);
    out[i] = label == c ? 1.0f : 0.0f;
  }
}

/// One thread per output element scans its column along the axis, by the
/// rules both backends share (argReduceReplaces).
__global__ void argReduceKernel(Operand x, long long *out, long long outer, long long size, long long inner,
                                bool isMax, bool last) {
  FSDPC_GRID_STRIDE_LOOP(i, outer * inner) {
    const long long o = i / inner, k = i % inner, base = o * size * inner + k;
    long long best = 0;
    float bestValue = loadFloat(x, base);
    for (long long j = 1; j < size; ++j) {
      const float v = loadFloat(x, base + j * inner);
      if (argReduceReplaces(bestValue, v, isMax, last)) {
        best = j;
        bestValue = v;
      }
    }
    out[i] = best;
  }
}

/// The shared layout (KernelChecks.h) for integer indices; their values
/// are checked in the kernel, through the device error word.
Status integerGatherLayout(const char *kernel, const std::vector<int64_t> &data, const TensorView &indices,
                           int64_t axis, GatherLayout &g) {
  if (indices.dtype != plan::I64 && indices.dtype != plan::I32)
    return FSDPC_ERROR(kInvalidArgument, kernel, ": indices must be integers");
  return gatherLayout(kernel, data, indices, axis, g);
}

/// out[o, j, :] = data[o, index[j], :]; an index outside [-rows, rows) is
/// reported and its row left as zeros.
template <int Bytes>
__global__ void gatherKernel(const void *data, Operand indices, void *out, long long outer, long long rows,
                             long long count, long long inner, DeviceError *error, int instruction) {
  using T = std::conditional_t<Bytes == 8, unsigned long long,
                               std::conditional_t<Bytes == 4, unsigned int,
                                                  std::conditional_t<Bytes == 2, unsigned short, unsigned char>>>;
  const long long n = outer * count * inner;
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    const long long k = i % inner, j = (i / inner) % count, o = i / (inner * count);
    long long index = loadInteger(indices, j);
    if (index < -rows || index >= rows) {
      if (k == 0 && o == 0)
        reportDataError(error, instruction, index, j, rows);
      static_cast<T *>(out)[i] = 0;
      continue;
    }
    index += index < 0 ? rows : 0;
    static_cast<T *>(out)[i] = static_cast<const T *>(data)[(o * rows + index) * inner + k];
  }
}

/// dx[o, index[j], :] += dy[o, j, :] in f32 (atomics: repeated indices add
/// in any order, the one reduction here whose bits vary run to run).
__global__ void gatherGradKernel(Operand dy, Operand indices, float *dx, long long outer, long long rows,
                                 long long count, long long inner) {
  const long long n = outer * count * inner;
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    const long long k = i % inner, j = (i / inner) % count, o = i / (inner * count);
    long long index = loadInteger(indices, j);
    if (index < -rows || index >= rows)
      continue; // gather reported it in forward
    index += index < 0 ? rows : 0;
    atomicAdd(dx + (o * rows + index) * inner + k, loadFloat(dy, i));
  }
}

__global__ void narrowKernel(const float *in, Operand out, long long n) {
  FSDPC_GRID_STRIDE_LOOP(i, n) { storeFloat(out, i, in[i]); }
}

__global__ void triluKernel(Operand x, Operand y, long long n, long long rows, long long cols, long long k,
                            bool upper) {
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    const long long r = (i / cols) % rows, c = i % cols;
    const bool keep = upper ? c - r >= k : c - r <= k;
    storeFloat(y, i, keep ? loadFloat(x, i) : 0.0f);
  }
}

} // namespace

Status concat(const KernelCall &call) {
  const TensorView &y = call.outputs[0];
  const int64_t axis = call.intParam(contract::Param::kAxis, 0);
  if (axis < 0 || axis >= static_cast<int64_t>(y.shape.size()))
    return FSDPC_ERROR(kInvalidArgument, "concat: axis ", axis, " is out of range");
  const size_t bytes = dtypeSize(y.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= y.shape[d];
  for (size_t d = axis + 1; d < y.shape.size(); ++d)
    inner *= y.shape[d];
  const CudaLaunch &launch = launchOf(call);
  const int64_t rowBytes = y.shape[axis] * inner * bytes;
  int64_t placed = 0;
  for (const TensorView &x : call.inputs) {
    if (x.dtype != y.dtype || x.shape.size() != y.shape.size())
      return FSDPC_ERROR(kInvalidArgument, "concat: inputs must have the output's dtype and rank");
    const int64_t chunk = x.shape[axis] * inner * bytes;
    if (chunk > 0 && outer > 0)
      FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(static_cast<uint8_t *>(y.data) + placed, rowBytes, x.data, chunk,
                                                   chunk, outer, cudaMemcpyDeviceToDevice, launch.stream));
    placed += chunk;
  }
  if (placed != rowBytes)
    return FSDPC_ERROR(kInvalidArgument, "concat: inputs do not add up to the output along axis ", axis);
  return Status::ok();
}

Status slice(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const std::vector<int64_t> &starts = call.intListParam(contract::Param::kStarts),
                             &steps = call.intListParam(contract::Param::kSteps);
  FSDPC_RETURN_IF_ERROR(checkSlice("slice", x.shape, y.shape, starts, steps));
  const SliceMap map(x.shape, starts, steps);
  const int64_t base = map.base;
  Layout<1> layout;
  if (!makeLayout(y.shape, {map.strides}, layout))
    return rankError(call, y.shape.size());
  const size_t bytes = dtypeSize(x.dtype);
  return gatherElements(call, static_cast<const uint8_t *>(x.data) + base * bytes, y.data, y.numElements(), bytes,
                        layout);
}

Status sliceGrad(const KernelCall &call) {
  const TensorView &dy = call.inputs[0], &dx = call.outputs[0];
  const std::vector<int64_t> &starts = call.intListParam(contract::Param::kStarts),
                             &steps = call.intListParam(contract::Param::kSteps);
  FSDPC_RETURN_IF_ERROR(checkSlice("slice_grad", dx.shape, dy.shape, starts, steps));
  const SliceMap map(dx.shape, starts, steps);
  const int64_t base = map.base;
  Layout<1> layout;
  if (!makeLayout(dy.shape, {map.strides}, layout))
    return rankError(call, dy.shape.size());
  const CudaLaunch &launch = launchOf(call);
  FSDPC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx.data, 0, dx.numElements() * dtypeSize(dx.dtype), launch.stream));
  const int64_t n = dy.numElements();
  if (n == 0)
    return Status::ok();
  // A slice reads distinct elements, so the scatter has no conflicts.
  launchKernel(scatterSliceKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(dy), operandOf(dx), base,
               n, layout);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status gather(const KernelCall &call) {
  const TensorView &data = call.inputs[0], &indices = call.inputs[1], &out = call.outputs[0];
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(integerGatherLayout("gather", data.shape, indices, call.intParam(contract::Param::kAxis, 0), g));
  if (out.numElements() != g.outer * g.count * g.inner || out.dtype != data.dtype)
    return FSDPC_ERROR(kInvalidArgument, "gather: output ", cpu::shapeString(out.shape), " does not fit");
  const int64_t n = out.numElements();
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const unsigned blocks = blocksFor(n, launch);
  const Operand idx = operandOf(indices);
#define FSDPC_LAUNCH_GATHER(BYTES)                                                                                     \
  launchKernel(gatherKernel<BYTES>, blocks, kThreads, 0, launch.stream, data.data, idx, out.data, g.outer, g.rows,     \
               g.count, g.inner, launch.error, launch.instruction)
  switch (dtypeSize(data.dtype)) {
  case 1:
    FSDPC_LAUNCH_GATHER(1);
    break;
  case 2:
    FSDPC_LAUNCH_GATHER(2);
    break;
  case 4:
    FSDPC_LAUNCH_GATHER(4);
    break;
  default:
    FSDPC_LAUNCH_GATHER(8);
    break;
  }
#undef FSDPC_LAUNCH_GATHER
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

uint64_t gatherGradScratch(const KernelCall &call) {
  const TensorView &dx = call.outputs[0];
  return dx.dtype == plan::F32 ? 0 : dx.numElements() * sizeof(float);
}

Status gatherGrad(const KernelCall &call) {
  const TensorView &dy = call.inputs[0], &indices = call.inputs[1], &dx = call.outputs[0];
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(
      integerGatherLayout("gather_grad", dx.shape, indices, call.intParam(contract::Param::kAxis, 0), g));
  if (dy.numElements() != g.outer * g.count * g.inner || !isFloatDtype(dx.dtype))
    return FSDPC_ERROR(kInvalidArgument, "gather_grad: gradient ", cpu::shapeString(dy.shape), " does not fit");
  const CudaLaunch &launch = launchOf(call);
  // Narrow gradients accumulate in f32 scratch and are rounded once.
  float *accumulator = dx.dtype == plan::F32 ? dx.f32() : static_cast<float *>(launch.scratch);
  if (dx.dtype != plan::F32 && launch.scratchBytes < gatherGradScratch(call))
    return FSDPC_ERROR(kInternal, "gather_grad: scratch too small");
  FSDPC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(accumulator, 0, dx.numElements() * sizeof(float), launch.stream));
  const int64_t n = dy.numElements();
  if (n > 0) {
    launchKernel(gatherGradKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(dy), operandOf(indices),
                 accumulator, g.outer, g.rows, g.count, g.inner);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  if (dx.dtype != plan::F32 && dx.numElements() > 0) {
    launchKernel(narrowKernel, blocksFor(dx.numElements(), launch), kThreads, 0, launch.stream, accumulator,
                 operandOf(dx), dx.numElements());
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  return Status::ok();
}

Status oneHot(const KernelCall &call) {
  const TensorView &labels = call.inputs[0], &out = call.outputs[0];
  if ((labels.dtype != plan::I64 && labels.dtype != plan::I32) || out.dtype != plan::F32 ||
      out.shape.size() != labels.shape.size() + 1 || out.numElements() != labels.numElements() * out.shape.back())
    return FSDPC_ERROR(kInvalidArgument, "one_hot: integer labels ", cpu::shapeString(labels.shape),
                       " and f32 output ", cpu::shapeString(out.shape), " do not match");
  const int64_t rows = labels.numElements(), depth = out.shape.back();
  if (rows * depth == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(oneHotKernel, blocksFor(rows * depth, launch), kThreads, 0, launch.stream, operandOf(labels), out.f32(),
               rows, depth, call.intParam(contract::Param::kIgnoreIndex, LLONG_MIN), launch.error, launch.instruction);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status argReduce(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  int64_t outer, size, inner;
  FSDPC_RETURN_IF_ERROR(argReduceLayout(call, outer, size, inner));
  if (outer * inner == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(argReduceKernel, blocksFor(outer * inner, launch), kThreads, 0, launch.stream, operandOf(x),
               reinterpret_cast<long long *>(out.i64()), outer, size, inner, call.instruction->op() == "arg_max",
               call.intParam(contract::Param::kSelectLastIndex, 0) != 0);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status trilu(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (x.shape.size() < 2 || x.numElements() != y.numElements())
    return FSDPC_ERROR(kInvalidArgument, "trilu: needs rank 2 or more and equal sizes");
  const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back(), n = y.numElements();
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(triluKernel, blocksFor(n, launch), kThreads, 0, launch.stream, operandOf(x), operandOf(y), n, rows, cols,
               call.intParam(contract::Param::kK, 0), call.intParam(contract::Param::kUpper, 1) != 0);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status transpose(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const std::vector<int64_t> &perm = call.intListParam(contract::Param::kPerm);
  const size_t rank = x.shape.size();
  if (perm.size() != rank || x.dtype != y.dtype)
    return FSDPC_ERROR(kInvalidArgument, "transpose: perm has ", perm.size(), " entries for rank ", rank);
  const std::vector<int64_t> inStrides = cpu::stridesOf(x.shape);
  std::vector<int64_t> permStrides(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(rank))
      return FSDPC_ERROR(kInvalidArgument, "transpose: perm entry ", perm[d], " is out of range");
    permStrides[d] = inStrides[perm[d]];
  }
  Layout<1> layout;
  if (!makeLayout(y.shape, {permStrides}, layout))
    return rankError(call, rank);
  return gatherElements(call, x.data, y.data, y.numElements(), dtypeSize(x.dtype), layout);
}

Status copy(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (x.numElements() != y.numElements() || x.dtype != y.dtype)
    return FSDPC_ERROR(kInvalidArgument, "copy: ", cpu::shapeString(x.shape), " and ", cpu::shapeString(y.shape),
                       " differ");
  if (x.numElements() == 0 || x.data == y.data)
    return Status::ok();
  FSDPC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y.data, x.data, x.numElements() * dtypeSize(x.dtype),
                                             cudaMemcpyDeviceToDevice, launchOf(call).stream));
  return Status::ok();
}

} // namespace fsdpc::runtime::cuda
