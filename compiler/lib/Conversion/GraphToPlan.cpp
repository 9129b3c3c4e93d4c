//===- GraphToPlan.cpp - convert-graph-to-plan ----------------------------===//
#include "fsdpc/Conversion/Passes.h"

#include "fsdpc/Dialect/Fsdp/IR/FsdpDialect.h"
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace fsdpc {
#define GEN_PASS_DEF_CONVERTGRAPHTOPLAN
#include "fsdpc/Conversion/Passes.h.inc"
} // namespace fsdpc

using namespace mlir;
using namespace fsdpc;
using plan_ir::CollectiveKind;
using plan_ir::TensorKind;

namespace {

/// A graph op's attributes as its kernel's parameters: the graph dialect's
/// enums become their names, the kernel contract's string form.
SmallVector<NamedAttribute> kernelParams(Operation *op) {
  SmallVector<NamedAttribute> params = graph::ownAttributes(op);
  // Only autodiff reads a gather's padding row; the kernel reads every row.
  if (isa<graph::GatherOp>(op))
    llvm::erase_if(params, [](NamedAttribute param) { return param.getName() == "padding_index"; });
  // A score cap of 0 is none: plans without one leave it out.
  llvm::erase_if(params, [](NamedAttribute param) {
    auto cap = dyn_cast<FloatAttr>(param.getValue());
    return param.getName() == "softcap" && cap && cap.getValueAsDouble() == 0.0;
  });
  for (NamedAttribute &param : params) {
    Attribute name = llvm::TypeSwitch<Attribute, Attribute>(param.getValue())
                         .Case<graph::GeluApproximationAttr, graph::GatedActivationKindAttr, graph::LossReductionAttr,
                               graph::ComputeDtypeAttr, graph::LrScheduleAttr, graph::ComparePredicateAttr>(
                             [&](auto attr) -> Attribute {
                               return StringAttr::get(op->getContext(), graph::stringifyEnum(attr.getValue()));
                             })
                         // Flags (attention's token_major) as the contract's int list of 0 and 1.
                         .Case<DenseBoolArrayAttr>([&](DenseBoolArrayAttr flags) -> Attribute {
                           return DenseI64ArrayAttr::get(
                               op->getContext(), llvm::to_vector(llvm::map_range(flags.asArrayRef(), [](bool flag) {
                                 return static_cast<int64_t>(flag);
                               })));
                         })
                         .Default([](Attribute attr) { return attr; });
    param.setValue(name);
  }
  return params;
}

class Lowering {
public:
  Lowering(ModuleOp module, func::FuncOp train, int64_t worldSize, bool widenGradientsInUpdates)
      : module_(module), func_(train), worldSize_(worldSize), widenGradientsInUpdates_(widenGradientsInUpdates),
        builder_(module.getContext()) {}

