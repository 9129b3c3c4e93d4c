// RUN: fsdp-opt %s -split-input-file -fsdp-shard=strategy=everything -verify-diagnostics
// RUN: not fsdp-opt %s -split-input-file '-fsdp-shard=strategy=hybrid_shard world-size=4 shard-group-size=3' 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not fsdp-opt %s -split-input-file '-fsdp-shard=strategy=full_shard world-size=4 shard-group-size=2' 2>&1 | FileCheck %s --check-prefix=NOTHYBRID
// RUN: not fsdp-opt %s -split-input-file -fsdp-shard=world-size=2 2>&1 | FileCheck %s --check-prefix=NOUNITS

// Tests that options are checked: an unknown strategy, a shard group that
// does not divide the world, a group size without hybrid_shard, and a module
// with trainable parameters that fsdp-wrap has not run on.
// GROUP: error: fsdp-shard: hybrid_shard needs a shard-group-size that divides the world size 4, got 3
// NOTHYBRID: error: fsdp-shard: shard-group-size applies only to hybrid_shard, not full_shard
// NOUNITS: error: fsdp-shard: the module has no fsdp.unit; run fsdp-wrap first
// expected-error @+1 {{fsdp-shard: unknown strategy 'everything' (expected full_shard, shard_grad_op, no_shard or hybrid_shard)}}
func.func @train_step(%x: tensor<4xf32> {graph.input = "x"}, %w: tensor<4xf32> {graph.param = "w"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.mse_loss %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
