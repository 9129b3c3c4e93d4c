//===- fsdp-opt.cpp - mlir-opt with the fsdpc dialects and passes ---------===//
#include "fsdpc/Pipelines/Pipelines.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  fsdpc::registerFsdpcDialects(registry);
  fsdpc::registerFsdpcPassesAndPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "fsdpc optimizer driver\n", registry));
}
