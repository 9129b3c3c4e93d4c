// RUN: fsdp-opt %s -split-input-file -convert-graph-to-plan | FileCheck %s

// Tests that arguments become tensors of their kind, ops become kernels,
// optimizer updates write their operands in place and the loss is recorded.
// CHECK-LABEL: plan.program @train_step
// CHECK-SAME: global_batch = 4 : i64
// CHECK-SAME: loss = @[[LOSS:t[0-9]+]]
// CHECK-DAG: plan.tensor @input input : tensor<4x3xf32> {source_name = "input"}
// CHECK-DAG: plan.tensor @w parameter : tensor<5x3xf32> {source_name = "w"}
// CHECK-DAG: plan.tensor @step step_counter : tensor<i64>
// CHECK-DAG: plan.tensor @w.exp_avg optimizer_state : tensor<5x3xf32> {optimizer_slot = "exp_avg", owner = "w"}
// CHECK: plan.kernel "fill" ins [] outs [@t0] on compute {value = 1.000000e+00 : f64}
// CHECK: plan.kernel "matmul" ins [@input, @w] outs [@t{{[0-9]+}}] on compute {transpose_a = false, transpose_b = true}
// CHECK: plan.kernel "mse_loss" ins [@t{{[0-9]+}}, @labels] outs [@[[LOSS]]]
// CHECK: plan.kernel "copy"
// CHECK: plan.kernel "adamw_update" ins [@w, @{{.*}}, @w.exp_avg, @w.exp_avg_sq, @step] outs [@w, @w.exp_avg, @w.exp_avg_sq] on compute
// CHECK-NOT: func.func
module attributes {graph.loss_kind = "mse", graph.optimizer = "adamw"} {
  func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}, %t: tensor<4x5xf32> {graph.input = "labels"}, %step: tensor<i64> {graph.step}, %m: tensor<5x3xf32> {graph.state_of = "w", graph.state_slot = "exp_avg"}, %v: tensor<5x3xf32> {graph.state_of = "w", graph.state_slot = "exp_avg_sq"}) -> (tensor<f32> {graph.loss}, tensor<5x3xf32> {graph.updates = 1 : i64}, tensor<5x3xf32> {graph.updates = 4 : i64}, tensor<5x3xf32> {graph.updates = 5 : i64}) {
    %one = graph.constant dense<1.0> : tensor<f32>
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %1 = graph.mse_loss %0, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
    %2 = graph.reshape %0 : (tensor<4x5xf32>) -> tensor<20xf32>
    %3 = graph.reshape %2 : (tensor<20xf32>) -> tensor<5x4xf32>
    %4 = graph.matmul %3, %x : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
    %p, %nm, %nv = graph.adamw_update %w, %4, %m, %v, step %step {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<i64>) -> (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>)
    return %1, %p, %nm, %nv : tensor<f32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>
  }
}
