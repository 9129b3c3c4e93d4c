//===- EinsumPattern.cpp - Einsum as transposes, sums and batch matmuls ---===//
//
// The operands are contracted left to right. Before each contraction an
// operand loses its repeated labels (a diagonal: the two axes flattened
// and gathered at k * (n + 1)) and the labels nothing later needs (summed).
// Two operands then meet as one batch matmul: [batch, left, contracted] x
// [batch, contracted, right], the labels both share and still need being
// the batch. A last transpose puts the labels in the output's order. Every
// step is an op autodiff already differentiates.
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "Compose.h"

#include <map>
#include <set>

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

/// Letters are labels 0..51; the dims an ellipsis covers get labels from
/// kEllipsis on, aligned from the right as numpy broadcasts them.
constexpr int kEllipsis = 100;

struct Term {
  Value value;
  SmallVector<int> labels;
};

struct Einsum {
  NodeImporter &n;
  Compose b;
  std::map<int, int64_t> sizes;

  Value permute(Value v, SmallVector<int> &labels, ArrayRef<int> order) {
    SmallVector<int64_t> perm;
    for (int label : order)
      perm.push_back(std::find(labels.begin(), labels.end(), label) - labels.begin());
    labels.assign(order.begin(), order.end());
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity &= perm[i] == static_cast<int64_t>(i);
    return identity ? v : b.transpose(v, perm);
  }

  int64_t sizeOf(ArrayRef<int> labels) {
    int64_t size = 1;
    for (int label : labels)
      size *= sizes[label];
    return size;
  }

  SmallVector<int64_t> shapeOfLabels(ArrayRef<int> labels) {
    SmallVector<int64_t> shape;
    for (int label : labels)
      shape.push_back(sizes[label]);
    return shape;
  }

  /// Takes the diagonals of repeated labels and sums the labels not in `keep`.
  void prepare(Term &t, const std::set<int> &keep) {
    for (;;) {
      int repeated = -1;
      for (int label : t.labels)
        if (llvm::count(t.labels, label) > 1)
          repeated = label;
      if (repeated < 0)
        break;
      // [others..., i, i] -> [others..., i * i] -> gather k * (size + 1):
      // the first two axes of the label, moved last; further copies stay
      // among the others for the next round.
      SmallVector<int64_t> perm, pair;
      SmallVector<int> permuted;
      for (auto [i, label] : llvm::enumerate(t.labels)) {
        if (label == repeated && pair.size() < 2) {
          pair.push_back(i);
          continue;
        }
        perm.push_back(i);
        permuted.push_back(label);
      }
      perm.append(pair.begin(), pair.end());
      permuted.push_back(repeated);
      permuted.push_back(repeated);
      Value v = b.transpose(t.value, perm);
      const int64_t size = sizes[repeated];
      SmallVector<int64_t> flat = shapeOfLabels(ArrayRef<int>(permuted).drop_back(2));
      flat.push_back(size * size);
      v = b.reshape(v, flat);
      SmallVector<int64_t> diagonal;
      for (int64_t k = 0; k < size; ++k)
        diagonal.push_back(k * (size + 1));
      auto indexType = RankedTensorType::get({size}, n.builder.getI64Type());
      Value index = graph::ConstantOp::create(n.builder, n.loc, indexType,
                                              DenseElementsAttr::get(indexType, ArrayRef<int64_t>(diagonal)));
      flat.back() = size;
      t.value = graph::GatherOp::create(n.builder, n.loc, n.f32Tensor(flat), v, index,
                                        n.builder.getI64IntegerAttr(flat.size() - 1));
      permuted.pop_back();
      t.labels = permuted;
    }
    SmallVector<int64_t> axes;
    SmallVector<int> kept;
    for (auto [i, label] : llvm::enumerate(t.labels))
      (keep.count(label) ? kept.push_back(label) : axes.push_back(i));
    if (!axes.empty()) {
      t.value = b.sum(t.value, axes, /*keepdims=*/false);
      t.labels = kept;
    }
  }

  Term contract(Term a, Term c, const std::set<int> &keep) {
    SmallVector<int> batch, left, contracted, right;
    for (int label : a.labels) {
      if (!llvm::is_contained(c.labels, label))
        left.push_back(label);
      else if (keep.count(label))
        batch.push_back(label);
      else
        contracted.push_back(label);
    }
    for (int label : c.labels)
      if (!llvm::is_contained(a.labels, label))
        right.push_back(label);
    SmallVector<int> aOrder(batch), cOrder(batch);
    aOrder.append(left.begin(), left.end());
    aOrder.append(contracted.begin(), contracted.end());
    cOrder.append(contracted.begin(), contracted.end());
    cOrder.append(right.begin(), right.end());
    Value lhs = b.reshape(permute(a.value, a.labels, aOrder), {sizeOf(batch), sizeOf(left), sizeOf(contracted)});
    Value rhs = b.reshape(permute(c.value, c.labels, cOrder), {sizeOf(batch), sizeOf(contracted), sizeOf(right)});
    Value product = graph::BatchMatmulOp::create(
        n.builder, n.loc, n.f32Tensor({sizeOf(batch), sizeOf(left), sizeOf(right)}), lhs, rhs, false, false);
    Term out;
    out.labels = batch;
    out.labels.append(left.begin(), left.end());
    out.labels.append(right.begin(), right.end());
    out.value = b.reshape(product, shapeOfLabels(out.labels));
    return out;
  }
};

