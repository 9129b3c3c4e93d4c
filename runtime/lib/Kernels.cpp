#include "fsdpc/runtime/Kernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <unordered_map>

// OpenBLAS's own thread pool spins between calls; next to OpenMP's it
// makes both pools fight over the cores (elementwise kernels ran 40x
// slower). So BLAS runs single-threaded and the kernels split GEMMs across
// OpenMP threads themselves. Weak, so another BLAS still links.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace fsdpc::runtime {

double KernelCall::floatAttr(const std::string &name, double fallback) const {
  auto it = instruction->float_attrs().find(name);
  return it == instruction->float_attrs().end() ? fallback : it->second;
}

int64_t KernelCall::intAttr(const std::string &name, int64_t fallback) const {
  auto it = instruction->int_attrs().find(name);
  return it == instruction->int_attrs().end() ? fallback : it->second;
}

std::vector<int64_t> KernelCall::intListAttr(const std::string &name) const {
  auto it = instruction->int_list_attrs().find(name);
  if (it == instruction->int_list_attrs().end())
    return {};
  return {it->second.values().begin(), it->second.values().end()};
}

std::string KernelCall::stringAttr(const std::string &name, const std::string &fallback) const {
  auto it = instruction->string_attrs().find(name);
  return it == instruction->string_attrs().end() ? fallback : it->second;
}

namespace {

// Elementwise loops only pay for threads above this many elements.
constexpr int64_t kParallelThreshold = 1 << 15;

/// exp in straight-line arithmetic the compiler vectorises, unlike libm's:
/// Cephes' expf (reduction by ln 2 in two parts, a degree-6 polynomial,
/// within 2 ulp). Arguments below -87.3 give 0 (so exp(-inf) = 0, as
/// masked softmax positions need); above 88.3 they are clamped there.
inline float vectorExp(float argument) {
  const float x = std::min(std::max(argument, -87.3f), 88.3f);
  const float scaled = x * 1.44269504088896341f + 0.5f;
  int n = static_cast<int>(scaled);
  n -= static_cast<float>(n) > scaled; // floor, for negative arguments too
  const float fn = static_cast<float>(n);
  float r = x - fn * 0.693359375f;
  r += fn * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float power;
  std::memcpy(&power, &bits, sizeof(power));
  return argument < -87.3f ? 0.0f : p * power;
}

/// 1 + erf(x / sqrt 2), GELU's 2 Phi(x), to an absolute 1.5e-7: erfc of
/// |x| / sqrt 2 by Abramowitz and Stegun 7.1.26 on vectorExp, vectorisable
/// unlike libm's erf, and taken as 2 - erfc for x >= 0. GELU multiplies it
/// by x / 2, so its error stays below float rounding for x >= 0 and below
/// 1e-7 * |x| in the negative tail. (A relatively exact erfc fit costs 12%
/// more of a GPT step on 2 CPU cores; the graph.erf kernel keeps libm's erf.)
/// `gaussian` is exp(-x^2 / 2), which GELU's gradient needs as well.
inline float twiceNormalCdf(float x, float gaussian) {
  const float a = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float erfc = poly * gaussian;
  return x >= 0.0f ? 2.0f - erfc : erfc;
}

inline float vectorTanh(float u) { return 1.0f - 2.0f / (vectorExp(2.0f * u) + 1.0f); }

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Strides of `shape` seen from an index space of `outShape` under numpy
/// broadcasting: 0 where `shape` broadcasts, missing leading dims included.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape, const std::vector<int64_t> &outShape) {
  size_t rank = outShape.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t dim = shape.size() - 1 - i;
    size_t outDim = rank - 1 - i;
    strides[outDim] = shape[dim] == 1 ? 0 : stride;
    stride *= shape[dim];
  }
  return strides;
}

bool broadcastsTo(const std::vector<int64_t> &shape, const std::vector<int64_t> &outShape) {
  if (shape.size() > outShape.size())
    return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[shape.size() - 1 - i], o = outShape[outShape.size() - 1 - i];
    if (d != o && d != 1)
      return false;
  }
  return true;
}

/// Calls body(outIndex, offsetA, offsetB) for every element of `outShape`.
template <typename Body>
void forEachBroadcast(const std::vector<int64_t> &outShape, const std::vector<int64_t> &stridesA,
                      const std::vector<int64_t> &stridesB, Body body) {
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  if (total == 0)
    return;
  size_t rank = outShape.size();
  if (rank == 0) {
    body(0, 0, 0);
    return;
  }
  int64_t inner = outShape[rank - 1];
  int64_t outer = total / inner;
  int64_t innerA = stridesA[rank - 1], innerB = stridesB[rank - 1];
#pragma omp parallel for if (total > kParallelThreshold)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rest = o, offA = 0, offB = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      int64_t idx = rest % outShape[d];
      rest /= outShape[d];
      offA += idx * stridesA[d];
      offB += idx * stridesB[d];
    }
    for (int64_t i = 0; i < inner; ++i)
      body(o * inner + i, offA + i * innerA, offB + i * innerB);
  }
}

template <typename Op> Status binaryBroadcast(const KernelCall &call, Op op) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &out = call.outputs[0];
  if (!broadcastsTo(a.shape, out.shape) || !broadcastsTo(b.shape, out.shape))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": shapes ", shapeString(a.shape), " and ",
                       shapeString(b.shape), " do not broadcast to ", shapeString(out.shape));
  const float *pa = a.f32(), *pb = b.f32();
  float *po = out.f32();
  int64_t n = out.numElements();
  if (a.numElements() == n && b.numElements() == n) {
#pragma omp parallel for if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i)
      po[i] = op(pa[i], pb[i]);
    return Status::ok();
  }
  if (a.numElements() == n && b.numElements() == 1) {
    float s = pb[0];
#pragma omp parallel for if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i)
      po[i] = op(pa[i], s);
    return Status::ok();
  }
  forEachBroadcast(out.shape, broadcastStrides(a.shape, out.shape), broadcastStrides(b.shape, out.shape),
                   [&](int64_t i, int64_t ia, int64_t ib) { po[i] = op(pa[ia], pb[ib]); });
  return Status::ok();
}

template <typename Op> Status unary(const KernelCall &call, Op op) {
  const float *in = call.inputs[0].f32();
  float *out = call.outputs[0].f32();
  int64_t n = call.outputs[0].numElements();
  if (call.inputs[0].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": input and output sizes differ");
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    out[i] = op(in[i]);
  return Status::ok();
}

/// out = op(y, dy) elementwise: the shape of the gradient rules of unary ops.
template <typename Op> Status unaryGrad(const KernelCall &call, Op op) {
  const float *y = call.inputs[0].f32(), *dy = call.inputs[1].f32();
  float *out = call.outputs[0].f32();
  int64_t n = call.outputs[0].numElements();
  if (call.inputs[0].numElements() != n || call.inputs[1].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": operand sizes differ");
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    out[i] = op(y[i], dy[i]);
  return Status::ok();
}

