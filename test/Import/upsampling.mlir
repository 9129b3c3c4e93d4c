// Tests the two upsampling layers of decoders. ConvTranspose: x times the
// weight gives each input position's patch [N, M, P, K], and gather_grad
// scatters the patches into the output over the Conv patch indices (here
// group 2, stride 2, one end pad: 20 output slots, index 20 is the padding
// slot that is sliced off). Resize: per resized axis a weighted sum of
// gathers with constant indices and weights (linear, half_pixel: x = -0.25,
// 0.25, 0.75, 1.25, neighbours past the edge read the edge).
// RUN: onnx-from-text %s --extract '// CT-ONNX: ' -o %t.ct.onnx
// RUN: fsdpc %t.ct.onnx --emit=import | FileCheck %s --check-prefix=CT
// RUN: onnx-from-text %s --extract '// RS-ONNX: ' -o %t.rs.onnx
// RUN: fsdpc %t.rs.onnx --emit=import | FileCheck %s --check-prefix=RS

// CT-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// CT-ONNX: ct (float[1, 2, 2, 3] x, float[2, 1, 2, 2] w = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}, float[2] b = {0.5, -0.5}) => (float[1, 2, 4, 5] y) {
// CT-ONNX:   y = ConvTranspose <group = 2, strides = [2, 2], pads = [0, 0, 0, 1]> (x, w, b)
// CT-ONNX: }

// CT-LABEL: func.func @forward
// CT: %[[X:.*]] = graph.reshape %arg0 : (tensor<1x2x2x3xf32>) -> tensor<1x2x1x6xf32>
// CT: %[[XT:.*]] = graph.transpose %[[X]] {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x1x6xf32>) -> tensor<1x2x6x1xf32>
// CT: %[[W:.*]] = graph.reshape %arg1 : (tensor<2x1x2x2xf32>) -> tensor<2x1x4xf32>
// CT: %[[P:.*]] = graph.batch_matmul %[[XT]], %[[W]] : (tensor<1x2x6x1xf32>, tensor<2x1x4xf32>) -> tensor<1x2x6x4xf32>
// CT: %[[IDX:.*]] = graph.constant dense<[0, 1, 5, 6, 2, 3, 7, 8, 4, 20, 9, 20, 10, 11, 15, 16, 12, 13, 17, 18, 14, 20, 19, 20]> : tensor<24xi64>
// CT: %[[S:.*]] = graph.gather_grad %{{.*}}, %[[IDX]] {axis = 2 : i64} : (tensor<1x2x24xf32>, tensor<24xi64>) -> tensor<1x2x21xf32>
// CT: %[[CUT:.*]] = graph.slice %[[S]] {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<1x2x21xf32>) -> tensor<1x2x20xf32>
// CT: %[[Y:.*]] = graph.reshape %[[CUT]] : (tensor<1x2x20xf32>) -> tensor<1x2x4x5xf32>
// CT: %[[B:.*]] = graph.reshape %arg2 : (tensor<2xf32>) -> tensor<2x1x1xf32>
// CT: graph.add %[[Y]], %[[B]]

// RS-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// RS-ONNX: rs (float[1, 1, 2, 3] x) => (float[1, 1, 4, 3] y) {
// RS-ONNX:   scales = Constant <value = float[4] {1.0, 1.0, 2.0, 1.0}> ()
// RS-ONNX:   y = Resize <mode = "linear"> (x, , scales)
// RS-ONNX: }

// RS-LABEL: func.func @forward
// RS: %[[I0:.*]] = graph.constant dense<[0, 0, 0, 1]> : tensor<4xi64>
// RS: %[[G0:.*]] = graph.gather %arg0, %[[I0]] {axis = 2 : i64} : (tensor<1x1x2x3xf32>, tensor<4xi64>) -> tensor<1x1x4x3xf32>
// RS: %[[W0:.*]] = graph.constant dense<{{\[\[\[\[}}2.500000e-01], [7.500000e-01], [2.500000e-01], [7.500000e-01]]]]> : tensor<1x1x4x1xf32>
// RS: %[[T0:.*]] = graph.mul %[[G0]], %[[W0]]
// RS: %[[I1:.*]] = graph.constant dense<[0, 1, 1, 1]> : tensor<4xi64>
// RS: %[[G1:.*]] = graph.gather %arg0, %[[I1]] {axis = 2 : i64}
// RS: %[[W1:.*]] = graph.constant dense<{{\[\[\[\[}}7.500000e-01], [2.500000e-01], [7.500000e-01], [2.500000e-01]]]]> : tensor<1x1x4x1xf32>
// RS: %[[T1:.*]] = graph.mul %[[G1]], %[[W1]]
// RS: %[[Y:.*]] = graph.add %[[T0]], %[[T1]]
// RS: return %[[Y]]

// Resize at opset 18 (its schema is registered in NewerOnnxSchemas.cpp):
// scales name only the axes listed, and the others keep their size.
// RUN: onnx-from-text %s --extract '// RS18-ONNX: ' -o %t.rs18.onnx
// RUN: fsdpc %t.rs18.onnx --emit=import | FileCheck %s --check-prefix=RS18

// RS18-ONNX: <ir_version: 8, opset_import: ["" : 18]>
// RS18-ONNX: rs (float[2, 3, 4, 5] x) => (float[2, 3, 8, 5] y) {
// RS18-ONNX:   scales = Constant <value = float[1] {2.0}> ()
// RS18-ONNX:   y = Resize <mode = "nearest", axes = [2], keep_aspect_ratio_policy = "stretch", antialias = 0, coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , scales)
// RS18-ONNX: }

// RS18-LABEL: func.func @forward
// RS18: %[[I:.*]] = graph.constant dense<[0, 0, 1, 1, 2, 2, 3, 3]> : tensor<8xi64>
// RS18: %[[Y:.*]] = graph.gather %arg0, %[[I]] {axis = 2 : i64} : (tensor<2x3x4x5xf32>, tensor<8xi64>) -> tensor<2x3x8x5xf32>
// RS18: return %[[Y]]
