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

// T5's relative position buckets: Abs, Less, GreaterOrEqual, Min, Log, Neg
// and float Div/Mul on constants fold; nothing of it runs per step.
// RUN: onnx-from-text %s --extract '// T5: ' -o %t.buckets.onnx
// RUN: fsdpc %t.buckets.onnx --emit=import | FileCheck %s --check-prefix=BUCKETS

// T5: <ir_version: 8, opset_import: ["" : 17]>
// T5: buckets (float[3] x) => (float[3] y, bool[3] small, bool[3] far, int64[3] capped, float[3] logs, int64[3] top) {
// T5:   rel = Constant <value = int64[3] {-3, 0, 5}> ()
// T5:   two = Constant <value = int64[1] {2}> ()
// T5:   dist = Abs (rel)
// T5:   small = Less (dist, two)
// T5:   far = GreaterOrEqual (rel, two)
// T5:   four = Constant <value = int64[1] {4}> ()
// T5:   capped = Min (dist, four)
// T5:   top = Max (rel, two, dist)
// T5:   f = Constant <value = float[3] {1.0, 2.0, 4.0}> ()
// T5:   l = Log (f)
// T5:   half = Constant <value = float[1] {0.5}> ()
// T5:   d = Div (l, half)
// T5:   logs = Neg (d)
// T5:   y = Mul (x, logs)
// T5: }

// BUCKETS-LABEL: func.func @forward
// BUCKETS-DAG: graph.constant dense<[3, 0, 5]> : tensor<3xi64>
// BUCKETS-DAG: graph.constant dense<[0, 1, 0]> : tensor<3xi64>
// BUCKETS-DAG: graph.constant dense<[0, 0, 1]> : tensor<3xi64>
// BUCKETS-DAG: graph.constant dense<[3, 0, 4]> : tensor<3xi64>
// BUCKETS-DAG: graph.constant dense<[3, 2, 5]> : tensor<3xi64>
// -2 ln 1, -2 ln 2, -2 ln 4:
// BUCKETS-DAG: %[[LOGS:.*]] = graph.constant dense<[-0.000000e+00, -1.38629436, -2.77258873]> : tensor<3xf32>
// BUCKETS: graph.mul %arg0, %[[LOGS]]
