//===- FsdpDialect.h - The fsdp dialect -------------------------*- C++ -*-===//
#ifndef FSDPC_DIALECT_FSDP_IR_FSDPDIALECT_H
#define FSDPC_DIALECT_FSDP_IR_FSDPDIALECT_H

#include "mlir/IR/Dialect.h"

#include "fsdpc/Dialect/Fsdp/IR/FsdpOpsDialect.h.inc"

namespace fsdpc::fsdp {

// Attributes the fsdp passes attach to @train_step and its module.
/// On a parameter argument: the unit it belongs to (fsdp-wrap).
inline constexpr llvm::StringLiteral kUnitAttr = "fsdp.unit";
/// On an op: the units whose parameters it reads (fsdp-wrap).
inline constexpr llvm::StringLiteral kUsesAttr = "fsdp.uses";
/// On an op: replayed in backward for this unit instead of kept (fsdp-recompute).
inline constexpr llvm::StringLiteral kRecomputeAttr = "fsdp.recompute";
/// On an argument: this rank's shard of the unit's flat parameter.
inline constexpr llvm::StringLiteral kShardOfAttr = "fsdp.shard_of";
/// On an argument: a shard of the unit's optimizer state (with graph.state_slot).
inline constexpr llvm::StringLiteral kStateShardOfAttr = "fsdp.state_shard_of";
/// On the module: the strategy, world size and shard group size fsdp-shard used.
inline constexpr llvm::StringLiteral kStrategyAttr = "fsdp.strategy";
inline constexpr llvm::StringLiteral kWorldSizeAttr = "fsdp.world_size";
inline constexpr llvm::StringLiteral kShardGroupSizeAttr = "fsdp.shard_group_size";

} // namespace fsdpc::fsdp

#endif // FSDPC_DIALECT_FSDP_IR_FSDPDIALECT_H
