//===- OnnxImporter.h - ONNX to the graph dialect ---------------*- C++ -*-===//
#ifndef FSDPC_IMPORT_ONNXIMPORTER_H
#define FSDPC_IMPORT_ONNXIMPORTER_H

#include "fsdpc/Import/WeightStore.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <utility>
#include <vector>

namespace fsdpc {

struct ImportOptions {
  /// Replaces a symbolic (or unknown) leading dimension of every graph input;
  /// 0 keeps the model's own batch size.
  int64_t batchSize = 0;
  /// Ranks the global batch is split over: each imports batch / worldSize
  /// samples; a global batch that does not divide is an error.
  int64_t worldSize = 1;
  /// Sizes for symbolic dimensions by name (a sequence length, an image's
  /// height): every dimension of the graph's inputs, outputs and annotated
  /// values that names one gets its size. The batch is --batch-size's.
  std::vector<std::pair<std::string, int64_t>> namedDimensions;
  /// Parameters whose full name matches this POSIX extended regex are frozen.
  std::string freezeRegex;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  WeightStore weights;
  /// Things the user should know that do not stop the import, one line each
  /// (naming the file).
  std::vector<std::string> warnings;
};

/// Parses, checks and shape-infers `path` with libonnx and builds a module
/// with one function @forward in the graph dialect. On failure returns
/// nothing and sets `error` to one line that names the file and, where there
/// is one, the ONNX node and op.
std::optional<ImportedModel> importOnnxModel(mlir::MLIRContext &context, const std::string &path,
                                             const ImportOptions &options, std::string &error);

/// An ONNX op the importer has a pattern for.
struct SupportedOnnxOp {
  std::string opType;
  int64_t sinceVersion; // the first opset the pattern applies to
  std::string limits;   // what it does not cover; empty when nothing
};

/// Every (ONNX op type, first opset) the importer has a pattern for.
std::vector<SupportedOnnxOp> supportedOnnxOps();

/// The default-domain ONNX ops the importer knows the schemas of (libonnx's
/// and the newer versions fsdpc registers) that it has no pattern for.
std::vector<std::string> unsupportedOnnxOps();

} // namespace fsdpc

#endif // FSDPC_IMPORT_ONNXIMPORTER_H
