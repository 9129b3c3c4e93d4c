//===- LogicPatterns.cpp - comparisons, masks and the ops that choose by them ===//
//
// ONNX's comparisons on runtime tensors become graph.compare (an i64 mask,
// no gradient); constants still fold where the op's pattern is keyed
// (OnnxOpPatterns.cpp). The boolean ops on runtime masks are comparisons of
// the masks' 0/1 values widened to f32, which are exact: And is a product
// unequal to 0, Or a sum unequal to 0, Xor two values unequal, Not a value
// equal to 0. The piecewise ops that choose by the input's sign (Sign,
// ThresholdedRelu, Shrink, PRelu) are graph.select of their branches by a
// mask, so the gradient of the chosen branch flows where it was chosen, as
// torch's does.
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

/// Input i of a boolean op: a runtime mask (i64), widened to f32.
FailureOr<Value> maskInput(NodeImporter &n, int i) {
  Value v = n.input(i);
  if (!isI64(v))
    return n.fail("input " + Twine(i) + " must be a boolean tensor");
  return maskAsFloat(n, v);
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
    n.setOutput(0, compareWith(b, *lhs, 0.0f, graph::ComparePredicate::eq));
    return success();
  }
  FailureOr<Value> rhs = maskInput(n, 1);
  if (failed(rhs))
    return failure();
  if (failed(graph::broadcastShapes(shapeOf(*lhs), shapeOf(*rhs))))
    return n.fail("operands do not broadcast");
  switch (op) {
  case LogicOp::kAnd:
    n.setOutput(0, compareWith(b, b.mul(*lhs, *rhs), 0.0f, graph::ComparePredicate::ne));
    break;
  case LogicOp::kOr:
    n.setOutput(0, compareWith(b, b.add(*lhs, *rhs), 0.0f, graph::ComparePredicate::ne));
    break;
  case LogicOp::kXor:
    n.setOutput(0, b.compare(*lhs, *rhs, graph::ComparePredicate::ne));
    break;
  case LogicOp::kNot:
    break;
  }
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
