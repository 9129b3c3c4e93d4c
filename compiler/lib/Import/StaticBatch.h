//===- StaticBatch.h - Re-deriving the batch a static export fixed -*- C++ -*-===//
//
// torch.onnx.export without dynamic_axes writes the example batch into the
// graph: the inputs' leading dimension, and literal shape constants such as
// a Reshape target [12, 32, 4, 12]. Such a model still computes any batch
// once those literals say so. This finds which literal elements are the
// batch, by following the batch axis from the inputs through every node,
// rewrites them, and afterwards checks every value's inferred shape against
// the one the analysis expects.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_LIB_IMPORT_STATICBATCH_H
#define FSDPC_LIB_IMPORT_STATICBATCH_H

#include "onnx/onnx_pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdpc::import {

/// The shape every node output must have once the model computes the new
/// batch: its shape at the export batch, with the batch axis rescaled.
struct RebatchedShapes {
  struct Value {
    std::string name;
    std::string node; // the node that computes it, for errors
    std::string op;
    std::vector<int64_t> shape; // -1: a dimension not known statically
  };
  int64_t exportBatch = 0;
  int64_t newBatch = 0;
  std::vector<Value> values; // in node order
};

/// Rewrites `model`, exported with the static batch `exportBatch` (the
/// leading dimension of its data inputs), to compute `newBatch` samples:
/// inputs whose leading dimension is the export batch get `newBatch`, every
/// literal shape element that carries the batch is rescaled, recorded
/// shapes are dropped for shape inference to derive again, and `expected`
/// receives what it must derive. `baseDir` resolves external data. On
/// failure sets `error`, naming the node that hides the batch.
///
/// Constants (and folded parameters) as big as the batch, broadcast against
/// batched values, keep one sample: the same at any batch, and a folded
/// parameter trains as the one tensor it was in torch. That is done at the
/// export batch as well (`newBatch == exportBatch`), where nothing else
/// changes and nothing is refused.
bool rebatchStaticExport(onnx::ModelProto &model, const std::string &baseDir, int64_t exportBatch, int64_t newBatch,
                         RebatchedShapes &expected, std::string &error);

/// After shape inference of the rebatched model: the first node whose output
/// shape differs from `expected` is the one fsdpc could not re-derive, and
/// `error` names it.
bool checkRebatchedShapes(const onnx::ModelProto &model, const RebatchedShapes &expected, std::string &error);

} // namespace fsdpc::import

#endif // FSDPC_LIB_IMPORT_STATICBATCH_H
