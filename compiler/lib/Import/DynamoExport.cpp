//===- DynamoExport.cpp - What torch.export's ONNX exporter writes --------===//
#include "DynamoExport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

using namespace fsdpc::import;

namespace {

constexpr llvm::StringLiteral kSignatureKey = "pkg.torch.export.ExportedProgram.graph_signature";
constexpr llvm::StringLiteral kFxNodeKey = "pkg.torch.onnx.fx_node";
constexpr llvm::StringLiteral kNamespaceKey = "namespace";

// libonnx 1.12 predates the metadata_props of nodes and graphs (IR 10):
// protobuf keeps them as unknown fields, read here by field number.
constexpr int kNodeMetadataField = 9;
constexpr int kGraphMetadataField = 16;

std::vector<onnx::StringStringEntryProto> metadataEntries(const google::protobuf::Message &message, int field) {
  std::vector<onnx::StringStringEntryProto> entries;
  const google::protobuf::UnknownFieldSet &unknown = message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    onnx::StringStringEntryProto entry;
    if (f.number() == field && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
        entry.ParseFromString(f.length_delimited()))
      entries.push_back(std::move(entry));
  }
  return entries;
}

std::string metadata(const onnx::NodeProto &node, llvm::StringRef key) {
  for (const onnx::StringStringEntryProto &entry : metadataEntries(node, kNodeMetadataField))
    if (entry.key() == key)
      return entry.value();
  return {};
}

llvm::StringRef leafName(llvm::StringRef target) { return target.rsplit('.').second.empty() ? target : target.rsplit('.').second; }

