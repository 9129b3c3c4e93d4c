// RUN: fsdp-opt %s -split-input-file -graph-append-loss -graph-mixed-precision | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -graph-append-loss '-graph-mixed-precision=param-dtype=f16' | FileCheck %s --check-prefix=F16
// RUN: fsdp-opt %s -split-input-file -graph-append-loss '-graph-mixed-precision=keep-fp32=head' | FileCheck %s --check-prefix=KEEP

// Tests that parameters, inputs and constants are read through one cast
// each, that ops compute in bf16 but the layer norm, whose operands are cast
// to f32, and the loss, which reads the bf16 logits itself (its kernels
// compute in f32: no f32 copy of the logits), and that the loss stays f32.
// Where --keep-fp32 keeps the logits f32, the loss reads them as they are.
// CHECK: module attributes {{{.*}}graph.mixed_precision = "bf16"
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x3xf32> {graph.input = "input"}
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<5x3xf32> {graph.param = "w"}
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<5xf32> {graph.param = "scale"}
// CHECK-SAME: -> (tensor<f32> {graph.loss})
// CHECK-DAG: %[[WL:.*]] = graph.cast %[[W]] : (tensor<5x3xf32>) -> tensor<5x3xbf16>
// CHECK-DAG: %[[XL:.*]] = graph.cast %[[X]] : (tensor<4x3xf32>) -> tensor<4x3xbf16>
// CHECK-DAG: %[[SL:.*]] = graph.cast %[[S]] : (tensor<5xf32>) -> tensor<5xbf16>
// CHECK-DAG: %[[SF:.*]] = graph.cast %[[SL]] : (tensor<5xbf16>) -> tensor<5xf32>
// CHECK: %[[H:.*]] = graph.matmul %[[XL]], %[[WL]] {transpose_b = true} : (tensor<4x3xbf16>, tensor<5x3xbf16>) -> tensor<4x5xbf16>
// CHECK: %[[C:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[CL:.*]] = graph.cast %[[C]] : (tensor<f32>) -> tensor<bf16>
// CHECK: %[[M:.*]] = graph.mul %[[H]], %[[CL]] : (tensor<4x5xbf16>, tensor<bf16>) -> tensor<4x5xbf16>
// CHECK-NEXT: %[[MF:.*]] = graph.cast %[[M]] : (tensor<4x5xbf16>) -> tensor<4x5xf32>
// CHECK: graph.layer_norm %[[MF]], %[[SF]], %{{.*}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<4x5xf32>, tensor<5xf32>, tensor<5xf32>)
// CHECK: %[[R:.*]] = graph.relu %{{.*}} : tensor<4x5xbf16>
// CHECK-NOT: graph.cast
// CHECK: graph.softmax_cross_entropy %[[R]], %{{.*}} : (tensor<4x5xbf16>, tensor<4xi64>) -> tensor<f32>
// F16-LABEL: func.func @train_step
// F16: graph.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<4x3xf16>, tensor<5x3xf16>) -> tensor<4x5xf16>
// KEEP-LABEL: func.func @train_step
// KEEP: graph.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<4x3xbf16>, tensor<5x3xbf16>) -> tensor<4x5xbf16>
// KEEP: %[[R:.*]] = graph.relu %{{.*}} : tensor<4x5xf32>
// KEEP: graph.softmax_cross_entropy %[[R]], %{{.*}} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"},
                   %s: tensor<5xf32> {graph.param = "scale"}, %b: tensor<5xf32> {graph.param = "bias"})
    -> (tensor<4x5xf32> {graph.output = "logits"}) {
  %h = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %c = graph.constant dense<2.0> : tensor<f32>
  %m = graph.mul %h, %c : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %y, %mean, %rstd = graph.layer_norm %m, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x5xf32>, tensor<5xf32>, tensor<5xf32>) -> (tensor<4x5xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %r = graph.relu %y : tensor<4x5xf32> loc("head")
  return %r : tensor<4x5xf32>
}

// -----

// Tests that attention keeps f32 tensors (and so its softmax) but asks for
// the low type's tensor cores through compute_dtype, unless --keep-fp32
// names it.
// CHECK-LABEL: func.func @train_step
// CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {compute_dtype = "bf16", graph.prediction = "logits", scale = 5.000000e-01 : f64} : (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x5xi64>) -> (tensor<5x4xf32>, tensor<5xf32>)
// F16-LABEL: func.func @train_step
// F16: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {compute_dtype = "f16", graph.prediction = "logits", scale = 5.000000e-01 : f64}
// KEEP-LABEL: func.func @train_step
// KEEP: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {graph.prediction = "logits", scale = 5.000000e-01 : f64} : (tensor<5x4xf32>
func.func @forward(%q: tensor<5x4xf32> {graph.param = "q"}, %k: tensor<5x4xf32> {graph.param = "k"},
                   %v: tensor<5x4xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"})
    -> (tensor<5x4xf32> {graph.output = "logits"}) {
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64} : (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x5xi64>) -> (tensor<5x4xf32>, tensor<5xf32>) loc("head")
  return %o : tensor<5x4xf32>
}
