//===- Reductions.cu - sums over axes, broadcasts -------------------------===//
//
// reduce_sum and sum_to (the gradient of a broadcast) are one reduction:
// the input's dimensions split into kept ones (the output's) and reduced
// ones. Sums run in double and in a fixed order, so a step gives the same
// bits every run:
// - reduced dimensions leading and kept ones trailing (a bias gradient,
//   [rows, cols] -> [cols]): column sums over chunks of rows into scratch,
//   then the chunks in order;
// - otherwise, one block per output element when there is much to sum, or
//   one thread per output element when there is little.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"

namespace fsdpc::runtime::cuda {

namespace {

/// How a reduction maps the input onto the output.
struct ReductionPlan {
  std::vector<int64_t> keptShape, keptStrides, reducedShape, reducedStrides;
  int64_t outCount = 1, reducedCount = 1;
  bool columns = false; // the input is [reducedCount, outCount], row-major
  int64_t chunks = 1, rowsPerChunk = 1;
};

constexpr int64_t kColumnTile = 32, kRowLanes = 8, kMaxChunks = 256, kMinRowsPerChunk = 64;

/// `reduced[d]`: whether input dimension d is summed over.
ReductionPlan planReduction(const std::vector<int64_t> &shape, const std::vector<bool> &reduced) {
  ReductionPlan p;
  const std::vector<int64_t> strides = cpu::stridesOf(shape);
  bool keptSeen = false;
  p.columns = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue; // neither kept nor reduced: it moves nothing
    if (reduced[d]) {
      p.reducedShape.push_back(shape[d]);
      p.reducedStrides.push_back(strides[d]);
      p.columns = p.columns && !keptSeen;
    } else {
      p.keptShape.push_back(shape[d]);
      p.keptStrides.push_back(strides[d]);
      keptSeen = true;
    }
  }
  p.outCount = elementCount(p.keptShape);
  p.reducedCount = elementCount(p.reducedShape);
  p.columns = p.columns && !p.reducedShape.empty() && !p.keptShape.empty();
  if (p.columns) {
    p.chunks = std::min(kMaxChunks, std::max<int64_t>(1, p.reducedCount / kMinRowsPerChunk));
    p.rowsPerChunk = (p.reducedCount + p.chunks - 1) / p.chunks;
  }
  return p;
}

uint64_t scratchOf(const ReductionPlan &p) {
  return p.columns ? static_cast<uint64_t>(p.chunks * p.outCount) * sizeof(double) : 0;
}

/// partial[chunk][col] = the sum of x[rows of the chunk][col].
__global__ void columnPartialsKernel(Operand x, long long rows, long long cols, long long rowsPerChunk,
                                     double *partial) {
  __shared__ double lanes[kRowLanes][kColumnTile];
  const long long col = static_cast<long long>(blockIdx.x) * kColumnTile + threadIdx.x;
  const long long begin = blockIdx.y * rowsPerChunk, end = min(rows, begin + rowsPerChunk);
  double sum = 0;
  if (col < cols)
    for (long long r = begin + threadIdx.y; r < end; r += kRowLanes)
      sum += loadFloat(x, r * cols + col);
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    double total = 0;
    for (int lane = 0; lane < kRowLanes; ++lane)
      total += lanes[lane][threadIdx.x];
    partial[blockIdx.y * cols + col] = total;
  }
}

/// Lanes that share one column's chunks in sumChunksKernel.
constexpr int kSumLanes = 32;

/// out[col]: the chunks' partial sums added, kColumnTile columns a block;
/// lane l of a column (blockDim.y lanes: the chunks, up to kSumLanes) adds
/// chunks l, l + blockDim.y, ... in order, then one thread adds the lanes
/// in lane order (the same bits every run). blockIdx.y picks one of two
/// sets of chunks, chunks x cols apart, and its output (a norm's scale and
/// bias gradients). One thread per column adding every chunk in turn waits
/// on each load: the layer norm's gradient took 0.15 ms per call that way
/// on the H200 for GPT-2's 16384 x 768 rows. With 32 lanes for a single
/// chunk (GPT-2's position-embedding gradient, 16 rows) sum_to took 0.12
/// ms instead of 0.05 there: a block has as many lanes as chunks.
__global__ void __launch_bounds__(kColumnTile * kSumLanes)
    sumChunksKernel(const double *partial, long long chunks, long long cols, Operand first, Operand second) {
  __shared__ double lanes[kSumLanes][kColumnTile + 1];
  const double *set = partial + blockIdx.y * chunks * cols;
  const long long col = static_cast<long long>(blockIdx.x) * kColumnTile + threadIdx.x;
  double sum = 0;
  if (col < cols)
    for (long long c = threadIdx.y; c < chunks; c += blockDim.y)
      sum += set[c * cols + col];
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols)
    return;
  double total = 0;
  for (unsigned lane = 0; lane < blockDim.y; ++lane)
    total += lanes[lane][threadIdx.x];
  storeFloat(blockIdx.y == 0 ? first : second, col, static_cast<float>(total));
}

} // namespace

