//===- Shape.cu - shape and indexing kernels ------------------------------===//
#include "../KernelChecks.h"
#include "DeviceMath.cuh"
#include "WarpMma.cuh"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <type_traits>

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
/// rules both backends share (argReduceReplaces); T is float for float
/// inputs (widened) and long long for integer ones.
template <typename T>
__global__ void argReduceKernel(Operand x, long long *out, long long outer, long long size, long long inner,
                                bool isMax, bool last) {
  auto load = [&](long long index) -> T {
    if constexpr (std::is_same_v<T, float>)
      return loadFloat(x, index);
    else
      return loadInteger(x, index);
  };
  FSDPC_GRID_STRIDE_LOOP(i, outer * inner) {
    const long long o = i / inner, k = i % inner, base = o * size * inner + k;
    long long best = 0;
    T bestValue = load(base);
    for (long long j = 1; j < size; ++j) {
      const T v = load(base + j * inner);
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

// gather_grad without atomics. The positions j are sorted by the row their
// index adds to (a stable radix sort: ascending j within a row), each row's
// run of sorted positions is found, and one block per row adds its
// positions' dy rows in ascending j, in f32, rounded once: the CPU kernel's
// additions in its order, so the same bits, every run (atomics added
// repeated tokens in any order, the one reduction of the backend whose bits
// varied run to run).

/// The key bits the sort looks at: enough for `rows` itself, the key of an
/// index out of range.
inline int gradKeyBits(int64_t rows) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= rows)
    ++bits;
  return bits;
}

/// The sort's keys and values: index j's row (negative indices counted from
/// the end), or `rows` for an index outside [-rows, rows) (gather reported
/// it; it adds nothing), and j.
__global__ void gradRowKeysKernel(Operand indices, long long count, long long rows, unsigned *keys, int *positions) {
  FSDPC_GRID_STRIDE_LOOP(j, count) {
    long long index = loadInteger(indices, j);
    const bool inRange = index >= -rows && index < rows;
    index += index < 0 ? rows : 0;
    keys[j] = static_cast<unsigned>(inRange ? index : rows);
    positions[j] = static_cast<int>(j);
  }
}

/// runStart[row] and runEnd[row]: the sorted positions [start, end) whose
/// index is `row` (both left 0 for a row no index names).
__global__ void gradRowRunsKernel(const unsigned *sortedKeys, long long count, long long rows, int *runStart,
                                  int *runEnd) {
  FSDPC_GRID_STRIDE_LOOP(p, count) {
    const unsigned row = sortedKeys[p];
    if (row == rows)
      continue;
    if (p == 0 || sortedKeys[p - 1] != row)
      runStart[row] = static_cast<int>(p);
    if (p == count - 1 || sortedKeys[p + 1] != row)
      runEnd[row] = static_cast<int>(p + 1);
  }
}

/// Gradient rows a thread loads before it adds them (in order): a frequent
/// token's row (hundreds of positions in a batch of text) would otherwise
/// wait for one load at a time.
constexpr int kGradRowsInFlight = 16;

/// dx[o, row, :] = the sum of dy[o, j, :] over the row's positions j, in
/// ascending j, in f32 from 0 (0 for a row no index names), a block a row.
__global__ void __launch_bounds__(1024)
    gatherGradRowsKernel(Operand dy, const int *sortedPositions, const int *runStart, const int *runEnd,
                         long long count, long long rows, long long outer, long long inner, Operand dx) {
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const int first = runStart[row], end = runEnd[row];
    for (long long o = 0; o < outer; ++o)
      for (long long k = threadIdx.x; k < inner; k += blockDim.x) {
        float sum = 0.0f;
        int p = first;
        for (; p + kGradRowsInFlight <= end; p += kGradRowsInFlight) {
          float values[kGradRowsInFlight];
#pragma unroll
          for (int u = 0; u < kGradRowsInFlight; ++u)
            values[u] = loadFloat(dy, (o * count + sortedPositions[p + u]) * inner + k);
#pragma unroll
          for (int u = 0; u < kGradRowsInFlight; ++u)
            sum += values[u];
        }
        for (; p < end; ++p)
          sum += loadFloat(dy, (o * count + sortedPositions[p]) * inner + k);
        storeFloat(dx, (o * rows + row) * inner + k, sum);
      }
  }
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

namespace {

/// gather_grad's scratch, 256-byte aligned parts: the keys and positions,
/// sorted and not, each row's run, and CUB's temporary storage.
struct GatherGradScratch {
  unsigned *keys, *sortedKeys;
  int *positions, *sortedPositions, *runStart, *runEnd;
  void *sortStorage;
  size_t sortBytes, totalBytes;
};

/// Where gather_grad's scratch parts go from `base` (nullptr: only the
/// sizes); fails where the indices or rows do not fit the sort's 32 bits.
Status gatherGradScratchLayout(const char *kernel, const GatherLayout &g, char *base, GatherGradScratch &s) {
  if (g.count > INT_MAX || g.rows >= static_cast<int64_t>(UINT_MAX))
    return FSDPC_ERROR(kUnimplemented, kernel,
                       ": the CUDA backend sorts up to 2^31 - 1 indices into fewer than 2^32 - 1 rows, not ", g.count,
                       " into ", g.rows);
  s.sortBytes = 0;
  FSDPC_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      nullptr, s.sortBytes, static_cast<unsigned *>(nullptr), static_cast<unsigned *>(nullptr),
      static_cast<int *>(nullptr), static_cast<int *>(nullptr), static_cast<int>(g.count), 0, gradKeyBits(g.rows)));
  size_t offset = 0;
  auto part = [&](size_t bytes) {
    char *p = base ? base + offset : nullptr;
    offset += (bytes + 255) / 256 * 256;
    return p;
  };
  const size_t countInts = static_cast<size_t>(g.count) * 4, rowInts = static_cast<size_t>(g.rows) * 4;
  s.keys = reinterpret_cast<unsigned *>(part(countInts));
  s.sortedKeys = reinterpret_cast<unsigned *>(part(countInts));
  s.positions = reinterpret_cast<int *>(part(countInts));
  s.sortedPositions = reinterpret_cast<int *>(part(countInts));
  s.runStart = reinterpret_cast<int *>(part(rowInts));
  s.runEnd = reinterpret_cast<int *>(part(rowInts));
  s.sortStorage = part(s.sortBytes);
  s.totalBytes = offset;
  return Status::ok();
}

