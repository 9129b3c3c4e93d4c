//===- KernelOperands.cpp - operand dtypes and shapes of every kernel ------===//
//
// What each kernel of the contract needs of its operands' dtypes and shapes,
// checked when a plan loads (validatePlan), before anything runs. A plan is
// input from someone else: once these checks pass, every kernel's reads and
// writes lie inside its operands, on every backend. What depends on the
// data (labels and indices in range) is still checked by the kernels.
//
// Dtype classes: "float" is f32, bf16 or f16 and "integer" is i64, i32 or
// bool; the CPU device widens the narrow ones to f32 and i64 around a
// kernel, the CUDA kernels read them directly.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/runtime/KernelOperands.h"

#include "KernelChecks.h"
#include "cpu/Indexing.h"
#include "fsdpc/runtime/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace fsdpc::runtime {

namespace {

using cpu::broadcastsTo;
using cpu::shapeString;

bool isFloatType(plan::DType d) { return d == plan::F32 || d == plan::BF16 || d == plan::F16; }
bool isIntegerType(plan::DType d) { return d == plan::I64 || d == plan::I32 || d == plan::BOOL; }

std::string where(const KernelCall &call) { return " (at " + call.instruction->location() + ")"; }

/// checkKernelOperands adds where the instruction came from.
Status refuse(const KernelCall &call, const std::string &why) {
  return FSDPC_ERROR(kInvalidArgument, "kernel '", call.instruction->op(), "' ", why);
}

/// Checks every operand's dtype against a pattern of one letter per operand:
/// 'f' float, 'i' integer, 'a' any, 'T' any but the same as every other 'T'
/// of the instruction. The last letter of a pattern repeats for variadic
/// operands.
Status checkDtypes(const KernelCall &call, std::string_view inputs, std::string_view outputs) {
  bool haveT = false;
  plan::DType typeT = plan::DTYPE_UNSPECIFIED;
  auto checkOne = [&](const TensorView &view, char letter, const char *side, size_t index) -> Status {
    bool fits = true;
    const char *expected = "";
    switch (letter) {
    case 'f':
      fits = isFloatType(view.dtype), expected = "a float tensor (f32, bf16, f16)";
      break;
    case 'i':
      fits = isIntegerType(view.dtype), expected = "an integer tensor (i64, i32, bool)";
      break;
    case 'T':
      if (!haveT)
        haveT = true, typeT = view.dtype;
      fits = view.dtype == typeT, expected = "the dtype of its other data operands";
      break;
    default:
      break;
    }
    if (!fits)
      return refuse(call, std::string(side) + " " + std::to_string(index) + " has dtype " +
                              plan::DType_Name(view.dtype) + "; it takes " + expected);
    return Status::ok();
  };
  for (size_t i = 0; i < call.inputs.size(); ++i)
    FSDPC_RETURN_IF_ERROR(checkOne(call.inputs[i], inputs[std::min(i, inputs.size() - 1)], "input", i));
  for (size_t i = 0; i < call.outputs.size(); ++i)
    FSDPC_RETURN_IF_ERROR(checkOne(call.outputs[i], outputs[std::min(i, outputs.size() - 1)], "output", i));
  return Status::ok();
}

/// Every operand has `count` elements.
Status sameCount(const KernelCall &call, int64_t count) {
  for (const auto *side : {&call.inputs, &call.outputs})
    for (const TensorView &view : *side)
      if (view.numElements() != count)
        return refuse(call, "needs operands of " + std::to_string(count) + " elements, got " +
                                shapeString(view.shape));
  return Status::ok();
}

Status oneElement(const KernelCall &call, const TensorView &view, const char *what) {
  if (view.numElements() != 1)
    return refuse(call, std::string(what) + " must be one element, got " + shapeString(view.shape));
  return Status::ok();
}

Status elementsOf(const KernelCall &call, const TensorView &view, int64_t count, const char *what) {
  if (view.numElements() != count)
    return refuse(call, std::string(what) + " " + shapeString(view.shape) + " does not hold " +
                            std::to_string(count) + " elements");
  return Status::ok();
}

// --- One rule per family --------------------------------------------------

Status gemm(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  const bool transA = call.intParam(contract::Param::kTransposeA, 0), transB = call.intParam(contract::Param::kTransposeB, 0);
  if (a.shape.size() < 2 || b.shape.size() != 2 || (transA && a.shape.size() != 2))
    return refuse(call, "has unsupported operand ranks " + shapeString(a.shape) + " x " + shapeString(b.shape));
  const int64_t k = transA ? a.shape[0] : a.shape.back();
  const int64_t m = transA ? a.shape[1] : elementCount(std::vector<int64_t>(a.shape.begin(), a.shape.end() - 1));
  const int64_t kb = transB ? b.shape[1] : b.shape[0], n = transB ? b.shape[0] : b.shape[1];
  if (k != kb || c.numElements() != m * n)
    return refuse(call, "has shapes " + shapeString(a.shape) + " x " + shapeString(b.shape) +
                            " that do not match the output " + shapeString(c.shape));
  if (call.ownInputs() > 2)
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.inputs[2], n, "bias"));
  return Status::ok();
}

