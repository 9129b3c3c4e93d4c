//===- Passes.h - conversion passes -----------------------------*- C++ -*-===//
#ifndef FSDPC_CONVERSION_PASSES_H
#define FSDPC_CONVERSION_PASSES_H

#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace fsdpc {

#define GEN_PASS_DECL
#include "fsdpc/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdpc/Conversion/Passes.h.inc"

} // namespace fsdpc

#endif // FSDPC_CONVERSION_PASSES_H
