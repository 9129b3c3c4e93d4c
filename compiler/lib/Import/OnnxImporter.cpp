//===- OnnxImporter.cpp - ONNX to the graph dialect -----------------------===//
//
// Thin on purpose: load, check and shape-infer with libonnx, make @forward's
// arguments from the graph inputs and float initializers, then hand every
// node to the pattern registered for its op type and opset
// (OnnxOpPatterns.cpp). ONNX node names become MLIR locations.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Import/OnnxImporter.h"

#include "fsdpc/runtime/Float16.h"

#include "DynamoExport.h"
#include "ImportContext.h"
#include "MaskedRowSelection.h"
#include "NewerOnnxSchemas.h"
#include "SinusoidalTable.h"
#include "StaticBatch.h"
#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

#include "onnx/checker.h"
#include "onnx/shape_inference/implementation.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

//===----------------------------------------------------------------------===//
// NodeImporter
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *NodeImporter::attribute(StringRef name) const {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t NodeImporter::intAttr(StringRef name, int64_t fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->i() : fallback;
}

float NodeImporter::floatAttr(StringRef name, float fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->f() : fallback;
}

std::string NodeImporter::stringAttr(StringRef name, StringRef fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->s() : fallback.str();
}

std::optional<SmallVector<int64_t>> NodeImporter::intsAttr(StringRef name) const {
  const onnx::AttributeProto *attr = attribute(name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

void NodeImporter::setFoldedOutput(int i, DenseElementsAttr value) {
  if (!wantsOutput(i))
    return;
  values_[node.output(i)] = graph::ConstantOp::create(builder, loc, value.getType(), value);
  constants_[node.output(i)] = value;
}

LogicalResult NodeImporter::fail(const Twine &message) {
  error_ = ("node '" + node.name() + "' (" + node.op_type() + "): " + message).str();
  return failure();
}

//===----------------------------------------------------------------------===//
// Tensor data
//===----------------------------------------------------------------------===//

namespace {

std::string elementTypeName(int32_t type) {
  return onnx::TensorProto_DataType_IsValid(type) ? onnx::TensorProto_DataType_Name(type) : std::to_string(type);
}

std::string firstLine(const std::string &text) { return text.substr(0, text.find('\n')); }

} // namespace

namespace {

/// A non-negative decimal number, all of `text`.
std::optional<int64_t> parseSize(const std::string &text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    return std::nullopt;
  return value;
}

/// Where the external data of `tensor` lies: a regular file inside the
/// model's folder (no absolute path, no `..`, no symlink out of it), and a
/// byte range inside that file of exactly `needed` bytes. Plans and models
/// come from other people, so nothing outside the model's folder is read.
bool locateExternalData(const onnx::TensorProto &tensor, const std::string &baseDir, int64_t needed,
                        std::string &file, int64_t &offset, std::string &error) {
  namespace fs = std::filesystem;
  std::string location, offsetText, lengthText;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offsetText = entry.value();
    else if (entry.key() == "length")
      lengthText = entry.value();
  }
  const std::string what = "external data of tensor '" + tensor.name() + "'";
  fs::path relative(location);
  if (location.empty() || relative.is_absolute() ||
      std::any_of(relative.begin(), relative.end(), [](const fs::path &part) { return part == ".."; })) {
    error = what + " names '" + location + "', which is not a path inside the model's folder";
    return false;
  }
  std::error_code ec;
  const fs::path base = fs::canonical(baseDir.empty() ? "." : baseDir, ec);
  const fs::path resolved = ec ? fs::path() : fs::weakly_canonical(base / relative, ec);
  auto [baseEnd, inside] = std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
  if (ec || baseEnd != base.end() || inside == resolved.end()) {
    error = what + " '" + location + "' resolves outside the model's folder";
    return false;
  }
  file = resolved.string();
  if (!fs::is_regular_file(resolved, ec)) {
    error = what + " '" + location + "' is not a regular file";
    return false;
  }
  const int64_t size = static_cast<int64_t>(fs::file_size(resolved, ec));
  std::optional<int64_t> start = offsetText.empty() ? std::optional<int64_t>(0) : parseSize(offsetText);
  std::optional<int64_t> length = lengthText.empty() ? std::optional<int64_t>(needed) : parseSize(lengthText);
  if (ec || !start || !length) {
    error = what + " has offset '" + offsetText + "' and length '" + lengthText + "', not byte counts";
    return false;
  }
  if (*length != needed) {
    error = what + " has length " + std::to_string(*length) + "; its shape needs " + std::to_string(needed) + " bytes";
    return false;
  }
  if (*start > size || needed > size - *start) {
    error = what + " in '" + location + "' is truncated: bytes " + std::to_string(*start) + " to " +
            std::to_string(*start + needed) + " of a file of " + std::to_string(size);
    return false;
  }
  offset = *start;
  return true;
}

/// The element count and element size `tensor` claims, checked: no
/// negative dims, no count past what any file could hold, a supported type.
bool tensorLayout(const onnx::TensorProto &tensor, int64_t &count, size_t &elementBytes, std::string &error) {
  constexpr int64_t kMaxElements = int64_t(1) << 56;
  count = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0) {
      error = "tensor '" + tensor.name() + "' has a negative dimension " + std::to_string(d);
      return false;
    }
    if (d != 0 && count > kMaxElements / d) {
      error = "tensor '" + tensor.name() + "' claims more than 2^56 elements";
      return false;
    }
    count *= d;
  }
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    elementBytes = 4;
    return true;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    elementBytes = 8;
    return true;
  case onnx::TensorProto::BOOL:
    elementBytes = 1;
    return true;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    elementBytes = 2;
    return true;
  default:
    error = "tensor '" + tensor.name() + "' has element type " + elementTypeName(tensor.data_type()) +
            "; supported are FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32 and BOOL";
    return false;
  }
}

} // namespace

/// Whether `tensor` holds exactly the bytes (or typed values) its dims
/// claim. libonnx's shape inference reads constants' data without checking
/// (a Constant whose raw data is cut short crashed it), so every tensor of
/// the model is checked before libonnx sees it.
static bool checkTensorBytes(const onnx::TensorProto &tensor, int64_t count, size_t elementBytes,
                             std::string &error) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return true; // inlined (and so checked) by inlineExternalData
  const int64_t needed = count * static_cast<int64_t>(elementBytes);
  if (tensor.has_raw_data()) {
    if (static_cast<int64_t>(tensor.raw_data().size()) != needed) {
      error = "tensor '" + tensor.name() + "' holds " + std::to_string(tensor.raw_data().size()) +
              " bytes, its shape needs " + std::to_string(needed);
      return false;
    }
    return true;
  }
  const int32_t type = tensor.data_type();
  const int64_t available = type == onnx::TensorProto::FLOAT    ? tensor.float_data_size()
                            : type == onnx::TensorProto::DOUBLE ? tensor.double_data_size()
                            : type == onnx::TensorProto::INT64  ? tensor.int64_data_size()
                                                                : tensor.int32_data_size();
  if (available != count) {
    error = "tensor '" + tensor.name() + "' holds " + std::to_string(available) + " values, its shape needs " +
            std::to_string(count);
    return false;
  }
  return true;
}

