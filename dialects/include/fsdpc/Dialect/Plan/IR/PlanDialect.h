//===- PlanDialect.h - The plan dialect -------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_PLAN_IR_PLANDIALECT_H
#define FSDPC_DIALECT_PLAN_IR_PLANDIALECT_H

#include "mlir/IR/Dialect.h"

#include "fsdpc/Dialect/Plan/IR/PlanOpsDialect.h.inc"

#endif // FSDPC_DIALECT_PLAN_IR_PLANDIALECT_H
