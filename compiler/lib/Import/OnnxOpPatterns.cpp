//===- OnnxOpPatterns.cpp - ONNX op semantics, one pattern per op ---------===//
//
// Each pattern converts one ONNX node into graph ops. A pattern applies from
// its `sinceVersion` opset until a newer pattern for the same op takes over,
// so opset-dependent semantics (Softmax's 2-D coercion before opset 13) live
// side by side.
//
//===----------------------------------------------------------------------===//
#include "ImportContext.h"
#include "fsdpc/Import/OnnxImporter.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

bool isF32(Value v) { return cast<RankedTensorType>(v.getType()).getElementType().isF32(); }

int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

/// The float inputs of a node, or failure naming the first that is not.
LogicalResult requireFloatInputs(NodeImporter &n, int count) {
  for (int i = 0; i < count; ++i) {
    if (!n.input(i))
      return n.fail("input " + Twine(i) + " is missing");
    if (!isF32(n.input(i)))
      return n.fail("input " + Twine(i) + " must be a float tensor");
  }
  return success();
}

Value reshape(NodeImporter &n, Value v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, cast<RankedTensorType>(v.getType()).getElementType());
  if (v.getType() == type)
    return v;
  return graph::ReshapeOp::create(n.builder, n.loc, type, v);
}

int64_t normalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

LogicalResult convertGemm(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 2)))
    return failure();
  Value a = n.input(0), b = n.input(1);
  if (shapeOf(a).size() != 2 || shapeOf(b).size() != 2)
    return n.fail("A and B must be matrices");
  bool transA = n.intAttr("transA", 0), transB = n.intAttr("transB", 0);
  float alpha = n.floatAttr("alpha", 1.0f), beta = n.floatAttr("beta", 1.0f);
  int64_t m = transA ? shapeOf(a)[1] : shapeOf(a)[0];
  int64_t k = transA ? shapeOf(a)[0] : shapeOf(a)[1];
  int64_t kb = transB ? shapeOf(b)[1] : shapeOf(b)[0];
  int64_t cols = transB ? shapeOf(b)[0] : shapeOf(b)[1];
  if (k != kb)
    return n.fail("inner dimensions differ: " + Twine(k) + " vs " + Twine(kb));
  auto type = n.f32Tensor({m, cols});
  Value y = graph::MatmulOp::create(n.builder, n.loc, type, a, b, transA, transB);
  if (alpha != 1.0f)
    y = graph::ScaleOp::create(n.builder, n.loc, y, n.builder.getF64FloatAttr(alpha));
  if (n.hasInput(2) && beta != 0.0f) {
    Value c = n.input(2);
    if (!isF32(c))
      return n.fail("C must be a float tensor");
    if (failed(graph::broadcastShapes(shapeOf(c), {m, cols})) || shapeOf(c).size() > 2)
      return n.fail("C of shape " + shapeString(shapeOf(c)) + " does not broadcast to " + shapeString({m, cols}));
    if (beta != 1.0f)
      c = graph::ScaleOp::create(n.builder, n.loc, c, n.builder.getF64FloatAttr(beta));
    y = graph::AddOp::create(n.builder, n.loc, type, y, c);
  }
  n.setOutput(0, y);
  return success();
}

/// numpy's matmul: [..., M, K] x [K, N] is one GEMM (the leading dims fold
/// into M); other shapes are batched, with 1-D operands promoted to a matrix
/// and the promoted dimension dropped from the result.
LogicalResult convertMatMul(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 2)))
    return failure();
  Value a = n.input(0), b = n.input(1);
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(b);
  if (as.empty() || bs.empty())
    return n.fail("operands must not be scalars");
  if (as.size() >= 2 && bs.size() == 2) {
    if (as.back() != bs[0])
      return n.fail("inner dimensions differ: " + shapeString(as) + " x " + shapeString(bs));
    SmallVector<int64_t> shape(as.begin(), as.end());
    shape.back() = bs[1];
    n.setOutput(0, graph::MatmulOp::create(n.builder, n.loc, n.f32Tensor(shape), a, b, false, false));
    return success();
  }
  bool vectorA = as.size() == 1, vectorB = bs.size() == 1;
  if (vectorA)
    a = reshape(n, a, {1, as[0]});
  if (vectorB)
    b = reshape(n, b, {bs[0], 1});
  FailureOr<SmallVector<int64_t>> shape =
      graph::BatchMatmulOp::inferShape(shapeOf(a), shapeOf(b), false, false);
  if (failed(shape))
    return n.fail("shapes " + shapeString(as) + " and " + shapeString(bs) + " do not multiply");
  Value y = graph::BatchMatmulOp::create(n.builder, n.loc, n.f32Tensor(*shape), a, b, false, false);
  SmallVector<int64_t> resultShape(shape->begin(), shape->end());
  if (vectorB)
    resultShape.pop_back();
  if (vectorA)
    resultShape.erase(resultShape.end() - (vectorB ? 1 : 2));
  n.setOutput(0, reshape(n, y, resultShape));
  return success();
}

