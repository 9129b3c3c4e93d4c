//===- MpiCommunicator.cpp - MPI as control plane and channel -------------===//
#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/Float16.h"
#include "fsdpc/runtime/HostArray.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace fsdpc::runtime {

namespace {

// MPI has no bf16 or f16 sum: these add in f32 and round to nearest even,
// element by element, as NCCL's bf16 reductions do.
void sumBf16(void *in, void *inout, int *count, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *count; ++i)
    b[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}
void sumF16(void *in, void *inout, int *count, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *count; ++i)
    b[i] = floatToHalf(halfToFloat(a[i]) + halfToFloat(b[i]));
}

/// A world of one: every collective is a copy.
class LocalCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  Status agreeOn(uint64_t, const char *) override { return Status::ok(); }
  Status broadcastBytes(void *, uint64_t, int root) override {
    return root == 0 ? Status::ok() : FSDPC_ERROR(kInvalidArgument, "broadcast from rank ", root, " in a world of 1");
  }
  Status gatherBytesToFirst(const void *mine, void *all, uint64_t bytes, Group group) override {
    FSDPC_RETURN_IF_ERROR(checkGroup(group, 1));
    std::memmove(all, mine, bytes);
    return Status::ok();
  }
  Status allGatherBytes(const void *mine, void *all, uint64_t bytes) override {
    std::memmove(all, mine, bytes);
    return Status::ok();
  }
  Status allReduceHostFloats(float *, int64_t, Reduction) override { return Status::ok(); }
  void finish() override {}

  Status allGather(const void *shard, void *full, int64_t count, plan::DType dtype, Group group) override {
    FSDPC_RETURN_IF_ERROR(checkGroup(group, 1));
    std::memmove(full, shard, count * dtypeSize(dtype));
    return Status::ok();
  }
  Status reduceScatter(const void *full, void *shard, int64_t count, plan::DType dtype, Reduction,
                       Group group) override {
    FSDPC_RETURN_IF_ERROR(checkGroup(group, 1));
    std::memmove(shard, full, count * dtypeSize(dtype));
    return Status::ok();
  }
  Status allReduce(void *, int64_t, plan::DType, Reduction, Group group) override { return checkGroup(group, 1); }
};

/// How far each rank of this host has got, one slot per node-local rank in
/// memory the ranks share (MPI_Win_allocate_shared): the number of blocking
/// collectives it has entered, and a heartbeat its watchdog thread writes
/// every 50 ms (a stopped or dead process writes none). Plain atomic stores
/// and loads, so it costs nothing and calls no MPI after setup.
struct ProgressSlot {
  uint64_t entered;
  int64_t heartbeatNs; // CLOCK_MONOTONIC, the same clock for every process of a host
  int32_t worldRank;
};

/// A heartbeat this old means the rank is not running.
constexpr int64_t kSilentNs = 1'000'000'000;

/// Ends the launch when a blocking collective outlives the timeout: a rank
/// that stalled (stopped, swapping, stuck in a kernel) or died without
/// MPI noticing would otherwise keep every other rank waiting in silence.
/// Every waiting rank reports which collective it waits in and, from the
/// progress board, which ranks of its host have not reached that call yet.
/// A plain thread that only reads atomics and exits: it calls no MPI, so
/// MPI_THREAD_SERIALIZED holds.
class CollectiveWatchdog {
public:
  ~CollectiveWatchdog() { stop(); }
  /// `board` (node-local ranks' slots, `mine` this rank's) stays valid
  /// until stop(); `othersElsewhere` says some ranks are on other hosts.
  void setBoard(ProgressSlot *board, int slots, ProgressSlot *mine, bool othersElsewhere) {
    board_ = board, slots_ = slots, mine_ = mine, othersElsewhere_ = othersElsewhere;
  }
  /// Starts the thread that beats the heart and, with `seconds` > 0, ends
  /// the launch when a collective waits longer than that.
  void start(double seconds, int rank) {
    timeout_ = seconds;
    if (thread_.joinable())
      return;
    thread_ = std::thread([this, rank] {
      int64_t lastWake = nowNs();
      while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const int64_t now = nowNs(), asleep = now - lastWake;
        lastWake = now;
        if (mine_)
          __atomic_store_n(&mine_->heartbeatNs, now, __ATOMIC_RELAXED);
        const int64_t since = since_.load();
        if (timeout_ <= 0 || since == 0 || now - since < static_cast<int64_t>(timeout_ * 1e9))
          continue;
        const uint64_t call = calls_.load();
        // A rank that was itself stopped (and is now resumed, say to be
        // ended) says so instead of blaming the ranks that gave up on it.
        const std::string why = asleep > kSilentNs ? "this rank was not running for " + secondsText(asleep) +
                                                         " (stopped, or starved of CPU)"
                                                   : waitedFor(call, now);
        std::fprintf(stderr, "fsdp-run: error: rank %d: collective %s (call %llu) did not complete within %g s "
                             "(--collective-timeout): %s\n",
                     rank, what_.load(), static_cast<unsigned long long>(call), timeout_, why.c_str());
        std::fflush(stderr);
        std::_Exit(1); // mpirun ends the other ranks when one exits without MPI_Finalize
      }
    });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }
  void enter(const char *what) {
    what_ = what;
    const uint64_t call = ++calls_;
    if (mine_)
      __atomic_store_n(&mine_->entered, call, __ATOMIC_RELAXED);
    since_ = nowNs();
  }
  void leave() { since_ = 0; }

