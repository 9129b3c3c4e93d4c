//===- Norms.cu - layer norm and RMS norm ---------------------------------===//
//
// rms_norm is layer_norm without centring or bias, as on the CPU: one
// kernel each way with `centered` telling them apart.
// - Forward: the row's mean and variance in double, the statistics
//   backward reads written beside the output.
// - Backward: the input gradient row by row; the scale and bias gradients
//   as column sums over chunks of rows into scratch, then the chunks in
//   order (the same bits every run).
// Rows of up to 2048 elements, a multiple of 8, with 16-byte aligned
// operands (a transformer's hidden size) go one warp per row, the row held
// in registers and moved in 16-byte accesses (loadVector): the sums are
// warp shuffles, the row is read from HBM once. Up to 1024 elements, the
// backward's warps also sum the scale and bias gradients of their block's
// chunk of rows from the x and dy they hold, so x and dy are read once in
// all; wider rows sum them in a second kernel that reads both again.
// Other rows take one block each, reading the row once per pass.
// With accumulate, the backward adds the addend (the residual path's
// gradient) to dx in f32 before dx is rounded and written, which saves the
// separate add a pass over three tensors.
// The activations (x, y, dy, dx, the addend), scale and bias and their
// gradients may be bf16 / f16 in mixed-precision plans: read widened,
// computed in f32, rounded once where written, the numbers of f32 kernels
// between casts.
// The statistics are f32.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"
#include "../KernelChecks.h"

#include <iterator>

namespace fsdpc::runtime::cuda {

namespace {

constexpr int64_t kColumnTile = 32, kRowLanes = 8, kMaxChunks = 128, kMinRowsPerChunk = 32;

/// The shared layout check (KernelChecks.h). x, scale and bias (the
/// inputs before the statistics), y or dx, dscale and dbias, and for a
/// gradient dy (the last input) may be low precision; the statistics are
/// f32.
Status checkedNormLayout(const KernelCall &call, bool gradient, const TensorView &x, const TensorView &scale,
                         const TensorView &statistic, int64_t &rows, int64_t &cols) {
  // A gradient's dy is its last own input; the addend, if any, follows it.
  FSDPC_RETURN_IF_ERROR(gradient ? requireF32Except(call, {0, 1, call.ownInputs() - 1, call.ownInputs()}, {0, 1, 2})
                                 : requireF32Except(call, {0, 1, 2}, {0}));
  return normLayout(call, x, scale, statistic, rows, cols);
}

int64_t chunksFor(int64_t rows) { return std::min(kMaxChunks, std::max<int64_t>(1, rows / kMinRowsPerChunk)); }
int64_t partialChunksFor(int64_t rows);

__global__ void normalizeKernel(Operand x, Operand scale, Operand bias, long long rows, long long cols, double epsilon,
                                bool centered, Operand y, float *mean, float *invStd) {
  __shared__ double shared[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long row = r * cols;
    double mu = 0;
    if (centered) {
      double local = 0;
      for (long long j = threadIdx.x; j < cols; j += blockDim.x)
        local += loadFloat(x, row + j);
      mu = blockSum(local, shared) / cols;
    }
    double local = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
      const double centred = loadFloat(x, row + j) - mu;
      local += centred * centred;
    }
    const double squares = blockSum(local, shared);
    const float m = static_cast<float>(mu), rs = static_cast<float>(1.0 / sqrt(squares / cols + epsilon));
    if (threadIdx.x == 0) {
      if (centered)
        mean[r] = m;
      invStd[r] = rs;
    }
    for (long long j = threadIdx.x; j < cols; j += blockDim.x)
      storeFloat(y, row + j,
                 (loadFloat(x, row + j) - m) * rs * loadFloat(scale, j) + (bias.data ? loadFloat(bias, j) : 0.0f));
  }
}

// ---- one warp per row, the row in registers ------------------------------

constexpr int kRowWarps = 8; // rows per block

/// The warp kernels' vectors of 8 elements per lane, the template
/// arguments they are instantiated for.
constexpr int kVectorsPerLane[] = {1, 2, 3, 4, 6, 8};

/// The index in kVectorsPerLane of the warp kernel for rows of `cols`, or
/// -1 where the row does not fit one.
int warpKernelFor(int64_t cols) {
  if (cols % kVectorElements != 0 || cols == 0)
    return -1;
  const int64_t perLane = (cols / kVectorElements + 31) / 32;
  for (int i = 0; i < static_cast<int>(std::size(kVectorsPerLane)); ++i)
    if (perLane <= kVectorsPerLane[i])
      return i;
  return -1;
}

template <int V>
__global__ void __launch_bounds__(kRowWarps * 32)
    normalizeRowsKernel(Operand x, Operand scale, Operand bias, long long rows, long long cols, double epsilon,
                        bool centered, Operand y, float *mean, float *invStd) {
  const int lane = threadIdx.x & 31;
  const long long r = static_cast<long long>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5);
  if (r >= rows)
    return; // the whole warp: no block-wide barrier follows
  const long long row = r * cols, vectors = cols / kVectorElements;
  float v[V][kVectorElements] = {};
  double local = 0;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const long long j = lane + 32 * k;
    if (j < vectors) {
      loadVector(x, row + j * kVectorElements, v[k]);
#pragma unroll
      for (int e = 0; e < kVectorElements; ++e)
        local += v[k][e];
    }
  }
  const double mu = centered ? warpSum(local) / cols : 0.0;
  local = 0;
