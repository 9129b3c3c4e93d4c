#include "fsdpc/runtime/Checkpoint.h"

#include "fsdpc/runtime/PlanFile.h"

#include "fsdpc/runtime/AtomicFile.h"
#include "fsdpc/runtime/Safetensors.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

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

constexpr const char *kManifest = "manifest.json";

bool fileExists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

/// The completed steps of every complete checkpoint in `dir`, ascending.
std::vector<int64_t> completeCheckpoints(const std::string &dir) {
  std::vector<int64_t> steps;
  DIR *listing = ::opendir(dir.c_str());
  if (!listing)
    return steps;
  while (dirent *entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 24)
      continue;
    if (name.find_first_not_of("0123456789", 5) != std::string::npos)
      continue;
    if (fileExists(dir + "/" + name + "/" + kManifest))
      steps.push_back(std::strtoll(name.c_str() + 5, nullptr, 10));
  }
  ::closedir(listing);
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string stepName(int64_t steps) { return "step-" + std::to_string(steps); }

/// Removes a complete checkpoint: its manifest first, so that a removal cut
/// short leaves an incomplete checkpoint, never a complete one with files
/// missing.
Status removeCheckpoint(const std::string &dir, int64_t steps) {
  const std::string path = dir + "/" + stepName(steps);
  if (std::remove((path + "/" + kManifest).c_str()) != 0)
    return FSDPC_ERROR(kDataLoss, "cannot remove '", path, "/", kManifest, "': ", std::strerror(errno));
  if (DIR *listing = ::opendir(path.c_str())) {
    std::vector<std::string> names;
    while (dirent *entry = ::readdir(listing))
      if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0)
        names.push_back(entry->d_name);
    ::closedir(listing);
    for (const std::string &name : names)
      if (std::remove((path + "/" + name).c_str()) != 0)
        return FSDPC_ERROR(kDataLoss, "cannot remove '", path, "/", name, "': ", std::strerror(errno));
  }
  if (::rmdir(path.c_str()) != 0)
    return FSDPC_ERROR(kDataLoss, "cannot remove '", path, "': ", std::strerror(errno));
  return Status::ok();
}

/// The manifest records each rank's file with its size and FNV-1a hash, so
/// that a file of another save, or one copied over another rank's, is
/// caught before it loads.
std::string fileEntry(int rank, const FileDigest &digest) {
  return "{\"name\": \"rank-" + std::to_string(rank) + ".safetensors\", \"bytes\": " + std::to_string(digest.bytes) +
         ", \"fnv1a64\": \"" + hex(digest.fnv1a64) + "\"}";
}

std::string manifestText(const plan::PlanHeader &h, int worldSize, int64_t completedSteps, uint64_t planHash,
                         const std::vector<FileDigest> &records) {
  std::string files;
  for (int r = 0; r < worldSize; ++r)
    files += std::string(r ? ",\n    " : "\n    ") + fileEntry(r, records[r]);
  return "{\n  \"format\": \"fsdpc sharded checkpoint\",\n  \"version\": 1,\n  \"completed_steps\": " +
         std::to_string(completedSteps) + ",\n  \"world_size\": " + std::to_string(worldSize) +
         ",\n  \"shard_group_size\": " + std::to_string(std::max(h.shard_group_size(), 1)) + ",\n  \"strategy\": \"" +
         h.strategy() + "\",\n  \"layout_hash\": \"" + hex(layoutHash(h)) + "\",\n  \"unit_layout_hash\": \"" +
         hex(unitLayoutHash(h)) + "\",\n  \"plan_hash\": \"" + hex(planHash) + "\",\n  \"files\": [" + files +
         "\n  ]\n}\n";
}

int64_t integerOr(const std::map<std::string, std::string> &metadata, const std::string &key, int64_t fallback) {
  auto it = metadata.find(key);
  if (it == metadata.end() || it->second.empty())
    return fallback;
  char *end = nullptr;
  long long value = std::strtoll(it->second.c_str(), &end, 10);
  return *end ? fallback : value;
}

