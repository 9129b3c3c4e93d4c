//===- FuzzOnnx.cpp - libFuzzer target: the ONNX importer up to the plan ---===//
//
// Each input is an ONNX file: fsdpc imports it (libonnx's checker and shape
// inference behind our own checks), runs the whole training pipeline with
// default options and lowers it to a plan. Any input may be refused with an
// error; none may crash, leak or trip a sanitizer. A plan the compiler
// writes must pass the runtime's validator: a model that compiles into a
// plan fsdp-run refuses is a bug, and aborts here.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "fsdpc/Export/PlanWriter.h"
#include "fsdpc/Import/OnnxImporter.h"
#include "fsdpc/Pipelines/Pipelines.h"
#include "fsdpc/runtime/PlanFile.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fsdpc::registerFsdpcPassesAndPipelines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string path = writeFuzzInput(data, size, ".onnx");
  mlir::DialectRegistry registry;
  fsdpc::registerFsdpcDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  // Errors are the expected outcome for most inputs: swallowed.
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) { return mlir::success(); });

  fsdpc::ImportOptions importOptions;
  importOptions.batchSize = 2;
  std::string error;
  std::optional<fsdpc::ImportedModel> imported = fsdpc::importOnnxModel(context, path, importOptions, error);
  if (!imported)
    return 0;
  mlir::ModuleOp module = *imported->module;
  fsdpc::CompileOptions options;
  if (!fsdpc::validateCompileOptions(options).empty())
    return 0;
  for (const fsdpc::CompileStage &stage : fsdpc::compileStages(options)) {
    mlir::PassManager pm(&context);
    stage.build(pm);
    if (mlir::failed(pm.run(module)))
      return 0;
  }
  std::optional<fsdpc::runtime::PlanFile> plan = fsdpc::buildPlanFile(module, imported->weights, error, true);
  if (!plan)
    return 0;
  fsdpc::runtime::Status valid = fsdpc::runtime::validatePlan(*plan);
  if (!valid.isOk()) {
    std::fprintf(stderr, "fuzz-onnx: fsdpc wrote a plan the runtime refuses: %s\n", valid.toString().c_str());
    std::abort();
  }
  return 0;
}