/// Sorts the positions of `indices` by the row each names (stably: a row's
/// positions stay ascending) into the scratch `s` laid out for `g`, and
/// finds each row's run of them; what gather_grad and the experts' weight
/// gradient add in order.
Status sortPositionsByRow(const GatherLayout &g, const TensorView &indices, const GatherGradScratch &s,
                          const CudaLaunch &launch) {
  FSDPC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.runStart, 0, g.rows * sizeof(int), launch.stream));
  FSDPC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.runEnd, 0, g.rows * sizeof(int), launch.stream));
  if (g.count == 0)
    return Status::ok();
  launchKernel(gradRowKeysKernel, blocksFor(g.count, launch), kThreads, 0, launch.stream, operandOf(indices), g.count,
               g.rows, s.keys, s.positions);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  size_t sortBytes = s.sortBytes;
  FSDPC_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(s.sortStorage, sortBytes, s.keys, s.sortedKeys,
                                                             s.positions, s.sortedPositions, static_cast<int>(g.count),
                                                             0, gradKeyBits(g.rows), launch.stream));
  launchKernel(gradRowRunsKernel, blocksFor(g.count, launch), kThreads, 0, launch.stream, s.sortedKeys, g.count, g.rows,
               s.runStart, s.runEnd);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

} // namespace

uint64_t gatherGradScratch(const KernelCall &call) {
  GatherLayout g;
  GatherGradScratch s;
  if (!integerGatherLayout("gather_grad", call.outputs[0].shape, call.inputs[1],
                           call.intParam(contract::Param::kAxis, 0), g)
           .isOk() ||
      !gatherGradScratchLayout("gather_grad", g, nullptr, s).isOk())
    return 0; // the call says why
  return s.totalBytes;
}

