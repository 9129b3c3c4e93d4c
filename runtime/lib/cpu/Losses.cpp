//===- Losses.cpp - loss kernels --------------------------------------------===//
#include "CpuKernels.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

/// Checks labels and counts those that are not ignored.
Status countCrossEntropyLabels(const KernelCall &call, int64_t rows, int64_t classes, int64_t &counted) {
  const int64_t *labels = call.inputs[1].i64();
  int64_t ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
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
  int64_t ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
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
  bool mean = call.stringParam(contract::Param::kReduction, "mean") == "mean";
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
  bool mean = call.stringParam(contract::Param::kReduction, "mean") == "mean";
  float scale = mean ? seed / static_cast<float>(counted) : seed;
  int64_t ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
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

} // namespace fsdpc::runtime::cpu
