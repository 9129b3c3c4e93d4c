//===- Fuse.cpp - graph-fuse ----------------------------------------------===//
//
// Recognises the layer norm, RMSNorm, GELU, masked-softmax, rotary and
// attention formulas that exporters write out op by op and replaces each by
// one graph op whose kernel and gradient rule do the same arithmetic in one
// pass over memory.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHFUSE
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc::graph;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The value of a constant whose elements are all one f32 number.
std::optional<double> splatValue(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat() || !dense.getElementType().isF32())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

bool isConstantNear(Value v, double expected) {
  std::optional<double> value = splatValue(v);
  return value && std::abs(*value - expected) <= 1e-6 * std::abs(expected);
}

/// For a commutative binary op of type OpTy with an operand satisfying
/// `pred`: the other operand.
template <typename OpTy> Value otherOperand(Operation *op, function_ref<bool(Value)> pred) {
  auto binary = dyn_cast_or_null<OpTy>(op);
  if (!binary)
    return {};
  if (pred(binary.getLhs()))
    return binary.getRhs();
  if (pred(binary.getRhs()))
    return binary.getLhs();
  return {};
}

template <typename OpTy> Value otherOperand(Operation *op, Value known) {
  return otherOperand<OpTy>(op, [&](Value v) { return v == known; });
}

Operation *soleUser(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// `mean` = scale(reduce_sum(input over trailing dims from `axis`, kept), 1/N):
/// returns `input` and sets `axis`.
Value meanOverTrailingDims(Value mean, int64_t &axis) {
  auto scale = mean.getDefiningOp<ScaleOp>();
  auto sum = scale ? scale.getInput().getDefiningOp<ReduceSumOp>() : ReduceSumOp();
  if (!sum || !sum.getKeepdims())
    return {};
  ArrayRef<int64_t> axes = sum.getAxes(), shape = tensorType(sum.getInput()).getShape();
  int64_t rank = shape.size();
  if (axes.empty() || axes.back() != rank - 1)
    return {};
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1)
      return {};
  int64_t count = 1;
  for (int64_t d : axes)
    count *= shape[d];
  if (std::abs(scale.getFactor().convertToDouble() * count - 1.0) > 1e-9)
    return {};
  axis = axes.front();
  return sum.getInput();
}

/// For `sqrt(mean(v^2) + eps)`, the mean as meanOverTrailingDims reads it,
/// the square a pow by 2 or `v * v`, eps a constant >= 0: returns v and sets
/// `axis`, `epsilon` and `square` (the op that squares v). The denominator
/// of both layer norm (v centred) and RMSNorm.
Value rootMeanSquareOf(SqrtOp sqrt, int64_t &axis, double &epsilon, Operation *&square) {
  std::optional<double> constant;
  Value meanSquare = otherOperand<AddOp>(sqrt.getInput().getDefiningOp(), [&](Value v) {
    constant = splatValue(v);
    return constant && *constant >= 0;
  });
  Value squared = meanSquare ? meanOverTrailingDims(meanSquare, axis) : Value();
  square = squared ? squared.getDefiningOp() : nullptr;
  Value base;
  if (isa_and_nonnull<PowOp>(square) && isConstantNear(square->getOperand(1), 2.0))
    base = square->getOperand(0);
  else if (isa_and_nonnull<MulOp>(square) && square->getOperand(0) == square->getOperand(1))
    base = square->getOperand(0);
  if (base)
    epsilon = *constant;
  return base;
}

/// Layer norm, anchored at the division of the centred input by the
/// standard deviation.
struct FuseLayerNorm : public OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DivOp div, PatternRewriter &rewriter) const override {
    auto centered = div.getLhs().getDefiningOp<SubOp>();
    if (!centered)
      return failure();
    Value x = centered.getLhs();
    RankedTensorType type = tensorType(x);
    if (centered.getType() != type || div.getType() != type)
      return failure();
    int64_t axis = -1, varianceAxis = -1;
    if (meanOverTrailingDims(centered.getRhs(), axis) != x)
      return failure();

    auto sqrt = div.getRhs().getDefiningOp<SqrtOp>();
    double epsilon = 0;
    Operation *square = nullptr;
    if (!sqrt || rootMeanSquareOf(sqrt, varianceAxis, epsilon, square) != centered.getResult() ||
        varianceAxis != axis)
      return failure();

    // The affine part, when it follows with parameters of the normalised shape.
    auto affineType = RankedTensorType::get(type.getShape().drop_front(axis), type.getElementType());
    SmallVector<Location> locations = {centered.getLoc(), sqrt.getLoc(), div.getLoc()};
    Operation *root = div;
    // The parameter the single user of `root` combines it with, if affine.
    auto absorb = [&](auto opTag) -> Value {
      using OpTy = decltype(opTag);
      Operation *user = soleUser(root->getResult(0));
      Value parameter = otherOperand<OpTy>(user, root->getResult(0));
      if (!parameter || parameter.getType() != affineType)
        return {};
      root = user;
      locations.push_back(root->getLoc());
      return parameter;
    };
    Value scale = absorb(MulOp());
    Value bias = absorb(AddOp());
    if (root->getResult(0).getType() != type)
      return failure();

    rewriter.setInsertionPoint(root);
    Location loc = rewriter.getFusedLoc(locations);
    auto filled = [&](float value) {
      return ConstantOp::create(rewriter, loc, affineType, DenseElementsAttr::get(affineType, value)).getResult();
    };
    SmallVector<int64_t> kept(type.getShape());
    std::fill(kept.begin() + axis, kept.end(), 1);
    auto statistics = RankedTensorType::get(kept, type.getElementType());
    auto norm = LayerNormOp::create(rewriter, loc, type, statistics, statistics, x, scale ? scale : filled(1.0f),
                                    bias ? bias : filled(0.0f), rewriter.getI64IntegerAttr(axis),
                                    rewriter.getF64FloatAttr(epsilon));
    rewriter.replaceOp(root, norm.getResult());
    return success();
  }
};

/// RMSNorm, anchored at the division by (or product with the reciprocal
/// of) sqrt(mean(x^2) + eps), with an optional following `* scale`.
struct FuseRmsNorm : public OpRewritePattern<SqrtOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SqrtOp sqrt, PatternRewriter &rewriter) const override {
    int64_t axis = -1;
    double epsilon = 0;
    Operation *square = nullptr;
    Value x = rootMeanSquareOf(sqrt, axis, epsilon, square);
    if (!x)
      return failure();
    // A centred input makes this a layer norm, which FuseLayerNorm takes whole.
    if (auto centered = x.getDefiningOp<SubOp>()) {
      int64_t meanAxis = -1;
      if (meanOverTrailingDims(centered.getRhs(), meanAxis) == centered.getLhs())
        return failure();
    }
    RankedTensorType type = tensorType(x);
    // x / sqrt(..), or x * reciprocal(sqrt(..)) with the reciprocal as an
    // op or as 1 / sqrt(..) (Optimum's LLaMA exports).
    Operation *normalized = nullptr, *user = soleUser(sqrt.getResult());
    SmallVector<Location> locations = {square->getLoc(), sqrt.getLoc()};
    auto div = dyn_cast_or_null<DivOp>(user);
    if (div && div.getLhs() == x && div.getRhs() == sqrt.getResult()) {
      normalized = div;
    } else if (isa_and_nonnull<ReciprocalOp>(user) || (div && isConstantNear(div.getLhs(), 1.0))) {
      Value reciprocal = user->getResult(0);
      Operation *product = soleUser(reciprocal);
      if (otherOperand<MulOp>(product, reciprocal) == x) {
        normalized = product;
        locations.push_back(user->getLoc());
      }
    }
    if (!normalized || normalized->getResult(0).getType() != type)
      return failure();
    locations.push_back(normalized->getLoc());
    auto affineType = RankedTensorType::get(type.getShape().drop_front(axis), type.getElementType());
    Operation *root = normalized;
    Operation *scaling = soleUser(normalized->getResult(0));
    Value scale = otherOperand<MulOp>(scaling, normalized->getResult(0));
    if (scale && scale.getType() == affineType && scaling->getResult(0).getType() == type) {
      root = scaling;
      locations.push_back(scaling->getLoc());
    } else {
      scale = {};
    }
    rewriter.setInsertionPoint(root);
    Location loc = rewriter.getFusedLoc(locations);
    if (!scale)
      scale = ConstantOp::create(rewriter, loc, affineType, DenseElementsAttr::get(affineType, 1.0f));
    SmallVector<int64_t> kept(type.getShape());
    std::fill(kept.begin() + axis, kept.end(), 1);
    auto norm = RmsNormOp::create(rewriter, loc, type, RankedTensorType::get(kept, type.getElementType()), x, scale,
                                  rewriter.getI64IntegerAttr(axis), rewriter.getF64FloatAttr(epsilon));
    rewriter.replaceOp(root, norm.getResult());
    return success();
  }
};

/// Given `f` (the erf or tanh term), matches `0.5 * x * (1 + f)` with the
/// products in any order and returns the op that yields it.
Operation *matchGeluTail(Value f, Value x) {
  Operation *onePlus = soleUser(f);
  if (!otherOperand<AddOp>(onePlus, [](Value v) { return isConstantNear(v, 1.0); }))
    return nullptr;
  Operation *product = soleUser(onePlus->getResult(0));
  Value factor = otherOperand<MulOp>(product, onePlus->getResult(0));
  if (!factor)
    return nullptr;
  auto isHalf = [](Value v) { return isConstantNear(v, 0.5); };
  auto isX = [&](Value v) { return v == x; };
  if (factor == x) { // (x * (1 + f)) * 0.5
    Operation *halved = soleUser(product->getResult(0));
    return otherOperand<MulOp>(halved, isHalf) ? halved : nullptr;
  }
  if (otherOperand<MulOp>(factor.getDefiningOp(), isHalf) == x) // (0.5 * x) * (1 + f)
    return product;
  if (isHalf(factor)) { // (0.5 * (1 + f)) * x
    Operation *times = soleUser(product->getResult(0));
    return otherOperand<MulOp>(times, isX) ? times : nullptr;
  }
  return nullptr;
}

