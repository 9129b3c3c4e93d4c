// Tests ScatterND. With constant indices the rows it overwrites are a
// constant keep-mask and the updates are scattered by gather_grad at the
// flat row indices; with runtime indices into the first dimension the mask
// comes from the indices' one_hot rows. The runtime case runs forward and
// is compared with numpy. Integer data with constant indices (a decoder's
// input: the ids shifted right, as ScatterND, then the start token, as
// ScatterElements) is one gather from the data's and the updates' rows,
// and runs forward against numpy too. With data, indices and updates all
// constant (BART's decoder writes its causal mask so) the result is a
// constant: overwritten rows, and with reduction add summed duplicates.
// Constant indices that overwrite every row once, in order (transformers'
// masked_fill of a whole mask slice), give the updates themselves.
// RUN: onnx-from-text %s --extract '// CONST-ONNX: ' -o %t.const.onnx
// RUN: fsdpc %t.const.onnx --emit=import | FileCheck %s --check-prefix=CONST
// RUN: onnx-from-text %s --extract '// FOLD-ONNX: ' -o %t.fold.onnx
// RUN: fsdpc %t.fold.onnx --emit=import | FileCheck %s --check-prefix=FOLD
// RUN: onnx-from-text %s --extract '// ALL-ONNX: ' -o %t.all.onnx
// RUN: fsdpc %t.all.onnx --emit=import | FileCheck %s --check-prefix=ALL
// RUN: onnx-from-text %s --extract '// RT-ONNX: ' -o %t.rt.onnx
// RUN: fsdpc %t.rt.onnx --emit=import | FileCheck %s --check-prefix=RT
// RUN: fsdpc %t.rt.onnx --forward-only -o %t.rt.bin
// RUN: rm -rf %t.in %t.out && mkdir -p %t.in %t.out
// RUN: %python -c "import numpy as np; r = np.random.default_rng(3); np.save('%t.in/data.npy', r.standard_normal((4, 3)).astype(np.float32)); np.save('%t.in/u.npy', r.standard_normal((2, 3)).astype(np.float32)); np.save('%t.in/i.npy', np.array([[2], [0]], np.int64))"
// RUN: fsdp-run %t.rt.bin --forward --inputs %t.in --outputs %t.out
// RUN: %python -c "import numpy as np; d = np.load('%t.in/data.npy'); d[[2, 0]] = np.load('%t.in/u.npy'); y = np.load('%t.out/y.npy'); assert np.allclose(y, d, rtol=0, atol=1e-7), (y, d); print('scatter matches numpy')" | FileCheck %s --check-prefix=MATCH
// RUN: %python -c "import numpy as np; np.save('%t.in/i.npy', np.array([[2], [4]], np.int64))"
// RUN: not fsdp-run %t.rt.bin --forward --inputs %t.in --outputs %t.out 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: onnx-from-text %s --extract '// INT-ONNX: ' -o %t.int.onnx
// RUN: fsdpc %t.int.onnx --emit=import | FileCheck %s --check-prefix=INT
// RUN: fsdpc %t.int.onnx --forward-only -o %t.int.bin
// RUN: %python -c "import numpy as np; np.save('%t.in/ids.npy', np.array([[5, 6, 7, 8], [1, 2, 3, 4]], np.int64))"
// RUN: fsdp-run %t.int.bin --forward --inputs %t.in --outputs %t.out
// RUN: %python -c "import numpy as np; y = np.load('%t.out/y.npy'); want = [[9, 5, 6, 7], [9, 1, 2, 3]]; assert y.dtype == np.int64 and (y == want).all(), y; print('shifted ids match numpy')" | FileCheck %s --check-prefix=MATCH-INT

// CONST-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// CONST-ONNX: sc (float[4, 3] data, float[2, 3] u) => (float[4, 3] y) {
// CONST-ONNX:   i = Constant <value = int64[2, 1] {3, 1}> ()
// CONST-ONNX:   y = ScatterND (data, i, u)
// CONST-ONNX: }

// CONST-LABEL: func.func @forward
// CONST: %[[ROWS:.*]] = graph.constant dense<[3, 1]> : tensor<2xi64>
// CONST: %[[S:.*]] = graph.gather_grad %arg1, %[[ROWS]] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x3xf32>
// CONST: %[[KEEP:.*]] = graph.constant dense<{{\[\[}}1.000000e+00], [0.000000e+00], [1.000000e+00], [0.000000e+00]]> : tensor<4x1xf32>
// CONST: %[[KEPT:.*]] = graph.mul %arg0, %[[KEEP]]
// CONST: graph.add %[[KEPT]], %[[S]]

// FOLD-ONNX: <ir_version: 8, opset_import: ["" : 16]>
// FOLD-ONNX: fold (float[3, 2] x) => (float[3, 2] y, float[3, 2] z) {
// FOLD-ONNX:   d = Constant <value = float[3, 2] {1, 2, 3, 4, 5, 6}> ()
// FOLD-ONNX:   u = Constant <value = float[2, 2] {10, 20, 30, 40}> ()
// FOLD-ONNX:   i = Constant <value = int64[2, 1] {2, 0}> ()
// FOLD-ONNX:   twice = Constant <value = int64[2, 1] {1, 1}> ()
// FOLD-ONNX:   s = ScatterND (d, i, u)
// FOLD-ONNX:   y = Add (x, s)
// FOLD-ONNX:   t = ScatterND <reduction = "add"> (d, twice, u)
// FOLD-ONNX:   z = Add (x, t)
// FOLD-ONNX: }

