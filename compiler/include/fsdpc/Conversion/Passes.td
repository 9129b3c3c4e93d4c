//===- Passes.td - conversion passes -----------------------*- tablegen -*-===//
#ifndef FSDPC_CONVERSION_PASSES_TD
#define FSDPC_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertGraphToPlan : Pass<"convert-graph-to-plan", "mlir::ModuleOp"> {
  let summary = "lower the training step to a plan.program";
  let description = [{
    Replaces `@train_step` (after graph-optimizer) with `plan.program
    @train_step`: every function argument becomes a `plan.tensor` of the
    kind its attributes say, every op result a transient tensor, and every op
    a `plan.kernel` call of the runtime kernel of the same name (reshapes
    become copies, splat float constants fills, other constants constant
    tensors). Optimizer updates write their parameter and state tensors in
    place; the returned loss becomes the program's `loss`.

    With `function=forward` it lowers `@forward` instead, for forward-only
    runs (the ONNX conformance tests): its `graph.output` results become the
    program's `outputs`, named after the ONNX outputs, and there is no loss.

    With `widen-gradients-in-updates` (the default), a cast that widens a
    16-bit gradient to f32 only for an optimizer update is not lowered: the
    update reads the 16-bit gradient. `fsdpc --offload` turns it off, since
    the CUDA device's host kernels (the offloaded optimizer) take f32.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1", "ranks the plan is compiled for">,
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "the function to lower: train_step or forward">,
    Option<"widenGradientsInUpdates", "widen-gradients-in-updates", "bool", /*default=*/"true",
           "optimizer updates read 16-bit gradients instead of their f32 casts">
  ];
  let dependentDialects = ["::fsdpc::plan_ir::PlanDialect"];
}

#endif // FSDPC_CONVERSION_PASSES_TD
