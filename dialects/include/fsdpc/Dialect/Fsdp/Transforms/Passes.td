//===- Passes.td - fsdp dialect passes ---------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_FSDP_TRANSFORMS_PASSES_TD
#define FSDPC_DIALECT_FSDP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpWrap : Pass<"fsdp-wrap", "mlir::ModuleOp"> {
  let summary = "group the trainable parameters of @train_step into sharding units";
  let description = [{
    A parameter's module is its name without the last component
    (`blocks.3.attn.q.weight` is in `blocks.3.attn.q`). Policies, after
    PyTorch FSDP's auto-wrap policies:

    - `none`: one unit holds every trainable parameter.
    - `size:N` (`size_based_auto_wrap_policy(min_num_params=N)`): walking the
      parameters in model order, consecutive modules are grouped into a unit
      until it holds at least N parameters; a trailing group smaller than N
      goes to the root unit.
    - `module:REGEX` (`transformer_auto_wrap_policy`): one unit per module
      whose name fully matches REGEX (for a parameter, the innermost such
      prefix of its name); the others go to the root unit.

    Each unit becomes an `fsdp.unit` (its `padded_size` is its `flat_size`
    until fsdp-shard pads it). Each parameter argument gets `fsdp.unit =
    @name`, and every op that reads a parameter gets `fsdp.uses` with the
    units it reads. Frozen parameters stay outside units (replicated), as FSDP
    needs uniform `requires_grad` in a flat parameter.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"", "none, size:N or module:REGEX">
  ];
  let dependentDialects = ["::fsdpc::fsdp::FsdpDialect"];
}

#endif // FSDPC_DIALECT_FSDP_TRANSFORMS_PASSES_TD
