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
plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
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

// -----

// Tests that a view takes its base's offset plus its own, and makes the base
// live while the view is used.
// CHECK-LABEL: plan.program @views
// CHECK-DAG: plan.tensor @flat transient : tensor<32xf32> {offset = 0 : i64}
// CHECK-DAG: plan.tensor @half view : tensor<16xf32> {offset = 64 : i64, view_of = @flat, view_offset = 64 : i64}
// CHECK-DAG: plan.tensor @other transient : tensor<16xf32> {offset = 128 : i64}
plan.program @views attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @flat transient : tensor<32xf32>
  plan.tensor @half view : tensor<16xf32> {view_of = @flat, view_offset = 64 : i64}
  plan.tensor @other transient : tensor<16xf32>
  plan.tensor @l transient : tensor<f32>
  plan.kernel "fill" ins [] outs [@flat] on compute {value = 1.0 : f64}
  plan.kernel "fill" ins [] outs [@other] on compute {value = 1.0 : f64}
  plan.kernel "copy" ins [@half] outs [@other] on compute
  plan.kernel "fill" ins [] outs [@l] on compute {value = 0.0 : f64}
}

// -----

// Tests that a loss that is a view (a reshaped result) keeps its base live
// until the step ends: @later may not take the base's bytes.
// CHECK-LABEL: plan.program @loss_view
// CHECK-DAG: plan.tensor @base transient : tensor<1xf32> {offset = 0 : i64}
// CHECK-DAG: plan.tensor @later transient : tensor<1xf32> {offset = 64 : i64}
plan.program @loss_view attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @base transient : tensor<1xf32>
  plan.tensor @l view : tensor<f32> {view_of = @base, view_offset = 0 : i64}
  plan.tensor @later transient : tensor<1xf32>
  plan.kernel "fill" ins [] outs [@base] on compute {value = 1.0 : f64}
  plan.kernel "fill" ins [] outs [@later] on compute {value = 2.0 : f64}
}

// -----

// Tests that a collective's tensors stay live until compute waits for it: the
// communication stream may still be reading @grad while compute runs on, so
// @later may not reuse its bytes before `wait_event 1 on compute`, and
// @after may.
// CHECK-LABEL: plan.program @async
// CHECK-DAG: plan.tensor @grad transient : tensor<16xf32> {offset = 0 : i64}
// CHECK-DAG: plan.tensor @later transient : tensor<16xf32> {offset = 64 : i64}
// CHECK-DAG: plan.tensor @after transient : tensor<16xf32> {offset = 0 : i64}
plan.program @async attributes {world_size = 2 : i64, global_batch = 2 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @grad transient : tensor<16xf32>
  plan.tensor @shard gradient : tensor<8xf32> {unit = "u"}
  plan.tensor @later transient : tensor<16xf32>
  plan.tensor @after transient : tensor<16xf32>
  plan.tensor @l transient : tensor<f32>
  plan.kernel "fill" ins [] outs [@grad] on compute {value = 1.0 : f64}
  plan.record_event 0 on compute
  plan.wait_event 0 on communication
  plan.collective reduce_scatter ins [@grad] outs [@shard] on communication {group_size = 2 : i64, reduction = #plan.reduction<avg>}
  plan.record_event 1 on communication
  plan.kernel "fill" ins [] outs [@later] on compute {value = 2.0 : f64}
  plan.wait_event 1 on compute
  plan.kernel "fill" ins [] outs [@after] on compute {value = 3.0 : f64}
  plan.kernel "fill" ins [] outs [@l] on compute {value = 0.0 : f64}
}