/// The targets of the parameter placeholders (`%p_blocks_0_fc_weight`) an FX
/// node's text names, as the signature maps them (`blocks.0.fc.weight`).
std::set<std::string> fxParameterTargets(llvm::StringRef fx, const DynamoSignature &signature) {
  std::set<std::string> targets;
  for (size_t at = fx.find("%p_"); at != llvm::StringRef::npos; at = fx.find("%p_", at + 1)) {
    llvm::StringRef placeholder =
        fx.drop_front(at + 1).take_while([](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (auto it = signature.targetOf.find(placeholder); it != signature.targetOf.end())
      targets.insert(it->second);
  }
  return targets;
}

/// The graph's initializers by name, and the copies the merge splitting
/// adds under new names. Each copy is appended, so the index of an
/// initializer that was there first stays below `size()` as it was then.
class Initializers {
public:
  explicit Initializers(onnx::GraphProto &graph) : graph(graph) {
    for (int i = 0; i < graph.initializer_size(); ++i)
      indexOf.emplace(graph.initializer(i).name(), i);
  }

  size_t size() const { return indexOf.size(); }
  bool contains(const std::string &name) const { return indexOf.count(name); }
  /// Its index, or -1 where no initializer has that name.
  int index(const std::string &name) const {
    auto it = indexOf.find(name);
    return it == indexOf.end() ? -1 : it->second;
  }
  bool isFloat(const std::string &name) const {
    int i = index(name);
    return i >= 0 && graph.initializer(i).data_type() == onnx::TensorProto::FLOAT;
  }
  /// Appends a copy of the initializer `from` named `to`.
  void addCopy(const std::string &from, const std::string &to) {
    onnx::TensorProto copy = graph.initializer(indexOf.at(from));
    copy.set_name(to);
    indexOf.emplace(to, graph.initializer_size());
    *graph.add_initializer() = std::move(copy);
  }
  /// `base + suffix + N` for the first N from 1 that names no initializer.
  std::string freshName(const std::string &base, llvm::StringRef suffix, int &next) const {
    std::string name;
    do
      name = base + suffix.str() + std::to_string(next++);
    while (contains(name));
    return name;
  }

private:
  onnx::GraphProto &graph;
  std::map<std::string, int> indexOf;
};

/// Values computed in the graph: the torch program's inputs (those that are
/// no initializer), and what ONNX nodes compute. An FX value that is an
/// initializer was folded, and might have been computed from a parameter.
std::set<std::string> valuesComputedInGraph(const onnx::GraphProto &graph, const Initializers &initializers) {
  std::set<std::string> computed;
  for (const onnx::ValueInfoProto &input : graph.input())
    if (!initializers.contains(input.name()))
      computed.insert(input.name());
  for (const onnx::NodeProto &node : graph.node())
    computed.insert(node.output().begin(), node.output().end());
  return computed;
}

/// Every node named the way the dynamo exporter names them (`node_<op>`):
/// a dynamo export whose metadata a conversion to an older opset dropped.
bool namedByDynamo(const onnx::GraphProto &graph) {
  if (graph.node_size() == 0)
    return false;
  for (const onnx::NodeProto &node : graph.node())
    if (!llvm::StringRef(node.name()).starts_with("node_"))
      return false;
  return true;
}

} // namespace

DynamoSignature fsdpc::import::readDynamoSignature(const onnx::ModelProto &model) {
  DynamoSignature signature;
  for (const onnx::StringStringEntryProto &entry : metadataEntries(model.graph(), kGraphMetadataField)) {
    if (entry.key() != kSignatureKey)
      continue;
    signature.present = true;
    // Lines such as `p_blocks_0_fc_weight: PARAMETER target='blocks.0.fc.weight'`.
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(entry.value()).split(lines, '\n');
    for (llvm::StringRef line : lines) {
      auto [placeholder, rest] = line.trim().split(": ");
      auto [kind, tail] = rest.split(' ');
      size_t start = tail.find("target='");
      if (start == llvm::StringRef::npos)
        continue;
      llvm::StringRef target = tail.drop_front(start + 8).take_until([](char c) { return c == '\''; });
      signature.targetOf[placeholder] = target.str();
      if (kind == "PARAMETER")
        signature.parameters.insert(target);
      else if (kind == "BUFFER" || kind == "CONSTANT_TENSOR")
        signature.buffers.insert(target);
    }
  }
  // Without the signature, a graph named the dynamo way still has its
  // parameters under their torch names, dotted; the exporter's own values
  // are `val_12`, `embedding_1`.
  if (!signature.present && namedByDynamo(model.graph()))
    for (const onnx::TensorProto &init : model.graph().initializer())
      if (llvm::StringRef(init.name()).contains('.'))
        signature.parameters.insert(init.name());
  signature.present |= namedByDynamo(model.graph());
  return signature;
}

std::string fsdpc::import::moduleOfNode(const onnx::NodeProto &node) {
  // ": model.GPT/blocks.0: model.Block/blocks.0.attn.qkv: torch.nn.Linear/linear: aten.linear.default":
  // the scope the op sits in is the component before the op's own.
  std::string scopeText = metadata(node, kNamespaceKey);
  if (llvm::StringRef scope = scopeText; !scope.empty()) {
    llvm::SmallVector<llvm::StringRef> parts;
    scope.split(parts, '/');
    if (parts.size() < 2)
      return "";
    return parts[parts.size() - 2].split(':').first.trim().str();
  }
  llvm::StringRef name(node.name());
  if (!name.consume_front("/") || !name.contains('/'))
    return "";
  std::string module = name.rsplit('/').first.str();
  std::replace(module.begin(), module.end(), '/', '.');
  return module;
}

namespace {

/// The anonymous half of splitMergedParameters: folded copies merged by
/// value. Each FX node reading an anonymous float initializer names the
/// parameters it stands for; those the graph has no initializer of are the
/// hidden ones. FX nodes whose hidden parameters overlap read one value (a
/// tied weight's transposed copy read by two products); every other group
/// of them gets a copy of its own (`val_55.merged_1`), the first keeps it.
/// FX nodes naming no hidden parameter, and nodes without metadata, keep
/// the original.
void splitMergedFoldedCopies(onnx::GraphProto &graph, const DynamoSignature &signature, Initializers &initializers) {
  auto isFoldedFloat = [&](const std::string &name) {
    return initializers.isFloat(name) && signature.isAnonymous(name) && !signature.exporterConstants.count(name);
  };

  // Per anonymous initializer, the FX nodes reading it in graph order, and
  // per FX node the hidden parameters it names.
  std::map<std::string, std::vector<std::string>> readers;
  std::map<std::string, std::set<std::string>> hiddenOf;
  for (const onnx::NodeProto &node : graph.node()) {
    const std::string fx = metadata(node, kFxNodeKey);
    if (fx.empty())
      continue;
    for (const std::string &input : node.input()) {
      if (!isFoldedFloat(input))
        continue;
      std::vector<std::string> &fxNodes = readers[input];
      if (std::find(fxNodes.begin(), fxNodes.end(), fx) != fxNodes.end())
        continue;
      fxNodes.push_back(fx);
      if (!hiddenOf.count(fx))
        for (const std::string &target : fxParameterTargets(fx, signature))
          if (!initializers.contains(target))
            hiddenOf[fx].insert(target);
    }
  }

  std::map<std::pair<std::string, std::string>, std::string> copyFor; // (FX node, initializer) -> its copy
  for (const auto &[name, fxNodes] : readers) {
    struct Group {
      std::set<std::string> parameters;
      std::vector<std::string> fxNodes;
    };
    std::vector<Group> groups; // in the order of their first reader
    for (const std::string &fx : fxNodes) {
      const std::set<std::string> &hidden = hiddenOf[fx];
      if (hidden.empty())
        continue;
      Group joined{hidden, {fx}};
      size_t firstOverlap = groups.size();
      for (size_t g = groups.size(); g-- > 0;) {
        const std::set<std::string> &parameters = groups[g].parameters;
        if (std::none_of(hidden.begin(), hidden.end(), [&](const std::string &p) { return parameters.count(p); }))
          continue;
        joined.parameters.insert(parameters.begin(), parameters.end());
        joined.fxNodes.insert(joined.fxNodes.begin(), groups[g].fxNodes.begin(), groups[g].fxNodes.end());
        groups.erase(groups.begin() + g);
        firstOverlap = g;
      }
      groups.insert(groups.begin() + std::min(firstOverlap, groups.size()), std::move(joined));
    }
    int suffix = 1;
    for (size_t g = 1; g < groups.size(); ++g) {
      const std::string copyName = initializers.freshName(name, ".merged_", suffix);
      initializers.addCopy(name, copyName);
      for (const std::string &fx : groups[g].fxNodes)
        copyFor[{fx, name}] = copyName;
    }
  }
  if (copyFor.empty())
    return;
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    const std::string fx = metadata(node, kFxNodeKey);
    for (int slot = 0; slot < node.input_size(); ++slot)
      if (auto it = copyFor.find({fx, node.input(slot)}); it != copyFor.end())
        node.set_input(slot, it->second);
  }
}

/// An FX node as its metadata text writes it: `%group_norm : [num_users=1] =
/// call_function[target=torch.ops.aten.group_norm.default](args = (%conv2d,
/// 8, %p_norm_weight, %p_norm_bias, 1e-05, False), kwargs = {})`.
struct FxNodeText {
  std::string target;              // torch.ops.aten.group_norm.default
  std::vector<std::string> inputs; // the values its arguments name: conv2d, p_norm_weight, ...
};

FxNodeText parseFxNode(llvm::StringRef fx) {
  FxNodeText parsed;
  llvm::StringRef rest = fx.split(" = ").second;
  if (size_t at = rest.find("target="); at != llvm::StringRef::npos)
    parsed.target = rest.drop_front(at + 7).split(']').first.str();
  rest = rest.split("](").second;
  for (size_t at = rest.find('%'); at != llvm::StringRef::npos; at = rest.find('%', at + 1))
    parsed.inputs.push_back(
        rest.drop_front(at + 1)
            .take_while([](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; })
            .str());
  return parsed;
}

/// Folded values merged by value. The optimizer folds what the program
/// computes from parameters alone into an initializer named after the FX
/// value (Gemma's RMSNorm scale, `add_4 = 1 + weight`), and merges equal
/// ones: every norm's FX node reads `add_4`, while its own text names its
/// own value (`%add_9`). A reader whose FX node does not name the
/// initializer, but names exactly one value of the same op (`add`) that the
/// graph neither computes nor holds, gets a copy of its own under that name.
void splitMergedFoldedValues(onnx::GraphProto &graph, const DynamoSignature &signature, Initializers &initializers) {
  const std::set<std::string> computed = valuesComputedInGraph(graph, initializers);
  auto opOf = [](llvm::StringRef value) { // add_9 -> add
    llvm::StringRef stem = value.rtrim("0123456789");
    return stem.size() < value.size() && stem.ends_with("_") ? stem.drop_back() : value;
  };
  // Copies made here are not merged values, and their names are taken.
  const int originals = static_cast<int>(initializers.size());
  auto isOriginal = [&](const std::string &name) {
    int i = initializers.index(name);
    return i >= 0 && i < originals;
  };
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    const std::string fx = metadata(node, kFxNodeKey);
    if (fx.empty())
      continue;
    const FxNodeText parsed = parseFxNode(fx);
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string merged = node.input(slot);
      if (!isOriginal(merged) || !initializers.isFloat(merged) || !signature.isAnonymous(merged) ||
          signature.exporterConstants.count(merged) || llvm::is_contained(parsed.inputs, merged))
        continue;
      std::set<std::string> own;
      for (const std::string &value : parsed.inputs)
        if (opOf(value) == opOf(merged) && !computed.count(value) && !signature.targetOf.count(value) &&
            !isOriginal(value))
          own.insert(value);
      if (own.size() != 1)
        continue;
      const std::string &name = *own.begin();
      if (!initializers.contains(name))
        initializers.addCopy(merged, name);
      node.set_input(slot, name);
    }
  }
}

