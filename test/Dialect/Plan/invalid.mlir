// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// Tests that the loss names a scalar tensor of the program.
// expected-error @+1 {{loss must be a scalar f32 tensor, got 'tensor<4xf32>'}}
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<4xf32>
}

// -----

// Tests that kernels reference declared tensors.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{references @nope, which is not a plan.tensor}}
  plan.kernel "copy" ins [@nope] outs [@l] on compute
}

// -----

// Tests that kernels run on the compute stream.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{kernels run on the compute stream}}
  plan.kernel "fill" ins [] outs [@l] on communication
}

// -----

// Tests that parameters carry their ONNX name.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{of kind parameter needs a source_name}}
  plan.tensor @w parameter : tensor<3xf32>
}

// -----

// Tests that persistent tensors do not overlap once allocated.
// expected-error @+1 {{persistent tensors overlap at byte 0}}
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd", persistent_bytes = 64 : i64, transient_bytes = 64 : i64} {
  plan.tensor @l transient : tensor<f32> {offset = 0 : i64}
  plan.tensor @a parameter : tensor<3xf32> {source_name = "a", offset = 0 : i64}
  plan.tensor @b parameter : tensor<3xf32> {source_name = "b", offset = 0 : i64}
}

// -----

// Tests that collectives check their reduction.
plan.program @p attributes {world_size = 2 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @a transient : tensor<4xf32>
  // expected-error @+1 {{takes no reduction}}
  plan.collective all_gather ins [@a] outs [@a] on communication {group_size = 2 : i64, reduction = #plan.reduction<sum>}
}

// -----

// Tests that a view stays inside its base.
plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @flat transient : tensor<8xf32>
  // expected-error @+1 {{bytes [16, 48) are outside its base of 32 bytes}}
  plan.tensor @v view : tensor<8xf32> {view_of = @flat, view_offset = 16 : i64}
}

// -----

// Tests that only views name a base.
plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{view_of and view_offset are set exactly for kind view}}
  plan.tensor @v transient : tensor<8xf32> {view_of = @l, view_offset = 0 : i64}
}

// -----

// Tests that a unit's shard is a parameter tensor of that unit.
plan.program @p attributes {world_size = 2 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd", shard_group_size = 2 : i64} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @s transient : tensor<8xf32>
  // expected-error @+1 {{shard @s must be a parameter tensor of unit "u"}}
  plan.unit "u" params ["w"] : [tensor<5x3xf32>] flat_size 15 padded_size 16 shard @s
}

// -----

// Tests that the shards of a unit make its padded size.
plan.program @p attributes {world_size = 2 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd", shard_group_size = 2 : i64} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @s parameter : tensor<7xf32> {source_name = "u.flat_param", unit = "u"}
  // expected-error @+1 {{shard of 7 elements on 2 rank(s) does not make padded_size 16}}
  plan.unit "u" params ["w"] : [tensor<5x3xf32>] flat_size 15 padded_size 16 shard @s
}

// -----

// Tests that flat_size is the parameters' element count.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @s parameter : tensor<16xf32> {source_name = "u.flat_param", unit = "u"}
  // expected-error @+1 {{flat_size (14) must be the parameters' element count (15)}}
  plan.unit "u" params ["w"] : [tensor<5x3xf32>] flat_size 14 padded_size 16 shard @s
}

// -----

// Tests that the gradient norm names a one-element f32 tensor.
// expected-error @+1 {{grad_norm must name a tensor<1xf32> of this program}}
plan.program @train_step attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @loss, loss_kind = #plan.loss_kind<mse>,
                                     optimizer = "sgd", grad_norm = @loss} {
  plan.tensor @loss transient : tensor<f32>
}

// -----

// Tests that an instruction computes the forward pass's loss: the prefix
// an evaluation runs ends there.
// expected-error @+1 {{forward_loss @partial is written by no instruction}}
plan.program @train_step attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @loss, loss_kind = #plan.loss_kind<mse>,
                                     optimizer = "sgd", forward_loss = @partial} {
  plan.tensor @loss transient : tensor<f32>
  plan.tensor @partial transient : tensor<f32>
  plan.kernel "fill" ins [] outs [@loss] on compute {value = 0.0 : f64}
}

// -----

// Tests that the importer's initializer rewrites are known kinds.
// expected-error @+1 {{initializer rewrite kind must be identity_copy or transposed_tie, got 'renamed'}}
plan.program @train_step attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @loss, loss_kind = #plan.loss_kind<mse>,
                                     optimizer = "sgd", initializer_rewrites = [["renamed", "a", "b"]]} {
  plan.tensor @loss transient : tensor<f32>
}

// -----

// Tests that torch names are pairs.
// expected-error @+1 {{torch_names must be [parameter, torch name] string pairs}}
plan.program @train_step attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @loss, loss_kind = #plan.loss_kind<mse>,
                                     optimizer = "sgd", torch_names = [["onnx::MatMul_1"]]} {
  plan.tensor @loss transient : tensor<f32>
}

// -----

