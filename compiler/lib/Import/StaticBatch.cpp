//===- StaticBatch.cpp - Re-deriving the batch a static export fixed ------===//
//
// Three steps, on the model as exported:
//
// 1. Shape inference at the export batch gives every value's shape.
// 2. The batch axis is followed from the inputs (axis 0) through every
//    node: where a node moves it (Transpose, Unsqueeze, Reshape, MatMul...)
//    by that op's rule, elsewhere by broadcasting. A dimension that carries
//    the batch holds it as its outermost factor (B, or B*T after a reshape).
// 3. The shape operand of each Reshape and Expand that carries the batch is
//    traced back, element by element, to the literal it came from (through
//    Concat, Unsqueeze, Gather, Cast...) and that element is rescaled. An
//    element computed from a Shape op needs nothing: shape inference
//    propagates the new input shapes into it.
//
// Constants as big as the batch are rewritten too: one that is the same for
// every sample (a folded causal mask) keeps one sample and broadcasts; one
// that numbers the samples (torch.arange(batch) indexing each sample's last
// token in a classifier head, or each sample's rows of a flattened padding
// mask) numbers the new batch's. A value as big as the batch that meets a
// batched one without carrying the batch claims it back through what it is
// computed from (claimBatch).
//
// What cannot be traced is an error naming the node; what was rewritten
// wrongly shows as a shape that differs from the expected one.
//
//===----------------------------------------------------------------------===//
#include "StaticBatch.h"

#include "ImportContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

using namespace fsdpc::import;

namespace {

using Shape = std::vector<int64_t>; // -1: unknown

std::optional<Shape> shapeOfType(const onnx::TypeProto &type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape())
    return std::nullopt;
  Shape shape;
  for (const auto &dim : type.tensor_type().shape().dim())
    shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  return shape;
}

bool fullyKnown(const Shape &shape) {
  return llvm::all_of(shape, [](int64_t d) { return d >= 0; });
}

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i)
    p *= shape[i];
  return p;
}

/// The positions along an axis of `n` that a Slice keeps, in order
/// (ONNX's clamping of starts and ends, any nonzero step).
std::vector<int64_t> slicePositions(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto wrapped = [&](int64_t i) { return i < 0 ? i + n : i; };
  std::vector<int64_t> kept;
  if (step > 0) {
    for (int64_t i = std::clamp<int64_t>(wrapped(start), 0, n), last = std::clamp<int64_t>(wrapped(end), 0, n);
         i < last; i += step)
      kept.push_back(i);
  } else {
    for (int64_t i = std::clamp<int64_t>(wrapped(start), -1, n - 1),
                 last = std::clamp<int64_t>(wrapped(end), -1, n - 1);
         i > last; i += step)
      kept.push_back(i);
  }
  return kept;
}

std::string shapeText(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return text + "]";
}

/// The node's `axis` attribute (0 when absent), a negative one counted from
/// the end of `rank` dimensions.
int64_t axisAttribute(const onnx::NodeProto &node, int64_t rank) {
  const onnx::AttributeProto *attr = findAttribute(node, "axis");
  const int64_t axis = attr ? attr->i() : 0;
  return axis < 0 ? axis + rank : axis;
}

/// An edge of the graph: input `slot` of node `node`.
struct Edge {
  int node;
  int slot;
  bool operator<(const Edge &o) const { return std::tie(node, slot) < std::tie(o.node, o.slot); }
  bool operator==(const Edge &o) const { return node == o.node && slot == o.slot; }
};

/// Where one element of an integer tensor comes from.
struct Origin {
  enum Kind { Literal, Computed, Unknown } kind = Unknown;
  std::string owner; // Literal: the constant or initializer holding it
  Edge edge{-1, -1}; // Literal: the edge that reads `owner`
  int64_t index = 0; // Literal: the element of `owner`
  int64_t value = 0; // Literal: its value
  std::string blocker; // Unknown: the node or value that hides the origin
};

Origin computedOrigin() {
  Origin origin;
  origin.kind = Origin::Computed;
  return origin;
}

class Rebatcher {
public:
  Rebatcher(onnx::ModelProto &model, const std::string &baseDir, int64_t exportBatch, int64_t newBatch,
            std::string &error)
      : model_(model), graph_(*model.mutable_graph()), baseDir_(baseDir), exportBatch_(exportBatch),
        newBatch_(newBatch), error_(error) {}

  bool run(RebatchedShapes &expected);

private:
  bool fail(const std::string &message) {
    error_ = message;
    return false;
  }
  std::string describe(int node) const {
    return "node '" + nodeName(graph_.node(node), node) + "' (" + graph_.node(node).op_type() + ")";
  }
  /// "WHERE: cannot re-derive the static batch B: WHY", as the error.
  bool refuse(const std::string &where, const std::string &why) {
    return fail(where + ": cannot re-derive the static batch " + std::to_string(exportBatch_) + ": " + why);
  }
  /// An initializer or the output of a Constant node.
  bool isLiteral(const std::string &value) const {
    if (initializers_.count(value))
      return true;
    auto producer = producers_.find(value);
    return producer != producers_.end() && graph_.node(producer->second.first).op_type() == "Constant";
  }
  /// Output axis `outAxis` of Expand node `node`: rescale the element of its
  /// target that gives that axis's size, if the target has one.
  bool rescaleExpandTarget(int node, int64_t outAxis);
  bool inferExportShapes();
  void indexGraph();
  const Shape *shapeOf(const std::string &value) const {
    auto it = shapes_.find(value);
    return it == shapes_.end() ? nullptr : &it->second;
  }
  int axisOf(const std::string &value) const {
    auto it = axes_.find(value);
    return it == axes_.end() ? -1 : it->second;
  }
  std::optional<std::vector<int64_t>> literalInts(const std::string &value) const;
  std::optional<std::vector<int64_t>> evaluateInts(const std::string &value, int depth = 0) const;
  std::optional<Shape> reshapeResult(const onnx::NodeProto &node) const;
  std::optional<Shape> expandResult(const onnx::NodeProto &node) const;
  std::optional<Shape> padResult(const onnx::NodeProto &node) const;
  std::optional<Shape> sliceResult(const onnx::NodeProto &node) const;
  std::optional<std::vector<int64_t>> axesOperand(const onnx::NodeProto &node, const std::string &attribute,
                                                  int input) const;
  int outputAxis(int node, int output) const;
  int reshapedBatchAxis(const Shape &from, int axis, const Shape &to) const;
  Origin trace(const std::string &value, int64_t index, Edge edge, int depth) const;
  bool rescaleShapeOperand(int node, int slot, int64_t element);
  bool collapseBatchSizedConstants(int node);
  bool batchScatterOperands(int node);
  void keepOneSampleBeforeReader(int node, int slot, int batchAxis);
  bool claimBatch(const std::string &value, int axis, int depth);
  bool isBatchPositions(const std::string &literal, int axis) const;
  bool numberNewBatch(const std::string &literal, int axis, const std::string &reader);
  bool applyCollapses();
  bool applyBatchPositions();
  bool collectRewrites();
  bool applyRewrites();
  void rebatchInputsAndDropShapes();

  onnx::ModelProto &model_;
  onnx::GraphProto &graph_;
  std::string baseDir_;
  int64_t exportBatch_;
  int64_t newBatch_;
  std::string &error_;

  llvm::StringMap<Shape> shapes_;                    // at the export batch
  llvm::StringMap<int> axes_;                        // value -> its batch axis
  llvm::StringMap<std::pair<int, int>> producers_;   // value -> node, output
  llvm::StringMap<int> initializers_;                // name -> index
  llvm::StringMap<std::vector<Edge>> consumers_;     // value -> edges reading it
  llvm::StringSet<> graphOutputs_;
  // owner -> edge -> element -> new value
  std::map<std::string, std::map<Edge, std::map<int64_t, int64_t>>> rewrites_;
  // constant -> the batch axis it loses, and the node whose operand it is
  std::map<std::string, std::pair<int, std::string>> collapses_;
  // integer constant -> the batch axis along which it numbers the samples
  std::map<std::string, int> batchPositions_;
  // A collapsed constant that a Concat or a scatter reads (neither
  // broadcasts): an Expand back to the batch goes in front of the reader
  // (named by its output).
  struct BatchExpand {
    std::string readerOutput, constant;
    int slot;
    Shape shape;
  };
  std::vector<BatchExpand> batchExpands_;
};

