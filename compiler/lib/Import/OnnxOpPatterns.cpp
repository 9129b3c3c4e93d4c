//===- OnnxOpPatterns.cpp - ONNX op semantics, one pattern per op ---------===//
//
// Each pattern converts one ONNX node into graph ops. A pattern applies from
// its `sinceVersion` opset until a newer pattern for the same op takes over,
// so opset-dependent semantics (Softmax's 2-D coercion before opset 13) live
// side by side.
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "ImportContext.h"
#include "fsdpc/Import/OnnxImporter.h"
#include "fsdpc/runtime/HostDevice.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

LogicalResult fsdpc::import::requireFloatInputs(NodeImporter &n, int count) {
  for (int i = 0; i < count; ++i) {
    if (!n.input(i))
      return n.fail("input " + Twine(i) + " is missing");
    if (!isF32(n.input(i)))
      return n.fail("input " + Twine(i) + " must be a float tensor");
  }
  return success();
}

int64_t fsdpc::import::broadcastSourceIndex(ArrayRef<int64_t> from, ArrayRef<int64_t> to, int64_t flat) {
  int64_t offset = 0, stride = 1;
  for (int64_t d = to.size() - 1, e = from.size() - 1; d >= 0; --d, --e) {
    int64_t i = flat % to[d];
    flat /= to[d];
    if (e >= 0) {
      offset += (from[e] == 1 ? 0 : i) * stride;
      stride *= from[e];
    }
  }
  return offset;
}

int64_t fsdpc::import::transposeSourceIndex(ArrayRef<int64_t> in, ArrayRef<int64_t> perm, int64_t flat) {
  int64_t offset = 0;
  for (int64_t d = static_cast<int64_t>(perm.size()) - 1; d >= 0; --d) {
    int64_t stride = 1;
    for (int64_t e = perm[d] + 1; e < static_cast<int64_t>(in.size()); ++e)
      stride *= in[e];
    offset += (flat % in[perm[d]]) * stride;
    flat /= in[perm[d]];
  }
  return offset;
}

FailureOr<int64_t> fsdpc::import::axisIn(NodeImporter &n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return n.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

Value fsdpc::import::reshape(NodeImporter &n, Value v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, cast<RankedTensorType>(v.getType()).getElementType());
  if (v.getType() == type)
    return v;
  return graph::ReshapeOp::create(n.builder, n.loc, type, v);
}

namespace {

int64_t normalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type element) { return RankedTensorType::get(shape, element); }

/// The integer values of input i if it is a compile-time constant.
std::optional<SmallVector<int64_t>> constantInts(NodeImporter &n, int i) {
  DenseElementsAttr value = n.constantInput(i);
  if (!value || !value.getElementType().isInteger(64))
    return std::nullopt;
  SmallVector<int64_t> ints;
  for (APInt v : value.getValues<APInt>())
    ints.push_back(v.getSExtValue());
  return ints;
}

/// Axes from the `axes` attribute (older opsets) or from constant input
/// `index` (newer ones), normalised to [0, rank) and sorted. Fails, through
/// the node, if they are not constant or out of range; `present` says
/// whether any were given.
FailureOr<SmallVector<int64_t>> readAxes(NodeImporter &n, int index, int64_t rank, bool &present) {
  std::optional<SmallVector<int64_t>> axes = n.intsAttr("axes");
  if (!axes && n.hasInput(index)) {
    axes = constantInts(n, index);
    if (!axes)
      return n.fail("axes must be a constant");
  }
  // An empty list means none were given (ONNX's empty `axes` input).
  present = axes.has_value() && !axes->empty();
  SmallVector<int64_t> result;
  for (int64_t axis : axes.value_or(SmallVector<int64_t>{})) {
    int64_t normalized = normalizeAxis(axis, rank);
    if (normalized < 0 || normalized >= rank)
      return n.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
    if (!llvm::is_contained(result, normalized))
      result.push_back(normalized);
  }
  llvm::sort(result);
  return result;
}

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

/// Integer arithmetic on constants (shape chains: batch * heads, ...) folds,
/// with numpy broadcasting. Division truncates as ONNX's integer Div does.
/// Two constants of element type T (int64_t: i64, float: f32) of a
/// broadcasting op, folded into one tensor of R elements (i64 or f32):
/// `fn` maps each pair of elements.
template <typename T, typename R>
std::optional<DenseElementsAttr> foldBinaryConstants(NodeImporter &n, llvm::function_ref<R(T, T)> fn) {
  DenseElementsAttr a = n.constantInput(0), b = n.constantInput(1);
  auto holds = [](DenseElementsAttr v) {
    return std::is_same_v<T, float> ? v.getElementType().isF32() : v.getElementType().isInteger(64);
  };
  if (!a || !b || !holds(a) || !holds(b))
    return std::nullopt;
  FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(a.getType().getShape(), b.getType().getShape());
  if (failed(shape))
    return std::nullopt;
  SmallVector<T> av(a.getValues<T>()), bv(b.getValues<T>());
  SmallVector<R> out;
  for (int64_t i = 0; i < product(*shape); ++i)
    out.push_back(fn(av[broadcastSourceIndex(a.getType().getShape(), *shape, i)],
                     bv[broadcastSourceIndex(b.getType().getShape(), *shape, i)]));
  Type element = std::is_same_v<R, float> ? Type(n.builder.getF32Type()) : Type(n.builder.getI64Type());
  return DenseElementsAttr::get(tensorOf(*shape, element), ArrayRef<R>(out));
}

std::optional<DenseElementsAttr> foldIntegerBinary(NodeImporter &n, llvm::function_ref<int64_t(int64_t, int64_t)> fn) {
  return foldBinaryConstants<int64_t, int64_t>(n, fn);
}

/// A comparison of two float constants (masks built from ones, say), as an
/// i64 boolean constant.
std::optional<DenseElementsAttr> foldFloatComparison(NodeImporter &n, llvm::function_ref<bool(float, float)> fn) {
  return foldBinaryConstants<float, int64_t>(n, [&](float a, float b) -> int64_t { return fn(a, b); });
}

/// Add, Sub, Mul, Div on two elements; integer division by zero gives 0.
template <typename OpTy, typename T> T arithmetic(T a, T b) {
  if constexpr (std::is_same_v<OpTy, graph::AddOp>)
    return a + b;
  else if constexpr (std::is_same_v<OpTy, graph::SubOp>)
    return a - b;
  else if constexpr (std::is_same_v<OpTy, graph::MulOp>)
    return a * b;
  else if constexpr (std::is_integral_v<T>)
    return b == 0 ? 0 : a / b;
  else
    return a / b;
}

