// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s

// Tests that forward ops print and parse back.
// CHECK-LABEL: func.func @forward_ops
func.func @forward_ops(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>, %b: tensor<5xf32>) -> tensor<f32> {
  // CHECK: graph.constant dense<1.000000e+00> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  // CHECK: graph.matmul %{{.*}}, %{{.*}} {transpose_b = true}
  %h = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  // CHECK: graph.add
  %y = graph.add %h, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %s = graph.sub %y, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %m = graph.mul %s, %y : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %d = graph.div %m, %one : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  // CHECK: graph.relu
  %r = graph.relu %d : tensor<4x5xf32>
  %t = graph.tanh %r : tensor<4x5xf32>
  %g = graph.sigmoid %t : tensor<4x5xf32>
  %n = graph.neg %g : tensor<4x5xf32>
  // CHECK: graph.scale %{{.*}} {factor = 5.000000e-01 : f64}
  %sc = graph.scale %n {factor = 0.5 : f64} : tensor<4x5xf32>
  // CHECK: graph.transpose %{{.*}} {perm = array<i64: 1, 0>}
  %tr = graph.transpose %sc {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  // CHECK: graph.reshape
  %re = graph.reshape %tr : (tensor<5x4xf32>) -> tensor<4x5xf32>
  // CHECK: graph.softmax %{{.*}} {axis = -1 : i64}
  %sm = graph.softmax %re {axis = -1 : i64} : tensor<4x5xf32>
  %ls = graph.log_softmax %sm {axis = 1 : i64} : tensor<4x5xf32>
  %mse = graph.mse_loss %ls, %sm : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
  return %mse : tensor<f32>
}

// -----

// Tests that the arithmetic and arg reductions take i64 tensors: the last
// token that is not padding, as a classifier head computes it.
// CHECK-LABEL: func.func @integer_ops
func.func @integer_ops(%kept: tensor<2x5xi64>, %length: tensor<i64>) -> tensor<2xi64> {
  %positions = graph.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi64>
  // CHECK: graph.mul %{{.*}}, %{{.*}} : (tensor<5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
  %weighted = graph.mul %positions, %kept : (tensor<5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
  // CHECK: graph.arg_max %{{.*}} {axis = 1 : i64} : (tensor<2x5xi64>) -> tensor<2x1xi64>
  %last = graph.arg_max %weighted {axis = 1 : i64} : (tensor<2x5xi64>) -> tensor<2x1xi64>
  %flat = graph.reshape %last : (tensor<2x1xi64>) -> tensor<2xi64>
  // CHECK: graph.add %{{.*}}, %{{.*}} : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %sum = graph.add %flat, %length : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  // CHECK: graph.sub
  %difference = graph.sub %sum, %length : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  // CHECK: graph.div %{{.*}}, %{{.*}} : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %quotient = graph.div %difference, %length : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  return %quotient : tensor<2xi64>
}

// -----

// Tests that gradient and optimizer ops print and parse back.
// CHECK-LABEL: func.func @backward_ops
func.func @backward_ops(%logits: tensor<4x5xf32>, %labels: tensor<4xi64>, %g: tensor<f32>, %step: tensor<i64>,
                        %p: tensor<5xf32>, %m: tensor<5xf32>, %v: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  // CHECK: graph.softmax_cross_entropy_grad {{.*}} {ignore_index = -100 : i64}
  %dl = graph.softmax_cross_entropy_grad %logits, %labels, %g {reduction = #graph.reduction<mean>, ignore_index = -100 : i64} : (tensor<4x5xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x5xf32>
  %r = graph.relu_grad %logits, %dl : tensor<4x5xf32>
  %t = graph.tanh_grad %logits, %r : tensor<4x5xf32>
  %s = graph.sigmoid_grad %logits, %t : tensor<4x5xf32>
  %sm = graph.softmax_grad %logits, %s {axis = 1 : i64} : tensor<4x5xf32>
  %ls = graph.log_softmax_grad %logits, %sm {axis = 1 : i64} : tensor<4x5xf32>
  // CHECK: graph.sum_to %{{.*}} : (tensor<4x5xf32>) -> tensor<5xf32>
  %db = graph.sum_to %ls : (tensor<4x5xf32>) -> tensor<5xf32>
  // CHECK: graph.adamw_update %{{.*}}, step %{{.*}} {beta1
  %p1, %m1, %v1 = graph.adamw_update %p, %db, %m, %v, step %step {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
  // CHECK: graph.sgd_update %{{.*}}, %{{.*}} state(%{{.*}}) step
  %p2, %buf = graph.sgd_update %p1, %db state(%m1) step %step {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> (tensor<5xf32>, tensor<5xf32>)
  return %p2, %buf : tensor<5xf32>, tensor<5xf32>
}

// -----

// Tests that the fused ops and their gradients print and parse back.
// CHECK-LABEL: func.func @fused_ops
func.func @fused_ops(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>) {
  // CHECK: graph.gelu %{{.*}} {approximate = #graph.approximate<tanh>} : tensor<2x3x4xf32>
  %g = graph.gelu %x {approximate = #graph.approximate<tanh>} : tensor<2x3x4xf32>
  // CHECK: graph.gelu_grad %{{.*}}, %{{.*}} : tensor<2x3x4xf32>
  %dg = graph.gelu_grad %x, %g : tensor<2x3x4xf32>
  // CHECK: graph.rotary %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  %table = graph.constant dense<0.5> : tensor<1x3x4xf32>
  %rot = graph.rotary %dg, %table, %table : (tensor<2x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: graph.rotary_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  %drot = graph.rotary_grad %rot, %table, %table : (tensor<2x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: graph.layer_norm %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
  %y, %mean, %rstd = graph.layer_norm %dg, %w, %b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  // CHECK: graph.masked_softmax %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f64}
  %mask = graph.constant dense<0> : tensor<3x4xi64>
  %p = graph.masked_softmax %y, %mask {scale = 0.5 : f64} : (tensor<2x3x4xf32>, tensor<3x4xi64>) -> tensor<2x3x4xf32>
  // CHECK: graph.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64}
  %rn, %rinv = graph.rms_norm %p, %w {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>)
  // CHECK: graph.rms_norm_grad
  %drn, %drw = graph.rms_norm_grad %p, %w, %rinv, %rn {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x1xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>)
  // CHECK: graph.layer_norm_grad
  %dx, %dw, %db = graph.layer_norm_grad %dg, %w, %mean, %rstd, %drn {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx, %dw : tensor<2x3x4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @clipping
func.func @clipping(%a: tensor<8xf32>, %b: tensor<3xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
  // CHECK: %[[SQ:.*]] = graph.sum_squares %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<3xf32>) -> tensor<1xf32>
  %sq = graph.sum_squares %a, %b : (tensor<8xf32>, tensor<3xf32>) -> tensor<1xf32>
  // CHECK: graph.clip_coefficient %[[SQ]] {max_norm = 1.000000e+00 : f64} : (tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  %scale, %norm = graph.clip_coefficient %sq {max_norm = 1.0 : f64} : (tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  return %scale, %norm : tensor<1xf32>, tensor<1xf32>
}

// -----

// CHECK-LABEL: func.func @compare_mask
func.func @compare_mask(%x: tensor<2x4xf32>, %limit: tensor<f32>, %ids: tensor<2x4xi64>, %pad: tensor<i64>) -> (tensor<2x4xi64>, tensor<2x4xi64>) {
  // CHECK: graph.compare %{{.*}}, %{{.*}} {predicate = #graph.predicate<ge>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xi64>
  %above = graph.compare %x, %limit {predicate = #graph.predicate<ge>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xi64>
  // CHECK: graph.compare %{{.*}}, %{{.*}} {predicate = #graph.predicate<ne>} : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %tokens = graph.compare %ids, %pad {predicate = #graph.predicate<ne>} : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  return %above, %tokens : tensor<2x4xi64>, tensor<2x4xi64>
}

// -----

// CHECK-LABEL: func.func @trigonometric_and_rounding
func.func @trigonometric_and_rounding(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: %[[S:.*]] = graph.sin %{{.*}} : tensor<2x4xf32>
  %s = graph.sin %x : tensor<2x4xf32>
  // CHECK: %[[C:.*]] = graph.cos %[[S]] : tensor<2x4xf32>
  %c = graph.cos %s : tensor<2x4xf32>
  // CHECK: %[[A:.*]] = graph.atan %[[C]] : tensor<2x4xf32>
  %a = graph.atan %c : tensor<2x4xf32>
  // CHECK: %[[F:.*]] = graph.floor %[[A]] : tensor<2x4xf32>
  %f = graph.floor %a : tensor<2x4xf32>
  // CHECK: %[[U:.*]] = graph.ceil %[[F]] : tensor<2x4xf32>
  %u = graph.ceil %f : tensor<2x4xf32>
  // CHECK: graph.round %[[U]] : tensor<2x4xf32>
  %r = graph.round %u : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @nan_mask
func.func @nan_mask(%p: tensor<2x4x4xf32>, %zero: tensor<f32>) -> tensor<2x4x4xf32> {
  // CHECK: %[[NAN:.*]] = graph.is_nan %{{.*}} : (tensor<2x4x4xf32>) -> tensor<2x4x4xi64>
  %nan = graph.is_nan %p : (tensor<2x4x4xf32>) -> tensor<2x4x4xi64>
  // CHECK: graph.select %[[NAN]]
  %y = graph.select %nan, %zero, %p : (tensor<2x4x4xi64>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @labels_and_indices
func.func @labels_and_indices(%x: tensor<3x7x5xf32>, %labels: tensor<6x4xi64>) -> (tensor<6x4x5xf32>, tensor<3x1x5xi64>, tensor<1x7x5xi64>) {
  // CHECK: graph.one_hot %{{.*}} {ignore_index = -100 : i64} : (tensor<6x4xi64>) -> tensor<6x4x5xf32>
  %mask = graph.one_hot %labels {ignore_index = -100 : i64} : (tensor<6x4xi64>) -> tensor<6x4x5xf32>
  // CHECK: graph.arg_max %{{.*}} {axis = 1 : i64} : (tensor<3x7x5xf32>) -> tensor<3x1x5xi64>
  %i = graph.arg_max %x {axis = 1 : i64} : (tensor<3x7x5xf32>) -> tensor<3x1x5xi64>
  // CHECK: graph.arg_min %{{.*}} {axis = 0 : i64, select_last_index = true} : (tensor<3x7x5xf32>) -> tensor<1x7x5xi64>
  %j = graph.arg_min %x {axis = 0 : i64, select_last_index = true} : (tensor<3x7x5xf32>) -> tensor<1x7x5xi64>
  return %mask, %i, %j : tensor<6x4x5xf32>, tensor<3x1x5xi64>, tensor<1x7x5xi64>
}
