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
cl::opt<bool> listOps("list-ops",
                      cl::desc("print the supported ONNX ops, each with the first opset it applies to and what it "
                               "does not cover"),
                      cl::cat(category));
cl::opt<bool> listUnsupportedOps("list-unsupported-ops",
                                 cl::desc("print the ONNX ops (of the default domain, up to opset 21) that fsdpc "
                                          "does not import"),
                                 cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("write the plan to this file"), cl::value_desc("plan.bin"),
                                cl::cat(category));
cl::opt<std::string> emitStage("emit", cl::desc("print the IR of a stage to stdout: import, graph, fsdp or plan"),
                               cl::value_desc("stage"), cl::cat(category));
cl::opt<std::string> dumpDir("dump-ir", cl::desc("write the IR of every stage into this directory"),
                             cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> lossKind("loss",
                              cl::desc("cross_entropy, mse, output:NAME, or a weighted sum of losses of named "
                                       "outputs such as '(cross_entropy(start_logits, start_positions) + "
                                       "cross_entropy(end_logits, end_positions)) / 2' (default: output if "
                                       "the model returns a scalar, else cross_entropy)"),
                              cl::init("auto"), cl::cat(category));
cl::opt<std::string> lossMean("loss-mean",
                              cl::desc("local (default): a cross entropy is the mean over the labels of each rank's "
                                       "micro-batch, as a torch loop under DDP or FSDP; global: over the labels of "
                                       "the whole step, every rank and micro-batch, as transformers' Trainer "
                                       "(labels of -100 left out either way)"),
                              cl::init("local"), cl::cat(category));
cl::opt<std::string> optimizer("optimizer", cl::desc("adamw or sgd"), cl::init("adamw"), cl::cat(category));
cl::opt<double> lr("lr", cl::desc("learning rate"), cl::init(1e-3), cl::cat(category));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(0.0), cl::cat(category));
cl::opt<double> weightDecay("weight-decay", cl::desc("weight decay (default: adamw 0.01, sgd 0)"), cl::init(-1.0),
                            cl::cat(category));
cl::opt<std::string> betas("betas", cl::desc("AdamW betas as B1,B2"), cl::init("0.9,0.999"), cl::cat(category));
cl::opt<std::string> lrSchedule("lr-schedule",
                                cl::desc("constant (default), linear or cosine: each step's learning rate as "
                                         "transformers' get_*_schedule_with_warmup gives it, --lr its peak"),
                                cl::init("constant"), cl::cat(category));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("steps of linear warm-up from 0 to --lr (default 0)"),
                             cl::init(0), cl::cat(category));
cl::opt<int64_t> totalSteps("total-steps", cl::desc("steps over which linear and cosine schedules decay"),
                            cl::init(0), cl::cat(category));
cl::opt<double> minLr("min-lr", cl::desc("where linear and cosine schedules end (default 0)"), cl::init(0.0),
                      cl::cat(category));
cl::opt<double> eps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8), cl::cat(category));
cl::opt<int64_t> batchSize("batch-size", cl::desc("global batch when the model's batch dimension is symbolic"),
                           cl::init(0), cl::cat(category));
cl::list<std::string> namedDimensions("dim",
                                      cl::desc("NAME=SIZE: size a symbolic dimension of the inputs by its name, such "
                                               "as an export's sequence_length (repeat, or separate with commas)"),
                                      cl::CommaSeparated, cl::cat(category));
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
cl::opt<int64_t> maxInflightGathers("max-inflight-gathers",
                                    cl::desc("units gathered at once (FSDP's limit_all_gathers): 1 issues each "
                                             "gather just before its unit, K > 1 issues it K - 1 units early "
                                             "(default 2)"),
                                    cl::init(2), cl::cat(category));
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
cl::opt<std::string> recompute("recompute",
                               cl::desc("activation checkpointing: none (default), units:REGEX (replay those units' "
                                        "forward before their backward), cheap:REGEX (keep GEMM and attention "
                                        "outputs, replay the rest), or auto (the least that fits --memory-budget)"),
                               cl::init("none"), cl::cat(category));
cl::opt<std::string> memoryBudget("memory-budget",
                                  cl::desc("tensor memory per rank that --recompute auto must fit, in bytes with an "
                                           "optional K, M or G suffix (powers of 1024)"),
                                  cl::value_desc("bytes"), cl::cat(category));
cl::opt<int64_t> gradAccum("grad-accum",
                           cl::desc("gradient accumulation: K micro-batches of forward and backward per optimizer "
                                    "step, each of --batch-size samples (default 1); equal to one step on a batch "
                                    "K times larger, with one micro-batch's activations in memory"),
                           cl::value_desc("K"), cl::init(1), cl::cat(category));
cl::opt<std::string> accumReduce("accum-reduce",
                                 cl::desc("with --grad-accum: last (default; sum the gradients locally and reduce "
                                          "once, FSDP's no_sync) or each (reduce every micro-batch's gradients and "
                                          "sum the shards)"),
                                 cl::init("last"), cl::cat(category));
