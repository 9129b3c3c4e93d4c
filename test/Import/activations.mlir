// Tests MatMul, the activations, Identity, Flatten and a constant Reshape.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: act (float[2, 3, 4] x, float[12, 6] w = {1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0,1.0,0.0,0.0,0.0,0.0,0.0}, int64[2] shape = {3, -1}) => (float[3, 4] y) {
// ONNX:   f = Flatten <axis = 1> (x)
// ONNX:   h = MatMul (f, w)
// ONNX:   r = Relu (h)
// ONNX:   t = Tanh (r)
// ONNX:   s = Sigmoid (t)
// ONNX:   i = Identity (s)
// ONNX:   y = Reshape (i, shape)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK: graph.constant dense<[3, -1]> : tensor<2xi64>
// CHECK: graph.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
// CHECK: graph.matmul {{.*}} : (tensor<2x12xf32>, tensor<12x6xf32>) -> tensor<2x6xf32>
// CHECK: graph.relu
// CHECK: graph.tanh
// CHECK: %[[S:.*]] = graph.sigmoid
// CHECK: %[[Y:.*]] = graph.reshape %[[S]] : (tensor<2x6xf32>) -> tensor<3x4xf32>
// CHECK: return %[[Y]]
