//===- PlanOps.td - plan dialect ops -----------------------*- tablegen -*-===//
#ifndef FSDPC_DIALECT_PLAN_PLANOPS_TD
#define FSDPC_DIALECT_PLAN_PLANOPS_TD

include "fsdpc/Dialect/Plan/IR/PlanBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"

def Plan_ProgramOp : Plan_Op<"program", [Symbol, SymbolTable, IsolatedFromAbove, NoTerminator, SingleBlock,
                                         NoRegionArguments, GraphRegionNoTerminator]> {
  let summary = "one rank's training step";
  let description = [{
    Holds the tensor table and the instruction list of a training step.

    - `sym_name`: the program's name.
    - `world_size`: the number of ranks the plan was compiled for.
    - `global_batch`: samples per step over all ranks.
    - `loss`: the scalar tensor that holds the step's loss (absent in a
      forward-only program).
    - `grad_norm`: with gradient clipping, the `tensor<1xf32>` that holds
      the step's global gradient norm before clipping.
    - `forward_output`, `forward_output_name`: in a training step, the
      tensor holding the model's output once the forward pass has run, and
      its ONNX name (`fsdp-run --forward` on a training plan).
    - `torch_names`: `[parameter, torch name]` pairs the importer proved
      for folded Linear weights (stored transposed), for `--torch-names`.
    - `initializer_rewrites`: the importer's undoing of torch.onnx.export's
      initializer rewrites, `[kind, name, source]` string triples, for
      writing the trained model back as ONNX.
    - `forward_loss`: in a training step, the scalar tensor holding the
      loss of the forward pass (of the first micro-batch). The instructions
      up to the first that writes it are the prefix an evaluation pass runs;
      the plan writer counts them (`forwardPrefix` in Lifetimes.h) once
      every pass that inserts instructions has run.
    - `outputs`: in a forward-only program, the tensors holding the model's
      outputs, each named after its ONNX output by `source_name`.
    - `loss_kind`: `cross_entropy`, `mse`, `output` (the model's own
      scalar output) or `combined` (a weighted sum of several of these);
      absent in a forward-only program.
    - `optimizer`: a readable description of the optimizer and its settings.
    - `num_classes`: classes of a cross-entropy loss (0 otherwise).
    - `persistent_bytes`, `transient_bytes`, `host_bytes`: region sizes, set
      by `plan-allocate`; the host region (pinned host memory on a GPU) holds
      what `plan-offload` moved off the device.
    - `source`, `opset`: the ONNX model the plan came from, for reports.
    - `strategy`, `shard_group_size`: the sharding strategy and the ranks
      that share one copy of the parameters; the units are `plan.unit` ops.

    Everything the plan writer puts in a plan file is in the program, so
    the writer reads the plan dialect only.

    ```mlir
    plan.program @train_step attributes {world_size = 1 : i64, global_batch = 64 : i64, loss = @loss,
        loss_kind = #plan.loss_kind<cross_entropy>, optimizer = "adamw", num_classes = 5 : i64} {
      plan.tensor @loss transient : tensor<f32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Fsdpc_I64Attr:$world_size, Fsdpc_I64Attr:$global_batch,
                       OptionalAttr<FlatSymbolRefAttr>:$loss, OptionalAttr<Plan_LossKindAttr>:$loss_kind, StrAttr:$optimizer,
                       DefaultValuedAttr<Fsdpc_I64Attr, "0">:$num_classes,
                       OptionalAttr<Fsdpc_I64Attr>:$persistent_bytes, OptionalAttr<Fsdpc_I64Attr>:$transient_bytes,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$outputs, OptionalAttr<StrAttr>:$source,
                       OptionalAttr<Fsdpc_I64Attr>:$opset, OptionalAttr<Plan_StrategyAttr>:$strategy,
                       OptionalAttr<Fsdpc_I64Attr>:$shard_group_size, OptionalAttr<FlatSymbolRefAttr>:$grad_norm,
                       OptionalAttr<FlatSymbolRefAttr>:$forward_loss,
                       OptionalAttr<ArrayAttr>:$initializer_rewrites, OptionalAttr<ArrayAttr>:$torch_names,
                       OptionalAttr<FlatSymbolRefAttr>:$forward_output, OptionalAttr<StrAttr>:$forward_output_name,
                       OptionalAttr<Fsdpc_I64Attr>:$host_bytes);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBlock() { return getBody().front(); }
  }];
}

def Plan_TensorOp : Plan_Op<"tensor", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "a tensor of the plan and where it lives";
  let description = [{
    - `sym_name`: the tensor's name inside the program.
    - `kind`: what it holds; parameters, frozen parameters, optimizer state,
      gradient shards, constants and the step counter live in the persistent
      region, inputs and transients in the transient arena. A `view` is an
      alias of part of another tensor and takes no memory of its own.
    - `type`: its static shape and element type: f32, bf16, f16 (floats;
      bf16 and f16 are storage types that kernels widen to f32), i64, i32,
      or i1 (bool, one byte).
    - `source_name`: the ONNX name of a parameter or input.
    - `value`: the initial value of a constant.
    - `optimizer_slot`, `owner`: for optimizer state, the slot (`"exp_avg"`)
      and the parameter it belongs to. A `label_count` (an i64 scalar the
      runtime writes with each batch: the labels of the input `owner` that
      are not -100 over the step's global batch, `fsdpc --loss-mean global`)
      names its labels by `owner`.
    - `unit`: for a unit's parameter, gradient or optimizer-state shard, the
      `fsdp.unit` it belongs to.
    - `view_of`, `view_offset`: for a view, the tensor it aliases and its first
      byte in it.
    - `offset`: the byte offset in its region, set by `plan-allocate` (for a
      view, the base's offset plus `view_offset`).
    - `host`: the tensor lives in the host region (pinned host memory on a
      GPU) rather than in device memory: `plan-offload` sets it on the state
      `fsdpc --offload` moves off the device and on the host copies it
      stages. Only host kernels touch it, and copies move it; a view is
      where its storage is.
    - `label`: an input that only the loss reads (the labels), not the
      model: a forward pass needs no value for it.

    ```mlir
    plan.tensor @w0 parameter : tensor<2048x10xf32> {source_name = "fc1.weight", offset = 0 : i64}
    plan.tensor @fc1.bias view : tensor<2048xf32> {view_of = @full0, view_offset = 81920 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Plan_TensorKind:$kind, TypeAttrOf<AnyRankedTensor>:$type,
                       OptionalAttr<StrAttr>:$source_name, OptionalAttr<ElementsAttr>:$value,
                       OptionalAttr<StrAttr>:$optimizer_slot, OptionalAttr<StrAttr>:$owner,
                       OptionalAttr<Fsdpc_I64Attr>:$offset, OptionalAttr<StrAttr>:$unit,
                       OptionalAttr<FlatSymbolRefAttr>:$view_of, OptionalAttr<Fsdpc_I64Attr>:$view_offset,
                       UnitAttr:$host, UnitAttr:$label);
  let assemblyFormat = "$sym_name $kind `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() { return ::llvm::cast<::mlir::RankedTensorType>(getType()); }
    /// Bytes of the tensor's elements.
    int64_t getByteSize();
    /// Whether the tensor lives in the persistent region (a view: its base).
    bool isPersistent();
    /// The tensor a view aliases, through views of views; itself otherwise.
    TensorOp getStorage();
    /// Whether the tensor's bytes are in the host region (a view: its base's).
    bool isOnHost();
  }];
}

