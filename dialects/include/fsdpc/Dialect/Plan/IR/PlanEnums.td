//===- PlanEnums.td - The plan dialect's own enums ----------*- tablegen -*-===//
//
// Apart from PlanBase.td so that -gen-enum-decls sees these and not the
// shared enums (fsdpc/Dialect/SharedEnums.td) the dialect also wraps.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_DIALECT_PLAN_PLANENUMS_TD
#define FSDPC_DIALECT_PLAN_PLANENUMS_TD

include "mlir/IR/EnumAttr.td"

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
  I32EnumAttrCase<"buffer", 10>,
  I32EnumAttrCase<"label_count", 11>
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

def Plan_LossKind : I32EnumAttr<"LossKind", "the loss a training step ends in", [
  I32EnumAttrCase<"cross_entropy", 0>,
  I32EnumAttrCase<"mse", 1>,
  I32EnumAttrCase<"output", 2>,
  I32EnumAttrCase<"combined", 3>
]> {
  let cppNamespace = "::fsdpc::plan_ir";
  let genSpecializedAttr = 0;
}

#endif // FSDPC_DIALECT_PLAN_PLANENUMS_TD