/// Rank `rank`'s file of checkpoint `path`, its bytes read once: checked
/// against the size and hash its manifest records (checkpoints from before
/// the records load unchecked), then parsed.
StatusOr<NamedArrays> readCheckedRankFile(const std::string &path, int rank,
                                          std::map<std::string, std::string> &metadata) {
  const std::string file = path + "/rank-" + std::to_string(rank) + ".safetensors";
  StatusOr<std::string> manifest = readWholeFile(path + "/" + kManifest);
  if (!manifest.isOk())
    return manifest.status();
  StatusOr<std::string> bytes = readWholeFile(file);
  if (!bytes.isOk())
    return bytes.status();
  const std::string name = "\"name\": \"rank-" + std::to_string(rank) + ".safetensors\"";
  const size_t at = manifest->find(name);
  if (at == std::string::npos && manifest->find("\"fnv1a64\"") != std::string::npos)
    return FSDPC_ERROR(kDataLoss, "'", path, "/", kManifest, "' lists no file of rank ", rank);
  if (at != std::string::npos) {
    const std::string entry = manifest->substr(at, manifest->find('}', at) - at);
    const std::string bytesKey = "\"bytes\": ", hashKey = "\"fnv1a64\": \"";
    const size_t bytesAt = entry.find(bytesKey), hashAt = entry.find(hashKey);
    const uint64_t expectedBytes = bytesAt == std::string::npos
                                       ? ~uint64_t(0)
                                       : std::strtoull(entry.c_str() + bytesAt + bytesKey.size(), nullptr, 10);
    const std::string expectedHash = hashAt == std::string::npos ? "" : entry.substr(hashAt + hashKey.size(), 16);
    const std::string actualHash = hex(fnv1a64(bytes->data(), bytes->size()));
    if (bytes->size() != expectedBytes || actualHash != expectedHash)
      return FSDPC_ERROR(kDataLoss, "'", file, "' is not the file this checkpoint's manifest lists (", bytes->size(),
                         " bytes, hash ", actualHash, "; the manifest has ", expectedBytes, " bytes, hash ",
                         expectedHash, "): it belongs to another save or another rank");
  }
  return parseSafetensors(*bytes, file, &metadata);
}

/// Removes what killed saves left of this rank's files (`NAME.tmp.PID`,
/// from writeFileAtomically) in every checkpoint of `dir`; rank 0 also its
/// manifests' and `latest`'s. Only a rank's own names: another rank may be
/// writing its temporary file right now.
void removeLeftoverTemporaries(const std::string &dir, int rank) {
  const std::string own = "rank-" + std::to_string(rank) + ".safetensors.tmp.";
  auto removeIn = [&](const std::string &folder, bool checkpointFolder) {
    DIR *listing = ::opendir(folder.c_str());
    if (!listing)
      return;
    std::vector<std::string> names;
    while (dirent *entry = ::readdir(listing)) {
      const std::string name = entry->d_name;
      const bool mine = checkpointFolder ? name.rfind(own, 0) == 0 ||
                                               (rank == 0 && name.rfind(std::string(kManifest) + ".tmp.", 0) == 0)
                                         : rank == 0 && name.rfind("latest.tmp.", 0) == 0;
      if (mine)
        names.push_back(name);
    }
    ::closedir(listing);
    for (const std::string &name : names)
      std::remove((folder + "/" + name).c_str());
  };
  removeIn(dir, false);
  if (DIR *listing = ::opendir(dir.c_str())) {
    std::vector<std::string> steps;
    while (dirent *entry = ::readdir(listing))
      if (std::strncmp(entry->d_name, "step-", 5) == 0)
        steps.push_back(entry->d_name);
    ::closedir(listing);
    for (const std::string &step : steps)
      removeIn(dir + "/" + step, true);
  }
}