Status sumChunks(const CudaLaunch &launch, const double *partial, long long chunks, long long cols, Operand first,
                 Operand second) {
  const dim3 grid(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile), second.data ? 2 : 1);
  launchKernel(sumChunksKernel, grid, dim3(kColumnTile, static_cast<unsigned>(std::min<long long>(chunks, kSumLanes))),
               0, launch.stream, partial, chunks, cols, first, second);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

namespace {

__global__ void reducePerBlockKernel(Operand x, Operand out, long long outCount, long long reducedCount,
                                     Layout<1> kept, Layout<1> reducedLayout) {
  __shared__ double shared[32];
  for (long long o = blockIdx.x; o < outCount; o += gridDim.x) {
    long long base[1];
    kept.offsets(o, base);
    double sum = 0;
    for (long long r = threadIdx.x; r < reducedCount; r += blockDim.x) {
      long long offset[1];
      reducedLayout.offsets(r, offset);
      sum += loadFloat(x, base[0] + offset[0]);
    }
    const double total = blockSum(sum, shared);
    if (threadIdx.x == 0)
      storeFloat(out, o, static_cast<float>(total));
  }
}

__global__ void reducePerThreadKernel(Operand x, Operand out, long long outCount, long long reducedCount,
                                      Layout<1> kept, Layout<1> reducedLayout) {
  FSDPC_GRID_STRIDE_LOOP(o, outCount) {
    long long base[1];
    kept.offsets(o, base);
    double sum = 0;
    for (long long r = 0; r < reducedCount; ++r) {
      long long offset[1];
      reducedLayout.offsets(r, offset);
      sum += loadFloat(x, base[0] + offset[0]);
    }
    storeFloat(out, o, static_cast<float>(sum));
  }
}

Status runReduction(const KernelCall &call, const TensorView &x, const TensorView &y, const ReductionPlan &p) {
  const CudaLaunch &launch = launchOf(call);
  if (p.outCount != y.numElements())
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": output ", cpu::shapeString(y.shape),
                       " does not fit input ", cpu::shapeString(x.shape));
  if (p.outCount == 0)
    return Status::ok();
  if (x.numElements() == 0) {
    FSDPC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y.data, 0, y.numElements() * dtypeSize(y.dtype), launch.stream));
    return Status::ok();
  }
  if (p.columns) {
    if (launch.scratchBytes < scratchOf(p))
      return FSDPC_ERROR(kInternal, call.instruction->op(), ": scratch too small");
    auto *partial = static_cast<double *>(launch.scratch);
    const dim3 grid(static_cast<unsigned>((p.outCount + kColumnTile - 1) / kColumnTile), static_cast<unsigned>(p.chunks));
    launchKernel(columnPartialsKernel, grid, dim3(kColumnTile, kRowLanes), 0, launch.stream, operandOf(x),
                 p.reducedCount, p.outCount, p.rowsPerChunk, partial);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    return sumChunks(launch, partial, p.chunks, p.outCount, operandOf(y), Operand{});
  }
  Layout<1> kept, reducedLayout;
  if (!makeLayout(p.keptShape, {p.keptStrides}, kept) || !makeLayout(p.reducedShape, {p.reducedStrides}, reducedLayout))
    return rankError(call, x.shape.size());
  if (p.reducedCount >= kThreads) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.outCount, 1 << 20));
    launchKernel(reducePerBlockKernel, blocks, kThreads, 0, launch.stream, operandOf(x), operandOf(y), p.outCount,
                 p.reducedCount, kept, reducedLayout);
  } else {
    launchKernel(reducePerThreadKernel, blocksFor(p.outCount, launch), kThreads, 0, launch.stream, operandOf(x),
                 operandOf(y), p.outCount, p.reducedCount, kept, reducedLayout);
  }
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

