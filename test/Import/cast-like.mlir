// Tests that CastLike casts to the ONNX element type of its second input,
// which fsdpc's own types do not keep (a bool and an int64 are both i64
// here): a float like a bool is x != 0, like an int64 a truncating cast,
// an int64 constant like a bool folds to 0 or 1, and a float like a double
// stays f32.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 15]>
// ONNX: like (float[2, 3] x, bool[2, 3] flag, int64[2, 3] ids, double[3] wide) => (bool[2, 3] asBool, int64[2, 3] asInt, bool[2] fiveAsBool, double[2, 3] asDouble) {
// ONNX:   asBool = CastLike (x, flag)
// ONNX:   asInt = CastLike (x, ids)
// ONNX:   five = Constant <value = int64[2] {5, 0}> ()
// ONNX:   fiveAsBool = CastLike (five, flag)
// ONNX:   asDouble = CastLike (x, wide)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:arg[0-9]+]]: tensor<2x3xf32>
// CHECK: %[[ZERO:.*]] = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[BOOL:.*]] = graph.compare %[[X]], %[[ZERO]] {predicate = #graph.predicate<ne>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xi64>
// CHECK: %[[INT:.*]] = graph.cast %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xi64>
// CHECK: %[[FIVE:.*]] = graph.constant dense<[1, 0]> : tensor<2xi64>
// CHECK: return %[[BOOL]], %[[INT]], %[[FIVE]], %[[X]]
