// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// Tests that matmul checks its contracting dimensions.
func.func @matmul_mismatch(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{contracting dimensions differ: 3 vs 4}}
  %0 = graph.matmul %a, %b : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Tests that broadcasting ops reject incompatible shapes.
func.func @add_no_broadcast(%a: tensor<4x3xf32>, %b: tensor<2xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{operand shapes [4,3] and [2] do not broadcast}}
  %0 = graph.add %a, %b : (tensor<4x3xf32>, tensor<2xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Tests that arithmetic takes floats or integers, not one of each.
func.func @add_mixed_types(%ids: tensor<4xi64>, %x: tensor<4xf32>) -> tensor<4xi64> {
  // expected-error @+1 {{operands and result must share one element type, got 'f32' and 'i64'}}
  %0 = graph.add %ids, %x : (tensor<4xi64>, tensor<4xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Tests that pow takes float tensors only (the other arithmetic also i64).
func.func @pow_of_integers(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = graph.pow %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Tests that reshape keeps the element count.
func.func @reshape_count(%a: tensor<4x3xf32>) -> tensor<5x2xf32> {
  // expected-error @+1 {{element counts differ: 12 vs 10}}
  %0 = graph.reshape %a : (tensor<4x3xf32>) -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}

// -----

// Tests that transpose needs a permutation.
func.func @transpose_perm(%a: tensor<4x3xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{perm is not a permutation of [0, 2)}}
  %0 = graph.transpose %a {perm = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Tests that cross entropy checks the labels against the logits.
func.func @cross_entropy_labels(%l: tensor<4x5xf32>, %y: tensor<3xi64>) -> tensor<f32> {
  // expected-error @+1 {{labels must be [4], got [3]}}
  %0 = graph.softmax_cross_entropy %l, %y : (tensor<4x5xf32>, tensor<3xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that sum_to's result must broadcast to its input.
func.func @sum_to_shape(%a: tensor<4x3xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{result shape [4] does not broadcast to the input shape [4,3]}}
  %0 = graph.sum_to %a : (tensor<4x3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that sgd_update takes a momentum buffer exactly when momentum is set.
func.func @sgd_state(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{expects 1 state operand(s) for momentum 9.000000e-01, got 0}}
  %0 = graph.sgd_update %p, %p step %s {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that adamw_update checks its learning-rate schedule.
func.func @adamw_schedule(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+2 {{expected ::fsdpc::graph::LrSchedule to be one of: constant, linear, cosine}}
  // expected-error @+1 {{failed to parse Graph_LrScheduleAttr parameter}}
  %0, %1, %2 = graph.adamw_update %p, %p, %p, %p, step %s {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, lr_schedule = #graph.lr_schedule<step>} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
  return %0 : tensor<5xf32>
}

// -----

func.func @sgd_schedule_total(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{a cosine schedule needs total_steps above warmup_steps}}
  %0 = graph.sgd_update %p, %p step %s {lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, lr_schedule = #graph.lr_schedule<cosine>, warmup_steps = 4 : i64, total_steps = 4 : i64} : (tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that adamw_update checks its betas.
func.func @adamw_betas(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{betas must lie in [0, 1)}}
  %0, %1, %2 = graph.adamw_update %p, %p, %p, %p, step %s {lr = 1.0e-3 : f64, beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
  return %0 : tensor<5xf32>
}

// -----

// Tests that layer_norm's scale covers the normalised dimensions.
func.func @layer_norm_scale(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{scale and bias must have the normalised shape [4], got [3,4]}}
  %y, %m, %r = graph.layer_norm %x, %w, %w {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests that layer_norm's statistics keep the leading dimensions.
func.func @layer_norm_statistics(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{per-slice statistics must have shape [2,3,1], got [2,1,1]}}
  %y, %m, %r = graph.layer_norm %x, %w, %w {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests that gelu knows its two forms only.
func.func @gelu_form(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{expected ::fsdpc::graph::GeluApproximation to be one of: none, tanh}}
  // expected-error @+1 {{failed to parse Graph_GeluApproximationAttr parameter}}
  %y = graph.gelu %x {approximate = #graph.approximate<sigmoid>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that masked_softmax's mask broadcasts to the input.
func.func @masked_softmax_mask(%x: tensor<2x4xf32>, %m: tensor<3x4xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{mask shape [3,4] does not broadcast to the input shape [2,4]}}
  %y = graph.masked_softmax %x, %m {scale = 1.0 : f64} : (tensor<2x4xf32>, tensor<3x4xi64>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that attention's key fits its query and value.
func.func @attention_shapes(%q: tensor<3x5x4xf32>, %k: tensor<3x5x7xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{key [3,5,7] and value [3,5,6] do not fit query [3,5,4]}}
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64} : (tensor<3x5x4xf32>, tensor<3x5x7xf32>, tensor<3x5x6xf32>, tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5xf32>)
  return
}

// -----

// Tests that a score cap is not negative.
func.func @attention_negative_softcap(%q: tensor<3x5x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{softcap must be 0 (none) or positive and finite, not -2}}
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64, softcap = -2.0 : f64} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x6xf32>, tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5xf32>)
  return
}

// -----

// Tests that grouped key and value heads divide the query's heads.
func.func @attention_grouped_heads(%q: tensor<2x6x5x4xf32>, %k: tensor<2x4x5x4xf32>, %v: tensor<2x4x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{key and value heads (4) must divide the query's (6)}}
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x6x5x4xf32>, tensor<2x4x5x4xf32>, tensor<2x4x5x6xf32>, tensor<5x5xi64>) -> (tensor<2x6x5x6xf32>, tensor<2x6x5xf32>)
  return
}

// -----

// Tests that key and value have the same heads.
func.func @attention_key_value_heads(%q: tensor<2x6x5x4xf32>, %k: tensor<2x2x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{query, key and value need the same leading axes but for grouped heads}}
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64} : (tensor<2x6x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x3x5x6xf32>, tensor<5x5xi64>) -> (tensor<2x6x5x6xf32>, tensor<2x6x5xf32>)
  return
}

// -----

// Tests that token_major has a flag for each of query, key, value and out.
func.func @attention_token_major_flags(%q: tensor<2x5x3x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{token_major needs 4 flags (query, key, value, out), not 3}}
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64, token_major = array<i1: true, false, false>} : (tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>, tensor<5x5xi64>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5xf32>)
  return
}

// -----

// Tests that a token-major out is [B, T, H, Dv].
func.func @attention_token_major_out(%q: tensor<2x5x3x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{out must be [2,5,3,6] and logsumexp [2,3,5]}}
  %o, %lse = graph.attention %q, %k, %v, %m {scale = 0.5 : f64, token_major = array<i1: true, false, false, true>} : (tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>, tensor<5x5xi64>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5xf32>)
  return
}

// -----

// Tests that a transposed key is not token-major.
func.func @attention_token_major_transposed_key(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x4x5xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{a transposed key is not token-major}}
  %o, %lse = graph.attention %q, %k, %v, %m {key_transposed = true, scale = 0.5 : f64, token_major = array<i1: false, true, false, false>} : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>, tensor<5x5xi64>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5xf32>)
  return
}

// -----

// Tests that attention's compute_dtype is a float type it knows.
func.func @attention_compute_dtype(%q: tensor<3x5x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x6xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+2 {{expected ::fsdpc::graph::ComputeDtype to be one of: f32, bf16, f16}}
  // expected-error @+1 {{failed to parse Graph_ComputeDtypeAttr parameter}}
  %o, %lse = graph.attention %q, %k, %v, %m {compute_dtype = #graph.compute_dtype<int8>, scale = 0.5 : f64} : (tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x6xf32>, tensor<5x5xi64>) -> (tensor<3x5x6xf32>, tensor<3x5xf32>)
  return
}

// -----

// Tests that layer_norm's scale and bias have one type.
func.func @layer_norm_affine_types(%x: tensor<4x5xbf16>, %s: tensor<5xbf16>, %b: tensor<5xf32>) {
  // expected-error @+1 {{scale and bias must have one type}}
  %y, %m, %r = graph.layer_norm %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x5xbf16>, tensor<5xbf16>, tensor<5xf32>) -> (tensor<4x5xbf16>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

// Tests that packed_attention's qkv holds three thirds of whole heads.
func.func @packed_attention_heads(%qkv: tensor<2x5x36xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{qkv's last axis 36 is not 3 x 5 heads of one size}}
  %o, %lse = graph.packed_attention %qkv, %m {heads = 5 : i64, scale = 0.5 : f64} : (tensor<2x5x36xf32>, tensor<5x5xi64>) -> (tensor<2x5x12xf32>, tensor<2x5x5xf32>)
  return
}

// -----

// Tests that packed_attention's results have the heads side by side and
// one logsumexp per head and query.
func.func @packed_attention_results(%qkv: tensor<2x5x36xf32>, %m: tensor<5x5xi64>) {
  // expected-error @+1 {{out must be [2,5,12] and logsumexp [2,3,5]}}
  %o, %lse = graph.packed_attention %qkv, %m {heads = 3 : i64, scale = 0.5 : f64} : (tensor<2x5x36xf32>, tensor<5x5xi64>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
  return
}

// -----

// Tests that packed_attention's mask broadcasts to every head's scores.
func.func @packed_attention_mask(%qkv: tensor<2x5x36xf32>, %m: tensor<4x5x5xi64>) {
  // expected-error @+1 {{mask [4,5,5] does not broadcast to the scores [2,3,5,5]}}
  %o, %lse = graph.packed_attention %qkv, %m {heads = 3 : i64, scale = 0.5 : f64} : (tensor<2x5x36xf32>, tensor<4x5x5xi64>) -> (tensor<2x5x12xf32>, tensor<2x3x5xf32>)
  return
}

// -----

// Tests that packed_attention_grad's dqkv has qkv's type.
func.func @packed_attention_grad_type(%qkv: tensor<2x5x36xf32>, %m: tensor<5x5xi64>, %o: tensor<2x5x12xf32>, %lse: tensor<2x3x5xf32>) {
  // expected-error @+1 {{dout must have out's type and dqkv qkv's}}
  %d = graph.packed_attention_grad %qkv, %m, %o, %lse, %o {heads = 3 : i64, scale = 0.5 : f64} : (tensor<2x5x36xf32>, tensor<5x5xi64>, tensor<2x5x12xf32>, tensor<2x3x5xf32>, tensor<2x5x12xf32>) -> tensor<2x5x36xbf16>
  return
}

// -----

// Tests that sum_squares gives one element.
func.func @sum_squares_shape(%g: tensor<8xf32>) -> tensor<f32> {
  // expected-error @+1 {{result must be tensor<1xf32>, got 'tensor<f32>'}}
  %s = graph.sum_squares %g : (tensor<8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that clipping needs a positive max_norm.
func.func @clip_max_norm(%s: tensor<1xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{max_norm must be positive, got 0}}
  %scale, %norm = graph.clip_coefficient %s {max_norm = 0.0 : f64} : (tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>)
  return %scale : tensor<1xf32>
}

// -----

// Tests that compare's result has its operands' broadcast shape.
func.func @compare_shape(%a: tensor<2x4xf32>, %b: tensor<4xf32>) -> tensor<4x2xi64> {
  // expected-error @+1 {{lhs and rhs must broadcast to the result's shape}}
  %m = graph.compare %a, %b {predicate = #graph.predicate<lt>} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<4x2xi64>
  return %m : tensor<4x2xi64>
}

// -----

// Tests that compare's operands have one element type.
func.func @compare_types(%a: tensor<2x4xf32>, %b: tensor<2x4xi64>) -> tensor<2x4xi64> {
  // expected-error @+1 {{lhs and rhs must have one element type}}
  %m = graph.compare %a, %b {predicate = #graph.predicate<eq>} : (tensor<2x4xf32>, tensor<2x4xi64>) -> tensor<2x4xi64>
  return %m : tensor<2x4xi64>
}

// -----

// Tests that compare's predicate is one it knows.
func.func @compare_predicate(%a: tensor<2x4xf32>) -> tensor<2x4xi64> {
  // expected-error @+2 {{expected ::fsdpc::graph::ComparePredicate to be one of: eq, ne, lt, le, gt, ge}}
  // expected-error @+1 {{failed to parse}}
  %m = graph.compare %a, %a {predicate = #graph.predicate<below>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi64>
  return %m : tensor<2x4xi64>
}

// -----

// Tests that is_nan keeps its input's shape.
func.func @is_nan_shape(%p: tensor<2x4xf32>) -> tensor<4x2xi64> {
  // expected-error @+1 {{result must have the input's shape}}
  %m = graph.is_nan %p : (tensor<2x4xf32>) -> tensor<4x2xi64>
  return %m : tensor<4x2xi64>
}

// -----

// Tests that one_hot appends the class dimension to the labels' shape.
func.func @one_hot_shape(%labels: tensor<6xi64>) -> tensor<5x6xf32> {
  // expected-error @+1 {{result must be the labels' shape with the class count appended}}
  %m = graph.one_hot %labels : (tensor<6xi64>) -> tensor<5x6xf32>
  return %m : tensor<5x6xf32>
}

// -----

// Tests that arg_max's axis lies inside the input's rank.
func.func @arg_max_axis(%x: tensor<3x7xf32>) -> tensor<3x1xi64> {
  // expected-error @+1 {{axis 2 is outside [0, 2)}}
  %i = graph.arg_max %x {axis = 2 : i64} : (tensor<3x7xf32>) -> tensor<3x1xi64>
  return %i : tensor<3x1xi64>
}

// -----

// Tests that arg_min keeps the reduced axis as a dimension of 1.
func.func @arg_min_shape(%x: tensor<3x7xf32>) -> tensor<3xi64> {
  // expected-error @+1 {{result must have the input's shape with axis 1 of size 1}}
  %i = graph.arg_min %x {axis = 1 : i64} : (tensor<3x7xf32>) -> tensor<3xi64>
  return %i : tensor<3xi64>
}

// -----

// Tests that cross entropy's classes lie within a row of logits.
func.func @ce_classes_past_the_row(%l: tensor<4x8xbf16>, %y: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{classes must be in [1, 8], got 9}}
  %0 = graph.softmax_cross_entropy %l, %y {classes = 9 : i64} : (tensor<4x8xbf16>, tensor<4xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a NaN beta is refused (NaN compares false with both bounds).
func.func @adamw_beta_nan(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{betas must lie in [0, 1)}}
  %0, %1, %2 = graph.adamw_update %p, %p, %p, %p, step %s {lr = 1.0e-3 : f64, beta1 = 0x7FF8000000000000 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
  return %0 : tensor<5xf32>
}

// -----

// Tests that adamw_update refuses a NaN learning rate.
func.func @adamw_lr_nan(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{lr, eps and weight_decay must be finite numbers >= 0}}
  %0, %1, %2 = graph.adamw_update %p, %p, %p, %p, step %s {lr = 0x7FF8000000000000 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
  return %0 : tensor<5xf32>
}

// -----

// Tests that sgd_update refuses a negative momentum, as torch does.
func.func @sgd_momentum_negative(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{lr, momentum and weight_decay must be finite numbers >= 0, and dampening finite}}
  %0 = graph.sgd_update %p, %p step %s {lr = 0.1 : f64, momentum = -0.5 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that sgd_update refuses an infinite weight decay.
func.func @sgd_decay_inf(%p: tensor<5xf32>, %s: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{lr, momentum and weight_decay must be finite numbers >= 0, and dampening finite}}
  %0 = graph.sgd_update %p, %p step %s {lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0x7FF0000000000000 : f64, nesterov = false} : (tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that layer_norm refuses a NaN epsilon.
func.func @layer_norm_epsilon_nan(%x: tensor<4x6xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{epsilon must be a finite number >= 0, got nan}}
  %y, %mean, %rstd = graph.layer_norm %x, %w, %b {axis = 1 : i64, epsilon = 0x7FF8000000000000 : f64} : (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return %y : tensor<4x6xf32>
}

// -----

// Tests that dropout's ratio lies in [0, 1), NaN included.
func.func @dropout_ratio_nan(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{ratio must be in [0, 1), got nan}}
  %y = graph.dropout %x {ratio = 0x7FF8000000000000 : f64, seed = 42 : i64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @dropout_ratio_one(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{ratio must be in [0, 1), got 1.0}}
  %y = graph.dropout_grad %x {ratio = 1.0 : f64, seed = 42 : i64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Tests that the fused cross entropy reduces by mean or sum only (the
// importer decomposes reduction none).
func.func @cross_entropy_reduction(%logits: tensor<4x5xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+2 {{expected ::fsdpc::graph::LossReduction to be one of: mean, sum}}
  // expected-error @+1 {{failed to parse Graph_LossReductionAttr parameter}}
  %loss = graph.softmax_cross_entropy %logits, %labels {reduction = #graph.reduction<none>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a negative axis reads as the number it is in an error (the
// dialect's integer attributes are Fsdpc_I64Attr; I64Attr's uint64_t getter
// printed 18446744073709551611).
func.func @gather_negative_axis(%w: tensor<39x32xf32>, %ids: tensor<2x4xi64>) -> tensor<2x4x32xf32> {
  // expected-error @+1 {{axis -5 is out of range}}
  %e = graph.gather %w, %ids {axis = -5 : i64} : (tensor<39x32xf32>, tensor<2x4xi64>) -> tensor<2x4x32xf32>
  return %e : tensor<2x4x32xf32>
}

// -----

func.func @gather_padding_outside(%w: tensor<39x32xf32>, %ids: tensor<2x4xi64>) -> tensor<2x4x32xf32> {
  // expected-error @+1 {{padding_index 39 is not a row of the data}}
  %e = graph.gather %w, %ids {axis = 0 : i64, padding_index = 39 : i64} : (tensor<39x32xf32>, tensor<2x4xi64>) -> tensor<2x4x32xf32>
  return %e : tensor<2x4x32xf32>
}

// -----

func.func @gather_padding_axis(%w: tensor<39x32xf32>, %ids: tensor<2x4xi64>) -> tensor<39x2x4xf32> {
  // expected-error @+1 {{padding_index needs axis 0}}
  %e = graph.gather %w, %ids {axis = 1 : i64, padding_index = 0 : i64} : (tensor<39x32xf32>, tensor<2x4xi64>) -> tensor<39x2x4xf32>
  return %e : tensor<39x2x4xf32>
}

// -----

func.func @rotary_odd_dimension(%x: tensor<2x5x7xf32>, %c: tensor<1x5x7xf32>) -> tensor<2x5x7xf32> {
  // expected-error @+1 {{needs an input whose last dimension is even, got [2,5,7]}}
  %y = graph.rotary %x, %c, %c : (tensor<2x5x7xf32>, tensor<1x5x7xf32>, tensor<1x5x7xf32>) -> tensor<2x5x7xf32>
  return %y : tensor<2x5x7xf32>
}

// -----

func.func @rotary_table_rank(%x: tensor<2x5x8xf32>, %c: tensor<5x8xf32>) -> tensor<2x5x8xf32> {
  // expected-error @+1 {{cos shape [5,8] must have the input's rank and last dimension and broadcast to [2,5,8]}}
  %y = graph.rotary %x, %c, %c : (tensor<2x5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

func.func @rotary_table_broadcast_last(%x: tensor<2x5x8xf32>, %c: tensor<1x5x8xf32>, %s: tensor<1x5x1xf32>) -> tensor<2x5x8xf32> {
  // expected-error @+1 {{sin shape [1,5,1] must have the input's rank and last dimension and broadcast to [2,5,8]}}
  %y = graph.rotary_grad %x, %c, %s : (tensor<2x5x8xf32>, tensor<1x5x8xf32>, tensor<1x5x1xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

func.func @rotary_result(%x: tensor<2x5x8xf32>, %c: tensor<1x5x8xf32>) -> tensor<2x5x8xbf16> {
  // expected-error @+1 {{result type must equal the input type}}
  %y = graph.rotary %x, %c, %c : (tensor<2x5x8xf32>, tensor<1x5x8xf32>, tensor<1x5x8xf32>) -> tensor<2x5x8xbf16>
  return %y : tensor<2x5x8xbf16>
}

// -----

// Tests that attention takes one sink per query head.
func.func @attention_sinks_per_key_head(%q: tensor<2x4x5x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x6xf32>, %m: tensor<5x5xi64>, %s: tensor<2xf32>) {
  // expected-error @+1 {{sinks must be [4], one per query head, not [2]}}
  %o, %lse = graph.attention %q, %k, %v, %m sinks %s {scale = 0.5 : f64} : (tensor<2x4x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x6xf32>, tensor<5x5xi64>, tensor<2xf32>) -> (tensor<2x4x5x6xf32>, tensor<2x4x5xf32>)
  return
}

// -----

// Tests that expert_matmul's lhs, weights and experts fit together.
func.func @expert_matmul_contracting(%x: tensor<6x1x8xf32>, %w: tensor<3x7x5xf32>, %e: tensor<6xi64>) {
  // expected-error @+1 {{lhs [6,1,8], weights [3,7,5], experts [6] and result [6,1,5] do not fit together}}
  %y = graph.expert_matmul %x, %w, %e : (tensor<6x1x8xf32>, tensor<3x7x5xf32>, tensor<6xi64>) -> tensor<6x1x5xf32>
  return
}

// -----

// Tests that expert_matmul_weight_grad's result is the weights' shape.
func.func @expert_matmul_weight_grad_rows(%x: tensor<6x1x8xf32>, %dy: tensor<6x1x5xf32>, %e: tensor<4xi64>) {
  // expected-error @+1 {{lhs [6,1,8], weights [3,8,5], experts [4] and dresult [6,1,5] do not fit together}}
  %dw = graph.expert_matmul_weight_grad %x, %dy, %e : (tensor<6x1x8xf32>, tensor<6x1x5xf32>, tensor<4xi64>) -> tensor<3x8x5xf32>
  return
}
