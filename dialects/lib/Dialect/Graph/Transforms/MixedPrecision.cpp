//===- MixedPrecision.cpp - graph-mixed-precision -------------------------===//
//
// FSDP's MixedPrecision(param_dtype=bf16) as casts: @train_step's forward
// pass computes in the low-precision type around f32 master parameters,
// with norms, softmax and the loss in f32.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Regex.h"

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHMIXEDPRECISION
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc::graph;

namespace {

RankedTensorType withElement(Value v, Type element) {
  return RankedTensorType::get(cast<RankedTensorType>(v.getType()).getShape(), element);
}
bool isF32Tensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isF32();
}
bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// The ops that keep f32 under mixed precision: they need its range (sums
/// of exponentials, reciprocal square roots), and torch computes them in f32
/// internally even on bf16 tensors. is_nan, compare and the arg reductions read f32 so
/// that their kernels have one input type (a bf16 NaN widens to an f32 NaN,
/// and widening keeps the order); one_hot writes f32, 0 and 1 are exact in
/// any type, so its consumers cast it. The trigonometric and rounding ops read
/// f32 because their inputs are often positions or angles in the thousands
/// (rotary tables), which bf16 cannot hold to the integer (Hugging Face
/// computes its rotary tables in f32 under autocast for this reason).
bool needsF32(Operation *op) {
  return isa<LayerNormOp, RmsNormOp, SoftmaxOp, LogSoftmaxOp, MaskedSoftmaxOp, AttentionOp, PackedAttentionOp,
             SoftmaxCrossEntropyOp, MseLossOp, IsNanOp, CompareOp, ArgMaxOp, ArgMinOp, OneHotOp, SinOp, CosOp, AtanOp,
             FloorOp, CeilOp, RoundOp>(op);
}

/// The ONNX node names in a location.
void collectNames(Location loc, SmallVectorImpl<StringRef> &names) {
  if (auto name = dyn_cast<NameLoc>(loc))
    names.push_back(name.getName().getValue());
  else if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      collectNames(part, names);
}