bool Rebatcher::inferExportShapes() {
  onnx::ModelProto inferred = model_;
  // A symbolic leading dimension next to static ones is the batch as well.
  for (onnx::ValueInfoProto &input : *inferred.mutable_graph()->mutable_input()) {
    auto *shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() > 0 && !shape->dim(0).has_dim_value() && !initializers_.count(input.name()))
      shape->mutable_dim(0)->set_dim_value(exportBatch_);
  }
  // libonnx 1.12 propagates shape values through some ops only (not through
  // Unsqueeze with an axes input, which unfolded torch exports write before
  // every Reshape, nor the reversed and transposed pads torch computes for
  // F.pad): the shapes of Reshape, Expand and Pad outputs it leaves unknown
  // are folded here and handed back to it, until nothing new is learnt.
  for (int round = 0; round < 16; ++round) {
    std::string error;
    if (!inferOnnxShapes(inferred, error))
      return fail(error);
    shapes_.clear();
    const onnx::GraphProto &graph = inferred.graph();
    for (const auto *list : {&graph.input(), &graph.value_info(), &graph.output()})
      for (const onnx::ValueInfoProto &info : *list)
        if (auto shape = shapeOfType(info.type()))
          shapes_[info.name()] = *shape;
    for (const onnx::TensorProto &init : graph.initializer())
      shapes_[init.name()] = Shape(init.dims().begin(), init.dims().end());
    bool learnt = false;
    for (const onnx::NodeProto &node : graph_.node()) {
      const std::string &op = node.op_type();
      if ((op != "Reshape" && op != "Expand" && op != "Pad" && op != "Slice") || node.output_size() != 1)
        continue;
      const Shape *known = shapeOf(node.output(0));
      if (known && fullyKnown(*known))
        continue;
      std::optional<Shape> result = op == "Reshape"  ? reshapeResult(node)
                                    : op == "Expand" ? expandResult(node)
                                    : op == "Slice"  ? sliceResult(node)
                                                     : padResult(node);
      if (!result)
        continue;
      onnx::ValueInfoProto *info = nullptr;
      for (onnx::ValueInfoProto &existing : *inferred.mutable_graph()->mutable_value_info())
        if (existing.name() == node.output(0))
          info = &existing;
      if (!info) {
        info = inferred.mutable_graph()->add_value_info();
        info->set_name(node.output(0));
      }
      auto *tensor = info->mutable_type()->mutable_tensor_type();
      if (tensor->elem_type() == 0) {
        const onnx::ValueInfoProto *source = nullptr;
        for (const auto *list : {&graph.input(), &graph.value_info()})
          for (const onnx::ValueInfoProto &candidate : *list)
            if (candidate.name() == node.input(0))
              source = &candidate;
        if (!source)
          continue;
        tensor->set_elem_type(source->type().tensor_type().elem_type());
      }
      tensor->clear_shape();
      for (int64_t d : *result)
        tensor->mutable_shape()->add_dim()->set_dim_value(d);
      learnt = true;
    }
    if (!learnt)
      break;
  }
  return true;
}

/// The value of a small integer tensor (a shape chain) at the export batch.
std::optional<std::vector<int64_t>> Rebatcher::evaluateInts(const std::string &value, int depth) const {
  if (auto ints = literalInts(value))
    return ints;
  auto producer = producers_.find(value);
  if (producer == producers_.end() || depth > 64)
    return std::nullopt;
  const onnx::NodeProto &node = graph_.node(producer->second.first);
  const std::string &op = node.op_type();
  auto operand = [&](int i) -> std::optional<std::vector<int64_t>> {
    if (i >= node.input_size() || node.input(i).empty())
      return std::nullopt;
    return evaluateInts(node.input(i), depth + 1);
  };
  if (op == "Shape") {
    const Shape *shape = shapeOf(node.input(0));
    if (!shape || !fullyKnown(*shape))
      return std::nullopt;
    const int64_t rank = static_cast<int64_t>(shape->size());
    auto clampIndex = [&](const char *name, int64_t fallback) {
      const onnx::AttributeProto *attr = findAttribute(node, name);
      int64_t i = attr ? attr->i() : fallback;
      return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
    };
    const int64_t start = clampIndex("start", 0), end = clampIndex("end", rank);
    return std::vector<int64_t>(shape->begin() + start, shape->begin() + std::max(start, end));
  }
  if (op == "Identity" || op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten")
    return operand(0);
  if (op == "Concat") {
    std::vector<int64_t> joined;
    for (int i = 0; i < node.input_size(); ++i) {
      auto part = operand(i);
      if (!part)
        return std::nullopt;
      joined.insert(joined.end(), part->begin(), part->end());
    }
    return joined;
  }
  if (op == "Gather") {
    auto data = operand(0), indices = operand(1);
    if (!data || !indices)
      return std::nullopt;
    std::vector<int64_t> picked;
    for (int64_t i : *indices) {
      int64_t at = i < 0 ? i + static_cast<int64_t>(data->size()) : i;
      if (at < 0 || at >= static_cast<int64_t>(data->size()))
        return std::nullopt;
      picked.push_back((*data)[at]);
    }
    return picked;
  }
  if (op == "Slice") {
    // Along one axis, any step (torch's F.pad reverses the rows of its
    // [rank, 2] pads).
    auto data = operand(0), starts = operand(1), ends = operand(2);
    const bool hasAxes = node.input_size() > 3 && !node.input(3).empty(),
               hasSteps = node.input_size() > 4 && !node.input(4).empty();
    auto axes = hasAxes ? operand(3) : std::vector<int64_t>{0};
    auto steps = hasSteps ? operand(4) : std::vector<int64_t>{1};
    if (!data || !starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
        steps->size() != 1 || (*steps)[0] == 0)
      return std::nullopt;
    const Shape *known = shapeOf(node.input(0));
    const Shape shape = known ? *known : Shape{static_cast<int64_t>(data->size())};
    const int rank = static_cast<int>(shape.size());
    const int64_t axis = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
    if (!fullyKnown(shape) || product(shape, 0, rank) != static_cast<int64_t>(data->size()) || axis < 0 || axis >= rank)
      return std::nullopt;
    const int64_t n = shape[axis], inner = product(shape, axis + 1, rank), outer = product(shape, 0, axis);
    const std::vector<int64_t> kept = slicePositions(n, (*starts)[0], (*ends)[0], (*steps)[0]);
    std::vector<int64_t> out;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i : kept)
        for (int64_t k = 0; k < inner; ++k)
          out.push_back((*data)[(o * n + i) * inner + k]);
    return out;
  }
  if (op == "Transpose") {
    auto data = operand(0);
    const Shape *shape = shapeOf(node.input(0));
    if (!data || !shape || !fullyKnown(*shape) ||
        product(*shape, 0, shape->size()) != static_cast<int64_t>(data->size()))
      return std::nullopt;
    const int rank = static_cast<int>(shape->size());
    std::vector<int64_t> perm;
    if (const onnx::AttributeProto *attr = findAttribute(node, "perm"))
      perm.assign(attr->ints().begin(), attr->ints().end());
    else
      for (int d = rank - 1; d >= 0; --d)
        perm.push_back(d);
    if (static_cast<int>(perm.size()) != rank || llvm::any_of(perm, [&](int64_t p) { return p < 0 || p >= rank; }))
      return std::nullopt;
    std::vector<int64_t> out(data->size());
    for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i)
      out[i] = (*data)[transposeSourceIndex(*shape, perm, i)];
    return out;
  }
  if (op == "ConstantOfShape") {
    auto shape = operand(0);
    int64_t fill = 0;
    if (const onnx::AttributeProto *attr = findAttribute(node, "value")) {
      std::vector<int64_t> ints;
      std::string error;
      if (!readTensorElements(attr->t(), baseDir_, nullptr, &ints, error) || ints.size() != 1)
        return std::nullopt;
      fill = ints[0];
    }
    if (!shape || shape->size() > 1 || (shape->size() == 1 && ((*shape)[0] < 0 || (*shape)[0] > 64)))
      return std::nullopt;
    return std::vector<int64_t>(shape->empty() ? 1 : (*shape)[0], fill);
  }
  if (op == "Where") {
    auto condition = operand(0), lhs = operand(1), rhs = operand(2);
    if (!condition || !lhs || !rhs)
      return std::nullopt;
    const size_t size = std::max({condition->size(), lhs->size(), rhs->size()});
    std::vector<int64_t> out(size);
    for (size_t i = 0; i < size; ++i) {
      auto at = [&](const std::vector<int64_t> &v) { return v[v.size() == 1 ? 0 : i]; };
      if ((condition->size() != 1 && condition->size() != size) || (lhs->size() != 1 && lhs->size() != size) ||
          (rhs->size() != 1 && rhs->size() != size))
        return std::nullopt;
      out[i] = at(*condition) ? at(*lhs) : at(*rhs);
    }
    return out;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Mod") {
    auto lhs = operand(0), rhs = operand(1);
    if (!lhs || !rhs || (lhs->size() != rhs->size() && lhs->size() != 1 && rhs->size() != 1))
      return std::nullopt;
    std::vector<int64_t> out(std::max(lhs->size(), rhs->size()));
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t x = (*lhs)[lhs->size() == 1 ? 0 : i], y = (*rhs)[rhs->size() == 1 ? 0 : i];
      if ((op == "Div" || op == "Mod") && y == 0)
        return std::nullopt;
      if (op == "Mod") { // the divisor's sign (fmod 0, Python's %) or the dividend's (fmod 1)
        const bool truncated = findAttribute(node, "fmod") && findAttribute(node, "fmod")->i();
        const int64_t r = x % y;
        out[i] = !truncated && r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
        continue;
      }
      out[i] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : op == "Equal" ? x == y : x / y;
    }
    return out;
  }
  return std::nullopt;
}

