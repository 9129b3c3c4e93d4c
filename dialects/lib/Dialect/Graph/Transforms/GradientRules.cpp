//===- GradientRules.cpp - One gradient rule per graph op -----------------===//
//
// Each rule receives the forward op, the gradients of its results, and which
// operands need a gradient; it builds the operand gradients with graph ops.
// Broadcasting ops reduce their gradients back to the operand shape with
// graph.sum_to.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fsdpc::graph;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Reduces a gradient to the shape of the operand it belongs to.
Value sumTo(OpBuilder &b, Location loc, Value grad, Value operand) {
  if (grad.getType() == operand.getType())
    return grad;
  return SumToOp::create(b, loc, operand.getType(), grad);
}

/// A rank-2 view [rows, last] of a tensor of rank 2 or more.
Value flattenTo2d(OpBuilder &b, Location loc, Value v) {
  RankedTensorType type = tensorType(v);
  if (type.getRank() == 2)
    return v;
  int64_t last = type.getShape().back();
  return ReshapeOp::create(b, loc, RankedTensorType::get({type.getNumElements() / last, last}, type.getElementType()), v);
}

Value matmul(OpBuilder &b, Location loc, Value lhs, Value rhs, bool transA, bool transB) {
  ArrayRef<int64_t> l = tensorType(lhs).getShape(), r = tensorType(rhs).getShape();
  SmallVector<int64_t> shape(l.begin(), l.end());
  int64_t n = transB ? r[0] : r[1];
  if (transA)
    shape = {l[1], n};
  else
    shape.back() = n;
  return MatmulOp::create(b, loc, RankedTensorType::get(shape, tensorType(lhs).getElementType()), lhs, rhs, transA,
                          transB);
}

/// A scalar constant of `like`'s element type, broadcast by the elementwise
/// ops it feeds.
Value scalar(OpBuilder &b, Location loc, float value, Value like) {
  Type element = tensorType(like).getElementType();
  auto type = RankedTensorType::get({}, element);
  APFloat converted(value);
  bool losesInfo;
  converted.convert(cast<FloatType>(element).getFloatSemantics(), APFloat::rmNearestTiesToEven, &losesInfo);
  return ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, converted));
}

/// The gradient of attention's sinks, in f32. In row i of head h, the
/// sink's probability is exp(sink_h - lse_i) (lse has the sink in), and
/// its logit, which has no value (dP = 0), gets -p delta_i as every score
/// gets p (dP - delta_i), delta_i = rowsum(dout * out)_i; a sink's gradient
/// sums that over the rows of its head.
Value sinkGradient(OpBuilder &b, Location loc, AttentionOp o, Value dout) {
  Type f32 = b.getF32Type();
  auto inF32 = [&](Value v) -> Value {
    RankedTensorType type = tensorType(v);
    return type.getElementType() == f32 ? v : CastOp::create(b, loc, RankedTensorType::get(type.getShape(), f32), v);
  };
  Value out = inF32(o.getOut());
  RankedTensorType outType = tensorType(out), lseType = tensorType(o.getLogsumexp());
  const int64_t rank = outType.getRank();
  Value products = MulOp::create(b, loc, outType, inF32(dout), out);
  SmallVector<int64_t> rows(outType.getShape().drop_back());
  Value delta = ReduceSumOp::create(b, loc, RankedTensorType::get(rows, f32), products,
                                    b.getDenseI64ArrayAttr({rank - 1}), b.getBoolAttr(false));
  if (std::optional<ArrayRef<bool>> tokenMajor = o.getTokenMajor(); tokenMajor && (*tokenMajor)[3]) {
    // [..., Tq, H] to logsumexp's [..., H, Tq].
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
    std::swap(perm[rank - 3], perm[rank - 2]);
    delta = TransposeOp::create(b, loc, lseType, delta, b.getDenseI64ArrayAttr(perm));
  }
  RankedTensorType sinksType = tensorType(o.getSinks());
  // Each head's sink against its rows: [H, 1] broadcasts over [..., H, Tq].
  SmallVector<int64_t> column = {sinksType.getShape()[0]};
  if (lseType.getRank() >= 2)
    column.push_back(1);
  auto columnType = RankedTensorType::get(column, f32);
  Value sinks = ReshapeOp::create(b, loc, columnType, o.getSinks());
  Value probabilities = ExpOp::create(b, loc, SubOp::create(b, loc, lseType, sinks, o.getLogsumexp()));
  Value perRow = MulOp::create(b, loc, lseType, probabilities, delta);
  Value summed = NegOp::create(b, loc, SumToOp::create(b, loc, columnType, perRow));
  return ReshapeOp::create(b, loc, sinksType, summed);
}

