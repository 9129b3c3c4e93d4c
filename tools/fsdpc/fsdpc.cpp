//===- fsdpc.cpp - Compile an ONNX model into a training plan -------------===//
//
//   fsdpc model.onnx -o plan.bin [--emit=import|graph|fsdp|plan] [--dump-ir DIR]
//         [--loss cross_entropy|mse|output:NAME] [--optimizer adamw|sgd] ...
//
// Stages: import (ONNX -> @forward in graph), graph (the training step),
// fsdp (after the sharding passes), plan (the allocated plan.program).
//
//===----------------------------------------------------------------------===//
#include "fsdpc/Export/MemoryReport.h"
#include "fsdpc/Export/PlanWriter.h"
#include "fsdpc/Import/OnnxImporter.h"
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h"
#include "fsdpc/Dialect/Graph/Transforms/Passes.h"
#include "fsdpc/Pipelines/Pipelines.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("fsdpc options");
cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::cat(category));
cl::opt<bool> listOps("list-ops", cl::desc("print the supported ONNX ops, each with the first opset it applies to"),
                      cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("write the plan to this file"), cl::value_desc("plan.bin"),
                                cl::cat(category));
cl::opt<std::string> emitStage("emit", cl::desc("print the IR of a stage to stdout: import, graph, fsdp or plan"),
                               cl::value_desc("stage"), cl::cat(category));
cl::opt<std::string> dumpDir("dump-ir", cl::desc("write the IR of every stage into this directory"),
                             cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> lossKind("loss", cl::desc("cross_entropy, mse or output:NAME (default: output if the model "
                                               "returns a scalar, else cross_entropy)"),
                              cl::init("auto"), cl::cat(category));
cl::opt<std::string> optimizer("optimizer", cl::desc("adamw or sgd"), cl::init("adamw"), cl::cat(category));
cl::opt<double> lr("lr", cl::desc("learning rate"), cl::init(1e-3), cl::cat(category));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(0.0), cl::cat(category));
cl::opt<double> weightDecay("weight-decay", cl::desc("weight decay (default: adamw 0.01, sgd 0)"), cl::init(-1.0),
                            cl::cat(category));
cl::opt<std::string> betas("betas", cl::desc("AdamW betas as B1,B2"), cl::init("0.9,0.999"), cl::cat(category));
cl::opt<double> eps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8), cl::cat(category));
cl::opt<int64_t> batchSize("batch-size", cl::desc("global batch when the model's batch dimension is symbolic"),
                           cl::init(0), cl::cat(category));
cl::opt<std::string> wrapPolicy("wrap", cl::desc("sharding units: none, size:N or module:REGEX"), cl::init("none"),
                                cl::cat(category));
cl::opt<int64_t> worldSize("world-size", cl::desc("ranks the plan runs on (default 1)"), cl::init(1),
                           cl::cat(category));
cl::opt<std::string> strategy("strategy", cl::desc("full_shard, shard_grad_op, no_shard or hybrid_shard"),
                              cl::init("full_shard"), cl::cat(category));
cl::opt<int64_t> shardGroupSize("shard-group-size", cl::desc("ranks per shard group, for hybrid_shard"),
                                cl::init(0), cl::cat(category));
cl::opt<bool> prefetch("prefetch", cl::desc("gather each unit one unit early, overlapping compute (default true)"),
                       cl::init(true), cl::cat(category));
cl::opt<bool> fuse("fuse", cl::desc("replace the norm, GELU and masked-softmax formulas of exports by single ops "
                                    "(graph-fuse; default true)"),
                   cl::init(true), cl::cat(category));
cl::opt<bool> forwardOnly("forward-only",
                          cl::desc("compile the model's forward pass alone (no loss, gradients or optimizer), for "
                                   "fsdp-run --forward"),
                          cl::cat(category));
cl::opt<bool> printReport("report", cl::desc("print each rank's memory and communication per step"),
                          cl::cat(category));
