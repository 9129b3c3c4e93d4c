//===- Lifetimes.h - When each transient tensor is live ---------*- C++ -*-===//
//
// The instructions of a plan.program in program order, and for every
// transient tensor (activations, gathered units, flat gradients, inputs)
// the first and last instruction that touch its bytes. plan-allocate packs
// the arena from these intervals; the memory report adds them up after
// every instruction for its timeline. One computation, so the two agree.
//
// A view's uses are its storage's. A collective or copy on the communication
// stream keeps its tensors live until the compute stream waits for its
// record. Host tensors are not in the arena and have no interval. The
// loss, the gradient norm and the outputs stay live to the end (they are
// read after the step);
// inputs are live from before the first instruction.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_DIALECT_PLAN_IR_LIFETIMES_H
#define FSDPC_DIALECT_PLAN_IR_LIFETIMES_H

#include "fsdpc/Dialect/Plan/IR/PlanOps.h"

#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace fsdpc::plan_ir {

struct TensorLifetime {
  TensorOp tensor;
  int64_t bytes;
  int64_t first; // index of the first instruction touching it (-1: before the first)
  int64_t last;  // index of the last (the instruction count: read after the step)
};

struct ProgramLifetimes {
  std::vector<mlir::Operation *> instructions; // every op but plan.tensor and plan.unit, in order
  std::vector<TensorLifetime> transients;      // in the order of their plan.tensor ops
};

ProgramLifetimes computeLifetimes(ProgramOp program);

/// The tensor that owns `tensor`'s bytes (itself unless a view; through
/// views of views, `tensors` mapping names to plan.tensor ops), and the
/// byte offset of `tensor` in it. The verifier has checked every base
/// exists; a chain deeper than 64 stops there.
std::pair<TensorOp, int64_t> storageOf(TensorOp tensor, const llvm::StringMap<TensorOp> &tensors);

/// How many of a training step's first instructions its forward pass is,
/// from the instructions as they stand (after every pass that inserts some,
/// such as plan-offload's copies), -1 where there is none:
/// - `loss`: up to the first instruction that writes the program's
///   forward_loss, the prefix an evaluation pass runs;
/// - `output`: up to the last instruction before that one that writes the
///   bytes of the forward_output, the prefix `fsdp-run --forward` runs. The
///   loss instruction may overwrite them: softmax_cross_entropy_with_grad
///   writes the logits' gradient over the logits.
struct ForwardPrefix {
  int64_t loss = -1, output = -1;
};
ForwardPrefix forwardPrefix(ProgramOp program);

} // namespace fsdpc::plan_ir

#endif // FSDPC_DIALECT_PLAN_IR_LIFETIMES_H
