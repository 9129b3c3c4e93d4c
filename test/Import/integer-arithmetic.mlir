// Tests arithmetic on runtime integer tensors: the last token that is not
// padding, as Hugging Face's sequence-classification heads compute it
// ((ids != pad) times positions, ArgMax; or the first padding's position
// minus one, modulo the length), as i64 graph ops; Mod as Python's % and as
// fmod, by a constant and by a runtime divisor (the sign correction, and a
// guard that makes a zero divisor's result 0); Where between integers.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: heads (int64[2, 5] ids, int64[2] divisor) => (int64[2] last, int64[2] older, int64[2] python, int64[2] truncated, int64[2] quotient, int64[2, 5] chosen) {
// ONNX:   pad = Constant <value = int64 {0}> ()
// ONNX:   padding = Equal (ids, pad)
// ONNX:   kept = Not (padding)
// ONNX:   mask = Cast <to = 7> (kept)
// ONNX:   positions = Constant <value = int64[5] {0, 1, 2, 3, 4}> ()
// ONNX:   weighted = Mul (positions, mask)
// ONNX:   last = ArgMax <axis = -1, keepdims = 0> (weighted)
// ONNX:   padmask = Cast <to = 7> (padding)
// ONNX:   firstpad = ArgMax <axis = -1, keepdims = 0> (padmask)
// ONNX:   one = Constant <value = int64 {1}> ()
// ONNX:   before = Sub (firstpad, one)
// ONNX:   length = Constant <value = int64 {5}> ()
// ONNX:   older = Mod (before, length)
// ONNX:   python = Mod (before, divisor)
// ONNX:   truncated = Mod <fmod = 1> (before, divisor)
// ONNX:   quotient = Div (before, divisor)
// ONNX:   chosen = Where (padding, positions, ids)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:arg[0-9]+]]: tensor<2x5xi64> {{.*}}, %[[DIVISOR:arg[0-9]+]]: tensor<2xi64> {{.*}})
// CHECK: %[[PADDING:.*]] = graph.compare %[[IDS]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<2x5xi64>, tensor<i64>) -> tensor<2x5xi64>
// Not is a comparison of the i64 mask with 0.
// CHECK: %[[ZERO_I:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK: %[[KEPT:.*]] = graph.compare %[[PADDING]], %[[ZERO_I]] {predicate = #graph.predicate<eq>} : (tensor<2x5xi64>, tensor<i64>) -> tensor<2x5xi64>
// CHECK: %[[POSITIONS:.*]] = graph.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi64>
// CHECK: %[[WEIGHTED:.*]] = graph.mul %[[POSITIONS]], %[[KEPT]] : (tensor<5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
// CHECK: %[[LAST_KEPT:.*]] = graph.arg_max %[[WEIGHTED]] {axis = 1 : i64} : (tensor<2x5xi64>) -> tensor<2x1xi64>
// CHECK: %[[LAST:.*]] = graph.reshape %[[LAST_KEPT]] : (tensor<2x1xi64>) -> tensor<2xi64>
// CHECK: %[[FIRSTPAD_KEPT:.*]] = graph.arg_max %[[PADDING]] {axis = 1 : i64} : (tensor<2x5xi64>) -> tensor<2x1xi64>
// CHECK: %[[FIRSTPAD:.*]] = graph.reshape %[[FIRSTPAD_KEPT]] : (tensor<2x1xi64>) -> tensor<2xi64>
// CHECK: %[[ONE:.*]] = graph.constant dense<1> : tensor<i64>
// CHECK: %[[BEFORE:.*]] = graph.sub %[[FIRSTPAD]], %[[ONE]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// Python's % by the length, a positive constant: r = x - (x / y) y, plus y
// where r is negative; no guard for a zero divisor.
// CHECK: %[[LENGTH:.*]] = graph.constant dense<5> : tensor<i64>
// CHECK: %[[Q:.*]] = graph.div %[[BEFORE]], %[[LENGTH]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK: %[[QY:.*]] = graph.mul %[[Q]], %[[LENGTH]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK: %[[R:.*]] = graph.sub %[[BEFORE]], %[[QY]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK: %[[ZERO:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK: %[[NEGATIVE:.*]] = graph.compare %[[R]], %[[ZERO]] {predicate = #graph.predicate<lt>}
// CHECK: %[[SHIFT:.*]] = graph.mul %[[NEGATIVE]], %[[LENGTH]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK: %[[OLDER:.*]] = graph.add %[[R]], %[[SHIFT]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// Python's % by a runtime divisor: r moves by y where it is nonzero and its
// sign differs from y's, and a zero divisor gives 0.
// CHECK: %[[Q2:.*]] = graph.div %[[BEFORE]], %[[DIVISOR]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK: %[[Q2Y:.*]] = graph.mul %[[Q2]], %[[DIVISOR]]
// CHECK: %[[R2:.*]] = graph.sub %[[BEFORE]], %[[Q2Y]]
// CHECK: %[[ZERO2:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK: %[[NEGATIVE2:.*]] = graph.compare %[[R2]], %[[ZERO2]] {predicate = #graph.predicate<lt>}
// CHECK: %[[NEGATIVE_DIVISOR:.*]] = graph.compare %[[DIVISOR]], %[[ZERO2]] {predicate = #graph.predicate<lt>}
// CHECK: %[[DIFFER:.*]] = graph.compare %[[NEGATIVE2]], %[[NEGATIVE_DIVISOR]] {predicate = #graph.predicate<ne>}
// CHECK: %[[NONZERO:.*]] = graph.compare %[[R2]], %[[ZERO2]] {predicate = #graph.predicate<ne>}
// CHECK: %[[MOVES:.*]] = graph.mul %[[DIFFER]], %[[NONZERO]]
// CHECK: %[[SHIFT2:.*]] = graph.mul %[[MOVES]], %[[DIVISOR]]
// CHECK: %[[CORRECTED:.*]] = graph.add %[[R2]], %[[SHIFT2]]
// CHECK: %[[DIVISOR_NONZERO:.*]] = graph.compare %[[DIVISOR]], %[[ZERO2]] {predicate = #graph.predicate<ne>}
// CHECK: %[[PYTHON:.*]] = graph.mul %[[CORRECTED]], %[[DIVISOR_NONZERO]]
// fmod by a runtime divisor: no sign correction, the zero guard.
// CHECK: %[[Q3:.*]] = graph.div %[[BEFORE]], %[[DIVISOR]]
// CHECK: %[[Q3Y:.*]] = graph.mul %[[Q3]], %[[DIVISOR]]
// CHECK: %[[R3:.*]] = graph.sub %[[BEFORE]], %[[Q3Y]]
// CHECK: %[[ZERO3:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK: %[[DIVISOR_NONZERO3:.*]] = graph.compare %[[DIVISOR]], %[[ZERO3]] {predicate = #graph.predicate<ne>}
// CHECK: %[[TRUNCATED:.*]] = graph.mul %[[R3]], %[[DIVISOR_NONZERO3]]
// CHECK: %[[QUOTIENT:.*]] = graph.div %[[BEFORE]], %[[DIVISOR]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// Where between i64 tensors: ids + padding (positions - ids).
// CHECK: %[[DIFFERENCE:.*]] = graph.sub %[[POSITIONS]], %[[IDS]] : (tensor<5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
// CHECK: %[[PICKED:.*]] = graph.mul %[[PADDING]], %[[DIFFERENCE]] : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
// CHECK: %[[CHOSEN:.*]] = graph.add %[[IDS]], %[[PICKED]] : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
// CHECK: return %[[LAST]], %[[OLDER]], %[[PYTHON]], %[[TRUNCATED]], %[[QUOTIENT]], %[[CHOSEN]]
