// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=units:fc1' | FileCheck %s --check-prefix=UNITS
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=cheap:fc1' | FileCheck %s --check-prefix=CHEAP
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=units:fc1' -fsdp-shard=world-size=2 | FileCheck %s --check-prefix=GATHER
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' '-fsdp-recompute=policy=units:fc2;cheap:fc1' | FileCheck %s --check-prefix=CLAUSES
// RUN: fsdp-opt %s -split-input-file -fsdpc-train-step '-fsdp-wrap=policy=module:fc[0-9]' -fsdp-recompute | FileCheck %s --check-prefix=NONE

// Tests fsdp-recompute on an MLP whose unit fc1 holds two layers with a
// tanh between them (fc1.a, fc1.b) and whose unit fc2 is the head.

// units:fc1 replays fc1's forward from its input just before the first
// backward op that reads one of its activations (the tanh output, for fc1.b's
// weight gradient and the tanh gradient); backward reads the replayed values,
// forward's are left to forward; the replayed ops carry fsdp.recompute.
// UNITS-LABEL: func.func @train_step
// UNITS-SAME: (%[[X:[a-z0-9]+]]: tensor<4x3xf32> {graph.input = "input"}, %[[WA:[a-z0-9]+]]: tensor<5x3xf32> {fsdp.unit = @fc1
// UNITS: %[[A:.*]] = graph.matmul %[[X]], %[[WA]] {fsdp.uses = [@fc1], transpose_b = true}
// UNITS-NEXT: %[[T:.*]] = graph.tanh %[[A]] : tensor<4x5xf32>
// UNITS-NEXT: graph.matmul %[[T]], %{{.*}} {fsdp.uses = [@fc1], transpose_b = true}
// UNITS: graph.softmax_cross_entropy_grad
// UNITS: %[[DX:.*]] = graph.matmul %{{.*}}, %{{.*}} {fsdp.uses = [@fc1]} : (tensor<4x6xf32>, tensor<6x5xf32>)
// UNITS-NEXT: %[[RA:.*]] = graph.matmul %[[X]], %[[WA]] {fsdp.recompute = @fc1, fsdp.uses = [@fc1], transpose_b = true}
// UNITS-NEXT: %[[RT:.*]] = graph.tanh %[[RA]] {fsdp.recompute = @fc1} : tensor<4x5xf32>
// UNITS-NEXT: graph.matmul %{{.*}}, %[[RT]] {transpose_a = true}
// UNITS-NEXT: graph.tanh_grad %[[RT]], %[[DX]]
// UNITS-NOT: fsdp.recompute
// UNITS: return

// cheap:fc1 keeps the GEMM's output and replays only the tanh from it.
// CHEAP-LABEL: func.func @train_step
// CHEAP: %[[A:.*]] = graph.matmul %{{.*}}, %{{.*}} {fsdp.uses = [@fc1], transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>)
// CHEAP: graph.softmax_cross_entropy_grad
// CHEAP-NOT: graph.matmul {{.*}}fsdp.recompute
// CHEAP: %[[RT:.*]] = graph.tanh %[[A]] {fsdp.recompute = @fc1} : tensor<4x5xf32>
// CHEAP-NEXT: graph.matmul %{{.*}}, %[[RT]] {transpose_a = true}
// CHEAP-NEXT: graph.tanh_grad %[[RT]]
// CHEAP-NOT: fsdp.recompute

// After fsdp-shard, one all_gather of fc1 in backward serves the replay and
// fc1's backward together: two gathers of fc1 in all, not three.
// GATHER-LABEL: func.func @train_step
// GATHER-SAME: %[[S1:[a-z0-9]+]]: tensor<23xf32> {fsdp.shard_of = @fc1}
// GATHER: %[[F1:.*]] = fsdp.all_gather %[[S1]] {group_size = 2 : i64, unit = @fc1}
// GATHER: fsdp.free %[[F1]]
// GATHER: graph.softmax_cross_entropy_grad
// GATHER: %[[B1:.*]] = fsdp.all_gather %[[S1]] {group_size = 2 : i64, unit = @fc1}
// GATHER-NOT: fsdp.all_gather %[[S1]]
// GATHER: %[[V:.*]] = fsdp.param_view %[[B1]] {offset = 0 : i64, param = "fc1.a.weight"}
// GATHER: graph.matmul %{{.*}}, %[[V]] {fsdp.recompute = @fc1, fsdp.uses = [@fc1], transpose_b = true}
// GATHER: fsdp.free %[[B1]]
// GATHER-NOT: fsdp.all_gather %[[S1]]
// GATHER: return

