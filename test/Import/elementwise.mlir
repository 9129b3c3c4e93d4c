// Tests the broadcasting binary ops, Transpose and Constant.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: ew (float[2, 3] a, float[3] b) => (float[3, 2] y) {
// ONNX:   c = Constant <value = float[1] {2.0}> ()
// ONNX:   s = Add (a, b)
// ONNX:   d = Sub (s, c)
// ONNX:   m = Mul (d, b)
// ONNX:   q = Div (m, c)
// ONNX:   y = Transpose <perm = [1, 0]> (q)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK: %[[C:.*]] = graph.constant dense<2.000000e+00> : tensor<1xf32>
// CHECK: %[[S:.*]] = graph.add %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[D:.*]] = graph.sub %[[S]], %[[C]] : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
// CHECK: %[[M:.*]] = graph.mul %[[D]], %arg1
// CHECK: %[[Q:.*]] = graph.div %[[M]], %[[C]]
// CHECK: graph.transpose %[[Q]] {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
