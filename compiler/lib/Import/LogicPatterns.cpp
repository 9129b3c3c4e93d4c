//===- LogicPatterns.cpp - comparisons, masks and the ops that choose by them ===//
//
// ONNX's comparisons on runtime tensors become graph.compare (an i64 mask,
// no gradient); constants still fold where the op's pattern is keyed
// (OnnxOpPatterns.cpp). The boolean ops on runtime masks are i64 arithmetic
// on their 0/1 values: And is their product, Or a sum unequal to 0, Xor two
// values unequal, Not a value equal to 0. The piecewise ops that choose by
// the input's sign (Sign, ThresholdedRelu, Shrink, PRelu) are graph.select
// of their branches by a mask, so the gradient of the chosen branch flows
// where it was chosen, as torch's does. Where between integer tensors is
// arithmetic too.
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "Compose.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"

#include <limits>

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

/// The mask's 0/1 values as f32 (exact).
Value maskAsFloat(NodeImporter &n, Value mask) {
  return graph::CastOp::create(n.builder, n.loc, n.f32Tensor(shapeOf(mask)), mask).getResult();
}

/// `x <predicate> scalar`.
Value compareWith(Compose &b, Value x, float scalar, graph::ComparePredicate predicate) {
  return b.compare(x, b.constant(scalar), predicate);
}

/// `mask <predicate> 0`, for i64 0/1 masks.
Value compareMaskWithZero(Compose &b, Value mask, graph::ComparePredicate predicate) {
  return b.compare(mask, b.integer(0), predicate);
}

/// Input i of a boolean op: a runtime mask (i64).
FailureOr<Value> maskInput(NodeImporter &n, int i) {
  Value v = n.input(i);
  if (!isI64(v))
    return n.fail("input " + Twine(i) + " must be a boolean tensor");
  return v;
}

/// An i64 0/1 mask of where `index` (a tensor with a dimension of 1 at
/// `axis`, of integers or of integral floats) names each position
/// 0 .. depth-1 along `axis` of a rank-`rank` result. With `wrapNegative`,
/// -depth .. -1 name them too, counted from the end; an index outside
/// [-depth, depth) names nothing (two comparisons, against the positions
/// and the positions - depth, which never both hold: their sum is the mask).
Value positionMask(NodeImporter &n, Compose &b, Value index, int64_t depth, int64_t axis, int64_t rank,
                   bool wrapNegative) {
  SmallVector<int64_t> positionShape(rank, 1);
  positionShape[axis] = depth;
  const bool floatIndex = isF32(index);
  auto positions = [&](int64_t offset) -> Value {
    Type element = floatIndex ? Type(n.builder.getF32Type()) : Type(n.builder.getI64Type());
    auto type = RankedTensorType::get(positionShape, element);
    SmallVector<int64_t> ints;
    SmallVector<float> floats;
    for (int64_t i = 0; i < depth; ++i) {
      ints.push_back(i + offset);
      floats.push_back(static_cast<float>(i + offset));
    }
    DenseElementsAttr value = floatIndex ? DenseElementsAttr::get(type, ArrayRef<float>(floats))
                                         : DenseElementsAttr::get(type, ArrayRef<int64_t>(ints));
    return graph::ConstantOp::create(n.builder, n.loc, type, value);
  };
  Value forward = positions(0);
  Value fromStart = b.compare(index, forward, graph::ComparePredicate::eq);
  if (!wrapNegative)
    return fromStart;
  Value backward = positions(-depth);
  Value fromEnd = b.compare(index, backward, graph::ComparePredicate::eq);
  return b.add(fromStart, fromEnd);
}

} // namespace

LogicalResult fsdpc::import::convertRuntimeComparison(NodeImporter &n, graph::ComparePredicate predicate) {
  Value lhs = n.input(0), rhs = n.input(1);
  if (!lhs || !rhs)
    return n.fail("needs two inputs");
  if (isI64(lhs) != isI64(rhs))
    return n.fail("inputs must both be float or both be integer tensors");
  if (failed(graph::broadcastShapes(shapeOf(lhs), shapeOf(rhs))))
    return n.fail("operands " + Twine(shapeString(shapeOf(lhs))) + " and " + shapeString(shapeOf(rhs)) +
                  " do not broadcast");
  Compose b{n};
  n.setOutput(0, b.compare(lhs, rhs, predicate));
  return success();
}

