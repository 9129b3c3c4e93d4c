// Tests GatherND as one gather of rows: runtime indices (an argmax, with
// batch_dims 1; a pair of coordinates) normalised (a negative one plus the
// dimension's size) and weighted by their strides in i64, the batch rows'
// offsets added; constant indices folded to their rows (negative ones from
// the end).
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: gathernd (float[2, 3] x, float[2, 3, 4] data, int64[5, 2] pairs) => (float[2, 4] picked, float[2] points, float[5, 4] paired) {
// ONNX:   i = ArgMax <axis = 1, keepdims = 1> (x)
// ONNX:   picked = GatherND <batch_dims = 1> (data, i)
// ONNX:   where = Constant <value = int64[2, 3] {1, 2, 3, -1, -1, 0}> ()
// ONNX:   points = GatherND (data, where)
// ONNX:   paired = GatherND (data, pairs)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:arg[0-9]+]]: tensor<2x3xf32> {{.*}}, %[[DATA:arg[0-9]+]]: tensor<2x3x4xf32> {{.*}}, %[[PAIRS:arg[0-9]+]]: tensor<5x2xi64>
// CHECK: %[[I:.*]] = graph.arg_max %[[X]] {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x1xi64>
// CHECK: %[[ROWS:.*]] = graph.reshape %[[DATA]] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[NEG:.*]] = graph.compare %[[I]], %{{.*}} {predicate = #graph.predicate<lt>} : (tensor<2x1xi64>, tensor<i64>) -> tensor<2x1xi64>
// CHECK: %[[SIZE:.*]] = graph.constant dense<3> : tensor<1xi64>
// CHECK: %[[SHIFT:.*]] = graph.mul %[[NEG]], %[[SIZE]]
// CHECK: %[[NORM:.*]] = graph.add %[[I]], %[[SHIFT]] : (tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x1xi64>
// CHECK: %[[INNER:.*]] = graph.reshape %[[NORM]] : (tensor<2x1xi64>) -> tensor<2xi64>
// CHECK: %[[OFFSETS:.*]] = graph.constant dense<[0, 3]> : tensor<2xi64>
// CHECK: %[[ROW:.*]] = graph.add %[[INNER]], %[[OFFSETS]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK: %[[PICKED:.*]] = graph.gather %[[ROWS]], %[[ROW]] {axis = 0 : i64} : (tensor<6x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
// [1, 2, 3] is element 1*12 + 2*4 + 3 = 23, [-1, -1, 0] is 1*12 + 2*4 = 20.
// CHECK: %[[ELEMENTS:.*]] = graph.reshape %[[DATA]] : (tensor<2x3x4xf32>) -> tensor<24xf32>
// CHECK: %[[WHERE:.*]] = graph.constant dense<[23, 20]> : tensor<2xi64>
// CHECK: %[[POINTS:.*]] = graph.gather %[[ELEMENTS]], %[[WHERE]] {axis = 0 : i64}
// A pair (d0, d1) names row 3 d0 + d1 of the [6, 4] rows: each coordinate
// a column of the normalised pairs, times its stride.
// CHECK: %[[PAIR_ROWS:.*]] = graph.reshape %[[DATA]] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[PAIR_NEG:.*]] = graph.compare %[[PAIRS]], %{{.*}} {predicate = #graph.predicate<lt>} : (tensor<5x2xi64>, tensor<i64>) -> tensor<5x2xi64>
// CHECK: %[[SIZES:.*]] = graph.constant dense<[2, 3]> : tensor<2xi64>
// CHECK: %[[PAIR_SHIFT:.*]] = graph.mul %[[PAIR_NEG]], %[[SIZES]] : (tensor<5x2xi64>, tensor<2xi64>) -> tensor<5x2xi64>
// CHECK: %[[PAIR_NORM:.*]] = graph.add %[[PAIRS]], %[[PAIR_SHIFT]]
// CHECK: %[[D0:.*]] = graph.slice %[[PAIR_NORM]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<5x2xi64>) -> tensor<5x1xi64>
// CHECK: %[[STRIDE0:.*]] = graph.constant dense<3> : tensor<i64>
// CHECK: %[[D0_TIMES:.*]] = graph.mul %[[D0]], %[[STRIDE0]] : (tensor<5x1xi64>, tensor<i64>) -> tensor<5x1xi64>
// CHECK: %[[TERM0:.*]] = graph.reshape %[[D0_TIMES]] : (tensor<5x1xi64>) -> tensor<5xi64>
// CHECK: %[[D1:.*]] = graph.slice %[[PAIR_NORM]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<5x2xi64>) -> tensor<5x1xi64>
// CHECK: %[[TERM1:.*]] = graph.reshape %[[D1]] : (tensor<5x1xi64>) -> tensor<5xi64>
// CHECK: %[[PAIR_ROW:.*]] = graph.add %[[TERM0]], %[[TERM1]] : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
// CHECK: %[[PAIRED:.*]] = graph.gather %[[PAIR_ROWS]], %[[PAIR_ROW]] {axis = 0 : i64} : (tensor<6x4xf32>, tensor<5xi64>) -> tensor<5x4xf32>
// CHECK: return %[[PICKED]], %[[POINTS]], %[[PAIRED]]
