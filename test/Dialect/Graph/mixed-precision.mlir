// RUN: fsdp-opt %s -split-input-file -graph-append-loss -graph-mixed-precision | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -graph-append-loss '-graph-mixed-precision=param-dtype=f16' | FileCheck %s --check-prefix=F16
// RUN: fsdp-opt %s -split-input-file -graph-append-loss '-graph-mixed-precision=keep-fp32=head' | FileCheck %s --check-prefix=KEEP

// Tests that parameters, inputs and constants are read through one cast
// each, an argument's right before its first reader (so that autodiff
// places its gradient's cast back to f32 where that gradient is complete,
// not at the end of the backward), that ops compute in bf16, and that the layer norm and the loss,
// which compute in f32, read the bf16 activations themselves (their kernels
// widen; no f32 copies): the norm's result is bf16, as the relu reading it
// would cast it, and it reads its scale and bias in bf16 too (the cast of
// each parameter, without the cast back to f32). The loss
// stays f32. Where --keep-fp32 keeps the relu in f32, the norm's result
// must be f32, so the norm reads an f32 copy of its input as before, and
// the loss reads the f32 relu as it is.
// CHECK: module attributes {{{.*}}graph.mixed_precision = "bf16"
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x3xf32> {graph.input = "input"}
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<5x3xf32> {graph.param = "w"}
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<5xf32> {graph.param = "scale"}
// CHECK-SAME: -> (tensor<f32> {graph.loss})
// CHECK-NEXT: %[[XL:.*]] = graph.cast %[[X]] : (tensor<4x3xf32>) -> tensor<4x3xbf16>
// CHECK-NEXT: %[[WL:.*]] = graph.cast %[[W]] : (tensor<5x3xf32>) -> tensor<5x3xbf16>
// CHECK-NEXT: %[[H:.*]] = graph.matmul %[[XL]], %[[WL]] {transpose_b = true} : (tensor<4x3xbf16>, tensor<5x3xbf16>) -> tensor<4x5xbf16>
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[CL:.*]] = graph.cast %[[C]] : (tensor<f32>) -> tensor<bf16>
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[H]], %[[CL]] : (tensor<4x5xbf16>, tensor<bf16>) -> tensor<4x5xbf16>
// CHECK-NEXT: %[[SL:.*]] = graph.cast %[[S]] : (tensor<5xf32>) -> tensor<5xbf16>
// CHECK-NEXT: %[[BL:.*]] = graph.cast %{{.*}} : (tensor<5xf32>) -> tensor<5xbf16>
// CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = graph.layer_norm %[[M]], %[[SL]], %[[BL]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<4x5xbf16>, tensor<5xbf16>, tensor<5xbf16>) -> (tensor<4x5xbf16>, tensor<4x1xf32>, tensor<4x1xf32>)
// CHECK-NEXT: %[[R:.*]] = graph.relu %[[Y]] {{.*}}: tensor<4x5xbf16>
// CHECK-NEXT: graph.softmax_cross_entropy %[[R]], %{{.*}} : (tensor<4x5xbf16>, tensor<4xi64>) -> tensor<f32>
// F16-LABEL: func.func @train_step
// F16: graph.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<4x3xf16>, tensor<5x3xf16>) -> tensor<4x5xf16>
// F16: graph.layer_norm %{{.*}} : (tensor<4x5xf16>, tensor<5xf16>, tensor<5xf16>) -> (tensor<4x5xf16>,
// KEEP-LABEL: func.func @train_step
// KEEP: graph.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<4x3xbf16>, tensor<5x3xbf16>) -> tensor<4x5xbf16>
// KEEP: %[[M:.*]] = graph.mul %{{.*}} -> tensor<4x5xbf16>
// KEEP-NEXT: %[[MF:.*]] = graph.cast %[[M]] : (tensor<4x5xbf16>) -> tensor<4x5xf32>
// KEEP-NEXT: graph.cast %{{.*}} : (tensor<5xf32>) -> tensor<5xbf16>
// KEEP-NEXT: graph.cast %{{.*}} : (tensor<5xf32>) -> tensor<5xbf16>
// KEEP-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = graph.layer_norm %[[MF]], {{.*}} -> (tensor<4x5xf32>,
// KEEP-NEXT: %[[R:.*]] = graph.relu %[[Y]] {{.*}}: tensor<4x5xf32>
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

