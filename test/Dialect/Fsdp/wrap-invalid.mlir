// RUN: fsdp-opt %s -split-input-file -fsdp-wrap=policy=sizes:4 -verify-diagnostics
// RUN: not fsdp-opt %s -fsdp-wrap=policy=size:0 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not fsdp-opt %s -fsdp-wrap='policy=module:(' 2>&1 | FileCheck %s --check-prefix=REGEX

// Tests that unknown policies, a bad size and a bad regex are clear errors.
// expected-error @+1 {{fsdp-wrap: unknown policy 'sizes:4' (expected none, size:N or module:REGEX)}}
module {
  func.func @train_step(%w: tensor<4xf32> {graph.param = "w"}) -> (tensor<f32> {graph.loss}) {
    %0 = graph.constant dense<0.0> : tensor<f32>
    return %0 : tensor<f32>
  }
}
// SIZE: size:N needs a positive integer N, got '0'
// REGEX: fsdp-wrap: module:( is not a valid regex