Status gemmBiasGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(gemm(call));
  if (call.intParam(contract::Param::kBiasGradOfA, 0)) {
    if (!call.intParam(contract::Param::kTransposeA, 0))
      return refuse(call, "sums the rows of A, which must be transposed (bias_grad_of_a)");
    return elementsOf(call, call.outputs[1], call.inputs[0].shape[1], "bias gradient");
  }
  if (call.intParam(contract::Param::kTransposeB, 0))
    return refuse(call, "sums the rows of B, which must not be transposed");
  return elementsOf(call, call.outputs[1], call.inputs[1].shape[1], "bias gradient");
}

/// expert_matmul (lhs, weights, experts -> result) and
/// expert_matmul_weight_grad (lhs, dresult, experts -> the weights'
/// gradient): lhs [N, M, K], weights [E, K, F] ([E, F, K] transposed),
/// integer experts [N], result [N, M, F]. The experts' values are each
/// backend's to check.
Status expertGemm(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "ffi", "f"));
  const bool weightGrad = call.instruction->op() == "expert_matmul_weight_grad";
  const TensorView &lhs = call.inputs[0], &experts = call.inputs[2];
  const TensorView &weights = weightGrad ? call.outputs[0] : call.inputs[1],
                   &result = weightGrad ? call.inputs[1] : call.outputs[0];
  const bool transposed = call.intParam(contract::Param::kTransposeWeights, 0);
  std::vector<int64_t> expected;
  if (lhs.shape.size() == 3 && weights.shape.size() == 3)
    expected = {lhs.shape[0], lhs.shape[1], transposed ? weights.shape[1] : weights.shape[2]};
  if (expected.empty() || lhs.shape[2] != (transposed ? weights.shape[2] : weights.shape[1]) ||
      experts.shape != std::vector<int64_t>{lhs.shape[0]} || result.shape != expected)
    return refuse(call, "has lhs " + shapeString(lhs.shape) + ", weights " + shapeString(weights.shape) + ", experts " +
                            shapeString(experts.shape) + " and result " + shapeString(result.shape) +
                            " that do not fit [N, M, K], [E, K, F], [N], [N, M, F]");
  return Status::ok();
}

Status batchGemm(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &c = call.outputs[0];
  const bool transA = call.intParam(contract::Param::kTransposeA, 0), transB = call.intParam(contract::Param::kTransposeB, 0);
  const size_t ra = a.shape.size(), rb = b.shape.size(), rc = c.shape.size();
  if (ra < 2 || rb < 2 || rc < 2)
    return refuse(call, "needs operands of rank 2 or more");
  const int64_t m = transA ? a.shape[ra - 1] : a.shape[ra - 2], k = transA ? a.shape[ra - 2] : a.shape[ra - 1];
  const int64_t kb = transB ? b.shape[rb - 1] : b.shape[rb - 2], n = transB ? b.shape[rb - 2] : b.shape[rb - 1];
  const std::vector<int64_t> batch(c.shape.begin(), c.shape.end() - 2);
  if (k != kb || c.shape[rc - 2] != m || c.shape[rc - 1] != n ||
      !broadcastsTo(std::vector<int64_t>(a.shape.begin(), a.shape.end() - 2), batch) ||
      !broadcastsTo(std::vector<int64_t>(b.shape.begin(), b.shape.end() - 2), batch))
    return refuse(call, "has shapes " + shapeString(a.shape) + " x " + shapeString(b.shape) +
                            " that do not match the output " + shapeString(c.shape));
  return Status::ok();
}

