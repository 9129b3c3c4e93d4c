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
    overlaps no placed tensor alive at the same time. Tensors marked `host`
    (plan-offload) are laid out one after another in the host region. Sets
    `persistent_bytes`, `transient_bytes` and (with host tensors)
    `host_bytes` on the program.
  }];
}

def PlanOffload : Pass<"plan-offload", "::fsdpc::plan_ir::ProgramOp"> {
  let summary = "keep sharded state in host memory (FSDP's CPUOffload)";
  let description = [{
    `what=optimizer` moves the optimizer-state shards to the host,
    `what=params` also every unit's parameter and gradient shard (FSDP's
    `CPUOffload(offload_params=True)`). Moving marks those tensors `host`;
    then every instruction sees its operands where it runs:

    - a kernel that writes a host tensor (the optimizer update, gradient
      clipping's scale, a micro-batch's accumulation into a gradient shard)
      runs on the host (`on_host`), so the optimizer step works on the
      host's flat shards;
    - any other kernel, and every collective, runs on the device.

    An operand on the wrong side is staged: a `plan.copy` on the
    instruction's stream just before it brings an input over (a parameter
    shard to the device ahead of its all_gather, on the communication
    stream), and one just after it takes an output back (a reduce_scatter's
    gradient shard to the host). Device staging tensors are transients,
    each live only around its instruction, so the arena packs them with the
    rest; host staging tensors (the step counter, device shards a host
    optimizer reads) take one host tensor per source.
  }];
  let options = [
    Option<"what", "what", "std::string", /*default=*/"\"optimizer\"", "optimizer or params">
  ];
}

def PlanInPlace : Pass<"plan-in-place", "::fsdpc::plan_ir::ProgramOp"> {
  let summary = "let kernels write their output over an input that dies with them";
  let description = [{
    The kernel contract names, for some kernels, an input whose bytes an
    output may take (`inPlaceInput` and `inPlaceOutput`: the kernel reads
    each element before it writes the same element, and everything else it
    reads beforehand): the loss gradient over the logits, alone or with the
    loss (`softmax_cross_entropy_with_grad`, output 1). Where that input's storage is a
    transient whose last use is this instruction, the output is born here,
    both are the same size, no other operand of the instruction names
    either, and no collective, copy or other stream touches them, the
    output becomes a `view` of the input at offset 0. plan-allocate then
    gives the two one place in the arena, and the memory report counts one.
    Runs before plan-allocate.

    ```mlir
    plan.tensor @dlogits transient : tensor<64x50xbf16>
    plan.kernel "softmax_cross_entropy_grad" ins [@logits, @labels, @seed] outs [@dlogits] on compute
    // becomes
    plan.tensor @dlogits view : tensor<64x50xbf16> {view_of = @logits, view_offset = 0 : i64}
    ```
  }];
}

#endif // FSDPC_DIALECT_PLAN_TRANSFORMS_PASSES_TD
