#include "fsdpc/Pipelines/Pipelines.h"

#include "fsdpc/Conversion/Passes.h"
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace fsdpc {

void buildTrainStepPipeline(OpPassManager &pm, const TrainStepOptions &options) {
  if (options.fuse)
    pm.addPass(graph::createGraphFuse());
  pm.addPass(graph::createGraphAppendLoss({options.loss}));
  if (options.mixedPrecision != "none")
    pm.addPass(graph::createGraphMixedPrecision({options.mixedPrecision, options.keepFp32}));
  pm.addPass(graph::createGraphAutodiff());
  graph::GraphOptimizerOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.lr = options.lr;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.weightDecay = options.weightDecay;
  optimizer.momentum = options.momentum;
  pm.addPass(graph::createGraphOptimizer(optimizer));
  // Drops the forward outputs the loss does not need and merges duplicates.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildShardPipeline(OpPassManager &pm, const ShardOptions &options) {
  pm.addPass(fsdp::createFsdpWrap({options.wrap}));
  pm.addPass(fsdp::createFsdpShard({options.strategy, options.worldSize, options.shardGroupSize, options.reduceDtype}));
  if (options.prefetch)
    pm.addPass(fsdp::createFsdpPrefetch());
}

void buildLowerToPlanPipeline(OpPassManager &pm, const LowerToPlanOptions &options) {
  pm.addPass(createConvertGraphToPlan({options.worldSize, options.function}));
  pm.addNestedPass<plan_ir::ProgramOp>(plan_ir::createPlanAllocate());
}

void registerFsdpcDialects(DialectRegistry &registry) {
  registry.insert<graph::GraphDialect, fsdp::FsdpDialect, plan_ir::PlanDialect, func::FuncDialect>();
}

void registerFsdpcPassesAndPipelines() {
  graph::registerGraphPasses();
  fsdp::registerFsdpPasses();
  plan_ir::registerPlanPasses();
  registerConversionPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  PassPipelineRegistration<TrainStepOptions>("fsdpc-train-step",
                                             "build @train_step: loss, reverse-mode gradients, optimizer",
                                             buildTrainStepPipeline);
  PassPipelineRegistration<ShardOptions>("fsdpc-shard", "group parameters into units and shard them",
                                         buildShardPipeline);
  PassPipelineRegistration<LowerToPlanOptions>("fsdpc-lower-to-plan",
                                               "lower @train_step to an allocated plan.program",
                                               buildLowerToPlanPipeline);
}

} // namespace fsdpc
