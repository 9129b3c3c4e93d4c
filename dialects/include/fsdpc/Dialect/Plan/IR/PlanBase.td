//===- PlanBase.td - The plan dialect ----------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_PLAN_PLANBASE_TD
#define FSDPC_DIALECT_PLAN_PLANBASE_TD

include "mlir/IR/OpBase.td"
include "fsdpc/Dialect/SignedAttrs.td"
include "mlir/IR/EnumAttr.td"

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

def Plan_TensorKind : I32EnumAttr<"TensorKind", "what a plan tensor holds", [
  I32EnumAttrCase<"parameter", 1>,
  I32EnumAttrCase<"frozen_parameter", 2>,
  I32EnumAttrCase<"optimizer_state", 3>,
  I32EnumAttrCase<"constant", 4>,
  I32EnumAttrCase<"input", 5>,
  I32EnumAttrCase<"step_counter", 6>,
  I32EnumAttrCase<"transient", 7>,
  I32EnumAttrCase<"gradient", 8>,
  I32EnumAttrCase<"view", 9>,
  I32EnumAttrCase<"buffer", 10>
]> {
  let cppNamespace = "::fsdpc::plan_ir";
}

def Plan_Stream : I32EnumAttr<"Stream", "the stream an instruction runs on", [
  I32EnumAttrCase<"compute", 0>,
  I32EnumAttrCase<"communication", 1>
]> {
  let cppNamespace = "::fsdpc::plan_ir";
}

def Plan_CollectiveKind : I32EnumAttr<"CollectiveKind", "the collective a plan.collective runs", [
  I32EnumAttrCase<"all_gather", 0>,
  I32EnumAttrCase<"reduce_scatter", 1>,
  I32EnumAttrCase<"all_reduce", 2>
]> {
  let cppNamespace = "::fsdpc::plan_ir";
}

// The enums below appear in attribute dictionaries, so they are dialect
// attributes (`#plan.reduction<avg>`), not bare integers.
class Plan_EnumAttr<EnumAttrInfo info, string mnemonic> : EnumAttr<Plan_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

def Plan_Reduction : I32EnumAttr<"Reduction", "how a collective combines the ranks' tensors", [
  I32EnumAttrCase<"sum", 0>,
  I32EnumAttrCase<"avg", 1>
]> {
  let cppNamespace = "::fsdpc::plan_ir";
  let genSpecializedAttr = 0;
}
def Plan_ReductionAttr : Plan_EnumAttr<Plan_Reduction, "reduction">;

def Plan_LossKind : I32EnumAttr<"LossKind", "the loss a training step ends in", [
  I32EnumAttrCase<"cross_entropy", 0>,
  I32EnumAttrCase<"mse", 1>,
  I32EnumAttrCase<"output", 2>
]> {
  let cppNamespace = "::fsdpc::plan_ir";
  let genSpecializedAttr = 0;
}
def Plan_LossKindAttr : Plan_EnumAttr<Plan_LossKind, "loss_kind">;

def Plan_Strategy : I32EnumAttr<"Strategy", "the sharding strategy, as PyTorch FSDP names it", [
  I32EnumAttrCase<"full_shard", 0>,
  I32EnumAttrCase<"shard_grad_op", 1>,
  I32EnumAttrCase<"no_shard", 2>,
  I32EnumAttrCase<"hybrid_shard", 3>
]> {
  let cppNamespace = "::fsdpc::plan_ir";
  let genSpecializedAttr = 0;
}
def Plan_StrategyAttr : Plan_EnumAttr<Plan_Strategy, "strategy">;

#endif // FSDPC_DIALECT_PLAN_PLANBASE_TD
