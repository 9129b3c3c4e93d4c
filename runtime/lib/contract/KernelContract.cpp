//===- KernelContract.cpp - the table of kernel signatures ----------------===//
#include "fsdpc/runtime/KernelContract.h"

namespace fsdpc::contract {
namespace {

constexpr AttrType kBool = AttrType::kBool, kInt = AttrType::kInt, kFloat = AttrType::kFloat,
                   kIntList = AttrType::kIntList, kString = AttrType::kString;
constexpr bool kRequired = true, kOptional = false;

KernelSignature fixed(std::string_view name, int inputs, int outputs, OperandRule operands,
                      std::vector<AttrSpec> attrs = {}) {
  return {name, inputs, inputs, outputs, outputs, std::move(attrs), operands};
}

/// A kernel that may also add its last input to its first output
/// (`accumulate`): one more input, read at the output's elements, added in
/// f32 before the output is rounded. The lowering folds a residual add, or
/// the sum of two gradients, into the op that computes one of its operands.
KernelSignature accumulating(KernelSignature signature) {
  ++signature.maxInputs;
  signature.attrs.push_back({"accumulate", kBool, kOptional});
  return signature;
}

/// A kernel whose last input may be left out (attention's sinks).
KernelSignature lastInputOptional(KernelSignature signature) {
  --signature.minInputs;
  return signature;
}

KernelSignature inPlace(KernelSignature signature, int input, int output = 0) {
  signature.inPlaceInput = input;
  signature.inPlaceOutput = output;
  return signature;
}

std::vector<KernelSignature> buildTable() {
  const std::vector<AttrSpec> gemm = {{"transpose_a", kBool, kOptional}, {"transpose_b", kBool, kOptional}};
  std::vector<AttrSpec> gemmBiasGrad = gemm;
  gemmBiasGrad.push_back({"bias_grad_of_a", kBool, kOptional});
  const std::vector<AttrSpec> axis = {{"axis", kInt, kRequired}};
  const std::vector<AttrSpec> normalize = {{"axis", kInt, kRequired}, {"epsilon", kFloat, kRequired}};
  const std::vector<AttrSpec> strided = {{"starts", kIntList, kRequired}, {"steps", kIntList, kRequired}};
  const std::vector<AttrSpec> dropout = {{"ratio", kFloat, kRequired}, {"seed", kInt, kRequired}};
  const std::vector<AttrSpec> gelu = {{"approximate", kString, kOptional}};
  // compute_dtype: "f32" (the default) or, in mixed-precision plans, "bf16" /
  // "f16": the products' input type (the device's tensor cores), with f32
  // accumulation and softmax. The CPU computes in f32 either way. causal:
  // the lowering found the mask to be a constant that masks exactly the
  // keys after each query of square scores; a backend may mask by index
  // instead of reading it (the CPU reads it either way). mask_covers_causal:
  // the mask hides at least those keys (a causal mask and a padding mask
  // combined at run time); a backend may leave them out unread, but reads
  // the mask for the rest. token_major: 4 flags (query, key, value, out; 0
  // or 1) of the operands given as [..., T, H, D] instead of [..., H, T, D].
  // softcap: a positive c makes each score c tanh(scale q.k / c) (Gemma 2);
  // 0 or absent, none.
  const std::vector<AttrSpec> attention = {
      {"scale", kFloat, kRequired},  {"key_transposed", kBool, kOptional},     {"compute_dtype", kString, kOptional},
      {"causal", kBool, kOptional},  {"mask_covers_causal", kBool, kOptional}, {"token_major", kIntList, kOptional},
      {"softcap", kFloat, kOptional}};
  const std::vector<AttrSpec> packedAttention = {{"heads", kInt, kRequired},
                                                 {"scale", kFloat, kRequired},
                                                 {"compute_dtype", kString, kOptional},
                                                 {"causal", kBool, kOptional},
                                                 {"mask_covers_causal", kBool, kOptional},
                                                 {"softcap", kFloat, kOptional}};
  // "mean" (torch's default: over the labels that count) or "sum".
  // classes: the first `classes` columns of a row are classes, the rest
  // padding that takes no part (its gradient is zero); all without it.
  const std::vector<AttrSpec> crossEntropy = {
      {"reduction", kString, kOptional}, {"ignore_index", kInt, kOptional}, {"classes", kInt, kOptional}};

  std::vector<KernelSignature> table = {
      // GEMMs. matmul_bias: C = bias (broadcast over rows) + A B, as addmm.
      // With accumulate, C also adds the last input (C's shape): a residual
      // add or a gradient sum, in the GEMM's epilogue (cuBLASLt's beta = 1).
      accumulating(fixed("matmul", 2, 1, OperandRule::kGemm, gemm)),
      accumulating(fixed("matmul_bias", 3, 1, OperandRule::kGemm, gemm)),
      // A Linear layer's weight and bias gradients from one read of dY:
      // C = op(A) B and bias_grad[n] = sum over k of B[k, n] (the rows of B,
      // which is not transposed), as the lowering pairs a weight-gradient
      // GEMM with the sum_to of its dY.
      // A weight gradient (transpose_a) and its bias gradient, the rows of
      // dY summed: dY is B (X^T dY, a weight stored [in, out]) or, with
      // bias_grad_of_a, A (dY^T X, a weight stored [out, in] as torch's
      // Linear keeps it).
      fixed("matmul_bias_grad", 2, 2, OperandRule::kGemmBiasGrad, gemmBiasGrad),
      fixed("batch_matmul", 2, 1, OperandRule::kBatchGemm, gemm),
      // A mixture of experts' projection: lhs [N, M, K], weights [E, K, F]
      // ([E, F, K] with transpose_weights), experts [N] (integers in
      // [-E, E)) -> [N, M, F], row n by its expert's matrix; and the
      // weights' gradient from lhs, dresult [N, M, F] and experts, each
      // expert's rows' products summed in ascending n.
      fixed("expert_matmul", 3, 1, OperandRule::kExpertGemm, {{"transpose_weights", kBool, kOptional}}),
      fixed("expert_matmul_weight_grad", 3, 1, OperandRule::kExpertGemm, {{"transpose_weights", kBool, kOptional}}),
      // Elementwise with broadcasting.
      fixed("add", 2, 1, OperandRule::kBinaryBroadcast),
      fixed("sub", 2, 1, OperandRule::kBinaryBroadcast),
      fixed("mul", 2, 1, OperandRule::kBinaryBroadcast),
      fixed("div", 2, 1, OperandRule::kBinaryBroadcast),
      fixed("pow", 2, 1, OperandRule::kBinaryBroadcast),
      // Elementwise unary, and activation gradients from (y, dy).
      fixed("neg", 1, 1, OperandRule::kElementwise),
      fixed("exp", 1, 1, OperandRule::kElementwise),
      fixed("log", 1, 1, OperandRule::kElementwise),
      fixed("sqrt", 1, 1, OperandRule::kElementwise),
      fixed("erf", 1, 1, OperandRule::kElementwise),
      fixed("reciprocal", 1, 1, OperandRule::kElementwise),
      fixed("sin", 1, 1, OperandRule::kElementwise),
      fixed("cos", 1, 1, OperandRule::kElementwise),
      fixed("atan", 1, 1, OperandRule::kElementwise),
      fixed("floor", 1, 1, OperandRule::kElementwise),
      fixed("ceil", 1, 1, OperandRule::kElementwise),
      fixed("round", 1, 1, OperandRule::kElementwise),
      fixed("scale", 1, 1, OperandRule::kElementwise, {{"factor", kFloat, kRequired}}),
      fixed("relu", 1, 1, OperandRule::kElementwise),
      fixed("tanh", 1, 1, OperandRule::kElementwise),
      fixed("sigmoid", 1, 1, OperandRule::kElementwise),
      fixed("relu_grad", 2, 1, OperandRule::kElementwise),
      fixed("tanh_grad", 2, 1, OperandRule::kElementwise),
      fixed("sigmoid_grad", 2, 1, OperandRule::kElementwise),
      fixed("gelu", 1, 1, OperandRule::kGelu, gelu),
      fixed("gelu_grad", 2, 1, OperandRule::kGelu, gelu),
      // act(gate) * up (SwiGLU, GeGLU): gate, up -> result; and gate, up,
      // dy -> dgate, dup. activation: "silu" (the default), "gelu" or
      // "gelu_tanh".
      fixed("gated_activation", 2, 1, OperandRule::kGatedActivation, {{"activation", kString, kOptional}}),
      fixed("gated_activation_grad", 3, 2, OperandRule::kGatedActivation, {{"activation", kString, kOptional}}),
      // input (dy for the gradient), cos, sin -> out: the rotate-half
      // rotary embedding, cos and sin broadcast but along the last axis;
      // interleaved: pairs (2i, 2i + 1) instead of (i, i + D/2).
      fixed("rotary", 3, 1, OperandRule::kRotary, {{"interleaved", kBool, kOptional}}),
      fixed("rotary_grad", 3, 1, OperandRule::kRotary, {{"interleaved", kBool, kOptional}}),
      // Reductions and broadcasts.
      fixed("reduce_sum", 1, 1, OperandRule::kReduceSum,
            {{"axes", kIntList, kRequired}, {"keepdims", kBool, kRequired}}),
      fixed("broadcast_to", 1, 1, OperandRule::kBroadcastTo),
      fixed("sum_to", 1, 1, OperandRule::kSumTo),
      // Shape and indexing.
      {"concat", 1, -1, 1, 1, axis, OperandRule::kConcat},
      fixed("slice", 1, 1, OperandRule::kSlice, strided),
      fixed("slice_grad", 1, 1, OperandRule::kSliceGrad, strided),
      fixed("gather", 2, 1, OperandRule::kGather, axis),
      fixed("gather_grad", 2, 1, OperandRule::kGatherGrad, axis),
      fixed("select", 3, 1, OperandRule::kSelect),
      fixed("is_nan", 1, 1, OperandRule::kIsNan),
      // lhs, rhs (broadcast; both float or both integer) -> i64 0 or 1;
      // predicate: eq, ne, lt, le, gt, ge.
      fixed("compare", 2, 1, OperandRule::kCompare, {{"predicate", kString, kRequired}}),
      // labels -> f32 rows of zeros with a one at the label.
      fixed("one_hot", 1, 1, OperandRule::kOneHot, {{"ignore_index", kInt, kOptional}}),
      // The index along axis, which the output keeps as a dimension of 1.
      fixed("arg_max", 1, 1, OperandRule::kArgReduce,
            {{"axis", kInt, kRequired}, {"select_last_index", kBool, kOptional}}),
      fixed("arg_min", 1, 1, OperandRule::kArgReduce,
            {{"axis", kInt, kRequired}, {"select_last_index", kBool, kOptional}}),
      fixed("cast", 1, 1, OperandRule::kCast, {{"to_bool", kBool, kOptional}}),
      fixed("trilu", 1, 1, OperandRule::kTrilu, {{"k", kInt, kRequired}, {"upper", kBool, kRequired}}),
      fixed("transpose", 1, 1, OperandRule::kTranspose, {{"perm", kIntList, kRequired}}),
      fixed("copy", 1, 1, OperandRule::kCopy),
      fixed("fill", 0, 1, OperandRule::kFill, {{"value", kFloat, kRequired}}),
      fixed("dropout", 1, 1, OperandRule::kDropout, dropout),
      fixed("dropout_grad", 1, 1, OperandRule::kDropout, dropout),
      // Softmax family.
      fixed("softmax", 1, 1, OperandRule::kSoftmax, axis),
      fixed("log_softmax", 1, 1, OperandRule::kSoftmax, axis),
      fixed("softmax_grad", 2, 1, OperandRule::kSoftmax, axis),
      fixed("log_softmax_grad", 2, 1, OperandRule::kSoftmax, axis),
      fixed("masked_softmax", 2, 1, OperandRule::kMaskedSoftmax, {{"scale", kFloat, kRequired}}),
      // query, key, value, mask[, sinks] -> out, logsumexp. sinks: f32, a
      // logit per query head in each row's softmax denominator (GPT-OSS);
      // logsumexp includes it, so attention_grad needs no sinks.
      lastInputOptional(fixed("attention", 5, 2, OperandRule::kAttention, attention)),
      // query, key, value, mask, out, logsumexp, dout -> dquery, dkey, dvalue.
      fixed("attention_grad", 7, 3, OperandRule::kAttentionGrad, attention),
      // qkv [..., T, 3 heads D], mask -> out [..., T, heads D], logsumexp
      // [..., heads, T]: each head read in place with a row stride.
      fixed("packed_attention", 2, 2, OperandRule::kPackedAttention, packedAttention),
      // qkv, mask, out, logsumexp, dout -> dqkv.
      fixed("packed_attention_grad", 5, 1, OperandRule::kPackedAttentionGrad, packedAttention),
      // Norms: forward also writes the per-row statistics backward reads.
      // layer_norm: input, scale, bias -> y, mean, inv_std_dev.
      fixed("layer_norm", 3, 3, OperandRule::kNorm, normalize),
      // input, scale, mean, inv_std_dev, dy -> dinput, dscale, dbias; with
      // accumulate a last input, the gradient of the residual path that
      // dinput adds to.
      accumulating(fixed("layer_norm_grad", 5, 3, OperandRule::kNormGrad, axis)),
      // rms_norm: input, scale -> y, inv_rms.
      fixed("rms_norm", 2, 2, OperandRule::kNorm, normalize),
      // input, scale, inv_rms, dy -> dinput, dscale (with accumulate, as
      // layer_norm_grad).
      accumulating(fixed("rms_norm_grad", 4, 2, OperandRule::kNormGrad, axis)),
      // Losses: forward gives the scalar loss; grad takes the loss's seed.
      fixed("softmax_cross_entropy", 2, 1, OperandRule::kCrossEntropy, crossEntropy),
      // Each row's maximum and sum first, then each element from its own
      // logit: the gradient may overwrite the logits.
      inPlace(fixed("softmax_cross_entropy_grad", 3, 1, OperandRule::kCrossEntropyGrad, crossEntropy), 0),
      // Both at once where the lowering finds the pair on the same logits
      // and labels, the seed already computed: logits, labels, seed -> loss,
      // dlogits. Each row is read once for its maximum, sum, loss and
      // gradient; the gradient may overwrite the logits.
      inPlace(fixed("softmax_cross_entropy_with_grad", 3, 2, OperandRule::kCrossEntropyWithGrad, crossEntropy), 0, 1),
      fixed("mse_loss", 2, 1, OperandRule::kMse),
      fixed("mse_loss_grad", 3, 1, OperandRule::kMse),
      // Optimizers, in place on a unit's shard. lr is the peak learning
      // rate; lr_schedule (constant, linear, cosine), warmup_steps,
      // total_steps and min_lr give each step's (LrSchedule.h).
      // param, grad, [momentum_buffer], step -> param, [momentum_buffer].
      {"sgd_update",
       3,
       4,
       1,
       2,
       {{"lr", kFloat, kRequired},
        {"lr_schedule", kString, kOptional},
        {"warmup_steps", kInt, kOptional},
        {"total_steps", kInt, kOptional},
        {"min_lr", kFloat, kOptional},
        {"momentum", kFloat, kRequired},
        {"dampening", kFloat, kRequired},
        {"weight_decay", kFloat, kRequired},
        {"nesterov", kBool, kRequired}},
       OperandRule::kOptimizer},
      // Gradient clipping: the squared L2 norm of the inputs (summed in
      // double), then from the global one the clip scale and the norm.
      {"sum_squares", 1, -1, 1, 1, {}, OperandRule::kSumSquares},
      fixed("clip_coefficient", 1, 2, OperandRule::kClipCoefficient, {{"max_norm", kFloat, kRequired}}),
      // param, grad, exp_avg, exp_avg_sq, step -> param, exp_avg, exp_avg_sq.
      fixed("adamw_update", 5, 3, OperandRule::kOptimizer,
            {{"lr", kFloat, kRequired},
             {"lr_schedule", kString, kOptional},
             {"warmup_steps", kInt, kOptional},
             {"total_steps", kInt, kOptional},
             {"min_lr", kFloat, kOptional},
             {"beta1", kFloat, kRequired},
             {"beta2", kFloat, kRequired},
             {"eps", kFloat, kRequired},
             {"weight_decay", kFloat, kRequired}}),
  };
  return table;
}

constexpr std::string_view kParamNames[] = {"transpose_a",
                                            "transpose_b",
                                            "axis",
                                            "epsilon",
                                            "starts",
                                            "steps",
                                            "ratio",
                                            "seed",
                                            "approximate",
                                            "reduction",
                                            "ignore_index",
                                            "factor",
                                            "axes",
                                            "keepdims",
                                            "to_bool",
                                            "k",
                                            "upper",
                                            "perm",
                                            "value",
                                            "lr",
                                            "momentum",
                                            "dampening",
                                            "weight_decay",
                                            "nesterov",
                                            "beta1",
                                            "beta2",
                                            "eps",
                                            "scale",
                                            "key_transposed",
                                            "lr_schedule",
                                            "warmup_steps",
                                            "total_steps",
                                            "min_lr",
                                            "max_norm",
                                            "select_last_index",
                                            "compute_dtype",
                                            "heads",
                                            "causal",
                                            "classes",
                                            "accumulate",
                                            "predicate",
                                            "mask_covers_causal",
                                            "token_major",
                                            "softcap",
                                            "interleaved",
                                            "transpose_weights",
                                            "bias_grad_of_a",
                                            "activation"};
static_assert(sizeof(kParamNames) / sizeof(kParamNames[0]) == static_cast<size_t>(Param::kCount),
              "one name per Param");

} // namespace

std::string_view paramName(Param param) {
  return param < Param::kCount ? kParamNames[static_cast<size_t>(param)] : std::string_view("?");
}

Param findParam(std::string_view name) {
  for (size_t i = 0; i < static_cast<size_t>(Param::kCount); ++i)
    if (kParamNames[i] == name)
      return static_cast<Param>(i);
  return Param::kCount;
}

const AttrSpec *KernelSignature::findAttr(std::string_view attr) const {
  for (const AttrSpec &spec : attrs)
    if (spec.name == attr)
      return &spec;
  return nullptr;
}

const std::vector<KernelSignature> &kernelSignatures() {
  static const std::vector<KernelSignature> table = buildTable();
  return table;
}

const KernelSignature *findKernel(std::string_view name) {
  for (const KernelSignature &signature : kernelSignatures())
    if (signature.name == name)
      return &signature;
  return nullptr;
}

std::string_view attrTypeName(AttrType type) {
  switch (type) {
  case AttrType::kBool:
    return "bool";
  case AttrType::kInt:
    return "int";
  case AttrType::kFloat:
    return "float";
  case AttrType::kIntList:
    return "int list";
  case AttrType::kString:
    return "string";
  }
  return "?";
}

namespace {
std::string countError(const char *what, int min, int max, int got) {
  std::string expected = std::to_string(min);
  if (max < 0)
    expected += " or more";
  else if (max != min)
    expected += " to " + std::to_string(max);
  bool plural = !(min == 1 && max == 1);
  return std::string("takes ") + expected + " " + what + (plural ? "s" : "") + ", got " + std::to_string(got);
}
} // namespace

std::string checkArity(const KernelSignature &signature, int numInputs, int numOutputs) {
  if (numInputs < signature.minInputs || (signature.maxInputs >= 0 && numInputs > signature.maxInputs))
    return countError("input", signature.minInputs, signature.maxInputs, numInputs);
  if (numOutputs < signature.minOutputs || numOutputs > signature.maxOutputs)
    return countError("output", signature.minOutputs, signature.maxOutputs, numOutputs);
  return "";
}

} // namespace fsdpc::contract