/// checkTensorBytes for a tensor of a type fsdpc reads; types it does not
/// read are refused where they are used (a string Constant nothing reads
/// does no harm).
static bool checkTensorData(const onnx::TensorProto &tensor, std::string &error) {
  const int32_t kind = tensor.data_type();
  if (!isOnnxFloatType(kind) && kind != onnx::TensorProto::INT64 && kind != onnx::TensorProto::INT32 &&
      kind != onnx::TensorProto::BOOL)
    return true;
  int64_t count;
  size_t elementBytes;
  return tensorLayout(tensor, count, elementBytes, error) && checkTensorBytes(tensor, count, elementBytes, error);
}

bool fsdpc::import::inlineExternalData(onnx::TensorProto &tensor, const std::string &baseDir, std::string &error) {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
    return true;
  int64_t count, offset = 0;
  size_t elementBytes;
  std::string file;
  if (!tensorLayout(tensor, count, elementBytes, error))
    return false;
  const int64_t needed = count * static_cast<int64_t>(elementBytes);
  if (!locateExternalData(tensor, baseDir, needed, file, offset, error))
    return false;
  std::string bytes(needed, '\0');
  std::ifstream in(file, std::ios::binary);
  in.seekg(offset);
  in.read(bytes.data(), needed);
  if (!in) {
    error = "external data of tensor '" + tensor.name() + "' in '" + file + "' cannot be read";
    return false;
  }
  tensor.set_raw_data(std::move(bytes));
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto::DEFAULT);
  return true;
}

/// Reads the elements of `tensor` as f32 (`floats`) or i64 (`ints`). The
/// dims are checked, and the bytes they claim found, before anything is
/// allocated: a model is untrusted input.
bool fsdpc::import::readTensorElements(const onnx::TensorProto &tensor, const std::string &baseDir, std::vector<float> *floats,
                        std::vector<int64_t> *ints, std::string &error) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    onnx::TensorProto inlined = tensor;
    return inlineExternalData(inlined, baseDir, error) && readTensorElements(inlined, baseDir, floats, ints, error);
  }
  // The type (refused here when fsdpc does not read it), the dims, and as
  // many bytes or values as they claim.
  int64_t count;
  size_t elementBytes;
  if (!tensorLayout(tensor, count, elementBytes, error) || !checkTensorBytes(tensor, count, elementBytes, error))
    return false;
  const int32_t type = tensor.data_type();
  bool isFloat = isOnnxFloatType(type);
  // bf16 and f16 widen to f32 exactly: parameters train from f32 masters
  // (--mixed-precision computes in bf16 again).
  auto narrowFloat = [type](uint16_t bits) {
    return type == onnx::TensorProto::BFLOAT16 ? fsdpc::runtime::bf16ToFloat(bits)
                                               : fsdpc::runtime::halfToFloat(bits);
  };
  const std::string *raw = tensor.has_raw_data() ? &tensor.raw_data() : nullptr;
  if (floats)
    floats->resize(count);
  if (ints)
    ints->resize(count);
  auto store = [&](int64_t i, double f, int64_t n) {
    if (floats)
      (*floats)[i] = static_cast<float>(isFloat ? f : static_cast<double>(n));
    if (ints)
      (*ints)[i] = isFloat ? static_cast<int64_t>(f) : n;
  };

  if (raw) {
    const char *data = raw->data();
    for (int64_t i = 0; i < count; ++i) {
      const char *p = data + i * elementBytes;
      switch (type) {
      case onnx::TensorProto::FLOAT: {
        float v;
        std::memcpy(&v, p, 4);
        store(i, v, 0);
        break;
      }
      case onnx::TensorProto::DOUBLE: {
        double v;
        std::memcpy(&v, p, 8);
        store(i, v, 0);
        break;
      }
      case onnx::TensorProto::INT32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        store(i, 0, v);
        break;
      }
      case onnx::TensorProto::INT64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        store(i, 0, v);
        break;
      }
      case onnx::TensorProto::FLOAT16:
      case onnx::TensorProto::BFLOAT16: {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        store(i, narrowFloat(bits), 0);
        break;
      }
      default:
        store(i, 0, *p != 0);
      }
    }
    return true;
  }

  for (int64_t i = 0; i < count; ++i) {
    switch (type) {
    case onnx::TensorProto::FLOAT:
      store(i, tensor.float_data(i), 0);
      break;
    case onnx::TensorProto::DOUBLE:
      store(i, tensor.double_data(i), 0);
      break;
    case onnx::TensorProto::INT64:
      store(i, 0, tensor.int64_data(i));
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: // ONNX keeps their bits in int32_data
      store(i, narrowFloat(static_cast<uint16_t>(tensor.int32_data(i))), 0);
      break;
    default:
      store(i, 0, tensor.int32_data(i));
    }
  }
  return true;
}

/// The node's name, or "<op>_<index>" for an unnamed node, as used in IR
/// locations and errors.
std::string fsdpc::import::nodeName(const onnx::NodeProto &node, size_t index) {
  return node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
}

const onnx::AttributeProto *fsdpc::import::findAttribute(const onnx::NodeProto &node, llvm::StringRef name) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

std::optional<IntegerLiteral> fsdpc::import::integerLiteral(const onnx::TensorProto &tensor,
                                                            const std::string &baseDir) {
  IntegerLiteral literal;
  std::string error;
  if ((tensor.data_type() != onnx::TensorProto::INT64 && tensor.data_type() != onnx::TensorProto::INT32) ||
      !readTensorElements(tensor, baseDir, nullptr, &literal.values, error))
    return std::nullopt;
  literal.rank = tensor.dims_size();
  return literal;
}

std::optional<IntegerLiteral> fsdpc::import::integerLiteral(const onnx::NodeProto &constant,
                                                            const std::string &baseDir) {
  if (constant.op_type() != "Constant" || constant.attribute_size() != 1)
    return std::nullopt;
  const onnx::AttributeProto &attr = constant.attribute(0);
  if (attr.name() == "value_int")
    return IntegerLiteral{{attr.i()}, 0};
  if (attr.name() == "value_ints")
    return IntegerLiteral{{attr.ints().begin(), attr.ints().end()}, 1};
  if (attr.name() != "value")
    return std::nullopt;
  return integerLiteral(attr.t(), baseDir);
}

