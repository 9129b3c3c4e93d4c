// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=strategy=shard_grad_op world-size=2' | FileCheck %s --check-prefix=GRADOP
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=strategy=no_shard world-size=2' | FileCheck %s --check-prefix=NOSHARD
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=strategy=hybrid_shard world-size=4 shard-group-size=2' | FileCheck %s --check-prefix=HYBRID
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=3 | FileCheck %s --check-prefix=PAD
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s -split-input-file '-fsdpc-train-step=mixed-precision=bf16' '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 | FileCheck %s --check-prefix=MP
// RUN: fsdp-opt %s -split-input-file '-fsdpc-train-step=mixed-precision=bf16' '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=world-size=2 reduce-dtype=low' | FileCheck %s --check-prefix=MPLOW
// RUN: fsdp-opt %s -split-input-file '-fsdpc-train-step=mixed-precision=bf16' '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard | FileCheck %s --check-prefix=MPONE

// Tests each strategy on a two-layer MLP with one unit per layer (fc1: 20
// parameters, fc2: 10).
//
// full_shard: gather before the forward uses and free after them, gather
// again only for fc2 (backward does not read fc1's weight: the input needs
// no gradient), reduce-scatter each flat gradient as soon as it is complete,
// and update the shards at the end.
// FULL: module attributes {fsdp.shard_group_size = 2 : i64, fsdp.strategy = #fsdp.strategy<full_shard>, fsdp.world_size = 2 : i64
// FULL: fsdp.unit @fc1 params ["fc1.weight", "fc1.bias"] : [tensor<5x3xf32>, tensor<5xf32>] flat_size 20 padded_size 20
// FULL-LABEL: func.func @train_step
// FULL-SAME: %[[S1:[a-z0-9]+]]: tensor<10xf32> {fsdp.shard_of = @fc1}
// FULL-SAME: tensor<10xf32> {fsdp.state_shard_of = @fc1, graph.state_slot = "exp_avg"}
// FULL-SAME: %[[S2:[a-z0-9]+]]: tensor<5xf32> {fsdp.shard_of = @fc2}
// FULL-SAME: -> (tensor<f32> {graph.loss}, tensor<10xf32> {graph.updates = 3 : i64}
// FULL: %[[F1:.*]] = fsdp.all_gather %[[S1]] {group_size = 2 : i64, unit = @fc1} : tensor<10xf32> -> tensor<20xf32>
// FULL: %[[W1:.*]] = fsdp.param_view %[[F1]] {offset = 0 : i64, param = "fc1.weight"} : tensor<20xf32> -> tensor<5x3xf32>
// FULL: %[[B1:.*]] = fsdp.param_view %[[F1]] {offset = 15 : i64, param = "fc1.bias"}
// FULL: graph.matmul %{{.*}}, %[[W1]]
// FULL: graph.add %{{.*}}, %[[B1]]
// FULL-NEXT: fsdp.free %[[F1]]
// FULL: %[[F2:.*]] = fsdp.all_gather %[[S2]] {group_size = 2 : i64, unit = @fc2}
// FULL: graph.matmul
// FULL-NEXT: fsdp.free %[[F2]]
// FULL: graph.softmax_cross_entropy_grad
// FULL-NEXT: %[[G2:.*]] = fsdp.all_gather %[[S2]] {group_size = 2 : i64, unit = @fc2}
// FULL: graph.matmul
// FULL-NEXT: fsdp.free %[[G2]]
// FULL-NOT: fsdp.all_gather
// FULL: %[[D2:.*]] = graph.matmul %{{.*}} {transpose_a = true}
// FULL-NEXT: %[[FL2:.*]] = fsdp.flatten %[[D2]] {unit = @fc2} : tensor<2x5xf32> -> tensor<10xf32>
// FULL-NEXT: %[[R2:.*]] = fsdp.reduce_scatter %[[FL2]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc2} : tensor<10xf32> -> tensor<5xf32>
// FULL: fsdp.flatten %{{.*}}, %{{.*}} {unit = @fc1} : tensor<5x3xf32>, tensor<5xf32> -> tensor<20xf32>
// FULL-NEXT: %[[R1:.*]] = fsdp.reduce_scatter
// FULL-NEXT: graph.adamw_update %[[S1]], %[[R1]]
// FULL-NEXT: graph.adamw_update %[[S2]], %[[R2]]
// FULL-NEXT: return

