//===- ImportContext.h - What an op pattern sees of the import --*- C++ -*-===//
#ifndef FSDPC_LIB_IMPORT_IMPORTCONTEXT_H
#define FSDPC_LIB_IMPORT_IMPORTCONTEXT_H

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

#include <limits>
#include <string>

namespace fsdpc::import {

/// One ONNX node being converted: its inputs as graph values, its attributes,
/// and where to put its outputs.
class NodeImporter {
public:
  NodeImporter(mlir::OpBuilder &builder, const onnx::NodeProto &node, int64_t opset, mlir::Location loc,
               llvm::StringMap<mlir::Value> &values, llvm::StringMap<mlir::DenseElementsAttr> &constants,
               const llvm::StringMap<std::vector<float>> &initialValues, llvm::StringMap<mlir::Value> &bufferUpdates,
               const llvm::StringMap<int32_t> &onnxElementTypes, llvm::StringMap<std::vector<std::string>> &sequences)
      : builder(builder), node(node), opset(opset), loc(loc), values_(values), constants_(constants),
        initialValues_(initialValues), bufferUpdates_(bufferUpdates), onnxElementTypes_(onnxElementTypes),
        sequences_(sequences) {}

  mlir::OpBuilder &builder;
  const onnx::NodeProto &node;
  const int64_t opset;
  const mlir::Location loc;

  /// Number of inputs, counting omitted optional ones (empty names).
  int numInputs() const { return node.input_size(); }
  bool hasInput(int i) const { return i < node.input_size() && !node.input(i).empty(); }
  mlir::Value input(int i) const { return hasInput(i) ? values_.lookup(node.input(i)) : mlir::Value(); }
  /// The compile-time value of input i, if it is an initializer or constant.
  mlir::DenseElementsAttr constantInput(int i) const {
    return hasInput(i) ? constants_.lookup(node.input(i)) : mlir::DenseElementsAttr();
  }
  /// The value of input i if it is a one-element float initializer (a
  /// parameter by default, read here as a setting, such as a dropout ratio).
  std::optional<float> scalarInitializer(int i) const {
    if (!hasInput(i))
      return std::nullopt;
    auto it = initialValues_.find(node.input(i));
    if (it == initialValues_.end() || it->second.size() != 1)
      return std::nullopt;
    return it->second[0];
  }
  /// The initial value of input i if it is a float initializer (a
  /// parameter), else null.
  const std::vector<float> *initialValue(int i) const {
    if (!hasInput(i))
      return nullptr;
    auto it = initialValues_.find(node.input(i));
    return it == initialValues_.end() ? nullptr : &it->second;
  }
  /// The ONNX element type (onnx::TensorProto::DataType) the model gives
  /// input i, which fsdpc's own types do not keep (f32 holds every float
  /// type, i64 the integers and bools); none where the model does not say.
  std::optional<int32_t> onnxElementType(int i) const {
    if (!hasInput(i))
      return std::nullopt;
    auto it = onnxElementTypes_.find(node.input(i));
    return it == onnxElementTypes_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  /// Whether input i is a module buffer (an argument marked graph.buffer:
  /// BatchNormalization's running statistics), which the step may rewrite.
  bool isBufferInput(int i) const {
    if (!hasInput(i))
      return false;
    auto arg = mlir::dyn_cast<mlir::BlockArgument>(input(i));
    return arg && mlir::cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp()).getArgAttr(arg.getArgNumber(),
                                                                                          graph::kBufferAttr);
  }
  /// The step ends by writing `value` into buffer input i (what torch does
  /// to a module's buffers in place, which the export does not show).
  void updateBuffer(int i, mlir::Value value) { bufferUpdates_[node.input(i)] = value; }
  bool wantsOutput(int i) const { return i < node.output_size() && !node.output(i).empty(); }
  void setOutput(int i, mlir::Value value) {
    if (wantsOutput(i))
      values_[node.output(i)] = value;
  }
  void setConstantOutput(int i, mlir::DenseElementsAttr value) {
    if (wantsOutput(i))
      constants_[node.output(i)] = value;
  }
  /// Output i is known at compile time: a graph.constant, and a constant for
  /// the patterns that read it (shape chains fold this way).
  void setFoldedOutput(int i, mlir::DenseElementsAttr value);

