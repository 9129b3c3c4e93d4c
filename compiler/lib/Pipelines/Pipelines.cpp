#include "fsdpc/Pipelines/Pipelines.h"

#include "fsdpc/Conversion/Passes.h"
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace fsdpc {

std::string validateCompileOptions(const CompileOptions &o) {
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    return "--optimizer " + o.optimizer + " is not supported (adamw, sgd)";
  if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1)
    return llvm::formatv("--betas expects B1,B2 with both in [0, 1), got '{0},{1}'", o.beta1.getValue(), o.beta2.getValue()).str();
  if (o.lr < 0 || o.eps < 0 || o.momentum < 0)
    return "--lr, --eps and --momentum must be non-negative";
  llvm::StringRef loss(o.loss);
  if (loss != "auto" && loss != "cross_entropy" && loss != "mse" && !loss.starts_with("output:"))
    return "--loss " + o.loss + " is not supported (cross_entropy, mse, output:NAME)";
  if (o.worldSize < 1)
    return "--world-size must be positive";
  static const llvm::StringRef strategies[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard"};
  if (!llvm::is_contained(strategies, o.strategy))
    return "--strategy " + o.strategy + " is not a strategy (full_shard, shard_grad_op, no_shard, hybrid_shard)";
  if (o.shardGroupSize != 0 && o.strategy != "hybrid_shard")
    return "--shard-group-size applies only to --strategy hybrid_shard";
  if (o.strategy == "hybrid_shard" && (o.shardGroupSize < 1 || o.worldSize % o.shardGroupSize != 0))
    return llvm::formatv("--strategy hybrid_shard needs --shard-group-size G dividing --world-size {0}, got {1}",
                         o.worldSize.getValue(), o.shardGroupSize.getValue())
        .str();
  const std::string &mp = o.mixedPrecision;
  if (mp != "none" && mp != "bf16" && mp != "f16")
    return "--mixed-precision must be none, bf16 or f16, got '" + mp + "'";
  if (o.reduceDtype != "fp32" && o.reduceDtype != "f32" && (mp == "none" || o.reduceDtype != mp))
    return "--reduce-dtype must be fp32" + std::string(mp == "none" ? "" : " or " + mp) + ", got '" + o.reduceDtype +
           "'";
  if (mp == "none" && !o.keepFp32.getValue().empty())
    return "--keep-fp32 needs --mixed-precision";
  if (o.forwardOnly && o.worldSize != 1)
    return "--forward-only plans run on one rank";
  return "";
}

namespace {

void buildGraphStage(OpPassManager &pm, const CompileOptions &o) {
  if (o.fuse)
    pm.addPass(graph::createGraphFuse());
  pm.addPass(graph::createGraphAppendLoss({o.loss}));
  if (o.mixedPrecision != "none")
    pm.addPass(graph::createGraphMixedPrecision({o.mixedPrecision, o.keepFp32}));
  pm.addPass(graph::createGraphAutodiff());
  graph::GraphOptimizerOptions optimizer;
  optimizer.optimizer = o.optimizer;
  optimizer.lr = o.lr;
  optimizer.beta1 = o.beta1;
  optimizer.beta2 = o.beta2;
  optimizer.eps = o.eps;
  optimizer.weightDecay = o.weightDecay;
  optimizer.momentum = o.momentum;
  pm.addPass(graph::createGraphOptimizer(optimizer));
  // Drops the forward outputs the loss does not need and merges duplicates.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildFsdpStage(OpPassManager &pm, const CompileOptions &o) {
  pm.addPass(fsdp::createFsdpWrap({o.wrap}));
  // fsdp-shard's "low" is the mixed-precision type the gradients arrive in.
  std::string reduce = o.reduceDtype == o.mixedPrecision ? "low" : "f32";
  pm.addPass(fsdp::createFsdpShard({o.strategy, o.worldSize, o.shardGroupSize, reduce}));
  if (o.prefetch)
    pm.addPass(fsdp::createFsdpPrefetch());
}

void buildPlanStage(OpPassManager &pm, const CompileOptions &o) {
  if (o.forwardOnly && o.fuse) // a train step fused in its graph stage
    pm.addPass(graph::createGraphFuse());
  pm.addPass(createConvertGraphToPlan({o.worldSize, o.forwardOnly ? "forward" : "train_step"}));
  pm.addNestedPass<plan_ir::ProgramOp>(plan_ir::createPlanAllocate());
}

/// Registers `name` to build `build`, after validating its options.
void registerPipeline(llvm::StringRef name, llvm::StringRef description,
                      std::function<void(OpPassManager &, const CompileOptions &)> build) {
  registerPassPipeline(
      name, description,
      [build](OpPassManager &pm, llvm::StringRef text, llvm::function_ref<LogicalResult(const llvm::Twine &)> error) {
        CompileOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (std::string invalid = validateCompileOptions(options); !invalid.empty())
          return error(invalid);
        build(pm, options);
        return success();
      },
      [](llvm::function_ref<void(const detail::PassOptions &)> handler) { handler(CompileOptions()); });
}

} // namespace

std::vector<CompileStage> compileStages(const CompileOptions &options) {
  auto stage = [&](const char *name, void (*build)(OpPassManager &, const CompileOptions &)) {
    return CompileStage{name, [&options, build](OpPassManager &pm) { build(pm, options); }};
  };
  if (options.forwardOnly)
    return {stage("plan", buildPlanStage)};
  return {stage("graph", buildGraphStage), stage("fsdp", buildFsdpStage), stage("plan", buildPlanStage)};
}

int stageNumber(llvm::StringRef stage) {
  static const llvm::StringRef order[] = {"import", "graph", "fsdp", "plan"};
  return llvm::find(order, stage) - std::begin(order);
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
  registerPipeline("fsdpc-pipeline", "every stage after import, as fsdpc runs them",
                   [](OpPassManager &pm, const CompileOptions &options) {
                     for (const CompileStage &stage : compileStages(options))
                       stage.build(pm);
                   });
  registerPipeline("fsdpc-train-step", "the graph stage: @train_step with loss, gradients and optimizer",
                   buildGraphStage);
  registerPipeline("fsdpc-shard", "the fsdp stage: units, shards and collectives", buildFsdpStage);
  registerPipeline("fsdpc-lower-to-plan", "the plan stage: an allocated plan.program", buildPlanStage);
}

} // namespace fsdpc
