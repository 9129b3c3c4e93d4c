//===- Norms.cpp - layer norm and RMS norm ----------------------------------===//
#include "CpuKernels.h"
#include "../KernelChecks.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

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
/// A non-null `addend` (accumulate) is added to dx, after dx is computed
/// as without it: the same f32 bits as the add it replaces.
void normalizeRowsGrad(const float *x, const float *scale, const float *mean, const float *invStd, const float *dy,
                       const float *addend, int64_t rows, int64_t cols, float *dx, float *dscale, float *dbias) {
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
    if (addend)
      for (int64_t j = 0; j < cols; ++j)
        out[j] += addend[r * cols + j];
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
  normalizeRows(x.f32(), scale.f32(), bias.f32(), rows, cols, call.floatParam(contract::Param::kEpsilon, 1e-5),
                call.outputs[0].f32(), call.outputs[1].f32(), call.outputs[2].f32());
  return Status::ok();
}

Status layerNormGrad(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, scale, call.inputs[2], rows, cols));
  normalizeRowsGrad(x.f32(), scale.f32(), call.inputs[2].f32(), call.inputs[3].f32(), call.inputs[4].f32(),
                    call.addend() ? call.addend()->f32() : nullptr, rows, cols, call.outputs[0].f32(),
                    call.outputs[1].f32(), call.outputs[2].f32());
  return Status::ok();
}

Status rmsNorm(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, scale, call.outputs[1], rows, cols));
  normalizeRows(x.f32(), scale.f32(), /*bias=*/nullptr, rows, cols, call.floatParam(contract::Param::kEpsilon, 1e-6),
                call.outputs[0].f32(), /*mean=*/nullptr, call.outputs[1].f32());
  return Status::ok();
}

Status rmsNormGrad(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &scale = call.inputs[1];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, scale, call.inputs[2], rows, cols));
  normalizeRowsGrad(x.f32(), scale.f32(), /*mean=*/nullptr, call.inputs[2].f32(), call.inputs[3].f32(),
                    call.addend() ? call.addend()->f32() : nullptr, rows, cols, call.outputs[0].f32(),
                    call.outputs[1].f32(), /*dbias=*/nullptr);
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu
