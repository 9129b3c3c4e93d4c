//===- Shape.cu - shape and indexing kernels ------------------------------===//
#include "DeviceMath.cuh"
#include "../KernelChecks.h"

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
Status gatherGradScratchLayout(const GatherLayout &g, char *base, GatherGradScratch &s) {
  if (g.count > INT_MAX || g.rows >= static_cast<int64_t>(UINT_MAX))
    return FSDPC_ERROR(kUnimplemented, "gather_grad: the CUDA backend sorts up to 2^31 - 1 indices into fewer than "
                                       "2^32 - 1 rows, not ",
                       g.count, " into ", g.rows);
  s.sortBytes = 0;
  FSDPC_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(nullptr, s.sortBytes, static_cast<unsigned *>(nullptr),
                                                             static_cast<unsigned *>(nullptr),
                                                             static_cast<int *>(nullptr), static_cast<int *>(nullptr),
                                                             static_cast<int>(g.count), 0, gradKeyBits(g.rows)));
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
      !gatherGradScratchLayout(g, nullptr, s).isOk())
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
  FSDPC_RETURN_IF_ERROR(gatherGradScratchLayout(g, static_cast<char *>(launch.scratch), s));
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

// expert_matmul: a thread an output element, its row's expert's column
// read in place (each weight matrix once per row that names it, as the
// batched_mm export's gathered copies were read, without the copies), the
// products added in k order in f32. The weights' gradient groups the rows
// by expert with gather_grad's stable sort: a thread an element of dW[e]
// adds its expert's rows' products in ascending row order, the CPU
// kernel's order, so every run gives the same bits.

namespace {

struct ExpertShape {
  long long n, m, k, f, experts;
  bool transposed;
};

/// lhs [n, m, k], weights [experts, k, f] ([experts, f, k] transposed),
/// integer experts [n]; `weights` is the gradient's output for
/// expert_matmul_weight_grad. The kernel contract's rule checked the
/// shapes when the plan loaded.
Status expertShape(const KernelCall &call, const TensorView &lhs, const TensorView &weights, ExpertShape &s) {
  const TensorView &experts = call.inputs[2];
  if (lhs.shape.size() != 3 || weights.shape.size() != 3 || (experts.dtype != plan::I64 && experts.dtype != plan::I32))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(),
                       ": lhs [N, M, K], weights [E, K, F] and integer "
                       "experts expected");
  s.transposed = call.intParam(contract::Param::kTransposeWeights, 0) != 0;
  s.n = lhs.shape[0], s.m = lhs.shape[1], s.k = lhs.shape[2], s.experts = weights.shape[0];
  s.f = s.transposed ? weights.shape[1] : weights.shape[2];
  return Status::ok();
}

/// Element (a, b) of expert e's matrix as op(W[e]) reads it: [k, f].
__device__ __forceinline__ long long expertWeightIndex(const ExpertShape &s, long long e, long long kk, long long ff) {
  return s.transposed ? (e * s.f + ff) * s.k + kk : (e * s.k + kk) * s.f + ff;
}

__global__ void expertMatmulKernel(Operand lhs, Operand weights, Operand experts, Operand out, ExpertShape s,
                                   DeviceError *error, int instruction) {
  FSDPC_GRID_STRIDE_LOOP(i, s.n * s.m * s.f) {
    const long long ff = i % s.f, row = i / s.f, r = row / s.m;
    long long e = loadInteger(experts, r);
    if (e < -s.experts || e >= s.experts) {
      if (i % (s.m * s.f) == 0)
        reportDataError(error, instruction, e, r, s.experts);
      storeFloat(out, i, 0.0f);
      continue;
    }
    e += e < 0 ? s.experts : 0;
    float sum = 0.0f;
    for (long long kk = 0; kk < s.k; ++kk)
      sum += loadFloat(lhs, row * s.k + kk) * loadFloat(weights, expertWeightIndex(s, e, kk, ff));
    storeFloat(out, i, sum);
  }
}

/// dW[e] as op(W[e]) reads it, element (kk, ff): the sum over e's sorted
/// rows of lhs[r, :, kk] . dresult[r, :, ff].
__global__ void expertWeightGradKernel(Operand lhs, Operand dresult, const int *sortedRows, const int *runStart,
                                       const int *runEnd, Operand dw, ExpertShape s) {
  FSDPC_GRID_STRIDE_LOOP(i, s.experts * s.k * s.f) {
    const long long e = i / (s.k * s.f), kk = (i / s.f) % s.k, ff = i % s.f;
    float sum = 0.0f;
    for (int p = runStart[e]; p < runEnd[e]; ++p) {
      const long long r = sortedRows[p];
      for (long long mi = 0; mi < s.m; ++mi)
        sum += loadFloat(lhs, (r * s.m + mi) * s.k + kk) * loadFloat(dresult, (r * s.m + mi) * s.f + ff);
    }
    storeFloat(dw, expertWeightIndex(s, e, kk, ff), sum);
  }
}

/// The rows sorted by expert: gather_grad's layout of `n` indices into
/// `experts` rows.
GatherLayout expertRows(const ExpertShape &s) {
  GatherLayout g;
  g.rows = s.experts;
  g.count = s.n;
  return g;
}

} // namespace

Status expertMatmul(const KernelCall &call) {
  const TensorView &lhs = call.inputs[0], &weights = call.inputs[1], &out = call.outputs[0];
  ExpertShape s;
  FSDPC_RETURN_IF_ERROR(expertShape(call, lhs, weights, s));
  if (out.numElements() == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(expertMatmulKernel, blocksFor(out.numElements(), launch), kThreads, 0, launch.stream, operandOf(lhs),
               operandOf(weights), operandOf(call.inputs[2]), operandOf(out), s, launch.error, launch.instruction);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

uint64_t expertMatmulWeightGradScratch(const KernelCall &call) {
  ExpertShape s;
  GatherGradScratch scratch;
  if (!expertShape(call, call.inputs[0], call.outputs[0], s).isOk() ||
      !gatherGradScratchLayout(expertRows(s), nullptr, scratch).isOk())
    return 0; // the call says why
  return scratch.totalBytes;
}

Status expertMatmulWeightGrad(const KernelCall &call) {
  const TensorView &lhs = call.inputs[0], &dresult = call.inputs[1], &experts = call.inputs[2], &dw = call.outputs[0];
  ExpertShape s;
  FSDPC_RETURN_IF_ERROR(expertShape(call, lhs, dw, s));
  if (dw.numElements() == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const GatherLayout g = expertRows(s);
  GatherGradScratch scratch;
  FSDPC_RETURN_IF_ERROR(gatherGradScratchLayout(g, static_cast<char *>(launch.scratch), scratch));
  if (launch.scratchBytes < scratch.totalBytes)
    return FSDPC_ERROR(kInternal, "expert_matmul_weight_grad: scratch too small");
  FSDPC_RETURN_IF_ERROR(sortPositionsByRow(g, experts, scratch, launch));
  launchKernel(expertWeightGradKernel, blocksFor(dw.numElements(), launch), kThreads, 0, launch.stream, operandOf(lhs),
               operandOf(dresult), scratch.sortedPositions, scratch.runStart, scratch.runEnd, operandOf(dw), s);
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
