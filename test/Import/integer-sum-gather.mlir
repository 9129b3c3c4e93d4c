// Tests ReduceSum and GatherElements of integer tensors at run time, as
// mBART shifts its ids right for the decoder: the count of each sample's
// tokens that are not padding (ReduceSum over the positions), the id at its
// last real position (GatherElements by that count minus one) becomes the
// decoder's start token. ReduceSum adds halves of the reduced places, an
// odd one carried; GatherElements is one gather of the flattened ids at
// constant offsets plus the index times the axis's stride. Both run forward
// against numpy, over odd sizes, several axes, keepdims and negative
// indices, and an index out of range fails at run time naming the node.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s
// RUN: fsdpc %t.onnx --forward-only -o %t.bin
// RUN: rm -rf %t.in %t.out && mkdir -p %t.in %t.out
// RUN: %python -c "import numpy as np; np.save('%t.in/ids.npy', np.array([[5, 6, 7, 1, 1], [4, 3, 2, 9, 1]], np.int64)); np.save('%t.in/grid.npy', np.arange(-52, 53, dtype=np.int64).reshape(3, 5, 7) * 3**30); np.save('%t.in/picks.npy', np.array([[-1, 0, 3], [2, -5, 4]], np.int64))"
// RUN: fsdp-run %t.bin --forward --inputs %t.in --outputs %t.out
// RUN: %python %S/Inputs/check_integer_sum_gather.py %t.in %t.out | FileCheck %s --check-prefix=MATCH
// RUN: %python -c "import numpy as np; np.save('%t.in/picks.npy', np.array([[-1, 0, 3], [2, 5, 4]], np.int64))"
// RUN: not fsdp-run %t.bin --forward --inputs %t.in --outputs %t.out 2>&1 | FileCheck %s --check-prefix=RANGE

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: shift (int64[2, 5] ids, int64[3, 5, 7] grid, int64[2, 3] picks) => (int64[2, 1] start, int64[1, 5, 1] sums, int64[2, 3] picked) {
// ONNX:   pad = Constant <value = int64 {1}> ()
// ONNX:   padding = Equal (ids, pad)
// ONNX:   real = Not (padding)
// ONNX:   mask = Cast <to = 7> (real)
// ONNX:   positions = Constant <value = int64[1] {1}> ()
// ONNX:   count = ReduceSum <keepdims = 0> (mask, positions)
// ONNX:   one = Constant <value = int64 {1}> ()
// ONNX:   last = Sub (count, one)
// ONNX:   column = Unsqueeze (last, positions)
// ONNX:   start = GatherElements <axis = 1> (ids, column)
// ONNX:   outer = Constant <value = int64[2] {0, 2}> ()
// ONNX:   sums = ReduceSum (grid, outer)
// ONNX:   picked = GatherElements <axis = 1> (ids, picks)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:arg[0-9]+]]: tensor<2x5xi64> {{.*}}, %[[GRID:arg[0-9]+]]: tensor<3x5x7xi64> {{.*}}, %[[PICKS:arg[0-9]+]]: tensor<2x3xi64>
// Five places: 2 + 2 added, the fifth carried; then 1 + 1, carried; then 1 + 1.
// CHECK: %[[A:.*]] = graph.slice %[[MASK:.*]] {starts = array<i64: 0, 0>, {{.*}}} : (tensor<2x5xi64>) -> tensor<2x2xi64>
// CHECK: %[[B:.*]] = graph.slice %[[MASK]] {starts = array<i64: 0, 2>, {{.*}}} : (tensor<2x5xi64>) -> tensor<2x2xi64>
// CHECK: %[[AB:.*]] = graph.add %[[A]], %[[B]] : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
// CHECK: %[[ODD:.*]] = graph.slice %[[MASK]] {starts = array<i64: 0, 4>, {{.*}}} : (tensor<2x5xi64>) -> tensor<2x1xi64>
// CHECK: graph.concat %[[AB]], %[[ODD]] {axis = 1 : i64} : (tensor<2x2xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
// CHECK: %[[COUNT:.*]] = graph.reshape %{{.*}} : (tensor<2x1xi64>) -> tensor<2xi64>
// GatherElements: offsets of each row (0 and 5) plus the index, one gather.
// CHECK: %[[OFFSETS:.*]] = graph.constant dense<{{\[\[}}0], [5]]> : tensor<2x1xi64>
// CHECK: %[[FLAT:.*]] = graph.reshape %[[IDS]] : (tensor<2x5xi64>) -> tensor<10xi64>
// CHECK: graph.gather %[[FLAT]], %{{.*}} {axis = 0 : i64} : (tensor<10xi64>, tensor<2xi64>) -> tensor<2xi64>
// Two axes of the grid, 3 then 7 places, keepdims.
// CHECK: graph.add {{.*}} : (tensor<1x5x7xi64>, tensor<1x5x7xi64>) -> tensor<1x5x7xi64>
// CHECK: graph.add {{.*}} : (tensor<1x5x3xi64>, tensor<1x5x3xi64>) -> tensor<1x5x3xi64>
// CHECK: graph.add {{.*}} : (tensor<1x5x1xi64>, tensor<1x5x1xi64>) -> tensor<1x5x1xi64>
// CHECK: %[[PICKOFFSETS:.*]] = graph.constant dense<{{\[\[}}0, 0, 0], [5, 5, 5]]> : tensor<2x3xi64>

// MATCH: start [7 9]: PASS
// MATCH: sums: PASS
// MATCH: picked: PASS
// RANGE: fsdp-run: error: gather: index {{[0-9]+}} is outside [-10, 10) (at ONNX node GatherElements_{{[0-9]+}})