cl::opt<double> clipGradNorm("clip-grad-norm",
                             cl::desc("clip the gradients to this global L2 norm over every shard and rank before "
                                      "the optimizer, as torch.nn.utils.clip_grad_norm_ / FSDP's clip_grad_norm_ "
                                      "(default 0: no clipping); the norm before clipping is in the metrics"),
                             cl::value_desc("norm"), cl::init(0.0), cl::cat(category));
cl::opt<std::string> bucketBytes("bucket-bytes",
                                 cl::desc("issue the collectives of consecutive small units as one message while "
                                          "their full tensors add up to at most this many bytes (K, M or G suffix; "
                                          "default 0: one collective per unit)"),
                                 cl::value_desc("bytes"), cl::cat(category));
cl::opt<std::string> offload("offload",
                             cl::desc("what a GPU keeps in pinned host memory (FSDP CPUOffload): none (default), "
                                      "optimizer (optimizer-state shards) or params (parameter, gradient and "
                                      "optimizer-state shards): plan-offload marks them host, runs the optimizer "
                                      "step on the host and stages copies between host and device"),
                             cl::init("none"), cl::cat(category));
cl::opt<bool> noWeights("no-weights",
                        cl::desc("leave the parameter values out of the plan (fsdp-run --init-from FILE or --init "
                                 "normal:STD,SEED provides them): a plan for a large model stays small"),
                        cl::cat(category));
cl::opt<std::string> freezeRegex("freeze", cl::desc("do not train parameters whose name matches this regex"),
                                 cl::value_desc("regex"), cl::cat(category));

int fail(const llvm::Twine &message) {
  llvm::errs() << "fsdpc: error: " << message << "\n";
  return 1;
}

bool parseDouble(llvm::StringRef text, double &value) { return !text.trim().getAsDouble(value); }