DenseElementsAttr fsdpc::import::tensorProtoToAttr(const onnx::TensorProto &tensor, const std::string &baseDir,
                                                   Builder &builder, std::string &error) {
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  if (isOnnxFloatType(tensor.data_type())) {
    std::vector<float> values;
    if (!readTensorElements(tensor, baseDir, &values, nullptr, error))
      return {};
    return DenseElementsAttr::get(RankedTensorType::get(shape, builder.getF32Type()), ArrayRef<float>(values));
  }
  std::vector<int64_t> values;
  if (!readTensorElements(tensor, baseDir, nullptr, &values, error))
    return {};
  return DenseElementsAttr::get(RankedTensorType::get(shape, builder.getI64Type()), ArrayRef<int64_t>(values));
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

namespace {

class ModelImporter {
public:
  ModelImporter(MLIRContext &context, const std::string &path, const ImportOptions &options, std::string &error)
      : context_(context), path_(path), options_(options), error_(error), builder_(&context) {}

  std::optional<ImportedModel> run();

private:
  bool fail(const std::string &message) {
    error_ = path_ + ": " + message;
    return false;
  }
  bool load();
  bool fixNamedDimensions();
  bool fixBatchDimension();
  bool checkAndInferShapes();
  bool checkOpsSupported();
  bool undoExporterParameterRewrites();
  std::vector<std::array<std::string, 3>> initializerRewrites_; // kind, name, source
  bool buildForward();
  bool checkTensorSizes(ModuleOp module);
  std::optional<Type> tensorType(const onnx::ValueInfoProto &info);

  MLIRContext &context_;
  std::string path_;
  const ImportOptions &options_;
  std::string &error_;
  OpBuilder builder_;
  onnx::ModelProto model_;
  int64_t opset_ = 0;
  std::string baseDir_;      // where external data is found: the model's folder
  DynamoSignature dynamo_;   // what a dynamo export recorded of the torch program
  int64_t staticBatch_ = 0; // the batch the export fixed, if it did
  bool rebatched_ = false;  // the static batch was re-derived for another one
  RebatchedShapes rebatchedShapes_;
  ImportedModel result_;
};

/// Removes the elements of a protobuf list for which `remove` holds, in place.
template <typename T, typename Pred> static void eraseIf(google::protobuf::RepeatedPtrField<T> *list, Pred remove) {
  list->erase(std::remove_if(list->begin(), list->end(), remove), list->end());
}

/// Empty integer lists that the dynamo exporter writes without its
/// optimizer, and libonnx 1.12 refuses: a Constant whose `value_ints` is
/// empty (its checker wants the field present), and a Shape whose `end` is
/// at or before its `start`. Both become a Constant int64 tensor of 0
/// elements, the value they have. Such a list in a Concat of a shape (torch's
/// repeat_interleave builds [*shape[:0], -1, *shape[1:]]) makes libonnx's
/// data propagation fail ("axis must be in [-rank, rank-1]"), and adds
/// nothing: it is dropped from the Concat's inputs.
/// The names of the graph's initializers (which some writers list among
/// its inputs too).
static llvm::StringSet<> initializerNames(const onnx::GraphProto &graph) {
  llvm::StringSet<> names;
  for (const onnx::TensorProto &init : graph.initializer())
    names.insert(init.name());
  return names;
}

/// Each dimension of `info` named in `sizes` gets that size.
static void sizeNamedDimensions(onnx::ValueInfoProto &info, const llvm::StringMap<int64_t> &sizes) {
  if (!info.type().has_tensor_type())
    return;
  for (auto &dim : *info.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
    if (dim.has_dim_param())
      if (auto found = sizes.find(dim.dim_param()); found != sizes.end())
        dim.set_dim_value(found->second);
}

/// A shape as the messages write it: 16x1024x768.
static std::string shapeText(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  return text;
}

static void removeEmptyIntegerLists(onnx::GraphProto &graph) {
  auto emptyTensor = [](onnx::NodeProto &node) {
    std::string output = node.output(0), name = node.name();
    node.Clear();
    node.set_op_type("Constant");
    node.set_name(name);
    node.add_output(output);
    onnx::AttributeProto *value = node.add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    value->mutable_t()->add_dims(0);
  };
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.output_size() != 1 || !node.domain().empty())
      continue;
    if (node.op_type() == "Constant" && node.attribute_size() == 1 && node.attribute(0).name() == "value_ints" &&
        node.attribute(0).ints_size() == 0) {
      emptyTensor(node);
      continue;
    }
    if (node.op_type() != "Shape")
      continue;
    std::optional<int64_t> start, end;
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.name() == "start")
        start = attr.i();
      if (attr.name() == "end")
        end = attr.i();
    }
    // Only where the rank does not matter: both ends of one sign.
    if (end && ((*end >= 0 && start.value_or(0) >= 0) || (*end < 0 && start.value_or(0) < 0)) &&
        *end <= start.value_or(0))
      emptyTensor(node);
  }
  std::set<std::string> empty;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Constant" && node.attribute_size() == 1 && node.attribute(0).name() == "value" &&
        node.attribute(0).t().dims_size() == 1 && node.attribute(0).t().dims(0) == 0)
      empty.insert(node.output(0));
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() != "Concat" || !node.domain().empty())
      continue;
    auto *inputs = node.mutable_input();
    auto kept = std::stable_partition(inputs->begin(), inputs->end(),
                                      [&](const std::string &input) { return !empty.count(input); });
    if (kept != inputs->begin())
      inputs->erase(kept, inputs->end());
  }
}

/// Annotations of intermediate values that shape inference derives better,
/// and that libonnx 1.12 takes for facts. With a symbolic batch the dynamo
/// exporter builds an expand's size list [batch, -1] from a Reshape and a
/// `value_ints` Constant, annotates that Constant as a scalar (libonnx
/// reports the conflict with its value) and the Reshape with an element
/// type and no shape, which its data propagation reads as rank 0 ("axis
/// must be in [-rank, rank-1]" at the Concat). Both kinds are dropped:
/// every Constant output's, and every one that gives no shape.
static void dropMisleadingAnnotations(onnx::GraphProto &graph) {
  std::set<std::string> constants;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Constant" && node.domain().empty())
      constants.insert(node.output().begin(), node.output().end());
  eraseIf(graph.mutable_value_info(), [&](const onnx::ValueInfoProto &info) {
    return constants.count(info.name()) || (info.type().has_tensor_type() && !info.type().tensor_type().has_shape());
  });
}

bool ModelImporter::load() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    error_ = "cannot open '" + path_ + "'";
    return false;
  }
  if (!model_.ParseFromIstream(&in))
    return fail("not an ONNX model (protobuf parse failed)");
  for (const onnx::OperatorSetIdProto &opset : model_.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx")
      opset_ = opset.version();
  if (opset_ == 0)
    return fail("the model imports no version of the default ONNX opset");
  dynamo_ = readDynamoSignature(model_);
  removeEmptyIntegerLists(*model_.mutable_graph());
  dropMisleadingAnnotations(*model_.mutable_graph());
  baseDir_ = llvm::sys::path::parent_path(path_).str();
  if (baseDir_.empty())
    baseDir_ = ".";
  // External data is checked and read once, here, so that the checker and
  // everything after see ordinary tensors and nothing else opens a file the
  // model names.
  std::string error;
  for (onnx::TensorProto &init : *model_.mutable_graph()->mutable_initializer())
    if (!inlineExternalData(init, baseDir_, error))
      return fail(error);
  for (onnx::NodeProto &node : *model_.mutable_graph()->mutable_node())
    for (onnx::AttributeProto &attr : *node.mutable_attribute())
      if (attr.has_t() && !inlineExternalData(*attr.mutable_t(), baseDir_, error))
        return fail(error);
  for (const onnx::TensorProto &init : model_.graph().initializer())
    if (!checkTensorData(init, error))
      return fail(error);
  for (auto [index, node] : llvm::enumerate(model_.graph().node()))
    for (const onnx::AttributeProto &attr : node.attribute())
      if (attr.has_t() && !checkTensorData(attr.t(), error))
        return fail("node '" + nodeName(node, index) + "' (" + node.op_type() + "): attribute '" + attr.name() +
                    "': " + error);
  return true;
}

