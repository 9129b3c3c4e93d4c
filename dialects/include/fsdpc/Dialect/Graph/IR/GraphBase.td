//===- GraphBase.td - The graph dialect --------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_GRAPH_GRAPHBASE_TD
#define FSDPC_DIALECT_GRAPH_GRAPHBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "fsdpc/Dialect/SignedAttrs.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::fsdpc::graph";
  let summary = "Value-semantics tensor ops for the forward pass, gradients and optimizer";
  let description = [{
    The `graph` dialect is where an imported ONNX model lives and where the
    training step is built. Every op is pure and works on ranked, statically
    shaped builtin tensors of `f32` (activations, parameters, gradients),
    `bf16` or `f16` (activations and gradients under mixed precision), or
    `i64` (class labels, indices, the optimizer step). Norms, softmax, the
    losses and the optimizer updates take f32 only.

    A model is a `func.func` whose arguments carry one of these attributes:
    `graph.input = "name"` (a batch input fed from data), `graph.param =
    "name"` (a trainable parameter, named as its ONNX initializer),
    `graph.frozen_param = "name"` (a parameter that is not trained),
    `graph.buffer = "name"` (a module buffer such as BatchNorm's running
    mean: not trained, held whole on every rank, rewritten by the step),
    `graph.state_of = "name"` with `graph.state_slot = "exp_avg"` (optimizer
    state) and `graph.step` (the 1-based optimizer step). Results carry
    `graph.output = "name"`, `graph.loss`, `graph.grad_of = "name"`, or
    `graph.updates = N` (the result overwrites argument N after the step:
    a parameter or optimizer state from the optimizer, a buffer from the
    forward pass).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Graph_Op<string mnemonic, list<Trait> traits = []> :
    Op<Graph_Dialect, mnemonic, traits>;

// Floats: f32, or the storage types bf16 and f16 of mixed precision.
// Norms, softmax, losses and optimizer updates take f32 only.
def Graph_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def Graph_F32Tensor : RankedTensorOf<[F32]>;
def Graph_I64Tensor : RankedTensorOf<[I64]>;
// The arithmetic ops' operands: floats, or i64 (token ids, positions).
def Graph_NumericTensor : RankedTensorOf<[F32, BF16, F16, I64]>;
def Graph_F32Scalar : 0DTensorOf<[F32]>;
def Graph_I64Scalar : 0DTensorOf<[I64]>;

// Closed sets of names are dialect attributes: `#graph.approximate<tanh>`.
// The plan keeps their names as strings (the kernel contract's form).
class Graph_EnumAttr<EnumAttrInfo info, string mnemonic> : EnumAttr<Graph_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

def Graph_GeluApproximation : I32EnumAttr<"GeluApproximation", "how gelu computes the normal CDF", [
  I32EnumAttrCase<"none", 0>,
  I32EnumAttrCase<"tanh", 1>
]> {
  let cppNamespace = "::fsdpc::graph";
  let genSpecializedAttr = 0;
}
def Graph_GeluApproximationAttr : Graph_EnumAttr<Graph_GeluApproximation, "approximate">;

def Graph_GatedActivationKind : I32EnumAttr<"GatedActivationKind", "the activation of a gated_activation's gate", [
  I32EnumAttrCase<"silu", 0>,
  I32EnumAttrCase<"gelu", 1>,
  I32EnumAttrCase<"gelu_tanh", 2>
]> {
  let cppNamespace = "::fsdpc::graph";
  let genSpecializedAttr = 0;
}
def Graph_GatedActivationKindAttr : Graph_EnumAttr<Graph_GatedActivationKind, "activation">;

def Graph_LossReduction : I32EnumAttr<"LossReduction", "how a loss combines the samples' losses", [
  I32EnumAttrCase<"mean", 0>,
  I32EnumAttrCase<"sum", 1>
]> {
  let cppNamespace = "::fsdpc::graph";
  let genSpecializedAttr = 0;
}
def Graph_LossReductionAttr : Graph_EnumAttr<Graph_LossReduction, "reduction">;

def Graph_ComputeDtype : I32EnumAttr<"ComputeDtype", "the type a device may compute an op's products in", [
  I32EnumAttrCase<"f32", 0>,
  I32EnumAttrCase<"bf16", 1>,
  I32EnumAttrCase<"f16", 2>
]> {
  let cppNamespace = "::fsdpc::graph";
  let genSpecializedAttr = 0;
}
def Graph_ComputeDtypeAttr : Graph_EnumAttr<Graph_ComputeDtype, "compute_dtype">;

def Graph_LrSchedule : I32EnumAttr<"LrSchedule", "the learning-rate schedule the step counter drives", [
  I32EnumAttrCase<"constant", 0>,
  I32EnumAttrCase<"linear", 1>,
  I32EnumAttrCase<"cosine", 2>
]> {
  let cppNamespace = "::fsdpc::graph";
  let genSpecializedAttr = 0;
}
def Graph_LrScheduleAttr : Graph_EnumAttr<Graph_LrSchedule, "lr_schedule">;

def Graph_ComparePredicate : I32EnumAttr<"ComparePredicate", "which comparison graph.compare makes", [
  I32EnumAttrCase<"eq", 0>,
  I32EnumAttrCase<"ne", 1>,
  I32EnumAttrCase<"lt", 2>,
  I32EnumAttrCase<"le", 3>,
  I32EnumAttrCase<"gt", 4>,
  I32EnumAttrCase<"ge", 5>
]> {
  let cppNamespace = "::fsdpc::graph";
  let genSpecializedAttr = 0;
}
def Graph_ComparePredicateAttr : Graph_EnumAttr<Graph_ComparePredicate, "predicate">;

#endif // FSDPC_DIALECT_GRAPH_GRAPHBASE_TD