/// Float operands, or integer ones for the arithmetic but pow (token ids,
/// positions).
Status binaryBroadcast(const KernelCall &call) {
  const bool integers = call.instruction->op() != "pow" && !call.inputs.empty() && isIntegerType(call.inputs[0].dtype);
  FSDPC_RETURN_IF_ERROR(integers ? checkDtypes(call, "i", "i") : checkDtypes(call, "f", "f"));
  const TensorView &out = call.outputs[0];
  for (const TensorView &in : call.inputs)
    if (!broadcastsTo(in.shape, out.shape))
      return refuse(call, "input " + shapeString(in.shape) + " does not broadcast to the output " +
                              shapeString(out.shape));
  return Status::ok();
}

/// Elementwise: every operand float and of the output's element count.
Status elementwise(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  return sameCount(call, call.outputs[0].numElements());
}

Status gelu(const KernelCall &call) {
  bool tanhForm;
  FSDPC_RETURN_IF_ERROR(geluTanhForm(call, tanhForm));
  return elementwise(call);
}

Status gatedActivation(const KernelCall &call) {
  GatedActivation kind = GatedActivation::kSilu;
  FSDPC_RETURN_IF_ERROR(gatedActivationOf(call, kind));
  return elementwise(call);
}

/// rotary, rotary_grad: float operands; cos and sin of the input's rank and
/// last dimension (even), broadcast along the others; the output the
/// input's shape.
Status rotary(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  if (x.shape.empty() || x.shape.back() % 2 != 0 || out.shape != x.shape)
    return refuse(call, "needs an input whose last dimension is even and an output of its shape, got " +
                            shapeString(x.shape) + " and " + shapeString(out.shape));
  for (size_t j = 1; j < 3; ++j) {
    const TensorView &table = call.inputs[j];
    if (table.shape.size() != x.shape.size() || table.shape.back() != x.shape.back() ||
        !broadcastsTo(table.shape, x.shape))
      return refuse(call, "input " + std::to_string(j) + " " + shapeString(table.shape) +
                              " must have the rank and last dimension of " + shapeString(x.shape) +
                              " and broadcast to it");
  }
  return Status::ok();
}

Status dropout(const KernelCall &call) {
  const double ratio = call.floatParam(contract::Param::kRatio, 0.5);
  if (!(ratio >= 0 && ratio < 1))
    return refuse(call, "has ratio " + std::to_string(ratio) + " outside [0, 1)");
  return elementwise(call);
}

Status reduceSum(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const std::vector<int64_t> &axes = call.intListParam(contract::Param::kAxes);
  std::vector<int64_t> kept;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
      kept.push_back(x.shape[d]);
  for (int64_t axis : axes)
    if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
      return refuse(call, "reduces axis " + std::to_string(axis) + " of " + shapeString(x.shape));
  return elementsOf(call, y, elementCount(kept), "output");
}

/// broadcast_to (any dtype, input to output) and sum_to, its gradient
/// (floats, output to input): `from` broadcasts to `to`.
Status broadcast(const KernelCall &call, std::string_view dtypes, const TensorView &from, const TensorView &to) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, dtypes, dtypes));
  if (!broadcastsTo(from.shape, to.shape))
    return refuse(call, shapeString(from.shape) + " does not broadcast to " + shapeString(to.shape));
  return Status::ok();
}

Status concat(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "T", "T"));
  const TensorView &y = call.outputs[0];
  const int64_t axis = call.intParam(contract::Param::kAxis, 0), rank = y.shape.size();
  if (axis < 0 || axis >= rank)
    return refuse(call, "has axis " + std::to_string(axis) + " for rank " + std::to_string(rank));
  int64_t total = 0;
  for (const TensorView &x : call.inputs) {
    bool fits = static_cast<int64_t>(x.shape.size()) == rank;
    for (int64_t d = 0; fits && d < rank; ++d)
      fits = d == axis || x.shape[d] == y.shape[d];
    if (!fits)
      return refuse(call, "input " + shapeString(x.shape) + " does not fit the output " + shapeString(y.shape) +
                              " along axis " + std::to_string(axis));
    total += x.shape[axis];
  }
  if (total != y.shape[axis])
    return refuse(call, "inputs add up to " + std::to_string(total) + " along axis " + std::to_string(axis) +
                            ", the output has " + std::to_string(y.shape[axis]));
  return Status::ok();
}