LogicalResult replaceByGelu(PatternRewriter &rewriter, Operation *root, Value x, GeluApproximation approximate,
                            ArrayRef<Location> locations) {
  if (!root || root->getResult(0).getType() != x.getType())
    return failure();
  SmallVector<Location> all(locations);
  all.push_back(root->getLoc());
  rewriter.setInsertionPoint(root);
  rewriter.replaceOp(root, GeluOp::create(rewriter, rewriter.getFusedLoc(all), x,
                                             GeluApproximationAttr::get(rewriter.getContext(), approximate))
                               .getResult());
  return success();
}

/// 0.5 * x * (1 + erf(x / sqrt(2))), anchored at the erf.
struct FuseErfGelu : public OpRewritePattern<ErfOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ErfOp erf, PatternRewriter &rewriter) const override {
    Operation *scaled = erf.getInput().getDefiningOp();
    Value x;
    if (auto div = dyn_cast_or_null<DivOp>(scaled); div && isConstantNear(div.getRhs(), M_SQRT2))
      x = div.getLhs();
    else
      x = otherOperand<MulOp>(scaled, [](Value v) { return isConstantNear(v, M_SQRT1_2); });
    if (!x)
      return failure();
    return replaceByGelu(rewriter, matchGeluTail(erf.getResult(), x), x, GeluApproximation::none,
                         {scaled->getLoc(), erf.getLoc()});
  }
};

/// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), anchored at
/// the tanh; x^3 as pow(x, 3) or x * (x * x).
struct FuseTanhGelu : public OpRewritePattern<TanhOp> {
  using OpRewritePattern::OpRewritePattern;

  static bool isCube(Value cube, Value x) {
    Operation *op = cube.getDefiningOp();
    if (auto pow = dyn_cast_or_null<PowOp>(op))
      return pow.getLhs() == x && isConstantNear(pow.getRhs(), 3.0);
    Value square = otherOperand<MulOp>(op, x);
    auto squareOp = square ? square.getDefiningOp<MulOp>() : MulOp();
    return squareOp && squareOp.getLhs() == x && squareOp.getRhs() == x;
  }

  LogicalResult matchAndRewrite(TanhOp tanh, PatternRewriter &rewriter) const override {
    Operation *scaled = tanh.getInput().getDefiningOp();
    Value inner = otherOperand<MulOp>(scaled, [](Value v) { return isConstantNear(v, std::sqrt(2.0 / M_PI)); });
    auto sum = inner ? inner.getDefiningOp<AddOp>() : AddOp();
    if (!sum)
      return failure();
    for (auto [x, term] : {std::pair(sum.getLhs(), sum.getRhs()), std::pair(sum.getRhs(), sum.getLhs())}) {
      Value cube = otherOperand<MulOp>(term.getDefiningOp(), [](Value v) { return isConstantNear(v, 0.044715); });
      if (cube && isCube(cube, x))
        return replaceByGelu(rewriter, matchGeluTail(tanh.getResult(), x), x, GeluApproximation::tanh,
                             {scaled->getLoc(), tanh.getLoc()});
    }
    return failure();
  }
};

/// act(gate) * up with no broadcast, anchored at the product: SwiGLU as
/// exports write it, (gate * sigmoid(gate)) * up, and GeGLU, gelu(gate) *
/// up (after FuseErfGelu / FuseTanhGelu), either operand order. The
/// activation's ops must have no other reader, or fusing would compute
/// them twice.
struct FuseGatedActivation : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// The gate of `activated` = silu(gate) or gelu(gate), read only by the
  /// product, and its kind; or null.
  static Value gateOf(Value activated, GatedActivationKind &kind, SmallVectorImpl<Location> &locations) {
    if (!activated.hasOneUse())
      return {};
    if (auto gelu = activated.getDefiningOp<GeluOp>()) {
      kind =
          gelu.getApproximate() == GeluApproximation::tanh ? GatedActivationKind::gelu_tanh : GatedActivationKind::gelu;
      locations.push_back(gelu.getLoc());
      return gelu.getInput();
    }
    auto product = activated.getDefiningOp<MulOp>();
    if (!product)
      return {};
    for (auto [gate, sigmoidValue] :
         {std::pair(product.getLhs(), product.getRhs()), std::pair(product.getRhs(), product.getLhs())}) {
      auto sigmoid = sigmoidValue.getDefiningOp<SigmoidOp>();
      if (sigmoid && sigmoid.getInput() == gate && sigmoid->hasOneUse() && gate.getType() == activated.getType()) {
        kind = GatedActivationKind::silu;
        locations.append({sigmoid.getLoc(), product.getLoc()});
        return gate;
      }
    }
    return {};
  }

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    Type type = root.getType();
    if (root.getLhs().getType() != type || root.getRhs().getType() != type)
      return failure();
    for (auto [activated, up] : {std::pair(root.getLhs(), root.getRhs()), std::pair(root.getRhs(), root.getLhs())}) {
      GatedActivationKind kind;
      SmallVector<Location> locations;
      Value gate = gateOf(activated, kind, locations);
      if (!gate || gate.getType() != type)
        continue;
      locations.push_back(root.getLoc());
      rewriter.setInsertionPoint(root);
      auto fused = GatedActivationOp::create(rewriter, rewriter.getFusedLoc(locations), type, gate, up,
                                             GatedActivationKindAttr::get(rewriter.getContext(), kind));
      rewriter.replaceOp(root, fused.getResult());
      return success();
    }
    return failure();
  }
};

/// Whether adding `fill` to a score excludes it from a softmax: -inf, or a
/// number so negative (transformers' torch.finfo(float32).min) that
/// exp(score + fill - maximum) is 0 in f32 for any score a model makes, as
/// long as the row keeps one score. A row whose every score gets a finite
/// fill is uniform in torch, where masked_softmax gives zeros: only a
/// sample without one unmasked token (docs/importer.md).
bool isExcludingFill(double fill) { return fill <= -1e30; }

/// The positions where an additive mask constant excludes its score
/// (isExcludingFill), as an i64 mask, if every other element is 0: LLaMA's
/// causal buffers of 0 and -inf, BART's decoder mask of 0 and finfo.min
/// (a constant once its ScatterND folds). A row excluded whole by a finite
/// fill is uniform in torch, so such a mask stays a sum. Leading axes
/// whose slices are all equal (a causal mask expanded to the batch) are
/// kept once: the mask broadcasts, and the lowering can see it is causal.
Value maskOfAdditiveConstant(PatternRewriter &rewriter, Value additive) {
  auto constant = additive.getDefiningOp<ConstantOp>();
  auto dense = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : DenseElementsAttr();
  if (!dense || !dense.getElementType().isF32() || dense.getType().getRank() == 0)
    return {};
  SmallVector<float> values(dense.getValues<float>());
  ArrayRef<int64_t> shape = dense.getType().getShape();
  const int64_t rowSize = shape.back();
  for (size_t row = 0; row < values.size(); row += rowSize) {
    bool anyKept = false, finiteFill = false;
    for (int64_t j = 0; j < rowSize; ++j) {
      const float v = values[row + j];
      if (v != 0 && !isExcludingFill(v))
        return {};
      anyKept |= v == 0;
      finiteFill |= v != 0 && !std::isinf(v);
    }
    if (!anyKept && finiteFill)
      return {};
  }
  // Drop leading axes while every slice along them equals the first.
  SmallVector<int64_t> kept(shape);
  int64_t sliceSize = static_cast<int64_t>(values.size());
  for (size_t axis = 0; axis + 2 < shape.size(); ++axis) {
    if (kept[axis] == 1)
      continue;
    const int64_t inner = sliceSize / kept[axis];
    bool equal = true;
    for (int64_t i = inner; equal && i < sliceSize; ++i)
      equal = values[i] == values[i % inner];
    if (!equal)
      break;
    kept[axis] = 1;
    sliceSize = inner;
  }
  SmallVector<int64_t> mask;
  for (int64_t i = 0; i < sliceSize; ++i)
    mask.push_back(values[i] == 0 ? 0 : 1);
  auto maskType = RankedTensorType::get(kept, rewriter.getI64Type());
  return ConstantOp::create(rewriter, constant.getLoc(), maskType, DenseElementsAttr::get(maskType, ArrayRef(mask)));
}

/// Whether `condition` is `value != 0` (perhaps cast to bool), so that
/// `value` is 0 wherever `condition` is.
bool isNonzeroTestOf(Value condition, Value value) {
  if (auto cast = condition.getDefiningOp<CastOp>(); cast && cast.getToBool())
    condition = cast.getInput();
  auto compare = condition.getDefiningOp<CompareOp>();
  if (!compare || compare.getPredicate() != ComparePredicate::ne)
    return false;
  return (compare.getLhs() == value && isConstantNear(compare.getRhs(), 0.0)) ||
         (compare.getRhs() == value && isConstantNear(compare.getLhs(), 0.0));
}

/// `a == 0`, an i64 mask of a's shape.
Value isZeroMask(PatternRewriter &rewriter, Location loc, Value a) {
  auto scalarType = RankedTensorType::get({}, rewriter.getI64Type());
  Value zero = ConstantOp::create(rewriter, loc, scalarType, DenseElementsAttr::get(scalarType, APInt(64, 0)));
  auto maskType = RankedTensorType::get(tensorType(a).getShape(), rewriter.getI64Type());
  return CompareOp::create(rewriter, loc, maskType, a, zero,
                           ComparePredicateAttr::get(rewriter.getContext(), ComparePredicate::eq));
}