/// An Expand's output shape at the export batch: its input's shape and its
/// folded target, broadcast together.
std::optional<Shape> Rebatcher::expandResult(const onnx::NodeProto &node) const {
  const Shape *in = shapeOf(node.input(0));
  auto target = evaluateInts(node.input(1));
  if (!in || !fullyKnown(*in) || !target)
    return std::nullopt;
  const size_t rank = std::max(in->size(), target->size());
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t a = d + in->size() >= rank ? (*in)[d + in->size() - rank] : 1;
    const int64_t b = d + target->size() >= rank ? (*target)[d + target->size() - rank] : 1;
    if (a != b && a != 1 && b != 1)
      return std::nullopt;
    out[d] = a == 1 ? b : a;
  }
  return out;
}

/// A Pad's output shape at the export batch (opset 11 and later: pads an
/// input), from its input's shape and its folded pads; not with `axes`.
std::optional<Shape> Rebatcher::padResult(const onnx::NodeProto &node) const {
  const Shape *in = shapeOf(node.input(0));
  if (!in || !fullyKnown(*in) || node.input_size() < 2 || (node.input_size() > 3 && !node.input(3).empty()))
    return std::nullopt;
  auto pads = evaluateInts(node.input(1));
  const size_t rank = in->size();
  if (!pads || pads->size() != 2 * rank)
    return std::nullopt;
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    out[d] = (*in)[d] + (*pads)[d] + (*pads)[d + rank];
    if (out[d] < 0)
      return std::nullopt;
  }
  return out;
}

/// A Slice's output shape at the export batch, from its input's shape and
/// its folded starts, ends, axes and steps (TorchScript builds them with
/// Unsqueeze of Constants, which libonnx does not fold: Swin's patch
/// merging takes every other row and column so).
std::optional<Shape> Rebatcher::sliceResult(const onnx::NodeProto &node) const {
  const Shape *in = shapeOf(node.input(0));
  if (!in || !fullyKnown(*in) || node.input_size() < 3)
    return std::nullopt;
  const int rank = static_cast<int>(in->size());
  auto starts = evaluateInts(node.input(1)), ends = evaluateInts(node.input(2));
  std::optional<std::vector<int64_t>> axes, steps;
  if (node.input_size() > 3 && !node.input(3).empty())
    axes = evaluateInts(node.input(3));
  else {
    axes.emplace();
    for (size_t i = 0; starts && i < starts->size(); ++i)
      axes->push_back(static_cast<int64_t>(i));
  }
  if (node.input_size() > 4 && !node.input(4).empty())
    steps = evaluateInts(node.input(4));
  else if (starts)
    steps = std::vector<int64_t>(starts->size(), 1);
  if (!starts || !ends || !axes || !steps || ends->size() != starts->size() || axes->size() != starts->size() ||
      steps->size() != starts->size())
    return std::nullopt;
  Shape out = *in;
  for (size_t i = 0; i < starts->size(); ++i) {
    const int64_t axis = (*axes)[i] < 0 ? (*axes)[i] + rank : (*axes)[i];
    if (axis < 0 || axis >= rank || (*steps)[i] == 0)
      return std::nullopt;
    out[axis] = static_cast<int64_t>(slicePositions((*in)[axis], (*starts)[i], (*ends)[i], (*steps)[i]).size());
  }
  return out;
}

/// A Reshape's output shape at the export batch, from its input's shape and
/// its folded target.
std::optional<Shape> Rebatcher::reshapeResult(const onnx::NodeProto &node) const {
  const Shape *in = shapeOf(node.input(0));
  auto target = evaluateInts(node.input(1));
  if (!in || !fullyKnown(*in) || !target)
    return std::nullopt;
  Shape out;
  int inferredAt = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t d = (*target)[i];
    if (d == 0) {
      if (i >= in->size())
        return std::nullopt;
      d = (*in)[i];
    }
    if (d == -1) {
      if (inferredAt >= 0)
        return std::nullopt;
      inferredAt = static_cast<int>(i);
    } else if (d < 0) {
      return std::nullopt;
    } else {
      known *= d;
    }
    out.push_back(d);
  }
  const int64_t total = product(*in, 0, in->size());
  if (inferredAt >= 0) {
    if (known == 0 || total % known != 0)
      return std::nullopt;
    out[inferredAt] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return out;
}

void Rebatcher::indexGraph() {
  for (int i = 0; i < graph_.initializer_size(); ++i)
    initializers_[graph_.initializer(i).name()] = i;
  for (int n = 0; n < graph_.node_size(); ++n) {
    const onnx::NodeProto &node = graph_.node(n);
    for (int o = 0; o < node.output_size(); ++o)
      producers_[node.output(o)] = {n, o};
    for (int s = 0; s < node.input_size(); ++s)
      if (!node.input(s).empty())
        consumers_[node.input(s)].push_back({n, s});
  }
  for (const onnx::ValueInfoProto &output : graph_.output())
    graphOutputs_.insert(output.name());
}

std::optional<std::vector<int64_t>> Rebatcher::literalInts(const std::string &value) const {
  std::optional<IntegerLiteral> literal;
  if (auto it = initializers_.find(value); it != initializers_.end())
    literal = integerLiteral(graph_.initializer(it->second), baseDir_);
  else if (auto producer = producers_.find(value); producer != producers_.end())
    literal = integerLiteral(graph_.node(producer->second.first), baseDir_);
  if (!literal)
    return std::nullopt;
  return std::move(literal->values);
}

/// The axes a node names, from its attribute (older opsets) or its input
/// `input` (newer ones); an empty list when neither is given.
std::optional<std::vector<int64_t>> Rebatcher::axesOperand(const onnx::NodeProto &node, const std::string &attribute,
                                                           int input) const {
  if (const onnx::AttributeProto *attr = findAttribute(node, attribute))
    return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
  if (input < node.input_size() && !node.input(input).empty())
    return literalInts(node.input(input));
  return std::vector<int64_t>{};
}

/// Where a reshape between `from` and `to` (either way round) puts the
/// batch that axis `axis` of `from` carries: the axis of `to` with as many
/// elements before it that is a multiple of the batch (the one as big as
/// `from`'s where there is one), or -1.
int Rebatcher::reshapedBatchAxis(const Shape &from, int axis, const Shape &to) const {
  const int64_t before = product(from, 0, axis);
  int found = -1;
  for (int k = 0; k < static_cast<int>(to.size()); ++k) {
    if (product(to, 0, k) != before || to[k] < exportBatch_ || to[k] % exportBatch_ != 0)
      continue;
    if (to[k] == from[axis])
      return k;
    if (found < 0)
      found = k;
  }
  return found;
}

