// RUN: fsdp-opt %s -split-input-file -graph-pad-classes | FileCheck %s
// RUN: fsdp-opt %s -split-input-file '-graph-pad-classes=multiple=16' | FileCheck %s --check-prefix=M16
// RUN: fsdp-opt %s -split-input-file -graph-pad-classes -graph-autodiff | FileCheck %s --check-prefix=GRAD

// Tests a tied head as GPT-2 exports it: bf16 logits [2, 4, 39] from a
// transposed weight, reshaped to [8, 39] for the loss. The weight gets one
// zero row (40 = 5 x 8; 48 with multiple=16), the matmul and the reshape
// the padded extent, and the loss the real count, its reduction and
// ignore_index kept. The weight's other reader (the embedding) still reads
// it unpadded. Autodiff gives the weight the padded gradient's first 39
// rows (a slice), added to the embedding's gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x32xbf16>
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<39x32xbf16>
// CHECK: %[[E:.*]] = graph.gather %[[W]], %{{.*}} {axis = 0 : i64} : (tensor<39x32xbf16>, tensor<2x4xi64>)
// CHECK: %[[H:.*]] = graph.add %[[X]], %[[E]]
// CHECK: %[[Z:.*]] = graph.constant dense<0.000000e+00> : tensor<1x32xbf16>
// CHECK-NEXT: %[[WP:.*]] = graph.concat %[[W]], %[[Z]] {axis = 0 : i64} : (tensor<39x32xbf16>, tensor<1x32xbf16>) -> tensor<40x32xbf16>
// CHECK-NEXT: %[[L:.*]] = graph.matmul %[[H]], %[[WP]] {graph.prediction = "logits", transpose_b = true} : (tensor<2x4x32xbf16>, tensor<40x32xbf16>) -> tensor<2x4x40xbf16>
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[L]] : (tensor<2x4x40xbf16>) -> tensor<8x40xbf16>
// CHECK-NEXT: %[[LOSS:.*]] = graph.softmax_cross_entropy %[[R]], %{{.*}} {classes = 39 : i64, ignore_index = -100 : i64, reduction = #graph.reduction<sum>} : (tensor<8x40xbf16>, tensor<8xi64>) -> tensor<f32>
// CHECK-NOT: graph.matmul
// CHECK: return %[[LOSS]]
// M16-LABEL: func.func @train_step
// M16: graph.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<39x32xbf16>, tensor<9x32xbf16>) -> tensor<48x32xbf16>
// M16: graph.softmax_cross_entropy %{{.*}}, %{{.*}} {classes = 39 : i64, {{.*}}} : (tensor<8x48xbf16>, tensor<8xi64>)
// GRAD-LABEL: func.func @train_step
// GRAD: %[[DL:.*]] = graph.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {classes = 39 : i64, ignore_index = -100 : i64, reduction = #graph.reduction<sum>} : (tensor<8x40xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x40xbf16>
// GRAD: %[[DWP:.*]] = graph.matmul %{{.*}}, %{{.*}} {transpose_a = true} : (tensor<8x40xbf16>, tensor<8x32xbf16>) -> tensor<40x32xbf16>
// GRAD: %[[DW:.*]] = graph.slice %[[DWP]] {{.*}}: (tensor<40x32xbf16>) -> tensor<39x32xbf16>
// GRAD: graph.gather_grad
// GRAD: graph.add %{{.*}} : (tensor<39x32xbf16>, tensor<39x32xbf16>) -> tensor<39x32xbf16>
func.func @train_step(%x: tensor<2x4x32xbf16> {graph.input = "x"}, %w: tensor<39x32xbf16> {graph.param = "wte"}, %ids: tensor<2x4xi64> {graph.input = "ids"}, %y: tensor<8xi64> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %e = graph.gather %w, %ids {axis = 0 : i64} : (tensor<39x32xbf16>, tensor<2x4xi64>) -> tensor<2x4x32xbf16>
  %h = graph.add %x, %e : (tensor<2x4x32xbf16>, tensor<2x4x32xbf16>) -> tensor<2x4x32xbf16>
  %l = graph.matmul %h, %w {graph.prediction = "logits", transpose_b = true} : (tensor<2x4x32xbf16>, tensor<39x32xbf16>) -> tensor<2x4x39xbf16>
  %r = graph.reshape %l : (tensor<2x4x39xbf16>) -> tensor<8x39xbf16>
  %loss = graph.softmax_cross_entropy %r, %y {ignore_index = -100 : i64, reduction = #graph.reduction<sum>} : (tensor<8x39xbf16>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests a weight that is not transposed ([K, C], f16): zero columns.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Z:.*]] = graph.constant dense<0.000000e+00> : tensor<32x3xf16>
// CHECK-NEXT: %[[WP:.*]] = graph.concat %{{.*}}, %[[Z]] {axis = 1 : i64} : (tensor<32x13xf16>, tensor<32x3xf16>) -> tensor<32x16xf16>
// CHECK-NEXT: %[[L:.*]] = graph.matmul %{{.*}}, %[[WP]] : (tensor<8x32xf16>, tensor<32x16xf16>) -> tensor<8x16xf16>
// CHECK-NEXT: graph.softmax_cross_entropy %[[L]], %{{.*}} {classes = 13 : i64} : (tensor<8x16xf16>, tensor<8xi64>) -> tensor<f32>
func.func @train_step(%x: tensor<8x32xf16> {graph.input = "x"}, %w: tensor<32x13xf16> {graph.param = "w"}, %y: tensor<8xi64> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %l = graph.matmul %x, %w : (tensor<8x32xf16>, tensor<32x13xf16>) -> tensor<8x13xf16>
  %loss = graph.softmax_cross_entropy %l, %y : (tensor<8x13xf16>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests what is left as it is: f32 logits (no tensor cores), classes
// already a multiple of 8, logits not made by a matmul, and a matmul whose
// result is read besides the loss.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: graph.concat
// CHECK: graph.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<8x13xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: graph.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32>
// CHECK: graph.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<8x13xbf16>, tensor<8xi64>) -> tensor<f32>
// CHECK: graph.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<8x13xbf16>, tensor<8xi64>) -> tensor<f32>
// CHECK-NOT: graph.concat
func.func @train_step(%x: tensor<8x32xf32> {graph.input = "x"}, %w: tensor<13x32xf32> {graph.param = "w"}, %xl: tensor<8x32xbf16> {graph.input = "xl"}, %w16: tensor<16x32xbf16> {graph.param = "w16"}, %a: tensor<8x13xbf16> {graph.input = "a"}, %w13: tensor<13x32xbf16> {graph.param = "w13"}, %y: tensor<8xi64> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<8x13xbf16>) {
  %l = graph.matmul %x, %w {transpose_b = true} : (tensor<8x32xf32>, tensor<13x32xf32>) -> tensor<8x13xf32>
  %loss0 = graph.softmax_cross_entropy %l, %y : (tensor<8x13xf32>, tensor<8xi64>) -> tensor<f32>
  %l16 = graph.matmul %xl, %w16 {transpose_b = true} : (tensor<8x32xbf16>, tensor<16x32xbf16>) -> tensor<8x16xbf16>
  %loss1 = graph.softmax_cross_entropy %l16, %y : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32>
  %r = graph.relu %a : tensor<8x13xbf16>
  %loss2 = graph.softmax_cross_entropy %r, %y : (tensor<8x13xbf16>, tensor<8xi64>) -> tensor<f32>
  %l13 = graph.matmul %xl, %w13 {transpose_b = true} : (tensor<8x32xbf16>, tensor<13x32xbf16>) -> tensor<8x13xbf16>
  %loss3 = graph.softmax_cross_entropy %l13, %y : (tensor<8x13xbf16>, tensor<8xi64>) -> tensor<f32>
  %s0 = graph.add %loss0, %loss1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %s1 = graph.add %s0, %loss2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %s2 = graph.add %s1, %loss3 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %s2, %l13 : tensor<f32>, tensor<8x13xbf16>
}