private:
  /// Which ranks this one waits for: those of its host that have not
  /// reached this call, or whose heartbeat stopped (inside the call).
  std::string waitedFor(uint64_t call, int64_t now) const {
    std::string ranks;
    for (int i = 0; board_ && i < slots_; ++i) {
      const ProgressSlot &slot = board_[i];
      if (&slot == mine_)
        continue;
      const uint64_t entered = __atomic_load_n(&slot.entered, __ATOMIC_RELAXED);
      const int64_t silent = now - __atomic_load_n(&slot.heartbeatNs, __ATOMIC_RELAXED);
      std::string state;
      if (silent > kSilentNs)
        state = "not running for " + secondsText(silent);
      if (entered < call)
        state += (state.empty() ? "" : ", ") + std::string("at call ") + std::to_string(entered);
      if (!state.empty())
        ranks += (ranks.empty() ? "" : "; ") + std::string("rank ") + std::to_string(slot.worldRank) + " (" + state + ")";
    }
    if (!ranks.empty())
      return "waiting for " + ranks;
    return othersElsewhere_ ? "every rank of this host is running and reached it; a rank on another host stalled or died"
                            : "every rank is running and reached it";
  }
  static std::string secondsText(int64_t ns) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ns) / 1e9);
    return text;
  }
  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  double timeout_ = 0;
  std::atomic<int64_t> since_{0};
  std::atomic<const char *> what_{""};
  std::atomic<uint64_t> calls_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  ProgressSlot *board_ = nullptr, *mine_ = nullptr;
  int slots_ = 0;
  bool othersElsewhere_ = false;
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize_);
  }
  ~MpiCommunicator() override { finish(); }

  Status createOps() {
    FSDPC_RETURN_IF_ERROR(check(MPI_Op_create(sumBf16, /*commute=*/1, &sumBf16_), "op_create"));
    return check(MPI_Op_create(sumF16, /*commute=*/1, &sumF16_), "op_create");
  }

  /// The progress board of this host's ranks (ProgressSlot), set up on
  /// every rank whatever its --collective-timeout, so the collective calls
  /// here match across ranks.
  Status createProgressBoard() {
    FSDPC_RETURN_IF_ERROR(check(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &hostComm_), "comm_split_type"));
    int hostRank = 0, hostSize = 1;
    MPI_Comm_rank(hostComm_, &hostRank);
    MPI_Comm_size(hostComm_, &hostSize);
    ProgressSlot *mine = nullptr;
    FSDPC_RETURN_IF_ERROR(check(MPI_Win_allocate_shared(sizeof(ProgressSlot), sizeof(ProgressSlot), MPI_INFO_NULL,
                                                        hostComm_, &mine, &boardWindow_),
                                "win_allocate_shared"));
    MPI_Aint bytes = 0;
    int unit = 0;
    ProgressSlot *first = nullptr;
    FSDPC_RETURN_IF_ERROR(check(MPI_Win_shared_query(boardWindow_, 0, &bytes, &unit, &first), "win_shared_query"));
    mine->entered = 0;
    mine->heartbeatNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    mine->worldRank = rank_;
    // Every slot is initialised before any watchdog reads one.
    FSDPC_RETURN_IF_ERROR(check(MPI_Barrier(hostComm_), "barrier"));
    watchdog_.setBoard(first, hostSize, mine, hostSize < worldSize_);
    return Status::ok();
  }

  int rank() const override { return rank_; }
  int worldSize() const override { return worldSize_; }

  // Control plane.

  Status agreeOn(uint64_t value, const char *what) override {
    unsigned long long local = value, lowest = 0, highest = 0;
    FSDPC_RETURN_IF_ERROR(timed("agree", [&] {
      return MPI_Allreduce(&local, &lowest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    }));
    FSDPC_RETURN_IF_ERROR(timed("agree", [&] {
      return MPI_Allreduce(&local, &highest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    }));
    if (lowest != highest)
      return FSDPC_ERROR(kInvalidArgument, "the ranks disagree on ", what, ": every rank must run the same plan");
    return Status::ok();
  }

  Status broadcastBytes(void *data, uint64_t bytes, int root) override {
    FSDPC_RETURN_IF_ERROR(checkCount(bytes));
    return timed("broadcast", [&] { return MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD); });
  }

  Status gatherBytesToFirst(const void *mine, void *all, uint64_t bytes, Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    FSDPC_RETURN_IF_ERROR(checkCount(bytes));
    int count = static_cast<int>(bytes);
    return timed("gather", [&] { return MPI_Gather(mine, count, MPI_BYTE, all, count, MPI_BYTE, 0, *comm); });
  }

  Status allGatherBytes(const void *mine, void *all, uint64_t bytes) override {
    FSDPC_RETURN_IF_ERROR(checkCount(bytes));
    int count = static_cast<int>(bytes);
    return timed("all_gather", [&] { return MPI_Allgather(mine, count, MPI_BYTE, all, count, MPI_BYTE, MPI_COMM_WORLD); });
  }

  Status allReduceHostFloats(float *data, int64_t count, Reduction reduction) override {
    return allReduce(data, count, plan::F32, reduction, {worldSize_, 1});
  }

  void abortAll(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  void setCollectiveTimeout(double seconds) override { watchdog_.start(seconds, rank_); }

  void finish() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    // The watchdog reads the board: stopped before the board goes.
    watchdog_.stop();
    if (boardWindow_ != MPI_WIN_NULL)
      MPI_Win_free(&boardWindow_);
    if (hostComm_ != MPI_COMM_NULL)
      MPI_Comm_free(&hostComm_);
    for (auto &[key, comm] : groups_)
      MPI_Comm_free(&comm);
    groups_.clear();
    for (MPI_Op *op : {&sumBf16_, &sumF16_})
      if (*op != MPI_OP_NULL)
        MPI_Op_free(op);
    MPI_Finalize();
  }

  // Data plane: device memory is host memory for the devices MPI serves.

  Status allGather(const void *shard, void *full, int64_t count, plan::DType dtype, Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    StatusOr<MPI_Datatype> type = mpiType(dtype, "all_gather");
    if (!type.isOk())
      return type.status();
    FSDPC_RETURN_IF_ERROR(checkCount(count));
    return timed("all_gather", [&] {
      return MPI_Allgather(shard, static_cast<int>(count), *type, full, static_cast<int>(count), *type, *comm);
    });
  }

  Status reduceScatter(const void *full, void *shard, int64_t count, plan::DType dtype, Reduction reduction,
                       Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    StatusOr<MPI_Datatype> type = reducibleType(dtype, reduction, "reduce_scatter");
    if (!type.isOk())
      return type.status();
    FSDPC_RETURN_IF_ERROR(checkCount(count));
    FSDPC_RETURN_IF_ERROR(timed("reduce_scatter", [&] {
      return MPI_Reduce_scatter_block(full, shard, static_cast<int>(count), *type, sumOp(dtype), *comm);
    }));
    if (reduction == Reduction::kAvg)
      scale(shard, count, dtype, group.size);
    return Status::ok();
  }

  Status allReduce(void *data, int64_t count, plan::DType dtype, Reduction reduction, Group group) override {
    StatusOr<MPI_Comm> comm = groupComm(group);
    if (!comm.isOk())
      return comm.status();
    StatusOr<MPI_Datatype> type = reducibleType(dtype, reduction, "all_reduce");
    if (!type.isOk())
      return type.status();
    FSDPC_RETURN_IF_ERROR(checkCount(count));
    FSDPC_RETURN_IF_ERROR(timed("all_reduce", [&] {
      return MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), *type, sumOp(dtype), *comm);
    }));
    if (reduction == Reduction::kAvg)
      scale(data, count, dtype, group.size);
    return Status::ok();
  }