#pragma unroll
  for (int k = 0; k < V; ++k)
    if (lane + 32 * k < vectors)
#pragma unroll
      for (int e = 0; e < kVectorElements; ++e) {
        const double centred = v[k][e] - mu;
        local += centred * centred;
      }
  const double squares = warpSum(local);
  const float m = static_cast<float>(mu), rs = static_cast<float>(1.0 / sqrt(squares / cols + epsilon));
  if (lane == 0) {
    if (centered)
      mean[r] = m;
    invStd[r] = rs;
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const long long j = lane + 32 * k;
    if (j < vectors) {
      float w[kVectorElements], b[kVectorElements] = {};
      loadVector(scale, j * kVectorElements, w);
      if (bias.data)
        loadVector(bias, j * kVectorElements, b);
#pragma unroll
      for (int e = 0; e < kVectorElements; ++e)
        v[k][e] = (v[k][e] - m) * rs * w[e] + b[e];
      storeVector(y, row + j * kVectorElements, v[k]);
    }
  }
}

/// The rows of one block of the gradient's warp kernel: [begin, end).
struct RowRange {
  long long begin, end;
};
__device__ __forceinline__ RowRange blockRows(long long rows, long long rowsPerBlock) {
  const long long begin = static_cast<long long>(blockIdx.x) * rowsPerBlock;
  return {begin, min(rows, begin + rowsPerBlock)};
}

/// Rows of up to 1024 elements (4 vectors per lane) also sum their scale
/// and bias gradients in the warp kernel, from the x and dy it has read: a
/// block's partial sums go to scratch as the separate partials kernel's
/// would, one chunk per block. Wider rows would need more registers.
constexpr int kMaxPartialVectors = 4, kMaxPartialColumns = kMaxPartialVectors * kVectorElements * 32;
/// Chunks (blocks) of the fused partial sums: enough warps to keep the
/// memory busy, few enough that the partials stay small next to x and dy.
constexpr int64_t kMaxPartialChunks = 512;

int64_t partialChunksFor(int64_t rows) {
  return std::min(kMaxPartialChunks, std::max<int64_t>(1, rows / kMinRowsPerChunk));
}

