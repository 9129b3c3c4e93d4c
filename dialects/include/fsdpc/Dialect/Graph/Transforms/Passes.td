//===- Passes.td - graph dialect passes --------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_GRAPH_TRANSFORMS_PASSES_TD
#define FSDPC_DIALECT_GRAPH_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def GraphFuse : Pass<"graph-fuse", "mlir::ModuleOp"> {
  let summary = "replace the formulas exporters write for norms, GELU, softmax, rotary embeddings and attention by single ops";
  let description = [{
    torch exports write layer normalisation, RMSNorm and GELU out as
    chains of elementwise ops and reductions. Differentiated one by one they
    cost a dozen kernels each way and as many temporaries. This pass finds
    them and puts one `graph.layer_norm` or `graph.gelu` in their place:

    - layer norm: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)` over
      trailing dimensions (each mean a `reduce_sum` then `scale` by 1/N,
      the square a `pow` by 2 or a `mul`), optionally followed by `* scale`
      and `+ bias` shaped like those dimensions;
    - GELU: `0.5 * x * (1 + erf(x / sqrt(2)))` and
      `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`, with the
      products and sums in any order;
    - RMSNorm: `x / sqrt(mean(x^2) + eps)` (or `x * reciprocal(..)`),
      optionally `* scale`, becomes `graph.rms_norm`;
    - rotary embeddings: `x * cos + concat(-x[..., D/2:], x[..., :D/2]) *
      sin` (Hugging Face's `apply_rotary_pos_emb`, sums and products in
      any order) becomes `graph.rotary`, and so does the interleaved
      form (`stack(-x[..., 1::2], x[..., ::2], -1).flatten(-2)` for the
      concat: Cohere, GLM, ERNIE 4.5, GPT-J) with `interleaved`; a
      rotation of a transposed
      tensor whose last axis stays put rotates the tensor itself and
      transposes after, where that only reshapes cos and sin (LLaMA's
      query and key, moved heads forward before their rotation); a
      transpose read only by slices becomes the slices of its input, each
      transposed, and a concat of tensors transposed alike the transpose
      of their concat, so that partial rotations (Phi, StableLM,
      GPT-NeoX: the first columns rotated, the rest passed) move their
      transposes on to attention too; a layer or RMS norm of a transposed
      tensor whose normalised axes the transpose leaves in place
      normalises the tensor itself and transposes after (its statistics
      too): Gemma 3's per-head query and key norms;
    - GPT-OSS's rotation in halves, `concat(x1 cos - x2 sin, x2 cos + x1
      sin)` with x1, x2 the halves of the last axis (each perhaps
      transposed alike), becomes `graph.rotary` with each half-width
      table repeated for both halves;
    - attention's masked softmax: `softmax(where(mask, -inf, x * c))` or
      `softmax(x * c + M)` with a constant M of 0 and -inf, over the last
      axis (the scale a product or quotient by a constant, or absent),
      becomes `graph.masked_softmax`;
    - attention: `masked_softmax(q @ k^T) @ v` (the key transposed or not,
      key and value of one head broadcast over the query heads or not),
      where the scores and probabilities have no other use, becomes
      `graph.attention`, which keeps no T x T tensor; scores soft-capped
      between the product and the softmax (Gemma 2:
      `masked_softmax(tanh(s a / c))` of scale c > 0) give its `softcap`
      c and scale a; GPT-OSS's attention sinks,
      `softmax(concat(S, sinks broadcast to a last column))[..., :Tk] @ v`
      with S masked scores as above, give its `sinks` (a softmax of
      `x - m` with m constant along its axis, the rows' maximum exports
      subtract first, reads x itself);
    - grouped-query attention's copies of the key and value heads
      (repeat_kv: `reshape(broadcast_to(reshape(x)))`, a key perhaps
      transposed after its copy) fold into `graph.attention`, which reads
      the fewer heads themselves; a key transposed for the product alone
      (its last two axes swapped) is read as it was, also where torch's
      dynamo exporter swaps them on a copy with batch and heads flattened
      (`reshape(transpose(reshape(y)))` regrouping only the leading axes
      is the transpose of y regrouped);
    - then, in a second round (packed attention first): attention operands
      that are head views `[..., T, H, D]` transposed heads forward (a key
      perhaps straight to `[..., H, D, T]`), and an output only transposed
      back, are read and written as the views (`token_major`): BERT's,
      ViT's and LLaMA's separate projections (LLaMA's rotated query and
      key too) need no transposes;
    - attention over one fused projection (GPT-2's `c_attn`): q, k and v
      the three thirds of its last axis, each a reshape to heads and a
      transpose of the heads forward, and every use of the output a
      transpose back, becomes `graph.packed_attention` on the projection;
      the output transposes become reshapes of its result;
    - a 2-D transpose read by `graph.matmul` (a tied head's embedding)
      becomes the GEMM's `transpose_a` / `transpose_b`;
    - a mixture of experts' projection as transformers' `batched_mm`
      experts export it, `batch_matmul(x, gather(W, experts))` (or with
      the gathered matrices first and a column a row, Mixtral's), whose
      gathered copy has no other use, becomes `graph.expert_matmul`, which
      reads each row's expert's matrix in place.

    Constants must match to a relative 1e-6. The fused op's location joins
    the locations (ONNX node names) of the ops it replaces. Intermediate
    values used elsewhere stay computed, so the result is the same graph
    either way; fusion only removes work.
  }];
  let dependentDialects = ["::fsdpc::graph::GraphDialect"];
}

def GraphAppendLoss : Pass<"graph-append-loss", "mlir::ModuleOp"> {
  let summary = "turn @forward into @train_step returning a scalar loss";
  let description = [{
    Clones the model function `@forward` into `@train_step` and appends the
    loss, so that `@train_step` returns one scalar marked `graph.loss`:

    - `cross_entropy`: the model's output is logits `[B, C]` or `[B, T, C]`;
      a new argument `labels` (`graph.input = "labels"`) of i64 `[B]` or
      `[B, T]` is added; the loss is the mean over the labels that are not
      -100, as torch's `F.cross_entropy`.
    - `mse`: a new argument `labels` shaped like the output; the mean squared
      error, as torch's `F.mse_loss`.
    - `output:NAME`: the model already computes the scalar loss as its
      output `NAME`.
    - `auto`: `output:NAME` when the model has exactly one output and it is
      a scalar, `cross_entropy` otherwise.
    - a weighted sum of losses of named outputs, as a training loop writes
      it: sums, differences, and products and quotients by numbers, of
      `cross_entropy(OUTPUT, LABELS)`, `mse(OUTPUT, LABELS)` and
      `output(NAME)`. Each term is computed once, scaled (`graph.scale`)
      and added (`graph.add`); the module's loss kind is `combined`.

    With `loss-mean=global` (transformers' Trainer, which divides by the
    labels counted over the step), each cross entropy is the sum over its
    labels that are not -100, times `ranks` x `micro-batches`, divided by
    a new i64 scalar argument `graph.label_count = "LABELS"`: the runtime
    writes the count over the step's global batch with the batch. The
    ranks' and micro-batches' average of the gradients is then the
    gradient of the step's mean over all its counted labels.

    Every labels argument added is marked `graph.label` (`LABELS` names it;
    `labels` by default; losses naming the same labels share one). Bare
    `cross_entropy` and `mse` read the first output, with a warning when
    the model has others. The model's other outputs are dropped from
    `@train_step`.

    ```mlir
    // --loss '(cross_entropy(start_logits, start_positions)
    //          + cross_entropy(end_logits, end_positions)) / 2'
    %5 = graph.softmax_cross_entropy %3, %arg2 {ignore_index = -100 : i64} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
    %6 = graph.scale %5 {factor = 5.000000e-01 : f64} : tensor<f32>
    %7 = graph.softmax_cross_entropy %4, %arg3 {ignore_index = -100 : i64} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
    %8 = graph.scale %7 {factor = 5.000000e-01 : f64} : tensor<f32>
    %9 = graph.add %6, %8 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"auto\"",
           "cross_entropy, mse, output:NAME, auto, or a weighted sum such as "
           "'(cross_entropy(a, la) + cross_entropy(b, lb)) / 2'">,
    Option<"lossMean", "loss-mean", "std::string", /*default=*/"\"local\"",
           "a cross entropy's mean over its micro-batch's labels on each rank (local), or over "
           "the step's labels on every rank and micro-batch (global)">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "ranks whose gradients the step averages (for --loss-mean global)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "micro-batches whose gradients the step averages (for --loss-mean global)">
  ];
  let dependentDialects = ["::fsdpc::graph::GraphDialect"];
}

