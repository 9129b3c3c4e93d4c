// RUN: fsdp-opt %s -split-input-file -pass-pipeline='builtin.module(plan.program(plan-offload{what=optimizer}))' | FileCheck %s --check-prefix=OPT
// RUN: fsdp-opt %s -split-input-file -pass-pipeline='builtin.module(plan.program(plan-offload{what=params}))' | FileCheck %s --check-prefix=PARAMS
// RUN: fsdp-opt %s -split-input-file -pass-pipeline='builtin.module(plan.program(plan-offload{what=params},plan-allocate))' | FileCheck %s --check-prefix=ALLOC

// One rank's step of a unit sharded over 2 ranks: gather the shard, a
// kernel on the full parameter, reduce-scatter its gradient into the
// gradient shard, then SGD with momentum on the shard.
//
// what=optimizer: only the momentum buffer moves; the update runs on the
// host, so the parameter and gradient shards and the step counter are
// copied to host staging tensors before it, and the parameter back after.
// OPT-LABEL: plan.program @step
// OPT-DAG: plan.tensor @shard parameter : tensor<4xf32> {source_name = "u.flat", unit = "u"}
// OPT-DAG: plan.tensor @grad_shard gradient : tensor<4xf32> {unit = "u"}
// OPT-DAG: plan.tensor @momentum optimizer_state : tensor<4xf32> {host, optimizer_slot = "momentum_buffer", owner = "shard", unit = "u"}
// OPT-DAG: plan.tensor @shard.host transient : tensor<4xf32> {host}
// OPT-DAG: plan.tensor @grad_shard.host transient : tensor<4xf32> {host}
// OPT-DAG: plan.tensor @step.host transient : tensor<i64> {host}
// OPT:      plan.collective all_gather ins [@shard] outs [@full] on communication
// OPT:      plan.collective reduce_scatter ins [@full_grad] outs [@grad_shard] on communication
// OPT:      plan.wait_event 3 on compute
// OPT-NEXT: plan.copy @shard to @shard.host on compute
// OPT-NEXT: plan.copy @grad_shard to @grad_shard.host on compute
// OPT-NEXT: plan.copy @step to @step.host on compute
// OPT-NEXT: plan.kernel "sgd_update" ins [@shard.host, @grad_shard.host, @momentum, @step.host] outs [@shard.host, @momentum] on compute
// OPT-SAME: on_host
// OPT-NEXT: plan.copy @shard.host to @shard on compute
// OPT-NOT: plan.copy

// what=params: the shards move too. The shard goes to the device on the
// communication stream right before its all_gather, after the wait that
// orders the gather; the gradient shard comes back right after the
// reduce_scatter, before the record the compute stream waits for. The
// update touches host tensors only but the step counter.
// PARAMS-LABEL: plan.program @step
// PARAMS-DAG: plan.tensor @shard parameter : tensor<4xf32> {host, source_name = "u.flat", unit = "u"}
// PARAMS-DAG: plan.tensor @grad_shard gradient : tensor<4xf32> {host, unit = "u"}
// PARAMS-DAG: plan.tensor @shard.device transient : tensor<4xf32>
// PARAMS-DAG: plan.tensor @grad_shard.device transient : tensor<4xf32>
// PARAMS:      plan.wait_event 0 on communication
// PARAMS-NEXT: plan.copy @shard to @shard.device on communication
// PARAMS-NEXT: plan.collective all_gather ins [@shard.device] outs [@full] on communication
// PARAMS-NEXT: plan.record_event 1 on communication
// PARAMS:      plan.kernel "mul" ins [@full, @full] outs [@full_grad] on compute
// PARAMS-NOT:  on_host
// PARAMS:      plan.wait_event 2 on communication
// PARAMS-NEXT: plan.collective reduce_scatter ins [@full_grad] outs [@grad_shard.device] on communication
// PARAMS-NEXT: plan.copy @grad_shard.device to @grad_shard on communication
// PARAMS-NEXT: plan.record_event 3 on communication
// PARAMS:      plan.wait_event 3 on compute
// PARAMS-NEXT: plan.copy @step to @step.host on compute
// PARAMS-NEXT: plan.kernel "sgd_update" ins [@shard, @grad_shard, @momentum, @step.host] outs [@shard, @momentum] on compute
// PARAMS-SAME: on_host