/// This rank's state for `h` cut from the checkpoint's first shard group:
/// unit tensors (flat parameter and optimizer-state shards) element by
/// element from the shards that cover them, zero in the padding; the rest
/// by name from rank 0's file.
StatusOr<NamedArrays> reshard(const std::string &path, const plan::PlanHeader &h, int rank,
                              const NamedArrays &first, const std::map<std::string, std::string> &metadata) {
  const int64_t oldGroup = integerOr(metadata, "shard_group_size", 0);
  if (oldGroup < 1)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' does not record its shard group size; it was written ",
                       "before checkpoints could reshard, so it loads only on its own world size");
  std::vector<NamedArrays> shards = {first};
  if (integerOr(metadata, "rank", -1) != 0)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "/rank-0.safetensors' does not hold the state of rank 0");
  for (int64_t q = 1; q < oldGroup; ++q) {
    std::string file = path + "/rank-" + std::to_string(q) + ".safetensors";
    std::map<std::string, std::string> own;
    StatusOr<NamedArrays> arrays = readCheckedRankFile(path, static_cast<int>(q), own);
    if (!arrays.isOk())
      return arrays.status();
    if (integerOr(own, "rank", -1) != q || own["completed_steps"] != metadata.at("completed_steps"))
      return FSDPC_ERROR(kInvalidArgument, "'", file, "' is not rank ", q, "'s file of the same save as rank 0's");
    shards.push_back(std::move(*arrays));
  }
  auto find = [](const NamedArrays &arrays, const std::string &name) -> const HostArray * {
    for (const auto &[key, array] : arrays)
      if (key == name)
        return &array;
    return nullptr;
  };
  const int64_t newGroup = std::max(h.shard_group_size(), 1), member = rank % newGroup;
  NamedArrays result;
  for (const plan::Tensor &tensor : h.tensors()) {
    if (!isCheckpointedState(tensor))
      continue;
    const HostArray *source = find(shards[0], tensor.name());
    if (!source)
      return FSDPC_ERROR(kInvalidArgument, "'", path, "' holds no tensor '", tensor.name(), "'");
    if (tensor.unit().empty()) {
      result.emplace_back(tensor.name(), *source);
      continue;
    }
    const plan::Unit *unit = nullptr;
    for (const plan::Unit &u : h.units())
      if (u.name() == tensor.unit())
        unit = &u;
    const int64_t oldShard = source->numElements(), newShard = numElements(tensor);
    if (!unit || source->dtype != tensor.dtype() || oldShard * oldGroup < unit->flat_size())
      return FSDPC_ERROR(kInvalidArgument, "'", path, "': tensor '", tensor.name(), "' does not fit unit '",
                         tensor.unit(), "'");
    const size_t bytes = dtypeSize(tensor.dtype());
    HostArray array = *source;
    array.shape = {newShard};
    array.bytes.assign(newShard * bytes, 0);
    // Elements [begin, end) of the flat tensor are this rank's; the padding
    // past flat_size stays zero.
    const int64_t begin = member * newShard, end = std::min(begin + newShard, unit->flat_size());
    for (int64_t e = begin; e < end;) {
      const int64_t q = e / oldShard, offset = e - q * oldShard, run = std::min(end - e, oldShard - offset);
      const HostArray *part = find(shards[q], tensor.name());
      if (!part || part->numElements() != oldShard)
        return FSDPC_ERROR(kInvalidArgument, "'", path, "/rank-", q, ".safetensors' has no shard '", tensor.name(),
                           "' of ", oldShard, " elements");
      std::memcpy(array.bytes.data() + (e - begin) * bytes, part->bytes.data() + offset * bytes, run * bytes);
      e += run;
    }
    result.emplace_back(tensor.name(), std::move(array));
  }
  return result;
}

} // namespace