// shard_grad_op: one gather per unit, kept through backward.
// GRADOP-LABEL: func.func @train_step
// GRADOP: %[[F1:.*]] = fsdp.all_gather {{.*}}unit = @fc1
// GRADOP: fsdp.free %[[F1]]
// GRADOP: %[[F2:.*]] = fsdp.all_gather {{.*}}unit = @fc2
// GRADOP-NOT: fsdp.all_gather
// GRADOP: graph.softmax_cross_entropy_grad
// GRADOP: graph.matmul %{{.*}}, %{{.*}} {fsdp.uses = [@fc2]}
// GRADOP-NEXT: fsdp.free %[[F2]]
// GRADOP: fsdp.reduce_scatter {{.*}}unit = @fc2

// no_shard: views of the replicated flat parameter, no gathers, an
// all-reduce of each flat gradient over the world.
// NOSHARD: fsdp.strategy = #fsdp.strategy<no_shard>
// NOSHARD-LABEL: func.func @train_step
// NOSHARD-SAME: tensor<20xf32> {fsdp.shard_of = @fc1}
// NOSHARD-NOT: fsdp.all_gather
// NOSHARD-NOT: fsdp.free
// NOSHARD: %[[FL:.*]] = fsdp.flatten {{.*}}unit = @fc2
// NOSHARD-NEXT: fsdp.all_reduce %[[FL]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc2} : tensor<10xf32>
// NOSHARD-NOT: fsdp.reduce_scatter

// hybrid_shard: full_shard in groups of 2, then the gradient shard averaged
// over the 2 ranks holding the same shard (stride 2).
// HYBRID: fsdp.shard_group_size = 2 : i64, fsdp.strategy = #fsdp.strategy<hybrid_shard>, fsdp.world_size = 4 : i64
// HYBRID-LABEL: func.func @train_step
// HYBRID: fsdp.all_gather {{.*}}{group_size = 2 : i64, unit = @fc1} : tensor<10xf32> -> tensor<20xf32>
// HYBRID: %[[R:.*]] = fsdp.reduce_scatter {{.*}}{group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc2}
// HYBRID-NEXT: fsdp.all_reduce %[[R]] {group_size = 2 : i64, group_stride = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc2} : tensor<5xf32>

// Three ranks: each flat parameter is padded to a multiple of 3.
// PAD: fsdp.unit @fc1 {{.*}} flat_size 20 padded_size 21
// PAD: fsdp.unit @fc2 {{.*}} flat_size 10 padded_size 12
// PAD-LABEL: func.func @train_step
// PAD-SAME: tensor<7xf32> {fsdp.shard_of = @fc1}
// PAD-SAME: tensor<4xf32> {fsdp.shard_of = @fc2}
// PAD: fsdp.all_gather {{.*}} : tensor<7xf32> -> tensor<21xf32>

