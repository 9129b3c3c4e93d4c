//===- OnnxExport.h - Trained parameters back into an ONNX model -*- C++ -*-===//
//
// fsdp-run --save-onnx: the model the plan was compiled from, with every
// initializer that is a trained parameter replaced by its trained value.
// Parameters keep their ONNX initializer names and the layout the graph
// reads them in (the importer never reshapes or transposes one), so the
// result is the original graph, trained. Everything but the initializers'
// data is kept byte for byte.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_ONNXEXPORT_H
#define FSDPC_RUNTIME_ONNXEXPORT_H

#include "fsdpc/runtime/Safetensors.h"
#include "fsdpc/runtime/Status.h"

#include <string>

namespace fsdpc::runtime {

/// Reads `sourceModel`, replaces the data of each initializer named in
/// `parameters` (f32, the same shape), and writes `outputModel` atomically.
/// Fails naming the file and the tensor if a parameter has no initializer
/// of its name and shape, or the source keeps it in external data.
Status writeTrainedOnnx(const std::string &sourceModel, const NamedArrays &parameters, const std::string &outputModel);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_ONNXEXPORT_H
