// Tests the constants that fold at import: what Hugging Face exports compute
// from buffers and ones (causal masks, token type ids) never runs per step.
// IsNaN of a runtime value stays an op.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 17]>
// ONNX: fold (float[2, 3] x) => (float[2, 3] y, float[2, 3] masked, int64[2, 3] picked, int64[2, 3] chosen) {
// ONNX:   one = Constant <value = float[1] {1.0}> ()
// ONNX:   zero = Constant <value = float[1] {0.0}> ()
// ONNX:   shape = Constant <value = int64[2] {2, 3}> ()
// ONNX:   ones = Expand (one, shape)
// ONNX:   upper = Trilu <upper = 1> (ones)
// ONNX:   lower = Equal (upper, zero)
// ONNX:   masked = Where (lower, x, zero)
// ONNX:   table = Constant <value = int64[2, 3] {10, 11, 12, 20, 21, 22}> ()
// ONNX:   index = Constant <value = int64[2, 3] {2, 0, 1, 1, 1, 0}> ()
// ONNX:   picked = GatherElements <axis = 1> (table, index)
// ONNX:   ten = Constant <value = int64[1] {10}> ()
// ONNX:   chosen = Where (lower, table, ten)
// ONNX:   nan = IsNaN (x)
// ONNX:   y = Where (nan, zero, x)
// ONNX: }

// CHECK-LABEL: func.func @forward
// Expand of a constant, Trilu, and Equal on floats fold to the mask
// (strictly lower triangle: 1 where the upper triangle is 0).
// CHECK-DAG: graph.constant dense<{{\[\[}}0, 0, 0], [1, 0, 0]]> : tensor<2x3xi64>
// GatherElements along axis 1: [[12, 10, 11], [21, 21, 20]].
// CHECK-DAG: graph.constant dense<{{\[\[}}12, 10, 11], [21, 21, 20]]> : tensor<2x3xi64>
// Where on integer constants: [[10, 10, 10], [20, 10, 10]].
// CHECK-DAG: graph.constant dense<{{\[\[}}10, 10, 10], [20, 10, 10]]> : tensor<2x3xi64>
// CHECK: %[[NAN:.*]] = graph.is_nan %arg0 : (tensor<2x3xf32>) -> tensor<2x3xi64>
// CHECK: graph.select %[[NAN]], %{{.*}}, %arg0
