#include "fsdpc/Pipelines/Pipelines.h"

#include "fsdpc/Conversion/Passes.h"
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "fsdpc/Dialect/Plan/Transforms/Passes.h"
#include "fsdpc/Export/MemoryReport.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"

#include <cmath>

using namespace mlir;

namespace fsdpc {

std::string validateCompileOptions(const CompileOptions &o) {
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    return "--optimizer " + o.optimizer + " is not supported (adamw, sgd)";
  // NaN passes every comparison below: finite first.
  const std::pair<const char *, double> hyperparameters[] = {
      {"--lr", o.lr},           {"--eps", o.eps},        {"--momentum", o.momentum}, {"--weight-decay", o.weightDecay},
      {"--min-lr", o.minLr},    {"--betas", o.beta1},    {"--betas", o.beta2},       {"--clip-grad-norm", o.clipGradNorm}};
  for (const auto &[flag, value] : hyperparameters)
    if (!std::isfinite(value))
      return std::string(flag) + " must be a finite number, got " + std::to_string(value);
  if (o.optimizer == "adamw" && o.momentum != 0)
    return "--momentum applies to --optimizer sgd; adamw's moments are set by --betas";
  // -1, the default, means the optimizer's own (adamw 0.01, sgd 0).
  if (o.weightDecay < 0 && o.weightDecay != -1)
    return "--weight-decay must be non-negative";
  if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1)
    return llvm::formatv("--betas expects B1,B2 with both in [0, 1), got '{0},{1}'", o.beta1.getValue(), o.beta2.getValue()).str();
  if (o.lr < 0 || o.eps < 0 || o.momentum < 0)
    return "--lr, --eps and --momentum must be non-negative";
  // --loss is parsed against the model's outputs by graph-append-loss.
  if (o.lossMean != "local" && o.lossMean != "global")
    return "--loss-mean must be local or global, got '" + o.lossMean + "'";
  if (o.lossMean == "global" && o.forwardOnly)
    return "--loss-mean global needs a training step, not --forward-only";
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
  llvm::StringRef recompute(o.recompute);
  if (recompute != "none" && recompute != "auto" && !recompute.starts_with("units:") && !recompute.starts_with("cheap:"))
    return "--recompute must be none, units:REGEX, cheap:REGEX or auto, got '" + o.recompute + "'";
  llvm::StringRef schedule(o.lrSchedule);
  if (schedule != "constant" && schedule != "linear" && schedule != "cosine")
    return "--lr-schedule must be constant, linear or cosine, got '" + o.lrSchedule + "'";
  if (o.warmupSteps < 0 || o.totalSteps < 0 || o.minLr < 0)
    return "--warmup-steps, --total-steps and --min-lr must be non-negative";
  if (schedule != "constant" && o.totalSteps <= o.warmupSteps)
    return "--lr-schedule " + o.lrSchedule + " needs --total-steps above --warmup-steps";
  if (o.minLr > o.lr)
    return "--min-lr must not exceed --lr";
  if (o.maxInflightGathers < 1)
    return "--max-inflight-gathers must be at least 1";
  if (o.memoryBudget < 0)
    return "--memory-budget must be positive";
  if (o.bucketBytes < 0)
    return "--bucket-bytes must be non-negative";
  if (o.gradAccum < 1)
    return "--grad-accum must be at least 1";
  if (o.accumReduce != "last" && o.accumReduce != "each")
    return "--accum-reduce must be last or each, got '" + o.accumReduce + "'";
  if (o.gradAccum > 1 && o.forwardOnly)
    return "--grad-accum needs a training step, not --forward-only";
  if (o.gradAccum > 1 && mp != "none" && o.reduceDtype == mp)
    return "--grad-accum sums gradients in fp32; use it with --reduce-dtype fp32";
  if (o.offload != "none" && o.offload != "optimizer" && o.offload != "params")
    return "--offload must be none, optimizer or params, got '" + o.offload + "'";
  if (o.offload != "none" && o.forwardOnly)
    return "--offload needs a training step, not --forward-only";
  if (o.clipGradNorm < 0)
    return "--clip-grad-norm must be positive";
  if (o.clipGradNorm > 0 && o.forwardOnly)
    return "--clip-grad-norm needs a training step, not --forward-only";
  if ((recompute == "auto") != (o.memoryBudget > 0))
    return recompute == "auto" ? "--recompute auto needs --memory-budget BYTES"
                               : "--memory-budget needs --recompute auto";
  return "";
}

