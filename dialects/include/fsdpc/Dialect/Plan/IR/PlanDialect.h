//===- PlanDialect.h - The plan dialect -------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_PLAN_IR_PLANDIALECT_H
#define FSDPC_DIALECT_PLAN_IR_PLANDIALECT_H

#include "mlir/IR/Dialect.h"

#include "fsdpc/Dialect/Plan/IR/PlanOpsDialect.h.inc"

namespace fsdpc::plan_ir {

/// Whether a plan tensor may hold `type`: f32, bf16, f16, i64, i32 or i1.
bool isPlanElementType(mlir::Type type);
/// Bytes per element in a plan: i1 (bool) takes one byte.
int64_t elementBytes(mlir::Type type);

} // namespace fsdpc::plan_ir

#endif // FSDPC_DIALECT_PLAN_IR_PLANDIALECT_H
