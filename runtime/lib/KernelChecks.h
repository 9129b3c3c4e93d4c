//===- KernelChecks.h - shape and parameter checks both backends share ----===//
//
// What a kernel checks on the host before it touches data, written once so
// the CPU and CUDA kernels of a signature accept and refuse exactly the
// same calls, with the same messages.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_KERNELCHECKS_H
#define FSDPC_RUNTIME_KERNELCHECKS_H

#include "cpu/Indexing.h"
#include "fsdpc/runtime/HostDevice.h"
#include "fsdpc/runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

namespace fsdpc::runtime {

/// The [outer, size, inner] split of arg_max / arg_min's input at its axis,
/// checked against the i64 output that keeps the axis as 1.
inline Status argReduceLayout(const KernelCall &call, int64_t &outer, int64_t &size, int64_t &inner) {
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  const int64_t axis = call.intParam(contract::Param::kAxis, 0), rank = static_cast<int64_t>(x.shape.size());
  if (out.dtype != plan::I64 || axis < 0 || axis >= rank || x.shape[axis] < 1 ||
      out.numElements() * x.shape[axis] != x.numElements())
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": input ", cpu::shapeString(x.shape),
                       " and i64 output ", cpu::shapeString(out.shape), " do not match axis ", axis);
  inner = elementCount(std::vector<int64_t>(x.shape.begin() + axis + 1, x.shape.end()));
  size = x.shape[axis];
  outer = x.numElements() / (size * inner);
  return Status::ok();
}

/// Whether arg_max (`isMax`) or arg_min moves from `best` to `value` found
/// later along the axis: a NaN wins over every number (as in torch) and,
/// among NaNs and among equal values, the first one, or the last with
/// select_last_index (`last`). `v != v` tests NaN on host and device alike
/// (and never holds for the integers an i64 input has).
template <typename T> FSDPC_HOST_DEVICE inline bool argReduceReplaces(T best, T value, bool isMax, bool last) {
  if (best != best)
    return last && value != value;
  if (value != value)
    return true;
  return isMax ? (value > best || (last && value == best)) : (value < best || (last && value == best));
}

/// The [rows, cols] layout of a layer or RMS norm's input split at `axis`,
/// checked against the scale and the per-row statistics.
inline Status normLayout(const KernelCall &call, const TensorView &x, const TensorView &scale,
                         const TensorView &statistic, int64_t &rows, int64_t &cols) {
  int64_t axis = call.intParam(contract::Param::kAxis, -1), rank = x.shape.size();
  if (axis < 0 || axis >= rank)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": axis ", axis, " is out of range for rank ", rank);
  rows = elementCount(std::vector<int64_t>(x.shape.begin(), x.shape.begin() + axis));
  cols = elementCount(std::vector<int64_t>(x.shape.begin() + axis, x.shape.end()));
  if (scale.numElements() != cols || statistic.numElements() != rows)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": scale of ", scale.numElements(),
                       " elements and statistics of ", statistic.numElements(), " do not fit ",
                       cpu::shapeString(x.shape), " normalised from axis ", axis);
  return Status::ok();
}

/// Where a strided slice starts in its input, and its stride per dimension.
struct SliceMap {
  std::vector<int64_t> strides;
  int64_t base = 0;
  SliceMap(const std::vector<int64_t> &inShape, const std::vector<int64_t> &starts, const std::vector<int64_t> &steps) {
    std::vector<int64_t> inStrides = cpu::stridesOf(inShape);
    for (size_t d = 0; d < inShape.size(); ++d) {
      base += starts[d] * inStrides[d];
      strides.push_back(steps[d] * inStrides[d]);
    }
  }
};

/// Every read of a strided slice lies in its input.
inline Status checkSlice(const char *kernel, const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                         const std::vector<int64_t> &starts, const std::vector<int64_t> &steps) {
  if (starts.size() != in.size() || steps.size() != in.size() || out.size() != in.size())
    return FSDPC_ERROR(kInvalidArgument, kernel, ": starts and steps need one entry per dimension");
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t last = starts[d] + (out[d] - 1) * steps[d];
    if (out[d] > 0 && (starts[d] < 0 || starts[d] >= in[d] || last < 0 || last >= in[d]))
      return FSDPC_ERROR(kInvalidArgument, kernel, ": dimension ", d, " reads outside [0, ", in[d], ")");
  }
  return Status::ok();
}

/// Gathering along `axis` of `data`: the [outer, rows, inner] view of the
/// data around the axis and the number of indices.
struct GatherLayout {
  int64_t outer = 1, rows = 1, inner = 1, count = 1;
};

