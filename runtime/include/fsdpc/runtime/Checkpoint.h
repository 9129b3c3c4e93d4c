//===- Checkpoint.h - Sharded checkpoints -----------------------*- C++ -*-===//
//
// A sharded checkpoint is a directory of steps:
//
//   DIR/step-<S>/rank-<R>.safetensors   each rank's state: parameter and
//                                       optimizer-state shards, frozen
//                                       parameters, the step counter
//   DIR/step-<S>/manifest.json          written last: the checkpoint is
//                                       complete once it exists
//   DIR/latest                          "step-<S>": the newest complete one
//
// Every rank writes its file atomically (temporary name, fsync, rename,
// fsync of the directory). Once all have, rank 0 writes the manifest the
// same way, then `latest`. A crash at any point leaves the previous
// complete checkpoint the newest one; loading takes the newest step with a
// manifest. (FSDP's SHARDED_STATE_DICT, as torch.distributed.checkpoint
// writes its .metadata last.)
//
// A checkpoint reshards on load: written on N ranks under one strategy, it
// loads on M ranks under another, when the units and the state tensors are
// the same (unitLayoutHash). Each rank then reads the shards of the
// checkpoint's first shard group that cover its own.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CHECKPOINT_H
#define FSDPC_RUNTIME_CHECKPOINT_H

#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/Executor.h"
#include "fsdpc/runtime/Status.h"

#include <cstdint>
#include <string>

namespace fsdpc::runtime {

/// Saves this rank's state after `completedSteps` steps into
/// DIR/step-<completedSteps>; with `keepLast` > 0, then removes all but the
/// newest `keepLast` complete checkpoints. Collective: every rank calls it,
/// and all fail if one does.
Status saveShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                             int64_t completedSteps, uint64_t planHash, int64_t keepLast = 0);

/// The completed steps of the newest complete checkpoint in `dir`, or -1
/// if it holds none (also when `dir` does not exist).
int64_t newestCompleteCheckpoint(const std::string &dir);

/// Restores this rank's state from the newest complete checkpoint in `dir`
/// and returns its completed steps. A checkpoint of this plan's layout
/// (layoutHash) loads each rank's own file; one of another world size or
/// strategy with the same units reshards; anything else is refused.
StatusOr<int64_t> loadShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                                        uint64_t planHash);

/// fsdp-ckpt consolidate: the checkpoint `steps` in `dir` (-1: the newest
/// complete one) as one full state of `h`'s layout (the unit layout must
/// match): every parameter under its ONNX name, each optimizer slot as
/// `optimizer.<slot>.<parameter>`, frozen parameters by name and the step
/// counter as `optimizer.step`. Sets `completedSteps`.
StatusOr<NamedArrays> consolidateCheckpoint(const std::string &dir, int64_t steps, const plan::PlanHeader &h,
                                            int64_t &completedSteps);

/// fsdp-ckpt shard: the inverse, a complete sharded checkpoint
/// `dir/step-<completedSteps>` of `full` for every rank of `h`'s world,
/// written by one process.
Status writeCheckpointFromFull(const std::string &dir, const plan::PlanHeader &h, const NamedArrays &full,
                               int64_t completedSteps, uint64_t planHash);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_CHECKPOINT_H
