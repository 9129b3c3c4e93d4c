// RUN: fsdp-opt %s -split-input-file -graph-append-loss -verify-diagnostics

// Tests that cross entropy refuses logits of the wrong rank.
// expected-error @+1 {{cross_entropy needs logits [B, C] or [B, T, C]}}
func.func @forward(%x: tensor<4xf32> {graph.input = "input"}) -> (tensor<4xf32> {graph.output = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// Tests that a module without @forward is an error.
// expected-error @+1 {{graph-append-loss: the module has no function @forward}}
module {
  func.func @other() {
    return
  }
}