namespace {

void buildGraphStage(OpPassManager &pm, const CompileOptions &o) {
  if (o.fuse)
    pm.addPass(graph::createGraphFuse());
  pm.addPass(graph::createGraphAppendLoss({o.loss, o.lossMean, o.worldSize, o.gradAccum}));
  if (o.mixedPrecision != "none") {
    pm.addPass(graph::createGraphMixedPrecision({o.mixedPrecision, o.keepFp32}));
    // 16-bit logits: a vocabulary padded to a multiple of 8 for the GEMMs.
    pm.addPass(graph::createGraphPadClasses());
  }
  pm.addPass(graph::createGraphAutodiff());
  graph::GraphOptimizerOptions optimizer;
  optimizer.optimizer = o.optimizer;
  optimizer.lr = o.lr;
  optimizer.beta1 = o.beta1;
  optimizer.beta2 = o.beta2;
  optimizer.eps = o.eps;
  optimizer.weightDecay = o.weightDecay;
  optimizer.momentum = o.momentum;
  optimizer.lrSchedule = o.lrSchedule;
  optimizer.warmupSteps = o.warmupSteps;
  optimizer.totalSteps = o.totalSteps;
  optimizer.minLr = o.minLr;
  pm.addPass(graph::createGraphOptimizer(optimizer));
  // Drops the forward outputs the loss does not need and merges duplicates.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildFsdpStage(OpPassManager &pm, const CompileOptions &o) {
  pm.addPass(fsdp::createFsdpWrap({o.wrap}));
  // `auto` is settled before this stage runs (chooseRecomputePolicy).
  if (o.recompute != "none" && o.recompute != "auto")
    pm.addPass(fsdp::createFsdpRecompute({o.recompute}));
  // After recompute, which works on one micro-batch's step.
  if (o.gradAccum > 1)
    pm.addPass(graph::createGraphAccumulate({o.gradAccum}));
  // fsdp-shard's "low" is the mixed-precision type the gradients arrive in.
  std::string reduce = o.reduceDtype == o.mixedPrecision ? "low" : "f32";
  pm.addPass(fsdp::createFsdpShard({o.strategy, o.worldSize, o.shardGroupSize, reduce, o.accumReduce}));
  if (o.clipGradNorm > 0)
    pm.addPass(fsdp::createFsdpClipGradNorm({o.clipGradNorm}));
  // K gathered units at once: each gather issued K - 1 units early.
  if (o.prefetch && o.maxInflightGathers > 1)
    pm.addPass(fsdp::createFsdpPrefetch({o.maxInflightGathers - 1}));
  if (o.bucketBytes > 0)
    pm.addPass(fsdp::createFsdpBucket({o.bucketBytes}));
}

void buildPlanStage(OpPassManager &pm, const CompileOptions &o) {
  if (o.forwardOnly && o.fuse) // a train step fused in its graph stage
    pm.addPass(graph::createGraphFuse());
  // The offloaded optimizer runs as host kernels, which take f32 on the
  // CUDA device: its gradients keep their casts.
  pm.addPass(createConvertGraphToPlan(
      {o.worldSize, o.forwardOnly ? "forward" : "train_step", /*widenGradientsInUpdates=*/o.offload == "none"}));
  if (o.offload != "none")
    pm.addNestedPass<plan_ir::ProgramOp>(plan_ir::createPlanOffload({o.offload}));
  pm.addNestedPass<plan_ir::ProgramOp>(plan_ir::createPlanInPlace());
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

namespace {

std::string gib(int64_t bytes) {
  return bytes >= (int64_t(1) << 30) ? llvm::formatv("{0:F1} GiB", bytes / 1073741824.0).str()
                                     : llvm::formatv("{0:F1} MiB", bytes / 1048576.0).str();
}

/// The memory report of `module`'s fsdp and plan stages under `policy`,
/// run on a copy; nothing if they fail (the failure is reported).
std::optional<MemoryReport> trialReport(ModuleOp module, const CompileOptions &base, const std::string &policy) {
  CompileOptions options;
  options.copyOptionValuesFrom(base);
  options.recompute = policy;
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  PassManager pm(module.getContext());
  buildFsdpStage(pm, options);
  buildPlanStage(pm, options);
  if (failed(pm.run(*copy)))
    return std::nullopt;
  std::string error;
  return buildMemoryReport(*copy, error);
}

} // namespace

std::string chooseRecomputePolicy(ModuleOp module, const CompileOptions &options, std::string &error,
                                  int64_t *predictedPeak) {
  const int64_t budget = options.memoryBudget;
  // The units fsdp-wrap will make, but the root: it holds what no other
  // unit does, usually at both ends of forward.
  SmallVector<std::string> units;
  {
    OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
    PassManager pm(module.getContext());
    pm.addPass(fsdp::createFsdpWrap({options.wrap}));
    if (failed(pm.run(*copy))) {
      error = "--recompute auto: fsdp-wrap failed";
      return "";
    }
    for (fsdp::UnitOp unit : copy->getOps<fsdp::UnitOp>())
      if (unit.getSymName() != "root")
        units.push_back(llvm::Regex::escape(unit.getSymName()));
  }
  auto alternation = [&](size_t begin, size_t end) { return llvm::join(llvm::ArrayRef(units).slice(begin, end - begin), "|"); };
  // Least recomputation first; each candidate recomputes at least what the
  // one before it did, so the predicted peak does not grow along the list.
  std::vector<std::string> candidates = {"none"};
  if (!units.empty()) {
    candidates.push_back("cheap:" + alternation(0, units.size()));
    for (size_t k = 1; k < units.size(); ++k)
      candidates.push_back("units:" + alternation(0, k) + ";cheap:" + alternation(k, units.size()));
    candidates.push_back("units:" + alternation(0, units.size()));
  }
  auto peakOf = [&](size_t i, std::optional<MemoryReport> &report) -> int64_t {
    report = trialReport(module, options, candidates[i]);
    return report ? report->predictedPeak : -1;
  };
  std::optional<MemoryReport> report;
  int64_t peak = peakOf(0, report);
  if (peak < 0) {
    error = "--recompute auto: the trial compilation failed";
    return "";
  }
  if (peak <= budget) {
    if (predictedPeak)
      *predictedPeak = peak;
    return candidates[0];
  }
  // The smallest reachable peak: everything recomputed.
  std::optional<MemoryReport> least;
  const int64_t leastPeak = peakOf(candidates.size() - 1, least);
  if (leastPeak < 0 || leastPeak > budget) {
    const MemoryReport &r = leastPeak < 0 ? *report : *least;
    error = llvm::formatv("cannot fit in {0} per rank: the smallest peak with every unit recomputed is {1} "
                          "(parameter shards {2}, gradient shards {3}, optimizer state {4}, other persistent {5}, "
                          "largest gathered unit {6}, live activations at the peak {7})",
                          gib(budget), gib(r.predictedPeak), gib(r.parameterShards), gib(r.gradientShards),
                          gib(r.optimizerStateShards), gib(r.otherPersistent), gib(r.largestGatheredUnit),
                          gib(r.liveAtPeak.activations))
                .str();
    return "";
  }
  // Binary search for the first candidate that fits (the last one does).
  size_t lo = 1, hi = candidates.size() - 1;
  int64_t fitting = leastPeak;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    std::optional<MemoryReport> trial;
    const int64_t midPeak = peakOf(mid, trial);
    if (midPeak >= 0 && midPeak <= budget) {
      hi = mid;
      fitting = midPeak;
    } else {
      lo = mid + 1;
    }
  }
  if (lo == candidates.size() - 1)
    fitting = leastPeak;
  if (predictedPeak)
    *predictedPeak = fitting;
  return candidates[lo];
}

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
