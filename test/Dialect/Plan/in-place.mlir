// RUN: fsdp-opt %s -split-input-file -pass-pipeline='builtin.module(plan.program(plan-in-place))' | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -pass-pipeline='builtin.module(plan.program(plan-in-place,plan-allocate))' | FileCheck %s --check-prefix=ALLOC

// The loss gradient takes the bytes of the logits, which die with it: the
// logits are a view here (a reshape of the head's output), so the gradient
// becomes a view of that view, and the arena holds the head's output once.
// The kernel's other operands stay where they were.
// CHECK-LABEL: plan.program @loss_grad
// CHECK-DAG: plan.tensor @logits view : tensor<6x5xf32> {view_of = @head, view_offset = 0 : i64}
// CHECK-DAG: plan.tensor @dlogits view : tensor<6x5xf32> {view_of = @logits, view_offset = 0 : i64}
// CHECK-DAG: plan.tensor @labels input : tensor<6xi64>
// CHECK:     plan.kernel "softmax_cross_entropy_grad" ins [@logits, @labels, @seed] outs [@dlogits] on compute
// CHECK-NEXT: plan.kernel "matmul" ins [@dlogits, @w] outs [@dx] on compute
// ALLOC-LABEL: plan.program @loss_grad
// ALLOC-SAME: transient_bytes = 384 : i64
// ALLOC-DAG: plan.tensor @head transient : tensor<2x3x5xf32> {offset = [[HEAD:[0-9]+]] : i64}
// ALLOC-DAG: plan.tensor @dlogits view : tensor<6x5xf32> {offset = [[HEAD]] : i64,
plan.program @loss_grad attributes {world_size = 1 : i64, global_batch = 6 : i64, loss = @loss, loss_kind = #plan.loss_kind<cross_entropy>, optimizer = "sgd"} {
  plan.tensor @w parameter : tensor<5x4xf32> {source_name = "w"}
  plan.tensor @x input : tensor<2x3x4xf32> {source_name = "x"}
  plan.tensor @labels input : tensor<6xi64> {source_name = "labels"}
  plan.tensor @head transient : tensor<2x3x5xf32>
  plan.tensor @logits view : tensor<6x5xf32> {view_of = @head, view_offset = 0 : i64}
  plan.tensor @loss transient : tensor<f32>
  plan.tensor @seed transient : tensor<f32>
  plan.tensor @dlogits transient : tensor<6x5xf32>
  plan.tensor @dx transient : tensor<6x4xf32>
  plan.kernel "matmul" ins [@x, @w] outs [@head] on compute {transpose_b = true}
  plan.kernel "softmax_cross_entropy" ins [@logits, @labels] outs [@loss] on compute
  plan.kernel "fill" ins [] outs [@seed] on compute {value = 1.0 : f64}
  plan.kernel "softmax_cross_entropy_grad" ins [@logits, @labels, @seed] outs [@dlogits] on compute
  plan.kernel "matmul" ins [@dlogits, @w] outs [@dx] on compute
}

// -----

// The loss and its gradient in one kernel: the contract names the gradient,
// its output 1, for the logits' bytes; the scalar loss keeps its own.
// CHECK-LABEL: plan.program @loss_with_grad
// CHECK-DAG: plan.tensor @dlogits view : tensor<6x5xf32> {view_of = @logits, view_offset = 0 : i64}
// CHECK-DAG: plan.tensor @loss transient : tensor<f32>
// CHECK:     plan.kernel "softmax_cross_entropy_with_grad" ins [@logits, @labels, @seed] outs [@loss, @dlogits] on compute
plan.program @loss_with_grad attributes {world_size = 1 : i64, global_batch = 6 : i64, loss = @loss, loss_kind = #plan.loss_kind<cross_entropy>, optimizer = "sgd"} {
  plan.tensor @w parameter : tensor<5x4xf32> {source_name = "w"}
  plan.tensor @x input : tensor<6x4xf32> {source_name = "x"}
  plan.tensor @labels input : tensor<6xi64> {source_name = "labels"}
  plan.tensor @logits transient : tensor<6x5xf32>
  plan.tensor @loss transient : tensor<f32>
  plan.tensor @seed transient : tensor<f32>
  plan.tensor @dlogits transient : tensor<6x5xf32>
  plan.tensor @dx transient : tensor<6x4xf32>
  plan.kernel "fill" ins [] outs [@seed] on compute {value = 1.0 : f64}
  plan.kernel "matmul" ins [@x, @w] outs [@logits] on compute {transpose_b = true}
  plan.kernel "softmax_cross_entropy_with_grad" ins [@logits, @labels, @seed] outs [@loss, @dlogits] on compute
  plan.kernel "matmul" ins [@dlogits, @w] outs [@dx] on compute
}

