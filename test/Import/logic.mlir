// Tests comparisons and boolean ops on runtime tensors (graph.compare with
// its predicate, i64 arithmetic on the masks for And / Or / Not), a float Cast to
// bool, and PRelu as a select by x > 0.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: logic (float[2, 3] a, float[3] b, float[3, 1, 1] slope, float[2, 3, 4, 5] x) => (float[2, 3] y, float[2, 3, 4, 5] p) {
// ONNX:   gt = Greater (a, b)
// ONNX:   le = LessOrEqual (a, b)
// ONNX:   both = And (gt, le)
// ONNX:   nb = Cast <to = 9> (a)
// ONNX:   either = Or (both, nb)
// ONNX:   no = Not (either)
// ONNX:   y = Where (no, a, b)
// ONNX:   p = PRelu (x, slope)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[A:arg[0-9]+]]: tensor<2x3xf32> {{.*}}, %[[B:arg[0-9]+]]: tensor<3xf32> {{.*}}, %[[SLOPE:arg[0-9]+]]: tensor<3x1x1xf32> {{.*}}, %[[X:arg[0-9]+]]: tensor<2x3x4x5xf32> {{.*}})
// CHECK: %[[GT:.*]] = graph.compare %[[A]], %[[B]] {predicate = #graph.predicate<gt>} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi64>
// CHECK: %[[LE:.*]] = graph.compare %[[A]], %[[B]] {predicate = #graph.predicate<le>} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi64>
// And: the product of the 0/1 masks.
// CHECK: %[[BOTH:.*]] = graph.mul %[[GT]], %[[LE]] : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
// CHECK: %[[NB:.*]] = graph.compare %[[A]], %{{.*}} {predicate = #graph.predicate<ne>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xi64>
// Or: their sum unequal to 0; Not: equal to 0.
// CHECK: %[[SUM:.*]] = graph.add %[[BOTH]], %[[NB]] : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
// CHECK: %[[ZERO:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK: %[[EITHER:.*]] = graph.compare %[[SUM]], %[[ZERO]] {predicate = #graph.predicate<ne>} : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
// CHECK: %[[ZERO2:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK: %[[NO:.*]] = graph.compare %[[EITHER]], %[[ZERO2]] {predicate = #graph.predicate<eq>} : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
// CHECK: %[[Y:.*]] = graph.select %[[NO]], %[[A]], %[[B]] : (tensor<2x3xi64>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[POSITIVE:.*]] = graph.compare %[[X]], %{{.*}} {predicate = #graph.predicate<gt>} : (tensor<2x3x4x5xf32>, tensor<f32>) -> tensor<2x3x4x5xi64>
// CHECK: %[[SCALED:.*]] = graph.mul %[[SLOPE]], %[[X]] : (tensor<3x1x1xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
// CHECK: %[[P:.*]] = graph.select %[[POSITIVE]], %[[X]], %[[SCALED]]
// CHECK: return %[[Y]], %[[P]]