template <typename OpTy> LogicalResult convertBinary(NodeImporter &n) {
  if (std::optional<DenseElementsAttr> folded = foldIntegerBinary(n, arithmetic<OpTy, int64_t>)) {
    n.setFoldedOutput(0, *folded);
    return success();
  }
  // Arithmetic on float constants (T5's relative position buckets) folds
  // too: the same IEEE operation the kernel would do, once.
  if (std::optional<DenseElementsAttr> folded = foldBinaryConstants<float, float>(n, arithmetic<OpTy, float>)) {
    n.setFoldedOutput(0, *folded);
    return success();
  }
  // Runtime integers (token ids, positions) compute in i64.
  Value lhs = n.input(0), rhs = n.input(1);
  if (!(isI64(lhs) && isI64(rhs)) && failed(requireFloatInputs(n, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  if (failed(shape))
    return n.fail("shapes " + shapeString(shapeOf(lhs)) + " and " + shapeString(shapeOf(rhs)) + " do not broadcast");
  n.setOutput(0, OpTy::create(n.builder, n.loc, tensorOf(*shape, elementOf(lhs)), lhs, rhs));
  return success();
}

/// The value of a unary op on a float constant, for the ops that fold.
template <typename OpTy> std::optional<float> foldedUnary(float x) {
  if constexpr (std::is_same_v<OpTy, graph::LogOp>)
    return std::log(x);
  else if constexpr (std::is_same_v<OpTy, graph::ExpOp>)
    return std::exp(x);
  else if constexpr (std::is_same_v<OpTy, graph::SqrtOp>)
    return std::sqrt(x);
  else if constexpr (std::is_same_v<OpTy, graph::NegOp>)
    return -x;
  else if constexpr (std::is_same_v<OpTy, graph::ReciprocalOp>)
    return 1.0f / x;
  else if constexpr (std::is_same_v<OpTy, graph::SinOp>) // rotary tables from constant positions
    return std::sin(x);
  else if constexpr (std::is_same_v<OpTy, graph::CosOp>)
    return std::cos(x);
  else if constexpr (std::is_same_v<OpTy, graph::AtanOp>)
    return std::atan(x);
  else if constexpr (std::is_same_v<OpTy, graph::FloorOp>)
    return std::floor(x);
  else if constexpr (std::is_same_v<OpTy, graph::CeilOp>)
    return std::ceil(x);
  else if constexpr (std::is_same_v<OpTy, graph::RoundOp>)
    return std::nearbyint(x); // halves to even
  else
    return std::nullopt;
}

template <typename OpTy> LogicalResult convertUnary(NodeImporter &n) {
  if (DenseElementsAttr value = n.constantInput(0); value && foldedUnary<OpTy>(0.0f)) {
    if (value.getElementType().isF32()) {
      n.setFoldedOutput(0, value.mapValues(value.getElementType(), [](const APFloat &v) {
        return APFloat(*foldedUnary<OpTy>(v.convertToFloat())).bitcastToAPInt();
      }));
      return success();
    }
    if constexpr (std::is_same_v<OpTy, graph::NegOp>) {
      n.setFoldedOutput(0, value.mapValues(value.getElementType(), [](const APInt &v) { return -v; }));
      return success();
    }
  }
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  n.setOutput(0, OpTy::create(n.builder, n.loc, n.input(0)));
  return success();
}

/// Mod: integer or float constants fold; runtime float tensors are composed
/// (MathPatterns.cpp). `fmod` 1 takes the dividend's sign (C's fmod), 0 the
/// divisor's (Python's %), which ONNX allows only for integers and fsdpc
/// also computes for floats, as torch.remainder.
LogicalResult convertMod(NodeImporter &n) {
  const bool truncated = n.intAttr("fmod", 0) != 0;
  if (std::optional<DenseElementsAttr> folded = foldIntegerBinary(n, [truncated](int64_t a, int64_t b) -> int64_t {
        if (b == 0) // as Div's fold, and numpy: no trap at import
          return 0;
        const int64_t r = a % b;
        return !truncated && r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
      })) {
    n.setFoldedOutput(0, *folded);
    return success();
  }
  if (std::optional<DenseElementsAttr> folded = foldBinaryConstants<float, float>(
          n, [truncated](float a, float b) { return truncated ? std::fmod(a, b) : a - std::floor(a / b) * b; })) {
    n.setFoldedOutput(0, *folded);
    return success();
  }
  return convertRuntimeMod(n, truncated);
}

/// Abs of a constant (T5's relative positions) folds; fsdpc has no runtime
/// kernel for it.
LogicalResult convertAbs(NodeImporter &n) {
  DenseElementsAttr value = n.constantInput(0);
  if (!value)
    return convertRuntimeAbs(n);
  if (value.getElementType().isF32())
    n.setFoldedOutput(0, value.mapValues(value.getElementType(), [](const APFloat &v) {
      return APFloat(std::fabs(v.convertToFloat())).bitcastToAPInt();
    }));
  else
    n.setFoldedOutput(0, value.mapValues(value.getElementType(), [](const APInt &v) { return v.abs(); }));
  return success();
}

/// Equal, Less, LessOrEqual, Greater, GreaterOrEqual on constants: an i64
/// boolean constant.
template <typename Compare, graph::ComparePredicate Predicate> LogicalResult convertComparison(NodeImporter &n) {
  if (std::optional<DenseElementsAttr> folded =
          foldIntegerBinary(n, [](int64_t a, int64_t b) -> int64_t { return Compare()(a, b); })) {
    n.setFoldedOutput(0, *folded);
    return success();
  }
  if (std::optional<DenseElementsAttr> folded = foldFloatComparison(n, [](float a, float b) { return Compare()(a, b); })) {
    n.setFoldedOutput(0, *folded);
    return success();
  }
  return convertRuntimeComparison(n, Predicate);
}

/// And, Or, Xor: constants fold, runtime masks compare (LogicPatterns.cpp).
template <LogicOp Op> LogicalResult convertLogic(NodeImporter &n) {
  if (std::optional<DenseElementsAttr> folded = foldIntegerBinary(n, [](int64_t a, int64_t b) -> int64_t {
        return Op == LogicOp::kAnd ? (a && b) : Op == LogicOp::kOr ? (a || b) : ((a != 0) != (b != 0));
      })) {
    n.setFoldedOutput(0, *folded);
    return success();
  }
  return convertRuntimeLogic(n, Op);
}

/// Min and Max of constants (any number of inputs, broadcast together).
template <bool IsMax> LogicalResult convertMinMax(NodeImporter &n) {
  if (n.numInputs() == 0)
    return n.fail("needs at least one input");
  for (int i = 0; i < n.numInputs(); ++i)
    if (!n.constantInput(i))
      return convertRuntimeMinMax(n, IsMax);
  DenseElementsAttr result = n.constantInput(0);
  for (int i = 1; i < n.numInputs(); ++i) {
    DenseElementsAttr next = n.constantInput(i);
    if (!next || next.getElementType() != result.getElementType())
      return n.fail(n.node.op_type() + " is supported on constants of one type, which fold at compile time");
    FailureOr<SmallVector<int64_t>> shape =
        graph::broadcastShapes(result.getType().getShape(), next.getType().getShape());
    if (failed(shape))
      return n.fail("operands do not broadcast");
    SmallVector<Attribute> lhs(result.getValues<Attribute>()), rhs(next.getValues<Attribute>()), out;
    for (int64_t k = 0; k < product(*shape); ++k) {
      Attribute a = lhs[broadcastSourceIndex(result.getType().getShape(), *shape, k)];
      Attribute b = rhs[broadcastSourceIndex(next.getType().getShape(), *shape, k)];
      bool takeB;
      if (auto fa = dyn_cast<FloatAttr>(a))
        takeB = IsMax ? cast<FloatAttr>(b).getValueAsDouble() > fa.getValueAsDouble()
                      : cast<FloatAttr>(b).getValueAsDouble() < fa.getValueAsDouble();
      else
        takeB = IsMax ? cast<IntegerAttr>(b).getInt() > cast<IntegerAttr>(a).getInt()
                      : cast<IntegerAttr>(b).getInt() < cast<IntegerAttr>(a).getInt();
      out.push_back(takeB ? b : a);
    }
    result = DenseElementsAttr::get(RankedTensorType::get(*shape, result.getElementType()), out);
  }
  n.setFoldedOutput(0, result);
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
  Value x = n.input(0);
  if (!isI64(x) && failed(requireFloatInputs(n, 1)))
    return failure();
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
  // A constant folds (the pads torch computes for F.pad, transposed as
  // integers): output element i reads the input where its coordinates,
  // permuted back, point.
  if (DenseElementsAttr value = n.constantInput(0)) {
    SmallVector<Attribute> elements(value.getValues<Attribute>()), out;
    for (int64_t i = 0; i < product(shape); ++i)
      out.push_back(elements[transposeSourceIndex(shape, perm, i)]);
    n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(outShape, value.getElementType()), out));
    return success();
  }
  n.setOutput(0, graph::TransposeOp::create(n.builder, n.loc, tensorOf(outShape, elementOf(x)), x,
                                            n.builder.getDenseI64ArrayAttr(perm)));
  return success();
}

/// Opset 13 and later: softmax along one axis, default -1.
template <typename OpTy> LogicalResult convertSoftmax13(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  FailureOr<int64_t> axis = axisIn(n, n.intAttr("axis", -1), shapeOf(x).size());
  if (failed(axis))
    return failure();
  n.setOutput(0, OpTy::create(n.builder, n.loc, x, n.builder.getI64IntegerAttr(*axis)));
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

} // namespace

FailureOr<ReductionLayout> fsdpc::import::reductionLayout(NodeImporter &n) {
  ArrayRef<int64_t> shape = shapeOf(n.input(0));
  ReductionLayout layout;
  bool present = false;
  FailureOr<SmallVector<int64_t>> axes = readAxes(n, 1, shape.size(), present);
  if (failed(axes))
    return failure();
  layout.axes = std::move(*axes);
  if (!present) {
    layout.identity = n.intAttr("noop_with_empty_axes", 0) != 0;
    if (!layout.identity)
      for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
        layout.axes.push_back(d);
  }
  layout.keepdims = n.intAttr("keepdims", 1) != 0;
  for (auto [d, size] : llvm::enumerate(shape)) {
    if (llvm::is_contained(layout.axes, static_cast<int64_t>(d))) {
      layout.count *= size;
      layout.keptShape.push_back(1);
      if (layout.keepdims)
        layout.resultShape.push_back(1);
    } else {
      layout.keptShape.push_back(size);
      layout.resultShape.push_back(size);
    }
  }
  return layout;
}

namespace {

/// ReduceSum and ReduceMean: a sum over the axes (all when none are given,
/// unless noop_with_empty_axes), scaled for the mean.
template <bool Mean> LogicalResult convertReduce(NodeImporter &n) {
  if (!Mean && isI64(n.input(0)))
    return convertIntegerReduceSum(n);
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  FailureOr<ReductionLayout> layout = reductionLayout(n);
  if (failed(layout))
    return failure();
  Value x = n.input(0);
  if (layout->identity) {
    n.setOutput(0, x);
    return success();
  }
  Value y = graph::ReduceSumOp::create(n.builder, n.loc, n.f32Tensor(layout->resultShape), x,
                                       n.builder.getDenseI64ArrayAttr(layout->axes),
                                       n.builder.getBoolAttr(layout->keepdims));
  if (Mean)
    y = graph::ScaleOp::create(n.builder, n.loc, y,
                               n.builder.getF64FloatAttr(1.0 / std::max<int64_t>(layout->count, 1)));
  n.setOutput(0, y);
  return success();
}

/// Output 0 is `x` under another shape: folded for constants (shape
/// vectors), a graph.reshape otherwise.
void setReshapedOutput(NodeImporter &n, Value x, ArrayRef<int64_t> shape) {
  if (DenseElementsAttr value = n.constantInput(0))
    n.setFoldedOutput(0, value.reshape(tensorOf(shape, value.getElementType())));
  else
    n.setOutput(0, reshape(n, x, shape));
}

/// Unsqueeze and Squeeze are reshapes.
LogicalResult convertUnsqueeze(NodeImporter &n) {
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  std::optional<SmallVector<int64_t>> raw = n.intsAttr("axes");
  if (!raw)
    raw = constantInts(n, 1);
  if (!raw)
    return n.fail("axes must be a constant");
  // Axes count in the output, whose rank is the input's plus their number.
  bool present = false;
  FailureOr<SmallVector<int64_t>> axes = readAxes(n, 1, shape.size() + raw->size(), present);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> out;
  size_t next = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size() + axes->size()); ++d)
    out.push_back(llvm::is_contained(*axes, d) ? 1 : shape[next++]);
  setReshapedOutput(n, x, out);
  return success();
}

