// RUN: fsdp-opt %s -split-input-file -fsdp-wrap | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s -split-input-file -fsdp-wrap=policy=size:40 | FileCheck %s --check-prefix=SIZE
// RUN: fsdp-opt %s -split-input-file '-fsdp-wrap=policy=module:blocks\.[0-9]+' | FileCheck %s --check-prefix=MODULE

// Tests the three policies on a model with an embedding, two blocks of two
// layers and a head; frozen parameters stay outside units.
// NONE: fsdp.unit @root params ["embed.weight", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.out.weight", "blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.out.weight", "head.weight"] : [tensor<5x4xf32>, {{.*}}, tensor<5x3xf32>] flat_size 99 padded_size 99
// NONE-NOT: fsdp.unit
// NONE-LABEL: func.func @train_step
// NONE-SAME: {fsdp.unit = @root, graph.param = "embed.weight"}
// NONE-SAME: {graph.frozen_param = "norm.scale"}
// NONE: graph.mul %arg0, %arg9 {fsdp.uses = [@root]}

// size:40 closes a unit at the end of the module that reaches 40 parameters:
// embed (20) + blocks.0.fc (12+4) + blocks.0.out (16) = 52; blocks.1.* = 32
// and head (15) = 47; nothing is left for the root.
// SIZE: fsdp.unit @unit0 params ["embed.weight", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.out.weight"] : [{{.*}}] flat_size 52
// SIZE: fsdp.unit @unit1 params ["blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.out.weight", "head.weight"] : [{{.*}}] flat_size 47
// SIZE-NOT: fsdp.unit @root

// module:blocks\.[0-9]+ makes one unit per block; the rest go to the root.
// MODULE: fsdp.unit @blocks.0 params ["blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.out.weight"] : [tensor<3x4xf32>, tensor<4xf32>, tensor<4x4xf32>] flat_size 32
// MODULE: fsdp.unit @blocks.1 params ["blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.out.weight"] : [{{.*}}] flat_size 32
// MODULE: fsdp.unit @root params ["embed.weight", "head.weight"] : [{{.*}}] flat_size 35
// MODULE: graph.matmul {{.*}} {fsdp.uses = [@blocks.0]
func.func @train_step(%embed: tensor<5x4xf32> {graph.param = "embed.weight"},
                      %w0: tensor<3x4xf32> {graph.param = "blocks.0.fc.weight"}, %b0: tensor<4xf32> {graph.param = "blocks.0.fc.bias"},
                      %o0: tensor<4x4xf32> {graph.param = "blocks.0.out.weight"},
                      %w1: tensor<3x4xf32> {graph.param = "blocks.1.fc.weight"}, %b1: tensor<4xf32> {graph.param = "blocks.1.fc.bias"},
                      %o1: tensor<4x4xf32> {graph.param = "blocks.1.out.weight"},
                      %head: tensor<5x3xf32> {graph.param = "head.weight"},
                      %norm: tensor<4xf32> {graph.frozen_param = "norm.scale"},
                      %x: tensor<5x4xf32> {graph.input = "input"}) -> (tensor<f32> {graph.loss}) {
  %0 = graph.mul %embed, %x : (tensor<5x4xf32>, tensor<5x4xf32>) -> tensor<5x4xf32>
  %1 = graph.matmul %0, %w0 {transpose_b = true} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %2 = graph.mse_loss %1, %head : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