def GraphMixedPrecision : Pass<"graph-mixed-precision", "mlir::ModuleOp"> {
  let summary = "compute @train_step's forward pass in bf16 or f16 around f32 master parameters";
  let description = [{
    FSDP's `MixedPrecision(param_dtype=...)` as casts in the IR, before
    autodiff. Parameters stay f32 (the master copy the optimizer updates);
    every read of a parameter, of a float model input and of a float
    constant becomes a `graph.cast` to `param-dtype`, and every op computes
    on and produces `param-dtype` values, except the ops that need f32
    range: layer_norm, rms_norm, softmax, log_softmax, masked_softmax and the
    losses. Their float operands are cast to f32, and they produce f32 (as
    torch computes them internally). The loss stays f32.

    Autodiff then differentiates through the casts: each cast's gradient is
    a cast back, so gradients flow in `param-dtype` and reach the
    parameters as f32. `fsdp-shard` gathers a parameter read only through a
    cast in the cast's type, so its all_gather moves half the bytes.

    Ops whose location (ONNX node name) matches `keep-fp32` stay in f32.

    ```mlir
    // before: %y = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    %xl = graph.cast %x : (tensor<4x8xf32>) -> tensor<4x8xbf16>
    %wl = graph.cast %w : (tensor<8x3xf32>) -> tensor<8x3xbf16>
    %y = graph.matmul %xl, %wl : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
    ```
  }];
  let options = [
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"bf16\"", "bf16 or f16">,
    Option<"keepFp32", "keep-fp32", "std::string", /*default=*/"\"\"",
           "regex of ONNX node names whose ops stay in f32">
  ];
  let dependentDialects = ["::fsdpc::graph::GraphDialect"];
}

