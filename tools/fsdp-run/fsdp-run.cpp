//===- fsdp-run.cpp - Execute an fsdpc plan on this rank ------------------===//
//
//   fsdp-run plan.bin [--steps N] [--data DIR] [--metrics-json FILE]
//                     [--save FILE.safetensors] [--seed S]
//
//===----------------------------------------------------------------------===//
#include "fsdpc/runtime/Communicator.h"
#include "fsdpc/runtime/Dataset.h"
#include "fsdpc/runtime/Executor.h"
#include "fsdpc/runtime/PlanFile.h"
#include "fsdpc/runtime/Safetensors.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace fsdpc::runtime;
namespace plan = fsdpc::plan;

namespace {

constexpr int64_t kSyntheticSamples = 4096;

struct Options {
  std::string planPath;
  int64_t steps = 10;
  std::string dataDir;
  std::string metricsPath;
  std::string savePath;
  uint64_t seed = 0;
  bool help = false;
};

const char *kUsage = "usage: fsdp-run PLAN [--steps N] [--data DIR] [--metrics-json FILE] [--save FILE.safetensors] "
                     "[--seed S]\n";

bool parseInteger(const char *text, int64_t &value) {
  if (!*text)
    return false;
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text, &end, 10);
  if (*end || errno || parsed < 0)
    return false;
  value = parsed;
  return true;
}

Status parseOptions(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasInlineValue = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      hasInlineValue = true;
    }
    auto takeValue = [&](std::string &out) -> Status {
      if (hasInlineValue) {
        out = value;
        return Status::ok();
      }
      if (i + 1 >= argc)
        return FSDPC_ERROR(kInvalidArgument, arg, " expects a value");
      out = argv[++i];
      return Status::ok();
    };
    if (arg == "--steps" || arg == "--seed") {
      std::string text;
      FSDPC_RETURN_IF_ERROR(takeValue(text));
      int64_t parsed;
      if (!parseInteger(text.c_str(), parsed))
        return FSDPC_ERROR(kInvalidArgument, arg, " expects a non-negative integer, got '", text, "'");
      if (arg == "--steps")
        options.steps = parsed;
      else
        options.seed = static_cast<uint64_t>(parsed);
    } else if (arg == "--data") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.dataDir));
    } else if (arg == "--metrics-json") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.metricsPath));
    } else if (arg == "--save") {
      FSDPC_RETURN_IF_ERROR(takeValue(options.savePath));
    } else if (arg == "--help" || arg == "-h") {
      options.help = true;
      return Status::ok();
    } else if (arg.rfind("-", 0) == 0) {
      return FSDPC_ERROR(kInvalidArgument, "unknown option '", arg, "'");
    } else if (options.planPath.empty()) {
      options.planPath = arg;
    } else {
      return FSDPC_ERROR(kInvalidArgument, "unexpected argument '", arg, "'");
    }
  }
  if (options.planPath.empty())
    return FSDPC_ERROR(kInvalidArgument, "no plan file given");
  return Status::ok();
}

/// Set once the launch's ranks are known, so errors say which rank failed
/// and every rank leaves MPI together.
Communicator *communicator = nullptr;

int fail(const Status &status) {
  if (communicator && communicator->worldSize() > 1)
    std::fprintf(stderr, "fsdp-run: error: rank %d: %s\n", communicator->rank(), status.toString().c_str());
  else
    std::fprintf(stderr, "fsdp-run: error: %s\n", status.toString().c_str());
  if (communicator)
    communicator->finish();
  return 1;
}

int64_t countParameters(const plan::PlanHeader &header) {
  int64_t count = 0;
  for (const plan::Tensor &tensor : header.tensors())
    if (tensor.kind() == plan::PARAMETER)
      count += numElements(tensor);
  return count;
}

} // namespace