Status slice(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "T", "T"));
  return checkSlice("slice", call.inputs[0].shape, call.outputs[0].shape, call.intListParam(contract::Param::kStarts),
                    call.intListParam(contract::Param::kSteps));
}

Status sliceGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  return checkSlice("slice_grad", call.outputs[0].shape, call.inputs[0].shape,
                    call.intListParam(contract::Param::kStarts), call.intListParam(contract::Param::kSteps));
}

Status gather(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "Ti", "T"));
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(
      gatherLayout("gather", call.inputs[0].shape, call.inputs[1], call.intParam(contract::Param::kAxis, 0), g));
  return elementsOf(call, call.outputs[0], g.outer * g.count * g.inner, "output");
}

Status gatherGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fi", "f"));
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(
      gatherLayout("gather_grad", call.outputs[0].shape, call.inputs[1], call.intParam(contract::Param::kAxis, 0), g));
  return elementsOf(call, call.inputs[0], g.outer * g.count * g.inner, "gradient");
}

/// Every input broadcasts to the (first) output's shape.
Status inputsBroadcast(const KernelCall &call) {
  for (const TensorView &in : call.inputs)
    if (!broadcastsTo(in.shape, call.outputs[0].shape))
      return refuse(call, "operand " + shapeString(in.shape) + " does not broadcast to " +
                              shapeString(call.outputs[0].shape));
  return Status::ok();
}

Status select(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "iff", "f"));
  return inputsBroadcast(call);
}

Status isNan(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "i"));
  return sameCount(call, call.outputs[0].numElements());
}

Status compare(const KernelCall &call) {
  Comparison comparison = Comparison::kEqual;
  FSDPC_RETURN_IF_ERROR(comparisonOf(call, comparison));
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "TT", "i"));
  return inputsBroadcast(call);
}

Status oneHot(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "i", "f"));
  const TensorView &labels = call.inputs[0], &out = call.outputs[0];
  if (out.shape.size() != labels.shape.size() + 1 ||
      !std::equal(labels.shape.begin(), labels.shape.end(), out.shape.begin()))
    return refuse(call, "output " + shapeString(out.shape) + " is not the labels " + shapeString(labels.shape) +
                            " and a class axis");
  return Status::ok();
}

Status argReduce(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "a", "i"));
  int64_t outer, size, inner;
  return argReduceLayout(call, outer, size, inner);
}

Status cast(const KernelCall &call) {
  if (call.intParam(contract::Param::kToBool, 0))
    FSDPC_RETURN_IF_ERROR(checkDtypes(call, "i", "i"));
  return sameCount(call, call.outputs[0].numElements());
}

Status trilu(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  if (call.inputs[0].shape.size() < 2)
    return refuse(call, "needs rank 2 or more, got " + shapeString(call.inputs[0].shape));
  return sameCount(call, call.outputs[0].numElements());
}

Status transpose(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "T", "T"));
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  const std::vector<int64_t> &perm = call.intListParam(contract::Param::kPerm);
  const size_t rank = x.shape.size();
  std::vector<bool> seen(rank, false);
  bool fits = perm.size() == rank && y.shape.size() == rank;
  for (size_t d = 0; fits && d < rank; ++d) {
    fits = perm[d] >= 0 && perm[d] < static_cast<int64_t>(rank) && !seen[perm[d]] && y.shape[d] == x.shape[perm[d]];
    if (fits)
      seen[perm[d]] = true;
  }
  if (!fits)
    return refuse(call, "cannot permute " + shapeString(x.shape) + " into " + shapeString(y.shape) +
                            " with perm of " + std::to_string(perm.size()) + " entries");
  return Status::ok();
}