Value batchMatmul(OpBuilder &b, Location loc, Value lhs, Value rhs, bool transA, bool transB) {
  FailureOr<SmallVector<int64_t>> shape =
      BatchMatmulOp::inferShape(tensorType(lhs).getShape(), tensorType(rhs).getShape(), transA, transB);
  return BatchMatmulOp::create(b, loc, RankedTensorType::get(*shape, tensorType(lhs).getElementType()), lhs, rhs,
                               transA, transB);
}

/// concat(-x[..., D/2:], x[..., :D/2]): rotary's rotate_half, for the
/// gradient of its sin table (a table trains only where an exporter folded
/// it into a parameter).
Value rotateHalf(OpBuilder &b, Location loc, Value x) {
  RankedTensorType type = tensorType(x);
  const int64_t rank = type.getRank(), half = type.getShape().back() / 2;
  SmallVector<int64_t> shape(type.getShape()), starts(rank, 0), steps(rank, 1);
  shape.back() = half;
  auto halfType = RankedTensorType::get(shape, type.getElementType());
  Value first = SliceOp::create(b, loc, halfType, x, b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(steps));
  starts.back() = half;
  Value second = SliceOp::create(b, loc, halfType, x, b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(steps));
  return ConcatOp::create(b, loc, type, ValueRange{NegOp::create(b, loc, second), first},
                          b.getI64IntegerAttr(rank - 1));
}

/// stack(-x[..., 1::2], x[..., ::2], -1).flatten(-2): the interleaved
/// rotate_half, for the same gradient.
Value rotateEveryTwo(OpBuilder &b, Location loc, Value x) {
  RankedTensorType type = tensorType(x);
  const int64_t rank = type.getRank();
  SmallVector<int64_t> shape(type.getShape()), starts(rank, 0), steps(rank, 1);
  shape.back() /= 2;
  steps.back() = 2;
  auto halfType = RankedTensorType::get(shape, type.getElementType());
  Value even = SliceOp::create(b, loc, halfType, x, b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(steps));
  starts.back() = 1;
  Value odd = SliceOp::create(b, loc, halfType, x, b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(steps));
  shape.push_back(1);
  auto columnType = RankedTensorType::get(shape, type.getElementType());
  shape.back() = 2;
  Value pairs = ConcatOp::create(b, loc, RankedTensorType::get(shape, type.getElementType()),
                                 ValueRange{ReshapeOp::create(b, loc, columnType, NegOp::create(b, loc, odd)),
                                            ReshapeOp::create(b, loc, columnType, even)},
                                 b.getI64IntegerAttr(rank));
  return ReshapeOp::create(b, loc, type, pairs);
}

struct Rule {
  OpBuilder &b;
  Location loc;
  ArrayRef<Value> resultGrads;
  ArrayRef<bool> needsGrad;
  SmallVectorImpl<Value> &operandGrads;

  Value dy() const { return resultGrads[0]; }
  bool needs(unsigned i) const { return needsGrad[i]; }
};

void matmulRule(MatmulOp op, Rule &r) {
  // y = op(A) op(B).
  bool tA = op.getTransposeA(), tB = op.getTransposeB();
  Value a = op.getLhs(), bMat = op.getRhs(), dy = r.dy();
  if (r.needs(0))
    r.operandGrads[0] = tA ? matmul(r.b, r.loc, bMat, dy, tB, true)    // dA = op(B) dY^T
                           : matmul(r.b, r.loc, dy, bMat, false, !tB); // dA = dY op(B)^T
  if (r.needs(1)) {
    Value a2 = flattenTo2d(r.b, r.loc, a), dy2 = flattenTo2d(r.b, r.loc, dy);
    r.operandGrads[1] = tB ? matmul(r.b, r.loc, dy2, a2, true, tA)    // dB = dY^T op(A)
                           : matmul(r.b, r.loc, a2, dy2, !tA, false); // dB = op(A)^T dY
  }
}