  LogicalResult run();

private:
  plan_ir::TensorOp addTensor(StringRef name, TensorKind kind, Type type, Location loc) {
    builder_.setInsertionPointToEnd(&program_.getBlock());
    auto tensor = plan_ir::TensorOp::create(
        builder_, loc, builder_.getStringAttr(name), plan_ir::TensorKindAttr::get(builder_.getContext(), kind),
        TypeAttr::get(type), StringAttr(), ElementsAttr(), StringAttr(), StringAttr(), IntegerAttr(), StringAttr(),
        FlatSymbolRefAttr(), IntegerAttr(), UnitAttr());
    symbols_->insert(tensor); // renames on a clash
    return tensor;
  }
  FlatSymbolRefAttr ref(plan_ir::TensorOp tensor) { return FlatSymbolRefAttr::get(tensor.getSymNameAttr()); }
  FlatSymbolRefAttr transientFor(Value value) {
    plan_ir::TensorOp tensor = addTensor("t" + std::to_string(nextTransient_++), TensorKind::transient,
                                         value.getType(), value.getLoc());
    tensors_[value] = ref(tensor);
    return ref(tensor);
  }
  /// The tensor an op writes its result into: a transient, unless the
  /// result was already given a place (a slice of a flat gradient).
  FlatSymbolRefAttr outputFor(Value value) {
    if (FlatSymbolRefAttr placed = tensors_.lookup(value))
      return placed;
    return transientFor(value);
  }
  /// A view of `base` starting `byteOffset` bytes in.
  FlatSymbolRefAttr viewOf(FlatSymbolRefAttr base, int64_t byteOffset, StringRef name, Type type, Location loc) {
    plan_ir::TensorOp view = addTensor(name, TensorKind::view, type, loc);
    view.setViewOfAttr(base);
    view.setViewOffsetAttr(builder_.getI64IntegerAttr(byteOffset));
    storage_[view.getSymName()] = storage(base);
    return ref(view);
  }
  /// The tensor whose memory `tensor` uses: the base of a view.
  StringRef storage(FlatSymbolRefAttr tensor) {
    auto it = storage_.find(tensor.getValue());
    return it == storage_.end() ? tensor.getValue() : it->second;
  }
  /// Makes compute wait for the collectives still touching these tensors,
  /// and unpacks the bucket that writes them.
  void waitForCollectives(ArrayRef<Attribute> refs, Location loc) {
    for (Attribute ref : refs) {
      unpackBucketOf(storage(cast<FlatSymbolRefAttr>(ref)));
      auto it = pendingEvents_.find(storage(cast<FlatSymbolRefAttr>(ref)));
      if (it == pendingEvents_.end())
        continue;
      for (int64_t event : it->second)
        if (waitedEvents_.insert(event).second)
          plan_ir::WaitEventOp::create(builder_, loc, event, plan_ir::Stream::compute);
      pendingEvents_.erase(it);
    }
  }
  /// A collective on the communication stream. It starts once compute has
  /// reached this point (so the arena slots it writes are free) and compute
  /// waits for it before the next instruction that touches its tensors.
  void addCollective(plan_ir::CollectiveKind kind, FlatSymbolRefAttr input, FlatSymbolRefAttr output, Location loc,
                     int64_t groupSize, int64_t groupStride, fsdp::ReductionAttr reduction = {}) {
    builder_.setInsertionPointToEnd(&program_.getBlock());
    waitForCollectives({input, output}, loc);
    int64_t ready = nextEvent_++, done = nextEvent_++;
    plan_ir::RecordEventOp::create(builder_, loc, ready, plan_ir::Stream::compute);
    plan_ir::WaitEventOp::create(builder_, loc, ready, plan_ir::Stream::communication);
    MLIRContext *context = builder_.getContext();
    plan_ir::ReductionAttr planReduction;
    if (reduction) // one enum, two dialects' attributes
      planReduction = plan_ir::ReductionAttr::get(context, reduction.getValue());
    plan_ir::CollectiveOp::create(builder_, loc, plan_ir::CollectiveKindAttr::get(context, kind),
                                  builder_.getArrayAttr({input}), builder_.getArrayAttr({output}),
                                  plan_ir::StreamAttr::get(context, plan_ir::Stream::communication),
                                  builder_.getI64IntegerAttr(groupSize), builder_.getI64IntegerAttr(groupStride),
                                  planReduction);
    plan_ir::RecordEventOp::create(builder_, loc, done, plan_ir::Stream::communication);
    pendingEvents_[storage(input)].push_back(done);
    if (storage(output) != storage(input))
      pendingEvents_[storage(output)].push_back(done);
  }
  /// A bucket's result waits in its packed buffer until compute first
  /// touches one of the members' outputs: then the copies out of it run, on
  /// compute, after the collective (as FSDP2 copies out of its all-gather
  /// buffer when the unit is first used). Compute thus waits for the bucket
  /// no earlier than it would for its members.
  struct BucketCopy {
    StringRef kernel;
    FlatSymbolRefAttr from, to;
    SmallVector<NamedAttribute> params;
    Location loc;
  };
  struct PendingUnpack {
    SmallVector<BucketCopy> copies;
    SmallVector<std::string> outputs; // storage of each member's output
  };
  void unpackBucketOf(StringRef storageName) {
    auto it = unpackFor_.find(storageName);
    if (it == unpackFor_.end())
      return;
    PendingUnpack &unpack = pendingUnpacks_[it->second];
    SmallVector<BucketCopy> copies = std::move(unpack.copies);
    unpack.copies.clear();
    for (const std::string &output : unpack.outputs)
      unpackFor_.erase(output);
    for (const BucketCopy &copy : copies)
      addKernel(copy.kernel, {copy.from}, {copy.to}, copy.loc, copy.params);
  }
  void addKernel(StringRef kernel, ArrayRef<Attribute> inputs, ArrayRef<Attribute> outputs, Location loc,
                 ArrayRef<NamedAttribute> params) {
    builder_.setInsertionPointToEnd(&program_.getBlock());
    waitForCollectives(inputs, loc);
    waitForCollectives(outputs, loc);
    auto op = plan_ir::KernelOp::create(
        builder_, loc, builder_.getStringAttr(kernel), builder_.getArrayAttr(inputs), builder_.getArrayAttr(outputs),
        plan_ir::StreamAttr::get(builder_.getContext(), plan_ir::Stream::compute), UnitAttr());
    for (NamedAttribute param : params)
      op->setAttr(param.getName(), param.getValue());
  }
  /// The add of a bias [N] to `matmul`'s result [..., N], its only use,
  /// with nothing but casts between them (mixed precision casts a bias
  /// right before the add that reads it); null if there is none. The GEMM
  /// is lowered where the add is, so that the bias is ready, and nothing
  /// between them frees or writes what it reads.
  std::pair<graph::AddOp, Value> biasAddOf(graph::MatmulOp matmul) {
    if (!matmul.getResult().hasOneUse())
      return {};
    auto add = dyn_cast<graph::AddOp>(*matmul.getResult().getUsers().begin());
    if (!add || add.getType() != matmul.getType())
      return {};
    Value bias = add.getLhs() == matmul.getResult() ? add.getRhs() : add.getLhs();
    auto biasType = cast<RankedTensorType>(bias.getType());
    auto type = cast<RankedTensorType>(matmul.getType());
    if (bias == matmul.getResult() || biasType.getRank() != 1 || biasType.getShape()[0] != type.getShape().back())
      return {};
    if (add->getBlock() != matmul->getBlock())
      return {};
    for (Operation *between = matmul->getNextNode(); between != add; between = between->getNextNode())
      if (!isa<graph::CastOp>(between))
        return {};
    return {add, bias};
  }
  /// A weight-gradient GEMM that reads the dY a bias gradient sums.
  struct WeightGrad {
    graph::MatmulOp matmul;
    bool ofA = false; // dY is its A (dY^T X, a weight stored [out, in]), not its B (X^T dY)
  };
  /// The weight-gradient GEMM that reads `sumTo`'s input, or null: the two
  /// become one matmul_bias_grad, whose GEMM also sums the rows of dY
  /// (cuBLASLt's bias-gradient epilogue), so dY is read once. sum_to sums
  /// dY [..., N] to a bias gradient [N]; the matmul (transpose_a) reads a
  /// 2-D view [rows, N] of dY (dY itself, or any reshape of what dY is a
  /// reshape of: an attention gradient's [batch, tokens, heads, D] seen as
  /// [batch, tokens, N] by the bias and as [rows, N] by the weight) as its
  /// untransposed B or as its A, comes later in the block and has no bias
  /// add of its own, and nothing reads the bias gradient before it: the
  /// pair is lowered where the matmul is.
  WeightGrad weightGradOf(graph::SumToOp sumTo) {
    auto input = cast<RankedTensorType>(sumTo.getInput().getType());
    auto result = cast<RankedTensorType>(sumTo.getType());
    if (input.getRank() < 2 || result.getRank() != 1 || result.getShape()[0] != input.getShape().back())
      return {};
    Value root = sumTo.getInput();
    while (auto reshape = root.getDefiningOp<graph::ReshapeOp>())
      root = reshape.getInput();
    SmallVector<Value> dy = {root};
    for (size_t i = 0; i < dy.size(); ++i)
      for (Operation *user : dy[i].getUsers())
        if (auto reshape = dyn_cast<graph::ReshapeOp>(user))
          dy.push_back(reshape.getResult());
    Block *block = sumTo->getBlock();
    for (Value view : dy)
      for (Operation *user : view.getUsers()) {
        auto matmul = dyn_cast<graph::MatmulOp>(user);
        if (!matmul || !matmul.getTransposeA() || matmul->getBlock() != block || !sumTo->isBeforeInBlock(matmul) ||
            biasAddOf(matmul).first || matmul.getLhs() == matmul.getRhs() || biasGradOfWeightGrad_.count(matmul))
          continue;
        const bool ofA = matmul.getLhs() == view;
        if (!ofA && (matmul.getRhs() != view || matmul.getTransposeB()))
          continue;
        auto viewType = cast<RankedTensorType>(view.getType());
        if (viewType.getRank() != 2 || viewType.getShape()[1] != result.getShape()[0])
          continue;
        if (llvm::all_of(sumTo.getResult().getUsers(), [&](Operation *reader) {
              return reader->getBlock() == block && matmul->isBeforeInBlock(reader);
            }))
          return {matmul, ofA};
      }
    return {};
  }
  /// An add folded into the kernel before it (accumulatingAddOf).
  struct AccumulatingAdd {
    graph::AddOp add;
    Value addend;
    graph::ReshapeOp reshape; // between the kernel's result and the add, or null
  };
  /// The add that `value`, computed by the kernel lowered at `at`, is
  /// folded into (the kernel's `accumulate`), and its other operand, the
  /// addend; or nulls. The add is the value's only use, or the only use of
  /// a reshape that is (Hugging Face's GPT-2 computes its projections on
  /// [rows, N] and views them as [batch, tokens, N] before the residual
  /// add: a view here, so the kernel reads the addend and writes the sum
  /// in its own shape). It adds two tensors of one type (no broadcast: a
  /// residual add, or the sum of two gradient contributions), lies after
  /// `at` in its block, and its addend is computed before `at`, so the
  /// kernel can read it there. The add's result is then written at `at`,
  /// earlier than the add was: nothing between can read it, and the
  /// plan's lifetimes see the change.
  AccumulatingAdd accumulatingAddOf(Value value, Operation *at) {
    if (!value.hasOneUse())
      return {};
    Value summand = value;
    auto reshape = dyn_cast<graph::ReshapeOp>(*value.getUsers().begin());
    if (reshape) {
      // A reshape result already placed (a slice of a flat gradient) is a copy, not a view.
      if (!reshape.getResult().hasOneUse() || tensors_.count(reshape.getResult()))
        return {};
      summand = reshape.getResult();
    }
    auto add = dyn_cast<graph::AddOp>(*summand.getUsers().begin());
    if (!add || add.getLhs() == add.getRhs() || add.getLhs().getType() != add.getRhs().getType() ||
        add.getType() != summand.getType() || add->getBlock() != at->getBlock() || !at->isBeforeInBlock(add))
      return {};
    Value addend = add.getLhs() == summand ? add.getRhs() : add.getLhs();
    Operation *producer = addend.getDefiningOp();
    if (!producer)
      return {add, addend, reshape}; // an argument: there before any kernel
    // An addend that is itself a folded add is computed where its kernel is.
    if (Operation *foldedAt = foldedAdds_.lookup(producer))
      producer = foldedAt;
    if (producer->getBlock() != at->getBlock() || !producer->isBeforeInBlock(at))
      return {};
    return {add, addend, reshape};
  }
  /// The kernel lowered at `at` that computes `results`, with the add
  /// that its first result feeds folded in where accumulatingAddOf finds
  /// one: the addend becomes the last input, the add's result the first
  /// output, and the add is not lowered again.
  void addAccumulatingKernel(StringRef kernel, SmallVector<Attribute> inputs, ValueRange results, Operation *at,
                             Location loc, SmallVector<NamedAttribute> params) {
    SmallVector<Attribute> outputs;
    if (auto [add, addend, reshape] = accumulatingAddOf(results.front(), at); add) {
      FlatSymbolRefAttr addendRef = tensors_.lookup(addend), sum = outputFor(add.getResult());
      if (reshape) {
        Type type = results.front().getType();
        addendRef = viewOf(addendRef, 0, "t" + std::to_string(nextTransient_++), type, loc);
        sum = viewOf(sum, 0, "t" + std::to_string(nextTransient_++), type, loc);
        foldedAdds_[reshape] = at; // its result is the sum's, never the kernel's
      }
      inputs.push_back(addendRef);
      outputs.push_back(sum);
      loc = builder_.getFusedLoc({loc, add.getLoc()});
      params.push_back(builder_.getNamedAttr("accumulate", builder_.getBoolAttr(true)));
      foldedAdds_[add] = at;
    } else {
      outputs.push_back(outputFor(results.front()));
    }
    for (Value result : results.drop_front())
      outputs.push_back(outputFor(result));
    addKernel(kernel, inputs, outputs, loc, params);
  }
  /// Whether `cast` only widens a 16-bit gradient to f32 for an optimizer
  /// update (mixed precision on one rank, where no reduce_scatter in the
  /// reduce dtype comes between): the update reads the 16-bit gradient
  /// itself, widened exactly as the cast would, and the f32 copy is never
  /// written. Its one use is the update's gradient operand.
  bool isGradientWideningForUpdate(graph::CastOp cast) const {
    if (!widenGradientsInUpdates_ || !cast.getResult().hasOneUse())
      return false;
    OpOperand &use = *cast.getResult().getUses().begin();
    Type from = getElementTypeOrSelf(cast.getInput().getType()), to = getElementTypeOrSelf(cast.getType());
    return isa<graph::AdamwUpdateOp, graph::SgdUpdateOp>(use.getOwner()) && use.getOperandNumber() == 1 &&
           (from.isBF16() || from.isF16()) && to.isF32();
  }
  /// The matmul whose bias add `add` is (biasAddOf) and the bias, or nulls.
  std::pair<graph::MatmulOp, Value> gemmOfBiasAdd(graph::AddOp add) {
    for (Value operand : add->getOperands())
      if (auto matmul = operand.getDefiningOp<graph::MatmulOp>())
        if (auto [biasAdd, bias] = biasAddOf(matmul); biasAdd == add)
          return {matmul, bias};
    return {};
  }
  /// The softmax_cross_entropy_grad of `loss`'s logits and labels, with
  /// its reduction and ignore_index, whose seed is already computed (autodiff
  /// seeds the backward at the top of the step), or null. The two are
  /// lowered as one softmax_cross_entropy_with_grad where the loss is: the
  /// kernel reads the logits once for both, and nothing between the loss
  /// and its gradient can change what either reads.
  graph::SoftmaxCrossEntropyGradOp fusableLossGrad(graph::SoftmaxCrossEntropyOp loss) {
    for (Operation *user : loss.getLogits().getUsers()) {
      auto grad = dyn_cast<graph::SoftmaxCrossEntropyGradOp>(user);
      if (grad && grad.getLabels() == loss.getLabels() && grad.getReduction() == loss.getReduction() &&
          grad.getIgnoreIndex() == loss.getIgnoreIndex() && grad.getClasses() == loss.getClasses() &&
          grad->getBlock() == loss->getBlock() &&
          loss->isBeforeInBlock(grad) && tensors_.count(grad.getGrad()) && !tensors_.count(grad.getResult()))
        return grad;
    }
    return {};
  }
  /// Whether `mask`, an attention's, is a constant that masks exactly the
  /// keys after each query (nonzero where key > query) over square scores
  /// of `queries` rows, broadcast over every leading axis. Its kernel then
  /// gets `causal`, and a device may mask by index instead of reading the
  /// [T, T] mask for every score. Views (reshapes) of a constant keep its
  /// elements in order; the answer is kept per constant.
  bool isCausalMask(Value mask, int64_t queries) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    if (maskType.getRank() < 2 || maskType.getShape().back() != queries ||
        maskType.getShape()[maskType.getRank() - 2] != queries || maskType.getNumElements() != queries * queries)
      return false;
    while (auto reshape = mask.getDefiningOp<graph::ReshapeOp>())
      mask = reshape.getInput();
    auto constant = mask.getDefiningOp<graph::ConstantOp>();
    if (!constant)
      return false;
    auto [cached, inserted] = causalConstants_.try_emplace(constant, false);
    if (!inserted)
      return cached->second;
    auto dense = dyn_cast<DenseIntElementsAttr>(constant.getValue());
    if (!dense || dense.getNumElements() != queries * queries)
      return false;
    int64_t index = 0;
    for (const APInt &value : dense.getValues<APInt>()) {
      const int64_t query = index / queries, key = index % queries;
      if (value.isZero() == (key > query))
        return false;
      ++index;
    }
    return cached->second = true;
  }
  /// Whether the i64 constant `dense` (square scores of `queries` rows,
  /// repeated along leading axes) is nonzero (`hides`) or zero at every key
  /// after its query.
  static bool afterQueryAll(DenseIntElementsAttr dense, int64_t queries, bool hides) {
    if (dense.getNumElements() % (queries * queries) != 0)
      return false;
    int64_t index = 0;
    for (const APInt &value : dense.getValues<APInt>()) {
      const int64_t query = (index / queries) % queries, key = index % queries;
      if (key > query && value.isZero() == hides)
        return false;
      ++index;
    }
    return true;
  }
  /// Whether `mask` hides at least the keys after each query (square scores
  /// of `queries` rows), so that a device may leave them out unread
  /// (`mask_covers_causal`), still reading the mask for the others: a
  /// constant that does (a sliding window, Mistral's and Gemma's local
  /// layers), or a mask computed at run time as `keep * padding == 0` with
  /// `keep` a constant that is 0 at every key after its query
  /// (transformers' causal mask times each sample's padding, as its SDPA
  /// path exports it).
  bool coversCausalMask(Value mask, int64_t queries) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    const int64_t rank = maskType.getRank();
    if (rank < 2 || maskType.getShape()[rank - 1] != queries || maskType.getShape()[rank - 2] != queries)
      return false;
    auto isZero = [](Value v) {
      auto constant = v.getDefiningOp<graph::ConstantOp>();
      auto dense = constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue()) : DenseIntElementsAttr();
      return dense && dense.isSplat() && dense.getSplatValue<APInt>().isZero();
    };
    // Reshapes keep every element in place (slices that take everything
    // folded away before).
    auto throughViews = [](Value v) {
      while (auto reshape = v.getDefiningOp<graph::ReshapeOp>())
        v = reshape.getInput();
      return v;
    };
    if (auto constant = throughViews(mask).getDefiningOp<graph::ConstantOp>()) {
      auto dense = dyn_cast<DenseIntElementsAttr>(constant.getValue());
      return dense && afterQueryAll(dense, queries, /*hides=*/true);
    }
    auto compare = mask.getDefiningOp<graph::CompareOp>();
    if (!compare || compare.getPredicate() != graph::ComparePredicate::eq)
      return false;
    Value product = isZero(compare.getRhs()) ? compare.getLhs() : isZero(compare.getLhs()) ? compare.getRhs() : Value();
    auto mul = product ? throughViews(product).getDefiningOp<graph::MulOp>() : graph::MulOp();
    if (!mul)
      return false;
    for (Value factor : {mul.getLhs(), mul.getRhs()}) {
      auto factorType = cast<RankedTensorType>(factor.getType());
      const int64_t factorRank = factorType.getRank();
      if (factorRank < 2 || factorType.getShape()[factorRank - 1] != queries ||
          factorType.getShape()[factorRank - 2] != queries)
        continue;
      auto constant = throughViews(factor).getDefiningOp<graph::ConstantOp>();
      auto dense = constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue()) : DenseIntElementsAttr();
      if (dense && afterQueryAll(dense, queries, /*hides=*/false))
        return true;
    }
    return false;
  }
  LogicalResult lowerArguments();
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerFsdpOp(Operation *op);
  void lowerBucket(fsdp::BucketOp bucket);
  void placeFlatGradients();

  ModuleOp module_;
  func::FuncOp func_;
  int64_t worldSize_;
  bool widenGradientsInUpdates_;
  OpBuilder builder_;
  plan_ir::ProgramOp program_;
  std::unique_ptr<SymbolTable> symbols_;
  llvm::DenseMap<Value, FlatSymbolRefAttr> tensors_;
  int nextTransient_ = 0;
  int64_t localBatch_ = 0;
  int64_t nextEvent_ = 0;
  llvm::StringMap<std::string> storage_;
  llvm::StringMap<SmallVector<int64_t>> pendingEvents_;
  llvm::DenseSet<int64_t> waitedEvents_;
  int nextBucket_ = 0;
  std::vector<PendingUnpack> pendingUnpacks_;
  llvm::StringMap<size_t> unpackFor_; // a member output's storage -> its bucket's unpack
  llvm::DenseSet<Operation *> lossGradsWithLoss_; // lowered with their loss (fusableLossGrad)
  // A matmul -> the sum_to lowered with it, and whether it sums the matmul's A.
  llvm::DenseMap<Operation *, std::pair<graph::SumToOp, bool>> biasGradOfWeightGrad_;
  llvm::DenseMap<Operation *, Operation *> foldedAdds_; // an add -> the op whose kernel accumulates it
  llvm::DenseMap<Operation *, bool> causalConstants_; // isCausalMask's answers
};

