//===- Pipelines.h - The named compilation pipelines ------------*- C++ -*-===//
//
//   fsdpc-train-step:  graph-fuse, graph-append-loss, [graph-mixed-precision],
//                      graph-autodiff, graph-optimizer, canonicalize, cse
//                                                       (@forward -> @train_step)
//   fsdpc-shard:       fsdp-wrap, fsdp-shard, fsdp-prefetch (units and collectives)
//   fsdpc-lower-to-plan: convert-graph-to-plan, plan-allocate
//
// `fsdpc` runs them in that order with a stage boundary (and an IR dump)
// after each.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_PIPELINES_PIPELINES_H
#define FSDPC_PIPELINES_PIPELINES_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace fsdpc {

struct TrainStepOptions : public mlir::PassPipelineOptions<TrainStepOptions> {
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("replace norm, GELU and masked-softmax formulas by single ops (graph-fuse)"),
                    llvm::cl::init(true)};
  Option<std::string> loss{*this, "loss", llvm::cl::desc("cross_entropy, mse, output:NAME or auto"),
                           llvm::cl::init("auto")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("adamw or sgd"), llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate"), llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"), llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("weight decay (negative: optimizer default)"),
                             llvm::cl::init(-1.0)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"), llvm::cl::init(0.0)};
  Option<std::string> mixedPrecision{*this, "mixed-precision",
                                     llvm::cl::desc("none, bf16 or f16 (graph-mixed-precision)"),
                                     llvm::cl::init("none")};
  Option<std::string> keepFp32{*this, "keep-fp32", llvm::cl::desc("regex of ONNX nodes that stay f32"),
                               llvm::cl::init("")};
};

struct ShardOptions : public mlir::PassPipelineOptions<ShardOptions> {
  Option<std::string> wrap{*this, "wrap", llvm::cl::desc("none, size:N or module:REGEX"), llvm::cl::init("none")};
  Option<std::string> strategy{*this, "strategy", llvm::cl::desc("full_shard, shard_grad_op, no_shard, hybrid_shard"),
                               llvm::cl::init("full_shard")};
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::desc("ranks"), llvm::cl::init(1)};
  Option<int64_t> shardGroupSize{*this, "shard-group-size", llvm::cl::desc("ranks per shard group (hybrid_shard)"),
                                 llvm::cl::init(0)};
  Option<bool> prefetch{*this, "prefetch", llvm::cl::desc("gather each unit one unit early (fsdp-prefetch)"),
                        llvm::cl::init(true)};
  Option<std::string> reduceDtype{*this, "reduce-dtype",
                                  llvm::cl::desc("f32, or low to reduce-scatter mixed-precision gradients in their "
                                                 "low-precision type"),
                                  llvm::cl::init("f32")};
};

struct LowerToPlanOptions : public mlir::PassPipelineOptions<LowerToPlanOptions> {
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::desc("ranks"), llvm::cl::init(1)};
  Option<std::string> function{*this, "function", llvm::cl::desc("train_step, or forward for forward-only plans"),
                               llvm::cl::init("train_step")};
};

void buildTrainStepPipeline(mlir::OpPassManager &pm, const TrainStepOptions &options);
void buildShardPipeline(mlir::OpPassManager &pm, const ShardOptions &options);
void buildLowerToPlanPipeline(mlir::OpPassManager &pm, const LowerToPlanOptions &options);

/// Our dialects, and the ones our passes create.
void registerFsdpcDialects(mlir::DialectRegistry &registry);
/// Every fsdpc pass and the named pipelines, for fsdp-opt and fsdpc.
void registerFsdpcPassesAndPipelines();

} // namespace fsdpc

#endif // FSDPC_PIPELINES_PIPELINES_H
