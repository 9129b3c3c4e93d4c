//===- FsdpDialect.h - The fsdp dialect -------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_FSDP_IR_FSDPDIALECT_H
#define FSDPC_DIALECT_FSDP_IR_FSDPDIALECT_H

#include "mlir/IR/Dialect.h"

#include "fsdpc/Dialect/Fsdp/IR/FsdpOpsDialect.h.inc"

#endif // FSDPC_DIALECT_FSDP_IR_FSDPDIALECT_H