/// The positions an additive mask computed at run time excludes, as an i64
/// mask. transformers builds its masks from the attention_mask input so:
/// `where(keep, 0, -inf)` (the SDPA path of GPT-2 and LLaMA: the positions
/// where keep is 0), `where(x != 0, finfo.min, x)` with x = 1 - mask
/// (BERT's and BART's encoders), `where(drop, fill, 0)` (drop's
/// positions), and `where(drop, finfo.min, M)` with M a constant mask of 0
/// and finfo.min (the eager path of OPT, GPT-J, CodeGen: the causal mask
/// with the padding filled in), whose positions are drop's or M's.
Value maskOfAdditiveSelect(PatternRewriter &rewriter, Value additive) {
  auto select = additive.getDefiningOp<SelectOp>();
  if (!select)
    return {};
  std::optional<double> whenTrue = splatValue(select.getLhs()), whenFalse = splatValue(select.getRhs());
  Value condition = select.getCondition();
  const Location loc = select.getLoc();
  if (whenTrue && isExcludingFill(*whenTrue) &&
      ((whenFalse && *whenFalse == 0) || isNonzeroTestOf(condition, select.getRhs())))
    return condition;
  if (whenTrue && isExcludingFill(*whenTrue)) {
    Value constantMask = maskOfAdditiveConstant(rewriter, select.getRhs());
    if (!constantMask)
      return {};
    // drop or M: not (drop == 0 and M == 0).
    Value neither0 = isZeroMask(rewriter, loc, condition), neither1 = isZeroMask(rewriter, loc, constantMask);
    FailureOr<SmallVector<int64_t>> shape =
        broadcastShapes(tensorType(neither0).getShape(), tensorType(neither1).getShape());
    if (failed(shape)) // select's operands broadcast together, so this does not happen
      return {};
    Value neither =
        MulOp::create(rewriter, loc, RankedTensorType::get(*shape, rewriter.getI64Type()), neither0, neither1);
    return isZeroMask(rewriter, loc, neither);
  }
  if (!whenTrue || *whenTrue != 0 || !whenFalse || !isExcludingFill(*whenFalse))
    return {};
  return isZeroMask(rewriter, loc, condition);
}

/// `scores` = batch_matmul(a * c1, b * c2) with splat factors on either
/// operand (transformers' SDPA export scales query and key each by
/// D^-1/4), each product read only there: the product of the unscaled
/// operands, and `factor` = c1 c2. The scores must have no other use.
Value unscaledScores(PatternRewriter &rewriter, Value scores, double &factor, SmallVector<Location> &locations) {
  auto product = scores.getDefiningOp<BatchMatmulOp>();
  if (!product || !product->hasOneUse())
    return {};
  Value operands[2] = {product.getLhs(), product.getRhs()};
  factor = 1.0;
  bool moved = false;
  for (Value &operand : operands) {
    std::optional<double> c;
    Value unscaled = otherOperand<MulOp>(operand.getDefiningOp(), [&](Value v) {
      c = splatValue(v);
      return c.has_value();
    });
    if (!unscaled || unscaled.getType() != operand.getType() || !operand.hasOneUse())
      continue;
    locations.push_back(operand.getLoc());
    operand = unscaled;
    factor *= *c;
    moved = true;
  }
  if (!moved)
    return {};
  rewriter.setInsertionPoint(product);
  return BatchMatmulOp::create(rewriter, product.getLoc(), product.getType(), operands[0], operands[1],
                               product.getTransposeAAttr(), product.getTransposeBAttr());
}

/// Whether `scoresValue` is a batch_matmul, perhaps times or over a number.
bool isScaledProduct(Value scoresValue) {
  Operation *scores = scoresValue.getDefiningOp();
  if (isa_and_nonnull<MulOp, DivOp>(scores)) {
    Value lhs = scores->getOperand(0), rhs = scores->getOperand(1);
    if (splatValue(rhs))
      scores = lhs.getDefiningOp();
    else if (isa<MulOp>(scores) && splatValue(lhs))
      scores = rhs.getDefiningOp();
    else
      return false;
  }
  return isa_and_nonnull<BatchMatmulOp>(scores);
}

/// Whether `softmax` is attention's without a mask (ViT, an encoder's
/// unpadded self-attention): its input the product of two batch_matmul
/// operands (perhaps times or over a number) and its only reader the
/// product with the values.
bool isUnmaskedAttentionSoftmax(SoftmaxOp softmax) {
  auto output = dyn_cast_or_null<BatchMatmulOp>(soleUser(softmax.getResult()));
  return output && output.getLhs() == softmax.getResult() && isScaledProduct(softmax.getInput());
}

/// Attention's masked scores, the input of a softmax over their last axis
/// (`softmax`, the op that takes them, anchors the locations and where a
/// mask is built): where(mask, -inf, x * c) as GPT-2-style exports write
/// them, or x * c + M with M a constant of 0 and -inf (LLaMA-style
/// buffers) or a mask transformers computes at run time
/// (maskOfAdditiveSelect); with `unmasked`, also scores without a mask
/// (`mask` then a constant that excludes nothing). The scale may be a
/// product, a quotient, on the scores' operands, or absent. Sets the
/// unscaled scores `x`, the i64 `mask`, `scale` and the locations of the
/// ops looked through.
LogicalResult matchMaskedScores(PatternRewriter &rewriter, Value input, Operation *softmax, bool unmasked, Value &x,
                                Value &mask, double &scale, SmallVector<Location> &locations) {
  RankedTensorType type = tensorType(input);
  if (type.getRank() == 0)
    return failure();
  Operation *masking = input.getDefiningOp();
  // (scores + mask) / c (CodeGen's eager attention scales after masking):
  // the same as scaling first, as c > 0 keeps an excluded score excluded.
  Operation *scaledAfter = nullptr;
  double scaleAfter = 1.0;
  if (isa_and_nonnull<MulOp, DivOp>(masking) && isa_and_nonnull<AddOp>(masking->getOperand(0).getDefiningOp()) &&
      masking->getOperand(0).getType() == type) {
    std::optional<double> c = splatValue(masking->getOperand(1));
    if (c && *c > 0) {
      scaleAfter = isa<MulOp>(masking) ? *c : 1.0 / *c;
      scaledAfter = masking;
      masking = masking->getOperand(0).getDefiningOp();
    }
  }
  if (auto select = dyn_cast_or_null<SelectOp>(masking)) {
    std::optional<double> fill = splatValue(select.getLhs());
    if (!fill || !std::isinf(*fill) || *fill > 0)
      return failure();
    x = select.getRhs();
    mask = select.getCondition();
  } else if (auto add = dyn_cast_or_null<AddOp>(masking)) {
    for (auto [scores, additive] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())})
      if (!mask && scores.getType() == type) {
        rewriter.setInsertionPoint(softmax);
        if ((mask = maskOfAdditiveConstant(rewriter, additive)) || (mask = maskOfAdditiveSelect(rewriter, additive)))
          x = scores;
      }
  } else if (unmasked) {
    // A mask that excludes nothing, so that FuseAttention takes it whole.
    x = input;
    masking = softmax;
    rewriter.setInsertionPoint(softmax);
    auto noMaskType = RankedTensorType::get({1, 1}, rewriter.getI64Type());
    mask =
        ConstantOp::create(rewriter, softmax->getLoc(), noMaskType, DenseElementsAttr::get(noMaskType, APInt(64, 0)));
  }
  if (!mask || x.getType() != type)
    return failure();
  scale = 1.0;
  locations = {masking->getLoc(), softmax->getLoc()};
  if (scaledAfter)
    locations.push_back(scaledAfter->getLoc());
  std::optional<double> factor;
  auto isFactor = [&](Value v) {
    factor = splatValue(v);
    return factor.has_value();
  };
  Operation *scaling = x.getDefiningOp();
  if (Value scaled = otherOperand<MulOp>(scaling, isFactor); scaled && scaled.getType() == type) {
    x = scaled;
    scale = *factor;
    locations.push_back(scaling->getLoc());
  } else if (auto div = dyn_cast_or_null<DivOp>(scaling);
             div && div.getLhs().getType() == type && isFactor(div.getRhs()) && *factor != 0) {
    x = div.getLhs();
    scale = 1.0 / *factor;
    locations.push_back(scaling->getLoc());
  } else if (double operandFactor = 1.0; Value scores = unscaledScores(rewriter, x, operandFactor, locations)) {
    x = scores;
    scale = operandFactor;
  }
  scale *= scaleAfter;
  return success();
}

/// Attention's masked softmax over the last axis, anchored at the softmax:
/// the softmax of masked scores (matchMaskedScores) becomes one
/// graph.masked_softmax.
struct FuseMaskedSoftmax : public OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftmaxOp softmax, PatternRewriter &rewriter) const override {
    RankedTensorType type = tensorType(softmax.getInput());
    int64_t rank = type.getRank();
    const int64_t axis = softmax.getAxis();
    if (rank == 0 || (axis != -1 && axis != rank - 1))
      return failure();
    Value x, mask;
    double scale;
    SmallVector<Location> locations;
    if (failed(matchMaskedScores(rewriter, softmax.getInput(), softmax, isUnmaskedAttentionSoftmax(softmax), x, mask,
                                 scale, locations)))
      return failure();
    rewriter.setInsertionPoint(softmax);
    auto fused = MaskedSoftmaxOp::create(rewriter, rewriter.getFusedLoc(locations), type, x, mask,
                                         rewriter.getF64FloatAttr(scale));
    rewriter.replaceOp(softmax, fused.getResult());
    return success();
  }
};

/// `where(isnan(p), 0, p)` of a masked softmax p is p: the guard torch's
/// SDPA export writes for rows with every position masked (`_safe_softmax`),
/// which masked_softmax already makes zeros. They differ only in a row
/// whose scores are NaN, which the guard zeroes and masked_softmax keeps.
struct DropSafeSoftmaxGuard : public OpRewritePattern<SelectOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SelectOp select, PatternRewriter &rewriter) const override {
    auto probabilities = select.getRhs().getDefiningOp<MaskedSoftmaxOp>();
    auto isNan = select.getCondition().getDefiningOp<IsNanOp>();
    std::optional<double> fill = splatValue(select.getLhs());
    if (!probabilities || !isNan || isNan.getInput() != probabilities.getResult() || !isNan->hasOneUse() || !fill ||
        *fill != 0 || select.getType() != probabilities.getType())
      return failure();
    rewriter.replaceOp(select, probabilities.getResult());
    return success();
  }
};

/// Whether keys or values of shape `keys` fit attention's query of shape
/// `query`: the same leading axes, but that their heads (axis rank - 3)
/// may be a divisor of the query's (grouped-query attention).
bool fitsQueryHeads(ArrayRef<int64_t> query, ArrayRef<int64_t> keys) {
  const size_t rank = query.size();
  if (rank < 3 || keys.size() != rank)
    return false;
  return query.drop_back(3) == keys.drop_back(3) && keys[rank - 3] > 0 && query[rank - 3] % keys[rank - 3] == 0;
}

