// RUN: fsdp-opt %s -split-input-file -verify-diagnostics -graph-append-loss '-graph-mixed-precision=param-dtype=fp8'

// Tests that an unknown low-precision type is refused.
// expected-error @+1 {{graph-mixed-precision: param-dtype must be bf16 or f16, got 'fp8'}}
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}) -> (tensor<4x5xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}