// Tests that attention keeps f32 tensors where it reads parameters and its
// out feeds the loss, but asks for the low type's tensor cores through
// compute_dtype, unless --keep-fp32 names it.
// CHECK-LABEL: func.func @train_step
// CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {compute_dtype = #graph.compute_dtype<bf16>, graph.prediction = "logits", scale = 5.000000e-01 : f64} : (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x5xi64>) -> (tensor<5x4xf32>, tensor<5xf32>)
// F16-LABEL: func.func @train_step
// F16: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {compute_dtype = #graph.compute_dtype<f16>, graph.prediction = "logits", scale = 5.000000e-01 : f64}
// KEEP-LABEL: func.func @train_step
// KEEP: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {graph.prediction = "logits", scale = 5.000000e-01 : f64} : (tensor<5x4xf32>
func.func @forward(%q: tensor<5x4xf32> {graph.param = "q"}, %k: tensor<5x4xf32> {graph.param = "k"},
                   %v: tensor<5x4xf32> {graph.param = "v"}, %m: tensor<5x5xi64> {graph.input = "mask"})
    -> (tensor<5x4xf32> {graph.output = "logits"}) {
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64} : (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x5xi64>) -> (tensor<5x4xf32>, tensor<5xf32>) loc("head")
  return %o : tensor<5x4xf32>
}

// -----

// Tests that attention reads bf16 projections as they are (query, key and
// value computed in bf16: no f32 copies) and writes a bf16 out where only
// bf16 ops read it (the relu), and that an
// RMS norm whose result feeds a bf16 op reads and writes bf16, while one
// whose result feeds an op that keeps f32 (softmax) reads an f32 copy and
// keeps an f32 result. Both read their scale in bf16, but where
// --keep-fp32 names the norm, which reads it through bf16 to f32.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Q:.*]] = graph.matmul {{.*}} -> tensor<5x4xbf16>
// CHECK: %[[K:.*]] = graph.matmul {{.*}} -> tensor<5x4xbf16>
// CHECK: %[[O:.*]], %{{.*}} = graph.attention %[[Q]], %[[K]], %[[K]], %{{.*}} {compute_dtype = #graph.compute_dtype<bf16>, scale = 5.000000e-01 : f64} : (tensor<5x4xbf16>, tensor<5x4xbf16>, tensor<5x4xbf16>, tensor<5x5xi64>) -> (tensor<5x4xbf16>, tensor<5xf32>)
// CHECK-NEXT: %[[A:.*]] = graph.relu %[[O]] : tensor<5x4xbf16>
// CHECK-NEXT: %[[GL:.*]] = graph.cast %{{.*}} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: %[[N:.*]], %{{.*}} = graph.rms_norm %[[A]], %[[GL]] {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64} : (tensor<5x4xbf16>, tensor<4xbf16>) -> (tensor<5x4xbf16>, tensor<5x1xf32>)
// CHECK-NEXT: %[[B:.*]] = graph.relu %[[N]] : tensor<5x4xbf16>
// CHECK-NEXT: %[[BF:.*]] = graph.cast %[[B]] : (tensor<5x4xbf16>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[P:.*]], %{{.*}} = graph.rms_norm %[[BF]], %{{.*}} : (tensor<5x4xf32>, tensor<4xbf16>) -> (tensor<5x4xf32>, tensor<5x1xf32>)
// CHECK-NEXT: graph.softmax %[[P]] {{.*}}: tensor<5x4xf32>
// KEEP-LABEL: func.func @train_step
// KEEP: graph.attention {{.*}} : (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x5xi64>)
// KEEP: graph.rms_norm {{.*}} : (tensor<5x4xbf16>, tensor<4xbf16>)
// KEEP: graph.rms_norm {{.*}} : (tensor<5x4xf32>, tensor<4xf32>)
func.func @forward(%x: tensor<5x3xf32> {graph.input = "x"}, %wq: tensor<3x4xf32> {graph.param = "wq"},
                   %wk: tensor<3x4xf32> {graph.param = "wk"}, %g: tensor<4xf32> {graph.param = "g"},
                   %m: tensor<5x5xi64> {graph.input = "mask"})
    -> (tensor<5x4xf32> {graph.output = "logits"}) {
  %q = graph.matmul %x, %wq : (tensor<5x3xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
  %k = graph.matmul %x, %wk : (tensor<5x3xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
  %o, %lse = graph.attention %q, %k, %k, %m {scale = 0.5 : f64} : (tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x5xi64>) -> (tensor<5x4xf32>, tensor<5xf32>) loc("head")
  %a = graph.relu %o : tensor<5x4xf32>
  %n, %r1 = graph.rms_norm %a, %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<5x4xf32>, tensor<4xf32>) -> (tensor<5x4xf32>, tensor<5x1xf32>)
  %b = graph.relu %n : tensor<5x4xf32>
  %p, %r2 = graph.rms_norm %b, %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<5x4xf32>, tensor<4xf32>) -> (tensor<5x4xf32>, tensor<5x1xf32>) loc("head")
  %s = graph.softmax %p {axis = 1 : i64} : tensor<5x4xf32>
  return %s : tensor<5x4xf32>
}