/// `v` = `x` times and over splat numbers (any number of them, each result
/// read only by the next): x, with `factor` their product and the ops in
/// `ops`, last first.
Value unscaled(Value v, double &factor, SmallVectorImpl<Operation *> &ops) {
  factor = 1.0;
  while (Operation *op = v.getDefiningOp()) {
    if (!isa<MulOp, DivOp>(op) || !v.hasOneUse() || op->getOperand(0).getType() != v.getType())
      break;
    std::optional<double> c = splatValue(op->getOperand(1));
    if (!c || (isa<DivOp>(op) && *c == 0))
      break;
    factor *= isa<MulOp>(op) ? *c : 1.0 / *c;
    ops.push_back(op);
    v = op->getOperand(0);
  }
  return v;
}

/// Whether the products `scores` = q @ k^T and `output` = P @ v are one
/// attention's: no broadcasting of the batch axes, each query row meets its
/// own keys; but keys and values of one head may serve every query head
/// (Falcon's multi-query attention broadcasts them in the products).
bool fitsAttention(BatchMatmulOp scores, BatchMatmulOp output) {
  RankedTensorType q = tensorType(scores.getLhs()), k = tensorType(scores.getRhs()), v = tensorType(output.getRhs());
  return q.getRank() >= 3 && fitsQueryHeads(q.getShape(), k.getShape()) && fitsQueryHeads(q.getShape(), v.getShape()) &&
         k.getShape()[k.getRank() - 3] == v.getShape()[v.getRank() - 3];
}

/// Replaces `output` by graph.attention of the query and key of `scores`
/// and the value of `output` (fitsAttention).
void replaceWithAttention(PatternRewriter &rewriter, BatchMatmulOp output, BatchMatmulOp scores, Value mask,
                          Value sinks, FloatAttr scale, FloatAttr softcap, ArrayRef<Location> locations) {
  RankedTensorType q = tensorType(scores.getLhs());
  auto lseType = RankedTensorType::get(q.getShape().drop_back(), q.getElementType());
  rewriter.setInsertionPoint(output);
  auto fused = AttentionOp::create(rewriter, rewriter.getFusedLoc(locations), output.getType(), lseType,
                                   scores.getLhs(), scores.getRhs(), output.getRhs(), mask, sinks, scale,
                                   rewriter.getBoolAttr(!scores.getTransposeB()), /*compute_dtype=*/nullptr,
                                   /*token_major=*/nullptr, softcap);
  rewriter.replaceOp(output, fused.getOut());
}

/// Attention, anchored at its second product: masked_softmax(q @ k^T) @ v,
/// where the scores and the probabilities have no other use, becomes one
/// graph.attention that keeps no T x T tensor for backward. Soft-capped
/// scores (Gemma 2: masked_softmax(tanh(s a / c)) with the softmax's scale
/// c > 0, the scores times and over numbers before the tanh) give the
/// attention softcap c and scale a.
struct FuseAttention : public OpRewritePattern<BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BatchMatmulOp output, PatternRewriter &rewriter) const override {
    if (output.getTransposeA() || output.getTransposeB())
      return failure();
    auto softmax = output.getLhs().getDefiningOp<MaskedSoftmaxOp>();
    if (!softmax || !softmax->hasOneUse())
      return failure();
    SmallVector<Operation *> capping; // tanh and the scalings before it, last first
    FloatAttr scale = softmax.getScaleAttr(), softcap;
    Value scoresValue = softmax.getInput();
    if (auto tanh = scoresValue.getDefiningOp<TanhOp>()) {
      double factor = 1.0;
      if (!tanh->hasOneUse() || !(scale.getValueAsDouble() > 0))
        return failure();
      capping.push_back(tanh);
      scoresValue = unscaled(tanh.getInput(), factor, capping);
      softcap = scale;
      scale = rewriter.getF64FloatAttr(factor * softcap.getValueAsDouble());
    }
    auto scores = scoresValue.getDefiningOp<BatchMatmulOp>();
    if (!scores || !scores->hasOneUse() || scores.getTransposeA() || !fitsAttention(scores, output))
      return failure();
    SmallVector<Location> locations = {scores.getLoc(), softmax.getLoc(), output.getLoc()};
    for (Operation *op : capping)
      locations.push_back(op->getLoc());
    replaceWithAttention(rewriter, output, scores, softmax.getMask(), /*sinks=*/{}, scale, softcap, locations);
    // Gone now, not when the driver gets to them: packed_attention takes
    // q, k and v only where the views have no other use.
    rewriter.eraseOp(softmax);
    for (Operation *op : capping)
      rewriter.eraseOp(op);
    rewriter.eraseOp(scores);
    return success();
  }
};

/// Whether `slice` takes elements [start, start + width) of `x`'s last axis
/// and every element of the others.
bool slicesLastAxis(SliceOp slice, Value x, int64_t start, int64_t width) {
  if (slice.getInput() != x)
    return false;
  ArrayRef<int64_t> in = tensorType(x).getShape(), out = tensorType(slice.getResult()).getShape();
  ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
  const size_t rank = in.size();
  if (rank == 0 || out.size() != rank || out.back() != width || starts.back() != start)
    return false;
  for (size_t i = 0; i < rank; ++i)
    if (steps[i] != 1 || (i + 1 < rank && (starts[i] != 0 || out[i] != in[i])))
      return false;
  return true;
}

/// softmax(x - m), m constant along the softmax's axis (each row's maximum,
/// which exports subtract before a softmax: GPT-OSS's attention with
/// sinks), is softmax(x): the softmax subtracts its rows' maximum itself,
/// and as it is shift-invariant no gradient reaches m either. They differ
/// only where m is not finite.
struct DropSoftmaxShift : public OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftmaxOp softmax, PatternRewriter &rewriter) const override {
    auto shift = softmax.getInput().getDefiningOp<SubOp>();
    if (!shift || shift.getLhs().getType() != softmax.getInput().getType())
      return failure();
    const int64_t rank = tensorType(shift.getLhs()).getRank();
    ArrayRef<int64_t> m = tensorType(shift.getRhs()).getShape();
    const int64_t axis = softmax.getAxis() < 0 ? softmax.getAxis() + rank : softmax.getAxis();
    const int64_t mAxis = axis - (rank - static_cast<int64_t>(m.size())); // numpy broadcasting aligns the last axes
    if (axis < 0 || axis >= rank || (mAxis >= 0 && m[mAxis] != 1))
      return failure();
    rewriter.modifyOpInPlace(softmax, [&] { softmax.getInputMutable().assign(shift.getLhs()); });
    return success();
  }
};

/// The sinks of attention's sink column `column` ([..., H, Tq, 1]): a
/// broadcast of one f32 number per head (GPT-OSS: sinks.reshape(1, H, 1,
/// 1).expand(B, -1, Tq, -1)), that is, of a tensor whose every axis but the
/// heads axis is 1; null if it is not one.
Value perHeadSinks(Value column) {
  auto broadcast = column.getDefiningOp<BroadcastToOp>();
  RankedTensorType columnType = tensorType(column);
  const int64_t rank = columnType.getRank();
  if (!broadcast || rank < 3 || !columnType.getElementType().isF32() || columnType.getShape().back() != 1)
    return {};
  Value perHead = broadcast.getInput();
  ArrayRef<int64_t> shape = tensorType(perHead).getShape();
  const int64_t headsAxis = static_cast<int64_t>(shape.size()) - 3;
  if (headsAxis < 0)
    return {};
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (i != headsAxis && shape[i] != 1)
      return {};
  if (shape[headsAxis] != columnType.getShape()[rank - 3])
    return {};
  return perHead;
}

/// Erases `root` if nothing reads it, then each op that only it (or ops
/// erased so) read.
void eraseIfUnread(PatternRewriter &rewriter, Operation *root) {
  SmallVector<Operation *> worklist = {root};
  DenseSet<Operation *> erased; // checked before an op is touched: the worklist may hold them again
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!op || erased.contains(op) || !op->use_empty() || !isPure(op))
      continue;
    for (Value operand : op->getOperands())
      worklist.push_back(operand.getDefiningOp());
    erased.insert(op);
    rewriter.eraseOp(op);
  }
}

/// Attention with sinks (GPT-OSS), anchored at its second product:
/// softmax(concat(S, sinks broadcast to [..., H, Tq, 1]))[..., :Tk] @ v
/// with S attention's masked scores (matchMaskedScores) becomes one
/// graph.attention with `sinks`. (Its rows' maximum, which the export
/// subtracts before the softmax, DropSoftmaxShift has dropped.)
struct FuseAttentionWithSinks : public OpRewritePattern<BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BatchMatmulOp output, PatternRewriter &rewriter) const override {
    if (output.getTransposeA() || output.getTransposeB())
      return failure();
    auto keys = output.getLhs().getDefiningOp<SliceOp>(); // the probabilities of the keys, not of the sink
    auto softmax = keys ? keys.getInput().getDefiningOp<SoftmaxOp>() : nullptr;
    auto joined = softmax ? softmax.getInput().getDefiningOp<ConcatOp>() : nullptr;
    if (!joined || !keys->hasOneUse() || !softmax->hasOneUse() || !joined->hasOneUse() ||
        joined.getInputs().size() != 2)
      return failure();
    const int64_t rank = tensorType(joined.getResult()).getRank();
    const int64_t axis = softmax.getAxis() < 0 ? softmax.getAxis() + rank : softmax.getAxis();
    const int64_t concatAxis = joined.getAxis() < 0 ? joined.getAxis() + rank : joined.getAxis();
    Value scoresValue = joined.getInputs()[0], column = joined.getInputs()[1];
    Value perHead = perHeadSinks(column);
    if (axis != rank - 1 || concatAxis != rank - 1 || !perHead ||
        !slicesLastAxis(keys, softmax.getResult(), 0, tensorType(scoresValue).getShape().back()))
      return failure();
    Value x, mask;
    double scale;
    SmallVector<Location> locations;
    if (failed(
            matchMaskedScores(rewriter, scoresValue, softmax, isScaledProduct(scoresValue), x, mask, scale, locations)))
      return failure();
    auto scores = x.getDefiningOp<BatchMatmulOp>();
    if (!scores || !scores->hasOneUse() || scores.getTransposeA() || !fitsAttention(scores, output))
      return failure();
    locations.append({joined.getLoc(), keys.getLoc(), output.getLoc()});
    rewriter.setInsertionPoint(output);
    const int64_t heads = tensorType(column).getShape()[rank - 3];
    Value sinks =
        ReshapeOp::create(rewriter, column.getLoc(), RankedTensorType::get({heads}, rewriter.getF32Type()), perHead);
    replaceWithAttention(rewriter, output, scores, mask, sinks, rewriter.getF64FloatAttr(scale),
                         rewriter.getF64FloatAttr(0.0), locations);
    // The scores, their mask and scale, the column: gone now, as
    // FuseAttention's (packed_attention and the transposes' folds look for
    // views without other readers).
    eraseIfUnread(rewriter, keys);
    return success();
  }
};