def Plan_UnitOp : Plan_Op<"unit", [HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a sharding unit: its parameters' places in the flat parameter";
  let description = [{
    The plan's record of an `fsdp.unit`: its parameters are concatenated in
    order into one flat parameter of `flat_size` elements, padded to
    `padded_size`; member i of a shard group holds elements
    `[i * S, (i + 1) * S)` with `S = padded_size / shard_group_size`, in the
    `parameter` tensor `shard`. The runtime cuts each rank's shard from the
    unit's full initial value and gathers the shards back for a state dict.

    - `name`: the unit's name (the `unit` of its tensors).
    - `params`, `param_types`: the parameters' ONNX names and f32 types, in
      flat order.
    - `flat_size`, `padded_size`: as in `fsdp.unit`.
    - `shard`: the `plan.tensor` holding this rank's shard.

    ```mlir
    plan.unit "fc1" params ["fc1.weight", "fc1.bias"] : [tensor<5x3xf32>, tensor<5xf32>] flat_size 20 padded_size 20
        shard @fc1.flat_param
    ```
  }];
  let arguments = (ins StrAttr:$name, StrArrayAttr:$params, TypeArrayAttr:$param_types, Fsdpc_I64Attr:$flat_size,
                       Fsdpc_I64Attr:$padded_size, FlatSymbolRefAttr:$shard);
  let assemblyFormat = [{
    $name `params` $params `:` $param_types `flat_size` $flat_size `padded_size` $padded_size `shard` $shard attr-dict
  }];
  let hasVerifier = 1;
}