LogicalResult fsdpc::import::convertRuntimeLogic(NodeImporter &n, LogicOp op) {
  Compose b{n};
  FailureOr<Value> lhs = maskInput(n, 0);
  if (failed(lhs))
    return failure();
  if (op == LogicOp::kNot) {
    n.setOutput(0, compareMaskWithZero(b, *lhs, graph::ComparePredicate::eq));
    return success();
  }
  FailureOr<Value> rhs = maskInput(n, 1);
  if (failed(rhs))
    return failure();
  if (failed(graph::broadcastShapes(shapeOf(*lhs), shapeOf(*rhs))))
    return n.fail("operands do not broadcast");
  switch (op) {
  case LogicOp::kAnd:
    n.setOutput(0, b.mul(*lhs, *rhs));
    break;
  case LogicOp::kOr:
    n.setOutput(0, compareMaskWithZero(b, b.add(*lhs, *rhs), graph::ComparePredicate::ne));
    break;
  case LogicOp::kXor:
    n.setOutput(0, b.compare(*lhs, *rhs, graph::ComparePredicate::ne));
    break;
  case LogicOp::kNot:
    break;
  }
  return success();
}

LogicalResult fsdpc::import::convertIntegerWhere(NodeImporter &n) {
  // b + c (a - b) with c 0 or 1: exact in two's complement, which wraps
  // a - b and the sum back.
  Compose b{n};
  Value condition = n.input(0), lhs = n.input(1), rhs = n.input(2);
  n.setOutput(0, b.add(rhs, b.mul(condition, b.sub(lhs, rhs))));
  return success();
}

LogicalResult fsdpc::import::convertFloatToBool(NodeImporter &n) {
  Compose b{n};
  n.setOutput(0, compareWith(b, n.input(0), 0.0f, graph::ComparePredicate::ne));
  return success();
}

LogicalResult fsdpc::import::convertIsInf(NodeImporter &n) {
  const bool positive = n.intAttr("detect_positive", 1) != 0, negative = n.intAttr("detect_negative", 1) != 0;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return composeUnary(n, [&](Compose &b, Value x) {
    if (positive && negative) // |x| = inf; |NaN| is NaN, which equals nothing
      return compareWith(b, b.abs(x), kInf, graph::ComparePredicate::eq);
    if (positive || negative)
      return compareWith(b, x, positive ? kInf : -kInf, graph::ComparePredicate::eq);
    return compareWith(b, x, -kInf, graph::ComparePredicate::lt); // detects nothing: x < -inf never holds
  });
}

LogicalResult fsdpc::import::convertSign(NodeImporter &n) {
  // 1 above 0, -1 below, and x * 0 between: 0 at +-0 and NaN at NaN, as
  // numpy's sign. Every branch is constant in x, so the gradient is 0.
  return composeUnary(n, [](Compose &b, Value x) {
    Value positive = compareWith(b, x, 0.0f, graph::ComparePredicate::gt);
    Value negative = compareWith(b, x, 0.0f, graph::ComparePredicate::lt);
    Value zeroOrNaN = b.mul(x, b.constant(0.0f));
    Value belowOrAt = b.select(negative, b.constant(-1.0f), zeroOrNaN);
    return b.select(positive, b.constant(1.0f), belowOrAt);
  });
}

LogicalResult fsdpc::import::convertThresholdedRelu(NodeImporter &n) {
  const float alpha = n.floatAttr("alpha", 1.0f);
  return composeUnary(n, [&](Compose &b, Value x) {
    Value above = compareWith(b, x, alpha, graph::ComparePredicate::gt);
    return b.select(above, x, b.constant(0.0f));
  });
}

LogicalResult fsdpc::import::convertShrink(NodeImporter &n) {
  const float lambd = n.floatAttr("lambd", 0.5f), bias = n.floatAttr("bias", 0.0f);
  // x + bias below -lambd, x - bias above lambd, 0 between (torch's
  // hardshrink is bias 0, softshrink bias lambd).
  return composeUnary(n, [&](Compose &b, Value x) {
    Value below = compareWith(b, x, -lambd, graph::ComparePredicate::lt);
    Value above = compareWith(b, x, lambd, graph::ComparePredicate::gt);
    Value upper = b.select(above, b.sub(x, b.constant(bias)), b.constant(0.0f));
    return b.select(below, b.add(x, b.constant(bias)), upper);
  });
}

LogicalResult fsdpc::import::convertPRelu(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 2)))
    return failure();
  Value x = n.input(0), slope = n.input(1);
  FailureOr<SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(x), shapeOf(slope));
  if (failed(shape) || ArrayRef<int64_t>(*shape) != shapeOf(x))
    return n.fail("slope " + Twine(shapeString(shapeOf(slope))) + " does not broadcast to the input " +
                  shapeString(shapeOf(x)));
  Compose b{n};
  // x above 0, slope x elsewhere: torch's prelu, whose gradient at 0 is
  // the slope's side.
  Value positive = compareWith(b, x, 0.0f, graph::ComparePredicate::gt);
  n.setOutput(0, b.select(positive, x, b.mul(slope, x)));
  return success();
}

