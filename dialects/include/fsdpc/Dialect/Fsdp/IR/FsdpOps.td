//===- FsdpOps.td - fsdp dialect ops -----------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_FSDP_FSDPOPS_TD
#define FSDPC_DIALECT_FSDP_FSDPOPS_TD

include "fsdpc/Dialect/Fsdp/IR/FsdpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Fsdp_UnitOp : Fsdp_Op<"unit", [Symbol]> {
  let summary = "a group of parameters sharded as one flat tensor";
  let description = [{
    Declares a sharding unit, FSDP's "flat parameter": its parameters are
    concatenated in order into one flat tensor of `flat_size` elements, padded
    to `padded_size` (a multiple of the shard group size), and each rank keeps
    one contiguous shard of it.

    - `sym_name`: the unit's name, referenced by collectives.
    - `params`: the parameters' names (ONNX initializer names), in flat order.
    - `param_types`: their tensor types, in the same order; parameter `i`
      starts at the sum of the element counts of the parameters before it.
    - `flat_size`: the total element count of the parameters.
    - `padded_size`: `flat_size` rounded up to a multiple of the group size.

    ```mlir
    fsdp.unit @unit0 params ["fc1.weight", "fc1.bias"] : [tensor<2048x10xf32>, tensor<2048xf32>]
        flat_size 22528 padded_size 22528
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$params, TypeArrayAttr:$param_types,
                       Fsdpc_I64Attr:$flat_size, Fsdpc_I64Attr:$padded_size);
  let assemblyFormat = [{
    $sym_name `params` $params `:` $param_types `flat_size` $flat_size `padded_size` $padded_size attr-dict
  }];
  let hasVerifier = 1;
}

class Fsdp_UnitUserOp<string mnemonic, list<Trait> traits = []> :
    Fsdp_Op<mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
}

def Fsdp_ShardOp : Fsdp_Op<"shard", [Pure]> {
  let summary = "this rank's shard of a flat tensor";
  let description = [{
    Takes elements `[rank * S, (rank + 1) * S)` of `input`, with
    `S = input size / group_size`, where `rank` is this rank's index in its
    shard group. The input is already padded to a multiple of `group_size`.

    - `input`: a padded flat tensor.
    - `group_size`: the number of ranks sharing it.

    ```mlir
    %s = fsdp.shard %flat {group_size = 4 : i64} : tensor<22528xf32> -> tensor<5632xf32>
    ```
  }];
  let arguments = (ins Fsdp_FlatTensor:$input, Fsdpc_I64Attr:$group_size);
  let results = (outs Fsdp_FlatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_AllGatherOp : Fsdp_UnitUserOp<"all_gather"> {
  let summary = "the full flat parameter of a unit, gathered from all shards";
  let description = [{
    Concatenates the `shard` of every rank of the group in rank order.

    - `shard`: this rank's shard.
    - `unit`: the unit whose parameter is gathered.
    - `group_size`, `group_stride`: the group (see the dialect).
    - `result`: `group_size` times the shard size.

    ```mlir
    %full = fsdp.all_gather %shard {unit = @unit0, group_size = 4 : i64, group_stride = 1 : i64}
        : tensor<5632xf32> -> tensor<22528xf32>
    ```
  }];
  let arguments = (ins Fsdp_FlatTensor:$shard, FlatSymbolRefAttr:$unit, Fsdpc_I64Attr:$group_size,
                       DefaultValuedAttr<Fsdpc_I64Attr, "1">:$group_stride);
  let results = (outs Fsdp_FlatTensor:$result);
  let assemblyFormat = "$shard attr-dict `:` type($shard) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_ReduceScatterOp : Fsdp_UnitUserOp<"reduce_scatter"> {
  let summary = "this rank's shard of the sum or mean of a flat gradient over the group";
  let description = [{
    Reduces `input` elementwise over the group, then keeps this rank's shard
    of the result.

    - `input`: a full, padded flat gradient.
    - `unit`: the unit the gradient belongs to.
    - `reduction`: `#fsdp.reduction<sum>` or `#fsdp.reduction<avg>`.
    - `group_size`, `group_stride`: the group (see the dialect).

    ```mlir
    %g = fsdp.reduce_scatter %full_grad {unit = @unit0, reduction = #fsdp.reduction<avg>, group_size = 4 : i64}
        : tensor<22528xf32> -> tensor<5632xf32>
    ```
  }];
  let arguments = (ins Fsdp_FlatTensor:$input, FlatSymbolRefAttr:$unit, Fsdp_ReductionAttr:$reduction, Fsdpc_I64Attr:$group_size,
                       DefaultValuedAttr<Fsdpc_I64Attr, "1">:$group_stride);
  let results = (outs Fsdp_FlatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_AllReduceOp : Fsdp_UnitUserOp<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "the sum or mean of a tensor over the group, on every rank";
  let description = [{
    - `input`: the local tensor.
    - `unit`: the unit the tensor belongs to; absent for a value of the
      whole step (the squared gradient norm of gradient clipping).
    - `reduction`: `#fsdp.reduction<sum>` or `#fsdp.reduction<avg>`.
    - `group_size`, `group_stride`: the group (see the dialect).

    ```mlir
    %g = fsdp.all_reduce %grad {unit = @unit0, reduction = #fsdp.reduction<avg>, group_size = 2 : i64, group_stride = 2 : i64}
        : tensor<5632xf32>
    ```
  }];
  let arguments = (ins Fsdp_FlatTensor:$input, OptionalAttr<FlatSymbolRefAttr>:$unit, Fsdp_ReductionAttr:$reduction, Fsdpc_I64Attr:$group_size,
                       DefaultValuedAttr<Fsdpc_I64Attr, "1">:$group_stride);
  let results = (outs Fsdp_FlatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Fsdp_ParamViewOp : Fsdp_Op<"param_view", [Pure]> {
  let summary = "one parameter of a unit, read in place from its flat parameter";
  let description = [{
    The elements `[offset, offset + N)` of a unit's full flat parameter (a
    gathered one, or the local one when the unit is not sharded), seen with
    the parameter's shape; N is the element count of the result. The plan
    lowers it to an alias, not a copy.

    - `flat`: the unit's full flat parameter.
    - `param`: the parameter's name, for reading the IR.
    - `offset`: its first element in `flat`.

    ```mlir
    %w = fsdp.param_view %full {param = "fc1.weight", offset = 0 : i64} : tensor<22528xf32> -> tensor<2048x10xf32>
    ```
  }];
  let arguments = (ins Fsdp_FlatTensor:$flat, StrAttr:$param, Fsdpc_I64Attr:$offset);
  let results = (outs StaticShapeTensorOf<[F32, BF16, F16]>:$result);
  let assemblyFormat = "$flat attr-dict `:` type($flat) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_FlattenOp : Fsdp_UnitUserOp<"flatten", [Pure]> {
  let summary = "a unit's parameter gradients as one padded flat gradient";
  let description = [{
    Concatenates the flattened `grads` in the unit's parameter order and
    fills the rest of the result (the padding) with zeros: the flat gradient
    that a reduce-scatter or all-reduce consumes. The plan lowers it by
    letting each gradient's producer write into its place.

    - `grads`: one gradient per parameter of `unit`, in the unit's order.
    - `unit`: the unit.

    ```mlir
    %flat = fsdp.flatten %gw, %gb {unit = @unit0} : tensor<2048x10xf32>, tensor<2048xf32> -> tensor<22528xf32>
    ```
  }];
  let arguments = (ins Variadic<StaticShapeTensorOf<[F32, BF16, F16]>>:$grads, FlatSymbolRefAttr:$unit);
  let results = (outs Fsdp_FlatTensor:$result);
  let assemblyFormat = "$grads attr-dict `:` type($grads) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_FreeOp : Fsdp_Op<"free", [MemoryEffects<[MemFree]>]> {
  let summary = "the end of a gathered parameter's life";
  let description = [{
    Marks the point after which `value` (a gathered flat parameter) is no
    longer needed, so its memory returns to the arena. Only `fsdp.all_gather`
    results (directly, or through an `fsdp.bucket` of gathers) may be freed, and nothing may use them, or the parameter views
    taken from them, afterwards.

    - `value`: the gathered tensor.

    ```mlir
    fsdp.free %full : tensor<22528xf32>
    ```
  }];
  let arguments = (ins Fsdp_FlatTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Fsdp_BucketOp : Fsdp_Op<"bucket", [SingleBlock, RecursiveMemoryEffects]> {
  let summary = "collectives of several units issued as one";
  let description = [{
    Two or more collectives of the same kind (all `fsdp.all_gather`, all
    `fsdp.reduce_scatter` or all `fsdp.all_reduce`), over the same group,
    with the same reduction and element type, run as one message: the plan
    packs the members' inputs into one buffer, runs one collective on it
    and unpacks the result into each member's output. Small units then pay
    one collective's latency instead of one each, as DDP's gradient buckets
    and DeepSpeed's bucket sizes do. `fsdp-bucket` forms them.

    The body holds the member collectives, in order, and an `fsdp.yield` of
    their results, which become the bucket's results.

    ```mlir
    %full:2 = fsdp.bucket {
      %a = fsdp.all_gather %s0 {unit = @h0, group_size = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
      %b = fsdp.all_gather %s1 {unit = @h1, group_size = 2 : i64} : tensor<4xf32> -> tensor<8xf32>
      fsdp.yield %a, %b : tensor<16xf32>, tensor<8xf32>
    } : tensor<16xf32>, tensor<8xf32>
    ```
  }];
  let results = (outs Variadic<Fsdp_FlatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$body attr-dict `:` type($results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The member collectives, in order.
    ::llvm::SmallVector<::mlir::Operation *> getMembers();
  }];
}

def Fsdp_YieldOp : Fsdp_Op<"yield", [Terminator, HasParent<"BucketOp">, Pure]> {
  let summary = "the results of an fsdp.bucket";
  let description = [{
    Ends an `fsdp.bucket`: its operands, the member collectives' results in
    order, are the bucket's results.

    ```mlir
    fsdp.yield %a, %b : tensor<16xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins Variadic<Fsdp_FlatTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // FSDPC_DIALECT_FSDP_FSDPOPS_TD