int main(int argc, char **argv) {
  StatusOr<std::unique_ptr<Communicator>> launched = createCommunicator(&argc, &argv);
  if (!launched.isOk())
    return fail(launched.status());
  communicator = launched->get();
  Options options;
  Status parsed = parseOptions(argc, argv, options);
  if (!parsed.isOk()) {
    std::fputs(kUsage, stderr);
    return fail(parsed);
  }
  if (options.help) {
    // Through finish(), not exit(): under mpirun every rank must leave MPI.
    std::fputs(kUsage, stdout);
    communicator->finish();
    return 0;
  }

  StatusOr<PlanFile> loaded = readPlanFile(options.planPath);
  if (!loaded.isOk())
    return fail(loaded.status());
  const uint64_t planHash = loaded->contentHash;
  StatusOr<std::unique_ptr<Executor>> created = Executor::create(std::move(*loaded));
  if (!created.isOk())
    return fail(created.status());
  Executor &executor = **created;
  const plan::PlanHeader &header = executor.header();
  const int rank = communicator->rank(), worldSize = communicator->worldSize();
  // Every rank sees the same sizes, so all refuse together, before any
  // collective could hang.
  if (header.world_size() != static_cast<uint32_t>(worldSize))
    return fail(FSDPC_ERROR(kInvalidArgument, "plan '", options.planPath, "' was compiled for world size ",
                            header.world_size(), " but this launch has ", worldSize, " rank(s)"));
  Status samePlan = communicator->agreeOn(planHash, "the plan's content hash");
  if (!samePlan.isOk())
    return fail(samePlan);

  StatusOr<std::unique_ptr<Dataset>> dataset =
      options.dataDir.empty() ? Dataset::synthetic(executor, options.seed, kSyntheticSamples)
                              : Dataset::fromNpyDirectory(options.dataDir, executor);
  if (!dataset.isOk())
    return fail(dataset.status());

  FILE *metrics = nullptr;
  const bool reports = rank == 0;
  if (reports && !options.metricsPath.empty()) {
    metrics = std::fopen(options.metricsPath.c_str(), "w");
    if (!metrics)
      return fail(FSDPC_ERROR(kInvalidArgument, "cannot write --metrics-json file '", options.metricsPath, "': ",
                              std::strerror(errno)));
  }

  if (reports)
    std::printf("fsdp-run: %s: %" PRId64 " parameters, world size %u, global batch %" PRId64
              ", %s, tensor memory %.1f MiB, data: %s\n",
              options.planPath.c_str(), countParameters(header), header.world_size(), header.global_batch(),
              header.optimizer().c_str(), executor.tensorBytes() / 1048576.0,
              options.dataDir.empty() ? "synthetic" : options.dataDir.c_str());
  for (int64_t step = 0; step < options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    Status filled = (*dataset)->fillBatch(executor, step, rank, worldSize);
    if (!filled.isOk())
      return fail(filled);
    StatusOr<float> loss = executor.runStep(step + 1);
    if (!loss.isOk())
      return fail(loss.status());
    if (worldSize > 1) {
      // Every rank's loss is the mean over its equal slice of the batch.
      Status reduced = communicator->allReduce(&*loss, 1, Reduction::kAvg, {worldSize, 1});
      if (!reduced.isOk())
        return fail(reduced);
    }
    double stepMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double samplesPerSecond = header.global_batch() / (stepMs / 1000.0);
    if (reports) {
      std::printf("step %" PRId64 " loss %.9g step_ms %.3f samples_per_s %.1f\n", step, *loss, stepMs,
                  samplesPerSecond);
      std::fflush(stdout);
    }
    if (metrics)
      std::fprintf(metrics,
                   "{\"step\": %" PRId64 ", \"loss\": %.9g, \"step_ms\": %.4f, \"samples_per_s\": %.2f, "
                   "\"peak_bytes\": %" PRIu64 ", \"rank\": %d}\n",
                   step, *loss, stepMs, samplesPerSecond, executor.tensorBytes(), rank);
  }
  if (metrics && std::fclose(metrics) != 0)
    return fail(FSDPC_ERROR(kDataLoss, "cannot write --metrics-json file '", options.metricsPath, "'"));

  if (reports && !options.savePath.empty()) {
    Status saved = writeSafetensors(executor.parameters(), options.savePath, {{"producer", "fsdp-run"}});
    if (!saved.isOk())
      return fail(saved);
    std::printf("fsdp-run: saved parameters to %s\n", options.savePath.c_str());
  }
  communicator->finish();
  return 0;
}
