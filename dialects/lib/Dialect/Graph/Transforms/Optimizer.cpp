//===- Optimizer.cpp - graph-optimizer ------------------------------------===//
//
// Turns the gradients returned by @train_step into torch-equivalent
// optimizer updates. The new parameters and optimizer state are returned
// with `graph.updates = N`, so the lowering can update arguments in place.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cstdio>

namespace fsdpc::graph {
#define GEN_PASS_DEF_GRAPHOPTIMIZER
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace fsdpc::graph

using namespace mlir;
using namespace fsdpc::graph;

namespace {

struct GraphOptimizerPass : public fsdpc::graph::impl::GraphOptimizerBase<GraphOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp train = lookupFunction(module, kTrainStepFunc, "graph-optimizer");
    if (!train)
      return signalPassFailure();
    bool adamw = optimizer == "adamw";
    if (!adamw && optimizer != "sgd") {
      module.emitError() << "graph-optimizer: unknown optimizer '" << optimizer << "' (expected adamw or sgd)";
      return signalPassFailure();
    }
    double decay = weightDecay < 0 ? (adamw ? 0.01 : 0.0) : static_cast<double>(weightDecay);
    std::optional<LrSchedule> schedule = symbolizeLrSchedule(lrSchedule);
    if (!schedule) {
      module.emitError("graph-optimizer: lr-schedule must be constant, linear or cosine, got '") << lrSchedule << "'";
      return signalPassFailure();
    }
    schedule_ = *schedule;
    if (warmupSteps < 0 || minLr < 0 || (schedule_ != LrSchedule::constant && totalSteps <= warmupSteps)) {
      module.emitError("graph-optimizer: warmup-steps and min-lr must be non-negative, and linear and cosine "
                       "schedules need total-steps above warmup-steps");
      return signalPassFailure();
    }
    if (lr < 0 || eps < 0 || momentum < 0 || beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1) {
      module.emitError("graph-optimizer: lr, eps and momentum must be non-negative and betas in [0, 1)");
      return signalPassFailure();
    }
    int lossIndex = findResultWithAttr(train, kLossAttr);
    if (lossIndex < 0) {
      train.emitError("graph-optimizer: @train_step returns no graph.loss result");
      return signalPassFailure();
    }

    // Map parameter names to their arguments.
    llvm::StringMap<BlockArgument> paramByName;
    for (BlockArgument arg : train.getArguments())
      if (auto name = train.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttr))
        paramByName[name.getValue()] = arg;

    Operation *terminator = train.getBody().front().getTerminator();
    SmallVector<std::pair<StringAttr, Value>> grads;
    for (unsigned i = 0; i < train.getNumResults(); ++i)
      if (auto name = train.getResultAttrOfType<StringAttr>(i, kGradOfAttr))
        grads.emplace_back(name, terminator->getOperand(i));

    OpBuilder builder(terminator);
    auto step = appendArgument(train, RankedTensorType::get({}, builder.getI64Type()),
                               builder.getDictionaryAttr(builder.getNamedAttr(kStepAttr, builder.getUnitAttr())));
    auto stateArgument = [&](StringAttr owner, StringRef slot, Type type) {
      return appendArgument(train, type,
                            builder.getDictionaryAttr({builder.getNamedAttr(kStateOfAttr, owner),
                                                       builder.getNamedAttr(kStateSlotAttr, builder.getStringAttr(slot))}));
    };
    auto updatesAttr = [&](BlockArgument arg) {
      return builder.getDictionaryAttr(builder.getNamedAttr(kUpdatesAttr, builder.getI64IntegerAttr(arg.getArgNumber())));
    };