LogicalResult convertSqueeze(NodeImporter &n) {
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  bool present = false;
  FailureOr<SmallVector<int64_t>> axes = readAxes(n, 1, shape.size(), present);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> out;
  for (auto [d, size] : llvm::enumerate(shape)) {
    bool listed = llvm::is_contained(*axes, static_cast<int64_t>(d));
    if (listed && size != 1)
      return n.fail("dimension " + Twine(d) + " has size " + Twine(size) + ", not 1");
    if (!(listed || (!present && size == 1)))
      out.push_back(size);
  }
  setReshapedOutput(n, x, out);
  return success();
}

LogicalResult convertExpand(NodeImporter &n) {
  Value x = n.input(0);
  std::optional<SmallVector<int64_t>> target = constantInts(n, 1);
  if (!target)
    return n.fail("the target shape must be a constant");
  FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(x), *target);
  if (failed(shape))
    return n.fail("shape " + shapeString(shapeOf(x)) + " does not broadcast with " + shapeString(*target));
  if (DenseElementsAttr value = n.constantInput(0)) {
    // A constant (a mask of ones, say) expands at compile time, so what is
    // computed from it (Trilu, Equal) folds as well.
    auto type = RankedTensorType::get(*shape, value.getElementType());
    if (value.isSplat()) {
      n.setFoldedOutput(0, DenseElementsAttr::get(type, value.getSplatValue<Attribute>()));
      return success();
    }
    ArrayRef<int64_t> from = shapeOf(x);
    const size_t rank = shape->size(), offset = rank - from.size();
    SmallVector<Attribute> source(value.getValues<Attribute>());
    SmallVector<Attribute> elements(type.getNumElements());
    for (int64_t i = 0; i < type.getNumElements(); ++i) {
      // Index i of the result, read in the source: broadcast axes read 0.
      int64_t rest = i, sourceIndex = 0, stride = 1;
      for (size_t d = rank; d-- > 0;) {
        int64_t coordinate = rest % (*shape)[d];
        rest /= (*shape)[d];
        if (d >= offset) {
          int64_t size = from[d - offset];
          sourceIndex += (size == 1 ? 0 : coordinate) * stride;
          stride *= size;
        }
      }
      elements[i] = source[sourceIndex];
    }
    n.setFoldedOutput(0, DenseElementsAttr::get(type, elements));
    return success();
  }
  Value y = x;
  if (ArrayRef<int64_t>(*shape) != shapeOf(x))
    y = graph::BroadcastToOp::create(n.builder, n.loc, tensorOf(*shape, elementOf(x)), x);
  n.setOutput(0, y);
  return success();
}

/// The shape of `parts` joined along `axis` (Concat, ConcatFromSequence):
/// fails through the node where they differ in rank, element type or
/// elsewhere than along the axis.
FailureOr<SmallVector<int64_t>> joinedShape(NodeImporter &n, ArrayRef<Value> parts, int64_t axis) {
  const int64_t rank = shapeOf(parts[0]).size();
  SmallVector<int64_t> shape(shapeOf(parts[0]).begin(), shapeOf(parts[0]).end());
  shape[axis] = 0;
  for (Value v : parts) {
    if (shapeOf(v).size() != static_cast<size_t>(rank) || elementOf(v) != elementOf(parts[0]))
      return n.fail("inputs differ in rank or element type");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && shapeOf(v)[d] != shapeOf(parts[0])[d])
        return n.fail("inputs " + shapeString(shapeOf(parts[0])) + " and " + shapeString(shapeOf(v)) +
                      " differ outside axis " + Twine(axis));
    shape[axis] += shapeOf(v)[axis];
  }
  return shape;
}

LogicalResult convertConcat(NodeImporter &n) {
  SmallVector<Value> inputs;
  for (int i = 0; i < n.numInputs(); ++i)
    if (n.hasInput(i))
      inputs.push_back(n.input(i));
  if (inputs.empty())
    return n.fail("needs at least one input");
  int64_t rank = shapeOf(inputs[0]).size();
  int64_t axis = normalizeAxis(n.intAttr("axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return n.fail("axis is out of range");
  FailureOr<SmallVector<int64_t>> joined = joinedShape(n, inputs, axis);
  if (failed(joined))
    return failure();
  SmallVector<int64_t> shape = *joined;
  bool allConstant = true;
  for (int i = 0; i < n.numInputs(); ++i)
    allConstant &= !n.hasInput(i) || static_cast<bool>(n.constantInput(i));
  // Shape chains concatenate small integer vectors, and index tensors
  // computed from shapes (ScatterND's [..., k] tuples) concatenate along
  // their last axis: fold them.
  if (allConstant && elementOf(inputs[0]).isInteger(64)) {
    const int64_t outer = product(ArrayRef<int64_t>(shape).take_front(axis));
    const int64_t inner = product(ArrayRef<int64_t>(shape).drop_front(axis + 1));
    SmallVector<SmallVector<int64_t>> values;
    for (int i = 0; i < n.numInputs(); ++i)
      if (n.hasInput(i))
        values.push_back(*constantInts(n, i));
    SmallVector<int64_t> joined;
    for (int64_t o = 0; o < outer; ++o)
      for (auto [input, value] : llvm::zip_equal(inputs, values)) {
        const int64_t chunk = shapeOf(input)[axis] * inner;
        joined.append(value.begin() + o * chunk, value.begin() + (o + 1) * chunk);
      }
    n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(shape, elementOf(inputs[0])), ArrayRef<int64_t>(joined)));
    return success();
  }
  // So do small float vectors of constants (Resize scales torch writes as
  // Concat(Constant [1, 1], Constant [2, 2])).
  if (allConstant && rank == 1 && elementOf(inputs[0]).isF32()) {
    SmallVector<float> joined;
    for (int i = 0; i < n.numInputs(); ++i)
      if (n.hasInput(i))
        llvm::append_range(joined, n.constantInput(i).getValues<float>());
    n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(shape, elementOf(inputs[0])), ArrayRef<float>(joined)));
    return success();
  }
  n.setOutput(0, graph::ConcatOp::create(n.builder, n.loc, tensorOf(shape, elementOf(inputs[0])), inputs,
                                         n.builder.getI64IntegerAttr(axis)));
  return success();
}

/// ONNX Slice bounds, clamped as the spec says, for one dimension.
void clampSlice(int64_t size, int64_t start, int64_t end, int64_t step, int64_t &first, int64_t &count) {
  if (start < 0)
    start += size;
  if (end < 0)
    end += size;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, 0, size);
    count = std::max<int64_t>(0, (end - start + step - 1) / step);
  } else {
    start = std::clamp<int64_t>(start, 0, size - 1);
    end = std::clamp<int64_t>(end, -1, size - 1);
    count = std::max<int64_t>(0, (start - end + (-step) - 1) / (-step));
  }
  first = start;
}

Value sliceOf(NodeImporter &n, Value x, ArrayRef<int64_t> starts, ArrayRef<int64_t> steps, ArrayRef<int64_t> shape) {
  return graph::SliceOp::create(n.builder, n.loc, tensorOf(shape, elementOf(x)), x,
                                n.builder.getDenseI64ArrayAttr(starts), n.builder.getDenseI64ArrayAttr(steps));
}

LogicalResult convertSlice(NodeImporter &n) {
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  std::optional<SmallVector<int64_t>> starts = constantInts(n, 1), ends = constantInts(n, 2);
  if (!starts || !ends || starts->size() != ends->size())
    return n.fail("starts and ends must be constants of equal length");
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (n.hasInput(3)) {
    std::optional<SmallVector<int64_t>> given = constantInts(n, 3);
    if (!given)
      return n.fail("axes must be a constant");
    axes = *given;
  } else {
    for (int64_t i = 0; i < static_cast<int64_t>(starts->size()); ++i)
      axes.push_back(i);
  }
  if (n.hasInput(4)) {
    std::optional<SmallVector<int64_t>> given = constantInts(n, 4);
    if (!given || given->size() != starts->size() || llvm::is_contained(*given, 0))
      return n.fail("steps must be a constant of non-zero entries");
    steps = *given;
  }
  SmallVector<int64_t> first(rank, 0), step(rank, 1), outShape(shape.begin(), shape.end());
  for (auto [i, axis] : llvm::enumerate(axes)) {
    int64_t d = normalizeAxis(axis, rank);
    if (d < 0 || d >= rank)
      return n.fail("axis " + Twine(axis) + " is out of range");
    clampSlice(shape[d], (*starts)[i], (*ends)[i], steps[i], first[d], outShape[d]);
    step[d] = steps[i];
  }
  // Slices of constants (shape vectors, causal masks) fold.
  if (DenseElementsAttr value = n.constantInput(0)) {
    SmallVector<Attribute> all(value.getValues<Attribute>()), picked;
    SmallVector<int64_t> strides(rank, 1);
    for (int64_t d = rank - 1; d > 0; --d)
      strides[d - 1] = strides[d] * shape[d];
    int64_t count = product(outShape);
    for (int64_t i = 0; i < count; ++i) {
      int64_t rest = i, offset = 0;
      for (int64_t d = rank - 1; d >= 0; --d) {
        offset += (first[d] + (rest % outShape[d]) * step[d]) * strides[d];
        rest /= outShape[d];
      }
      picked.push_back(all[offset]);
    }
    n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(outShape, value.getElementType()), picked));
    return success();
  }
  n.setOutput(0, sliceOf(n, x, first, step, outShape));
  return success();
}