Status gatherGrad(const KernelCall &call) {
  const TensorView &dy = call.inputs[0], &indices = call.inputs[1], &dx = call.outputs[0];
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(
      integerGatherLayout("gather_grad", dx.shape, indices, call.intParam(contract::Param::kAxis, 0), g));
  if (dy.numElements() != g.outer * g.count * g.inner || !isFloatDtype(dx.dtype))
    return FSDPC_ERROR(kInvalidArgument, "gather_grad: gradient ", cpu::shapeString(dy.shape), " does not fit");
  if (dx.numElements() == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  GatherGradScratch s;
  FSDPC_RETURN_IF_ERROR(gatherGradScratchLayout("gather_grad", g, static_cast<char *>(launch.scratch), s));
  if (launch.scratchBytes < s.totalBytes)
    return FSDPC_ERROR(kInternal, "gather_grad: scratch too small");
  FSDPC_RETURN_IF_ERROR(sortPositionsByRow(g, indices, s, launch));
  // A thread a column up to 1024 (GPT-2's 768), so that each column's
  // chain of loads runs beside the others.
  const unsigned rowThreads = static_cast<unsigned>(std::min<int64_t>(1024, (g.inner + 31) / 32 * 32));
  launchKernel(gatherGradRowsKernel, rowBlocks(g.rows, launch), rowThreads, 0, launch.stream, operandOf(dy),
               s.sortedPositions, s.runStart, s.runEnd, g.count, g.rows, g.outer, g.inner, operandOf(dx));
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

// expert_matmul as a grouped GEMM: the rows are sorted by expert with
// gather_grad's stable sort, and each block computes a 64 x 64 tile of one
// expert's rows against that expert's matrix, staged through shared
// memory 16 k at a time, so that each weight element is read once per 64
// rows of its expert instead of once per row. A row's "tokens" are its m
// sub-rows; an expert with t tokens has ceil(t / 64) tiles, and the grid
// covers every expert's tiles with an upper bound, ceil(n m / 64) +
// experts, whose surplus blocks return. Each output adds its products in
// ascending k in f32, each gradient element its expert's tokens in
// ascending row order, so every run gives the same bits. f32 operands take
// fp32 FMAs (torch's exact fp32 default), bf16 ones the tensor cores
// (below). Rows whose expert is outside [-E, E) are in no expert's run; a
// kernel of their own reports the first through the error word and zeroes
// their outputs.

namespace {

constexpr int kExpertTile = 64;  // tokens and columns of a block's tile
constexpr int kExpertDepth = 16; // k (or tokens, for the gradient) a shared-memory stage
constexpr int kExpertThreads = 256;
constexpr int kExpertPerThread = kExpertTile / 16; // a 16 x 16 thread grid, 4 x 4 outputs each

/// Element (kk, ff) of expert e's matrix as op(W[e]) reads it: [k, f].
__device__ __forceinline__ long long expertWeightIndex(const ExpertDims &s, long long e, long long kk, long long ff) {
  return s.transposed ? (e * s.f + ff) * s.k + kk : (e * s.k + kk) * s.f + ff;
}

/// lhs's (and the result's) row of expert e's token t: the sorted rows'
/// sub-rows in order.
__device__ __forceinline__ long long expertTokenRow(const int *sortedRows, const int *runStart, long long m,
                                                    long long e, long long t) {
  return static_cast<long long>(sortedRows[runStart[e] + t / m]) * m + t % m;
}

/// Which tile of which expert's tokens a block of the forward grid
/// computes: expert -1 past the last tile.
struct ExpertTile {
  long long expert, first, tokens; // the tile's first token, the expert's token count
};

/// The calling block's tile (block index x; the experts' tiles in expert
/// order), found by one thread and shared through shared memory: every
/// thread of the block must call it.
__device__ ExpertTile blockExpertTile(const int *runStart, const int *runEnd, const ExpertDims &s) {
  __shared__ ExpertTile found;
  if (threadIdx.x == 0) {
    found.expert = -1;
    long long tile = blockIdx.x;
    for (long long e = 0; e < s.experts; ++e) {
      const long long tokens = static_cast<long long>(runEnd[e] - runStart[e]) * s.m,
                      tiles = (tokens + kExpertTile - 1) / kExpertTile;
      if (tile < tiles) {
        found = {e, tile * kExpertTile, tokens};
        break;
      }
      tile -= tiles;
    }
  }
  __syncthreads();
  return found;
}

/// Rows whose expert is outside [-E, E): the first reported, their outputs 0.
__global__ void expertRowCheckKernel(Operand experts, Operand out, ExpertDims s, DeviceError *error, int instruction) {
  FSDPC_GRID_STRIDE_LOOP(r, s.n) {
    const long long e = loadInteger(experts, r);
    if (e >= -s.experts && e < s.experts)
      continue;
    reportDataError(error, instruction, e, r, s.experts);
    for (long long i = r * s.m * s.f; i < (r + 1) * s.m * s.f; ++i)
      storeFloat(out, i, 0.0f);
  }
}

__global__ void __launch_bounds__(kExpertThreads)
    expertMatmulKernel(Operand lhs, Operand weights, Operand out, const int *sortedRows, const int *runStart,
                       const int *runEnd, ExpertDims s) {
  __shared__ float lhsTile[kExpertDepth][kExpertTile + 1];    // [kk][token]
  __shared__ float weightTile[kExpertDepth][kExpertTile + 1]; // [kk][column]
  const ExpertTile tile = blockExpertTile(runStart, runEnd, s);
  if (tile.expert < 0)
    return;
  const long long e = tile.expert, first = tile.first, tokens = tile.tokens, column0 = blockIdx.y * kExpertTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;

  // The lhs rows this thread stages (token threadIdx / 16 + 16 q, k
  // threadIdx % 16: 16 threads read 16 consecutive k of a row); -1 past
  // the expert's last token.
  long long stagedRow[kExpertPerThread];
#pragma unroll
  for (int q = 0; q < kExpertPerThread; ++q) {
    const long long t = first + threadIdx.x / 16 + 16 * q;
    stagedRow[q] = t < tokens ? expertTokenRow(sortedRows, runStart, s.m, e, t) : -1;
  }
  float acc[kExpertPerThread][kExpertPerThread] = {};
  for (long long k0 = 0; k0 < s.k; k0 += kExpertDepth) {
#pragma unroll
    for (int q = 0; q < kExpertPerThread; ++q) {
      const int kk = threadIdx.x % 16;
      lhsTile[kk][threadIdx.x / 16 + 16 * q] =
          stagedRow[q] >= 0 && k0 + kk < s.k ? loadFloat(lhs, stagedRow[q] * s.k + k0 + kk) : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < kExpertPerThread; ++q) {
      // Consecutive threads read consecutive addresses in either layout.
      const int id = threadIdx.x + kExpertThreads * q;
      const int kk = s.transposed ? id % kExpertDepth : id / kExpertTile,
                c = s.transposed ? id / kExpertDepth : id % kExpertTile;
      weightTile[kk][c] =
          k0 + kk < s.k && column0 + c < s.f ? loadFloat(weights, expertWeightIndex(s, e, k0 + kk, column0 + c)) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < kExpertDepth && k0 + kk < s.k; ++kk)
#pragma unroll
      for (int i = 0; i < kExpertPerThread; ++i)
#pragma unroll
        for (int j = 0; j < kExpertPerThread; ++j)
          acc[i][j] = fmaf(lhsTile[kk][ty + 16 * i], weightTile[kk][tx + 16 * j], acc[i][j]);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kExpertPerThread; ++i) {
    const long long t = first + ty + 16 * i;
    if (t >= tokens)
      continue;
    const long long row = expertTokenRow(sortedRows, runStart, s.m, e, t);
#pragma unroll
    for (int j = 0; j < kExpertPerThread; ++j)
      if (column0 + tx + 16 * j < s.f)
        storeFloat(out, row * s.f + column0 + tx + 16 * j, acc[i][j]);
  }
}

/// dW[e] as op(W[e]) reads it, a 64 x 64 tile of (kk, ff) a block: the
/// sum over e's tokens, 16 at a time in ascending order, of
/// lhs[token, kk] dresult[token, ff].
__global__ void __launch_bounds__(kExpertThreads)
    expertWeightGradKernel(Operand lhs, Operand dresult, const int *sortedRows, const int *runStart, const int *runEnd,
                           Operand dw, ExpertDims s) {
  __shared__ float lhsTile[kExpertDepth][kExpertTile + 1];  // [token][kk]
  __shared__ float gradTile[kExpertDepth][kExpertTile + 1]; // [token][ff]
  const long long e = blockIdx.z, column0 = blockIdx.x * kExpertTile, k0 = blockIdx.y * kExpertTile;
  const long long tokens = static_cast<long long>(runEnd[e] - runStart[e]) * s.m;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[kExpertPerThread][kExpertPerThread] = {};
  for (long long t0 = 0; t0 < tokens; t0 += kExpertDepth) {
#pragma unroll
    for (int q = 0; q < kExpertPerThread; ++q) {
      // Token id / 64, column id % 64: consecutive threads read
      // consecutive elements of a row of lhs and of dresult.
      const int id = threadIdx.x + kExpertThreads * q, t = id / kExpertTile, c = id % kExpertTile;
      const long long row = t0 + t < tokens ? expertTokenRow(sortedRows, runStart, s.m, e, t0 + t) : -1;
      lhsTile[t][c] = row >= 0 && k0 + c < s.k ? loadFloat(lhs, row * s.k + k0 + c) : 0.0f;
      gradTile[t][c] = row >= 0 && column0 + c < s.f ? loadFloat(dresult, row * s.f + column0 + c) : 0.0f;
    }
    __syncthreads();
    for (int t = 0; t < kExpertDepth && t0 + t < tokens; ++t)
#pragma unroll
      for (int i = 0; i < kExpertPerThread; ++i)
#pragma unroll
        for (int j = 0; j < kExpertPerThread; ++j)
          acc[i][j] = fmaf(lhsTile[t][ty + 16 * i], gradTile[t][tx + 16 * j], acc[i][j]);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kExpertPerThread; ++i)
#pragma unroll
    for (int j = 0; j < kExpertPerThread; ++j) {
      const long long kk = k0 + ty + 16 * i, ff = column0 + tx + 16 * j;
      if (kk < s.k && ff < s.f)
        storeFloat(dw, expertWeightIndex(s, e, kk, ff), acc[i][j]);
    }
}

// The same grouped GEMMs on the tensor cores where the operands are bf16
// (mixed precision): mma.sync m16n8k16 with f32 accumulators (WarpMma.cuh),
// as cuBLASLt runs the plan's other bf16 GEMMs. A block of 4 warps has a
// 64 x 64 tile, each warp 16 rows of it by 64 columns (8 accumulator
// tiles); 32 of the reduced dimension (k, or tokens for the gradient) go
// through shared memory at a time, 16 bytes a load where the rows allow
// it. The products of a run add in a fixed order, so the same bits every
// run, though not the CPU kernel's (bf16 tolerance).

constexpr int kExpertMmaThreads = 128;
constexpr int kExpertMmaDepth = 32;
constexpr int kExpertMmaPad = 8; // a row's extra bf16s: rows 16 bytes apart in different banks

/// Eight bf16s of a row from `source` into shared memory: those past
/// `available` (a row's end, or none) are 0, and one 16-byte load where the
/// row allows it.
__device__ __forceinline__ void stageEight(__nv_bfloat16 *destination, const __nv_bfloat16 *source, long long available,
                                           bool vectors) {
  if (vectors && available >= 8) {
    *reinterpret_cast<uint4 *>(destination) = *reinterpret_cast<const uint4 *>(source);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    destination[i] = i < available ? source[i] : __float2bfloat16_rn(0.0f);
}

/// acc[n] (n < 8, 8 columns each) += a times the B fragments of columns
/// [8 n, 8 n + 8), which loadB(b, n0) gives 16 columns from n0 at a time.
template <typename LoadB>
__device__ __forceinline__ void mmaAcross64Columns(float (&acc)[8][4], const uint32_t (&a)[4], LoadB loadB) {
#pragma unroll
  for (int pair = 0; pair < 4; ++pair) {
    uint32_t b[2][2];
    loadB(b, pair * 16);
    mmaBf16(acc[2 * pair], a, b[0]);
    mmaBf16(acc[2 * pair + 1], a, b[1]);
  }
}

/// Whether every row of a [rows, width] bf16 operand starts 16 bytes aligned.
bool rowsOf16Bytes(const TensorView &v, long long width) { return width % kVectorElements == 0 && vectorAligned({&v}); }

__global__ void __launch_bounds__(kExpertMmaThreads)
    expertMatmulMmaKernel(const __nv_bfloat16 *lhs, const __nv_bfloat16 *weights, Operand out, const int *sortedRows,
                          const int *runStart, const int *runEnd, ExpertDims s, bool lhsVectors, bool weightVectors) {
  alignas(16) __shared__ __nv_bfloat16 lhsTile[kExpertTile][kExpertMmaDepth + kExpertMmaPad];
  // [k][column], or [column][k] for transposed weights.
  alignas(16) __shared__ __nv_bfloat16 weightTile[kExpertTile * (kExpertMmaDepth + kExpertMmaPad)];
  const ExpertTile tile = blockExpertTile(runStart, runEnd, s);
  if (tile.expert < 0)
    return;
  const long long e = tile.expert, first = tile.first, tokens = tile.tokens, column0 = blockIdx.y * kExpertTile;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int kRowChunks = kExpertMmaDepth / 8; // 16-byte chunks of a staged lhs row
  constexpr int kWeightStride = kExpertTile + kExpertMmaPad, kWeightStrideT = kExpertMmaDepth + kExpertMmaPad;
  // The two lhs chunks this thread stages: row (id / 4), k chunk id % 4.
  long long stagedRow[2];
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const long long t = first + (threadIdx.x + kExpertMmaThreads * q) / kRowChunks;
    stagedRow[q] = t < tokens ? expertTokenRow(sortedRows, runStart, s.m, e, t) : -1;
  }
  float acc[8][4] = {};
  for (long long k0 = 0; k0 < s.k; k0 += kExpertMmaDepth) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int id = threadIdx.x + kExpertMmaThreads * q, row = id / kRowChunks, kk = id % kRowChunks * 8;
      const long long available = stagedRow[q] >= 0 ? s.k - (k0 + kk) : 0;
      stageEight(&lhsTile[row][kk], lhs + stagedRow[q] * s.k + k0 + kk, available, lhsVectors);
    }
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int id = threadIdx.x + kExpertMmaThreads * q;
      if (s.transposed) { // [column][k]: a column's 32 k are 4 chunks
        const int c = id / kRowChunks, kk = id % kRowChunks * 8;
        const long long available = column0 + c < s.f ? s.k - (k0 + kk) : 0;
        stageEight(&weightTile[c * kWeightStrideT + kk], weights + (e * s.f + column0 + c) * s.k + k0 + kk, available,
                   weightVectors);
      } else { // [k][column]: a k's 64 columns are 8 chunks
        const int kk = id / 8, c = id % 8 * 8;
        const long long available = k0 + kk < s.k ? s.f - (column0 + c) : 0;
        stageEight(&weightTile[kk * kWeightStride + c], weights + (e * s.k + k0 + kk) * s.f + column0 + c, available,
                   weightVectors);
      }
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kExpertMmaDepth; ks += 16) {
      uint32_t a[4];
      loadA<kExpertMmaDepth + kExpertMmaPad>(a, &lhsTile[0][0], warp * 16, ks, lane);
      mmaAcross64Columns(acc, a, [&](uint32_t(&b)[2][2], int n0) {
        if (s.transposed)
          loadBOfRows<kWeightStrideT>(b, weightTile, n0, ks, lane);
        else
          loadBAsStored<kWeightStride>(b, weightTile, ks, n0, lane);
      });
    }
    __syncthreads();
  }
  // Accumulator tile n: c0, c1 at row g, columns 2t, 2t + 1; c2, c3 at row g + 8.
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const long long t = first + warp * 16 + g + 8 * half;
    if (t >= tokens)
      continue;
    const long long row = expertTokenRow(sortedRows, runStart, s.m, e, t);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const long long column = column0 + n * 8 + t2 + c;
        if (column < s.f)
          storeFloat(out, row * s.f + column, acc[n][2 * half + c]);
      }
  }
}