  /// ONNX sequences (SplitToSequence, SequenceConstruct) are lists whose
  /// length is known at import: each element is a value of its own, by
  /// name (`seq[0]`, or the tensor a SequenceConstruct took).
  const std::vector<std::string> *sequenceInput(int i) const {
    auto it = hasInput(i) ? sequences_.find(node.input(i)) : sequences_.end();
    return it == sequences_.end() ? nullptr : &it->second;
  }
  /// Output i is a sequence of the values `elements` (names of values
  /// already defined, or elements named here by setSequenceElement).
  void setSequenceOutput(int i, std::vector<std::string> elements) {
    if (wantsOutput(i))
      sequences_[node.output(i)] = std::move(elements);
  }
  /// Element `index` of output i, a sequence: a value named `out[index]`.
  std::string setSequenceElement(int i, size_t index, mlir::Value value) {
    std::string name = node.output(i) + "[" + std::to_string(index) + "]";
    values_[name] = value;
    return name;
  }
  /// Output i is the value named `name` (a sequence's element), with its
  /// compile-time value where it has one.
  void forwardOutput(int i, llvm::StringRef name) {
    if (!wantsOutput(i))
      return;
    values_[node.output(i)] = values_.lookup(name);
    if (mlir::DenseElementsAttr value = constants_.lookup(name))
      constants_[node.output(i)] = value;
  }
  mlir::Value valueNamed(llvm::StringRef name) const { return values_.lookup(name); }

  const onnx::AttributeProto *attribute(llvm::StringRef name) const;
  int64_t intAttr(llvm::StringRef name, int64_t fallback) const;
  float floatAttr(llvm::StringRef name, float fallback) const;
  std::string stringAttr(llvm::StringRef name, llvm::StringRef fallback) const;
  std::optional<llvm::SmallVector<int64_t>> intsAttr(llvm::StringRef name) const;

  /// Records "node 'N' (Op): message" and returns failure.
  mlir::LogicalResult fail(const llvm::Twine &message);
  const std::string &error() const { return error_; }