/// What Split and SplitToSequence split: input 0, its shape, and the
/// `axis` attribute normalised.
struct SplitOperand {
  Value x;
  ArrayRef<int64_t> shape;
  int64_t axis;
};

FailureOr<SplitOperand> splitOperand(NodeImporter &n) {
  Value x = n.input(0);
  FailureOr<int64_t> axis = axisIn(n, n.intAttr("axis", 0), shapeOf(x).size());
  if (failed(axis))
    return failure();
  return SplitOperand{x, shapeOf(x), *axis};
}

LogicalResult convertSplit(NodeImporter &n) {
  FailureOr<SplitOperand> operand = splitOperand(n);
  if (failed(operand))
    return failure();
  const auto &[x, shape, axis] = *operand;
  const int64_t rank = shape.size();
  std::optional<SmallVector<int64_t>> sizes = n.intsAttr("split");
  if (!sizes && n.hasInput(1)) {
    sizes = constantInts(n, 1);
    if (!sizes)
      return n.fail("split sizes must be a constant");
  }
  int64_t parts = n.node.output_size();
  if (!sizes && n.attribute("num_outputs")) {
    // Opset 18: parts of ceil(size / num_outputs), the last one smaller.
    int64_t count = n.intAttr("num_outputs", parts);
    if (count != parts)
      return n.fail("num_outputs " + Twine(count) + " differs from the " + Twine(parts) + " outputs");
    int64_t chunk = (shape[axis] + count - 1) / count;
    sizes = SmallVector<int64_t>();
    for (int64_t i = 0; i < count; ++i)
      sizes->push_back(std::clamp<int64_t>(shape[axis] - chunk * i, 0, chunk));
  }
  if (!sizes) {
    if (shape[axis] % parts != 0)
      return n.fail("dimension of size " + Twine(shape[axis]) + " does not split into " + Twine(parts) + " parts");
    sizes = SmallVector<int64_t>(parts, shape[axis] / parts);
  }
  if (static_cast<int64_t>(sizes->size()) != parts)
    return n.fail("has " + Twine(parts) + " outputs but " + Twine(sizes->size()) + " split sizes");
  int64_t offset = 0;
  for (auto [i, size] : llvm::enumerate(*sizes)) {
    SmallVector<int64_t> starts(rank, 0), steps(rank, 1), outShape(shape.begin(), shape.end());
    starts[axis] = offset;
    outShape[axis] = size;
    n.setOutput(i, sliceOf(n, x, starts, steps, outShape));
    offset += size;
  }
  if (offset != shape[axis])
    return n.fail("split sizes add up to " + Twine(offset) + ", not " + Twine(shape[axis]));
  return success();
}

/// Sequences, as the dynamo exporter writes torch.split and chunk without
/// its optimizer (SplitToSequence read by SequenceAt at constant
/// positions): lists of values whose length is known at import.

/// SplitToSequence: the pieces of Split. A scalar `split` is a chunk size
/// (the last chunk may be smaller); a 1-D one, the sizes; none, pieces of 1
/// along the axis, without that axis where keepdims is 0.
LogicalResult convertSplitToSequence(NodeImporter &n) {
  FailureOr<SplitOperand> operand = splitOperand(n);
  if (failed(operand))
    return failure();
  const auto &[x, shape, axis] = *operand;
  const int64_t rank = shape.size();
  SmallVector<int64_t> sizes;
  bool dropAxis = false;
  if (n.hasInput(1)) {
    std::optional<SmallVector<int64_t>> split = constantInts(n, 1);
    if (!split)
      return n.fail("split sizes must be a constant");
    if (shapeOf(n.input(1)).empty()) {
      int64_t chunk = split->front();
      if (chunk <= 0)
        return n.fail("split size " + Twine(chunk) + " is not positive");
      for (int64_t offset = 0; offset < shape[axis]; offset += chunk)
        sizes.push_back(std::min(chunk, shape[axis] - offset));
    } else {
      sizes = *split;
    }
  } else {
    sizes.assign(shape[axis], 1);
    dropAxis = n.intAttr("keepdims", 1) == 0;
  }
  std::vector<std::string> elements;
  int64_t offset = 0;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    if (size < 0)
      return n.fail("split size " + Twine(size) + " is negative");
    SmallVector<int64_t> starts(rank, 0), steps(rank, 1), outShape(shape.begin(), shape.end());
    starts[axis] = offset;
    outShape[axis] = size;
    Value piece = sliceOf(n, x, starts, steps, outShape);
    if (dropAxis) {
      outShape.erase(outShape.begin() + axis);
      piece = reshape(n, piece, outShape);
    }
    elements.push_back(n.setSequenceElement(0, i, piece));
    offset += size;
  }
  if (offset != shape[axis])
    return n.fail("split sizes add up to " + Twine(offset) + ", not " + Twine(shape[axis]));
  n.setSequenceOutput(0, std::move(elements));
  return success();
}

/// The element of a sequence input at constant position input `positionInput`
/// (negative counts from the end), by name.
FailureOr<std::string> sequenceElement(NodeImporter &n, int positionInput) {
  const std::vector<std::string> *elements = n.sequenceInput(0);
  if (!elements)
    return n.fail("input 0 is not a sequence fsdpc built (SplitToSequence or SequenceConstruct)");
  std::optional<SmallVector<int64_t>> position = constantInts(n, positionInput);
  if (!position || position->size() != 1)
    return n.fail("the position must be a constant scalar");
  int64_t size = elements->size(), at = position->front() < 0 ? position->front() + size : position->front();
  if (at < 0 || at >= size)
    return n.fail("position " + Twine(position->front()) + " is outside the sequence of " + Twine(size));
  return (*elements)[at];
}

LogicalResult convertSequenceAt(NodeImporter &n) {
  FailureOr<std::string> element = sequenceElement(n, 1);
  if (failed(element))
    return failure();
  n.forwardOutput(0, *element);
  return success();
}

LogicalResult convertSequenceConstruct(NodeImporter &n) {
  std::vector<std::string> elements;
  for (int i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i) || n.sequenceInput(i))
      return n.fail("input " + Twine(i) + " is not a tensor");
    elements.push_back(n.node.input(i));
  }
  n.setSequenceOutput(0, std::move(elements));
  return success();
}

LogicalResult convertSequenceLength(NodeImporter &n) {
  const std::vector<std::string> *elements = n.sequenceInput(0);
  if (!elements)
    return n.fail("input 0 is not a sequence fsdpc built (SplitToSequence or SequenceConstruct)");
  n.setFoldedOutput(
      0, DenseElementsAttr::get(RankedTensorType::get({}, n.builder.getI64Type()), APInt(64, elements->size())));
  return success();
}