/// The x of `rotated` = concat(-x[..., D/2:], x[..., :D/2]) along the last
/// axis (Hugging Face's rotate_half), or null.
Value rotateHalfSource(Value rotated) {
  auto concat = rotated.getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2 || concat.getAxis() != tensorType(rotated).getRank() - 1)
    return {};
  auto negated = concat.getInputs()[0].getDefiningOp<NegOp>();
  auto secondHalf = negated ? negated.getInput().getDefiningOp<SliceOp>() : SliceOp();
  auto firstHalf = concat.getInputs()[1].getDefiningOp<SliceOp>();
  if (!secondHalf || !firstHalf)
    return {};
  Value x = firstHalf.getInput();
  const int64_t width = tensorType(x).getShape().back(), half = width / 2;
  if (width % 2 != 0 || !slicesLastAxis(firstHalf, x, 0, half) || !slicesLastAxis(secondHalf, x, half, half))
    return {};
  return x;
}

/// Whether `slice` takes every other element of `x`'s last axis from
/// `start` (0 or 1) and every element of the others.
bool slicesEveryOther(SliceOp slice, Value x, int64_t start) {
  if (!slice || slice.getInput() != x)
    return false;
  ArrayRef<int64_t> in = tensorType(x).getShape(), out = tensorType(slice.getResult()).getShape();
  ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
  const size_t rank = in.size();
  if (rank == 0 || out.size() != rank || in.back() % 2 != 0 || out.back() != in.back() / 2 || starts.back() != start ||
      steps.back() != 2)
    return false;
  for (size_t i = 0; i + 1 < rank; ++i)
    if (steps[i] != 1 || starts[i] != 0 || out[i] != in[i])
      return false;
  return true;
}

/// The x of `rotated` = the interleaved rotate_half of Cohere, GLM, ERNIE
/// and GPT-J, `stack(-x[..., 1::2], x[..., ::2], -1).flatten(-2)`: a
/// reshape of the concat, along a new last axis, of the two slices each
/// given a last axis of 1 (the negated odd elements first), or null.
Value rotateEveryTwoSource(Value rotated) {
  auto flatten = rotated.getDefiningOp<ReshapeOp>();
  auto concat = flatten ? flatten.getInput().getDefiningOp<ConcatOp>() : ConcatOp();
  if (!concat || concat.getInputs().size() != 2)
    return {};
  RankedTensorType stacked = tensorType(concat.getResult());
  const int64_t rank = stacked.getRank();
  if (rank < 2 || concat.getAxis() != rank - 1 || stacked.getShape().back() != 2)
    return {};
  auto unstacked = [](Value v) { // v with its last axis of 1 dropped, or null
    auto reshape = v.getDefiningOp<ReshapeOp>();
    if (!reshape || tensorType(v).getShape().back() != 1 ||
        tensorType(reshape.getInput()).getShape() != tensorType(v).getShape().drop_back())
      return Value();
    return Value(reshape.getInput());
  };
  Value negatedOdd = unstacked(concat.getInputs()[0]), even = unstacked(concat.getInputs()[1]);
  auto negated = negatedOdd ? negatedOdd.getDefiningOp<NegOp>() : NegOp();
  auto oddSlice = negated ? negated.getInput().getDefiningOp<SliceOp>() : SliceOp();
  auto evenSlice = even ? even.getDefiningOp<SliceOp>() : SliceOp();
  if (!oddSlice || !evenSlice)
    return {};
  Value x = evenSlice.getInput();
  if (tensorType(x) != tensorType(rotated) || !slicesEveryOther(evenSlice, x, 0) || !slicesEveryOther(oddSlice, x, 1))
    return {};
  return x;
}

/// The shape graph.rotary takes `table` (cos or sin) in: leading
/// dimensions of 1 up to the input's rank; failure where it does not
/// broadcast to the input but along the last axis.
FailureOr<SmallVector<int64_t>> rotaryTableShape(Value table, RankedTensorType input) {
  ArrayRef<int64_t> shape = tensorType(table).getShape(), full = input.getShape();
  if (shape.size() > full.size() || shape.empty() || shape.back() != full.back())
    return failure();
  SmallVector<int64_t> padded(full.size() - shape.size(), 1);
  padded.append(shape.begin(), shape.end());
  for (size_t i = 0; i < full.size(); ++i)
    if (padded[i] != 1 && padded[i] != full[i])
      return failure();
  return padded;
}

/// `table` reshaped to `shape` (rotaryTableShape), or itself.
Value rotaryTable(PatternRewriter &rewriter, Location loc, Value table, ArrayRef<int64_t> shape) {
  RankedTensorType type = tensorType(table);
  if (type.getShape() == shape)
    return table;
  return ReshapeOp::create(rewriter, loc, RankedTensorType::get(shape, type.getElementType()), table);
}

/// Hugging Face's apply_rotary_pos_emb, `x * cos + rotate_half(x) * sin`
/// (either order of each sum and product; rotate_half in halves, or
/// interleaved), as one graph.rotary: seven (or nine) elementwise kernels
/// forward and as many backward become one each.
struct FuseRotary : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    RankedTensorType type = tensorType(add.getResult());
    if (!isa<FloatType>(type.getElementType()))
      return failure();
    for (auto [direct, rotatedTerm] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
      auto rotatedProduct = rotatedTerm.getDefiningOp<MulOp>();
      auto directProduct = direct.getDefiningOp<MulOp>();
      if (!rotatedProduct || !directProduct)
        continue;
      Value x, sin;
      bool interleaved = false;
      for (auto [rotated, table] : {std::pair{rotatedProduct.getLhs(), rotatedProduct.getRhs()},
                                    {rotatedProduct.getRhs(), rotatedProduct.getLhs()}}) {
        if (Value source = rotateHalfSource(rotated)) {
          x = source, sin = table;
          break;
        }
        if (Value source = rotateEveryTwoSource(rotated)) {
          x = source, sin = table, interleaved = true;
          break;
        }
      }
      if (!x || tensorType(x) != type)
        continue;
      Value cos = otherOperand<MulOp>(directProduct, x);
      if (!cos || tensorType(rotatedProduct.getResult()) != type || tensorType(directProduct.getResult()) != type)
        continue;
      FailureOr<SmallVector<int64_t>> cosShape = rotaryTableShape(cos, type), sinShape = rotaryTableShape(sin, type);
      if (failed(cosShape) || failed(sinShape))
        continue;
      SmallVector<Location> locations = {add.getLoc(), directProduct.getLoc(), rotatedProduct.getLoc()};
      Location loc = rewriter.getFusedLoc(locations);
      Value cosTable = rotaryTable(rewriter, loc, cos, *cosShape);
      Value sinTable = rotaryTable(rewriter, loc, sin, *sinShape);
      rewriter.replaceOpWithNewOp<RotaryOp>(add, type, x, cosTable, sinTable, rewriter.getBoolAttr(interleaved));
      return success();
    }
    return failure();
  }
};

/// The half of `x`'s last axis that `half` is ([0, D/2) first, or
/// [D/2, D) second), as a slice of x itself or that slice transposed by a
/// permutation that keeps the last axis; sets `x` (and `perm`, where a
/// transpose) on the first call and checks the others against them.
bool isHalfOf(Value half, bool second, Value &x, std::optional<ArrayRef<int64_t>> &perm) {
  std::optional<ArrayRef<int64_t>> ownPerm;
  if (auto transpose = half.getDefiningOp<TransposeOp>()) {
    ownPerm = transpose.getPerm();
    if (ownPerm->back() != static_cast<int64_t>(ownPerm->size()) - 1)
      return false;
    half = transpose.getInput();
  }
  auto slice = half.getDefiningOp<SliceOp>();
  if (!slice || (x && (slice.getInput() != x || ownPerm != perm)))
    return false;
  const int64_t width = tensorType(slice.getInput()).getShape().back();
  if (width % 2 != 0 || !slicesLastAxis(slice, slice.getInput(), second ? width / 2 : 0, width / 2))
    return false;
  x = slice.getInput();
  perm = ownPerm;
  return true;
}

/// The table that `product` multiplies `half` by, or null.
Value tableOf(Value product, Value half) {
  auto mul = product.getDefiningOp<MulOp>();
  if (!mul || (mul.getLhs() != half && mul.getRhs() != half))
    return {};
  return mul.getLhs() == half ? mul.getRhs() : mul.getLhs();
}