Status matmul(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  bool transA = call.intAttr("transpose_a", 0), transB = call.intAttr("transpose_b", 0);
  if (a.shape.size() < 2 || b.shape.size() != 2 || (transA && a.shape.size() != 2))
    return FSDPC_ERROR(kInvalidArgument, "matmul: unsupported operand ranks ", shapeString(a.shape), " x ",
                       shapeString(b.shape));
  int64_t k = transA ? a.shape[0] : a.shape.back();
  int64_t m = transA ? a.shape[1] : a.numElements() / k;
  int64_t kb = transB ? b.shape[1] : b.shape[0];
  int64_t n = transB ? b.shape[0] : b.shape[1];
  if (k != kb || c.numElements() != m * n)
    return FSDPC_ERROR(kInvalidArgument, "matmul: shapes ", shapeString(a.shape), " x ", shapeString(b.shape),
                       " do not match output ", shapeString(c.shape));
  // matmul_bias: C starts as the bias in every row and the GEMM adds to it,
  // as torch's addmm does for a Linear layer.
  const float *bias = call.inputs.size() > 2 ? call.inputs[2].f32() : nullptr;
  if (bias && call.inputs[2].numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, "matmul_bias: bias of ", call.inputs[2].numElements(),
                       " elements for ", n, " columns");
  if (m == 0 || n == 0)
    return Status::ok();
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c.f32()[i * n + j] = bias ? bias[j] : 0.0f;
    return Status::ok();
  }
  // Row blocks of C, one per thread: rows of op(A) start at row r of A, or
  // at column r when A is transposed.
  int threads = m * n * k >= (1 << 18) ? std::min<int64_t>(omp_get_max_threads(), m) : 1;
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    int64_t begin = m * t / threads, end = m * (t + 1) / threads;
    if (begin == end)
      continue;
    if (bias)
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(c.f32() + i * n, bias, n * sizeof(float));
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, end - begin, n,
                k, 1.0f, a.f32() + (transA ? begin : begin * k), transA ? m : k, b.f32(), transB ? k : n,
                bias ? 1.0f : 0.0f, c.f32() + begin * n, n);
  }
  return Status::ok();
}

/// One sgemm per index of the broadcast batch dimensions.
Status batchMatmul(const KernelCall &call) {
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  bool transA = call.intAttr("transpose_a", 0), transB = call.intAttr("transpose_b", 0);
  size_t ra = a.shape.size(), rb = b.shape.size(), rc = c.shape.size();
  if (ra < 2 || rb < 2 || rc < 2)
    return FSDPC_ERROR(kInvalidArgument, "batch_matmul: operands must have rank 2 or more");
  int64_t m = transA ? a.shape[ra - 1] : a.shape[ra - 2], k = transA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = transB ? b.shape[rb - 1] : b.shape[rb - 2], n = transB ? b.shape[rb - 2] : b.shape[rb - 1];
  std::vector<int64_t> batch(c.shape.begin(), c.shape.end() - 2);
  std::vector<int64_t> batchA(a.shape.begin(), a.shape.end() - 2), batchB(b.shape.begin(), b.shape.end() - 2);
  if (k != kb || c.shape[rc - 2] != m || c.shape[rc - 1] != n || !broadcastsTo(batchA, batch) ||
      !broadcastsTo(batchB, batch))
    return FSDPC_ERROR(kInvalidArgument, "batch_matmul: shapes ", shapeString(a.shape), " x ", shapeString(b.shape),
                       " do not match output ", shapeString(c.shape));
  std::vector<int64_t> stridesA = broadcastStrides(batchA, batch), stridesB = broadcastStrides(batchB, batch);
  int64_t count = elementCount(batch);
  const float *pa = a.f32(), *pb = b.f32();
  float *pc = c.f32();
#pragma omp parallel for if (count > 1 && m * n * k > 4096)
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offA = 0, offB = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t index = rest % batch[d];
      rest /= batch[d];
      offA += index * stridesA[d];
      offB += index * stridesB[d];
    }
    float *out = pc + i * m * n;
    if (k == 0) {
      std::fill(out, out + m * n, 0.0f);
      continue;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                pa + offA * m * k, transA ? m : k, pb + offB * k * n, transB ? k : n, 0.0f, out, n);
  }
  return Status::ok();
}

/// Row-major strides of a shape, in elements.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Offset, under `strides`, of the element with row-major position `flat`
/// in `shape`.
int64_t offsetOf(int64_t flat, const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t offset = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    offset += (flat % shape[d]) * strides[d];
    flat /= shape[d];
  }
  return offset;
}

/// Calls body(row, offsets, count, steps) for each row (run along the last
/// dimension) of `shape`, in parallel: offsets[j] is where operand j's row
/// starts under strides[j], and steps[j] its stride along the row. The
/// div/mod work is per row, not per element.
template <size_t N, typename Body>
void forEachRow(const std::vector<int64_t> &shape, const std::array<std::vector<int64_t>, N> &strides, Body body) {
  int64_t total = elementCount(shape);
  if (total == 0)
    return;
  if (shape.empty()) {
    std::array<int64_t, N> offsets{}, steps{};
    body(0, offsets, 1, steps);
    return;
  }
  int64_t count = shape.back(), rows = total / count;
  std::vector<int64_t> outer(shape.begin(), shape.end() - 1);
  std::array<int64_t, N> steps;
  std::array<std::vector<int64_t>, N> outerStrides;
  for (size_t j = 0; j < N; ++j) {
    steps[j] = strides[j].back();
    outerStrides[j].assign(strides[j].begin(), strides[j].end() - 1);
  }
#pragma omp parallel for if (total > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    std::array<int64_t, N> offsets;
    for (size_t j = 0; j < N; ++j)
      offsets[j] = offsetOf(r, outer, outerStrides[j]);
    body(r, offsets, count, steps);
  }
}

