//===- Optimizers.cpp - optimizer kernels -----------------------------------===//
#include "CpuKernels.h"
#include "fsdpc/runtime/LrSchedule.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

int64_t optimizerStep(const KernelCall &call) { return call.inputs.back().i64()[0]; }

/// This step's learning rate: `lr` along the instruction's schedule.
Status stepLr(const KernelCall &call, int64_t step, double &lr) {
  const int kind = lrScheduleKind(call.stringParam(contract::Param::kLrSchedule, "constant"));
  if (kind < 0)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": unknown lr_schedule '",
                       call.stringParam(contract::Param::kLrSchedule, ""), "'");
  lr = scheduledLr(call.floatParam(contract::Param::kLr, 1e-3), kind, call.intParam(contract::Param::kWarmupSteps, 0),
                   call.intParam(contract::Param::kTotalSteps, 0), call.floatParam(contract::Param::kMinLr, 0), step);
  return Status::ok();
}

// torch.optim.SGD (1.13, foreach=False), in the same order of float operations.
Status sgdUpdate(const KernelCall &call) {
  const TensorView &param = call.inputs[0], &grad = call.inputs[1];
  float *p = param.f32();
  const float *g = grad.f32();
  int64_t n = param.numElements();
  double lr, momentum = call.floatParam(contract::Param::kMomentum, 0);
  FSDPC_RETURN_IF_ERROR(stepLr(call, optimizerStep(call), lr));
  double weightDecay = call.floatParam(contract::Param::kWeightDecay, 0), dampening = call.floatParam(contract::Param::kDampening, 0);
  bool nesterov = call.intParam(contract::Param::kNesterov, 0);
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
  double beta1 = call.floatParam(contract::Param::kBeta1, 0.9), beta2 = call.floatParam(contract::Param::kBeta2, 0.999);
  double eps = call.floatParam(contract::Param::kEps, 1e-8), weightDecay = call.floatParam(contract::Param::kWeightDecay, 0.01);
  int64_t step = optimizerStep(call);
  double lr;
  FSDPC_RETURN_IF_ERROR(stepLr(call, step, lr));
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

// Gradient clipping, torch.nn.utils.clip_grad_norm_ (error_if_nonfinite off).
Status sumSquares(const KernelCall &call) {
  const TensorView &y = call.outputs[0];
  if (y.numElements() != 1 || y.dtype != plan::F32)
    return FSDPC_ERROR(kInvalidArgument, "sum_squares: output must be one f32 element");
  double total = 0;
  for (const TensorView &x : call.inputs) {
    if (x.dtype != plan::F32)
      return FSDPC_ERROR(kInvalidArgument, "sum_squares: inputs must be f32");
    const float *px = x.f32();
    for (int64_t i = 0, n = x.numElements(); i < n; ++i)
      total += static_cast<double>(px[i]) * px[i];
  }
  y.f32()[0] = static_cast<float>(total);
  return Status::ok();
}

Status clipCoefficient(const KernelCall &call) {
  const TensorView &sq = call.inputs[0], &scale = call.outputs[0], &norm = call.outputs[1];
  if (sq.numElements() != 1 || scale.numElements() != 1 || norm.numElements() != 1)
    return FSDPC_ERROR(kInvalidArgument, "clip_coefficient: operands must be one element each");
  // In f32, as torch: total_norm is a float tensor, and
  // max_norm / (total_norm + 1e-6) and the clamp stay in float.
  const float total = std::sqrt(sq.f32()[0]);
  const float coefficient = static_cast<float>(call.floatParam(contract::Param::kMaxNorm, 1.0)) / (total + 1e-6f);
  norm.f32()[0] = total;
  scale.f32()[0] = std::min(coefficient, 1.0f);
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu
