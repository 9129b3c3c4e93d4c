//===- MathPatterns.cpp - trigonometric, hyperbolic and remainder ops -----===//
//
// Sin, Cos, Atan, Floor, Ceil and Round have kernels (their patterns are the
// unary ones in OnnxOpPatterns.cpp, which also fold them on constants). The
// rest of ONNX's trigonometric and hyperbolic family is composed from those,
// exp, log and sqrt, in forms whose error stays within a few f32 ulps of the
// result's magnitude where the direct formula would cancel: asin through
// atan of x / sqrt((1 - x)(1 + x)), acos as twice the atan of a half-angle
// tangent, asinh on |x|. The gradients are those of the compositions, which
// are the functions' derivatives wherever these are finite.
//
//===----------------------------------------------------------------------===//
#include "CompositePatterns.h"
#include "Compose.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace fsdpc;
using namespace fsdpc::import;

namespace {

/// e^x and e^-x, sinh and cosh's halves.
std::pair<Value, Value> exponentials(Compose &b, Value x) {
  Value up = b.exp(x);
  Value down = b.exp(b.neg(x));
  return {up, down};
}

/// 1 - x and 1 + x.
std::pair<Value, Value> oneMinusAndPlus(Compose &b, Value x) {
  Value one = b.constant(1.0f);
  Value below = b.sub(one, x);
  Value above = b.add(one, x);
  return {below, above};
}

} // namespace

LogicalResult fsdpc::import::convertTan(NodeImporter &n) {
  return composeUnary(n, [](Compose &b, Value x) {
    Value sine = b.unary<graph::SinOp>(x);
    return b.div(sine, b.unary<graph::CosOp>(x));
  });
}

LogicalResult fsdpc::import::convertAsin(NodeImporter &n) {
  // asin x = atan(x / sqrt(1 - x^2)), with 1 - x^2 as (1 - x)(1 + x) so
  // that it keeps its digits near |x| = 1; x = +-1 divides by 0 and atan
  // of +-inf is +-pi/2; |x| > 1 is the square root of a negative, NaN.
  return composeUnary(n, [](Compose &b, Value x) {
    auto [below, above] = oneMinusAndPlus(b, x);
    Value cosine = b.unary<graph::SqrtOp>(b.mul(below, above));
    return b.unary<graph::AtanOp>(b.div(x, cosine));
  });
}

LogicalResult fsdpc::import::convertAcos(NodeImporter &n) {
  // acos x = 2 atan(sqrt((1 - x) / (1 + x))): the half-angle tangent, which
  // has no cancellation near x = 1 (pi/2 - asin x would); x = -1 gives
  // 2 atan(inf) = pi.
  return composeUnary(n, [](Compose &b, Value x) {
    auto [below, above] = oneMinusAndPlus(b, x);
    Value halfTangent = b.unary<graph::SqrtOp>(b.div(below, above));
    return b.scale(b.unary<graph::AtanOp>(halfTangent), 2.0);
  });
}

LogicalResult fsdpc::import::convertSinh(NodeImporter &n) {
  return composeUnary(n, [](Compose &b, Value x) {
    auto [up, down] = exponentials(b, x);
    return b.scale(b.sub(up, down), 0.5);
  });
}

LogicalResult fsdpc::import::convertCosh(NodeImporter &n) {
  return composeUnary(n, [](Compose &b, Value x) {
    auto [up, down] = exponentials(b, x);
    return b.scale(b.add(up, down), 0.5);
  });
}

LogicalResult fsdpc::import::convertAsinh(NodeImporter &n) {
  // asinh x = log(x + sqrt(x^2 + 1)) cancels for negative x, so it is taken
  // on |x| and the sign put back: asinh is odd. |x| is a select (x < 0 ?
  // -x : x) rather than relu(x) + relu(-x), so that its gradient at 0 is 1,
  // not relu's 0, and the log never sees 0 on either branch.
  return composeUnary(n, [](Compose &b, Value x) {
    Value negative = b.compare(x, b.constant(0.0f), graph::ComparePredicate::lt);
    Value magnitude = b.select(negative, b.neg(x), x);
    Value square = b.mul(magnitude, magnitude);
    Value hypotenuse = b.unary<graph::SqrtOp>(b.add(square, b.constant(1.0f)));
    Value value = b.log(b.add(magnitude, hypotenuse));
    return b.select(negative, b.neg(value), value);
  });
}