Status reduceSum(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  std::vector<int64_t> axes = call.intListAttr("axes");
  std::vector<int64_t> keptShape, keptStrides, reducedShape, reducedStrides;
  std::vector<int64_t> strides = stridesOf(x.shape);
  for (size_t d = 0; d < x.shape.size(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    (reduced ? reducedShape : keptShape).push_back(x.shape[d]);
    (reduced ? reducedStrides : keptStrides).push_back(strides[d]);
  }
  int64_t outCount = elementCount(keptShape), reducedCount = elementCount(reducedShape);
  if (outCount != y.numElements())
    return FSDPC_ERROR(kInvalidArgument, "reduce_sum: output ", shapeString(y.shape), " does not fit input ",
                       shapeString(x.shape));
  const float *px = x.f32();
  float *py = y.f32();
#pragma omp parallel for if (outCount * reducedCount > kParallelThreshold)
  for (int64_t o = 0; o < outCount; ++o) {
    int64_t base = offsetOf(o, keptShape, keptStrides);
    double total = 0;
    for (int64_t r = 0; r < reducedCount; ++r)
      total += px[base + offsetOf(r, reducedShape, reducedStrides)];
    py[o] = static_cast<float>(total);
  }
  return Status::ok();
}

Status broadcastTo(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (!broadcastsTo(x.shape, y.shape) || x.dtype != y.dtype)
    return FSDPC_ERROR(kInvalidArgument, "broadcast_to: ", shapeString(x.shape), " does not broadcast to ",
                       shapeString(y.shape));
  size_t bytes = dtypeSize(x.dtype);
  const uint8_t *src = static_cast<const uint8_t *>(x.data);
  uint8_t *dst = static_cast<uint8_t *>(y.data);
  forEachRow<1>(y.shape, {broadcastStrides(x.shape, y.shape)},
                [&](int64_t row, const std::array<int64_t, 1> &offsets, int64_t count, const std::array<int64_t, 1> &steps) {
                  uint8_t *out = dst + row * count * bytes;
                  if (steps[0] == 1)
                    std::memcpy(out, src + offsets[0] * bytes, count * bytes);
                  else if (steps[0] == 0 && bytes == sizeof(float))
                    std::fill(reinterpret_cast<float *>(out), reinterpret_cast<float *>(out) + count,
                              *reinterpret_cast<const float *>(src + offsets[0] * bytes));
                  else
                    for (int64_t i = 0; i < count; ++i)
                      std::memcpy(out + i * bytes, src + (offsets[0] + i * steps[0]) * bytes, bytes);
                });
  return Status::ok();
}

Status concat(const KernelCall &call) {
  const TensorView &y = call.outputs[0];
  int64_t axis = call.intAttr("axis", 0);
  if (axis < 0 || axis >= static_cast<int64_t>(y.shape.size()))
    return FSDPC_ERROR(kInvalidArgument, "concat: axis ", axis, " is out of range");
  size_t bytes = dtypeSize(y.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= y.shape[d];
  for (size_t d = axis + 1; d < y.shape.size(); ++d)
    inner *= y.shape[d];
  uint8_t *dst = static_cast<uint8_t *>(y.data);
  int64_t rowBytes = y.shape[axis] * inner * bytes, placed = 0;
  for (const TensorView &x : call.inputs) {
    int64_t chunk = x.shape[axis] * inner * bytes;
    const uint8_t *src = static_cast<const uint8_t *>(x.data);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * rowBytes + placed, src + o * chunk, chunk);
    placed += chunk;
  }
  return Status::ok();
}

/// Where a strided slice starts in its input, and its stride per dimension.
struct SliceMap {
  std::vector<int64_t> strides;
  int64_t base = 0;
  SliceMap(const std::vector<int64_t> &inShape, const std::vector<int64_t> &starts, const std::vector<int64_t> &steps) {
    std::vector<int64_t> inStrides = stridesOf(inShape);
    for (size_t d = 0; d < inShape.size(); ++d) {
      base += starts[d] * inStrides[d];
      strides.push_back(steps[d] * inStrides[d]);
    }
  }
};

Status checkSlice(const char *kernel, const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                  const std::vector<int64_t> &starts, const std::vector<int64_t> &steps) {
  if (starts.size() != in.size() || steps.size() != in.size() || out.size() != in.size())
    return FSDPC_ERROR(kInvalidArgument, kernel, ": starts and steps need one entry per dimension");
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t last = starts[d] + (out[d] - 1) * steps[d];
    if (out[d] > 0 && (starts[d] < 0 || starts[d] >= in[d] || last < 0 || last >= in[d]))
      return FSDPC_ERROR(kInvalidArgument, kernel, ": dimension ", d, " reads outside [0, ", in[d], ")");
  }
  return Status::ok();
}

Status slice(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  std::vector<int64_t> starts = call.intListAttr("starts"), steps = call.intListAttr("steps");
  FSDPC_RETURN_IF_ERROR(checkSlice("slice", x.shape, y.shape, starts, steps));
  SliceMap map(x.shape, starts, steps);
  size_t bytes = dtypeSize(x.dtype);
  const uint8_t *src = static_cast<const uint8_t *>(x.data);
  uint8_t *dst = static_cast<uint8_t *>(y.data);
  forEachRow<1>(y.shape, {map.strides},
                [&](int64_t row, const std::array<int64_t, 1> &offsets, int64_t count, const std::array<int64_t, 1> &step) {
                  const uint8_t *in = src + (map.base + offsets[0]) * bytes;
                  uint8_t *out = dst + row * count * bytes;
                  if (step[0] == 1)
                    std::memcpy(out, in, count * bytes);
                  else
                    for (int64_t i = 0; i < count; ++i)
                      std::memcpy(out + i * bytes, in + i * step[0] * bytes, bytes);
                });
  return Status::ok();
}

Status sliceGrad(const KernelCall &call) {
  const TensorView &dy = call.inputs[0], &dx = call.outputs[0];
  std::vector<int64_t> starts = call.intListAttr("starts"), steps = call.intListAttr("steps");
  FSDPC_RETURN_IF_ERROR(checkSlice("slice_grad", dx.shape, dy.shape, starts, steps));
  std::fill(dx.f32(), dx.f32() + dx.numElements(), 0.0f);
  SliceMap map(dx.shape, starts, steps);
  // A slice reads distinct elements, so rows scatter without conflicts.
  forEachRow<1>(dy.shape, {map.strides},
                [&](int64_t row, const std::array<int64_t, 1> &offsets, int64_t count, const std::array<int64_t, 1> &step) {
                  float *out = dx.f32() + map.base + offsets[0];
                  const float *in = dy.f32() + row * count;
                  for (int64_t i = 0; i < count; ++i)
                    out[i * step[0]] = in[i];
                });
  return Status::ok();
}

/// The [outer, rows, inner] view of gathering along `axis`, checking indices.
struct GatherLayout {
  int64_t outer = 1, rows = 1, inner = 1, count = 1;
};

Status gatherLayout(const char *kernel, const std::vector<int64_t> &data, const TensorView &indices, int64_t axis,
                    GatherLayout &layout) {
  if (axis < 0 || axis >= static_cast<int64_t>(data.size()))
    return FSDPC_ERROR(kInvalidArgument, kernel, ": axis ", axis, " is out of range");
  for (int64_t d = 0; d < axis; ++d)
    layout.outer *= data[d];
  layout.rows = data[axis];
  for (size_t d = axis + 1; d < data.size(); ++d)
    layout.inner *= data[d];
  layout.count = indices.numElements();
  for (int64_t j = 0; j < layout.count; ++j) {
    int64_t index = indices.i64()[j];
    if (index < -layout.rows || index >= layout.rows)
      return FSDPC_ERROR(kInvalidArgument, kernel, ": index ", index, " is outside [", -layout.rows, ", ",
                         layout.rows, ")");
  }
  return Status::ok();
}