/// The batch axis of output `output` of node `node`, or -1 when the output
/// does not carry the batch.
int Rebatcher::outputAxis(int nodeIndex, int output) const {
  const onnx::NodeProto &node = graph_.node(nodeIndex);
  const std::string &op = node.op_type();
  const Shape *out = shapeOf(node.output(output));
  if (!out)
    return -1;
  const int outRank = static_cast<int>(out->size());
  auto inputAxis = [&](int i) { return i < node.input_size() && !node.input(i).empty() ? axisOf(node.input(i)) : -1; };
  auto inputShape = [&](int i) -> const Shape * {
    return i < node.input_size() && !node.input(i).empty() ? shapeOf(node.input(i)) : nullptr;
  };
  auto valid = [&](int axis) {
    return axis >= 0 && axis < outRank && (*out)[axis] >= exportBatch_ && (*out)[axis] % exportBatch_ == 0 ? axis : -1;
  };
  const int a = inputAxis(0);
  const Shape *in = inputShape(0);

  if (op == "Shape" || op == "Size" || op == "Constant" || op == "ConstantOfShape" || op == "Range" ||
      op == "NonZero")
    return -1;
  if (op == "Transpose") {
    if (a < 0 || !in)
      return -1;
    std::vector<int64_t> perm;
    if (const onnx::AttributeProto *attr = findAttribute(node, "perm"))
      perm.assign(attr->ints().begin(), attr->ints().end());
    else
      for (int i = static_cast<int>(in->size()) - 1; i >= 0; --i)
        perm.push_back(i);
    for (int p = 0; p < static_cast<int>(perm.size()); ++p)
      if (perm[p] == a)
        return valid(p);
    return -1;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    if (a < 0 || !in)
      return -1;
    auto axes = axesOperand(node, "axes", 1);
    if (!axes)
      return -1;
    const int axesRank = op == "Unsqueeze" ? outRank : static_cast<int>(in->size());
    std::set<int64_t> named;
    for (int64_t x : *axes)
      named.insert(x < 0 ? x + axesRank : x);
    if (op == "Squeeze" && named.empty()) // every unit dimension goes
      for (int d = 0; d < static_cast<int>(in->size()); ++d)
        if ((*in)[d] == 1)
          named.insert(d);
    if (op == "Squeeze")
      return named.count(a) ? -1 : valid(a - static_cast<int>(std::count_if(named.begin(), named.end(), [&](int64_t x) { return x < a; })));
    // Unsqueeze: the batch is the a-th axis of the output that is not new.
    for (int d = 0, kept = 0; d < outRank; ++d) {
      if (named.count(d))
        continue;
      if (kept++ == a)
        return valid(d);
    }
    return -1;
  }
  if (op == "Expand" && a < 0) {
    // A target that is a batched value's shape (torch's full_like: a scalar
    // expanded to Shape(x)) puts the batch where that value has it, counted
    // from the right.
    auto producer = producers_.find(node.input(1));
    const onnx::NodeProto *shapeOp = producer == producers_.end() ? nullptr : &graph_.node(producer->second.first);
    const Shape *target = inputShape(1);
    if (shapeOp && shapeOp->op_type() == "Shape" && !findAttribute(*shapeOp, "end") && target && target->size() == 1) {
      const onnx::AttributeProto *start = findAttribute(*shapeOp, "start");
      const Shape *source = shapeOf(shapeOp->input(0));
      const int b = axisOf(shapeOp->input(0));
      const int from =
          start ? static_cast<int>(start->i() < 0 && source ? start->i() + source->size() : start->i()) : 0;
      if (b >= from && (*target)[0] >= 0)
        return valid(b - from + outRank - static_cast<int>((*target)[0]));
    }
  }
  if (op == "Reshape" || op == "Flatten") {
    // The batch stays the outermost factor of the dimension where as many
    // elements lie before it as before the input's batch axis.
    if (a < 0 || !in || !fullyKnown(*in) || !fullyKnown(*out))
      return -1;
    return reshapedBatchAxis(*in, a, *out);
  }
  if (op == "Gather") {
    const int axis = static_cast<int>(findAttribute(node, "axis") ? findAttribute(node, "axis")->i() : 0);
    const Shape *indices = inputShape(1);
    if (!in || !indices)
      return -1;
    const int rank = static_cast<int>(in->size());
    const int gatherAxis = axis < 0 ? axis + rank : axis;
    const int indicesRank = static_cast<int>(indices->size());
    if (a >= 0 && a < gatherAxis)
      return valid(a);
    if (a > gatherAxis)
      return valid(a + indicesRank - 1);
    // Indices that carry the batch put it in the output, also where they
    // index the data's batch axis (a row per sample of a flattened
    // [batch * T, C]).
    if (int ai = inputAxis(1); ai >= 0 && (a < 0 || a == gatherAxis))
      return valid(gatherAxis + ai);
    return -1;
  }
  if (op == "GatherND") {
    // Output: the indices' shape but its last dimension (k, the length of
    // each index), then the data's dimensions past batch_dims + k.
    const Shape *indices = inputShape(1);
    if (!in || !indices || indices->empty() || indices->back() < 0)
      return -1;
    const int batchDims =
        static_cast<int>(findAttribute(node, "batch_dims") ? findAttribute(node, "batch_dims")->i() : 0);
    const int indexRank = static_cast<int>(indices->size()), k = static_cast<int>(indices->back());
    if (int ai = inputAxis(1); ai >= 0 && ai < indexRank - 1) // a row per token, as MoE routing gathers experts
      return valid(ai);
    if (a >= 0 && a < batchDims)
      return valid(a);
    if (a >= batchDims + k)
      return valid(a - batchDims - k + indexRank - 1);
    return -1;
  }
  if (op == "MatMul") {
    const Shape *rhs = inputShape(1);
    if (!in || !rhs)
      return -1;
    const int lhsRank = static_cast<int>(in->size()), rhsRank = static_cast<int>(rhs->size());
    if (a >= 0 && (lhsRank == 1 || a < lhsRank - 1))
      return valid(a + outRank - lhsRank);
    const int b = inputAxis(1);
    if (b >= 0 && rhsRank >= 2 && b < rhsRank - 2)
      return valid(b + outRank - rhsRank);
    if (b >= 0 && rhsRank >= 2 && b == rhsRank - 1)
      return valid(outRank - 1);
    return -1;
  }
  if (op == "Gemm") {
    const bool transA = findAttribute(node, "transA") && findAttribute(node, "transA")->i();
    const bool transB = findAttribute(node, "transB") && findAttribute(node, "transB")->i();
    if (a == (transA ? 1 : 0))
      return valid(0);
    if (inputAxis(1) == (transB ? 0 : 1))
      return valid(1);
    return -1;
  }
  if (llvm::StringRef(op).starts_with("Reduce") || op == "ArgMax" || op == "ArgMin") {
    if (a < 0 || !in)
      return -1;
    const bool keepdims = !findAttribute(node, "keepdims") || findAttribute(node, "keepdims")->i();
    std::optional<std::vector<int64_t>> axes;
    if (op == "ArgMax" || op == "ArgMin")
      axes = std::vector<int64_t>{findAttribute(node, "axis") ? findAttribute(node, "axis")->i() : 0};
    else
      axes = axesOperand(node, "axes", 1);
    if (!axes)
      return -1;
    const int rank = static_cast<int>(in->size());
    if (axes->empty())
      return -1; // everything reduced
    int removedBefore = 0;
    for (int64_t x : *axes) {
      int64_t axis = x < 0 ? x + rank : x;
      if (axis == a)
        return -1;
      removedBefore += axis < a;
    }
    return valid(keepdims ? a : a - removedBefore);
  }
  if (op == "SequenceAt") {
    // A sequence is no tensor and has no axis of its own: the element of a
    // SplitToSequence has its input's batch axis, unless the split runs
    // along the batch (or, without split sizes and keepdims = 0, removed
    // an axis before it).
    auto producer = producers_.find(node.input(0));
    if (producer == producers_.end())
      return -1;
    const onnx::NodeProto &split = graph_.node(producer->second.first);
    const int b = split.op_type() == "SplitToSequence" ? axisOf(split.input(0)) : -1;
    const Shape *whole = shapeOf(split.input(0));
    if (b < 0 || !whole)
      return -1;
    const onnx::AttributeProto *axisAttr = findAttribute(split, "axis");
    const int rank = static_cast<int>(whole->size()), axis = axisAttr ? static_cast<int>(axisAttr->i()) : 0;
    const int splitAxis = axis < 0 ? axis + rank : axis;
    const onnx::AttributeProto *keepdims = findAttribute(split, "keepdims");
    const bool dropped = (split.input_size() < 2 || split.input(1).empty()) && keepdims && keepdims->i() == 0;
    if (splitAxis == b)
      return -1;
    return valid(dropped && splitAxis < b ? b - 1 : b);
  }
  if (op == "Split") {
    const int axis = static_cast<int>(findAttribute(node, "axis") ? findAttribute(node, "axis")->i() : 0);
    const int splitAxis = in && axis < 0 ? axis + static_cast<int>(in->size()) : axis;
    return a >= 0 && a != splitAxis ? valid(a) : -1;
  }
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
    const onnx::AttributeProto *reduction = findAttribute(node, "reduction");
    return output == 0 && reduction && reduction->s() == "none" && a == 0 ? valid(0) : -1;
  }
  // Everything else keeps its inputs' axes where they broadcast to: the
  // element-wise ops, normalisations, softmax, Where, Concat, Slice, Cast...
  for (int i = 0; i < node.input_size(); ++i) {
    const int ai = inputAxis(i);
    const Shape *shape = inputShape(i);
    if (ai < 0 || !shape)
      continue;
    if (int axis = valid(ai + outRank - static_cast<int>(shape->size())); axis >= 0)
      return axis;
  }
  return -1;
}