std::string flatParamName(StringRef unit) { return (unit + ".flat_param").str(); }

LogicalResult Lowering::lowerArguments() {
  for (BlockArgument arg : func_.getArguments()) {
    unsigned i = arg.getArgNumber();
    Location loc = arg.getLoc();
    plan_ir::TensorOp tensor;
    if (auto name = func_.getArgAttrOfType<StringAttr>(i, graph::kInputAttr)) {
      tensor = addTensor(name.getValue(), TensorKind::input, arg.getType(), loc);
      tensor.setSourceNameAttr(name);
      if (func_.getArgAttr(i, graph::kLabelAttr))
        tensor.setLabel(true);
      auto shape = cast<RankedTensorType>(arg.getType()).getShape();
      if (!shape.empty() && localBatch_ == 0)
        localBatch_ = shape[0];
    } else if (auto name = func_.getArgAttrOfType<StringAttr>(i, graph::kParamAttr)) {
      tensor = addTensor(name.getValue(), TensorKind::parameter, arg.getType(), loc);
      tensor.setSourceNameAttr(name);
    } else if (auto name = func_.getArgAttrOfType<StringAttr>(i, graph::kFrozenParamAttr)) {
      tensor = addTensor(name.getValue(), TensorKind::frozen_parameter, arg.getType(), loc);
      tensor.setSourceNameAttr(name);
    } else if (auto name = func_.getArgAttrOfType<StringAttr>(i, graph::kBufferAttr)) {
      tensor = addTensor(name.getValue(), TensorKind::buffer, arg.getType(), loc);
      tensor.setSourceNameAttr(name);
    } else if (auto owner = func_.getArgAttrOfType<StringAttr>(i, graph::kStateOfAttr)) {
      auto slot = func_.getArgAttrOfType<StringAttr>(i, graph::kStateSlotAttr);
      if (!slot)
        return func_.emitError("convert-graph-to-plan: optimizer state argument ") << i << " has no graph.state_slot";
      tensor = addTensor((owner.getValue() + "." + slot.getValue()).str(), TensorKind::optimizer_state, arg.getType(),
                         loc);
      tensor.setOwnerAttr(owner);
      tensor.setOptimizerSlotAttr(slot);
    } else if (auto unit = func_.getArgAttrOfType<FlatSymbolRefAttr>(i, fsdp::kShardOfAttr)) {
      std::string name = flatParamName(unit.getValue());
      tensor = addTensor(name, TensorKind::parameter, arg.getType(), loc);
      tensor.setSourceNameAttr(builder_.getStringAttr(name));
      tensor.setUnitAttr(builder_.getStringAttr(unit.getValue()));
    } else if (auto unit = func_.getArgAttrOfType<FlatSymbolRefAttr>(i, fsdp::kStateShardOfAttr)) {
      auto slot = func_.getArgAttrOfType<StringAttr>(i, graph::kStateSlotAttr);
      if (!slot)
        return func_.emitError("convert-graph-to-plan: optimizer state argument ") << i << " has no graph.state_slot";
      std::string owner = flatParamName(unit.getValue());
      tensor = addTensor(owner + "." + slot.getValue().str(), TensorKind::optimizer_state, arg.getType(), loc);
      tensor.setOwnerAttr(builder_.getStringAttr(owner));
      tensor.setOptimizerSlotAttr(slot);
      tensor.setUnitAttr(builder_.getStringAttr(unit.getValue()));
    } else if (func_.getArgAttr(i, graph::kStepAttr)) {
      tensor = addTensor("step", TensorKind::step_counter, arg.getType(), loc);
    } else if (auto labels = func_.getArgAttrOfType<StringAttr>(i, graph::kLabelCountAttr)) {
      tensor = addTensor((labels.getValue() + ".count").str(), TensorKind::label_count, arg.getType(), loc);
      tensor.setOwnerAttr(labels);
    } else {
      return func_.emitError("convert-graph-to-plan: argument ") << i << " has no graph.input, graph.param, "
                                                                   << "graph.state_of or graph.step attribute";
    }
    tensors_[arg] = ref(tensor);
  }
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  Location loc = op->getLoc();
  SmallVector<Attribute> inputs;
  for (Value operand : op->getOperands())
    inputs.push_back(tensors_.lookup(operand));

  if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (dense && dense.isSplat() && dense.getElementType().isF32()) {
      FlatSymbolRefAttr out = transientFor(constant.getResult());
      double value = dense.getSplatValue<APFloat>().convertToDouble();
      addKernel("fill", {}, {out}, loc, {builder_.getNamedAttr("value", builder_.getF64FloatAttr(value))});
      return success();
    }
    plan_ir::TensorOp tensor = addTensor("const" + std::to_string(nextTransient_++), TensorKind::constant,
                                         constant.getType(), loc);
    tensor.setValueAttr(constant.getValue());
    tensors_[constant.getResult()] = ref(tensor);
    return success();
  }

  if (auto cast = dyn_cast<graph::CastOp>(op); cast && isGradientWideningForUpdate(cast))
    return success(); // the update reads the 16-bit gradient
  // Optimizer updates write their parameter and state in place: their
  // results are the tensors of the operands they replace.
  if (isa<graph::AdamwUpdateOp, graph::SgdUpdateOp>(op)) {
    if (auto cast = op->getOperand(1).getDefiningOp<graph::CastOp>(); cast && isGradientWideningForUpdate(cast))
      inputs[1] = tensors_.lookup(cast.getInput());
    SmallVector<Attribute> outputs;
    SmallVector<Value> replaced = {op->getOperand(0)};
    if (auto adamw = dyn_cast<graph::AdamwUpdateOp>(op))
      replaced.append({adamw.getExpAvg(), adamw.getExpAvgSq()});
    else
      llvm::append_range(replaced, cast<graph::SgdUpdateOp>(op).getState());
    for (auto [result, old] : llvm::zip(op->getResults(), replaced)) {
      // Reshapes of the old value share its bytes, so their readers count.
      SmallVector<Value> aliases = {old};
      for (size_t i = 0; i < aliases.size(); ++i)
        for (Operation *user : aliases[i].getUsers()) {
          if (auto reshape = dyn_cast<graph::ReshapeOp>(user))
            aliases.push_back(reshape.getResult());
          else if (user != op && op->isBeforeInBlock(user))
            return op->emitOpError("convert-graph-to-plan: the value updated in place is read after the update");
        }
      tensors_[result] = tensors_.lookup(old);
      outputs.push_back(tensors_.lookup(old));
    }
    addKernel(op->getName().stripDialect(), inputs, outputs, loc, kernelParams(op));
    return success();
  }

  if (isa<fsdp::FsdpDialect>(op->getDialect()))
    return lowerFsdpOp(op);
  if (op->getDialect()->getNamespace() != "graph")
    return op->emitOpError("convert-graph-to-plan: cannot lower this op");

  if (foldedAdds_.contains(op))
    return success(); // lowered with the kernel that accumulates it (an add, or a reshape before one)
  // Tensors are dense and row-major, so a reshape reinterprets its input's
  // bytes: a view, no kernel. Only a result already given a place of its own
  // (a slice of a flat gradient) needs a copy.
  if (auto reshape = dyn_cast<graph::ReshapeOp>(op)) {
    if (!tensors_.count(reshape.getResult())) {
      FlatSymbolRefAttr input = tensors_.lookup(reshape.getInput());
      tensors_[reshape.getResult()] = viewOf(input, 0, "t" + std::to_string(nextTransient_++), reshape.getType(), loc);
      return success();
    }
    addKernel("copy", inputs, {tensors_.lookup(reshape.getResult())}, loc, {});
    return success();
  }
  // A bias added to a matmul's result (a Linear layer) goes into the GEMM:
  // C starts as the bias and the GEMM adds to it, as torch's addmm does.
  if (auto matmul = dyn_cast<graph::MatmulOp>(op); matmul && biasAddOf(matmul).first)
    return success(); // lowered at its bias add
  if (auto add = dyn_cast<graph::AddOp>(op))
    if (auto [matmul, bias] = gemmOfBiasAdd(add); matmul) {
      SmallVector<Attribute> operands;
      for (Value operand : matmul->getOperands())
        operands.push_back(tensors_.lookup(operand));
      operands.push_back(tensors_.lookup(bias));
      // A residual add after the Linear layer goes into the GEMM too.
      addAccumulatingKernel("matmul_bias", operands, add->getResults(), add,
                            builder_.getFusedLoc({matmul.getLoc(), loc}), kernelParams(matmul));
      return success();
    }
  // A bias gradient goes into the GEMM of its weight gradient, which reads
  // the same dY.
  if (auto sumTo = dyn_cast<graph::SumToOp>(op))
    if (auto [matmul, ofA] = weightGradOf(sumTo); matmul) {
      biasGradOfWeightGrad_[matmul] = {sumTo, ofA};
      return success(); // lowered with its weight gradient
    }
  if (auto found = biasGradOfWeightGrad_.find(op); found != biasGradOfWeightGrad_.end()) {
    auto [sumTo, ofA] = found->second;
    SmallVector<NamedAttribute> params = kernelParams(op);
    if (ofA)
      params.push_back(builder_.getNamedAttr("bias_grad_of_a", builder_.getBoolAttr(true)));
    addKernel("matmul_bias_grad", inputs, {outputFor(op->getResult(0)), outputFor(sumTo.getResult())},
              builder_.getFusedLoc({loc, sumTo.getLoc()}), params);
    return success();
  }
  if (auto loss = dyn_cast<graph::SoftmaxCrossEntropyOp>(op))
    if (graph::SoftmaxCrossEntropyGradOp grad = fusableLossGrad(loss)) {
      inputs.push_back(tensors_.lookup(grad.getGrad()));
      addKernel("softmax_cross_entropy_with_grad", inputs, {outputFor(loss.getResult()), outputFor(grad.getResult())},
                builder_.getFusedLoc({loc, grad.getLoc()}), kernelParams(op));
      lossGradsWithLoss_.insert(grad);
      return success();
    }
  if (lossGradsWithLoss_.contains(op))
    return success(); // lowered with its loss
  // A GEMM, or a norm's input gradient, whose result only feeds an add of
  // a tensor already computed (a residual add, the sum of a gradient's two
  // paths): the kernel adds it as it writes (accumulate).
  if (isa<graph::MatmulOp, graph::LayerNormGradOp, graph::RmsNormGradOp>(op)) {
    addAccumulatingKernel(op->getName().stripDialect(), inputs, op->getResults(), op, loc, kernelParams(op));
    return success();
  }
  SmallVector<Attribute> outputs;
  for (Value result : op->getResults())
    outputs.push_back(outputFor(result));
  // Other ops keep their attributes: the kernel contract names them as the
  // graph dialect does.
  SmallVector<NamedAttribute> params = kernelParams(op);
  // Attention with the causal constant mask: the kernels may mask by index.
  // The queries are logsumexp's last axis, whatever the operands' layouts.
  std::optional<std::pair<Value, Value>> maskAndLse =
      TypeSwitch<Operation *, std::optional<std::pair<Value, Value>>>(op)
          .Case<graph::AttentionOp, graph::AttentionGradOp, graph::PackedAttentionOp, graph::PackedAttentionGradOp>(
              [](auto a) { return std::make_pair(a.getMask(), a.getLogsumexp()); })
          .Default([](Operation *) { return std::nullopt; });
  if (maskAndLse) {
    auto lse = cast<RankedTensorType>(maskAndLse->second.getType());
    const int64_t queries = lse.getRank() >= 1 ? lse.getShape().back() : -1;
    if (queries >= 0 && isCausalMask(maskAndLse->first, queries))
      params.push_back(builder_.getNamedAttr("causal", builder_.getBoolAttr(true)));
    else if (queries >= 0 && coversCausalMask(maskAndLse->first, queries))
      params.push_back(builder_.getNamedAttr("mask_covers_causal", builder_.getBoolAttr(true)));
  }
  addKernel(op->getName().stripDialect(), inputs, outputs, loc, params);
  return success();
}

