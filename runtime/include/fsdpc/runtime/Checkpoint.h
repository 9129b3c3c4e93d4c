//===- Checkpoint.h - Sharded checkpoints -----------------------*- C++ -*-===//
//
// A sharded checkpoint is a directory:
//
//   DIR/step-<S>/rank-<R>.safetensors   each rank's persistent tensors
//   DIR/latest                          "step-<S>": the last complete one
//
// Every rank writes its own file atomically; once all have, rank 0 moves
// `latest` atomically. A crash mid-save leaves `latest` naming the previous
// complete checkpoint. (FSDP's SHARDED_STATE_DICT, without torch.distributed
// .checkpoint's planner.)
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

/// Saves this rank's shards after `completedSteps` steps. Collective: every
/// rank calls it, and all fail if one does.
Status saveShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                             int64_t completedSteps, uint64_t planHash);

/// Restores this rank's shards from the checkpoint `DIR/latest` names and
/// returns its completed steps. Refuses a checkpoint of another world size
/// or state layout (layoutHash); a plan recompiled with other
/// hyperparameters resumes it.
StatusOr<int64_t> loadShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                                        uint64_t planHash);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_CHECKPOINT_H