LogicalResult fsdpc::import::convertOneHot(NodeImporter &n) {
  DenseElementsAttr depthValue = n.constantInput(1), values = n.constantInput(2);
  if (!depthValue || depthValue.getNumElements() != 1)
    return n.fail("depth must be a constant of one element");
  if (!values || values.getNumElements() != 2)
    return n.fail("values must be a constant [off_value, on_value]");
  const int64_t depth = depthValue.getElementType().isInteger(64)
                            ? depthValue.getValues<int64_t>()[0]
                            : static_cast<int64_t>(depthValue.getValues<float>()[0]);
  if (depth < 1)
    return n.fail("depth must be at least 1, got " + Twine(depth));
  Value indices = n.input(0);
  ArrayRef<int64_t> indexShape = shapeOf(indices);
  const int64_t rank = static_cast<int64_t>(indexShape.size()) + 1;
  FailureOr<int64_t> normalized = axisIn(n, n.intAttr("axis", -1), rank);
  if (failed(normalized))
    return failure();
  const int64_t axis = *normalized;
  SmallVector<int64_t> inserted(indexShape);
  inserted.insert(inserted.begin() + axis, 1);
  Compose b{n};
  Value index = b.reshape(indices, inserted);
  // Float indices are truncated toward 0 first, as ONNX casts them to
  // int64 (the positions are then floats, exact below 2^24).
  if (isF32(indices))
    index = b.truncate(index);
  Value hot = positionMask(n, b, index, depth, axis, rank, /*wrapNegative=*/true);
  float off, on;
  if (values.getElementType().isInteger(64)) {
    auto pair = values.getValues<int64_t>();
    if (pair[0] == 0 && pair[1] == 1) { // the mask itself
      n.setOutput(0, hot);
      return success();
    }
    // Other integers through f32, where they are exact.
    constexpr int64_t kExact = int64_t(1) << 24;
    if (std::abs(pair[0]) > kExact || std::abs(pair[1]) > kExact)
      return n.fail("integer values beyond 2^24 are not supported");
    off = static_cast<float>(pair[0]);
    on = static_cast<float>(pair[1]);
  } else {
    off = values.getValues<float>()[0];
    on = values.getValues<float>()[1];
  }
  Value offValue = b.constant(off);
  Value chosen = b.select(hot, b.constant(on), offValue);
  if (values.getElementType().isInteger(64))
    chosen =
        graph::CastOp::create(n.builder, n.loc, RankedTensorType::get(shapeOf(chosen), n.builder.getI64Type()), chosen);
  n.setOutput(0, chosen);
  return success();
}

