//===- Pipelines.h - The compilation pipeline, built in one place -*- C++ -*-===//
//
// After import, a compilation runs three stages, each with an IR dump:
//
//   graph: graph-fuse, graph-append-loss, [graph-mixed-precision],
//          graph-autodiff, graph-optimizer, canonicalize, cse
//                                            (@forward -> @train_step)
//   fsdp:  fsdp-wrap, [fsdp-recompute], [graph-accumulate], fsdp-shard, [fsdp-clip-grad-norm], [fsdp-prefetch],
//          [fsdp-bucket]
//          (units, activation checkpointing and collectives)
//   plan:  convert-graph-to-plan, plan-allocate
//
// A forward-only compilation has one: plan (graph-fuse, then the lowering of
// @forward). `compileStages` builds them from one `CompileOptions`, which
// `validateCompileOptions` checks once; fsdpc runs the stages one by one
// (to dump and emit each), and fsdp-opt registers the same builders as
// `fsdpc-pipeline` (all stages) and `fsdpc-train-step`, `fsdpc-shard`,
// `fsdpc-lower-to-plan` (one each).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_PIPELINES_PIPELINES_H
#define FSDPC_PIPELINES_PIPELINES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <functional>
#include <string>
#include <vector>

namespace fsdpc {

/// Every option of one compilation after import.
struct CompileOptions : public mlir::PassPipelineOptions<CompileOptions> {
  // graph stage
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("replace norm, GELU and masked-softmax formulas by single ops (graph-fuse)"),
                    llvm::cl::init(true)};
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("cross_entropy, mse, output:NAME, auto, or a weighted sum of them"),
                           llvm::cl::init("auto")};
  Option<std::string> lossMean{*this, "loss-mean",
                               llvm::cl::desc("a cross entropy's mean over each rank's micro-batch (local) or over "
                                              "the step's labels on every rank and micro-batch (global)"),
                               llvm::cl::init("local")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("adamw or sgd"), llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate"), llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"), llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("weight decay (-1: the optimizer's default)"),
                             llvm::cl::init(-1.0)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"), llvm::cl::init(0.0)};
  Option<std::string> lrSchedule{*this, "lr-schedule", llvm::cl::desc("constant, linear or cosine"),
                                 llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::desc("linear warm-up steps"), llvm::cl::init(0)};
  Option<int64_t> totalSteps{*this, "total-steps", llvm::cl::desc("steps of a linear or cosine schedule"),
                             llvm::cl::init(0)};
  Option<double> minLr{*this, "min-lr", llvm::cl::desc("where linear and cosine decay end"), llvm::cl::init(0.0)};
  Option<std::string> mixedPrecision{*this, "mixed-precision",
                                     llvm::cl::desc("none, bf16 or f16 (graph-mixed-precision)"),
                                     llvm::cl::init("none")};
  Option<std::string> keepFp32{*this, "keep-fp32", llvm::cl::desc("regex of ONNX nodes that stay f32"),
                               llvm::cl::init("")};
  // fsdp stage
  Option<std::string> wrap{*this, "wrap", llvm::cl::desc("none, size:N or module:REGEX"), llvm::cl::init("none")};
  Option<std::string> strategy{*this, "strategy", llvm::cl::desc("full_shard, shard_grad_op, no_shard, hybrid_shard"),
                               llvm::cl::init("full_shard")};
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::desc("ranks"), llvm::cl::init(1)};
  Option<int64_t> shardGroupSize{*this, "shard-group-size", llvm::cl::desc("ranks per shard group (hybrid_shard)"),
                                 llvm::cl::init(0)};
  Option<bool> prefetch{*this, "prefetch", llvm::cl::desc("gather each unit one unit early (fsdp-prefetch)"),
                        llvm::cl::init(true)};
  Option<int64_t> maxInflightGathers{*this, "max-inflight-gathers",
                                     llvm::cl::desc("units gathered at once with prefetch (FSDP limit_all_gathers)"),
                                     llvm::cl::init(2)};
  Option<int64_t> gradAccum{*this, "grad-accum",
                             llvm::cl::desc("micro-batches of forward and backward per optimizer step "
                                            "(graph-accumulate)"),
                             llvm::cl::init(1)};
  Option<std::string> accumReduce{*this, "accum-reduce",
                                  llvm::cl::desc("with grad-accum: last (reduce once, FSDP no_sync) or each "
                                                 "(reduce every micro-batch)"),
                                  llvm::cl::init("last")};
  Option<double> clipGradNorm{*this, "clip-grad-norm",
                              llvm::cl::desc("clip gradients to this global L2 norm (fsdp-clip-grad-norm; 0: no "
                                             "clipping)"),
                              llvm::cl::init(0.0)};
  Option<int64_t> bucketBytes{*this, "bucket-bytes",
                              llvm::cl::desc("collectives of small units issued together up to this many bytes "
                                             "(fsdp-bucket; 0: none)"),
                              llvm::cl::init(0)};
  Option<std::string> recompute{*this, "recompute",
                                llvm::cl::desc("none, units:REGEX, cheap:REGEX (';'-separated clauses), or auto "
                                               "(chosen for memory-budget by chooseRecomputePolicy)"),
                                llvm::cl::init("none")};
  Option<int64_t> memoryBudget{*this, "memory-budget",
                               llvm::cl::desc("bytes of tensor memory per rank --recompute auto must fit (0: none)"),
                               llvm::cl::init(0)};
  Option<std::string> reduceDtype{*this, "reduce-dtype",
                                  llvm::cl::desc("with mixed precision: fp32, or its low-precision type to reduce "
                                                 "gradients in"),
                                  llvm::cl::init("fp32")};
  // plan stage
  Option<bool> forwardOnly{*this, "forward-only",
                           llvm::cl::desc("lower @forward alone (no loss, gradients or optimizer)"),
                           llvm::cl::init(false)};
  Option<std::string> offload{*this, "offload",
                              llvm::cl::desc("none, optimizer or params: what a GPU keeps in host memory "
                                             "(plan-offload)"),
                              llvm::cl::init("none")};
};

/// Empty if the options fit together; else why not, as a one-line message
/// naming the flag (e.g. "--reduce-dtype must be fp32 or bf16, got 'f16'").
std::string validateCompileOptions(const CompileOptions &options);

/// The recompute policy `--recompute auto` settles on for `module` after
/// its graph stage: the least recomputation whose predicted peak (fsdp and
/// plan stages run on copies) fits `options.memoryBudget`. In order: none;
/// cheap ops in every unit; then whole units, the earliest first, with
/// cheap ops in the rest. Empty, with `error` naming the smallest reachable
/// peak and what it holds, if even every unit recomputed does not fit.
std::string chooseRecomputePolicy(mlir::ModuleOp module, const CompileOptions &options, std::string &error,
                                  int64_t *predictedPeak = nullptr);

/// A stage: its name (the --emit / --dump-ir name) and what builds it.
struct CompileStage {
  std::string name;
  std::function<void(mlir::OpPassManager &)> build;
};

/// The stages after import, in order, for valid `options`.
std::vector<CompileStage> compileStages(const CompileOptions &options);

/// The number of a stage in --dump-ir file names (00-import ... 03-plan).
int stageNumber(llvm::StringRef stage);

/// Our dialects, and the ones our passes create.
void registerFsdpcDialects(mlir::DialectRegistry &registry);
/// Every fsdpc pass and the pipelines, for fsdp-opt and fsdpc.
void registerFsdpcPassesAndPipelines();

} // namespace fsdpc

#endif // FSDPC_PIPELINES_PIPELINES_H
