//===- GraphOps.h - graph dialect ops ---------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_GRAPH_IR_GRAPHOPS_H
#define FSDPC_DIALECT_GRAPH_IR_GRAPHOPS_H

#include "fsdpc/Dialect/Graph/IR/GraphDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace fsdpc::graph {
/// The numpy broadcast of two shapes, or failure if they do not broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);
} // namespace fsdpc::graph

#include "fsdpc/Dialect/Graph/IR/GraphEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "fsdpc/Dialect/Graph/IR/GraphAttrs.h.inc"

#define GET_OP_CLASSES
#include "fsdpc/Dialect/Graph/IR/GraphOps.h.inc"

#endif // FSDPC_DIALECT_GRAPH_IR_GRAPHOPS_H
