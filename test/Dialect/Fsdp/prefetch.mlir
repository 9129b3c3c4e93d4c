// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 -fsdp-prefetch | FileCheck %s
// RUN: fsdp-opt %s -split-input-file '-fsdpc-train-step=mixed-precision=bf16' '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 -fsdp-prefetch | FileCheck %s --check-prefix=MP
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 '-fsdp-prefetch=depth=2' | FileCheck %s --check-prefix=DEPTH2
// RUN: not fsdp-opt %s -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-shard=world-size=2 '-fsdp-prefetch=depth=0' 2>&1 | FileCheck %s --check-prefix=DEPTH0

// Tests that each unit's gather moves up next to the previous unit's, so
// fc2 and fc3 are gathered while fc1 and fc2 compute; frees stay put, and
// backward's first gather (fc3) stays in backward, followed by fc2's.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G1:.*]] = fsdp.all_gather {{.*}}unit = @fc1
// CHECK-NEXT: fsdp.param_view %[[G1]]
// CHECK-NEXT: %[[G2:.*]] = fsdp.all_gather {{.*}}unit = @fc2
// CHECK-NEXT: fsdp.param_view %[[G2]]
// CHECK-NEXT: graph.matmul {{.*}}fsdp.uses = [@fc1]
// CHECK-NEXT: fsdp.free %[[G1]]
// CHECK-NEXT: graph.relu
// CHECK-NEXT: %[[G3:.*]] = fsdp.all_gather {{.*}}unit = @fc3
// CHECK-NEXT: fsdp.param_view %[[G3]]
// CHECK-NEXT: graph.matmul {{.*}}fsdp.uses = [@fc2]
// CHECK-NEXT: fsdp.free %[[G2]]
// CHECK: graph.softmax_cross_entropy_grad
// CHECK-NEXT: %[[B3:.*]] = fsdp.all_gather {{.*}}unit = @fc3
// CHECK-NEXT: fsdp.param_view %[[B3]]
// CHECK-NEXT: %[[B2:.*]] = fsdp.all_gather {{.*}}unit = @fc2
// CHECK-NEXT: fsdp.param_view %[[B2]]
// CHECK-NEXT: graph.matmul {{.*}}fsdp.uses = [@fc3]
// CHECK-NEXT: fsdp.free %[[B3]]
// depth=2 (fsdpc --max-inflight-gathers 3): each gather two units early, in
// order, so all three units are gathered before fc1 computes and at most
// three are in flight; frees stay put.
// DEPTH2-LABEL: func.func @train_step
// DEPTH2: %[[G1:.*]] = fsdp.all_gather {{.*}}unit = @fc1
// DEPTH2-NEXT: fsdp.param_view %[[G1]]
// DEPTH2-NEXT: %[[G2:.*]] = fsdp.all_gather {{.*}}unit = @fc2
// DEPTH2-NEXT: fsdp.param_view %[[G2]]
// DEPTH2-NEXT: %[[G3:.*]] = fsdp.all_gather {{.*}}unit = @fc3
// DEPTH2-NEXT: fsdp.param_view %[[G3]]
// DEPTH2-NEXT: graph.matmul {{.*}}fsdp.uses = [@fc1]
// DEPTH2-NEXT: fsdp.free %[[G1]]
// DEPTH2: graph.softmax_cross_entropy_grad
// DEPTH2-NEXT: fsdp.all_gather {{.*}}unit = @fc3
// DEPTH2-NEXT: fsdp.param_view
// DEPTH2-NEXT: fsdp.all_gather {{.*}}unit = @fc2
// DEPTH0: fsdp-prefetch: depth must be at least 1, got 0

// Under mixed precision, the cast of a shard to bf16 moves with its gather.
// MP-LABEL: func.func @train_step
// MP: %[[G1:.*]] = fsdp.all_gather {{.*}}unit = @fc1
// MP-NEXT: fsdp.param_view %[[G1]]
// MP-NEXT: %[[C2:.*]] = graph.cast %{{.*}} -> tensor<15xbf16>
// MP-NEXT: %[[G2:.*]] = fsdp.all_gather %[[C2]] {group_size = 2 : i64, unit = @fc2} : tensor<15xbf16> -> tensor<30xbf16>
// MP-NEXT: fsdp.param_view %[[G2]]
// MP-NEXT: graph.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<4x3xbf16>, tensor<5x3xbf16>) -> tensor<4x5xbf16>
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
