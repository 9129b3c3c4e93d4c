// RUN: fsdp-opt %s '-fsdpc-pipeline=world-size=2 wrap=module:fc[0-9] mixed-precision=bf16' | FileCheck %s
// RUN: fsdp-opt %s '-fsdpc-pipeline=forward-only=true' | FileCheck %s --check-prefix=FORWARD
// RUN: fsdp-opt %s '-fsdpc-pipeline=world-size=2 wrap=module:fc[0-9]' | FileCheck %s --check-prefix=OVERLAP
// RUN: not fsdp-opt %s '-fsdpc-pipeline=mixed-precision=fp8' 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not fsdp-opt %s '-fsdpc-pipeline=forward-only=true world-size=2' 2>&1 | FileCheck %s --check-prefix=BADFORWARD

// Tests that fsdp-opt's -fsdpc-pipeline runs every stage fsdpc runs after
// import, from the same builder and options: a sharded, mixed-precision,
// allocated plan.program; a forward-only one; and the options validated
// once, with fsdpc's messages.
// CHECK-LABEL: plan.program @train_step
// CHECK-SAME: strategy = #plan.strategy<full_shard>
// CHECK-SAME: world_size = 2 : i64
// CHECK: plan.unit "fc1" params ["fc1.weight"] : [tensor<5x3xf32>] flat_size 15 padded_size 16 shard @fc1.flat_param
// fc2's flat gradient is bf16, its weight's gradient a view of it:
// CHECK: plan.tensor @[[FLAT2:t[0-9]+]] transient : tensor<10xbf16>
// CHECK-NEXT: plan.tensor @fc2.weight.grad view : tensor<2x5xbf16> {{{.*}}view_of = @[[FLAT2]], view_offset = 0 : i64}
// CHECK: plan.kernel "cast" ins [@fc1.flat_param] outs [@[[CAST:t[0-9]+]]]
// CHECK: plan.collective all_gather ins [@[[CAST]]] outs [@fc1.full] on communication {group_size = 2 : i64}
// Under mixed precision, gradients are computed in bf16 in place in a bf16
// flat gradient; as soon as fc2's is complete it is cast to f32 in one
// kernel and reduce-scattered, before fc1's backward, not after the whole
// backward pass.
// fc2's 2 classes are padded to 8 for the tensor cores (graph-pad-classes):
// its weight gradient is the first 2 rows of the padded one.
// CHECK: plan.kernel "concat" ins [@fc2.weight, @{{.*}}] outs [@{{.*}}] on compute {axis = 0 : i64}
// CHECK: plan.kernel "softmax_cross_entropy_with_grad" {{.*}} {classes = 2 : i64
// CHECK: plan.kernel "matmul" ins [@{{.*}}] outs [@[[PADDED:t[0-9]+]]] on compute {transpose_a = true, transpose_b = false}
// CHECK-NEXT: plan.kernel "slice" ins [@[[PADDED]]] outs [@fc2.weight.grad]
// CHECK-NEXT: plan.tensor @[[F32:t[0-9]+]] transient : tensor<10xf32>
// CHECK-NEXT: plan.kernel "cast" ins [@[[FLAT2]]] outs [@[[F32]]]
// CHECK: plan.collective reduce_scatter ins [@[[F32]]] outs [@fc2.grad_shard] on communication
// CHECK: plan.kernel "relu_grad"
// CHECK: plan.kernel "matmul" ins [@{{.*}}] outs [@fc1.weight.grad]
// CHECK: plan.kernel "adamw_update" ins [@fc1.flat_param
// fc2's reduce-scatter is issued on the communication stream as soon as its
// gradient is complete; compute goes on with fc1's backward and waits for
// it (event 7) only before fc2's optimizer update.
// The forward pass is marked for evaluation by its loss tensor: the plan
// writer counts the instructions up to it.
// OVERLAP-LABEL: plan.program @train_step
// OVERLAP-SAME: forward_loss = @[[LOSS:t[0-9]+]]
// OVERLAP: plan.kernel "softmax_cross_entropy_with_grad" ins [{{.*}}] outs [@[[LOSS]], @{{t[0-9]+}}]
// OVERLAP: plan.kernel "matmul" ins [@{{.*}}] outs [@fc2.weight.grad]
// OVERLAP-NEXT: plan.tensor @fc2.grad_shard gradient
// OVERLAP-NEXT: plan.record_event [[READY:[0-9]+]] on compute
// OVERLAP-NEXT: plan.wait_event [[READY]] on communication
// OVERLAP-NEXT: plan.collective reduce_scatter ins [@{{.*}}] outs [@fc2.grad_shard] on communication
// OVERLAP-NEXT: plan.record_event [[DONE:[0-9]+]] on communication
// OVERLAP-NOT: plan.wait_event [[DONE]] on compute
// OVERLAP: plan.kernel "relu_grad"
// OVERLAP-NOT: plan.wait_event [[DONE]] on compute
// OVERLAP: plan.kernel "matmul" ins [@{{.*}}, @input] outs [@fc1.weight.grad]
// OVERLAP-NOT: plan.wait_event [[DONE]] on compute
// OVERLAP: plan.kernel "adamw_update" ins [@fc1.flat_param
// OVERLAP-NEXT: plan.wait_event [[DONE]] on compute
// OVERLAP-NEXT: plan.kernel "adamw_update" ins [@fc2.flat_param, @fc2.grad_shard
// FORWARD-LABEL: plan.program @forward
// FORWARD-NOT: adamw_update
// FORWARD: plan.kernel "matmul"
// BADTYPE: --mixed-precision must be none, bf16 or f16, got 'fp8'
// BADFORWARD: --forward-only plans run on one rank
module attributes {graph.opset = 13 : i64} {
  func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"}, %w1: tensor<5x3xf32> {graph.param = "fc1.weight"},
                     %w2: tensor<2x5xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
    %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %1 = graph.relu %0 : tensor<4x5xf32>
    %2 = graph.matmul %1, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
    return %2 : tensor<4x2xf32>
  }
}