cl::opt<std::string> reportJson("report-json", cl::desc("write the memory report as JSON to this file"),
                                cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> mixedPrecision("mixed-precision",
                                    cl::desc("none, bf16 or f16: compute in this type around f32 master parameters "
                                             "(FSDP MixedPrecision(param_dtype=...)); default none"),
                                    cl::init("none"), cl::cat(category));
cl::opt<std::string> reduceDtype("reduce-dtype",
                                 cl::desc("with --mixed-precision: fp32 (default) or the low-precision type, the "
                                          "dtype gradients are reduce-scattered in"),
                                 cl::init("fp32"), cl::cat(category));
cl::opt<std::string> keepFp32("keep-fp32", cl::desc("with --mixed-precision: ONNX nodes (regex) that stay in f32"),
                              cl::value_desc("regex"), cl::cat(category));
cl::opt<std::string> freezeRegex("freeze", cl::desc("do not train parameters whose name matches this regex"),
                                 cl::value_desc("regex"), cl::cat(category));

int fail(const llvm::Twine &message) {
  llvm::errs() << "fsdpc: error: " << message << "\n";
  return 1;
}

bool parseDouble(llvm::StringRef text, double &value) { return !text.trim().getAsDouble(value); }

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerAsmPrinterCLOptions();
  // LLVM's hundreds of backend flags would bury fsdpc's own in --help.
  // Hidden options still parse, so MLIR's (--mlir-print-ir-after-all, ...)
  // keep working.
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "fsdpc: compile an ONNX model into a fully sharded training plan\n\n"
                              "  MLIR's own options, such as --mlir-print-ir-after-all, work too.\n");

  if (listOps) {
    for (const auto &[op, since] : fsdpc::supportedOnnxOps())
      llvm::outs() << op << " " << since << "\n";
    return 0;
  }
  if (inputPath.empty())
    return fail("no model given: fsdpc MODEL.onnx ...");
  static const llvm::StringRef stages[] = {"import", "graph", "fsdp", "plan"};
  if (!emitStage.empty() && !llvm::is_contained(stages, emitStage))
    return fail("--emit=" + emitStage + " is not a stage (import, graph, fsdp, plan)");
  if (emitStage.empty() && outputPath.empty() && dumpDir.empty() && !printReport && reportJson.empty())
    return fail("nothing to do: pass -o plan.bin, --emit=STAGE, --dump-ir DIR or --report");
  if (optimizer != "adamw" && optimizer != "sgd")
    return fail("--optimizer " + optimizer + " is not supported (adamw, sgd)");
  auto [beta1Text, beta2Text] = llvm::StringRef(betas).split(',');
  double beta1, beta2;
  if (!parseDouble(beta1Text, beta1) || !parseDouble(beta2Text, beta2) || beta1 < 0 || beta1 >= 1 || beta2 < 0 ||
      beta2 >= 1)
    return fail("--betas expects B1,B2 with both in [0, 1), got '" + betas + "'");
  if (lr < 0 || eps < 0 || momentum < 0)
    return fail("--lr, --eps and --momentum must be non-negative");
  if (batchSize < 0)
    return fail("--batch-size must be positive");
  if (worldSize < 1)
    return fail("--world-size must be positive");
  static const llvm::StringRef strategies[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard"};
  if (!llvm::is_contained(strategies, strategy))
    return fail("--strategy " + strategy + " is not a strategy (full_shard, shard_grad_op, no_shard, hybrid_shard)");
  if (shardGroupSize != 0 && strategy != "hybrid_shard")
    return fail("--shard-group-size applies only to --strategy hybrid_shard");
  if (strategy == "hybrid_shard" && (shardGroupSize < 1 || worldSize % shardGroupSize != 0))
    return fail(llvm::formatv("--strategy hybrid_shard needs --shard-group-size G dividing --world-size {0}, got {1}",
                              static_cast<int64_t>(worldSize), static_cast<int64_t>(shardGroupSize))
                    .str());
  llvm::StringRef loss(lossKind);
  if (loss != "auto" && loss != "cross_entropy" && loss != "mse" && !loss.starts_with("output:"))
    return fail("--loss " + lossKind + " is not supported (cross_entropy, mse, output:NAME)");

  DialectRegistry registry;
  fsdpc::registerFsdpcDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  fsdpc::registerFsdpcPassesAndPipelines();

  // Pass errors name the model file and the ONNX node they came from.
  ScopedDiagnosticHandler diagnostics(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
    std::string node;
    if (auto name = dyn_cast<NameLoc>(diag.getLocation()))
      node = " (at ONNX node '" + name.getName().str() + "')";
    llvm::errs() << "fsdpc: error: " << inputPath << ": " << diag.str() << node << "\n";
    return success();
  });

  fsdpc::ImportOptions importOptions;
  importOptions.batchSize = batchSize;
  importOptions.freezeRegex = freezeRegex;
  importOptions.worldSize = worldSize;
  std::string error;
  std::optional<fsdpc::ImportedModel> imported = fsdpc::importOnnxModel(context, inputPath, importOptions, error);
  if (!imported)
    return fail(error);
  ModuleOp module = *imported->module;

  int stageIndex = 0;
  auto finishStage = [&](llvm::StringRef stage) -> bool {
    if (!dumpDir.empty()) {
      if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir)) {
        fail("cannot create --dump-ir directory '" + dumpDir + "': " + ec.message());
        return false;
      }
      llvm::SmallString<256> path(dumpDir);
      llvm::sys::path::append(path, llvm::formatv("{0:02}-{1}.mlir", stageIndex, stage).str());
      std::error_code ec;
      llvm::raw_fd_ostream out(path, ec);
      if (ec) {
        fail("cannot write '" + path + "': " + ec.message());
        return false;
      }
      module.print(out);
    }
    ++stageIndex;
    if (emitStage == stage) {
      module.print(llvm::outs());
      return false;
    }
    return true;
  };
  auto runPipeline = [&](auto build) -> bool {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return false;
    build(pm);
    return succeeded(pm.run(module));
  };

  if (!finishStage("import"))
    return emitStage == "import" ? 0 : 1;

  fsdpc::LowerToPlanOptions planOptions;
  planOptions.worldSize = worldSize;
  if (forwardOnly) {
    if (worldSize != 1)
      return fail("--forward-only plans run on one rank");
    if (emitStage == "graph" || emitStage == "fsdp")
      return fail("--forward-only has no " + emitStage + " stage (import, plan)");
    planOptions.function = "forward";
    // A train step fuses first thing in fsdpc-train-step; @forward alone
    // fuses here.
    if (!runPipeline([&](PassManager &pm) {
          if (fuse)
            pm.addPass(fsdpc::graph::createGraphFuse());
          fsdpc::buildLowerToPlanPipeline(pm, planOptions);
        }))
      return 1;
    stageIndex = 3;
  }
  if (mixedPrecision != "none" && mixedPrecision != "bf16" && mixedPrecision != "f16")
    return fail("--mixed-precision must be none, bf16 or f16, got '" + mixedPrecision + "'");
  if (reduceDtype != "fp32" && reduceDtype != "f32" && reduceDtype != mixedPrecision)
    return fail("--reduce-dtype must be fp32" +
                llvm::Twine(mixedPrecision == "none" ? "" : " or " + mixedPrecision) + ", got '" + reduceDtype + "'");
  if (mixedPrecision == "none" && !keepFp32.empty())
    return fail("--keep-fp32 needs --mixed-precision");
  fsdpc::TrainStepOptions trainOptions;
  trainOptions.mixedPrecision = mixedPrecision;
  trainOptions.keepFp32 = keepFp32;
  trainOptions.fuse = fuse;
  trainOptions.loss = lossKind;
  trainOptions.optimizer = optimizer;
  trainOptions.lr = lr;
  trainOptions.beta1 = beta1;
  trainOptions.beta2 = beta2;
  trainOptions.eps = eps;
  trainOptions.weightDecay = weightDecay;
  trainOptions.momentum = momentum;
  if (!forwardOnly && !runPipeline([&](PassManager &pm) { fsdpc::buildTrainStepPipeline(pm, trainOptions); }))
    return 1;
  if (!forwardOnly && !finishStage("graph"))
    return emitStage == "graph" ? 0 : 1;
  fsdpc::ShardOptions shardOptions;
  shardOptions.wrap = wrapPolicy;
  shardOptions.strategy = strategy;
  shardOptions.worldSize = worldSize;
  shardOptions.shardGroupSize = shardGroupSize;
  shardOptions.prefetch = prefetch;
  shardOptions.reduceDtype = reduceDtype == mixedPrecision ? "low" : "f32";
  if (!forwardOnly && !runPipeline([&](PassManager &pm) { fsdpc::buildShardPipeline(pm, shardOptions); }))
    return 1;
  if (!forwardOnly && !finishStage("fsdp"))
    return emitStage == "fsdp" ? 0 : 1;

  if (!forwardOnly && !runPipeline([&](PassManager &pm) { fsdpc::buildLowerToPlanPipeline(pm, planOptions); }))
    return 1;
  if (!finishStage("plan"))
    return emitStage == "plan" ? 0 : 1;

  if (printReport || !reportJson.empty()) {
    std::optional<fsdpc::MemoryReport> report = fsdpc::buildMemoryReport(module, error);
    if (!report)
      return fail(error);
    if (printReport)
      fsdpc::printMemoryReport(*report, llvm::outs());
    if (!reportJson.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream out(reportJson, ec);
      if (ec)
        return fail("cannot write --report-json file '" + reportJson + "': " + ec.message());
      fsdpc::printMemoryReportJson(*report, out);
    }
  }
  if (outputPath.empty())
    return 0;
  std::optional<fsdpc::runtime::PlanFile> plan = fsdpc::buildPlanFile(module, imported->weights, error);
  if (!plan)
    return fail(error);
  fsdpc::runtime::Status written = fsdpc::runtime::writePlanFile(*plan, outputPath);
  if (!written.isOk())
    return fail(written.toString());
  llvm::outs() << "fsdpc: wrote " << outputPath << ": " << fsdpc::runtime::countTrainableParameters(plan->header)
               << " trainable parameters, "
               << plan->header.instructions_size() << " instructions, "
               << llvm::formatv("{0:F1}", (plan->header.persistent_bytes() + plan->header.transient_bytes()) / 1048576.0)
               << " MiB tensor memory per rank\n";
  return 0;
}