/// Exports name their dynamic axes (`dynamic_axes={'input_ids': {0:
/// 'batch_size', 1: 'sequence_length'}}`, Optimum's exports, torch.export's
/// s0, s1): the plan is static, so each symbolic dimension besides the batch
/// gets the size the user names it with.
bool ModelImporter::fixNamedDimensions() {
  // Optimum's and transformers' name for the key/value cache that a
  // generation export takes back each step: said first, since its symbolic
  // past length is no size to ask for.
  for (const onnx::ValueInfoProto &input : model_.graph().input())
    if (llvm::StringRef(input.name()).starts_with("past_key_values"))
      return fail("graph input '" + input.name() + "' is a key/value cache: the export is for generation " +
                  "(Optimum's text-generation-with-past, or use_cache=True); export without the cache to train " +
                  "(optimum-cli export onnx --task text-generation, or use_cache=False)");
  if (options_.namedDimensions.empty())
    return true;
  const llvm::StringSet<> initializers = initializerNames(model_.graph());
  llvm::StringMap<int64_t> sizes;
  for (const auto &[name, size] : options_.namedDimensions)
    sizes[name] = size;
  // The names the data inputs give their dimensions after the batch, in
  // order, for the error below.
  std::vector<std::string> symbols;
  for (const onnx::ValueInfoProto &input : model_.graph().input()) {
    if (initializers.contains(input.name()) || !input.type().has_tensor_type())
      continue;
    const auto &shape = input.type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d) {
      if (!shape.dim(d).has_dim_param())
        continue;
      const std::string &symbol = shape.dim(d).dim_param();
      if (d == 0 && sizes.contains(symbol))
        return fail("--dim " + symbol + ": '" + symbol + "' is the batch dimension of graph input '" + input.name() +
                    "'; pass --batch-size (the global batch, which fsdpc splits over the ranks)");
      if (d > 0 && !llvm::is_contained(symbols, symbol))
        symbols.push_back(symbol);
    }
  }
  for (const auto &[name, size] : options_.namedDimensions)
    if (!llvm::is_contained(symbols, name))
      return fail("--dim " + name + ": no graph input has a dimension named '" + name + "'" +
                  (symbols.empty() ? std::string(" (none has a named one besides the batch)")
                                   : " (their named dimensions besides the batch: " + llvm::join(symbols, ", ") + ")"));
  for (onnx::ValueInfoProto &input : *model_.mutable_graph()->mutable_input())
    sizeNamedDimensions(input, sizes);
  for (onnx::ValueInfoProto &output : *model_.mutable_graph()->mutable_output())
    sizeNamedDimensions(output, sizes);
  for (onnx::ValueInfoProto &info : *model_.mutable_graph()->mutable_value_info())
    sizeNamedDimensions(info, sizes);
  return true;
}

bool ModelImporter::fixBatchDimension() {
  const llvm::StringSet<> initializers = initializerNames(model_.graph());
  // The batch the export fixed, if it did: the static leading dimension of
  // the first data input that has one.
  std::string firstInput, symbolicInput, symbolicName;
  for (const onnx::ValueInfoProto &input : model_.graph().input()) {
    if (initializers.contains(input.name()))
      continue;
    if (!input.type().has_tensor_type())
      return fail("graph input '" + input.name() + "' is not a tensor");
    const auto &shape = input.type().tensor_type().shape();
    for (int d = 1; d < shape.dim_size(); ++d) {
      if (shape.dim(d).has_dim_value())
        continue;
      if (!shape.dim(d).has_dim_param())
        return fail("graph input '" + input.name() + "' has an unnamed symbolic dimension at position " +
                    std::to_string(d) + "; fsdpc sizes symbolic dimensions by name (--dim NAME=SIZE): export it " +
                    "with a name or a static size");
      const std::string &symbol = shape.dim(d).dim_param();
      return fail("graph input '" + input.name() + "' has a symbolic dimension '" + symbol + "' at position " +
                  std::to_string(d) + "; pass --dim " + symbol + "=SIZE (the plan is static; only the batch " +
                  "dimension takes --batch-size)");
    }
    if (shape.dim_size() == 0)
      continue;
    if (firstInput.empty())
      firstInput = input.name();
    if (shape.dim(0).has_dim_value() && staticBatch_ == 0)
      staticBatch_ = shape.dim(0).dim_value();
    if (!shape.dim(0).has_dim_value() && symbolicInput.empty()) {
      symbolicInput = input.name();
      symbolicName = shape.dim(0).has_dim_param() ? shape.dim(0).dim_param() : "?";
    }
  }
  // Writers omit the shape of scalar outputs (a loss), which the checker
  // wants present: an empty shape is a scalar's.
  for (onnx::ValueInfoProto &output : *model_.mutable_graph()->mutable_output())
    if (output.type().has_tensor_type())
      output.mutable_type()->mutable_tensor_type()->mutable_shape();
  const int64_t ranks = std::max<int64_t>(options_.worldSize, 1);
  const int64_t globalBatch = options_.batchSize > 0 ? options_.batchSize : staticBatch_;
  if (globalBatch <= 0) {
    if (!symbolicInput.empty())
      return fail("graph input '" + symbolicInput + "' has a symbolic batch dimension '" + symbolicName +
                  "'; pass --batch-size B");
    return true; // no batched input
  }
  if (globalBatch % ranks != 0)
    return fail("the global batch " + std::to_string(globalBatch) + " of input '" + firstInput +
                "' does not divide by --world-size " + std::to_string(ranks));
  const int64_t localBatch = globalBatch / ranks;

  // A static export computes another batch once its literals say so.
  if (staticBatch_ > 0) {
    std::string error;
    rebatched_ = localBatch != staticBatch_;
    if (!rebatchStaticExport(model_, baseDir_, staticBatch_, localBatch, rebatchedShapes_, error))
      return fail(error);
    return true;
  }

  // A symbolic batch: the inputs, and outputs and annotated values that name
  // the symbol, get the per-rank batch.
  llvm::StringMap<int64_t> batchSymbols;
  for (onnx::ValueInfoProto &input : *model_.mutable_graph()->mutable_input()) {
    if (initializers.contains(input.name()))
      continue;
    auto *shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() == 0 || shape->dim(0).has_dim_value())
      continue;
    if (shape->dim(0).has_dim_param())
      batchSymbols[shape->dim(0).dim_param()] = localBatch;
    shape->mutable_dim(0)->set_dim_value(localBatch);
  }
  for (onnx::ValueInfoProto &output : *model_.mutable_graph()->mutable_output())
    sizeNamedDimensions(output, batchSymbols);
  for (onnx::ValueInfoProto &info : *model_.mutable_graph()->mutable_value_info())
    sizeNamedDimensions(info, batchSymbols);
  return true;
}

} // namespace