ReductionPlan reduceSumPlan(const KernelCall &call) {
  const TensorView &x = call.inputs[0];
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t axis : call.intListParam(contract::Param::kAxes))
    if (axis >= 0 && axis < static_cast<int64_t>(reduced.size()))
      reduced[axis] = true;
  return planReduction(x.shape, reduced);
}

/// sum_to: the dimensions where the output broadcasts are summed.
ReductionPlan sumToPlan(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const std::vector<int64_t> yStrides = cpu::broadcastStrides(y.shape, x.shape);
  std::vector<bool> reduced(x.shape.size(), false);
  for (size_t d = 0; d < x.shape.size(); ++d)
    reduced[d] = yStrides[d] == 0;
  return planReduction(x.shape, reduced);
}

template <int Bytes> struct Word;
template <> struct Word<1> { using type = unsigned char; };
template <> struct Word<2> { using type = unsigned short; };
template <> struct Word<4> { using type = unsigned int; };
template <> struct Word<8> { using type = unsigned long long; };

template <int Bytes> __global__ void broadcastKernel(const void *in, void *out, long long n, Layout<1> layout) {
  using T = typename Word<Bytes>::type;
  FSDPC_GRID_STRIDE_LOOP(i, n) {
    long long offset[1];
    layout.offsets(i, offset);
    static_cast<T *>(out)[i] = static_cast<const T *>(in)[offset[0]];
  }
}

} // namespace

/// Copies element i of `out` from `in` at `layout`'s offset, for elements
/// of any size (broadcast_to, slice and transpose share it).
Status gatherElements(const KernelCall &call, const void *in, void *out, int64_t n, size_t bytes,
                      const Layout<1> &layout) {
  if (n == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const unsigned blocks = blocksFor(n, launch);
  switch (bytes) {
  case 1:
    launchKernel(broadcastKernel<1>, blocks, kThreads, 0, launch.stream, in, out, n, layout);
    break;
  case 2:
    launchKernel(broadcastKernel<2>, blocks, kThreads, 0, launch.stream, in, out, n, layout);
    break;
  case 4:
    launchKernel(broadcastKernel<4>, blocks, kThreads, 0, launch.stream, in, out, n, layout);
    break;
  case 8:
    launchKernel(broadcastKernel<8>, blocks, kThreads, 0, launch.stream, in, out, n, layout);
    break;
  default:
    return FSDPC_ERROR(kInternal, call.instruction->op(), ": elements of ", bytes, " bytes");
  }
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status reduceSum(const KernelCall &call) {
  return runReduction(call, call.inputs[0], call.outputs[0], reduceSumPlan(call));
}
uint64_t reduceSumScratch(const KernelCall &call) { return scratchOf(reduceSumPlan(call)); }

Status sumTo(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (!cpu::broadcastsTo(y.shape, x.shape))
    return FSDPC_ERROR(kInvalidArgument, "sum_to: ", cpu::shapeString(y.shape), " does not broadcast to ",
                       cpu::shapeString(x.shape));
  return runReduction(call, x, y, sumToPlan(call));
}
uint64_t sumToScratch(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  return cpu::broadcastsTo(y.shape, x.shape) ? scratchOf(sumToPlan(call)) : 0;
}

Status sumRows(const KernelCall &call, const TensorView &x, const TensorView &out) {
  if (x.shape.size() != 2)
    return FSDPC_ERROR(kInternal, call.instruction->op(), ": sumRows of a rank-", x.shape.size(), " tensor");
  return runReduction(call, x, out, planReduction(x.shape, {true, false}));
}
uint64_t sumRowsScratch(int64_t rows, int64_t cols) { return scratchOf(planReduction({rows, cols}, {true, false})); }

Status broadcastTo(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (!cpu::broadcastsTo(x.shape, y.shape) || x.dtype != y.dtype)
    return FSDPC_ERROR(kInvalidArgument, "broadcast_to: ", cpu::shapeString(x.shape), " does not broadcast to ",
                       cpu::shapeString(y.shape));
  Layout<1> layout;
  if (!makeLayout(y.shape, {cpu::broadcastStrides(x.shape, y.shape)}, layout))
    return rankError(call, y.shape.size());
  return gatherElements(call, x.data, y.data, y.numElements(), dtypeSize(x.dtype), layout);
}

} // namespace fsdpc::runtime::cuda