/// The layout of gathering `indices` along `axis` of a tensor of shape
/// `data`; each backend checks the indices' values itself (the CPU before
/// it runs, the CUDA kernel through the device error word).
inline Status gatherLayout(const char *kernel, const std::vector<int64_t> &data, const TensorView &indices,
                           int64_t axis, GatherLayout &layout) {
  if (axis < 0 || axis >= static_cast<int64_t>(data.size()))
    return FSDPC_ERROR(kInvalidArgument, kernel, ": axis ", axis, " is out of range");
  for (int64_t d = 0; d < axis; ++d)
    layout.outer *= data[d];
  layout.rows = data[axis];
  for (size_t d = axis + 1; d < data.size(); ++d)
    layout.inner *= data[d];
  layout.count = indices.numElements();
  return Status::ok();
}

/// expert_matmul's sizes: lhs [n, m, k], weights [experts, k, f] ([experts,
/// f, k] with transpose_weights) and i64 experts [n]; for
/// expert_matmul_weight_grad, `weights` is its output, the weights'
/// gradient. The kernel contract's rule checked the shapes when the plan
/// loaded; each backend checks the experts' values itself (the CPU before
/// it runs, the CUDA kernels through the device error word).
struct ExpertDims {
  int64_t n = 0, m = 0, k = 0, f = 0, experts = 0;
  bool transposed = false;
};

inline Status expertDims(const KernelCall &call, const TensorView &lhs, const TensorView &weights, ExpertDims &d) {
  if (lhs.shape.size() != 3 || weights.shape.size() != 3 || call.inputs[2].dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(),
                       ": lhs [N, M, K], weights [E, K, F] and i64 experts [N] expected");
  d.transposed = call.intParam(contract::Param::kTransposeWeights, 0) != 0;
  d.n = lhs.shape[0], d.m = lhs.shape[1], d.k = lhs.shape[2], d.experts = weights.shape[0];
  d.f = d.transposed ? weights.shape[1] : weights.shape[2];
  return Status::ok();
}

/// Where one attention operand's rows lie in its buffer: row r (a query or
/// key) of batch index b starts at element
/// `offset + (b / heads) * outer + ((b % heads) / group) * head + r * row`,
/// and its features follow contiguously. attention's operands are
/// contiguous [..., heads, rows, features] blocks; a key or value with
/// grouped heads (grouped-query attention: `group` query heads share each
/// key and value head, whose copies transformers' repeat_kv would make)
/// has heads / group of them. packed_attention's query, key and value are
/// the three thirds of one [..., T, 3 heads D] buffer, so a row of one head
/// is D features every 3 heads D.
struct AttentionRows {
  int64_t offset = 0, outer = 0, head = 0, row = 0, group = 1;
};

FSDPC_HOST_DEVICE inline int64_t rowsStart(const AttentionRows &rows, int64_t heads, int64_t b) {
  return rows.offset + (b / heads) * rows.outer + (b % heads) / rows.group * rows.head;
}

/// The batch index (batch and query head) of the g-th query head that reads
/// key and value batch index kb (batch and key head), `group` query heads to
/// a key head: the dK and dV kernels sum over them.
FSDPC_HOST_DEVICE inline int64_t groupQueryIndex(int64_t heads, int64_t group, int64_t kb, int64_t g) {
  const int64_t keyHeads = heads / group;
  return (kb / keyHeads) * heads + (kb % keyHeads) * group + g;
}

/// The sizes of an attention call: `batch` batch indices (batch and heads,
/// `heads` of them the innermost, `group` query heads to a key and value
/// head) of `tq` queries and `tk` keys, head sizes
/// `d` (query, key) and `dv` (value), where each operand's rows lie (a
/// gradient's as its operand's), and the mask's strides over the scores'
/// index space [batch dims..., tq, tk] (0 where it broadcasts). A
/// transposed key is [d, tk] per batch index: element (j, c) at c tk + j.
struct AttentionDims {
  int64_t batch = 1, heads = 1, group = 1, tq = 0, tk = 0, d = 0, dv = 0;
  bool keyTransposed = false;
  // A score is scale (q . k), or with a positive softcap c,
  // c tanh(scale (q . k) / c).
  float scale = 1.0f, softcap = 0.0f;
  AttentionRows query, key, value, out;
  std::vector<int64_t> scores, maskStrides;
};

