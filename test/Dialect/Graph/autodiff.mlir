// RUN: fsdp-opt %s -split-input-file -graph-autodiff | FileCheck %s

// Tests the linear layer rule: gradients of the weight (transposed use) and the
// broadcast bias, and no gradient for the data input.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[SEED:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = graph.mse_loss_grad %{{.*}}, %{{.*}}, %[[SEED]]
// CHECK: %[[DB:.*]] = graph.sum_to %[[DY]] : (tensor<4x5xf32>) -> tensor<5xf32>
// CHECK: %[[DW:.*]] = graph.matmul %[[DY]], %arg0 {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
// CHECK-NOT: graph.matmul
// CHECK: return %{{.*}}, %[[DW]], %[[DB]] : tensor<f32>, tensor<5x3xf32>, tensor<5xf32>
func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}, %b: tensor<5xf32> {graph.param = "b"}, %t: tensor<4x5xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = graph.add %0, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %2 = graph.mse_loss %1, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Tests that the gradients of a value used twice are summed, activations use
// their output, and frozen parameters get no gradient.
// CHECK-LABEL: func.func @train_step
// CHECK: graph.tanh_grad
// CHECK: graph.relu_grad
// CHECK: %[[SUM:.*]] = graph.add %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %{{.*}}, %[[SUM]] : tensor<f32>, tensor<4xf32>
func.func @train_step(%p: tensor<4xf32> {graph.param = "p"}, %f: tensor<4xf32> {graph.frozen_param = "f"}, %t: tensor<4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.mul %p, %f : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = graph.relu %0 : tensor<4xf32>
  %2 = graph.tanh %p : tensor<4xf32>
  %3 = graph.add %1, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = graph.mse_loss %3, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}

// -----

// Tests the softmax, transpose, reshape, scale, sub and div rules.
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: graph.log_softmax_grad
// CHECK-DAG: graph.softmax_grad
// CHECK-DAG: graph.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK-DAG: graph.reshape %{{.*}} : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-DAG: graph.scale %{{.*}} {factor = 2.000000e+00 : f64}
// CHECK-DAG: graph.neg
// CHECK-DAG: graph.div
func.func @train_step(%p: tensor<6xf32> {graph.param = "p"}, %q: tensor<3x2xf32> {graph.param = "q"}, %labels: tensor<3xi64> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.reshape %p : (tensor<6xf32>) -> tensor<2x3xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = graph.scale %1 {factor = 2.0 : f64} : tensor<3x2xf32>
  %3 = graph.sub %2, %q : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %4 = graph.div %3, %q : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %5 = graph.softmax %4 {axis = 1 : i64} : tensor<3x2xf32>
  %6 = graph.log_softmax %5 {axis = 1 : i64} : tensor<3x2xf32>
  %7 = graph.softmax_cross_entropy %6, %labels : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<f32>
  return %7 : tensor<f32>
}

// -----