Status gather(const KernelCall &call) {
  const TensorView &data = call.inputs[0], &indices = call.inputs[1], &out = call.outputs[0];
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(gatherLayout("gather", data.shape, indices, call.intAttr("axis", 0), g));
  size_t bytes = dtypeSize(data.dtype);
  const uint8_t *src = static_cast<const uint8_t *>(data.data);
  uint8_t *dst = static_cast<uint8_t *>(out.data);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < g.count; ++j) {
      int64_t index = indices.i64()[j];
      index += index < 0 ? g.rows : 0;
      std::memcpy(dst + ((o * g.count + j) * g.inner) * bytes, src + ((o * g.rows + index) * g.inner) * bytes,
                  g.inner * bytes);
    }
  return Status::ok();
}

Status gatherGrad(const KernelCall &call) {
  const TensorView &dy = call.inputs[0], &indices = call.inputs[1], &dx = call.outputs[0];
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(gatherLayout("gather_grad", dx.shape, indices, call.intAttr("axis", 0), g));
  std::fill(dx.f32(), dx.f32() + dx.numElements(), 0.0f);
  // Sequential over indices, so repeated indices add up in a fixed order.
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < g.count; ++j) {
      int64_t index = indices.i64()[j];
      index += index < 0 ? g.rows : 0;
      float *row = dx.f32() + (o * g.rows + index) * g.inner;
      const float *grad = dy.f32() + (o * g.count + j) * g.inner;
      for (int64_t k = 0; k < g.inner; ++k)
        row[k] += grad[k];
    }
  return Status::ok();
}

Status select(const KernelCall &call) {
  const TensorView &c = call.inputs[0], &a = call.inputs[1], &b = call.inputs[2], &y = call.outputs[0];
  if (!broadcastsTo(c.shape, y.shape) || !broadcastsTo(a.shape, y.shape) || !broadcastsTo(b.shape, y.shape))
    return FSDPC_ERROR(kInvalidArgument, "select: operands do not broadcast to ", shapeString(y.shape));
  forEachRow<3>(y.shape, {broadcastStrides(c.shape, y.shape), broadcastStrides(a.shape, y.shape),
                          broadcastStrides(b.shape, y.shape)},
                [&](int64_t row, const std::array<int64_t, 3> &o, int64_t count, const std::array<int64_t, 3> &st) {
                  float *out = y.f32() + row * count;
                  const int64_t *pc = c.i64() + o[0];
                  const float *pa = a.f32() + o[1], *pb = b.f32() + o[2];
                  for (int64_t i = 0; i < count; ++i)
                    out[i] = pc[i * st[0]] ? pa[i * st[1]] : pb[i * st[2]];
                });
  return Status::ok();
}

Status cast(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  int64_t n = y.numElements();
  if (x.numElements() != n)
    return FSDPC_ERROR(kInvalidArgument, "cast: input and output sizes differ");
  if (call.intAttr("to_bool", 0)) {
    if (x.dtype != plan::I64 || y.dtype != plan::I64)
      return FSDPC_ERROR(kInvalidArgument, "cast: to_bool casts i64 to i64");
    std::transform(x.i64(), x.i64() + n, y.i64(), [](int64_t v) { return static_cast<int64_t>(v != 0); });
  } else if (x.dtype == y.dtype)
    std::memcpy(y.data, x.data, n * dtypeSize(x.dtype));
  else if (x.dtype == plan::F32)
    std::transform(x.f32(), x.f32() + n, y.i64(), [](float v) { return static_cast<int64_t>(v); });
  else
    std::transform(x.i64(), x.i64() + n, y.f32(), [](int64_t v) { return static_cast<float>(v); });
  return Status::ok();
}

Status trilu(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (x.shape.size() < 2 || x.numElements() != y.numElements())
    return FSDPC_ERROR(kInvalidArgument, "trilu: needs rank 2 or more and equal sizes");
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back(), k = call.intAttr("k", 0);
  bool upper = call.intAttr("upper", 1);
  int64_t n = y.numElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = (i / cols) % rows, c = i % cols;
    bool keep = upper ? c - r >= k : c - r <= k;
    y.f32()[i] = keep ? x.f32()[i] : 0.0f;
  }
  return Status::ok();
}

/// Dropout's keep decision for one element: a counter-based hash of
/// (seed, step, rank, index), so backward redraws forward's mask exactly.
bool keepElement(uint64_t seed, const StepContext &context, int64_t index, double ratio) {
  uint64_t x = seed ^ (static_cast<uint64_t>(context.step) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(context.rank) * 0xC2B2AE3D27D4EB4Full) ^ static_cast<uint64_t>(index);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0) >= ratio;
}

Status dropout(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  double ratio = call.floatAttr("ratio", 0.5);
  uint64_t seed = static_cast<uint64_t>(call.intAttr("seed", 0));
  StepContext context = call.context ? *call.context : StepContext();
  float scale = static_cast<float>(1.0 / (1.0 - ratio));
  int64_t n = y.numElements();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    y.f32()[i] = keepElement(seed, context, i, ratio) ? x.f32()[i] * scale : 0.0f;
  return Status::ok();
}

Status sumTo(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (!broadcastsTo(y.shape, x.shape))
    return FSDPC_ERROR(kInvalidArgument, "sum_to: ", shapeString(y.shape), " does not broadcast to ",
                       shapeString(x.shape));
  int64_t n = x.numElements(), m = y.numElements();
  const float *px = x.f32();
  float *py = y.f32();
  if (n == m) {
    std::memcpy(py, px, n * sizeof(float));
    return Status::ok();
  }
  std::fill(py, py + m, 0.0f);
  if (m == 0 || n == 0)
    return Status::ok();
  // The common case, a bias gradient: sum the rows of [rows, m].
  bool trailing = y.shape.size() <= x.shape.size();
  int64_t trailingCount = 1;
  for (size_t i = 0; trailing && i < y.shape.size(); ++i) {
    if (y.shape[y.shape.size() - 1 - i] != x.shape[x.shape.size() - 1 - i])
      trailing = false;
    trailingCount *= y.shape[y.shape.size() - 1 - i];
  }
  if (trailing && trailingCount == m) {
    int64_t rows = n / m;
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = px + r * m;
      for (int64_t j = 0; j < m; ++j)
        py[j] += row[j];
    }
    return Status::ok();
  }
  // Serial over rows of x (several land on the same y element), in order.
  std::vector<int64_t> stridesY = broadcastStrides(y.shape, x.shape);
  std::vector<int64_t> outer(x.shape.begin(), x.shape.end() - 1), outerY(stridesY.begin(), stridesY.end() - 1);
  int64_t count = x.shape.back(), rows = n / count, step = stridesY.back();
  for (int64_t r = 0; r < rows; ++r) {
    float *out = py + offsetOf(r, outer, outerY);
    const float *in = px + r * count;
    if (step == 0) {
      double total = 0;
      for (int64_t i = 0; i < count; ++i)
        total += in[i];
      out[0] += static_cast<float>(total);
    } else {
      for (int64_t i = 0; i < count; ++i)
        out[i] += in[i];
    }
  }
  return Status::ok();
}