// -----

// Tests that packed attention reads the bf16 fused projection as it is and
// writes a bf16 out where only bf16 ops read it, with bf16 tensor cores.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[QKV:.*]] = graph.matmul {{.*}} -> tensor<5x12xbf16>
// CHECK: %[[O:.*]], %{{.*}} = graph.packed_attention %[[QKV]], %{{.*}} {compute_dtype = #graph.compute_dtype<bf16>, heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<5x12xbf16>, tensor<5x5xi64>) -> (tensor<5x4xbf16>, tensor<2x5xf32>)
// CHECK-NEXT: graph.relu %[[O]] {graph.prediction = "logits"} : tensor<5x4xbf16>
// KEEP-LABEL: func.func @train_step
// KEEP: graph.packed_attention {{.*}} {heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<5x12xf32>, tensor<5x5xi64>) -> (tensor<5x4xf32>, tensor<2x5xf32>)
func.func @forward(%x: tensor<5x3xf32> {graph.input = "x"}, %w: tensor<3x12xf32> {graph.param = "w"},
                   %m: tensor<5x5xi64> {graph.input = "mask"})
    -> (tensor<5x4xf32> {graph.output = "logits"}) {
  %qkv = graph.matmul %x, %w : (tensor<5x3xf32>, tensor<3x12xf32>) -> tensor<5x12xf32>
  %o, %lse = graph.packed_attention %qkv, %m {heads = 2 : i64, scale = 0.5 : f64} : (tensor<5x12xf32>, tensor<5x5xi64>) -> (tensor<5x4xf32>, tensor<2x5xf32>) loc("head")
  %a = graph.relu %o : tensor<5x4xf32>
  return %a : tensor<5x4xf32>
}

// -----

// Tests that arithmetic on positions stays in f32, its constants uncast:
// the angles of a rotary table (integer positions cast to f32, times the
// inverse frequencies) and their cosine, which bf16 would round beyond
// position 256. The cosine's reader casts it as any f32 value; the
// activations' matmul is bf16 as ever.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[FREQ:.*]] = graph.constant {{.*}} : tensor<1x4xf32>
// CHECK-NEXT: %[[POS:.*]] = graph.cast %arg0 : (tensor<5x1xi64>) -> tensor<5x1xf32>
// CHECK-NEXT: %[[ANGLES:.*]] = graph.matmul %[[POS]], %[[FREQ]] : (tensor<5x1xf32>, tensor<1x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[COS:.*]] = graph.cos %[[ANGLES]] : tensor<5x4xf32>
// CHECK-NEXT: %[[LOW:.*]] = graph.cast %[[COS]] : (tensor<5x4xf32>) -> tensor<5x4xbf16>
// CHECK: %[[H:.*]] = graph.matmul {{.*}} : (tensor<5x4xbf16>, tensor<4x4xbf16>) -> tensor<5x4xbf16>
// CHECK: graph.mul %[[LOW]], %[[H]] {{.*}} : (tensor<5x4xbf16>, tensor<5x4xbf16>) -> tensor<5x4xbf16>
func.func @forward(%pos: tensor<5x1xi64> {graph.input = "pos"}, %x: tensor<5x4xf32> {graph.input = "x"},
                   %w: tensor<4x4xf32> {graph.param = "w"}) -> (tensor<5x4xf32> {graph.output = "logits"}) {
  %inverse_frequencies = graph.constant dense<[[1.0, 0.1, 0.01, 0.001]]> : tensor<1x4xf32>
  %p = graph.cast %pos : (tensor<5x1xi64>) -> tensor<5x1xf32>
  %angles = graph.matmul %p, %inverse_frequencies : (tensor<5x1xf32>, tensor<1x4xf32>) -> tensor<5x4xf32>
  %c = graph.cos %angles : tensor<5x4xf32>
  %h = graph.matmul %x, %w : (tensor<5x4xf32>, tensor<4x4xf32>) -> tensor<5x4xf32>
  %r = graph.mul %c, %h : (tensor<5x4xf32>, tensor<5x4xf32>) -> tensor<5x4xf32>
  return %r : tensor<5x4xf32>
}