inline Status attentionMask(const KernelCall &call, const TensorView &mask, AttentionDims &a) {
  if (!cpu::broadcastsTo(mask.shape, a.scores))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": mask ", cpu::shapeString(mask.shape),
                       " does not broadcast to the scores ", cpu::shapeString(a.scores));
  a.maskStrides = cpu::broadcastStrides(mask.shape, a.scores);
  return Status::ok();
}

/// The scale and softcap of an attention call; a softcap is 0 (none) or
/// positive and finite.
inline Status attentionScoreParams(const KernelCall &call, AttentionDims &a) {
  a.scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
  const double softcap = call.floatParam(contract::Param::kSoftcap, 0.0);
  if (!(softcap >= 0) || !std::isfinite(softcap))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": softcap ", softcap,
                       " is neither 0 (none) nor positive and finite");
  a.softcap = static_cast<float>(softcap);
  return Status::ok();
}

/// attention's operands: query, key, value, mask, ... Key and value may
/// have fewer heads than the query (axis rank - 3), a divisor of its heads.
/// With token_major, the flagged operands (query, key, value, out) are
/// [..., T, H, D] instead of [..., H, T, D]; `tokenMajor` says which.
inline Status attentionDims(const KernelCall &call, AttentionDims &a, bool *tokenMajor = nullptr) {
  const TensorView &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2], &mask = call.inputs[3];
  const size_t rank = q.shape.size();
  FSDPC_RETURN_IF_ERROR(attentionScoreParams(call, a));
  a.keyTransposed = call.intParam(contract::Param::kKeyTransposed, 0);
  if (rank < 2 || k.shape.size() != rank || v.shape.size() != rank)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": query, key and value need one rank of 2 or more");
  bool layouts[4] = {false, false, false, false};
  const std::vector<int64_t> &flags = call.intListParam(contract::Param::kTokenMajor);
  if (!flags.empty()) {
    if (flags.size() != 4 || rank < 3 || (a.keyTransposed && flags[1] != 0))
      return FSDPC_ERROR(kInvalidArgument, call.instruction->op(),
                         ": token_major needs 4 flags, a heads axis and a key not transposed");
    for (int i = 0; i < 4; ++i)
      layouts[i] = flags[i] != 0;
  }
  if (tokenMajor)
    std::copy(layouts, layouts + 4, tokenMajor);
  // Each operand's shape as [..., H, T, D].
  auto headMajor = [&](std::vector<int64_t> shape, bool swapped) {
    if (swapped)
      std::swap(shape[rank - 3], shape[rank - 2]);
    return shape;
  };
  const std::vector<int64_t> qs = headMajor(q.shape, layouts[0]), ks = headMajor(k.shape, layouts[1]),
                             vs = headMajor(v.shape, layouts[2]);
  a.tq = qs[rank - 2];
  a.d = qs[rank - 1];
  a.tk = a.keyTransposed ? ks[rank - 1] : ks[rank - 2];
  a.dv = vs[rank - 1];
  a.scores.assign(qs.begin(), qs.end() - 2);
  a.batch = elementCount(a.scores);
  a.heads = rank >= 3 ? qs[rank - 3] : 1;
  const int64_t keyHeads = rank >= 3 ? ks[rank - 3] : 1;
  if (keyHeads <= 0 || a.heads % keyHeads != 0 || (rank >= 3 && vs[rank - 3] != keyHeads))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": key and value heads do not divide the query's ",
                       a.heads);
  a.group = a.heads / keyHeads;
  a.scores.push_back(a.tq);
  a.scores.push_back(a.tk);
  // Rows of `width` features, `t` of them for each of `heads` heads, in
  // either layout.
  auto rowsOf = [](int64_t heads, int64_t t, int64_t width, bool swapped, int64_t group) {
    return swapped ? AttentionRows{0, heads * t * width, width, heads * width, group}
                   : AttentionRows{0, heads * t * width, t * width, width, group};
  };
  a.query = rowsOf(a.heads, a.tq, a.d, layouts[0], 1);
  a.key = rowsOf(keyHeads, a.tk, a.d, layouts[1], a.group);
  a.value = rowsOf(keyHeads, a.tk, a.dv, layouts[2], a.group);
  a.out = rowsOf(a.heads, a.tq, a.dv, layouts[3], 1);
  return attentionMask(call, mask, a);
}