/// Splits a shape around `axis` into [outer, axisSize, inner].
bool splitAroundAxis(const std::vector<int64_t> &shape, int64_t axis, int64_t &outer, int64_t &size, int64_t &inner) {
  int64_t rank = shape.size();
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return false;
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  size = shape[axis];
  return true;
}

/// Softmax-family kernels: `body(in..., out, count, stride)` runs on each
/// slice along the axis, with the slice's elements `stride` apart.
template <typename Body> Status alongAxis(const KernelCall &call, Body body) {
  int64_t outer, size, inner;
  if (!splitAroundAxis(call.outputs[0].shape, call.intAttr("axis", -1), outer, size, inner))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": axis out of range");
#pragma omp parallel for collapse(2) if (outer * size * inner > kParallelThreshold)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      body(o * size * inner + i, size, inner);
  return Status::ok();
}

Status softmax(const KernelCall &call) {
  const float *x = call.inputs[0].f32();
  float *y = call.outputs[0].f32();
  bool logOutput = call.instruction->op() == "log_softmax";
  return alongAxis(call, [&](int64_t base, int64_t size, int64_t stride) {
    const float *in = x + base;
    float *out = y + base;
    float maxValue = -INFINITY;
    for (int64_t j = 0; j < size; ++j)
      maxValue = std::max(maxValue, in[j * stride]);
    // Each exponential once: stored for softmax, only summed for log-softmax.
    double sum = 0;
    for (int64_t j = 0; j < size; ++j) {
      float e = vectorExp(in[j * stride] - maxValue);
      if (!logOutput)
        out[j * stride] = e;
      sum += e;
    }
    if (logOutput) {
      float logSum = static_cast<float>(std::log(sum));
      for (int64_t j = 0; j < size; ++j)
        out[j * stride] = in[j * stride] - maxValue - logSum;
    } else {
      float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < size; ++j)
        out[j * stride] *= inv;
    }
  });
}

/// softmax(where(mask, -inf, x * scale)) along the last axis.
Status maskedSoftmax(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &mask = call.inputs[1], &y = call.outputs[0];
  if (x.shape.empty() || x.shape != y.shape || !broadcastsTo(mask.shape, y.shape))
    return FSDPC_ERROR(kInvalidArgument, "masked_softmax: mask ", shapeString(mask.shape), " and input ",
                       shapeString(x.shape), " do not fit the output ", shapeString(y.shape));
  const float scale = static_cast<float>(call.floatAttr("scale", 1.0));
  const float *px = x.f32();
  const int64_t *pm = mask.i64();
  float *py = y.f32();
  forEachRow<1>(y.shape, {broadcastStrides(mask.shape, y.shape)},
                [&](int64_t row, const std::array<int64_t, 1> &maskOffset, int64_t count,
                    const std::array<int64_t, 1> &maskStep) {
                  const float *in = px + row * count;
                  const int64_t *masked = pm + maskOffset[0];
                  float *out = py + row * count;
                  float maxValue = -INFINITY;
                  for (int64_t j = 0; j < count; ++j) {
                    out[j] = masked[j * maskStep[0]] ? -INFINITY : in[j] * scale;
                    maxValue = std::max(maxValue, out[j]);
                  }
                  double sum = 0;
                  for (int64_t j = 0; j < count; ++j) {
                    out[j] = vectorExp(out[j] - maxValue);
                    sum += out[j];
                  }
                  const float inv = static_cast<float>(1.0 / sum);
                  for (int64_t j = 0; j < count; ++j)
                    out[j] *= inv;
                });
  return Status::ok();
}

Status softmaxGrad(const KernelCall &call) {
  // softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy)
  const float *y = call.inputs[0].f32(), *dy = call.inputs[1].f32();
  float *dx = call.outputs[0].f32();
  bool logInput = call.instruction->op() == "log_softmax_grad";
  return alongAxis(call, [&](int64_t base, int64_t size, int64_t stride) {
    double sum = 0;
    for (int64_t j = 0; j < size; ++j) {
      int64_t k = base + j * stride;
      sum += logInput ? dy[k] : dy[k] * y[k];
    }
    float s = static_cast<float>(sum);
    for (int64_t j = 0; j < size; ++j) {
      int64_t k = base + j * stride;
      dx[k] = logInput ? dy[k] - vectorExp(y[k]) * s : y[k] * (dy[k] - s);
    }
  });
}

constexpr float kSqrtTwoOverPi = 0.79788456080286536f;
constexpr float kInvSqrtTwoPi = 0.39894228040143268f;
constexpr float kGeluCubic = 0.044715f;

/// Whether a gelu instruction asks for the tanh form; fails on other values.
Status geluTanhForm(const KernelCall &call, bool &tanhForm) {
  std::string approximate = call.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": approximate must be none or tanh, got ",
                       approximate);
  tanhForm = approximate == "tanh";
  return Status::ok();
}

Status gelu(const KernelCall &call) {
  bool tanhForm;
  FSDPC_RETURN_IF_ERROR(geluTanhForm(call, tanhForm));
  if (tanhForm)
    return unary(call, [](float x) {
      return 0.5f * x * (1.0f + vectorTanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x)));
    });
  return unary(call, [](float x) { return 0.5f * x * twiceNormalCdf(x, vectorExp(-0.5f * x * x)); });
}

Status geluGrad(const KernelCall &call) {
  bool tanhForm;
  FSDPC_RETURN_IF_ERROR(geluTanhForm(call, tanhForm));
  if (tanhForm)
    return unaryGrad(call, [](float x, float dy) {
      const float t = vectorTanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x));
      return dy * (0.5f * (1.0f + t) +
                   0.5f * x * (1.0f - t * t) * kSqrtTwoOverPi * (1.0f + 3.0f * kGeluCubic * x * x));
    });
  return unaryGrad(call, [](float x, float dy) {
    const float gaussian = vectorExp(-0.5f * x * x);
    return dy * (0.5f * twiceNormalCdf(x, gaussian) + x * kInvSqrtTwoPi * gaussian);
  });
}