/// ConcatFromSequence: Concat of the elements, or with new_axis, of the
/// elements each given a new axis there (a stack).
LogicalResult convertConcatFromSequence(NodeImporter &n) {
  const std::vector<std::string> *elements = n.sequenceInput(0);
  if (!elements || elements->empty())
    return n.fail("input 0 is not a non-empty sequence fsdpc built (SplitToSequence or SequenceConstruct)");
  bool newAxis = n.intAttr("new_axis", 0) != 0;
  SmallVector<Value> parts;
  for (const std::string &name : *elements)
    parts.push_back(n.valueNamed(name));
  int64_t rank = shapeOf(parts[0]).size() + (newAxis ? 1 : 0);
  int64_t axis = normalizeAxis(n.intAttr("axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return n.fail("axis is out of range");
  if (newAxis)
    for (Value &part : parts) {
      SmallVector<int64_t> stacked(shapeOf(part).begin(), shapeOf(part).end());
      stacked.insert(stacked.begin() + axis, 1);
      part = reshape(n, part, stacked);
    }
  FailureOr<SmallVector<int64_t>> shape = joinedShape(n, parts, axis);
  if (failed(shape))
    return failure();
  n.setOutput(0, graph::ConcatOp::create(n.builder, n.loc, tensorOf(*shape, elementOf(parts[0])), parts,
                                         n.builder.getI64IntegerAttr(axis)));
  return success();
}

/// GatherElements of constants (index tensors built from buffers, as BERT's
/// token type ids are): folds. fsdpc has no runtime kernel for it.
LogicalResult convertGatherElements(NodeImporter &n) {
  DenseElementsAttr data = n.constantInput(0);
  std::optional<SmallVector<int64_t>> indices = constantInts(n, 1);
  // Constant data whose elements are all equal (RoBERTa's token type ids, a
  // buffer of zeros gathered at the runtime position ids) gives that value
  // wherever the indices point.
  if (data && data.isSplat() && !indices && n.input(1) &&
      static_cast<int64_t>(shapeOf(n.input(1)).size()) == data.getType().getRank()) {
    n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(shapeOf(n.input(1)), data.getElementType()),
                                                data.getSplatValue<Attribute>()));
    return success();
  }
  if ((!data || !indices) && n.input(0) && n.input(1) && shapeOf(n.input(0)).size() == shapeOf(n.input(1)).size()) {
    const int64_t rank = shapeOf(n.input(0)).size(), axis = normalizeAxis(n.intAttr("axis", 0), rank);
    if (axis < 0 || axis >= rank)
      return n.fail("axis " + Twine(n.intAttr("axis", 0)) + " is outside the data's rank " + Twine(rank));
    Value index = n.input(1);
    if (indices) { // negative constant indices count from the end
      for (int64_t &i : *indices)
        i += i < 0 ? shapeOf(n.input(0))[axis] : 0;
      auto type = tensorOf(shapeOf(index), n.builder.getI64Type());
      index = graph::ConstantOp::create(n.builder, n.loc, type, DenseElementsAttr::get(type, ArrayRef<int64_t>(*indices)));
    }
    return convertRuntimeGatherElements(n, n.input(0), index, axis);
  }
  if (!data || !indices)
    return n.fail("GatherElements needs data and indices of one rank");
  ArrayRef<int64_t> dataShape = data.getType().getShape();
  ArrayRef<int64_t> indexShape = shapeOf(n.input(1));
  const int64_t rank = dataShape.size();
  const int64_t axis = normalizeAxis(n.intAttr("axis", 0), rank);
  if (axis < 0 || axis >= rank || static_cast<int64_t>(indexShape.size()) != rank)
    return n.fail("axis or index rank is out of range");
  SmallVector<Attribute> source(data.getValues<Attribute>()), out;
  SmallVector<int64_t> dataStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    dataStrides[d] = dataStrides[d + 1] * dataShape[d + 1];
  for (int64_t i = 0; i < static_cast<int64_t>(indices->size()); ++i) {
    // out[i0..ik..] = data[i0..indices[i]..] along `axis`.
    int64_t rest = i, offset = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t coordinate = rest % indexShape[d];
      rest /= indexShape[d];
      if (d == axis) {
        coordinate = (*indices)[i] < 0 ? (*indices)[i] + dataShape[d] : (*indices)[i];
        if (coordinate < 0 || coordinate >= dataShape[d])
          return n.fail("index " + Twine((*indices)[i]) + " is out of range for axis size " + Twine(dataShape[d]));
      }
      offset += coordinate * dataStrides[d];
    }
    out.push_back(source[offset]);
  }
  n.setFoldedOutput(0, DenseElementsAttr::get(RankedTensorType::get(indexShape, data.getElementType()), out));
  return success();
}

/// The padding row of an embedding table, if it has one: torch's
/// nn.Embedding(padding_idx=p) zeroes row p and keeps its gradient zero, and
/// Hugging Face models use it (BERT's and BART's pad tokens). An export only
/// keeps the zeros, so exactly one all-zero row in a table whose other rows
/// are not all zero is read as that row.
std::optional<int64_t> paddingRow(const std::vector<float> &table, ArrayRef<int64_t> shape) {
  if (shape.size() != 2 || shape[0] < 2)
    return std::nullopt;
  const int64_t rows = shape[0], width = shape[1];
  std::optional<int64_t> zeroRow;
  for (int64_t r = 0; r < rows; ++r) {
    bool zero = std::all_of(table.begin() + r * width, table.begin() + (r + 1) * width, [](float v) { return v == 0; });
    if (zero && zeroRow)
      return std::nullopt; // two zero rows: a zero-initialized table, not padding
    if (zero)
      zeroRow = r;
  }
  return zeroRow;
}

LogicalResult convertGather(NodeImporter &n) {
  Value data = n.input(0), indices = n.input(1);
  if (!elementOf(indices).isInteger(64))
    return n.fail("indices must be integers");
  ArrayRef<int64_t> shape = shapeOf(data);
  int64_t axis = normalizeAxis(n.intAttr("axis", 0), shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return n.fail("axis is out of range");
  SmallVector<int64_t> outShape(shape.begin(), shape.begin() + axis);
  llvm::append_range(outShape, shapeOf(indices));
  outShape.append(shape.begin() + axis + 1, shape.end());
  // Gathering from a constant integer vector (Shape -> Gather) folds.
  if (DenseElementsAttr value = n.constantInput(0); value && shape.size() == 1 && value.getElementType().isInteger(64)) {
    if (std::optional<SmallVector<int64_t>> picks = constantInts(n, 1)) {
      SmallVector<int64_t> all = *constantInts(n, 0), picked;
      for (int64_t index : *picks) {
        if (index < -shape[0] || index >= shape[0])
          return n.fail("index " + Twine(index) + " is out of range");
        picked.push_back(all[index < 0 ? index + shape[0] : index]);
      }
      n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(outShape, value.getElementType()), ArrayRef<int64_t>(picked)));
      return success();
    }
  }
  // The lookup passes no gradient to the padding row, but reads it as it
  // is: a tied output projection trains that row in torch, and lookups of
  // the pad token then read its new value.
  IntegerAttr padding;
  if (const std::vector<float> *table = n.initialValue(0); table && axis == 0)
    if (std::optional<int64_t> row = paddingRow(*table, shape))
      padding = n.builder.getI64IntegerAttr(*row);
  n.setOutput(0, graph::GatherOp::create(n.builder, n.loc, tensorOf(outShape, elementOf(data)), data, indices,
                                         n.builder.getI64IntegerAttr(axis), padding));
  return success();
}

LogicalResult convertWhere(NodeImporter &n) {
  Value condition = n.input(0), a = n.input(1), b = n.input(2);
  if (!condition || !a || !b)
    return n.fail("needs three inputs");
  DenseElementsAttr cv = n.constantInput(0), av = n.constantInput(1), bv = n.constantInput(2);
  if (cv && av && bv && av.getElementType() == bv.getElementType() && cv.getElementType().isInteger(64)) {
    // Constant choices fold, integers included (position ids, token types).
    FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(av.getType().getShape(), bv.getType().getShape());
    if (succeeded(shape))
      shape = graph::broadcastShapes(*shape, cv.getType().getShape());
    if (failed(shape))
      return n.fail("operands do not broadcast");
    SmallVector<int64_t> conditions(cv.getValues<int64_t>());
    SmallVector<Attribute> lhs(av.getValues<Attribute>()), rhs(bv.getValues<Attribute>()), out;
    for (int64_t i = 0; i < product(*shape); ++i)
      out.push_back(conditions[broadcastSourceIndex(cv.getType().getShape(), *shape, i)]
                        ? lhs[broadcastSourceIndex(av.getType().getShape(), *shape, i)]
                        : rhs[broadcastSourceIndex(bv.getType().getShape(), *shape, i)]);
    n.setFoldedOutput(0, DenseElementsAttr::get(RankedTensorType::get(*shape, av.getElementType()), out));
    return success();
  }
  const bool integers = isI64(a) && isI64(b);
  if (!elementOf(condition).isInteger(64) || !((isF32(a) && isF32(b)) || integers))
    return n.fail("supported is a boolean condition choosing between two float or two integer tensors");
  FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(a), shapeOf(b));
  if (succeeded(shape))
    shape = graph::broadcastShapes(*shape, shapeOf(condition));
  if (failed(shape))
    return n.fail("operands do not broadcast");
  if (integers)
    return convertIntegerWhere(n);
  n.setOutput(0, graph::SelectOp::create(n.builder, n.loc, n.f32Tensor(*shape), condition, a, b));
  return success();
}

/// Cast (and CastLike) of input 0 to ONNX type `to`.
LogicalResult castTo(NodeImporter &n, int64_t to) {
  Value x = n.input(0);
  Type element;
  // float64 is computed as float32, as float64 inputs and initializers are
  // read (the importer warns where a model casts to it).
  if (to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE)
    element = n.builder.getF32Type();
  else if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32 || to == onnx::TensorProto::BOOL)
    element = n.builder.getI64Type();
  else
    return n.fail("casts to ONNX type " + Twine(to) + " are not supported (FLOAT, DOUBLE, INT64, INT32 and BOOL are)");
  auto type = tensorOf(shapeOf(x), element);
  if (DenseElementsAttr value = n.constantInput(0)) {
    DenseElementsAttr folded;
    if (to == onnx::TensorProto::BOOL && value.getElementType().isF32())
      folded = value.mapValues(element, [](const APFloat &v) { return APInt(64, v.isZero() ? 0 : 1); });
    else if (to == onnx::TensorProto::BOOL)
      folded = value.mapValues(element, [](const APInt &v) { return APInt(64, v.isZero() ? 0 : 1); });
    else if (value.getElementType() == element)
      folded = value;
    else if (element.isF32())
      folded = value.mapValues(element, [](const APInt &v) {
        return APFloat(static_cast<float>(v.getSExtValue())).bitcastToAPInt();
      });
    else
      folded = value.mapValues(element, [](const APFloat &v) {
        return APInt(64, fsdpc::runtime::truncateToInt64(v.convertToFloat()), /*isSigned=*/true);
      });
    n.setFoldedOutput(0, folded);
    return success();
  }
  if (to == onnx::TensorProto::BOOL && isF32(x))
    return convertFloatToBool(n);
  if (to == onnx::TensorProto::BOOL) {
    n.setOutput(0, graph::CastOp::create(n.builder, n.loc, type, x, n.builder.getBoolAttr(true)));
    return success();
  }
  n.setOutput(0, x.getType() == type ? x : graph::CastOp::create(n.builder, n.loc, type, x).getResult());
  return success();
}