Status saveShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                             int64_t completedSteps, uint64_t planHash, int64_t keepLast) {
  const plan::PlanHeader &h = executor.header();
  const std::string checkpoint = stepName(completedSteps), path = dir + "/" + checkpoint;
  Status written = makeDirectory(dir);
  if (written.isOk())
    written = makeDirectory(path);
  // A checkpoint of these steps saved before (a rerun): incomplete until
  // the new manifest lands. Rank 0 owns the manifest.
  if (written.isOk() && control.rank() == 0 && std::remove((path + "/" + kManifest).c_str()) != 0 && errno != ENOENT)
    written = FSDPC_ERROR(kDataLoss, "cannot replace '", path, "/", kManifest, "': ", std::strerror(errno));
  FSDPC_RETURN_IF_ERROR(agreeAllSucceeded(control, written, "creating the sharded checkpoint"));
  removeLeftoverTemporaries(dir, control.rank());
  StatusOr<NamedArrays> state = executor.localState();
  FileDigest mine; // of this rank's file, for the manifest
  if (!state.isOk())
    written = state.status();
  else
    written = writeSafetensors(*state, rankFile(dir, checkpoint, control.rank()),
                               {{"producer", "fsdp-run"},
                                {"plan_hash", hex(planHash)},
                                {"layout_hash", hex(layoutHash(h))},
                                {"unit_layout_hash", hex(unitLayoutHash(h))},
                                {"world_size", std::to_string(control.worldSize())},
                                {"shard_group_size", std::to_string(std::max(h.shard_group_size(), 1))},
                                {"strategy", h.strategy()},
                                {"rank", std::to_string(control.rank())},
                                {"completed_steps", std::to_string(completedSteps)},
                                // Step i reads global batch i, so the steps are the data position.
                                {"data_position_samples", std::to_string(completedSteps * h.global_batch())}},
                               &mine);
  FSDPC_RETURN_IF_ERROR(agreeAllSucceeded(control, written, "writing the sharded checkpoint"));
  std::vector<FileDigest> records(control.worldSize());
  FSDPC_RETURN_IF_ERROR(control.gatherBytesToFirst(&mine, control.rank() == 0 ? records.data() : nullptr,
                                                   sizeof(FileDigest), {control.worldSize(), 1}));
  // Every rank's file is on disk: the manifest, listing each with its size
  // and hash, makes the checkpoint complete, then `latest` names it, then
  // old ones go.
  Status published = Status::ok();
  if (control.rank() == 0) {
    const std::string manifest = manifestText(h, control.worldSize(), completedSteps, planHash, records);
    published = writeFileAtomically(path + "/" + kManifest, [&](FILE *file) {
      return writeBytes(file, manifest.data(), manifest.size(), path + "/" + kManifest);
    });
    if (published.isOk())
      published = writeFileAtomically(dir + "/latest", [&](FILE *file) {
        return writeBytes(file, (checkpoint + "\n").data(), checkpoint.size() + 1, dir + "/latest");
      });
    if (published.isOk() && keepLast > 0) {
      std::vector<int64_t> complete = completeCheckpoints(dir);
      for (size_t i = 0; published.isOk() && i + keepLast < complete.size(); ++i)
        published = removeCheckpoint(dir, complete[i]);
    }
  }
  return agreeAllSucceeded(control, published, "publishing the sharded checkpoint");
}

int64_t newestCompleteCheckpoint(const std::string &dir) {
  std::vector<int64_t> complete = completeCheckpoints(dir);
  return complete.empty() ? -1 : complete.back();
}

StatusOr<int64_t> loadShardedCheckpoint(const std::string &dir, Executor &executor, HostControl &control,
                                        uint64_t planHash) {
  int64_t completedSteps = 0;
  Status loaded = [&]() -> Status {
    const int64_t newest = newestCompleteCheckpoint(dir);
    if (newest < 0)
      return FSDPC_ERROR(kNotFound, "'", dir, "' holds no complete sharded checkpoint (no step-N/", kManifest, ")");
    const std::string checkpoint = stepName(newest), path = dir + "/" + checkpoint;
    const plan::PlanHeader &h = executor.header();
    const std::string layout = hex(layoutHash(h));
    // The same layout: this rank's own file.
    std::map<std::string, std::string> metadata;
    std::string own = rankFile(dir, checkpoint, control.rank());
    if (fileExists(own)) {
      StatusOr<NamedArrays> arrays = readCheckedRankFile(path, control.rank(), metadata);
      if (!arrays.isOk())
        return arrays.status();
      // A file copied over another rank's would load that rank's shards.
      if (metadata["rank"] != std::to_string(control.rank()))
        return FSDPC_ERROR(kInvalidArgument, "'", own, "' holds the state of rank ", metadata["rank"], ", not of rank ",
                           control.rank());
      if (metadata["world_size"] == std::to_string(control.worldSize()) && metadata["layout_hash"] == layout) {
        completedSteps = integerOr(metadata, "completed_steps", -1);
        if (completedSteps != newest)
          return FSDPC_ERROR(kInvalidArgument, "'", own, "' records ", metadata["completed_steps"],
                             " completed steps, not ", newest);
        return executor.loadLocalState(*arrays);
      }
    }
    // Another world size or strategy: reshard from the first shard group.
    std::string first = rankFile(dir, checkpoint, 0);
    metadata.clear();
    StatusOr<NamedArrays> arrays = readCheckedRankFile(path, 0, metadata);
    if (!arrays.isOk())
      return arrays.status();
    if (metadata["unit_layout_hash"] != hex(unitLayoutHash(h)))
      return FSDPC_ERROR(kInvalidArgument, "'", first, "' was saved by a plan with another state layout (units or ",
                         "optimizer state differ: layout hash ",
                         metadata.count("layout_hash") ? metadata["layout_hash"] : "none", ", this plan ", layout,
                         "); resume with a plan of the same model, wrap and optimizer");
    completedSteps = integerOr(metadata, "completed_steps", -1);
    if (completedSteps != newest)
      return FSDPC_ERROR(kInvalidArgument, "'", first, "' records ", metadata["completed_steps"],
                         " completed steps, not ", newest);
    StatusOr<NamedArrays> mine = reshard(path, h, control.rank(), *arrays, metadata);
    if (!mine.isOk())
      return mine.status();
    return executor.loadLocalState(*mine);
  }();
  FSDPC_RETURN_IF_ERROR(agreeAllSucceeded(control, loaded, "loading the sharded checkpoint"));
  return completedSteps;
}