/// Where element `index` of integer tensor `value` comes from; `edge` is
/// the input that reads `value`.
Origin Rebatcher::trace(const std::string &value, int64_t index, Edge edge, int depth) const {
  Origin unknown;
  unknown.blocker = "'" + value + "'";
  if (depth > 64)
    return unknown;
  auto literal = [&]() {
    Origin origin;
    auto ints = literalInts(value);
    if (!ints || index < 0 || index >= static_cast<int64_t>(ints->size()))
      return unknown;
    origin.kind = Origin::Literal;
    origin.owner = value;
    origin.edge = edge;
    origin.index = index;
    origin.value = (*ints)[index];
    return origin;
  };
  if (initializers_.count(value))
    return literal();
  auto producer = producers_.find(value);
  if (producer == producers_.end()) {
    unknown.blocker = "graph input '" + value + "'";
    return unknown;
  }
  const int n = producer->second.first;
  const onnx::NodeProto &node = graph_.node(n);
  const std::string &op = node.op_type();
  unknown.blocker = describe(n);
  auto elements = [&](const std::string &v) -> int64_t {
    const Shape *shape = shapeOf(v);
    return shape && fullyKnown(*shape) ? product(*shape, 0, shape->size()) : -1;
  };

  if (op == "Constant")
    return literal();
  if (op == "Shape")
    return computedOrigin();
  if (op == "Identity" || op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten")
    return trace(node.input(0), index, {n, 0}, depth + 1);
  if (op == "Concat") {
    int64_t offset = 0;
    for (int i = 0; i < node.input_size(); ++i) {
      int64_t count = elements(node.input(i));
      if (count < 0)
        return unknown;
      if (index < offset + count)
        return trace(node.input(i), index - offset, {n, i}, depth + 1);
      offset += count;
    }
    return unknown;
  }
  if (op == "Gather") {
    auto indices = literalInts(node.input(1));
    int64_t length = elements(node.input(0));
    if (!indices || indices->empty() || length < 0)
      return unknown;
    int64_t at = (*indices)[indices->size() == 1 ? 0 : index];
    return trace(node.input(0), at < 0 ? at + length : at, {n, 0}, depth + 1);
  }
  if (op == "Slice") {
    auto starts = literalInts(node.input(1));
    int64_t length = elements(node.input(0));
    if (!starts || starts->size() != 1 || length < 0 || (node.input_size() > 4 && !node.input(4).empty()))
      return unknown;
    int64_t start = (*starts)[0] < 0 ? (*starts)[0] + length : (*starts)[0];
    return trace(node.input(0), std::max<int64_t>(start, 0) + index, {n, 0}, depth + 1);
  }
  if (op == "Where") {
    // A choice between shapes by a condition that folds.
    auto condition = evaluateInts(node.input(0));
    if (!condition || condition->empty())
      return unknown;
    const bool first = (*condition)[condition->size() == 1 ? 0 : index] != 0;
    const int slot = first ? 1 : 2;
    return trace(node.input(slot), elements(node.input(slot)) == 1 ? 0 : index, {n, slot}, depth + 1);
  }
  if (op == "Mul" || op == "Div") {
    // b * t: the factor that holds the batch is rescaled; a quotient keeps
    // the batch in its numerator.
    std::vector<Origin> factors;
    for (int i = 0; i < (op == "Div" ? 1 : node.input_size()); ++i)
      factors.push_back(trace(node.input(i), elements(node.input(i)) == 1 ? 0 : index, {n, i}, depth + 1));
    std::vector<Origin> holders;
    bool computed = false;
    for (const Origin &f : factors) {
      if (f.kind == Origin::Literal && f.value != 0 && f.value % exportBatch_ == 0)
        holders.push_back(f);
      computed |= f.kind == Origin::Computed;
    }
    if (holders.size() == 1)
      return holders.front();
    if (holders.empty() && computed)
      return computedOrigin();
    return unknown;
  }
  return unknown;
}

bool Rebatcher::rescaleExpandTarget(int node, int64_t outAxis) {
  const Shape *out = shapeOf(graph_.node(node).output(0)), *target = shapeOf(graph_.node(node).input(1));
  if (!out || !target || target->size() != 1 || (*target)[0] < 0)
    return true;
  // The target is right-aligned with the output.
  const int64_t element = outAxis - (static_cast<int64_t>(out->size()) - (*target)[0]);
  return element < 0 || rescaleShapeOperand(node, 1, element);
}

/// Element `element` of shape operand `slot` of node `node` carries the
/// batch: rescale its literal.
bool Rebatcher::rescaleShapeOperand(int node, int slot, int64_t element) {
  const std::string &operand = graph_.node(node).input(slot);
  Origin origin = trace(operand, element, {node, slot}, 0);
  if (origin.kind == Origin::Computed)
    return true;
  if (origin.kind == Origin::Unknown)
    return refuse(describe(node), "element " + std::to_string(element) + " of its shape operand comes from " +
                                      origin.blocker + ", which fsdpc does not trace");
  const int64_t v = origin.value;
  if (v == -1 || (v == 0 && graph_.node(node).op_type() == "Reshape") || (v == 1 && graph_.node(node).op_type() == "Expand"))
    return true; // inferred, copied or broadcast: follows the input
  if (v <= 0 || v % exportBatch_ != 0)
    return refuse(describe(node), "element " + std::to_string(element) + " of its shape operand is " +
                                      std::to_string(v) + ", not a multiple of the batch");
  rewrites_[origin.owner][origin.edge][origin.index] = v / exportBatch_ * newBatch_;
  return true;
}

bool Rebatcher::collectRewrites() {
  for (int n = 0; n < graph_.node_size(); ++n) {
    const onnx::NodeProto &node = graph_.node(n);
    if (!collapseBatchSizedConstants(n))
      return false;
    for (int o = 0; o < node.output_size(); ++o)
      if (int axis = outputAxis(n, o); axis >= 0)
        axes_[node.output(o)] = axis;
    // CastLike has input 0's shape and input 1's type. Where the batch
    // reaches it through input 1 only (torch's ids.new_zeros(ids.shape): a
    // ConstantOfShape of the sample's batch, cast like the ids), input 0's
    // literal spells the batch.
    if (node.op_type() == "CastLike" && exportBatch_ != newBatch_ && node.input_size() == 2 &&
        axisOf(node.input(0)) < 0)
      if (const int k = axisOf(node.output(0)); k >= 0 && !claimBatch(node.input(0), k, 0))
        return false;
    const int a = node.input_size() > 0 ? axisOf(node.input(0)) : -1;
    // At the export batch itself every literal already says the batch.
    if (a < 0 || node.input_size() < 2 || node.output_size() < 1 || exportBatch_ == newBatch_)
      continue;
    if (node.op_type() == "Reshape") {
      const int k = axisOf(node.output(0));
      if (k < 0)
        return refuse(describe(n), "the batch axis of its input has no place in its output shape " +
                                       (shapeOf(node.output(0)) ? shapeText(*shapeOf(node.output(0)))
                                                                : std::string("(not inferred)")));
      if (!rescaleShapeOperand(n, 1, k))
        return false;
    } else if (node.op_type() == "Expand") {
      const Shape *out = shapeOf(node.output(0)), *in = shapeOf(node.input(0));
      if (out && in && !rescaleExpandTarget(n, a + static_cast<int64_t>(out->size() - in->size())))
        return false;
    }
  }
  return true;
}

/// The element-wise ops that broadcast their operands together.
bool broadcastsOperands(llvm::StringRef op) {
  static const llvm::StringSet<> ops = {"Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "Greater",
                                        "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Max", "Min", "Mod"};
  return ops.contains(op);
}

/// A constant operand as big as the batch along the batch axis of the
/// other operands (a causal mask the exporter folded for the sample's
/// batch, [12, 1, T, T]) is the same for every sample: it keeps one, and
/// broadcasting supplies the rest at any batch.
bool Rebatcher::collapseBatchSizedConstants(int n) {
  const onnx::NodeProto &node = graph_.node(n);
  if (node.op_type() == "ScatterND" || node.op_type() == "ScatterElements")
    return batchScatterOperands(n);
  const bool concat = node.op_type() == "Concat";
  // MatMul broadcasts its operands' leading (batch) dimensions: a rotary
  // embedding's inverse frequencies expanded to the sample's batch,
  // [12, D/2, 1] @ positions [batch, 1, T].
  const bool matmul = node.op_type() == "MatMul";
  if ((!broadcastsOperands(node.op_type()) && !concat && !matmul) || node.output_size() != 1)
    return true;
  const Shape *out = shapeOf(node.output(0));
  if (!out)
    return true;
  const int outRank = static_cast<int>(out->size());
  int batchAxis = -1;
  for (const std::string &input : node.input())
    if (const Shape *shape = shapeOf(input); shape && axisOf(input) >= 0)
      batchAxis = axisOf(input) + outRank - static_cast<int>(shape->size());
  if (batchAxis < 0 || batchAxis >= outRank)
    return true;
  if (matmul && (batchAxis >= outRank - 2 || llvm::any_of(node.input(), [&](const std::string &input) {
                   return !shapeOf(input) || shapeOf(input)->size() < 2;
                 })))
    return true; // the batch in a matrix dimension, or a vector operand: nothing broadcast
  if (concat) {
    // Concat does not broadcast: an operand as big as the batch that does
    // not carry it (a class token expanded to the sample's batch) must be
    // made to carry it, not collapsed.
    // A literal one (the token folded with its expansion, a parameter) keeps
    // one sample and is expanded again in front of the Concat, so it trains
    // as the one tensor it was, at any batch.
    if (axisAttribute(node, outRank) == batchAxis)
      return true;
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string &input = node.input(slot);
      const Shape *shape = shapeOf(input);
      if (!shape || axisOf(input) >= 0 || static_cast<int>(shape->size()) != outRank ||
          (*shape)[batchAxis] != (*out)[batchAxis] || (*out)[batchAxis] <= 1)
        continue;
      const bool literal = isLiteral(input);
      if (literal && exportBatch_ != newBatch_ && isBatchPositions(input, batchAxis)) {
        if (!numberNewBatch(input, batchAxis, describe(n)))
          return false;
      } else if (literal && consumers_.lookup(input).size() == 1) {
        keepOneSampleBeforeReader(n, slot, batchAxis);
      } else if (!literal && exportBatch_ != newBatch_ && !claimBatch(input, batchAxis, 0)) {
        return false;
      }
    }
    return true;
  }
  for (const std::string &input : node.input()) {
    const Shape *shape = shapeOf(input);
    const int axis = shape ? batchAxis - (outRank - static_cast<int>(shape->size())) : -1;
    if (axisOf(input) >= 0 || axis < 0 || (*shape)[axis] != (*out)[batchAxis] || (*out)[batchAxis] <= 1)
      continue;
    if (!isLiteral(input)) {
      // Computed from literals that spell the batch (token type ids
      // expanded to [12, T]): those are rescaled, when the batch changes.
      if (producers_.count(input) && exportBatch_ != newBatch_ && !claimBatch(input, axis, 0))
        return false;
      continue;
    }
    if (exportBatch_ != newBatch_ && isBatchPositions(input, axis)) {
      if (!numberNewBatch(input, axis, describe(n)))
        return false;
      continue;
    }
    for (const Edge &reader : consumers_.lookup(input))
      if (!broadcastsOperands(graph_.node(reader.node).op_type()) && graph_.node(reader.node).op_type() != "MatMul")
        return exportBatch_ == newBatch_ ||
               refuse(describe(n), "its operand '" + input + "' is a constant of the batch's size that " +
                                       describe(reader.node) + " also reads");
    collapses_.try_emplace(input, axis, describe(n));
    shapes_[input][axis] = 1;
  }
  return true;
}

