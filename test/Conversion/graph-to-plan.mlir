// RUN: fsdp-opt %s -split-input-file -convert-graph-to-plan | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -convert-graph-to-plan=widen-gradients-in-updates=false | FileCheck %s --check-prefix=KEEP

// Tests that arguments become tensors of their kind (labels an input marked
// `label`, their count for --loss-mean global a label_count owned by them),
// ops become kernels, reshapes become views (of views) without a kernel,
// optimizer updates write their operands in place and the loss is recorded.
// CHECK-LABEL: plan.program @train_step
// CHECK-SAME: global_batch = 4 : i64
// CHECK-SAME: loss = @[[LOSS:t[0-9]+]]
// CHECK-DAG: plan.tensor @input input : tensor<4x3xf32> {source_name = "input"}
// CHECK-DAG: plan.tensor @w parameter : tensor<5x3xf32> {source_name = "w"}
// CHECK-DAG: plan.tensor @step step_counter : tensor<i64>
// CHECK-DAG: plan.tensor @labels input : tensor<4x5xf32> {label, source_name = "labels"}
// CHECK-DAG: plan.tensor @labels.count label_count : tensor<i64> {owner = "labels"}
// CHECK-DAG: plan.tensor @w.exp_avg optimizer_state : tensor<5x3xf32> {optimizer_slot = "exp_avg", owner = "w"}
// CHECK: plan.kernel "fill" ins [] outs [@t0] on compute {value = 1.000000e+00 : f64}
// CHECK: plan.kernel "matmul" ins [@input, @w] outs [@[[Y:t[0-9]+]]] on compute {transpose_a = false, transpose_b = true}
// CHECK: plan.kernel "mse_loss" ins [@[[Y]], @labels] outs [@[[LOSS]]]
// CHECK-NOT: plan.kernel "copy"
// CHECK: plan.tensor @[[FLAT:t[0-9]+]] view : tensor<20xf32> {view_of = @[[Y]], view_offset = 0 : i64}
// CHECK: plan.tensor @[[VIEW:t[0-9]+]] view : tensor<5x4xf32> {view_of = @[[FLAT]], view_offset = 0 : i64}
// CHECK-NOT: plan.kernel "copy"
// CHECK: plan.kernel "matmul" ins [@[[VIEW]], @input]
// CHECK: plan.kernel "adamw_update" ins [@w, @{{.*}}, @w.exp_avg, @w.exp_avg_sq, @step] outs [@w, @w.exp_avg, @w.exp_avg_sq] on compute
// CHECK-NOT: func.func
module attributes {graph.loss_kind = "mse", graph.optimizer = "adamw"} {
  func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}, %t: tensor<4x5xf32> {graph.input = "labels", graph.label}, %step: tensor<i64> {graph.step}, %m: tensor<5x3xf32> {graph.state_of = "w", graph.state_slot = "exp_avg"}, %v: tensor<5x3xf32> {graph.state_of = "w", graph.state_slot = "exp_avg_sq"}, %n: tensor<i64> {graph.label_count = "labels"}) -> (tensor<f32> {graph.loss}, tensor<5x3xf32> {graph.updates = 1 : i64}, tensor<5x3xf32> {graph.updates = 4 : i64}, tensor<5x3xf32> {graph.updates = 5 : i64}) {
    %one = graph.constant dense<1.0> : tensor<f32>
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %1 = graph.mse_loss %0, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
    %2 = graph.reshape %0 : (tensor<4x5xf32>) -> tensor<20xf32>
    %3 = graph.reshape %2 : (tensor<20xf32>) -> tensor<5x4xf32>
    %4 = graph.matmul %3, %x : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
    %p, %nm, %nv = graph.adamw_update %w, %4, %m, %v, step %step {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<i64>) -> (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>)
    return %1, %p, %nm, %nv : tensor<f32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>
  }
}

// -----

// Tests that a bias added to a matmul's only use goes into the GEMM
// (matmul_bias writes the add's result), and that a matmul read twice keeps
// its own kernel and the add.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "matmul_bias" ins [@input, @w, @b] outs [@[[Y:t[0-9]+]]] on compute {transpose_a = false, transpose_b = true}
// CHECK-NOT: plan.kernel "add" ins [@b
// CHECK: plan.kernel "matmul" ins [@input, @w]
// CHECK: plan.kernel "add"
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}, %b: tensor<5xf32> {graph.param = "b"}, %t: tensor<4x5xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %1 = graph.add %b, %0 : (tensor<5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %2 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %3 = graph.add %2, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %4 = graph.mul %3, %2 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %5 = graph.add %1, %4 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %6 = graph.mse_loss %5, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
    return %6 : tensor<f32>
  }
}

// -----