bool fsdpc::import::inferOnnxShapes(onnx::ModelProto &model, std::string &error) {
  registerNewerOnnxSchemas();
  int64_t opset = 0;
  for (const onnx::OperatorSetIdProto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  if (opset > kNewestOnnxOpset) {
    error = "imports ONNX opset " + std::to_string(opset) + "; fsdpc reads opsets up to " +
            std::to_string(kNewestOnnxOpset) + " (export with opset_version=" + std::to_string(kNewestOnnxOpset) +
            " or lower)";
    return false;
  }
  const int64_t irVersion = model.ir_version();
  if (irVersion > kNewestOnnxIrVersion) {
    error = "has ONNX IR version " + std::to_string(irVersion) + "; fsdpc reads IR versions up to " +
            std::to_string(kNewestOnnxIrVersion);
    return false;
  }
  // IR 9 and 10 only add element types (float8, int4) that fsdpc rejects
  // anyway, so the checker of IR 8 judges the rest.
  model.set_ir_version(std::min<int64_t>(irVersion, onnx::Version::IR_VERSION));
  llvm::scope_exit restoreIrVersion([&] { model.set_ir_version(irVersion); });
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    error = "fails the ONNX checker: " + firstLine(e.what());
    return false;
  }
  // Without data propagation first: libonnx 1.12's propagation through
  // Shape dereferences the shape of its input even where inference failed
  // to give it one (operands that do not broadcast), and crashes. The
  // first pass reports such a graph as an error instead.
  for (bool propagate : {false, true}) {
    try {
      onnx::ShapeInferenceOptions inference(/*check_type=*/true, /*error_mode=*/1, propagate);
      onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), inference);
    } catch (const std::exception &e) {
      error = "ONNX shape inference failed: " + firstLine(e.what());
      return false;
    }
  }
  return true;
}