/// A scatter whose updates carry the batch into data that has its size
/// without carrying it: a decoder's input built as torch shifts ids right,
/// ids.new_zeros(ids.shape) (a ConstantOfShape of the sample's batch) with
/// the ids scattered one place on, then the start token scattered in front
/// by indices and updates the exporter folded for the sample's batch. The
/// data is made to carry the batch (its literal rescaled); ScatterElements'
/// literal indices and updates of the batch's size, the same for every
/// sample, keep one and are expanded back to the batch in front of it.
bool Rebatcher::batchScatterOperands(int n) {
  const onnx::NodeProto &node = graph_.node(n);
  if (exportBatch_ == newBatch_ || node.input_size() != 3 || node.output_size() != 1)
    return true;
  const Shape *out = shapeOf(node.output(0));
  if (!out)
    return true;
  const int outRank = static_cast<int>(out->size());
  const bool elements = node.op_type() == "ScatterElements";
  // The output's batch axis: the data's, or where the updates' lines up.
  int batchAxis = axisOf(node.input(0));
  if (batchAxis < 0)
    if (const Shape *updates = shapeOf(node.input(2)); updates && axisOf(node.input(2)) >= 0)
      batchAxis = axisOf(node.input(2)) + outRank - static_cast<int>(updates->size());
  if (batchAxis < 0 || batchAxis >= outRank || (*out)[batchAxis] <= 1)
    return true;
  if (elements && axisAttribute(node, outRank) == batchAxis)
    return true;
  for (int slot = 0; slot < (elements ? 3 : 1); ++slot) {
    const std::string &input = node.input(slot);
    const Shape *shape = shapeOf(input);
    if (!shape || axisOf(input) >= 0 || static_cast<int>(shape->size()) != outRank ||
        (*shape)[batchAxis] != (*out)[batchAxis])
      continue;
    if (!isLiteral(input)) {
      if (!claimBatch(input, batchAxis, 0))
        return false;
      continue;
    }
    if (consumers_.lookup(input).size() != 1)
      return refuse(describe(n), "its constant operand '" + input + "' has the batch's size and other readers");
    keepOneSampleBeforeReader(n, slot, batchAxis);
  }
  return true;
}

/// Literal input `slot` of node `n`, as big as the batch along `batchAxis`
/// and the same for every sample, keeps one sample, and an Expand back to
/// the batch goes in front of `n`, which does not broadcast.
void Rebatcher::keepOneSampleBeforeReader(int n, int slot, int batchAxis) {
  const std::string &input = graph_.node(n).input(slot);
  Shape expanded = *shapeOf(input);
  expanded[batchAxis] = expanded[batchAxis] / exportBatch_ * newBatch_;
  collapses_.try_emplace(input, batchAxis, describe(n));
  batchExpands_.push_back({graph_.node(n).output(0), input, slot, expanded});
  shapes_[input][batchAxis] = 1;
}