/// Initializers that the exporter's translation of an FX node made and its
/// optimizer merged with equal values elsewhere: an affine-free LayerNorm's
/// weight of ones merged into some parameter of ones, GroupNorm's
/// InstanceNormalization over the groups with its scale of ones and bias of
/// zeros. Training them would train constants torch has, or tie them to a
/// parameter they only equal. A read is the exporter's constant when
///
/// - the FX node names no parameter, and every value its arguments name is
///   an input, a buffer or a value an ONNX node computes, so nothing that
///   carried a parameter was folded away on the way to it (a `clone` or `t`
///   of a weight whose ONNX node the optimizer removed, a value folded into
///   an initializer);
/// - or it is one of the constants a translation is known to make beside
///   the parameters: aten.group_norm's InstanceNormalization scale and B.
///
/// Those reads get a copy (`X.exporter_constant`) where something else
/// reads the initializer too, and the initializers only they read are
/// recorded in signature.exporterConstants.
void separateExporterConstants(onnx::GraphProto &graph, DynamoSignature &signature, Initializers &initializers) {
  const std::set<std::string> computed = valuesComputedInGraph(graph, initializers);
  struct FxNodeKind {
    bool madeByTranslation; // names no parameter, and every value it names is computed in the graph
    bool groupNorm;         // aten.group_norm, whose InstanceNormalization's scale and B are the exporter's
  };
  std::map<std::string, FxNodeKind> kindOf;       // by FX node text
  std::vector<std::pair<int, int>> constantReads; // node, input slot
  std::map<std::string, int> reads, constantReadsOf;
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    const std::string fx = metadata(node, kFxNodeKey);
    for (const std::string &input : node.input())
      ++reads[input];
    if (fx.empty())
      continue;
    auto [entry, fresh] = kindOf.try_emplace(fx, FxNodeKind{false, false});
    if (fresh) {
      const FxNodeText parsed = parseFxNode(fx);
      entry->second.madeByTranslation =
          fxParameterTargets(fx, signature).empty() &&
          std::all_of(parsed.inputs.begin(), parsed.inputs.end(), [&](const std::string &value) {
            auto placeholder = signature.targetOf.find(value); // a buffer's or constant's
            return computed.count(value) ||
                   (placeholder != signature.targetOf.end() && !signature.parameters.contains(placeholder->second));
          });
      entry->second.groupNorm = parsed.target == "torch.ops.aten.group_norm.default";
    }
    const bool groupNormConstants = node.op_type() == "InstanceNormalization" && entry->second.groupNorm;
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string &input = node.input(slot);
      if (!initializers.isFloat(input) || signature.buffers.contains(input))
        continue;
      if (entry->second.madeByTranslation || (groupNormConstants && slot > 0 && signature.isAnonymous(input))) {
        constantReads.emplace_back(n, slot);
        ++constantReadsOf[input];
      }
    }
  }
  std::map<std::string, std::string> constantFor;
  for (const auto &[name, count] : constantReadsOf) {
    if (count == reads[name] && signature.isAnonymous(name)) { // read only as the exporter's constant
      signature.exporterConstants.insert(name);
      continue;
    }
    const std::string copyName = name + ".exporter_constant";
    initializers.addCopy(name, copyName);
    constantFor[name] = copyName;
    signature.exporterConstants.insert(copyName);
  }
  for (const auto &[n, slot] : constantReads)
    if (auto it = constantFor.find(graph.node(n).input(slot)); it != constantFor.end())
      graph.mutable_node(n)->set_input(slot, it->second);
}

} // namespace