/// Pow with a float exponent; an integer constant exponent becomes float.
LogicalResult convertPow(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value exponent = n.input(1);
  if (!exponent)
    return n.fail("input 1 is missing");
  if (!isF32(exponent)) {
    DenseElementsAttr value = n.constantInput(1);
    if (!value)
      return n.fail("the exponent must be a float tensor or an integer constant");
    SmallVector<float> floats;
    for (APInt v : value.getValues<APInt>())
      floats.push_back(static_cast<float>(v.getSExtValue()));
    auto type = n.f32Tensor(value.getType().getShape());
    exponent = graph::ConstantOp::create(n.builder, n.loc, type, DenseElementsAttr::get(type, ArrayRef<float>(floats)));
  }
  FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(n.input(0)), shapeOf(exponent));
  if (failed(shape))
    return n.fail("shapes " + shapeString(shapeOf(n.input(0))) + " and " + shapeString(shapeOf(exponent)) +
                  " do not broadcast");
  n.setOutput(0, graph::PowOp::create(n.builder, n.loc, n.f32Tensor(*shape), n.input(0), exponent));
  return success();
}

template <typename OpTy> LogicalResult convertBinary(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(n.input(0)), shapeOf(n.input(1)));
  if (failed(shape))
    return n.fail("shapes " + shapeString(shapeOf(n.input(0))) + " and " + shapeString(shapeOf(n.input(1))) +
                  " do not broadcast");
  n.setOutput(0, OpTy::create(n.builder, n.loc, n.f32Tensor(*shape), n.input(0), n.input(1)));
  return success();
}

template <typename OpTy> LogicalResult convertUnary(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  n.setOutput(0, OpTy::create(n.builder, n.loc, n.input(0)));
  return success();
}

LogicalResult convertIdentity(NodeImporter &n) {
  n.setOutput(0, n.input(0));
  if (DenseElementsAttr value = n.constantInput(0))
    n.setConstantOutput(0, value);
  return success();
}

