// Tests integer tensors computed at run time beyond arithmetic: RoBERTa's
// position ids (a cumulative sum of the tokens that are not padding, as a
// scan of shifted adds in i64), CumSum exclusive and reversed, a Transpose
// of i64 tensors, a Transpose of a constant (folded), and GatherElements
// from a constant whose elements are all equal (RoBERTa's token type ids:
// a buffer of zeros gathered at the runtime position ids); Pad of i64
// tensors (ids padded with a pad id, or with their edge).
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: scan (int64[2, 5] ids) => (int64[2, 5] positions, int64[2, 5] before, int64[5, 2] flipped, int64[3, 2] folded, int64[2, 5] types, int64[2, 7] padded, int64[2, 6] edged) {
// ONNX:   pad = Constant <value = int64 {1}> ()
// ONNX:   padding = Equal (ids, pad)
// ONNX:   kept = Not (padding)
// ONNX:   mask = Cast <to = 7> (kept)
// ONNX:   axis = Constant <value = int64 {1}> ()
// ONNX:   counts = CumSum (mask, axis)
// ONNX:   counted = Mul (counts, mask)
// ONNX:   positions = Add (counted, pad)
// ONNX:   before = CumSum <exclusive = 1, reverse = 1> (mask, axis)
// ONNX:   flipped = Transpose <perm = [1, 0]> (ids)
// ONNX:   table = Constant <value = int64[2, 3] {1, 2, 3, 4, 5, 6}> ()
// ONNX:   folded = Transpose <perm = [1, 0]> (table)
// ONNX:   zeros = Constant <value = int64[2, 8] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}> ()
// ONNX:   types = GatherElements <axis = 1> (zeros, positions)
// ONNX:   pads = Constant <value = int64[4] {0, 0, 0, 2}> ()
// ONNX:   padid = Constant <value = int64 {7}> ()
// ONNX:   padded = Pad (ids, pads, padid)
// ONNX:   edges = Constant <value = int64[4] {0, 1, 0, 0}> ()
// ONNX:   edged = Pad <mode = "edge"> (ids, edges)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:arg[0-9]+]]: tensor<2x5xi64>
// CHECK: %[[PADDING:.*]] = graph.compare %[[IDS]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<2x5xi64>, tensor<i64>) -> tensor<2x5xi64>
// CHECK: %[[KEPT:.*]] = graph.compare %[[PADDING]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<2x5xi64>, tensor<i64>) -> tensor<2x5xi64>
// Inclusive scan over 5 places: shifts by 1, 2 and 4, zeros shifted in.
// CHECK: %[[HEAD1:.*]] = graph.slice %[[KEPT]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x5xi64>) -> tensor<2x4xi64>
// CHECK: %[[ZERO1:.*]] = graph.constant dense<0> : tensor<2x1xi64>
// CHECK: %[[SHIFT1:.*]] = graph.concat %[[ZERO1]], %[[HEAD1]] {axis = 1 : i64} : (tensor<2x1xi64>, tensor<2x4xi64>) -> tensor<2x5xi64>
// CHECK: %[[SUM1:.*]] = graph.add %[[KEPT]], %[[SHIFT1]] : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
// CHECK: %[[HEAD2:.*]] = graph.slice %[[SUM1]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x5xi64>) -> tensor<2x3xi64>
// CHECK: %[[SHIFT2:.*]] = graph.concat %{{.*}}, %[[HEAD2]] {axis = 1 : i64} : (tensor<2x2xi64>, tensor<2x3xi64>) -> tensor<2x5xi64>
// CHECK: %[[SUM2:.*]] = graph.add %[[SUM1]], %[[SHIFT2]]
// CHECK: %[[HEAD4:.*]] = graph.slice %[[SUM2]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x5xi64>) -> tensor<2x1xi64>
// CHECK: %[[SHIFT4:.*]] = graph.concat %{{.*}}, %[[HEAD4]] {axis = 1 : i64} : (tensor<2x4xi64>, tensor<2x1xi64>) -> tensor<2x5xi64>
// CHECK: %[[COUNTS:.*]] = graph.add %[[SUM2]], %[[SHIFT4]]
// CHECK: %[[COUNTED:.*]] = graph.mul %[[COUNTS]], %[[KEPT]]
// CHECK: %[[POSITIONS:.*]] = graph.add %[[COUNTED]], %{{.*}} : (tensor<2x5xi64>, tensor<i64>) -> tensor<2x5xi64>
// Exclusive and reversed: first shifted one place toward the start, then
// the same scan toward the start.
// CHECK: %[[TAIL:.*]] = graph.slice %[[KEPT]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x5xi64>) -> tensor<2x4xi64>
// CHECK: %[[EXCLUDED:.*]] = graph.concat %[[TAIL]], %{{.*}} {axis = 1 : i64} : (tensor<2x4xi64>, tensor<2x1xi64>) -> tensor<2x5xi64>
// CHECK: graph.slice %[[EXCLUDED]] {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x5xi64>) -> tensor<2x4xi64>
// CHECK: %[[FLIPPED:.*]] = graph.transpose %[[IDS]] {perm = array<i64: 1, 0>} : (tensor<2x5xi64>) -> tensor<5x2xi64>
// CHECK: %[[FOLDED:.*]] = graph.constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK: %[[TYPES:.*]] = graph.constant dense<0> : tensor<2x5xi64>
// CHECK: %[[PADIDS:.*]] = graph.constant dense<7> : tensor<2x2xi64>
// CHECK: %[[PADDED:.*]] = graph.concat %[[IDS]], %[[PADIDS]] {axis = 1 : i64} : (tensor<2x5xi64>, tensor<2x2xi64>) -> tensor<2x7xi64>
// CHECK: %[[SOURCES:.*]] = graph.constant dense<[0, 0, 1, 2, 3, 4]> : tensor<6xi64>
// CHECK: %[[EDGED:.*]] = graph.gather %[[IDS]], %[[SOURCES]] {axis = 1 : i64} : (tensor<2x5xi64>, tensor<6xi64>) -> tensor<2x6xi64>
// CHECK: return %[[POSITIONS]], %{{.*}}, %[[FLIPPED]], %[[FOLDED]], %[[TYPES]], %[[PADDED]], %[[EDGED]]