// Clauses are tried in order, the first match deciding: fc2 (units:) has
// its head GEMM replayed for the loss gradient, which reads the logits; fc1
// (cheap:) has only its tanh replayed.
// CLAUSES-LABEL: func.func @train_step
// CLAUSES: %[[RL:.*]] = graph.matmul %{{.*}}, %{{.*}} {fsdp.recompute = @fc2, fsdp.uses = [@fc2], graph.prediction = "logits", transpose_b = true}
// CLAUSES-NEXT: graph.softmax_cross_entropy_grad %[[RL]]
// CLAUSES-NOT: graph.matmul {{.*}}fsdp.recompute = @fc1
// CLAUSES: graph.tanh %{{.*}} {fsdp.recompute = @fc1}

// The default policy, none, changes nothing.
// NONE-LABEL: func.func @train_step
// NONE-NOT: fsdp.recompute

func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"},
                   %wa: tensor<5x3xf32> {graph.param = "fc1.a.weight"}, %wb: tensor<6x5xf32> {graph.param = "fc1.b.weight"},
                   %w2: tensor<2x6xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %wa {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = graph.tanh %0 : tensor<4x5xf32>
  %2 = graph.matmul %1, %wb {transpose_b = true} : (tensor<4x5xf32>, tensor<6x5xf32>) -> tensor<4x6xf32>
  %3 = graph.tanh %2 : tensor<4x6xf32>
  %4 = graph.matmul %3, %w2 {transpose_b = true} : (tensor<4x6xf32>, tensor<2x6xf32>) -> tensor<4x2xf32>
  return %4 : tensor<4x2xf32>
}

// -----

// An op from an ONNX node of the unit's module is in its segment even if it
// reads no parameter: the closing residual add of a block, named
// /blocks.0/Add by torch's exporter, is replayed with the block.
// CHEAP-LABEL: func.func @train_step
// GATHER-LABEL: func.func @train_step
// CLAUSES-LABEL: func.func @train_step
// NONE-LABEL: func.func @train_step
// NONE-NOT: fsdp.recompute
// UNITS-LABEL: func.func @train_step
// UNITS: graph.softmax_cross_entropy_grad
// UNITS: %[[RM:.*]] = graph.matmul %{{.*}}, %{{.*}} {fsdp.recompute = @fc1, fsdp.uses = [@fc1], transpose_b = true}
// UNITS-NEXT: graph.add %[[RM]], %{{.*}} {fsdp.recompute = @fc1} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
func.func @forward(%x: tensor<4x5xf32> {graph.input = "input"},
                   %w1: tensor<5x5xf32> {graph.param = "fc1.weight"},
                   %w2: tensor<2x5xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %1 = graph.add %0, %x : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32> loc("/fc1/Add")
  %2 = graph.tanh %1 : tensor<4x5xf32>
  %3 = graph.mul %2, %1 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %4 = graph.matmul %3, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
  return %4 : tensor<4x2xf32>
}

// -----

// cheap:fc1 keeps a Linear layer's bias add and the residual add after it
// with their GEMM: the lowering folds both into the GEMM (matmul_bias with
// accumulate), which replaying an add alone would undo, rounding the step
// differently from one without recompute. The tanh is replayed.
// CHEAP-LABEL: func.func @train_step
// CHEAP: %[[M:.*]] = graph.matmul %{{.*}}, %{{.*}} {fsdp.uses = [@fc1], transpose_b = true}
// CHEAP-NEXT: %[[B:.*]] = graph.add %[[M]], %{{.*}} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHEAP-NEXT: %[[R:.*]] = graph.add %[[B]], %{{.*}} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
// CHEAP: graph.softmax_cross_entropy_grad
// CHEAP-NOT: graph.add {{.*}}fsdp.recompute
// CHEAP: graph.tanh %[[R]] {fsdp.recompute = @fc1}
// CHEAP-NOT: graph.add {{.*}}fsdp.recompute
// UNITS-LABEL: func.func @train_step
// GATHER-LABEL: func.func @train_step
// CLAUSES-LABEL: func.func @train_step
// NONE-LABEL: func.func @train_step
func.func @forward(%x: tensor<4x5xf32> {graph.input = "input"},
                   %w1: tensor<5x5xf32> {graph.param = "fc1.weight"}, %b1: tensor<5xf32> {graph.param = "fc1.bias"},
                   %w2: tensor<2x5xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w1 {transpose_b = true} : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %1 = graph.add %0, %b1 : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %2 = graph.add %1, %x : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32> loc("/fc1/Add")
  %3 = graph.tanh %2 : tensor<4x5xf32> loc("/fc1/Tanh")
  %4 = graph.mul %3, %3 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %5 = graph.matmul %4, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
  return %5 : tensor<4x2xf32>
}

// -----