Status copy(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "T", "T"));
  return sameCount(call, call.outputs[0].numElements());
}

Status fill(const KernelCall &call) { return checkDtypes(call, "f", "f"); }

/// softmax, log_softmax and their gradients: one shape, a valid axis.
Status softmax(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  const TensorView &y = call.outputs[0];
  for (const TensorView &in : call.inputs)
    if (in.shape != y.shape)
      return refuse(call, "operand " + shapeString(in.shape) + " differs from the output " + shapeString(y.shape));
  int64_t outer, size, inner;
  if (!cpu::splitAroundAxis(y.shape, call.intParam(contract::Param::kAxis, -1), outer, size, inner))
    return refuse(call, "has an axis outside rank " + std::to_string(y.shape.size()));
  return Status::ok();
}

Status maskedSoftmax(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fi", "f"));
  const TensorView &x = call.inputs[0], &mask = call.inputs[1], &y = call.outputs[0];
  if (x.shape.empty() || x.shape != y.shape || !broadcastsTo(mask.shape, y.shape))
    return refuse(call, "mask " + shapeString(mask.shape) + " and input " + shapeString(x.shape) +
                            " do not fit the output " + shapeString(y.shape));
  return Status::ok();
}

/// The attention operands other than the mask against the shared sizes:
/// key and value have the query's batch dimensions (no broadcasting), but
/// for grouped heads (axis rank - 3, checked by attentionDims).
Status attentionOperands(const KernelCall &call, AttentionDims &a) {
  bool tokenMajor[4];
  FSDPC_RETURN_IF_ERROR(attentionDims(call, a, tokenMajor));
  const TensorView &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2];
  const size_t rank = q.shape.size(), batchAxes = rank >= 3 ? rank - 3 : 0;
  const bool batchFits = std::equal(q.shape.begin(), q.shape.begin() + batchAxes, k.shape.begin()) &&
                         std::equal(q.shape.begin(), q.shape.begin() + batchAxes, v.shape.begin());
  const int64_t keyD = a.keyTransposed ? k.shape[rank - 2] : k.shape[rank - 1];
  const int64_t valueT = tokenMajor[2] ? v.shape[rank - 3] : v.shape[rank - 2];
  if (!batchFits || keyD != a.d || valueT != a.tk)
    return refuse(call, "has query " + shapeString(q.shape) + ", key " + shapeString(k.shape) + " and value " +
                            shapeString(v.shape) + " that do not fit together");
  return Status::ok();
}

/// The forward results (out, logsumexp) an attention call writes or, for a
/// gradient, reads with dout.
Status attentionResults(const KernelCall &call, const AttentionDims &a, const TensorView &out, const TensorView &lse,
                        const TensorView *dout) {
  FSDPC_RETURN_IF_ERROR(elementsOf(call, out, a.batch * a.tq * a.dv, "output"));
  FSDPC_RETURN_IF_ERROR(elementsOf(call, lse, a.batch * a.tq, "logsumexp"));
  return dout ? elementsOf(call, *dout, a.batch * a.tq * a.dv, "output gradient") : Status::ok();
}

/// attention: query, key, value, mask[, sinks] -> out, logsumexp. Sinks are
/// f32, one per query head.
Status attention(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fffif", "f"));
  AttentionDims a;
  FSDPC_RETURN_IF_ERROR(attentionOperands(call, a));
  if (call.inputs.size() > 4) {
    if (call.inputs[4].dtype != plan::F32)
      return refuse(call, "takes f32 sinks, not " + plan::DType_Name(call.inputs[4].dtype));
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.inputs[4], a.heads, "sinks (one per query head)"));
  }
  return attentionResults(call, a, call.outputs[0], call.outputs[1], nullptr);
}

Status attentionGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fffifff", "f"));
  AttentionDims a;
  FSDPC_RETURN_IF_ERROR(attentionOperands(call, a));
  FSDPC_RETURN_IF_ERROR(attentionResults(call, a, call.inputs[4], call.inputs[5], &call.inputs[6]));
  for (int i = 0; i < 3; ++i)
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.outputs[i], call.inputs[i].numElements(), "gradient"));
  return Status::ok();
}

