//===- Communicator.h - Collectives between ranks ---------------*- C++ -*-===//
//
// The runtime's view of the other ranks. A group is `size` ranks, `stride`
// apart: stride 1 gives FSDP's shard groups of consecutive ranks, stride G
// the replica groups of hybrid sharding (the ranks holding the same shard).
// Shards are laid out in group order: member i holds elements
// [i * shardCount, (i + 1) * shardCount) of the full tensor.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_COMMUNICATOR_H
#define FSDPC_RUNTIME_COMMUNICATOR_H

#include "fsdpc/runtime/Status.h"

#include <cstdint>
#include <memory>

namespace fsdpc::runtime {

struct Group {
  int size = 1;
  int stride = 1;
};

enum class Reduction { kSum, kAvg };

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;

  /// full[i * shardCount ...] = shard of group member i.
  virtual Status allGather(const float *shard, float *full, int64_t shardCount, Group group) = 0;
  /// shard = this member's slice of the elementwise reduction of `full`.
  virtual Status reduceScatter(const float *full, float *shard, int64_t shardCount, Reduction reduction,
                               Group group) = 0;
  /// data = elementwise reduction of `data` over the group, on every member.
  virtual Status allReduce(float *data, int64_t count, Reduction reduction, Group group) = 0;
  /// Like allGather, but only the group's first member receives `full`
  /// (others may pass null): a full state dict gathered to one rank.
  virtual Status gatherToFirst(const float *shard, float *full, int64_t shardCount, Group group) = 0;
  /// Fails on every rank, with the same message, unless all ranks pass the
  /// same `value`: used to check that all run the same plan.
  virtual Status agreeOn(uint64_t value, const char *what) = 0;
  /// Lets every rank leave together; called before exiting, even on errors.
  virtual void finish() = 0;
};

/// The communicator of this launch: MPI when started by mpirun (or another
/// MPI launcher), else a world of one rank. Checks that a group fits.
StatusOr<std::unique_ptr<Communicator>> createCommunicator(int *argc, char ***argv);

/// Whether `group` partitions a world of `worldSize` ranks.
Status checkGroup(Group group, int worldSize);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_COMMUNICATOR_H
