// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step -graph-accumulate=micro-batches=2 | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step -graph-accumulate=micro-batches=2 '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 | FileCheck %s --check-prefix=NOSYNC
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step -graph-accumulate=micro-batches=2 '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=world-size=2 accumulate-reduce=each' | FileCheck %s --check-prefix=EACH
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step -graph-accumulate=micro-batches=1 | FileCheck %s --check-prefix=ONE
// RUN: not fsdp-opt %s -fsdpc-train-step -graph-accumulate=micro-batches=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not fsdp-opt %s -fsdpc-train-step -graph-accumulate=micro-batches=2 -graph-accumulate=micro-batches=2 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not fsdp-opt %s -fsdpc-train-step -graph-accumulate=micro-batches=2 '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=units:fc2' 2>&1 | FileCheck %s --check-prefix=RECOMPUTE

// Two micro-batches: the inputs take 8 rows, micro-batch m reads rows
// [4m, 4m + 4); its forward and backward are cloned in a row (the seed
// constant is shared); each gradient and the loss are summed as the second
// micro-batch produces them and scaled by 1/2; the updates read the means.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<8x3xf32> {graph.input = "input"}, %[[W1:.*]]: tensor<5x3xf32> {graph.param = "fc1.weight"}, %{{.*}}: tensor<2x5xf32> {graph.param = "fc2.weight"}, %[[Y:.*]]: tensor<8xi64> {graph.input = "labels", graph.label}
// CHECK: %[[X0:.*]] = graph.slice %[[X]] {graph.micro_batch = 0 : i64, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[Y0:.*]] = graph.slice %[[Y]] {graph.micro_batch = 0 : i64, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<8xi64>) -> tensor<4xi64>
// CHECK-NEXT: %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: graph.matmul %[[X0]], %[[W1]]
// CHECK: %[[L0:.*]] = graph.softmax_cross_entropy %{{.*}}, %[[Y0]] {graph.micro_loss, ignore_index = -100 : i64}
// CHECK: %[[G0:.*]] = graph.matmul %{{.*}}, %[[X0]] {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: %[[X1:.*]] = graph.slice %[[X]] {graph.micro_batch = 1 : i64, starts = array<i64: 4, 0>, steps = array<i64: 1, 1>}
// CHECK-NEXT: %[[Y1:.*]] = graph.slice %[[Y]] {graph.micro_batch = 1 : i64, starts = array<i64: 4>, steps = array<i64: 1>}
// CHECK-NEXT: graph.matmul %[[X1]], %[[W1]]
// CHECK: %[[L1:.*]] = graph.softmax_cross_entropy %{{.*}}, %[[Y1]] {graph.micro_loss, ignore_index = -100 : i64}
// CHECK-NEXT: %[[LS:.*]] = graph.add %[[L0]], %[[L1]] {graph.accumulate}
// CHECK-NEXT: %[[LOSS:.*]] = graph.scale %[[LS]] {factor = 5.000000e-01 : f64, graph.accumulate = 2 : i64} : tensor<f32>
// CHECK-NEXT: graph.softmax_cross_entropy_grad %{{.*}}, %[[Y1]], %[[SEED]]
// CHECK: %[[G1:.*]] = graph.matmul %{{.*}}, %[[X1]] {transpose_a = true}
// CHECK-NEXT: %[[GS:.*]] = graph.add %[[G0]], %[[G1]] {graph.accumulate} : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: %[[G:.*]] = graph.scale %[[GS]] {factor = 5.000000e-01 : f64, graph.accumulate = 2 : i64} : tensor<5x3xf32>
// CHECK-NEXT: graph.adamw_update %[[W1]], %[[G]]
// CHECK: return %[[LOSS]]

// fsdp-shard gathers per phase: each micro-batch's forward and backward.
// The default (no_sync) reduces each summed gradient once, in the second
// micro-batch's backward.
// NOSYNC-LABEL: func.func @train_step
// NOSYNC: fsdp.all_gather {{.*}}unit = @fc1
// NOSYNC: graph.softmax_cross_entropy {{.*}}graph.micro_loss
// NOSYNC: fsdp.all_gather {{.*}}unit = @fc2
// NOSYNC-NOT: fsdp.reduce_scatter
// NOSYNC: graph.slice {{.*}}graph.micro_batch = 1
// NOSYNC-NEXT: graph.slice
// NOSYNC-NEXT: fsdp.all_gather {{.*}}unit = @fc1
// NOSYNC: graph.softmax_cross_entropy {{.*}}graph.micro_loss
// NOSYNC: %[[S2:.*]] = graph.scale {{.*}}graph.accumulate = 2 : i64} : tensor<2x5xf32>
// NOSYNC-NEXT: %[[F2:.*]] = fsdp.flatten %[[S2]] {unit = @fc2}
// NOSYNC-NEXT: fsdp.reduce_scatter %[[F2]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc2}

// accumulate-reduce=each: every micro-batch's gradient is flattened and
// reduce-scattered when complete; the shards are summed and halved before
// the update, and the unsharded sums are gone.
// EACH-LABEL: func.func @train_step
// EACH: %[[F0:.*]] = fsdp.flatten {{.*}}unit = @fc2
// EACH-NEXT: %[[R0:.*]] = fsdp.reduce_scatter %[[F0]] {{.*}}unit = @fc2
// EACH: graph.slice {{.*}}graph.micro_batch = 1
// EACH: %[[F1:.*]] = fsdp.flatten {{.*}}unit = @fc2
// EACH-NEXT: %[[R1:.*]] = fsdp.reduce_scatter %[[F1]] {{.*}}unit = @fc2
// EACH-NOT: graph.add {{.*}} : (tensor<2x5xf32>, tensor<2x5xf32>)
// EACH: %[[SUM:.*]] = graph.add %[[R0]], %[[R1]] {graph.accumulate} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
// EACH-NEXT: %[[MEAN:.*]] = graph.scale %[[SUM]] {factor = 5.000000e-01 : f64, graph.accumulate = 2 : i64} : tensor<5xf32>
// EACH: graph.adamw_update %{{.*}}, %[[MEAN]]

// One micro-batch: nothing changes.
// ONE-LABEL: func.func @train_step
// ONE-SAME: tensor<4x3xf32> {graph.input = "input"}
// ONE-NOT: graph.micro_batch

// ZERO: graph-accumulate: micro-batches must be at least 1, got 0
// TWICE: graph-accumulate: @train_step already accumulates gradients
// RECOMPUTE: fsdp-recompute: must run before graph-accumulate, on one micro-batch's step
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"},
                   %w1: tensor<5x3xf32> {graph.param = "fc1.weight"},
                   %w2: tensor<2x5xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = graph.relu %0 : tensor<4x5xf32>
  %2 = graph.matmul %1, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
  return %2 : tensor<4x2xf32>
}
