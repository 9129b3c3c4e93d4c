// Tests the losses and indexing ops built on graph.one_hot: a
// NegativeLogLikelihoodLoss with class weights and ignore_index (the mask
// moved to [N, C, d], the weights folded into it as a buffer, the weighted
// mean dividing by the mask's sum), SoftmaxCrossEntropyLoss with reduction
// none (log_softmax, then the same mask), ArgMax/ArgMin, and GatherElements
// on runtime data (data cut to the indices' extent, the axis moved last,
// one-hot rows along it). A label outside the classes fails the run.
// RUN: onnx-from-text %s --extract '// NLL-ONNX: ' -o %t.nll.onnx
// RUN: fsdpc %t.nll.onnx --emit=import | FileCheck %s --check-prefix=NLL
// RUN: onnx-from-text %s --extract '// NONE-ONNX: ' -o %t.none.onnx
// RUN: fsdpc %t.none.onnx --emit=import | FileCheck %s --check-prefix=NONE
// RUN: onnx-from-text %s --extract '// ARG-ONNX: ' -o %t.arg.onnx
// RUN: fsdpc %t.arg.onnx --emit=import | FileCheck %s --check-prefix=ARG
// RUN: onnx-from-text %s --extract '// GATHER-ONNX: ' -o %t.gather.onnx
// RUN: fsdpc %t.gather.onnx --emit=import | FileCheck %s --check-prefix=GATHER
// RUN: fsdpc %t.nll.onnx --forward-only -o %t.nll.bin
// RUN: rm -rf %t.in && mkdir -p %t.in
// RUN: %python -c "import numpy as np; np.save('%t.in/logp.npy', np.zeros((4, 3, 2), np.float32)); np.save('%t.in/t.npy', np.array([[0, 1], [2, 3], [0, 0], [1, 1]], np.int64))"
// RUN: not fsdp-run %t.nll.bin --forward --inputs %t.in --outputs %t.out 2>&1 | FileCheck %s --check-prefix=RANGE

// NLL-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// NLL-ONNX: nll (float[4, 3, 2] logp, int64[4, 2] t, float[3] w = {0.5, 1.0, 2.0}) => (float loss) {
// NLL-ONNX:   loss = NegativeLogLikelihoodLoss <ignore_index = 1> (logp, t, w)
// NLL-ONNX: }

// NLL-LABEL: func.func @forward
// NLL-SAME: %arg0: tensor<4x3x2xf32> {graph.input = "logp"}, %arg1: tensor<4x2xi64> {graph.input = "t"}, %arg2: tensor<3xf32> {graph.buffer = "w"}
// NLL: %[[OH:.*]] = graph.one_hot %arg1 {ignore_index = 1 : i64} : (tensor<4x2xi64>) -> tensor<4x2x3xf32>
// NLL: %[[T:.*]] = graph.transpose %[[OH]] {perm = array<i64: 0, 2, 1>} : (tensor<4x2x3xf32>) -> tensor<4x3x2xf32>
// NLL: %[[W:.*]] = graph.reshape %arg2 : (tensor<3xf32>) -> tensor<1x3x1xf32>
// NLL: %[[MASK:.*]] = graph.mul %[[T]], %[[W]]
// NLL: %[[PICK:.*]] = graph.mul %arg0, %[[MASK]]
// NLL: %[[ROWS:.*]] = graph.reduce_sum %[[PICK]] {axes = array<i64: 1>, keepdims = false} : (tensor<4x3x2xf32>) -> tensor<4x2xf32>
// NLL: %[[LOSSES:.*]] = graph.neg %[[ROWS]]
// NLL: %[[TOTAL:.*]] = graph.reduce_sum %[[LOSSES]] {axes = array<i64: 0, 1>, keepdims = false}
// NLL: %[[COUNT:.*]] = graph.reduce_sum %[[MASK]] {axes = array<i64: 0, 1, 2>, keepdims = false}
// NLL: %[[MEAN:.*]] = graph.div %[[TOTAL]], %[[COUNT]]
// NLL: return %[[MEAN]]

// RANGE: fsdp-run: error: one_hot: label 3 at position 3 is outside [0, 3)