/// The rotation in halves GPT-OSS writes (`_apply_rotary_emb`):
/// concat(x1 cos - x2 sin, x2 cos + x1 sin) with x1, x2 the halves of x's
/// last axis and cos, sin tables of half its width, which is graph.rotary
/// of x with each table repeated for both halves. The halves may each be
/// transposed alike (graph-fuse moves slices before a heads transpose):
/// the rotation then takes x transposed so, which RotateBeforeTranspose
/// moves on.
struct FuseHalvesRotary : public OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp concat, PatternRewriter &rewriter) const override {
    RankedTensorType type = tensorType(concat.getResult());
    const int64_t rank = type.getRank();
    if (concat.getInputs().size() != 2 || rank == 0 || concat.getAxis() != rank - 1 ||
        !isa<FloatType>(type.getElementType()))
      return failure();
    auto first = concat.getInputs()[0].getDefiningOp<SubOp>();
    auto second = concat.getInputs()[1].getDefiningOp<AddOp>();
    if (!first || !second)
      return failure();
    // first = x1 cos - x2 sin: the halves are factors of its products.
    Value x;
    std::optional<ArrayRef<int64_t>> perm;
    auto halfFactor = [&](Value product, bool secondHalf) -> Value {
      if (auto mul = product.getDefiningOp<MulOp>())
        for (Value factor : {mul.getLhs(), mul.getRhs()})
          if (isHalfOf(factor, secondHalf, x, perm))
            return factor;
      return {};
    };
    Value x1 = halfFactor(first.getLhs(), false);
    Value x2 = x1 ? halfFactor(first.getRhs(), true) : Value();
    if (!x2)
      return failure();
    Value cos = tableOf(first.getLhs(), x1), sin = tableOf(first.getRhs(), x2);
    if (!cos || !sin)
      return failure();
    // second = x2 cos + x1 sin, in either order.
    const bool ordered = tableOf(second.getLhs(), x2) == cos && tableOf(second.getRhs(), x1) == sin;
    const bool swapped = tableOf(second.getRhs(), x2) == cos && tableOf(second.getLhs(), x1) == sin;
    RankedTensorType halfType = tensorType(x1);
    if ((!ordered && !swapped) || tensorType(first.getResult()) != halfType ||
        tensorType(second.getResult()) != halfType)
      return failure();
    FailureOr<SmallVector<int64_t>> cosShape = rotaryTableShape(cos, halfType),
                                    sinShape = rotaryTableShape(sin, halfType);
    if (failed(cosShape) || failed(sinShape))
      return failure();
    RankedTensorType sourceType = tensorType(x);
    SmallVector<int64_t> rotatedShape(sourceType.getShape());
    if (perm)
      applyPermutationToVector(rotatedShape, *perm);
    if (ArrayRef<int64_t>(rotatedShape) != type.getShape() || sourceType.getElementType() != type.getElementType())
      return failure();
    SmallVector<Location> locations = {concat.getLoc(), first.getLoc(), second.getLoc()};
    Location loc = rewriter.getFusedLoc(locations);
    auto bothHalves = [&](Value table, ArrayRef<int64_t> shape) -> Value {
      Value half = rotaryTable(rewriter, loc, table, shape);
      SmallVector<int64_t> full(shape);
      full.back() *= 2;
      return ConcatOp::create(rewriter, loc, RankedTensorType::get(full, tensorType(half).getElementType()),
                              ValueRange{half, half}, rewriter.getI64IntegerAttr(rank - 1));
    };
    rewriter.setInsertionPoint(concat);
    Value cosTable = bothHalves(cos, *cosShape), sinTable = bothHalves(sin, *sinShape);
    if (perm)
      x = TransposeOp::create(rewriter, loc, type, x, rewriter.getDenseI64ArrayAttr(*perm));
    rewriter.replaceOpWithNewOp<RotaryOp>(concat, type, x, cosTable, sinTable, rewriter.getBoolAttr(false));
    return success();
  }
};

/// `values` given per axis of a transpose's result, laid out per axis of its
/// input (result axis d is input axis perm[d]).
SmallVector<int64_t> perInputAxis(ArrayRef<int64_t> values, ArrayRef<int64_t> perm) {
  return applyPermutation(values, invertPermutationVector(perm));
}

/// Whether `shape` permuted by `perm` (result axis i is axis perm[i]) keeps
/// the elements in order: only dimensions of 1 move, so the permuted
/// tensor is a reshape.
bool permutesOnlyUnitDims(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  int64_t last = -1;
  for (int64_t axis : perm) {
    if (shape[axis] == 1)
      continue;
    if (axis < last)
      return false;
    last = axis;
  }
  return true;
}

/// A rotation of a transposed tensor that keeps its last axis (LLaMA's
/// query and key, moved heads-forward before their rotary embedding)
/// rotates the tensor itself, with cos and sin reshaped to its layout
/// where that moves only their dimensions of 1, and transposes after: the
/// transpose then meets attention, which reads the head view in place
/// (FoldHeadTransposesIntoAttention).
struct RotateBeforeTranspose : public OpRewritePattern<RotaryOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RotaryOp rotary, PatternRewriter &rewriter) const override {
    auto transpose = rotary.getInput().getDefiningOp<TransposeOp>();
    if (!transpose || !transpose->hasOneUse())
      return failure();
    ArrayRef<int64_t> perm = transpose.getPerm();
    const int64_t rank = perm.size();
    if (perm.back() != rank - 1)
      return failure();
    // Table axis perm[i] of the source layout is axis i of the rotated one.
    const SmallVector<int64_t> inverse = invertPermutationVector(perm);
    Value tables[2] = {rotary.getCos(), rotary.getSin()};
    for (Value table : tables)
      if (!permutesOnlyUnitDims(tensorType(table).getShape(), inverse))
        return failure();
    for (Value &table : tables) {
      RankedTensorType type = tensorType(table);
      auto sourceType = RankedTensorType::get(perInputAxis(type.getShape(), perm), type.getElementType());
      table = ReshapeOp::create(rewriter, rotary.getLoc(), sourceType, table);
    }
    Value source = transpose.getInput();
    auto rotated = RotaryOp::create(rewriter, rotary.getLoc(), source.getType(), source, tables[0], tables[1],
                                    rotary.getInterleavedAttr());
    rewriter.replaceOpWithNewOp<TransposeOp>(rotary, rotary.getType(), rotated, transpose.getPermAttr());
    return success();
  }
};

/// A normalisation (layer_norm, rms_norm) of a transposed tensor whose
/// normalised axes the transpose leaves in place normalises the tensor
/// itself, and the transpose moves after it: Gemma 3 normalises its query
/// and key per head after moving them heads forward (Qwen3 before), and so
/// the transpose can go on to the rotation and attention, which reads the
/// head view in place. The per-slice statistics are transposed alike.
template <typename NormOp> struct NormaliseBeforeTranspose : public OpRewritePattern<NormOp> {
  using OpRewritePattern<NormOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(NormOp norm, PatternRewriter &rewriter) const override {
    auto transpose = norm.getInput().template getDefiningOp<TransposeOp>();
    if (!transpose || !transpose->hasOneUse())
      return failure();
    ArrayRef<int64_t> perm = transpose.getPerm();
    for (int64_t axis = norm.getAxis(); axis < static_cast<int64_t>(perm.size()); ++axis)
      if (perm[axis] != axis)
        return failure();
    Operation *moved = rewriter.clone(*norm.getOperation());
    rewriter.modifyOpInPlace(moved, [&] {
      moved->setOperand(0, transpose.getInput());
      for (auto [result, original] : llvm::zip(moved->getResults(), norm->getResults())) {
        RankedTensorType type = tensorType(original);
        result.setType(RankedTensorType::get(perInputAxis(type.getShape(), perm), type.getElementType()));
      }
    });
    SmallVector<Value> transposed;
    for (auto [result, original] : llvm::zip(moved->getResults(), norm->getResults()))
      transposed.push_back(
          TransposeOp::create(rewriter, norm.getLoc(), original.getType(), result, transpose.getPermAttr()));
    rewriter.replaceOp(norm, transposed);
    return success();
  }
};

/// A transpose read only by slices becomes slices of its input, each
/// transposed: partial rotary embeddings (Phi, StableLM, GPT-NeoX) rotate
/// the first columns of a query or key moved heads forward and pass the
/// rest, and with the transposes after the slices, the rotation and the
/// concat after it (ConcatBeforeTranspose), they reach attention, which
/// reads the head views in place. The transposed slices together hold no
/// more elements than the transpose did.
struct SliceBeforeTranspose : public OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp transpose, PatternRewriter &rewriter) const override {
    Value result = transpose.getResult();
    if (result.use_empty() || !llvm::all_of(result.getUsers(), [](Operation *user) { return isa<SliceOp>(user); }))
      return failure();
    ArrayRef<int64_t> perm = transpose.getPerm();
    for (Operation *user : llvm::make_early_inc_range(result.getUsers())) {
      auto slice = cast<SliceOp>(user);
      RankedTensorType sliced = tensorType(slice.getResult());
      rewriter.setInsertionPoint(slice);
      Value source =
          SliceOp::create(rewriter, slice.getLoc(),
                          RankedTensorType::get(perInputAxis(sliced.getShape(), perm), sliced.getElementType()),
                          transpose.getInput(), rewriter.getDenseI64ArrayAttr(perInputAxis(slice.getStarts(), perm)),
                          rewriter.getDenseI64ArrayAttr(perInputAxis(slice.getSteps(), perm)));
      rewriter.replaceOpWithNewOp<TransposeOp>(slice, sliced, source, transpose.getPermAttr());
    }
    rewriter.eraseOp(transpose);
    return success();
  }
};

/// concat of tensors transposed alike, each transpose with no other use:
/// the transpose of the concat of their inputs (along the axis the concat
/// axis came from).
struct ConcatBeforeTranspose : public OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp concat, PatternRewriter &rewriter) const override {
    SmallVector<Value> sources;
    DenseI64ArrayAttr perm;
    for (Value input : concat.getInputs()) {
      auto transpose = input.getDefiningOp<TransposeOp>();
      if (!transpose || !transpose->hasOneUse() || (perm && transpose.getPermAttr() != perm))
        return failure();
      perm = transpose.getPermAttr();
      sources.push_back(transpose.getInput());
    }
    if (!perm)
      return failure();
    const int64_t axis = perm.asArrayRef()[concat.getAxis()];
    RankedTensorType type = tensorType(concat.getResult());
    auto joinedType = RankedTensorType::get(perInputAxis(type.getShape(), perm), type.getElementType());
    Value joined = ConcatOp::create(rewriter, concat.getLoc(), joinedType, sources, rewriter.getI64IntegerAttr(axis));
    rewriter.replaceOpWithNewOp<TransposeOp>(concat, type, joined, perm);
    return success();
  }
};

/// Whether `perm` swaps the axes rank - 3 and rank - 2 (sequence and heads)
/// and keeps every other axis in place.
bool swapsHeadsAndSequence(ArrayRef<int64_t> perm) {
  const int64_t rank = perm.size();
  if (rank < 3)
    return false;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t expected = i == rank - 3 ? rank - 2 : i == rank - 2 ? rank - 3 : i;
    if (perm[i] != expected)
      return false;
  }
  return true;
}

/// Whether `perm` takes [..., T, H, D] to [..., H, D, T]: the key of
/// `q @ k^T` transposed in one step.
bool headsForwardKeyTransposed(ArrayRef<int64_t> perm) {
  const int64_t rank = perm.size();
  if (rank < 3)
    return false;
  for (int64_t i = 0; i < rank - 3; ++i)
    if (perm[i] != i)
      return false;
  return perm[rank - 3] == rank - 2 && perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 3;
}

