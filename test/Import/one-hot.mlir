// Tests OneHot as comparisons with the positions: int64 indices against
// 0..depth-1 and -depth..-1 (negative indices count from the end, others
// out of range match nothing), integer values [0, 1] as the mask itself,
// float values as a select, other integer values through f32 and a cast,
// float indices truncated toward 0 first.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: onehot (int64[3] labels, float[2] f) => (int64[3, 4] mask, float[4, 3] chosen, int64[2, 4] counts) {
// ONNX:   depth = Constant <value = int64[1] {4}> ()
// ONNX:   bits = Constant <value = int64[2] {0, 1}> ()
// ONNX:   mask = OneHot (labels, depth, bits)
// ONNX:   scores = Constant <value = float[2] {-1.0, 2.5}> ()
// ONNX:   chosen = OneHot <axis = 0> (labels, depth, scores)
// ONNX:   levels = Constant <value = int64[2] {3, 7}> ()
// ONNX:   counts = OneHot (f, depth, levels)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[LABELS:arg[0-9]+]]: tensor<3xi64> {{.*}}, %[[F:arg[0-9]+]]: tensor<2xf32>
// CHECK: %[[L:.*]] = graph.reshape %[[LABELS]] : (tensor<3xi64>) -> tensor<3x1xi64>
// CHECK: %[[POS:.*]] = graph.constant dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK: %[[M1:.*]] = graph.compare %[[L]], %[[POS]] {predicate = #graph.predicate<eq>} : (tensor<3x1xi64>, tensor<1x4xi64>) -> tensor<3x4xi64>
// CHECK: %[[NEG:.*]] = graph.constant dense<{{\[\[}}-4, -3, -2, -1]]> : tensor<1x4xi64>
// CHECK: %[[M2:.*]] = graph.compare %[[L]], %[[NEG]] {predicate = #graph.predicate<eq>}
// The two never both hold: their sum is the mask.
// CHECK: %[[MASK:.*]] = graph.add %[[M1]], %[[M2]] : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
// axis 0: the positions run down the first dimension.
// CHECK: %[[LT:.*]] = graph.reshape %[[LABELS]] : (tensor<3xi64>) -> tensor<1x3xi64>
// CHECK: graph.constant dense<{{\[\[}}0], [1], [2], [3]]> : tensor<4x1xi64>
// CHECK: %[[HOT:.*]] = graph.add %{{.*}}, %{{.*}} : (tensor<4x3xi64>, tensor<4x3xi64>) -> tensor<4x3xi64>
// CHECK: %[[OFF:.*]] = graph.constant dense<-1.000000e+00> : tensor<f32>
// CHECK: %[[ON:.*]] = graph.constant dense<2.500000e+00> : tensor<f32>
// CHECK: %[[CHOSEN:.*]] = graph.select %[[HOT]], %[[ON]], %[[OFF]]
// Float indices: trunc(f) = f < 0 ? ceil f : floor f.
// CHECK: %[[FR:.*]] = graph.reshape %[[F]] : (tensor<2xf32>) -> tensor<2x1xf32>
// CHECK: %[[BELOW:.*]] = graph.compare %[[FR]], %{{.*}} {predicate = #graph.predicate<lt>}
// CHECK: %[[UP:.*]] = graph.ceil %[[FR]]
// CHECK: %[[DOWN:.*]] = graph.floor %[[FR]]
// CHECK: %[[T:.*]] = graph.select %[[BELOW]], %[[UP]], %[[DOWN]]
// CHECK: graph.compare %[[T]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<2x1xf32>, tensor<1x4xf32>) -> tensor<2x4xi64>
// CHECK: %[[LEVEL:.*]] = graph.select
// CHECK: %[[COUNTS:.*]] = graph.cast %[[LEVEL]] : (tensor<2x4xf32>) -> tensor<2x4xi64>
// CHECK: return %[[MASK]], %[[CHOSEN]], %[[COUNTS]]
