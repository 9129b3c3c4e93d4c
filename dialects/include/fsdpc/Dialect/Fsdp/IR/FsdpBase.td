//===- FsdpBase.td - The fsdp dialect ----------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_FSDP_FSDPBASE_TD
#define FSDPC_DIALECT_FSDP_FSDPBASE_TD

include "mlir/IR/OpBase.td"
include "fsdpc/Dialect/SignedAttrs.td"
include "mlir/IR/EnumAttr.td"
include "fsdpc/Dialect/SharedEnums.td"

def Fsdp_Dialect : Dialect {
  let name = "fsdp";
  let cppNamespace = "::fsdpc::fsdp";
  let summary = "Sharding units and the collectives of fully sharded data parallelism";
  let description = [{
    What PyTorch FSDP does at run time with hooks, as IR: `fsdp.unit`
    declares a group of parameters that is flattened, padded and sharded
    together; `fsdp.all_gather` materialises a unit's full flat parameter
    from the shards, `fsdp.free` ends the life of a gathered parameter,
    `fsdp.reduce_scatter` turns full gradients into gradient shards and
    `fsdp.all_reduce` averages replicated gradients (DDP, and across groups
    in hybrid sharding).

    Collectives act on a group of ranks: `group_size` consecutive ranks
    (`group_stride = 1`) or every `group_stride`-th rank (the replica groups
    of hybrid sharding).
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Fsdp_Op<string mnemonic, list<Trait> traits = []> :
    Op<Fsdp_Dialect, mnemonic, traits>;

// A flat parameter, gradient or state: f32, or bf16 / f16 where mixed
// precision gathers parameters or reduces gradients in low precision.
def Fsdp_FlatTensor : 1DTensorOf<[F32, BF16, F16]>;

// Enums in attribute dictionaries are dialect attributes: `#fsdp.reduction<avg>`.
// The attribute class is the dialect's (fsdp::ReductionAttr), whatever the
// enum's namespace (the shared ones are in ::fsdpc).
class Fsdp_EnumAttr<EnumAttrInfo info, string mnemonic> : EnumAttr<Fsdp_Dialect, info, mnemonic> {
  let cppNamespace = "::fsdpc::fsdp";
  let assemblyFormat = "`<` $value `>`";
}

// The reduction and strategy enums are shared with the plan dialect.
def Fsdp_ReductionAttr : Fsdp_EnumAttr<Fsdpc_Reduction, "reduction">;
def Fsdp_StrategyAttr : Fsdp_EnumAttr<Fsdpc_Strategy, "strategy">;

#endif // FSDPC_DIALECT_FSDP_FSDPBASE_TD
