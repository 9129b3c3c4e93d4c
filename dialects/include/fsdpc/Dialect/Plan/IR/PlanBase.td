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

#endif // FSDPC_DIALECT_PLAN_PLANBASE_TD