/// CastLike: a Cast to the ONNX element type of input 1, which the model
/// declares or shape inference finds. Every float type is f32 here, as the
/// model's float inputs and initializers are.
LogicalResult convertCastLike(NodeImporter &n) {
  if (!n.input(0) || !n.input(1))
    return n.fail("needs two inputs");
  std::optional<int32_t> to = n.onnxElementType(1);
  if (!to)
    return n.fail("the element type of input 1 is not known (run ONNX shape inference on the model)");
  return castTo(n, isOnnxFloatType(*to) ? onnx::TensorProto::FLOAT : *to);
}

template <bool Mean> LogicalResult convertMeanOrSum(NodeImporter &n) { return convertVariadicSum(n, Mean); }

LogicalResult convertCast(NodeImporter &n) { return castTo(n, n.intAttr("to", 0)); }

/// Range of constant bounds (position ids) folds, into at most
/// kMaxRangeElements values: a model's ranges are position ids, and the
/// fold holds every value at compile time.
constexpr int64_t kMaxRangeElements = int64_t(1) << 24;

LogicalResult convertRange(NodeImporter &n) {
  DenseElementsAttr start = n.constantInput(0), limit = n.constantInput(1), delta = n.constantInput(2);
  if (!start || !limit || !delta)
    return n.fail("start, limit and delta must be constants");
  Type element = start.getElementType();
  auto tooMany = [&](const std::string &count) {
    return n.fail("folds into " + count + " elements, more than 2^24");
  };
  if (element.isInteger(64)) {
    int64_t s0 = (*constantInts(n, 0))[0], l = (*constantInts(n, 1))[0], d = (*constantInts(n, 2))[0];
    if (d == 0)
      return n.fail("delta is zero");
    // ONNX's max(ceil((limit - start) / delta), 0), in unsigned arithmetic:
    // limit - start may not fit an int64.
    uint64_t count = 0;
    if (d > 0 ? s0 < l : s0 > l) {
      uint64_t span = d > 0 ? uint64_t(l) - uint64_t(s0) : uint64_t(s0) - uint64_t(l);
      uint64_t step = d > 0 ? uint64_t(d) : 0 - uint64_t(d);
      count = span / step + (span % step != 0);
    }
    if (count > uint64_t(kMaxRangeElements))
      return tooMany(std::to_string(count));
    // Every value lies between start and limit, so none overflows.
    SmallVector<int64_t> values;
    for (uint64_t i = 0; i < count; ++i)
      values.push_back(int64_t(uint64_t(s0) + i * uint64_t(d)));
    n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf({static_cast<int64_t>(count)}, element),
                                                ArrayRef<int64_t>(values)));
    return success();
  }
  float s0 = start.getSplatValue<float>(), l = limit.getSplatValue<float>(), d = delta.getSplatValue<float>();
  if (d == 0)
    return n.fail("delta is zero");
  // In float, as ONNX computes it.
  const float elements = std::ceil((l - s0) / d);
  if (!std::isfinite(elements))
    return n.fail("start, limit and delta must be finite");
  if (elements > float(kMaxRangeElements))
    return tooMany(llvm::formatv("{0:e}", elements).str());
  const int64_t count = std::max<int64_t>(0, static_cast<int64_t>(elements));
  SmallVector<float> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(s0 + i * d);
  n.setFoldedOutput(0, DenseElementsAttr::get(n.f32Tensor({count}), ArrayRef<float>(values)));
  return success();
}

/// EyeLike: the input's (static) shape is all it reads, so it folds to a
/// constant, f32 or i64 by `dtype` or else the input's ONNX type.
LogicalResult convertEyeLike(NodeImporter &n) {
  ArrayRef<int64_t> shape = shapeOf(n.input(0));
  if (shape.size() != 2)
    return n.fail("input must be 2-D, got " + Twine(shapeString(shape)));
  const int64_t k = n.intAttr("k", 0);
  std::optional<int32_t> type = n.onnxElementType(0);
  if (const onnx::AttributeProto *dtype = n.attribute("dtype"))
    type = static_cast<int32_t>(dtype->i());
  const bool isFloat = type ? isOnnxFloatType(*type) : isF32(n.input(0));
  SmallVector<int64_t> ones;
  for (int64_t row = 0; row < shape[0]; ++row)
    for (int64_t col = 0; col < shape[1]; ++col)
      ones.push_back(col - row == k);
  if (isFloat) {
    SmallVector<float> values(ones.begin(), ones.end());
    n.setFoldedOutput(0, DenseElementsAttr::get(n.f32Tensor(shape), ArrayRef<float>(values)));
  } else {
    n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(shape, n.builder.getI64Type()), ArrayRef<int64_t>(ones)));
  }
  return success();
}

/// ConstantOfShape with a constant shape folds.
LogicalResult convertConstantOfShape(NodeImporter &n) {
  std::optional<SmallVector<int64_t>> shape = constantInts(n, 0);
  if (!shape)
    return n.fail("the shape must be a constant");
  DenseElementsAttr fill;
  if (const onnx::AttributeProto *attr = n.attribute("value")) {
    std::string error;
    fill = tensorProtoToAttr(attr->t(), ".", n.builder, error);
    if (!fill)
      return n.fail(error);
  } else {
    fill = DenseElementsAttr::get(n.f32Tensor({1}), 0.0f);
  }
  n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf(*shape, fill.getElementType()), fill.getValues<Attribute>()[0]));
  return success();
}

/// Equal of constants (mask and shape comparisons) folds to 0/1.
/// IsNaN: folds on a constant; otherwise graph.is_nan, a runtime mask.
LogicalResult convertIsNaN(NodeImporter &n) {
  Value x = n.input(0);
  if (!x || !isF32(x))
    return n.fail("needs a float input");
  if (DenseElementsAttr value = n.constantInput(0)) {
    n.setFoldedOutput(0, value.mapValues(n.builder.getI64Type(),
                                         [](const APFloat &v) { return APInt(64, v.isNaN() ? 1 : 0); }));
    return success();
  }
  n.setOutput(0, graph::IsNanOp::create(n.builder, n.loc, tensorOf(shapeOf(x), n.builder.getI64Type()), x));
  return success();
}

/// Logical not of a constant boolean (masks); fsdpc has no runtime booleans.
LogicalResult convertNot(NodeImporter &n) {
  DenseElementsAttr value = n.constantInput(0);
  if (!value || !value.getElementType().isInteger(64))
    return convertRuntimeLogic(n, LogicOp::kNot);
  n.setFoldedOutput(0, value.mapValues(value.getElementType(), [](const APInt &v) { return APInt(64, v.isZero()); }));
  return success();
}

/// LayerNormalization (opset 17): graph.layer_norm over the trailing
/// dimensions from `axis`. Scale and bias that only broadcast to those
/// dimensions are broadcast first; a missing bias is zero.
LogicalResult convertLayerNormalization(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 2)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size(), axis = normalizeAxis(n.intAttr("axis", -1), rank);
  if (axis < 0 || axis >= rank)
    return n.fail("axis is out of range");
  SmallVector<int64_t> normalized(shape.begin() + axis, shape.end()), kept(shape.begin(), shape.end());
  std::fill(kept.begin() + axis, kept.end(), 1);
  auto affineType = n.f32Tensor(normalized);
  auto toNormalizedShape = [&](Value v, StringRef what) -> FailureOr<Value> {
    if (!isF32(v))
      return n.fail(what + " must be a float tensor");
    FailureOr<SmallVector<int64_t>> joined = graph::broadcastShapes(shapeOf(v), normalized);
    if (failed(joined) || ArrayRef<int64_t>(*joined) != ArrayRef<int64_t>(normalized))
      return n.fail(what + " does not broadcast to the normalised dimensions");
    if (v.getType() == affineType)
      return v;
    return graph::BroadcastToOp::create(n.builder, n.loc, affineType, v).getResult();
  };
  FailureOr<Value> scale = toNormalizedShape(n.input(1), "Scale");
  if (failed(scale))
    return failure();
  FailureOr<Value> bias = n.hasInput(2)
                              ? toNormalizedShape(n.input(2), "B")
                              : FailureOr<Value>(graph::ConstantOp::create(n.builder, n.loc, affineType,
                                                                           DenseElementsAttr::get(affineType, 0.0f))
                                                     .getResult());
  if (failed(bias))
    return failure();
  auto statistics = n.f32Tensor(kept);
  auto norm = graph::LayerNormOp::create(n.builder, n.loc, n.f32Tensor(shape), statistics, statistics, x, *scale, *bias,
                                         n.builder.getI64IntegerAttr(axis),
                                         n.builder.getF64FloatAttr(n.floatAttr("epsilon", 1e-5f)));
  n.setOutput(0, norm.getResult());
  n.setOutput(1, norm.getMean());
  n.setOutput(2, norm.getInvStdDev());
  return success();
}

