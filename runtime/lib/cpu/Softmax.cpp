//===- Softmax.cpp - softmax kernels ----------------------------------------===//
#include "CpuKernels.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

// A softmax row whose every score is -inf (a query whose keys are all
// masked: left padding under a causal mask; not a NaN, which stays NaN)
// gives zeros, as torch's
// scaled_dot_product_attention does (its _safe_softmax) and as exports
// write it, Where(IsNaN(softmax), 0, softmax). ONNX's softmax would give
// NaN there, and its gradient NaN, which the Where cannot stop (0 x NaN):
// one such row poisons every parameter. Zeros have a zero gradient.
// log_softmax keeps -inf - (-inf) = NaN: no export guards it.

/// Whether every element of a row is -inf (std::max skips NaNs, so a row
/// of NaNs also has the maximum -inf).
bool allNegativeInfinity(const float *row, int64_t size, int64_t stride) {
  for (int64_t j = 0; j < size; ++j)
    if (row[j * stride] != -INFINITY)
      return false;
  return true;
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
    if (!logOutput && maxValue == -INFINITY && allNegativeInfinity(in, size, stride)) {
      for (int64_t j = 0; j < size; ++j)
        out[j * stride] = 0.0f;
      return;
    }
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
  const float scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
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
                  if (maxValue == -INFINITY && allNegativeInfinity(out, count, 1)) { // every key masked: zeros
                    std::fill(out, out + count, 0.0f);
                    return;
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

} // namespace fsdpc::runtime::cpu