void fsdpc::import::splitMergedParameters(onnx::GraphProto &graph, DynamoSignature &signature) {
  if (!signature.present)
    return;
  Initializers initializers(graph);
  auto isFloatParameter = [&](const std::string &name) {
    return initializers.isFloat(name) && signature.parameters.contains(name);
  };

  std::map<std::string, std::string> copies; // new parameter -> the initializer it copies
  std::map<std::string, int> readers;        // metadata-free graphs: nodes seen per parameter
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    // The parameters the node's FX node read, by target.
    const std::string fx = metadata(node, kFxNodeKey);
    const std::set<std::string> fxParameters = fxParameterTargets(fx, signature);
    // A Conv whose FX node is a BatchNorm: the optimizer folded an eval-mode
    // BatchNorm into the Conv before it, whose weight (folded) the node reads
    // under the Conv's name. The BatchNorm's weight is gone, not merged.
    const bool foldedBatchNorm = (node.op_type() == "Conv" || node.op_type() == "ConvTranspose") &&
                                 llvm::StringRef(parseFxNode(fx).target).contains("batch_norm");
    std::map<std::string, std::string> ownHere; // merged -> what this node reads instead
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string merged = node.input(slot);
      if (!isFloatParameter(merged))
        continue;
      auto chosen = ownHere.find(merged);
      if (chosen == ownHere.end()) {
        std::string own = merged;
        if (!fx.empty() && !foldedBatchNorm) {
          std::vector<std::string> sameLeaf;
          for (const std::string &candidate : fxParameters)
            if (leafName(candidate) == leafName(merged) && !initializers.contains(candidate))
              sameLeaf.push_back(candidate);
          if (!fxParameters.count(merged) && sameLeaf.size() == 1)
            own = sameLeaf.front();
        } else if (int seen = readers[merged]++; seen > 0) {
          // No FX metadata (lost converting to an older opset): every node
          // but the first that reads a parameter reads a merged copy.
          own = merged + ".merged_" + std::to_string(seen);
        }
        chosen = ownHere.emplace(merged, own).first;
      }
      if (chosen->second == merged)
        continue;
      copies.emplace(chosen->second, merged);
      node.set_input(slot, chosen->second);
    }
  }
  for (const auto &[own, merged] : copies)
    initializers.addCopy(merged, own);
  separateExporterConstants(graph, signature, initializers);
  splitMergedFoldedValues(graph, signature, initializers);
  splitMergedFoldedCopies(graph, signature, initializers);
}

