// RUN: fsdp-opt %s -split-input-file -pass-pipeline='builtin.module(plan.program(plan-allocate))' | FileCheck %s

// Tests that persistent tensors are packed 64-byte aligned and transient
// tensors with disjoint lifetimes share bytes.
// CHECK-LABEL: plan.program @p
// CHECK-SAME: persistent_bytes = 128 : i64
// CHECK-SAME: transient_bytes = 128 : i64
// CHECK-DAG: plan.tensor @w parameter : tensor<12xf32> {offset = 0 : i64
// CHECK-DAG: plan.tensor @s step_counter : tensor<i64> {offset = 64 : i64}
// CHECK-DAG: plan.tensor @a transient : tensor<16xf32> {offset = 0 : i64}
// CHECK-DAG: plan.tensor @b transient : tensor<16xf32> {offset = 64 : i64}
// CHECK-DAG: plan.tensor @c transient : tensor<16xf32> {offset = 0 : i64}
plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = "mse", optimizer = "sgd"} {
  plan.tensor @w parameter : tensor<12xf32> {source_name = "w"}
  plan.tensor @s step_counter : tensor<i64>
  plan.tensor @a transient : tensor<16xf32>
  plan.tensor @b transient : tensor<16xf32>
  plan.tensor @c transient : tensor<16xf32>
  plan.tensor @l transient : tensor<f32>
  plan.kernel "fill" ins [] outs [@a] on compute {value = 1.0 : f64}
  plan.kernel "copy" ins [@a] outs [@b] on compute
  plan.kernel "copy" ins [@b] outs [@c] on compute
  plan.kernel "fill" ins [] outs [@l] on compute {value = 0.0 : f64}
}