LogicalResult convertConstant(NodeImporter &n) {
  DenseElementsAttr value;
  std::string error;
  if (const onnx::AttributeProto *attr = n.attribute("value")) {
    value = tensorProtoToAttr(attr->t(), ".", n.builder, error);
    if (!value)
      return n.fail(error);
  } else if (const onnx::AttributeProto *attr = n.attribute("value_float")) {
    value = DenseElementsAttr::get(n.f32Tensor({}), attr->f());
  } else if (const onnx::AttributeProto *attr = n.attribute("value_floats")) {
    SmallVector<float> floats(attr->floats().begin(), attr->floats().end());
    value = DenseElementsAttr::get(n.f32Tensor({static_cast<int64_t>(floats.size())}), ArrayRef<float>(floats));
  } else if (const onnx::AttributeProto *attr = n.attribute("value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, n.builder.getI64Type()), attr->i());
  } else if (const onnx::AttributeProto *attr = n.attribute("value_ints")) {
    SmallVector<int64_t> ints(attr->ints().begin(), attr->ints().end());
    value = DenseElementsAttr::get(RankedTensorType::get({static_cast<int64_t>(ints.size())}, n.builder.getI64Type()),
                                   ArrayRef<int64_t>(ints));
  } else {
    return n.fail("supported are the value, value_float(s) and value_int(s) attributes");
  }
  n.setOutput(0, graph::ConstantOp::create(n.builder, n.loc, value.getType(), value));
  n.setConstantOutput(0, value);
  return success();
}

/// `x` as [prod(dims before axis), prod(dims from axis)], ONNX's 2-D
/// coercion (Flatten, and Softmax before opset 13); `axis` defaults to 1.
FailureOr<Value> coerceTo2d(NodeImporter &n, Value x) {
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  int64_t axis = normalizeAxis(n.intAttr("axis", 1), rank);
  if (axis < 0 || axis > rank)
    return n.fail("axis " + Twine(n.intAttr("axis", 1)) + " is out of range for rank " + Twine(rank));
  return reshape(n, x, {product(shape.take_front(axis)), product(shape.drop_front(axis))});
}

LogicalResult convertFlatten(NodeImporter &n) {
  FailureOr<Value> flat = coerceTo2d(n, n.input(0));
  if (failed(flat))
    return failure();
  n.setOutput(0, *flat);
  return success();
}

LogicalResult convertReshape(NodeImporter &n) {
  Value x = n.input(0);
  DenseElementsAttr target = n.constantInput(1);
  if (!target)
    return n.fail("the target shape must be a constant (an initializer or Constant output)");
  bool allowZero = n.intAttr("allowzero", 0);
  ArrayRef<int64_t> inShape = shapeOf(x);
  SmallVector<int64_t> shape;
  int inferred = -1;
  for (auto [i, value] : llvm::enumerate(target.getValues<APInt>())) {
    int64_t d = value.getSExtValue();
    if (d == 0 && !allowZero) {
      if (i >= inShape.size())
        return n.fail("target dimension " + Twine(i) + " is 0 but the input has rank " + Twine(inShape.size()));
      d = inShape[i];
    } else if (d == -1) {
      if (inferred >= 0)
        return n.fail("the target shape has more than one -1");
      inferred = i;
      d = 1;
    } else if (d < 0) {
      return n.fail("invalid target dimension " + Twine(d));
    }
    shape.push_back(d);
  }
  int64_t known = product(shape), total = product(inShape);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return n.fail("cannot reshape " + shapeString(inShape) + " to " + shapeString(shape) + " with -1");
    shape[inferred] = total / known;
  } else if (known != total) {
    return n.fail("cannot reshape " + shapeString(inShape) + " (" + Twine(total) + " elements) to " +
                  shapeString(shape));
  }
  Value result = reshape(n, x, shape);
  n.setOutput(0, result);
  if (DenseElementsAttr value = n.constantInput(0))
    n.setConstantOutput(0, value.reshape(cast<ShapedType>(result.getType())));
  return success();
}

LogicalResult convertTranspose(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  SmallVector<int64_t> perm;
  if (auto attr = n.intsAttr("perm"))
    perm = *attr;
  else
    for (int64_t d = shape.size() - 1; d >= 0; --d)
      perm.push_back(d);
  if (perm.size() != shape.size())
    return n.fail("perm has " + Twine(perm.size()) + " entries for rank " + Twine(shape.size()));
  SmallVector<int64_t> outShape;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(shape.size()))
      return n.fail("perm entry " + Twine(p) + " is out of range");
    outShape.push_back(shape[p]);
  }
  n.setOutput(0, graph::TransposeOp::create(n.builder, n.loc, n.f32Tensor(outShape), x,
                                            n.builder.getDenseI64ArrayAttr(perm)));
  return success();
}

/// Opset 13 and later: softmax along one axis, default -1.
template <typename OpTy> LogicalResult convertSoftmax13(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  int64_t rank = shapeOf(x).size();
  int64_t axis = n.intAttr("axis", -1);
  if (axis < -rank || axis >= rank)
    return n.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
  n.setOutput(0, OpTy::create(n.builder, n.loc, x, n.builder.getI64IntegerAttr(normalizeAxis(axis, rank))));
  return success();
}

/// Opsets 1 to 12: the input is coerced to 2-D [prod(:axis), prod(axis:)]
/// (default axis 1) and the softmax runs over the second dimension.
template <typename OpTy> LogicalResult convertSoftmax1(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  FailureOr<Value> flat = coerceTo2d(n, n.input(0));
  if (failed(flat))
    return failure();
  Value y = OpTy::create(n.builder, n.loc, *flat, n.builder.getI64IntegerAttr(1));
  n.setOutput(0, reshape(n, y, shapeOf(n.input(0))));
  return success();
}

