//===- Losses.cu - loss kernels -------------------------------------------===//
//
// Cross entropy: one block per row writes the row's loss (in double) and
// whether its label counts into scratch; one block then sums the rows in a
// fixed order, so the loss has the same bits every run. A label outside
// [0, classes) goes to the device error word and the step fails with it.
// A row holds `pitch` logits, its first `classes` the classes: the rest is
// padding (the `classes` parameter) with no part in the loss, whose
// gradient is zero.
// softmax_cross_entropy_with_grad, the loss and its gradient together,
// reads each row of logits from HBM once where it fits in shared memory;
// the two kernels apart read it five times.
//
//===----------------------------------------------------------------------===//
#include "DeviceMath.cuh"
#include "WarpMma.cuh"

#include <climits>

namespace fsdpc::runtime::cuda {

namespace {

constexpr int kReduceThreads = 1024;
// softmax_cross_entropy_with_grad: a block of 1024 threads per row, and rows
// up to 200 KiB staged in shared memory (sm_90 gives a block up to 227 KiB):
// GPT-2's 50257 classes in bf16 (100 KB, two blocks per SM) or f32.
constexpr int kLossRowThreads = 1024, kLossRowUnroll = 8;
constexpr size_t kMaxStagedRowBytes = 200 * 1024;
// Two staged rows for the pipelined kernel: up to 110 KiB each (GPT-2's
// 50257 classes in bf16 take 98 KiB).
constexpr size_t kMaxPipelinedBytes = 220 * 1024;

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

/// Whether row r's label counts: neither ignore_index nor outside
/// [0, classes). One outside goes to the device error word.
__device__ __forceinline__ bool labelCounts(long long label, long long r, long long classes, long long ignoreIndex,
                                            DeviceError *error, int instruction) {
  const bool ignored = label == ignoreIndex, outside = !ignored && (label < 0 || label >= classes);
  if (outside && threadIdx.x == 0)
    reportDataError(error, instruction, label, r, classes);
  return !ignored && !outside;
}

/// A row that does not count adds nothing to the loss and gets a zero
/// gradient (as padding columns do).
__device__ __forceinline__ void skipRowLoss(double *rowLoss, long long *rowCounts, long long r) {
  if (threadIdx.x == 0) {
    rowLoss[r] = 0;
    rowCounts[r] = 0;
  }
}
/// A counted row's loss, logsumexp minus its label's logit.
__device__ __forceinline__ void keepRowLoss(double *rowLoss, long long *rowCounts, long long r, double sum,
                                            float rowMax, float labelLogit) {
  if (threadIdx.x == 0) {
    rowLoss[r] = log(sum) + rowMax - labelLogit;
    rowCounts[r] = 1;
  }
}
/// What each counted row's gradient is scaled by: the seed, over the count
/// of counted rows for a mean.
__device__ __forceinline__ float gradientScale(const float *seed, const long long *counted, bool mean) {
  return mean ? seed[0] / static_cast<float>(counted[0]) : seed[0];
}
__device__ __forceinline__ void zeroRowGradient(Operand dlogits, long long first, long long classes) {
  for (long long c = threadIdx.x; c < classes; c += blockDim.x)
    storeFloat(dlogits, first + c, 0.0f);
}

__global__ void crossEntropyRowsKernel(Operand logits, const long long *labels, long long rows, long long classes,
                                       long long pitch, long long ignoreIndex, double *rowLoss, long long *rowCounts, DeviceError *error,
                                       int instruction) {
  __shared__ float sharedFloat[32];
  __shared__ double sharedDouble[32];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long label = labels[r];
    if (!labelCounts(label, r, classes, ignoreIndex, error, instruction)) {
      skipRowLoss(rowLoss, rowCounts, r);
      continue;
    }
    float rowMax;
    double sum;
    rowExpSum(logits, r * pitch, classes, sharedFloat, sharedDouble, rowMax, sum);
    keepRowLoss(rowLoss, rowCounts, r, sum, rowMax, loadFloat(logits, r * pitch + label));
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
                                       long long pitch, long long ignoreIndex, bool mean, Operand dlogits,
                                       DeviceError *error, int instruction) {
  __shared__ float sharedFloat[32];
  __shared__ double sharedDouble[32];
  const float scale = gradientScale(seed, counted, mean);
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long label = labels[r];
    const long long first = r * pitch;
    zeroRowGradient(dlogits, first + classes, pitch - classes);
    if (!labelCounts(label, r, classes, ignoreIndex, error, instruction)) {
      zeroRowGradient(dlogits, first, classes);
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

/// softmax_cross_entropy_with_grad: each row's loss into scratch (as
/// crossEntropyRowsKernel) and its gradient (as crossEntropyGradKernel),
/// from one read of the row. Staged, the block first copies the row into
/// shared memory, exactly (a bf16 or f16 value widened and rounded back is
/// itself), and the maximum, the sum and the gradient read it from there:
/// the logits cross HBM once each way. Unstaged (a row above
/// kMaxStagedRowBytes), the passes read global memory, as the two kernels
/// do. In place either way: the row's label logit is read before the
/// barrier that precedes every write, and each element is read before its
/// own write by the same thread.
template <bool Staged>
__global__ void __launch_bounds__(kLossRowThreads)
    crossEntropyWithGradKernel(Operand logits, const long long *labels, const float *seed, const long long *counted,
                               long long rows, long long classes, long long pitch, long long ignoreIndex, bool mean,
                               double *rowLoss, long long *rowCounts, Operand dlogits, DeviceError *error,
                               int instruction) {
  FSDPC_DYNAMIC_SHARED(unsigned char, stagedBytes);
  __shared__ float sharedFloat[32];
  __shared__ double sharedDouble[32];
  const float scale = gradientScale(seed, counted, mean);
  const Operand staged{stagedBytes, logits.dtype, logits.elementBytes};
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long label = labels[r];
    const long long first = r * pitch;
    zeroRowGradient(dlogits, first + classes, pitch - classes); // never read: the row's classes come first
    if (!labelCounts(label, r, classes, ignoreIndex, error, instruction)) {
      skipRowLoss(rowLoss, rowCounts, r);
      zeroRowGradient(dlogits, first, classes);
      continue;
    }
    const Operand row = Staged ? staged : logits;
    const long long base = Staged ? 0 : first;
    // kLossRowUnroll loads in flight per thread before their stores: one
    // 2-byte load at a time (the shared-memory store may alias the next
    // load, for all the compiler knows) would leave HBM idle.
    float localMax = -INFINITY;
    for (long long c0 = threadIdx.x; c0 < classes; c0 += kLossRowUnroll * blockDim.x) {
      float x[kLossRowUnroll];
#pragma unroll
      for (int u = 0; u < kLossRowUnroll; ++u) {
        const long long c = c0 + u * blockDim.x;
        x[u] = c < classes ? loadFloat(logits, first + c) : -INFINITY;
      }
#pragma unroll
      for (int u = 0; u < kLossRowUnroll; ++u) {
        const long long c = c0 + u * blockDim.x;
        if (Staged && c < classes)
          storeFloat(staged, c, x[u]);
        localMax = fmaxf(localMax, x[u]);
      }
    }
    const float rowMax = blockMax(localMax, sharedFloat); // its barrier publishes the staged row
    const float labelLogit = loadFloat(row, base + label);
    double local = 0;
    for (long long c = threadIdx.x; c < classes; c += blockDim.x)
      local += expf(loadFloat(row, base + c) - rowMax);
    const double sum = blockSum(local, sharedDouble);
    keepRowLoss(rowLoss, rowCounts, r, sum, rowMax, labelLogit);
    const float factor = static_cast<float>(scale / sum);
    for (long long c = threadIdx.x; c < classes; c += blockDim.x)
      storeFloat(dlogits, first + c, expf(loadFloat(row, base + c) - rowMax) * factor - (c == label ? scale : 0.0f));
    if (Staged)
      __syncthreads(); // the next row overwrites the staged one
  }
}

/// crossEntropyWithGradKernel<true> in 16-byte accesses, for logits and
/// dlogits whose buffers start 16-byte aligned. A row of GPT-2's 50257
/// classes starts anywhere within 16 bytes, so each row has a scalar head
/// (up to 7 elements, to the first aligned vector), a body of whole vectors
/// and a scalar tail; the staged copy sits `shift` elements into shared
/// memory so that the body's vectors are aligned there too. On the H200 the
/// one-element kernel moved 1 TB/s (3.2 ms for GPT-2's 16384 rows), with
/// 2-byte accesses too few to keep HBM busy.
constexpr int kLossVectorUnroll = 4;

/// How a row of `classes` logits from element `first` splits for 16-byte
/// accesses: `head` scalars up to the first aligned vector, `vectors`
/// whole vectors, scalars from `tail` to the end; the staged copy sits
/// `shift` elements into shared memory so the vectors align there too.
struct RowSplit {
  long long shift, head, vectors, tail;
};
__device__ __forceinline__ RowSplit splitRow(long long first, long long classes) {
  RowSplit split;
  split.shift = first % kVectorElements;
  split.head = min(classes, (kVectorElements - split.shift) % kVectorElements);
  split.vectors = (classes - split.head) / kVectorElements;
  split.tail = split.head + split.vectors * kVectorElements;
  return split;
}

/// The calling thread's scalar elements of a row: thread t < head takes
/// element t, thread t < classes - tail element tail + t; -1 for none.
__device__ __forceinline__ void rowScalars(const RowSplit &split, long long classes, long long (&c)[2]) {
  const long long t = threadIdx.x;
  c[0] = t < split.head ? t : -1;
  c[1] = t < classes - split.tail ? split.tail + t : -1;
}

/// Row r's loss and gradient from its staged copy (split as splitRow says),
/// its maximum known: the sum of exp(x - max) (the thread's scalars, then
/// its vectors, then the block in order), the row's loss into scratch, and
/// the gradient written in 16-byte accesses. Every thread of the block
/// calls it; both staged vector kernels do, so they sum in the same order
/// and give the same bits.
__device__ __forceinline__ void stagedRowLossAndGradient(Operand staged, const RowSplit &split,
                                                         const long long (&scalars)[2], long long r, long long first,
                                                         long long label, float rowMax, float scale,
                                                         double *sharedDouble, double *rowLoss, long long *rowCounts,
                                                         Operand dlogits) {
  const float labelLogit = loadFloat(staged, split.shift + label);
  double local = 0;
  for (long long c : scalars)
    if (c >= 0)
      local += expf(loadFloat(staged, split.shift + c) - rowMax);
  for (long long v = threadIdx.x; v < split.vectors; v += blockDim.x) {
    float x[kVectorElements];
    loadVector(staged, split.shift + split.head + v * kVectorElements, x);
    float vectorSum = 0.0f;
#pragma unroll
    for (int e = 0; e < kVectorElements; ++e)
      vectorSum += expf(x[e] - rowMax);
    local += vectorSum;
  }
  const double sum = blockSum(local, sharedDouble);
  keepRowLoss(rowLoss, rowCounts, r, sum, rowMax, labelLogit);
  const float factor = static_cast<float>(scale / sum);
  for (long long c : scalars)
    if (c >= 0)
      storeFloat(dlogits, first + c,
                 expf(loadFloat(staged, split.shift + c) - rowMax) * factor - (c == label ? scale : 0.0f));
  for (long long v = threadIdx.x; v < split.vectors; v += blockDim.x) {
    const long long c0 = split.head + v * kVectorElements;
    float x[kVectorElements];
    loadVector(staged, split.shift + c0, x);
#pragma unroll
    for (int e = 0; e < kVectorElements; ++e)
      x[e] = expf(x[e] - rowMax) * factor - (c0 + e == label ? scale : 0.0f);
    storeVector(dlogits, first + c0, x);
  }
}

__global__ void __launch_bounds__(kLossRowThreads)
    crossEntropyWithGradVectorKernel(Operand logits, const long long *labels, const float *seed,
                                     const long long *counted, long long rows, long long classes, long long pitch,
                                     long long ignoreIndex, bool mean, double *rowLoss, long long *rowCounts,
                                     Operand dlogits, DeviceError *error, int instruction) {
  FSDPC_DYNAMIC_SHARED(unsigned char, stagedBytes);
  __shared__ float sharedFloat[32];
  __shared__ double sharedDouble[32];
  const float scale = gradientScale(seed, counted, mean);
  const Operand staged{stagedBytes, logits.dtype, logits.elementBytes};
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const long long label = labels[r];
    const long long first = r * pitch;
    zeroRowGradient(dlogits, first + classes, pitch - classes); // never read: the row's classes come first
    if (!labelCounts(label, r, classes, ignoreIndex, error, instruction)) {
      skipRowLoss(rowLoss, rowCounts, r);
      zeroRowGradient(dlogits, first, classes);
      continue;
    }
    const RowSplit split = splitRow(first, classes);
    long long scalars[2];
    rowScalars(split, classes, scalars);
    float localMax = -INFINITY;
    for (long long c : scalars)
      if (c >= 0) {
        const float x = loadFloat(logits, first + c);
        storeFloat(staged, split.shift + c, x);
        localMax = fmaxf(localMax, x);
      }
    for (long long v0 = threadIdx.x; v0 < split.vectors; v0 += kLossVectorUnroll * blockDim.x) {
      float x[kLossVectorUnroll][kVectorElements];
#pragma unroll
      for (int u = 0; u < kLossVectorUnroll; ++u) {
        const long long v = v0 + u * blockDim.x;
        if (v < split.vectors)
          loadVector(logits, first + split.head + v * kVectorElements, x[u]);
      }
#pragma unroll
      for (int u = 0; u < kLossVectorUnroll; ++u) {
        const long long v = v0 + u * blockDim.x;
        if (v < split.vectors) {
          storeVector(staged, split.shift + split.head + v * kVectorElements, x[u]);
#pragma unroll
          for (int e = 0; e < kVectorElements; ++e)
            localMax = fmaxf(localMax, x[u][e]);
        }
      }
    }
    const float rowMax = blockMax(localMax, sharedFloat); // its barrier publishes the staged row
    stagedRowLossAndGradient(staged, split, scalars, r, first, label, rowMax, scale, sharedDouble, rowLoss, rowCounts,
                             dlogits);
    __syncthreads(); // the next row overwrites the staged one
  }
}

/// crossEntropyWithGradVectorKernel with each block's rows double-buffered
/// in shared memory: while the block reads one row there, computes its
/// loss and writes its gradient, the next row's copy is in flight
/// (cp.async), so HBM keeps reading. The vector kernel needs 64 registers
/// a thread, so one 1024-thread block a multiprocessor, which reads a row,
/// then computes and writes with nothing in flight (1.9 ms for GPT-2's
/// logits on the H200, 1.7 TB/s). Here one block a multiprocessor takes
/// rows blockIdx.x, + gridDim.x, and so on, with two staged rows filling
/// its shared memory. A thread takes the same elements of a row and sums
/// them in the same order as in the vector kernel (the passes after the
/// maximum are one function, stagedRowLossAndGradient), so the bits are the
/// same. In place too: a row's gradient is written after its copy landed,
/// and the copy in flight is another row's.
__global__ void __launch_bounds__(kLossRowThreads)
    crossEntropyWithGradPipelinedKernel(Operand logits, const long long *labels, const float *seed,
                                        const long long *counted, long long rows, long long classes, long long pitch,
                                        long long ignoreIndex, bool mean, double *rowLoss, long long *rowCounts,
                                        Operand dlogits, DeviceError *error, int instruction, long long stageElements) {
  FSDPC_DYNAMIC_SHARED(uint4, stageWords); // 16-byte aligned, as cp.async needs
  __shared__ float sharedFloat[32];
  __shared__ double sharedDouble[32];
  const float scale = gradientScale(seed, counted, mean);
  auto stageOf = [&](int stage) {
    return Operand{reinterpret_cast<char *>(stageWords) + stage * stageElements * logits.elementBytes, logits.dtype,
                   logits.elementBytes};
  };
  // Starts row r's copy into `stage`: its vectors by cp.async, its scalars
  // into `pending` (a plain load stalls only where its value is used: when
  // the row is next, after the block has finished the current one).
  float pending[2] = {0.0f, 0.0f};
  auto startRow = [&](long long r, int stage) {
    if (r < rows) {
      const long long first = r * pitch;
      const RowSplit split = splitRow(first, classes);
      const Operand staged = stageOf(stage);
      for (long long v = threadIdx.x; v < split.vectors; v += blockDim.x) {
        const long long c = split.shift + split.head + v * kVectorElements;
        copyAsync16(static_cast<char *>(staged.data) + c * logits.elementBytes,
                    static_cast<const char *>(logits.data) + (first + split.head + v * kVectorElements) *
                                                                 logits.elementBytes);
      }
      long long c[2];
      rowScalars(split, classes, c);
      for (int k = 0; k < 2; ++k)
        if (c[k] >= 0)
          pending[k] = loadFloat(logits, first + c[k]);
    }
    commitAsyncCopies();
  };

  int stage = 0;
  startRow(blockIdx.x, stage);
  for (long long r = blockIdx.x; r < rows; r += gridDim.x, stage ^= 1) {
    const long long first = r * pitch;
    const RowSplit split = splitRow(first, classes);
    const Operand staged = stageOf(stage);
    long long scalars[2];
    rowScalars(split, classes, scalars);
    for (int k = 0; k < 2; ++k)
      if (scalars[k] >= 0)
        storeFloat(staged, split.shift + scalars[k], pending[k]);
    waitAsyncCopies<0>();
    // Row r has landed for every thread, and every thread is done with the
    // other stage (the previous row), which the next row's copy now fills.
    __syncthreads();
    startRow(r + gridDim.x, stage ^ 1);
    const long long label = labels[r];
    zeroRowGradient(dlogits, first + classes, pitch - classes); // never read: the row's classes come first
    if (!labelCounts(label, r, classes, ignoreIndex, error, instruction)) {
      skipRowLoss(rowLoss, rowCounts, r);
      zeroRowGradient(dlogits, first, classes);
      continue;
    }
    float localMax = -INFINITY;
    for (long long c : scalars)
      if (c >= 0)
        localMax = fmaxf(localMax, loadFloat(staged, split.shift + c));
    for (long long v = threadIdx.x; v < split.vectors; v += blockDim.x) {
      float x[kVectorElements];
      loadVector(staged, split.shift + split.head + v * kVectorElements, x);
#pragma unroll
      for (int e = 0; e < kVectorElements; ++e)
        localMax = fmaxf(localMax, x[e]);
    }
    const float rowMax = blockMax(localMax, sharedFloat);
    stagedRowLossAndGradient(staged, split, scalars, r, first, label, rowMax, scale, sharedDouble, rowLoss, rowCounts,
                             dlogits);
  }
  waitAsyncCopies<0>(); // none may be left in flight when the block ends
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

} // namespace

uint64_t crossEntropyScratch(const KernelCall &call) {
  const int64_t rows = call.inputs[0].shape.empty() ? 0 : call.inputs[0].shape[0];
  return static_cast<uint64_t>(rows) * (sizeof(double) + sizeof(long long)) + sizeof(long long);
}

namespace {

/// What the three cross-entropy kernels take of a call, decoded once: the
/// shapes, the labels and parameters, and their scratch (crossEntropyScratch):
/// each row's loss and whether its label counts, then the count of labels
/// that do.
struct CrossEntropyArgs {
  int64_t rows, classes, pitch;
  const long long *labels;
  long long ignoreIndex;
  bool mean;
  double *rowLoss;
  long long *rowCounts, *counted;
};

Status readCrossEntropy(const KernelCall &call, const char *kernel, CrossEntropyArgs &ce) {
  const TensorView &logits = call.inputs[0], &labels = call.inputs[1];
  if (logits.shape.size() != 2 || labels.numElements() != logits.shape[0] || labels.dtype != plan::I64 ||
      !isFloatDtype(logits.dtype))
    return FSDPC_ERROR(kInvalidArgument, kernel, ": float logits ", cpu::shapeString(logits.shape), " and int64 labels ",
                       cpu::shapeString(labels.shape), " do not match");
  const CudaLaunch &launch = launchOf(call);
  if (launch.scratchBytes < crossEntropyScratch(call))
    return FSDPC_ERROR(kInternal, kernel, ": scratch too small");
  ce.rows = logits.shape[0];
  ce.pitch = logits.shape[1];
  ce.classes = call.intParam(contract::Param::kClasses, ce.pitch);
  if (ce.classes < 1 || ce.classes > ce.pitch)
    return FSDPC_ERROR(kInvalidArgument, kernel, ": ", ce.classes, " classes in rows of ", ce.pitch);
  ce.labels = static_cast<const long long *>(labels.data);
  ce.ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
  ce.mean = call.stringParam(contract::Param::kReduction, "mean") == "mean";
  ce.rowLoss = static_cast<double *>(launch.scratch);
  ce.rowCounts = reinterpret_cast<long long *>(ce.rowLoss + ce.rows);
  ce.counted = ce.rowCounts + ce.rows;
  return Status::ok();
}

/// The gradient's output (`index`) must have the logits' dtype: it may be
/// written over them.
Status requireLogitsDtype(const KernelCall &call, int index, const char *kernel) {
  if (call.outputs[index].dtype != call.inputs[0].dtype)
    return FSDPC_ERROR(kInvalidArgument, kernel, ": the gradient's dtype is not the logits'");
  return Status::ok();
}

} // namespace

Status softmaxCrossEntropy(const KernelCall &call) {
  CrossEntropyArgs ce;
  FSDPC_RETURN_IF_ERROR(readCrossEntropy(call, "softmax_cross_entropy", ce));
  const CudaLaunch &launch = launchOf(call);
  if (ce.rows > 0) {
    launchKernel(crossEntropyRowsKernel, rowBlocks(ce.rows, launch), kThreads, 0, launch.stream,
                 operandOf(call.inputs[0]), ce.labels, ce.rows, ce.classes, ce.pitch, ce.ignoreIndex, ce.rowLoss,
                 ce.rowCounts, launch.error, launch.instruction);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  }
  launchKernel(crossEntropyTotalKernel, 1, kReduceThreads, 0, launch.stream, ce.rowLoss, ce.rowCounts, ce.rows, ce.mean,
               call.outputs[0].f32());
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status softmaxCrossEntropyGrad(const KernelCall &call) {
  CrossEntropyArgs ce;
  FSDPC_RETURN_IF_ERROR(readCrossEntropy(call, "softmax_cross_entropy_grad", ce));
  FSDPC_RETURN_IF_ERROR(requireLogitsDtype(call, 0, "softmax_cross_entropy_grad"));
  if (ce.rows == 0)
    return Status::ok();
  const CudaLaunch &launch = launchOf(call);
  launchKernel(countLabelsKernel, 1, kReduceThreads, 0, launch.stream, ce.labels, ce.rows, ce.ignoreIndex, ce.counted);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  launchKernel(crossEntropyGradKernel, rowBlocks(ce.rows, launch), kThreads, 0, launch.stream,
               operandOf(call.inputs[0]), ce.labels, call.inputs[2].f32(), ce.counted, ce.rows, ce.classes, ce.pitch,
               ce.ignoreIndex, ce.mean, operandOf(call.outputs[0]), launch.error, launch.instruction);
  FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::ok();
}

Status softmaxCrossEntropyWithGrad(const KernelCall &call) {
  CrossEntropyArgs ce;
  FSDPC_RETURN_IF_ERROR(readCrossEntropy(call, "softmax_cross_entropy_with_grad", ce));
  FSDPC_RETURN_IF_ERROR(requireLogitsDtype(call, 1, "softmax_cross_entropy_with_grad"));
  const CudaLaunch &launch = launchOf(call);
  if (ce.rows > 0) {
    // The gradient's scale needs the count of every row first.
    launchKernel(countLabelsKernel, 1, kReduceThreads, 0, launch.stream, ce.labels, ce.rows, ce.ignoreIndex,
                 ce.counted);
    FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    const Operand logits = operandOf(call.inputs[0]), dlogits = operandOf(call.outputs[1]);
    const size_t rowBytes = static_cast<size_t>(ce.classes) * dtypeSize(call.inputs[0].dtype);
    const size_t shiftedRowBytes = rowBytes + kVectorElements * dtypeSize(call.inputs[0].dtype);
    const bool vectors = call.inputs[0].dtype != plan::F32 && vectorAligned({&call.inputs[0], &call.outputs[1]});
    // A stage holds a shifted row, rounded up to whole 16-byte words.
    const long long stageElements = (ce.classes + 2 * kVectorElements - 1) / kVectorElements * kVectorElements;
    const size_t pipelinedBytes = 2 * static_cast<size_t>(stageElements) * dtypeSize(call.inputs[0].dtype);
    if (vectors && pipelinedBytes <= kMaxPipelinedBytes) {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ce.rows, launch.multiprocessors));
      FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(
          crossEntropyWithGradPipelinedKernel, blocks, kLossRowThreads, pipelinedBytes, launch.stream, logits,
          ce.labels, call.inputs[2].f32(), ce.counted, ce.rows, ce.classes, ce.pitch, ce.ignoreIndex, ce.mean,
          ce.rowLoss, ce.rowCounts, dlogits, launch.error, launch.instruction, stageElements));
    } else if (vectors && shiftedRowBytes <= kMaxStagedRowBytes) {
      FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(
          crossEntropyWithGradVectorKernel, rowBlocks(ce.rows, launch), kLossRowThreads, shiftedRowBytes, launch.stream,
          logits, ce.labels, call.inputs[2].f32(), ce.counted, ce.rows, ce.classes, ce.pitch, ce.ignoreIndex, ce.mean,
          ce.rowLoss, ce.rowCounts, dlogits, launch.error, launch.instruction));
    } else if (rowBytes <= kMaxStagedRowBytes) {
      FSDPC_RETURN_IF_ERROR(launchWithDynamicShared(
          crossEntropyWithGradKernel<true>, rowBlocks(ce.rows, launch), kLossRowThreads, rowBytes, launch.stream,
          logits, ce.labels, call.inputs[2].f32(), ce.counted, ce.rows, ce.classes, ce.pitch, ce.ignoreIndex, ce.mean,
          ce.rowLoss, ce.rowCounts, dlogits, launch.error, launch.instruction));
    } else {
      launchKernel(crossEntropyWithGradKernel<false>, rowBlocks(ce.rows, launch), kLossRowThreads, 0, launch.stream,
                   logits, ce.labels, call.inputs[2].f32(), ce.counted, ce.rows, ce.classes, ce.pitch, ce.ignoreIndex,
                   ce.mean, ce.rowLoss, ce.rowCounts, dlogits, launch.error, launch.instruction);
      FSDPC_CUDA_RETURN_IF_LAUNCH_FAILED();
    }
  }
  launchKernel(crossEntropyTotalKernel, 1, kReduceThreads, 0, launch.stream, ce.rowLoss, ce.rowCounts, ce.rows, ce.mean,
               call.outputs[0].f32());
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