/// Gelu (opset 20), exact or tanh-approximated.
LogicalResult convertGelu(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  std::string approximate = n.stringAttr("approximate", "none");
  std::optional<graph::GeluApproximation> parsed = graph::symbolizeGeluApproximation(approximate);
  if (!parsed)
    return n.fail("approximate must be none or tanh, got '" + approximate + "'");
  n.setOutput(0, graph::GeluOp::create(n.builder, n.loc, n.input(0),
                                       graph::GeluApproximationAttr::get(n.builder.getContext(), *parsed)));
  return success();
}

/// Trilu: constants (masks) fold; float tensors get graph.trilu.
LogicalResult convertTrilu(NodeImporter &n) {
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 2)
    return n.fail("input must have rank 2 or more");
  int64_t k = 0;
  if (n.hasInput(1)) {
    std::optional<SmallVector<int64_t>> given = constantInts(n, 1);
    if (!given || given->size() != 1)
      return n.fail("k must be a constant scalar");
    k = (*given)[0];
  }
  bool upper = n.intAttr("upper", 1);
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  auto keep = [&](int64_t i) {
    int64_t r = (i / cols) % rows, c = i % cols;
    return upper ? c - r >= k : c - r <= k;
  };
  if (DenseElementsAttr value = n.constantInput(0)) {
    SmallVector<Attribute> elements(value.getValues<Attribute>());
    Attribute zero = n.builder.getZeroAttr(value.getElementType());
    for (auto [i, element] : llvm::enumerate(elements))
      if (!keep(i))
        element = zero;
    n.setFoldedOutput(0, DenseElementsAttr::get(value.getType(), elements));
    return success();
  }
  if (!isF32(x))
    return n.fail("integer inputs are supported when constant (they fold)");
  n.setOutput(0, graph::TriluOp::create(n.builder, n.loc, x, n.builder.getI64IntegerAttr(k), n.builder.getBoolAttr(upper)));
  return success();
}