private:
  static StatusOr<MPI_Datatype> mpiType(plan::DType dtype, const char *what) {
    switch (dtype) {
    case plan::F32:
      return MPI_FLOAT;
    case plan::I64:
      return MPI_INT64_T;
    case plan::I32:
      return MPI_INT32_T;
    case plan::BF16:
    case plan::F16:
      return MPI_UINT16_T; // moved as bits; reduced by sumBf16 / sumF16
    case plan::BOOL:
      return MPI_UINT8_T;
    default:
      return FSDPC_ERROR(kUnimplemented, "the MPI channel has no ", what, " of dtype ", plan::DType_Name(dtype));
    }
  }
  /// Sums of floats and integers; averages (sum, then scale by 1/size, as
  /// FSDP does) of floats only.
  static StatusOr<MPI_Datatype> reducibleType(plan::DType dtype, Reduction reduction, const char *what) {
    bool isFloat = dtype == plan::F32 || isNarrowFloat(dtype);
    if ((reduction == Reduction::kAvg && !isFloat) || dtype == plan::BOOL)
      return FSDPC_ERROR(kUnimplemented, "the MPI channel cannot ", reduction == Reduction::kAvg ? "average" : "sum",
                         " ", plan::DType_Name(dtype));
    return mpiType(dtype, what);
  }
  MPI_Op sumOp(plan::DType dtype) const {
    return dtype == plan::BF16 ? sumBf16_ : dtype == plan::F16 ? sumF16_ : MPI_SUM;
  }
  /// data *= 1/divisor in f32, rounding to nearest even for bf16 and f16.
  static void scale(void *data, int64_t count, plan::DType dtype, int divisor) {
    float inverse = 1.0f / static_cast<float>(divisor);
    auto *bits = static_cast<uint16_t *>(data);
    for (int64_t i = 0; i < count; ++i) {
      if (dtype == plan::BF16)
        bits[i] = floatToBf16(bf16ToFloat(bits[i]) * inverse);
      else if (dtype == plan::F16)
        bits[i] = floatToHalf(halfToFloat(bits[i]) * inverse);
      else
        static_cast<float *>(data)[i] *= inverse;
    }
  }
  /// A blocking MPI call, watched by the collective timeout.
  template <typename Call> Status timed(const char *what, Call call) {
    watchdog_.enter(what);
    const int code = call();
    watchdog_.leave();
    return check(code, what);
  }
  static Status check(int code, const char *what) {
    if (code == MPI_SUCCESS)
      return Status::ok();
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    return FSDPC_ERROR(kInternal, "MPI ", what, " failed: ", std::string(text, length));
  }
  static Status checkCount(uint64_t count) {
    // MPI counts are int; larger tensors are split by the caller's plan.
    if (count > static_cast<uint64_t>(INT_MAX))
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
    FSDPC_RETURN_IF_ERROR(timed("comm_split", [&] { return MPI_Comm_split(MPI_COMM_WORLD, color, member, &comm); }));
    groups_[key] = comm;
    return comm;
  }

  int rank_ = 0;
  int worldSize_ = 1;
  std::map<std::pair<int, int>, MPI_Comm> groups_;
  CollectiveWatchdog watchdog_;
  MPI_Comm hostComm_ = MPI_COMM_NULL;
  MPI_Win boardWindow_ = MPI_WIN_NULL;
  MPI_Op sumBf16_ = MPI_OP_NULL, sumF16_ = MPI_OP_NULL;
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
  // Collectives run on the device's communication stream worker, control
  // calls on the main thread, never at the same time.
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return FSDPC_ERROR(kInternal, "MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return FSDPC_ERROR(kInternal, "this MPI does not support calls from more than one thread (MPI_THREAD_SERIALIZED)");
  }
  // Errors come back as codes, so a failed collective becomes a Status.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto communicator = std::make_unique<MpiCommunicator>();
  FSDPC_RETURN_IF_ERROR(communicator->createOps());
  FSDPC_RETURN_IF_ERROR(communicator->createProgressBoard());
  return std::unique_ptr<Communicator>(std::move(communicator));
}

} // namespace fsdpc::runtime
