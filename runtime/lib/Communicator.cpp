#include "fsdpc/runtime/Communicator.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace fsdpc::runtime {

Status checkGroup(Group group, int worldSize) {
  if (group.size < 1 || group.stride < 1 || worldSize % (group.size * group.stride) != 0)
    return FSDPC_ERROR(kInvalidArgument, "a group of ", group.size, " ranks with stride ", group.stride,
                       " does not partition a world of ", worldSize);
  return Status::ok();
}

namespace {

/// A world of one: every collective is a copy.
class LocalCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  Status allGather(const float *shard, float *full, int64_t count, Group group) override {
    FSDPC_RETURN_IF_ERROR(checkGroup(group, 1));
    std::memmove(full, shard, count * sizeof(float));
    return Status::ok();
  }
  Status reduceScatter(const float *full, float *shard, int64_t count, Reduction, Group group) override {
    FSDPC_RETURN_IF_ERROR(checkGroup(group, 1));
    std::memmove(shard, full, count * sizeof(float));
    return Status::ok();
  }
  Status allReduce(float *, int64_t, Reduction, Group group) override { return checkGroup(group, 1); }
  Status gatherToFirst(const float *shard, float *full, int64_t count, Group group) override {
    return allGather(shard, full, count, group);
  }
  Status agreeOn(uint64_t, const char *) override { return Status::ok(); }
  void finish() override {}
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize_);
  }
  ~MpiCommunicator() override { finish(); }

  int rank() const override { return rank_; }
  int worldSize() const override { return worldSize_; }

  Status allGather(const float *shard, float *full, int64_t count, Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    FSDPC_RETURN_IF_ERROR(checkCount(count));
    return check(MPI_Allgather(shard, static_cast<int>(count), MPI_FLOAT, full, static_cast<int>(count), MPI_FLOAT,
                               *comm),
                 "all_gather");
  }

  Status reduceScatter(const float *full, float *shard, int64_t count, Reduction reduction, Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    FSDPC_RETURN_IF_ERROR(checkCount(count));
    FSDPC_RETURN_IF_ERROR(check(MPI_Reduce_scatter_block(full, shard, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                                         *comm),
                                "reduce_scatter"));
    if (reduction == Reduction::kAvg)
      scale(shard, count, group.size);
    return Status::ok();
  }

  Status allReduce(float *data, int64_t count, Reduction reduction, Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    FSDPC_RETURN_IF_ERROR(checkCount(count));
    FSDPC_RETURN_IF_ERROR(
        check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, *comm), "all_reduce"));
    if (reduction == Reduction::kAvg)
      scale(data, count, group.size);
    return Status::ok();
  }

  Status gatherToFirst(const float *shard, float *full, int64_t count, Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    FSDPC_RETURN_IF_ERROR(checkCount(count));
    return check(MPI_Gather(shard, static_cast<int>(count), MPI_FLOAT, full, static_cast<int>(count), MPI_FLOAT, 0,
                            *comm),
                 "gather");
  }

  Status agreeOn(uint64_t value, const char *what) override {
    unsigned long long local = value, lowest = 0, highest = 0;
    FSDPC_RETURN_IF_ERROR(check(MPI_Allreduce(&local, &lowest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD),
                                "agree"));
    FSDPC_RETURN_IF_ERROR(check(MPI_Allreduce(&local, &highest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD),
                                "agree"));
    if (lowest != highest)
      return FSDPC_ERROR(kInvalidArgument, "the ranks disagree on ", what, ": every rank must run the same plan");
    return Status::ok();
  }

  void finish() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    for (auto &[key, comm] : groups_)
      MPI_Comm_free(&comm);
    groups_.clear();
    MPI_Finalize();
  }

private:
  static void scale(float *data, int64_t count, int divisor) {
    float inverse = 1.0f / static_cast<float>(divisor);
    for (int64_t i = 0; i < count; ++i)
      data[i] *= inverse;
  }
  static Status check(int code, const char *what) {
    if (code == MPI_SUCCESS)
      return Status::ok();
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    return FSDPC_ERROR(kInternal, "MPI ", what, " failed: ", std::string(text, length));
  }
  static Status checkCount(int64_t count) {
    // MPI counts are int; larger tensors are split by the caller's plan.
    if (count < 0 || count > INT32_MAX)
      return FSDPC_ERROR(kInvalidArgument, "a collective of ", count, " elements exceeds MPI's int count");
    return Status::ok();
  }

  /// The communicator of this rank's group, made once per group shape.
  StatusOr<MPI_Comm> groupComm(Group group) {
    FSDPC_RETURN_IF_ERROR(checkGroup(group, worldSize_));
    if (group.size == worldSize_)
      return MPI_COMM_WORLD;
    auto key = std::make_pair(group.size, group.stride);
    auto it = groups_.find(key);
    if (it != groups_.end())
      return it->second;
    // Blocks of size*stride ranks; inside a block, ranks with the same
    // (rank % stride) form a group, ordered by (rank / stride).
    int block = rank_ / (group.size * group.stride);
    int color = block * group.stride + rank_ % group.stride;
    int member = (rank_ / group.stride) % group.size;
    MPI_Comm comm;
    FSDPC_RETURN_IF_ERROR(check(MPI_Comm_split(MPI_COMM_WORLD, color, member, &comm), "comm_split"));
    groups_[key] = comm;
    return comm;
  }

  int rank_ = 0;
  int worldSize_ = 1;
  std::map<std::pair<int, int>, MPI_Comm> groups_;
};

/// Set by OpenMPI's, MPICH's and Slurm's PMI launchers.
bool launchedByMpi() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(name))
      return true;
  return false;
}

} // namespace

StatusOr<std::unique_ptr<Communicator>> createCommunicator(int *argc, char ***argv) {
  if (!launchedByMpi())
    return std::unique_ptr<Communicator>(new LocalCommunicator());
  // Collectives run on the executor's communication thread, other calls on
  // the main thread, never at the same time.
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return FSDPC_ERROR(kInternal, "MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return FSDPC_ERROR(kInternal, "this MPI does not support calls from more than one thread (MPI_THREAD_SERIALIZED)");
  }
  // Errors come back as codes, so a failed collective becomes a Status.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::unique_ptr<Communicator>(new MpiCommunicator());
}

} // namespace fsdpc::runtime