/// Dropout: the identity in inference mode or at ratio 0; in training mode
/// a seeded graph.dropout whose seed is derived from the node's name.
LogicalResult convertDropout(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  double ratio = n.floatAttr("ratio", 0.5f);
  bool training = false;
  if (n.hasInput(2)) {
    std::optional<SmallVector<int64_t>> mode = constantInts(n, 2);
    if (!mode || mode->size() != 1)
      return n.fail("training_mode must be a constant");
    training = (*mode)[0] != 0;
  }
  if (n.hasInput(1) && training) {
    if (DenseElementsAttr value = n.constantInput(1))
      ratio = value.getSplatValue<APFloat>().convertToDouble();
    else if (std::optional<float> initial = n.scalarInitializer(1))
      ratio = *initial;
    else
      return n.fail("ratio must be a constant");
  }
  if (training && (ratio < 0 || ratio >= 1))
    return n.fail("ratio must be in [0, 1), got " + Twine(std::to_string(ratio)));
  if (n.wantsOutput(1)) {
    if (training && ratio != 0)
      return n.fail("the mask output is not supported in training mode");
    auto maskType = tensorOf(shapeOf(n.input(0)), n.builder.getI64Type());
    n.setFoldedOutput(1, DenseElementsAttr::get(maskType, n.builder.getI64IntegerAttr(1).getValue()));
  }
  Value x = n.input(0);
  if (!training || ratio == 0) {
    n.setOutput(0, x);
    return success();
  }
  uint64_t seed = 1469598103934665603ull;
  for (char c : n.node.name())
    seed = (seed ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  n.setOutput(0, graph::DropoutOp::create(n.builder, n.loc, x, n.builder.getF64FloatAttr(ratio),
                                          n.builder.getI64IntegerAttr(static_cast<int64_t>(seed >> 1))));
  return success();
}

/// ArgMax and ArgMin of a float tensor: graph.arg_max / arg_min keep the
/// axis as 1, a reshape drops it without keepdims.
template <bool IsMax> LogicalResult convertArgReduce(NodeImporter &n) {
  Value x = n.input(0);
  if (!isI64(x) && failed(requireFloatInputs(n, 1)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(x);
  const int64_t rank = shape.size(), axis = normalizeAxis(n.intAttr("axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return n.fail("axis " + Twine(n.intAttr("axis", 0)) + " is outside the input's rank " + Twine(rank));
  if (shape[axis] == 0)
    return n.fail("axis " + Twine(axis) + " is empty");
  SmallVector<int64_t> kept(shape);
  kept[axis] = 1;
  auto type = tensorOf(kept, n.builder.getI64Type());
  auto last = n.builder.getBoolAttr(n.intAttr("select_last_index", 0) != 0);
  Value index = IsMax ? graph::ArgMaxOp::create(n.builder, n.loc, type, x, n.builder.getI64IntegerAttr(axis), last)
                            .getResult()
                      : graph::ArgMinOp::create(n.builder, n.loc, type, x, n.builder.getI64IntegerAttr(axis), last)
                            .getResult();
  if (n.intAttr("keepdims", 1) == 0) {
    kept.erase(kept.begin() + axis);
    index = reshape(n, index, kept);
  }
  n.setOutput(0, index);
  return success();
}

/// The shape of a static tensor is a compile-time constant.
LogicalResult convertShape(NodeImporter &n) {
  ArrayRef<int64_t> shape = shapeOf(n.input(0));
  int64_t rank = shape.size();
  int64_t start = normalizeAxis(n.intAttr("start", 0), rank), end = n.attribute("end") ? normalizeAxis(n.intAttr("end", rank), rank) : rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  SmallVector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf({end - start}, n.builder.getI64Type()), ArrayRef<int64_t>(dims)));
  return success();
}

/// Size: the element count, known from the static shape.
LogicalResult convertSize(NodeImporter &n) {
  int64_t count = 1;
  for (int64_t d : shapeOf(n.input(0)))
    count *= d;
  n.setFoldedOutput(0, DenseElementsAttr::get(tensorOf({}, n.builder.getI64Type()), ArrayRef<int64_t>{count}));
  return success();
}

const OpPattern kPatterns[] = {
    {"Abs", 6, convertAbs},
    {"Add", 7, convertBinary<graph::AddOp>},
    {"ArgMax", 1, convertArgReduce<true>},
    {"ArgMin", 1, convertArgReduce<false>},
    {"AveragePool", 7, convertAveragePool, "as gathered patches: K times the input's memory"},
    {"Conv", 1, convertConv, "as gathered patches and a matmul: K times the input's memory"},
    {"ConvTranspose", 1, convertConvTranspose, "as a matmul and a scatter of its patches: K times the input's memory"},
    {"MaxPool", 1, convertMaxPool, "no Indices output; as gathered patches"},
    {"Clip", 6, convertClip, "constant min and max"},
    {"Clip", 11, convertClip, "constant min and max"},
    {"CumSum", 11, convertCumSum, "constant axis"},
    {"Elu", 6, convertElu},
    {"GlobalAveragePool", 1, convertGlobalAveragePool},
    {"LRN", 1, convertLrn, "bias > 0; as size slices of the squares"},
    {"HardSigmoid", 6, convertHardSigmoid},
    {"HardSwish", 14, convertHardSwish},
    {"BatchNormalization", 9, convertBatchNormalization,
     "training mode updates input_mean and input_var in place only where they are initializers"},
    {"InstanceNormalization", 6, convertInstanceNormalization},
    {"GroupNormalization", 18, convertGroupNormalization, "scale and bias per group (opset 18)"},
    {"GroupNormalization", 21, convertGroupNormalization, "scale and bias per channel; float statistics"},
    {"LeakyRelu", 6, convertLeakyRelu},
    {"Mish", 18, convertMish},
    {"Softplus", 1, convertSoftplus},
    {"Tile", 6, convertTile, "constant repeats"},
    {"Cast", 6, convertCast, "to FLOAT, DOUBLE (computed as f32), INT64, INT32 or BOOL"},
    {"CastLike", 15, convertCastLike, "input 1 of a float type (held as f32), INT64, INT32 or BOOL"},
    {"Celu", 12, convertCelu},
    {"Concat", 4, convertConcat},
    {"Constant", 9, convertConstant},
    {"ConstantOfShape", 9, convertConstantOfShape, "constant shape"},
    {"Div", 7, convertBinary<graph::DivOp>},
    {"Einsum", 12, convertEinsum, "float operands of equal label sizes (no broadcasting)"},
    {"And", 7, convertLogic<LogicOp::kAnd>},
    {"DepthToSpace", 1, convertDepthToSpace},
    {"DepthToSpace", 11, convertDepthToSpace, "modes DCR and CRD"},
    {"Equal", 7, convertComparison<std::equal_to<>, graph::ComparePredicate::eq>,
     "float or integer inputs; no gradient (a mask)"},
    {"Dropout", 7, convertDropout},
    {"Dropout", 12, convertDropout},
    {"Erf", 9, convertUnary<graph::ErfOp>},
    {"Sin", 7, convertUnary<graph::SinOp>},
    {"Cos", 7, convertUnary<graph::CosOp>},
    {"Tan", 7, convertTan},
    {"Asin", 7, convertAsin},
    {"Acos", 7, convertAcos},
    {"Atan", 7, convertUnary<graph::AtanOp>},
    {"Sinh", 9, convertSinh},
    {"Cosh", 9, convertCosh},
    {"Asinh", 9, convertAsinh},
    {"Acosh", 9, convertAcosh},
    {"Atanh", 9, convertAtanh},
    {"Floor", 6, convertUnary<graph::FloorOp>, "no gradient (piecewise constant)"},
    {"Ceil", 6, convertUnary<graph::CeilOp>, "no gradient (piecewise constant)"},
    {"Round", 11, convertUnary<graph::RoundOp>, "no gradient (piecewise constant)"},
    {"Mod", 10, convertMod},
    {"EyeLike", 9, convertEyeLike, "folds (static shapes)"},
    {"OneHot", 9, convertOneHot, "constant depth and values; integer values within 2^24"},
    {"OneHot", 11, convertOneHot, "constant depth and values; integer values within 2^24"},
    {"MeanVarianceNormalization", 9, convertMeanVarianceNormalization},
    {"MeanVarianceNormalization", 13, convertMeanVarianceNormalization},
    {"LpNormalization", 1, convertLpNormalization, "p 1 or 2"},
    {"ReduceProd", 1, convertReduceProd, "float tensors at run time; integer ones when constant (fold)"},
    {"TopK", 1, convertTopK, "float input; constant K up to 64"},
    {"TopK", 10, convertTopK, "float input; constant K up to 64"},
    {"TopK", 11, convertTopK, "float input; constant K up to 64; sorted or not, the values come sorted"},
    {"LSTM", 7, convertLstm, "unrolled; default activations; no clip, input_forget or uneven sequence_lens"},
    {"LSTM", 14, convertLstm, "unrolled; default activations; no clip, input_forget or uneven sequence_lens"},
    {"GRU", 7, convertGru, "unrolled; default activations; no clip or uneven sequence_lens"},
    {"GRU", 14, convertGru, "unrolled; default activations; no clip or uneven sequence_lens"},
    {"RNN", 7, convertRnn, "unrolled; tanh, relu or sigmoid; no clip or uneven sequence_lens"},
    {"RNN", 14, convertRnn, "unrolled; tanh, relu or sigmoid; no clip or uneven sequence_lens"},
    {"GatherND", 11, convertGatherND, "float data (or constant data and indices: folds)"},
    {"GatherND", 12, convertGatherND, "float data (or constant data and indices: folds); batch_dims"},
    {"Scatter", 9, convertScatterElements, "as ScatterElements"},
    {"ScatterElements", 11, convertScatterElements,
     "float data (or integer data with constant indices); indices of the data's shape off the axis; as a mask of "
     "indices x axis size"},
    {"ScatterElements", 16, convertScatterElements,
     "float data (or integer data with constant indices and no reduction); indices of the data's shape off the "
     "axis; reductions none and add; as a mask of indices x axis size"},
    {"Exp", 6, convertUnary<graph::ExpOp>},
    {"Expand", 8, convertExpand, "constant target shape"},
    {"Flatten", 1, convertFlatten},
    {"Gather", 1, convertGather},
    {"GatherElements", 11, convertGatherElements,
     "folds on constants; on float data as a one-hot mask of indices x axis size, runtime indices in [0, size); "
     "on integer data one gather at flat positions"},
    {"Gelu", 20, convertGelu},
    {"GlobalMaxPool", 1, convertGlobalMaxPool},
    {"Greater", 7, convertComparison<std::greater<>, graph::ComparePredicate::gt>,
     "float or integer inputs; no gradient (a mask)"},
    {"GreaterOrEqual", 12, convertComparison<std::greater_equal<>, graph::ComparePredicate::ge>,
     "float or integer inputs; no gradient (a mask)"},
    {"Hardmax", 1, convertHardmax},
    {"Hardmax", 13, convertHardmax},
    {"IsInf", 10, convertIsInf},
    {"Gemm", 7, convertGemm},
    {"Identity", 1, convertIdentity},
    {"IsNaN", 9, convertIsNaN},
    {"LayerNormalization", 17, convertLayerNormalization},
    {"Less", 7, convertComparison<std::less<>, graph::ComparePredicate::lt>,
     "float or integer inputs; no gradient (a mask)"},
    {"LessOrEqual", 12, convertComparison<std::less_equal<>, graph::ComparePredicate::le>,
     "float or integer inputs; no gradient (a mask)"},
    {"Log", 6, convertUnary<graph::LogOp>},
    {"LogSoftmax", 1, convertSoftmax1<graph::LogSoftmaxOp>},
    {"LogSoftmax", 13, convertSoftmax13<graph::LogSoftmaxOp>},
    {"MatMul", 1, convertMatMul},
    {"Max", 8, convertMinMax<true>, "all float or all integer inputs; constant ones fold"},
    {"Min", 8, convertMinMax<false>, "all float or all integer inputs; constant ones fold"},
    {"Mean", 8, convertMeanOrSum<true>, "float inputs"},
    {"Mul", 7, convertBinary<graph::MulOp>},
    {"Neg", 6, convertUnary<graph::NegOp>},
    {"Not", 1, convertNot},
    {"Or", 7, convertLogic<LogicOp::kOr>},
    {"PRelu", 9, convertPRelu, "a slope that broadcasts to the input"},
    {"Pad", 2, convertPad, "modes constant, reflect and edge"},
    {"Pad", 11, convertPad, "constant pads, value and axes; modes constant, reflect, edge and wrap"},
    {"Pow", 7, convertPow, "float exponent tensor or integer constant"},
    {"Range", 11, convertRange, "constant start, limit and delta"},
    {"Reciprocal", 6, convertUnary<graph::ReciprocalOp>},
    {"ReduceL1", 1, convertReduction<ComposedReduction::kL1>},
    {"ReduceL2", 1, convertReduction<ComposedReduction::kL2>},
    {"ReduceLogSum", 1, convertReduction<ComposedReduction::kLogSum>},
    {"ReduceLogSumExp", 1, convertReduction<ComposedReduction::kLogSumExp>},
    {"ReduceMax", 1, convertReduction<ComposedReduction::kMax>, "float input"},
    {"ReduceMean", 1, convertReduce<true>},
    {"ReduceMin", 1, convertReduction<ComposedReduction::kMin>, "float input"},
    {"ReduceSum", 1, convertReduce<false>},
    {"ReduceSumSquare", 1, convertReduction<ComposedReduction::kSumSquare>},
    {"Relu", 6, convertUnary<graph::ReluOp>},
    {"Reshape", 5, convertReshape, "constant target shape"},
    {"GridSample", 16, convertGridSample,
     "4-D input; modes bilinear and nearest (not bicubic); as 1 or 4 gathers of runtime rows"},
    {"Resize", 10, convertResize, "constant scales or sizes; as gathers of 1, 2 or 4 taps per resized axis"},
    {"Resize", 11, convertResize, "constant scales, sizes and roi; as gathers of 1, 2 or 4 taps per resized axis"},
    {"Size", 1, convertSize, "folds (static shapes)"},
    {"ScatterND", 11, convertScatterND,
     "float data (or integer data with constant indices and no reduction); reductions none and add; runtime indices "
     "only into the first dimension"},
    {"Shape", 1, convertShape},
    {"Selu", 6, convertSelu},
    {"Shrink", 9, convertShrink},
    {"Sigmoid", 6, convertUnary<graph::SigmoidOp>},
    {"Sign", 9, convertSign},
    {"Slice", 10, convertSlice, "constant starts, ends, axes and steps"},
    {"Softmax", 1, convertSoftmax1<graph::SoftmaxOp>},
    {"Softmax", 13, convertSoftmax13<graph::SoftmaxOp>},
    {"SoftmaxCrossEntropyLoss", 12, convertSoftmaxCrossEntropyLoss,
     "int64 labels; with class weights or reduction none, a one-hot mask of the scores' size"},
    {"NegativeLogLikelihoodLoss", 12, convertNegativeLogLikelihoodLoss,
     "int64 labels; as a one-hot mask of the input's size"},
    {"Split", 2, convertSplit, "constant split sizes"},
    {"SplitToSequence", 11, convertSplitToSequence, "constant split; sequences of a length known at import"},
    {"SequenceAt", 11, convertSequenceAt, "constant position"},
    {"SequenceConstruct", 11, convertSequenceConstruct},
    {"SequenceLength", 11, convertSequenceLength, "folds"},
    {"ConcatFromSequence", 11, convertConcatFromSequence},
    {"Softsign", 1, convertSoftsign},
    {"SpaceToDepth", 1, convertSpaceToDepth},
    {"Sqrt", 6, convertUnary<graph::SqrtOp>},
    {"Squeeze", 1, convertSqueeze},
    {"Sub", 7, convertBinary<graph::SubOp>},
    {"Sum", 8, convertMeanOrSum<false>, "float inputs"},
    {"Tanh", 6, convertUnary<graph::TanhOp>},
    {"ThresholdedRelu", 10, convertThresholdedRelu},
    {"Transpose", 1, convertTranspose},
    {"Trilu", 14, convertTrilu, "float input, or integer constant (folds); constant k"},
    {"Unsqueeze", 1, convertUnsqueeze},
    {"Upsample", 7, convertUpsample, "constant scales; as gathers of 1 or 2 taps per resized axis"},
    {"Where", 9, convertWhere},
    {"Xor", 7, convertLogic<LogicOp::kXor>},
};

} // namespace

std::vector<fsdpc::SupportedOnnxOp> fsdpc::supportedOnnxOps() {
  std::vector<SupportedOnnxOp> ops;
  for (const OpPattern &pattern : kPatterns)
    ops.push_back({pattern.opType.str(), pattern.sinceVersion, pattern.limits.str()});
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
