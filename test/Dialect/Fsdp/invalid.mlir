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
  %g = fsdp.reduce_scatter %flat {unit = @nope, reduction = #fsdp.reduction<avg>, group_size = 4 : i64} : tensor<24xf32> -> tensor<6xf32>
  return %g : tensor<6xf32>
}

// -----

// Tests that reductions are sum or avg.
fsdp.unit @unit0 params ["w"] : [tensor<6xf32>] flat_size 6 padded_size 6
func.func @bad_reduction(%g: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+2 {{expected ::fsdpc::Reduction to be one of: sum, avg}}
  // expected-error @+1 {{failed to parse Fsdp_ReductionAttr parameter}}
  %r = fsdp.all_reduce %g {unit = @unit0, reduction = #fsdp.reduction<max>, group_size = 2 : i64} : tensor<6xf32>
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

// -----

// Tests that a bucket holds at least two collectives.
fsdp.unit @a params ["a.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
func.func @bucket_of_one(%sa: tensor<8xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{must hold at least two collectives, got 1}}
  %full = fsdp.bucket {
    %a = fsdp.all_gather %sa {unit = @a, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    fsdp.yield %a : tensor<16xf32>
  } : tensor<16xf32>
  return %full : tensor<16xf32>
}

// -----

// Tests that a bucket's members are one kind of collective.
fsdp.unit @a params ["a.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
fsdp.unit @b params ["b.w"] : [tensor<8xf32>] flat_size 8 padded_size 8
func.func @mixed_kinds(%sa: tensor<8xf32>, %gb: tensor<8xf32>) -> (tensor<16xf32>, tensor<4xf32>) {
  // expected-error @+1 {{members must be one kind of collective, got fsdp.all_gather and fsdp.reduce_scatter}}
  %r:2 = fsdp.bucket {
    %a = fsdp.all_gather %sa {unit = @a, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = fsdp.reduce_scatter %gb {unit = @b, reduction = #fsdp.reduction<avg>, group_size = 2 : i64} : tensor<8xf32> -> tensor<4xf32>
    fsdp.yield %a, %b : tensor<16xf32>, tensor<4xf32>
  } : tensor<16xf32>, tensor<4xf32>
  return %r#0, %r#1 : tensor<16xf32>, tensor<4xf32>
}

// -----

// Tests that a bucket's members share their group.
fsdp.unit @a params ["a.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
fsdp.unit @b params ["b.w"] : [tensor<8xf32>] flat_size 8 padded_size 8
func.func @mixed_groups(%sa: tensor<8xf32>, %sb: tensor<2xf32>) -> (tensor<16xf32>, tensor<8xf32>) {
  // expected-error @+1 {{members must share group, reduction and element type; @b differs from @a}}
  %r:2 = fsdp.bucket {
    %a = fsdp.all_gather %sa {unit = @a, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = fsdp.all_gather %sb {unit = @b, group_size = 4 : i64} : tensor<2xf32> -> tensor<8xf32>
    fsdp.yield %a, %b : tensor<16xf32>, tensor<8xf32>
  } : tensor<16xf32>, tensor<8xf32>
  return %r#0, %r#1 : tensor<16xf32>, tensor<8xf32>
}

// -----

// Tests that a bucket holds a unit once.
fsdp.unit @a params ["a.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
func.func @unit_twice(%sa: tensor<8xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  // expected-error @+1 {{holds unit @a twice}}
  %r:2 = fsdp.bucket {
    %a = fsdp.all_gather %sa {unit = @a, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = fsdp.all_gather %sa {unit = @a, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    fsdp.yield %a, %b : tensor<16xf32>, tensor<16xf32>
  } : tensor<16xf32>, tensor<16xf32>
  return %r#0, %r#1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that a bucket yields its members' results in order.
fsdp.unit @a params ["a.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
fsdp.unit @b params ["b.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
func.func @yield_order(%sa: tensor<8xf32>, %sb: tensor<8xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  // expected-error @+1 {{yield operand 0 must be the result of member 0}}
  %r:2 = fsdp.bucket {
    %a = fsdp.all_gather %sa {unit = @a, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = fsdp.all_gather %sb {unit = @b, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    fsdp.yield %b, %a : tensor<16xf32>, tensor<16xf32>
  } : tensor<16xf32>, tensor<16xf32>
  return %r#0, %r#1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests that only gathered tensors, also through a bucket, are freed.
fsdp.unit @a params ["a.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
fsdp.unit @b params ["b.w"] : [tensor<8xf32>] flat_size 8 padded_size 8
func.func @free_reduced(%ga: tensor<16xf32>, %gb: tensor<8xf32>) {
  %r:2 = fsdp.bucket {
    %a = fsdp.reduce_scatter %ga {unit = @a, reduction = #fsdp.reduction<avg>, group_size = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
    %b = fsdp.reduce_scatter %gb {unit = @b, reduction = #fsdp.reduction<avg>, group_size = 2 : i64} : tensor<8xf32> -> tensor<4xf32>
    fsdp.yield %a, %b : tensor<8xf32>, tensor<4xf32>
  } : tensor<8xf32>, tensor<4xf32>
  // expected-error @+1 {{operand must be the result of fsdp.all_gather}}
  fsdp.free %r#0 : tensor<8xf32>
  return
}

// -----

// Tests that a negative padded size is an error (I64Attr's getter is unsigned).
// expected-error @+1 {{padded_size (-8) must be at least flat_size (6) and flat_size positive}}
fsdp.unit @unit0 params ["w"] : [tensor<2x3xf32>] flat_size 6 padded_size -8

// -----

// Tests that a parameter view does not start before the flat tensor.
func.func @view_before(%flat: tensor<8xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{elements [-1, 5) are outside the flat tensor of 8 elements}}
  %w = fsdp.param_view %flat {param = "w", offset = -1 : i64} : tensor<8xf32> -> tensor<2x3xf32>
  return %w : tensor<2x3xf32>
}

// -----

// Tests that shard's group size is positive.
func.func @shard_negative_group(%flat: tensor<24xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{group_size must be positive}}
  %s = fsdp.shard %flat {group_size = -4 : i64} : tensor<24xf32> -> tensor<6xf32>
  return %s : tensor<6xf32>
}