/// The [rows, cols] layout of a layer or RMS norm's input split at `axis`,
/// checked against the scale and the per-row statistics.
Status normLayout(const KernelCall &call, const TensorView &x, const TensorView &scale,
                       const TensorView &statistic, int64_t &rows, int64_t &cols) {
  int64_t axis = call.intAttr("axis", -1), rank = x.shape.size();
  if (axis < 0 || axis >= rank)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": axis ", axis, " is out of range for rank ", rank);
  rows = elementCount(std::vector<int64_t>(x.shape.begin(), x.shape.begin() + axis));
  cols = elementCount(std::vector<int64_t>(x.shape.begin() + axis, x.shape.end()));
  if (scale.numElements() != cols || statistic.numElements() != rows)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": scale of ", scale.numElements(),
                       " elements and statistics of ", statistic.numElements(), " do not fit ", shapeString(x.shape),
                       " normalised from axis ", axis);
  return Status::ok();
}

/// sum of term(0..n) in double, over eight independent lanes: the loop
/// vectorises and does not wait on one running sum's add latency.
template <typename Term> double laneSum(int64_t n, Term term) {
  double lanes[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k)
      lanes[k] += term(j + k);
  double total = 0;
  for (; j < n; ++j)
    total += term(j);
  for (int k = 0; k < 8; ++k)
    total += lanes[k];
  return total;
}

/// Row-wise normalisation shared by layer_norm and rms_norm: rms_norm is
/// layer_norm without centring or bias, so `mean` and `bias` are null for it
/// (the mean is then 0 and nothing is added).
void normalizeRows(const float *x, const float *scale, const float *bias, int64_t rows, int64_t cols,
                   double epsilon, float *y, float *mean, float *invStd) {
#pragma omp parallel for if (rows * cols > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols;
    const double mu = mean ? laneSum(cols, [&](int64_t j) { return static_cast<double>(row[j]); }) / cols : 0.0;
    const double squares = laneSum(cols, [&](int64_t j) { return (row[j] - mu) * (row[j] - mu); });
    const float m = static_cast<float>(mu), rs = static_cast<float>(1.0 / std::sqrt(squares / cols + epsilon));
    if (mean)
      mean[r] = m;
    invStd[r] = rs;
    float *out = y + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      out[j] = (row[j] - m) * rs * scale[j] + (bias ? bias[j] : 0.0f);
  }
}

/// The gradients of normalizeRows; `mean` and `dbias` are null for rms_norm.
void normalizeRowsGrad(const float *x, const float *scale, const float *mean, const float *invStd, const float *dy,
                       int64_t rows, int64_t cols, float *dx, float *dscale, float *dbias) {
#pragma omp parallel for if (rows * cols > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols, *g = dy + r * cols;
    const float m = mean ? mean[r] : 0.0f, rs = invStd[r];
    const double sumG = mean ? laneSum(cols, [&](int64_t j) { return static_cast<double>(g[j] * scale[j]); }) : 0.0;
    const double sumGX =
        laneSum(cols, [&](int64_t j) { return static_cast<double>(g[j] * scale[j] * ((row[j] - m) * rs)); });
    const float meanG = static_cast<float>(sumG / cols), meanGX = static_cast<float>(sumGX / cols);
    float *out = dx + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      out[j] = rs * (g[j] * scale[j] - meanG - (row[j] - m) * rs * meanGX);
  }
  // Column sums in row order, so every thread count gives the same bits.
  std::vector<double> sumScale(cols, 0.0), sumBias(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols, *g = dy + r * cols;
    const float m = mean ? mean[r] : 0.0f, rs = invStd[r];
    for (int64_t j = 0; j < cols; ++j) {
      sumScale[j] += g[j] * ((row[j] - m) * rs);
      sumBias[j] += g[j];
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    dscale[j] = static_cast<float>(sumScale[j]);
    if (dbias)
      dbias[j] = static_cast<float>(sumBias[j]);
  }
}

Status layerNorm(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1], &bias = call.inputs[2];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, scale, call.outputs[1], rows, cols));
  if (bias.numElements() != cols)
    return FSDPC_ERROR(kInvalidArgument, "layer_norm: bias has ", bias.numElements(), " elements, not ", cols);
  normalizeRows(x.f32(), scale.f32(), bias.f32(), rows, cols, call.floatAttr("epsilon", 1e-5),
                call.outputs[0].f32(), call.outputs[1].f32(), call.outputs[2].f32());
  return Status::ok();
}

Status layerNormGrad(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, scale, call.inputs[2], rows, cols));
  normalizeRowsGrad(x.f32(), scale.f32(), call.inputs[2].f32(), call.inputs[3].f32(), call.inputs[4].f32(), rows,
                    cols, call.outputs[0].f32(), call.outputs[1].f32(), call.outputs[2].f32());
  return Status::ok();
}

Status rmsNorm(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, scale, call.outputs[1], rows, cols));
  normalizeRows(x.f32(), scale.f32(), /*bias=*/nullptr, rows, cols, call.floatAttr("epsilon", 1e-6),
                call.outputs[0].f32(), /*mean=*/nullptr, call.outputs[1].f32());
  return Status::ok();
}

Status rmsNormGrad(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, scale, call.inputs[2], rows, cols));
  normalizeRowsGrad(x.f32(), scale.f32(), /*mean=*/nullptr, call.inputs[2].f32(), call.inputs[3].f32(), rows, cols,
                    call.outputs[0].f32(), call.outputs[1].f32(), /*dbias=*/nullptr);
  return Status::ok();
}

/// Checks labels and counts those that are not ignored.
Status countCrossEntropyLabels(const KernelCall &call, int64_t rows, int64_t classes, int64_t &counted) {
  const int64_t *labels = call.inputs[1].i64();
  int64_t ignoreIndex = call.intAttr("ignore_index", INT64_MIN);
  counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    if (labels[r] < 0 || labels[r] >= classes)
      return FSDPC_ERROR(kInvalidArgument, "softmax_cross_entropy: label ", labels[r], " at row ", r,
                         " is outside [0, ", classes, ")");
    ++counted;
  }
  return Status::ok();
}

Status crossEntropyShapes(const KernelCall &call, int64_t &rows, int64_t &classes) {
  const TensorView &logits = call.inputs[0], &labels = call.inputs[1];
  if (logits.shape.size() != 2 || labels.numElements() != logits.shape[0] || labels.dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, "softmax_cross_entropy: logits ", shapeString(logits.shape),
                       " and int64 labels ", shapeString(labels.shape), " do not match");
  rows = logits.shape[0];
  classes = logits.shape[1];
  return Status::ok();
}

