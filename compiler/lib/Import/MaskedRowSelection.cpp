//===- MaskedRowSelection.cpp - Boolean row selection without NonZero -----===//
//
// The chain that `x[mask].view(B, -1, H)[:, j]` exports to lists the
// selected positions of the whole mask (NonZero), gathers their rows of x,
// regroups those rows into s[0] groups and takes the j-th of each group.
// Where each of the s[0] equal groups of the mask holds K selected
// elements, regrouped group g is exactly the selection within mask group
// g, and its j-th row is x's row at the position of the group's j-th
// selected element. Per group, with the mask as 0/1 integers:
//
//   rank     = CumSum(mask, axis 1)        1, 2, ... at the selected elements
//   weights  = mask * (rank == j + 1)      or, for j < 0, count + j + 1
//   row      = float(weights) @ x          one 1 in each group's weights
//
// which has static shapes, and whose gradient reaches x's selected rows
// as GatherND's would (a non-finite value in a row not selected would
// spread through the product, where GatherND ignores it). The new shapes
// are literals where s is one (the static-batch rewrite rescales them as
// it does s) and are computed from s otherwise (a symbolic batch); a group
// count that does not divide the mask fails in shape inference at a node
// named after the NonZero.
//
//===----------------------------------------------------------------------===//
#include "MaskedRowSelection.h"

#include "ImportContext.h"

#include <limits>
#include <map>
#include <optional>
#include <set>

using namespace fsdpc::import;

namespace {

struct Uses {
  std::map<std::string, int> producer;             // value -> the node computing it
  std::map<std::string, std::vector<int>> readers; // value -> the nodes reading it
  std::map<std::string, int> initializer;
  std::set<std::string> outputs;
};

Uses indexUses(const onnx::GraphProto &graph) {
  Uses uses;
  for (int n = 0; n < graph.node_size(); ++n) {
    for (const std::string &output : graph.node(n).output())
      uses.producer[output] = n;
    for (const std::string &input : graph.node(n).input())
      uses.readers[input].push_back(n);
  }
  for (int i = 0; i < graph.initializer_size(); ++i)
    uses.initializer[graph.initializer(i).name()] = i;
  for (const onnx::ValueInfoProto &output : graph.output())
    uses.outputs.insert(output.name());
  return uses;
}

/// The node that alone reads `value` (which is no graph output), if it is
/// an `op` reading it as input `slot`.
std::optional<int> soleReader(const onnx::GraphProto &graph, const Uses &uses, const std::string &value,
                              llvm::StringRef op, int slot) {
  auto it = uses.readers.find(value);
  if (uses.outputs.count(value) || it == uses.readers.end() || it->second.size() != 1)
    return std::nullopt;
  const onnx::NodeProto &node = graph.node(it->second.front());
  if (node.op_type() != op || !(node.domain().empty() || node.domain() == "ai.onnx") || node.input_size() <= slot ||
      node.input(slot) != value)
    return std::nullopt;
  return it->second.front();
}

/// The integers of a literal: an initializer or a Constant node's value
/// (external data was read into the model when it was loaded).
std::optional<IntegerLiteral> literalInts(const onnx::GraphProto &graph, const Uses &uses, const std::string &name) {
  if (auto it = uses.initializer.find(name); it != uses.initializer.end())
    return integerLiteral(graph.initializer(it->second), ".");
  if (auto producer = uses.producer.find(name); producer != uses.producer.end())
    return integerLiteral(graph.node(producer->second), ".");
  return std::nullopt;
}

/// Appends the nodes that compute the selection into `nodes`, writing the
/// result to `result`; `prefix` names the new nodes and values.
class SelectionBuilder {
public:
  SelectionBuilder(std::string prefix, std::vector<onnx::NodeProto> &nodes) : prefix(std::move(prefix)), nodes(nodes) {}

