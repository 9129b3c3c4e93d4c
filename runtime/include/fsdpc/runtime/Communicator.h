//===- Communicator.h - The other ranks: control and data plane -*- C++ -*-===//
//
// The runtime sees the other ranks through two interfaces:
//
// - HostControl, the control plane: who we are (rank, world size), checks
//   that every rank agrees, and small host-side exchanges between steps
//   (the averaged loss, the memory report, a state dict gathered to rank 0).
//   Called from the host thread that drives the run.
// - CollectiveChannel, the data plane: the plan's all_gather,
//   reduce_scatter and all_reduce on tensors in device memory, for any
//   dtype the plan holds. A Device runs them on its communication stream.
//
// MPI implements both (one launch object, Communicator); a CUDA device
// brings its own channel (NCCL) and keeps MPI for control.
//
// A group is `size` ranks, `stride` apart: stride 1 gives FSDP's shard
// groups of consecutive ranks, stride G the replica groups of hybrid
// sharding (the ranks holding the same shard). Shards are laid out in group
// order: member i holds elements [i * shardCount, (i + 1) * shardCount) of
// the full tensor.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_COMMUNICATOR_H
#define FSDPC_RUNTIME_COMMUNICATOR_H

#include "fsdpc/runtime/Status.h"
#include "plan.pb.h"

#include <cstdint>
#include <memory>

namespace fsdpc::runtime {

struct Group {
  int size = 1;
  int stride = 1;
};

enum class Reduction { kSum, kAvg };

class HostControl {
public:
  virtual ~HostControl() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  /// Fails on every rank, with the same message, unless all ranks pass the
  /// same `value`: used to check that all run the same plan.
  virtual Status agreeOn(uint64_t value, const char *what) = 0;
  /// `bytes` bytes from world rank `root` to every rank.
  virtual Status broadcastBytes(void *data, uint64_t bytes, int root) = 0;
  /// Every group member's `bytes` bytes, in member order, to the group's
  /// first member only (others may pass null for `all`): a full state dict
  /// gathered to one rank.
  virtual Status gatherBytesToFirst(const void *mine, void *all, uint64_t bytes, Group group) = 0;
  /// Every rank's `bytes` bytes, in rank order, to every rank.
  virtual Status allGatherBytes(const void *mine, void *all, uint64_t bytes) = 0;
  /// Host floats reduced over the world in float, as torch's all_reduce
  /// does (the step's loss, averaged over ranks).
  virtual Status allReduceHostFloats(float *data, int64_t count, Reduction reduction) = 0;
  /// Lets every rank leave together; called before exiting when every rank
  /// got this far.
  virtual void finish() = 0;
  /// Ends every rank of the launch now, with exit code `code`: what a rank
  /// does on an error the others may not share, so that none of them waits
  /// forever in a collective it will never join. A world of 1 just returns.
  virtual void abortAll(int code) { (void)code; }
  /// Every blocking collective that has not completed `seconds` after it
  /// began ends the launch, naming the collective (0: wait forever).
  virtual void setCollectiveTimeout(double seconds) { (void)seconds; }
};

class CollectiveChannel {
public:
  virtual ~CollectiveChannel() = default;
  /// full[i * shardCount ...] = shard of group member i.
  virtual Status allGather(const void *shard, void *full, int64_t shardCount, plan::DType dtype, Group group) = 0;
  /// shard = this member's slice of the elementwise reduction of `full`.
  virtual Status reduceScatter(const void *full, void *shard, int64_t shardCount, plan::DType dtype,
                               Reduction reduction, Group group) = 0;
  /// data = elementwise reduction of `data` over the group, on every member.
  virtual Status allReduce(void *data, int64_t count, plan::DType dtype, Reduction reduction, Group group) = 0;
};

/// What a launch gives: MPI (or a world of one) as control and as the
/// channel of host-memory devices.
class Communicator : public HostControl, public CollectiveChannel {};

/// The communicator of this launch: MPI when started by mpirun (or another
/// MPI launcher), else a world of one rank. Checks that a group fits.
StatusOr<std::unique_ptr<Communicator>> createCommunicator(int *argc, char ***argv);

/// Whether `group` partitions a world of `worldSize` ranks.
Status checkGroup(Group group, int worldSize);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_COMMUNICATOR_H
