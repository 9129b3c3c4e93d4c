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
  %g = fsdp.reduce_scatter %flat {unit = @unit0, reduction = #fsdp.reduction<avg>, group_size = 4 : i64} : tensor<24xf32> -> tensor<6xf32>
  // CHECK: fsdp.all_reduce {{.*}} group_stride = 2
  %r = fsdp.all_reduce %g {unit = @unit0, reduction = #fsdp.reduction<avg>, group_size = 2 : i64, group_stride = 2 : i64} : tensor<6xf32>
  // CHECK: fsdp.shard
  %s = fsdp.shard %flat {group_size = 4 : i64} : tensor<24xf32> -> tensor<6xf32>
  return %r, %s : tensor<6xf32>, tensor<6xf32>
}

// -----

// A bucket of two gathers; its results are views' and frees' operands.
fsdp.unit @a params ["a.w"] : [tensor<16xf32>] flat_size 16 padded_size 16
fsdp.unit @b params ["b.w"] : [tensor<8xf32>] flat_size 8 padded_size 8
// CHECK-LABEL: func.func @bucket
func.func @bucket(%sa: tensor<8xf32>, %sb: tensor<4xf32>) -> tensor<4x2xf32> {
  // CHECK: %[[F:.*]]:2 = fsdp.bucket {
  // CHECK-NEXT: %[[A:.*]] = fsdp.all_gather %{{.*}} {group_size = 2 : i64, unit = @a} : tensor<8xf32> -> tensor<16xf32>
  // CHECK-NEXT: %[[B:.*]] = fsdp.all_gather %{{.*}} {group_size = 2 : i64, unit = @b} : tensor<4xf32> -> tensor<8xf32>
  // CHECK-NEXT: fsdp.yield %[[A]], %[[B]] : tensor<16xf32>, tensor<8xf32>
  // CHECK-NEXT: } : tensor<16xf32>, tensor<8xf32>
  %full:2 = fsdp.bucket {
    %a = fsdp.all_gather %sa {unit = @a, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %b = fsdp.all_gather %sb {unit = @b, group_size = 2 : i64} : tensor<4xf32> -> tensor<8xf32>
    fsdp.yield %a, %b : tensor<16xf32>, tensor<8xf32>
  } : tensor<16xf32>, tensor<8xf32>
  // CHECK: fsdp.param_view %[[F]]#1
  %w = fsdp.param_view %full#1 {param = "b.w", offset = 0 : i64} : tensor<8xf32> -> tensor<4x2xf32>
  // CHECK: fsdp.free %[[F]]#0
  fsdp.free %full#0 : tensor<16xf32>
  return %w : tensor<4x2xf32>
}
