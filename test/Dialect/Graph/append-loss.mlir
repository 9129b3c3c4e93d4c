// RUN: fsdp-opt %s -split-input-file -graph-append-loss | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -graph-append-loss=loss=mse | FileCheck %s --check-prefix=MSE

// Tests that 2-D logits get a cross-entropy loss on a new `labels` input:
// the mean over the labels that are not -100, as torch's F.cross_entropy.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %{{.*}}: tensor<4xi64> {graph.input = "labels", graph.label}
// CHECK-SAME: -> (tensor<f32> {graph.loss})
// CHECK: graph.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK-NOT: func.func @forward
// MSE-LABEL: func.func @train_step
// MSE-SAME: %{{.*}}: tensor<4x5xf32> {graph.input = "labels", graph.label}
// MSE: graph.mse_loss
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}) -> (tensor<4x5xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Tests that [B, T, C] logits are flattened to [B*T, C] with [B, T] labels.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<2x3xi64> {graph.input = "labels", graph.label}
// CHECK: graph.reshape %{{.*}} : (tensor<2x3x5xf32>) -> tensor<6x5xf32>
// CHECK: graph.reshape %{{.*}} : (tensor<2x3xi64>) -> tensor<6xi64>
// CHECK: graph.softmax_cross_entropy
func.func @forward(%x: tensor<2x3x5xf32> {graph.input = "input"}) -> (tensor<2x3x5xf32> {graph.output = "logits"}) {
  %0 = graph.relu %x : tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// Tests that a model returning a scalar is taken as computing its own loss.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {graph.loss})
// CHECK-NOT: softmax_cross_entropy
func.func @forward(%x: tensor<4x5xf32> {graph.input = "input"}, %t: tensor<4x5xf32> {graph.input = "target"}) -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.mse_loss %x, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
