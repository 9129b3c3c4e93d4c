// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 '-fsdp-clip-grad-norm=max-norm=0.5' | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=strategy=no_shard world-size=2' '-fsdp-clip-grad-norm=max-norm=0.5' | FileCheck %s --check-prefix=DDP
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=strategy=hybrid_shard world-size=4 shard-group-size=2' '-fsdp-clip-grad-norm=max-norm=2.0' | FileCheck %s --check-prefix=HYBRID
// RUN: not fsdp-opt %s -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 '-fsdp-clip-grad-norm=max-norm=0' 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not fsdp-opt %s -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 -fsdp-clip-grad-norm -fsdp-clip-grad-norm 2>&1 | FileCheck %s --check-prefix=TWICE

// full_shard on 2 ranks: the squares of the three gradient shards, summed
// over the shard group by an all_reduce without a unit, give the norm and
// the scale; each update reads its shard times the scale, and the norm is
// the step's last result, marked graph.grad_norm.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<1xf32> {graph.grad_norm})
// CHECK: %[[R1:.*]] = fsdp.reduce_scatter {{.*}}unit = @fc1
// CHECK-NEXT: %[[SQ:.*]] = graph.sum_squares %[[R1]], %[[G2:.*]], %[[G3:.*]] : (tensor<8xf32>, tensor<15xf32>, tensor<6xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[ALL:.*]] = fsdp.all_reduce %[[SQ]] {group_size = 2 : i64, reduction = #fsdp.reduction<sum>} : tensor<1xf32>
// CHECK-NEXT: %[[SCALE:.*]], %[[NORM:.*]] = graph.clip_coefficient %[[ALL]] {max_norm = 5.000000e-01 : f64}
// CHECK-NEXT: %[[C1:.*]] = graph.mul %[[R1]], %[[SCALE]] : (tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
// CHECK-NEXT: graph.adamw_update %arg3, %[[C1]]
// CHECK-NEXT: %[[C2:.*]] = graph.mul %[[G2]], %[[SCALE]] : (tensor<15xf32>, tensor<1xf32>) -> tensor<15xf32>
// CHECK-NEXT: graph.adamw_update %arg6, %[[C2]]
// CHECK: return {{.*}}, %[[NORM]] : {{.*}}, tensor<1xf32>

// no_shard: every rank holds whole gradients, so the norm needs no
// collective beyond the gradients' own all-reduces.
// DDP-LABEL: func.func @train_step
// DDP: graph.sum_squares {{.*}} : (tensor<15xf32>, tensor<30xf32>, tensor<12xf32>) -> tensor<1xf32>
// DDP-NOT: fsdp.all_reduce {{.*}}reduction = #fsdp.reduction<sum>
// DDP: graph.clip_coefficient

// hybrid_shard, groups of 2 on 4 ranks: the partial norms are summed over
// the shard group only; the replicas hold the same shards.
// HYBRID-LABEL: func.func @train_step
// HYBRID: %[[SQ:.*]] = graph.sum_squares
// HYBRID-NEXT: fsdp.all_reduce %[[SQ]] {group_size = 2 : i64, reduction = #fsdp.reduction<sum>} : tensor<1xf32>
// HYBRID-NEXT: graph.clip_coefficient {{.*}}{max_norm = 2.000000e+00 : f64}

// ZERO: fsdp-clip-grad-norm: max-norm must be positive, got 0
// TWICE: fsdp-clip-grad-norm: @train_step already clips its gradients
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"},
                   %w1: tensor<5x3xf32> {graph.param = "fc1.weight"},
                   %w2: tensor<6x5xf32> {graph.param = "fc2.weight"},
                   %w3: tensor<2x6xf32> {graph.param = "fc3.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = graph.relu %0 : tensor<4x5xf32>
  %2 = graph.matmul %1, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<6x5xf32>) -> tensor<4x6xf32>
  %3 = graph.relu %2 : tensor<4x6xf32>
  %4 = graph.matmul %3, %w3 {transpose_b = true} : (tensor<4x6xf32>, tensor<2x6xf32>) -> tensor<4x2xf32>
  return %4 : tensor<4x2xf32>
}
