//===- Profile.cpp - fsdp-run --profile's time per kernel -----------------===//
#include "fsdpc/runtime/Profile.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace fsdpc::runtime {

namespace {

double elements(const plan::Tensor &t) {
  double n = 1;
  for (int64_t d : t.shape())
    n *= static_cast<double>(d);
  return n;
}

int64_t dim(const plan::Tensor &t, int fromBack) {
  const int rank = t.shape_size();
  return rank >= fromBack ? t.shape(rank - fromBack) : 1;
}

int64_t intAttr(const plan::Instruction &inst, const char *name, int64_t fallback) {
  auto it = inst.int_attrs().find(name);
  return it == inst.int_attrs().end() ? fallback : it->second;
}

/// Attention's forward count over `queryRows` (batch x heads x queries)
/// rows, `keys` keys, head sizes `d` (query and key) and `dv` (value).
double attentionFlops(double queryRows, double keys, double d, double dv) {
  const double pairs = queryRows * keys;
  return 2 * pairs * d + 2 * pairs * dv;
}

} // namespace

double instructionFlops(const plan::PlanHeader &h, const plan::Instruction &inst) {
  const std::string &op = inst.op();
  auto input = [&](int i) -> const plan::Tensor & { return h.tensors(inst.inputs(i)); };
  if ((op == "matmul" || op == "matmul_bias" || op == "matmul_bias_grad" || op == "batch_matmul") &&
      inst.inputs_size() >= 2 && inst.outputs_size() >= 1) {
    const plan::Tensor &a = input(0);
    // out [..., M, N] = op(A) [..., M, K] op(B) [..., K, N].
    const int64_t k = a.shape_size() < 2 ? dim(a, 1) : intAttr(inst, "transpose_a", 0) ? dim(a, 2) : dim(a, 1);
    return 2 * elements(h.tensors(inst.outputs(0))) * static_cast<double>(k);
  }
  // A mixture of experts' rows: lhs [N, M, K] by a [K, F] matrix each, so
  // 2 N M K F whether the result [N, M, F] or the weights' gradient [E, K,
  // F] (from lhs and dresult [N, M, F]) is computed.
  if (op == "expert_matmul" && inst.inputs_size() >= 1 && inst.outputs_size() >= 1)
    return 2 * elements(h.tensors(inst.outputs(0))) * static_cast<double>(dim(input(0), 1));
  if (op == "expert_matmul_weight_grad" && inst.inputs_size() >= 2)
    return 2 * elements(input(0)) * static_cast<double>(dim(input(1), 1));
  const bool backward = op == "attention_grad" || op == "packed_attention_grad";
  const double factor = backward ? 2.5 : 1.0;
  if ((op == "attention" || op == "attention_grad") && inst.inputs_size() >= 3) {
    // query [..., Tq, D], value [..., Tk, Dv] (or [..., Tk, H, Dv], token-major)
    const plan::Tensor &q = input(0), &v = input(2);
    const double d = static_cast<double>(dim(q, 1)), dv = static_cast<double>(dim(v, 1));
    if (d <= 0 || dv <= 0)
      return 0;
    auto tokenMajor = inst.int_list_attrs().find("token_major");
    const bool valueTokenMajor = tokenMajor != inst.int_list_attrs().end() && tokenMajor->second.values_size() == 4 &&
                                 tokenMajor->second.values(2) != 0;
    return factor * attentionFlops(elements(q) / d, static_cast<double>(dim(v, valueTokenMajor ? 3 : 2)), d, dv);
  }
  if ((op == "packed_attention" || op == "packed_attention_grad") && inst.inputs_size() >= 1) {
    // qkv [..., T, 3 heads D]
    const plan::Tensor &qkv = input(0);
    const int64_t heads = intAttr(inst, "heads", 0);
    const int64_t width = dim(qkv, 1);
    if (heads <= 0 || width % (3 * heads) != 0)
      return 0;
    const double d = static_cast<double>(width / (3 * heads)), t = static_cast<double>(dim(qkv, 2));
    return factor * attentionFlops(elements(qkv) / static_cast<double>(width) * static_cast<double>(heads), t, d, d);
  }
  return 0;
}

