// RUN: fsdp-opt %s -split-input-file -canonicalize | FileCheck %s

// Tests that a concat of constants folds to one constant, the inputs'
// blocks interleaved along the axis (a splat repeated), for floats and
// integers; GPT-OSS's rotation in halves repeats its constant half tables.
// CHECK-LABEL: func.func @concat_of_constants
// CHECK: %[[C:.*]] = graph.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 1.000000e+00, 2.000000e+00, 7.000000e+00], [3.000000e+00, 4.000000e+00, 3.000000e+00, 4.000000e+00, 7.000000e+00]]> : tensor<2x5xf32>
// CHECK-NEXT: return %[[C]]
// CHECK-LABEL: func.func @concat_of_integers_on_axis_0
// CHECK: %[[C:.*]] = graph.constant dense<{{\[}}[1, 2], [3, 4], [0, 0]]> : tensor<3x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @concat_of_constants() -> tensor<2x5xf32> {
  %a = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %s = graph.constant dense<7.0> : tensor<2x1xf32>
  %y = graph.concat %a, %a, %s {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}
func.func @concat_of_integers_on_axis_0() -> tensor<3x2xi64> {
  %a = graph.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %z = graph.constant dense<0> : tensor<1x2xi64>
  %y = graph.concat %a, %z {axis = 0 : i64} : (tensor<2x2xi64>, tensor<1x2xi64>) -> tensor<3x2xi64>
  return %y : tensor<3x2xi64>
}

// -----

// Tests that a concat with an operand computed at run time stays, and that
// one of booleans (bits, not bytes) is left alone.
// CHECK-LABEL: func.func @concat_with_a_variable
// CHECK: graph.concat %{{.*}}, %arg0 {axis = 1 : i64}
// CHECK-LABEL: func.func @concat_of_booleans
// CHECK: graph.concat
func.func @concat_with_a_variable(%x: tensor<2x1xf32>) -> tensor<2x3xf32> {
  %a = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %y = graph.concat %a, %x {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
func.func @concat_of_booleans() -> tensor<4xi1> {
  %a = graph.constant dense<[true, false]> : tensor<2xi1>
  %y = graph.concat %a, %a {axis = 0 : i64} : (tensor<2xi1>, tensor<2xi1>) -> tensor<4xi1>
  return %y : tensor<4xi1>
}
