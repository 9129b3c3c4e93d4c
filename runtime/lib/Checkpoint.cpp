#include "fsdpc/runtime/Checkpoint.h"

#include "fsdpc/runtime/PlanFile.h"

#include "fsdpc/runtime/AtomicFile.h"
#include "fsdpc/runtime/Safetensors.h"

#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

namespace fsdpc::runtime {

namespace {

std::string hex(uint64_t value) {
  char text[20];
  std::snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
}

Status makeDirectory(const std::string &path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return FSDPC_ERROR(kInvalidArgument, "cannot create directory '", path, "': ", std::strerror(errno));
  return Status::ok();
}

std::string rankFile(const std::string &dir, const std::string &checkpoint, int rank) {
  return dir + "/" + checkpoint + "/rank-" + std::to_string(rank) + ".safetensors";
}

/// Makes every rank fail if any did, so none waits on the others forever.
Status agreeAllSucceeded(HostControl &control, const Status &local, const char *what) {
  Status agreed = control.agreeOn(local.isOk() ? 0 : 1, what);
  if (!local.isOk())
    return local;
  if (!agreed.isOk())
    return FSDPC_ERROR(kAborted, "another rank failed: ", what);
  return Status::ok();
}

} // namespace

Status saveShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                             int64_t completedSteps, uint64_t planHash) {
  const std::string checkpoint = "step-" + std::to_string(completedSteps);
  Status written = makeDirectory(dir);
  if (written.isOk())
    written = makeDirectory(dir + "/" + checkpoint);
  StatusOr<NamedArrays> state = executor.localState();
  if (written.isOk() && !state.isOk())
    written = state.status();
  if (written.isOk())
    written = writeSafetensors(*state, rankFile(dir, checkpoint, control.rank()),
                               {{"producer", "fsdp-run"},
                                {"plan_hash", hex(planHash)},
                                {"layout_hash", hex(layoutHash(executor.header()))},
                                {"world_size", std::to_string(control.worldSize())},
                                {"rank", std::to_string(control.rank())},
                                {"completed_steps", std::to_string(completedSteps)},
                                // Step i reads global batch i, so the steps are the data position.
                                {"data_position_samples",
                                 std::to_string(completedSteps * executor.header().global_batch())}});
  FSDPC_RETURN_IF_ERROR(agreeAllSucceeded(control, written, "writing the sharded checkpoint"));
  Status pointed = Status::ok();
  if (control.rank() == 0)
    pointed = writeFileAtomically(dir + "/latest", [&](FILE *file) {
      return writeBytes(file, (checkpoint + "\n").data(), checkpoint.size() + 1, dir + "/latest");
    });
  return agreeAllSucceeded(control, pointed, "publishing the sharded checkpoint");
}

StatusOr<int64_t> loadShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                                        uint64_t planHash) {
  int64_t completedSteps = 0;
  Status loaded = [&]() -> Status {
    StatusOr<std::string> latest = readWholeFile(dir + "/latest");
    if (!latest.isOk())
      return FSDPC_ERROR(kNotFound, "'", dir, "' holds no sharded checkpoint (no 'latest' file)");
    std::string checkpoint = *latest;
    while (!checkpoint.empty() && (checkpoint.back() == '\n' || checkpoint.back() == '\r'))
      checkpoint.pop_back();
    if (checkpoint.empty() || checkpoint.find('/') != std::string::npos)
      return FSDPC_ERROR(kInvalidArgument, "'", dir, "/latest' does not name a checkpoint");
    std::string path = rankFile(dir, checkpoint, control.rank());
    std::map<std::string, std::string> metadata;
    StatusOr<NamedArrays> arrays = readSafetensors(path, &metadata);
    if (!arrays.isOk())
      return arrays.status();
    if (metadata["world_size"] != std::to_string(control.worldSize()))
      return FSDPC_ERROR(kInvalidArgument, "'", path, "' was saved by ", metadata["world_size"],
                         " rank(s) but this launch has ", control.worldSize());
    // The state's layout must match; the rest of the plan (learning rate,
    // schedule, kernels) may differ. Checkpoints older than the layout hash
    // carry only the whole plan's hash.
    const std::string layout = hex(layoutHash(executor.header()));
    if (metadata.count("layout_hash") ? metadata["layout_hash"] != layout : metadata["plan_hash"] != hex(planHash))
      return FSDPC_ERROR(kInvalidArgument, "'", path, "' was saved by a plan with another state layout (units, ",
                         "shards or optimizer state differ: layout hash ",
                         metadata.count("layout_hash") ? metadata["layout_hash"] : "none", ", this plan ", layout,
                         "); resume with a plan of the same model, wrap, strategy, world size and optimizer");
    char *end = nullptr;
    completedSteps = std::strtoll(metadata["completed_steps"].c_str(), &end, 10);
    if (metadata["completed_steps"].empty() || *end || completedSteps < 0)
      return FSDPC_ERROR(kInvalidArgument, "'", path, "' has no valid completed_steps");
    return executor.loadLocalState(*arrays);
  }();
  FSDPC_RETURN_IF_ERROR(agreeAllSucceeded(control, loaded, "loading the sharded checkpoint"));
  return completedSteps;
}

} // namespace fsdpc::runtime