/// "2G", "1536M", "800K", "1000000": bytes (K, M, G are powers of 1024; a
/// fraction such as 1.5G is allowed). False if malformed or not positive.
bool parseBytes(llvm::StringRef text, int64_t &bytes) {
  text = text.trim();
  double scale = 1;
  if (!text.empty()) {
    switch (text.back() & ~0x20) { // upper case
    case 'K':
      scale = 1024.0;
      break;
    case 'M':
      scale = 1024.0 * 1024;
      break;
    case 'G':
      scale = 1024.0 * 1024 * 1024;
      break;
    default:
      break;
    }
    if (scale != 1)
      text = text.drop_back();
  }
  double value;
  if (text.empty() || text.getAsDouble(value) || !(value > 0) || value * scale > 9.0e18)
    return false;
  bytes = static_cast<int64_t>(value * scale);
  return bytes > 0;
}

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
    for (const fsdpc::SupportedOnnxOp &op : fsdpc::supportedOnnxOps())
      llvm::outs() << op.opType << " " << op.sinceVersion << (op.limits.empty() ? "" : " -- " + op.limits) << "\n";
    return 0;
  }
  if (listUnsupportedOps) {
    for (const std::string &op : fsdpc::unsupportedOnnxOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  if (inputPath.empty())
    return fail("no model given: fsdpc MODEL.onnx ...");
  static const llvm::StringRef stages[] = {"import", "graph", "fsdp", "plan"};
  if (!emitStage.empty() && !llvm::is_contained(stages, emitStage))
    return fail("--emit=" + emitStage + " is not a stage (import, graph, fsdp, plan)");
  if (emitStage.empty() && outputPath.empty() && dumpDir.empty() && !printReport && reportJson.empty())
    return fail("nothing to do: pass -o plan.bin, --emit=STAGE, --dump-ir DIR or --report");
  auto [beta1Text, beta2Text] = llvm::StringRef(betas).split(',');
  double beta1, beta2;
  if (!parseDouble(beta1Text, beta1) || !parseDouble(beta2Text, beta2))
    return fail("--betas expects B1,B2 with both in [0, 1), got '" + betas + "'");
  if (batchSize < 0)
    return fail("--batch-size must be positive");
  fsdpc::CompileOptions options;
  options.fuse = fuse;
  options.loss = lossKind;
  options.lossMean = lossMean;
  options.optimizer = optimizer;
  options.lr = lr;
  options.beta1 = beta1;
  options.beta2 = beta2;
  options.eps = eps;
  options.weightDecay = weightDecay;
  options.momentum = momentum;
  options.lrSchedule = lrSchedule;
  options.warmupSteps = warmupSteps;
  options.totalSteps = totalSteps;
  options.minLr = minLr;
  options.mixedPrecision = mixedPrecision;
  options.keepFp32 = keepFp32;
  options.wrap = wrapPolicy;
  options.strategy = strategy;
  options.worldSize = worldSize;
  options.shardGroupSize = shardGroupSize;
  options.prefetch = prefetch;
  options.maxInflightGathers = maxInflightGathers;
  options.reduceDtype = reduceDtype;
  options.forwardOnly = forwardOnly;
  options.recompute = recompute;
  options.clipGradNorm = clipGradNorm;
  options.gradAccum = gradAccum;
  options.accumReduce = accumReduce;
  options.offload = offload;
  if (!memoryBudget.empty()) {
    int64_t budget;
    if (!parseBytes(memoryBudget, budget))
      return fail("--memory-budget expects bytes with an optional K, M or G suffix, got '" + memoryBudget + "'");
    options.memoryBudget = budget;
  }
  if (!bucketBytes.empty() && llvm::StringRef(bucketBytes).trim() != "0") {
    int64_t bytes;
    if (!parseBytes(bucketBytes, bytes))
      return fail("--bucket-bytes expects bytes with an optional K, M or G suffix, got '" + bucketBytes + "'");
    options.bucketBytes = bytes;
  }
  if (std::string invalid = fsdpc::validateCompileOptions(options); !invalid.empty())
    return fail(invalid);
  const std::string offloaded = offload == "none" ? "" : std::string(offload);
  const std::vector<fsdpc::CompileStage> compileStages = fsdpc::compileStages(options);
  if (!emitStage.empty() && emitStage != "import" &&
      llvm::none_of(compileStages, [&](const fsdpc::CompileStage &stage) { return stage.name == emitStage; }))
    return fail("--forward-only has no " + emitStage + " stage (import, plan)");

  DialectRegistry registry;
  fsdpc::registerFsdpcDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  fsdpc::registerFsdpcPassesAndPipelines();

  // Pass errors and warnings name the model file and the ONNX node they
  // came from.
  ScopedDiagnosticHandler diagnostics(&context, [&](Diagnostic &diag) {
    bool error = diag.getSeverity() == DiagnosticSeverity::Error;
    if (!error && diag.getSeverity() != DiagnosticSeverity::Warning)
      return success();
    std::string node;
    if (auto name = dyn_cast<NameLoc>(diag.getLocation()))
      node = " (at ONNX node '" + name.getName().str() + "')";
    llvm::errs() << "fsdpc: " << (error ? "error: " : "warning: ") << inputPath << ": " << diag.str() << node << "\n";
    return success();
  });

  fsdpc::ImportOptions importOptions;
  importOptions.batchSize = batchSize;
  importOptions.freezeRegex = freezeRegex;
  importOptions.worldSize = worldSize;
  for (const std::string &entry : namedDimensions) {
    auto [name, sizeText] = llvm::StringRef(entry).split('=');
    int64_t size = 0;
    if (name.trim().empty() || sizeText.trim().getAsInteger(10, size) || size <= 0)
      return fail("--dim expects NAME=SIZE with a positive size, got '" + entry + "'");
    if (llvm::any_of(importOptions.namedDimensions, [&](const auto &named) { return named.first == name.trim(); }))
      return fail("--dim names '" + name.trim().str() + "' twice");
    importOptions.namedDimensions.emplace_back(name.trim().str(), size);
  }
  std::string error;
  std::optional<fsdpc::ImportedModel> imported = fsdpc::importOnnxModel(context, inputPath, importOptions, error);
  if (!imported)
    return fail(error);
  for (const std::string &warning : imported->warnings)
    llvm::errs() << "fsdpc: warning: " << warning << "\n";
  ModuleOp module = *imported->module;

  auto finishStage = [&](llvm::StringRef stage) -> bool {
    if (!dumpDir.empty()) {
      if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir)) {
        fail("cannot create --dump-ir directory '" + dumpDir + "': " + ec.message());
        return false;
      }
      llvm::SmallString<256> path(dumpDir);
      llvm::sys::path::append(path, llvm::formatv("{0:02}-{1}.mlir", fsdpc::stageNumber(stage), stage).str());
      std::error_code ec;
      llvm::raw_fd_ostream out(path, ec);
      if (ec) {
        fail("cannot write '" + path + "': " + ec.message());
        return false;
      }
      module.print(out);
    }
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
  // The pipeline's stages, each followed by its dump (Pipelines.h).
  for (const fsdpc::CompileStage &stage : compileStages) {
    // --recompute auto: settled on the graph stage's result, before the
    // fsdp stage runs with it (the stages read `options` when they run).
    if (stage.name == "fsdp" && options.recompute == "auto") {
      int64_t peak = 0;
      std::string chosen = fsdpc::chooseRecomputePolicy(module, options, error, &peak);
      if (chosen.empty())
        return fail(error);
      llvm::outs() << llvm::formatv("fsdpc: --recompute auto: {0} (predicted peak {1:F1} MiB, budget {2:F1} MiB)\n",
                                    chosen, peak / 1048576.0, options.memoryBudget / 1048576.0);
      options.recompute = chosen;
    }
    if (!runPipeline(stage.build))
      return 1;
    if (!finishStage(stage.name))
      return emitStage == stage.name ? 0 : 1;
  }

  if (printReport || !reportJson.empty()) {
    std::optional<fsdpc::MemoryReport> report = fsdpc::buildMemoryReport(module, error);
    if (!report)
      return fail(error);
    report->offload = offloaded;
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
  std::optional<fsdpc::runtime::PlanFile> plan = fsdpc::buildPlanFile(module, imported->weights, error, !noWeights);
  if (!plan)
    return fail(error);
  plan->header.set_offload(offloaded);
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