void batchMatmulRule(BatchMatmulOp op, Rule &r) {
  // y[b] = op(A[b]) op(B[b]); gradients of broadcast batch dims are summed.
  bool tA = op.getTransposeA(), tB = op.getTransposeB();
  Value a = op.getLhs(), bMat = op.getRhs(), dy = r.dy();
  if (r.needs(0)) {
    Value da = tA ? batchMatmul(r.b, r.loc, bMat, dy, tB, true)    // dA = op(B) dY^T
                  : batchMatmul(r.b, r.loc, dy, bMat, false, !tB); // dA = dY op(B)^T
    r.operandGrads[0] = sumTo(r.b, r.loc, da, a);
  }
  if (r.needs(1)) {
    Value db = tB ? batchMatmul(r.b, r.loc, dy, a, true, tA)    // dB = dY^T op(A)
                  : batchMatmul(r.b, r.loc, a, dy, !tA, false); // dB = op(A)^T dY
    r.operandGrads[1] = sumTo(r.b, r.loc, db, bMat);
  }
}

} // namespace

LogicalResult fsdpc::graph::buildGradient(OpBuilder &builder, Operation *op, ArrayRef<Value> resultGrads,
                                          ArrayRef<bool> needsGrad, SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(op->getNumOperands(), Value());
  Rule r{builder, op->getLoc(), resultGrads, needsGrad, operandGrads};
  std::string unsupported;
  bool handled =
      llvm::TypeSwitch<Operation *, bool>(op)
          .Case<ConstantOp>([](auto) { return true; })
          .Case<MatmulOp>([&](MatmulOp m) {
            matmulRule(m, r);
            return true;
          })
          .Case<AddOp>([&](AddOp o) {
            if (r.needs(0))
              operandGrads[0] = sumTo(builder, r.loc, r.dy(), o.getLhs());
            if (r.needs(1))
              operandGrads[1] = sumTo(builder, r.loc, r.dy(), o.getRhs());
            return true;
          })
          .Case<SubOp>([&](SubOp o) {
            if (r.needs(0))
              operandGrads[0] = sumTo(builder, r.loc, r.dy(), o.getLhs());
            if (r.needs(1))
              operandGrads[1] =
                  sumTo(builder, r.loc, NegOp::create(builder, r.loc, r.dy()).getResult(), o.getRhs());
            return true;
          })
          .Case<MulOp>([&](MulOp o) {
            Type type = r.dy().getType();
            if (r.needs(0))
              operandGrads[0] = sumTo(builder, r.loc, MulOp::create(builder, r.loc, type, r.dy(), o.getRhs()), o.getLhs());
            if (r.needs(1))
              operandGrads[1] = sumTo(builder, r.loc, MulOp::create(builder, r.loc, type, r.dy(), o.getLhs()), o.getRhs());
            return true;
          })
          .Case<DivOp>([&](DivOp o) {
            // y = a / b: da = dy / b, db = -dy * y / b.
            Type type = r.dy().getType();
            if (r.needs(0))
              operandGrads[0] = sumTo(builder, r.loc, DivOp::create(builder, r.loc, type, r.dy(), o.getRhs()), o.getLhs());
            if (r.needs(1)) {
              Value yOverB = DivOp::create(builder, r.loc, type, o.getResult(), o.getRhs());
              Value product = MulOp::create(builder, r.loc, type, r.dy(), yOverB);
              operandGrads[1] = sumTo(builder, r.loc, NegOp::create(builder, r.loc, product), o.getRhs());
            }
            return true;
          })
          .Case<BatchMatmulOp>([&](BatchMatmulOp m) {
            batchMatmulRule(m, r);
            return true;
          })
          .Case<PowOp>([&](PowOp o) {
            // y = a^b: da = dy * b * a^(b-1), db = dy * y * log(a).
            Type type = r.dy().getType();
            if (r.needs(0)) {
              Value bMinusOne = AddOp::create(builder, r.loc, o.getRhs().getType(), o.getRhs(), scalar(builder, r.loc, -1.0f, o.getRhs()));
              Value power = PowOp::create(builder, r.loc, type, o.getLhs(), bMinusOne);
              Value slope = MulOp::create(builder, r.loc, type, power, o.getRhs());
              operandGrads[0] = sumTo(builder, r.loc, MulOp::create(builder, r.loc, type, r.dy(), slope), o.getLhs());
            }
            if (r.needs(1)) {
              Value logA = LogOp::create(builder, r.loc, o.getLhs());
              Value slope = MulOp::create(builder, r.loc, type, o.getResult(), logA);
              operandGrads[1] = sumTo(builder, r.loc, MulOp::create(builder, r.loc, type, r.dy(), slope), o.getRhs());
            }
            return true;
          })
          .Case<ExpOp>([&](ExpOp o) {
            operandGrads[0] = MulOp::create(builder, r.loc, o.getType(), r.dy(), o.getResult());
            return true;
          })
          .Case<LogOp>([&](LogOp o) {
            operandGrads[0] = DivOp::create(builder, r.loc, o.getType(), r.dy(), o.getInput());
            return true;
          })
          .Case<SqrtOp>([&](SqrtOp o) {
            // d sqrt(x) = dy / (2 sqrt(x)).
            Value twice = ScaleOp::create(builder, r.loc, o.getResult(), builder.getF64FloatAttr(2.0));
            operandGrads[0] = DivOp::create(builder, r.loc, o.getType(), r.dy(), twice);
            return true;
          })
          .Case<ErfOp>([&](ErfOp o) {
            // d erf(x) = dy * 2 / sqrt(pi) * exp(-x^2).
            Value x = o.getInput();
            Value square = MulOp::create(builder, r.loc, o.getType(), x, x);
            Value gauss = ExpOp::create(builder, r.loc, NegOp::create(builder, r.loc, square));
            Value slope = ScaleOp::create(builder, r.loc, gauss, builder.getF64FloatAttr(1.1283791670955126));
            operandGrads[0] = MulOp::create(builder, r.loc, o.getType(), r.dy(), slope);
            return true;
          })
          .Case<ReciprocalOp>([&](ReciprocalOp o) {
            // d (1/x) = -dy / x^2 = -dy * y^2.
            Value square = MulOp::create(builder, r.loc, o.getType(), o.getResult(), o.getResult());
            operandGrads[0] = NegOp::create(builder, r.loc, MulOp::create(builder, r.loc, o.getType(), r.dy(), square));
            return true;
          })
          .Case<ReduceSumOp>([&](ReduceSumOp o) {
            // Every summed element receives the gradient of its sum.
            RankedTensorType in = tensorType(o.getInput());
            SmallVector<int64_t> kept(in.getShape().begin(), in.getShape().end());
            for (int64_t axis : o.getAxes())
              kept[axis] = 1;
            Value dy = ReshapeOp::create(builder, r.loc, RankedTensorType::get(kept, in.getElementType()), r.dy());
            operandGrads[0] = BroadcastToOp::create(builder, r.loc, in, dy);
            return true;
          })
          .Case<BroadcastToOp>([&](BroadcastToOp o) {
            operandGrads[0] = sumTo(builder, r.loc, r.dy(), o.getInput());
            return true;
          })
          .Case<ConcatOp>([&](ConcatOp o) {
            int64_t axis = o.getAxis(), offset = 0, rank = tensorType(o.getResult()).getRank();
            for (auto [i, input] : llvm::enumerate(o.getInputs())) {
              if (r.needs(i)) {
                SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
                starts[axis] = offset;
                operandGrads[i] = SliceOp::create(builder, r.loc, input.getType(), r.dy(),
                                                  builder.getDenseI64ArrayAttr(starts), builder.getDenseI64ArrayAttr(steps));
              }
              offset += tensorType(input).getShape()[axis];
            }
            return true;
          })
          .Case<SliceOp>([&](SliceOp o) {
            operandGrads[0] = SliceGradOp::create(builder, r.loc, o.getInput().getType(), r.dy(), o.getStartsAttr(),
                                                  o.getStepsAttr());
            return true;
          })
          .Case<GatherOp>([&](GatherOp o) {
            if (!r.needs(0))
              return true;
            Value grad =
                GatherGradOp::create(builder, r.loc, o.getData().getType(), r.dy(), o.getIndices(), o.getAxisAttr());
            // torch's padding_idx: the row's gradient is zero, whatever
            // the lookups that read it (a mask of the rows, times the sum).
            if (std::optional<int64_t> padding = o.getPaddingIndex()) {
              auto type = cast<RankedTensorType>(grad.getType());
              SmallVector<int64_t> maskShape(type.getRank(), 1);
              maskShape[0] = type.getShape()[0];
              auto maskType = RankedTensorType::get(maskShape, type.getElementType());
              const auto &semantics = cast<FloatType>(type.getElementType()).getFloatSemantics();
              SmallVector<APFloat> keep(maskShape[0], APFloat::getOne(semantics));
              keep[*padding] = APFloat::getZero(semantics);
              Value mask = ConstantOp::create(builder, r.loc, maskType, DenseElementsAttr::get(maskType, keep));
              grad = MulOp::create(builder, r.loc, type, grad, mask);
            }
            operandGrads[0] = grad;
            return true;
          })
          // The scatters are linear; their adjoints are the gathers (what a
          // transposed convolution, written as the scatter of its patches,
          // differentiates through).
          .Case<SliceGradOp>([&](SliceGradOp o) {
            operandGrads[0] = SliceOp::create(builder, r.loc, o.getGrad().getType(), r.dy(), o.getStartsAttr(),
                                              o.getStepsAttr());
            return true;
          })
          .Case<GatherGradOp>([&](GatherGradOp o) {
            operandGrads[0] = GatherOp::create(builder, r.loc, o.getGrad().getType(), r.dy(), o.getIndices(),
                                               o.getAxisAttr());
            return true;
          })
          .Case<SelectOp>([&](SelectOp o) {
            // The gradient flows to the operand each element was taken from.
            Value zero = scalar(builder, r.loc, 0.0f, r.dy());
            Type type = r.dy().getType();
            if (r.needs(1))
              operandGrads[1] = sumTo(builder, r.loc,
                                      SelectOp::create(builder, r.loc, type, o.getCondition(), r.dy(), zero), o.getLhs());
            if (r.needs(2))
              operandGrads[2] = sumTo(builder, r.loc,
                                      SelectOp::create(builder, r.loc, type, o.getCondition(), zero, r.dy()), o.getRhs());
            return true;
          })
          .Case<TriluOp>([&](TriluOp o) {
            operandGrads[0] = TriluOp::create(builder, r.loc, r.dy(), o.getKAttr(), o.getUpperAttr());
            return true;
          })
          .Case<DropoutOp>([&](DropoutOp o) {
            // The same seed redraws forward's mask.
            operandGrads[0] = DropoutGradOp::create(builder, r.loc, r.dy(), o.getRatioAttr(), o.getSeedAttr());
            return true;
          })
          .Case<OneHotOp, ArgMaxOp, ArgMinOp, CompareOp, FloorOp, CeilOp, RoundOp>([&](Operation *) {
            // Integer labels in, or integer indices or masks out: no
            // gradient flows. The rounding ops are piecewise constant, and
            // torch's gradient of them is 0 everywhere.
            return true;
          })
          .Case<SinOp>([&](SinOp o) {
            operandGrads[0] =
                MulOp::create(builder, r.loc, o.getType(), r.dy(), CosOp::create(builder, r.loc, o.getInput()));
            return true;
          })
          .Case<CosOp>([&](CosOp o) {
            Value sine = SinOp::create(builder, r.loc, o.getInput());
            operandGrads[0] = NegOp::create(builder, r.loc, MulOp::create(builder, r.loc, o.getType(), r.dy(), sine));
            return true;
          })
          .Case<AtanOp>([&](AtanOp o) {
            // d atan(x) = dy / (1 + x^2).
            Value x = o.getInput();
            Value square = MulOp::create(builder, r.loc, o.getType(), x, x);
            Value denominator = AddOp::create(builder, r.loc, o.getType(), square, scalar(builder, r.loc, 1.0f, x));
            operandGrads[0] = DivOp::create(builder, r.loc, o.getType(), r.dy(), denominator);
            return true;
          })
          .Case<CastOp>([&](CastOp o) {
            // Only a float-to-float cast carries a gradient: dy cast back to
            // the input's type (mixed precision's casts between f32 and bf16).
            Type from = tensorType(o.getInput()).getElementType(), to = tensorType(o.getResult()).getElementType();
            if (isa<FloatType>(from) && isa<FloatType>(to))
              operandGrads[0] = from == to ? r.dy()
                                           : CastOp::create(builder, r.loc, o.getInput().getType(), r.dy()).getResult();
            return true;
          })
          .Case<NegOp>([&](NegOp) {
            operandGrads[0] = NegOp::create(builder, r.loc, r.dy());
            return true;
          })
          .Case<ScaleOp>([&](ScaleOp o) {
            operandGrads[0] = ScaleOp::create(builder, r.loc, r.dy(), o.getFactorAttr());
            return true;
          })
          .Case<GeluOp>([&](GeluOp o) {
            operandGrads[0] = GeluGradOp::create(builder, r.loc, o.getInput(), r.dy(), o.getApproximateAttr());
            return true;
          })
          .Case<GatedActivationOp>([&](GatedActivationOp o) {
            Type type = o.getGate().getType();
            auto grad = GatedActivationGradOp::create(builder, r.loc, type, type, o.getGate(), o.getUp(), r.dy(),
                                                      o.getActivationAttr());
            operandGrads[0] = grad.getDgate();
            operandGrads[1] = grad.getDup();
            return true;
          })
          .Case<RotaryOp>([&](RotaryOp o) {
            // y = x cos + rotate_half(x) sin, linear in x.
            Type type = r.dy().getType();
            if (r.needs(0))
              operandGrads[0] =
                  RotaryGradOp::create(builder, r.loc, type, r.dy(), o.getCos(), o.getSin(), o.getInterleavedAttr());
            if (r.needs(1))
              operandGrads[1] =
                  sumTo(builder, r.loc, MulOp::create(builder, r.loc, type, r.dy(), o.getInput()), o.getCos());
            if (r.needs(2)) {
              Value rotated = o.getInterleaved() ? rotateEveryTwo(builder, r.loc, o.getInput())
                                                 : rotateHalf(builder, r.loc, o.getInput());
              operandGrads[2] = sumTo(builder, r.loc, MulOp::create(builder, r.loc, type, r.dy(), rotated), o.getSin());
            }
            return true;
          })
          .Case<LayerNormOp>([&](LayerNormOp o) {
            if (resultGrads[1] || resultGrads[2]) {
              unsupported = "the loss depends on layer_norm's mean or inv_std_dev, which have no gradient rule";
              return true;
            }
            auto grad = LayerNormGradOp::create(builder, r.loc, o.getInput().getType(), o.getScale().getType(),
                                                o.getScale().getType(), o.getInput(), o.getScale(), o.getMean(),
                                                o.getInvStdDev(), r.dy(), o.getAxisAttr());
            operandGrads[0] = grad.getDinput();
            operandGrads[1] = grad.getDscale();
            operandGrads[2] = grad.getDbias();
            return true;
          })
          .Case<RmsNormOp>([&](RmsNormOp o) {
            if (resultGrads[1]) {
              unsupported = "the loss depends on rms_norm's inv_rms, which has no gradient rule";
              return true;
            }
            auto grad = RmsNormGradOp::create(builder, r.loc, o.getInput().getType(), o.getScale().getType(),
                                              o.getInput(), o.getScale(), o.getInvRms(), r.dy(), o.getAxisAttr());
            operandGrads[0] = grad.getDinput();
            operandGrads[1] = grad.getDscale();
            return true;
          })
          .Case<ReluOp>([&](ReluOp o) {
            operandGrads[0] = ReluGradOp::create(builder, r.loc, o.getResult(), r.dy());
            return true;
          })
          .Case<TanhOp>([&](TanhOp o) {
            operandGrads[0] = TanhGradOp::create(builder, r.loc, o.getResult(), r.dy());
            return true;
          })
          .Case<SigmoidOp>([&](SigmoidOp o) {
            operandGrads[0] = SigmoidGradOp::create(builder, r.loc, o.getResult(), r.dy());
            return true;
          })
          .Case<ReshapeOp>([&](ReshapeOp o) {
            operandGrads[0] = ReshapeOp::create(builder, r.loc, o.getInput().getType(), r.dy());
            return true;
          })
          .Case<TransposeOp>([&](TransposeOp o) {
            operandGrads[0] = TransposeOp::create(builder, r.loc, o.getInput().getType(), r.dy(),
                                                  builder.getDenseI64ArrayAttr(invertPermutationVector(o.getPerm())));
            return true;
          })
          .Case<SoftmaxOp>([&](SoftmaxOp o) {
            operandGrads[0] = SoftmaxGradOp::create(builder, r.loc, o.getResult(), r.dy(), o.getAxisAttr());
            return true;
          })
          .Case<MaskedSoftmaxOp>([&](MaskedSoftmaxOp o) {
            // Masked positions have y = 0, so softmax_grad already gives them
            // no gradient; the scale applies to the rest.
            Value grad = SoftmaxGradOp::create(builder, r.loc, o.getResult(), r.dy(), builder.getI64IntegerAttr(-1));
            if (o.getScale().convertToDouble() != 1.0)
              grad = ScaleOp::create(builder, r.loc, grad, o.getScaleAttr());
            operandGrads[0] = grad;
            return true;
          })
          .Case<ExpertMatmulOp>([&](ExpertMatmulOp o) {
            // d lhs[n] = dy[n] op(W[e])^T: the same op on the other side of
            // the weights; dW[e] sums its rows' products.
            if (r.needs(0))
              operandGrads[0] = ExpertMatmulOp::create(builder, r.loc, o.getLhs().getType(), r.dy(), o.getWeights(),
                                                       o.getExperts(), !o.getTransposeWeights());
            if (r.needs(1))
              operandGrads[1] = ExpertMatmulWeightGradOp::create(builder, r.loc, o.getWeights().getType(), o.getLhs(),
                                                                 r.dy(), o.getExperts(), o.getTransposeWeightsAttr());
            return true;
          })
          .Case<AttentionOp>([&](AttentionOp o) {
            // logsumexp only feeds the gradient; out's gradient is dout.
            if (!r.resultGrads[0])
              return true;
            auto grad = AttentionGradOp::create(
                builder, r.loc, o.getQuery().getType(), o.getKey().getType(), o.getValue().getType(), o.getQuery(),
                o.getKey(), o.getValue(), o.getMask(), o.getOut(), o.getLogsumexp(), r.resultGrads[0], o.getScaleAttr(),
                o.getKeyTransposedAttr(), o.getComputeDtypeAttr(), o.getTokenMajorAttr(), o.getSoftcapAttr());
            for (int i = 0; i < 3; ++i)
              if (r.needs(i))
                operandGrads[i] = grad->getResult(i);
            if (o.getSinks() && r.needs(4))
              operandGrads[4] = sinkGradient(builder, r.loc, o, r.resultGrads[0]);
            return true;
          })
          .Case<PackedAttentionOp>([&](PackedAttentionOp o) {
            if (!r.resultGrads[0] || !r.needs(0))
              return true;
            operandGrads[0] = PackedAttentionGradOp::create(
                builder, r.loc, o.getQkv().getType(), o.getQkv(), o.getMask(), o.getOut(), o.getLogsumexp(),
                r.resultGrads[0], o.getHeadsAttr(), o.getScaleAttr(), o.getComputeDtypeAttr(), o.getSoftcapAttr());
            return true;
          })
          .Case<LogSoftmaxOp>([&](LogSoftmaxOp o) {
            operandGrads[0] = LogSoftmaxGradOp::create(builder, r.loc, o.getResult(), r.dy(), o.getAxisAttr());
            return true;
          })
          .Case<SoftmaxCrossEntropyOp>([&](SoftmaxCrossEntropyOp o) {
            if (r.needs(0))
              operandGrads[0] =
                  SoftmaxCrossEntropyGradOp::create(builder, r.loc, o.getLogits().getType(), o.getLogits(), o.getLabels(),
                                                    r.dy(), o.getReductionAttr(), o.getIgnoreIndexAttr(),
                                                    o.getClassesAttr());
            return true;
          })
          .Case<MseLossOp>([&](MseLossOp o) {
            Type type = o.getPrediction().getType();
            Value dPrediction = MseLossGradOp::create(builder, r.loc, type, o.getPrediction(), o.getTarget(), r.dy());
            if (r.needs(0))
              operandGrads[0] = dPrediction;
            if (r.needs(1))
              operandGrads[1] = NegOp::create(builder, r.loc, dPrediction);
            return true;
          })
          .Default([](Operation *) { return false; });
  if (!handled)
    return op->emitError() << "graph-autodiff: no gradient rule for '" << op->getName() << "'";
  if (!unsupported.empty())
    return op->emitError() << "graph-autodiff: " << unsupported;
  return success();
}