/// packed_attention: qkv, mask -> out [..., T, heads D], logsumexp.
Status packedAttention(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fi", "f"));
  AttentionDims a;
  FSDPC_RETURN_IF_ERROR(packedAttentionDims(call, a));
  return attentionResults(call, a, call.outputs[0], call.outputs[1], nullptr);
}

/// packed_attention_grad: qkv, mask, out, logsumexp, dout -> dqkv.
Status packedAttentionGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fifff", "f"));
  AttentionDims a;
  FSDPC_RETURN_IF_ERROR(packedAttentionDims(call, a));
  FSDPC_RETURN_IF_ERROR(attentionResults(call, a, call.inputs[2], call.inputs[3], &call.inputs[4]));
  return elementsOf(call, call.outputs[0], call.inputs[0].numElements(), "gradient");
}

/// layer_norm (x, scale, bias -> y, mean, inv_std_dev) and rms_norm
/// (x, scale -> y, inv_rms).
Status norm(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  const TensorView &x = call.inputs[0];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, call.inputs[1], call.outputs[1], rows, cols));
  FSDPC_RETURN_IF_ERROR(elementsOf(call, call.outputs[0], x.numElements(), "output"));
  if (call.inputs.size() == 3) {
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.inputs[2], cols, "bias"));
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.outputs[2], rows, "statistic"));
  }
  return Status::ok();
}

/// layer_norm_grad (x, scale, mean, inv_std_dev, dy -> dx, dscale, dbias)
/// and rms_norm_grad (x, scale, inv_rms, dy -> dx, dscale).
Status normGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  const TensorView &x = call.inputs[0];
  int64_t rows, cols;
  FSDPC_RETURN_IF_ERROR(normLayout(call, x, call.inputs[1], call.inputs[2], rows, cols));
  const bool layer = call.ownInputs() == 5;
  if (layer)
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.inputs[3], rows, "statistic"));
  FSDPC_RETURN_IF_ERROR(elementsOf(call, call.inputs[call.ownInputs() - 1], x.numElements(), "output gradient"));
  FSDPC_RETURN_IF_ERROR(elementsOf(call, call.outputs[0], x.numElements(), "input gradient"));
  for (size_t i = 1; i < call.outputs.size(); ++i)
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.outputs[i], cols, "parameter gradient"));
  return Status::ok();
}

Status crossEntropyParams(const KernelCall &call) {
  const std::string reduction = call.stringParam(contract::Param::kReduction, "mean");
  if (reduction != "mean" && reduction != "sum")
    return refuse(call, "has reduction '" + reduction + "'; it must be mean or sum");
  const TensorView &logits = call.inputs[0], &labels = call.inputs[1];
  if (logits.shape.size() != 2 || labels.numElements() != logits.shape[0])
    return refuse(call, "has logits " + shapeString(logits.shape) + " and labels " + shapeString(labels.shape) +
                            " that do not match");
  const int64_t classes = call.intParam(contract::Param::kClasses, logits.shape[1]);
  if (classes < 1 || classes > logits.shape[1])
    return refuse(call, "has " + std::to_string(classes) + " classes in rows of " + std::to_string(logits.shape[1]));
  return Status::ok();
}

Status crossEntropy(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fi", "f"));
  FSDPC_RETURN_IF_ERROR(crossEntropyParams(call));
  return oneElement(call, call.outputs[0], "the loss");
}

Status crossEntropyGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "fif", "f"));
  FSDPC_RETURN_IF_ERROR(crossEntropyParams(call));
  FSDPC_RETURN_IF_ERROR(oneElement(call, call.inputs[2], "the loss gradient"));
  return elementsOf(call, call.outputs[0], call.inputs[0].numElements(), "logits gradient");
}

Status crossEntropyWithGrad(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "Tif", "fT"));
  FSDPC_RETURN_IF_ERROR(crossEntropyParams(call));
  FSDPC_RETURN_IF_ERROR(oneElement(call, call.inputs[2], "the loss gradient"));
  FSDPC_RETURN_IF_ERROR(oneElement(call, call.outputs[0], "the loss"));
  return elementsOf(call, call.outputs[1], call.inputs[0].numElements(), "logits gradient");
}

