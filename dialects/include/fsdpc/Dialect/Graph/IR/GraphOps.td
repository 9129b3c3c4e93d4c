//===- GraphOps.td - graph dialect ops ---------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_GRAPH_GRAPHOPS_TD
#define FSDPC_DIALECT_GRAPH_GRAPHOPS_TD

include "fsdpc/Dialect/Graph/IR/GraphBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_Op<"constant", [Pure, ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor known at compile time";
  let description = [{
    Produces the tensor held by `value`. ONNX `Constant` nodes, non-float
    initializers and values the compiler synthesises (the loss seed, zero
    gradients) become this op. A splat value is materialised by a fill kernel;
    any other value is stored in the plan.

    - `value`: the elements; its type is the result type.

    ```mlir
    %one = graph.constant dense<1.0> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_MatmulOp : Graph_Op<"matmul", [Pure]> {
  let summary = "matrix product with optional transposed operands";
  let description = [{
    `result = op(lhs) x op(rhs)` where `op` transposes when the matching
    attribute is set. ONNX `Gemm` and `MatMul` lower to it.

    - `lhs`: `[..., M, K]` (leading dims are flattened into M), or `[K, M]`
      when `transpose_a` is set (then rank 2 only).
    - `rhs`: `[K, N]`, or `[N, K]` when `transpose_b` is set.
    - `transpose_a`, `transpose_b`: whether to transpose each operand.
    - `result`: `[..., M, N]` following `lhs`'s leading dims.

    ```mlir
    %y = graph.matmul %x, %w {transpose_b = true}
        : (tensor<64x10xf32>, tensor<2048x10xf32>) -> tensor<64x2048xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_BatchMatmulOp : Graph_Op<"batch_matmul", [Pure]> {
  let summary = "batched matrix product with broadcast batch dimensions";
  let description = [{
    For every index of the batch dimensions (all but the last two, broadcast
    against each other as numpy does), `result[b] = op(lhs[b]) x op(rhs[b])`
    where `op` transposes the last two dimensions when the matching attribute
    is set. ONNX `MatMul` with batched operands lowers to it (attention's
    `Q K^T` and `P V`).

    - `lhs`: `[..., M, K]`, or `[..., K, M]` with `transpose_a`.
    - `rhs`: `[..., K, N]`, or `[..., N, K]` with `transpose_b`.
    - `transpose_a`, `transpose_b`: whether to transpose each operand's last
      two dimensions.
    - `result`: `[broadcast batch dims..., M, N]`.

    ```mlir
    %s = graph.batch_matmul %q, %k {transpose_b = true}
        : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The result shape of op(lhs) x op(rhs), or failure if they do not fit.
    static ::mlir::FailureOr<::llvm::SmallVector<int64_t>> inferShape(::llvm::ArrayRef<int64_t> lhs,
        ::llvm::ArrayRef<int64_t> rhs, bool transposeA, bool transposeB);
  }];
}

def Graph_ExpertMatmulOp : Graph_Op<"expert_matmul", [Pure]> {
  let summary = "each row's product with the weight matrix of its expert";
  let description = [{
    `result[n] = lhs[n] x op(weights[experts[n]])` for every n: a mixture
    of experts' projection, each (token, expert) row by its expert's matrix.
    `graph-fuse` makes it from the `batched_mm` form transformers exports
    (`batch_matmul(x, gather(weights, experts))`), which copies every row's
    weight matrix first: [N, K, F] where this op reads [E, K, F] in place.

    - `lhs`: `[N, M, K]`.
    - `weights`: `[E, K, F]`, or `[E, F, K]` with `transpose_weights`.
    - `experts`: i64 `[N]`, each in [-E, E) (a negative index counts from
      the end, as gather's); a device reports one outside it.
    - `result`: `[N, M, F]`.

    ```mlir
    %y = graph.expert_matmul %x, %w, %experts
        : (tensor<64x1x32xf32>, tensor<4x32x128xf32>, tensor<64xi64>) -> tensor<64x1x128xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$weights, Graph_I64Tensor:$experts,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_weights);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $weights `,` $experts attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ExpertMatmulWeightGradOp : Graph_Op<"expert_matmul_weight_grad", [Pure]> {
  let summary = "the gradient of expert_matmul's weights";
  let description = [{
    `result[e] = sum over the rows n of expert e of lhs[n]^T x dresult[n]`
    (`dresult[n]^T x lhs[n]` with `transpose_weights`), in ascending n: each
    expert's matrix gets its rows' products, an expert without rows zeros.

    - `lhs`: expert_matmul's `[N, M, K]`.
    - `dresult`: the gradient of its result, `[N, M, F]`.
    - `experts`: its i64 `[N]`.
    - `result`: the weights' shape, `[E, K, F]` (or `[E, F, K]`).

    ```mlir
    %dw = graph.expert_matmul_weight_grad %x, %dy, %experts
        : (tensor<64x1x32xf32>, tensor<64x1x128xf32>, tensor<64xi64>) -> tensor<4x32x128xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$dresult, Graph_I64Tensor:$experts,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_weights);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $dresult `,` $experts attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Graph_BroadcastBinaryOp<string mnemonic, string what, Type operand = Graph_NumericTensor,
                              string integers = [{
    On i64 tensors (token ids, positions: the last token a classifier head
    reads) it computes in two's complement, wrapping around on overflow as
    torch's integer tensors do; an integer quotient truncates toward zero
    (ONNX's Div) and a division by zero gives 0.
}]> : Graph_Op<mnemonic, [Pure]> {
  let summary = "elementwise " # what # " with numpy broadcasting";
  let description = [{
    Elementwise }] # what # [{ of `lhs` and `rhs`, broadcast against each
    other as numpy (and ONNX since opset 7) does.
}] # integers # [{
    - `lhs`, `rhs`: tensors of one element type whose shapes broadcast
      together.
    - `result`: the broadcast shape, of their element type.

    ```mlir
    %y = graph.}] # mnemonic # [{ %a, %b : (tensor<64x5xf32>, tensor<5xf32>) -> tensor<64x5xf32>
    ```
  }];
  let arguments = (ins operand:$lhs, operand:$rhs);
  let results = (outs operand:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_AddOp : Graph_BroadcastBinaryOp<"add", "sum">;
def Graph_SubOp : Graph_BroadcastBinaryOp<"sub", "difference">;
def Graph_MulOp : Graph_BroadcastBinaryOp<"mul", "product">;
def Graph_DivOp : Graph_BroadcastBinaryOp<"div", "quotient">;
def Graph_PowOp : Graph_BroadcastBinaryOp<"pow", "power (lhs raised to rhs)", Graph_FloatTensor, "">;

class Graph_UnaryOp<string mnemonic, string what> :
    Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what;
  let description = [{
    Applies }] # what # [{ to every element of `input`.

    - `input`: an f32 tensor; the result has its type.

    ```mlir
    %y = graph.}] # mnemonic # [{ %x : tensor<64x2048xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_NegOp : Graph_UnaryOp<"neg", "negation">;
def Graph_ReluOp : Graph_UnaryOp<"relu", "max(x, 0), NaN kept as NaN (as torch)">;
def Graph_TanhOp : Graph_UnaryOp<"tanh", "the hyperbolic tangent">;
def Graph_SigmoidOp : Graph_UnaryOp<"sigmoid", "the logistic function 1 / (1 + exp(-x))">;
def Graph_ExpOp : Graph_UnaryOp<"exp", "the exponential">;
def Graph_LogOp : Graph_UnaryOp<"log", "the natural logarithm">;
def Graph_SqrtOp : Graph_UnaryOp<"sqrt", "the square root">;
def Graph_ErfOp : Graph_UnaryOp<"erf", "the error function">;
def Graph_ReciprocalOp : Graph_UnaryOp<"reciprocal", "1 / x">;
def Graph_SinOp : Graph_UnaryOp<"sin", "the sine (of radians)">;
def Graph_CosOp : Graph_UnaryOp<"cos", "the cosine (of radians)">;
def Graph_AtanOp : Graph_UnaryOp<"atan", "the arctangent, in (-pi/2, pi/2)">;
def Graph_FloorOp : Graph_UnaryOp<"floor", "the largest integer not above x (no gradient: piecewise constant)">;
def Graph_CeilOp : Graph_UnaryOp<"ceil", "the smallest integer not below x (no gradient: piecewise constant)">;
def Graph_RoundOp : Graph_UnaryOp<"round", "the nearest integer, halves to even (no gradient: piecewise constant)">;

def Graph_GeluOp : Graph_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "the Gaussian error linear unit";
  let description = [{
    `x * Phi(x)`, as ONNX `Gelu` (opset 20) and torch's `F.gelu`. With
    `approximate` none, `Phi(x) = (1 + erf(x / sqrt(2))) / 2`; with
    tanh, `Phi(x) = (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2`.
    `graph-fuse` also makes it from the Erf and Tanh formulas older exports
    write out.

    - `input`: an f32 tensor; the result has its type.
    - `approximate`: `#graph.approximate<none>` (the default) or
      `#graph.approximate<tanh>`.

    ```mlir
    %y = graph.gelu %x {approximate = #graph.approximate<tanh>} : tensor<8x32x192xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input,
                       DefaultValuedAttr<Graph_GeluApproximationAttr, "GeluApproximation::none">:$approximate);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_GatedActivationOp : Graph_Op<"gated_activation", [Pure, SameOperandsAndResultType]> {
  let summary = "an activation of one projection times another (SwiGLU, GeGLU)";
  let description = [{
    `act(gate) * up`, elementwise: the gated MLP of LLaMA, Mistral, Qwen,
    Mixtral's experts (`silu`: `gate * sigmoid(gate)`), Gemma and T5 v1.1
    (`gelu_tanh`). `graph-fuse` makes it from the Sigmoid/Mul/Mul or
    Gelu/Mul that exports write, so that a device reads both projections
    and writes the product once, and backward keeps only `gate` and `up`
    (the export's form keeps `sigmoid(gate)` and `gate * sigmoid(gate)`
    too, and runs six kernels backward instead of one).

    - `gate`, `up`: float tensors of one type (no broadcast); the result
      has it.
    - `activation`: `#graph.activation<silu>` (the default), `<gelu>` or
      `<gelu_tanh>` (as `graph.gelu`'s none and tanh).

    ```mlir
    %h = graph.gated_activation %gate, %up {activation = #graph.activation<silu>} : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$gate, Graph_FloatTensor:$up,
                       DefaultValuedAttr<Graph_GatedActivationKindAttr, "GatedActivationKind::silu">:$activation);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Graph_RotaryOp : Graph_Op<"rotary", [Pure]> {
  let summary = "rotary position embedding, rotate-half or interleaved form";
  let description = [{
    `input * cos + rotate_half(input) * sin`, where `rotate_half(x)` is
    `concat(-x[..., D/2:], x[..., :D/2])` along the last axis of size D:
    the query and key rotation of LLaMA, Mistral, Qwen2, Gemma, GPT-NeoX
    and Phi (`apply_rotary_pos_emb` in Hugging Face's models). With
    `interleaved`, the pairs are adjacent elements instead:
    `rotate_half(x)[2i] = -x[2i + 1]`, `rotate_half(x)[2i + 1] = x[2i]`
    (Cohere, GLM, ERNIE 4.5, Helium, GPT-J: `stack(-x[..., 1::2],
    x[..., ::2], -1).flatten(-2)`). `graph-fuse` makes it from the
    Slice/Neg/Concat/Mul/Add formula exports write, so that a device reads
    each element pair and writes it once instead of running seven
    elementwise kernels (and their gradients).

    - `input`: a float tensor of rank r >= 1 whose last dimension D is even.
    - `cos`, `sin`: float tensors of rank r whose last dimension is D and
      whose other dimensions are 1 or `input`'s (broadcast over heads,
      batch or positions).
    - `result`: `input`'s type.

    - `interleaved`: pairs (2i, 2i + 1) instead of (i, i + D/2).

    ```mlir
    %q = graph.rotary %x, %cos, %sin
        : (tensor<2x16x4x8xf32>, tensor<2x16x1x8xf32>, tensor<2x16x1x8xf32>) -> tensor<2x16x4x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$cos, Graph_FloatTensor:$sin,
                       DefaultValuedAttr<BoolAttr, "false">:$interleaved);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure]> {
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    As ONNX `LayerNormalization` (opset 17) and torch's `F.layer_norm`: each
    slice over the dimensions from `axis` on is normalised to zero mean and
    unit variance (the biased variance, plus `epsilon`), then scaled by
    `scale` and shifted by `bias`. `graph-fuse` also makes it from the
    ReduceMean/Sub/Pow/Sqrt/Div formula opset-13 exports write out.

    - `input`: a float tensor of rank r: f32, or bf16 / f16 under mixed
      precision, where the kernels read it, compute in f32 and round the
      result once (the bits of an f32 layer norm between two casts,
      without the f32 copies).
    - `scale`, `bias`: float tensors of one type shaped like `input`'s
      dimensions from `axis` on: f32, or under mixed precision the low type
      the parameters are cast to (widened by the kernels, exactly).
    - `axis`: the first normalised dimension, in `[0, r)`.
    - `epsilon`: added to the variance.
    - `result`: the normalised tensor, `input`'s type.
    - `mean`, `inv_std_dev`: per slice, `input`'s shape with the normalised
      dimensions set to 1; backward reads them instead of recomputing.

    ```mlir
    %y, %mean, %rstd = graph.layer_norm %x, %w, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64}
        : (tensor<8x32x48xf32>, tensor<48xf32>, tensor<48xf32>)
        -> (tensor<8x32x48xf32>, tensor<8x32x1xf32>, tensor<8x32x1xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale, Graph_FloatTensor:$bias, Fsdpc_I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$result, Graph_F32Tensor:$mean, Graph_F32Tensor:$inv_std_dev);
  let assemblyFormat = "$input `,` $scale `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_RmsNormOp : Graph_Op<"rms_norm", [Pure]> {
  let summary = "root-mean-square normalisation over the trailing dimensions";
  let description = [{
    `input / sqrt(mean(input^2) + epsilon) * scale`, the mean taken over
    the dimensions from `axis` on: LLaMA's RMSNorm. `graph-fuse` makes it
    from the Pow/ReduceMean/Add/Sqrt/Div formula exports write.

    - `input`: a float tensor of rank r (low precision as `layer_norm`'s).
    - `scale`: a float tensor shaped like `input`'s dimensions from `axis`
      on (low precision as `layer_norm`'s).
    - `axis`: the first normalised dimension, in `[0, r)`.
    - `epsilon`: added to the mean square.
    - `result`: `input`'s type.
    - `inv_rms`: per slice, `1 / sqrt(mean(input^2) + epsilon)`, shaped like
      `input` with the normalised dimensions set to 1; backward reads it.

    ```mlir
    %y, %r = graph.rms_norm %x, %w {axis = 2 : i64, epsilon = 1.0e-06 : f64}
        : (tensor<8x32x48xf32>, tensor<48xf32>) -> (tensor<8x32x48xf32>, tensor<8x32x1xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale, Fsdpc_I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$result, Graph_F32Tensor:$inv_rms);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ReduceSumOp : Graph_Op<"reduce_sum", [Pure]> {
  let summary = "sum over some dimensions";
  let description = [{
    Sums `input` over the dimensions in `axes` (accumulating in double). The
    reduced dimensions stay as size 1 with `keepdims`, and are dropped
    otherwise. ONNX `ReduceSum`, and `ReduceMean` (followed by a
    `graph.scale`), lower to it.

    - `input`: an f32 tensor.
    - `axes`: distinct dimensions in `[0, rank)`, ascending.
    - `keepdims`: whether the result keeps the reduced dimensions.

    ```mlir
    %s = graph.reduce_sum %x {axes = array<i64: 2>, keepdims = true} : (tensor<2x16x64xf32>) -> tensor<2x16x1xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, DenseI64ArrayAttr:$axes, BoolAttr:$keepdims);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_BroadcastToOp : Graph_Op<"broadcast_to", [Pure]> {
  let summary = "a tensor repeated along broadcast dimensions";
  let description = [{
    Broadcasts `input` to the result's shape with numpy's rules; the adjoint
    of `graph.sum_to`. ONNX `Expand` lowers to it.

    - `input`: a tensor whose shape broadcasts to the result's.

    ```mlir
    %y = graph.broadcast_to %x : (tensor<16x1xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ConcatOp : Graph_Op<"concat", [Pure]> {
  let summary = "tensors joined along one dimension";
  let description = [{
    As ONNX `Concat`: the inputs agree on every dimension but `axis`. It
    folds to its one input that holds elements where the others hold none.

    - `inputs`: one or more tensors of the same rank and element type.
    - `axis`: the joined dimension, in `[0, rank)`.

    ```mlir
    %y = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, Fsdpc_I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_SliceOp : Graph_Op<"slice", [Pure]> {
  let summary = "a strided box of a tensor";
  let description = [{
    `result[i_0, ...] = input[starts[0] + i_0 * steps[0], ...]`, for every
    dimension, with the result's shape giving the counts. ONNX `Slice` (with
    constant bounds) and `Split` lower to it.

    - `input`: any tensor.
    - `starts`: the first index in each dimension, in range.
    - `steps`: the stride in each dimension, non-zero (negative walks
      backwards).

    ```mlir
    %y = graph.slice %x {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x3xf32>
    ```

    A slice that takes every element in place (exports write
    `mask[:, :, :T, :T]` with T the whole length) folds to its input.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_SliceGradOp : Graph_Op<"slice_grad", [Pure]> {
  let summary = "the adjoint of graph.slice: a slice placed into zeros";
  let description = [{
    A tensor of the result's shape that is zero except at the positions a
    `graph.slice` with the same `starts` and `steps` reads, which hold `grad`.

    - `grad`: the gradient of the slice's result.
    - `starts`, `steps`: as the forward slice.

    ```mlir
    %dx = graph.slice_grad %dy {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_GatherOp : Graph_Op<"gather", [Pure]> {
  let summary = "entries of a tensor selected by integer indices along one axis";
  let description = [{
    As ONNX `Gather`: `result[a..., i..., b...] = data[a..., indices[i...], b...]`
    with the `a` dimensions before `axis`. An embedding lookup is a gather on
    axis 0. Negative indices count from the end; others out of range are an
    error at run time.

    - `data`: the table.
    - `indices`: an i64 tensor.
    - `axis`: the indexed dimension of `data`.
    - `padding_index` (optional, axis 0 only): a row of `data` that the
      gather reads as it is but passes no gradient to, as torch's
      `nn.Embedding(padding_idx=p)`. The row may change through other uses
      of the table (a tied output projection trains it), and lookups then
      read its new value, as in torch.

    ```mlir
    %e = graph.gather %wte, %ids {axis = 0 : i64} : (tensor<50x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
    %p = graph.gather %wte, %ids {axis = 0 : i64, padding_index = 1 : i64} : (tensor<50x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$data, Graph_I64Tensor:$indices, Fsdpc_I64Attr:$axis,
                       OptionalAttr<Fsdpc_I64Attr>:$padding_index);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let builders = [
    // A gather without a padding row, as every rewrite but the embedding
    // lookup's makes.
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$data, "::mlir::Value":$indices,
                   "::mlir::IntegerAttr":$axis), [{
      build($_builder, $_state, result, data, indices, axis, ::mlir::IntegerAttr());
    }]>
  ];
  let hasVerifier = 1;
}

def Graph_GatherGradOp : Graph_Op<"gather_grad", [Pure]> {
  let summary = "the adjoint of graph.gather: a scatter-add into zeros";
  let description = [{
    A tensor of the result's shape (the gather's `data` shape), zero except
    that every gathered position accumulates the matching entry of `grad`;
    repeated indices add up, as an embedding's gradient must.

    - `grad`: the gradient of the gather's result.
    - `indices`, `axis`: as the forward gather.

    ```mlir
    %dwte = graph.gather_grad %dy, %ids {axis = 0 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<50x16xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, Graph_I64Tensor:$indices, Fsdpc_I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_SelectOp : Graph_Op<"select", [Pure]> {
  let summary = "elementwise choice between two tensors by a condition";
  let description = [{
    `result = condition != 0 ? lhs : rhs`, all three broadcast together as
    numpy does. ONNX `Where` lowers to it (ONNX bools are i64 0 or 1 here).

    - `condition`: an i64 tensor.
    - `lhs`, `rhs`: f32 tensors.

    ```mlir
    %y = graph.select %mask, %scores, %ninf : (tensor<1x1x8x8xi64>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Graph_I64Tensor:$condition, Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$condition `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_CompareOp : Graph_Op<"compare", [Pure]> {
  let summary = "elementwise comparison of two float tensors";
  let description = [{
    `result = lhs <predicate> rhs ? 1 : 0`, the operands (both float or
    both i64) broadcast together as numpy does: an i64 tensor (booleans are
    i64 0 or 1 here). A NaN
    compares unequal to everything, itself included, so only `ne` holds for
    it, as in torch and IEEE 754. It has no gradient: ONNX `Equal`,
    `Greater`, `Less` and their `OrEqual` forms on runtime tensors lower to
    it, and so do the boolean ops on runtime masks (`And`, `Or`, `Xor`,
    `Not`, as comparisons of their 0/1 values widened to f32), `Sign`,
    `IsInf` and the piecewise activations that choose by the input's sign.

    ```mlir
    %positive = graph.compare %x, %zero {predicate = #graph.predicate<gt>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi64>
    ```
  }];
  let arguments = (ins AnyTypeOf<[Graph_FloatTensor, Graph_I64Tensor]>:$lhs,
                       AnyTypeOf<[Graph_FloatTensor, Graph_I64Tensor]>:$rhs,
                       Graph_ComparePredicateAttr:$predicate);
  let results = (outs Graph_I64Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_IsNanOp : Graph_Op<"is_nan", [Pure]> {
  let summary = "elementwise test for NaN";
  let description = [{
    `result = isnan(input) ? 1 : 0`: an i64 tensor of the input's shape
    (ONNX `IsNaN`; booleans are i64 0 or 1 here). It has no gradient. The
    dynamo exporter writes it in torch's decomposition of
    `scaled_dot_product_attention`, `Where(IsNaN(p), 0, p)` after the
    softmax, so that a row masked out entirely attends to nothing.

    ```mlir
    %nan = graph.is_nan %p : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xi64>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_I64Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_OneHotOp : Graph_Op<"one_hot", [Pure]> {
  let summary = "integer labels as rows of zeros with a one at the label";
  let description = [{
    `result[..., c] = labels[...] == c ? 1 : 0` for `c` in `[0, depth)`,
    where `depth` is the result's last dimension. A label equal to
    `ignore_index` gives a row of zeros; any other label outside
    `[0, depth)` is a data error that fails the step with the label and its
    position, as torch's losses do. The importer writes the weighted and
    unreduced negative log-likelihood losses with it (ONNX
    `NegativeLogLikelihoodLoss`, and `SoftmaxCrossEntropyLoss` with class
    weights or `reduction = "none"`): the label's entry of a row is
    `sum(x * one_hot)`, which autodiff differentiates as a product. It has
    no gradient (labels are integers).

    - `labels`: an i64 tensor.
    - `ignore_index`: optional label value whose rows are all zero.
    - `result`: f32, the labels' shape with `depth` appended.

    ```mlir
    %mask = graph.one_hot %labels {ignore_index = -100 : i64} : (tensor<6x4xi64>) -> tensor<6x4x5xf32>
    ```
  }];
  let arguments = (ins Graph_I64Tensor:$labels, OptionalAttr<Fsdpc_I64Attr>:$ignore_index);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Graph_ArgReduceOp<string mnemonic, string what> : Graph_Op<mnemonic, [Pure]> {
  let summary = "the index of the " # what # " along one axis";
  let description = [{
    As ONNX `Arg}] # !if(!eq(mnemonic, "arg_max"), "Max", "Min") # [{`, with the reduced axis kept as a dimension of 1:
    the position of the }] # what # [{ along `axis`, the first one among
    equal values, or the last with `select_last_index`. A NaN counts as
    the }] # what # [{, as in torch. It has no gradient (the result is an
    integer).

    - `input`: a float or i64 tensor.
    - `axis`: the axis, in `[0, rank)`.
    - `result`: i64, the input's shape with `axis` of size 1.

    ```mlir
    %i = graph.}] # mnemonic # [{ %x {axis = 1 : i64} : (tensor<3x7x5xf32>) -> tensor<3x1x5xi64>
    ```
  }];
  let arguments = (ins Graph_NumericTensor:$input, Fsdpc_I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs Graph_I64Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ArgMaxOp : Graph_ArgReduceOp<"arg_max", "largest value">;
def Graph_ArgMinOp : Graph_ArgReduceOp<"arg_min", "smallest value">;

def Graph_TriluOp : Graph_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "the upper or lower triangle of the last two dimensions";
  let description = [{
    As ONNX `Trilu`: keeps the elements of each trailing matrix with
    `j - i >= k` (`upper`) or `j - i <= k` (lower) and zeroes the others.

    - `input`: a tensor of rank 2 or more.
    - `k`: the diagonal offset.
    - `upper`: which triangle to keep.

    ```mlir
    %y = graph.trilu %x {k = 0 : i64, upper = false} : tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Fsdpc_I64Attr:$k, BoolAttr:$upper);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Graph_DropoutLikeOp<string mnemonic, string what> : Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what;
  let description = [{
    }] # what # [{: every element is kept with probability `1 - ratio` and
    scaled by `1 / (1 - ratio)`, or zeroed. The keep mask is a function of
    (`seed`, step, rank, element index), so `graph.dropout_grad` with the
    same seed reproduces forward's mask in backward, and every rank and step
    draws a different one.

    - `input`: an f32 tensor (for the gradient: the gradient of the output).
    - `ratio`: the drop probability, in `[0, 1)`.
    - `seed`: distinguishes dropout layers.

    ```mlir
    %y = graph.}] # mnemonic # [{ %x {ratio = 1.000000e-01 : f64, seed = 42 : i64} : tensor<8x32x48xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$ratio, Fsdpc_I64Attr:$seed);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Graph_DropoutOp : Graph_DropoutLikeOp<"dropout", "dropout in training mode">;
def Graph_DropoutGradOp : Graph_DropoutLikeOp<"dropout_grad", "the gradient of dropout">;

def Graph_CastOp : Graph_Op<"cast", [Pure]> {
  let summary = "elements converted between f32 and i64";
  let description = [{
    As ONNX `Cast` between the two element types fsdpc computes with;
    f32 to i64 truncates toward zero. Booleans are i64 0 and 1, so a cast
    of integers to ONNX's bool sets `to_bool`.

    - `input`: an f32 or i64 tensor; the result has its shape.
    - `to_bool`: map every nonzero i64 to 1 (the result must be i64).

    ```mlir
    %y = graph.cast %ids : (tensor<2x8xi64>) -> tensor<2x8xf32>
    %m = graph.cast %ids {to_bool = true} : (tensor<2x8xi64>) -> tensor<2x8xi64>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, DefaultValuedAttr<BoolAttr, "false">:$to_bool);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ScaleOp : Graph_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "multiplication by a compile-time scalar";
  let description = [{
    `result = input * factor`. Gemm's `alpha` and `beta` lower to it.

    - `input`: an f32 tensor; the result has its type.
    - `factor`: the scalar.

    ```mlir
    %y = graph.scale %x {factor = 5.000000e-01 : f64} : tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure]> {
  let summary = "the same elements under another static shape";
  let description = [{
    Reinterprets `input` in row-major order with the result's shape. ONNX
    `Reshape` (with a constant target), `Flatten` and `Identity` lower to it.

    - `input`: any ranked tensor; the result has the same element type and
      element count.

    ```mlir
    %y = graph.reshape %x : (tensor<64x1x28x28xf32>) -> tensor<64x784xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_TransposeOp : Graph_Op<"transpose", [Pure]> {
  let summary = "permutation of dimensions";
  let description = [{
    `result[i_perm[0], ..., i_perm[r-1]] = input[i_0, ..., i_(r-1)]`, i.e.
    result dimension `d` is input dimension `perm[d]`, as ONNX `Transpose`.

    - `input`: a float or i64 tensor of rank r.
    - `perm`: a permutation of `[0, r)`.

    ```mlir
    %y = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Graph_NumericTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

class Graph_SoftmaxLikeOp<string mnemonic, string what> :
    Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what # " along one axis";
  let description = [{
    Computes }] # what # [{ of `input` along `axis` (opset-13 semantics; the
    importer rewrites older opsets' 2-D coercion into reshapes around it).

    - `input`: an f32 tensor; the result has its type.
    - `axis`: the reduced dimension, negative counts from the end.

    ```mlir
    %y = graph.}] # mnemonic # [{ %x {axis = -1 : i64} : tensor<64x5xf32>
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$input, Fsdpc_I64Attr:$axis);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Graph_SoftmaxOp : Graph_SoftmaxLikeOp<"softmax", "softmax">;
def Graph_LogSoftmaxOp : Graph_SoftmaxLikeOp<"log_softmax", "log-softmax">;

def Graph_MaskedSoftmaxOp : Graph_Op<"masked_softmax", [Pure]> {
  let summary = "softmax over the last axis of scaled scores, masked positions excluded";
  let description = [{
    `softmax(where(mask, -inf, input * scale))` along the last axis: the
    scale, causal mask and softmax of attention, which exports write as
    Mul, Where with -inf and Softmax. `graph-fuse` makes it. A masked
    position gets probability exactly 0 and no gradient; a row with every
    position masked is all zeros, as torch's SDPA gives it (a left-padded
    sequence's padding queries see no key).

    - `input`: an f32 tensor; the result has its type.
    - `mask`: an i64 tensor that broadcasts to `input`; nonzero positions
      are excluded.
    - `scale`: the factor applied to `input` first.

    ```mlir
    %p = graph.masked_softmax %scores, %causal {scale = 0.288675 : f64}
        : (tensor<8x4x32x32xf32>, tensor<1x1x32x32xi64>) -> tensor<8x4x32x32xf32>
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$input, Graph_I64Tensor:$mask, F64Attr:$scale);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$input `,` $mask attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_AttentionOp : Graph_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention with a mask, without keeping the scores";
  let description = [{
    `out = masked_softmax(query @ key^T, mask, scale) @ value` over the last
    two axes, for every index of the leading (batch and head) axes:
    attention as GPT-2 and LLaMA exports write it, which `graph-fuse`
    makes from batch_matmul, masked_softmax and batch_matmul. The T x T
    probabilities are not a result: `logsumexp`, the log of each query
    row's softmax denominator (with its maximum), is enough for the
    gradient to recompute them, as flash attention does. A query row with
    every key masked gets output 0 (masked_softmax's zeros) and the largest
    f32 as its logsumexp, so that every recomputed probability is 0.

    - `query`: `[..., Tq, D]`.
    - `key`: `[..., Tk, D]`, or `[..., D, Tk]` with `key_transposed`.
    - `value`: `[..., Tk, Dv]`; the leading axes of all three are equal,
      but that key and value may have fewer heads (the axis before the
      sequence) than the query, a divisor Hkv of its H: grouped-query
      attention, where query head h reads key and value head
      h / (H / Hkv), as transformers' repeat_kv copies them (multi-query
      attention is Hkv = 1). `graph-fuse` folds such copies into the op.
    - `token_major` (four flags: query, key, value, out; absent, all
      false): an operand flagged is given as `[..., T, H, D]`, the heads
      after the sequence, as a projection `[..., T, H D]` viewed as heads
      is, instead of `[..., H, T, D]`: the op reads and writes it so, and
      `graph-fuse` drops the transposes exports write between the
      projections and attention. A transposed key is not token-major.
    - `mask`: i64, broadcasts to `[..., Tq, Tk]`; nonzero positions are
      excluded.
    - `scale`: the factor on the scores.
    - `softcap` (0, the default: none): a positive cap c makes each score
      `c tanh(scale (q . k) / c)` before the mask and softmax, as Gemma 2
      soft-caps its attention logits; `graph-fuse` takes the cap from the
      tanh between the scores and the softmax.
    - `sinks` (optional): f32 `[H]`, a learned logit per query head that
      joins every row's softmax denominator without a value (GPT-OSS's
      attention sinks: `softmax(concat(scores, sink))` without the sink's
      column), so that a query may give all keys little weight. `logsumexp`
      includes it; a row with every key masked gets output 0 and the sink
      as its logsumexp. `graph-fuse` takes it from that concat.
    - `compute_dtype`: `#graph.compute_dtype<f32>` (the default), or `bf16`
      / `f16`, which `graph-mixed-precision` sets: a device may round
      query, key, value and the probabilities to that type for its tensor cores, accumulating
      and taking the softmax in f32 (torch's flash attention under
      autocast). The CPU computes in f32 either way.
    - `query`, `key`, `value` and `out` are float tensors of any one type
      each: under mixed precision the low-precision projections, read as
      they are (widening is exact), and a low-precision `out` rounded once
      (torch's flash attention writes its output in bf16 too);
      `logsumexp` is f32.
    - results: `out` `[..., Tq, Dv]` (or `[..., Tq, H, Dv]`, token-major)
      and `logsumexp` `[..., Tq]` (`[..., H, Tq]` whatever the layouts).

    ```mlir
    %o, %lse = graph.attention %q, %kt, %v, %causal {key_transposed = true, scale = 0.288675 : f64}
        : (tensor<8x4x32x12xf32>, tensor<8x4x12x32xf32>, tensor<8x4x32x12xf32>, tensor<1x1x32x32xi64>)
        -> (tensor<8x4x32x12xf32>, tensor<8x4x32xf32>)
    %o2, %lse2 = graph.attention %q, %k, %v, %causal sinks %sinks {scale = 0.288675 : f64}
        : (tensor<8x4x32x12xf32>, tensor<8x4x32x12xf32>, tensor<8x4x32x12xf32>, tensor<1x1x32x32xi64>,
           tensor<4xf32>) -> (tensor<8x4x32x12xf32>, tensor<8x4x32xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key, Graph_FloatTensor:$value,
                       Graph_I64Tensor:$mask, Optional<Graph_F32Tensor>:$sinks, F64Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$key_transposed,
                       DefaultValuedAttr<Graph_ComputeDtypeAttr, "ComputeDtype::f32">:$compute_dtype,
                       OptionalAttr<DenseBoolArrayAttr>:$token_major, DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Graph_FloatTensor:$out, Graph_F32Tensor:$logsumexp);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $mask (`sinks` $sinks^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_AttentionGradOp : Graph_Op<"attention_grad", [Pure]> {
  let summary = "the gradients of attention's query, key and value";
  let description = [{
    Recomputes each probability from the scores and `logsumexp`, then
    `dvalue = P^T dout`, `dS = P * (dout value^T - rowsum(dout * out))`,
    `dquery = scale dS key`, `dkey = scale dS^T query` (in `key`'s layout);
    with a `softcap`, dS is also times the derivative of the cap,
    `1 - tanh^2`. With grouped heads, a key or value head's gradient is the
    sum over the query heads that read it. Attention with sinks needs
    nothing more here: its logsumexp has the sink in, so P is recomputed
    as it was, and `dS = P (dP - delta)` holds as it is; the sinks'
    gradient, `-sum exp(sink - logsumexp) rowsum(dout * out)`, is
    computed by the gradient rule with graph ops.

    - `query`, `key`, `value`, `mask`, `scale`, `key_transposed`,
      `token_major`, `softcap`: as the forward op.
    - `out`, `logsumexp`: the forward op's results.
    - `dout`: the gradient of `out`, in `out`'s layout.
    - `dquery`, `dkey`, `dvalue`: the types of `query`, `key`, `value`.

    ```mlir
    %dq, %dk, %dv = graph.attention_grad %q, %kt, %v, %causal, %o, %lse, %do {key_transposed = true, scale = 0.288675 : f64}
        : (...) -> (tensor<8x4x32x12xf32>, tensor<8x4x12x32xf32>, tensor<8x4x32x12xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key, Graph_FloatTensor:$value,
                       Graph_I64Tensor:$mask, Graph_FloatTensor:$out, Graph_F32Tensor:$logsumexp,
                       Graph_FloatTensor:$dout, F64Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$key_transposed,
                       DefaultValuedAttr<Graph_ComputeDtypeAttr, "ComputeDtype::f32">:$compute_dtype,
                       OptionalAttr<DenseBoolArrayAttr>:$token_major, DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Graph_FloatTensor:$dquery, Graph_FloatTensor:$dkey, Graph_FloatTensor:$dvalue);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $mask `,` $out `,` $logsumexp `,` $dout attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_PackedAttentionOp : Graph_Op<"packed_attention", [Pure]> {
  let summary = "attention that reads its heads from one fused query-key-value projection";
  let description = [{
    `graph.attention` over the query, key and value one projection writes
    side by side, as GPT-2's `c_attn` does: the last axis of `qkv` holds the
    query, then the key, then the value, each `heads` heads of `D` features.
    Every head attends over the sequence axis with `mask` and `scale`, and
    `out` comes back with the heads side by side again, ready for the output
    projection. `graph-fuse` makes it where an export slices the projection
    in three, views each slice as `[B, T, heads, D]` and transposes the
    heads forward (and the output back): the kernels read each head with a
    row stride instead, so neither the three slices nor the four
    transposes are copied, and the gradient comes back as one `dqkv` (as
    llm.c's attention does).

    - `qkv`: `[..., T, 3 * heads * D]`.
    - `mask`: i64, broadcasts to `[..., heads, T, T]`; nonzero positions
      are excluded.
    - `heads`, `scale`, `softcap`, `compute_dtype`: the head count, the
      factor on the scores, their cap and the products' type as in
      `graph.attention`.
    - results: `out` `[..., T, heads * D]` (any float type, as
      `graph.attention`'s) and `logsumexp` `[..., heads, T]` (f32).

    ```mlir
    %o, %lse = graph.packed_attention %qkv, %causal {heads = 4 : i64, scale = 0.288675 : f64}
        : (tensor<8x32x144xf32>, tensor<1x1x32x32xi64>) -> (tensor<8x32x48xf32>, tensor<8x4x32xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$qkv, Graph_I64Tensor:$mask, Fsdpc_I64Attr:$heads, F64Attr:$scale,
                       DefaultValuedAttr<Graph_ComputeDtypeAttr, "ComputeDtype::f32">:$compute_dtype,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Graph_FloatTensor:$out, Graph_F32Tensor:$logsumexp);
  let assemblyFormat = "$qkv `,` $mask attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_PackedAttentionGradOp : Graph_Op<"packed_attention_grad", [Pure]> {
  let summary = "the gradient of packed_attention's fused query-key-value";
  let description = [{
    `graph.attention_grad` for `graph.packed_attention`: the query, key and
    value gradients written side by side into one `dqkv` of `qkv`'s type,
    which is the gradient the fused projection's backward takes.

    - `qkv`, `mask`, `heads`, `scale`, `softcap`, `compute_dtype`: as the
      forward op.
    - `out`, `logsumexp`: the forward op's results; `dout`: `out`'s gradient.

    ```mlir
    %dqkv = graph.packed_attention_grad %qkv, %causal, %o, %lse, %do {heads = 4 : i64, scale = 0.288675 : f64}
        : (tensor<8x32x144xf32>, tensor<1x1x32x32xi64>, tensor<8x32x48xf32>, tensor<8x4x32xf32>,
           tensor<8x32x48xf32>) -> tensor<8x32x144xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$qkv, Graph_I64Tensor:$mask, Graph_FloatTensor:$out,
                       Graph_F32Tensor:$logsumexp, Graph_FloatTensor:$dout, Fsdpc_I64Attr:$heads, F64Attr:$scale,
                       DefaultValuedAttr<Graph_ComputeDtypeAttr, "ComputeDtype::f32">:$compute_dtype,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Graph_FloatTensor:$dqkv);
  let assemblyFormat = [{
    $qkv `,` $mask `,` $out `,` $logsumexp `,` $dout attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_SoftmaxCrossEntropyOp : Graph_Op<"softmax_cross_entropy", [Pure]> {
  let summary = "cross entropy of class logits against integer labels";
  let description = [{
    `-log_softmax(logits)[n, labels[n]]`, reduced over the rows whose label is
    not `ignore_index`: the mean (torch's `F.cross_entropy` default) or the
    sum. Logits with more dims are reshaped to 2-D by the importer.

    - `logits`: `[N, C]` f32, or bf16 / f16 under mixed precision (the
      kernels compute in f32, as torch's autocast does for the loss).
    - `labels`: `[N]` i64, each in `[0, C)` or equal to `ignore_index`.
    - `reduction`: `#graph.reduction<mean>` (the default) or
      `#graph.reduction<sum>`.
    - `ignore_index`: optional label value whose rows do not count.
    - `classes`: optional; only the first `classes` columns of a row are
      classes, the rest is padding (`graph-pad-classes` pads a vocabulary
      for the tensor cores). Padding takes no part in the loss, and labels
      must lie in `[0, classes)`. Without it, all `C` columns are classes.
    - `result`: the scalar loss.

    ```mlir
    %loss = graph.softmax_cross_entropy %logits, %labels {reduction = #graph.reduction<sum>}
        : (tensor<64x5xf32>, tensor<64xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_I64Tensor:$labels,
                       DefaultValuedAttr<Graph_LossReductionAttr, "LossReduction::mean">:$reduction,
                       OptionalAttr<Fsdpc_I64Attr>:$ignore_index,
                       OptionalAttr<Fsdpc_I64Attr>:$classes);
  let results = (outs Graph_F32Scalar:$result);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_MseLossOp : Graph_Op<"mse_loss", [Pure]> {
  let summary = "mean squared error";
  let description = [{
    `mean((prediction - target)^2)` over all elements, as torch's
    `F.mse_loss` default.

    - `prediction`, `target`: f32 tensors of the same shape.
    - `result`: the scalar loss.

    ```mlir
    %loss = graph.mse_loss %y, %t : (tensor<8x3xf32>, tensor<8x3xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$prediction, Graph_F32Tensor:$target);
  let results = (outs Graph_F32Scalar:$result);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient ops: made by graph-autodiff, never by the importer
//===----------------------------------------------------------------------===//

class Graph_ActivationGradOp<string mnemonic, string formula> :
    Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of an activation from its output";
  let description = [{
    `result = }] # formula # [{`, the input gradient of the activation given
    its forward output `y` and the output gradient `dy`.

    - `y`: the forward op's result.
    - `dy`: the gradient of the loss with respect to `y`.

    ```mlir
    %dx = graph.}] # mnemonic # [{ %y, %dy : tensor<64x2048xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$y, Graph_FloatTensor:$dy);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($y)";
}

def Graph_ReluGradOp : Graph_ActivationGradOp<"relu_grad", "y <= 0 ? 0 : dy (a NaN y passes dy, as torch)">;
def Graph_TanhGradOp : Graph_ActivationGradOp<"tanh_grad", "dy * (1 - y^2)">;
def Graph_SigmoidGradOp : Graph_ActivationGradOp<"sigmoid_grad", "dy * y * (1 - y)">;

class Graph_SoftmaxLikeGradOp<string mnemonic, string formula> :
    Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of a softmax-like op from its output";
  let description = [{
    `result = }] # formula # [{`, sums taken along `axis`.

    - `y`: the forward op's result.
    - `dy`: the gradient of the loss with respect to `y`.
    - `axis`: the forward op's axis.

    ```mlir
    %dx = graph.}] # mnemonic # [{ %y, %dy {axis = -1 : i64} : tensor<64x5xf32>
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$y, Graph_F32Tensor:$dy, Fsdpc_I64Attr:$axis);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($y)";
}

def Graph_SoftmaxGradOp : Graph_SoftmaxLikeGradOp<"softmax_grad", "y * (dy - sum(dy * y))">;
def Graph_LogSoftmaxGradOp : Graph_SoftmaxLikeGradOp<"log_softmax_grad", "dy - exp(y) * sum(dy)">;

def Graph_GeluGradOp : Graph_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of GELU from its input";
  let description = [{
    `dy * d gelu(x) / dx` for the forward op's `approximate`.

    - `x`: the forward op's input.
    - `dy`: the gradient of the loss with respect to the forward result.
    - `approximate`: as the forward op.

    ```mlir
    %dx = graph.gelu_grad %x, %dy {approximate = #graph.approximate<tanh>} : tensor<8x32x192xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$x, Graph_FloatTensor:$dy,
                       DefaultValuedAttr<Graph_GeluApproximationAttr, "GeluApproximation::none">:$approximate);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x)";
}

def Graph_GatedActivationGradOp : Graph_Op<"gated_activation_grad", [Pure, AllTypesMatch<["gate", "up", "dy", "dgate", "dup"]>]> {
  let summary = "gradients of gated_activation with respect to both operands";
  let description = [{
    With `a = act(gate)`: `dup = dy * a` and `dgate = dy * up * act'(gate)`,
    from the forward op's operands (nothing else is kept for backward).
    For `silu`, `dgate` is computed as the export's ops would compute it,
    `(dy * up) * s + ((dy * up) * gate) * (s * (1 - s))` with
    `s = sigmoid(gate)`, so that in f32 the fused kernels give the same
    bits as the unfused ones.

    - `gate`, `up`: the forward op's operands.
    - `dy`: the gradient of the loss with respect to its result.
    - `activation`: as the forward op.

    ```mlir
    %dgate, %dup = graph.gated_activation_grad %gate, %up, %dy {activation = #graph.activation<silu>} : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$gate, Graph_FloatTensor:$up, Graph_FloatTensor:$dy,
                       DefaultValuedAttr<Graph_GatedActivationKindAttr, "GatedActivationKind::silu">:$activation);
  let results = (outs Graph_FloatTensor:$dgate, Graph_FloatTensor:$dup);
  let assemblyFormat = "$gate `,` $up `,` $dy attr-dict `:` type($dy)";
}

def Graph_RotaryGradOp : Graph_Op<"rotary_grad", [Pure]> {
  let summary = "gradient of the rotary embedding with respect to its input";
  let description = [{
    `dy * cos + rotate_half_transposed(dy * sin)`, where
    `rotate_half_transposed(y) = concat(y[..., D/2:], -y[..., :D/2])`
    (interleaved: `[2i] = y[2i + 1]`, `[2i + 1] = -y[2i]`): the rotation by
    the negative angle, as `rotary`'s operator is linear in its input.
    Operands and `interleaved` as `rotary`'s, `dy` in place of the input.

    ```mlir
    %dx = graph.rotary_grad %dy, %cos, %sin
        : (tensor<2x16x4x8xf32>, tensor<2x16x1x8xf32>, tensor<2x16x1x8xf32>) -> tensor<2x16x4x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$dy, Graph_FloatTensor:$cos, Graph_FloatTensor:$sin,
                       DefaultValuedAttr<BoolAttr, "false">:$interleaved);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$dy `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_LayerNormGradOp : Graph_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradients of layer normalisation";
  let description = [{
    With `xhat = (x - mean) * inv_std_dev` and `g = dy * scale`, per slice:
    `dx = inv_std_dev * (g - mean(g) - xhat * mean(g * xhat))`; summed over
    all slices: `dscale = sum(dy * xhat)`, `dbias = sum(dy)`.

    - `input`, `scale`, `mean`, `inv_std_dev`, `axis`: the forward op's
      operands, attribute and saved results.
    - `dy`: the gradient of the loss with respect to the forward result.
    - `dinput`, `dscale`, `dbias`: the gradients of `input`, `scale` and
      `bias`; `dy` and `dinput` have `input`'s type, `dscale` and `dbias`
      `scale`'s (summed in f32, rounded once where low).

    ```mlir
    %dx, %dw, %db = graph.layer_norm_grad %x, %w, %mean, %rstd, %dy {axis = 2 : i64}
        : (tensor<8x32x48xf32>, tensor<48xf32>, tensor<8x32x1xf32>, tensor<8x32x1xf32>, tensor<8x32x48xf32>)
        -> (tensor<8x32x48xf32>, tensor<48xf32>, tensor<48xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale, Graph_F32Tensor:$mean,
                       Graph_F32Tensor:$inv_std_dev, Graph_FloatTensor:$dy, Fsdpc_I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$dinput, Graph_FloatTensor:$dscale, Graph_FloatTensor:$dbias);
  let assemblyFormat = "$input `,` $scale `,` $mean `,` $inv_std_dev `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_RmsNormGradOp : Graph_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradients of RMS normalisation";
  let description = [{
    With `r = inv_rms`, `xhat = input * r` and `g = dy * scale`, per slice:
    `dinput = r * (g - xhat * mean(g * xhat))`; summed over all slices:
    `dscale = sum(dy * xhat)`.

    - `input`, `scale`, `inv_rms`, `axis`: the forward op's operands,
      attribute and saved result.
    - `dy`: the gradient of the loss with respect to the forward result;
      it and `dinput` have `input`'s type, `dscale` `scale`'s.

    ```mlir
    %dx, %dw = graph.rms_norm_grad %x, %w, %r, %dy {axis = 2 : i64}
        : (tensor<8x32x48xf32>, tensor<48xf32>, tensor<8x32x1xf32>, tensor<8x32x48xf32>)
        -> (tensor<8x32x48xf32>, tensor<48xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale, Graph_F32Tensor:$inv_rms,
                       Graph_FloatTensor:$dy, Fsdpc_I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$dinput, Graph_FloatTensor:$dscale);
  let assemblyFormat = "$input `,` $scale `,` $inv_rms `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_SoftmaxCrossEntropyGradOp : Graph_Op<"softmax_cross_entropy_grad", [Pure]> {
  let summary = "gradient of softmax cross entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad / count` for rows whose label is
    not ignored (count is the number of such rows for mean, 1 for
    sum), zero for ignored rows.

    - `logits`, `labels`, `reduction`, `ignore_index`, `classes`: as the
      forward op; the gradient of padding columns is zero.
    - `grad`: the scalar gradient of the final loss with respect to this loss.
    - `result`: the logits' type (bf16 logits get a gradient rounded to
      bf16 once, from f32).

    ```mlir
    %dlogits = graph.softmax_cross_entropy_grad %logits, %labels, %g {reduction = #graph.reduction<sum>}
        : (tensor<64x5xf32>, tensor<64xi64>, tensor<f32>) -> tensor<64x5xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_I64Tensor:$labels, Graph_F32Scalar:$grad,
                       DefaultValuedAttr<Graph_LossReductionAttr, "LossReduction::mean">:$reduction,
                       OptionalAttr<Fsdpc_I64Attr>:$ignore_index,
                       OptionalAttr<Fsdpc_I64Attr>:$classes);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_MseLossGradOp : Graph_Op<"mse_loss_grad", [Pure]> {
  let summary = "gradient of the mean squared error with respect to the prediction";
  let description = [{
    `2 * (prediction - target) * grad / numel`.

    - `prediction`, `target`: as the forward op.
    - `grad`: the scalar gradient of the final loss with respect to this loss.

    ```mlir
    %dy = graph.mse_loss_grad %y, %t, %g
        : (tensor<8x3xf32>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$prediction, Graph_F32Tensor:$target, Graph_F32Scalar:$grad);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$prediction `,` $target `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_SumToOp : Graph_Op<"sum_to", [Pure]> {
  let summary = "sum over the dimensions a broadcast expanded";
  let description = [{
    The adjoint of broadcasting: sums `input` over every dimension in which
    the result's shape (aligned to the right) is 1 or missing, as torch's
    `sum_to_size`. The gradient of a broadcast operand, such as a bias.

    - `input`: an f32 tensor.
    - `result`: a shape that broadcasts to `input`'s shape.

    ```mlir
    %db = graph.sum_to %dy : (tensor<64x5xf32>) -> tensor<5xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer ops: made by graph-optimizer
//===----------------------------------------------------------------------===//

def Graph_SgdUpdateOp : Graph_Op<"sgd_update", [Pure]> {
  let summary = "one torch.optim.SGD step for one parameter";
  let description = [{
    With `d = grad + weight_decay * param`: if `momentum` is non-zero,
    `buf = d` on step 1 and `buf = momentum * buf + (1 - dampening) * d`
    after, and `d = nesterov ? d + momentum * buf : buf`; then
    `param = param - lr * d`.

    - `param`, `grad`: the parameter and its gradient (same type).
    - `state`: the momentum buffer when `momentum` is non-zero, else nothing.
    - `step`: the 1-based step counter.
    - `lr`, `momentum`, `dampening`, `weight_decay`, `nesterov`: as torch.
    - results: the new parameter, then the new state.

    ```mlir
    %p1, %buf1 = graph.sgd_update %p, %g state(%buf) step %t
        {lr = 1.0e-01 : f64, momentum = 9.0e-01 : f64, dampening = 0.0 : f64,
         weight_decay = 0.0 : f64, nesterov = false}
        : (tensor<5x10xf32>, tensor<5x10xf32>, tensor<5x10xf32>, tensor<i64>)
        -> (tensor<5x10xf32>, tensor<5x10xf32>)
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$param, Graph_F32Tensor:$grad, Variadic<Graph_F32Tensor>:$state,
                       Graph_I64Scalar:$step, F64Attr:$lr, F64Attr:$momentum, F64Attr:$dampening,
                       F64Attr:$weight_decay, BoolAttr:$nesterov, OptionalAttr<Graph_LrScheduleAttr>:$lr_schedule,
                       OptionalAttr<Fsdpc_I64Attr>:$warmup_steps,
                       OptionalAttr<Fsdpc_I64Attr>:$total_steps, OptionalAttr<F64Attr>:$min_lr);
  let results = (outs Graph_F32Tensor:$new_param, Variadic<Graph_F32Tensor>:$new_state);
  let assemblyFormat = [{
    $param `,` $grad (`state` `(` $state^ `)`)? `step` $step attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_AdamwUpdateOp : Graph_Op<"adamw_update", [Pure]> {
  let summary = "one torch.optim.AdamW step for one parameter";
  let description = [{
    `param *= 1 - lr * weight_decay`; `exp_avg = beta1 * exp_avg + (1 - beta1)
    * grad`; `exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2`;
    `param -= lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) /
    sqrt(1 - beta2^step) + eps)`: torch 1.13's AdamW, operation for operation.

    - `param`, `grad`, `exp_avg`, `exp_avg_sq`: same type.
    - `step`: the 1-based step counter.
    - `lr`, `beta1`, `beta2`, `eps`, `weight_decay`: as torch.
    - `lr_schedule` (`#graph.lr_schedule<constant>`, `linear`, `cosine`), `warmup_steps`,
      `total_steps`, `min_lr` (optional): `lr` is the peak of a schedule
      that the step counter drives (runtime/include/fsdpc/runtime/LrSchedule.h).
    - results: the new parameter, exp_avg and exp_avg_sq.

    ```mlir
    %p1, %m1, %v1 = graph.adamw_update %p, %g, %m, %v, step %t
        {lr = 1.0e-03 : f64, beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64,
         eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64}
        : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i64>)
        -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$param, Graph_F32Tensor:$grad, Graph_F32Tensor:$exp_avg,
                       Graph_F32Tensor:$exp_avg_sq, Graph_I64Scalar:$step, F64Attr:$lr, F64Attr:$beta1,
                       F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay, OptionalAttr<Graph_LrScheduleAttr>:$lr_schedule,
                       OptionalAttr<Fsdpc_I64Attr>:$warmup_steps,
                       OptionalAttr<Fsdpc_I64Attr>:$total_steps, OptionalAttr<F64Attr>:$min_lr);
  let results = (outs Graph_F32Tensor:$new_param, Graph_F32Tensor:$new_exp_avg, Graph_F32Tensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` `step` $step attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_SumSquaresOp : Graph_Op<"sum_squares", [Pure]> {
  let summary = "the sum of the squares of every element of its operands";
  let description = [{
    `result[0] = sum over every input x and element i of x[i]^2`, summed in
    double in operand and element order, then rounded to f32: the squared
    L2 norm of several tensors at once (gradient clipping's partial norm of
    this rank's gradient shards).

    - `inputs`: one or more f32 tensors.
    - `result`: `tensor<1xf32>`.

    ```mlir
    %sq = graph.sum_squares %g0, %g1 : (tensor<8xf32>, tensor<15xf32>) -> tensor<1xf32>
    ```
  }];
  let arguments = (ins Variadic<Graph_F32Tensor>:$inputs);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ClipCoefficientOp : Graph_Op<"clip_coefficient", [Pure]> {
  let summary = "the gradient norm and the factor that clips it to max_norm";
  let description = [{
    From the squared global gradient norm: `norm = sqrt(sum_squares)` and
    `scale = min(1, max_norm / (norm + 1e-6))`, in f32, as
    `torch.nn.utils.clip_grad_norm_` computes them. Every gradient is then
    multiplied by `scale`; `norm` is the norm before clipping.

    - `sum_squares`: `tensor<1xf32>`.
    - `max_norm`: the largest norm allowed, positive.
    - results: `scale`, `norm`, each `tensor<1xf32>`.

    ```mlir
    %scale, %norm = graph.clip_coefficient %sq {max_norm = 1.000000e+00 : f64}
        : (tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>)
    ```
  }];
  let arguments = (ins Graph_F32Tensor:$sum_squares, F64Attr:$max_norm);
  let results = (outs Graph_F32Tensor:$scale, Graph_F32Tensor:$norm);
  let assemblyFormat = "$sum_squares attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // FSDPC_DIALECT_GRAPH_GRAPHOPS_TD
