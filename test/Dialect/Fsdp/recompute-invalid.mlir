// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=units:fc1|fc2' -verify-diagnostics
// RUN: not fsdp-opt %s -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=layers:fc1' 2>&1 | FileCheck %s --check-prefix=CLAUSE
// RUN: not fsdp-opt %s -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=units:(' 2>&1 | FileCheck %s --check-prefix=REGEX

// Tests that fsdp-recompute refuses units whose forward segments overlap (fc1
// is read at both ends of forward, a tied weight, around fc2), a clause that
// is not units: or cheap:, and a bad regex.
// CLAUSE: fsdp-recompute: policy clause 'layers:fc1' is not units:REGEX or cheap:REGEX
// REGEX: fsdp-recompute: bad regex '('
// expected-error @+1 {{'fsdp.unit' op fsdp-recompute: the forward of unit @fc2 overlaps that of @fc1; recompute units whose forward segments are disjoint}}
func.func @forward(%x: tensor<4x5xf32> {graph.input = "input"},
                   %w1: tensor<5x5xf32> {graph.param = "fc1.weight"},
                   %w2: tensor<5x5xf32> {graph.param = "fc2.weight"}) -> (tensor<4x5xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %1 = graph.tanh %0 : tensor<4x5xf32>
  %2 = graph.matmul %1, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %3 = graph.tanh %2 : tensor<4x5xf32>
  %4 = graph.matmul %3, %w1 : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  return %4 : tensor<4x5xf32>
}