/// `value` has the batch's size along `axis` without carrying the batch,
/// and is broadcast against batched values: find the literal that spells
/// that size (an Expand target, through Gather indices and casts), rescale
/// it, and let `value` and what it is computed from carry the batch.
bool Rebatcher::claimBatch(const std::string &value, int axis, int depth) {
  auto producer = producers_.find(value);
  if (producer == producers_.end() || depth > 32 || axisOf(value) == axis)
    return true; // nothing to trace (the shape check reports it), or claimed already
  const int n = producer->second.first;
  const onnx::NodeProto &node = graph_.node(n);
  const std::string &op = node.op_type();
  auto claim = [&]() {
    axes_[value] = axis;
    return true;
  };
  if (op == "Expand") {
    const Shape *in = shapeOf(node.input(0)), *out = shapeOf(value), *target = shapeOf(node.input(1));
    if (!in || !out || !target || target->size() != 1)
      return true;
    const int inAxis = axis - static_cast<int>(out->size() - in->size());
    // The input has the size: it carries the batch, and a target element
    // that spells it too (torch's expand to a shape it computed at the
    // sample's batch, [12, -1, T, T]) is rescaled.
    if (inAxis >= 0 && (*in)[inAxis] != 1)
      return claimBatch(node.input(0), inAxis, depth + 1) && rescaleExpandTarget(n, axis) && claim();
    // The size comes from the target: rescale its element.
    return rescaleExpandTarget(n, axis) && claim();
  }
  if (op == "Gather") {
    const Shape *data = shapeOf(node.input(0));
    if (!data)
      return true;
    const int g = static_cast<int>(axisAttribute(node, static_cast<int64_t>(data->size())));
    const Shape *indices = shapeOf(node.input(1));
    if (indices && axis >= g && axis < g + static_cast<int>(indices->size()))
      return claimBatch(node.input(1), axis - g, depth + 1) && claim();
    return true;
  }
  if (op == "Cast" || op == "CastLike" || op == "Identity" || op == "Neg" || op == "Not")
    return claimBatch(node.input(0), axis, depth + 1) && claim();
  if (op == "Slice") {
    // A slice along other axes (a causal mask cut to the keys' length).
    const Shape *in = shapeOf(node.input(0)), *out = shapeOf(value);
    if (in && out && in->size() == out->size() && (*in)[axis] == (*out)[axis])
      return claimBatch(node.input(0), axis, depth + 1) && claim();
    return true;
  }
  if (op == "Reshape" || op == "Flatten") {
    // The input axis with as many elements before it, of which the batch is
    // the outermost factor too (a mask gathered by flat positions b*T + t
    // and reshaped back to [batch, 1, 1, T]); a literal target element that
    // spells the batch is rescaled.
    const Shape *in = shapeOf(node.input(0)), *out = shapeOf(value);
    if (!in || !out || !fullyKnown(*in) || !fullyKnown(*out) || (*out)[axis] % exportBatch_ != 0)
      return true;
    const int a = reshapedBatchAxis(*out, axis, *in);
    if (a < 0)
      return true;
    return claimBatch(node.input(0), a, depth + 1) && (op == "Flatten" || rescaleShapeOperand(n, 1, axis)) && claim();
  }
  if (op == "Transpose") {
    const Shape *in = shapeOf(node.input(0));
    std::vector<int64_t> perm;
    if (const onnx::AttributeProto *attr = findAttribute(node, "perm"))
      perm.assign(attr->ints().begin(), attr->ints().end());
    else if (in)
      for (int i = static_cast<int>(in->size()) - 1; i >= 0; --i)
        perm.push_back(i);
    if (axis >= static_cast<int>(perm.size()))
      return true;
    return claimBatch(node.input(0), static_cast<int>(perm[axis]), depth + 1) && claim();
  }
  if (op == "ConstantOfShape") // the size comes from its shape operand
    return rescaleShapeOperand(n, 0, axis) && claim();
  if (broadcastsOperands(op)) {
    // Arithmetic on the sample numbers (arange(batch) * T, to index each
    // sample's row of a flattened [batch * T, C]): the operand that has
    // the batch's size along the axis carries it.
    const Shape *out = shapeOf(value);
    if (!out)
      return true;
    for (const std::string &input : node.input()) {
      const Shape *shape = shapeOf(input);
      const int inAxis = shape ? axis - static_cast<int>(out->size() - shape->size()) : -1;
      if (inAxis < 0 || (*shape)[inAxis] != (*out)[axis] || axisOf(input) >= 0)
        continue;
      if (isLiteral(input)) {
        if (isBatchPositions(input, inAxis) && !numberNewBatch(input, inAxis, describe(n)))
          return false;
      } else if (!claimBatch(input, inAxis, depth + 1)) {
        return false;
      }
    }
    return claim();
  }
  return true;
}

/// Whether integer constant `literal` numbers the samples along `axis`:
/// the batch's size there, element j along it equal to j whatever the
/// other coordinates (torch.arange(batch), maybe unsqueezed), as an
/// exporter bakes `logits[torch.arange(batch), last]` at the sample's batch.
/// Not at an export batch of 1, where any 0 would look like it.
bool Rebatcher::isBatchPositions(const std::string &literal, int axis) const {
  if (exportBatch_ < 2)
    return false;
  const Shape *shape = shapeOf(literal);
  auto ints = literalInts(literal);
  if (!shape || !ints || axis < 0 || axis >= static_cast<int>(shape->size()) || (*shape)[axis] != exportBatch_ ||
      static_cast<int64_t>(ints->size()) != product(*shape, 0, shape->size()))
    return false;
  const int64_t inner = product(*shape, axis + 1, shape->size());
  for (int64_t i = 0; i < static_cast<int64_t>(ints->size()); ++i)
    if ((*ints)[i] != (i / inner) % exportBatch_)
      return false;
  return true;
}

/// Renumbers batch-positions constant `literal` for the new batch, once;
/// only where nothing else reads it, which might take the same numbers for
/// something that is not the batch.
bool Rebatcher::numberNewBatch(const std::string &literal, int axis, const std::string &reader) {
  if (consumers_.lookup(literal).size() != 1 || graphOutputs_.contains(literal))
    return refuse(reader,
                  "its constant operand '" + literal + "' numbers the samples of the batch and is read elsewhere too");
  batchPositions_[literal] = axis;
  axes_[literal] = axis;
  return true;
}

/// Sets `node`'s only attribute to `value = tensor`, as a Constant holds it.
void setConstantValue(onnx::NodeProto &node, const onnx::TensorProto &tensor) {
  node.clear_attribute();
  onnx::AttributeProto *value = node.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = tensor;
}

/// A Constant node of fsdpc's own, with output `name`.
onnx::NodeProto constantNode(const std::string &name, onnx::TensorProto tensor) {
  onnx::NodeProto node;
  node.set_op_type("Constant");
  node.set_name("fsdpc/rebatch/" + name);
  node.add_output(name);
  tensor.set_name(name);
  setConstantValue(node, tensor);
  return node;
}

/// Inserts `nodes` before node `index` of `graph`.
void insertNodes(onnx::GraphProto &graph, int index, std::vector<onnx::NodeProto> nodes) {
  std::vector<onnx::NodeProto> all(graph.node().begin(), graph.node().end());
  all.insert(all.begin() + index, std::make_move_iterator(nodes.begin()), std::make_move_iterator(nodes.end()));
  graph.clear_node();
  for (onnx::NodeProto &node : all)
    *graph.add_node() = std::move(node);
}

/// The tensor a literal value is held in: the initializer, or the
/// Constant node's value.
onnx::TensorProto *literalTensor(onnx::GraphProto &graph, const llvm::StringMap<int> &initializers,
                                 const llvm::StringMap<std::pair<int, int>> &producers, const std::string &name) {
  if (auto it = initializers.find(name); it != initializers.end())
    return graph.mutable_initializer(it->second);
  auto producer = producers.find(name);
  if (producer == producers.end())
    return nullptr;
  onnx::NodeProto &node = *graph.mutable_node(producer->second.first);
  for (onnx::AttributeProto &attr : *node.mutable_attribute())
    if (attr.name() == "value" && attr.has_t())
      return attr.mutable_t();
  return nullptr;
}

bool Rebatcher::applyCollapses() {
  std::set<std::string> collapsed;
  for (const auto &[name, where] : collapses_) {
    const auto &[axis, reader] = where;
    onnx::TensorProto *tensor = literalTensor(graph_, initializers_, producers_, name);
    const int32_t type = tensor ? tensor->data_type() : 0;
    const bool isFloat = type == onnx::TensorProto::FLOAT;
    if (!tensor || !(isFloat || type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32 ||
                     type == onnx::TensorProto::BOOL))
      return refuse(reader, "its constant operand '" + name +
                                "' has the batch's size and an element type fsdpc does not rewrite");
    std::vector<float> floats;
    std::vector<int64_t> ints;
    std::string error;
    if (!readTensorElements(*tensor, baseDir_, isFloat ? &floats : nullptr, isFloat ? nullptr : &ints, error))
      return fail(error);
    Shape dims(tensor->dims().begin(), tensor->dims().end());
    const int64_t size = dims[axis], inner = product(dims, axis + 1, dims.size()),
                  outer = product(dims, 0, axis);
    auto same = [&](int64_t a, int64_t b) {
      return isFloat ? std::memcmp(&floats[a], &floats[b], sizeof(float)) == 0 : ints[a] == ints[b];
    };
    std::vector<int64_t> kept;
    bool uniform = true;
    for (int64_t o = 0; o < outer && uniform; ++o)
      for (int64_t i = 0; i < inner && uniform; ++i) {
        const int64_t first = o * size * inner + i;
        for (int64_t j = 1; j < size && uniform; ++j)
          uniform = same(first, first + j * inner);
        kept.push_back(first);
      }
    if (!uniform && exportBatch_ == newBatch_)
      continue; // stays as exported
    if (!uniform)
      return refuse(reader, "its constant operand '" + name + "' has the batch's size along axis " +
                                std::to_string(axis) + " and differs from one sample to the next");
    onnx::TensorProto collapsedTensor;
    collapsedTensor.set_name(tensor->name());
    collapsedTensor.set_data_type(type);
    dims[axis] = 1;
    for (int64_t d : dims)
      collapsedTensor.add_dims(d);
    for (int64_t index : kept) {
      if (isFloat)
        collapsedTensor.add_float_data(floats[index]);
      else if (type == onnx::TensorProto::INT64)
        collapsedTensor.add_int64_data(ints[index]);
      else
        collapsedTensor.add_int32_data(static_cast<int32_t>(ints[index]));
    }
    *tensor = std::move(collapsedTensor);
    collapsed.insert(name);
  }
  // Expands in front of the Concats and scatters that read a collapsed constant.
  for (const BatchExpand &e : batchExpands_) {
    if (!collapsed.count(e.constant))
      continue;
    auto at = std::find_if(graph_.node().begin(), graph_.node().end(), [&](const onnx::NodeProto &node) {
      return node.output_size() > 0 && node.output(0) == e.readerOutput;
    });
    const int index = static_cast<int>(at - graph_.node().begin());
    const std::string shapeName = e.constant + "/batch_shape", expanded = e.constant + "/batched";
    onnx::TensorProto shape;
    shape.set_data_type(onnx::TensorProto::INT64);
    shape.add_dims(static_cast<int64_t>(e.shape.size()));
    for (int64_t d : e.shape)
      shape.add_int64_data(d);
    onnx::NodeProto expand;
    expand.set_op_type("Expand");
    expand.set_name("fsdpc/rebatch/" + expanded);
    expand.add_input(e.constant);
    expand.add_input(shapeName);
    expand.add_output(expanded);
    graph_.mutable_node(index)->set_input(e.slot, expanded);
    insertNodes(graph_, index, {constantNode(shapeName, shape), expand});
  }
  return true;
}

