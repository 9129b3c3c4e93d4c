// Tests TopK as rounds of arg_max (each winner masked out of the next with
// -inf, each value read from x through its round's mask) and
// ScatterElements through a [.., K, N] mask of the places the indices name
// (negative ones from the end), the data kept where none does.
// RUN: onnx-from-text %s --extract '// ONNX: ' -o %t.onnx
// RUN: fsdpc %t.onnx --emit=import | FileCheck %s

// ONNX: <ir_version: 8, opset_import: ["" : 13]>
// ONNX: topk (float[2, 5] x, float[2, 4] data, float[2, 3] updates) => (float[2, 2] values, int64[2, 2] indices, float[2, 4] scattered) {
// ONNX:   k = Constant <value = int64[1] {2}> ()
// ONNX:   values, indices = TopK <axis = 1> (x, k)
// ONNX:   where = Constant <value = int64[2, 3] {0, 3, -1, 1, 2, -4}> ()
// ONNX:   scattered = ScatterElements <axis = 1> (data, where, updates)
// ONNX: }

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:arg[0-9]+]]: tensor<2x5xf32> {{.*}}, %[[DATA:arg[0-9]+]]: tensor<2x4xf32> {{.*}}, %[[UPDATES:arg[0-9]+]]: tensor<2x3xf32>
// CHECK: %[[ZERO:.*]] = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[HIDDEN:.*]] = graph.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[I1:.*]] = graph.arg_max %[[X]] {axis = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x1xi64>
// CHECK: %[[HOT1:.*]] = graph.compare %[[I1]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<2x1xi64>, tensor<1x5xi64>) -> tensor<2x5xi64>
// CHECK: %[[P1:.*]] = graph.select %[[HOT1]], %[[X]], %[[ZERO]]
// CHECK: %[[V1:.*]] = graph.reduce_sum %[[P1]] {axes = array<i64: 1>, keepdims = true}
// CHECK: %[[REST:.*]] = graph.select %[[HOT1]], %[[HIDDEN]], %[[X]]
// CHECK: %[[I2:.*]] = graph.arg_max %[[REST]] {axis = 1 : i64}
// CHECK: %[[HOT2:.*]] = graph.compare %[[I2]]
// CHECK: %[[P2:.*]] = graph.select %[[HOT2]], %[[X]], %[[ZERO]]
// CHECK: %[[V2:.*]] = graph.reduce_sum %[[P2]]
// CHECK: %[[VALUES:.*]] = graph.concat %[[V1]], %[[V2]] {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
// CHECK: %[[INDICES:.*]] = graph.concat %[[I1]], %[[I2]] {axis = 1 : i64} : (tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x2xi64>
// CHECK: %[[WHERE:.*]] = graph.reshape %{{.*}} : (tensor<2x3xi64>) -> tensor<2x3x1xi64>
// CHECK: %[[FROM_START:.*]] = graph.compare %[[WHERE]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<2x3x1xi64>, tensor<1x1x4xi64>) -> tensor<2x3x4xi64>
// CHECK: graph.constant dense<{{\[\[\[}}-4, -3, -2, -1]]]> : tensor<1x1x4xi64>
// CHECK: %[[FROM_END:.*]] = graph.compare %[[WHERE]], %{{.*}} {predicate = #graph.predicate<eq>} : (tensor<2x3x1xi64>, tensor<1x1x4xi64>) -> tensor<2x3x4xi64>
// CHECK: %[[NAMED:.*]] = graph.add %[[FROM_START]], %[[FROM_END]] : (tensor<2x3x4xi64>, tensor<2x3x4xi64>) -> tensor<2x3x4xi64>
// CHECK: %[[HOT:.*]] = graph.cast %[[NAMED]] : (tensor<2x3x4xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[U:.*]] = graph.reshape %[[UPDATES]] : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
// CHECK: %[[SPREAD:.*]] = graph.mul %[[HOT]], %[[U]]
// CHECK: %[[PLACED:.*]] = graph.reduce_sum %[[SPREAD]] {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[WRITTEN:.*]] = graph.reduce_sum %[[HOT]] {axes = array<i64: 1>, keepdims = false}
// CHECK: %[[OVER:.*]] = graph.compare %[[WRITTEN]], %{{.*}} {predicate = #graph.predicate<ne>}
// CHECK: %[[SCATTERED:.*]] = graph.select %[[OVER]], %[[PLACED]], %[[DATA]]
// CHECK: return %[[VALUES]], %[[INDICES]], %[[SCATTERED]]
