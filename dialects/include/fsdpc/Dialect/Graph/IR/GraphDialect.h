//===- GraphDialect.h - The graph dialect -----------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_GRAPH_IR_GRAPHDIALECT_H
#define FSDPC_DIALECT_GRAPH_IR_GRAPHDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "fsdpc/Dialect/Graph/IR/GraphOpsDialect.h.inc"

namespace fsdpc::graph {
// Names of the argument and result attributes of a graph function (see the
// dialect description).
inline constexpr llvm::StringLiteral kInputAttr = "graph.input";
/// On an input graph-append-loss added: labels a loss reads, which the
/// model itself does not (fsdp-run --forward needs no value for them).
inline constexpr llvm::StringLiteral kLabelAttr = "graph.label";
/// On an i64 scalar argument graph-append-loss added for --loss-mean global:
/// how many labels of the named labels input are not -100 over the whole
/// step (every rank and micro-batch), which the runtime counts with the
/// batch. Not an input: micro-batches do not slice it.
inline constexpr llvm::StringLiteral kLabelCountAttr = "graph.label_count";
inline constexpr llvm::StringLiteral kParamAttr = "graph.param";
inline constexpr llvm::StringLiteral kFrozenParamAttr = "graph.frozen_param";
/// A module buffer (BatchNorm's running statistics): held whole on every
/// rank, never trained, rewritten by a result marked graph.updates.
inline constexpr llvm::StringLiteral kBufferAttr = "graph.buffer";
/// On a parameter whose name does not say its module (a constant-folded
/// `onnx::` weight): the module it belongs to, for fsdp-wrap.
inline constexpr llvm::StringLiteral kModuleAttr = "graph.module";
inline constexpr llvm::StringLiteral kStateOfAttr = "graph.state_of";
inline constexpr llvm::StringLiteral kStateSlotAttr = "graph.state_slot";
inline constexpr llvm::StringLiteral kStepAttr = "graph.step";
inline constexpr llvm::StringLiteral kOutputAttr = "graph.output";
inline constexpr llvm::StringLiteral kLossAttr = "graph.loss";
/// The step's global gradient norm before clipping (fsdp-clip-grad-norm).
inline constexpr llvm::StringLiteral kGradNormAttr = "graph.grad_norm";
/// Gradient accumulation (graph-accumulate): a micro-batch's loss op, the
/// first op of micro-batch N (an i64), and the adds and the final scale
/// that sum a gradient over the micro-batches.
inline constexpr llvm::StringLiteral kMicroLossAttr = "graph.micro_loss";
inline constexpr llvm::StringLiteral kMicroBatchAttr = "graph.micro_batch";
inline constexpr llvm::StringLiteral kAccumulateAttr = "graph.accumulate";
inline constexpr llvm::StringLiteral kGradOfAttr = "graph.grad_of";
inline constexpr llvm::StringLiteral kUpdatesAttr = "graph.updates";
// Module attributes set by the importer and the training-step passes.
inline constexpr llvm::StringLiteral kOpsetAttr = "graph.opset";
inline constexpr llvm::StringLiteral kSourceAttr = "graph.source";
/// What the importer changed about the model's initializers (undoing
/// torch.onnx.export's rewrites), as [kind, name, source] triples:
/// "identity_copy" (parameter `name` was Identity(`source`)) and
/// "transposed_tie" (initializer `name` is the transpose of `source`). fsdp-run
/// --save-onnx reverses them.
inline constexpr llvm::StringLiteral kInitializerRewritesAttr = "graph.initializer_rewrites";
/// Parameters whose torch name the importer can prove, as [parameter, torch
/// name] pairs: a constant-folded Linear weight (`onnx::MatMul_N`, read once
/// as a MatMul's right operand in scope /a/b/) is torch's `a.b.weight`,
/// transposed. fsdp-run --save --torch-names writes them so.
inline constexpr llvm::StringLiteral kTorchNamesAttr = "graph.torch_names";
/// On the op of @train_step that computes the model's output (the loss's
/// prediction): the ONNX output's name, so that fsdp-run --forward can run
/// a training plan's forward pass and write it.
inline constexpr llvm::StringLiteral kPredictionAttr = "graph.prediction";
inline constexpr llvm::StringLiteral kLossKindAttr = "graph.loss_kind";
inline constexpr llvm::StringLiteral kNumClassesAttr = "graph.num_classes";
inline constexpr llvm::StringLiteral kOptimizerAttr = "graph.optimizer";
// Function names: the importer makes @forward, graph-append-loss @train_step.
inline constexpr llvm::StringLiteral kForwardFunc = "forward";
inline constexpr llvm::StringLiteral kTrainStepFunc = "train_step";
} // namespace fsdpc::graph

#endif // FSDPC_DIALECT_GRAPH_IR_GRAPHDIALECT_H
