//===- PlanBase.td - The plan dialect ----------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_PLAN_PLANBASE_TD
#define FSDPC_DIALECT_PLAN_PLANBASE_TD

include "mlir/IR/OpBase.td"
include "fsdpc/Dialect/SignedAttrs.td"
include "mlir/IR/EnumAttr.td"
include "fsdpc/Dialect/SharedEnums.td"
include "fsdpc/Dialect/Plan/IR/PlanEnums.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::fsdpc::plan_ir";
  let summary = "The buffer-level executable form that serializes 1:1 into plan.bin";
  let description = [{
    A `plan.program` is what one rank executes per training step: a table of
    tensors (`plan.tensor`) with their kind, region and byte offset, and an
    ordered list of kernel calls, collectives and events. Every instruction
    names the stream it runs on, `compute` or `communication`; each stream
    runs its instructions in order, and `plan.record_event` /
    `plan.wait_event` order one stream after the other.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Plan_Op<string mnemonic, list<Trait> traits = []> :
    Op<Plan_Dialect, mnemonic, traits>;

// The plan dialect's own enums are in PlanEnums.td; reductions and
// strategies are shared with the fsdp dialect (SharedEnums.td).
// The enums below appear in attribute dictionaries, so they are dialect
// attributes (`#plan.reduction<avg>`), not bare integers.
// The attribute class is the dialect's (plan_ir::ReductionAttr), whatever
// the enum's namespace (the shared ones are in ::fsdpc).
class Plan_EnumAttr<EnumAttrInfo info, string mnemonic> : EnumAttr<Plan_Dialect, info, mnemonic> {
  let cppNamespace = "::fsdpc::plan_ir";
  let assemblyFormat = "`<` $value `>`";
}

def Plan_ReductionAttr : Plan_EnumAttr<Fsdpc_Reduction, "reduction">;
def Plan_LossKindAttr : Plan_EnumAttr<Plan_LossKind, "loss_kind">;
def Plan_StrategyAttr : Plan_EnumAttr<Fsdpc_Strategy, "strategy">;

#endif // FSDPC_DIALECT_PLAN_PLANBASE_TD