// The host tensors take the host region, one after another; the device's
// persistent region keeps only the step counter, and the staging copies
// are arena transients.
// ALLOC-LABEL: plan.program @step
// ALLOC-SAME: host_bytes = 256 : i64
// ALLOC-SAME: persistent_bytes = 64 : i64
// ALLOC-DAG: plan.tensor @shard parameter : tensor<4xf32> {host, offset = 0 : i64
// ALLOC-DAG: plan.tensor @step step_counter : tensor<i64> {offset = 0 : i64}
plan.program @step attributes {world_size = 2 : i64, global_batch = 2 : i64, loss = @loss, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd", strategy = #plan.strategy<full_shard>, shard_group_size = 2 : i64} {
  plan.tensor @shard parameter : tensor<4xf32> {source_name = "u.flat", unit = "u"}
  plan.tensor @momentum optimizer_state : tensor<4xf32> {optimizer_slot = "momentum_buffer", owner = "shard", unit = "u"}
  plan.tensor @grad_shard gradient : tensor<4xf32> {unit = "u"}
  plan.tensor @step step_counter : tensor<i64>
  plan.tensor @full transient : tensor<8xf32>
  plan.tensor @full_grad transient : tensor<8xf32>
  plan.tensor @loss transient : tensor<f32>
  plan.unit "u" params ["w"] : [tensor<8xf32>] flat_size 8 padded_size 8 shard @shard
  plan.record_event 0 on compute
  plan.wait_event 0 on communication
  plan.collective all_gather ins [@shard] outs [@full] on communication {group_size = 2 : i64}
  plan.record_event 1 on communication
  plan.wait_event 1 on compute
  plan.kernel "mul" ins [@full, @full] outs [@full_grad] on compute
  plan.kernel "fill" ins [] outs [@loss] on compute {value = 0.0 : f64}
  plan.record_event 2 on compute
  plan.wait_event 2 on communication
  plan.collective reduce_scatter ins [@full_grad] outs [@grad_shard] on communication {group_size = 2 : i64, reduction = #plan.reduction<avg>}
  plan.record_event 3 on communication
  plan.wait_event 3 on compute
  plan.kernel "sgd_update" ins [@shard, @grad_shard, @momentum, @step] outs [@shard, @momentum] on compute {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false}
}

// -----

// A kernel on the device that reads a host tensor gets a copy of it on the
// device just before, on its stream (gradient clipping's norm of the
// gradient shards, with what=params).
// PARAMS-LABEL: plan.program @norm
// PARAMS:      plan.copy @grad_shard to @grad_shard.device on compute
// PARAMS-NEXT: plan.kernel "sum_squares" ins [@grad_shard.device] outs [@sq] on compute
// PARAMS-NOT:  on_host
// OPT-LABEL: plan.program @norm
// OPT-NOT: plan.copy
plan.program @norm attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @sq_loss, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @shard parameter : tensor<4xf32> {source_name = "u.flat", unit = "u"}
  plan.tensor @grad_shard gradient : tensor<4xf32> {unit = "u"}
  plan.tensor @sq transient : tensor<1xf32>
  plan.tensor @sq_loss transient : tensor<f32>
  plan.unit "u" params ["w"] : [tensor<4xf32>] flat_size 4 padded_size 4 shard @shard
  plan.kernel "sum_squares" ins [@grad_shard] outs [@sq] on compute
  plan.kernel "fill" ins [] outs [@sq_loss] on compute {value = 0.0 : f64}
}