/// packed_attention's operands: qkv [..., T, 3 heads D], mask, ...; out is
/// [..., T, heads D].
inline Status packedAttentionDims(const KernelCall &call, AttentionDims &a) {
  const TensorView &qkv = call.inputs[0], &mask = call.inputs[1];
  const size_t rank = qkv.shape.size();
  FSDPC_RETURN_IF_ERROR(attentionScoreParams(call, a));
  a.heads = call.intParam(contract::Param::kHeads, 0);
  if (rank < 2 || a.heads <= 0 || qkv.shape.back() % (3 * a.heads) != 0)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": qkv ", cpu::shapeString(qkv.shape),
                       " does not hold 3 x ", a.heads, " heads of one size");
  const int64_t t = qkv.shape[rank - 2], width = qkv.shape.back() / 3;
  a.keyTransposed = false;
  a.tq = a.tk = t;
  a.d = a.dv = width / a.heads;
  a.scores.assign(qkv.shape.begin(), qkv.shape.end() - 2);
  a.batch = elementCount(a.scores) * a.heads;
  a.scores.insert(a.scores.end(), {a.heads, t, t});
  a.query = {0, t * 3 * width, a.d, 3 * width};
  a.key = {width, t * 3 * width, a.d, 3 * width};
  a.value = {2 * width, t * 3 * width, a.d, 3 * width};
  a.out = {0, t * width, a.d, width};
  return attentionMask(call, mask, a);
}

/// Whether a gelu instruction asks for the tanh form; fails on other values.
inline Status geluTanhForm(const KernelCall &call, bool &tanhForm) {
  std::string approximate = call.stringParam(contract::Param::kApproximate, "none");
  if (approximate != "none" && approximate != "tanh")
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": approximate must be none or tanh, got ",
                       approximate);
  tanhForm = approximate == "tanh";
  return Status::ok();
}

/// The activation of a gated_activation(_grad) instruction's gate.
enum class GatedActivation { kSilu, kGelu, kGeluTanh };

inline Status gatedActivationOf(const KernelCall &call, GatedActivation &kind) {
  const std::string name = call.stringParam(contract::Param::kActivation, "silu");
  if (name == "silu")
    kind = GatedActivation::kSilu;
  else if (name == "gelu")
    kind = GatedActivation::kGelu;
  else if (name == "gelu_tanh")
    kind = GatedActivation::kGeluTanh;
  else
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": activation must be silu, gelu or gelu_tanh, got ",
                       name);
  return Status::ok();
}

/// `run(std::integral_constant<GatedActivation, K>{})` for the call's
/// activation K: the kernels take it as a template argument.
template <typename Run> Status withGatedActivation(const KernelCall &call, Run run) {
  GatedActivation kind = GatedActivation::kSilu;
  FSDPC_RETURN_IF_ERROR(gatedActivationOf(call, kind));
  switch (kind) {
  case GatedActivation::kSilu:
    return run(std::integral_constant<GatedActivation, GatedActivation::kSilu>{});
  case GatedActivation::kGelu:
    return run(std::integral_constant<GatedActivation, GatedActivation::kGelu>{});
  case GatedActivation::kGeluTanh:
    return run(std::integral_constant<GatedActivation, GatedActivation::kGeluTanh>{});
  }
  return Status::ok();
}

/// What a compare instruction's predicate asks for.
enum class Comparison { kEqual, kNotEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual };

/// Whether `l <comparison> r` holds (a NaN compares unequal to everything).
template <typename T> FSDPC_HOST_DEVICE inline bool compareHolds(Comparison comparison, T l, T r) {
  switch (comparison) {
  case Comparison::kEqual:
    return l == r;
  case Comparison::kNotEqual:
    return l != r;
  case Comparison::kLess:
    return l < r;
  case Comparison::kLessOrEqual:
    return l <= r;
  case Comparison::kGreater:
    return l > r;
  case Comparison::kGreaterOrEqual:
    return l >= r;
  }
  return false;
}

/// The comparison a compare instruction names; fails on other names.
inline Status comparisonOf(const KernelCall &call, Comparison &comparison) {
  static constexpr std::pair<const char *, Comparison> kNames[] = {
      {"eq", Comparison::kEqual},       {"ne", Comparison::kNotEqual}, {"lt", Comparison::kLess},
      {"le", Comparison::kLessOrEqual}, {"gt", Comparison::kGreater},  {"ge", Comparison::kGreaterOrEqual}};
  const std::string predicate = call.stringParam(contract::Param::kPredicate, "");
  for (const auto &[name, value] : kNames)
    if (predicate == name) {
      comparison = value;
      return Status::ok();
    }
  return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": predicate must be eq, ne, lt, le, gt or ge, got '",
                     predicate, "'");
}

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_KERNELCHECKS_H
