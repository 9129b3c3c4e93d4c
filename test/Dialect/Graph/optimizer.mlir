// RUN: fsdp-opt %s -split-input-file -graph-optimizer | FileCheck %s --check-prefix=ADAMW
// RUN: fsdp-opt %s -split-input-file -graph-optimizer="optimizer=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %s -split-input-file -graph-optimizer="optimizer=sgd" | FileCheck %s --check-prefix=PLAIN
// RUN: fsdp-opt %s -split-input-file -graph-optimizer="lr-schedule=cosine warmup-steps=10 total-steps=100 min-lr=1e-5" | FileCheck %s --check-prefix=SCHEDULE
// RUN: not fsdp-opt %s -split-input-file -graph-optimizer="lr-schedule=linear warmup-steps=10 total-steps=10" 2>&1 | FileCheck %s --check-prefix=BADSCHEDULE

// Tests that gradients become optimizer updates that overwrite their arguments.
// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME: %[[STEP:arg[0-9]+]]: tensor<i64> {graph.step}
// ADAMW-SAME: {graph.state_of = "w", graph.state_slot = "exp_avg"}
// ADAMW-SAME: {graph.state_of = "w", graph.state_slot = "exp_avg_sq"}
// ADAMW-SAME: -> (tensor<f32> {graph.loss}, tensor<5xf32> {graph.updates = 0 : i64}, tensor<5xf32> {graph.updates = 3 : i64}, tensor<5xf32> {graph.updates = 4 : i64})
// ADAMW: graph.adamw_update %arg0, %arg1, %arg3, %arg4, step %[[STEP]] {{{.*}}weight_decay = 1.000000e-02 : f64}
// SGD-LABEL: func.func @train_step
// SGD-SAME: {graph.state_of = "w", graph.state_slot = "momentum_buffer"}
// SGD: graph.sgd_update %arg0, %arg1 state(%arg3) step %arg2
// SGD-SAME: momentum = 9.000000e-01
// PLAIN: graph.sgd_update %arg0, %arg1 step %arg2
// PLAIN-SAME: weight_decay = 0.000000e+00
// PLAIN-NOT: lr_schedule
// A schedule rides on every update: lr is its peak.
// SCHEDULE: module attributes {{{.*}}cosine schedule (warmup 10, total 100, min_lr 1e-05)
// SCHEDULE: graph.adamw_update {{.*}}lr = 1.000000e-03 : f64, lr_schedule = #graph.lr_schedule<cosine>, min_lr = 1.000000e-05 : f64, total_steps = 100 : i64, warmup_steps = 10 : i64
// BADSCHEDULE: graph-optimizer: warmup-steps and min-lr must be non-negative, and linear and cosine schedules need total-steps above warmup-steps
func.func @train_step(%w: tensor<5xf32> {graph.param = "w"}, %g: tensor<5xf32>) -> (tensor<f32> {graph.loss}, tensor<5xf32> {graph.grad_of = "w"}) {
  %0 = graph.constant dense<0.0> : tensor<f32>
  return %0, %g : tensor<f32>, tensor<5xf32>
}
