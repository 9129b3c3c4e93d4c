// RUN: not fsdp-opt %s -graph-append-loss="loss='cross_entropy(start_logits, a) * cross_entropy(end_logits, b)'" 2>&1 | FileCheck %s --check-prefix=MUL
// RUN: not fsdp-opt %s -graph-append-loss="loss='cross_entropy(start_logits, a) + 1'" 2>&1 | FileCheck %s --check-prefix=ADDNUM
// RUN: not fsdp-opt %s -graph-append-loss="loss='2 / cross_entropy(start_logits, a)'" 2>&1 | FileCheck %s --check-prefix=DIVLOSS
// RUN: not fsdp-opt %s -graph-append-loss="loss='cross_entropy(start_logits, a) / 0'" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not fsdp-opt %s -graph-append-loss="loss='cross_entropy(logits, a)'" 2>&1 | FileCheck %s --check-prefix=NOOUT
// RUN: not fsdp-opt %s -graph-append-loss="loss='cross_entropy(start_logits, input)'" 2>&1 | FileCheck %s --check-prefix=COLLIDE
// RUN: not fsdp-opt %s -graph-append-loss="loss='cross_entropy(start_logits, y) + mse(end_logits, y)'" 2>&1 | FileCheck %s --check-prefix=TYPES
// RUN: not fsdp-opt %s -graph-append-loss="loss='nll(start_logits)'" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not fsdp-opt %s -graph-append-loss="loss='output'" 2>&1 | FileCheck %s --check-prefix=NONAME
// RUN: not fsdp-opt %s -graph-append-loss="loss='(cross_entropy(start_logits, a)'" 2>&1 | FileCheck %s --check-prefix=PAREN
// RUN: not fsdp-opt %s -graph-append-loss="loss='cross_entropy(start_logits, a))'" 2>&1 | FileCheck %s --check-prefix=TRAILING
// RUN: not fsdp-opt %s -graph-append-loss="loss='3'" 2>&1 | FileCheck %s --check-prefix=NUMBER
// RUN: not fsdp-opt %s -graph-append-loss="loss='mse(start_logits, a, b)'" 2>&1 | FileCheck %s --check-prefix=ARGS
// RUN: not fsdp-opt %s -graph-append-loss="loss='output(start_logits)'" 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: not fsdp-opt %s -graph-append-loss="loss='mse(start_logits, t)' loss-mean=global" 2>&1 | FileCheck %s --check-prefix=GLOBALMSE
// RUN: not fsdp-opt %s -graph-append-loss="loss-mean=all" 2>&1 | FileCheck %s --check-prefix=MEAN

// Tests that a --loss expression that is not a weighted sum of losses of
// the model's outputs, or whose names do not fit the model, is an error
// that says why.
// MUL: error: graph-append-loss: --loss 'cross_entropy(start_logits, a) * cross_entropy(end_logits, b)' multiplies two losses; the loss must be a weighted sum of losses
// ADDNUM: error: graph-append-loss: --loss '{{.*}}' adds a number to a loss, which changes no gradient
// DIVLOSS: error: graph-append-loss: --loss '{{.*}}' divides by a loss
// ZERO: error: graph-append-loss: --loss '{{.*}}' divides by zero
// NOOUT: error: graph-append-loss: --loss names no model output 'logits' (the outputs: start_logits, end_logits, aux_loss)
// COLLIDE: error: graph-append-loss: the labels 'input' have the name of a model input; name them otherwise in --loss
// TYPES: error: graph-append-loss: the labels 'y' are read as 'tensor<4xi64>' and as 'tensor<4x6xf32>'
// UNKNOWN: error: graph-append-loss: --loss '{{.*}}' unknown loss 'nll' (expected cross_entropy, mse or output(NAME))
// NONAME: error: graph-append-loss: --loss '{{.*}}' output needs the name of the model output that is the loss: output(NAME)
// PAREN: error: graph-append-loss: --loss '{{.*}}' a '(' is not closed
// TRAILING: error: graph-append-loss: --loss '{{.*}}' unexpected ')'
// NUMBER: error: graph-append-loss: --loss '{{.*}}' names no loss (expected cross_entropy, mse or output(NAME))
// ARGS: error: graph-append-loss: --loss '{{.*}}' mse(...) takes an output and its labels, got 3
// SCALAR: error: graph-append-loss: the loss output 'start_logits' must be a scalar f32, got 'tensor<4x6xf32>'
// GLOBALMSE: error: graph-append-loss: --loss-mean global divides a cross entropy by the labels it counts over the step; the loss 'mse(start_logits, t)' has none
// MEAN: error: graph-append-loss: --loss-mean must be local or global, got 'all'
func.func @forward(%x: tensor<4x6x3xf32> {graph.input = "input"}, %w: tensor<2x3xf32> {graph.param = "w"}) -> (tensor<4x6xf32> {graph.output = "start_logits"}, tensor<4x6xf32> {graph.output = "end_logits"}, tensor<f32> {graph.output = "aux_loss"}) {
  %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x6x3xf32>, tensor<2x3xf32>) -> tensor<4x6x2xf32>
  %1 = graph.reshape %0 : (tensor<4x6x2xf32>) -> tensor<4x12xf32>
  %2 = graph.slice %1 {starts = array<i64: 0, 0>, steps = array<i64: 1, 2>} : (tensor<4x12xf32>) -> tensor<4x6xf32>
  %3 = graph.slice %1 {starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : (tensor<4x12xf32>) -> tensor<4x6xf32>
  %4 = graph.mse_loss %2, %3 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
  return %2, %3, %4 : tensor<4x6xf32>, tensor<4x6xf32>, tensor<f32>
}