namespace {

/// What the ONNX nodes of each FX node read: the anonymous initializers,
/// and the parameter targets the FX node names; and the anonymous
/// initializers read by nodes without FX metadata.
struct FxNodeReads {
  std::set<std::string> initializers, anonymous;
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> byFxNode; // anonymous, parameters
  std::set<std::string> readWithoutMetadata;
};

FxNodeReads fxNodeReads(const onnx::GraphProto &graph, const DynamoSignature &signature) {
  FxNodeReads reads;
  for (const onnx::TensorProto &init : graph.initializer()) {
    reads.initializers.insert(init.name());
    if (signature.isAnonymous(init.name()) && !signature.exporterConstants.count(init.name()))
      reads.anonymous.insert(init.name());
  }
  for (const onnx::NodeProto &node : graph.node()) {
    const std::string fx = metadata(node, kFxNodeKey);
    auto readsAnonymous = [&](std::set<std::string> &into) {
      for (const std::string &input : node.input())
        if (reads.anonymous.count(input))
          into.insert(input);
    };
    if (fx.empty()) { // a node the optimizer made, or metadata a conversion dropped
      readsAnonymous(reads.readWithoutMetadata);
      continue;
    }
    auto &[anonymous, parameters] = reads.byFxNode[fx];
    readsAnonymous(anonymous);
    for (const std::string &target : fxParameterTargets(fx, signature))
      parameters.insert(target);
  }
  return reads;
}

} // namespace

std::vector<std::string> fsdpc::import::parametersOptimizedAway(const onnx::GraphProto &graph,
                                                                const DynamoSignature &signature) {
  // A parameter an FX node names, which is no initializer, while no ONNX
  // node of that FX node reads an anonymous one (a folded copy). One that
  // no FX node in the graph names is not reported: every ONNX node of its
  // FX nodes may have been folded, but a tied weight's second name (GPT's
  // wte.weight beside head.weight) is in the signature and no FX node too.
  const FxNodeReads reads = fxNodeReads(graph, signature);
  std::set<std::string> gone;
  for (const auto &[fx, entry] : reads.byFxNode)
    if (entry.first.empty())
      for (const std::string &target : entry.second)
        if (signature.parameters.contains(target) && !reads.initializers.count(target))
          gone.insert(target);
  return {gone.begin(), gone.end()};
}