void setInts(onnx::TensorProto &tensor, const std::vector<int64_t> &values) {
  tensor.clear_raw_data();
  tensor.clear_int64_data();
  tensor.clear_int32_data();
  tensor.clear_data_location();
  tensor.clear_external_data();
  for (int64_t v : values) {
    if (tensor.data_type() == onnx::TensorProto::INT32)
      tensor.add_int32_data(static_cast<int32_t>(v));
    else
      tensor.add_int64_data(v);
  }
}

bool Rebatcher::applyBatchPositions() {
  for (const auto &[name, axis] : batchPositions_) {
    onnx::TensorProto *tensor = literalTensor(graph_, initializers_, producers_, name);
    if (!tensor) // a value_ints Constant: one dimension, the batch
      return refuse("constant '" + name + "'", "it numbers the samples in a form fsdpc does not rewrite");
    Shape dims = *shapeOf(name);
    const int64_t inner = product(dims, axis + 1, dims.size());
    dims[axis] = newBatch_;
    std::vector<int64_t> values(product(dims, 0, dims.size()));
    for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i)
      values[i] = (i / inner) % newBatch_;
    tensor->clear_dims();
    for (int64_t d : dims)
      tensor->add_dims(d);
    setInts(*tensor, values);
  }
  return true;
}

bool Rebatcher::applyRewrites() {
  std::vector<onnx::NodeProto> newConstants;
  for (const auto &[owner, edges] : rewrites_) {
    std::vector<int64_t> original = *literalInts(owner);
    auto rewritten = [&](const std::map<int64_t, int64_t> &elements) {
      std::vector<int64_t> values = original;
      for (const auto &[index, value] : elements)
        values[index] = value;
      return values;
    };
    // The literal tensor as a TensorProto, whatever form the constant had.
    onnx::TensorProto tensor;
    if (auto it = initializers_.find(owner); it != initializers_.end()) {
      tensor = graph_.initializer(it->second);
    } else {
      const onnx::AttributeProto &attr = graph_.node(producers_.lookup(owner).first).attribute(0);
      if (attr.name() == "value") {
        tensor = attr.t();
      } else {
        tensor.set_data_type(onnx::TensorProto::INT64);
        if (attr.name() == "value_ints")
          tensor.add_dims(static_cast<int64_t>(original.size()));
      }
    }
    // In place when every reader wants the same elements rescaled; a copy
    // per reader otherwise, so a literal that is both the batch and, say, the
    // head size keeps its value where it is not the batch.
    const std::vector<Edge> &readers = consumers_.lookup(owner);
    const auto &firstElements = edges.begin()->second; // a lambda may not capture a structured binding in C++17
    bool allReadersAgree = !graphOutputs_.contains(owner) && edges.size() == readers.size() &&
                           llvm::all_of(edges, [&](const auto &e) { return e.second == firstElements; });
    if (allReadersAgree) {
      setInts(tensor, rewritten(edges.begin()->second));
      if (auto it = initializers_.find(owner); it != initializers_.end()) {
        *graph_.mutable_initializer(it->second) = tensor;
      } else {
        setConstantValue(*graph_.mutable_node(producers_.lookup(owner).first), tensor);
      }
      continue;
    }
    int copy = 0;
    for (const auto &[edge, elements] : edges) {
      std::string name = owner + "/rebatched_" + std::to_string(copy++);
      onnx::TensorProto copyTensor = tensor;
      setInts(copyTensor, rewritten(elements));
      graph_.mutable_node(edge.node)->set_input(edge.slot, name);
      newConstants.push_back(constantNode(name, copyTensor));
    }
  }
  // Constants have no inputs: they go first, before any reader. The node
  // indices move, and what comes next (collapses of Constant nodes) finds
  // literals through them.
  if (!newConstants.empty()) {
    insertNodes(graph_, 0, std::move(newConstants));
    producers_.clear();
    consumers_.clear();
    indexGraph();
  }
  return true;
}

void Rebatcher::rebatchInputsAndDropShapes() {
  // Shapes recorded at the export batch would contradict the new one (and
  // those of collapsed constants); shape inference derives them again.
  graph_.clear_value_info();
  if (exportBatch_ == newBatch_)
    return;
  for (onnx::ValueInfoProto &input : *graph_.mutable_input()) {
    if (initializers_.count(input.name()) || !input.type().has_tensor_type())
      continue;
    auto *shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() > 0 && (!shape->dim(0).has_dim_value() || shape->dim(0).dim_value() == exportBatch_))
      shape->mutable_dim(0)->set_dim_value(newBatch_);
  }
  for (onnx::ValueInfoProto &output : *graph_.mutable_output())
    if (output.type().has_tensor_type() && output.type().tensor_type().has_shape())
      for (auto &dim : *output.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
        dim.Clear();
}

bool Rebatcher::run(RebatchedShapes &expected) {
  indexGraph();
  if (!inferExportShapes())
    return false;
  for (const onnx::ValueInfoProto &input : graph_.input()) {
    const Shape *shape = shapeOf(input.name());
    if (!initializers_.count(input.name()) && shape && !shape->empty() && (*shape)[0] == exportBatch_)
      axes_[input.name()] = 0;
  }
  if (!collectRewrites() || !applyRewrites() || !applyCollapses() || !applyBatchPositions())
    return false;

  expected.exportBatch = exportBatch_;
  expected.newBatch = newBatch_;
  for (int n = 0; n < graph_.node_size(); ++n) {
    const onnx::NodeProto &node = graph_.node(n);
    for (const std::string &output : node.output()) {
      const Shape *shape = shapeOf(output);
      if (!shape)
        continue;
      Shape rescaled = *shape;
      if (int axis = axisOf(output); axis >= 0)
        rescaled[axis] = rescaled[axis] / exportBatch_ * newBatch_;
      expected.values.push_back({output, nodeName(node, n), node.op_type(), rescaled});
    }
  }
  rebatchInputsAndDropShapes();
  return true;
}

} // namespace

bool fsdpc::import::rebatchStaticExport(onnx::ModelProto &model, const std::string &baseDir, int64_t exportBatch,
                                        int64_t newBatch, RebatchedShapes &expected, std::string &error) {
  return Rebatcher(model, baseDir, exportBatch, newBatch, error).run(expected);
}

bool fsdpc::import::checkRebatchedShapes(const onnx::ModelProto &model, const RebatchedShapes &expected,
                                         std::string &error) {
  llvm::StringMap<Shape> inferred;
  const onnx::GraphProto &graph = model.graph();
  for (const auto *list : {&graph.value_info(), &graph.output()})
    for (const onnx::ValueInfoProto &info : *list)
      if (auto shape = shapeOfType(info.type()))
        inferred[info.name()] = *shape;
  for (const RebatchedShapes::Value &value : expected.values) {
    auto it = inferred.find(value.name);
    if (it == inferred.end())
      continue;
    const Shape &got = it->second;
    bool same = got.size() == value.shape.size();
    for (size_t d = 0; same && d < got.size(); ++d)
      same = got[d] < 0 || value.shape[d] < 0 || got[d] == value.shape[d];
    if (same)
      continue;
    error = "node '" + value.node + "' (" + value.op + "): cannot re-derive the static batch " +
            std::to_string(expected.exportBatch) + " for batch " + std::to_string(expected.newBatch) + ": output '" +
            value.name + "' would have shape " + shapeText(got) + " where " + shapeText(value.shape) +
            " is expected";
    return false;
  }
  return true;
}