/// The row's maximum and sum of exp(x - max), in double as the loss needs.
void rowExpSum(const float *row, int64_t classes, float &maxValue, double &sum) {
  maxValue = *std::max_element(row, row + classes);
  sum = 0;
  // Exponentials in float chunks (a loop that vectorises), summed in double.
  constexpr int64_t kChunk = 64;
  float exps[kChunk];
  for (int64_t begin = 0; begin < classes; begin += kChunk) {
    const int64_t count = std::min(kChunk, classes - begin);
    for (int64_t c = 0; c < count; ++c)
      exps[c] = vectorExp(row[begin + c] - maxValue);
    for (int64_t c = 0; c < count; ++c)
      sum += exps[c];
  }
}

Status softmaxCrossEntropy(const KernelCall &call) {
  int64_t rows, classes, counted;
  FSDPC_RETURN_IF_ERROR(crossEntropyShapes(call, rows, classes));
  FSDPC_RETURN_IF_ERROR(countCrossEntropyLabels(call, rows, classes, counted));
  const float *logits = call.inputs[0].f32();
  const int64_t *labels = call.inputs[1].i64();
  int64_t ignoreIndex = call.intAttr("ignore_index", INT64_MIN);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    const float *row = logits + r * classes;
    float maxValue;
    double sum;
    rowExpSum(row, classes, maxValue, sum);
    total += std::log(sum) + maxValue - row[labels[r]];
  }
  bool mean = call.stringAttr("reduction", "mean") == "mean";
  // torch returns NaN for a mean over zero labels; so do we.
  call.outputs[0].f32()[0] = static_cast<float>(mean ? total / counted : total);
  return Status::ok();
}

Status softmaxCrossEntropyGrad(const KernelCall &call) {
  int64_t rows, classes, counted;
  FSDPC_RETURN_IF_ERROR(crossEntropyShapes(call, rows, classes));
  FSDPC_RETURN_IF_ERROR(countCrossEntropyLabels(call, rows, classes, counted));
  const float *logits = call.inputs[0].f32();
  const int64_t *labels = call.inputs[1].i64();
  float seed = call.inputs[2].f32()[0];
  bool mean = call.stringAttr("reduction", "mean") == "mean";
  float scale = mean ? seed / static_cast<float>(counted) : seed;
  int64_t ignoreIndex = call.intAttr("ignore_index", INT64_MIN);
  float *dlogits = call.outputs[0].f32();
#pragma omp parallel for if (rows * classes > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = logits + r * classes;
    float *out = dlogits + r * classes;
    if (labels[r] == ignoreIndex) {
      std::fill(out, out + classes, 0.0f);
      continue;
    }
    // softmax * scale, then the label's one-hot: loops without the label
    // compare vectorise.
    const float maxValue = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      out[c] = vectorExp(row[c] - maxValue);
    for (int64_t c = 0; c < classes; ++c)
      sum += out[c];
    const float factor = static_cast<float>(scale / sum);
    for (int64_t c = 0; c < classes; ++c)
      out[c] *= factor;
    out[labels[r]] -= scale;
  }
  return Status::ok();
}

Status mseLoss(const KernelCall &call) {
  const TensorView &pred = call.inputs[0], &target = call.inputs[1];
  if (pred.numElements() != target.numElements())
    return FSDPC_ERROR(kInvalidArgument, "mse_loss: prediction ", shapeString(pred.shape), " and target ",
                       shapeString(target.shape), " differ");
  int64_t n = pred.numElements();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = pred.f32()[i] - target.f32()[i];
    total += d * d;
  }
  call.outputs[0].f32()[0] = static_cast<float>(total / n);
  return Status::ok();
}

Status mseLossGrad(const KernelCall &call) {
  const float *pred = call.inputs[0].f32(), *target = call.inputs[1].f32();
  int64_t n = call.inputs[0].numElements();
  float scale = 2.0f * call.inputs[2].f32()[0] / static_cast<float>(n);
  float *out = call.outputs[0].f32();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i)
    out[i] = (pred[i] - target[i]) * scale;
  return Status::ok();
}

Status transpose(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  std::vector<int64_t> perm = call.intListAttr("perm");
  size_t rank = x.shape.size();
  if (perm.size() != rank)
    return FSDPC_ERROR(kInvalidArgument, "transpose: perm has ", perm.size(), " entries for rank ", rank);
  std::vector<int64_t> inStrides(rank);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    inStrides[d] = stride;
    stride *= x.shape[d];
  }
  std::vector<int64_t> permStrides(rank);
  for (size_t d = 0; d < rank; ++d)
    permStrides[d] = inStrides[perm[d]];
  const float *px = x.f32();
  float *py = y.f32();
  // Output rows in parallel; each reads its input elements a fixed stride apart.
  forEachRow<1>(y.shape, {permStrides},
                [&](int64_t row, const std::array<int64_t, 1> &offset, int64_t count,
                    const std::array<int64_t, 1> &step) {
                  float *out = py + row * count;
                  const float *in = px + offset[0];
                  for (int64_t i = 0; i < count; ++i)
                    out[i] = in[i * step[0]];
                });
  return Status::ok();
}

Status copy(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (x.numElements() != y.numElements() || x.dtype != y.dtype)
    return FSDPC_ERROR(kInvalidArgument, "copy: ", shapeString(x.shape), " and ", shapeString(y.shape), " differ");
  std::memcpy(y.data, x.data, x.numElements() * (x.dtype == plan::I64 ? 8 : 4));
  return Status::ok();
}

Status fill(const KernelCall &call) {
  float value = static_cast<float>(call.floatAttr("value", 0.0));
  std::fill(call.outputs[0].f32(), call.outputs[0].f32() + call.outputs[0].numElements(), value);
  return Status::ok();
}

int64_t optimizerStep(const KernelCall &call) { return call.inputs.back().i64()[0]; }

// torch.optim.SGD (1.13, foreach=False), in the same order of float operations.
Status sgdUpdate(const KernelCall &call) {
  const TensorView &param = call.inputs[0], &grad = call.inputs[1];
  float *p = param.f32();
  const float *g = grad.f32();
  int64_t n = param.numElements();
  double lr = call.floatAttr("lr", 1e-3), momentum = call.floatAttr("momentum", 0);
  double weightDecay = call.floatAttr("weight_decay", 0), dampening = call.floatAttr("dampening", 0);
  bool nesterov = call.intAttr("nesterov", 0);
  bool firstStep = optimizerStep(call) == 1;
  float *buf = momentum != 0 ? call.inputs[2].f32() : nullptr;
  float wd = static_cast<float>(weightDecay), mom = static_cast<float>(momentum);
  float damp = static_cast<float>(1 - dampening), negLr = static_cast<float>(-lr);
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    float d = weightDecay != 0 ? g[i] + wd * p[i] : g[i];
    if (buf) {
      buf[i] = firstStep ? d : buf[i] * mom + damp * d;
      d = nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] = p[i] + negLr * d;
  }
  return Status::ok();
}

