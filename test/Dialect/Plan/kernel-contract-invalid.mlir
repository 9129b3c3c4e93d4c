// RUN: fsdp-opt %s -split-input-file -verify-diagnostics
//
// Tests that plan.kernel is checked against the kernel contract that every
// backend implements (runtime/lib/contract/KernelContract.cpp): a wrong
// name, arity or parameter is an error when the plan is compiled, not when
// fsdp-run loads it.

// Tests that an unknown kernel is refused.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @x transient : tensor<4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{unknown kernel "softplus"}}
  plan.kernel "softplus" ins [@x] outs [@x] on compute
}

// -----

// Tests that a kernel takes the contract's number of inputs.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @x transient : tensor<4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{kernel "add" takes 2 inputs, got 3}}
  plan.kernel "add" ins [@x, @x, @x] outs [@x] on compute
}

// -----

// Tests that a kernel writes the contract's number of outputs.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @x transient : tensor<2x4xf32>
  plan.tensor @s transient : tensor<4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{kernel "layer_norm" takes 3 outputs, got 1}}
  plan.kernel "layer_norm" ins [@x, @s, @s] outs [@x] on compute {axis = 1 : i64, epsilon = 1.0e-05 : f64}
}

// -----

// Tests a variable arity: sgd_update takes a momentum buffer or not.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @w transient : tensor<4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{kernel "sgd_update" takes 3 to 4 inputs, got 2}}
  plan.kernel "sgd_update" ins [@w, @w] outs [@w] on compute {lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false}
}

// -----

// Tests that a parameter the kernel does not have is refused.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @x transient : tensor<4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{kernel "relu" has no parameter 'alpha'}}
  plan.kernel "relu" ins [@x] outs [@x] on compute {alpha = 0.1 : f64}
}

// -----

// Tests that a parameter has the contract's type.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @x transient : tensor<2x4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{kernel "softmax" parameter 'axis' must be a int, got 1.000000e+00 : f64}}
  plan.kernel "softmax" ins [@x] outs [@x] on compute {axis = 1.0 : f64}
}

// -----

// Tests that a required parameter is present.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @x transient : tensor<2x4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{kernel "transpose" needs parameter 'perm'}}
  plan.kernel "transpose" ins [@x] outs [@x] on compute
}