// Mixed precision: each f32 shard is cast to bf16 before its all_gather,
// which moves bf16, and the views are bf16; the bf16 gradients are
// flattened as they are, the flat gradient is cast to f32 once and
// reduce-scattered as f32 (reduce-dtype f32), and the f32 shards are
// updated.
// MP-LABEL: func.func @train_step
// MP-SAME: %[[S1:[a-z0-9]+]]: tensor<10xf32> {fsdp.shard_of = @fc1}
// MP: %[[C1:.*]] = graph.cast %[[S1]] : (tensor<10xf32>) -> tensor<10xbf16>
// MP-NEXT: %[[F1:.*]] = fsdp.all_gather %[[C1]] {group_size = 2 : i64, unit = @fc1} : tensor<10xbf16> -> tensor<20xbf16>
// MP-NEXT: fsdp.param_view %[[F1]] {offset = 0 : i64, param = "fc1.weight"} : tensor<20xbf16> -> tensor<5x3xbf16>
// MP: %[[G1:.*]] = fsdp.flatten %{{.*}}, %{{.*}} {unit = @fc1} : tensor<5x3xbf16>, tensor<5xbf16> -> tensor<20xbf16>
// MP-NEXT: %[[G1F:.*]] = graph.cast %[[G1]] : (tensor<20xbf16>) -> tensor<20xf32>
// MP-NEXT: %[[R1:.*]] = fsdp.reduce_scatter %[[G1F]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc1} : tensor<20xf32> -> tensor<10xf32>
// MP: graph.adamw_update %[[S1]], %[[R1]]
// With reduce-dtype=low the bf16 gradients are flattened and
// reduce-scattered as bf16, and the shard is cast to f32 for the update.
// MPLOW-LABEL: func.func @train_step
// MPLOW-SAME: %[[S1:[a-z0-9]+]]: tensor<10xf32> {fsdp.shard_of = @fc1}
// MPLOW: fsdp.flatten %{{.*}}, %{{.*}} {unit = @fc1} : tensor<5x3xbf16>, tensor<5xbf16> -> tensor<20xbf16>
// MPLOW-NEXT: %[[R1:.*]] = fsdp.reduce_scatter %{{.*}} {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc1} : tensor<20xbf16> -> tensor<10xbf16>
// MPLOW-NEXT: %[[G1:.*]] = graph.cast %[[R1]] : (tensor<10xbf16>) -> tensor<10xf32>
// MPLOW: graph.adamw_update %[[S1]], %[[G1]]
// On one rank, mixed precision casts each unit's flat parameter once,
// before its first reader, and reads the parameters through bf16 views of
// that copy (no cast per parameter); the flat bf16 gradient is cast once.
// MPONE-LABEL: func.func @train_step
// MPONE-SAME: %[[S1:[a-z0-9]+]]: tensor<20xf32> {fsdp.shard_of = @fc1}
// MPONE: %[[C1:.*]] = graph.cast %[[S1]] : (tensor<20xf32>) -> tensor<20xbf16>
// MPONE-NEXT: %[[W1:.*]] = fsdp.param_view %[[C1]] {offset = 0 : i64, param = "fc1.weight"} : tensor<20xbf16> -> tensor<5x3xbf16>
// MPONE-NEXT: %[[B1:.*]] = fsdp.param_view %[[C1]] {offset = 15 : i64, param = "fc1.bias"} : tensor<20xbf16> -> tensor<5xbf16>
// MPONE-NEXT: %[[H:.*]] = graph.matmul %{{.*}}, %[[W1]] {transpose_b = true}
// MPONE-NEXT: graph.add %[[H]], %[[B1]]
// MPONE: %[[G1:.*]] = fsdp.flatten %{{.*}}, %{{.*}} {unit = @fc1} : tensor<5x3xbf16>, tensor<5xbf16> -> tensor<20xbf16>
// MPONE-NEXT: %[[G1F:.*]] = graph.cast %[[G1]] : (tensor<20xbf16>) -> tensor<20xf32>
// MPONE-NEXT: graph.adamw_update %[[S1]], %[[G1F]]

// One rank: flat parameters and no collectives.
// ONE-LABEL: func.func @train_step
// ONE-NOT: fsdp.all_gather
// ONE-NOT: fsdp.reduce_scatter
// ONE-NOT: fsdp.all_reduce
// ONE: graph.adamw_update
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"},
                   %w1: tensor<5x3xf32> {graph.param = "fc1.weight"}, %b1: tensor<5xf32> {graph.param = "fc1.bias"},
                   %w2: tensor<2x5xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = graph.add %0, %b1 : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %2 = graph.relu %1 : tensor<4x5xf32>
  %3 = graph.matmul %2, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
  return %3 : tensor<4x2xf32>
}