    SmallVector<Value> returned = {terminator->getOperand(lossIndex)};
    SmallVector<DictionaryAttr> attrs = {train.getResultAttrDict(lossIndex)};
    for (auto [name, grad] : grads) {
      auto it = paramByName.find(name.getValue());
      if (it == paramByName.end()) {
        train.emitError() << "graph-optimizer: gradient of unknown parameter '" << name.getValue() << "'";
        return signalPassFailure();
      }
      BlockArgument param = it->second;
      Type type = param.getType();
      Location loc = param.getLoc();
      if (adamw) {
        BlockArgument expAvg = stateArgument(name, "exp_avg", type);
        BlockArgument expAvgSq = stateArgument(name, "exp_avg_sq", type);
        auto update = AdamwUpdateOp::create(builder, loc, type, type, type, param, grad, expAvg, expAvgSq, step,
                                            builder.getF64FloatAttr(lr), builder.getF64FloatAttr(beta1),
                                            builder.getF64FloatAttr(beta2), builder.getF64FloatAttr(eps),
                                            builder.getF64FloatAttr(decay), /*lr_schedule=*/nullptr,
                                            /*warmup_steps=*/nullptr, /*total_steps=*/nullptr, /*min_lr=*/nullptr);
        setSchedule(update, builder);
        returned.append({update.getNewParam(), update.getNewExpAvg(), update.getNewExpAvgSq()});
        attrs.append({updatesAttr(param), updatesAttr(expAvg), updatesAttr(expAvgSq)});
      } else {
        SmallVector<Value> state;
        SmallVector<Type> stateTypes;
        BlockArgument buffer;
        if (momentum != 0) {
          buffer = stateArgument(name, "momentum_buffer", type);
          state.push_back(buffer);
          stateTypes.push_back(type);
        }
        auto update = SgdUpdateOp::create(builder, loc, type, stateTypes, param, grad, state, step,
                                          builder.getF64FloatAttr(lr), builder.getF64FloatAttr(momentum),
                                          builder.getF64FloatAttr(dampening), builder.getF64FloatAttr(decay),
                                          builder.getBoolAttr(nesterov), /*lr_schedule=*/nullptr,
                                          /*warmup_steps=*/nullptr, /*total_steps=*/nullptr, /*min_lr=*/nullptr);
        setSchedule(update, builder);
        returned.push_back(update.getNewParam());
        attrs.push_back(updatesAttr(param));
        if (buffer) {
          returned.push_back(update.getNewState()[0]);
          attrs.push_back(updatesAttr(buffer));
        }
      }
    }
    appendBufferUpdates(train, returned, attrs);
    setReturnedValues(train, returned, attrs);

    auto num = [](double value) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", value);
      return std::string(text);
    };
    std::string description =
        adamw ? "adamw(lr=" + num(lr) + ", betas=(" + num(beta1) + ", " + num(beta2) + "), eps=" + num(eps) +
                    ", weight_decay=" + num(decay) + ")"
              : "sgd(lr=" + num(lr) + ", momentum=" + num(momentum) + ", dampening=" + num(dampening) +
                    ", weight_decay=" + num(decay) + ", nesterov=" + (nesterov ? "true" : "false") + ")";
    if (schedule_ != LrSchedule::constant || warmupSteps > 0)
      description += ", " + lrSchedule + " schedule (warmup " + std::to_string(warmupSteps) + ", total " +
                     std::to_string(totalSteps) + ", min_lr " + num(minLr) + ")";
    module->setAttr(kOptimizerAttr, builder.getStringAttr(description));
  }

  /// The schedule's attributes, on updates that have one (a constant
  /// learning rate without warm-up needs none).
  template <typename UpdateOp> void setSchedule(UpdateOp update, Builder &builder) {
    if (schedule_ == LrSchedule::constant && warmupSteps == 0)
      return;
    update.setLrScheduleAttr(LrScheduleAttr::get(builder.getContext(), schedule_));
    update.setWarmupStepsAttr(builder.getI64IntegerAttr(warmupSteps));
    update.setTotalStepsAttr(builder.getI64IntegerAttr(totalSteps));
    update.setMinLrAttr(builder.getF64FloatAttr(minLr));
  }

  LrSchedule schedule_ = LrSchedule::constant;
};

} // namespace