// torch.optim.AdamW (1.13, foreach=False), in the same order of float operations.
Status adamwUpdate(const KernelCall &call) {
  float *p = call.inputs[0].f32();
  const float *g = call.inputs[1].f32();
  float *m = call.inputs[2].f32(), *v = call.inputs[3].f32();
  int64_t n = call.inputs[0].numElements();
  double lr = call.floatAttr("lr", 1e-3), beta1 = call.floatAttr("beta1", 0.9), beta2 = call.floatAttr("beta2", 0.999);
  double eps = call.floatAttr("eps", 1e-8), weightDecay = call.floatAttr("weight_decay", 0.01);
  int64_t step = optimizerStep(call);
  double biasCorrection1 = 1 - std::pow(beta1, static_cast<double>(step));
  double biasCorrection2 = 1 - std::pow(beta2, static_cast<double>(step));
  float decay = static_cast<float>(1 - lr * weightDecay);
  float b1 = static_cast<float>(beta1), oneMinusB1 = static_cast<float>(1 - beta1);
  float b2 = static_cast<float>(beta2), oneMinusB2 = static_cast<float>(1 - beta2);
  float negStepSize = static_cast<float>(-(lr / biasCorrection1));
  float bc2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  float epsF = static_cast<float>(eps);
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    p[i] = p[i] * decay;
    m[i] = m[i] * b1;
    m[i] = m[i] + oneMinusB1 * g[i];
    v[i] = v[i] * b2;
    v[i] = v[i] + oneMinusB2 * (g[i] * g[i]);
    float denom = std::sqrt(v[i]) / bc2Sqrt + epsF;
    p[i] = p[i] + negStepSize * (m[i] / denom);
  }
  return Status::ok();
}

// The CPU backend's kernel table: one entry for every signature of the
// kernel contract (test/unit/KernelsTest.cpp checks both ways).
const std::unordered_map<std::string, KernelFn> &registry() {
  static const std::unordered_map<std::string, KernelFn> table = {
      {"matmul", matmul},
      {"matmul_bias", matmul},
      {"add", [](const KernelCall &c) { return binaryBroadcast(c, [](float a, float b) { return a + b; }); }},
      {"sub", [](const KernelCall &c) { return binaryBroadcast(c, [](float a, float b) { return a - b; }); }},
      {"mul", [](const KernelCall &c) { return binaryBroadcast(c, [](float a, float b) { return a * b; }); }},
      {"div", [](const KernelCall &c) { return binaryBroadcast(c, [](float a, float b) { return a / b; }); }},
      {"batch_matmul", batchMatmul},
      {"reduce_sum", reduceSum},
      {"broadcast_to", broadcastTo},
      {"concat", concat},
      {"slice", slice},
      {"slice_grad", sliceGrad},
      {"gather", gather},
      {"gather_grad", gatherGrad},
      {"select", select},
      {"cast", cast},
      {"trilu", trilu},
      {"dropout", dropout},
      {"dropout_grad", dropout},
      {"pow", [](const KernelCall &c) {
                 // Small integer exponents (GELU's x^3, x^2 in norms) as products, as torch does.
                 return binaryBroadcast(c, [](float a, float b) {
                   return b == 2.0f ? a * a : b == 3.0f ? a * a * a : b == 1.0f ? a : std::pow(a, b);
                 });
               }},
      {"neg", [](const KernelCall &c) { return unary(c, [](float x) { return -x; }); }},
      {"exp", [](const KernelCall &c) { return unary(c, [](float x) { return std::exp(x); }); }},
      {"log", [](const KernelCall &c) { return unary(c, [](float x) { return std::log(x); }); }},
      {"sqrt", [](const KernelCall &c) { return unary(c, [](float x) { return std::sqrt(x); }); }},
      {"erf", [](const KernelCall &c) { return unary(c, [](float x) { return std::erf(x); }); }},
      {"reciprocal", [](const KernelCall &c) { return unary(c, [](float x) { return 1.0f / x; }); }},
      {"scale",
       [](const KernelCall &c) {
          float factor = static_cast<float>(c.floatAttr("factor", 1.0));
          return unary(c, [factor](float x) { return x * factor; });
        }},
      {"relu", [](const KernelCall &c) { return unary(c, [](float x) { return x > 0 ? x : 0.0f; }); }},
      {"tanh", [](const KernelCall &c) { return unary(c, [](float x) { return std::tanh(x); }); }},
      {"sigmoid", [](const KernelCall &c) { return unary(c, [](float x) { return 1.0f / (1.0f + std::exp(-x)); }); }},
      {"relu_grad",
       [](const KernelCall &c) { return unaryGrad(c, [](float y, float dy) { return y > 0 ? dy : 0.0f; }); }},
      {"tanh_grad",
       [](const KernelCall &c) { return unaryGrad(c, [](float y, float dy) { return dy * (1 - y * y); }); }},
      {"sigmoid_grad",
       [](const KernelCall &c) { return unaryGrad(c, [](float y, float dy) { return dy * (y * (1 - y)); }); }},
      {"gelu", gelu},
      {"gelu_grad", geluGrad},
      {"layer_norm", layerNorm},
      // input, scale, mean, inv_std_dev, dy -> dinput, dscale, dbias
      {"layer_norm_grad", layerNormGrad},
      {"rms_norm", rmsNorm},
      // input, scale, inv_rms, dy -> dinput, dscale
      {"rms_norm_grad", rmsNormGrad},
      {"softmax", softmax},
      {"masked_softmax", maskedSoftmax},
      {"log_softmax", softmax},
      {"softmax_grad", softmaxGrad},
      {"log_softmax_grad", softmaxGrad},
      {"softmax_cross_entropy", softmaxCrossEntropy},
      {"softmax_cross_entropy_grad", softmaxCrossEntropyGrad},
      {"mse_loss", mseLoss},
      {"mse_loss_grad", mseLossGrad},
      {"sum_to", sumTo},
      {"transpose", transpose},
      {"copy", copy},
      {"fill", fill},
      // param, grad, [momentum_buffer], step -> param, [momentum_buffer]
      {"sgd_update", sgdUpdate},
      // param, grad, exp_avg, exp_avg_sq, step -> param, exp_avg, exp_avg_sq
      {"adamw_update", adamwUpdate},
  };
  return table;
}

} // namespace

KernelFn lookupKernel(const std::string &name) {
  static const bool blasSingleThreaded = [] {
    if (openblas_set_num_threads)
      openblas_set_num_threads(1);
    return true;
  }();
  (void)blasSingleThreaded;
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

std::vector<std::string> cpuKernelNames() {
  std::vector<std::string> names;
  for (const auto &entry : registry())
    names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace fsdpc::runtime
