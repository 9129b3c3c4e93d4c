//===- Passes.h - fsdp dialect passes ---------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_FSDP_TRANSFORMS_PASSES_H
#define FSDPC_DIALECT_FSDP_TRANSFORMS_PASSES_H

#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace fsdpc::fsdp {

#define GEN_PASS_DECL
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdpc/Dialect/Fsdp/Transforms/Passes.h.inc"

} // namespace fsdpc::fsdp

#endif // FSDPC_DIALECT_FSDP_TRANSFORMS_PASSES_H
