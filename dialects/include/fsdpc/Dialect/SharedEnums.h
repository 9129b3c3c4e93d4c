//===- SharedEnums.h - enums of more than one dialect -----------*- C++ -*-===//
//
// fsdpc::Reduction and fsdpc::Strategy, shared by the fsdp and plan
// dialects (SharedEnums.td).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_DIALECT_SHAREDENUMS_H
#define FSDPC_DIALECT_SHAREDENUMS_H

#include "mlir/IR/Attributes.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

#include "fsdpc/Dialect/SharedEnums.h.inc"

#endif // FSDPC_DIALECT_SHAREDENUMS_H
