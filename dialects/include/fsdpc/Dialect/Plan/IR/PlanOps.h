//===- PlanOps.h - plan dialect ops -----------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_PLAN_IR_PLANOPS_H
#define FSDPC_DIALECT_PLAN_IR_PLANOPS_H

#include "fsdpc/Dialect/Plan/IR/PlanDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"

#include "fsdpc/Dialect/Plan/IR/PlanEnums.h.inc"
#include "fsdpc/Dialect/SharedEnums.h"
#define GET_ATTRDEF_CLASSES
#include "fsdpc/Dialect/Plan/IR/PlanAttrs.h.inc"

#define GET_OP_CLASSES
#include "fsdpc/Dialect/Plan/IR/PlanOps.h.inc"

#endif // FSDPC_DIALECT_PLAN_IR_PLANOPS_H
