// Tests Gemm: transB, alpha and beta become matmul, scale and a broadcast add,
// with the node's name as the location and parameters as arguments.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import --mlir-print-debuginfo | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: gemm_model (float[4, 3] x, float[5, 3] w = {1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0}, float[5] b = {1.0,1.0,1.0,1.0,1.0}) => (float[4, 5] y) {
// ONNX:   y = Gemm <transB = 1, alpha = 2.0, beta = 0.5> (x, w, b)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: {graph.input = "x"}
// CHECK-SAME: {graph.param = "w"}
// CHECK-SAME: {graph.param = "b"}
// CHECK-SAME: {graph.output = "y"}
// CHECK: %[[MM:.*]] = graph.matmul %arg0, %arg1 {transpose_b = true} {{.*}} loc(#[[LOC:.*]])
// CHECK: %[[A:.*]] = graph.scale %[[MM]] {factor = 2.000000e+00 : f64}
// CHECK: %[[C:.*]] = graph.scale %arg2 {factor = 5.000000e-01 : f64}
// CHECK: graph.add %[[A]], %[[C]] : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHECK: #[[LOC]] = loc("Gemm_0")
