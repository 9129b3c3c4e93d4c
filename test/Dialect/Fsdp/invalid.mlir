// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// Tests that a unit's padded size covers its parameters.
// expected-error @+1 {{padded_size (20) must be at least flat_size (22)}}
fsdp.unit @unit0 params ["w"] : [tensor<22xf32>] flat_size 22 padded_size 20

// -----

// Tests that all_gather's result is group_size shards.
fsdp.unit @unit0 params ["w"] : [tensor<24xf32>] flat_size 24 padded_size 24
func.func @gather_size(%shard: tensor<6xf32>) -> tensor<20xf32> {
  // expected-error @+1 {{full size 20 must be group_size (4) times the shard size (6)}}
  %full = fsdp.all_gather %shard {unit = @unit0, group_size = 4 : i64} : tensor<6xf32> -> tensor<20xf32>
  return %full : tensor<20xf32>
}

// -----

// Tests that collectives name a declared unit.
func.func @missing_unit(%flat: tensor<24xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{references an undefined unit @nope}}
  %g = fsdp.reduce_scatter %flat {unit = @nope, reduction = "avg", group_size = 4 : i64} : tensor<24xf32> -> tensor<6xf32>
  return %g : tensor<6xf32>
}

// -----

// Tests that reductions are sum or avg.
fsdp.unit @unit0 params ["w"] : [tensor<6xf32>] flat_size 6 padded_size 6
func.func @bad_reduction(%g: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{reduction must be "sum" or "avg", got "max"}}
  %r = fsdp.all_reduce %g {unit = @unit0, reduction = "max", group_size = 2 : i64} : tensor<6xf32>
  return %r : tensor<6xf32>
}

// -----

// Tests that a freed value is not used afterwards.
fsdp.unit @unit0 params ["w"] : [tensor<24xf32>] flat_size 24 padded_size 24
func.func @use_after_free(%shard: tensor<6xf32>) -> tensor<24xf32> {
  %full = fsdp.all_gather %shard {unit = @unit0, group_size = 4 : i64} : tensor<6xf32> -> tensor<24xf32>
  // expected-error @+1 {{value is used after it is freed}}
  fsdp.free %full : tensor<24xf32>
  return %full : tensor<24xf32>
}

// -----

// Tests that a unit's flat_size is its parameters' element count.
// expected-error @+1 {{flat_size (7) must be the parameters' element count (6)}}
fsdp.unit @unit0 params ["w"] : [tensor<2x3xf32>] flat_size 7 padded_size 8

// -----

// Tests that a parameter view stays inside the flat tensor.
func.func @view_outside(%flat: tensor<8xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{elements [4, 10) are outside the flat tensor of 8 elements}}
  %w = fsdp.param_view %flat {param = "w", offset = 4 : i64} : tensor<8xf32> -> tensor<2x3xf32>
  return %w : tensor<2x3xf32>
}

// -----

// Tests that flatten takes one gradient of the right type per parameter.
fsdp.unit @unit0 params ["w", "b"] : [tensor<2x3xf32>, tensor<2xf32>] flat_size 8 padded_size 10
func.func @flatten_types(%gw: tensor<2x3xf32>, %gb: tensor<3xf32>) -> tensor<10xf32> {
  // expected-error @+1 {{gradient type 'tensor<3xf32>' does not match its parameter's type 'tensor<2xf32>'}}
  %flat = fsdp.flatten %gw, %gb {unit = @unit0} : tensor<2x3xf32>, tensor<3xf32> -> tensor<10xf32>
  return %flat : tensor<10xf32>
}

// -----

// Tests that a view of a freed gathered parameter is not read afterwards.
fsdp.unit @unit0 params ["w"] : [tensor<8xf32>] flat_size 8 padded_size 8
func.func @view_after_free(%shard: tensor<4xf32>) -> tensor<8xf32> {
  %full = fsdp.all_gather %shard {unit = @unit0, group_size = 2 : i64} : tensor<4xf32> -> tensor<8xf32>
  %w = fsdp.param_view %full {param = "w", offset = 0 : i64} : tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{value is used after it is freed}}
  fsdp.free %full : tensor<8xf32>
  %r = graph.neg %w : tensor<8xf32>
  return %r : tensor<8xf32>
}