LogicalResult fsdpc::import::convertTopK(NodeImporter &n) {
  if (failed(requireFloatInputs(n, 1)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t k = n.intAttr("k", -1);
  if (n.opset >= 10) {
    DenseElementsAttr value = n.constantInput(1);
    if (!value || value.getNumElements() != 1 || !value.getElementType().isInteger(64))
      return n.fail("K must be a constant of one element");
    k = value.getValues<int64_t>()[0];
  }
  FailureOr<int64_t> normalized = axisIn(n, n.intAttr("axis", -1), rank);
  if (failed(normalized))
    return failure();
  const int64_t axis = *normalized;
  if (k < 1 || k > shape[axis])
    return n.fail("K " + Twine(k) + " is outside [1, " + Twine(shape[axis]) + "]");
  constexpr int64_t kMaxRounds = 64;
  if (k > kMaxRounds)
    return n.fail("K " + Twine(k) + " is more than " + Twine(kMaxRounds) +
                  " (TopK is composed of one arg_max round per element)");
  const bool largest = n.intAttr("largest", 1) != 0;
  // K rounds of arg_max, each masking its winner out of the next with -inf
  // (the first of equal values wins, as ONNX orders ties by index). Each
  // value is read from x through its round's mask, so its gradient reaches
  // x at the winner's place, as torch's topk does. Smallest values are the
  // largest of -x. An element that is -inf itself (+inf for the smallest)
  // may come out again after the masked ones.
  Compose b{n};
  SmallVector<int64_t> kept(shape);
  kept[axis] = 1;
  auto indexType = RankedTensorType::get(kept, n.builder.getI64Type());
  Value zero = b.constant(0.0f);
  Value hidden = b.constant(-std::numeric_limits<float>::infinity());
  Value current = largest ? x : b.neg(x);
  SmallVector<Value> values, indices;
  for (int64_t round = 0; round < k; ++round) {
    Value index = graph::ArgMaxOp::create(n.builder, n.loc, indexType, current, n.builder.getI64IntegerAttr(axis),
                                          n.builder.getBoolAttr(false));
    Value hot = positionMask(n, b, index, shape[axis], axis, rank, /*wrapNegative=*/false);
    Value picked = b.select(hot, x, zero);
    values.push_back(b.sum(picked, {axis}, /*keepdims=*/true));
    indices.push_back(index);
    if (round + 1 < k)
      current = b.select(hot, hidden, current);
  }
  SmallVector<int64_t> outShape(shape);
  outShape[axis] = k;
  auto joined = [&](ArrayRef<Value> parts, Type element) -> Value {
    if (parts.size() == 1)
      return parts[0];
    return graph::ConcatOp::create(n.builder, n.loc, RankedTensorType::get(outShape, element), parts,
                                   n.builder.getI64IntegerAttr(axis));
  };
  n.setOutput(0, joined(values, n.builder.getF32Type()));
  n.setOutput(1, joined(indices, n.builder.getI64Type()));
  return success();
}

LogicalResult fsdpc::import::convertScatterElements(NodeImporter &n) {
  Value data = n.input(0), indices = n.input(1), updates = n.input(2);
  const bool integers = isI64(data) && isI64(updates);
  if (!integers && (!isF32(data) || !isF32(updates)))
    return n.fail("data and updates must be float tensors, or both integer tensors");
  if (!isI64(indices))
    return n.fail("indices must be an integer tensor");
  const std::string reduction = n.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return n.fail("reduction '" + reduction + "' is not supported (none and add are)");
  if (integers && (reduction != "none" || !n.constantInput(1)))
    return n.fail("integer data takes constant indices and no reduction");
  ArrayRef<int64_t> dataShape = shapeOf(data), indexShape = shapeOf(indices);
  const int64_t rank = static_cast<int64_t>(dataShape.size());
  FailureOr<int64_t> normalized = axisIn(n, n.intAttr("axis", 0), rank);
  if (failed(normalized))
    return failure();
  const int64_t axis = *normalized;
  if (shapeOf(updates) != indexShape)
    return n.fail("updates " + Twine(shapeString(shapeOf(updates))) + " must have the indices' shape " +
                  shapeString(indexShape));
  if (static_cast<int64_t>(indexShape.size()) != rank)
    return n.fail("indices must have the data's rank");
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && indexShape[d] != dataShape[d])
      return n.fail("indices " + Twine(shapeString(indexShape)) + " must match the data " + shapeString(dataShape) +
                    " off the axis");
  if (integers) {
    // Integers (torch's select_scatter writing a decoder's start token):
    // element by element, the data's or the last update's that names it.
    SmallVector<int64_t> index(n.constantInput(1).getValues<int64_t>());
    const int64_t elements = product(dataShape), size = dataShape[axis];
    const int64_t inner = product(dataShape.drop_front(axis + 1));
    SmallVector<int64_t> source(elements);
    for (int64_t e = 0; e < elements; ++e)
      source[e] = e;
    for (int64_t u = 0; u < static_cast<int64_t>(index.size()); ++u) {
      const int64_t at = index[u] < 0 ? index[u] + size : index[u];
      if (at < 0 || at >= size)
        return n.fail("index " + Twine(index[u]) + " is out of range for axis " + Twine(axis) + " of size " +
                      Twine(size));
      // u's place in the indices' shape, with the axis's coordinate replaced by `at`.
      const int64_t outer = u / (indexShape[axis] * inner), within = u % inner;
      source[(outer * size + at) * inner + within] = elements + u;
    }
    return scatterIntegerRows(n, data, updates, source, 1);
  }
  // A [.., K, N, ..] mask of which of the N places along the axis each of
  // the K indices names (negative ones from the end; a dimension inserted
  // after the axis), the updates summed into their places through it.
  // add: data + the sums; none: the sum where some index names a place,
  // data elsewhere, so the data's gradient flows where nothing overwrote
  // it and each update's to its place.
  Compose b{n};
  SmallVector<int64_t> spread(indexShape);
  spread.insert(spread.begin() + axis + 1, 1);
  Value index = b.reshape(indices, spread);
  Value hot = maskAsFloat(n, positionMask(n, b, index, dataShape[axis], axis + 1, rank + 1, /*wrapNegative=*/true));
  Value update = b.reshape(updates, spread);
  Value placed = b.sum(b.mul(hot, update), {axis}, /*keepdims=*/false);
  if (reduction == "add") {
    n.setOutput(0, b.add(data, placed));
    return success();
  }
  Value written = b.sum(hot, {axis}, /*keepdims=*/false);
  Value overwritten = compareWith(b, written, 0.0f, graph::ComparePredicate::ne);
  n.setOutput(0, b.select(overwritten, placed, data));
  return success();
}