namespace {

bool ModelImporter::checkAndInferShapes() {
  std::string error;
  if (!inferOnnxShapes(model_, error) || (rebatched_ && !checkRebatchedShapes(model_, rebatchedShapes_, error)))
    return fail(error);
  return true;
}

bool ModelImporter::checkOpsSupported() {
  // All unsupported ops in one error, so a user sees the whole list at once.
  std::map<std::string, std::vector<std::string>> unsupported;
  std::vector<std::string> toDouble; // Casts computed in float32
  for (auto [index, node] : llvm::enumerate(model_.graph().node())) {
    if (node.op_type() == "Cast")
      for (const onnx::AttributeProto &attr : node.attribute())
        if (attr.name() == "to" && attr.i() == onnx::TensorProto::DOUBLE)
          toDouble.push_back(nodeName(node, index));
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (!defaultDomain || !lookupOpPattern(node.op_type(), opset_)) {
      std::string op = defaultDomain ? node.op_type() : node.domain() + "." + node.op_type();
      unsupported[op].push_back(nodeName(node, index));
    }
  }
  if (!toDouble.empty())
    result_.warnings.push_back(path_ + ": " + std::to_string(toDouble.size()) + " Cast node" +
                               (toDouble.size() > 1 ? "s" : "") + " to float64 ('" + toDouble.front() +
                               (toDouble.size() > 1 ? "', ...) compute" : "') computes") +
                               " in float32: fsdpc has no float64 tensors");
  if (unsupported.empty())
    return true;
  // NonZero's one compiled form (MaskedRowSelection.cpp) did not match.
  const std::string hint = unsupported.count("NonZero")
                               ? "; NonZero compiles only as the boolean row selection x[mask].view(B, -1, ...)[:, j]"
                               : "";
  std::string opset = std::to_string(opset_);
  if (unsupported.size() == 1 && unsupported.begin()->second.size() == 1)
    return fail("unsupported ONNX op '" + unsupported.begin()->first + "' (node '" +
                unsupported.begin()->second.front() + "', opset " + opset + ")" + hint);
  std::string message = "unsupported ONNX ops (opset " + opset + "):";
  bool firstOp = true;
  for (const auto &[op, nodes] : unsupported) {
    message += (firstOp ? " '" : ", '") + op + "' (node" + (nodes.size() > 1 ? "s" : "");
    for (size_t i = 0; i < nodes.size(); ++i)
      message += (i ? ", '" : " '") + nodes[i] + "'";
    message += ")";
    firstOp = false;
  }
  return fail(message + hint);
}

std::optional<Type> ModelImporter::tensorType(const onnx::ValueInfoProto &info) {
  const auto &tensor = info.type().tensor_type();
  SmallVector<int64_t> shape;
  for (const auto &dim : tensor.shape().dim())
    shape.push_back(dim.dim_value());
  Type element;
  if (isOnnxFloatType(tensor.elem_type()))
    element = builder_.getF32Type(); // bf16 and f16 inputs widen exactly to f32
  else if (tensor.elem_type() == onnx::TensorProto::INT64 || tensor.elem_type() == onnx::TensorProto::INT32 ||
           tensor.elem_type() == onnx::TensorProto::BOOL)
    element = builder_.getI64Type(); // integers and bools are computed as i64
  else {
    fail("graph input '" + info.name() + "' has element type " + elementTypeName(tensor.elem_type()) +
         "; fsdpc takes FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32 and BOOL inputs");
    return std::nullopt;
  }
  return RankedTensorType::get(shape, element);
}

/// torch.onnx.export rewrites parameters in two ways that change what
/// training means, and this undoes both before anything is built:
///
/// - It merges initializers with equal values into one, and recreates the
///   others with Identity nodes (LayerNorm weights all start as ones). Those
///   are separate parameters in the model: each Identity of a float
///   initializer becomes a parameter of its own again, named after its output,
///   with the same initial value.
/// - With constant folding, it replaces a weight used through a Transpose
///   (a tied LM head) by a transposed copy, an anonymous `onnx::` initializer.
///   Such a copy that is bit for bit the transpose of a named initializer is
///   read as a Transpose of it again, so the tie (and the sum of gradients)
///   survives.
bool ModelImporter::undoExporterParameterRewrites() {
  onnx::GraphProto &graph = *model_.mutable_graph();
  dropDowngradedSplitAttributes(graph, opset_);
  restoreBatchNormTraining(graph, opset_);
  splitMergedParameters(graph, dynamo_);
  for (const std::string &gone : parametersOptimizedAway(graph, dynamo_))
    result_.warnings.push_back(path_ + ": parameter '" + gone +
                               "' is not in the graph (the dynamo exporter's optimizer folded it away), so it does "
                               "not train; torch.onnx.export(..., optimize=False) keeps it");
  llvm::StringMap<int> floatInitializer;
  for (int i = 0; i < graph.initializer_size(); ++i)
    if (graph.initializer(i).data_type() == onnx::TensorProto::FLOAT)
      floatInitializer[graph.initializer(i).name()] = i;

  auto values = [&](const onnx::TensorProto &t, std::vector<float> &out) {
    std::string error;
    return readTensorElements(t, baseDir_, &out, nullptr, error);
  };

  // Identity(initializer) -> an initializer of its own.
  std::vector<onnx::TensorProto> copies;
  eraseIf(graph.mutable_node(), [&](const onnx::NodeProto &node) {
    if (node.op_type() != "Identity" || node.input_size() != 1 || node.output_size() != 1 ||
        !floatInitializer.count(node.input(0)))
      return false;
    onnx::TensorProto copy = graph.initializer(floatInitializer.lookup(node.input(0)));
    // Two folded copies (transposed weights) with the same random values
    // are either layers cloned with deepcopy, which train apart, or one
    // weight a model shares between layers (ALBERT), which does not: the
    // file cannot tell. Equal-valued ones (ones, zeros) are the exporter's
    // merges of separate parameters, as everywhere.
    std::vector<float> copyValues;
    if (dynamo_.isAnonymous(node.input(0)) && dynamo_.isAnonymous(node.output(0)) && values(copy, copyValues) &&
        llvm::any_of(copyValues, [&](float v) { return v != copyValues.front(); }))
      result_.warnings.push_back(path_ + ": folded initializer '" + node.output(0) + "' is an Identity of '" +
                                 node.input(0) +
                                 "' (equal values), so they train as two parameters, as layers cloned with deepcopy "
                                 "do; if the model shares one weight between them (ALBERT), export with "
                                 "do_constant_folding=False (Optimum: --no-constant-folding), which keeps the "
                                 "weight itself");
    copy.set_name(node.output(0));
    copies.push_back(std::move(copy));
    initializerRewrites_.push_back({"identity_copy", node.output(0), node.input(0)});
    return true;
  });
  for (onnx::TensorProto &copy : copies)
    *graph.add_initializer() = std::move(copy);

  // onnx::X == transpose(named Y) -> Transpose(Y).
  std::vector<std::string> tied;
  std::vector<onnx::NodeProto> transposes;
  llvm::StringMap<std::vector<float>> namedValues;
  for (const onnx::TensorProto &copy : graph.initializer()) {
    if (copy.data_type() != onnx::TensorProto::FLOAT || copy.dims_size() != 2 ||
        !dynamo_.isAnonymous(copy.name()))
      continue;
    std::vector<float> copyValues;
    if (!values(copy, copyValues))
      continue;
    for (const onnx::TensorProto &original : graph.initializer()) {
      if (original.data_type() != onnx::TensorProto::FLOAT || original.dims_size() != 2 ||
          dynamo_.isAnonymous(original.name()) || original.dims(0) != copy.dims(1) ||
          original.dims(1) != copy.dims(0))
        continue;
      // Each named candidate is read once, however many copies it is compared with.
      auto [cached, unread] = namedValues.try_emplace(original.name());
      if (unread && !values(original, cached->second))
        cached->second.clear();
      const std::vector<float> &originalValues = cached->second;
      if (originalValues.size() != copyValues.size())
        continue;
      int64_t rows = original.dims(0), cols = original.dims(1);
      bool transposed = true;
      for (int64_t r = 0; r < rows && transposed; ++r)
        for (int64_t c = 0; c < cols && transposed; ++c)
          transposed = std::memcmp(&originalValues[r * cols + c], &copyValues[c * rows + r], sizeof(float)) == 0;
      if (!transposed)
        continue;
      onnx::NodeProto node;
      node.set_op_type("Transpose");
      node.set_name("fsdpc/tie/" + copy.name());
      node.add_input(original.name());
      node.add_output(copy.name());
      transposes.push_back(std::move(node));
      tied.push_back(copy.name());
      initializerRewrites_.push_back({"transposed_tie", copy.name(), original.name()});
      break;
    }
  }
  if (!tied.empty()) {
    eraseIf(graph.mutable_initializer(), [&](const onnx::TensorProto &t) { return llvm::is_contained(tied, t.name()); });
    std::vector<onnx::NodeProto> nodes(transposes.begin(), transposes.end());
    nodes.insert(nodes.end(), graph.node().begin(), graph.node().end());
    graph.clear_node();
    for (onnx::NodeProto &node : nodes)
      *graph.add_node() = std::move(node);
    // Graph inputs that listed the removed initializers (IR < 4) go too.
    eraseIf(graph.mutable_input(), [&](const onnx::ValueInfoProto &input) { return llvm::is_contained(tied, input.name()); });
  }
  return true;
}

/// The module of each anonymous initializer (`onnx::MatMul_12`, `val_9`: a
/// constant-folded weight): the scope of the first node that reads it
/// (`/blocks.0/attn/proj/MatMul` -> `blocks.0.attn.proj`), so `--wrap
/// module:` groups it with its neighbours. Empty when that node has no scope.
static llvm::StringMap<std::string> modulesOfAnonymous(const onnx::GraphProto &graph,
                                                       const DynamoSignature &signature) {
  llvm::StringMap<std::string> modules;
  for (const onnx::NodeProto &node : graph.node()) {
    std::string module = moduleOfNode(node);
    for (const std::string &input : node.input())
      if (signature.isAnonymous(input))
        modules.try_emplace(input, module);
  }
  return modules;
}

/// The torch names the graph proves for folded Linear weights: an anonymous
/// 2-D initializer that exactly one node reads, a MatMul with it as its
/// right operand, in the scope of module `a.b` (a node `/a/b/MatMul`, or a
/// dynamo node whose scope metadata says so): nn.Linear `a.b` computes
/// x W^T, so the initializer is `a.b.weight` transposed.
static std::vector<std::pair<std::string, std::string>> torchNamesOfFolded(const onnx::GraphProto &graph,
                                                                           const DynamoSignature &signature) {
  llvm::StringMap<int> uses;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &input : node.input())
      ++uses[input];
  llvm::StringSet<> twoDimensional;
  for (const onnx::TensorProto &init : graph.initializer())
    if (init.dims_size() == 2 && init.data_type() == onnx::TensorProto::FLOAT)
      twoDimensional.insert(init.name());
  std::vector<std::pair<std::string, std::string>> names;
  llvm::StringSet<> taken;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() != "MatMul" || node.input_size() != 2)
      continue;
    std::string module = moduleOfNode(node);
    const std::string &weight = node.input(1);
    if (module.empty() || !signature.isAnonymous(weight) || !twoDimensional.contains(weight) || uses[weight] != 1)
      continue;
    std::string torchName = module + ".weight";
    if (taken.insert(torchName).second)
      names.emplace_back(weight, torchName);
  }
  return names;
}

