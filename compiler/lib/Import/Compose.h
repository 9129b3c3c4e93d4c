//===- Compose.h - building graph ops at an ONNX node -------------*- C++ -*-===//
//
// The small vocabulary the composite patterns write ONNX ops in: graph ops
// at the node's location, f32 results, numpy broadcasting.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_LIB_IMPORT_COMPOSE_H
#define FSDPC_LIB_IMPORT_COMPOSE_H

#include "ImportContext.h"

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"

namespace fsdpc::import {

/// The permutation that moves `axis` of a rank-`rank` tensor last, the
/// others keeping their order.
inline llvm::SmallVector<int64_t> axisLastPermutation(int64_t rank, int64_t axis) {
  llvm::SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  return perm;
}

/// The permutation that undoes `perm`.
inline llvm::SmallVector<int64_t> inversePermutation(llvm::ArrayRef<int64_t> perm) {
  llvm::SmallVector<int64_t> inverse(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    inverse[perm[d]] = static_cast<int64_t>(d);
  return inverse;
}

/// Composes graph ops at the node's location.
struct Compose {
  NodeImporter &n;

  mlir::Value constant(float v) {
    auto type = n.f32Tensor({});
    return graph::ConstantOp::create(n.builder, n.loc, type, mlir::DenseElementsAttr::get(type, v));
  }
  /// An i64 scalar, for arithmetic on integer tensors.
  mlir::Value integer(int64_t v) {
    auto type = mlir::RankedTensorType::get({}, n.builder.getI64Type());
    return graph::ConstantOp::create(n.builder, n.loc, type, mlir::DenseElementsAttr::get(type, v));
  }
  mlir::Value relu(mlir::Value x) { return graph::ReluOp::create(n.builder, n.loc, x); }
  mlir::Value neg(mlir::Value x) { return graph::NegOp::create(n.builder, n.loc, x); }
  mlir::Value exp(mlir::Value x) { return graph::ExpOp::create(n.builder, n.loc, x); }
  mlir::Value log(mlir::Value x) { return graph::LogOp::create(n.builder, n.loc, x); }
  mlir::Value tanh(mlir::Value x) { return graph::TanhOp::create(n.builder, n.loc, x); }
  /// A one-input graph op of x's type (sqrt, sin, floor, ...).
  template <typename OpTy> mlir::Value unary(mlir::Value x) { return OpTy::create(n.builder, n.loc, x); }
  mlir::Value scale(mlir::Value x, double factor) {
    return factor == 1.0 ? x : graph::ScaleOp::create(n.builder, n.loc, x, n.builder.getF64FloatAttr(factor)).getResult();
  }
  /// Arithmetic of two tensors of one element type (f32, or i64).
  template <typename OpTy> mlir::Value binary(mlir::Value a, mlir::Value b) {
    mlir::FailureOr<mlir::SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(a), shapeOf(b));
    auto type = mlir::RankedTensorType::get(*shape, mlir::cast<mlir::RankedTensorType>(a.getType()).getElementType());
    return OpTy::create(n.builder, n.loc, type, a, b);
  }
  mlir::Value add(mlir::Value a, mlir::Value b) { return binary<graph::AddOp>(a, b); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return binary<graph::SubOp>(a, b); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return binary<graph::MulOp>(a, b); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return binary<graph::DivOp>(a, b); }
  /// `a <predicate> b` as an i64 mask of their broadcast shape.
  mlir::Value compare(mlir::Value a, mlir::Value b, graph::ComparePredicate predicate) {
    mlir::FailureOr<mlir::SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(a), shapeOf(b));
    auto type = mlir::RankedTensorType::get(*shape, n.builder.getI64Type());
    return graph::CompareOp::create(n.builder, n.loc, type, a, b,
                                    graph::ComparePredicateAttr::get(n.builder.getContext(), predicate));
  }
  /// `condition ? a : b`, the three broadcast together.
  mlir::Value select(mlir::Value condition, mlir::Value a, mlir::Value b) {
    mlir::FailureOr<mlir::SmallVector<int64_t>> shape = graph::broadcastShapes(shapeOf(a), shapeOf(b));
    shape = graph::broadcastShapes(*shape, shapeOf(condition));
    return graph::SelectOp::create(n.builder, n.loc, n.f32Tensor(*shape), condition, a, b);
  }
  /// The sum over `axes`, which stay as dimensions of 1 with `keepdims`.
  mlir::Value sum(mlir::Value x, mlir::ArrayRef<int64_t> axes, bool keepdims) {
    mlir::SmallVector<int64_t> shape;
    for (auto [d, size] : llvm::enumerate(shapeOf(x)))
      if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
        shape.push_back(size);
      else if (keepdims)
        shape.push_back(1);
    return graph::ReduceSumOp::create(n.builder, n.loc, n.f32Tensor(shape), x, n.builder.getDenseI64ArrayAttr(axes),
                                      n.builder.getBoolAttr(keepdims));
  }
  /// The sum of every element, a scalar.
  mlir::Value sumAll(mlir::Value x) {
    mlir::SmallVector<int64_t> axes;
    for (int64_t d = 0; d < static_cast<int64_t>(shapeOf(x).size()); ++d)
      axes.push_back(d);
    return axes.empty() ? x : sum(x, axes, false);
  }
  mlir::Value transpose(mlir::Value x, mlir::ArrayRef<int64_t> perm) {
    mlir::SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(shapeOf(x)[p]);
    auto type = mlir::RankedTensorType::get(shape, mlir::cast<mlir::RankedTensorType>(x.getType()).getElementType());
    return graph::TransposeOp::create(n.builder, n.loc, type, x, n.builder.getDenseI64ArrayAttr(perm));
  }
  mlir::Value reshape(mlir::Value v, mlir::ArrayRef<int64_t> shape) { return import::reshape(n, v, shape); }
  // One statement per created op below: the order in which nested
  // arguments are evaluated is the C++ compiler's choice, and the IR (and
  // so the plan's bytes) must not depend on it.
  /// x rounded toward 0, as a cast of a float to an integer does:
  /// x < 0 ? ceil(x) : floor(x).
  mlir::Value truncate(mlir::Value x) {
    mlir::Value negative = compare(x, constant(0.0f), graph::ComparePredicate::lt);
    mlir::Value up = unary<graph::CeilOp>(x);
    return select(negative, up, unary<graph::FloorOp>(x));
  }
  /// Indices plus `sizes` (an i64 constant of shape `sizesShape`, which
  /// broadcasts against them) where they are negative, counted from the end
  /// as ONNX's gathers allow: i64 arithmetic on a mask.
  mlir::Value wrapNegative(mlir::Value indices, llvm::ArrayRef<int64_t> sizes, llvm::ArrayRef<int64_t> sizesShape) {
    mlir::Value negative = compare(indices, integer(0), graph::ComparePredicate::lt);
    auto type = mlir::RankedTensorType::get(sizesShape, n.builder.getI64Type());
    mlir::Value sizesValue =
        graph::ConstantOp::create(n.builder, n.loc, type, mlir::DenseElementsAttr::get(type, sizes));
    mlir::Value shift = mul(negative, sizesValue);
    return add(indices, shift);
  }
  /// |x| = relu(x) + relu(-x).
  mlir::Value abs(mlir::Value x) {
    mlir::Value positive = relu(x);
    return add(positive, relu(neg(x)));
  }
  /// log(1 + exp(x)), stable at any x: relu(x) + log(1 + exp(-|x|)).
  mlir::Value softplus(mlir::Value x) {
    mlir::Value positive = relu(x);
    mlir::Value one = constant(1.0f);
    return add(positive, log(add(one, exp(neg(abs(x))))));
  }
  /// The max of `x` along `axis`, kept as a dimension of 1: halves taken
  /// pairwise, max(a, b) = b + relu(a - b), so log2(size) levels.
  mlir::Value maxAlong(mlir::Value x, int64_t axis) {
    return pairwiseAlong(x, axis,
                         [&](mlir::Value first, mlir::Value second) { return add(second, relu(sub(first, second))); });
  }
  /// The product of `x` along `axis`, kept as a dimension of 1, as halves
  /// multiplied pairwise: its gradient is the product of the others even
  /// where an element is 0 (exp of a sum of logs would give NaN there).
  mlir::Value productAlong(mlir::Value x, int64_t axis) {
    return pairwiseAlong(x, axis, [&](mlir::Value first, mlir::Value second) { return mul(first, second); });
  }
  /// `x` reduced along `axis` to a dimension of 1 by `combine` of its two
  /// halves, then of theirs, log2(size) levels; an odd size's last element
  /// rides along to the next level.
  template <typename Combine> mlir::Value pairwiseAlong(mlir::Value x, int64_t axis, Combine combine) {
    mlir::SmallVector<int64_t> shape(shapeOf(x));
    while (shape[axis] > 1) {
      const int64_t size = shape[axis], half = size / 2;
      auto part = [&](int64_t start, int64_t length) -> mlir::Value {
        mlir::SmallVector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1), partShape(shape);
        starts[axis] = start;
        partShape[axis] = length;
        return graph::SliceOp::create(n.builder, n.loc, n.f32Tensor(partShape), x,
                                      n.builder.getDenseI64ArrayAttr(starts), n.builder.getDenseI64ArrayAttr(steps));
      };
      mlir::Value first = part(0, half);
      mlir::Value second = part(half, half);
      mlir::Value combined = combine(first, second);
      shape[axis] = half + size % 2;
      if (size % 2)
        combined =
            graph::ConcatOp::create(n.builder, n.loc, n.f32Tensor(shape), mlir::ValueRange{combined, part(2 * half, 1)},
                                    n.builder.getI64IntegerAttr(axis));
      x = combined;
    }
    return x;
  }
  mlir::Value sumOver(mlir::Value x, const ReductionLayout &layout) {
    return graph::ReduceSumOp::create(n.builder, n.loc, n.f32Tensor(layout.keptShape), x,
                                      n.builder.getDenseI64ArrayAttr(layout.axes), n.builder.getBoolAttr(true));
  }
  /// clamp(alpha x + beta, 0, 1) = relu(y) - relu(y - 1).
  mlir::Value hardSigmoid(mlir::Value x, double alpha, double beta) {
    mlir::Value scaled = scale(x, alpha);
    mlir::Value y = add(scaled, constant(static_cast<float>(beta)));
    mlir::Value low = relu(y);
    return sub(low, relu(sub(y, constant(1.0f))));
  }
};

/// A one-input float op composed by `build` from the input.
template <typename Build> mlir::LogicalResult composeUnary(NodeImporter &n, Build build) {
  if (mlir::failed(requireFloatInputs(n, 1)))
    return mlir::failure();
  Compose b{n};
  n.setOutput(0, build(b, n.input(0)));
  return mlir::success();
}

} // namespace fsdpc::import

#endif // FSDPC_LIB_IMPORT_COMPOSE_H