/// Lets each gradient that only feeds an fsdp.flatten be computed in its
/// place in the flat gradient, as FSDP's flat `.grad` does, instead of being
/// copied there.
void Lowering::placeFlatGradients() {
  func_.walk([&](fsdp::FlattenOp flatten) {
    FlatSymbolRefAttr flat = transientFor(flatten.getResult());
    auto unit = module_.lookupSymbol<fsdp::UnitOp>(flatten.getUnitAttr());
    int64_t offset = 0;
    for (auto [i, grad] : llvm::enumerate(flatten.getGrads())) {
      auto type = cast<RankedTensorType>(grad.getType());
      Operation *def = grad.getDefiningOp();
      bool computedInPlace = def && grad.hasOneUse() && def->getDialect()->getNamespace() == "graph" &&
                             !isa<graph::ConstantOp>(def) && !tensors_.count(grad);
      if (computedInPlace) {
        std::string name = cast<StringAttr>(unit.getParams()[i]).str() + ".grad";
        tensors_[grad] = viewOf(flat, offset * plan_ir::elementBytes(type.getElementType()), name, type, grad.getLoc());
      }
      offset += type.getNumElements();
    }
  });
}

LogicalResult Lowering::lowerFsdpOp(Operation *op) {
  Location loc = op->getLoc();
  auto tensorType = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  if (auto gather = dyn_cast<fsdp::AllGatherOp>(op)) {
    FlatSymbolRefAttr full = ref(addTensor((gather.getUnit() + ".full").str(), TensorKind::transient,
                                           gather.getType(), loc));
    tensors_[gather.getResult()] = full;
    addCollective(CollectiveKind::all_gather, tensors_.lookup(gather.getShard()), full, loc, gather.getGroupSize(),
                  gather.getGroupStride());
    return success();
  }
  if (auto view = dyn_cast<fsdp::ParamViewOp>(op)) {
    tensors_[view.getResult()] =
        viewOf(tensors_.lookup(view.getFlat()), view.getOffset() * plan_ir::elementBytes(view.getType().getElementType()),
               view.getParam(), view.getType(), loc);
    return success();
  }
  if (isa<fsdp::FreeOp>(op))
    return success(); // the allocator ends the lifetime at the last use
  if (auto bucket = dyn_cast<fsdp::BucketOp>(op)) {
    lowerBucket(bucket);
    return success();
  }
  if (auto flatten = dyn_cast<fsdp::FlattenOp>(op)) {
    FlatSymbolRefAttr flat = tensors_.lookup(flatten.getResult());
    auto unit = module_.lookupSymbol<fsdp::UnitOp>(flatten.getUnitAttr());
    int64_t offset = 0;
    for (auto [i, grad] : llvm::enumerate(flatten.getGrads())) {
      FlatSymbolRefAttr source = tensors_.lookup(grad);
      if (storage(source) != flat.getValue()) {
        std::string name = cast<StringAttr>(unit.getParams()[i]).str() + ".grad";
        int64_t byteOffset = offset * plan_ir::elementBytes(tensorType(grad).getElementType());
        addKernel("copy", {source}, {viewOf(flat, byteOffset, name, grad.getType(), loc)}, loc, {});
      }
      offset += tensorType(grad).getNumElements();
    }
    int64_t padded = tensorType(flatten.getResult()).getNumElements();
    if (padded > offset) {
      auto paddingType = RankedTensorType::get({padded - offset}, tensorType(flatten.getResult()).getElementType());
      FlatSymbolRefAttr padding =
          viewOf(flat, offset * plan_ir::elementBytes(paddingType.getElementType()), (flatten.getUnit() + ".grad_padding").str(),
                 paddingType, loc);
      addKernel("fill", {}, {padding}, loc, {builder_.getNamedAttr("value", builder_.getF64FloatAttr(0.0))});
    }
    return success();
  }
  if (auto scatter = dyn_cast<fsdp::ReduceScatterOp>(op)) {
    plan_ir::TensorOp shard = addTensor((scatter.getUnit() + ".grad_shard").str(), TensorKind::gradient,
                                        scatter.getType(), loc);
    shard.setUnitAttr(builder_.getStringAttr(scatter.getUnit()));
    tensors_[scatter.getResult()] = ref(shard);
    addCollective(CollectiveKind::reduce_scatter, tensors_.lookup(scatter.getInput()), ref(shard), loc,
                  scatter.getGroupSize(), scatter.getGroupStride(), scatter.getReductionAttr());
    return success();
  }
  if (auto reduce = dyn_cast<fsdp::AllReduceOp>(op)) {
    // In place: the input's tensor holds the result.
    FlatSymbolRefAttr data = tensors_.lookup(reduce.getInput());
    tensors_[reduce.getResult()] = data;
    addCollective(CollectiveKind::all_reduce, data, data, loc, reduce.getGroupSize(), reduce.getGroupStride(),
                  reduce.getReductionAttr());
    return success();
  }
  return op->emitOpError("convert-graph-to-plan: cannot lower this op");
}