namespace {

/// The parameter of `unit` that flat element ranges belong to, for naming
/// the pieces of a flat tensor.
std::string fullName(const plan::Tensor &tensor, const std::string &param) {
  return tensor.kind() == plan::OPTIMIZER_STATE ? "optimizer." + tensor.optimizer_slot() + "." + param : param;
}

const plan::Unit *unitNamed(const plan::PlanHeader &h, const std::string &name) {
  for (const plan::Unit &unit : h.units())
    if (unit.name() == name)
      return &unit;
  return nullptr;
}

std::string nonUnitName(const plan::Tensor &tensor) {
  return tensor.kind() == plan::STEP_COUNTER ? "optimizer.step" : tensor.name();
}

} // namespace

StatusOr<NamedArrays> consolidateCheckpoint(const std::string &dir, int64_t steps, const plan::PlanHeader &h,
                                            int64_t &completedSteps) {
  completedSteps = steps < 0 ? newestCompleteCheckpoint(dir) : steps;
  const std::string path = dir + "/" + stepName(completedSteps);
  if (completedSteps < 0 || !fileExists(path + "/" + kManifest))
    return FSDPC_ERROR(kNotFound, "'", dir, "' holds no complete sharded checkpoint",
                       steps < 0 ? "" : (" of step " + std::to_string(steps)).c_str());
  std::map<std::string, std::string> metadata;
  StatusOr<NamedArrays> first = readSafetensors(path + "/rank-0.safetensors", &metadata);
  if (!first.isOk())
    return first.status();
  if (metadata["unit_layout_hash"] != hex(unitLayoutHash(h)))
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' was saved by a plan with another state layout than this one");
  // A world of one rank holds everything: the reshard for it is the full state.
  plan::PlanHeader whole = h;
  whole.set_shard_group_size(1);
  for (plan::Tensor &tensor : *whole.mutable_tensors())
    if (!tensor.unit().empty() && isCheckpointedState(tensor)) {
      const plan::Unit *unit = unitNamed(h, tensor.unit());
      if (!unit)
        return FSDPC_ERROR(kInvalidArgument, "tensor '", tensor.name(), "' names no unit of the plan");
      tensor.clear_shape();
      tensor.add_shape(unit->flat_size());
    }
  StatusOr<NamedArrays> flat = reshard(path, whole, 0, *first, metadata);
  if (!flat.isOk())
    return flat.status();
  NamedArrays full;
  for (const auto &[name, array] : *flat) {
    const plan::Tensor *tensor = nullptr;
    for (const plan::Tensor &t : h.tensors())
      if (t.name() == name)
        tensor = &t;
    if (tensor->unit().empty()) {
      full.emplace_back(nonUnitName(*tensor), array);
      continue;
    }
    const size_t bytes = dtypeSize(array.dtype);
    for (const plan::UnitParam &param : unitNamed(h, tensor->unit())->params()) {
      HostArray piece = array;
      piece.shape.assign(param.shape().begin(), param.shape().end());
      piece.bytes.assign(array.bytes.begin() + param.offset() * bytes,
                         array.bytes.begin() + (param.offset() + piece.numElements()) * bytes);
      full.emplace_back(fullName(*tensor, param.name()), std::move(piece));
    }
  }
  return full;
}