/// The projection an attention operand is a head view of: `operand` =
/// transpose(reshape(slice(projection)), heads forward), the slice taking
/// columns [part * width, (part + 1) * width) of the projection's last axis
/// and every row, each step with no other use. Sets `projection`, `part`
/// and `heads` and adds the three ops' locations; fails with a null value.
Value packedPart(Value operand, bool keyTransposed, int64_t &part, int64_t &heads,
                 SmallVectorImpl<Location> &locations) {
  auto transpose = operand.getDefiningOp<TransposeOp>();
  if (!transpose || !transpose->hasOneUse() ||
      !(keyTransposed ? headsForwardKeyTransposed(transpose.getPerm()) : swapsHeadsAndSequence(transpose.getPerm())))
    return {};
  auto reshape = transpose.getInput().getDefiningOp<ReshapeOp>();
  if (!reshape || !reshape->hasOneUse())
    return {};
  auto slice = reshape.getInput().getDefiningOp<SliceOp>();
  if (!slice || !slice->hasOneUse())
    return {};
  // The reshape splits the slice's last axis into [heads, D], nothing else.
  ArrayRef<int64_t> sliced = tensorType(slice.getResult()).getShape(),
                    split = tensorType(reshape.getResult()).getShape();
  if (sliced.size() < 2 || split.size() != sliced.size() + 1 || split.drop_back(2) != sliced.drop_back() ||
      split[split.size() - 2] * split.back() != sliced.back())
    return {};
  Value projection = slice.getInput();
  ArrayRef<int64_t> full = tensorType(projection).getShape();
  ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
  const size_t rank = full.size();
  if (rank != sliced.size() || full.drop_back() != sliced.drop_back() || full.back() != 3 * sliced.back())
    return {};
  for (size_t i = 0; i < rank; ++i)
    if (steps[i] != 1 || (i + 1 < rank && starts[i] != 0))
      return {};
  if (starts.back() % sliced.back() != 0)
    return {};
  part = starts.back() / sliced.back();
  heads = split[split.size() - 2];
  locations.append({slice.getLoc(), reshape.getLoc(), transpose.getLoc()});
  return projection;
}

/// The one projection whose thirds attention's q, k and v are (packedPart
/// for each, in order, with one number of heads), or null; sets `heads`.
Value packedProjection(AttentionOp attention, int64_t &heads, SmallVectorImpl<Location> &locations) {
  if (attention.getTokenMajor())
    return {};
  int64_t parts[3], partHeads[3];
  Value projections[3] = {
      packedPart(attention.getQuery(), false, parts[0], partHeads[0], locations),
      packedPart(attention.getKey(), attention.getKeyTransposed(), parts[1], partHeads[1], locations),
      packedPart(attention.getValue(), false, parts[2], partHeads[2], locations)};
  for (int i = 0; i < 3; ++i)
    if (!projections[i] || projections[i] != projections[0] || parts[i] != i || partHeads[i] != partHeads[0])
      return {};
  heads = partHeads[0];
  return projections[0];
}

/// Attention over the heads of one fused projection: q, k and v the three
/// thirds of its last axis, each viewed as heads and transposed forward,
/// and the output transposed back. One graph.packed_attention reads the
/// heads in place with a row stride; the output transposes become views of
/// its [..., T, heads * D] result.
struct FusePackedAttention : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention, PatternRewriter &rewriter) const override {
    int64_t heads;
    SmallVector<Location> locations = {attention.getLoc()};
    Value qkv = packedProjection(attention, heads, locations);
    if (!qkv || attention.getSinks()) // packed_attention takes no sinks
      return failure();
    Value out = attention.getOut();
    if (out.use_empty())
      return failure();
    for (Operation *user : out.getUsers()) {
      auto transpose = dyn_cast<TransposeOp>(user);
      if (!transpose || !swapsHeadsAndSequence(transpose.getPerm()))
        return failure();
      locations.push_back(transpose.getLoc());
    }
    RankedTensorType qkvType = tensorType(qkv);
    SmallVector<int64_t> outShape(qkvType.getShape());
    outShape.back() /= 3;
    auto outType = RankedTensorType::get(outShape, tensorType(out).getElementType());
    rewriter.setInsertionPoint(attention);
    auto packed = PackedAttentionOp::create(rewriter, rewriter.getFusedLoc(locations), outType,
                                            attention.getLogsumexp().getType(), qkv, attention.getMask(),
                                            rewriter.getI64IntegerAttr(heads), attention.getScaleAttr(),
                                            attention.getComputeDtypeAttr(), attention.getSoftcapAttr());
    for (Operation *user : llvm::make_early_inc_range(out.getUsers())) {
      auto transpose = cast<TransposeOp>(user);
      rewriter.setInsertionPoint(transpose);
      rewriter.replaceOpWithNewOp<ReshapeOp>(transpose, transpose.getType(), packed.getOut());
    }
    rewriter.replaceAllUsesWith(attention.getLogsumexp(), packed.getLogsumexp());
    rewriter.eraseOp(attention);
    return success();
  }
};

/// Whether `perm` swaps the last two axes and keeps the others in place.
bool swapsLastTwoAxes(ArrayRef<int64_t> perm) {
  const int64_t rank = perm.size();
  if (rank < 2)
    return false;
  for (int64_t i = 0; i < rank; ++i)
    if (perm[i] != (i == rank - 2 ? rank - 1 : i == rank - 1 ? rank - 2 : i))
      return false;
  return true;
}

/// reshape(transpose(reshape(y))) where the reshapes only regroup the
/// leading axes and the transpose swaps the last two: the transpose of y
/// regrouped, which is the same tensor. torch's dynamo exporter writes
/// attention's key so ([B, H, T, D] flattened to [B H, T, D] for a 3-D
/// product, transposed, split back); as transpose(y) it meets
/// FoldKeyTransposeIntoAttention, and y the grouped-query folds.
struct SwapLastAxesBeforeRegrouping : public OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  static bool keepsLastTwo(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
    return a.size() >= 2 && b.size() >= 2 && a.take_back(2) == b.take_back(2);
  }

  LogicalResult matchAndRewrite(ReshapeOp outer, PatternRewriter &rewriter) const override {
    auto transpose = outer.getInput().getDefiningOp<TransposeOp>();
    if (!transpose || !transpose->hasOneUse() || !swapsLastTwoAxes(transpose.getPerm()))
      return failure();
    auto inner = transpose.getInput().getDefiningOp<ReshapeOp>();
    if (!inner)
      return failure();
    Value y = inner.getInput();
    RankedTensorType outType = tensorType(outer.getResult()), yType = tensorType(y);
    if (!keepsLastTwo(yType.getShape(), tensorType(inner.getResult()).getShape()) ||
        !keepsLastTwo(outType.getShape(), tensorType(transpose.getResult()).getShape()))
      return failure();
    SmallVector<int64_t> regrouped(outType.getShape().drop_back(2));
    regrouped.append(yType.getShape().take_back(2).begin(), yType.getShape().take_back(2).end());
    Value source = y;
    if (ArrayRef<int64_t>(regrouped) != yType.getShape())
      source = ReshapeOp::create(rewriter, inner.getLoc(), RankedTensorType::get(regrouped, yType.getElementType()), y);
    const int64_t rank = regrouped.size();
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 2], perm[rank - 1]);
    rewriter.replaceOpWithNewOp<TransposeOp>(outer, outType, source, rewriter.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// The keys or values that `repeated` copies head by head for grouped-query
/// attention, or null: repeated = reshape(broadcast_to(reshape(x))) with
/// x [..., Hkv, T, D] viewed as [..., Hkv, 1, T, D], broadcast to
/// [..., Hkv, G, T, D] and viewed as [..., Hkv G, T, D], as transformers'
/// repeat_kv writes it: head h of the copy is head h / G of x.
Value repeatedHeadsSource(Value repeated) {
  auto merge = repeated.getDefiningOp<ReshapeOp>();
  auto expand = merge ? merge.getInput().getDefiningOp<BroadcastToOp>() : BroadcastToOp();
  auto split = expand ? expand.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!split)
    return {};
  Value source = split.getInput();
  ArrayRef<int64_t> x = tensorType(source).getShape(), one = tensorType(split.getResult()).getShape(),
                    wide = tensorType(expand.getResult()).getShape(), copy = tensorType(repeated).getShape();
  const size_t rank = x.size(), heads = rank - 3;
  if (rank < 3 || wide.size() != rank + 1)
    return {};
  const int64_t group = wide[heads + 1];
  SmallVector<int64_t> expected(x);
  expected.insert(expected.begin() + heads + 1, 1);
  if (ArrayRef<int64_t>(expected) != one)
    return {};
  expected[heads + 1] = group;
  if (ArrayRef<int64_t>(expected) != wide)
    return {};
  expected.erase(expected.begin() + heads + 1);
  expected[heads] *= group;
  if (ArrayRef<int64_t>(expected) != copy)
    return {};
  return source;
}

/// Attention whose key and value are copies of fewer heads (repeat_kv of
/// grouped-query attention: LLaMA 2 70B and 3, Mistral, Qwen2, Gemma)
/// reads those heads in place: the copies, G times the keys and values,
/// are not made and not kept for backward, and the gradient sums each
/// group's heads in the kernel instead of in a sum_to. A transposed key
/// transposed after its copy is transposed before it instead.
struct FoldRepeatedKeyValueHeads : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention, PatternRewriter &rewriter) const override {
    // repeatedHeadsSource reads [..., H, T, D] copies.
    if (std::optional<ArrayRef<bool>> tokenMajor = attention.getTokenMajor();
        tokenMajor && ((*tokenMajor)[1] || (*tokenMajor)[2]))
      return failure();
    Value key = attention.getKey();
    Value keySource = repeatedHeadsSource(key);
    auto keyTranspose = key.getDefiningOp<TransposeOp>();
    if (!keySource && keyTranspose && swapsLastTwoAxes(keyTranspose.getPerm()))
      keySource = repeatedHeadsSource(keyTranspose.getInput());
    else
      keyTranspose = {};
    Value valueSource = repeatedHeadsSource(attention.getValue());
    if (!keySource || !valueSource)
      return failure();
    const int64_t rank = tensorType(key).getRank();
    if (tensorType(keySource).getShape()[rank - 3] != tensorType(valueSource).getShape()[rank - 3])
      return failure();
    rewriter.setInsertionPoint(attention);
    if (keyTranspose) {
      SmallVector<int64_t> shape(tensorType(keySource).getShape());
      std::swap(shape[rank - 2], shape[rank - 1]);
      keySource = TransposeOp::create(rewriter, keyTranspose.getLoc(),
                                      RankedTensorType::get(shape, tensorType(keySource).getElementType()), keySource,
                                      keyTranspose.getPermAttr());
    }
    rewriter.modifyOpInPlace(attention, [&] {
      attention.getKeyMutable().assign(keySource);
      attention.getValueMutable().assign(valueSource);
    });
    return success();
  }
};