// Tests that a residual add of a Linear layer's result goes into its GEMM
// (accumulate: the residual is the last input, the sum the output), and a
// plain matmul's too; that in a chain of gradient sums each GEMM adds the
// sum so far, also one that a GEMM before it computed (%6 adds %5, which
// the kernel of %4 writes); and that adds whose other operand comes later,
// whose GEMM result is read twice or which broadcast stay adds.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "matmul_bias" ins [@input, @w, @b, @residual] outs [@[[H:t[0-9]+]]] on compute {accumulate = true, transpose_a = false, transpose_b = true}
// CHECK-NOT: plan.kernel "add"
// CHECK: plan.kernel "matmul" ins [@[[H]], @v] outs [@[[M3:t[0-9]+]]] on compute {transpose_a = false, transpose_b = false}
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "matmul" ins [@[[H]], @v, @[[M3]]] outs [@[[S5:t[0-9]+]]] on compute {accumulate = true, transpose_a = false, transpose_b = false}
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "matmul" ins [@input, @u, @[[S5]]] outs [@[[S6:t[0-9]+]]] on compute {accumulate = true, transpose_a = false, transpose_b = false}
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "matmul" ins [@input, @u] outs [@[[LATE:t[0-9]+]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "mul" ins [@[[S6]], @[[S6]]] outs [@[[SQ:t[0-9]+]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "add" ins [@[[LATE]], @[[SQ]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "matmul" ins [@input, @u] outs [@[[TWICE:t[0-9]+]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "add" ins [@[[TWICE]], @[[TWICE]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "matmul" ins [@input, @u] outs [@[[ROW:t[0-9]+]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "add" ins [@[[ROW]], @row]
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %r: tensor<4x5xf32> {graph.input = "residual"}, %w: tensor<5x3xf32> {graph.param = "w"}, %b: tensor<5xf32> {graph.param = "b"}, %v: tensor<5x5xf32> {graph.param = "v"}, %u: tensor<3x5xf32> {graph.param = "u"}, %row: tensor<1x5xf32> {graph.input = "row"}, %t: tensor<4x5xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>) {
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %1 = graph.add %0, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %2 = graph.add %r, %1 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %3 = graph.matmul %2, %v : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
    %4 = graph.matmul %2, %v : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
    %5 = graph.add %3, %4 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %6 = graph.matmul %x, %u : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %7 = graph.add %5, %6 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %8 = graph.matmul %x, %u : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %9 = graph.mul %7, %7 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %10 = graph.add %8, %9 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %11 = graph.matmul %x, %u : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %12 = graph.add %11, %11 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %13 = graph.matmul %x, %u : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %14 = graph.add %13, %row : (tensor<4x5xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
    %15 = graph.mse_loss %10, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
    return %15, %2, %12, %14 : tensor<f32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>
  }
}

// -----

// Tests that a residual add after a reshape of a GEMM's result (a Linear on
// [rows, N] viewed as [batch, tokens, N], as transformers' GPT-2 writes it)
// goes into the GEMM, which reads the residual and writes the sum through
// views in its own shape, and that the reshape is not lowered; a reshape
// read twice keeps its add.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.tensor @[[SUM:t[0-9]+]] transient : tensor<2x2x5xf32>
// CHECK: plan.tensor @[[RESIDUAL:t[0-9]+]] view : tensor<4x5xf32> {view_of = @residual, view_offset = 0 : i64}
// CHECK: plan.tensor @[[SUM_ROWS:t[0-9]+]] view : tensor<4x5xf32> {view_of = @[[SUM]], view_offset = 0 : i64}
// CHECK: plan.kernel "matmul_bias" ins [@input, @w, @b, @[[RESIDUAL]]] outs [@[[SUM_ROWS]]] on compute {accumulate = true, transpose_a = false, transpose_b = true}
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "matmul" ins [@input, @u] outs [@[[TWICE:t[0-9]+]]] on compute {transpose_a = false, transpose_b = false}
// CHECK: plan.tensor @[[TWICE3:t[0-9]+]] view : tensor<2x2x5xf32> {view_of = @[[TWICE]], view_offset = 0 : i64}
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "add" ins [@[[TWICE3]], @[[SUM]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "mul" ins [@[[TWICE3]], @[[TWICE3]]]
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %r: tensor<2x2x5xf32> {graph.input = "residual"}, %w: tensor<5x3xf32> {graph.param = "w"}, %b: tensor<5xf32> {graph.param = "b"}, %u: tensor<3x5xf32> {graph.param = "u"}, %t: tensor<2x2x5xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<2x2x5xf32>) {
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %1 = graph.add %0, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %2 = graph.reshape %1 : (tensor<4x5xf32>) -> tensor<2x2x5xf32>
    %3 = graph.add %2, %r : (tensor<2x2x5xf32>, tensor<2x2x5xf32>) -> tensor<2x2x5xf32>
    %4 = graph.matmul %x, %u : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %5 = graph.reshape %4 : (tensor<4x5xf32>) -> tensor<2x2x5xf32>
    %6 = graph.add %5, %3 : (tensor<2x2x5xf32>, tensor<2x2x5xf32>) -> tensor<2x2x5xf32>
    %7 = graph.mul %5, %5 : (tensor<2x2x5xf32>, tensor<2x2x5xf32>) -> tensor<2x2x5xf32>
    %8 = graph.mse_loss %6, %t : (tensor<2x2x5xf32>, tensor<2x2x5xf32>) -> tensor<f32>
    return %8, %7 : tensor<f32>, tensor<2x2x5xf32>
  }
}

// -----

// Tests that a norm's input gradient added to the residual path's gradient
// goes into the norm's gradient kernel (the addend last, the sum its first
// output, the parameter gradients after it), for layer_norm_grad and
// rms_norm_grad; a gradient added to a value computed after it stays an
// add.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "layer_norm_grad" ins [@input, @scale, @mean, @inv_std, @dy, @residual] outs [@[[DX:t[0-9]+]], @{{t[0-9]+}}, @{{t[0-9]+}}] on compute {accumulate = true, axis = 1 : i64}
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "rms_norm_grad" ins [@input, @scale, @inv_std, @[[DX]]] outs [@[[DX2:t[0-9]+]], @{{t[0-9]+}}] on compute {axis = 1 : i64}
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "mul" ins [@dy, @dy] outs [@[[LATER:t[0-9]+]]]
// CHECK-NOT: plan.kernel
// CHECK: plan.kernel "add" ins [@[[DX2]], @[[LATER]]]
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<4x6xf32> {graph.input = "input"}, %s: tensor<6xf32> {graph.input = "scale"}, %mean: tensor<4x1xf32> {graph.input = "mean"}, %inv: tensor<4x1xf32> {graph.input = "inv_std"}, %dy: tensor<4x6xf32> {graph.input = "dy"}, %res: tensor<4x6xf32> {graph.input = "residual"}, %t: tensor<4x6xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) {
    %dx, %ds, %db = graph.layer_norm_grad %x, %s, %mean, %inv, %dy {axis = 1 : i64} : (tensor<4x6xf32>, tensor<6xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>)
    %0 = graph.add %res, %dx : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    %dx2, %ds2 = graph.rms_norm_grad %x, %s, %inv, %0 {axis = 1 : i64} : (tensor<4x6xf32>, tensor<6xf32>, tensor<4x1xf32>, tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<6xf32>)
    %1 = graph.mul %dy, %dy : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    %2 = graph.add %dx2, %1 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    %3 = graph.mse_loss %2, %t : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
    return %3, %ds, %db, %ds2 : tensor<f32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
  }
}

// -----

// Tests that an optimizer update reads a 16-bit gradient itself where a
// cast to f32 is the gradient's only use (mixed precision on one rank): no
// cast kernel, no f32 copy; a gradient the clipping norm also reads keeps
// its cast. Without widen-gradients-in-updates (fsdpc --offload) every
// cast stays.
// KEEP: plan.kernel "cast" ins [@g16] outs [@[[G:t[0-9]+]]]
// KEEP: plan.kernel "adamw_update" ins [@w, @[[G]], @w.exp_avg, @w.exp_avg_sq, @step]
// CHECK-LABEL: plan.program @train_step
// CHECK-NOT: plan.kernel "cast" ins [@g16]
// CHECK: plan.kernel "cast" ins [@h16] outs [@[[H:t[0-9]+]]]
// CHECK-NOT: plan.kernel "cast" ins [@g16]
// CHECK: plan.kernel "adamw_update" ins [@w, @g16, @w.exp_avg, @w.exp_avg_sq, @step] outs [@w, @w.exp_avg, @w.exp_avg_sq]
// CHECK: plan.kernel "sgd_update" ins [@u, @[[H]], @step] outs [@u]
module attributes {graph.loss_kind = "mse", graph.optimizer = "adamw"} {
  func.func @train_step(%x: tensor<4xf32> {graph.input = "input"}, %t: tensor<4xf32> {graph.input = "labels"}, %g16: tensor<4xbf16> {graph.input = "g16"}, %h16: tensor<4xbf16> {graph.input = "h16"}, %w: tensor<4xf32> {graph.param = "w"}, %u: tensor<4xf32> {graph.param = "u"}, %step: tensor<i64> {graph.step}, %m: tensor<4xf32> {graph.state_of = "w", graph.state_slot = "exp_avg"}, %v: tensor<4xf32> {graph.state_of = "w", graph.state_slot = "exp_avg_sq"}) -> (tensor<f32> {graph.loss}, tensor<4xf32> {graph.updates = 4 : i64}, tensor<4xf32> {graph.updates = 7 : i64}, tensor<4xf32> {graph.updates = 8 : i64}, tensor<4xf32> {graph.updates = 5 : i64}, tensor<4xf32>) {
    %l = graph.mse_loss %x, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    %g = graph.cast %g16 : (tensor<4xbf16>) -> tensor<4xf32>
    %h = graph.cast %h16 : (tensor<4xbf16>) -> tensor<4xf32>
    %hh = graph.mul %h, %h : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %p, %nm, %nv = graph.adamw_update %w, %g, %m, %v, step %step {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    %q = graph.sgd_update %u, %h step %step {lr = 1.0e-2 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
    return %l, %p, %nm, %nv, %q, %hh : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// Tests that a bias cast between the matmul and its add (mixed precision
// casts a parameter right before its first reader) still goes into the
// GEMM, which then runs where the add was, after the cast; and that any
// other op between them keeps the matmul and the add apart.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "cast" ins [@w] outs [@[[WL:t[0-9]+]]]
// CHECK: plan.kernel "cast" ins [@b] outs [@[[BL:t[0-9]+]]]
// CHECK: plan.kernel "matmul_bias" ins [@input, @[[WL]], @[[BL]]] outs [@{{t[0-9]+}}] on compute {transpose_a = false, transpose_b = true}
// CHECK: plan.kernel "matmul" ins [@input, @[[WL]]] outs [@[[Y:t[0-9]+]]]
// CHECK: plan.kernel "relu" ins [@input]
// CHECK: plan.kernel "add" ins [@[[Y]], @[[BL]]]
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<4x5xbf16> {graph.input = "input"}, %w: tensor<5x5xf32> {graph.param = "w"}, %b: tensor<5xf32> {graph.param = "b"}, %t: tensor<4x5xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
    %wl = graph.cast %w : (tensor<5x5xf32>) -> tensor<5x5xbf16>
    %0 = graph.matmul %x, %wl {transpose_b = true} : (tensor<4x5xbf16>, tensor<5x5xbf16>) -> tensor<4x5xbf16>
    %bl = graph.cast %b : (tensor<5xf32>) -> tensor<5xbf16>
    %1 = graph.add %0, %bl : (tensor<4x5xbf16>, tensor<5xbf16>) -> tensor<4x5xbf16>
    %2 = graph.matmul %x, %wl {transpose_b = true} : (tensor<4x5xbf16>, tensor<5x5xbf16>) -> tensor<4x5xbf16>
    %3 = graph.relu %x : tensor<4x5xbf16>
    %4 = graph.add %2, %bl : (tensor<4x5xbf16>, tensor<5xbf16>) -> tensor<4x5xbf16>
    %5 = graph.mul %1, %4 : (tensor<4x5xbf16>, tensor<4x5xbf16>) -> tensor<4x5xbf16>
    %6 = graph.mul %5, %3 : (tensor<4x5xbf16>, tensor<4x5xbf16>) -> tensor<4x5xbf16>
    %7 = graph.cast %6 : (tensor<4x5xbf16>) -> tensor<4x5xf32>
    %8 = graph.mse_loss %7, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
    return %8 : tensor<f32>
  }
}

// -----

// Tests that a cross-entropy loss and its gradient on the same logits and
// labels, the seed computed before the loss, become one
// softmax_cross_entropy_with_grad where the loss was (its outputs: the loss,
// then the logits' gradient), located at both ops; the gradient's readers
// read its output.
// CHECK-LABEL: plan.program @train_step
// CHECK-SAME: forward_loss = @[[LOSS:t[0-9]+]]
// CHECK: plan.kernel "fill" ins [] outs [@[[SEED:t[0-9]+]]]
// CHECK: plan.kernel "matmul" ins [@input, @w] outs [@[[LOGITS:t[0-9]+]]]
// CHECK: plan.kernel "softmax_cross_entropy_with_grad" ins [@[[LOGITS]], @labels, @[[SEED]]] outs [@[[LOSS]], @[[DLOGITS:t[0-9]+]]] on compute {ignore_index = -100 : i64, reduction = "mean"}
// CHECK-NOT: softmax_cross_entropy
// CHECK: plan.kernel "matmul" ins [@[[DLOGITS]], @input]
module attributes {graph.loss_kind = "cross_entropy", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<6x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}, %labels: tensor<6xi64> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<5x3xf32>) {
    %one = graph.constant dense<1.0> : tensor<f32>
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<6x3xf32>, tensor<5x3xf32>) -> tensor<6x5xf32>
    %1 = graph.softmax_cross_entropy %0, %labels {reduction = #graph.reduction<mean>, ignore_index = -100} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
    %2 = graph.softmax_cross_entropy_grad %0, %labels, %one {reduction = #graph.reduction<mean>, ignore_index = -100} : (tensor<6x5xf32>, tensor<6xi64>, tensor<f32>) -> tensor<6x5xf32>
    %3 = graph.matmul %2, %x {transpose_a = true} : (tensor<6x5xf32>, tensor<6x3xf32>) -> tensor<5x3xf32>
    return %1, %3 : tensor<f32>, tensor<5x3xf32>
  }
}

// -----

// Tests that the loss and gradient stay two kernels where the seed comes
// after the loss (the fused kernel would need it first), where the
// gradient's labels or reduction differ from the loss's.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "softmax_cross_entropy" ins [@[[LOGITS:t[0-9]+]], @labels]
// CHECK: plan.kernel "fill"
// CHECK: plan.kernel "softmax_cross_entropy_grad" ins [@[[LOGITS]], @labels,
// CHECK: plan.kernel "softmax_cross_entropy_grad" ins [@[[LOGITS]], @other,
// CHECK: plan.kernel "softmax_cross_entropy_grad" ins [@[[LOGITS]], @labels, {{.*}} {reduction = "sum"}
// CHECK-NOT: softmax_cross_entropy_with_grad
module attributes {graph.loss_kind = "cross_entropy", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<6x3xf32> {graph.input = "input"}, %w: tensor<5x3xf32> {graph.param = "w"}, %labels: tensor<6xi64> {graph.input = "labels"}, %other: tensor<6xi64> {graph.input = "other"}) -> (tensor<f32> {graph.loss}, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>) {
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<6x3xf32>, tensor<5x3xf32>) -> tensor<6x5xf32>
    %1 = graph.softmax_cross_entropy %0, %labels {reduction = #graph.reduction<mean>} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
    %one = graph.constant dense<1.0> : tensor<f32>
    %2 = graph.softmax_cross_entropy_grad %0, %labels, %one {reduction = #graph.reduction<mean>} : (tensor<6x5xf32>, tensor<6xi64>, tensor<f32>) -> tensor<6x5xf32>
    %3 = graph.softmax_cross_entropy_grad %0, %other, %one {reduction = #graph.reduction<mean>} : (tensor<6x5xf32>, tensor<6xi64>, tensor<f32>) -> tensor<6x5xf32>
    %4 = graph.softmax_cross_entropy_grad %0, %labels, %one {reduction = #graph.reduction<sum>} : (tensor<6x5xf32>, tensor<6xi64>, tensor<f32>) -> tensor<6x5xf32>
    return %1, %2, %3, %4 : tensor<f32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>
  }
}

// -----

// Tests that attention whose mask is the causal constant (nonzero exactly
// where the key comes after the query; here through a reshape, as exports
// broadcast it) gets causal = true, so that a device may mask by index; a
// constant that differs in one element does not: one that hides a key more
// still covers the causal mask (mask_covers_causal), one that shows a key
// after its query does not.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "attention" ins [@input, @input, @input, @{{[a-z0-9]+}}] outs [{{.*}}] on compute {causal = true, compute_dtype = "f32", key_transposed = false, scale = 5.000000e-01 : f64}
// CHECK: plan.kernel "attention" ins [@input, @input, @input, @{{[a-z0-9]+}}] outs [{{.*}}] on compute {compute_dtype = "f32", key_transposed = false, mask_covers_causal = true, scale = 5.000000e-01 : f64}
// CHECK: plan.kernel "attention" ins [@input, @input, @input, @{{[a-z0-9]+}}] outs [{{.*}}] on compute {compute_dtype = "f32", key_transposed = false, scale = 5.000000e-01 : f64}
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%q: tensor<2x4x8xf32> {graph.input = "input"}, %t: tensor<2x4x8xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
    %c = graph.constant dense<[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]> : tensor<4x4xi64>
    %m = graph.reshape %c : (tensor<4x4xi64>) -> tensor<1x4x4xi64>
    %o, %lse = graph.attention %q, %q, %q, %m {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<1x4x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %n = graph.constant dense<[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0]]> : tensor<4x4xi64>
    %o2, %lse2 = graph.attention %q, %q, %q, %n {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %leak = graph.constant dense<[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]> : tensor<4x4xi64>
    %o3, %lse3 = graph.attention %q, %q, %q, %leak {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %s2 = graph.add %o, %o2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %s = graph.add %s2, %o3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %l = graph.mse_loss %s, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that token-major attention ([B, T, H, D] operands) keeps its flags
// as the contract's int list, and that the causal constant is still found:
// the queries are logsumexp's last axis (4), not the query's second-last
// (its heads, 3).
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "attention" ins [@input, @input, @input, @{{[a-z0-9]+}}] outs [{{.*}}] on compute {causal = true, compute_dtype = "f32", key_transposed = false, scale = 5.000000e-01 : f64, token_major = array<i64: 1, 1, 1, 1>}
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%q: tensor<2x4x3x8xf32> {graph.input = "input"}, %t: tensor<2x4x3x8xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
    %c = graph.constant dense<[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]> : tensor<4x4xi64>
    %o, %lse = graph.attention %q, %q, %q, %c {scale = 0.5 : f64, token_major = array<i1: true, true, true, true>} : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<4x4xi64>) -> (tensor<2x4x3x8xf32>, tensor<2x3x4xf32>)
    %l = graph.mse_loss %o, %t : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that attention whose mask is computed at run time as
// keep * padding == 0, keep a constant that is 0 at every key after its
// query (transformers' causal mask times each sample's padding), gets
// mask_covers_causal = true: a device may leave those keys out unread and
// still reads the mask for the others. A keep with one key after its
// query kept does not.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "attention" ins [{{.*}}] outs [{{.*}}] on compute {compute_dtype = "f32", key_transposed = false, mask_covers_causal = true, scale = 5.000000e-01 : f64}
// CHECK: plan.kernel "attention" ins [{{.*}}] outs [{{.*}}] on compute {compute_dtype = "f32", key_transposed = false, scale = 5.000000e-01 : f64}
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%q: tensor<2x4x8xf32> {graph.input = "input"}, %pad: tensor<2x1x4xi64> {graph.input = "attention_mask"}, %t: tensor<2x4x8xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
    %zero = graph.constant dense<0> : tensor<i64>
    %keep = graph.constant dense<[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]> : tensor<4x4xi64>
    %both = graph.mul %keep, %pad : (tensor<4x4xi64>, tensor<2x1x4xi64>) -> tensor<2x4x4xi64>
    %m = graph.compare %both, %zero {predicate = #graph.predicate<eq>} : (tensor<2x4x4xi64>, tensor<i64>) -> tensor<2x4x4xi64>
    %o, %lse = graph.attention %q, %q, %q, %m {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %leaky = graph.constant dense<[[1, 0, 0, 1], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]> : tensor<4x4xi64>
    %both2 = graph.mul %leaky, %pad : (tensor<4x4xi64>, tensor<2x1x4xi64>) -> tensor<2x4x4xi64>
    %m2 = graph.compare %both2, %zero {predicate = #graph.predicate<eq>} : (tensor<2x4x4xi64>, tensor<i64>) -> tensor<2x4x4xi64>
    %o2, %lse2 = graph.attention %q, %q, %q, %m2 {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %s = graph.add %o, %o2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %l = graph.mse_loss %s, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a constant mask hiding at least every key after its query (a
// sliding window of 2: keys i - 1 and i seen) gets mask_covers_causal, and
// that a score cap reaches the kernel as softcap.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "attention" ins [{{.*}}] outs [{{.*}}] on compute {compute_dtype = "f32", key_transposed = false, mask_covers_causal = true, scale = 5.000000e-01 : f64, softcap = 2.000000e+01 : f64}
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%q: tensor<2x4x8xf32> {graph.param = "q"}, %t: tensor<2x4x8xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
    %window = graph.constant dense<[[0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]]> : tensor<4x4xi64>
    %o, %lse = graph.attention %q, %q, %q, %window {scale = 0.5 : f64, softcap = 20.0 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %l = graph.mse_loss %o, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Tests that a bias gradient (sum_to of dY [2, 3, 4] to [4]) and the weight
// gradient X^T dY that reads dY's 2-D view become one matmul_bias_grad where
// the weight gradient was, its outputs the weight gradient and then the bias
// gradient, located at both ops; an add of the weight gradient between them
// does not stop it.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.tensor @[[DY2:t[0-9]+]] view : tensor<6x4xf32> {view_of = @dy, view_offset = 0 : i64}
// CHECK-NOT: "sum_to"
// CHECK: plan.kernel "matmul_bias_grad" ins [@input, @[[DY2]]] outs [@[[DW:t[0-9]+]], @[[DB:t[0-9]+]]] on compute {transpose_a = true, transpose_b = false}
// CHECK-NOT: "sum_to"
// CHECK: plan.kernel "mul" ins [@[[DB]], @[[DB]]]
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<6x5xf32> {graph.input = "input"}, %dy: tensor<2x3x4xf32> {graph.input = "dy"}, %t: tensor<4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<5x4xf32>) {
    %db = graph.sum_to %dy : (tensor<2x3x4xf32>) -> tensor<4xf32>
    %dy2 = graph.reshape %dy : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
    %dw = graph.matmul %x, %dy2 {transpose_a = true} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
    %sq = graph.mul %db, %db : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = graph.mse_loss %sq, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l, %dw : tensor<f32>, tensor<5x4xf32>
  }
}

// -----

// Tests that a bias gradient whose weight is stored [out, in] (torch's
// Linear: the weight gradient is dY^T X, dY its A) goes into that GEMM with
// bias_grad_of_a, the bias summing a reshape [2, 3, 4] and the GEMM another
// reshape [6, 4] of one [2, 3, 2, 2] gradient (an attention gradient's
// heads seen as the projection's features); the input gradient dY W before
// it (dY an untransposed A) is no weight gradient. Square, so that only the
// operand tells which rows the bias sums.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "matmul" ins [@[[DY2:t[0-9]+]], @w] outs [@{{t[0-9]+}}] on compute {transpose_a = false, transpose_b = false}
// CHECK-NOT: "sum_to"
// CHECK: plan.kernel "matmul_bias_grad" ins [@[[DY2]], @input] outs [@{{t[0-9]+}}, @{{t[0-9]+}}] on compute {bias_grad_of_a = true, transpose_a = true, transpose_b = false}
// CHECK-NOT: "sum_to"
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<6x4xf32> {graph.input = "input"}, %g: tensor<2x3x2x2xf32> {graph.input = "dy"}, %w: tensor<4x4xf32> {graph.input = "w"}, %t: tensor<4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<4x4xf32>, tensor<6x4xf32>) {
    %dy = graph.reshape %g : (tensor<2x3x2x2xf32>) -> tensor<2x3x4xf32>
    %db = graph.sum_to %dy : (tensor<2x3x4xf32>) -> tensor<4xf32>
    %dy2 = graph.reshape %g : (tensor<2x3x2x2xf32>) -> tensor<6x4xf32>
    %dx = graph.matmul %dy2, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    %dw = graph.matmul %dy2, %x {transpose_a = true} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<4x4xf32>
    %l = graph.mse_loss %db, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l, %dw, %dx : tensor<f32>, tensor<4x4xf32>, tensor<6x4xf32>
  }
}

// -----

// Tests that the bias gradient stays a sum_to where it is read before the
// weight gradient's GEMM (it would not be ready), and where the GEMM is not
// X^T dY (A not transposed, or dY transposed).
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "sum_to" ins [@dy]
// CHECK: plan.kernel "mul"
// CHECK: plan.kernel "matmul" ins [@input, @dy] {{.*}} {transpose_a = true, transpose_b = false}
// CHECK: plan.kernel "sum_to" ins [@dy]
// CHECK: plan.kernel "matmul" ins [@other, @dy] {{.*}} {transpose_a = false, transpose_b = false}
// CHECK: plan.kernel "sum_to" ins [@dy]
// CHECK: plan.kernel "matmul" ins [@wide, @dy] {{.*}} {transpose_a = false, transpose_b = true}
// CHECK-NOT: matmul_bias_grad
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%x: tensor<6x5xf32> {graph.input = "input"}, %o: tensor<5x6xf32> {graph.input = "other"}, %v: tensor<5x4xf32> {graph.input = "wide"}, %dy: tensor<6x4xf32> {graph.input = "dy"}, %t: tensor<4xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}, tensor<5x4xf32>, tensor<4xf32>, tensor<5x4xf32>, tensor<4xf32>, tensor<5x6xf32>) {
    %db = graph.sum_to %dy : (tensor<6x4xf32>) -> tensor<4xf32>
    %sq = graph.mul %db, %db : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %dw = graph.matmul %x, %dy {transpose_a = true} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
    %db2 = graph.sum_to %dy : (tensor<6x4xf32>) -> tensor<4xf32>
    %dw2 = graph.matmul %o, %dy : (tensor<5x6xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
    %db3 = graph.sum_to %dy : (tensor<6x4xf32>) -> tensor<4xf32>
    %dw3 = graph.matmul %v, %dy {transpose_b = true} : (tensor<5x4xf32>, tensor<6x4xf32>) -> tensor<5x6xf32>
    %l = graph.mse_loss %sq, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l, %dw, %db2, %dw2, %db3, %dw3 : tensor<f32>, tensor<5x4xf32>, tensor<4xf32>, tensor<5x4xf32>, tensor<4xf32>, tensor<5x6xf32>
  }
}

// -----

// Tests the lowering of a sharded step: shards become persistent tensors of
// their unit, a gather writes a transient the parameter views alias, each
// collective runs on the communication stream between a pair of events,
// compute waits right before it touches a collective's tensors, gradients are
// computed in place in the flat gradient, the padding is zeroed, and the
// gradient shard is a persistent `gradient` tensor.
// CHECK-LABEL: plan.program @train_step
// CHECK-SAME: opset = 13 : i64
// CHECK-SAME: shard_group_size = 2 : i64
// CHECK-SAME: source = "model.onnx"
// CHECK-SAME: strategy = #plan.strategy<full_shard>
// CHECK-SAME: world_size = 2 : i64
// The unit, with what the plan writer needs to cut and gather its shards:
// CHECK-DAG: plan.unit "u" params ["w"] : [tensor<5x3xf32>] flat_size 15 padded_size 16 shard @u.flat_param
// CHECK-DAG: plan.tensor @u.flat_param parameter : tensor<8xf32> {source_name = "u.flat_param", unit = "u"}
// CHECK-DAG: plan.tensor @u.flat_param.momentum_buffer optimizer_state : tensor<8xf32> {optimizer_slot = "momentum_buffer", owner = "u.flat_param", unit = "u"}
// CHECK-DAG: plan.tensor @[[FLATGRAD:t[0-9]+]] transient : tensor<16xf32>
// CHECK-DAG: plan.tensor @w.grad view : tensor<5x3xf32> {view_of = @[[FLATGRAD]], view_offset = 0 : i64}
// CHECK: plan.tensor @u.full transient : tensor<16xf32>
// CHECK-NEXT: plan.record_event 0 on compute
// CHECK-NEXT: plan.wait_event 0 on communication
// CHECK-NEXT: plan.collective all_gather ins [@u.flat_param] outs [@u.full] on communication {group_size = 2 : i64}
// CHECK-NEXT: plan.record_event 1 on communication
// CHECK-NEXT: plan.tensor @w view : tensor<5x3xf32> {view_of = @u.full, view_offset = 0 : i64}
// CHECK: plan.wait_event 1 on compute
// CHECK-NEXT: plan.kernel "matmul" ins [@input, @w]
// CHECK: plan.kernel "matmul" ins [@{{.*}}, @input] outs [@w.grad]
// CHECK: plan.tensor @u.grad_padding view : tensor<1xf32> {view_of = @[[FLATGRAD]], view_offset = 60 : i64}
// CHECK-NEXT: plan.kernel "fill" ins [] outs [@u.grad_padding] on compute {value = 0.000000e+00 : f64}
// CHECK-NEXT: plan.tensor @u.grad_shard gradient : tensor<8xf32> {unit = "u"}
// CHECK-NEXT: plan.record_event 2 on compute
// CHECK-NEXT: plan.wait_event 2 on communication
// CHECK-NEXT: plan.collective reduce_scatter ins [@[[FLATGRAD]]] outs [@u.grad_shard] on communication {group_size = 2 : i64, reduction = #plan.reduction<avg>}
// CHECK-NEXT: plan.record_event 3 on communication
// CHECK-NEXT: plan.wait_event 3 on compute
// CHECK-NEXT: plan.kernel "sgd_update" ins [@u.flat_param, @u.grad_shard, @u.flat_param.momentum_buffer, @step] outs [@u.flat_param, @u.flat_param.momentum_buffer]
module attributes {fsdp.shard_group_size = 2 : i64, fsdp.strategy = #fsdp.strategy<full_shard>, fsdp.world_size = 2 : i64, graph.loss_kind = "mse", graph.optimizer = "sgd", graph.opset = 13 : i64, graph.source = "model.onnx"} {
  fsdp.unit @u params ["w"] : [tensor<5x3xf32>] flat_size 15 padded_size 16
  func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %t: tensor<4x5xf32> {graph.input = "labels"}, %step: tensor<i64> {graph.step}, %shard: tensor<8xf32> {fsdp.shard_of = @u}, %buf: tensor<8xf32> {fsdp.state_shard_of = @u, graph.state_slot = "momentum_buffer"}) -> (tensor<f32> {graph.loss}, tensor<8xf32> {graph.updates = 3 : i64}, tensor<8xf32> {graph.updates = 4 : i64}) {
    %full = fsdp.all_gather %shard {unit = @u, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
    %w = fsdp.param_view %full {param = "w", offset = 0 : i64} : tensor<16xf32> -> tensor<5x3xf32>
    %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    fsdp.free %full : tensor<16xf32>
    %1 = graph.mse_loss %0, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
    %2 = graph.sub %0, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %3 = graph.matmul %2, %x {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
    %flat = fsdp.flatten %3 {unit = @u} : tensor<5x3xf32> -> tensor<16xf32>
    %g = fsdp.reduce_scatter %flat {unit = @u, reduction = #fsdp.reduction<avg>, group_size = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
    %p, %b = graph.sgd_update %shard, %g state(%buf) step %step {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
    return %1, %p, %b : tensor<f32>, tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// Tests buckets (fsdp-bucket). The gathers of u (shard 8) and v (shard 5)
// run as one all_gather of their concatenated shards; row r of the gathered
// buffer is rank r's shards, sliced into each unit's full parameter when
// compute first reads one (after the relu, not before). The flat gradients
// are packed rank block by rank block (concat on axis 1 of their [2, S]
// views), reduce-scattered at once, and copied out of the reduced buffer
// into the gradient shards before the optimizer reads them.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.tensor @bucket0.shards transient : tensor<13xf32>
// CHECK-NEXT: plan.kernel "concat" ins [@u.flat_param, @v.flat_param] outs [@bucket0.shards] on compute {axis = 0 : i64}
// CHECK-NEXT: plan.tensor @bucket0.gathered transient : tensor<26xf32>
// CHECK-NEXT: plan.record_event 0 on compute
// CHECK-NEXT: plan.wait_event 0 on communication
// CHECK-NEXT: plan.collective all_gather ins [@bucket0.shards] outs [@bucket0.gathered] on communication {group_size = 2 : i64}
// CHECK-NEXT: plan.record_event 1 on communication
// CHECK-NEXT: plan.tensor @bucket0.by_rank view : tensor<2x13xf32> {view_of = @bucket0.gathered, view_offset = 0 : i64}
// CHECK-NEXT: plan.tensor @u.full transient : tensor<16xf32>
// CHECK-NEXT: plan.tensor @u.full_by_rank view : tensor<2x8xf32> {view_of = @u.full, view_offset = 0 : i64}
// CHECK-NEXT: plan.tensor @v.full transient : tensor<10xf32>
// CHECK-NEXT: plan.tensor @v.full_by_rank view : tensor<2x5xf32> {view_of = @v.full, view_offset = 0 : i64}
// CHECK: plan.kernel "relu"
// CHECK: plan.wait_event 1 on compute
// CHECK-NEXT: plan.kernel "slice" ins [@bucket0.by_rank] outs [@u.full_by_rank] on compute {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}
// CHECK-NEXT: plan.kernel "slice" ins [@bucket0.by_rank] outs [@v.full_by_rank] on compute {starts = array<i64: 0, 8>, steps = array<i64: 1, 1>}
// CHECK-NEXT: plan.kernel "matmul" ins [@{{.*}}, @w] outs
// CHECK: plan.tensor @u.grad_by_rank view : tensor<2x8xf32> {view_of = @[[FW:.*]], view_offset = 0 : i64}
// CHECK-NEXT: plan.tensor @v.grad_by_rank view : tensor<2x5xf32> {view_of = @[[FV:.*]], view_offset = 0 : i64}
// CHECK-NEXT: plan.tensor @bucket1.grads transient : tensor<26xf32>
// CHECK-NEXT: plan.tensor @bucket1.by_rank view : tensor<2x13xf32> {view_of = @bucket1.grads, view_offset = 0 : i64}
// CHECK-NEXT: plan.kernel "concat" ins [@u.grad_by_rank, @v.grad_by_rank] outs [@bucket1.by_rank] on compute {axis = 1 : i64}
// CHECK-NEXT: plan.tensor @bucket1.reduced transient : tensor<13xf32>
// CHECK-NEXT: plan.record_event 2 on compute
// CHECK-NEXT: plan.wait_event 2 on communication
// CHECK-NEXT: plan.collective reduce_scatter ins [@bucket1.grads] outs [@bucket1.reduced] on communication {group_size = 2 : i64, reduction = #plan.reduction<avg>}
// CHECK-NEXT: plan.record_event 3 on communication
// CHECK-NEXT: plan.tensor @u.grad_shard gradient : tensor<8xf32> {unit = "u"}
// CHECK-NEXT: plan.tensor @u.reduced view : tensor<8xf32> {view_of = @bucket1.reduced, view_offset = 0 : i64}
// CHECK-NEXT: plan.tensor @v.grad_shard gradient : tensor<5xf32> {unit = "v"}
// CHECK-NEXT: plan.tensor @v.reduced view : tensor<5xf32> {view_of = @bucket1.reduced, view_offset = 32 : i64}
// CHECK-NEXT: plan.wait_event 3 on compute
// CHECK-NEXT: plan.kernel "copy" ins [@u.reduced] outs [@u.grad_shard] on compute
// CHECK-NEXT: plan.kernel "copy" ins [@v.reduced] outs [@v.grad_shard] on compute
// CHECK-NEXT: plan.kernel "sgd_update" ins [@u.flat_param, @u.grad_shard, @step] outs [@u.flat_param]
module attributes {fsdp.shard_group_size = 2 : i64, fsdp.strategy = #fsdp.strategy<full_shard>, fsdp.world_size = 2 : i64, graph.loss_kind = "mse", graph.optimizer = "sgd", graph.opset = 13 : i64, graph.source = "model.onnx"} {
  fsdp.unit @u params ["w"] : [tensor<5x3xf32>] flat_size 15 padded_size 16
  fsdp.unit @v params ["v"] : [tensor<2x5xf32>] flat_size 10 padded_size 10
  func.func @train_step(%x: tensor<4x3xf32> {graph.input = "input"}, %t: tensor<4x2xf32> {graph.input = "labels"}, %step: tensor<i64> {graph.step}, %su: tensor<8xf32> {fsdp.shard_of = @u}, %sv: tensor<5xf32> {fsdp.shard_of = @v}) -> (tensor<f32> {graph.loss}, tensor<8xf32> {graph.updates = 3 : i64}, tensor<5xf32> {graph.updates = 4 : i64}) {
    %full:2 = fsdp.bucket {
      %a = fsdp.all_gather %su {unit = @u, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
      %b = fsdp.all_gather %sv {unit = @v, group_size = 2 : i64} : tensor<5xf32> -> tensor<10xf32>
      fsdp.yield %a, %b : tensor<16xf32>, tensor<10xf32>
    } : tensor<16xf32>, tensor<10xf32>
    %0 = graph.relu %x : tensor<4x3xf32>
    %w = fsdp.param_view %full#0 {param = "w", offset = 0 : i64} : tensor<16xf32> -> tensor<5x3xf32>
    %v = fsdp.param_view %full#1 {param = "v", offset = 0 : i64} : tensor<10xf32> -> tensor<2x5xf32>
    %h = graph.matmul %0, %w {transpose_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
    %y = graph.matmul %h, %v {transpose_b = true} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
    fsdp.free %full#0 : tensor<16xf32>
    fsdp.free %full#1 : tensor<10xf32>
    %l = graph.mse_loss %y, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    %d = graph.sub %y, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %gv = graph.matmul %d, %h {transpose_a = true} : (tensor<4x2xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
    %gw = graph.matmul %h, %x {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
    %fw = fsdp.flatten %gw {unit = @u} : tensor<5x3xf32> -> tensor<16xf32>
    %fv = fsdp.flatten %gv {unit = @v} : tensor<2x5xf32> -> tensor<10xf32>
    %g:2 = fsdp.bucket {
      %a = fsdp.reduce_scatter %fw {unit = @u, reduction = #fsdp.reduction<avg>, group_size = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
      %b = fsdp.reduce_scatter %fv {unit = @v, reduction = #fsdp.reduction<avg>, group_size = 2 : i64} : tensor<10xf32> -> tensor<5xf32>
      fsdp.yield %a, %b : tensor<8xf32>, tensor<5xf32>
    } : tensor<8xf32>, tensor<5xf32>
    %pu = graph.sgd_update %su, %g#0 step %step {lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> tensor<8xf32>
    %pv = graph.sgd_update %sv, %g#1 step %step {lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<5xf32>, tensor<5xf32>, tensor<i64>) -> tensor<5xf32>
    return %l, %pu, %pv : tensor<f32>, tensor<8xf32>, tensor<5xf32>
  }
}

// -----

// Tests that attention's sinks are its kernel's fifth input.
// CHECK-LABEL: plan.program @train_step
// CHECK: plan.kernel "attention" ins [@{{[^,]*}}, @{{[^,]*}}, @{{[^,]*}}, @{{[^,]*}}, @sinks] outs [{{.*}}] on compute {causal = true
module attributes {graph.loss_kind = "mse", graph.optimizer = "sgd"} {
  func.func @train_step(%q: tensor<2x4x8xf32> {graph.param = "q"}, %sinks: tensor<2xf32> {graph.param = "sinks"}, %t: tensor<2x4x8xf32> {graph.input = "labels"}) -> (tensor<f32> {graph.loss}) {
    %causal = graph.constant dense<[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]> : tensor<4x4xi64>
    %o, %lse = graph.attention %q, %q, %q, %causal sinks %sinks {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x4xi64>, tensor<2xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %l = graph.mse_loss %o, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
