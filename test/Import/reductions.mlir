// Tests ReduceProd (integer constants fold; float tensors as products of
// halves, an odd size's last element riding along), EyeLike (folds from the
// static shape), MeanVarianceNormalization and LpNormalization.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: reductions (float[2, 3] x, float[1, 2, 2, 2] v) => (int64[1, 3] sizes, float[2, 1] p, float[2, 3] eye, float[1, 2, 2, 2] mvn, float[2, 3] l2) {
// ONNX:   dims = Constant <value = int64[2, 3] {2, 3, 4, 5, 6, 7}> ()
// ONNX:   sizes = ReduceProd <axes = [0], keepdims = 1> (dims)
// ONNX:   p = ReduceProd <axes = [1], keepdims = 1> (x)
// ONNX:   eye = EyeLike <k = 1> (x)
// ONNX:   mvn = MeanVarianceNormalization (v)
// ONNX:   l2 = LpNormalization <axis = 1, p = 2> (x)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:arg[0-9]+]]: tensor<2x3xf32> {{.*}}, %[[V:arg[0-9]+]]: tensor<1x2x2x2xf32>
// CHECK: %[[SIZES:.*]] = graph.constant dense<{{\[\[}}10, 18, 28]]> : tensor<1x3xi64>
// Three along axis 1: x[:, 0] * x[:, 1], then the third concatenated and
// multiplied in.
// CHECK: %[[A:.*]] = graph.slice %[[X]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: %[[B:.*]] = graph.slice %[[X]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: %[[AB:.*]] = graph.mul %[[A]], %[[B]]
// CHECK: %[[C:.*]] = graph.slice %[[X]] {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>}
// CHECK: %[[PAIR:.*]] = graph.concat %[[AB]], %[[C]] {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
// CHECK: %[[P:.*]] = graph.mul
// CHECK: %[[EYE:.*]] = graph.constant dense<{{\[\[}}0.000000e+00, 1.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 1.000000e+00]]> : tensor<2x3xf32>
// (x - mean) / (std + 1e-9) over axes 0, 2, 3.
// CHECK: %[[SUM:.*]] = graph.reduce_sum %[[V]] {axes = array<i64: 0, 2, 3>, keepdims = true} : (tensor<1x2x2x2xf32>) -> tensor<1x2x1x1xf32>
// CHECK: %[[MEAN:.*]] = graph.scale %[[SUM]] {factor = 2.500000e-01 : f64}
// CHECK: %[[CENTERED:.*]] = graph.sub %[[V]], %[[MEAN]]
// CHECK: graph.mul %[[CENTERED]], %[[CENTERED]]
// CHECK: %[[STD:.*]] = graph.sqrt
// CHECK: %[[EPS:.*]] = graph.constant dense<9.99999971E-10> : tensor<f32>
// CHECK: %[[DEN:.*]] = graph.add %[[STD]], %[[EPS]]
// CHECK: %[[MVN:.*]] = graph.div %[[CENTERED]], %[[DEN]]
// CHECK: %[[SQ:.*]] = graph.mul %[[X]], %[[X]]
// CHECK: %[[SS:.*]] = graph.reduce_sum %[[SQ]] {axes = array<i64: 1>, keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: %[[NORM:.*]] = graph.sqrt %[[SS]]
// CHECK: %[[L2:.*]] = graph.div %[[X]], %[[NORM]] : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK: return %[[SIZES]], %[[P]], %[[EYE]], %[[MVN]], %[[L2]]