Status mse(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  FSDPC_RETURN_IF_ERROR(elementsOf(call, call.inputs[1], call.inputs[0].numElements(), "target"));
  if (call.inputs.size() == 3) { // mse_loss_grad: pred, target, seed -> dpred
    FSDPC_RETURN_IF_ERROR(oneElement(call, call.inputs[2], "the loss gradient"));
    return elementsOf(call, call.outputs[0], call.inputs[0].numElements(), "prediction gradient");
  }
  return oneElement(call, call.outputs[0], "the loss");
}

/// sgd_update (param, grad, [momentum_buffer], step -> param,
/// [momentum_buffer]) and adamw_update (param, grad, exp_avg, exp_avg_sq,
/// step -> param, exp_avg, exp_avg_sq): one flat shard, a one-element step.
Status optimizer(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, std::string(call.inputs.size() - 1, 'f') + "i", "f"));
  FSDPC_RETURN_IF_ERROR(lrScheduleKind(call.stringParam(contract::Param::kLrSchedule, "constant")) >= 0
                            ? Status::ok()
                            : refuse(call, "has an unknown lr_schedule"));
  // The graph dialect's verifiers hold these for a compiled plan; a plan
  // written or edited by hand gets the same refusal here rather than a run
  // that trains to NaN.
  using contract::Param;
  const bool adamw = call.instruction->op() == "adamw_update";
  for (Param p : adamw ? std::vector<Param>{Param::kLr, Param::kEps, Param::kWeightDecay, Param::kMinLr}
                       : std::vector<Param>{Param::kLr, Param::kMomentum, Param::kWeightDecay, Param::kMinLr}) {
    const double value = call.floatParam(p, 0);
    if (!(std::isfinite(value) && value >= 0))
      return refuse(call, "has " + std::string(contract::paramName(p)) + " " + std::to_string(value) +
                              ", not a finite number >= 0");
  }
  if (adamw)
    for (Param p : {Param::kBeta1, Param::kBeta2}) {
      const double beta = call.floatParam(p, 0);
      if (!(beta >= 0 && beta < 1))
        return refuse(call, "has " + std::string(contract::paramName(p)) + " " + std::to_string(beta) +
                                " outside [0, 1)");
    }
  if (call.instruction->op() == "sgd_update") {
    const bool momentum = call.floatParam(contract::Param::kMomentum, 0) != 0;
    const size_t slots = momentum ? 2 : 1;
    if (call.inputs.size() != slots + 2 || call.outputs.size() != slots)
      return refuse(call, std::string(momentum ? "with" : "without") +
                              " momentum needs param, grad, " + (momentum ? "momentum_buffer, " : "") + "step");
  }
  const int64_t n = call.inputs[0].numElements();
  for (size_t i = 0; i + 1 < call.inputs.size(); ++i)
    FSDPC_RETURN_IF_ERROR(elementsOf(call, call.inputs[i], n, "shard operand"));
  for (const TensorView &out : call.outputs)
    FSDPC_RETURN_IF_ERROR(elementsOf(call, out, n, "shard result"));
  return oneElement(call, call.inputs.back(), "the step");
}

Status sumSquares(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  return oneElement(call, call.outputs[0], "the sum");
}

Status clipCoefficient(const KernelCall &call) {
  FSDPC_RETURN_IF_ERROR(checkDtypes(call, "f", "f"));
  return sameCount(call, 1);
}