bool ModelImporter::buildForward() {
  llvm::Regex freeze("^(" + options_.freezeRegex + ")$");
  std::string regexError;
  if (!options_.freezeRegex.empty() && !freeze.isValid(regexError))
    return fail("--freeze '" + options_.freezeRegex + "' is not a valid regex: " + regexError);

  Location fileLoc = FileLineColLoc::get(&context_, path_, 0, 0);
  result_.module = ModuleOp::create(fileLoc);
  ModuleOp module = *result_.module;
  module->setAttr(graph::kOpsetAttr, builder_.getI64IntegerAttr(opset_));
  module->setAttr(graph::kSourceAttr, builder_.getStringAttr(llvm::sys::path::filename(path_)));
  if (!initializerRewrites_.empty()) {
    SmallVector<Attribute> rewrites;
    for (const auto &[kind, name, source] : initializerRewrites_)
      rewrites.push_back(builder_.getStrArrayAttr({kind, name, source}));
    module->setAttr(graph::kInitializerRewritesAttr, builder_.getArrayAttr(rewrites));
  }
  if (auto torchNames = torchNamesOfFolded(model_.graph(), dynamo_); !torchNames.empty()) {
    SmallVector<Attribute> pairs;
    for (const auto &[param, torchName] : torchNames)
      pairs.push_back(builder_.getStrArrayAttr({param, torchName}));
    module->setAttr(graph::kTorchNamesAttr, builder_.getArrayAttr(pairs));
  }

  // Arguments: data inputs, then float initializers as parameters.
  const onnx::GraphProto &graph = model_.graph();
  const llvm::StringSet<> initializers = initializerNames(graph);
  SmallVector<Type> argTypes;
  SmallVector<std::pair<StringRef, std::string>> argRoles; // attribute name, value
  llvm::DenseMap<size_t, std::string> moduleHints;          // argument -> module
  llvm::StringMap<std::string> anonymousModules = modulesOfAnonymous(graph, dynamo_);
  const FoldedInitializers folded = constantsFoldedFromBuffers(graph, dynamo_);
  const std::set<std::string> &foldedConstants = folded.constants;
  if (!folded.unaccounted.empty() && !folded.trainedUnsure.empty()) {
    auto some = [](const std::vector<std::string> &names) {
      std::string listed;
      for (size_t i = 0; i < std::min<size_t>(names.size(), 3); ++i)
        listed += (i ? "', '" : "'") + names[i];
      return listed + (names.size() > 3 ? "', ..." : "'");
    };
    const bool several = folded.unaccounted.size() > 1, severalTrain = folded.trainedUnsure.size() > 1;
    result_.warnings.push_back(
        path_ + ": " + std::to_string(folded.unaccounted.size()) + " parameter" + (several ? "s" : "") +
        " of the torch program (" + some(folded.unaccounted) + ") " + (several ? "are" : "is") +
        " in no node of the graph (folded by the dynamo exporter's optimizer, or a tied weight's second name); as "
        "any folded initializer may hold " +
        (several ? "them" : "it") + ", " + std::to_string(folded.trainedUnsure.size()) + " that may be constant" +
        (severalTrain ? "s train" : " trains") + " (" + some(folded.trainedUnsure) +
        "); torch.onnx.export(..., optimize=False) keeps every parameter as itself");
  }
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.contains(input.name()))
      continue;
    std::optional<Type> type = tensorType(input);
    if (!type)
      return false;
    argTypes.push_back(*type);
    argRoles.emplace_back(graph::kInputAttr, input.name());
  }
  // Module buffers torch never trains: BatchNormalization's running
  // statistics (the step updates them as torch does in training), and a
  // loss's class weights (nn.CrossEntropyLoss and nn.NLLLoss register
  // `weight` as a buffer).
  llvm::StringSet<> bufferNames, settingNames;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        bufferNames.insert(node.input(i));
    if ((node.op_type() == "SoftmaxCrossEntropyLoss" || node.op_type() == "NegativeLogLikelihoodLoss") &&
        node.input_size() > 2 && !node.input(2).empty())
      bufferNames.insert(node.input(2));
    // Float settings, not weights: Resize's roi and scales, Upsample's
    // scales, OneHot's depth and values.
    if (node.op_type() == "Resize" || node.op_type() == "Upsample" || node.op_type() == "OneHot")
      for (int i = 1; i < std::min(node.input_size(), node.op_type() == "Upsample" ? 2 : 3); ++i)
        settingNames.insert(node.input(i));
  }
  std::vector<const onnx::TensorProto *> constantInitializers;
  for (const onnx::TensorProto &init : graph.initializer()) {
    if (!isOnnxFloatType(init.data_type())) {
      constantInitializers.push_back(&init);
      continue;
    }
    std::vector<float> values;
    std::string error;
    if (!readTensorElements(init, baseDir_, &values, nullptr, error))
      return fail(error);
    // A float initializer holding inf or NaN is a buffer (an additive
    // attention mask), not a parameter anyone trains: it stays a constant.
    // So is one holding torch.finfo(float).min, what Hugging Face masks
    // add; a one-element value the exporter lifted out of the code (the
    // attention scale, GELU's 0.5: the dynamo exporter writes them as
    // initializers); a buffer the torch program declared, or what the
    // exporter folded from buffers alone (rotary tables).
    const SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    bool constant = llvm::any_of(values, [](float v) { return !std::isfinite(v) || std::fabs(v) >= 1e30f; }) ||
                    (values.size() == 1 && dynamo_.isAnonymous(init.name())) || dynamo_.buffers.contains(init.name()) ||
                    foldedConstants.count(init.name()) || settingNames.contains(init.name());
    // And, said, a sinusoidal position table (Marian's, Pegasus's,
    // Whisper's encoder's), which torch keeps fixed and a TorchScript export
    // cannot say so of.
    if (!constant && import::isSinusoidalPositionTable(values, shape)) {
      result_.warnings.push_back(path_ + ": initializer '" + init.name() + "' [" + shapeText(shape) +
                                 "] is a sinusoidal position table (each column the sine or cosine of its row's "
                                 "position), kept constant as torch keeps Marian's, Pegasus's and Whisper's");
      constant = true;
    }
    if (constant) {
      constantInitializers.push_back(&init);
      continue;
    }
    argTypes.push_back(RankedTensorType::get(shape, builder_.getF32Type()));
    bool frozen = !options_.freezeRegex.empty() && freeze.match(init.name());
    // A TorchScript export writes buffers as initializers like weights. A
    // weight is random, a norm's affine [C] or [C, 1, 1] ones or zeros; a
    // row [1, N] of one value repeated is more likely a buffer (BART's and
    // Marian's final_logits_bias; BART's arrives as `onnx::Add_N`, its
    // `.to(device)` folded), which nothing in the file tells from a
    // zero-initialised weight: trained, but said.
    if (!frozen && !bufferNames.contains(init.name()) && values.size() > 1 && shape.size() == 2 && shape[0] == 1 &&
        !(dynamo_.present && dynamo_.isAnonymous(init.name())) &&
        llvm::all_of(values, [&](float v) { return v == values.front(); }) &&
        !llvm::any_of(initializerRewrites_, [&](const auto &rewrite) { return rewrite[1] == init.name(); })) {
      const float value = values.front();
      result_.warnings.push_back(
          path_ + ": initializer '" + init.name() + "' [" + shapeText(shape) + "], every element " +
          (value == std::trunc(value) ? std::to_string(static_cast<int64_t>(value)) : std::to_string(value)) +
          ", trains as a parameter; nothing in the file says whether torch trains it (a weight initialised so) "
          "or keeps it (a buffer, as BART's and Marian's final_logits_bias): --freeze '" +
          init.name() + "' keeps it constant");
    }
    argRoles.emplace_back(bufferNames.contains(init.name()) ? graph::kBufferAttr
                          : frozen                         ? graph::kFrozenParamAttr
                                                           : graph::kParamAttr,
                          init.name());
    result_.weights.values[init.name()] = std::move(values);
    if (auto it = anonymousModules.find(init.name()); it != anonymousModules.end() && !it->second.empty())
      moduleHints[argTypes.size() - 1] = it->second;
  }

  builder_.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder_, fileLoc, graph::kForwardFunc, builder_.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  llvm::StringMap<Value> values;
  llvm::StringMap<DenseElementsAttr> constants;
  llvm::StringMap<Value> bufferUpdates;
  for (auto [i, role] : llvm::enumerate(argRoles)) {
    func.setArgAttr(i, role.first, builder_.getStringAttr(role.second));
    values[role.second] = entry->getArgument(i);
    if (moduleHints.count(i))
      func.setArgAttr(i, graph::kModuleAttr, builder_.getStringAttr(moduleHints.lookup(i)));
  }

  builder_.setInsertionPointToStart(entry);
  for (const onnx::TensorProto *init : constantInitializers) {
    std::string error;
    DenseElementsAttr value = tensorProtoToAttr(*init, baseDir_, builder_, error);
    if (!value)
      return fail(error);
    Location loc = NameLoc::get(builder_.getStringAttr(init->name()));
    values[init->name()] = graph::ConstantOp::create(builder_, loc, value.getType(), value);
    constants[init->name()] = value;
  }

  // Every value's ONNX element type, as the model declares or shape
  // inference found it (CastLike casts to its second input's).
  llvm::StringMap<int32_t> onnxElementTypes;
  for (const auto *infos : {&graph.input(), &graph.value_info(), &graph.output()})
    for (const onnx::ValueInfoProto &info : *infos)
      if (info.type().has_tensor_type() && info.type().tensor_type().elem_type() != 0)
        onnxElementTypes[info.name()] = info.type().tensor_type().elem_type();
  for (const onnx::TensorProto &init : graph.initializer())
    onnxElementTypes[init.name()] = init.data_type();

  llvm::StringMap<std::vector<std::string>> sequences; // ONNX sequences, as lists of values
  for (auto [index, node] : llvm::enumerate(graph.node())) {
    const OpPattern *pattern = lookupOpPattern(node.op_type(), opset_);
    std::string name = nodeName(node, index);
    Location loc = NameLoc::get(builder_.getStringAttr(name));
    onnx::NodeProto named = node;
    named.set_name(name);
    NodeImporter importer(builder_, named, opset_, loc, values, constants, result_.weights.values, bufferUpdates,
                          onnxElementTypes, sequences);
    for (int i = 0; i < node.input_size(); ++i)
      if (!node.input(i).empty() && !values.count(node.input(i)) && !sequences.count(node.input(i)))
        return fail("node '" + name + "' (" + node.op_type() + "): input '" + node.input(i) + "' is not defined");
    if (failed(pattern->convert(importer)))
      return fail(importer.error());
    for (int i = 0; i < node.output_size(); ++i)
      if (!node.output(i).empty() && !values.count(node.output(i)) && !sequences.count(node.output(i)))
        return fail("node '" + name + "' (" + node.op_type() + "): output " + std::to_string(i) +
                    " ('" + node.output(i) + "') is not supported");
  }

  SmallVector<Value> outputs;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    Value value = values.lookup(output.name());
    if (!value)
      return fail("graph output '" + output.name() + "' is not computed by any node");
    outputs.push_back(value);
  }
  // After the model's outputs: the buffers the step rewrites, in argument
  // order.
  SmallVector<unsigned> updatedBuffers;
  for (auto [i, role] : llvm::enumerate(argRoles))
    if (Value update = bufferUpdates.lookup(role.second); update && role.first == graph::kBufferAttr) {
      outputs.push_back(update);
      updatedBuffers.push_back(i);
    }
  func::ReturnOp::create(builder_, fileLoc, outputs);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  func.setType(builder_.getFunctionType(argTypes, resultTypes));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, graph::kOutputAttr, builder_.getStringAttr(output.name()));
  for (auto [i, arg] : llvm::enumerate(updatedBuffers))
    func.setResultAttr(graph.output_size() + i, graph::kUpdatesAttr, builder_.getI64IntegerAttr(arg));

  // Patterns build ops through their verifiers' eyes only here: report the
  // first verifier failure with its node.
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context_, [&](Diagnostic &diag) {
    if (diagnostic.empty()) {
      llvm::raw_string_ostream os(diagnostic);
      if (auto nameLoc = dyn_cast<NameLoc>(diag.getLocation()))
        os << "node '" << nameLoc.getName().getValue() << "': ";
      os << diag.str();
    }
    return success();
  });
  if (failed(verify(module)))
    return fail("imported IR is invalid: " + diagnostic);
  return true;
}

