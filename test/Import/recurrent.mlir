// Tests LSTM unrolled over its 2 steps: one input projection of both steps
// (W's and R's biases added once), the first step without a recurrent
// product (the default zero state) or forget term, the second with the
// first's hidden state through R, gates in ONNX's i o f c order, Y the
// steps' hidden states concatenated.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s
// RUN: sed -e 's/hidden_size = 5/hidden_size = 5, clip = 3.0/' %s > %t.clip.mlir
// RUN: onnx-from-text %t.clip.mlir --extract '// ONNX: ' -o %t.clip.onnx
// RUN: not fsdpc %t.clip.onnx -o %t.plan 2>&1 | FileCheck %s --check-prefix=CLIP
// CLIP: fsdpc: error: {{.*}}clip.onnx: node 'LSTM_0' (LSTM): clip is not supported

// ONNX: <ir_version: 8, opset_import: ["" : 14]>
// ONNX: recurrent (float[2, 3, 4] x, float[1, 20, 4] w, float[1, 20, 5] r, float[1, 40] b) => (float[2, 1, 3, 5] y, float[1, 3, 5] yh, float[1, 3, 5] yc) {
// ONNX:   y, yh, yc = LSTM <hidden_size = 5> (x, w, r, b)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:arg[0-9]+]]: tensor<2x3x4xf32> {{.*}}, %[[W:arg[0-9]+]]: tensor<1x20x4xf32> {{.*}}, %[[R:arg[0-9]+]]: tensor<1x20x5xf32> {{.*}}, %[[B:arg[0-9]+]]: tensor<1x40xf32>
// CHECK: %[[W2:.*]] = graph.reshape %[[W]] : (tensor<1x20x4xf32>) -> tensor<20x4xf32>
// CHECK: %[[R2:.*]] = graph.reshape %[[R]] : (tensor<1x20x5xf32>) -> tensor<20x5xf32>
// CHECK: %[[B1:.*]] = graph.reshape %[[B]] : (tensor<1x40xf32>) -> tensor<40xf32>
// CHECK: %[[XF:.*]] = graph.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[PROJ:.*]] = graph.matmul %[[XF]], %[[W2]] {transpose_b = true} : (tensor<6x4xf32>, tensor<20x4xf32>) -> tensor<6x20xf32>
// CHECK: %[[WB:.*]] = graph.slice %[[B1]] {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<40xf32>) -> tensor<20xf32>
// CHECK: %[[RB:.*]] = graph.slice %[[B1]] {starts = array<i64: 20>, steps = array<i64: 1>} : (tensor<40xf32>) -> tensor<20xf32>
// CHECK: %[[BIAS:.*]] = graph.add %[[WB]], %[[RB]]
// CHECK: %[[GATES:.*]] = graph.add %[[PROJ]], %[[BIAS]]
// CHECK: %[[STEPS:.*]] = graph.reshape %[[GATES]] : (tensor<6x20xf32>) -> tensor<2x3x20xf32>
// Step 0: i o f c from the projection alone; C = i * c~.
// CHECK: %[[S0:.*]] = graph.slice %[[STEPS]] {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x20xf32>) -> tensor<1x3x20xf32>
// CHECK: %[[G0:.*]] = graph.reshape %[[S0]] : (tensor<1x3x20xf32>) -> tensor<3x20xf32>
// CHECK: %[[I0:.*]] = graph.slice %[[G0]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<3x20xf32>) -> tensor<3x5xf32>
// CHECK: %[[O0:.*]] = graph.slice %[[G0]] {starts = array<i64: 0, 5>, steps = array<i64: 1, 1>}
// CHECK: %[[C0PRE:.*]] = graph.slice %[[G0]] {starts = array<i64: 0, 15>, steps = array<i64: 1, 1>}
// CHECK: %[[CAND0:.*]] = graph.tanh %[[C0PRE]]
// CHECK: %[[IG0:.*]] = graph.sigmoid %[[I0]]
// CHECK: %[[CELL0:.*]] = graph.mul %[[IG0]], %[[CAND0]]
// CHECK: %[[OG0:.*]] = graph.sigmoid %[[O0]]
// CHECK: %[[TC0:.*]] = graph.tanh %[[CELL0]]
// CHECK: %[[H0:.*]] = graph.mul %[[OG0]], %[[TC0]]
// CHECK: %[[Y0:.*]] = graph.reshape %[[H0]] : (tensor<3x5xf32>) -> tensor<1x3x5xf32>
// Step 1: the recurrent product of step 0's H, and the forget term.
// CHECK: %[[S1:.*]] = graph.slice %[[STEPS]] {starts = array<i64: 1, 0, 0>, steps = array<i64: 1, 1, 1>}
// CHECK: %[[G1IN:.*]] = graph.reshape %[[S1]]
// CHECK: %[[REC:.*]] = graph.matmul %[[H0]], %[[R2]] {transpose_b = true} : (tensor<3x5xf32>, tensor<20x5xf32>) -> tensor<3x20xf32>
// CHECK: %[[G1:.*]] = graph.add %[[G1IN]], %[[REC]]
// CHECK: %[[F1PRE:.*]] = graph.slice %[[G1]] {starts = array<i64: 0, 10>, steps = array<i64: 1, 1>}
// CHECK: %[[FG1:.*]] = graph.sigmoid %[[F1PRE]]
// CHECK: %[[KEPT:.*]] = graph.mul %[[FG1]], %[[CELL0]]
// CHECK: %[[CELL1:.*]] = graph.add %[[KEPT]], %{{.*}}
// CHECK: %[[H1:.*]] = graph.mul %{{.*}}, %{{.*}}
// CHECK: %[[Y1:.*]] = graph.reshape %[[H1]] : (tensor<3x5xf32>) -> tensor<1x3x5xf32>
// CHECK: %[[YS:.*]] = graph.concat %[[Y0]], %[[Y1]] {axis = 0 : i64} : (tensor<1x3x5xf32>, tensor<1x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[Y:.*]] = graph.reshape %[[YS]] : (tensor<2x3x5xf32>) -> tensor<2x1x3x5xf32>
// CHECK: %[[YH:.*]] = graph.reshape %[[H1]] : (tensor<3x5xf32>) -> tensor<1x3x5xf32>
// CHECK: %[[YC:.*]] = graph.reshape %[[CELL1]] : (tensor<3x5xf32>) -> tensor<1x3x5xf32>
// CHECK: return %[[Y]], %[[YH]], %[[YC]]