LogicalResult fsdpc::import::convertAcosh(NodeImporter &n) {
  // acosh x = log(x + sqrt((x - 1)(x + 1))); below 1 the square root is of
  // a negative, NaN, as acosh's domain says.
  return composeUnary(n, [](Compose &b, Value x) {
    Value one = b.constant(1.0f);
    Value below = b.sub(x, one);
    Value above = b.add(x, one);
    Value root = b.unary<graph::SqrtOp>(b.mul(below, above));
    return b.log(b.add(x, root));
  });
}

LogicalResult fsdpc::import::convertAtanh(NodeImporter &n) {
  // atanh x = log((1 + x) / (1 - x)) / 2; +-1 give +-inf, beyond them NaN.
  return composeUnary(n, [](Compose &b, Value x) {
    auto [below, above] = oneMinusAndPlus(b, x);
    return b.scale(b.log(b.div(above, below)), 0.5);
  });
}

/// Mod of i64 tensors (a position modulo the sequence length, in Hugging
/// Face's older classifier heads): r = x - (x / y) y with the quotient
/// truncated toward 0, which has the dividend's sign (fmod); for Python's %
/// a nonzero r whose sign differs from y's moves by y (for a positive
/// constant divisor, the length a position wraps at: a negative r). A zero
/// divisor gives 0, as the constant folding does.
static LogicalResult convertIntegerMod(NodeImporter &n, bool truncated) {
  Compose b{n};
  Value x = n.input(0), y = n.input(1);
  DenseElementsAttr divisor = n.constantInput(1);
  auto divisorsAll = [&](auto holds) { return divisor && llvm::all_of(divisor.getValues<APInt>(), holds); };
  Value quotient = b.div(x, y);
  Value remainder = b.sub(x, b.mul(quotient, y));
  Value zero = b.integer(0);
  if (!truncated) {
    Value negative = b.compare(remainder, zero, graph::ComparePredicate::lt);
    Value moves = negative;
    if (!divisorsAll([](const APInt &v) { return v.isStrictlyPositive(); })) {
      Value negativeDivisor = b.compare(y, zero, graph::ComparePredicate::lt);
      Value signsDiffer = b.compare(negative, negativeDivisor, graph::ComparePredicate::ne);
      Value nonzero = b.compare(remainder, zero, graph::ComparePredicate::ne);
      moves = b.mul(signsDiffer, nonzero);
    }
    remainder = b.add(remainder, b.mul(moves, y));
  }
  if (!divisorsAll([](const APInt &v) { return !v.isZero(); }))
    remainder = b.mul(remainder, b.compare(y, zero, graph::ComparePredicate::ne));
  n.setOutput(0, remainder);
  return success();
}

LogicalResult fsdpc::import::convertRuntimeMod(NodeImporter &n, bool truncated) {
  Value x = n.input(0), y = n.input(1);
  if (!(isI64(x) && isI64(y)) && !(isF32(x) && isF32(y)))
    return n.fail("inputs must both be float or both be integer tensors");
  if (failed(graph::broadcastShapes(shapeOf(x), shapeOf(y))))
    return n.fail("shapes " + Twine(shapeString(shapeOf(x))) + " and " + shapeString(shapeOf(y)) + " do not broadcast");
  if (isI64(x))
    return convertIntegerMod(n, truncated);
  // x - q y with q the quotient rounded toward 0 (fmod, the dividend's
  // sign) or down (the divisor's sign). Rounding has no gradient, so dx is
  // dy and d divisor is -q dy, as torch's fmod and remainder.
  Compose b{n};
  Value quotient = b.div(x, y);
  Value rounded = truncated ? b.truncate(quotient) : b.unary<graph::FloorOp>(quotient);
  n.setOutput(0, b.sub(x, b.mul(rounded, y)));
  return success();
}
