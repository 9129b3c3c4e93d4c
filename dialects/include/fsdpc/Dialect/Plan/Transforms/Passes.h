//===- Passes.h - plan dialect passes ---------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_PLAN_TRANSFORMS_PASSES_H
#define FSDPC_DIALECT_PLAN_TRANSFORMS_PASSES_H

#include "fsdpc/Dialect/Plan/IR/PlanOps.h"
#include "mlir/Pass/Pass.h"

namespace fsdpc::plan_ir {

#define GEN_PASS_DECL
#include "fsdpc/Dialect/Plan/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdpc/Dialect/Plan/Transforms/Passes.h.inc"

} // namespace fsdpc::plan_ir

#endif // FSDPC_DIALECT_PLAN_TRANSFORMS_PASSES_H