/// The labels of one side of the equation, the ellipsis expanded for an
/// operand of `rank` (or, for the output, of the widest ellipsis).
FailureOr<SmallVector<int>> parseLabels(NodeImporter &n, StringRef text, int64_t rank, int64_t ellipsisRank,
                                        bool isOutput) {
  SmallVector<int> labels;
  size_t dots = text.find("...");
  int64_t explicitCount = static_cast<int64_t>(text.size()) - (dots == StringRef::npos ? 0 : 3);
  int64_t covered = isOutput ? ellipsisRank : rank - explicitCount;
  if (dots == StringRef::npos && !isOutput && explicitCount != rank)
    return n.fail("equation term '" + text + "' has " + Twine(explicitCount) + " labels for an operand of rank " +
                  Twine(rank));
  if (covered < 0)
    return n.fail("equation term '" + text + "' has more labels than its operand's rank " + Twine(rank));
  for (size_t i = 0; i < text.size(); ++i) {
    if (dots != StringRef::npos && i == dots) {
      for (int64_t j = 0; j < covered; ++j)
        labels.push_back(kEllipsis + static_cast<int>(ellipsisRank - covered + j));
      i += 2;
      continue;
    }
    const char c = text[i];
    if (c >= 'a' && c <= 'z')
      labels.push_back(c - 'a');
    else if (c >= 'A' && c <= 'Z')
      labels.push_back(26 + c - 'A');
    else
      return n.fail("equation term '" + text + "' has '" + Twine(c) + "', not a letter");
  }
  return labels;
}

} // namespace

LogicalResult fsdpc::import::convertEinsum(NodeImporter &n) {
  std::string equation;
  for (char c : n.stringAttr("equation", ""))
    if (c != ' ')
      equation.push_back(c);
  if (equation.empty())
    return n.fail("needs an equation");
  if (n.numInputs() < 1)
    return n.fail("needs at least one operand");
  for (int i = 0; i < n.numInputs(); ++i)
    if (!isF32(n.input(i)))
      return n.fail("operand " + Twine(i) + " must be a float tensor");
  StringRef eq(equation);
  auto [lhsText, outText] = eq.split("->");
  const bool explicitOutput = eq.contains("->");
  SmallVector<StringRef> termTexts;
  lhsText.split(termTexts, ',');
  if (static_cast<int>(termTexts.size()) != n.numInputs())
    return n.fail("equation '" + equation + "' has " + Twine(termTexts.size()) + " terms for " +
                  Twine(n.numInputs()) + " operands");
  int64_t ellipsisRank = 0;
  for (auto [i, text] : llvm::enumerate(termTexts))
    if (text.contains("...")) {
      const int64_t explicitCount = static_cast<int64_t>(text.size()) - 3;
      ellipsisRank = std::max<int64_t>(ellipsisRank, static_cast<int64_t>(shapeOf(n.input(i)).size()) - explicitCount);
    }
  Einsum e{n, Compose{n}, {}};
  SmallVector<Term> terms;
  std::map<int, int> counts;
  for (auto [i, text] : llvm::enumerate(termTexts)) {
    Value v = n.input(i);
    FailureOr<SmallVector<int>> labels = parseLabels(n, text, shapeOf(v).size(), ellipsisRank, false);
    if (failed(labels))
      return failure();
    for (auto [d, label] : llvm::enumerate(*labels)) {
      const int64_t size = shapeOf(v)[d];
      auto [it, inserted] = e.sizes.emplace(label, size);
      if (!inserted && it->second != size)
        return n.fail("label sizes differ (" + Twine(it->second) + " and " + Twine(size) +
                      "); broadcasting inside Einsum is not supported");
      ++counts[label];
    }
    terms.push_back({v, *labels});
  }
  SmallVector<int> output;
  if (explicitOutput) {
    FailureOr<SmallVector<int>> labels = parseLabels(n, outText, 0, ellipsisRank, true);
    if (failed(labels))
      return failure();
    output = *labels;
    for (int label : output)
      if (!counts.count(label) || llvm::count(output, label) > 1)
        return n.fail("output label " + Twine(label < 26 ? char('a' + label) : char('A' + label - 26)) +
                      " is repeated or in no operand");
  } else { // numpy's implicit output: the ellipsis, then the labels used once, sorted
    for (const auto &[label, count] : counts)
      if (label >= kEllipsis)
        output.push_back(label);
    for (const auto &[label, count] : counts)
      if (label < kEllipsis && count == 1)
        output.push_back(label);
  }
  auto needed = [&](size_t from) {
    std::set<int> keep(output.begin(), output.end());
    for (size_t j = from; j < terms.size(); ++j)
      keep.insert(terms[j].labels.begin(), terms[j].labels.end());
    return keep;
  };
  Term acc = terms[0];
  e.prepare(acc, needed(1));
  for (size_t i = 1; i < terms.size(); ++i) {
    std::set<int> keepAfter = needed(i + 1);
    Term next = terms[i];
    std::set<int> keepNext = keepAfter;
    keepNext.insert(acc.labels.begin(), acc.labels.end());
    e.prepare(next, keepNext);
    // acc may still carry labels only it and nothing later need: summed in
    // prepare already, so every label left is in keepAfter or in `next`.
    acc = e.contract(acc, next, keepAfter);
  }
  e.prepare(acc, std::set<int>(output.begin(), output.end()));
  n.setOutput(0, e.permute(acc.value, acc.labels, output));
  return success();
}