Status writeCheckpointFromFull(const std::string &dir, const plan::PlanHeader &h, const NamedArrays &full,
                               int64_t completedSteps, uint64_t planHash) {
  std::map<std::string, const HostArray *> byName;
  for (const auto &[name, array] : full)
    byName[name] = &array;
  auto lookup = [&](const std::string &name, plan::DType dtype, std::vector<int64_t> shape) -> StatusOr<const HostArray *> {
    auto it = byName.find(name);
    if (it == byName.end())
      return FSDPC_ERROR(kInvalidArgument, "the full state has no tensor '", name, "'");
    if (it->second->dtype != dtype || it->second->shape != shape)
      return FSDPC_ERROR(kInvalidArgument, "the full state's tensor '", name, "' has another dtype or shape");
    return it->second;
  };
  const int world = static_cast<int>(h.world_size());
  const int64_t group = std::max(h.shard_group_size(), 1);
  const std::string checkpoint = stepName(completedSteps), path = dir + "/" + checkpoint;
  FSDPC_RETURN_IF_ERROR(makeDirectory(dir));
  FSDPC_RETURN_IF_ERROR(makeDirectory(path));
  if (std::remove((path + "/" + kManifest).c_str()) != 0 && errno != ENOENT)
    return FSDPC_ERROR(kDataLoss, "cannot replace '", path, "/", kManifest, "': ", std::strerror(errno));
  std::vector<FileDigest> records(world);
  for (int rank = 0; rank < world; ++rank) {
    NamedArrays state;
    for (const plan::Tensor &tensor : h.tensors()) {
      if (!isCheckpointedState(tensor))
        continue;
      std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
      if (tensor.unit().empty()) {
        StatusOr<const HostArray *> source = lookup(nonUnitName(tensor), tensor.dtype(), shape);
        if (!source.isOk())
          return source.status();
        state.emplace_back(tensor.name(), **source);
        continue;
      }
      const plan::Unit *unit = unitNamed(h, tensor.unit());
      if (!unit)
        return FSDPC_ERROR(kInvalidArgument, "tensor '", tensor.name(), "' names no unit of the plan");
      const size_t bytes = dtypeSize(tensor.dtype());
      const int64_t shard = numElements(tensor), begin = (rank % group) * shard;
      HostArray array = HostArray::f32({shard}, nullptr);
      array.dtype = tensor.dtype();
      array.bytes.assign(shard * bytes, 0);
      for (const plan::UnitParam &param : unit->params()) {
        std::vector<int64_t> paramShape(param.shape().begin(), param.shape().end());
        StatusOr<const HostArray *> source = lookup(fullName(tensor, param.name()), tensor.dtype(), paramShape);
        if (!source.isOk())
          return source.status();
        // The part of this parameter inside the rank's range of the flat tensor.
        const int64_t from = std::max(begin, param.offset()),
                      to = std::min(begin + shard, param.offset() + (*source)->numElements());
        if (from < to)
          std::memcpy(array.bytes.data() + (from - begin) * bytes,
                      (*source)->bytes.data() + (from - param.offset()) * bytes, (to - from) * bytes);
      }
      state.emplace_back(tensor.name(), std::move(array));
    }
    FSDPC_RETURN_IF_ERROR(writeSafetensors(state, rankFile(dir, checkpoint, rank),
                                           {{"producer", "fsdp-ckpt"},
                                            {"plan_hash", hex(planHash)},
                                            {"layout_hash", hex(layoutHash(h))},
                                            {"unit_layout_hash", hex(unitLayoutHash(h))},
                                            {"world_size", std::to_string(world)},
                                            {"shard_group_size", std::to_string(group)},
                                            {"strategy", h.strategy()},
                                            {"rank", std::to_string(rank)},
                                            {"completed_steps", std::to_string(completedSteps)},
                                            {"data_position_samples", std::to_string(completedSteps * h.global_batch())}},
                                           &records[rank]));
  }
  const std::string manifest = manifestText(h, world, completedSteps, planHash, records);
  FSDPC_RETURN_IF_ERROR(writeFileAtomically(path + "/" + kManifest, [&](FILE *file) {
    return writeBytes(file, manifest.data(), manifest.size(), path + "/" + kManifest);
  }));
  return writeFileAtomically(dir + "/latest", [&](FILE *file) {
    return writeBytes(file, (checkpoint + "\n").data(), checkpoint.size() + 1, dir + "/latest");
  });
}

} // namespace fsdpc::runtime
