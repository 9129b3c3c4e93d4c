// Tests ONNX sequences as the dynamo exporter writes torch.split and chunk
// without its optimizer: SplitToSequence by a chunk size (the last chunk
// smaller) and into pieces of one without the axis, SequenceAt at constant
// positions (negative from the end), SequenceConstruct, ConcatFromSequence
// stacking on a new axis, and SequenceLength, which folds. A sequence is a
// list of values at import; what is never read is dead code.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import --forward-only | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 17]>
// ONNX: sequences (float[2, 7] x, float[2, 3] y) => (float[2, 3] first, float[2, 1] last, float[3, 2, 3] stacked, int64 count, float[2] column) {
// ONNX:   three = Constant <value = int64 {3}> ()
// ONNX:   chunks = SplitToSequence <axis = 1> (x, three)
// ONNX:   zero = Constant <value = int64 {0}> ()
// ONNX:   first = SequenceAt (chunks, zero)
// ONNX:   minusone = Constant <value = int64 {-1}> ()
// ONNX:   last = SequenceAt (chunks, minusone)
// ONNX:   columns = SplitToSequence <axis = 1, keepdims = 0> (y)
// ONNX:   two = Constant <value = int64 {2}> ()
// ONNX:   column = SequenceAt (columns, two)
// ONNX:   one = Constant <value = int64 {1}> ()
// ONNX:   middle = SequenceAt (chunks, one)
// ONNX:   pair = SequenceConstruct (first, y, middle)
// ONNX:   stacked = ConcatFromSequence <axis = 0, new_axis = 1> (pair)
// ONNX:   count = SequenceLength (chunks)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:arg[0-9]+]]: tensor<2x7xf32> {{.*}}, %[[Y:arg[0-9]+]]: tensor<2x3xf32> {{.*}})
// CHECK: %[[C0:.*]] = graph.slice %[[X]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x7xf32>) -> tensor<2x3xf32>
// CHECK: %[[C1:.*]] = graph.slice %[[X]] {starts = array<i64: 0, 3>, steps = array<i64: 1, 1>} : (tensor<2x7xf32>) -> tensor<2x3xf32>
// CHECK: %[[C2:.*]] = graph.slice %[[X]] {starts = array<i64: 0, 6>, steps = array<i64: 1, 1>} : (tensor<2x7xf32>) -> tensor<2x1xf32>
// CHECK: graph.slice %[[Y]] {starts = array<i64: 0, 0>, {{.*}}} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: graph.slice %[[Y]] {starts = array<i64: 0, 1>, {{.*}}} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: %[[COL:.*]] = graph.slice %[[Y]] {starts = array<i64: 0, 2>, {{.*}}} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: %[[COLUMN:.*]] = graph.reshape %[[COL]] : (tensor<2x1xf32>) -> tensor<2xf32>
// CHECK: %[[S0:.*]] = graph.reshape %[[C0]] : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
// CHECK: %[[S1:.*]] = graph.reshape %[[Y]] : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
// CHECK: %[[S2:.*]] = graph.reshape %[[C1]] : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
// CHECK: %[[STACKED:.*]] = graph.concat %[[S0]], %[[S1]], %[[S2]] {axis = 0 : i64} : {{.*}} -> tensor<3x2x3xf32>
// CHECK: %[[COUNT:.*]] = graph.constant dense<3> : tensor<i64>
// CHECK: return %[[C0]], %[[C2]], %[[STACKED]], %[[COUNT]], %[[COLUMN]]
