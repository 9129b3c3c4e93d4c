// RUN: fsdp-opt %s -fsdpc-train-step -graph-accumulate=micro-batches=2 | FileCheck %s
// RUN: fsdp-opt %s -fsdpc-train-step -graph-accumulate=micro-batches=2 '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 | FileCheck %s --check-prefix=SHARD

// A buffer the forward pass rewrites (as BatchNorm's running mean): every
// micro-batch updates it, as torch's forward does, so micro-batch 1 reads
// what micro-batch 0 wrote and the step returns micro-batch 1's value. The
// update stays marked graph.updates of the buffer's argument.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<8x3xf32> {graph.input = "input"}, %{{.*}}: tensor<2x3xf32> {graph.param = "fc1.weight"}, %[[M:.*]]: tensor<3xf32> {graph.buffer = "bn.running_mean"}
// CHECK-SAME: tensor<3xf32> {graph.updates = 2 : i64}
// CHECK: %[[X0:.*]] = graph.slice %[[X]] {graph.micro_batch = 0 : i64
// CHECK: %[[S0:.*]] = graph.reduce_sum %[[X0]]
// CHECK: %[[U0:.*]] = graph.add %[[M]], %[[S0]]
// CHECK: %[[X1:.*]] = graph.slice %[[X]] {graph.micro_batch = 1 : i64
// CHECK: %[[S1:.*]] = graph.reduce_sum %[[X1]]
// CHECK: %[[U1:.*]] = graph.add %[[U0]], %[[S1]]
// CHECK: return %{{.*}}, %{{.*}}, %[[U1]]

// After sharding erases the parameter arguments, the update still names
// the buffer's argument (now number 1).
// SHARD-LABEL: func.func @train_step
// SHARD-SAME: %arg1: tensor<3xf32> {graph.buffer = "bn.running_mean"}
// SHARD-SAME: tensor<3xf32> {graph.updates = 1 : i64}
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"},
                   %w1: tensor<2x3xf32> {graph.param = "fc1.weight"},
                   %m: tensor<3xf32> {graph.buffer = "bn.running_mean"})
    -> (tensor<4x2xf32> {graph.output = "logits"}, tensor<3xf32> {graph.updates = 2 : i64}) {
  %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %1 = graph.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  %2 = graph.add %m, %1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0, %2 : tensor<4x2xf32>, tensor<3xf32>
}