def Plan_KernelOp : Plan_Op<"kernel", [HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a call of a runtime kernel";
  let description = [{
    Runs the kernel named `kernel` on the `compute` stream: it reads
    `inputs` and writes `outputs` (an output may be an input too, for
    in-place optimizer updates). Every other attribute is a kernel
    parameter, passed to the runtime as it is (bool and integer attributes as
    int64, float attributes as double, `array<i64>` as lists).

    - `kernel`: the runtime kernel's name.
    - `inputs`, `outputs`: `plan.tensor` symbols.
    - `stream`: the stream it runs on.
    - `on_host`: the kernel runs on the host, on `host` tensors only, in its
      stream's order (the CUDA backend enqueues it as a host function): the
      optimizer step of an offloaded plan. Every other kernel touches device
      tensors only.

    ```mlir
    plan.kernel "matmul" ins [@x, @w0] outs [@h0] on compute {transpose_b = true}
    plan.kernel "sgd_update" ins [@w, @g] outs [@w] on compute {lr = 0.1 : f64, on_host}
    ```
  }];
  let arguments = (ins StrAttr:$kernel, FlatSymbolRefArrayAttr:$inputs, FlatSymbolRefArrayAttr:$outputs,
                       Plan_Stream:$stream, UnitAttr:$on_host);
  let assemblyFormat = "$kernel `ins` $inputs `outs` $outputs `on` $stream attr-dict";
  let hasVerifier = 1;
}

def Plan_CollectiveOp : Plan_Op<"collective", [HasParent<"ProgramOp">,
                                               DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a collective over a group of ranks";
  let description = [{
    - `collective`: `all_gather`, `reduce_scatter` or `all_reduce`.
    - `inputs`, `outputs`: one `plan.tensor` each.
    - `reduction`: `#plan.reduction<sum>` or `#plan.reduction<avg>` (not
      for all_gather).
    - `group_size`, `group_stride`: the group, as in the fsdp dialect.
    - `stream`: the stream it runs on, normally `communication`.

    ```mlir
    plan.collective all_gather ins [@shard0] outs [@full0] on communication {group_size = 4 : i64, group_stride = 1 : i64}
    ```
  }];
  let arguments = (ins Plan_CollectiveKind:$collective, FlatSymbolRefArrayAttr:$inputs, FlatSymbolRefArrayAttr:$outputs,
                       Plan_Stream:$stream, Fsdpc_I64Attr:$group_size, DefaultValuedAttr<Fsdpc_I64Attr, "1">:$group_stride,
                       OptionalAttr<Plan_ReductionAttr>:$reduction);
  let assemblyFormat = "$collective `ins` $inputs `outs` $outputs `on` $stream attr-dict";
  let hasVerifier = 1;
}

def Plan_CopyOp : Plan_Op<"copy", [HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "copies a tensor between host and device memory";
  let description = [{
    Copies `source` into `target` on `stream`, in that stream's order; one
    of the two is a `host` tensor and the other is not, and they have the
    same type. `plan-offload` puts one before an instruction that reads a
    tensor from the other side and one after an instruction that writes
    one, on the instruction's own stream. The CUDA backend makes it an
    asynchronous `cudaMemcpyAsync` from or into pinned memory.

    ```mlir
    plan.copy @fc1.flat_param to @fc1.flat_param.device on communication
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, FlatSymbolRefAttr:$target, Plan_Stream:$stream);
  let assemblyFormat = "$source `to` $target `on` $stream attr-dict";
  let extraClassDeclaration = [{
    /// Whether it copies host memory to the device (else the device's to the host).
    bool isToDevice();
  }];
}

class Plan_EventOp<string mnemonic, string what> : Plan_Op<mnemonic, [HasParent<"ProgramOp">]> {
  let summary = what;
  let description = [{
    }] # what # [{ on `stream`. A `wait_event` blocks its stream until the
    matching `record_event` of the same step has run on the other stream.

    - `event`: the event's number, from 0.
    - `stream`: the stream it runs on.

    ```mlir
    plan.}] # mnemonic # [{ 0 on communication
    ```
  }];
  let arguments = (ins Fsdpc_I64Attr:$event, Plan_Stream:$stream);
  let assemblyFormat = "$event `on` $stream attr-dict";
  let hasVerifier = 1;
}

def Plan_RecordEventOp : Plan_EventOp<"record_event", "records an event">;
def Plan_WaitEventOp : Plan_EventOp<"wait_event", "waits for an event">;

#endif // FSDPC_DIALECT_PLAN_PLANOPS_TD
