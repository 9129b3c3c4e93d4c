//===- Reductions.cpp - reductions and broadcasts ---------------------------===//
#include "CpuKernels.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

Status reduceSum(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  std::vector<int64_t> axes = call.intListParam(contract::Param::kAxes);
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

void sumRows(const float *x, int64_t rows, int64_t cols, float *out) {
  std::fill(out, out + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      out[j] += row[j];
  }
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
    sumRows(px, n / m, m, py);
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

} // namespace fsdpc::runtime::cpu