/// Sizes are products of untrusted dims (and --batch-size): every tensor
/// must have a byte size that int64 arithmetic carries through memory
/// planning, or the plan's offsets would wrap around.
bool ModelImporter::checkTensorSizes(ModuleOp module) {
  constexpr int64_t kMaxTensorBytes = int64_t(1) << 50;
  std::string tooLarge;
  module.walk([&](Operation *op) {
    for (Value result : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !tooLarge.empty())
        continue;
      int64_t bytes = 8;
      for (int64_t d : type.getShape())
        bytes = d < 0 || (d != 0 && bytes > kMaxTensorBytes / d) ? kMaxTensorBytes + 1 : bytes * d;
      if (bytes > kMaxTensorBytes) {
        tooLarge = "a tensor of shape [" + shapeText(type.getShape()) + "] holds more than 2^50 bytes";
        if (auto nameLoc = dyn_cast<NameLoc>(op->getLoc()))
          tooLarge = "node '" + nameLoc.getName().getValue().str() + "': " + tooLarge;
      }
    }
  });
  if (!tooLarge.empty())
    return fail(tooLarge + (options_.batchSize > 0 ? " (--batch-size " + std::to_string(options_.batchSize) + ")" : ""));
  return true;
}

std::optional<ImportedModel> ModelImporter::run() {
  if (!load() || !undoExporterParameterRewrites())
    return std::nullopt;
  // Before the batch is re-derived: the rewritten selection has no NonZero
  // for the batch's trace to stop at.
  rewriteMaskedRowSelections(*model_.mutable_graph(), opset_);
  if (!fixNamedDimensions() || !fixBatchDimension())
    return std::nullopt;
  if (!checkOpsSupported())
    return std::nullopt;
  if (!checkAndInferShapes() || !buildForward()) {
    // Shapes that went wrong after re-deriving a batch: say how to avoid it.
    if (rebatched_)
      error_ += " (the model was exported with a static batch of " + std::to_string(staticBatch_) +
                "; exporting with a symbolic one, torch.onnx.export(..., dynamic_axes={'<input>': {0: 'batch'}}), "
                "avoids re-deriving it)";
    return std::nullopt;
  }
  if (!checkTensorSizes(*result_.module))
    return std::nullopt;
  return std::move(result_);
}

} // namespace

std::vector<std::string> fsdpc::unsupportedOnnxOps() {
  registerNewerOnnxSchemas();
  std::set<std::string> names;
  for (const onnx::OpSchema &schema : onnx::OpSchemaRegistry::get_all_schemas())
    if ((schema.domain().empty() || schema.domain() == "ai.onnx") && !schema.Deprecated() &&
        !lookupOpPattern(schema.Name(), kNewestOnnxOpset))
      names.insert(schema.Name());
  return {names.begin(), names.end()};
}

std::optional<ImportedModel> fsdpc::importOnnxModel(MLIRContext &context, const std::string &path,
                                                    const ImportOptions &options, std::string &error) {
  context.loadDialect<graph::GraphDialect, func::FuncDialect>();
  return ModelImporter(context, path, options, error).run();
}
