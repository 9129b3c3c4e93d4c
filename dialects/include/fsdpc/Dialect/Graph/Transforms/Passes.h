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
/// Whether result `result` of `func` rewrites a graph.buffer argument.
bool isBufferUpdate(mlir::func::FuncOp func, unsigned result);
/// Appends `func`'s buffer updates with their attributes: every pass that
/// rebuilds the step's results keeps them after its own.
void appendBufferUpdates(mlir::func::FuncOp func, llvm::SmallVectorImpl<mlir::Value> &values,
                         llvm::SmallVectorImpl<mlir::DictionaryAttr> &attrs);

/// Where an op of @train_step runs: micro-batch m's forward is phase 2m,
/// its backward 2m + 1. Without gradient accumulation there is one
/// micro-batch: forward is everything up to the op computing the loss, and
/// backward the rest. graph-accumulate marks each micro-batch's loss op
/// (`graph.micro_loss`) and first op (`graph.micro_batch`); the phase of an
/// op, also one inserted later, follows from its position among those.
class StepPhases {
public:
  explicit StepPhases(mlir::func::FuncOp train);
  int64_t phaseOf(mlir::Operation *op) const;
  bool isForward(mlir::Operation *op) const { return phaseOf(op) % 2 == 0; }
  int64_t microBatchOf(mlir::Operation *op) const { return phaseOf(op) / 2; }

private:
  llvm::SmallVector<mlir::Operation *> losses_; // each micro-batch's loss op, in order
  llvm::SmallVector<mlir::Operation *> starts_; // the first op of micro-batches 1, 2, ...
};

} // namespace fsdpc::graph

#endif // FSDPC_DIALECT_GRAPH_TRANSFORMS_PASSES_H
