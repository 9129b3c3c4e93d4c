//===- DynamoExport.h - What torch.export's ONNX exporter writes -*- C++ -*-===//
//
// torch.onnx.export(..., dynamo=True) exports through torch.export and then
// optimizes the ONNX graph. It records the torch program in metadata: the
// graph signature (which placeholder is which parameter or buffer), and on
// every node the FX node it came from and its module scope. The optimizer
// also folds and merges initializers in ways that change what training
// means. This reads the metadata and undoes those rewrites.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_LIB_IMPORT_DYNAMOEXPORT_H
#define FSDPC_LIB_IMPORT_DYNAMOEXPORT_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "onnx/onnx_pb.h"

#include <set>
#include <string>
#include <vector>

namespace fsdpc::import {

/// The torch program's signature, from the model's metadata.
struct DynamoSignature {
  bool present = false;                   // the model is a dynamo export
  llvm::StringMap<std::string> targetOf;  // placeholder (p_fc_weight) -> target (fc.weight)
  llvm::StringSet<> parameters;           // targets of PARAMETER placeholders
  llvm::StringSet<> buffers;              // targets of BUFFER and CONSTANT_TENSOR ones
  std::set<std::string> exporterConstants; // float initializers the exporter's translation made (splitMergedParameters)

  /// An initializer the exporter made (a folded or lifted value), not a
  /// parameter or buffer of the torch module.
  bool isAnonymous(llvm::StringRef name) const {
    return name.starts_with("onnx::") || (present && !parameters.contains(name) && !buffers.contains(name));
  }
};

DynamoSignature readDynamoSignature(const onnx::ModelProto &model);

/// The module path of a node (`blocks.0.attn.qkv`) from its dynamo scope
/// metadata, or from a TorchScript export's node name
/// (`/blocks.0/attn/qkv/MatMul`). Empty when neither says.
std::string moduleOfNode(const onnx::NodeProto &node);

/// The optimizer of the dynamo exporter merges initializers with equal
/// values (every zero bias of one shape, every LayerNorm weight of ones)
/// into one, without a trace in the graph. Each node's FX metadata still
/// names the parameters it read: a node that reads initializer `P` while its
/// FX node names no `P` but exactly one parameter `Q` with P's leaf name
/// (`bias`, `weight`) gets `Q` as an initializer of its own, a copy of `P`.
/// Where a conversion to an older opset dropped the metadata, every node
/// after the first that reads a parameter gets a copy (`P.merged_N`).
/// Folded copies merge the same way (diffusers' GroupNorm weights, reshaped
/// to [C, 1, 1], one anonymous initializer for every norm of C channels):
/// FX nodes reading one that name disjoint sets of parameters absent from
/// the graph get a copy each (`val_55.merged_1`); FX nodes naming a common
/// one (a tied weight) keep sharing it.
/// The optimizer also merges the constants the exporter's translation of
/// an FX node makes (an affine-free LayerNorm's weight of ones, GroupNorm's
/// InstanceNormalization scale and bias) with equal parameters or folded
/// copies; those reads get a copy of their own, recorded with the
/// initializers only such reads read in `signature.exporterConstants`
/// (DynamoExport.cpp, separateExporterConstants, says how they are told).
void splitMergedParameters(onnx::GraphProto &graph, DynamoSignature &signature);

/// Parameters of the torch program that the graph no longer has: the
/// exporter's optimizer folds parameters as if they were constants, and an
/// `addmm` with a zero bias loses its bias. A parameter counts as gone when
/// a node's FX metadata names it, it is no initializer, and no node of
/// that FX node reads an anonymous initializer (a folded copy of it).
std::vector<std::string> parametersOptimizedAway(const onnx::GraphProto &graph, const DynamoSignature &signature);

/// Anonymous initializers that are no parameter: the optimizer also folds
/// what the program computed from buffers and constants alone (the rotary
/// cos and sin tables, a mask of zeros) into initializers that look like
/// folded parameters. When every parameter of the signature is in the graph
/// as itself or as an anonymous copy that a node of its FX node reads, the
/// other anonymous initializers came from no parameter. Otherwise (a
/// parameter folded into something no FX node names, as BERT's position
/// embeddings gathered at constant positions) nothing is returned: any of
/// them might be that parameter. The exporter's constants are constants
/// either way.
struct FoldedInitializers {
  std::set<std::string> constants;
  /// Parameters of the signature in no node of the graph (folded into
  /// something, or a tied weight's second name), and the anonymous
  /// initializers that then train although no FX node shows them to be
  /// copies of a parameter: what fsdpc warns about.
  std::vector<std::string> unaccounted, trainedUnsure;
};
FoldedInitializers constantsFoldedFromBuffers(const onnx::GraphProto &graph, const DynamoSignature &signature);

/// Below opset 18, Split has no `num_outputs`; the dynamo exporter's
/// conversion to older opsets leaves it in. Without a `split` input, Split
/// of opsets 13-17 already makes equal parts, one per output: the attribute
/// is dropped when it says the same.
void dropDowngradedSplitAttributes(onnx::GraphProto &graph, int64_t opset);

/// torch's exporter writes a BatchNorm of a module in training mode
/// (aten._native_batch_norm_legit_functional with training True: batch
/// statistics, the running ones updated) as an inference
/// BatchNormalization, without training_mode. The FX metadata still says
/// which it was: such a node gets training_mode = 1 back (opset 14 and
/// later; with its optimizer on, the exporter has folded it into the Conv
/// before it instead, which splitMergedParameters reports).
void restoreBatchNormTraining(onnx::GraphProto &graph, int64_t opset);

} // namespace fsdpc::import

#endif // FSDPC_LIB_IMPORT_DYNAMOEXPORT_H