/// dx for the rows of block blockIdx.x, a warp per row at a time; with
/// Partials, also the block's sums of dy * x_hat and dy per column into
/// partial[0][blockIdx.x] and partial[1][blockIdx.x] (chunks blocks), as
/// normParamPartialsKernel writes them, added warp by warp in a fixed
/// order.
// With Partials, two blocks per multiprocessor up to 3 vectors per lane
// (ptxas for sm_90: 128 registers, 24 bytes spilled at 3; unbounded, 155
// registers left one block of 8 warps per multiprocessor).
// Accumulate (the addend added to dx) is a template argument too: reading
// it costs registers, which the kernels without it should not pay (ptxas:
// 60 bytes spilled instead of 24 at 3 vectors with the partial sums).
template <int V, bool Partials, bool Accumulate>
__global__ void __launch_bounds__(kRowWarps * 32, Partials && V <= 3 ? 2 : 1)
    normalizeGradRowsKernel(Operand x, Operand scale, const float *mean, const float *invStd, Operand dy,
                            Operand addend, long long rows, long long cols, long long rowsPerBlock, Operand dx,
                            double *partial, long long chunks) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long vectors = cols / kVectorElements;
  const RowRange range = blockRows(rows, rowsPerBlock);
  float sumScale[Partials ? V : 1][kVectorElements] = {}, sumBias[Partials ? V : 1][kVectorElements] = {};
  for (long long r = range.begin + warp; r < range.end; r += kRowWarps) {
    const long long row = r * cols;
    const float m = mean ? mean[r] : 0.0f, rs = invStd[r];
    float xHat[V][kVectorElements] = {}, gw[V][kVectorElements] = {}; // x normalised; dy times the scale
    double localG = 0, localGX = 0;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const long long j = lane + 32 * k;
      if (j < vectors) {
        float g[kVectorElements], w[kVectorElements];
        loadVector(x, row + j * kVectorElements, xHat[k]);
        loadVector(dy, row + j * kVectorElements, g);
        loadVector(scale, j * kVectorElements, w);
#pragma unroll
        for (int e = 0; e < kVectorElements; ++e) {
          xHat[k][e] = (xHat[k][e] - m) * rs;
          gw[k][e] = g[e] * w[e];
          localG += gw[k][e];
          localGX += gw[k][e] * xHat[k][e];
          if constexpr (Partials) {
            sumScale[k][e] += g[e] * xHat[k][e];
            sumBias[k][e] += g[e];
          }
        }
      }
    }
    const double sumG = mean ? warpSum(localG) : 0.0;
    const double sumGX = warpSum(localGX);
    const float meanG = static_cast<float>(sumG / cols), meanGX = static_cast<float>(sumGX / cols);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const long long j = lane + 32 * k;
      if (j < vectors) {
#pragma unroll
        for (int e = 0; e < kVectorElements; ++e)
          xHat[k][e] = rs * (gw[k][e] - meanG - xHat[k][e] * meanGX);
        if constexpr (Accumulate) {
          float more[kVectorElements];
          loadVector(addend, row + j * kVectorElements, more);
#pragma unroll
          for (int e = 0; e < kVectorElements; ++e)
            xHat[k][e] += more[e];
        }
        storeVector(dx, row + j * kVectorElements, xHat[k]);
      }
    }
  }
  if constexpr (Partials) {
    // The warps' sums, added in warp order into the block's (double, as
    // the partials kernel keeps them), then written as its chunk. Shared
    // memory holds them lane-minor, slot (k, e) by slot, so that a warp's
    // 32 lanes touch 32 consecutive doubles: indexed by column, lanes 8
    // columns apart fell on two banks, a 16-way conflict in each of the
    // 8 turns.
    __shared__ double blockSums[2][kMaxPartialColumns];
    // Element e of vector `vector` of the row (its lane is vector % 32).
    auto slotOf = [](long long vector, long long e) {
      return ((vector / 32) * kVectorElements + e) * 32 + vector % 32;
    };
    for (int turn = 0; turn < kRowWarps; ++turn) {
      if (warp == turn)
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (lane + 32 * k < vectors)
#pragma unroll
            for (int e = 0; e < kVectorElements; ++e) {
              const long long slot = slotOf(lane + 32 * k, e);
              blockSums[0][slot] = (turn == 0 ? 0.0 : blockSums[0][slot]) + sumScale[k][e];
              blockSums[1][slot] = (turn == 0 ? 0.0 : blockSums[1][slot]) + sumBias[k][e];
            }
      __syncthreads();
    }
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
      const long long slot = slotOf(c / kVectorElements, c % kVectorElements);
      partial[blockIdx.x * cols + c] = blockSums[0][slot];
      partial[(chunks + blockIdx.x) * cols + c] = blockSums[1][slot];
    }
  }
}

// ---- one block per row ---------------------------------------------------

__global__ void normalizeGradKernel(Operand x, Operand scale, const float *mean, const float *invStd, Operand dy,
                                    Operand addend, long long rows, long long cols, Operand dx) {
  __shared__ double shared[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long row = r * cols;
    const float m = mean ? mean[r] : 0.0f, rs = invStd[r];
    double localG = 0, localGX = 0;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
      const float g = loadFloat(dy, row + j), w = loadFloat(scale, j);
      localG += g * w;
      localGX += g * w * ((loadFloat(x, row + j) - m) * rs);
    }
    const double sumG = mean ? blockSum(localG, shared) : 0.0;
    const double sumGX = blockSum(localGX, shared);
    const float meanG = static_cast<float>(sumG / cols), meanGX = static_cast<float>(sumGX / cols);
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
      const float g =
          rs * (loadFloat(dy, row + j) * loadFloat(scale, j) - meanG - (loadFloat(x, row + j) - m) * rs * meanGX);
      storeFloat(dx, row + j, addend.data ? g + loadFloat(addend, row + j) : g);
    }
  }
}