// Tests the sigmoid and neg rules.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DY:.*]] = graph.mse_loss_grad
// CHECK: %[[NG:.*]] = graph.neg %[[DY]] : tensor<4xf32>
// CHECK: graph.sigmoid_grad %{{.*}}, %[[NG]] : tensor<4xf32>
func.func @train_step(%p: tensor<4xf32> {graph.param = "p"}, %t: tensor<4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.sigmoid %p : tensor<4xf32>
  %1 = graph.neg %0 : tensor<4xf32>
  %2 = graph.mse_loss %1, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Tests the fused ops' rules: gelu_grad reads the forward input, and one
// layer_norm_grad gives the input, scale and bias gradients from the saved
// statistics.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = graph.layer_norm %arg0, %arg1, %arg2
// CHECK: %[[G:.*]] = graph.gelu %[[Y]] {approximate = #graph.approximate<tanh>}
// CHECK: %[[DG:.*]] = graph.gelu_grad %[[Y]], %{{.*}} {approximate = #graph.approximate<tanh>}
// CHECK: %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = graph.layer_norm_grad %arg0, %arg1, %[[MEAN]], %[[RSTD]], %[[DG]] {axis = 1 : i64}
// CHECK: return %{{.*}}, %[[DX]], %[[DW]], %[[DB]]
func.func @train_step(%x: tensor<4x6xf32> {graph.param = "x"}, %w: tensor<6xf32> {graph.param = "w"}, %b: tensor<6xf32> {graph.param = "b"}, %t: tensor<4x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %y, %mean, %rstd = graph.layer_norm %x, %w, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %g = graph.gelu %y {approximate = #graph.approximate<tanh>} : tensor<4x6xf32>
  %l = graph.mse_loss %g, %t : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests gated_activation's rule: one gated_activation_grad from the forward
// operands and dy gives both operands' gradients.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[H:.*]] = graph.gated_activation %arg0, %arg1 {activation = #graph.activation<gelu_tanh>} : tensor<4x6xf32>
// CHECK: %[[DY:.*]] = graph.mse_loss_grad
// CHECK: %[[DG:.*]], %[[DU:.*]] = graph.gated_activation_grad %arg0, %arg1, %[[DY]] {activation = #graph.activation<gelu_tanh>} : tensor<4x6xf32>
// CHECK: return %{{.*}}, %[[DG]], %[[DU]]
func.func @train_step(%gate: tensor<4x6xf32> {graph.param = "gate"}, %up: tensor<4x6xf32> {graph.param = "up"}, %t: tensor<4x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %h = graph.gated_activation %gate, %up {activation = #graph.activation<gelu_tanh>} : tensor<4x6xf32>
  %l = graph.mse_loss %h, %t : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests rotary's rule: the input's gradient is one rotary_grad on the
// same tables; a trained cos table (an exporter's folded parameter) gets
// dy * x summed over the axes it broadcasts along, a sin that is an input
// none.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[R:.*]] = graph.rotary %arg0, %arg1, %arg2
// CHECK: %[[DY:.*]] = graph.mse_loss_grad
// CHECK-DAG: %[[DX:.*]] = graph.rotary_grad %[[DY]], %arg1, %arg2 : (tensor<2x5x4xf32>, tensor<1x5x4xf32>, tensor<1x5x4xf32>) -> tensor<2x5x4xf32>
// CHECK-DAG: %[[P:.*]] = graph.mul %[[DY]], %arg0 : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
// CHECK-DAG: %[[DC:.*]] = graph.sum_to %[[P]] : (tensor<2x5x4xf32>) -> tensor<1x5x4xf32>
// CHECK: return %{{.*}}, %[[DX]], %[[DC]]
func.func @train_step(%x: tensor<2x5x4xf32> {graph.param = "x"}, %cos: tensor<1x5x4xf32> {graph.param = "cos"}, %sin: tensor<1x5x4xf32> {graph.input = "sin"}, %t: tensor<2x5x4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %y = graph.rotary %x, %cos, %sin : (tensor<2x5x4xf32>, tensor<1x5x4xf32>, tensor<1x5x4xf32>) -> tensor<2x5x4xf32>
  %l = graph.mse_loss %y, %t : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the interleaved rotation's rule: rotary_grad keeps `interleaved`,
// and a trained sin table gets dy * rotate_half(x) summed, rotate_half
// interleaved (the odd elements negated, then the even ones, as pairs).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DY:.*]] = graph.mse_loss_grad
// CHECK-DAG: %[[DX:.*]] = graph.rotary_grad %[[DY]], %arg2, %arg1 {interleaved = true}
// CHECK-DAG: %[[EVEN:.*]] = graph.slice %arg0 {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 2>} : (tensor<2x5x4xf32>) -> tensor<2x5x2xf32>
// CHECK-DAG: %[[ODD:.*]] = graph.slice %arg0 {starts = array<i64: 0, 0, 1>, steps = array<i64: 1, 1, 2>} : (tensor<2x5x4xf32>) -> tensor<2x5x2xf32>
// CHECK-DAG: %[[NEG:.*]] = graph.neg %[[ODD]]
// CHECK-DAG: %[[A:.*]] = graph.reshape %[[NEG]] : (tensor<2x5x2xf32>) -> tensor<2x5x2x1xf32>
// CHECK-DAG: %[[B:.*]] = graph.reshape %[[EVEN]] : (tensor<2x5x2xf32>) -> tensor<2x5x2x1xf32>
// CHECK-DAG: %[[PAIRS:.*]] = graph.concat %[[A]], %[[B]] {axis = 3 : i64}
// CHECK-DAG: %[[ROT:.*]] = graph.reshape %[[PAIRS]] : (tensor<2x5x2x2xf32>) -> tensor<2x5x4xf32>
// CHECK-DAG: %[[P:.*]] = graph.mul %[[DY]], %[[ROT]]
// CHECK-DAG: %[[DS:.*]] = graph.sum_to %[[P]] : (tensor<2x5x4xf32>) -> tensor<1x5x4xf32>
// CHECK: return %{{.*}}, %[[DX]], %[[DS]]
func.func @train_step(%x: tensor<2x5x4xf32> {graph.param = "x"}, %sin: tensor<1x5x4xf32> {graph.param = "sin"}, %cos: tensor<1x5x4xf32> {graph.input = "cos"}, %t: tensor<2x5x4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %y = graph.rotary %x, %cos, %sin {interleaved = true} : (tensor<2x5x4xf32>, tensor<1x5x4xf32>, tensor<1x5x4xf32>) -> tensor<2x5x4xf32>
  %l = graph.mse_loss %y, %t : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests masked_softmax's rule: softmax_grad on the last axis (masked
// positions have probability 0, so no gradient), then the scale.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]] = graph.masked_softmax %arg0, %arg1 {scale = 2.500000e-01 : f64}
// CHECK: %[[G:.*]] = graph.softmax_grad %[[Y]], %{{.*}} {axis = -1 : i64}
// CHECK: %[[DX:.*]] = graph.scale %[[G]] {factor = 2.500000e-01 : f64}
// CHECK: return %{{.*}}, %[[DX]]
func.func @train_step(%x: tensor<2x3xf32> {graph.param = "x"}, %m: tensor<2x3xi64> {graph.input = "mask"}, %t: tensor<2x3xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %y = graph.masked_softmax %x, %m {scale = 0.25 : f64} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  %l = graph.mse_loss %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests rms_norm's rule: one rms_norm_grad from the saved inv_rms.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]], %[[R:.*]] = graph.rms_norm %arg0, %arg1
// CHECK: %[[DX:.*]], %[[DW:.*]] = graph.rms_norm_grad %arg0, %arg1, %[[R]], %{{.*}} {axis = 1 : i64}
// CHECK: return %{{.*}}, %[[DX]], %[[DW]]
func.func @train_step(%x: tensor<4x6xf32> {graph.param = "x"}, %w: tensor<6xf32> {graph.param = "w"}, %t: tensor<4x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %y, %r = graph.rms_norm %x, %w {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x6xf32>, tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x1xf32>)
  %l = graph.mse_loss %y, %t : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests attention's rule: one attention_grad from the operands, the forward
// results (out, logsumexp) and dout, giving the query, key and value
// gradients.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = graph.attention %arg0, %arg1, %arg2, %arg3
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = graph.attention_grad %arg0, %arg1, %arg2, %arg3, %[[OUT]], %[[LSE]], %{{.*}} {key_transposed = true, scale = 5.000000e-01 : f64}
// CHECK: return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]]
func.func @train_step(%q: tensor<3x5x4xf32> {graph.param = "q"}, %kt: tensor<3x4x5xf32> {graph.param = "k"}, %v: tensor<3x5x6xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"}, %t: tensor<3x5x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %o, %lse = graph.attention %q, %kt, %v, %m {key_transposed = true, scale = 0.5 : f64} : (tensor<3x5x4xf32>, tensor<3x4x5xf32>, tensor<3x5x6xf32>, tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5xf32>)
  %l = graph.mse_loss %o, %t : (tensor<3x5x6xf32>, tensor<3x5x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that attention_grad keeps the forward op's score cap.
// CHECK-LABEL: func.func @train_step
// CHECK: graph.attention_grad %arg0, %arg1, %arg2, %arg3, %{{.*}}, %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f64, softcap = 3.000000e+01 : f64}
func.func @train_step(%q: tensor<3x5x4xf32> {graph.param = "q"}, %k: tensor<3x5x4xf32> {graph.param = "k"}, %v: tensor<3x5x6xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"}, %t: tensor<3x5x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64, softcap = 30.0 : f64} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x6xf32>, tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5xf32>)
  %l = graph.mse_loss %o, %t : (tensor<3x5x6xf32>, tensor<3x5x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests attention's rule with grouped key and value heads (4 query heads
// on 2): the key and value gradients have the 2 heads' shapes.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = graph.attention %arg0, %arg1, %arg2, %arg3
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = graph.attention_grad %arg0, %arg1, %arg2, %arg3, %[[OUT]], %[[LSE]], %{{.*}} {scale = 5.000000e-01 : f64} : ({{.*}}) -> (tensor<2x4x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x6xf32>)
// CHECK: return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]]
func.func @train_step(%q: tensor<2x4x5x8xf32> {graph.param = "q"}, %k: tensor<2x2x5x8xf32> {graph.param = "k"}, %v: tensor<2x2x5x6xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"}, %t: tensor<2x4x5x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x4x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x6xf32>, tensor<5x5xi64>) -> (tensor<2x4x5x6xf32>, tensor<2x4x5xf32>)
  %l = graph.mse_loss %o, %t : (tensor<2x4x5x6xf32>, tensor<2x4x5x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that attention_grad computes in the forward op's compute_dtype.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = graph.attention %arg0, %arg1, %arg2, %arg3 {compute_dtype = #graph.compute_dtype<bf16>, scale = 5.000000e-01 : f64}
// CHECK: graph.attention_grad %arg0, %arg1, %arg2, %arg3, %[[OUT]], %[[LSE]], %{{.*}} {compute_dtype = #graph.compute_dtype<bf16>, scale = 5.000000e-01 : f64}
func.func @train_step(%q: tensor<3x5x4xf32> {graph.param = "q"}, %k: tensor<3x5x4xf32> {graph.param = "k"}, %v: tensor<3x5x6xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"}, %t: tensor<3x5x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %o, %lse = graph.attention %q, %k, %v, %m {compute_dtype = #graph.compute_dtype<bf16>, scale = 0.5 : f64} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x6xf32>, tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5xf32>)
  %l = graph.mse_loss %o, %t : (tensor<3x5x6xf32>, tensor<3x5x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests packed attention's rule: one packed_attention_grad from qkv, the
// forward results and dout, whose dqkv is the fused projection's gradient
// as it is (no slices, no concat), in the forward op's compute_dtype.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = graph.packed_attention %arg0, %arg1 {compute_dtype = #graph.compute_dtype<bf16>, heads = 3 : i64, scale = 5.000000e-01 : f64}
// CHECK: %[[DQKV:.*]] = graph.packed_attention_grad %arg0, %arg1, %[[OUT]], %[[LSE]], %{{.*}} {compute_dtype = #graph.compute_dtype<bf16>, heads = 3 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x36xf32>, tensor<5x5xi64>, tensor<2x5x12xf32>, tensor<2x3x5xf32>, tensor<2x5x12xf32>) -> tensor<2x5x36xf32>
// CHECK-NOT: graph.concat
// CHECK: return %{{.*}}, %[[DQKV]]
func.func @train_step(%qkv: tensor<2x5x36xf32> {graph.param = "qkv"}, %m: tensor<5x5xi64> {graph.input = "mask"}, %t: tensor<2x5x12xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %o, %lse = graph.packed_attention %qkv, %m {compute_dtype = #graph.compute_dtype<bf16>, heads = 3 : i64, scale = 0.5 : f64} : (tensor<2x5x36xf32>, tensor<5x5xi64>) -> (tensor<2x5x12xf32>, tensor<2x3x5xf32>)
  %l = graph.mse_loss %o, %t : (tensor<2x5x12xf32>, tensor<2x5x12xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the scatters' rules (a transposed convolution scatters its
// patches): gather_grad's adjoint is a gather, slice_grad's a slice, with the
// same indices, axis, starts and steps; the labels' one_hot mask gets none.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DY:.*]] = graph.mse_loss_grad
// CHECK: %[[DM:.*]] = graph.mul %[[DY]], %{{.*}}
// CHECK: %[[DS:.*]] = graph.slice %[[DM]] {starts = array<i64: 1>, steps = array<i64: 2>} : (tensor<9xf32>) -> tensor<4xf32>
// CHECK: %[[DP:.*]] = graph.gather %[[DS]], %arg1 {axis = 0 : i64} : (tensor<4xf32>, tensor<6xi64>) -> tensor<6xf32>
// CHECK-NOT: graph.one_hot
// CHECK: return %{{.*}}, %[[DP]] : tensor<f32>, tensor<6xf32>
func.func @train_step(%p: tensor<6xf32> {graph.param = "p"}, %i: tensor<6xi64> {graph.input = "indices"}, %t: tensor<9xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.gather_grad %p, %i {axis = 0 : i64} : (tensor<6xf32>, tensor<6xi64>) -> tensor<4xf32>
  %1 = graph.slice_grad %0 {starts = array<i64: 1>, steps = array<i64: 2>} : (tensor<4xf32>) -> tensor<9xf32>
  %2 = graph.one_hot %i : (tensor<6xi64>) -> tensor<6x9xf32>
  %3 = graph.reduce_sum %2 {axes = array<i64: 0>, keepdims = false} : (tensor<6x9xf32>) -> tensor<9xf32>
  %4 = graph.mul %1, %3 : (tensor<9xf32>, tensor<9xf32>) -> tensor<9xf32>
  %5 = graph.mse_loss %4, %t : (tensor<9xf32>, tensor<9xf32>) -> tensor<f32>
  return %5 : tensor<f32>
}

// -----

// Tests that a value cut into slices tiling one axis (a fused QKV
// projection split three ways) gets the concat of the slices' gradients,
// in axis order whatever the order of use, and no slice_grad; and that
// slices leaving a gap (the second function) keep the zero-padded
// slice_grads, summed in the order they arrived.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: graph.slice_grad
// CHECK: %[[DK:.*]] = graph.tanh_grad %{{.*}} : tensor<2x3xf32>
// CHECK: %[[DQ:.*]] = graph.relu_grad %{{.*}} : tensor<2x2xf32>
// CHECK: %[[DV:.*]] = graph.sigmoid_grad %{{.*}} : tensor<2x1xf32>
// CHECK-NOT: graph.slice_grad
// CHECK: %[[DX:.*]] = graph.concat %[[DQ]], %[[DK]], %[[DV]] {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x6xf32>
// CHECK-NOT: graph.add
// CHECK: graph.matmul %[[DX]]
func.func @train_step(%x: tensor<2x4xf32> {graph.input = "x"}, %w: tensor<6x4xf32> {graph.param = "w"}, %t: tensor<2x3xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %qkv = graph.matmul %x, %w {transpose_b = true} : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  %q = graph.slice %qkv {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
  %k = graph.slice %qkv {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x3xf32>
  %v = graph.slice %qkv {starts = array<i64: 0, 5>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x1xf32>
  %a = graph.sigmoid %v : tensor<2x1xf32>
  %b = graph.relu %q : tensor<2x2xf32>
  %c = graph.tanh %k : tensor<2x3xf32>
  %ab = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x2xf32>) -> tensor<2x3xf32>
  %s = graph.mul %ab, %c : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.mse_loss %s, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK: %[[G1:.*]] = graph.slice_grad %{{.*}} {starts = array<i64: 0, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x6xf32>
// CHECK: %[[G0:.*]] = graph.slice_grad %{{.*}} {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x6xf32>
// CHECK: %[[SUM:.*]] = graph.add %[[G1]], %[[G0]] : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
// CHECK: graph.matmul %[[SUM]]
// CHECK-NOT: graph.concat
func.func @train_step(%x: tensor<2x4xf32> {graph.input = "x"}, %w: tensor<6x4xf32> {graph.param = "w"}, %t: tensor<2x3xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %qkv = graph.matmul %x, %w {transpose_b = true} : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  %q = graph.slice %qkv {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
  %k = graph.slice %qkv {starts = array<i64: 0, 3>, steps = array<i64: 1, 1>} : (tensor<2x6xf32>) -> tensor<2x3xf32>
  %b = graph.relu %q : tensor<2x2xf32>
  %z = graph.slice %b {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x1xf32>
  %zk = graph.concat %z, %b {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x2xf32>) -> tensor<2x3xf32>
  %s = graph.mul %zk, %k : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.mse_loss %s, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the trigonometric rules (d sin = dy cos x, d cos = -dy sin x, d atan
// = dy / (x^2 + 1)) and the rounding ops' absence of one: floor's path adds
// no gradient term.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[P:.*]]: tensor<4xf32> {graph.param = "p"}
// CHECK: %[[DY:.*]] = graph.mse_loss_grad
// CHECK: %[[X2:.*]] = graph.mul %[[P]], %[[P]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[ONE:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DEN:.*]] = graph.add %[[X2]], %[[ONE]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: %[[DATAN:.*]] = graph.div %[[DY]], %[[DEN]]
// CHECK: %[[SIN:.*]] = graph.sin %[[P]] : tensor<4xf32>
// CHECK: %[[DYSIN:.*]] = graph.mul %[[DY]], %[[SIN]]
// CHECK: %[[DCOS:.*]] = graph.neg %[[DYSIN]]
// CHECK: %[[PARTIAL:.*]] = graph.add %[[DATAN]], %[[DCOS]]
// CHECK: %[[COS:.*]] = graph.cos %[[P]] : tensor<4xf32>
// CHECK: %[[DSIN:.*]] = graph.mul %[[DY]], %[[COS]]
// CHECK: %[[DP:.*]] = graph.add %[[PARTIAL]], %[[DSIN]]
// CHECK: return %{{.*}}, %[[DP]]
func.func @train_step(%p: tensor<4xf32> {graph.param = "p"}, %t: tensor<4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.sin %p : tensor<4xf32>
  %1 = graph.cos %p : tensor<4xf32>
  %2 = graph.atan %p : tensor<4xf32>
  %3 = graph.floor %p : tensor<4xf32>
  %4 = graph.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = graph.add %4, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %6 = graph.add %5, %3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %7 = graph.mse_loss %6, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %7 : tensor<f32>
}

// -----

// Tests an embedding lookup with a padding row (torch's padding_idx): the
// table's gradient is the scatter-add times a constant mask that is zero on
// that row, so the row gets no gradient from the lookup, while the tied
// output projection's gradient reaches it unmasked and the two add.
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[MASK:.*]] = graph.constant dense<{{\[\[}}1.000000e+00], [0.000000e+00], [1.000000e+00], [1.000000e+00]]> : tensor<4x1xf32>
// CHECK-DAG: %[[SCATTERED:.*]] = graph.gather_grad %{{.*}}, %arg1 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<4x2xf32>
// CHECK-DAG: %[[MASKED:.*]] = graph.mul %[[SCATTERED]], %[[MASK]] : (tensor<4x2xf32>, tensor<4x1xf32>) -> tensor<4x2xf32>
// CHECK-DAG: %[[HEAD:.*]] = graph.matmul {{.*}} -> tensor<4x2xf32>
// CHECK: %[[SUM:.*]] = graph.add %[[HEAD]], %[[MASKED]] : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK: return %{{.*}}, %[[SUM]]
func.func @train_step(%w: tensor<4x2xf32> {graph.param = "w"}, %ids: tensor<3xi64> {graph.input = "ids"}, %t: tensor<3x4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %e = graph.gather %w, %ids {axis = 0 : i64, padding_index = 1 : i64} : (tensor<4x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
  %logits = graph.matmul %e, %w {transpose_b = true} : (tensor<3x2xf32>, tensor<4x2xf32>) -> tensor<3x4xf32>
  %l = graph.mse_loss %logits, %t : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests attention's rule with sinks: attention_grad as without them (the
// logsumexp has the sinks in), and each sink's gradient
// -sum exp(sink - lse) rowsum(dout * out) over its head's rows: the rows'
// sums of dout * out, exp of the sinks as a [H, 1] column minus the
// logsumexp, their product summed to the column, negated, as [H].
// CHECK-LABEL: func.func @train_step
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = graph.attention %arg0, %arg1, %arg2, %arg3 sinks %arg4 {scale = 5.000000e-01 : f64}
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = graph.attention_grad %arg0, %arg1, %arg2, %arg3, %[[OUT]], %[[LSE]], %[[DOUT:[^ ]*]] {scale = 5.000000e-01 : f64}
// CHECK: %[[PROD:.*]] = graph.mul %[[DOUT]], %[[OUT]] : (tensor<2x4x5x6xf32>, tensor<2x4x5x6xf32>) -> tensor<2x4x5x6xf32>
// CHECK: %[[DELTA:.*]] = graph.reduce_sum %[[PROD]] {axes = array<i64: 3>, keepdims = false} : (tensor<2x4x5x6xf32>) -> tensor<2x4x5xf32>
// CHECK: %[[COL:.*]] = graph.reshape %arg4 : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK: %[[D:.*]] = graph.sub %[[COL]], %[[LSE]] : (tensor<4x1xf32>, tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
// CHECK: %[[P:.*]] = graph.exp %[[D]]
// CHECK: %[[ROWS:.*]] = graph.mul %[[P]], %[[DELTA]]
// CHECK: %[[SUM:.*]] = graph.sum_to %[[ROWS]] : (tensor<2x4x5xf32>) -> tensor<4x1xf32>
// CHECK: %[[NEG:.*]] = graph.neg %[[SUM]]
// CHECK: %[[DS:.*]] = graph.reshape %[[NEG]] : (tensor<4x1xf32>) -> tensor<4xf32>
// CHECK: return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]], %[[DS]]
func.func @train_step(%q: tensor<2x4x5x8xf32> {graph.param = "q"}, %k: tensor<2x2x5x8xf32> {graph.param = "k"}, %v: tensor<2x2x5x6xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"}, %s: tensor<4xf32> {graph.param = "sinks"}, %t: tensor<2x4x5x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %o, %lse = graph.attention %q, %k, %v, %m sinks %s {scale = 0.5 : f64} : (tensor<2x4x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x6xf32>, tensor<5x5xi64>, tensor<4xf32>) -> (tensor<2x4x5x6xf32>, tensor<2x4x5xf32>)
  %l = graph.mse_loss %o, %t : (tensor<2x4x5x6xf32>, tensor<2x4x5x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that with a token-major output ([B, T, H, Dv]) the rows' sums are
// transposed to the logsumexp's [B, H, T] before they meet it.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DELTA:.*]] = graph.reduce_sum %{{.*}} {axes = array<i64: 3>, keepdims = false} : (tensor<2x5x4x6xf32>) -> tensor<2x5x4xf32>
// CHECK: %[[HEADS:.*]] = graph.transpose %[[DELTA]] {perm = array<i64: 0, 2, 1>} : (tensor<2x5x4xf32>) -> tensor<2x4x5xf32>
// CHECK: graph.mul %{{.*}}, %[[HEADS]]
func.func @train_step(%q: tensor<2x5x4x8xf32> {graph.param = "q"}, %k: tensor<2x5x2x8xf32> {graph.param = "k"}, %v: tensor<2x5x2x6xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"}, %s: tensor<4xf32> {graph.param = "sinks"}, %t: tensor<2x5x4x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %o, %lse = graph.attention %q, %k, %v, %m sinks %s {scale = 0.5 : f64, token_major = array<i1: true, true, true, true>} : (tensor<2x5x4x8xf32>, tensor<2x5x2x8xf32>, tensor<2x5x2x6xf32>, tensor<5x5xi64>, tensor<4xf32>) -> (tensor<2x5x4x6xf32>, tensor<2x4x5xf32>)
  %l = graph.mse_loss %o, %t : (tensor<2x5x4x6xf32>, tensor<2x5x4x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests expert_matmul's rule: the rows' gradient is expert_matmul of the
// result's gradient by the transposed weights, the weights' is
// expert_matmul_weight_grad, with the same experts.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]] = graph.expert_matmul %arg0, %arg1, %arg2 {transpose_weights = true}
// CHECK-DAG: %[[DX:.*]] = graph.expert_matmul %[[DY:[^,]*]], %arg1, %arg2 : (tensor<6x1x5xf32>, tensor<3x5x8xf32>, tensor<6xi64>) -> tensor<6x1x8xf32>
// CHECK-DAG: %[[DW:.*]] = graph.expert_matmul_weight_grad %arg0, %[[DY]], %arg2 {transpose_weights = true} : (tensor<6x1x8xf32>, tensor<6x1x5xf32>, tensor<6xi64>) -> tensor<3x5x8xf32>
// CHECK: return %{{.*}}, %[[DX]], %[[DW]]
func.func @train_step(%x: tensor<6x1x8xf32> {graph.param = "x"}, %w: tensor<3x5x8xf32> {graph.param = "w"}, %e: tensor<6xi64> {graph.input = "experts"}, %t: tensor<6x1x5xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
  %y = graph.expert_matmul %x, %w, %e {transpose_weights = true} : (tensor<6x1x8xf32>, tensor<3x5x8xf32>, tensor<6xi64>) -> tensor<6x1x5xf32>
  %l = graph.mse_loss %y, %t : (tensor<6x1x5xf32>, tensor<6x1x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