// Tests that a device kernel does not touch host memory (plan-offload
// stages it through a plan.copy).
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @h transient : tensor<f32> {host}
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{runs on the device but touches @h, which is on the host}}
  plan.kernel "copy" ins [@h] outs [@l] on compute
}

// -----

// Tests that a host kernel touches host memory only.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @h transient : tensor<f32> {host}
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{runs on the host but touches @l, which is in device memory}}
  plan.kernel "copy" ins [@h] outs [@l] on compute {on_host}
}

// -----

// Tests that a collective does not touch host memory.
plan.program @p attributes {world_size = 2 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @h transient : tensor<2xf32> {host}
  plan.tensor @a transient : tensor<4xf32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{runs on the device but touches @h, which is on the host}}
  plan.collective all_gather ins [@h] outs [@a] on communication {group_size = 2 : i64}
}

// -----

// Tests that a copy goes between host and device.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @a transient : tensor<f32>
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{copies between host and device, but @a and @l are both in device memory}}
  plan.copy @a to @l on compute
}

// -----

// Tests that a copy keeps the type.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @h transient : tensor<2xf32> {host}
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{copies 'tensor<2xf32>' into 'tensor<f32>'}}
  plan.copy @h to @l on compute
}

// -----

// Tests that only sharded state and transients can be on the host.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  // expected-error @+1 {{of kind constant cannot be on the host}}
  plan.tensor @c constant : tensor<f32> {host, value = dense<1.0> : tensor<f32>}
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that a label count is an i64 scalar naming its labels.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  // expected-error @+1 {{of kind label_count must be tensor<i64> with the owner whose labels it counts}}
  plan.tensor @n label_count : tensor<i64>
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that only inputs can be labels.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  // expected-error @+1 {{of kind transient cannot be a label; labels are inputs}}
  plan.tensor @t transient : tensor<4xf32> {label}
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that a negative offset is an error (I64Attr's getter is unsigned).
plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{offset must be non-negative}}
  plan.tensor @t transient : tensor<4xf32> {offset = -16 : i64}
}

// -----

// Tests that a view may not start before its base.
plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @flat transient : tensor<8xf32>
  // expected-error @+1 {{bytes [-4, 12) are outside its base of 32 bytes}}
  plan.tensor @v view : tensor<4xf32> {view_of = @flat, view_offset = -4 : i64}
}

// -----

// Tests that a negative padded size is an error, not a huge one.
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @s parameter : tensor<16xf32> {source_name = "u.flat_param", unit = "u"}
  // expected-error @+1 {{padded_size (-16) must be at least flat_size (15)}}
  plan.unit "u" params ["w"] : [tensor<5x3xf32>] flat_size 15 padded_size -16 shard @s
}

// -----

// Tests that events are non-negative.
plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{event must be non-negative}}
  plan.record_event -1 on compute
}

// -----

plan.program @p attributes {world_size = 1 : i64, global_batch = 1 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  // expected-error @+1 {{event must be non-negative}}
  plan.wait_event -2 on communication
}

// -----

// Tests that the world size is positive (read signed).
// expected-error @+1 {{world_size must be positive, got -2}}
plan.program @p attributes {world_size = -2 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that the global batch is positive (read signed).
// expected-error @+1 {{global_batch must be positive, got -4}}
plan.program @p attributes {world_size = 1 : i64, global_batch = -4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that shard groups divide the world.
// expected-error @+1 {{shard_group_size must be positive and divide world_size (4), got 3}}
plan.program @p attributes {world_size = 4 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd", shard_group_size = 3 : i64} {
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that a collective's group is positive (read signed).
plan.program @p attributes {world_size = 2 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @shard transient : tensor<4xf32>
  plan.tensor @full transient : tensor<8xf32>
  // expected-error @+1 {{group_size and group_stride must be positive}}
  plan.collective all_gather ins [@shard] outs [@full] on communication {group_size = -2 : i64, group_stride = 1 : i64}
}

// -----

// Tests that a training program says which loss it ends in.
// expected-error @+1 {{has a loss but no loss_kind}}
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that a forward-only program has no loss kind.
// expected-error @+1 {{has a loss_kind but no loss}}
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss_kind = #plan.loss_kind<mse>, optimizer = "", outputs = [@y]} {
  plan.tensor @y transient : tensor<4xf32>
}

// -----

// Tests that the loss kind is one the runtime knows.
// expected-error @+2 {{expected ::fsdpc::plan_ir::LossKind to be one of: cross_entropy, mse, output}}
// expected-error @+1 {{failed to parse Plan_LossKindAttr parameter}}
plan.program @p attributes {world_size = 1 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<hinge>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
}

// -----

// Tests that a collective is one of the three the runtime runs.
plan.program @p attributes {world_size = 2 : i64, global_batch = 4 : i64, loss = @l, loss_kind = #plan.loss_kind<mse>, optimizer = "sgd"} {
  plan.tensor @l transient : tensor<f32>
  plan.tensor @a transient : tensor<4xf32>
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'collective' [all_gather, reduce_scatter, all_reduce]}}
  plan.collective broadcast ins [@a] outs [@a] on communication {group_size = 2 : i64}
}