  mlir::RankedTensorType f32Tensor(llvm::ArrayRef<int64_t> shape) const {
    return mlir::RankedTensorType::get(shape, builder.getF32Type());
  }

private:
  llvm::StringMap<mlir::Value> &values_;
  llvm::StringMap<mlir::DenseElementsAttr> &constants_;
  const llvm::StringMap<std::vector<float>> &initialValues_;
  llvm::StringMap<mlir::Value> &bufferUpdates_;
  const llvm::StringMap<int32_t> &onnxElementTypes_;
  llvm::StringMap<std::vector<std::string>> &sequences_;
  std::string error_;
};

using PatternFn = mlir::LogicalResult (*)(NodeImporter &);

/// Converts ONNX op `opType` for models whose opset is `sinceVersion` or
/// newer (until a pattern with a higher `sinceVersion` takes over).
struct OpPattern {
  llvm::StringLiteral opType;
  int64_t sinceVersion;
  PatternFn convert;
  /// What the pattern does not cover, for `fsdpc --list-ops` and docs/ops.md.
  llvm::StringLiteral limits = "";
};

/// The pattern for `opType` at `opset`, or null if the op is not supported.
const OpPattern *lookupOpPattern(llvm::StringRef opType, int64_t opset);

/// A TensorProto's elements as a DenseElementsAttr of f32 or i64 (int32
/// and bool widen to i64, double narrows to f32). `baseDir` resolves external
/// data. Returns null and sets `error` on failure.
mlir::DenseElementsAttr tensorProtoToAttr(const onnx::TensorProto &tensor, const std::string &baseDir,
                                          mlir::Builder &builder, std::string &error);

/// The shape of a ranked tensor value.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) { return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape(); }

/// The element count of a static shape, saturating at INT64_MAX: a file
/// may claim any dimensions, and a count that large fails the importer's
/// tensor size check (2^50 bytes) rather than wrapping around.
inline int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

/// "[2,3,5]", for messages.
inline std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

/// Whether `v` is present and an f32 tensor.
inline bool isF32(mlir::Value v) {
  return v && mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType().isF32();
}

/// Whether an ONNX element type is one of the float types fsdpc holds as f32.
inline bool isOnnxFloatType(int32_t type) {
  return type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE || type == onnx::TensorProto::FLOAT16 ||
         type == onnx::TensorProto::BFLOAT16;
}

/// Whether `v` is present and an i64 tensor (integers and bools).
inline bool isI64(mlir::Value v) {
  return v && mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType().isInteger(64);
}

/// What a reduction (ReduceSum, ReduceMax, ...) of input 0 reduces: the
/// axes (from the attribute or input 1, all when none are given), how many
/// elements each result element covers, and the result's shape with the
/// reduced dimensions kept as 1 and as the node asks (keepdims).
/// `identity`: no axes and noop_with_empty_axes, so nothing is reduced.
struct ReductionLayout {
  llvm::SmallVector<int64_t> axes;
  llvm::SmallVector<int64_t> keptShape, resultShape;
  int64_t count = 1;
  bool keepdims = true;
  bool identity = false;
};
mlir::FailureOr<ReductionLayout> reductionLayout(NodeImporter &n);

/// The float inputs 0 .. count-1 of a node, or failure naming the first
/// that is missing or not a float tensor.
mlir::LogicalResult requireFloatInputs(NodeImporter &n, int count);

/// Flat index `flat` of a tensor of shape `to`, read in a tensor of shape
/// `from` that broadcasts to it (numpy's rules).
int64_t broadcastSourceIndex(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to, int64_t flat);

/// Flat index `flat` of the transpose of a tensor of shape `in` by `perm`
/// (output dimension d is input dimension perm[d], as ONNX's Transpose),
/// read in the input.
int64_t transposeSourceIndex(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> perm, int64_t flat);

/// `axis` of a rank-`rank` tensor counted from 0 (a negative one from the
/// end), or failure naming it where it is out of range.
mlir::FailureOr<int64_t> axisIn(NodeImporter &n, int64_t axis, int64_t rank);

/// `v` reshaped to `shape` (itself when it already has that shape).
mlir::Value reshape(NodeImporter &n, mlir::Value v, llvm::ArrayRef<int64_t> shape);

/// Replaces the external data of `tensor`, if it has any, by its bytes: a
/// regular file inside `baseDir` (no absolute path, no `..`, no symlink
/// out), the byte range inside it and exactly as long as the dims need.
bool inlineExternalData(onnx::TensorProto &tensor, const std::string &baseDir, std::string &error);

/// Reads the elements of `tensor` as f32 (`floats`) or i64 (`ints`), from
/// its typed fields, raw data or external data under `baseDir`.
bool readTensorElements(const onnx::TensorProto &tensor, const std::string &baseDir, std::vector<float> *floats,
                        std::vector<int64_t> *ints, std::string &error);

/// The node's name, or "<op>_<index>" for an unnamed node, as used in IR
/// locations and errors.
std::string nodeName(const onnx::NodeProto &node, size_t index);

/// The node's attribute `name`, or null.
const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node, llvm::StringRef name);

/// The elements and rank of an integer literal, read before import (the
/// graph rewrites on ONNX): an INT64 or INT32 tensor, or a Constant node's
/// one attribute (`value` such a tensor, `value_int`, `value_ints`).
struct IntegerLiteral {
  std::vector<int64_t> values;
  int rank = 0;
};
std::optional<IntegerLiteral> integerLiteral(const onnx::TensorProto &tensor, const std::string &baseDir);
std::optional<IntegerLiteral> integerLiteral(const onnx::NodeProto &constant, const std::string &baseDir);

/// Runs the ONNX checker and libonnx's shape inference (with data
/// propagation) on `model`, which gains the inferred value_info. On failure
/// sets `error` (without the file name) and returns false.
bool inferOnnxShapes(onnx::ModelProto &model, std::string &error);

} // namespace fsdpc::import

#endif // FSDPC_LIB_IMPORT_IMPORTCONTEXT_H
