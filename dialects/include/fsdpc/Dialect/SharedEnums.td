//===- SharedEnums.td - enums of more than one dialect -------*- tablegen -*-===//
//
// A reduction and a sharding strategy mean the same in the fsdp dialect,
// where the sharding pass chooses them, and in the plan dialect, which
// carries them to the runtime: one C++ enum each, in ::fsdpc, so that
// convert-graph-to-plan passes them on as they are. Each dialect wraps them
// in its own attribute (`#fsdp.reduction<avg>`, `#plan.reduction<avg>`).
//
// Generated once (SharedEnums.h.inc, the FsdpcSharedEnums library): a
// dialect's own enums are generated from a file that does not include this
// one, since -gen-enum-decls emits every enum it sees.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPC_DIALECT_SHAREDENUMS_TD
#define FSDPC_DIALECT_SHAREDENUMS_TD

include "mlir/IR/EnumAttr.td"

def Fsdpc_Reduction : I32EnumAttr<"Reduction", "how a collective combines the ranks' tensors", [
  I32EnumAttrCase<"sum", 0>,
  I32EnumAttrCase<"avg", 1>
]> {
  let cppNamespace = "::fsdpc";
  let genSpecializedAttr = 0;
}

def Fsdpc_Strategy : I32EnumAttr<"Strategy", "the sharding strategy, as PyTorch FSDP names it", [
  I32EnumAttrCase<"full_shard", 0>,
  I32EnumAttrCase<"shard_grad_op", 1>,
  I32EnumAttrCase<"no_shard", 2>,
  I32EnumAttrCase<"hybrid_shard", 3>
]> {
  let cppNamespace = "::fsdpc";
  let genSpecializedAttr = 0;
}

#endif // FSDPC_DIALECT_SHAREDENUMS_TD
