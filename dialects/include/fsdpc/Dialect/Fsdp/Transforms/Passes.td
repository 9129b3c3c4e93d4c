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

def FsdpRecompute : Pass<"fsdp-recompute", "mlir::ModuleOp"> {
  let summary = "replay chosen units' forward before their backward instead of keeping activations";
  let description = [{
    Activation checkpointing, decided at compile time. Runs after fsdp-wrap
    and before fsdp-shard on @train_step. A unit's forward segment is every
    op from the first to the last forward op that reads the unit's
    parameters or comes from an ONNX node of its module (torch names nodes
    by module path: `/blocks.0/attn/Softmax`): a transformer block from its
    first norm to its closing residual add. The
    policy is `;`-separated clauses, the first whose regex fully matches a
    unit's name deciding for it:

    - `units:REGEX` (PyTorch's `checkpoint_wrapper` on those modules): no
      value of the segment is kept for backward. Just before the first
      backward op that reads one, the segment is replayed from its inputs
      (kept) and backward reads the replayed values.
    - `cheap:REGEX` (selective checkpointing): GEMM and attention outputs
      (`graph.matmul`, `graph.batch_matmul`, `graph.attention`, and a bias
      added to a matmul, which the lowering folds into its GEMM) are kept;
      everything else that backward reads (norms, elementwise ops, softmax,
      reshapes) is replayed from them.

    Replayed ops carry `fsdp.recompute = @unit`. They read the unit's
    parameters in backward, so fsdp-shard's backward all_gather comes before
    the replay and serves replay and backward together: a unit is gathered
    once for both, not twice. Kernels are deterministic (dropout redraws its
    mask from seed, step and rank), so the step computes the same numbers.
    Two chosen units whose segments overlap are an error.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "none, or clauses units:REGEX / cheap:REGEX separated by ';'">
  ];
  let dependentDialects = ["::fsdpc::fsdp::FsdpDialect"];
}

def FsdpShard : Pass<"fsdp-shard", "mlir::ModuleOp"> {
  let summary = "shard each unit's flat parameter, gradient and optimizer state by a strategy";
  let description = [{
    Runs after fsdp-wrap on @train_step. Each unit's parameters become one
    flat parameter padded to a multiple of the shard group size S; the
    function takes this rank's shard of it (`fsdp.shard_of`) and of each
    optimizer-state slot (`fsdp.state_shard_of`), and the per-parameter
    optimizer updates become one update of the unit's shards at the end of
    the step. Ops read parameters through `fsdp.param_view` of a full flat
    parameter; each unit's gradients are combined by `fsdp.flatten` as soon
    as the last of them is computed. By strategy (N = world size):

    - `full_shard` (S = N): `fsdp.all_gather` before the unit's first use in
      forward and `fsdp.free` after its last; the same again around its uses
      in backward (none if backward does not read it); `fsdp.reduce_scatter`
      (mean) of the flat gradient.
    - `shard_grad_op` (S = N): one gather, kept from the first forward use to
      the last backward use; gradients as in full_shard.
    - `no_shard` (S = 1): replicated flat parameters, `fsdp.all_reduce`
      (mean) of the flat gradient over the world (DDP).
    - `hybrid_shard` (S = `shard-group-size`): full_shard inside groups of S
      consecutive ranks, then `fsdp.all_reduce` (mean) of the gradient shard
      across the N / S ranks that hold the same shard.

    Collectives over a group of one rank are left out, so at N = 1 every
    strategy is plain single-process training on flat parameters.

    Mixed precision (after graph-mixed-precision): a unit whose parameters
    are read only through `graph.cast`s to one low-precision type is
    gathered in that type. Its f32 shard is cast before the all_gather,
    which then moves half the bytes, and the views are of that type. With
    `reduce-dtype=low`, gradients that reach their parameter through a cast
    from the low-precision type are flattened and reduce-scattered in that
    type, and the shard is cast to f32 for the update. The default, `f32`,
    reduces in f32, like FSDP's `reduce_dtype=torch.float32`.

    Gradient accumulation (after graph-accumulate): gathers are placed per
    phase, so every micro-batch gathers in its forward and its backward
    (shard_grad_op once per micro-batch). With `accumulate-reduce=last`,
    the default, the gradient summed over the micro-batches is flattened
    and reduced once, during the last micro-batch's backward (FSDP's
    `no_sync`: the unsharded sums live across micro-batches). With `each`,
    every micro-batch's gradients are flattened and reduced (reduce-scatter,
    and the all-reduce of no_shard or hybrid_shard) as soon as they are
    complete, and the K shards are summed and scaled by 1/K just before the
    update.
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"\"full_shard\"",
           "full_shard, shard_grad_op, no_shard or hybrid_shard">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1", "number of ranks">,
    Option<"shardGroupSize", "shard-group-size", "int64_t", /*default=*/"0",
           "ranks per shard group (hybrid_shard only)">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"f32\"",
           "f32, or low: reduce mixed-precision gradients in their low-precision type">,
    Option<"accumulateReduce", "accumulate-reduce", "std::string", /*default=*/"\"last\"",
           "with graph-accumulate: last (reduce the summed gradient once, FSDP's no_sync) or each (reduce "
           "every micro-batch's gradient and sum the shards)">
  ];
  let dependentDialects = ["::fsdpc::fsdp::FsdpDialect"];
}

def FsdpClipGradNorm : Pass<"fsdp-clip-grad-norm", "mlir::ModuleOp"> {
  let summary = "clip the gradients by their global L2 norm over all shards and ranks";
  let description = [{
    Runs after fsdp-shard on @train_step: FSDP's `clip_grad_norm_(max_norm)`
    as IR. Just before the first optimizer update, `graph.sum_squares` adds
    the squares of every gradient shard the updates read; an
    `fsdp.all_reduce` (sum, without a unit) over the shard group makes it
    the global squared norm (no collective for a group of one: no_shard
    gradients are whole on every rank, and hybrid sharding's replica groups
    hold the same shards); `graph.clip_coefficient` gives the norm and
    `scale = min(1, max_norm / (norm + 1e-6))`, and each update reads its
    gradient times `scale` (`graph.mul`). The norm before clipping becomes a
    result of the step marked `graph.grad_norm`, which the plan keeps for
    fsdp-run's metrics.
  }];
  let options = [
    Option<"maxNorm", "max-norm", "double", /*default=*/"1.0", "the largest gradient norm allowed">
  ];
  let dependentDialects = ["::fsdpc::fsdp::FsdpDialect", "::fsdpc::graph::GraphDialect"];
}

def FsdpPrefetch : Pass<"fsdp-prefetch", "mlir::ModuleOp"> {
  let summary = "issue each unit's all_gather one unit early";
  let description = [{
    Runs after fsdp-shard. Within forward, and within backward, each
    `fsdp.all_gather` (with its `fsdp.param_view`s) moves up to just after
    the previous unit's gather. The communication stream then gathers unit
    k+1 while compute runs unit k, as PyTorch FSDP's `forward_prefetch` and
    `backward_prefetch=BACKWARD_PRE` do. The frees stay where they were, so
    at most two units are gathered at once; the first gather of backward
    stays in backward.

    `depth` D moves each gather D units early (FSDP's `limit_all_gathers`
    with D + 1 all-gathers in flight; fsdpc's `--max-inflight-gathers K`
    is D = K - 1): the one-unit move applied D times, each time next to the
    previous gather's current place, so gathers keep their order.
  }];
  let options = [
    Option<"depth", "depth", "int64_t", /*default=*/"1", "units each gather moves early (at least 1)">
  ];
  let dependentDialects = ["::fsdpc::fsdp::FsdpDialect"];
}

def FsdpBucket : Pass<"fsdp-bucket", "mlir::ModuleOp"> {
  let summary = "issue the collectives of small units together, in fsdp.bucket ops";
  let description = [{
    Runs last in the fsdp stage, after fsdp-prefetch. Walking @train_step's
    collectives of one kind in program order, consecutive ones join a bucket
    while they have the same group, reduction and element type, belong to
    different units, and their full tensors (the gathered result, or the
    reduced gradient) add up to at most `bucket-bytes`; a collective larger
    than that stays alone. Each bucket of two or more becomes an
    `fsdp.bucket`, one message at run time (DDP's `bucket_cap_mb`).

    - all_gather buckets run where their first member was: the later
      members' gathers (and the casts of their shards) move up, so those
      units are gathered earlier. Forward and backward gathers are not
      mixed.
    - reduce_scatter and all_reduce buckets run where their last member
      was, once every member's gradient is complete: the earlier members
      move down, followed by the ops that read their results.

    `bucket-bytes=0`, the default, leaves the IR as it is.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "largest sum of full tensor bytes in one bucket (0: no buckets)">
  ];
  let dependentDialects = ["::fsdpc::fsdp::FsdpDialect"];
}

#endif // FSDPC_DIALECT_FSDP_TRANSFORMS_PASSES_TD