/// dW[e] on the tensor cores: A = lhs^T (k rows by tokens), B = dresult
/// (tokens by f), both staged as token rows and read transposed where the
/// fragment needs it.
__global__ void __launch_bounds__(kExpertMmaThreads)
    expertWeightGradMmaKernel(const __nv_bfloat16 *lhs, const __nv_bfloat16 *dresult, const int *sortedRows,
                              const int *runStart, const int *runEnd, Operand dw, ExpertDims s, bool lhsVectors,
                              bool gradVectors) {
  alignas(16) __shared__ __nv_bfloat16 lhsTile[kExpertMmaDepth][kExpertTile + kExpertMmaPad];  // [token][k]
  alignas(16) __shared__ __nv_bfloat16 gradTile[kExpertMmaDepth][kExpertTile + kExpertMmaPad]; // [token][f]
  const long long e = blockIdx.z, column0 = blockIdx.x * kExpertTile, k0 = blockIdx.y * kExpertTile;
  const long long tokens = static_cast<long long>(runEnd[e] - runStart[e]) * s.m;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float acc[8][4] = {};
  for (long long t0 = 0; t0 < tokens; t0 += kExpertMmaDepth) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      // Token id / 8, chunk id % 8 of its 64 k (and of its 64 f).
      const int id = threadIdx.x + kExpertMmaThreads * q, t = id / 8, c = id % 8 * 8;
      const long long row = t0 + t < tokens ? expertTokenRow(sortedRows, runStart, s.m, e, t0 + t) : -1;
      stageEight(&lhsTile[t][c], lhs + row * s.k + k0 + c, row >= 0 ? s.k - (k0 + c) : 0, lhsVectors);
      stageEight(&gradTile[t][c], dresult + row * s.f + column0 + c, row >= 0 ? s.f - (column0 + c) : 0, gradVectors);
    }
    __syncthreads();