double instructionBytes(const plan::PlanHeader &h, const plan::Instruction &inst) {
  double bytes = 0;
  for (int i : inst.inputs())
    bytes += static_cast<double>(h.tensors(i).bytes());
  for (int i : inst.outputs())
    bytes += static_cast<double>(h.tensors(i).bytes());
  return bytes;
}

std::vector<KernelProfile> summarizeProfile(const plan::PlanHeader &h, const std::vector<double> &seconds,
                                            int64_t steps) {
  const int64_t callsPerInstruction = std::max<int64_t>(steps, 1);
  std::map<std::string, KernelProfile> byOp;
  const int count = std::min(h.instructions_size(), static_cast<int>(seconds.size()));
  for (int i = 0; i < count; ++i) {
    if (seconds[i] <= 0)
      continue;
    const plan::Instruction &inst = h.instructions(i);
    const std::string name = inst.op() + (inst.stream() == plan::COMMUNICATION ? " (comm)" : "");
    KernelProfile &row = byOp[name];
    row.op = name;
    row.calls += callsPerInstruction;
    row.seconds += seconds[i];
    row.flops += static_cast<double>(callsPerInstruction) * instructionFlops(h, inst);
    row.bytes += static_cast<double>(callsPerInstruction) * instructionBytes(h, inst);
  }
  std::vector<KernelProfile> rows;
  for (auto &[name, row] : byOp)
    rows.push_back(row);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelProfile &a, const KernelProfile &b) { return a.seconds > b.seconds; });
  return rows;
}

namespace {

std::string tensorString(const plan::Tensor &t) {
  std::string text;
  for (int64_t d : t.shape())
    text += (text.empty() ? "" : "x") + std::to_string(d);
  std::string dtype = plan::DType_Name(t.dtype());
  std::transform(dtype.begin(), dtype.end(), dtype.begin(), [](unsigned char c) { return std::tolower(c); });
  return (text.empty() ? "scalar" : text) + " " + dtype;
}

} // namespace

std::vector<InstructionProfile> slowestInstructions(const plan::PlanHeader &h, const std::vector<double> &seconds,
                                                    int64_t steps, int count) {
  const double perStep = 1.0 / static_cast<double>(std::max<int64_t>(steps, 1));
  std::vector<InstructionProfile> rows;
  const int instructions = std::min(h.instructions_size(), static_cast<int>(seconds.size()));
  for (int i = 0; i < instructions; ++i) {
    if (seconds[i] <= 0)
      continue;
    const plan::Instruction &inst = h.instructions(i);
    InstructionProfile row;
    row.index = i;
    row.op = inst.op() + (inst.stream() == plan::COMMUNICATION ? " (comm)" : "");
    for (int t : inst.inputs())
      row.operands += (row.operands.empty() ? "" : ", ") + tensorString(h.tensors(t));
    row.operands += " ->";
    for (int j = 0; j < inst.outputs_size(); ++j)
      row.operands += (j ? ", " : " ") + tensorString(h.tensors(inst.outputs(j)));
    if (intAttr(inst, "transpose_a", 0))
      row.operands += " (A transposed)";
    if (intAttr(inst, "transpose_b", 0))
      row.operands += " (B transposed)";
    row.location = inst.location();
    row.secondsPerCall = seconds[i] * perStep;
    row.flopsPerCall = instructionFlops(h, inst);
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const InstructionProfile &a, const InstructionProfile &b) {
    return a.secondsPerCall > b.secondsPerCall;
  });
  if (static_cast<int>(rows.size()) > count)
    rows.resize(std::max(count, 0));
  return rows;
}

} // namespace fsdpc::runtime
