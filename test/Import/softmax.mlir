// Tests that Softmax follows its opset: one axis from opset 13, the 2-D
// coercion before, and SoftmaxCrossEntropyLoss with ignore_index.
// RUN: onnx-from-text %s --extract '// ONNX13: ' -o %t13.onnx
// RUN: fsdpc %t13.onnx --emit=import | FileCheck %s --check-prefix=OPSET13
// RUN: onnx-from-text %s --extract '// ONNX11: ' -o %t11.onnx
// RUN: fsdpc %t11.onnx --emit=import | FileCheck %s --check-prefix=OPSET11

// ONNX13: <ir_version: 8, opset_import: ["" : 13]>
// ONNX13: sm (float[2, 3, 4] x, int64[2, 4] labels) => (float[2, 3, 4] y, float[] loss) {
// ONNX13:   y = Softmax <axis = 1> (x)
// ONNX13:   l = LogSoftmax (x)
// ONNX13:   loss = SoftmaxCrossEntropyLoss <ignore_index = -1> (l, labels)
// ONNX13: }
// OPSET13-LABEL: func.func @forward
// OPSET13: graph.softmax %arg0 {axis = 1 : i64} : tensor<2x3x4xf32>
// OPSET13: graph.log_softmax %arg0 {axis = 2 : i64}
// OPSET13: graph.transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
// OPSET13: graph.softmax_cross_entropy {{.*}} {ignore_index = -1 : i64} : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>

// ONNX11: <ir_version: 7, opset_import: ["" : 11]>
// ONNX11: sm (float[2, 3, 4] x) => (float[2, 3, 4] y) {
// ONNX11:   y = Softmax (x)
// ONNX11: }
// OPSET11-LABEL: func.func @forward
// OPSET11: graph.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
// OPSET11: graph.softmax %{{.*}} {axis = 1 : i64} : tensor<2x12xf32>
// OPSET11: graph.reshape %{{.*}} : (tensor<2x12xf32>) -> tensor<2x3x4xf32>