// FOLD-LABEL: func.func @forward
// FOLD-DAG: graph.constant dense<{{\[\[}}3.000000e+01, 4.000000e+01], [3.000000e+00, 4.000000e+00], [1.000000e+01, 2.000000e+01]]> : tensor<3x2xf32>
// FOLD-DAG: graph.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [4.300000e+01, 6.400000e+01], [5.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
// FOLD-NOT: graph.gather_grad

// ALL-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ALL-ONNX: all (float[3, 2] data, float[3, 2] u) => (float[3, 2] y) {
// ALL-ONNX:   i = Constant <value = int64[3, 1] {0, 1, 2}> ()
// ALL-ONNX:   y = ScatterND (data, i, u)
// ALL-ONNX: }

// ALL-LABEL: func.func @forward
// ALL-NOT: graph.gather_grad
// ALL: return %arg1

// RT-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// RT-ONNX: sc (float[4, 3] data, int64[2, 1] i, float[2, 3] u) => (float[4, 3] y) {
// RT-ONNX:   y = ScatterND (data, i, u)
// RT-ONNX: }

// RT-LABEL: func.func @forward
// RT: %[[FLAT:.*]] = graph.reshape %arg1 : (tensor<2x1xi64>) -> tensor<2xi64>
// RT: %[[S:.*]] = graph.gather_grad %arg2, %[[FLAT]] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x3xf32>
// RT: %[[HOT:.*]] = graph.one_hot %[[FLAT]] : (tensor<2xi64>) -> tensor<2x4xf32>
// RT: %[[HITS:.*]] = graph.reduce_sum %[[HOT]] {axes = array<i64: 0>, keepdims = false} : (tensor<2x4xf32>) -> tensor<4xf32>
// RT: graph.relu
// RT: graph.mul %arg0,
// INT-ONNX: <ir_version: 8, opset_import: ["" : 13]>
// INT-ONNX: shift (int64[2, 4] ids) => (int64[2, 4] y) {
// INT-ONNX:   zeros = Constant <value = int64[2, 4] {0, 0, 0, 0, 0, 0, 0, 0}> ()
// INT-ONNX:   starts = Constant <value = int64[1] {0}> ()
// INT-ONNX:   ends = Constant <value = int64[1] {-1}> ()
// INT-ONNX:   axes = Constant <value = int64[1] {1}> ()
// INT-ONNX:   head = Slice (ids, starts, ends, axes)
// INT-ONNX:   places = Constant <value = int64[2, 3, 2] {0, 1, 0, 2, 0, 3, 1, 1, 1, 2, 1, 3}> ()
// INT-ONNX:   shifted = ScatterND (zeros, places, head)
// INT-ONNX:   first = Constant <value = int64[2, 1] {0, 0}> ()
// INT-ONNX:   start = Constant <value = int64[2, 1] {9, 9}> ()
// INT-ONNX:   y = ScatterElements <axis = 1> (shifted, first, start)
// INT-ONNX: }

// INT-LABEL: func.func @forward
// INT-SAME: (%[[IDS:.*]]: tensor<2x4xi64>
// INT: %[[HEAD:.*]] = graph.slice %[[IDS]] {{.*}} -> tensor<2x3xi64>
// INT: %[[SOURCE:.*]] = graph.constant dense<[0, 8, 9, 10, 4, 11, 12, 13]> : tensor<8xi64>
// INT: %[[ZEROS:.*]] = graph.reshape %{{.*}} : (tensor<2x4xi64>) -> tensor<8x1xi64>
// INT: %[[UPDATES:.*]] = graph.reshape %[[HEAD]] : (tensor<2x3xi64>) -> tensor<6x1xi64>
// INT: %[[BOTH:.*]] = graph.concat %[[ZEROS]], %[[UPDATES]] {axis = 0 : i64} : (tensor<8x1xi64>, tensor<6x1xi64>) -> tensor<14x1xi64>
// INT: %[[PICKED:.*]] = graph.gather %[[BOTH]], %[[SOURCE]] {axis = 0 : i64} : (tensor<14x1xi64>, tensor<8xi64>) -> tensor<8x1xi64>
// INT: %[[SHIFTED:.*]] = graph.reshape %[[PICKED]] : (tensor<8x1xi64>) -> tensor<2x4xi64>
// INT: %[[SOURCE2:.*]] = graph.constant dense<[8, 1, 2, 3, 9, 5, 6, 7]> : tensor<8xi64>
// INT: graph.reshape %[[SHIFTED]] : (tensor<2x4xi64>) -> tensor<8x1xi64>
// INT: %[[Y:.*]] = graph.gather %{{.*}}, %[[SOURCE2]] {axis = 0 : i64} : (tensor<10x1xi64>, tensor<8xi64>) -> tensor<8x1xi64>
// MATCH-INT: shifted ids match numpy
// MATCH: scatter matches numpy
// RANGE: fsdp-run: error: gather_grad: index 4 is outside [-4, 4) (at ONNX node ScatterND_0)