Status checkRule(contract::OperandRule rule, const KernelCall &call) {
  using contract::OperandRule;
  switch (rule) {
  case OperandRule::kUnspecified:
    break;
  case OperandRule::kGemm:
    return gemm(call);
  case OperandRule::kGemmBiasGrad:
    return gemmBiasGrad(call);
  case OperandRule::kExpertGemm:
    return expertGemm(call);
  case OperandRule::kBatchGemm:
    return batchGemm(call);
  case OperandRule::kBinaryBroadcast:
    return binaryBroadcast(call);
  case OperandRule::kElementwise:
    return elementwise(call);
  case OperandRule::kGatedActivation:
    return gatedActivation(call);
  case OperandRule::kGelu:
    return gelu(call);
  case OperandRule::kRotary:
    return rotary(call);
  case OperandRule::kReduceSum:
    return reduceSum(call);
  case OperandRule::kBroadcastTo:
    return broadcast(call, "T", call.inputs[0], call.outputs[0]);
  case OperandRule::kSumTo:
    return broadcast(call, "f", call.outputs[0], call.inputs[0]);
  case OperandRule::kConcat:
    return concat(call);
  case OperandRule::kSlice:
    return slice(call);
  case OperandRule::kSliceGrad:
    return sliceGrad(call);
  case OperandRule::kGather:
    return gather(call);
  case OperandRule::kGatherGrad:
    return gatherGrad(call);
  case OperandRule::kSelect:
    return select(call);
  case OperandRule::kIsNan:
    return isNan(call);
  case OperandRule::kCompare:
    return compare(call);
  case OperandRule::kOneHot:
    return oneHot(call);
  case OperandRule::kArgReduce:
    return argReduce(call);
  case OperandRule::kCast:
    return cast(call);
  case OperandRule::kTrilu:
    return trilu(call);
  case OperandRule::kTranspose:
    return transpose(call);
  case OperandRule::kCopy:
    return copy(call);
  case OperandRule::kFill:
    return fill(call);
  case OperandRule::kDropout:
    return dropout(call);
  case OperandRule::kSoftmax:
    return softmax(call);
  case OperandRule::kMaskedSoftmax:
    return maskedSoftmax(call);
  case OperandRule::kAttention:
    return attention(call);
  case OperandRule::kAttentionGrad:
    return attentionGrad(call);
  case OperandRule::kPackedAttention:
    return packedAttention(call);
  case OperandRule::kPackedAttentionGrad:
    return packedAttentionGrad(call);
  case OperandRule::kNorm:
    return norm(call);
  case OperandRule::kNormGrad:
    return normGrad(call);
  case OperandRule::kCrossEntropy:
    return crossEntropy(call);
  case OperandRule::kCrossEntropyGrad:
    return crossEntropyGrad(call);
  case OperandRule::kCrossEntropyWithGrad:
    return crossEntropyWithGrad(call);
  case OperandRule::kMse:
    return mse(call);
  case OperandRule::kOptimizer:
    return optimizer(call);
  case OperandRule::kSumSquares:
    return sumSquares(call);
  case OperandRule::kClipCoefficient:
    return clipCoefficient(call);
  }
  return refuse(call, "has no operand rule in this fsdp-run");
}

/// A kernel that may accumulate (its signature has the parameter) has one
/// input more than its own exactly when it does, and that input has the
/// shape and dtype of its first output, which it is added to (cuBLASLt
/// reads it as C, whose type is D's).
Status accumulation(const contract::KernelSignature &signature, const KernelCall &call) {
  if (!signature.findAttr("accumulate"))
    return Status::ok();
  const size_t own = static_cast<size_t>(signature.minInputs);
  if (call.ownInputs() != own)
    return refuse(call, "takes " + std::to_string(own) + " inputs" + (call.addend() ? " and the addend" : "") +
                            ", got " + std::to_string(call.inputs.size()) +
                            (call.addend() ? "" : " (a last input to add needs accumulate = true)"));
  const TensorView *addend = call.addend();
  if (addend && (addend->shape != call.outputs[0].shape || addend->dtype != call.outputs[0].dtype))
    return refuse(call, "adds " + shapeString(addend->shape) + " " + plan::DType_Name(addend->dtype) +
                            " to its output " + shapeString(call.outputs[0].shape) + " " +
                            plan::DType_Name(call.outputs[0].dtype) + "; accumulate needs the output's shape and dtype");
  return Status::ok();
}

} // namespace

Status checkKernelOperands(const KernelCall &call) {
  const contract::KernelSignature *signature = contract::findKernel(call.instruction->op());
  Status status = signature ? accumulation(*signature, call) : refuse(call, "is not in the kernel contract");
  if (status.isOk())
    status = checkRule(signature->operands, call);
  // Every refusal, the rules' own and those of the checks both backends
  // share (KernelChecks.h), names the instruction's ONNX location.
  if (status.isOk())
    return status;
  return Status::error(status.code(), status.message() + where(call), status.file(), status.line());
}

} // namespace fsdpc::runtime
