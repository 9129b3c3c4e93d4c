// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s

// Tests that a unit and its collectives print and parse back.
// CHECK: fsdp.unit @unit0 params ["fc1.weight", "fc1.bias"] : [tensor<2x10xf32>, tensor<2xf32>] flat_size 22 padded_size 24
fsdp.unit @unit0 params ["fc1.weight", "fc1.bias"] : [tensor<2x10xf32>, tensor<2xf32>] flat_size 22 padded_size 24
// CHECK-LABEL: func.func @collectives
func.func @collectives(%shard: tensor<6xf32>, %gw: tensor<2x10xf32>, %gb: tensor<2xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  // CHECK: fsdp.flatten %{{.*}}, %{{.*}} {unit = @unit0} : tensor<2x10xf32>, tensor<2xf32> -> tensor<24xf32>
  %flat = fsdp.flatten %gw, %gb {unit = @unit0} : tensor<2x10xf32>, tensor<2xf32> -> tensor<24xf32>
  // CHECK: fsdp.all_gather %{{.*}} {group_size = 4 : i64, unit = @unit0} : tensor<6xf32> -> tensor<24xf32>
  %full = fsdp.all_gather %shard {unit = @unit0, group_size = 4 : i64} : tensor<6xf32> -> tensor<24xf32>
  // CHECK: fsdp.param_view %{{.*}} {offset = 20 : i64, param = "fc1.bias"} : tensor<24xf32> -> tensor<2xf32>
  %b = fsdp.param_view %full {param = "fc1.bias", offset = 20 : i64} : tensor<24xf32> -> tensor<2xf32>
  // CHECK: fsdp.free
  fsdp.free %full : tensor<24xf32>
  // CHECK: fsdp.reduce_scatter
  %g = fsdp.reduce_scatter %flat {unit = @unit0, reduction = "avg", group_size = 4 : i64} : tensor<24xf32> -> tensor<6xf32>
  // CHECK: fsdp.all_reduce {{.*}} group_stride = 2
  %r = fsdp.all_reduce %g {unit = @unit0, reduction = "avg", group_size = 2 : i64, group_stride = 2 : i64} : tensor<6xf32>
  // CHECK: fsdp.shard
  %s = fsdp.shard %flat {group_size = 4 : i64} : tensor<24xf32> -> tensor<6xf32>
  return %r, %s : tensor<6xf32>, tensor<6xf32>
}