  std::string node(const std::string &op, std::vector<std::string> inputs, const std::string &what,
                   const std::string &output = "") {
    onnx::NodeProto &node = nodes.emplace_back();
    node.set_op_type(op);
    node.set_name(prefix + "/" + what);
    for (const std::string &input : inputs)
      node.add_input(input);
    node.add_output(output.empty() ? prefix + "/" + what : output);
    return node.output(0);
  }
  std::string cast(const std::string &input, int to, const std::string &what) {
    std::string out = node("Cast", {input}, what);
    setInt(nodes.back(), "to", to);
    return out;
  }
  std::string concat(std::vector<std::string> inputs, const std::string &what) {
    std::string out = node("Concat", std::move(inputs), what);
    setInt(nodes.back(), "axis", 0);
    return out;
  }
  std::string ints(std::vector<int64_t> values, const std::string &what) {
    onnx::TensorProto tensor;
    tensor.set_data_type(onnx::TensorProto::INT64);
    tensor.add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values)
      tensor.add_int64_data(v);
    return constant(std::move(tensor), what);
  }
  std::string scalar(int64_t value, const std::string &what) {
    onnx::TensorProto tensor;
    tensor.set_data_type(onnx::TensorProto::INT64);
    tensor.add_int64_data(value);
    return constant(std::move(tensor), what);
  }

private:
  std::string constant(onnx::TensorProto tensor, const std::string &what) {
    std::string out = node("Constant", {}, what);
    onnx::AttributeProto *value = nodes.back().add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    *value->mutable_t() = std::move(tensor);
    return out;
  }
  static void setInt(onnx::NodeProto &node, const std::string &name, int64_t v) {
    onnx::AttributeProto *attr = node.add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::INT);
    attr->set_i(v);
  }

  std::string prefix;
  std::vector<onnx::NodeProto> &nodes;
};

/// The nodes of one chain, NonZero first and Gather last, and the Gather's index.
struct Chain {
  int nonZero, transpose, gatherND, reshape, gather;
  int64_t index;
};

std::optional<Chain> matchChain(const onnx::GraphProto &graph, const Uses &uses, int nonZero) {
  const onnx::NodeProto &node = graph.node(nonZero);
  if (node.input_size() != 1 || node.output_size() != 1)
    return std::nullopt;
  Chain chain{nonZero, 0, 0, 0, 0, 0};
  auto transpose = soleReader(graph, uses, node.output(0), "Transpose", 0);
  if (!transpose)
    return std::nullopt;
  const onnx::AttributeProto *perm = findAttribute(graph.node(*transpose), "perm");
  if (!perm || perm->ints_size() != 2 || perm->ints(0) != 1 || perm->ints(1) != 0)
    return std::nullopt;
  auto gatherND = soleReader(graph, uses, graph.node(*transpose).output(0), "GatherND", 1);
  if (!gatherND)
    return std::nullopt;
  if (const onnx::AttributeProto *batchDims = findAttribute(graph.node(*gatherND), "batch_dims");
      batchDims && batchDims->i())
    return std::nullopt;
  auto reshape = soleReader(graph, uses, graph.node(*gatherND).output(0), "Reshape", 0);
  if (!reshape || graph.node(*reshape).input_size() != 2)
    return std::nullopt;
  // A literal 0 in the shape copies the selection's count (or, with
  // allowzero, is an empty dimension): the groups are not the mask's then.
  if (auto shape = literalInts(graph, uses, graph.node(*reshape).input(1));
      shape && (shape->values.size() < 2 || shape->values.front() <= 0 || llvm::is_contained(shape->values, 0)))
    return std::nullopt;
  auto gather = soleReader(graph, uses, graph.node(*reshape).output(0), "Gather", 0);
  if (!gather || graph.node(*gather).input_size() != 2)
    return std::nullopt;
  const onnx::AttributeProto *axis = findAttribute(graph.node(*gather), "axis");
  if (!axis || axis->i() != 1)
    return std::nullopt;
  auto index = literalInts(graph, uses, graph.node(*gather).input(1));
  if (!index || index->rank != 0 || index->values.size() != 1)
    return std::nullopt;
  chain.transpose = *transpose;
  chain.gatherND = *gatherND;
  chain.reshape = *reshape;
  chain.gather = *gather;
  chain.index = index->values.front();
  return chain;
}

} // namespace