def GraphPadClasses : Pass<"graph-pad-classes", "mlir::ModuleOp"> {
  let summary = "pad a 16-bit cross entropy's classes to a multiple of 8 for the tensor cores";
  let description = [{
    A vocabulary such as GPT-2's 50257 makes the logits GEMM, its input
    gradient and its weight gradient 16-bit GEMMs with an extent that is not
    a multiple of 8, which cuBLASLt runs on slow kernels (or the CUDA
    backend through copies into padded scratch). Before autodiff, where
    `@train_step`'s `softmax_cross_entropy` reads 16-bit logits made by a
    `graph.matmul` (through reshapes), this pass pads the matmul's weight
    with zero rows (or columns) up to a multiple of `multiple`, so that the
    logits come out padded, and gives the loss `classes`, the real count:
    the padding takes no part in the loss, its gradient is zero, and a
    label past the real classes is still an error. Autodiff then gives the
    weight the padded gradient's first rows (the concat's gradient is a
    slice). The loss and every gradient are those of the unpadded model;
    only the GEMMs' extents change. The logits' prediction (`--forward`)
    names the padded logits.

    ```mlir
    // before (C = 39):
    %l = graph.matmul %x, %w {transpose_b = true} : (tensor<8x32xbf16>, tensor<39x32xbf16>) -> tensor<8x39xbf16>
    %loss = graph.softmax_cross_entropy %l, %labels : (tensor<8x39xbf16>, tensor<8xi64>) -> tensor<f32>
    // after:
    %z = graph.constant dense<0.0> : tensor<1x32xbf16>
    %wp = graph.concat %w, %z {axis = 0 : i64} : (tensor<39x32xbf16>, tensor<1x32xbf16>) -> tensor<40x32xbf16>
    %l = graph.matmul %x, %wp {transpose_b = true} : (tensor<8x32xbf16>, tensor<40x32xbf16>) -> tensor<8x40xbf16>
    %loss = graph.softmax_cross_entropy %l, %labels {classes = 39 : i64} : (tensor<8x40xbf16>, tensor<8xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"8",
           "pad the classes to a multiple of this (8: 16 bytes of bf16 or f16)">
  ];
  let dependentDialects = ["::fsdpc::graph::GraphDialect"];
}

def GraphAutodiff : Pass<"graph-autodiff", "mlir::ModuleOp"> {
  let summary = "reverse-mode differentiation of @train_step";
  let description = [{
    Appends to `@train_step` the gradient of its loss with respect to every
    trainable parameter (`graph.param` arguments; `graph.frozen_param` ones
    get none), and returns each gradient marked `graph.grad_of = "name"`.
    The rules, one per op, live in GradientRules.cpp. The gradients of a
    value used several times are summed. A parameter the loss does not
    depend on gets a zero gradient, as torch would leave `.grad` at zero
    under weight decay-free optimizers.
  }];
  let dependentDialects = ["::fsdpc::graph::GraphDialect"];
}

def GraphOptimizer : Pass<"graph-optimizer", "mlir::ModuleOp"> {
  let summary = "apply torch-equivalent optimizer updates in @train_step";
  let description = [{
    Replaces the gradients that `@train_step` returns by optimizer updates:
    adds the optimizer state (`graph.state_of`, `graph.state_slot`) and the
    step counter (`graph.step`) as arguments, and returns the new parameters
    and state, each marked `graph.updates = N` with the argument it replaces.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"", "adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "weight decay; negative means the optimizer's default (adamw 0.01, sgd 0)">,
    Option<"momentum", "momentum", "double", /*default=*/"0", "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"lrSchedule", "lr-schedule", "std::string", /*default=*/"\"constant\"",
           "constant, linear or cosine (transformers' schedules with warmup)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0", "steps of linear warm-up from 0 to lr">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0", "steps over which linear and cosine decay">,
    Option<"minLr", "min-lr", "double", /*default=*/"0", "where linear and cosine decay end">
  ];
  let dependentDialects = ["::fsdpc::graph::GraphDialect"];
}

def GraphAccumulate : Pass<"graph-accumulate", "mlir::ModuleOp"> {
  let summary = "gradient accumulation: K micro-batches of forward and backward per optimizer step";
  let description = [{
    Runs on @train_step after graph-optimizer (fsdpc runs it in the fsdp
    stage, after fsdp-recompute and before fsdp-shard). Every input gets K
    times its leading (batch) dimension: a step now reads K micro-batches.
    Everything but the optimizer updates (and constants, which are shared)
    is cloned K times in a row, micro-batch m reading `graph.slice` m of
    each input, so micro-batch m's forward and backward finish before m + 1
    starts and activations are live for one micro-batch at a time.

    Each gradient is summed over the micro-batches as they finish (a
    `graph.add` chain right after each micro-batch's gradient) and scaled by
    1/K, the loss likewise: one step on the K-times-larger batch of
    mean-reduced losses. The adds and the scale carry `graph.accumulate`,
    each micro-batch's loss op `graph.micro_loss` and its input slices
    `graph.micro_batch = m`, which `StepPhases` reads to tell the
    micro-batches' forward and backward apart (fsdp-shard gathers once per
    phase) and which fsdp-shard's `accumulate-reduce=each` follows back to
    the micro-batches' gradients. A dropout's seed differs per micro-batch.
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1", "micro-batches per optimizer step">
  ];
  let dependentDialects = ["::fsdpc::graph::GraphDialect"];
}

#endif // FSDPC_DIALECT_GRAPH_TRANSFORMS_PASSES_TD