/// A key transposed only for `q @ k^T` (its last two axes swapped) is read
/// as it was: the kernels take key rows as well as key columns, so the
/// copy goes, and backward's dkey needs no transpose back; the CUDA
/// tensor-core kernels load key rows 16 bytes at a time.
struct FoldKeyTransposeIntoAttention : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention, PatternRewriter &rewriter) const override {
    auto transpose = attention.getKey().getDefiningOp<TransposeOp>();
    if (!attention.getKeyTransposed() || !transpose || !swapsLastTwoAxes(transpose.getPerm()))
      return failure();
    rewriter.modifyOpInPlace(attention, [&] {
      attention.getKeyMutable().assign(transpose.getInput());
      attention.setKeyTransposed(false);
    });
    return success();
  }
};

/// Attention whose operands are head views transposed forward
/// ([..., T, H, D] to [..., H, T, D], a key perhaps straight to
/// [..., H, D, T]), or whose output is only transposed back, reads and
/// writes those views themselves (token_major): the transposes, a copy of
/// each operand forward and of each gradient in backward, go. Attention on
/// the thirds of one projection is packed_attention's instead.
struct FoldHeadTransposesIntoAttention : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention, PatternRewriter &rewriter) const override {
    int64_t heads;
    SmallVector<Location> locations = {attention.getLoc()};
    if (!attention.getSinks() && packedProjection(attention, heads, locations))
      return failure(); // FusePackedAttention's
    bool flags[4] = {false, false, false, false}, keyTransposed = attention.getKeyTransposed(), changed = false;
    if (std::optional<ArrayRef<bool>> tokenMajor = attention.getTokenMajor())
      llvm::copy(*tokenMajor, flags);
    Value operands[3] = {attention.getQuery(), attention.getKey(), attention.getValue()};
    for (int i = 0; i < 3; ++i) {
      auto transpose = operands[i].getDefiningOp<TransposeOp>();
      if (flags[i] || !transpose)
        continue;
      if (i == 1 && keyTransposed) {
        if (!headsForwardKeyTransposed(transpose.getPerm()))
          continue;
        keyTransposed = false;
      } else if (!swapsHeadsAndSequence(transpose.getPerm())) {
        continue;
      }
      operands[i] = transpose.getInput();
      flags[i] = changed = true;
      locations.push_back(transpose.getLoc());
    }
    Value out = attention.getOut();
    Type outType = out.getType();
    const bool outFolds = !flags[3] && !out.use_empty() && llvm::all_of(out.getUsers(), [](Operation *user) {
      auto transpose = dyn_cast<TransposeOp>(user);
      return transpose && swapsHeadsAndSequence(transpose.getPerm());
    });
    if (outFolds) {
      outType = (*out.getUsers().begin())->getResult(0).getType();
      flags[3] = changed = true;
    }
    if (!changed)
      return failure();
    rewriter.setInsertionPoint(attention);
    auto folded = AttentionOp::create(rewriter, rewriter.getFusedLoc(locations), outType,
                                      attention.getLogsumexp().getType(), operands[0], operands[1], operands[2],
                                      attention.getMask(), attention.getSinks(), attention.getScaleAttr(),
                                      rewriter.getBoolAttr(keyTransposed), attention.getComputeDtypeAttr(),
                                      rewriter.getDenseBoolArrayAttr(flags), attention.getSoftcapAttr());
    if (outFolds) {
      for (Operation *user : llvm::make_early_inc_range(out.getUsers()))
        rewriter.replaceOp(user, folded.getOut());
    } else {
      rewriter.replaceAllUsesWith(out, folded.getOut());
    }
    rewriter.replaceAllUsesWith(attention.getLogsumexp(), folded.getLogsumexp());
    rewriter.eraseOp(attention);
    return success();
  }
};

/// A mixture of experts' projection as transformers' `batched_mm` experts
/// export it: batch_matmul(x [N, M, K], gather(W [E, K, F], experts [N])),
/// or with the gathered matrices first, batch_matmul(gather(W [E, F, K]),
/// x [N, K, 1]) (Mixtral's, a column per row, which a reshape turns into
/// x^T W^T), with the gathered copy read only there, becomes
/// graph.expert_matmul, which reads each row's expert's matrix in place
/// instead of copying N matrices (and its gradient sums each expert's
/// rows' products instead of scattering N matrices back).
struct FuseExpertMatmul : public OpRewritePattern<BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BatchMatmulOp product, PatternRewriter &rewriter) const override {
    const bool weightsFirst = static_cast<bool>(product.getLhs().getDefiningOp<GatherOp>());
    auto gathered = (weightsFirst ? product.getLhs() : product.getRhs()).getDefiningOp<GatherOp>();
    if (!gathered || !gathered->hasOneUse() || gathered.getAxis() != 0 || gathered.getPaddingIndex())
      return failure();
    Value rows = weightsFirst ? product.getRhs() : product.getLhs();
    RankedTensorType rowsType = tensorType(rows), resultType = tensorType(product.getResult());
    ArrayRef<int64_t> weights = tensorType(gathered.getData()).getShape(),
                      experts = tensorType(gathered.getIndices()).getShape(), x = rowsType.getShape();
    if (x.size() != 3 || weights.size() != 3 || experts.size() != 1 || experts[0] != x[0] ||
        !isa<FloatType>(rowsType.getElementType()))
      return failure();
    bool transposeWeights = product.getTransposeB();
    if (weightsFirst) {
      // y[n] = op(W[e]) x[n] with x[n] one column: y[n]^T = x[n]^T op(W[e])^T.
      const bool column = product.getTransposeB() ? x[1] == 1 : x[2] == 1;
      if (!column || resultType.getShape()[2] != 1)
        return failure();
      transposeWeights = !product.getTransposeA();
    } else if (product.getTransposeA()) {
      return failure();
    }
    SmallVector<Location> locations = {gathered.getLoc(), product.getLoc()};
    Location loc = rewriter.getFusedLoc(locations);
    rewriter.setInsertionPoint(product);
    Value lhs = rows;
    if (weightsFirst && !product.getTransposeB()) // [N, K, 1] as [N, 1, K]: the same elements
      lhs = ReshapeOp::create(rewriter, loc, RankedTensorType::get({x[0], 1, x[1]}, rowsType.getElementType()), rows);
    ArrayRef<int64_t> out = resultType.getShape();
    auto fusedType =
        RankedTensorType::get(weightsFirst ? ArrayRef<int64_t>{out[0], 1, out[1]} : out, resultType.getElementType());
    Value fused = ExpertMatmulOp::create(rewriter, loc, fusedType, lhs, gathered.getData(), gathered.getIndices(),
                                         rewriter.getBoolAttr(transposeWeights));
    if (weightsFirst)
      fused = ReshapeOp::create(rewriter, loc, resultType, fused);
    rewriter.replaceOp(product, fused);
    rewriter.eraseOp(gathered);
    return success();
  }
};

/// A 2-D operand of matmul that is only a transpose: the GEMM reads it
/// transposed itself (transpose_a / transpose_b), as torch's F.linear does
/// with a tied head's embedding, instead of copying it (GPT-2's
/// [vocabulary, dim] embedding, each step and again in backward).
struct FoldTransposeIntoMatmul : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  static Value transposedInput(Value operand) {
    auto transpose = operand.getDefiningOp<TransposeOp>();
    if (!transpose || transpose.getPerm().size() != 2 || transpose.getPerm()[0] != 1)
      return {};
    return transpose.getInput();
  }

  LogicalResult matchAndRewrite(MatmulOp matmul, PatternRewriter &rewriter) const override {
    Value lhs = matmul.getLhs(), rhs = matmul.getRhs();
    bool transposeA = matmul.getTransposeA(), transposeB = matmul.getTransposeB();
    bool folded = false;
    if (Value input = transposedInput(rhs)) {
      rhs = input;
      transposeB = !transposeB;
      folded = true;
    }
    // transpose_a takes a rank-2 lhs only.
    if (Value input = tensorType(lhs).getRank() == 2 ? transposedInput(lhs) : Value()) {
      lhs = input;
      transposeA = !transposeA;
      folded = true;
    }
    if (!folded)
      return failure();
    rewriter.modifyOpInPlace(matmul, [&] {
      matmul.getLhsMutable().assign(lhs);
      matmul.getRhsMutable().assign(rhs);
      matmul.setTransposeA(transposeA);
      matmul.setTransposeB(transposeB);
    });
    return success();
  }
};

struct GraphFusePass : public fsdpc::graph::impl::GraphFuseBase<GraphFusePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns
        .add<FuseLayerNorm, FuseRmsNorm, FuseErfGelu, FuseTanhGelu, FuseGatedActivation, FuseMaskedSoftmax,
             DropSafeSoftmaxGuard, FuseAttention, DropSoftmaxShift, FuseAttentionWithSinks, FusePackedAttention,
             FoldRepeatedKeyValueHeads, FoldKeyTransposeIntoAttention, FoldTransposeIntoMatmul, FuseExpertMatmul,
             FuseRotary, FuseHalvesRotary, RotateBeforeTranspose, SwapLastAxesBeforeRegrouping, SliceBeforeTranspose,
             ConcatBeforeTranspose, NormaliseBeforeTranspose<LayerNormOp>, NormaliseBeforeTranspose<RmsNormOp>>(
            &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Once every attention has its final operands (packed_attention takes
    // a projection's thirds only when each view has no other use, which
    // may hold only after dead scores and scales are gone), the rest read
    // their head views in place.
    RewritePatternSet layouts(&getContext());
    layouts.add<FoldHeadTransposesIntoAttention>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(layouts))))
      return signalPassFailure();
  }
};

} // namespace
