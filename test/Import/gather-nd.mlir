// Tests GatherND as one gather of rows: runtime indices (an argmax, with
// batch_dims 1) normalised and weighted by their strides in f32, the batch
// rows' offsets added, cast to int64; constant indices folded to their
// rows (negative ones from the end).
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: gathernd (float[2, 3] x, float[2, 3, 4] data) => (float[2, 4] picked, float[2] points) {
// ONNX:   i = ArgMax <axis = 1, keepdims = 1> (x)
// ONNX:   picked = GatherND <batch_dims = 1> (data, i)
// ONNX:   where = Constant <value = int64[2, 3] {1, 2, 3, -1, -1, 0}> ()
// ONNX:   points = GatherND (data, where)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:arg[0-9]+]]: tensor<2x3xf32> {{.*}}, %[[DATA:arg[0-9]+]]: tensor<2x3x4xf32>
// CHECK: %[[I:.*]] = graph.arg_max %[[X]] {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x1xi64>
// CHECK: %[[ROWS:.*]] = graph.reshape %[[DATA]] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[IF:.*]] = graph.cast %[[I]] : (tensor<2x1xi64>) -> tensor<2x1xf32>
// CHECK: %[[NEG:.*]] = graph.compare %[[IF]], %{{.*}} {predicate = #graph.predicate<lt>}
// CHECK: %[[SIZE:.*]] = graph.constant dense<3.000000e+00> : tensor<1xf32>
// CHECK: %[[WRAPPED:.*]] = graph.add %[[IF]], %[[SIZE]]
// CHECK: %[[NORM:.*]] = graph.select %[[NEG]], %[[WRAPPED]], %[[IF]]
// CHECK: %[[STRIDE:.*]] = graph.constant dense<1.000000e+00> : tensor<1xf32>
// CHECK: %[[WEIGHTED:.*]] = graph.mul %[[NORM]], %[[STRIDE]]
// CHECK: %[[INNER:.*]] = graph.reduce_sum %[[WEIGHTED]] {axes = array<i64: 1>, keepdims = false} : (tensor<2x1xf32>) -> tensor<2xf32>
// CHECK: %[[OFFSETS:.*]] = graph.constant dense<[0.000000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK: %[[FLAT:.*]] = graph.add %[[INNER]], %[[OFFSETS]]
// CHECK: %[[ROW:.*]] = graph.cast %[[FLAT]] : (tensor<2xf32>) -> tensor<2xi64>
// CHECK: %[[PICKED:.*]] = graph.gather %[[ROWS]], %[[ROW]] {axis = 0 : i64} : (tensor<6x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
// [1, 2, 3] is element 1*12 + 2*4 + 3 = 23, [-1, -1, 0] is 1*12 + 2*4 = 20.
// CHECK: %[[ELEMENTS:.*]] = graph.reshape %[[DATA]] : (tensor<2x3x4xf32>) -> tensor<24xf32>
// CHECK: %[[WHERE:.*]] = graph.constant dense<[23, 20]> : tensor<2xi64>
// CHECK: %[[POINTS:.*]] = graph.gather %[[ELEMENTS]], %[[WHERE]] {axis = 0 : i64}
// CHECK: return %[[PICKED]], %[[POINTS]]