#pragma unroll
    for (int ts = 0; ts < kExpertMmaDepth; ts += 16) {
      uint32_t a[4]; // A[k][token] = lhsTile[token][k]
      loadAOfColumns<kExpertTile + kExpertMmaPad>(a, &lhsTile[0][0], warp * 16, ts, lane);
      mmaAcross64Columns(acc, a, [&](uint32_t(&b)[2][2], int n0) {
        loadBAsStored<kExpertTile + kExpertMmaPad>(b, &gradTile[0][0], ts, n0, lane);
      });
    }
    __syncthreads();
  }
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const long long kk = k0 + warp * 16 + g + 8 * half;
    if (kk >= s.k)
      continue;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const long long ff = column0 + n * 8 + t2 + c;
        if (ff < s.f)
          storeFloat(dw, expertWeightIndex(s, e, kk, ff), acc[n][2 * half + c]);
      }
  }
}

/// The rows sorted by expert: gather_grad's layout of `n` indices into
/// `experts` rows.
GatherLayout expertRows(const ExpertDims &s) {
  GatherLayout g;
  g.rows = s.experts;
  g.count = s.n;
  return g;
}

uint64_t expertSortScratch(const KernelCall &call, const TensorView &weights) {
  ExpertDims s;
  GatherGradScratch scratch;
  if (!expertDims(call, call.inputs[0], weights, s).isOk() ||
      !gatherGradScratchLayout(call.instruction->op().c_str(), expertRows(s), nullptr, scratch).isOk())
    return 0; // the call says why
  return scratch.totalBytes;
}

