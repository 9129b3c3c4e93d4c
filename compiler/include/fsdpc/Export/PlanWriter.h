//===- PlanWriter.h - plan.program to plan.bin ------------------*- C++ -*-===//
#ifndef FSDPC_EXPORT_PLANWRITER_H
#define FSDPC_EXPORT_PLANWRITER_H

#include "fsdpc/Import/WeightStore.h"
#include "fsdpc/runtime/PlanFile.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace fsdpc {

/// The ONNX node names behind an instruction ("a,b" for a fused one), as
/// plans record them for error messages and traces.
std::string onnxNodeNames(mlir::Location loc);

/// Serialises the allocated `plan.program` of `module` 1:1 into a PlanFile:
/// tensors in declaration order, instructions in program order, parameter
/// values from `weights`, constant values from the IR. Sets `error` and
/// returns nothing if the program is not allocated or a value is missing.
/// With `includeWeights` false, parameter values are left out (a
/// --no-weights plan: fsdp-run fills them with --init-from or --init).
std::optional<runtime::PlanFile> buildPlanFile(mlir::ModuleOp module, const WeightStore &weights, std::string &error,
                                               bool includeWeights = true);

} // namespace fsdpc

#endif // FSDPC_EXPORT_PLANWRITER_H
