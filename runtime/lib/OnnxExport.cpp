//===- OnnxExport.cpp - Trained parameters back into an ONNX model --------===//
#include "fsdpc/runtime/OnnxExport.h"

#include "fsdpc/runtime/AtomicFile.h"
#include "onnx_initializers.pb.h"

#include <map>

namespace fsdpc::runtime {

Status writeTrainedOnnx(const std::string &sourceModel, const NamedArrays &parameters, const std::string &outputModel) {
  StatusOr<std::string> bytes = readWholeFile(sourceModel);
  if (!bytes.isOk())
    return FSDPC_ERROR(kNotFound, "--save-onnx needs the model the plan was compiled from: ", bytes.status().message());
  onnx_file::Model model;
  if (!model.ParseFromString(*bytes))
    return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "' is not an ONNX model");
  std::map<std::string, onnx_file::Tensor *> initializers;
  for (onnx_file::Tensor &tensor : *model.mutable_graph()->mutable_initializer())
    initializers[tensor.name()] = &tensor;
  for (const auto &[name, array] : parameters) {
    auto it = initializers.find(name);
    if (it == initializers.end())
      return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "' has no initializer '", name,
                         "' for the trained parameter of that name");
    onnx_file::Tensor &tensor = *it->second;
    const std::vector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
    if (array.dtype != plan::F32 || tensor.data_type() != 1 || dims != array.shape)
      return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "': initializer '", name,
                         "' is not an f32 tensor of the trained parameter's shape");
    if (tensor.data_location() == 1 || tensor.external_data_size() > 0)
      return FSDPC_ERROR(kUnimplemented, "'", sourceModel, "': initializer '", name,
                         "' is stored in external data; --save-onnx writes data inline only");
    tensor.clear_float_data();
    tensor.set_raw_data(array.bytes.data(), array.bytes.size()); // f32, little-endian as the host
  }
  std::string out;
  if (!model.SerializeToString(&out))
    return FSDPC_ERROR(kInternal, "cannot serialize the trained model");
  return writeFileAtomically(outputModel, [&](FILE *file) { return writeBytes(file, out.data(), out.size(), outputModel); });
}

} // namespace fsdpc::runtime
