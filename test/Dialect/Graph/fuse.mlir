// RUN: fsdp-opt %s -split-input-file -graph-fuse | FileCheck %s

// Tests that the opset-13 layer norm formula (ReduceMean as reduce_sum and
// scale, the square as pow by 2) with scale and bias becomes one layer_norm.
// CHECK-LABEL: func.func @layer_norm_affine
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = graph.layer_norm %arg0, %arg1, %arg2 {axis = 1 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
// CHECK-NOT: graph.div
// CHECK: return %[[Y]]
func.func @layer_norm_affine(%x: tensor<4x6xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<4x6xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %m = graph.scale %s {factor = 0.16666666666666666 : f64} : tensor<4x1xf32>
  %d = graph.sub %x, %m : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %q = graph.pow %d, %two : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  %qs = graph.reduce_sum %q {axes = array<i64: 1>, keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %v = graph.scale %qs {factor = 0.16666666666666666 : f64} : tensor<4x1xf32>
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %ve = graph.add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %sd = graph.sqrt %ve : tensor<4x1xf32>
  %n = graph.div %d, %sd : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %nw = graph.mul %n, %w : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %y = graph.add %b, %nw : (tensor<6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// Tests a layer norm over two trailing dimensions with the square as a
// product and no affine part: scale ones, bias zeros.
// CHECK-LABEL: func.func @layer_norm_plain
// CHECK-DAG: %[[ONES:.*]] = graph.constant dense<1.000000e+00> : tensor<3x4xf32>
// CHECK-DAG: %[[ZEROS:.*]] = graph.constant dense<0.000000e+00> : tensor<3x4xf32>
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = graph.layer_norm %arg0, %[[ONES]], %[[ZEROS]] {axis = 1 : i64, epsilon = 0.0010000000474974513 : f64} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
// CHECK: return %[[Y]]
func.func @layer_norm_plain(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1, 2>, keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %m = graph.scale %s {factor = 0.083333333333333329 : f64} : tensor<2x1x1xf32>
  %d = graph.sub %x, %m : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %q = graph.mul %d, %d : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %qs = graph.reduce_sum %q {axes = array<i64: 1, 2>, keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %v = graph.scale %qs {factor = 0.083333333333333329 : f64} : tensor<2x1x1xf32>
  %eps = graph.constant dense<1.0e-3> : tensor<f32>
  %ve = graph.add %eps, %v : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %sd = graph.sqrt %ve : tensor<2x1x1xf32>
  %n = graph.div %d, %sd : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  return %n : tensor<2x3x4xf32>
}

// -----

// Tests that a formula that is not a layer norm stays: the variance is taken
// over another axis than the mean.
// CHECK-LABEL: func.func @not_layer_norm
// CHECK-NOT: graph.layer_norm
// CHECK: graph.div
func.func @not_layer_norm(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %m = graph.scale %s {factor = 0.16666666666666666 : f64} : tensor<4x1xf32>
  %d = graph.sub %x, %m : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %q = graph.mul %d, %d : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %qs = graph.reduce_sum %q {axes = array<i64: 0>, keepdims = true} : (tensor<4x6xf32>) -> tensor<1x6xf32>
  %v = graph.scale %qs {factor = 0.25 : f64} : tensor<1x6xf32>
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %ve = graph.add %v, %eps : (tensor<1x6xf32>, tensor<f32>) -> tensor<1x6xf32>
  %sd = graph.sqrt %ve : tensor<1x6xf32>
  %n = graph.div %d, %sd : (tensor<4x6xf32>, tensor<1x6xf32>) -> tensor<4x6xf32>
  return %n : tensor<4x6xf32>
}

// -----

// Tests GELU as torch 1.13 exports it: x * (1 + erf(x / sqrt(2))) * 0.5.
// CHECK-LABEL: func.func @gelu_erf
// CHECK: %[[Y:.*]] = graph.gelu %arg0 : tensor<2x5xf32>
// CHECK-NOT: graph.erf
// CHECK: return %[[Y]]
func.func @gelu_erf(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %c = graph.constant dense<1.41421354> : tensor<f32>
  %u = graph.div %x, %c : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %e = graph.erf %u : tensor<2x5xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %a = graph.add %e, %one : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %p = graph.mul %x, %a : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %y = graph.mul %p, %half : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

// Tests the other orders of the products: (0.5 * x) * (1 + erf(x * 1/sqrt(2)))
// and (0.5 * (1 + erf)) * x.
// CHECK-LABEL: func.func @gelu_erf_orders
// CHECK: %[[Y1:.*]] = graph.gelu %arg0 :
// CHECK: %[[Y2:.*]] = graph.gelu %arg0 :
// CHECK-NOT: graph.erf
// CHECK: return %[[Y1]], %[[Y2]]
func.func @gelu_erf_orders(%x: tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x5xf32>) {
  %c = graph.constant dense<0.707106769> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %u = graph.mul %c, %x : (tensor<f32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %e = graph.erf %u : tensor<2x5xf32>
  %a = graph.add %one, %e : (tensor<f32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %hx = graph.mul %half, %x : (tensor<f32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %y1 = graph.mul %a, %hx : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %u2 = graph.mul %x, %c : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %e2 = graph.erf %u2 : tensor<2x5xf32>
  %a2 = graph.add %e2, %one : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %h2 = graph.mul %a2, %half : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %y2 = graph.mul %h2, %x : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %y1, %y2 : tensor<2x5xf32>, tensor<2x5xf32>
}

// -----

// Tests the tanh approximation as torch 1.13 exports it (x^3 as x * (x * x))
// and with pow(x, 3).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[Y1:.*]] = graph.gelu %arg0 {approximate = #graph.approximate<tanh>}
// CHECK: %[[Y2:.*]] = graph.gelu %arg0 {approximate = #graph.approximate<tanh>}
// CHECK-NOT: graph.tanh
// CHECK: return %[[Y1]], %[[Y2]]
func.func @gelu_tanh(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %cubic = graph.constant dense<0.044715> : tensor<f32>
  %k = graph.constant dense<0.797884583> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %three = graph.constant dense<3.0> : tensor<f32>
  %sq = graph.mul %x, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %cube = graph.mul %x, %sq : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %t = graph.mul %cubic, %cube : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %in = graph.add %x, %t : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = graph.mul %k, %in : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %th = graph.tanh %s : tensor<3xf32>
  %a = graph.add %one, %th : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %p = graph.mul %x, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y1 = graph.mul %half, %p : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %cube2 = graph.pow %x, %three : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %t2 = graph.mul %cube2, %cubic : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %in2 = graph.add %t2, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s2 = graph.mul %in2, %k : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %th2 = graph.tanh %s2 : tensor<3xf32>
  %a2 = graph.add %th2, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %p2 = graph.mul %a2, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y2 = graph.mul %p2, %half : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %y1, %y2 : tensor<3xf32>, tensor<3xf32>
}

// -----

// Tests SwiGLU as exports write it, (gate * sigmoid(gate)) * up in either
// operand order, and GeGLU, gelu(gate) * up after the GELU formula fuses,
// each becoming one gated_activation.
// CHECK-LABEL: func.func @swiglu
// CHECK: %[[A:.*]] = graph.gated_activation %arg0, %arg1 : tensor<2x3x8xf32>
// CHECK: %[[B:.*]] = graph.gated_activation %arg1, %arg0 : tensor<2x3x8xf32>
// CHECK-NOT: graph.sigmoid
// CHECK: return %[[A]], %[[B]]
// CHECK-LABEL: func.func @geglu
// CHECK: %[[Y:.*]] = graph.gated_activation %arg0, %arg1 {activation = #graph.activation<gelu_tanh>} : tensor<4x8xf32>
// CHECK: %[[Z:.*]] = graph.gated_activation %arg1, %arg0 {activation = #graph.activation<gelu>} : tensor<4x8xf32>
// CHECK-NOT: graph.gelu
// CHECK: return %[[Y]], %[[Z]]
func.func @swiglu(%gate: tensor<2x3x8xf32>, %up: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %s = graph.sigmoid %gate : tensor<2x3x8xf32> loc("sigmoid")
  %a = graph.mul %gate, %s : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32> loc("silu")
  %y = graph.mul %a, %up : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32> loc("product")
  %s2 = graph.sigmoid %up : tensor<2x3x8xf32>
  %a2 = graph.mul %s2, %up : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %z = graph.mul %gate, %a2 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y, %z : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
func.func @geglu(%gate: tensor<4x8xf32>, %up: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %g = graph.gelu %gate {approximate = #graph.approximate<tanh>} : tensor<4x8xf32>
  %y = graph.mul %g, %up : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %u = graph.div %up, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = graph.erf %u : tensor<4x8xf32>
  %ea = graph.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %p = graph.mul %up, %ea : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gu = graph.mul %p, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %z = graph.mul %gate, %gu : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests what stays: a sigmoid of another value than the one it multiplies
// (GPT-OSS's clamped gate), an activation read elsewhere (fusing would
// compute it twice), a broadcast up, and a product with the gate times a
// number inside the sigmoid.
// CHECK-LABEL: func.func @gated_near_misses
// CHECK-NOT: graph.gated_activation
// CHECK: return
func.func @gated_near_misses(%gate: tensor<4x8xf32>, %up: tensor<4x8xf32>, %row: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = graph.sigmoid %up : tensor<4x8xf32>
  %a = graph.mul %gate, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = graph.mul %a, %up : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = graph.gelu %gate : tensor<4x8xf32>
  %y2 = graph.mul %g, %up : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s3 = graph.sigmoid %gate : tensor<4x8xf32>
  %a3 = graph.mul %gate, %s3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y3 = graph.mul %a3, %row : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %alpha = graph.constant dense<1.702> : tensor<f32>
  %scaled = graph.mul %gate, %alpha : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s4 = graph.sigmoid %scaled : tensor<4x8xf32>
  %a4 = graph.mul %gate, %s4 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y4 = graph.mul %a4, %up : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = graph.add %y2, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %sum, %y3, %y4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a near miss stays: 0.6 is not GELU's 0.5, and a used
// intermediate keeps its op while the rest still fuses.
// CHECK-LABEL: func.func @gelu_near_miss
// CHECK: graph.erf
// CHECK-NOT: graph.gelu
// CHECK-LABEL: func.func @gelu_shared_intermediate
// CHECK: %[[U:.*]] = graph.div %arg0
// CHECK: %[[Y:.*]] = graph.gelu %arg0
// CHECK: return %[[Y]], %[[U]]
func.func @gelu_near_miss(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %notHalf = graph.constant dense<0.6> : tensor<f32>
  %u = graph.div %x, %c : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %e = graph.erf %u : tensor<3xf32>
  %a = graph.add %e, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %p = graph.mul %x, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = graph.mul %p, %notHalf : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
func.func @gelu_shared_intermediate(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %c = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %u = graph.div %x, %c : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %e = graph.erf %u : tensor<3xf32>
  %a = graph.add %e, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %p = graph.mul %x, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = graph.mul %p, %half : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %y, %u : tensor<3xf32>, tensor<3xf32>
}

// -----

// Tests attention's scale, causal mask and softmax as exports write them
// (Mul by a constant, Where with -inf, Softmax on the last axis), and with
// the scale as a division.
// CHECK-LABEL: func.func @masked_softmax
// CHECK: %[[Y1:.*]] = graph.masked_softmax %arg0, %arg1 {scale = 5.000000e-01 : f64} : (tensor<2x4x4xf32>, tensor<1x4x4xi64>) -> tensor<2x4x4xf32>
// CHECK: %[[Y2:.*]] = graph.masked_softmax %arg0, %arg1 {scale = 2.500000e-01 : f64}
// CHECK-NOT: graph.select
// CHECK: return %[[Y1]], %[[Y2]]
func.func @masked_softmax(%x: tensor<2x4x4xf32>, %m: tensor<1x4x4xi64>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %c = graph.constant dense<0.5> : tensor<f32>
  %four = graph.constant dense<4.0> : tensor<f32>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %s = graph.mul %c, %x : (tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %w = graph.select %m, %ninf, %s : (tensor<1x4x4xi64>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y1 = graph.softmax %w {axis = -1 : i64} : tensor<2x4x4xf32>
  %d = graph.div %x, %four : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %w2 = graph.select %m, %ninf, %d : (tensor<1x4x4xi64>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y2 = graph.softmax %w2 {axis = 2 : i64} : tensor<2x4x4xf32>
  return %y1, %y2 : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Tests that a finite fill or another axis than the last keeps the ops.
// CHECK-LABEL: func.func @not_masked_softmax
// CHECK-NOT: graph.masked_softmax
// CHECK: graph.select
// CHECK: graph.softmax
func.func @not_masked_softmax(%x: tensor<2x4x4xf32>, %m: tensor<1x4x4xi64>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %big = graph.constant dense<-1.0e4> : tensor<f32>
  %w = graph.select %m, %big, %x : (tensor<1x4x4xi64>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y1 = graph.softmax %w {axis = -1 : i64} : tensor<2x4x4xf32>
  %w2 = graph.select %m, %ninf, %x : (tensor<1x4x4xi64>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y2 = graph.softmax %w2 {axis = 1 : i64} : tensor<2x4x4xf32>
  return %y1, %y2 : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Tests RMSNorm as LLaMA exports write it (Pow, ReduceMean, Add eps, Sqrt,
// Div, Mul weight), and with x * reciprocal(sqrt(..)) and no weight.
// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[ONES:.*]] = graph.constant dense<1.000000e+00> : tensor<6xf32>
// CHECK: %[[Y1:.*]], %{{.*}} = graph.rms_norm %arg0, %arg1 {axis = 1 : i64, epsilon = 9.9999999747524271E-7 : f64} : (tensor<4x6xf32>, tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x1xf32>)
// CHECK: %[[Y2:.*]], %{{.*}} = graph.rms_norm %arg0, %[[ONES]]
// CHECK-NOT: graph.sqrt
// CHECK: return %[[Y1]], %[[Y2]]
func.func @rms_norm(%x: tensor<4x6xf32>, %w: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %two = graph.constant dense<2.0> : tensor<f32>
  %eps = graph.constant dense<1.0e-6> : tensor<f32>
  %q = graph.pow %x, %two : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  %s = graph.reduce_sum %q {axes = array<i64: 1>, keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %m = graph.scale %s {factor = 0.16666666666666666 : f64} : tensor<4x1xf32>
  %a = graph.add %m, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = graph.sqrt %a : tensor<4x1xf32>
  %n = graph.div %x, %r : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %y1 = graph.mul %n, %w : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %q2 = graph.mul %x, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %s2 = graph.reduce_sum %q2 {axes = array<i64: 1>, keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %m2 = graph.scale %s2 {factor = 0.16666666666666666 : f64} : tensor<4x1xf32>
  %a2 = graph.add %eps, %m2 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %r2 = graph.sqrt %a2 : tensor<4x1xf32>
  %i2 = graph.reciprocal %r2 : tensor<4x1xf32>
  %y2 = graph.mul %x, %i2 : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return %y1, %y2 : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// Tests RMSNorm with the reciprocal written 1 / sqrt(..) and the weight on
// the left (Optimum's LLaMA exports); a numerator other than 1 stays.
// CHECK-LABEL: func.func @rms_norm_one_over
// CHECK: %[[Y:.*]], %{{.*}} = graph.rms_norm %arg0, %arg1 {axis = 1 : i64, epsilon = 9.9999999747524271E-7 : f64}
// CHECK: graph.sqrt
// CHECK: graph.div
// CHECK: return %[[Y]]
func.func @rms_norm_one_over(%x: tensor<4x6xf32>, %w: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %two = graph.constant dense<2.0> : tensor<f32>
  %eps = graph.constant dense<1.0e-6> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %three = graph.constant dense<3.0> : tensor<f32>
  %q = graph.pow %x, %two : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  %s = graph.reduce_sum %q {axes = array<i64: 1>, keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %m = graph.scale %s {factor = 0.16666666666666666 : f64} : tensor<4x1xf32>
  %a = graph.add %m, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = graph.sqrt %a : tensor<4x1xf32>
  %i = graph.div %one, %r : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = graph.mul %x, %i : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %y = graph.mul %w, %n : (tensor<6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %q2 = graph.pow %x, %two : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  %s2 = graph.reduce_sum %q2 {axes = array<i64: 1>, keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %m2 = graph.scale %s2 {factor = 0.16666666666666666 : f64} : tensor<4x1xf32>
  %a2 = graph.add %m2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r2 = graph.sqrt %a2 : tensor<4x1xf32>
  %i2 = graph.div %three, %r2 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %y2 = graph.mul %x, %i2 : (tensor<4x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return %y, %y2 : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// Tests LLaMA's additive causal mask: softmax(x / c + M) with M a constant
// of 0 and -inf becomes masked_softmax with an i64 mask of M's -inf places;
// a mask with other values stays.
// CHECK-LABEL: func.func @additive_mask
// CHECK: %[[MASK:.*]] = graph.constant dense<{{\[}}[0, 1], [0, 0]]> : tensor<2x2xi64>
// CHECK: %[[Y:.*]] = graph.masked_softmax %arg0, %[[MASK]] {scale = 5.000000e-01 : f64}
// CHECK: graph.softmax
// CHECK: return %[[Y]]
func.func @additive_mask(%x: tensor<3x2x2xf32>) -> (tensor<3x2x2xf32>, tensor<3x2x2xf32>) {
  %two = graph.constant dense<2.0> : tensor<f32>
  %m = graph.constant dense<[[0.0, 0xFF800000], [0.0, 0.0]]> : tensor<2x2xf32>
  %bias = graph.constant dense<[[0.0, -1.0], [0.0, 0.0]]> : tensor<2x2xf32>
  %d = graph.div %x, %two : (tensor<3x2x2xf32>, tensor<f32>) -> tensor<3x2x2xf32>
  %a = graph.add %d, %m : (tensor<3x2x2xf32>, tensor<2x2xf32>) -> tensor<3x2x2xf32>
  %y = graph.softmax %a {axis = -1 : i64} : tensor<3x2x2xf32>
  %a2 = graph.add %bias, %x : (tensor<2x2xf32>, tensor<3x2x2xf32>) -> tensor<3x2x2xf32>
  %y2 = graph.softmax %a2 {axis = -1 : i64} : tensor<3x2x2xf32>
  return %y, %y2 : tensor<3x2x2xf32>, tensor<3x2x2xf32>
}

// -----

// Tests the additive mask transformers computes at run time from the
// attention_mask input, where(keep, 0, -inf): masked_softmax excludes the
// positions where keep == 0; where(drop, -inf, 0) excludes drop's own
// positions; a fill that exp does not take to 0 (the -10000 of older
// exports) is not a mask and stays.
// CHECK-LABEL: func.func @additive_runtime_mask
// CHECK: %[[ZERO:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK: %[[DROP:.*]] = graph.compare %arg1, %[[ZERO]] {predicate = #graph.predicate<eq>} : (tensor<2x1x4x4xi64>, tensor<i64>) -> tensor<2x1x4x4xi64>
// CHECK: %[[Y1:.*]] = graph.masked_softmax %arg0, %[[DROP]] {scale = 1.000000e+00 : f64} : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xi64>) -> tensor<2x3x4x4xf32>
// CHECK: %[[Y2:.*]] = graph.masked_softmax %arg0, %arg1 {scale = 1.000000e+00 : f64}
// CHECK: %[[Y3:.*]] = graph.softmax
// CHECK: return %[[Y1]], %[[Y2]], %[[Y3]]
func.func @additive_runtime_mask(%x: tensor<2x3x4x4xf32>, %keep: tensor<2x1x4x4xi64>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) {
  %zero = graph.constant dense<0.0> : tensor<1xf32>
  %ninf = graph.constant dense<0xFF800000> : tensor<1xf32>
  %min = graph.constant dense<-1.0e4> : tensor<1xf32>
  %additive = graph.select %keep, %zero, %ninf : (tensor<2x1x4x4xi64>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x4x4xf32>
  %a1 = graph.add %x, %additive : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y1 = graph.softmax %a1 {axis = 3 : i64} : tensor<2x3x4x4xf32>
  %inverted = graph.select %keep, %ninf, %zero : (tensor<2x1x4x4xi64>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x4x4xf32>
  %a2 = graph.add %inverted, %x : (tensor<2x1x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y2 = graph.softmax %a2 {axis = -1 : i64} : tensor<2x3x4x4xf32>
  %finite = graph.select %keep, %zero, %min : (tensor<2x1x4x4xi64>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x4x4xf32>
  %a3 = graph.add %x, %finite : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y3 = graph.softmax %a3 {axis = 3 : i64} : tensor<2x3x4x4xf32>
  return %y1, %y2, %y3 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
}

// -----

// Tests BERT's and BART's encoder masks: x = 1 - attention_mask, then
// where(x != 0, finfo.min, x) (through a slice that takes everything):
// x is 0 wherever the test is, so the test is the mask. With a condition
// that is not x's test, x's own values would be added: it stays.
// CHECK-LABEL: func.func @finite_fill_mask
// CHECK: %[[X:.*]] = graph.sub
// CHECK: %[[NZ:.*]] = graph.compare %[[X]], %{{.*}} {predicate = #graph.predicate<ne>}
// CHECK: %[[DROP:.*]] = graph.cast %[[NZ]] {to_bool = true}
// CHECK: %[[Y:.*]] = graph.masked_softmax %arg0, %[[DROP]] {scale = 1.000000e+00 : f64} : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xi64>)
// CHECK-NOT: graph.select
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @finite_fill_other_condition
// CHECK: graph.select
// CHECK: graph.softmax
func.func @finite_fill_mask(%x: tensor<2x3x4x4xf32>, %m: tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %one = graph.constant dense<1.0> : tensor<f32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %min = graph.constant dense<-3.40282347E+38> : tensor<f32>
  %inverted = graph.sub %one, %m : (tensor<f32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %nonzero = graph.compare %inverted, %zero {predicate = #graph.predicate<ne>} : (tensor<2x1x4x4xf32>, tensor<f32>) -> tensor<2x1x4x4xi64>
  %drop = graph.cast %nonzero {to_bool = true} : (tensor<2x1x4x4xi64>) -> tensor<2x1x4x4xi64>
  %additive = graph.select %drop, %min, %inverted : (tensor<2x1x4x4xi64>, tensor<f32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %all = graph.slice %additive {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %a = graph.add %x, %all : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = graph.softmax %a {axis = 3 : i64} : tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}
func.func @finite_fill_other_condition(%x: tensor<2x3x4x4xf32>, %m: tensor<2x1x4x4xf32>, %c: tensor<2x1x4x4xi64>) -> tensor<2x3x4x4xf32> {
  %one = graph.constant dense<1.0> : tensor<f32>
  %min = graph.constant dense<-3.40282347E+38> : tensor<f32>
  %inverted = graph.sub %one, %m : (tensor<f32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %additive = graph.select %c, %min, %inverted : (tensor<2x1x4x4xi64>, tensor<f32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %a = graph.add %x, %additive : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = graph.softmax %a {axis = 3 : i64} : tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}

// -----

// Tests the eager attention of OPT, GPT-J and CodeGen: the causal mask
// constant M (0 and finfo.min) with the padding filled in at run time,
// where(drop, finfo.min, M), is excluded where drop or M is: one [T, T]
// slice of M, and the mask not (drop == 0 and M == 0). CodeGen divides
// (scores + mask) by c > 0, which is the scale 1 / c; a negative divisor
// would turn the fill to +inf: it stays.
// CHECK-LABEL: func.func @eager_causal_padding_mask
// CHECK: %[[M:.*]] = graph.constant dense<{{\[\[\[\[}}0, 1], [0, 0]]]]> : tensor<1x1x2x2xi64>
// CHECK: %[[KEPT0:.*]] = graph.compare %arg1, %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<3x1x2x2xi64>, tensor<i64>)
// CHECK: %[[KEPT1:.*]] = graph.compare %[[M]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<1x1x2x2xi64>, tensor<i64>)
// CHECK: %[[KEPT:.*]] = graph.mul %[[KEPT0]], %[[KEPT1]] : (tensor<3x1x2x2xi64>, tensor<1x1x2x2xi64>) -> tensor<3x1x2x2xi64>
// CHECK: %[[DROP:.*]] = graph.compare %[[KEPT]], %{{.*}} {predicate = #graph.predicate<eq>}
// CHECK: %[[Y:.*]] = graph.masked_softmax %arg0, %[[DROP]] {scale = 5.000000e-01 : f64}
// CHECK: graph.softmax
// CHECK: return %[[Y]]
func.func @eager_causal_padding_mask(%x: tensor<3x2x2x2xf32>, %drop: tensor<3x1x2x2xi64>) -> (tensor<3x2x2x2xf32>, tensor<3x2x2x2xf32>) {
  %m = graph.constant dense<[[[[0.0, -3.40282347E+38], [0.0, 0.0]]], [[[0.0, -3.40282347E+38], [0.0, 0.0]]], [[[0.0, -3.40282347E+38], [0.0, 0.0]]]]> : tensor<3x1x2x2xf32>
  %min = graph.constant dense<-3.40282347E+38> : tensor<f32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %minus = graph.constant dense<-2.0> : tensor<f32>
  %filled = graph.select %drop, %min, %m : (tensor<3x1x2x2xi64>, tensor<f32>, tensor<3x1x2x2xf32>) -> tensor<3x1x2x2xf32>
  %a = graph.add %x, %filled : (tensor<3x2x2x2xf32>, tensor<3x1x2x2xf32>) -> tensor<3x2x2x2xf32>
  %d = graph.div %a, %two : (tensor<3x2x2x2xf32>, tensor<f32>) -> tensor<3x2x2x2xf32>
  %y = graph.softmax %d {axis = 3 : i64} : tensor<3x2x2x2xf32>
  %a2 = graph.add %x, %filled : (tensor<3x2x2x2xf32>, tensor<3x1x2x2xf32>) -> tensor<3x2x2x2xf32>
  %d2 = graph.div %a2, %minus : (tensor<3x2x2x2xf32>, tensor<f32>) -> tensor<3x2x2x2xf32>
  %y2 = graph.softmax %d2 {axis = 3 : i64} : tensor<3x2x2x2xf32>
  return %y, %y2 : tensor<3x2x2x2xf32>, tensor<3x2x2x2xf32>
}

// -----

// Tests attention as transformers' SDPA export writes it (Optimum): query
// and key each scaled by D^-1/4 before their product, the run-time additive
// mask, and the softmax guarded by where(isnan(p), 0, p). It becomes one
// graph.attention with the two factors' product as its scale and no guard:
// masked_softmax already gives zeros where every key is masked.
// CHECK-LABEL: func.func @sdpa_export_attention
// CHECK: %[[DROP:.*]] = graph.compare %arg3
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %[[DROP]] {key_transposed = true, scale = 2.500000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>, tensor<2x1x5x5xi64>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5xf32>)
// CHECK-NOT: graph.is_nan
// CHECK-NOT: graph.select
// CHECK-NOT: graph.mul
// CHECK: return %[[OUT]]
func.func @sdpa_export_attention(%q: tensor<2x3x5x4xf32>, %kt: tensor<2x3x4x5xf32>, %v: tensor<2x3x5x6xf32>, %keep: tensor<2x1x5x5xi64>) -> tensor<2x3x5x6xf32> {
  %c = graph.constant dense<0.5> : tensor<1xf32>
  %zero = graph.constant dense<0.0> : tensor<1xf32>
  %ninf = graph.constant dense<0xFF800000> : tensor<1xf32>
  %qs = graph.mul %q, %c : (tensor<2x3x5x4xf32>, tensor<1xf32>) -> tensor<2x3x5x4xf32>
  %ks = graph.mul %kt, %c : (tensor<2x3x4x5xf32>, tensor<1xf32>) -> tensor<2x3x4x5xf32>
  %s = graph.batch_matmul %qs, %ks : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %additive = graph.select %keep, %zero, %ninf : (tensor<2x1x5x5xi64>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x5x5xf32>
  %a = graph.add %s, %additive : (tensor<2x3x5x5xf32>, tensor<2x1x5x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.softmax %a {axis = 3 : i64} : tensor<2x3x5x5xf32>
  %nan = graph.is_nan %p : (tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xi64>
  %safe = graph.select %nan, %zero, %p : (tensor<2x3x5x5xi64>, tensor<1xf32>, tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %safe, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  return %o : tensor<2x3x5x6xf32>
}

// -----

// Tests attention without a mask (ViT's, an encoder's without padding):
// softmax(q c @ k^T c) @ v becomes graph.attention with a mask that
// excludes nothing; probabilities read by anything else than the product
// with the values stay a plain softmax.
// CHECK-LABEL: func.func @unmasked_attention
// CHECK: %[[NONE:.*]] = graph.constant dense<0> : tensor<1x1xi64>
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %[[NONE]] {key_transposed = true, scale = 2.500000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>, tensor<1x1xi64>)
// CHECK: %[[S:.*]] = graph.batch_matmul %arg0, %arg1
// CHECK: %[[P:.*]] = graph.softmax %[[S]]
// CHECK: return %[[OUT]], %[[P]]
func.func @unmasked_attention(%q: tensor<2x3x5x4xf32>, %kt: tensor<2x3x4x5xf32>, %v: tensor<2x3x5x6xf32>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5x5xf32>) {
  %c = graph.constant dense<0.5> : tensor<f32>
  %qs = graph.mul %q, %c : (tensor<2x3x5x4xf32>, tensor<f32>) -> tensor<2x3x5x4xf32>
  %ks = graph.mul %kt, %c : (tensor<2x3x4x5xf32>, tensor<f32>) -> tensor<2x3x4x5xf32>
  %s = graph.batch_matmul %qs, %ks : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.softmax %s {axis = 3 : i64} : tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  %s2 = graph.batch_matmul %q, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p2 = graph.softmax %s2 {axis = 3 : i64} : tensor<2x3x5x5xf32>
  return %o, %p2 : tensor<2x3x5x6xf32>, tensor<2x3x5x5xf32>
}

// -----

// Tests that the NaN guard stays where it is not a masked softmax's (a
// plain softmax keeps NaN rows of its own), or where its test is read
// elsewhere; and that a scaled operand read elsewhere keeps its product.
// CHECK-LABEL: func.func @guard_kept
// CHECK: graph.softmax
// CHECK: graph.is_nan
// CHECK: graph.select
// CHECK: %[[QS:.*]] = graph.mul %arg0
// CHECK: %[[S:.*]] = graph.batch_matmul %[[QS]], %arg1
// CHECK: graph.masked_softmax %[[S]], %arg2 {scale = 5.000000e-01 : f64}
// CHECK: graph.is_nan
// CHECK: graph.select
func.func @guard_kept(%q: tensor<3x5x4xf32>, %kt: tensor<3x4x5xf32>, %drop: tensor<5x5xi64>) -> (tensor<3x5x5xf32>, tensor<3x5x5xf32>, tensor<3x5x5xi64>, tensor<3x5x4xf32>) {
  %c = graph.constant dense<0.5> : tensor<f32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %s0 = graph.batch_matmul %q, %kt : (tensor<3x5x4xf32>, tensor<3x4x5xf32>) -> tensor<3x5x5xf32>
  %p0 = graph.softmax %s0 {axis = 2 : i64} : tensor<3x5x5xf32>
  %nan0 = graph.is_nan %p0 : (tensor<3x5x5xf32>) -> tensor<3x5x5xi64>
  %safe0 = graph.select %nan0, %zero, %p0 : (tensor<3x5x5xi64>, tensor<f32>, tensor<3x5x5xf32>) -> tensor<3x5x5xf32>
  %qs = graph.mul %q, %c : (tensor<3x5x4xf32>, tensor<f32>) -> tensor<3x5x4xf32>
  %ks = graph.mul %kt, %c : (tensor<3x4x5xf32>, tensor<f32>) -> tensor<3x4x5xf32>
  %s = graph.batch_matmul %qs, %ks : (tensor<3x5x4xf32>, tensor<3x4x5xf32>) -> tensor<3x5x5xf32>
  %w = graph.select %drop, %ninf, %s : (tensor<5x5xi64>, tensor<f32>, tensor<3x5x5xf32>) -> tensor<3x5x5xf32>
  %p = graph.softmax %w {axis = 2 : i64} : tensor<3x5x5xf32>
  %nan = graph.is_nan %p : (tensor<3x5x5xf32>) -> tensor<3x5x5xi64>
  %safe = graph.select %nan, %zero, %p : (tensor<3x5x5xi64>, tensor<f32>, tensor<3x5x5xf32>) -> tensor<3x5x5xf32>
  return %safe0, %safe, %nan, %qs : tensor<3x5x5xf32>, tensor<3x5x5xf32>, tensor<3x5x5xi64>, tensor<3x5x4xf32>
}

// -----

// Tests a constant additive mask of 0 and finfo.min expanded to the batch
// (BART's decoder mask, once its ScatterND folds): the mask keeps one
// [T, T] slice, which broadcasts; a finite fill over a whole row (uniform
// in torch, zeros in masked_softmax) stays a sum.
// CHECK-LABEL: func.func @expanded_finite_mask
// CHECK: %[[MASK:.*]] = graph.constant dense<{{\[\[\[\[}}0, 1], [0, 0]]]]> : tensor<1x1x2x2xi64>
// CHECK: %[[Y:.*]] = graph.masked_softmax %arg0, %[[MASK]] {scale = 1.000000e+00 : f64} : (tensor<3x2x2x2xf32>, tensor<1x1x2x2xi64>)
// CHECK: graph.add
// CHECK: graph.softmax
// CHECK: return %[[Y]]
func.func @expanded_finite_mask(%x: tensor<3x2x2x2xf32>) -> (tensor<3x2x2x2xf32>, tensor<3x2x2x2xf32>) {
  %m = graph.constant dense<[[[[0.0, -3.40282347E+38], [0.0, 0.0]]], [[[0.0, -3.40282347E+38], [0.0, 0.0]]], [[[0.0, -3.40282347E+38], [0.0, 0.0]]]]> : tensor<3x1x2x2xf32>
  %a = graph.add %x, %m : (tensor<3x2x2x2xf32>, tensor<3x1x2x2xf32>) -> tensor<3x2x2x2xf32>
  %y = graph.softmax %a {axis = 3 : i64} : tensor<3x2x2x2xf32>
  %blind = graph.constant dense<[[-3.40282347E+38, -3.40282347E+38], [0.0, 0.0]]> : tensor<2x2xf32>
  %a2 = graph.add %x, %blind : (tensor<3x2x2x2xf32>, tensor<2x2xf32>) -> tensor<3x2x2x2xf32>
  %y2 = graph.softmax %a2 {axis = 3 : i64} : tensor<3x2x2x2xf32>
  return %y, %y2 : tensor<3x2x2x2xf32>, tensor<3x2x2x2xf32>
}

// -----

// Tests that attention (scores q @ k^T with k^T given, scale, causal Where,
// softmax, times V) becomes one graph.attention with key_transposed, whose
// logsumexp has the query rows' shape, and no T x T value remains.
// CHECK-LABEL: func.func @attention
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %arg3 {key_transposed = true, scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5xf32>)
// CHECK-NOT: graph.batch_matmul
// CHECK-NOT: graph.masked_softmax
// CHECK: return %[[OUT]]
func.func @attention(%q: tensor<2x3x5x4xf32>, %kt: tensor<2x3x4x5xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x3x5x6xf32> {
  %s = graph.batch_matmul %q, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  return %o : tensor<2x3x5x6xf32>
}

// -----

// Tests Gemma 2's soft-capped scores: masked_softmax(tanh(s * a / c)) with
// the softmax's scale c becomes attention with softcap c and scale a (here
// a = 0.25 and c = 50, the scale a product of the factors before the
// tanh); no tanh or scaling is left. A tanh read elsewhere, or a softmax
// scale that is not positive, keeps the scores.
// CHECK-LABEL: func.func @softcapped_scores
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 2.500000e-01 : f64, softcap = 5.000000e+01 : f64}
// CHECK-NOT: graph.tanh
// CHECK-NOT: graph.div
// CHECK: return %[[OUT]]
// CHECK-LABEL: func.func @cap_read_elsewhere
// CHECK-NOT: graph.attention
// CHECK: graph.tanh
// CHECK-LABEL: func.func @negative_cap
// CHECK-NOT: graph.attention
// CHECK: graph.tanh
func.func @softcapped_scores(%q: tensor<3x5x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) -> tensor<3x5x6xf32> {
  %a = graph.constant dense<0.5> : tensor<f32>
  %h = graph.constant dense<2.0> : tensor<f32>
  %c = graph.constant dense<50.0> : tensor<f32>
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>) -> tensor<3x5x5xf32>
  %s1 = graph.mul %s, %a : (tensor<3x5x5xf32>, tensor<f32>) -> tensor<3x5x5xf32>
  %s2 = graph.div %s1, %h : (tensor<3x5x5xf32>, tensor<f32>) -> tensor<3x5x5xf32>
  %s3 = graph.div %s2, %c : (tensor<3x5x5xf32>, tensor<f32>) -> tensor<3x5x5xf32>
  %t = graph.tanh %s3 : tensor<3x5x5xf32>
  %p = graph.masked_softmax %t, %m {scale = 50.0 : f64} : (tensor<3x5x5xf32>, tensor<5x5xi64>) -> tensor<3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<3x5x5xf32>, tensor<3x5x6xf32>) -> tensor<3x5x6xf32>
  return %o : tensor<3x5x6xf32>
}
func.func @cap_read_elsewhere(%q: tensor<3x5x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5x5xf32>) {
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>) -> tensor<3x5x5xf32>
  %t = graph.tanh %s : tensor<3x5x5xf32>
  %p = graph.masked_softmax %t, %m {scale = 50.0 : f64} : (tensor<3x5x5xf32>, tensor<5x5xi64>) -> tensor<3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<3x5x5xf32>, tensor<3x5x6xf32>) -> tensor<3x5x6xf32>
  return %o, %t : tensor<3x5x6xf32>, tensor<3x5x5xf32>
}
func.func @negative_cap(%q: tensor<3x5x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) -> tensor<3x5x6xf32> {
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>) -> tensor<3x5x5xf32>
  %t = graph.tanh %s : tensor<3x5x5xf32>
  %p = graph.masked_softmax %t, %m {scale = -50.0 : f64} : (tensor<3x5x5xf32>, tensor<5x5xi64>) -> tensor<3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<3x5x5xf32>, tensor<3x5x6xf32>) -> tensor<3x5x6xf32>
  return %o : tensor<3x5x6xf32>
}

// -----

// Tests that keys in [T, D] layout (scores with transpose_b) fuse without
// key_transposed, and that probabilities read elsewhere do not fuse.
// CHECK-LABEL: func.func @attention_key_rows
// CHECK: graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 5.000000e-01 : f64}
// CHECK-LABEL: func.func @probabilities_used_twice
// CHECK-NOT: graph.attention
// CHECK: graph.masked_softmax
func.func @attention_key_rows(%q: tensor<3x5x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) -> tensor<3x5x6xf32> {
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>) -> tensor<3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<3x5x5xf32>, tensor<5x5xi64>) -> tensor<3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<3x5x5xf32>, tensor<3x5x6xf32>) -> tensor<3x5x6xf32>
  return %o : tensor<3x5x6xf32>
}
func.func @probabilities_used_twice(%q: tensor<3x5x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5x5xf32>) {
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>) -> tensor<3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<3x5x5xf32>, tensor<5x5xi64>) -> tensor<3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<3x5x5xf32>, tensor<3x5x6xf32>) -> tensor<3x5x6xf32>
  return %o, %p : tensor<3x5x6xf32>, tensor<3x5x5xf32>
}

// -----

// Tests grouped-query attention as transformers' repeat_kv writes it: 2 key
// and value heads viewed as [B, 2, 1, T, D], broadcast to [B, 2, 2, T, D]
// and viewed as 4 heads, the key transposed after its copy. Attention
// reads the 2 heads themselves, the key as it was (no key_transposed), and
// no copy remains.
// CHECK-LABEL: func.func @grouped_key_value_heads
// CHECK-NOT: graph.broadcast_to
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 5.000000e-01 : f64} : (tensor<2x4x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x6xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x4x5x6xf32>, tensor<2x4x5xf32>)
// CHECK-NOT: graph.broadcast_to
// CHECK-NOT: graph.transpose
// CHECK: return %[[OUT]]
func.func @grouped_key_value_heads(%q: tensor<2x4x5x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x4x5x6xf32> {
  %k1 = graph.reshape %k : (tensor<2x2x5x8xf32>) -> tensor<2x2x1x5x8xf32>
  %k2 = graph.broadcast_to %k1 : (tensor<2x2x1x5x8xf32>) -> tensor<2x2x2x5x8xf32>
  %k3 = graph.reshape %k2 : (tensor<2x2x2x5x8xf32>) -> tensor<2x4x5x8xf32>
  %kt = graph.transpose %k3 {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x5x8xf32>) -> tensor<2x4x8x5xf32>
  %v1 = graph.reshape %v : (tensor<2x2x5x6xf32>) -> tensor<2x2x1x5x6xf32>
  %v2 = graph.broadcast_to %v1 : (tensor<2x2x1x5x6xf32>) -> tensor<2x2x2x5x6xf32>
  %v3 = graph.reshape %v2 : (tensor<2x2x2x5x6xf32>) -> tensor<2x4x5x6xf32>
  %s = graph.batch_matmul %q, %kt : (tensor<2x4x5x8xf32>, tensor<2x4x8x5xf32>) -> tensor<2x4x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x4x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x4x5x5xf32>
  %o = graph.batch_matmul %p, %v3 : (tensor<2x4x5x5xf32>, tensor<2x4x5x6xf32>) -> tensor<2x4x5x6xf32>
  return %o : tensor<2x4x5x6xf32>
}

// -----

// Tests the key as torch's dynamo exporter writes it: the repeated heads
// flattened with the batch to [B H, T, D] for a 3-D product, the last two
// axes swapped there, and split back to [B, H, D, T]. That is the
// transpose of the copy regrouped, so the copies fold as above: attention
// reads the 2 key heads as they are. A transpose of other axes between the
// reshapes stays.
// CHECK-LABEL: func.func @key_transposed_flattened
// CHECK-NOT: graph.broadcast_to
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 5.000000e-01 : f64} : (tensor<2x4x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x6xf32>, tensor<1x1x5x5xi64>)
// CHECK-NOT: graph.transpose
// CHECK: return %[[OUT]]
// CHECK-LABEL: func.func @other_axes_between_reshapes
// CHECK: %[[T:.*]] = graph.transpose %{{.*}} {perm = array<i64: 1, 0, 2>} : (tensor<8x5x8xf32>) -> tensor<5x8x8xf32>
// CHECK: graph.reshape %[[T]] : (tensor<5x8x8xf32>) -> tensor<5x2x4x8xf32>
func.func @key_transposed_flattened(%q: tensor<2x4x5x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x4x5x6xf32> {
  %k1 = graph.reshape %k : (tensor<2x2x5x8xf32>) -> tensor<2x2x1x5x8xf32>
  %k2 = graph.broadcast_to %k1 : (tensor<2x2x1x5x8xf32>) -> tensor<2x2x2x5x8xf32>
  %k3 = graph.reshape %k2 : (tensor<2x2x2x5x8xf32>) -> tensor<8x5x8xf32>
  %k4 = graph.transpose %k3 {perm = array<i64: 0, 2, 1>} : (tensor<8x5x8xf32>) -> tensor<8x8x5xf32>
  %kt = graph.reshape %k4 : (tensor<8x8x5xf32>) -> tensor<2x4x8x5xf32>
  %v1 = graph.reshape %v : (tensor<2x2x5x6xf32>) -> tensor<2x2x1x5x6xf32>
  %v2 = graph.broadcast_to %v1 : (tensor<2x2x1x5x6xf32>) -> tensor<2x2x2x5x6xf32>
  %v3 = graph.reshape %v2 : (tensor<2x2x2x5x6xf32>) -> tensor<2x4x5x6xf32>
  %s = graph.batch_matmul %q, %kt : (tensor<2x4x5x8xf32>, tensor<2x4x8x5xf32>) -> tensor<2x4x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x4x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x4x5x5xf32>
  %o = graph.batch_matmul %p, %v3 : (tensor<2x4x5x5xf32>, tensor<2x4x5x6xf32>) -> tensor<2x4x5x6xf32>
  return %o : tensor<2x4x5x6xf32>
}
func.func @other_axes_between_reshapes(%k: tensor<2x4x5x8xf32>) -> tensor<5x2x4x8xf32> {
  %k3 = graph.reshape %k : (tensor<2x4x5x8xf32>) -> tensor<8x5x8xf32>
  %k4 = graph.transpose %k3 {perm = array<i64: 1, 0, 2>} : (tensor<8x5x8xf32>) -> tensor<5x8x8xf32>
  %kt = graph.reshape %k4 : (tensor<5x8x8xf32>) -> tensor<5x2x4x8xf32>
  return %kt : tensor<5x2x4x8xf32>
}

// -----

// Tests multi-query attention broadcast inside the products (Falcon): one
// key and value head for every query head is grouped attention with one
// key head. Keys copied head by head but values not (or values grouped
// otherwise) keep the copy.
// CHECK-LABEL: func.func @multi_query_broadcast
// CHECK: graph.attention %arg0, %arg1, %arg2, %arg3 {key_transposed = true, scale = 5.000000e-01 : f64} : (tensor<2x4x5x8xf32>, tensor<2x1x8x5xf32>, tensor<2x1x5x6xf32>, tensor<1x1x5x5xi64>)
// CHECK-LABEL: func.func @only_keys_repeated
// CHECK: %[[COPY:.*]] = graph.reshape %{{.*}} : (tensor<2x2x2x5x8xf32>) -> tensor<2x4x5x8xf32>
// CHECK: graph.attention %arg0, %[[COPY]], %arg2, %arg3 {scale = 5.000000e-01 : f64}
func.func @multi_query_broadcast(%q: tensor<2x4x5x8xf32>, %kt: tensor<2x1x8x5xf32>, %v: tensor<2x1x5x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x4x5x6xf32> {
  %s = graph.batch_matmul %q, %kt : (tensor<2x4x5x8xf32>, tensor<2x1x8x5xf32>) -> tensor<2x4x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x4x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x4x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x4x5x5xf32>, tensor<2x1x5x6xf32>) -> tensor<2x4x5x6xf32>
  return %o : tensor<2x4x5x6xf32>
}
func.func @only_keys_repeated(%q: tensor<2x4x5x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x4x5x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x4x5x6xf32> {
  %k1 = graph.reshape %k : (tensor<2x2x5x8xf32>) -> tensor<2x2x1x5x8xf32>
  %k2 = graph.broadcast_to %k1 : (tensor<2x2x1x5x8xf32>) -> tensor<2x2x2x5x8xf32>
  %k3 = graph.reshape %k2 : (tensor<2x2x2x5x8xf32>) -> tensor<2x4x5x8xf32>
  %s = graph.batch_matmul %q, %k3 {transpose_b = true} : (tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>) -> tensor<2x4x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x4x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x4x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x4x5x5xf32>, tensor<2x4x5x6xf32>) -> tensor<2x4x5x6xf32>
  return %o : tensor<2x4x5x6xf32>
}

// -----

// Tests that a key transposed for the product alone (last two axes
// swapped) is read as it was: no key_transposed, no transpose. A key
// transposed from [B, T, H, D] straight to [B, H, D, T] is read as
// [B, T, H, D] (token-major).
// CHECK-LABEL: func.func @key_transpose_folded
// CHECK-NOT: graph.transpose
// CHECK: graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>, tensor<1x1x5x5xi64>)
// CHECK-LABEL: func.func @heads_moving_transpose_kept
// CHECK-NOT: graph.transpose
// CHECK: graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 5.000000e-01 : f64, token_major = array<i1: false, true, false, false>} : (tensor<2x3x5x4xf32>, tensor<2x5x3x4xf32>, tensor<2x3x5x6xf32>, tensor<1x1x5x5xi64>)
func.func @key_transpose_folded(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x3x5x6xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x5x4xf32>) -> tensor<2x3x4x5xf32>
  %s = graph.batch_matmul %q, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  return %o : tensor<2x3x5x6xf32>
}
func.func @heads_moving_transpose_kept(%q: tensor<2x3x5x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x3x5x6xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x4x5xf32>
  %s = graph.batch_matmul %q, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  return %o : tensor<2x3x5x6xf32>
}

// -----

// Tests attention on separate projections viewed as heads (BERT's, ViT's):
// q and v transposed heads forward, k straight to [B, H, D, T], the output
// transposed back. Attention reads and writes the views (token_major on
// all four), so no transpose is left; the output's users read its result.
// Where the output has a user besides a transpose back, out stays
// head-major and the operands still fold.
// CHECK-LABEL: func.func @token_major_operands
// CHECK-NOT: graph.transpose
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 5.000000e-01 : f64, token_major = array<i1: true, true, true, true>} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x6xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x5x3x6xf32>, tensor<2x3x5xf32>)
// CHECK-NOT: graph.transpose
// CHECK: %[[Y:.*]] = graph.reshape %[[OUT]] : (tensor<2x5x3x6xf32>) -> tensor<2x5x18xf32>
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @output_read_head_major
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %arg3 {scale = 5.000000e-01 : f64, token_major = array<i1: true, true, true, false>}
// CHECK: graph.transpose %[[OUT]]
func.func @token_major_operands(%q1: tensor<2x5x3x4xf32>, %k1: tensor<2x5x3x4xf32>, %v1: tensor<2x5x3x6xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x5x18xf32> {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %kt = graph.transpose %k1 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x4x5xf32>
  %v = graph.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x6xf32>) -> tensor<2x3x5x6xf32>
  %s = graph.batch_matmul %q, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x6xf32>) -> tensor<2x5x3x6xf32>
  %y = graph.reshape %ot : (tensor<2x5x3x6xf32>) -> tensor<2x5x18xf32>
  return %y : tensor<2x5x18xf32>
}
func.func @output_read_head_major(%q1: tensor<2x5x3x4xf32>, %k1: tensor<2x5x3x4xf32>, %v1: tensor<2x5x3x6xf32>, %m: tensor<1x1x5x5xi64>) -> (tensor<2x5x3x6xf32>, tensor<2x3x5x6xf32>) {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %kt = graph.transpose %k1 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x4x5xf32>
  %v = graph.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x6xf32>) -> tensor<2x3x5x6xf32>
  %s = graph.batch_matmul %q, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x6xf32>) -> tensor<2x5x3x6xf32>
  return %ot, %o : tensor<2x5x3x6xf32>, tensor<2x3x5x6xf32>
}

// -----

// Tests that attention over the three thirds of one projection (GPT-2's
// c_attn: split, view as heads, heads forward; the key transposed in one
// step) becomes one graph.packed_attention on the projection, with the head
// count and scale; the output's transpose back becomes a reshape of its
// [B, T, heads D] result, which folds with the reshape after it, and no
// slice, transpose or reshape remains.
// CHECK-LABEL: func.func @packed_attention
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = graph.packed_attention %arg0, %arg1 {heads = 3 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x36xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x5x12xf32>, tensor<2x3x5xf32>)
// CHECK-NOT: graph.slice
// CHECK-NOT: graph.transpose
// CHECK-NOT: graph.reshape
// CHECK: return %[[OUT]] : tensor<2x5x12xf32>
func.func @packed_attention(%qkv: tensor<2x5x36xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x5x12xf32> {
  %q0 = graph.slice %qkv {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %k0 = graph.slice %qkv {starts = array<i64: 0, 0, 12>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %v0 = graph.slice %qkv {starts = array<i64: 0, 0, 24>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %q1 = graph.reshape %q0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %k1 = graph.reshape %k0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %v1 = graph.reshape %v0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %kt = graph.transpose %k1 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x4x5xf32>
  %v = graph.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %s = graph.batch_matmul %q, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<1x1x5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  %y = graph.reshape %ot : (tensor<2x5x3x4xf32>) -> tensor<2x5x12xf32>
  return %y : tensor<2x5x12xf32>
}

// -----

// Tests that keys transposed forward like the query (scores with
// transpose_b) pack too, and that the near misses stay graph.attention:
// the thirds taken as q, v, k; the output read without the transpose back.
// CHECK-LABEL: func.func @packed_key_rows
// CHECK: %[[OUT:.*]], %{{.*}} = graph.packed_attention %arg0, %arg1 {heads = 3 : i64, scale = 5.000000e-01 : f64}
// CHECK: %[[HEADS:.*]] = graph.reshape %[[OUT]] : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
// CHECK: return %[[HEADS]]
// CHECK-LABEL: func.func @thirds_out_of_order
// CHECK-NOT: graph.packed_attention
// CHECK: graph.attention
// CHECK-LABEL: func.func @output_read_in_heads_layout
// CHECK-NOT: graph.packed_attention
// CHECK: graph.attention
func.func @packed_key_rows(%qkv: tensor<2x5x36xf32>, %m: tensor<5x5xi64>) -> tensor<2x5x3x4xf32> {
  %q0 = graph.slice %qkv {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %k0 = graph.slice %qkv {starts = array<i64: 0, 0, 12>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %v0 = graph.slice %qkv {starts = array<i64: 0, 0, 24>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %q1 = graph.reshape %q0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %k1 = graph.reshape %k0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %v1 = graph.reshape %v0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %k = graph.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %v = graph.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  return %ot : tensor<2x5x3x4xf32>
}
func.func @thirds_out_of_order(%qkv: tensor<2x5x36xf32>, %m: tensor<5x5xi64>) -> tensor<2x5x3x4xf32> {
  %q0 = graph.slice %qkv {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %v0 = graph.slice %qkv {starts = array<i64: 0, 0, 12>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %k0 = graph.slice %qkv {starts = array<i64: 0, 0, 24>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %q1 = graph.reshape %q0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %k1 = graph.reshape %k0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %v1 = graph.reshape %v0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %k = graph.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %v = graph.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  return %ot : tensor<2x5x3x4xf32>
}
func.func @output_read_in_heads_layout(%qkv: tensor<2x5x36xf32>, %m: tensor<5x5xi64>) -> tensor<2x3x5x4xf32> {
  %q0 = graph.slice %qkv {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %k0 = graph.slice %qkv {starts = array<i64: 0, 0, 12>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %v0 = graph.slice %qkv {starts = array<i64: 0, 0, 24>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x36xf32>) -> tensor<2x5x12xf32>
  %q1 = graph.reshape %q0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %k1 = graph.reshape %k0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %v1 = graph.reshape %v0 : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %k = graph.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %v = graph.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %p = graph.masked_softmax %s, %m {scale = 0.5 : f64} : (tensor<2x3x5x5xf32>, tensor<5x5xi64>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %p, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  return %o : tensor<2x3x5x4xf32>
}

// -----

// Tests that a 2-D transpose feeding matmul folds into its transpose_b (a
// tied head reading the embedding) or transpose_a, toggling a flag already
// set, and that a transpose with another use stays for that use.
// CHECK-LABEL: func.func @tied_head
// CHECK-NOT: graph.transpose
// CHECK: %[[Y:.*]] = graph.matmul %arg0, %arg1 {transpose_b = true} : (tensor<6x4xf32>, tensor<9x4xf32>) -> tensor<6x9xf32>
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @both_sides
// CHECK: graph.matmul %arg0, %arg1 {transpose_a = true} : (tensor<4x6xf32>, tensor<4x9xf32>) -> tensor<6x9xf32>
// CHECK-LABEL: func.func @transpose_used_twice
// CHECK: %[[T:.*]] = graph.transpose %arg1
// CHECK: graph.matmul %arg0, %arg1 {transpose_b = true}
// CHECK: return %{{.*}}, %[[T]]
func.func @tied_head(%x: tensor<6x4xf32>, %wte: tensor<9x4xf32>) -> tensor<6x9xf32> {
  %t = graph.transpose %wte {perm = array<i64: 1, 0>} : (tensor<9x4xf32>) -> tensor<4x9xf32>
  %y = graph.matmul %x, %t : (tensor<6x4xf32>, tensor<4x9xf32>) -> tensor<6x9xf32>
  return %y : tensor<6x9xf32>
}
func.func @both_sides(%a: tensor<4x6xf32>, %b: tensor<4x9xf32>) -> tensor<6x9xf32> {
  %at = graph.transpose %a {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %bt = graph.transpose %b {perm = array<i64: 1, 0>} : (tensor<4x9xf32>) -> tensor<9x4xf32>
  %y = graph.matmul %at, %bt {transpose_b = true} : (tensor<6x4xf32>, tensor<9x4xf32>) -> tensor<6x9xf32>
  return %y : tensor<6x9xf32>
}
func.func @transpose_used_twice(%x: tensor<6x4xf32>, %w: tensor<9x4xf32>) -> (tensor<6x9xf32>, tensor<4x9xf32>) {
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<9x4xf32>) -> tensor<4x9xf32>
  %y = graph.matmul %x, %t : (tensor<6x4xf32>, tensor<4x9xf32>) -> tensor<6x9xf32>
  return %y, %t : tensor<6x9xf32>, tensor<4x9xf32>
}

// -----

// Tests that Hugging Face's apply_rotary_pos_emb, x * cos +
// rotate_half(x) * sin with rotate_half = concat(-x[..., D/2:], x[..., :D/2]),
// becomes one graph.rotary on x with the tables, the sum and the products
// in either order; a cos of lower rank is reshaped to x's rank.
// CHECK-LABEL: func.func @rotary
// CHECK-NEXT: %[[R:.*]] = graph.rotary %arg0, %arg1, %arg2 : (tensor<2x3x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>) -> tensor<2x3x5x8xf32>
// CHECK-NEXT: return %[[R]]
// CHECK-LABEL: func.func @rotary_commuted
// CHECK-DAG: %[[C:.*]] = graph.reshape %arg1 : (tensor<5x8xf32>) -> tensor<1x1x5x8xf32>
// CHECK-DAG: %[[S:.*]] = graph.reshape %arg2 : (tensor<5x8xf32>) -> tensor<1x1x5x8xf32>
// CHECK: %[[R:.*]] = graph.rotary %arg0, %[[C]], %[[S]] : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
// CHECK-NOT: graph.concat
// CHECK: return %[[R]]
func.func @rotary(%x: tensor<2x3x5x8xf32>, %cos: tensor<2x1x5x8xf32>, %sin: tensor<2x1x5x8xf32>) -> tensor<2x3x5x8xf32> {
  %a = graph.mul %x, %cos : (tensor<2x3x5x8xf32>, tensor<2x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %x2 = graph.slice %x {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %n = graph.neg %x2 : tensor<2x3x5x4xf32>
  %r = graph.concat %n, %x1 {axis = 3 : i64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x8xf32>
  %b = graph.mul %r, %sin : (tensor<2x3x5x8xf32>, tensor<2x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %y = graph.add %a, %b : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>) -> tensor<2x3x5x8xf32>
  return %y : tensor<2x3x5x8xf32>
}
func.func @rotary_commuted(%x: tensor<2x3x5x8xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>) -> tensor<2x3x5x8xf32> {
  %a = graph.mul %cos, %x : (tensor<5x8xf32>, tensor<2x3x5x8xf32>) -> tensor<2x3x5x8xf32>
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %x2 = graph.slice %x {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %n = graph.neg %x2 : tensor<2x3x5x4xf32>
  %r = graph.concat %n, %x1 {axis = 3 : i64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x8xf32>
  %b = graph.mul %sin, %r : (tensor<5x8xf32>, tensor<2x3x5x8xf32>) -> tensor<2x3x5x8xf32>
  %y = graph.add %b, %a : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>) -> tensor<2x3x5x8xf32>
  return %y : tensor<2x3x5x8xf32>
}

// -----

// Tests formulas that are not rotate_half: the halves swapped without the
// negation on the second half (concat(-x1, x2)), and halves of unequal
// width; nothing fuses.
// CHECK-LABEL: func.func @not_rotate_half
// CHECK-NOT: graph.rotary
// CHECK: graph.concat
// CHECK-LABEL: func.func @unequal_halves
// CHECK-NOT: graph.rotary
// CHECK: graph.concat
func.func @not_rotate_half(%x: tensor<2x5x8xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>) -> tensor<2x5x8xf32> {
  %a = graph.mul %x, %cos : (tensor<2x5x8xf32>, tensor<5x8xf32>) -> tensor<2x5x8xf32>
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x8xf32>) -> tensor<2x5x4xf32>
  %x2 = graph.slice %x {starts = array<i64: 0, 0, 4>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x8xf32>) -> tensor<2x5x4xf32>
  %n = graph.neg %x1 : tensor<2x5x4xf32>
  %r = graph.concat %n, %x2 {axis = 2 : i64} : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x8xf32>
  %b = graph.mul %r, %sin : (tensor<2x5x8xf32>, tensor<5x8xf32>) -> tensor<2x5x8xf32>
  %y = graph.add %a, %b : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}
func.func @unequal_halves(%x: tensor<2x5x8xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>) -> tensor<2x5x8xf32> {
  %a = graph.mul %x, %cos : (tensor<2x5x8xf32>, tensor<5x8xf32>) -> tensor<2x5x8xf32>
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x8xf32>) -> tensor<2x5x3xf32>
  %x2 = graph.slice %x {starts = array<i64: 0, 0, 3>, steps = array<i64: 1, 1, 1>} : (tensor<2x5x8xf32>) -> tensor<2x5x5xf32>
  %n = graph.neg %x2 : tensor<2x5x5xf32>
  %r = graph.concat %n, %x1 {axis = 2 : i64} : (tensor<2x5x5xf32>, tensor<2x5x3xf32>) -> tensor<2x5x8xf32>
  %b = graph.mul %r, %sin : (tensor<2x5x8xf32>, tensor<5x8xf32>) -> tensor<2x5x8xf32>
  %y = graph.add %a, %b : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// Tests LLaMA's layout: the query projection's head view [B, T, H, D]
// transposed heads forward, then rotated with cos and sin [B, 1, T, D].
// The rotation moves before the transpose (cos and sin reshaped to
// [B, T, 1, D]: only their dimension of 1 moves), and attention then reads
// the rotated view token-major: no transpose left. Where a table is not
// 1 along the moved axes (a cos per head), the rotation stays after it.
// CHECK-LABEL: func.func @rotary_before_heads_transpose
// CHECK-DAG: %[[C:.*]] = graph.reshape %arg3 : (tensor<2x1x5x4xf32>) -> tensor<2x5x1x4xf32>
// CHECK-DAG: %[[S:.*]] = graph.reshape %arg4 : (tensor<2x1x5x4xf32>) -> tensor<2x5x1x4xf32>
// CHECK: %[[Q:.*]] = graph.rotary %arg0, %[[C]], %[[S]] : (tensor<2x5x3x4xf32>, tensor<2x5x1x4xf32>, tensor<2x5x1x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK-NOT: graph.transpose
// CHECK: graph.attention %[[Q]], %arg1, %arg2, %arg5 {scale = 5.000000e-01 : f64, token_major = array<i1: true, false, false, false>}
// CHECK-LABEL: func.func @table_per_head
// CHECK: %[[T:.*]] = graph.transpose %arg0
// CHECK: graph.rotary %[[T]], %arg1, %arg1
func.func @rotary_before_heads_transpose(%q1: tensor<2x5x3x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x4xf32>, %cos: tensor<2x1x5x4xf32>, %sin: tensor<2x1x5x4xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x3x5x4xf32> {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %rq = graph.rotary %q, %cos, %sin : (tensor<2x3x5x4xf32>, tensor<2x1x5x4xf32>, tensor<2x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %out, %lse = graph.attention %rq, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
  return %out : tensor<2x3x5x4xf32>
}
func.func @table_per_head(%q1: tensor<2x5x3x4xf32>, %cos: tensor<1x3x5x4xf32>) -> tensor<2x3x5x4xf32> {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %rq = graph.rotary %q, %cos, %cos : (tensor<2x3x5x4xf32>, tensor<1x3x5x4xf32>, tensor<1x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  return %rq : tensor<2x3x5x4xf32>
}

// -----

// Tests partial rotary embeddings (Phi, StableLM, GPT-NeoX): the query
// moved heads forward, its first 4 of 8 columns rotated and the rest
// passed, joined by a concat. The transpose moves after the slices (its
// only readers), then after the rotation and the concat (both inputs
// transposed alike), and attention reads the view token-major: no
// transpose left. A transpose with a reader besides slices stays.
// CHECK-LABEL: func.func @partial_rotary
// CHECK-DAG: %[[ROT:.*]] = graph.slice %arg0 {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x5x3x8xf32>) -> tensor<2x5x3x4xf32>
// CHECK-DAG: %[[PASS:.*]] = graph.slice %arg0 {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x5x3x8xf32>) -> tensor<2x5x3x4xf32>
// CHECK: %[[R:.*]] = graph.rotary %[[ROT]], %{{.*}}, %{{.*}} : (tensor<2x5x3x4xf32>, tensor<1x5x1x4xf32>, tensor<1x5x1x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK: %[[Q:.*]] = graph.concat %[[R]], %[[PASS]] {axis = 3 : i64} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x8xf32>
// CHECK-NOT: graph.transpose
// CHECK: graph.attention %[[Q]], %arg1, %arg2, %arg5 {scale = 5.000000e-01 : f64, token_major = array<i1: true, false, false, false>}
// CHECK-LABEL: func.func @transpose_read_besides_slices
// CHECK: %[[T:.*]] = graph.transpose %arg0
// CHECK: graph.slice %[[T]]
func.func @partial_rotary(%q1: tensor<2x5x3x8xf32>, %k: tensor<2x3x5x8xf32>, %v: tensor<2x3x5x8xf32>, %cos: tensor<1x1x5x4xf32>, %sin: tensor<1x1x5x4xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x3x5x8xf32> {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x8xf32>) -> tensor<2x3x5x8xf32>
  %rot = graph.slice %q {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %pass = graph.slice %q {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %r = graph.rotary %rot, %cos, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %qr = graph.concat %r, %pass {axis = 3 : i64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x8xf32>
  %out, %lse = graph.attention %qr, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>)
  return %out : tensor<2x3x5x8xf32>
}
func.func @transpose_read_besides_slices(%x: tensor<2x5x3x8xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x8xf32>) {
  %t = graph.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x8xf32>) -> tensor<2x3x5x8xf32>
  %s = graph.slice %t {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  return %s, %t : tensor<2x3x5x4xf32>, tensor<2x3x5x8xf32>
}

// -----

// Tests Phi-3's partial rotation with every column rotated: the pass-on
// part is an empty slice, and a concat with it folds to the rotation, so
// the transpose has the rotation as its one reader and moves on to
// attention as for LLaMA.
// CHECK-LABEL: func.func @rotation_of_every_column
// CHECK-NOT: graph.concat
// CHECK: %[[Q:.*]] = graph.rotary %arg0, %{{.*}}, %{{.*}} : (tensor<2x5x3x8xf32>, tensor<1x5x1x8xf32>, tensor<1x5x1x8xf32>) -> tensor<2x5x3x8xf32>
// CHECK-NOT: graph.transpose
// CHECK: graph.attention %[[Q]], %arg1, %arg2, %arg5 {scale = 5.000000e-01 : f64, token_major = array<i1: true, false, false, false>}
func.func @rotation_of_every_column(%q1: tensor<2x5x3x8xf32>, %k: tensor<2x3x5x8xf32>, %v: tensor<2x3x5x8xf32>, %cos: tensor<1x1x5x8xf32>, %sin: tensor<1x1x5x8xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x3x5x8xf32> {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x8xf32>) -> tensor<2x3x5x8xf32>
  %pass = graph.slice %q {starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x0xf32>
  %r = graph.rotary %q, %cos, %sin : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %qr = graph.concat %r, %pass {axis = 3 : i64} : (tensor<2x3x5x8xf32>, tensor<2x3x5x0xf32>) -> tensor<2x3x5x8xf32>
  %out, %lse = graph.attention %qr, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>)
  return %out : tensor<2x3x5x8xf32>
}

// -----

// Tests Gemma 3's per-head normalisation of a query moved heads forward:
// the RMSNorm normalises the projection's view itself, its statistics per
// token and head, and the transpose goes on through the rotation to
// attention. A layer norm whose statistics are read moves too, and they
// are transposed after it; a norm over an axis the transpose moves stays.
// CHECK-LABEL: func.func @norm_before_heads_transpose
// CHECK: %[[N:.*]], %{{.*}} = graph.rms_norm %arg0, %arg6 {axis = 3 : i64, epsilon = {{.*}} : f64} : (tensor<2x5x3x4xf32>, tensor<4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x5x3x1xf32>)
// CHECK: %[[Q:.*]] = graph.rotary %[[N]], %{{.*}}, %{{.*}} : (tensor<2x5x3x4xf32>, tensor<2x5x1x4xf32>, tensor<2x5x1x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK-NOT: graph.transpose
// CHECK: graph.attention %[[Q]], %arg1, %arg2, %arg5 {scale = 5.000000e-01 : f64, token_major = array<i1: true, false, false, false>}
// CHECK-LABEL: func.func @layer_norm_statistics_transposed
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = graph.layer_norm %arg0, %arg1, %arg1 {axis = 3 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x5x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x5x3x1xf32>, tensor<2x5x3x1xf32>)
// CHECK-DAG: %[[TY:.*]] = graph.transpose %[[Y]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK-DAG: %[[TM:.*]] = graph.transpose %[[MEAN]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x1xf32>) -> tensor<2x3x5x1xf32>
// CHECK: return %[[TY]], %[[TM]]
// CHECK-LABEL: func.func @normalised_axis_moved
// CHECK: %[[T:.*]] = graph.transpose %arg0
// CHECK: graph.rms_norm %[[T]]
func.func @norm_before_heads_transpose(%q1: tensor<2x5x3x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x4xf32>, %cos: tensor<2x1x5x4xf32>, %sin: tensor<2x1x5x4xf32>, %m: tensor<1x1x5x5xi64>, %w: tensor<4xf32>) -> tensor<2x3x5x4xf32> {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %n, %r = graph.rms_norm %q, %w {axis = 3 : i64, epsilon = 1.0e-06 : f64} : (tensor<2x3x5x4xf32>, tensor<4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x1xf32>)
  %rq = graph.rotary %n, %cos, %sin : (tensor<2x3x5x4xf32>, tensor<2x1x5x4xf32>, tensor<2x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %out, %lse = graph.attention %rq, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
  return %out : tensor<2x3x5x4xf32>
}
func.func @layer_norm_statistics_transposed(%x: tensor<2x5x3x4xf32>, %w: tensor<4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x1xf32>) {
  %t = graph.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %y, %mean, %rstd = graph.layer_norm %t, %w, %w {axis = 3 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3x5x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x1xf32>, tensor<2x3x5x1xf32>)
  return %y, %mean : tensor<2x3x5x4xf32>, tensor<2x3x5x1xf32>
}
func.func @normalised_axis_moved(%x: tensor<2x5x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5x4xf32> {
  %t = graph.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %n, %r = graph.rms_norm %t, %w {axis = 2 : i64, epsilon = 1.0e-06 : f64} : (tensor<2x3x5x4xf32>, tensor<5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x1x1xf32>)
  return %n : tensor<2x3x5x4xf32>
}

// -----

// Tests the interleaved rotation of Cohere, GLM and ERNIE 4.5:
// rotate_half(x) = stack(-x[..., 1::2], x[..., ::2], -1).flatten(-2) as
// slices with a step of 2, a neg, reshapes to a last axis of 1, a concat
// along it and a flatten: one rotary with `interleaved`, moved before the
// heads transpose as LLaMA's. Pairs in the wrong order (the even elements
// negated) are not the rotation.
// CHECK-LABEL: func.func @interleaved_rotary
// CHECK: %[[Q:.*]] = graph.rotary %arg0, %{{.*}}, %{{.*}} {interleaved = true} : (tensor<2x5x3x8xf32>, tensor<1x5x1x8xf32>, tensor<1x5x1x8xf32>) -> tensor<2x5x3x8xf32>
// CHECK-NOT: graph.transpose
// CHECK: graph.attention %[[Q]], %arg1, %arg2, %arg5 {scale = 5.000000e-01 : f64, token_major = array<i1: true, false, false, false>}
// CHECK-LABEL: func.func @pairs_swapped
// CHECK-NOT: graph.rotary
func.func @interleaved_rotary(%q1: tensor<2x5x3x8xf32>, %k: tensor<2x3x5x8xf32>, %v: tensor<2x3x5x8xf32>, %cos: tensor<1x1x5x8xf32>, %sin: tensor<1x1x5x8xf32>, %m: tensor<1x1x5x5xi64>) -> tensor<2x3x5x8xf32> {
  %q = graph.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x8xf32>) -> tensor<2x3x5x8xf32>
  %qc = graph.mul %q, %cos : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %even = graph.slice %q {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 2>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %odd = graph.slice %q {starts = array<i64: 0, 0, 0, 1>, steps = array<i64: 1, 1, 1, 2>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %nodd = graph.neg %odd : tensor<2x3x5x4xf32>
  %a = graph.reshape %nodd : (tensor<2x3x5x4xf32>) -> tensor<2x3x5x4x1xf32>
  %b = graph.reshape %even : (tensor<2x3x5x4xf32>) -> tensor<2x3x5x4x1xf32>
  %pairs = graph.concat %a, %b {axis = 4 : i64} : (tensor<2x3x5x4x1xf32>, tensor<2x3x5x4x1xf32>) -> tensor<2x3x5x4x2xf32>
  %rot = graph.reshape %pairs : (tensor<2x3x5x4x2xf32>) -> tensor<2x3x5x8xf32>
  %qs = graph.mul %rot, %sin : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %qr = graph.add %qc, %qs : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>) -> tensor<2x3x5x8xf32>
  %out, %lse = graph.attention %qr, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<1x1x5x5xi64>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>)
  return %out : tensor<2x3x5x8xf32>
}
func.func @pairs_swapped(%q: tensor<2x3x5x8xf32>, %cos: tensor<1x1x5x8xf32>, %sin: tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32> {
  %qc = graph.mul %q, %cos : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %even = graph.slice %q {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 2>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %odd = graph.slice %q {starts = array<i64: 0, 0, 0, 1>, steps = array<i64: 1, 1, 1, 2>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %neven = graph.neg %even : tensor<2x3x5x4xf32>
  %a = graph.reshape %neven : (tensor<2x3x5x4xf32>) -> tensor<2x3x5x4x1xf32>
  %b = graph.reshape %odd : (tensor<2x3x5x4xf32>) -> tensor<2x3x5x4x1xf32>
  %pairs = graph.concat %a, %b {axis = 4 : i64} : (tensor<2x3x5x4x1xf32>, tensor<2x3x5x4x1xf32>) -> tensor<2x3x5x4x2xf32>
  %rot = graph.reshape %pairs : (tensor<2x3x5x4x2xf32>) -> tensor<2x3x5x8xf32>
  %qs = graph.mul %rot, %sin : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %qr = graph.add %qc, %qs : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>) -> tensor<2x3x5x8xf32>
  return %qr : tensor<2x3x5x8xf32>
}

// -----

// Tests transpose's folds (applied by the pass's rewrite driver): one that
// keeps every axis in place is its input (the dynamo exporter's MoE expert
// weights), and a transpose of a transpose is one transpose by the
// composed permutation, or none where that keeps every axis.
// CHECK-LABEL: func.func @identity_transpose
// CHECK-NOT: graph.transpose
// CHECK: return %arg0
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK: %[[T:.*]] = graph.transpose %arg0 {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NOT: graph.transpose
// CHECK: return %[[T]], %arg0
func.func @identity_transpose(%x: tensor<4x6x5xf32>) -> tensor<4x6x5xf32> {
  %t = graph.transpose %x {perm = array<i64: 0, 1, 2>} : (tensor<4x6x5xf32>) -> tensor<4x6x5xf32>
  return %t : tensor<4x6x5xf32>
}
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %a = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %b = graph.transpose %a {perm = array<i64: 2, 1, 0>} : (tensor<3x2x4xf32>) -> tensor<4x2x3xf32>
  %c = graph.transpose %a {perm = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  return %b, %c : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that a softmax of x minus something constant along its axis (the
// rows' maximum exports subtract first) reads x itself, and that a shift
// that varies along the axis stays.
// CHECK-LABEL: func.func @softmax_shift
// CHECK: %[[Y:.*]] = graph.softmax %arg0 {axis = 2 : i64}
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @softmax_shift_along_axis
// CHECK: %[[D:.*]] = graph.sub %arg0, %arg1
// CHECK: graph.softmax %[[D]]
func.func @softmax_shift(%x: tensor<2x3x5xf32>, %m: tensor<2x3x1xf32>) -> tensor<2x3x5xf32> {
  %d = graph.sub %x, %m : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
  %y = graph.softmax %d {axis = 2 : i64} : tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}
func.func @softmax_shift_along_axis(%x: tensor<2x3x5xf32>, %m: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %d = graph.sub %x, %m : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  %y = graph.softmax %d {axis = -1 : i64} : tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// Tests that GPT-OSS's attention with sinks (each head's sink broadcast to
// a last column of the masked scores, the rows' maximum subtracted, the
// softmax, the sink's column sliced off) becomes one graph.attention with
// the per-head sinks, nothing of the formula left. A slice that keeps the
// sink's column, or a column that differs between queries, keeps it.
// CHECK-LABEL: func.func @attention_with_sinks
// CHECK: %[[S:.*]] = graph.reshape %arg4 : (tensor<1x3x1x1xf32>) -> tensor<3xf32>
// CHECK: %[[OUT:.*]], %{{.*}} = graph.attention %arg0, %arg1, %arg2, %arg3 sinks %[[S]] {scale = 5.000000e-01 : f64}
// CHECK-NOT: graph.concat
// CHECK-NOT: graph.softmax
// CHECK-NOT: graph.broadcast_to
// CHECK: return %[[OUT]]
// CHECK-LABEL: func.func @sink_column_kept
// CHECK-NOT: graph.attention
// CHECK: graph.concat
// CHECK-LABEL: func.func @sink_per_query
// CHECK-NOT: graph.attention
// CHECK: graph.concat
func.func @attention_with_sinks(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<5x5xi64>, %sinks: tensor<1x3x1x1xf32>) -> tensor<2x3x5x6xf32> {
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %scaled = graph.mul %s, %half : (tensor<2x3x5x5xf32>, tensor<f32>) -> tensor<2x3x5x5xf32>
  %masked = graph.select %m, %ninf, %scaled : (tensor<5x5xi64>, tensor<f32>, tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  %column = graph.broadcast_to %sinks : (tensor<1x3x1x1xf32>) -> tensor<2x3x5x1xf32>
  %logits = graph.concat %masked, %column {axis = 3 : i64} : (tensor<2x3x5x5xf32>, tensor<2x3x5x1xf32>) -> tensor<2x3x5x6xf32>
  %max = graph.reduce_sum %logits {axes = array<i64: 3>, keepdims = true} : (tensor<2x3x5x6xf32>) -> tensor<2x3x5x1xf32>
  %shifted = graph.sub %logits, %max : (tensor<2x3x5x6xf32>, tensor<2x3x5x1xf32>) -> tensor<2x3x5x6xf32>
  %p = graph.softmax %shifted {axis = 3 : i64} : tensor<2x3x5x6xf32>
  %keys = graph.slice %p {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x6xf32>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %keys, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  return %o : tensor<2x3x5x6xf32>
}
func.func @sink_column_kept(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<5x5xi64>, %sinks: tensor<1x3x1x1xf32>) -> tensor<2x3x5x6xf32> {
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %masked = graph.select %m, %ninf, %s : (tensor<5x5xi64>, tensor<f32>, tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  %column = graph.broadcast_to %sinks : (tensor<1x3x1x1xf32>) -> tensor<2x3x5x1xf32>
  %logits = graph.concat %masked, %column {axis = 3 : i64} : (tensor<2x3x5x5xf32>, tensor<2x3x5x1xf32>) -> tensor<2x3x5x6xf32>
  %p = graph.softmax %logits {axis = 3 : i64} : tensor<2x3x5x6xf32>
  %keys = graph.slice %p {starts = array<i64: 0, 0, 0, 1>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x6xf32>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %keys, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  return %o : tensor<2x3x5x6xf32>
}
func.func @sink_per_query(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<5x5xi64>, %sinks: tensor<1x3x5x1xf32>) -> tensor<2x3x5x6xf32> {
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %s = graph.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %masked = graph.select %m, %ninf, %s : (tensor<5x5xi64>, tensor<f32>, tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  %column = graph.broadcast_to %sinks : (tensor<1x3x5x1xf32>) -> tensor<2x3x5x1xf32>
  %logits = graph.concat %masked, %column {axis = 3 : i64} : (tensor<2x3x5x5xf32>, tensor<2x3x5x1xf32>) -> tensor<2x3x5x6xf32>
  %p = graph.softmax %logits {axis = 3 : i64} : tensor<2x3x5x6xf32>
  %keys = graph.slice %p {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x6xf32>) -> tensor<2x3x5x5xf32>
  %o = graph.batch_matmul %keys, %v : (tensor<2x3x5x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x5x6xf32>
  return %o : tensor<2x3x5x6xf32>
}

// -----

// Tests that the rotation in halves GPT-OSS writes, concat(x1 cos - x2 sin,
// x2 cos + x1 sin) with half-width tables, becomes graph.rotary with each
// table repeated for both halves; with each half transposed alike, the
// rotation moves before the transpose. Halves of two different tensors
// stay.
// CHECK-LABEL: func.func @halves_rotary
// CHECK-DAG: %[[C:.*]] = graph.concat %arg1, %arg1 {axis = 3 : i64} : (tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<1x1x5x8xf32>
// CHECK-DAG: %[[S:.*]] = graph.concat %arg2, %arg2 {axis = 3 : i64}
// CHECK: %[[R:.*]] = graph.rotary %arg0, %[[C]], %[[S]] : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>)
// CHECK: return %[[R]]
// CHECK-LABEL: func.func @halves_rotary_transposed
// CHECK: %[[R:.*]] = graph.rotary %arg0, %{{.*}}, %{{.*}} : (tensor<2x5x3x8xf32>, tensor<1x5x1x8xf32>, tensor<1x5x1x8xf32>)
// CHECK: %[[T:.*]] = graph.transpose %[[R]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK: return %[[T]]
// CHECK-LABEL: func.func @halves_of_two_tensors
// CHECK-NOT: graph.rotary
// CHECK-LABEL: func.func @halves_rotary_constant_tables
// CHECK-DAG: %[[C:.*]] = graph.constant dense<{{\[\[\[}}[1.000000e+00, 5.000000e-01, 1.000000e+00, 5.000000e-01]]]]> : tensor<1x1x1x4xf32>
// CHECK-DAG: %[[S:.*]] = graph.constant dense<{{\[\[\[}}[0.000000e+00, 2.500000e-01, 0.000000e+00, 2.500000e-01]]]]> : tensor<1x1x1x4xf32>
// CHECK-NOT: graph.concat
// CHECK: graph.rotary %arg0, %[[C]], %[[S]]
func.func @halves_rotary(%x: tensor<2x3x5x8xf32>, %cos: tensor<1x1x5x4xf32>, %sin: tensor<1x1x5x4xf32>) -> tensor<2x3x5x8xf32> {
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %x2 = graph.slice %x {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %a = graph.mul %x1, %cos : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %b = graph.mul %x2, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %first = graph.sub %a, %b : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %c = graph.mul %cos, %x2 : (tensor<1x1x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %d = graph.mul %x1, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %second = graph.add %d, %c : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %y = graph.concat %first, %second {axis = 3 : i64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x8xf32>
  return %y : tensor<2x3x5x8xf32>
}
func.func @halves_rotary_transposed(%x: tensor<2x5x3x8xf32>, %cos: tensor<1x1x5x4xf32>, %sin: tensor<1x1x5x4xf32>) -> tensor<2x3x5x8xf32> {
  %h1 = graph.slice %x {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x5x3x8xf32>) -> tensor<2x5x3x4xf32>
  %h2 = graph.slice %x {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x5x3x8xf32>) -> tensor<2x5x3x4xf32>
  %x1 = graph.transpose %h1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %x2 = graph.transpose %h2 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %a = graph.mul %x1, %cos : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %b = graph.mul %x2, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %first = graph.sub %a, %b : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %c = graph.mul %x2, %cos : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %d = graph.mul %x1, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %second = graph.add %c, %d : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %y = graph.concat %first, %second {axis = 3 : i64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x8xf32>
  return %y : tensor<2x3x5x8xf32>
}
func.func @halves_of_two_tensors(%x: tensor<2x3x5x8xf32>, %z: tensor<2x3x5x8xf32>, %cos: tensor<1x1x5x4xf32>, %sin: tensor<1x1x5x4xf32>) -> tensor<2x3x5x8xf32> {
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %x2 = graph.slice %z {starts = array<i64: 0, 0, 0, 4>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x5x8xf32>) -> tensor<2x3x5x4xf32>
  %a = graph.mul %x1, %cos : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %b = graph.mul %x2, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %first = graph.sub %a, %b : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %c = graph.mul %x2, %cos : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %d = graph.mul %x1, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %second = graph.add %c, %d : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %y = graph.concat %first, %second {axis = 3 : i64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x8xf32>
  return %y : tensor<2x3x5x8xf32>
}
func.func @halves_rotary_constant_tables(%x: tensor<2x3x1x4xf32>) -> tensor<2x3x1x4xf32> {
  %cos = graph.constant dense<[[[[1.0, 0.5]]]]> : tensor<1x1x1x2xf32>
  %sin = graph.constant dense<[[[[0.0, 0.25]]]]> : tensor<1x1x1x2xf32>
  %x1 = graph.slice %x {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x1x4xf32>) -> tensor<2x3x1x2xf32>
  %x2 = graph.slice %x {starts = array<i64: 0, 0, 0, 2>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x3x1x4xf32>) -> tensor<2x3x1x2xf32>
  %a = graph.mul %x1, %cos : (tensor<2x3x1x2xf32>, tensor<1x1x1x2xf32>) -> tensor<2x3x1x2xf32>
  %b = graph.mul %x2, %sin : (tensor<2x3x1x2xf32>, tensor<1x1x1x2xf32>) -> tensor<2x3x1x2xf32>
  %first = graph.sub %a, %b : (tensor<2x3x1x2xf32>, tensor<2x3x1x2xf32>) -> tensor<2x3x1x2xf32>
  %c = graph.mul %x2, %cos : (tensor<2x3x1x2xf32>, tensor<1x1x1x2xf32>) -> tensor<2x3x1x2xf32>
  %d = graph.mul %x1, %sin : (tensor<2x3x1x2xf32>, tensor<1x1x1x2xf32>) -> tensor<2x3x1x2xf32>
  %second = graph.add %c, %d : (tensor<2x3x1x2xf32>, tensor<2x3x1x2xf32>) -> tensor<2x3x1x2xf32>
  %y = graph.concat %first, %second {axis = 3 : i64} : (tensor<2x3x1x2xf32>, tensor<2x3x1x2xf32>) -> tensor<2x3x1x4xf32>
  return %y : tensor<2x3x1x4xf32>
}

// -----

// Tests that transformers' batched_mm experts (each row's expert's matrix
// gathered, then a batched product) become one graph.expert_matmul that
// reads the weights in place, the transposed form too, and Mixtral's form
// with the matrices first and a column per row (x^T W^T, the column
// reshaped to a row and back); a gathered copy read elsewhere stays.
// CHECK-LABEL: func.func @batched_mm_experts
// CHECK: %[[Y:.*]] = graph.expert_matmul %arg0, %arg1, %arg2 : (tensor<6x1x8xf32>, tensor<3x8x5xf32>, tensor<6xi64>) -> tensor<6x1x5xf32>
// CHECK-NOT: graph.gather
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @batched_mm_experts_transposed
// CHECK: graph.expert_matmul %arg0, %arg1, %arg2 {transpose_weights = true} : (tensor<6x1x8xf32>, tensor<3x5x8xf32>, tensor<6xi64>) -> tensor<6x1x5xf32>
// CHECK-LABEL: func.func @batched_mm_experts_weights_first
// CHECK: %[[ROW:.*]] = graph.reshape %arg1 : (tensor<6x8x1xf32>) -> tensor<6x1x8xf32>
// CHECK: %[[Y:.*]] = graph.expert_matmul %[[ROW]], %arg0, %arg2 {transpose_weights = true} : (tensor<6x1x8xf32>, tensor<3x5x8xf32>, tensor<6xi64>) -> tensor<6x1x5xf32>
// CHECK: %[[COL:.*]] = graph.reshape %[[Y]] : (tensor<6x1x5xf32>) -> tensor<6x5x1xf32>
// CHECK: return %[[COL]]
// CHECK-LABEL: func.func @gathered_weights_read_elsewhere
// CHECK: graph.gather
// CHECK: graph.batch_matmul
// CHECK-NOT: graph.expert_matmul
func.func @batched_mm_experts(%x: tensor<6x1x8xf32>, %w: tensor<3x8x5xf32>, %e: tensor<6xi64>) -> tensor<6x1x5xf32> {
  %g = graph.gather %w, %e {axis = 0 : i64} : (tensor<3x8x5xf32>, tensor<6xi64>) -> tensor<6x8x5xf32>
  %y = graph.batch_matmul %x, %g : (tensor<6x1x8xf32>, tensor<6x8x5xf32>) -> tensor<6x1x5xf32>
  return %y : tensor<6x1x5xf32>
}
func.func @batched_mm_experts_transposed(%x: tensor<6x1x8xf32>, %w: tensor<3x5x8xf32>, %e: tensor<6xi64>) -> tensor<6x1x5xf32> {
  %g = graph.gather %w, %e {axis = 0 : i64} : (tensor<3x5x8xf32>, tensor<6xi64>) -> tensor<6x5x8xf32>
  %y = graph.batch_matmul %x, %g {transpose_b = true} : (tensor<6x1x8xf32>, tensor<6x5x8xf32>) -> tensor<6x1x5xf32>
  return %y : tensor<6x1x5xf32>
}
func.func @batched_mm_experts_weights_first(%w: tensor<3x5x8xf32>, %x: tensor<6x8x1xf32>, %e: tensor<6xi64>) -> tensor<6x5x1xf32> {
  %g = graph.gather %w, %e {axis = 0 : i64} : (tensor<3x5x8xf32>, tensor<6xi64>) -> tensor<6x5x8xf32>
  %y = graph.batch_matmul %g, %x : (tensor<6x5x8xf32>, tensor<6x8x1xf32>) -> tensor<6x5x1xf32>
  return %y : tensor<6x5x1xf32>
}
func.func @gathered_weights_read_elsewhere(%x: tensor<6x1x8xf32>, %w: tensor<3x8x5xf32>, %e: tensor<6xi64>) -> (tensor<6x1x5xf32>, tensor<6x8x5xf32>) {
  %g = graph.gather %w, %e {axis = 0 : i64} : (tensor<3x8x5xf32>, tensor<6xi64>) -> tensor<6x8x5xf32>
  %y = graph.batch_matmul %x, %g : (tensor<6x1x8xf32>, tensor<6x8x5xf32>) -> tensor<6x1x5xf32>
  return %y, %g : tensor<6x1x5xf32>, tensor<6x8x5xf32>
}