/// One collective over a packed buffer: the members' inputs are
/// concatenated in member order (for a reduce-scatter, rank block by rank
/// block, so that each rank's shard of the buffer is its shards of the
/// members), and the result is unpacked into each member's output when first
/// needed (unpackBucketOf).
void Lowering::lowerBucket(fsdp::BucketOp bucket) {
  SmallVector<Operation *> members = bucket.getMembers();
  const std::string name = "bucket" + std::to_string(nextBucket_++);
  Location loc = bucket.getLoc();
  auto countOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); };
  auto unitOf = [](Operation *member) { return member->getAttrOfType<FlatSymbolRefAttr>("unit").getValue(); };
  Type element = cast<RankedTensorType>(members.front()->getOperand(0).getType()).getElementType();
  const int64_t elementBytes = plan_ir::elementBytes(element);
  auto flat = [&](int64_t count) { return RankedTensorType::get({count}, element); };
  auto rows = [&](int64_t groupSize, int64_t count) { return RankedTensorType::get({groupSize, count}, element); };
  auto axisParam = [&](int64_t axis) { return builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(axis)); };
  PendingUnpack unpack;
  // The members' inputs, one after the other in a new buffer `suffix`.
  auto concatInputs = [&](StringRef suffix, SmallVector<Attribute> &inputs) {
    int64_t total = 0;
    for (Operation *member : members) {
      inputs.push_back(tensors_.lookup(member->getOperand(0)));
      total += countOf(member->getOperand(0));
    }
    FlatSymbolRefAttr packed = ref(addTensor(name + suffix.str(), TensorKind::transient, flat(total), loc));
    addKernel("concat", inputs, {packed}, loc, {axisParam(0)});
    return std::make_pair(packed, total);
  };

  if (auto first = dyn_cast<fsdp::AllGatherOp>(members.front())) {
    const int64_t groupSize = first.getGroupSize();
    SmallVector<Attribute> shards;
    auto [packed, total] = concatInputs(".shards", shards);
    FlatSymbolRefAttr gathered = ref(addTensor(name + ".gathered", TensorKind::transient, flat(groupSize * total), loc));
    addCollective(CollectiveKind::all_gather, packed, gathered, loc, groupSize, first.getGroupStride());
    // Row r of the gathered buffer is rank r's shards of every member.
    FlatSymbolRefAttr byRank = viewOf(gathered, 0, name + ".by_rank", rows(groupSize, total), loc);
    int64_t offset = 0;
    for (auto [i, member] : llvm::enumerate(members)) {
      const int64_t count = countOf(member->getOperand(0));
      FlatSymbolRefAttr full =
          ref(addTensor((unitOf(member) + ".full").str(), TensorKind::transient, member->getResult(0).getType(), loc));
      tensors_[bucket.getResult(i)] = full;
      FlatSymbolRefAttr fullByRank =
          viewOf(full, 0, (unitOf(member) + ".full_by_rank").str(), rows(groupSize, count), member->getLoc());
      unpack.copies.push_back({"slice", byRank, fullByRank,
                               {builder_.getNamedAttr("starts", builder_.getDenseI64ArrayAttr({0, offset})),
                                builder_.getNamedAttr("steps", builder_.getDenseI64ArrayAttr({1, 1}))},
                               member->getLoc()});
      unpack.outputs.push_back(storage(full).str());
      offset += count;
    }
  } else if (auto first = dyn_cast<fsdp::ReduceScatterOp>(members.front())) {
    const int64_t groupSize = first.getGroupSize();
    SmallVector<Attribute> gradsByRank;
    int64_t total = 0;
    for (Operation *member : members) {
      const int64_t count = countOf(member->getResult(0));
      gradsByRank.push_back(viewOf(tensors_.lookup(member->getOperand(0)), 0,
                                   (unitOf(member) + ".grad_by_rank").str(), rows(groupSize, count),
                                   member->getLoc()));
      total += count;
    }
    FlatSymbolRefAttr packed = ref(addTensor(name + ".grads", TensorKind::transient, flat(groupSize * total), loc));
    FlatSymbolRefAttr packedByRank = viewOf(packed, 0, name + ".by_rank", rows(groupSize, total), loc);
    addKernel("concat", gradsByRank, {packedByRank}, loc, {axisParam(1)});
    FlatSymbolRefAttr reduced = ref(addTensor(name + ".reduced", TensorKind::transient, flat(total), loc));
    addCollective(CollectiveKind::reduce_scatter, packed, reduced, loc, groupSize, first.getGroupStride(),
                  first.getReductionAttr());
    int64_t offset = 0;
    for (auto [i, member] : llvm::enumerate(members)) {
      Type type = member->getResult(0).getType();
      plan_ir::TensorOp shard =
          addTensor((unitOf(member) + ".grad_shard").str(), TensorKind::gradient, type, member->getLoc());
      shard.setUnitAttr(builder_.getStringAttr(unitOf(member)));
      tensors_[bucket.getResult(i)] = ref(shard);
      FlatSymbolRefAttr part =
          viewOf(reduced, offset * elementBytes, (unitOf(member) + ".reduced").str(), type, member->getLoc());
      unpack.copies.push_back({"copy", part, ref(shard), {}, member->getLoc()});
      unpack.outputs.push_back(storage(ref(shard)).str());
      offset += countOf(member->getResult(0));
    }
  } else {
    auto firstReduce = cast<fsdp::AllReduceOp>(members.front());
    SmallVector<Attribute> data;
    FlatSymbolRefAttr packed = concatInputs(".data", data).first;
    addCollective(CollectiveKind::all_reduce, packed, packed, loc, firstReduce.getGroupSize(),
                  firstReduce.getGroupStride(), firstReduce.getReductionAttr());
    // In place, as an unbucketed all_reduce: each member's tensor gets its
    // reduced part back.
    int64_t offset = 0;
    for (auto [i, member] : llvm::enumerate(members)) {
      FlatSymbolRefAttr target = cast<FlatSymbolRefAttr>(data[i]);
      tensors_[bucket.getResult(i)] = target;
      FlatSymbolRefAttr part = viewOf(packed, offset * elementBytes, (unitOf(member) + ".reduced").str(),
                                      member->getResult(0).getType(), member->getLoc());
      unpack.copies.push_back({"copy", part, target, {}, member->getLoc()});
      unpack.outputs.push_back(storage(target).str());
      offset += countOf(member->getOperand(0));
    }
  }
  for (const std::string &output : unpack.outputs)
    unpackFor_[output] = pendingUnpacks_.size();
  pendingUnpacks_.push_back(std::move(unpack));
}