LogicalResult convertSoftmaxCrossEntropyLoss(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  if (n.hasInput(2))
    return n.fail("class weights are not supported");
  Value scores = n.input(0), labels = n.input(1);
  if (!labels || !cast<RankedTensorType>(labels.getType()).getElementType().isInteger(64))
    return n.fail("labels must be an int64 tensor");
  std::string reduction = n.stringAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum")
    return n.fail("reduction '" + reduction + "' is not supported (mean and sum are)");
  ArrayRef<int64_t> shape = shapeOf(scores);
  if (shape.size() < 2)
    return n.fail("scores must be [N, C] or [N, C, d1, ...]");
  int64_t classes = shape[1];
  SmallVector<int64_t> labelShape(shape.begin(), shape.end());
  labelShape.erase(labelShape.begin() + 1);
  if (shapeOf(labels) != ArrayRef<int64_t>(labelShape))
    return n.fail("labels must have shape " + shapeString(labelShape));

  // [N, C, d...] -> [N, d..., C] -> [N * prod(d), C].
  Value logits = scores;
  if (shape.size() > 2) {
    SmallVector<int64_t> perm = {0}, moved = {shape[0]};
    for (size_t d = 2; d < shape.size(); ++d) {
      perm.push_back(d);
      moved.push_back(shape[d]);
    }
    perm.push_back(1);
    moved.push_back(classes);
    logits = graph::TransposeOp::create(n.builder, n.loc, n.f32Tensor(moved), scores,
                                        n.builder.getDenseI64ArrayAttr(perm));
  }
  int64_t rows = product(labelShape);
  logits = reshape(n, logits, {rows, classes});
  Value flatLabels = reshape(n, labels, {rows});
  IntegerAttr ignoreIndex;
  if (const onnx::AttributeProto *attr = n.attribute("ignore_index"))
    ignoreIndex = n.builder.getI64IntegerAttr(attr->i());
  n.setOutput(0, graph::SoftmaxCrossEntropyOp::create(n.builder, n.loc, n.f32Tensor({}), logits, flatLabels,
                                                      n.builder.getStringAttr(reduction), ignoreIndex));
  if (n.wantsOutput(1))
    n.setOutput(1, graph::LogSoftmaxOp::create(n.builder, n.loc, scores, n.builder.getI64IntegerAttr(1)));
  return success();
}

const OpPattern kPatterns[] = {
    {"Add", 7, convertBinary<graph::AddOp>},
    {"Constant", 9, convertConstant},
    {"Div", 7, convertBinary<graph::DivOp>},
    {"Erf", 9, convertUnary<graph::ErfOp>},
    {"Exp", 6, convertUnary<graph::ExpOp>},
    {"Flatten", 1, convertFlatten},
    {"Gemm", 7, convertGemm},
    {"Identity", 1, convertIdentity},
    {"Log", 6, convertUnary<graph::LogOp>},
    {"LogSoftmax", 1, convertSoftmax1<graph::LogSoftmaxOp>},
    {"LogSoftmax", 13, convertSoftmax13<graph::LogSoftmaxOp>},
    {"MatMul", 1, convertMatMul},
    {"Mul", 7, convertBinary<graph::MulOp>},
    {"Neg", 6, convertUnary<graph::NegOp>},
    {"Pow", 7, convertPow},
    {"Reciprocal", 6, convertUnary<graph::ReciprocalOp>},
    {"Relu", 6, convertUnary<graph::ReluOp>},
    {"Reshape", 5, convertReshape},
    {"Sigmoid", 6, convertUnary<graph::SigmoidOp>},
    {"Softmax", 1, convertSoftmax1<graph::SoftmaxOp>},
    {"Softmax", 13, convertSoftmax13<graph::SoftmaxOp>},
    {"SoftmaxCrossEntropyLoss", 12, convertSoftmaxCrossEntropyLoss},
    {"Sqrt", 6, convertUnary<graph::SqrtOp>},
    {"Sub", 7, convertBinary<graph::SubOp>},
    {"Tanh", 6, convertUnary<graph::TanhOp>},
    {"Transpose", 1, convertTranspose},
};

} // namespace

std::vector<std::pair<std::string, int64_t>> fsdpc::supportedOnnxOps() {
  std::vector<std::pair<std::string, int64_t>> ops;
  for (const OpPattern &pattern : kPatterns)
    ops.emplace_back(pattern.opType.str(), pattern.sinceVersion);
  return ops;
}

const OpPattern *fsdpc::import::lookupOpPattern(StringRef opType, int64_t opset) {
  const OpPattern *best = nullptr;
  for (const OpPattern &pattern : kPatterns)
    if (pattern.opType == opType && pattern.sinceVersion <= opset &&
        (!best || pattern.sinceVersion > best->sinceVersion))
      best = &pattern;
  return best;
}