struct GraphMixedPrecisionPass : public fsdpc::graph::impl::GraphMixedPrecisionBase<GraphMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp train = lookupFunction(module, kTrainStepFunc, "graph-mixed-precision");
    if (!train)
      return signalPassFailure();
    OpBuilder builder(&getContext());
    if (paramDtype == "bf16")
      low_ = builder.getBF16Type();
    else if (paramDtype == "f16")
      low_ = builder.getF16Type();
    else {
      train.emitError() << "graph-mixed-precision: param-dtype must be bf16 or f16, got '" << paramDtype << "'";
      return signalPassFailure();
    }
    std::string regexError;
    llvm::Regex keep(keepFp32.getValue());
    keep_ = &keep;
    if (!keepFp32.empty() && !keep.isValid(regexError)) {
      train.emitError() << "graph-mixed-precision: keep-fp32 '" << keepFp32 << "' is not a valid regex: "
                        << regexError;
      return signalPassFailure();
    }

    Block &body = train.getBody().front();
    Operation *terminator = body.getTerminator();
    SmallVector<Type> returnedTypes(terminator->getOperandTypes());
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops)
      rewrite(op);
    // The step still returns what it returned (the f32 loss).
    builder.setInsertionPoint(terminator);
    for (auto [i, type] : llvm::enumerate(returnedTypes)) {
      Value value = terminator->getOperand(i);
      if (value.getType() != type)
        terminator->setOperand(i, CastOp::create(builder, value.getLoc(), type, value).getResult());
    }
    module->setAttr("graph.mixed_precision", builder.getStringAttr(paramDtype));
  }

  /// Whether `value` is one FSDP casts on the way in: a parameter, a float
  /// model input, a float constant.
  bool castOnRead(Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return isF32Tensor(arg);
    return isF32Tensor(value) && isa<ConstantOp>(value.getDefiningOp());
  }

  /// `value` cast to `element`, made once: right after its definition, or
  /// for an argument right before `user`, its first reader (rewrite() goes
  /// in program order). Not at the top of the step: autodiff reaches a
  /// cast's gradient when its reverse walk reaches the cast, so a
  /// parameter's gradient would reach its f32 flat gradient only at the
  /// end of the backward, and every unit's reduce_scatter with it.
  Value castTo(Value value, Type element, Operation *user) {
    auto key = std::make_pair(value, element);
    if (Value cached = casts_.lookup(key))
      return cached;
    OpBuilder builder(value.getContext());
    if (isa<BlockArgument>(value))
      builder.setInsertionPoint(user);
    else
      builder.setInsertionPointAfter(value.getDefiningOp());
    Value result = CastOp::create(builder, value.getLoc(), withElement(value, element), value).getResult();
    casts_[key] = result;
    return result;
  }

  bool keptInF32(Operation *op) { return needsF32(op) || keptByName(op) || combinesLosses(op); }

  /// Whether `op` scales, divides or sums losses (graph-append-loss's
  /// weighted sum of several, a sum divided by its label count): scalar
  /// arithmetic on an f32 loss stays f32, as the loss torch reports and
  /// differentiates under autocast is (cross entropy returns f32), where
  /// bf16 would round a loss of 2.8153 to 2.8125.
  static bool combinesLosses(Operation *op) {
    if (!isa<ScaleOp, AddOp, SubOp, DivOp>(op))
      return false;
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || type.getRank() != 0)
      return false;
    return llvm::any_of(op->getOperands(), [](Value operand) {
      Operation *def = operand.getDefiningOp();
      return def && (isa<SoftmaxCrossEntropyOp, MseLossOp>(def) || combinesLosses(def));
    });
  }

  /// Whether `value` is position arithmetic: an integer tensor cast to float
  /// (positions, ids, a 0/1 mask), or a result of computesOnPositions.
  bool isPositionValue(Value value) {
    if (auto cast = value.getDefiningOp<CastOp>())
      return isF32Tensor(value) && isa<IntegerType>(cast.getInput().getType().getElementType());
    return positionValues_.contains(value);
  }

  /// Whether `op` computes only from positions and f32 constants: a rotary
  /// table's angles (positions times inverse frequencies), a mask's
  /// arithmetic. It stays in f32, constants included, as no parameter or
  /// float input takes part and the values are exact integers that bf16
  /// would round beyond 256 (position 1001 to 1000): the f32 rotary tables
  /// that Hugging Face computes with autocast off. Its readers cast its
  /// result as any other f32 value.
  bool computesOnPositions(Operation *op) {
    bool readsPosition = false;
    for (Value operand : op->getOperands()) {
      if (!isFloatTensor(operand))
        continue;
      if (isPositionValue(operand))
        readsPosition = true;
      else if (!isF32Tensor(operand) || !isa_and_nonnull<ConstantOp>(operand.getDefiningOp()))
        return false;
    }
    return readsPosition;
  }

  /// Whether an op that computes in f32 reads its low-precision activations
  /// as they are, its kernels widening each element (exact) and rounding
  /// what they write once, as a cast after them would: the same numbers
  /// without the f32 copies, which the backward would otherwise keep (the
  /// [tokens, vocabulary] logits, a norm's input, attention's query, key
  /// and value: two thirds of GPT-2's activations at its peak). The loss and
  /// attention always may; a norm only where its input is low and its
  /// result feeds only low-precision ops, as its result takes the input's
  /// type.
  bool readsLowActivations(Operation *op) {
    if (keptByName(op))
      return false;
    if (isa<SoftmaxCrossEntropyOp, AttentionOp, PackedAttentionOp>(op))
      return true;
    if (!isa<LayerNormOp, RmsNormOp>(op))
      return false;
    Value input = op->getOperand(0), result = op->getResult(0);
    auto inputType = dyn_cast<RankedTensorType>(input.getType());
    if (!inputType || inputType.getElementType() != low_ || castOnRead(input))
      return false;
    return feedsOnlyLowOps(result);
  }

  /// Whether a norm reads its scale (and bias) in the low type they are
  /// cast to, the kernels widening them (exact) and rounding their
  /// gradients once where the casts back would: the same bits without an
  /// f32 copy of each and a cast of each gradient (two kernels per
  /// parameter). Only where every such operand is a parameter read through
  /// the low type, so that scale and bias keep one type.
  bool readsLowParameters(Operation *op) {
    if (!isa<LayerNormOp, RmsNormOp>(op) || keptByName(op))
      return false;
    return llvm::all_of(op->getOperands().drop_front(), [&](Value v) { return !isFloatTensor(v) || castOnRead(v); });
  }

  /// Whether every user of `value` would cast it to the low type: an op
  /// computing in f32 may then write it in the low type itself, rounding
  /// once where the cast would have (a norm's result, attention's output).
  bool feedsOnlyLowOps(Value value) {
    return llvm::all_of(value.getUsers(), [&](Operation *user) { return castsOperandsToLow(user); });
  }

  /// The operands readsLowActivations means: the logits, attention's
  /// query, key and value (packed attention's qkv), a norm's input.
  static bool isActivationOperand(Operation *op, unsigned index) {
    if (isa<AttentionOp>(op))
      return index < 3;
    return index == 0;
  }

  /// Whether rewrite() changes `op` at all: graph ops but constants and
  /// casts, which stay as they are.
  static bool isRewritten(Operation *op) {
    return !isa<ConstantOp, CastOp>(op) && op->getDialect()->getNamespace() == "graph";
  }

  /// Whether rewrite() gives `op` its f32 float operands in the low type.
  bool castsOperandsToLow(Operation *op) { return isRewritten(op) && !keptInF32(op); }

  /// Whether --keep-fp32 names one of the op's ONNX nodes.
  bool keptByName(Operation *op) {
    if (keepFp32.empty())
      return false;
    SmallVector<StringRef> names;
    collectNames(op->getLoc(), names);
    return llvm::any_of(names, [&](StringRef name) { return keep_->match(name); });
  }

  void rewrite(Operation *op) {
    if (!isRewritten(op))
      return;
    bool touchesFloats = llvm::any_of(op->getOperands(), isFloatTensor) || llvm::any_of(op->getResults(), isFloatTensor);
    if (!touchesFloats)
      return;
    if (computesOnPositions(op)) {
      for (Value result : op->getResults())
        if (isF32Tensor(result))
          positionValues_.insert(result);
      return;
    }
    Type f32 = Float32Type::get(op->getContext());
    // Attention keeps its softmax in f32, but its products may take
    // the low type's tensor cores, as torch's flash attention does; not
    // where the user kept the op in f32 by name.
    if (auto attention = dyn_cast<AttentionOp>(op); attention && !keptByName(op))
      attention.setComputeDtype(lowComputeDtype());
    if (auto attention = dyn_cast<PackedAttentionOp>(op); attention && !keptByName(op))
      attention.setComputeDtype(lowComputeDtype());
    if (keptInF32(op)) {
      // f32 operands; a parameter, input or constant still goes through the
      // low-precision type, as FSDP casts it before any op sees it. Where
      // the op reads its low activations itself (readsLowActivations),
      // they stay as they are.
      const bool readsLow = readsLowActivations(op);
      const bool writesLow = isa<LayerNormOp, RmsNormOp>(op) ? readsLow
                             : isa<AttentionOp, PackedAttentionOp>(op)
                                 ? !keptByName(op) && feedsOnlyLowOps(op->getResult(0))
                                 : false;
      if (writesLow)
        op->getResult(0).setType(withElement(op->getResult(0), low_));
      const bool lowParams = readsLowParameters(op);
      for (OpOperand &operand : op->getOpOperands()) {
        Value value = operand.get();
        if (!isFloatTensor(value))
          continue;
        if (castOnRead(value))
          operand.set(lowParams ? castTo(value, low_, op) : castTo(castTo(value, low_, op), f32, op));
        else if (readsLow && isActivationOperand(op, operand.getOperandNumber()))
          continue;
        else if (!isF32Tensor(value))
          operand.set(castTo(value, f32, op));
      }
      return;
    }
    for (OpOperand &operand : op->getOpOperands())
      if (isF32Tensor(operand.get()))
        operand.set(castTo(operand.get(), low_, op));
    for (Value result : op->getResults())
      if (isF32Tensor(result))
        result.setType(withElement(result, low_));
  }

  Type low_;
  ComputeDtype lowComputeDtype() const { return low_.isBF16() ? ComputeDtype::bf16 : ComputeDtype::f16; }
  const llvm::Regex *keep_ = nullptr; // keep-fp32, compiled in runOnOperation
  llvm::DenseMap<std::pair<Value, Type>, Value> casts_;
  llvm::DenseSet<Value> positionValues_; // computesOnPositions' results
};

} // namespace
