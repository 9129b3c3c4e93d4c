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

#include "fsdpc/Dialect/SharedEnums.h"
#define GET_ATTRDEF_CLASSES
#include "fsdpc/Dialect/Fsdp/IR/FsdpAttrs.h.inc"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "fsdpc/Dialect/Fsdp/IR/FsdpOps.h.inc"

#include <optional>

namespace fsdpc::fsdp {

/// What a collective (fsdp.all_gather, reduce_scatter or all_reduce) moves
/// and over which ranks: the members of an fsdp.bucket share all of it but
/// the unit and the tensor.
struct CollectiveShape {
  int64_t groupSize, groupStride;
  std::optional<Reduction> reduction; // none for a gather
  mlir::Type element;
  mlir::FlatSymbolRefAttr unit; // null for a step-wide all_reduce
  mlir::Value full;             // the unsharded tensor: gathered result, or reduced input
  /// Same group, reduction and element type (the op kinds are not compared).
  bool sharesGroupWith(const CollectiveShape &other) const {
    return groupSize == other.groupSize && groupStride == other.groupStride && reduction == other.reduction &&
           element == other.element;
  }
};

/// The shape of a collective, or nothing for another op.
std::optional<CollectiveShape> collectiveShapeOf(mlir::Operation *op);

} // namespace fsdpc::fsdp

#endif // FSDPC_DIALECT_FSDP_IR_FSDPOPS_H
