//===- OnnxExport.cpp - Trained parameters back into an ONNX model --------===//
#include "fsdpc/runtime/OnnxExport.h"

#include "fsdpc/runtime/AtomicFile.h"
#include "onnx_initializers.pb.h"

#include <map>

namespace fsdpc::runtime {

namespace {

void setData(onnx_file::Tensor &tensor, const HostArray &array) {
  tensor.clear_float_data();
  tensor.set_raw_data(array.bytes.data(), array.bytes.size()); // f32, little-endian as the host
}

} // namespace

Status writeTrainedOnnx(const std::string &sourceModel, const NamedArrays &parameters,
                        const google::protobuf::RepeatedPtrField<plan::InitializerRewrite> &rewrites,
                        const std::string &outputModel) {
  StatusOr<std::string> bytes = readWholeFile(sourceModel);
  if (!bytes.isOk())
    return FSDPC_ERROR(kNotFound, "--save-onnx needs the model the plan was compiled from: ", bytes.status().message());
  onnx_file::Model model;
  if (!model.ParseFromString(*bytes))
    return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "' is not an ONNX model");
  onnx_file::Graph &graph = *model.mutable_graph();
  auto initializer = [&](const std::string &name) -> onnx_file::Tensor * {
    for (onnx_file::Tensor &tensor : *graph.mutable_initializer())
      if (tensor.name() == name)
        return &tensor;
    return nullptr;
  };
  auto checkFits = [&](const onnx_file::Tensor &tensor, const std::string &name, const std::vector<int64_t> &shape,
                       const HostArray &array) -> Status {
    const std::vector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
    if (array.dtype != plan::F32 || tensor.data_type() != 1 || dims != shape)
      return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "': initializer '", name,
                         "' is not an f32 tensor of the trained parameter's shape");
    if (tensor.data_location() == 1 || tensor.external_data_size() > 0)
      return FSDPC_ERROR(kUnimplemented, "'", sourceModel, "': initializer '", name,
                         "' is stored in external data; --save-onnx writes data inline only");
    return Status::ok();
  };
  std::map<std::string, const plan::InitializerRewrite *> identityCopies;
  for (const plan::InitializerRewrite &rewrite : rewrites)
    if (rewrite.kind() == "identity_copy")
      identityCopies[rewrite.name()] = &rewrite;
  std::map<std::string, const HostArray *> trained;
  for (const auto &[name, array] : parameters) {
    trained[name] = &array;
    if (onnx_file::Tensor *tensor = initializer(name)) {
      FSDPC_RETURN_IF_ERROR(checkFits(*tensor, name, array.shape, array));
      setData(*tensor, array);
      continue;
    }
    // Identity(shared) in the file: the parameter takes the Identity's place.
    auto copy = identityCopies.find(name);
    if (copy == identityCopies.end())
      return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "' has no initializer '", name,
                         "' for the trained parameter of that name");
    const onnx_file::Tensor *shared = initializer(copy->second->source());
    int node = -1;
    for (int n = 0; n < graph.node_size(); ++n)
      if (graph.node(n).op_type() == "Identity" && graph.node(n).output_size() == 1 && graph.node(n).output(0) == name)
        node = n;
    if (!shared || node < 0)
      return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "' has no Identity of '", copy->second->source(),
                         "' making '", name, "', as it had when the plan was compiled");
    onnx_file::Tensor own = *shared;
    own.set_name(name);
    FSDPC_RETURN_IF_ERROR(checkFits(own, name, array.shape, array));
    setData(own, array);
    graph.mutable_node()->DeleteSubrange(node, 1);
    *graph.add_initializer() = std::move(own);
  }
  // Transposed copies of tied weights: the trained weight, transposed.
  for (const plan::InitializerRewrite &rewrite : rewrites) {
    if (rewrite.kind() != "transposed_tie")
      continue;
    auto weight = trained.find(rewrite.source());
    onnx_file::Tensor *copy = initializer(rewrite.name());
    if (weight == trained.end() || !copy || weight->second->shape.size() != 2)
      return FSDPC_ERROR(kInvalidArgument, "'", sourceModel, "': cannot write '", rewrite.name(),
                         "' back as the transpose of the trained '", rewrite.source(), "'");
    const HostArray transposed = transposed2d(*weight->second);
    FSDPC_RETURN_IF_ERROR(checkFits(*copy, rewrite.name(), transposed.shape, transposed));
    setData(*copy, transposed);
  }
  std::string out;
  if (!model.SerializeToString(&out))
    return FSDPC_ERROR(kInternal, "cannot serialize the trained model");
  return writeFileAtomically(outputModel, [&](FILE *file) { return writeBytes(file, out.data(), out.size(), outputModel); });
}

} // namespace fsdpc::runtime
