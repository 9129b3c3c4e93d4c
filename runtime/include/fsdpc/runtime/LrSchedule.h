//===- LrSchedule.h - learning-rate schedules --------------------*- C++ -*-===//
//
// The learning rate of each optimizer step, as a torch training loop gets it
// from transformers' get_constant_schedule_with_warmup /
// get_linear_schedule_with_warmup / get_cosine_schedule_with_warmup through
// torch's LambdaLR: step s (1-based, the plan's step counter) uses
// lr * lambda(s - 1). With min_lr, the decay after warm-up ends at min_lr
// instead of 0 (transformers' get_cosine_with_min_lr_schedule_with_warmup:
// factor * (1 - min_lr / lr) + min_lr / lr). In double, as Python computes
// it. The optimizer kernels of both backends and fsdp-run's metrics call it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_LRSCHEDULE_H
#define FSDPC_RUNTIME_LRSCHEDULE_H

#include "fsdpc/runtime/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <string>


namespace fsdpc::runtime {

enum LrScheduleKind : int { kLrConstant = 0, kLrLinear = 1, kLrCosine = 2 };

/// The kind named `name` ("constant", "linear", "cosine"), or -1.
inline int lrScheduleKind(const std::string &name) {
  return name == "constant" ? kLrConstant : name == "linear" ? kLrLinear : name == "cosine" ? kLrCosine : -1;
}

FSDPC_HOST_DEVICE inline double scheduledLr(double lr, int kind, int64_t warmup, int64_t total, double minLr,
                                            int64_t step) {
  const double current = static_cast<double>(step - 1);
  if (current < static_cast<double>(warmup))
    return lr * (current / static_cast<double>(warmup > 1 ? warmup : 1));
  if (kind == kLrConstant)
    return lr;
  const double span = static_cast<double>(total - warmup > 1 ? total - warmup : 1);
  double factor;
  if (kind == kLrLinear) {
    factor = static_cast<double>(total) - current;
    factor = factor / span;
  } else {
    const double progress = (current - static_cast<double>(warmup)) / span;
    factor = 0.5 * (1.0 + std::cos(3.14159265358979323846 * 2.0 * 0.5 * progress));
  }
  factor = factor > 0.0 ? factor : 0.0;
  if (minLr > 0.0 && lr > 0.0)
    factor = factor * (1.0 - minLr / lr) + minLr / lr;
  return lr * factor;
}

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_LRSCHEDULE_H