/// partial[0][chunk][col] = sum of dy * x_hat, partial[1][chunk][col] = sum
/// of dy, over the chunk's rows.
__global__ void normParamPartialsKernel(Operand x, const float *mean, const float *invStd, Operand dy, long long rows,
                                        long long cols, long long rowsPerChunk, long long chunks, double *partial) {
  __shared__ double lanesScale[kRowLanes][kColumnTile], lanesBias[kRowLanes][kColumnTile];
  const long long col = static_cast<long long>(blockIdx.x) * kColumnTile + threadIdx.x;
  const long long begin = blockIdx.y * rowsPerChunk, end = min(rows, begin + rowsPerChunk);
  double sumScale = 0, sumBias = 0;
  if (col < cols)
    for (long long r = begin + threadIdx.y; r < end; r += kRowLanes) {
      const float m = mean ? mean[r] : 0.0f, rs = invStd[r];
      const float g = loadFloat(dy, r * cols + col);
      sumScale += g * ((loadFloat(x, r * cols + col) - m) * rs);
      sumBias += g;
    }
  lanesScale[threadIdx.y][threadIdx.x] = sumScale;
  lanesBias[threadIdx.y][threadIdx.x] = sumBias;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    double totalScale = 0, totalBias = 0;
    for (int lane = 0; lane < kRowLanes; ++lane) {
      totalScale += lanesScale[lane][threadIdx.x];
      totalBias += lanesBias[lane][threadIdx.x];
    }
    partial[blockIdx.y * cols + col] = totalScale;
    partial[(chunks + blockIdx.y) * cols + col] = totalBias;
  }
}

Status normalize(const KernelCall &call, Operand bias, float *mean, float *invStd, double epsilon, int64_t rows,
                 int64_t cols) {
  if (rows == 0 || cols == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const Operand x = operandOf(call.inputs[0]), scale = operandOf(call.inputs[1]), y = operandOf(call.outputs[0]);
  const bool centered = mean != nullptr;
  static constexpr decltype(&normalizeRowsKernel<1>) kWarpKernels[] = {normalizeRowsKernel<1>, normalizeRowsKernel<2>,
                                                                       normalizeRowsKernel<3>, normalizeRowsKernel<4>,
                                                                       normalizeRowsKernel<6>, normalizeRowsKernel<8>};
  const int warpKernel = warpKernelFor(cols);
  if (warpKernel >= 0 && vectorAligned({&call.inputs[0], &call.inputs[1], &call.outputs[0]}) &&
      reinterpret_cast<uintptr_t>(bias.data) % 16 == 0) {
    launchKernel(kWarpKernels[warpKernel], static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps), kRowWarps * 32, 0,
                 launch.stream, x, scale, bias, rows, cols, epsilon, centered, y, mean, invStd);
  } else {
    launchKernel(normalizeKernel, rowBlocks(rows, launch), kThreads, 0, launch.stream, x, scale, bias, rows, cols,
                 epsilon, centered, y, mean, invStd);
  }
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status normalizeGrad(const KernelCall &call, const float *mean, const float *invStd, int64_t rows, int64_t cols,
                     Operand dbias) {
  if (rows == 0 || cols == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  const TensorView &dyView = call.inputs[call.ownInputs() - 1];
  const Operand x = operandOf(call.inputs[0]), dy = operandOf(dyView);
  const Operand scale = operandOf(call.inputs[1]);
  const Operand addend = call.addend() ? operandOf(*call.addend()) : Operand{};
  const Operand dx = operandOf(call.outputs[0]);
  if (launch.scratchBytes < normGradScratch(call))
    return FSDPC_ERROR(kInternal, call.instruction->op(), ": scratch too small");
  auto *partial = static_cast<double *>(launch.scratch);
  using GradRowsKernel = decltype(&normalizeGradRowsKernel<1, false, false>);
  // [accumulate][vectors per lane]
  static constexpr GradRowsKernel kWarpKernels[2][std::size(kVectorsPerLane)] = {
      {normalizeGradRowsKernel<1, false, false>, normalizeGradRowsKernel<2, false, false>,
       normalizeGradRowsKernel<3, false, false>, normalizeGradRowsKernel<4, false, false>,
       normalizeGradRowsKernel<6, false, false>, normalizeGradRowsKernel<8, false, false>},
      {normalizeGradRowsKernel<1, false, true>, normalizeGradRowsKernel<2, false, true>,
       normalizeGradRowsKernel<3, false, true>, normalizeGradRowsKernel<4, false, true>,
       normalizeGradRowsKernel<6, false, true>, normalizeGradRowsKernel<8, false, true>}};
  static constexpr GradRowsKernel kWarpPartialKernels[2][kMaxPartialVectors] = {
      {normalizeGradRowsKernel<1, true, false>, normalizeGradRowsKernel<2, true, false>,
       normalizeGradRowsKernel<3, true, false>, normalizeGradRowsKernel<4, true, false>},
      {normalizeGradRowsKernel<1, true, true>, normalizeGradRowsKernel<2, true, true>,
       normalizeGradRowsKernel<3, true, true>, normalizeGradRowsKernel<4, true, true>}};
  const bool accumulate = addend.data != nullptr;
  const int warpKernel = warpKernelFor(cols);
  const bool warpRows = warpKernel >= 0 &&
                        vectorAligned({&call.inputs[0], &call.inputs[1], &dyView, &call.outputs[0]}) &&
                        reinterpret_cast<uintptr_t>(addend.data) % 16 == 0;
  int64_t chunks = chunksFor(rows);
  if (warpRows && kVectorsPerLane[warpKernel] <= kMaxPartialVectors) {
    // dx and the parameter gradients' partial sums in one pass over x, dy.
    chunks = partialChunksFor(rows);
    launchKernel(kWarpPartialKernels[accumulate][warpKernel], static_cast<unsigned>(chunks), kRowWarps * 32, 0,
                 launch.stream, x, scale, mean, invStd, dy, addend, rows, cols, (rows + chunks - 1) / chunks, dx,
                 partial, chunks);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  } else {
    if (warpRows)
      launchKernel(kWarpKernels[accumulate][warpKernel], static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps),
                   kRowWarps * 32, 0, launch.stream, x, scale, mean, invStd, dy, addend, rows, cols,
                   static_cast<long long>(kRowWarps), dx, partial, chunks);
    else
      launchKernel(normalizeGradKernel, rowBlocks(rows, launch), kThreads, 0, launch.stream, x, scale, mean, invStd, dy,
                   addend, rows, cols, dx);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    const int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
    const dim3 grid(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile), static_cast<unsigned>(chunks));
    launchKernel(normParamPartialsKernel, grid, dim3(kColumnTile, kRowLanes), 0, launch.stream, x, mean, invStd, dy,
                 rows, cols, rowsPerChunk, chunks, partial);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  // The scale gradient's chunks and, after them, the bias gradient's.
  return sumChunks(launch, partial, chunks, cols, operandOf(call.outputs[1]), dbias);
}

} // namespace