/// Sorts the rows by expert into the call's scratch.
Status sortRowsByExpert(const KernelCall &call, const ExpertDims &s, GatherGradScratch &scratch) {
  const CudaLaunch &launch = launchOf(call);
  const GatherLayout g = expertRows(s);
  FSDPC_RETURN_IF_ERROR(
      gatherGradScratchLayout(call.instruction->op().c_str(), g, static_cast<char *>(launch.scratch), scratch));
  if (launch.scratchBytes < scratch.totalBytes)
    return FSDPC_ERROR(kInternal, call.instruction->op(), ": scratch too small");
  return sortPositionsByRow(g, call.inputs[2], scratch, launch);
}

unsigned expertTiles(long long extent) { return static_cast<unsigned>((extent + kExpertTile - 1) / kExpertTile); }

} // namespace

uint64_t expertMatmulScratch(const KernelCall &call) { return expertSortScratch(call, call.inputs[1]); }

uint64_t expertMatmulWeightGradScratch(const KernelCall &call) { return expertSortScratch(call, call.outputs[0]); }

Status expertMatmul(const KernelCall &call) {
  const TensorView &lhs = call.inputs[0], &weights = call.inputs[1], &out = call.outputs[0];
  ExpertDims s;
  FSDPC_RETURN_IF_ERROR(expertDims(call, lhs, weights, s));
  if (out.numElements() == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  GatherGradScratch scratch;
  FSDPC_RETURN_IF_ERROR(sortRowsByExpert(call, s, scratch));
  launchKernel(expertRowCheckKernel, blocksFor(s.n, launch), kThreads, 0, launch.stream, operandOf(call.inputs[2]),
               operandOf(out), s, launch.error, launch.instruction);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  const dim3 grid(expertTiles(s.n * s.m) + static_cast<unsigned>(s.experts), expertTiles(s.f));
  if (lhs.dtype == plan::BF16 && weights.dtype == plan::BF16)
    launchKernel(expertMatmulMmaKernel, grid, kExpertMmaThreads, 0, launch.stream,
                 static_cast<const __nv_bfloat16 *>(lhs.data), static_cast<const __nv_bfloat16 *>(weights.data),
                 operandOf(out), scratch.sortedPositions, scratch.runStart, scratch.runEnd, s, rowsOf16Bytes(lhs, s.k),
                 rowsOf16Bytes(weights, s.transposed ? s.k : s.f));
  else
    launchKernel(expertMatmulKernel, grid, kExpertThreads, 0, launch.stream, operandOf(lhs), operandOf(weights),
                 operandOf(out), scratch.sortedPositions, scratch.runStart, scratch.runEnd, s);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status expertMatmulWeightGrad(const KernelCall &call) {
  const TensorView &lhs = call.inputs[0], &dresult = call.inputs[1], &dw = call.outputs[0];
  ExpertDims s;
  FSDPC_RETURN_IF_ERROR(expertDims(call, lhs, dw, s));
  if (dw.numElements() == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  GatherGradScratch scratch;
  FSDPC_RETURN_IF_ERROR(sortRowsByExpert(call, s, scratch));
  const dim3 grid(expertTiles(s.f), expertTiles(s.k), static_cast<unsigned>(s.experts));
  if (lhs.dtype == plan::BF16 && dresult.dtype == plan::BF16)
    launchKernel(expertWeightGradMmaKernel, grid, kExpertMmaThreads, 0, launch.stream,
                 static_cast<const __nv_bfloat16 *>(lhs.data), static_cast<const __nv_bfloat16 *>(dresult.data),
                 scratch.sortedPositions, scratch.runStart, scratch.runEnd, operandOf(dw), s, rowsOf16Bytes(lhs, s.k),
                 rowsOf16Bytes(dresult, s.f));
  else
    launchKernel(expertWeightGradKernel, grid, kExpertThreads, 0, launch.stream, operandOf(lhs), operandOf(dresult),
                 scratch.sortedPositions, scratch.runStart, scratch.runEnd, operandOf(dw), s);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
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
  launchKernel(isFloatDtype(x.dtype) ? argReduceKernel<float> : argReduceKernel<long long>,
               blocksFor(outer * inner, launch), kThreads, 0, launch.stream, operandOf(x),
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