// -----

// Not in place: the logits are read again after the gradient (a second
// loss term), so their bytes do not die with it.
// CHECK-LABEL: plan.program @read_after
// CHECK: plan.tensor @dlogits transient : tensor<6x5xf32>
plan.program @read_after attributes {world_size = 1 : i64, global_batch = 6 : i64, loss = @loss, loss_kind = #plan.loss_kind<cross_entropy>, optimizer = "sgd"} {
  plan.tensor @labels input : tensor<6xi64> {source_name = "labels"}
  plan.tensor @logits transient : tensor<6x5xf32>
  plan.tensor @loss transient : tensor<f32>
  plan.tensor @seed transient : tensor<f32>
  plan.tensor @dlogits transient : tensor<6x5xf32>
  plan.tensor @sum transient : tensor<6x5xf32>
  plan.kernel "fill" ins [] outs [@logits] on compute {value = 0.5 : f64}
  plan.kernel "fill" ins [] outs [@seed] on compute {value = 1.0 : f64}
  plan.kernel "softmax_cross_entropy_grad" ins [@logits, @labels, @seed] outs [@dlogits] on compute
  plan.kernel "add" ins [@logits, @dlogits] outs [@sum] on compute
  plan.kernel "softmax_cross_entropy" ins [@sum, @labels] outs [@loss] on compute
}

// -----

// Not in place: the logits are a model input the host fills, and a kernel
// whose contract names no input (mul) keeps its own output.
// CHECK-LABEL: plan.program @input_logits
// CHECK: plan.tensor @dlogits transient : tensor<6x5xf32>
// CHECK: plan.tensor @scaled transient : tensor<6x5xf32>
plan.program @input_logits attributes {world_size = 1 : i64, global_batch = 6 : i64, loss = @loss, loss_kind = #plan.loss_kind<cross_entropy>, optimizer = "sgd"} {
  plan.tensor @logits input : tensor<6x5xf32> {source_name = "logits"}
  plan.tensor @labels input : tensor<6xi64> {source_name = "labels"}
  plan.tensor @loss transient : tensor<f32>
  plan.tensor @seed transient : tensor<f32>
  plan.tensor @dlogits transient : tensor<6x5xf32>
  plan.tensor @scaled transient : tensor<6x5xf32>
  plan.kernel "fill" ins [] outs [@seed] on compute {value = 1.0 : f64}
  plan.kernel "softmax_cross_entropy_grad" ins [@logits, @labels, @seed] outs [@dlogits] on compute
  plan.kernel "mul" ins [@dlogits, @dlogits] outs [@scaled] on compute
  plan.kernel "softmax_cross_entropy" ins [@scaled, @labels] outs [@loss] on compute
}

// -----

// Not in place: the communication stream reads the logits (an all_reduce
// of them before the gradient), so their lifetime is not the compute
// stream's to end.
// CHECK-LABEL: plan.program @collective
// CHECK: plan.tensor @dlogits transient : tensor<6x5xf32>
plan.program @collective attributes {world_size = 2 : i64, global_batch = 6 : i64, loss = @loss, loss_kind = #plan.loss_kind<cross_entropy>, optimizer = "sgd"} {
  plan.tensor @labels input : tensor<6xi64> {source_name = "labels"}
  plan.tensor @raw transient : tensor<6x5xf32>
  plan.tensor @logits transient : tensor<6x5xf32>
  plan.tensor @loss transient : tensor<f32>
  plan.tensor @seed transient : tensor<f32>
  plan.tensor @dlogits transient : tensor<6x5xf32>
  plan.kernel "fill" ins [] outs [@raw] on compute {value = 0.5 : f64}
  plan.record_event 0 on compute
  plan.wait_event 0 on communication
  plan.collective all_reduce ins [@raw] outs [@logits] on communication {group_size = 2 : i64, reduction = #plan.reduction<sum>}
  plan.record_event 1 on communication
  plan.wait_event 1 on compute
  plan.kernel "fill" ins [] outs [@seed] on compute {value = 1.0 : f64}
  plan.kernel "softmax_cross_entropy" ins [@logits, @labels] outs [@loss] on compute
  plan.kernel "softmax_cross_entropy_grad" ins [@logits, @labels, @seed] outs [@dlogits] on compute
}
