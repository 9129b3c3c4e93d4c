// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 -fsdp-bucket=bucket-bytes=1000 | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 -fsdp-bucket=bucket-bytes=200 | FileCheck %s --check-prefix=LIMIT
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=strategy=no_shard world-size=2' -fsdp-bucket=bucket-bytes=200 | FileCheck %s --check-prefix=DDP
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-shard=strategy=hybrid_shard world-size=4 shard-group-size=2' -fsdp-bucket=bucket-bytes=1000 | FileCheck %s --check-prefix=HYBRID
// RUN: fsdp-opt %s -split-input-file '-fsdpc-train-step=mixed-precision=bf16' '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 -fsdp-bucket=bucket-bytes=200 | FileCheck %s --check-prefix=MP
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 -fsdp-bucket | FileCheck %s --check-prefix=OFF
// RUN: not fsdp-opt %s -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 '-fsdp-bucket=bucket-bytes=-1' 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// Units fc1, fc2, fc3 gather 64, 120 and 48 bytes. With room for all:
// forward's three gathers run as one bucket where fc1's was, in unit order;
// the views read the bucket's results and the frees stay where they were.
// Backward's gathers (fc3, fc2; fc1's weight gradient needs no fc1) form a
// second bucket: forward and backward are not mixed. The three
// reduce-scatters run as one where the last (fc1's) was, after every flat
// gradient, and the optimizer reads the bucket's results.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]]:3 = fsdp.bucket {
// CHECK-NEXT: %[[A:.*]] = fsdp.all_gather %arg3 {group_size = 2 : i64, unit = @fc1} : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[B:.*]] = fsdp.all_gather %arg6 {group_size = 2 : i64, unit = @fc2} : tensor<15xf32> -> tensor<30xf32>
// CHECK-NEXT: %[[C:.*]] = fsdp.all_gather %arg9 {group_size = 2 : i64, unit = @fc3} : tensor<6xf32> -> tensor<12xf32>
// CHECK-NEXT: fsdp.yield %[[A]], %[[B]], %[[C]] : tensor<16xf32>, tensor<30xf32>, tensor<12xf32>
// CHECK-NEXT: } : tensor<16xf32>, tensor<30xf32>, tensor<12xf32>
// CHECK-NEXT: fsdp.param_view %[[F]]#0 {offset = 0 : i64, param = "fc1.weight"}
// CHECK-NEXT: graph.matmul {{.*}}fsdp.uses = [@fc1]
// CHECK-NEXT: fsdp.free %[[F]]#0
// CHECK: fsdp.param_view %[[F]]#1 {offset = 0 : i64, param = "fc2.weight"}
// CHECK: fsdp.free %[[F]]#1
// CHECK: fsdp.free %[[F]]#2
// CHECK: graph.softmax_cross_entropy_grad
// CHECK-NEXT: %[[BW:.*]]:2 = fsdp.bucket {
// CHECK-NEXT: fsdp.all_gather %arg9 {group_size = 2 : i64, unit = @fc3}
// CHECK-NEXT: fsdp.all_gather %arg6 {group_size = 2 : i64, unit = @fc2}
// CHECK-NEXT: fsdp.yield
// CHECK-NEXT: } : tensor<12xf32>, tensor<30xf32>
// CHECK: %[[G3:.*]] = fsdp.flatten {{.*}}unit = @fc3
// CHECK: %[[G2:.*]] = fsdp.flatten {{.*}}unit = @fc2
// CHECK: %[[G1:.*]] = fsdp.flatten {{.*}}unit = @fc1
// CHECK-NEXT: %[[R:.*]]:3 = fsdp.bucket {
// CHECK-NEXT: fsdp.reduce_scatter %[[G3]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc3} : tensor<12xf32> -> tensor<6xf32>
// CHECK-NEXT: fsdp.reduce_scatter %[[G2]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc2} : tensor<30xf32> -> tensor<15xf32>
// CHECK-NEXT: fsdp.reduce_scatter %[[G1]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc1} : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: fsdp.yield
// CHECK-NEXT: } : tensor<6xf32>, tensor<15xf32>, tensor<8xf32>
// CHECK-NEXT: graph.adamw_update %arg3, %[[R]]#2
// CHECK-NEXT: graph.adamw_update %arg6, %[[R]]#1
// CHECK-NEXT: graph.adamw_update %arg9, %[[R]]#0

