//===- OnnxExport.h - Trained parameters back into an ONNX model -*- C++ -*-===//
//
// fsdp-run --save-onnx: the model the plan was compiled from, with every
// initializer that is a trained parameter replaced by its trained value.
// Parameters keep their ONNX initializer names and the layout the graph
// reads them in, so the result is the original graph, trained. The
// importer's undoing of torch.onnx.export's rewrites (the plan's
// initializer_rewrites) is reversed: a parameter that was Identity(shared
// initializer) becomes an initializer of its own in place of the Identity,
// and a transposed copy of a tied weight gets the trained weight,
// transposed. Everything else is kept byte for byte.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_ONNXEXPORT_H
#define FSDPC_RUNTIME_ONNXEXPORT_H

#include "fsdpc/runtime/Safetensors.h"
#include "fsdpc/runtime/Status.h"
#include "plan.pb.h"

#include <string>

namespace fsdpc::runtime {

/// Reads `sourceModel`, replaces the data of each initializer named in
/// `parameters` (f32, the same shape), and writes `outputModel` atomically.
/// Fails naming the file and the tensor if a parameter has no initializer
/// of its name and shape, or the source keeps it in external data.
Status writeTrainedOnnx(const std::string &sourceModel, const NamedArrays &parameters,
                        const google::protobuf::RepeatedPtrField<plan::InitializerRewrite> &rewrites,
                        const std::string &outputModel);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_ONNXEXPORT_H
