// Tests BatchNormalization: in training mode, each channel is normalised by
// a layer_norm over [C, N * positions] (its mean and inverse standard
// deviation are the batch statistics), the running statistics are
// graph.buffer arguments, and the forward pass returns their updates marked
// graph.updates: the running variance blends in the unbiased batch
// variance, as torch does (momentum 0.75, 40 values per channel: factor
// 0.25 * 40 / 39). In inference mode the running statistics are read. A
// training step on 2 ranks keeps both buffers whole and copies the updates
// into them at the end.
// RUN: onnx-from-text %s --extract '// TRAIN-ONNX: ' -o %t.train.onnx
// RUN: fsdpc %t.train.onnx --emit=import | FileCheck %s --check-prefix=TRAIN
// RUN: fsdpc %t.train.onnx --emit=plan --loss mse --world-size 2 --wrap size:1 | FileCheck %s --check-prefix=PLAN
// RUN: onnx-from-text %s --extract '// EVAL-ONNX: ' -o %t.eval.onnx
// RUN: fsdpc %t.eval.onnx --emit=import | FileCheck %s --check-prefix=EVAL

// TRAIN-ONNX: <ir_version: 8, opset_import: ["" : 15]>
// TRAIN-ONNX: bn (float[4, 3, 2, 5] x, float[3] s = {1.0, 2.0, 3.0}, float[3] b = {0.5, 0.25, 0.125}, float[3] m = {0.0, 0.0, 0.0}, float[3] v = {1.0, 1.0, 1.0}) => (float[4, 3, 2, 5] y) {
// TRAIN-ONNX:   y, m_out, v_out = BatchNormalization <epsilon = 0.001, momentum = 0.75, training_mode = 1> (x, s, b, m, v)
// TRAIN-ONNX: }

// TRAIN-LABEL: func.func @forward
// TRAIN-SAME: %arg1: tensor<3xf32> {graph.param = "s"}, %arg2: tensor<3xf32> {graph.param = "b"}
// TRAIN-SAME: %arg3: tensor<3xf32> {graph.buffer = "m"}, %arg4: tensor<3xf32> {graph.buffer = "v"}
// TRAIN-SAME: -> (tensor<4x3x2x5xf32> {graph.output = "y"}, tensor<3xf32> {graph.updates = 3 : i64}, tensor<3xf32> {graph.updates = 4 : i64})
// TRAIN: %[[T:.*]] = graph.transpose %{{.*}} {perm = array<i64: 1, 0, 2>} : (tensor<4x3x10xf32>) -> tensor<3x4x10xf32>
// TRAIN: %[[C:.*]] = graph.reshape %[[T]] : (tensor<3x4x10xf32>) -> tensor<3x40xf32>
// TRAIN: %[[N:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = graph.layer_norm %[[C]], %{{.*}}, %{{.*}} {axis = 1 : i64, epsilon = 0.0010000000474974513 : f64}
// TRAIN: %[[M:.*]] = graph.reshape %[[MEAN]] : (tensor<3x1xf32>) -> tensor<3xf32>
// TRAIN: %[[R:.*]] = graph.reshape %[[RSTD]] : (tensor<3x1xf32>) -> tensor<3xf32>
// TRAIN: %[[SQ:.*]] = graph.mul %[[R]], %[[R]]
// TRAIN: %[[INV:.*]] = graph.reciprocal %[[SQ]]
// TRAIN: %[[VAR:.*]] = graph.sub %[[INV]], %{{.*}}
// TRAIN: %[[MR:.*]] = graph.scale %arg3 {factor = 7.500000e-01 : f64}
// TRAIN: %[[MB:.*]] = graph.scale %[[M]] {factor = 2.500000e-01 : f64}
// TRAIN: %[[NEWM:.*]] = graph.add %[[MR]], %[[MB]]
// The ONNX output's blend (biased variance), then the buffer's (unbiased).
// TRAIN: graph.scale %[[VAR]] {factor = 2.500000e-01 : f64}
// TRAIN: %[[VR:.*]] = graph.scale %arg4 {factor = 7.500000e-01 : f64}
// TRAIN-NEXT: %[[VB:.*]] = graph.scale %[[VAR]] {factor = 0.25641025641025639 : f64}
// TRAIN-NEXT: %[[NEWV:.*]] = graph.add %[[VR]], %[[VB]]
// TRAIN: return %{{.*}}, %[[NEWM]], %[[NEWV]]

// PLAN-LABEL: plan.program
// PLAN-DAG: plan.tensor @m buffer : tensor<3xf32> {{.*}}source_name = "m"
// PLAN-DAG: plan.tensor @v buffer : tensor<3xf32> {{.*}}source_name = "v"
// PLAN: plan.kernel "scale" ins [@m] outs [@[[MR:.*]]] on compute {factor = 7.500000e-01 : f64}
// PLAN: plan.kernel "add" ins [@[[MR]], @{{.*}}] outs [@[[NEWM:.*]]] on compute
// PLAN: plan.kernel "scale" ins [@v] outs [@[[VR:.*]]] on compute {factor = 7.500000e-01 : f64}
// PLAN: plan.kernel "add" ins [@[[VR]], @{{.*}}] outs [@[[NEWV:.*]]] on compute
// PLAN: plan.kernel "copy" ins [@[[NEWM]]] outs [@m] on compute
// PLAN: plan.kernel "copy" ins [@[[NEWV]]] outs [@v] on compute

// EVAL-ONNX: <ir_version: 8, opset_import: ["" : 15]>
// EVAL-ONNX: bn (float[4, 3] x, float[3] s = {1.0, 2.0, 3.0}, float[3] b = {0.5, 0.25, 0.125}, float[3] m = {0.0, 0.5, 1.0}, float[3] v = {1.0, 2.0, 3.0}) => (float[4, 3] y) {
// EVAL-ONNX:   y = BatchNormalization <epsilon = 0.001> (x, s, b, m, v)
// EVAL-ONNX: }

// EVAL-LABEL: func.func @forward
// EVAL-SAME: {graph.buffer = "m"}, %arg4: tensor<3xf32> {graph.buffer = "v"}) -> (tensor<4x3xf32> {graph.output = "y"})
// EVAL: %[[SHIFTED:.*]] = graph.add %arg4, %{{.*}}
// EVAL: %[[STD:.*]] = graph.sqrt %[[SHIFTED]]
// EVAL: %[[INV:.*]] = graph.reciprocal %[[STD]]
// EVAL: %[[A:.*]] = graph.mul %arg1, %[[INV]]
// EVAL: %[[MA:.*]] = graph.mul %arg3, %[[A]]
// EVAL: %[[B:.*]] = graph.sub %arg2, %[[MA]]
// EVAL: return