// At 200 bytes, forward fits fc1 + fc2 (184); fc3 would pass the limit and
// stays alone, gathered where it was. Backward: fc3 + fc2 (168). The
// gradients: fc3 + fc2 (168), then fc1 alone.
// LIMIT-LABEL: func.func @train_step
// LIMIT: fsdp.bucket {
// LIMIT-NEXT: fsdp.all_gather {{.*}}unit = @fc1
// LIMIT-NEXT: fsdp.all_gather {{.*}}unit = @fc2
// LIMIT-NEXT: fsdp.yield
// LIMIT: graph.relu
// LIMIT: fsdp.all_gather %arg9 {group_size = 2 : i64, unit = @fc3}
// LIMIT: graph.softmax_cross_entropy_grad
// LIMIT-NEXT: fsdp.bucket {
// LIMIT-NEXT: fsdp.all_gather {{.*}}unit = @fc3
// LIMIT-NEXT: fsdp.all_gather {{.*}}unit = @fc2
// LIMIT: fsdp.flatten {{.*}}unit = @fc2
// LIMIT-NEXT: fsdp.bucket {
// LIMIT-NEXT: fsdp.reduce_scatter {{.*}}unit = @fc3
// LIMIT-NEXT: fsdp.reduce_scatter {{.*}}unit = @fc2
// LIMIT-NEXT: fsdp.yield
// LIMIT: fsdp.flatten {{.*}}unit = @fc1
// LIMIT-NEXT: fsdp.reduce_scatter {{.*}}unit = @fc1

// Under no_shard (DDP) the in-place all-reduces of fc3 and fc2 (48 + 120 bytes) are one
// bucket, issued when fc2's gradient is complete, before fc1's backward;
// fc1's (60) would pass the limit.
// DDP-LABEL: func.func @train_step
// DDP: %[[G3:.*]] = fsdp.flatten {{.*}}unit = @fc3
// DDP: %[[G2:.*]] = fsdp.flatten {{.*}}unit = @fc2
// DDP-NEXT: fsdp.bucket {
// DDP-NEXT: fsdp.all_reduce %[[G3]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc3} : tensor<12xf32>
// DDP-NEXT: fsdp.all_reduce %[[G2]] {group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc2} : tensor<30xf32>
// DDP-NEXT: fsdp.yield
// DDP-NEXT: } : tensor<12xf32>, tensor<30xf32>
// DDP-NEXT: graph.relu_grad
// DDP: fsdp.all_reduce {{.*}}unit = @fc1

// hybrid_shard: the reduce-scatters in the shard group are one bucket, and
// the all-reduces across replicas of their results (stride 2) another.
// HYBRID-LABEL: func.func @train_step
// HYBRID: fsdp.flatten {{.*}}unit = @fc1
// HYBRID-NEXT: %[[R:.*]]:3 = fsdp.bucket {
// HYBRID-NEXT: fsdp.reduce_scatter {{.*}}{group_size = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc3}
// HYBRID-NEXT: fsdp.reduce_scatter {{.*}}unit = @fc2
// HYBRID-NEXT: fsdp.reduce_scatter {{.*}}unit = @fc1
// HYBRID: %[[A:.*]]:3 = fsdp.bucket {
// HYBRID-NEXT: fsdp.all_reduce %[[R]]#0 {group_size = 2 : i64, group_stride = 2 : i64, reduction = #fsdp.reduction<avg>, unit = @fc3} : tensor<6xf32>
// HYBRID-NEXT: fsdp.all_reduce %[[R]]#1 {{.*}}unit = @fc2
// HYBRID-NEXT: fsdp.all_reduce %[[R]]#2 {{.*}}unit = @fc1
// HYBRID: graph.adamw_update %arg3, %[[A]]#2

// Mixed precision: the gathers move bf16 (32 + 60 + 24 bytes, all in one
// bucket) and the shards' casts move up with them, ahead of the bucket.
// MP-LABEL: func.func @train_step
// MP: %[[C1:.*]] = graph.cast %arg3 : (tensor<8xf32>) -> tensor<8xbf16>
// MP-NEXT: %[[C2:.*]] = graph.cast %arg6 : (tensor<15xf32>) -> tensor<15xbf16>
// MP-NEXT: %[[C3:.*]] = graph.cast %arg9 : (tensor<6xf32>) -> tensor<6xbf16>
// MP-NEXT: fsdp.bucket {
// MP-NEXT: fsdp.all_gather %[[C1]] {group_size = 2 : i64, unit = @fc1} : tensor<8xbf16> -> tensor<16xbf16>
// MP-NEXT: fsdp.all_gather %[[C2]] {group_size = 2 : i64, unit = @fc2} : tensor<15xbf16> -> tensor<30xbf16>
// MP-NEXT: fsdp.all_gather %[[C3]] {group_size = 2 : i64, unit = @fc3} : tensor<6xbf16> -> tensor<12xbf16>

// bucket-bytes=0, the default: nothing changes.
// OFF-LABEL: func.func @train_step
// OFF-NOT: fsdp.bucket
// OFF: fsdp.all_gather %arg3 {group_size = 2 : i64, unit = @fc1}

// NEGATIVE: fsdp-bucket: bucket-bytes must be non-negative, got -1
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
