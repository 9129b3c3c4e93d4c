// Each collective against a reference computed locally, for the group shapes
// FSDP uses: the whole world, consecutive shard groups, strided replica
// groups. Run as one process (a world of one) and under mpirun -np 4.
#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/Float16.h"

#include <cmath>
#include <cstdio>
#include <vector>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

int failures = 0, checks = 0;

void expect(bool ok, const char *what, int rank) {
  ++checks;
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what);
  }
}

float valueOf(int rank, int64_t i) { return static_cast<float>(rank * 1000 + i) * 0.5f; }

/// World rank of member `index` of the group that holds `rank`.
int memberRank(int rank, int index, Group g) {
  int blockStart = rank / (g.size * g.stride) * (g.size * g.stride);
  return blockStart + rank % g.stride + index * g.stride;
}

/// The reduction over the group of every member's element `element`.
double reducedValue(int rank, Group g, Reduction reduction, int64_t element) {
  double total = 0;
  for (int m = 0; m < g.size; ++m)
    total += valueOf(memberRank(rank, m, g), element);
  return reduction == Reduction::kAvg ? total / g.size : total;
}

void testGroup(Communicator &comm, Group g) {
  const int rank = comm.rank();
  const int64_t count = 5;
  char what[128];

  std::vector<float> shard(count), full(count * g.size);
  for (int64_t i = 0; i < count; ++i)
    shard[i] = valueOf(rank, i);
  expect(comm.allGather(shard.data(), full.data(), count, plan::F32, g).isOk(), "all_gather status", rank);
  bool same = true;
  for (int m = 0; m < g.size; ++m)
    for (int64_t i = 0; i < count; ++i)
      same &= full[m * count + i] == valueOf(memberRank(rank, m, g), i);
  std::snprintf(what, sizeof(what), "all_gather size %d stride %d", g.size, g.stride);
  expect(same, what, rank);

  // Only the group's first member receives the gathered tensor.
  const bool first = (rank / g.stride) % g.size == 0;
  std::vector<float> gathered(first ? count * g.size : 0, -1.0f);
  expect(comm.gatherBytesToFirst(shard.data(), first ? gathered.data() : nullptr, count * sizeof(float), g).isOk(), "gather status", rank);
  same = true;
  for (int m = 0; first && m < g.size; ++m)
    for (int64_t i = 0; i < count; ++i)
      same &= gathered[m * count + i] == valueOf(memberRank(rank, m, g), i);
  std::snprintf(what, sizeof(what), "gather to the first member, size %d stride %d", g.size, g.stride);
  expect(same, what, rank);

  // The channel moves any dtype the plan holds: int64 gathers exactly.
  std::vector<int64_t> ids(count), allIds(count * g.size);
  for (int64_t i = 0; i < count; ++i)
    ids[i] = (int64_t{1} << 40) * rank + i;
  expect(comm.allGather(ids.data(), allIds.data(), count, plan::I64, g).isOk(), "i64 all_gather status", rank);
  same = true;
  for (int m = 0; m < g.size; ++m)
    for (int64_t i = 0; i < count; ++i)
      same &= allIds[m * count + i] == (int64_t{1} << 40) * memberRank(rank, m, g) + i;
  std::snprintf(what, sizeof(what), "i64 all_gather size %d stride %d", g.size, g.stride);
  expect(same, what, rank);

  // bf16: small integers are exact, so the group's sum is too; the average
  // rounds once, to nearest even.
  for (Reduction reduction : {Reduction::kSum, Reduction::kAvg}) {
    std::vector<uint16_t> local(count * g.size), out(count);
    for (int64_t i = 0; i < count * g.size; ++i)
      local[i] = floatToBf16(static_cast<float>(rank + i));
    expect(comm.reduceScatter(local.data(), out.data(), count, plan::BF16, reduction, g).isOk(),
           "bf16 reduce_scatter status", rank);
    int myIndex = (rank / g.stride) % g.size;
    bool exact = true;
    for (int64_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int m = 0; m < g.size; ++m)
        sum += static_cast<float>(memberRank(rank, m, g) + myIndex * count + i);
      float want = reduction == Reduction::kAvg ? bf16ToFloat(floatToBf16(sum * (1.0f / g.size))) : sum;
      exact &= bf16ToFloat(out[i]) == want;
    }
    std::snprintf(what, sizeof(what), "bf16 reduce_scatter %s size %d stride %d",
                  reduction == Reduction::kSum ? "sum" : "avg", g.size, g.stride);
    expect(exact, what, rank);
  }

  for (Reduction reduction : {Reduction::kSum, Reduction::kAvg}) {
    std::vector<float> local(count * g.size), out(count);
    for (int64_t i = 0; i < count * g.size; ++i)
      local[i] = valueOf(rank, i);
    expect(comm.reduceScatter(local.data(), out.data(), count, plan::F32, reduction, g).isOk(), "reduce_scatter status", rank);
    int myIndex = (rank / g.stride) % g.size;
    bool close = true;
    for (int64_t i = 0; i < count; ++i) {
      double want = reducedValue(rank, g, reduction, myIndex * count + i);
      close &= std::abs(out[i] - want) <= 1e-5 * std::abs(want);
    }
    std::snprintf(what, sizeof(what), "reduce_scatter %s size %d stride %d",
                  reduction == Reduction::kSum ? "sum" : "avg", g.size, g.stride);
    expect(close, what, rank);

    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i)
      data[i] = valueOf(rank, i);
    expect(comm.allReduce(data.data(), count, plan::F32, reduction, g).isOk(), "all_reduce status", rank);
    close = true;
    for (int64_t i = 0; i < count; ++i) {
      double want = reducedValue(rank, g, reduction, i);
      close &= std::abs(data[i] - want) <= 1e-5 * std::abs(want);
    }
    std::snprintf(what, sizeof(what), "all_reduce %s size %d stride %d",
                  reduction == Reduction::kSum ? "sum" : "avg", g.size, g.stride);
    expect(close, what, rank);
  }
}

} // namespace