uint64_t normGradScratch(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  const int64_t cols = scale.numElements(), rows = cols == 0 ? 0 : x.numElements() / cols;
  // Either path's partials (the warp kernel's only for rows it takes).
  const int64_t chunks = std::max(chunksFor(rows), cols <= kMaxPartialColumns ? partialChunksFor(rows) : 0);
  return static_cast<uint64_t>(2 * chunks * cols) * sizeof(double);
}

Status layerNorm(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1], &bias = call.inputs[2];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(checkedNormLayout(call, /*gradient=*/false, x, scale, call.outputs[1], rows, cols));
  if (bias.numElements() != cols)
    return FSDPC_ERROR(kInvalidArgument, "layer_norm: bias has ", bias.numElements(), " elements, not ", cols);
  return normalize(call, operandOf(bias), call.outputs[1].f32(), call.outputs[2].f32(),
                   call.floatParam(contract::Param::kEpsilon, 1e-5), rows, cols);
}

Status layerNormGrad(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(checkedNormLayout(call, /*gradient=*/true, x, scale, call.inputs[2], rows, cols));
  return normalizeGrad(call, call.inputs[2].f32(), call.inputs[3].f32(), rows, cols, operandOf(call.outputs[2]));
}

Status rmsNorm(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(checkedNormLayout(call, /*gradient=*/false, x, scale, call.outputs[1], rows, cols));
  return normalize(call, /*bias=*/Operand{}, /*mean=*/nullptr, call.outputs[1].f32(),
                   call.floatParam(contract::Param::kEpsilon, 1e-6), rows, cols);
}

Status rmsNormGrad(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(checkedNormLayout(call, /*gradient=*/true, x, scale, call.inputs[2], rows, cols));
  return normalizeGrad(call, /*mean=*/nullptr, call.inputs[2].f32(), rows, cols, /*dbias=*/Operand{});
}

} // namespace fsdpc::runtime::cuda
