//===- Passes.td - plan dialect passes ---------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_PLAN_TRANSFORMS_PASSES_TD
#define FSDPC_DIALECT_PLAN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanAllocate : Pass<"plan-allocate", "::fsdpc::plan_ir::ProgramOp"> {
  let summary = "assign every tensor a byte offset: static memory planning";
  let description = [{
    Persistent tensors (parameters, optimizer state, constants, the step
    counter) are laid out one after another. Inputs and transient tensors
    share the transient arena: each lives from the first instruction that
    touches it to the last (inputs from the start of the step, the loss to
    its end), and tensors whose lifetimes are disjoint may share bytes. They
    are placed largest first at the lowest 64-byte-aligned offset that
    overlaps no placed tensor alive at the same time. Sets
    `persistent_bytes` and `transient_bytes` on the program.
  }];
}

#endif // FSDPC_DIALECT_PLAN_TRANSFORMS_PASSES_TD