LogicalResult Lowering::run() {
  int lossIndex = -1;
  for (unsigned i = 0; i < func_.getNumResults(); ++i)
    if (func_.getResultAttr(i, graph::kLossAttr))
      lossIndex = i;
  const bool forwardOnly = func_.getName() == graph::kForwardFunc;
  if (lossIndex < 0 && !forwardOnly)
    return func_.emitError("convert-graph-to-plan: @train_step returns no graph.loss result");

  auto stringAttr = [&](StringRef name) {
    auto attr = module_->getAttrOfType<StringAttr>(name);
    return attr ? attr : builder_.getStringAttr("");
  };
  plan_ir::LossKindAttr lossKind;
  if (lossIndex >= 0) {
    StringRef kind = stringAttr(graph::kLossKindAttr).getValue();
    std::optional<plan_ir::LossKind> parsed = plan_ir::symbolizeLossKind(kind);
    if (!parsed)
      return func_.emitError("convert-graph-to-plan: unknown ") << graph::kLossKindAttr << " '" << kind << "'";
    lossKind = plan_ir::LossKindAttr::get(builder_.getContext(), *parsed);
  }
  plan_ir::StrategyAttr strategy;
  if (auto sharded = module_->getAttrOfType<fsdp::StrategyAttr>(fsdp::kStrategyAttr))
    strategy = plan_ir::StrategyAttr::get(builder_.getContext(), sharded.getValue());
  auto classes = module_->getAttrOfType<IntegerAttr>(graph::kNumClassesAttr);
  builder_.setInsertionPointToEnd(module_.getBody());
  program_ = plan_ir::ProgramOp::create(
      builder_, func_.getLoc(), builder_.getStringAttr(func_.getName()), builder_.getI64IntegerAttr(worldSize_),
      builder_.getI64IntegerAttr(1), FlatSymbolRefAttr(), lossKind,
      stringAttr(graph::kOptimizerAttr), builder_.getI64IntegerAttr(classes ? classes.getInt() : 0), IntegerAttr(),
      IntegerAttr(), ArrayAttr(), module_->getAttrOfType<StringAttr>(graph::kSourceAttr),
      module_->getAttrOfType<IntegerAttr>(graph::kOpsetAttr), strategy,
      module_->getAttrOfType<IntegerAttr>(fsdp::kShardGroupSizeAttr), FlatSymbolRefAttr(), FlatSymbolRefAttr(),
      module_->getAttrOfType<ArrayAttr>(graph::kInitializerRewritesAttr),
      module_->getAttrOfType<ArrayAttr>(graph::kTorchNamesAttr), FlatSymbolRefAttr(), StringAttr(), IntegerAttr());
  program_.getBody().emplaceBlock();
  symbols_ = std::make_unique<SymbolTable>(program_);

  if (failed(lowerArguments()))
    return failure();
  // The units, next to their shards: what the writer needs to cut and
  // gather them.
  for (fsdp::UnitOp unit : module_.getOps<fsdp::UnitOp>())
    plan_ir::UnitOp::create(builder_, unit.getLoc(), unit.getSymNameAttr(), unit.getParams(), unit.getParamTypes(),
                            unit.getFlatSizeAttr(), unit.getPaddedSizeAttr(),
                            FlatSymbolRefAttr::get(builder_.getContext(), flatParamName(unit.getSymName())));
  placeFlatGradients();
  // The forward pass ends with the loss op (the first micro-batch's, with
  // gradient accumulation): an evaluation pass runs the plan up to there.
  Operation *forwardEnd = nullptr;
  for (Operation &op : func_.getBody().front())
    if (op.hasAttr(graph::kMicroLossAttr)) {
      forwardEnd = &op;
      break;
    }
  if (!forwardEnd && lossIndex >= 0)
    forwardEnd = func_.getBody().front().getTerminator()->getOperand(lossIndex).getDefiningOp();
  bool inForward = forwardEnd != nullptr;
  for (Operation &op : func_.getBody().front().without_terminator()) {
    if (failed(lowerOp(&op)))
      return failure();
    if (auto prediction = op.getAttrOfType<StringAttr>(graph::kPredictionAttr);
        prediction && inForward && !program_.getForwardOutputAttr() && op.getNumResults() == 1) {
      program_.setForwardOutputAttr(tensors_.lookup(op.getResult(0)));
      program_.setForwardOutputNameAttr(prediction);
    }
    if (&op == forwardEnd)
      inForward = false;
    if (&op == forwardEnd && op.getNumResults() == 1 && tensors_.lookup(op.getResult(0)))
      program_.setForwardLossAttr(tensors_.lookup(op.getResult(0)));
  }

  Operation *terminator = func_.getBody().front().getTerminator();
  // Buckets nothing read yet still land in their outputs within the step.
  for (size_t i = 0; i < pendingUnpacks_.size(); ++i)
    if (!pendingUnpacks_[i].outputs.empty())
      unpackBucketOf(pendingUnpacks_[i].outputs.front());
  for (unsigned i = 0; i < func_.getNumResults(); ++i) {
    auto updates = func_.getResultAttrOfType<IntegerAttr>(i, graph::kUpdatesAttr);
    if (!updates || forwardOnly) // an inference plan leaves the buffers as they are
      continue;
    FlatSymbolRefAttr target = tensors_.lookup(func_.getArgument(updates.getInt()));
    FlatSymbolRefAttr value = tensors_.lookup(terminator->getOperand(i));
    if (value != target)
      addKernel("copy", {value}, {target}, terminator->getLoc(), {});
  }
  // The step ends when both streams have: compute waits for what is left.
  builder_.setInsertionPointToEnd(&program_.getBlock());
  SmallVector<int64_t> leftover;
  for (auto &entry : pendingEvents_)
    llvm::append_range(leftover, entry.second);
  llvm::sort(leftover);
  for (int64_t event : llvm::make_range(leftover.begin(), std::unique(leftover.begin(), leftover.end())))
    if (!waitedEvents_.contains(event))
      plan_ir::WaitEventOp::create(builder_, terminator->getLoc(), event, plan_ir::Stream::compute);
  if (lossIndex >= 0)
    program_.setLossAttr(tensors_.lookup(terminator->getOperand(lossIndex)));
  if (int normIndex = graph::findResultWithAttr(func_, graph::kGradNormAttr); normIndex >= 0) {
    FlatSymbolRefAttr norm = tensors_.lookup(terminator->getOperand(normIndex));
    waitForCollectives({norm}, terminator->getLoc());
    program_.setGradNormAttr(norm);
  }
  if (forwardOnly) {
    // Each output gets a transient of its own, named after the ONNX output,
    // that lives until the step ends.
    SmallVector<Attribute> outputs;
    for (unsigned i = 0; i < func_.getNumResults(); ++i) {
      auto name = func_.getResultAttrOfType<StringAttr>(i, graph::kOutputAttr);
      if (!name && graph::isBufferUpdate(func_, i))
        continue;
      if (!name)
        return func_.emitError("convert-graph-to-plan: result ") << i << " of @forward has no graph.output name";
      Value value = terminator->getOperand(i);
      plan_ir::TensorOp output = addTensor(("out." + name.getValue()).str(), TensorKind::transient,
                                           value.getType(), terminator->getLoc());
      output.setSourceNameAttr(name);
      addKernel("copy", {tensors_.lookup(value)}, {ref(output)}, terminator->getLoc(), {});
      outputs.push_back(ref(output));
    }
    program_.setOutputsAttr(builder_.getArrayAttr(outputs));
  }
  program_.setGlobalBatch(std::max<int64_t>(localBatch_, 1) * worldSize_);
  func_.erase();
  return success();
}

struct ConvertGraphToPlanPass : public fsdpc::impl::ConvertGraphToPlanBase<ConvertGraphToPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (function != graph::kTrainStepFunc && function != graph::kForwardFunc) {
      module.emitError() << "convert-graph-to-plan: function must be train_step or forward, got '" << function << "'";
      return signalPassFailure();
    }
    func::FuncOp train = graph::lookupFunction(module, function, "convert-graph-to-plan");
    if (!train)
      return signalPassFailure();
    int64_t ranks = worldSize;
    if (auto sharded = module->getAttrOfType<IntegerAttr>(fsdp::kWorldSizeAttr)) {
      if (ranks != 1 && ranks != sharded.getInt()) {
        module.emitError() << "convert-graph-to-plan: world-size " << ranks << " differs from the "
                           << sharded.getInt() << " that fsdp-shard used";
        return signalPassFailure();
      }
      ranks = sharded.getInt();
    }
    if (ranks < 1) {
      module.emitError("convert-graph-to-plan: world-size must be positive");
      return signalPassFailure();
    }
    if (failed(Lowering(module, train, ranks, widenGradientsInUpdates).run()))
      return signalPassFailure();
  }
};

} // namespace