// NONE-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// NONE-ONNX: sce (float[6, 5] x, int64[6] t) => (float[6] loss) {
// NONE-ONNX:   loss = SoftmaxCrossEntropyLoss <reduction = "none"> (x, t)
// NONE-ONNX: }

// NONE-LABEL: func.func @forward
// NONE: %[[LOGP:.*]] = graph.log_softmax %arg0 {axis = 1 : i64} : tensor<6x5xf32>
// NONE: %[[OH:.*]] = graph.one_hot %arg1 : (tensor<6xi64>) -> tensor<6x5xf32>
// NONE: %[[PICK:.*]] = graph.mul %[[LOGP]], %[[OH]]
// NONE: %[[ROWS:.*]] = graph.reduce_sum %[[PICK]] {axes = array<i64: 1>, keepdims = false} : (tensor<6x5xf32>) -> tensor<6xf32>
// NONE: %[[LOSS:.*]] = graph.neg %[[ROWS]]
// NONE: return %[[LOSS]]

// ARG-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ARG-ONNX: arg (float[3, 7, 5] x) => (int64[3, 5] i, int64[3, 1, 5] j) {
// ARG-ONNX:   i = ArgMax <axis = -2, keepdims = 0> (x)
// ARG-ONNX:   j = ArgMin <axis = 1, select_last_index = 1> (x)
// ARG-ONNX: }

// ARG-LABEL: func.func @forward
// ARG: %[[MAX:.*]] = graph.arg_max %arg0 {axis = 1 : i64} : (tensor<3x7x5xf32>) -> tensor<3x1x5xi64>
// ARG: %[[I:.*]] = graph.reshape %[[MAX]] : (tensor<3x1x5xi64>) -> tensor<3x5xi64>
// ARG: %[[J:.*]] = graph.arg_min %arg0 {axis = 1 : i64, select_last_index = true} : (tensor<3x7x5xf32>) -> tensor<3x1x5xi64>
// ARG: return %[[I]], %[[J]]

// GATHER-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// GATHER-ONNX: ge (float[4, 7, 5] x, int64[3, 2, 5] i) => (float[3, 2, 5] y) {
// GATHER-ONNX:   y = GatherElements <axis = 1> (x, i)
// GATHER-ONNX: }

// GATHER-LABEL: func.func @forward
// A negative index counts from the end: plus 7 where it is below 0.
// GATHER: %[[NEG:.*]] = graph.compare %arg1, %{{.*}} {predicate = #graph.predicate<lt>} : (tensor<3x2x5xi64>, tensor<i64>) -> tensor<3x2x5xi64>
// GATHER: %[[SIZE:.*]] = graph.constant dense<7> : tensor<i64>
// GATHER: %[[SHIFT:.*]] = graph.mul %[[NEG]], %[[SIZE]]
// GATHER: %[[INDEX:.*]] = graph.add %arg1, %[[SHIFT]] : (tensor<3x2x5xi64>, tensor<3x2x5xi64>) -> tensor<3x2x5xi64>
// GATHER: %[[CUT:.*]] = graph.slice %arg0 {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<4x7x5xf32>) -> tensor<3x7x5xf32>
// GATHER: %[[LAST:.*]] = graph.transpose %[[CUT]] {perm = array<i64: 0, 2, 1>} : (tensor<3x7x5xf32>) -> tensor<3x5x7xf32>
// GATHER: %[[ROWS:.*]] = graph.reshape %[[LAST]] : (tensor<3x5x7xf32>) -> tensor<3x1x5x7xf32>
// GATHER: %[[OH:.*]] = graph.one_hot %[[INDEX]] : (tensor<3x2x5xi64>) -> tensor<3x2x5x7xf32>
// GATHER: %[[PICK:.*]] = graph.mul %[[ROWS]], %[[OH]] : (tensor<3x1x5x7xf32>, tensor<3x2x5x7xf32>) -> tensor<3x2x5x7xf32>
// GATHER: %[[Y:.*]] = graph.reduce_sum %[[PICK]] {axes = array<i64: 3>, keepdims = false} : (tensor<3x2x5x7xf32>) -> tensor<3x2x5xf32>
// GATHER: return %[[Y]]