void fsdpc::import::rewriteMaskedRowSelections(onnx::GraphProto &graph, int64_t opset) {
  if (opset < 11)
    return;
  for (bool again = true; again;) {
    again = false;
    const Uses uses = indexUses(graph);
    for (int n = 0; n < graph.node_size() && !again; ++n) {
      const onnx::NodeProto &nonZero = graph.node(n);
      if (nonZero.op_type() != "NonZero" || !(nonZero.domain().empty() || nonZero.domain() == "ai.onnx"))
        continue;
      std::optional<Chain> chain = matchChain(graph, uses, n);
      if (!chain)
        continue;
      const std::string name = nodeName(nonZero, n);
      const std::string mask = nonZero.input(0), x = graph.node(chain->gatherND).input(0);
      const std::string shape = graph.node(chain->reshape).input(1);
      const std::string result = graph.node(chain->gather).output(0);

      std::vector<onnx::NodeProto> nodes;
      SelectionBuilder b(name + "/row_selection", nodes);
      // NonZero selects every nonzero element, whatever the mask's type.
      // The ranks are counted in integers: CumSum of floats would be a
      // product with a triangle of the mask's length squared.
      const std::string selected =
          b.cast(b.cast(mask, onnx::TensorProto::BOOL, "selected"), onnx::TensorProto::INT64, "selected_as_int");
      // The shapes that regroup the mask, the weights and the result: from
      // a literal target, literals (which the static-batch rewrite rescales
      // as it does the Reshape's own); else computed from the target.
      const std::string one = b.ints({1}, "one"), minusOne = b.ints({-1}, "minus_one");
      std::string maskShape, weightsShape, resultShape;
      if (auto literal = literalInts(graph, uses, shape)) {
        const std::vector<int64_t> &target = literal->values;
        std::vector<int64_t> result{target[0]};
        result.insert(result.end(), target.begin() + 2, target.end());
        maskShape = b.ints({target[0], -1}, "mask_shape");
        weightsShape = b.ints({target[0], 1, -1}, "weights_shape");
        resultShape = b.ints(result, "result_shape");
      } else {
        const std::string zero = b.ints({0}, "zero"), two = b.ints({2}, "two");
        const std::string end = b.ints({std::numeric_limits<int64_t>::max()}, "end");
        const std::string groups = b.node("Slice", {shape, zero, one}, "group_count");
        const std::string rowShape = b.node("Slice", {shape, two, end}, "row_shape");
        maskShape = b.concat({groups, minusOne}, "mask_shape");
        weightsShape = b.concat({groups, one, minusOne}, "weights_shape");
        resultShape = b.concat({groups, rowShape}, "result_shape");
      }
      const std::string grouped = b.node("Reshape", {selected, maskShape}, "mask_by_group");
      const std::string groupShape = b.node("Shape", {grouped}, "mask_by_group_shape");
      const std::string rows = b.node("Reshape", {x, b.concat({groupShape, minusOne}, "rows_shape")}, "rows_by_group");
      const std::string rank = b.node("CumSum", {grouped, one}, "rank_in_group");
      std::string target;
      if (chain->index >= 0) {
        target = b.scalar(chain->index + 1, "target_rank");
      } else {
        const std::string last = b.ints({std::numeric_limits<int64_t>::max()}, "through_last");
        const std::string count = b.node("Slice", {rank, minusOne, last, one}, "selected_in_group");
        target = b.node("Add", {count, b.scalar(chain->index + 1, "rank_from_end")}, "target_rank");
      }
      const std::string hit =
          b.cast(b.node("Equal", {rank, target}, "is_target"), onnx::TensorProto::INT64, "is_target_as_int");
      const std::string weights =
          b.cast(b.node("Mul", {grouped, hit}, "target_in_group"), onnx::TensorProto::FLOAT, "weights");
      const std::string weightsRow = b.node("Reshape", {weights, weightsShape}, "weights_row");
      const std::string picked = b.node("MatMul", {weightsRow, rows}, "picked");
      b.node("Reshape", {picked, resultShape}, "result", result);

      // The new nodes take the Gather's place, which comes after everything
      // they read; the chain goes.
      std::set<int> chainNodes{chain->nonZero, chain->transpose, chain->gatherND, chain->reshape, chain->gather};
      std::vector<onnx::NodeProto> all;
      for (int i = 0; i < graph.node_size(); ++i) {
        if (i == chain->gather)
          for (onnx::NodeProto &added : nodes)
            all.push_back(std::move(added));
        if (!chainNodes.count(i))
          all.push_back(graph.node(i));
      }
      graph.clear_node();
      for (onnx::NodeProto &node : all)
        *graph.add_node() = std::move(node);
      again = true;
    }
  }
}
