// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s

// Tests that a program with every kind of instruction prints and parses back.
// CHECK-LABEL: plan.program @train_step
plan.program @train_step attributes {world_size = 2 : i64, global_batch = 8 : i64, loss = @loss, loss_kind = #plan.loss_kind<cross_entropy>, optimizer = "adamw", num_classes = 5 : i64, shard_group_size = 2 : i64, strategy = #plan.strategy<full_shard>, source = "mlp.onnx", opset = 13 : i64} {
  // CHECK: plan.tensor @x input : tensor<4x3xf32> {source_name = "input"}
  plan.tensor @x input : tensor<4x3xf32> {source_name = "input"}
  plan.tensor @w parameter : tensor<5x3xf32> {source_name = "fc.weight"}
  plan.tensor @shard parameter : tensor<8xf32> {source_name = "u.flat_param", unit = "u"}
  // CHECK: plan.unit "u" params ["fc.weight"] : [tensor<5x3xf32>] flat_size 15 padded_size 16 shard @shard
  plan.unit "u" params ["fc.weight"] : [tensor<5x3xf32>] flat_size 15 padded_size 16 shard @shard
  plan.tensor @m optimizer_state : tensor<5x3xf32> {optimizer_slot = "exp_avg", owner = "fc.weight"}
  plan.tensor @c constant : tensor<2xi64> {value = dense<[1, 2]> : tensor<2xi64>}
  plan.tensor @step step_counter : tensor<i64>
  plan.tensor @h transient : tensor<4x5xf32>
  plan.tensor @full transient : tensor<30xf32>
  plan.tensor @loss transient : tensor<f32>
  // CHECK: plan.kernel "matmul" ins [@x, @w] outs [@h] on compute {transpose_b = true}
  plan.kernel "matmul" ins [@x, @w] outs [@h] on compute {transpose_b = true}
  // CHECK: plan.record_event 0 on compute
  plan.record_event 0 on compute
  // CHECK: plan.wait_event 0 on communication
  plan.wait_event 0 on communication
  // CHECK: plan.collective all_gather ins [@w] outs [@full] on communication {group_size = 2 : i64}
  plan.collective all_gather ins [@w] outs [@full] on communication {group_size = 2 : i64}
  plan.kernel "fill" ins [] outs [@loss] on compute {value = 0.0 : f64}
}