int main(int argc, char **argv) {
  StatusOr<std::unique_ptr<Communicator>> created = createCommunicator(&argc, &argv);
  if (!created.isOk()) {
    std::fprintf(stderr, "%s\n", created.status().toString().c_str());
    return 1;
  }
  Communicator &comm = **created;
  const int world = comm.worldSize(), rank = comm.rank();
  testGroup(comm, {world, 1});
  if (world % 2 == 0 && world > 2) {
    testGroup(comm, {2, 1});           // hybrid: shard groups
    testGroup(comm, {world / 2, 2});   // hybrid: replica groups
  }
  expect(!comm.allReduce(nullptr, 0, plan::F32, Reduction::kSum, {world + 1, 1}).isOk(), "a group larger than the world is refused",
         rank);
  expect(comm.agreeOn(42, "a constant").isOk(), "agreeing ranks pass", rank);
  uint64_t fromLast = rank == world - 1 ? 0xfeedULL : 0;
  expect(comm.broadcastBytes(&fromLast, sizeof(fromLast), world - 1).isOk() && fromLast == 0xfeedULL,
         "broadcast from the last rank", rank);
  std::vector<int32_t> ranks(world, -1);
  int32_t mine = rank;
  expect(comm.allGatherBytes(&mine, ranks.data(), sizeof(mine)).isOk(), "all_gather of host bytes status", rank);
  bool inOrder = true;
  for (int r = 0; r < world; ++r)
    inOrder &= ranks[r] == r;
  expect(inOrder, "all_gather of host bytes, in rank order", rank);
  Status disagree = comm.agreeOn(static_cast<uint64_t>(rank), "the rank");
  expect(world == 1 ? disagree.isOk() : !disagree.isOk(), "disagreeing ranks fail everywhere", rank);
  if (rank == 0)
    std::printf("%d passed, %d failed\n", checks - failures, failures);
  comm.finish();
  return failures ? 1 : 0;
}