// cheap:fc1 keeps a reshape between a Linear layer's bias add and the
// residual add (transformers' GPT-2 views [rows, N] as [batch, tokens, N])
// with the GEMM, as the lowering folds the residual add through it; the
// tanh is replayed.
// CHEAP-LABEL: func.func @train_step
// CHEAP: %[[M:.*]] = graph.matmul %{{.*}}, %{{.*}} {fsdp.uses = [@fc1], transpose_b = true}
// CHEAP-NEXT: %[[B:.*]] = graph.add %[[M]], %{{.*}} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHEAP-NEXT: %[[V:.*]] = graph.reshape %[[B]] : (tensor<4x5xf32>) -> tensor<2x2x5xf32>
// CHEAP-NEXT: %[[R:.*]] = graph.add %[[V]], %{{.*}} : (tensor<2x2x5xf32>, tensor<2x2x5xf32>) -> tensor<2x2x5xf32>
// CHEAP: graph.softmax_cross_entropy_grad
// CHEAP-NOT: fsdp.recompute = @fc1} : (tensor<4x5xf32>) -> tensor<2x2x5xf32>
// CHEAP-NOT: graph.add {{.*}}fsdp.recompute
// CHEAP: graph.tanh %[[R]] {fsdp.recompute = @fc1}
// CHEAP-NOT: graph.add {{.*}}fsdp.recompute
// UNITS-LABEL: func.func @train_step
// GATHER-LABEL: func.func @train_step
// CLAUSES-LABEL: func.func @train_step
// NONE-LABEL: func.func @train_step
func.func @forward(%x: tensor<2x2x5xf32> {graph.input = "input"},
                   %w1: tensor<5x5xf32> {graph.param = "fc1.weight"}, %b1: tensor<5xf32> {graph.param = "fc1.bias"},
                   %w2: tensor<2x5xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %rows = graph.reshape %x : (tensor<2x2x5xf32>) -> tensor<4x5xf32>
  %0 = graph.matmul %rows, %w1 {transpose_b = true} : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %1 = graph.add %0, %b1 : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %v = graph.reshape %1 : (tensor<4x5xf32>) -> tensor<2x2x5xf32> loc("/fc1/Reshape")
  %2 = graph.add %v, %x : (tensor<2x2x5xf32>, tensor<2x2x5xf32>) -> tensor<2x2x5xf32> loc("/fc1/Add")
  %3 = graph.tanh %2 : tensor<2x2x5xf32> loc("/fc1/Tanh")
  %4 = graph.mul %3, %3 : (tensor<2x2x5xf32>, tensor<2x2x5xf32>) -> tensor<2x2x5xf32>
  %5 = graph.reshape %4 : (tensor<2x2x5xf32>) -> tensor<4x5xf32>
  %6 = graph.matmul %5, %w2 {transpose_b = true} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
  return %6 : tensor<4x2xf32>
}

// -----

// cheap:fc1 keeps packed attention's output, as a GEMM's: it is not
// replayed, and the tanh after it is replayed from the kept output.
// CHEAP-LABEL: func.func @train_step
// CHEAP: %[[O:.*]], %{{.*}} = graph.packed_attention %{{.*}}, %{{.*}} {heads = 1 : i64, scale = 5.000000e-01 : f64}
// CHEAP: graph.softmax_cross_entropy_grad
// CHEAP-NOT: graph.packed_attention {{.*}}fsdp.recompute
// CHEAP: graph.tanh %[[O]] {fsdp.recompute = @fc1} : tensor<4x2xf32>
// CHEAP-NOT: graph.packed_attention {{.*}}fsdp.recompute
func.func @forward(%x: tensor<4x3xf32> {graph.input = "input"}, %m: tensor<4x4xi64> {graph.input = "mask"},
                   %wa: tensor<6x3xf32> {graph.param = "fc1.a.weight"}, %wb: tensor<3x2xf32> {graph.param = "fc1.b.weight"},
                   %w2: tensor<2x3xf32> {graph.param = "fc2.weight"}) -> (tensor<4x2xf32> {graph.output = "logits"}) {
  %qkv = graph.matmul %x, %wa {transpose_b = true} : (tensor<4x3xf32>, tensor<6x3xf32>) -> tensor<4x6xf32>
  %o, %lse = graph.packed_attention %qkv, %m {heads = 1 : i64, scale = 0.5 : f64} : (tensor<4x6xf32>, tensor<4x4xi64>) -> (tensor<4x2xf32>, tensor<1x4xf32>)
  %t = graph.tanh %o : tensor<4x2xf32>
  %h = graph.matmul %t, %wb {transpose_b = true} : (tensor<4x2xf32>, tensor<3x2xf32>) -> tensor<4x3xf32>
  %y = graph.matmul %h, %w2 {transpose_b = true} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
