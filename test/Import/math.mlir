// Tests the trigonometric, rounding and remainder ops: Sin, Cos, Atan and
// the rounding ops as graph ops, Asin and Mod composed from them, and their
// folds on constants (a rotary table's cos, a floor, an integer Mod with
// the divisor's sign).
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: math (float[2, 3] a, float[3] b) => (float[2, 3] s, float[2, 3] t, float[2, 3] m, float[2] folded, int64[3] imod) {
// ONNX:   angles = Constant <value = float[2] {0.0, 3.14159274}> ()
// ONNX:   cosines = Cos (angles)
// ONNX:   halves = Constant <value = float[2] {-1.5, 2.5}> ()
// ONNX:   rounded = Round (halves)
// ONNX:   folded = Add (cosines, rounded)
// ONNX:   sa = Sin (a)
// ONNX:   fl = Floor (sa)
// ONNX:   s = Add (sa, fl)
// ONNX:   t = Asin (a)
// ONNX:   m = Mod <fmod = 1> (a, b)
// ONNX:   dividend = Constant <value = int64[3] {-7, 7, 7}> ()
// ONNX:   divisor = Constant <value = int64[3] {3, -3, 3}> ()
// ONNX:   imod = Mod (dividend, divisor)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[A:arg[0-9]+]]: tensor<2x3xf32> {{.*}}, %[[B:arg[0-9]+]]: tensor<3xf32> {{.*}})
// cos(0) + round(-1.5), cos(pi) + round(2.5): halves go to the even neighbour.
// CHECK: %[[FOLDED:.*]] = graph.constant dense<[-1.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK: %[[SA:.*]] = graph.sin %[[A]] : tensor<2x3xf32>
// CHECK: %[[FL:.*]] = graph.floor %[[SA]] : tensor<2x3xf32>
// CHECK: %[[S:.*]] = graph.add %[[SA]], %[[FL]]
// asin x = atan(x / sqrt((1 - x)(1 + x))).
// CHECK: %[[BELOW:.*]] = graph.sub %{{.*}}, %[[A]] : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[ABOVE:.*]] = graph.add %{{.*}}, %[[A]] : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[PRODUCT:.*]] = graph.mul %[[BELOW]], %[[ABOVE]]
// CHECK: %[[ROOT:.*]] = graph.sqrt %[[PRODUCT]]
// CHECK: %[[RATIO:.*]] = graph.div %[[A]], %[[ROOT]]
// CHECK: %[[T:.*]] = graph.atan %[[RATIO]] : tensor<2x3xf32>
// fmod: a - trunc(a / b) b, trunc as x < 0 ? ceil : floor.
// CHECK: %[[Q:.*]] = graph.div %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[NEG:.*]] = graph.compare %[[Q]], %{{.*}} {predicate = #graph.predicate<lt>}
// CHECK: %[[UP:.*]] = graph.ceil %[[Q]]
// CHECK: %[[DOWN:.*]] = graph.floor %[[Q]]
// CHECK: %[[TRUNC:.*]] = graph.select %[[NEG]], %[[UP]], %[[DOWN]]
// CHECK: %[[TB:.*]] = graph.mul %[[TRUNC]], %[[B]]
// CHECK: %[[M:.*]] = graph.sub %[[A]], %[[TB]]
// Python's %: the divisor's sign.
// CHECK: %[[IMOD:.*]] = graph.constant dense<[2, -2, 1]> : tensor<3xi64>
// CHECK: return %[[S]], %[[T]], %[[M]], %[[FOLDED]], %[[IMOD]]