FoldedInitializers fsdpc::import::constantsFoldedFromBuffers(const onnx::GraphProto &graph,
                                                             const DynamoSignature &signature) {
  FoldedInitializers folded;
  folded.constants = signature.exporterConstants;
  if (!signature.present || signature.targetOf.empty()) // no signature in the metadata
    return folded;
  const FxNodeReads reads = fxNodeReads(graph, signature);
  std::set<std::string> accounted(reads.initializers.begin(), reads.initializers.end()), copies;
  for (const auto &[fx, entry] : reads.byFxNode) {
    // A parameter whose FX node reads no folded copy was folded away
    // (parametersOptimizedAway reports it): it hides in no initializer.
    accounted.insert(entry.second.begin(), entry.second.end());
    if (!entry.second.empty())
      copies.insert(entry.first.begin(), entry.first.end());
  }
  for (const auto &parameter : signature.parameters)
    if (!accounted.count(parameter.getKey().str()))
      folded.unaccounted.push_back(parameter.getKey().str());
  std::sort(folded.unaccounted.begin(), folded.unaccounted.end());
  std::map<std::string, int64_t> floatElements; // what would train: float initializers
  for (const onnx::TensorProto &init : graph.initializer()) {
    int64_t count = 1;
    for (int64_t d : init.dims())
      count *= d;
    if (init.data_type() == onnx::TensorProto::FLOAT || init.data_type() == onnx::TensorProto::FLOAT16 ||
        init.data_type() == onnx::TensorProto::BFLOAT16 || init.data_type() == onnx::TensorProto::DOUBLE)
      floatElements[init.name()] = count;
  }
  for (const std::string &name : reads.anonymous) {
    if (copies.count(name) || reads.readWithoutMetadata.count(name))
      continue;
    if (folded.unaccounted.empty())
      folded.constants.insert(name);
    else if (floatElements[name] > 1) // one-element ones are settings, never trained
      folded.trainedUnsure.push_back(name);
  }
  return folded;
}

void fsdpc::import::restoreBatchNormTraining(onnx::GraphProto &graph, int64_t opset) {
  if (opset < 14)
    return;
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() != "BatchNormalization" || !node.domain().empty())
      continue;
    const std::string fx = metadata(node, kFxNodeKey);
    const FxNodeText parsed = parseFxNode(fx);
    if (parsed.target != "torch.ops.aten._native_batch_norm_legit_functional.default" &&
        parsed.target != "torch.ops.aten._native_batch_norm_legit.default")
      continue;
    // args = (input, weight, bias, running_mean, running_var, training, momentum, eps)
    llvm::SmallVector<llvm::StringRef> args;
    llvm::StringRef(fx).split("(args = (").second.split(')').first.split(args, ", ");
    if (args.size() < 6 || args[5] != "True")
      continue;
    bool said = false;
    for (const onnx::AttributeProto &attr : node.attribute())
      said |= attr.name() == "training_mode";
    if (said)
      continue;
    onnx::AttributeProto *training = node.add_attribute();
    training->set_name("training_mode");
    training->set_type(onnx::AttributeProto::INT);
    training->set_i(1);
    // ONNX's training BatchNormalization has the running statistics as
    // outputs too (nothing reads them; the step updates the buffers).
    while (node.output_size() < 3)
      node.add_output(node.output(0) + (node.output_size() == 1 ? ".running_mean" : ".running_var"));
  }
}

void fsdpc::import::dropDowngradedSplitAttributes(onnx::GraphProto &graph, int64_t opset) {
  if (opset >= 18 || opset < 13)
    return;
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() != "Split" || (node.input_size() > 1 && !node.input(1).empty()))
      continue;
    auto *attributes = node.mutable_attribute();
    for (int i = 0; i < attributes->size(); ++i)
      if (attributes->Get(i).name() == "num_outputs" && attributes->Get(i).i() == node.output_size()) {
        attributes->DeleteSubrange(i, 1);
        break;
      }
  }
}
