//===- FsdpOps.h - fsdp dialect ops -----------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_FSDP_IR_FSDPOPS_H
#define FSDPC_DIALECT_FSDP_IR_FSDPOPS_H

#include "fsdpc/Dialect/Fsdp/IR/FsdpDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h.inc"

#endif // FSDPC_DIALECT_FSDP_IR_FSDPOPS_H
