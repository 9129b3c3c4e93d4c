//===- Passes.h - graph dialect passes --------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_GRAPH_TRANSFORMS_PASSES_H
#define FSDPC_DIALECT_GRAPH_TRANSFORMS_PASSES_H

#include "fsdpc/Dialect/Graph/IR/GraphOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace fsdpc::graph {

#define GEN_PASS_DECL
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdpc/Dialect/Graph/Transforms/Passes.h.inc"

/// The gradient rule of `op`: given the gradients of its results (null for a
/// result the loss does not depend on), sets `operandGrads[i]` to the
/// gradient of operand i where `needsGrad[i]`, null elsewhere. Fails, with an
/// error at the op, for an op without a rule.
mlir::LogicalResult buildGradient(mlir::OpBuilder &builder, mlir::Operation *op,
                                  llvm::ArrayRef<mlir::Value> resultGrads, llvm::ArrayRef<bool> needsGrad,
                                  llvm::SmallVectorImpl<mlir::Value> &operandGrads);

//===----------------------------------------------------------------------===//
// Helpers shared by the training-step passes
//===----------------------------------------------------------------------===//

/// The function `name` of `module`, or null after emitting an error that
/// names `pass`.
mlir::func::FuncOp lookupFunction(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef pass);

/// Replaces the function's return values (and its result types) by `values`,
/// each with its result attributes.
void setReturnedValues(mlir::func::FuncOp func, llvm::ArrayRef<mlir::Value> values,
                       llvm::ArrayRef<mlir::DictionaryAttr> attrs);

/// Appends an argument with the given attributes and returns it.
mlir::BlockArgument appendArgument(mlir::func::FuncOp func, mlir::Type type, mlir::DictionaryAttr attrs);

/// An op's own attributes: not the dialect-prefixed annotations passes attach
/// (such as `fsdp.uses`). They are an optimizer update's hyperparameters and
/// a kernel's parameters.
llvm::SmallVector<mlir::NamedAttribute> ownAttributes(mlir::Operation *op);

/// The index of the first result carrying `attrName`, or -1.
int findResultWithAttr(mlir::func::FuncOp func, llvm::StringRef attrName);

} // namespace fsdpc::graph

#endif // FSDPC_DIALECT_GRAPH_TRANSFORMS_PASSES_H
