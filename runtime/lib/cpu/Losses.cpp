//===- Losses.cpp - loss kernels --------------------------------------------===//
#include "CpuKernels.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace fsdpc::runtime::cpu {

namespace {

/// What the three cross-entropy kernels read of a call: the shapes, the
/// labels checked and counted, and the parameters, decoded once.
struct CrossEntropyCall {
  const float *logits;
  const int64_t *labels;
  // A row holds `pitch` logits, its first `classes` the classes (the rest
  // padding: no part in the loss, a zero gradient).
  int64_t rows, pitch, classes, counted, ignoreIndex;
  bool mean;
  /// The gradient's factor: the seed, over the counted labels for a mean.
  /// Only with `seeded`.
  float scale = 0.0f;
};

Status readCrossEntropy(const KernelCall &call, bool seeded, CrossEntropyCall &ce) {
  const TensorView &logits = call.inputs[0], &labels = call.inputs[1];
  if (logits.shape.size() != 2 || labels.numElements() != logits.shape[0] || labels.dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, "softmax_cross_entropy: logits ", shapeString(logits.shape),
                       " and int64 labels ", shapeString(labels.shape), " do not match");
  ce.logits = logits.f32();
  ce.labels = labels.i64();
  ce.rows = logits.shape[0];
  ce.pitch = logits.shape[1];
  ce.classes = call.intParam(contract::Param::kClasses, ce.pitch);
  ce.ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
  ce.mean = call.stringParam(contract::Param::kReduction, "mean") == "mean";
  ce.counted = 0;
  for (int64_t r = 0; r < ce.rows; ++r) {
    if (ce.labels[r] == ce.ignoreIndex)
      continue;
    if (ce.labels[r] < 0 || ce.labels[r] >= ce.classes)
      return FSDPC_ERROR(kInvalidArgument, "softmax_cross_entropy: label ", ce.labels[r], " at row ", r,
                         " is outside [0, ", ce.classes, ")");
    ++ce.counted;
  }
  if (seeded) {
    const float seed = call.inputs[2].f32()[0];
    ce.scale = ce.mean ? seed / static_cast<float>(ce.counted) : seed;
  }
  return Status::ok();
}

/// The loss from the rows' losses (those of ignored rows unread), in row
/// order. torch returns NaN for a mean over zero labels; so do we.
float totalLoss(const CrossEntropyCall &ce, const double *rowLoss) {
  double total = 0;
  for (int64_t r = 0; r < ce.rows; ++r)
    if (ce.labels[r] != ce.ignoreIndex)
      total += rowLoss[r];
  return static_cast<float>(ce.mean ? total / ce.counted : total);
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

/// What the loss needs of a row, read before its gradient is written.
struct RowStatistics {
  float maxValue, labelLogit;
  double sum; // of exp(x - max), in double as the loss needs
};

/// One row's gradient, softmax times `scale` minus `scale` at the label,
/// into `out`, which may be `row` (the gradient over the logits): the
/// maximum and the label's logit are read first, and each element before
/// its own write. The exponentials and the scale are loops without the
/// label compare, which vectorise. The sum adds the same exponentials in
/// the same order as rowExpSum.
RowStatistics writeRowGradient(const float *row, float *out, int64_t classes, int64_t label, float scale) {
  RowStatistics stats{*std::max_element(row, row + classes), row[label], 0.0};
  for (int64_t c = 0; c < classes; ++c)
    out[c] = vectorExp(row[c] - stats.maxValue);
  for (int64_t c = 0; c < classes; ++c)
    stats.sum += out[c];
  const float factor = static_cast<float>(scale / stats.sum);
  for (int64_t c = 0; c < classes; ++c)
    out[c] *= factor;
  out[label] -= scale;
  return stats;
}

} // namespace

Status softmaxCrossEntropy(const KernelCall &call) {
  CrossEntropyCall ce;
  FSDPC_RETURN_IF_ERROR(readCrossEntropy(call, /*seeded=*/false, ce));
  std::vector<double> rowLoss(ce.rows, 0.0);
#pragma omp parallel for if (ce.rows * ce.classes > kParallelThreshold)
  for (int64_t r = 0; r < ce.rows; ++r) {
    if (ce.labels[r] == ce.ignoreIndex)
      continue;
    const float *row = ce.logits + r * ce.pitch;
    float maxValue;
    double sum;
    rowExpSum(row, ce.classes, maxValue, sum);
    rowLoss[r] = std::log(sum) + maxValue - row[ce.labels[r]];
  }
  call.outputs[0].f32()[0] = totalLoss(ce, rowLoss.data());
  return Status::ok();
}

Status softmaxCrossEntropyGrad(const KernelCall &call) {
  CrossEntropyCall ce;
  FSDPC_RETURN_IF_ERROR(readCrossEntropy(call, /*seeded=*/true, ce));
  float *dlogits = call.outputs[0].f32();
#pragma omp parallel for if (ce.rows * ce.classes > kParallelThreshold)
  for (int64_t r = 0; r < ce.rows; ++r) {
    float *out = dlogits + r * ce.pitch;
    if (ce.labels[r] == ce.ignoreIndex)
      std::fill(out, out + ce.classes, 0.0f);
    else
      writeRowGradient(ce.logits + r * ce.pitch, out, ce.classes, ce.labels[r], ce.scale);
    std::fill(out + ce.classes, out + ce.pitch, 0.0f);
  }
  return Status::ok();
}

/// softmax_cross_entropy and softmax_cross_entropy_grad of the same logits
/// in one pass: each row's maximum and sum once, the same arithmetic in the
/// same order as the two kernels, so the same bits. The gradient may be
/// written over the logits: a row's label logit and maximum are read before
/// any of its elements is written, and each element is read before its own
/// write.
Status softmaxCrossEntropyWithGrad(const KernelCall &call) {
  CrossEntropyCall ce;
  FSDPC_RETURN_IF_ERROR(readCrossEntropy(call, /*seeded=*/true, ce));
  float *dlogits = call.outputs[1].f32();
  std::vector<double> rowLoss(ce.rows, 0.0);
#pragma omp parallel for if (ce.rows * ce.classes > kParallelThreshold)
  for (int64_t r = 0; r < ce.rows; ++r) {
    float *out = dlogits + r * ce.pitch;
    std::fill(out + ce.classes, out + ce.pitch, 0.0f);
    if (ce.labels[r] == ce.ignoreIndex) {
      std::fill(out, out + ce.classes, 0.0f);
      continue;
    }
    const RowStatistics stats = writeRowGradient(ce.logits + r * ce.pitch, out, ce.classes, ce.labels[r], ce.scale);
    rowLoss[r] = std::log(stats.sum) + stats.maxValue - stats.labelLogit;
  }
  call.outputs[0].f32()[0] = totalLoss(ce, rowLoss.data());
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
