//===- Shard.cpp - fsdp-shard ---------------------------------------------===//
//
// Rewrites @train_step so that each rank holds only its shard of every
// unit's flat parameter, gradient and optimizer state, and makes every
// collective and free of the chosen strategy explicit in program order.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"

#include <map>

#include "fsdpc/Dialect/Fsdp/IR/FsdpDialect.h"
#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringMap.h"

namespace fsdpc::fsdp {
#define GEN_PASS_DEF_FSDPSHARD
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"
} // namespace fsdpc::fsdp

using namespace mlir;
using namespace fsdpc;

namespace {


/// One unit with the arguments and optimizer updates of its parameters.
struct UnitParams {
  fsdp::UnitOp unit;
  SmallVector<BlockArgument> params;
  SmallVector<Operation *> updates;
};

RankedTensorType flatType(Type element, int64_t size) { return RankedTensorType::get({size}, element); }

/// The one low-precision float type that every op of `ops` casts f32 to
/// (`toLow`) or from (`!toLow`); null if `ops` is empty, an op is not such a
/// cast, or they disagree. Mixed precision's reads of a parameter and the
/// gradients that reach it look like that.
Type commonLowPrecisionType(ArrayRef<Operation *> ops, bool toLow) {
  Type common;
  for (Operation *op : ops) {
    auto cast = dyn_cast<graph::CastOp>(op);
    if (!cast)
      return Type();
    Type f32 = toLow ? cast.getInput().getType().getElementType() : cast.getType().getElementType();
    Type low = toLow ? cast.getType().getElementType() : cast.getInput().getType().getElementType();
    if (!f32.isF32() || !isa<FloatType>(low) || low.isF32() || (common && low != common))
      return Type();
    common = low;
  }
  return common;
}

/// The earliest and latest of `ops` (all in one block).
Operation *earliest(ArrayRef<Operation *> ops) {
  return *llvm::min_element(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
}
Operation *latest(ArrayRef<Operation *> ops) {
  return *llvm::max_element(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
}

/// The values an optimizer update reads as state, and whether it is one.
std::optional<SmallVector<Value>> updateState(Operation *op) {
  if (auto adamw = dyn_cast<graph::AdamwUpdateOp>(op))
    return SmallVector<Value>{adamw.getExpAvg(), adamw.getExpAvgSq()};
  if (auto sgd = dyn_cast<graph::SgdUpdateOp>(op))
    return SmallVector<Value>(sgd.getState().begin(), sgd.getState().end());
  return std::nullopt;
}
Value updateGrad(Operation *op) { return op->getOperand(1); }
Value updateStep(Operation *op) { return op->getOperands().back(); }

/// With gradient accumulation (graph-accumulate), an update's gradient is
/// `scale(add(...add(g0, g1)..., gK-1), 1/K)`: the micro-batches' gradients
/// g0 ... gK-1 and the ops that sum them, or nothing if it is not.
struct AccumulatedGrad {
  SmallVector<Value> microBatches;
  SmallVector<Operation *> sumOps; // the scale, then the adds from the last
  double factor = 1;
};
std::optional<AccumulatedGrad> accumulatedGrad(Value grad) {
  auto scale = grad.getDefiningOp<graph::ScaleOp>();
  if (!scale || !scale->hasAttr(graph::kAccumulateAttr))
    return std::nullopt;
  AccumulatedGrad result;
  result.factor = scale.getFactor().convertToDouble();
  result.sumOps.push_back(scale);
  Value sum = scale.getInput();
  while (auto add = sum.getDefiningOp<graph::AddOp>()) {
    if (!add->hasAttr(graph::kAccumulateAttr))
      break;
    result.sumOps.push_back(add);
    result.microBatches.push_back(add.getRhs());
    sum = add.getLhs();
  }
  result.microBatches.push_back(sum);
  std::reverse(result.microBatches.begin(), result.microBatches.end());
  return result;
}

/// An update's hyperparameters.
DictionaryAttr hyperParameters(Operation *op) {
  return DictionaryAttr::get(op->getContext(), graph::ownAttributes(op));
}

struct FsdpShardPass : public fsdpc::fsdp::impl::FsdpShardBase<FsdpShardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp train = graph::lookupFunction(module, graph::kTrainStepFunc, "fsdp-shard");
    if (!train)
      return signalPassFailure();
    std::optional<Strategy> parsed = symbolizeStrategy(strategy);
    if (!parsed) {
      train.emitError() << "fsdp-shard: unknown strategy '" << strategy
                         << "' (expected full_shard, shard_grad_op, no_shard or hybrid_shard)";
      return signalPassFailure();
    }
    const Strategy kind = *parsed;
    if (worldSize < 1) {
      train.emitError() << "fsdp-shard: world-size must be positive, got " << static_cast<int64_t>(worldSize);
      return signalPassFailure();
    }
    if (kind != Strategy::hybrid_shard && shardGroupSize != 0) {
      train.emitError() << "fsdp-shard: shard-group-size applies only to hybrid_shard, not " << strategy;
      return signalPassFailure();
    }
    if (kind == Strategy::hybrid_shard && (shardGroupSize < 1 || worldSize % shardGroupSize != 0)) {
      train.emitError() << "fsdp-shard: hybrid_shard needs a shard-group-size that divides the world size "
                         << static_cast<int64_t>(worldSize) << ", got " << static_cast<int64_t>(shardGroupSize);
      return signalPassFailure();
    }
    if (accumulateReduce != "last" && accumulateReduce != "each") {
      train.emitError() << "fsdp-shard: accumulate-reduce must be last or each, got '" << accumulateReduce << "'";
      return signalPassFailure();
    }
    reduceEach_ = accumulateReduce == "each";
    if (reduceDtype != "f32" && reduceDtype != "low") {
      train.emitError() << "fsdp-shard: reduce-dtype must be f32 or low, got '" << reduceDtype << "'";
      return signalPassFailure();
    }
    reduceLow_ = reduceDtype == "low";
    kind_ = kind;
    groupSize_ = kind == Strategy::no_shard ? 1 : kind == Strategy::hybrid_shard ? shardGroupSize : worldSize;

    if (failed(shard(module, train)))
      return signalPassFailure();
    Builder b(module.getContext());
    module->setAttr(fsdp::kStrategyAttr, fsdp::StrategyAttr::get(module.getContext(), kind));
    module->setAttr(fsdp::kWorldSizeAttr, b.getI64IntegerAttr(worldSize));
    module->setAttr(fsdp::kShardGroupSizeAttr, b.getI64IntegerAttr(groupSize_));
  }

  LogicalResult collectUnits(ModuleOp module, func::FuncOp train, SmallVectorImpl<UnitParams> &units);
  LogicalResult shard(ModuleOp module, func::FuncOp train);
  /// Points the uses in `users` of each parameter's reads (the parameter, or
  /// the casts it is read through) at views of `flat` created at the
  /// builder's insertion point.
  void readThroughViews(OpBuilder &builder, UnitParams &unit, Value flat, ArrayRef<Operation *> users,
                        ArrayRef<SmallVector<Value>> reads);

  Strategy kind_ = Strategy::full_shard;
  int64_t groupSize_ = 1;
  bool reduceLow_ = false;
  bool reduceEach_ = false;
};

LogicalResult FsdpShardPass::collectUnits(ModuleOp module, func::FuncOp train, SmallVectorImpl<UnitParams> &units) {
  llvm::StringMap<BlockArgument> paramByName;
  for (BlockArgument arg : train.getArguments())
    if (auto name = train.getArgAttrOfType<StringAttr>(arg.getArgNumber(), graph::kParamAttr))
      paramByName[name.getValue()] = arg;
  for (fsdp::UnitOp unit : module.getOps<fsdp::UnitOp>()) {
    UnitParams entry{unit, {}, {}};
    for (Attribute name : unit.getParams()) {
      StringRef param = cast<StringAttr>(name).getValue();
      auto it = paramByName.find(param);
      if (it == paramByName.end())
        return unit.emitOpError("fsdp-shard: parameter '") << param << "' is not a trainable argument of @train_step";
      Operation *update = nullptr;
      for (Operation *user : it->second.getUsers())
        if (updateState(user) && user->getOperand(0) == it->second)
          update = user;
      if (!update)
        return unit.emitOpError("fsdp-shard: parameter '") << param << "' has no optimizer update; run graph-optimizer";
      if (!entry.updates.empty() &&
          (update->getName() != entry.updates.front()->getName() ||
           hyperParameters(update) != hyperParameters(entry.updates.front()) ||
           update->getNumOperands() != entry.updates.front()->getNumOperands()))
        return unit.emitOpError("fsdp-shard: the parameters of a unit must share one optimizer configuration");
      entry.params.push_back(it->second);
      entry.updates.push_back(update);
    }
    units.push_back(entry);
  }
  if (units.empty() && !paramByName.empty())
    return train.emitError("fsdp-shard: the module has no fsdp.unit; run fsdp-wrap first");
  return success();
}

void FsdpShardPass::readThroughViews(OpBuilder &builder, UnitParams &unit, Value flat, ArrayRef<Operation *> users,
                                     ArrayRef<SmallVector<Value>> reads) {
  int64_t offset = 0;
  Type element = cast<RankedTensorType>(flat.getType()).getElementType();
  for (auto [i, param] : llvm::enumerate(unit.params)) {
    auto paramType = cast<RankedTensorType>(cast<TypeAttr>(unit.unit.getParamTypes()[i]).getValue());
    SmallVector<OpOperand *> uses;
    for (Value read : reads[i])
      for (OpOperand &use : read.getUses())
        if (llvm::is_contained(users, use.getOwner()))
          uses.push_back(&use);
    if (!uses.empty()) {
      auto name = cast<StringAttr>(unit.unit.getParams()[i]);
      auto view = fsdp::ParamViewOp::create(builder, param.getLoc(), RankedTensorType::get(paramType.getShape(), element),
                                            flat, name, builder.getI64IntegerAttr(offset));
      for (OpOperand *use : uses)
        use->set(view.getResult());
    }
    offset += paramType.getNumElements();
  }
}

LogicalResult FsdpShardPass::shard(ModuleOp module, func::FuncOp train) {
  SmallVector<UnitParams> units;
  if (failed(collectUnits(module, train, units)))
    return failure();
  int lossIndex = graph::findResultWithAttr(train, graph::kLossAttr);
  if (lossIndex < 0)
    return train.emitError("fsdp-shard: @train_step returns no graph.loss result");
  Block &body = train.getBody().front();
  Operation *terminator = body.getTerminator();
  Value loss = terminator->getOperand(lossIndex);
  // Forward is everything up to the op that computes the loss; autodiff puts
  // the backward pass after it. With gradient accumulation, each
  // micro-batch has its forward and backward.
  const graph::StepPhases phases(train);

  MLIRContext *context = module.getContext();
  OpBuilder builder(context);
  const int64_t replicas = worldSize / groupSize_;
  auto i64 = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
  auto avg = fsdp::ReductionAttr::get(context, Reduction::avg);

  SmallVector<Value> returned = {loss};
  SmallVector<DictionaryAttr> returnedAttrs = {train.getResultAttrDict(lossIndex)};
  SmallVector<BlockArgument> updatedArgs = {BlockArgument()};
  llvm::BitVector oldArgs(train.getNumArguments());
  SmallVector<Operation *> oldUpdates;
  // Mixed precision: the casts of gradients to f32 the old updates read.
  SmallVector<Operation *> deadGradCasts;
  SmallVector<Operation *> deadSums;

  for (UnitParams &unit : units) {
    auto symbol = FlatSymbolRefAttr::get(unit.unit.getSymNameAttr());
    int64_t flat = unit.unit.getFlatSize();
    int64_t padded = (flat + groupSize_ - 1) / groupSize_ * groupSize_;
    unit.unit.setPaddedSize(padded);
    Type f32 = Float32Type::get(context);
    RankedTensorType fullType = flatType(f32, padded), shardType = flatType(f32, padded / groupSize_);

    // This rank's shards: the flat parameter and one per optimizer-state slot.
    Operation *first = unit.updates.front();
    BlockArgument shardArg = graph::appendArgument(
        train, shardType, builder.getDictionaryAttr(builder.getNamedAttr(fsdp::kShardOfAttr, symbol)));
    SmallVector<Value> stateShards;
    // Bound first: a range-for over *updateState(...) would read the
    // optional after the temporary holding it is destroyed.
    const SmallVector<Value> firstState = *updateState(first);
    for (Value state : firstState) {
      auto slot = train.getArgAttrOfType<StringAttr>(cast<BlockArgument>(state).getArgNumber(), graph::kStateSlotAttr);
      stateShards.push_back(graph::appendArgument(
          train, shardType,
          builder.getDictionaryAttr({builder.getNamedAttr(fsdp::kStateShardOfAttr, symbol),
                                     builder.getNamedAttr(graph::kStateSlotAttr, slot)})));
    }

    // Mixed precision: parameters read only through casts to one
    // low-precision type are gathered in that type (half the bytes), or
    // without a gather, cast as one flat tensor (one kernel per unit).
    SmallVector<Operation *> paramReaders;
    for (auto [param, update] : llvm::zip(unit.params, unit.updates))
      for (Operation *user : param.getUsers())
        if (user != update)
          paramReaders.push_back(user);
    const Type low = commonLowPrecisionType(paramReaders, /*toLow=*/true);
    SmallVector<SmallVector<Value>> reads;
    SmallVector<Operation *> castsToErase;
    for (auto [param, update] : llvm::zip(unit.params, unit.updates)) {
      reads.emplace_back();
      if (!low) {
        reads.back().push_back(param);
        continue;
      }
      for (Operation *user : param.getUsers())
        if (user != update) {
          reads.back().push_back(user->getResult(0));
          castsToErase.push_back(user);
        }
    }

    // Reads of the parameters, by phase (forward and backward of each
    // micro-batch), in phase order.
    SmallVector<Operation *> allUsers;
    std::map<int64_t, SmallVector<Operation *>> usersByPhase;
    for (const SmallVector<Value> &paramReads : reads)
      for (Value read : paramReads)
        for (Operation *user : read.getUsers())
          if (!llvm::is_contained(unit.updates, user) && !llvm::is_contained(allUsers, user)) {
            allUsers.push_back(user);
            usersByPhase[phases.phaseOf(user)].push_back(user);
          }

    // This rank's shard in `low`, cast where the builder is.
    auto castShard = [&]() -> Value {
      return graph::CastOp::create(builder, unit.unit.getLoc(), flatType(low, shardType.getNumElements()), shardArg);
    };
    auto gatherAround = [&](ArrayRef<Operation *> users) {
      builder.setInsertionPoint(earliest(users));
      Value shard = low ? castShard() : Value(shardArg);
      RankedTensorType gatheredType = low ? flatType(low, padded) : fullType;
      auto gather = fsdp::AllGatherOp::create(builder, unit.unit.getLoc(), gatheredType, shard, symbol,
                                              i64(groupSize_), i64(1));
      readThroughViews(builder, unit, gather.getResult(), users, reads);
      builder.setInsertionPointAfter(latest(users));
      fsdp::FreeOp::create(builder, unit.unit.getLoc(), gather.getResult());
    };
    if (allUsers.empty()) {
      // Nothing reads the parameters.
    } else if (groupSize_ == 1 && low) {
      // Cast once, before the first read; the copy lives until the last.
      builder.setInsertionPoint(earliest(allUsers));
      readThroughViews(builder, unit, castShard(), allUsers, reads);
    } else if (groupSize_ == 1) {
      builder.setInsertionPointToStart(&body);
      readThroughViews(builder, unit, shardArg, allUsers, reads);
    } else if (kind_ == Strategy::shard_grad_op) {
      // One gather per micro-batch, kept through its forward and backward.
      std::map<int64_t, SmallVector<Operation *>> usersByMicroBatch;
      for (auto &[phase, users] : usersByPhase)
        llvm::append_range(usersByMicroBatch[phase / 2], users);
      for (auto &[micro, users] : usersByMicroBatch)
        gatherAround(users);
    } else {
      for (auto &[phase, users] : usersByPhase)
        gatherAround(users);
    }
    for (Operation *cast : castsToErase)
      if (cast->use_empty())
        cast->erase();

    // `grads` flattened in `flatElement` right after the last of `defs`,
    // cast to `element` if that differs, then reduced by the strategy:
    // reduce-scatter in the shard group, all-reduce across replicas.
    Location loc = unit.unit.getLoc();
    auto flattenAndReduce = [&](ArrayRef<Value> grads, ArrayRef<Operation *> defs, Type flatElement, Type element) {
      if (defs.empty())
        builder.setInsertionPointToStart(&body);
      else
        builder.setInsertionPointAfter(latest(defs));
      Value grad = fsdp::FlattenOp::create(builder, loc, flatType(flatElement, padded), grads, symbol).getResult();
      if (element != flatElement)
        grad = graph::CastOp::create(builder, loc, flatType(element, padded), grad).getResult();
      if (groupSize_ > 1)
        grad = fsdp::ReduceScatterOp::create(builder, loc, flatType(element, shardType.getNumElements()), grad, symbol,
                                             avg, i64(groupSize_), i64(1))
                   .getResult();
      if (replicas > 1)
        grad = fsdp::AllReduceOp::create(builder, loc, grad, symbol, avg, i64(replicas), i64(groupSize_)).getResult();
      return grad;
    };

    // accumulate-reduce=each: every micro-batch's flat gradient is reduced
    // as soon as it is complete; the shards are summed before the update.
    std::optional<Value> reducedEach;
    if (reduceEach_ && (groupSize_ > 1 || replicas > 1)) {
      SmallVector<AccumulatedGrad> accumulated;
      for (Operation *update : unit.updates)
        if (std::optional<AccumulatedGrad> a = accumulatedGrad(updateGrad(update)))
          accumulated.push_back(*a);
      const size_t micro = accumulated.empty() ? 0 : accumulated.front().microBatches.size();
      if (accumulated.size() == unit.updates.size() &&
          llvm::all_of(accumulated, [&](const AccumulatedGrad &a) { return a.microBatches.size() == micro; })) {
        SmallVector<Value> partials;
        for (size_t m = 0; m < micro; ++m) {
          SmallVector<Value> grads;
          SmallVector<Operation *> defs;
          for (const AccumulatedGrad &a : accumulated) {
            grads.push_back(a.microBatches[m]);
            if (Operation *def = a.microBatches[m].getDefiningOp())
              defs.push_back(def);
          }
          partials.push_back(flattenAndReduce(grads, defs, f32, f32));
        }
        // Summed where the update reads them, so that compute waits for no
        // reduction before the end of the step.
        builder.setInsertionPoint(terminator);
        Value sum = partials.front();
        for (Value partial : llvm::drop_begin(partials)) {
          auto add = graph::AddOp::create(builder, loc, shardType, sum, partial);
          add->setAttr(graph::kAccumulateAttr, builder.getUnitAttr());
          sum = add.getResult();
        }
        auto mean = graph::ScaleOp::create(builder, loc, sum, builder.getF64FloatAttr(accumulated.front().factor));
        mean->setAttr(graph::kAccumulateAttr, builder.getI64IntegerAttr(micro));
        reducedEach = mean.getResult();
        for (const AccumulatedGrad &a : accumulated)
          llvm::append_range(deadSums, a.sumOps);
      }
    }

    // The flat gradient, reduced as soon as its last part is computed.
    SmallVector<Value> grads;
    SmallVector<Operation *> gradDefs;
    for (Operation *update : unit.updates) {
      grads.push_back(updateGrad(update));
      if (Operation *def = updateGrad(update).getDefiningOp())
        gradDefs.push_back(def);
    }
    // Mixed precision: gradients that all arrive through a cast from one
    // low-precision type are flattened in that type, and the flat gradient
    // is cast once (one kernel per unit, not one per parameter; the same
    // values, a cast being exact per element). reduce-dtype=low reduces
    // them in that type and casts the shard instead.
    Type flatElement = f32, reduceElement = f32;
    if (gradDefs.size() == grads.size())
      if (Type from = commonLowPrecisionType(gradDefs, /*toLow=*/false)) {
        flatElement = from;
        if (reduceLow_)
          reduceElement = from;
        for (auto [i, def] : llvm::enumerate(gradDefs)) {
          grads[i] = cast<graph::CastOp>(def).getInput();
          deadGradCasts.push_back(def);
        }
      }
    Value grad;
    if (reducedEach) {
      grad = *reducedEach;
    } else {
      grad = flattenAndReduce(grads, gradDefs, flatElement, reduceElement);
      if (reduceElement != f32)
        grad = graph::CastOp::create(builder, loc, shardType, grad).getResult();
    }

    // One update of the unit's shards, after the whole backward pass.
    builder.setInsertionPoint(terminator);
    SmallVector<Value> operands = {shardArg, grad};
    llvm::append_range(operands, stateShards);
    operands.push_back(updateStep(first));
    OperationState state(loc, first->getName());
    state.addOperands(operands);
    state.addTypes(SmallVector<Type>(first->getNumResults(), shardType));
    state.addAttributes(hyperParameters(first).getValue());
    Operation *update = builder.create(state);

    SmallVector<BlockArgument> targets = {shardArg};
    for (Value s : stateShards)
      targets.push_back(cast<BlockArgument>(s));
    for (auto [result, target] : llvm::zip(update->getResults(), targets)) {
      returned.push_back(result);
      returnedAttrs.push_back(DictionaryAttr());
      updatedArgs.push_back(target);
    }
    for (auto [param, old] : llvm::zip(unit.params, unit.updates)) {
      oldArgs.set(param.getArgNumber());
      const SmallVector<Value> oldState = *updateState(old);
      for (Value s : oldState)
        oldArgs.set(cast<BlockArgument>(s).getArgNumber());
      oldUpdates.push_back(old);
    }
  }

  // Keep whatever else the step returned (the gradient norm, buffer
  // updates, whose targets are renumbered below), then drop the
  // per-parameter updates and arguments.
  for (unsigned i = 0; i < terminator->getNumOperands(); ++i) {
    Operation *def = terminator->getOperand(i).getDefiningOp();
    if (i == static_cast<unsigned>(lossIndex) || (def && llvm::is_contained(oldUpdates, def)))
      continue;
    returned.push_back(terminator->getOperand(i));
    returnedAttrs.push_back(train.getResultAttrDict(i));
    auto target = train.getResultAttrOfType<IntegerAttr>(i, graph::kUpdatesAttr);
    updatedArgs.push_back(target ? train.getArgument(target.getInt()) : BlockArgument());
  }
  graph::setReturnedValues(train, returned, returnedAttrs);
  for (Operation *old : oldUpdates)
    old->erase();
  for (Operation *cast : deadGradCasts)
    if (cast->use_empty())
      cast->erase();
  // accumulate-reduce=each: the sums of the unsharded gradients are dead.
  for (Operation *sum : deadSums)
    if (sum->use_empty())
      sum->erase();
  oldArgs.resize(train.getNumArguments());
  for (unsigned i : oldArgs.set_bits())
    if (!train.getArgument(i).use_empty())
      return train.emitError("fsdp-shard: argument ") << i << " is still read after sharding";
  if (failed(train.eraseArguments(oldArgs)))
    return failure();
  // Argument numbers are final now.
  for (auto [i, target] : llvm::enumerate(updatedArgs))
    if (target)
      returnedAttrs[i] = builder.getDictionaryAttr(
          builder.getNamedAttr(graph::kUpdatesAttr, builder.getI64IntegerAttr(target.getArgNumber())));
  graph::setReturnedValues(train, returned, returnedAttrs);
  return success();
}

} // namespace
