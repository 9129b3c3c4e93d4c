//===- fsdp-ckpt.cpp - Sharded checkpoints to full state files and back ---===//
//
//   fsdp-ckpt consolidate PLAN DIR -o FULL.safetensors [--step N]
//   fsdp-ckpt shard PLAN FULL.safetensors -o DIR [--step N]
//
// consolidate writes a sharded checkpoint (the newest complete one, or step
// N) as one file of full tensors: parameters under their ONNX names,
// optimizer state as optimizer.<slot>.<parameter>, the step counter as
// optimizer.step. shard writes such a file back as a complete sharded
// checkpoint for PLAN's world size and strategy, which fsdp-run
// --load-sharded resumes. PLAN gives the units (any world size of the same
// model, wrap and optimizer). One process, no MPI.
//
//===----------------------------------------------------------------------===//
#include "fsdpc/runtime/Checkpoint.h"
#include "fsdpc/runtime/PlanFile.h"
#include "fsdpc/runtime/Safetensors.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace fsdpc::runtime;

namespace {

const char *kUsage = "usage: fsdp-ckpt consolidate PLAN DIR -o FULL.safetensors [--step N]\n"
                     "       fsdp-ckpt shard PLAN FULL.safetensors -o DIR [--step N]\n"
                     "  consolidate  a sharded checkpoint (newest complete, or step N) as one file of full\n"
                     "               parameters (ONNX names) and optimizer state (optimizer.<slot>.<name>)\n"
                     "  shard        such a file as a sharded checkpoint DIR/step-N for PLAN's world size\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "fsdp-ckpt: error: %s\n", message.c_str());
  return 1;
}
int fail(const Status &status) { return fail(status.message()); }

} // namespace

int main(int argc, char **argv) {
  std::string mode, planPath, input, output;
  int64_t step = -1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "-o" && i + 1 < argc) {
      output = argv[++i];
    } else if (arg == "--step" && i + 1 < argc) {
      char *end = nullptr;
      step = std::strtoll(argv[++i], &end, 10);
      if (*end || step < 0)
        return fail(std::string("--step expects a non-negative integer, got '") + argv[i] + "'");
    } else if (!arg.empty() && arg[0] == '-') {
      return fail("unknown option '" + arg + "'\n" + kUsage);
    } else if (mode.empty()) {
      mode = arg;
    } else if (planPath.empty()) {
      planPath = arg;
    } else if (input.empty()) {
      input = arg;
    } else {
      return fail("unexpected argument '" + arg + "'");
    }
  }
  if ((mode != "consolidate" && mode != "shard") || planPath.empty() || input.empty() || output.empty())
    return fail(std::string("expects a mode, a plan, an input and -o OUTPUT\n") + kUsage);
  StatusOr<PlanFile> plan = readPlanFile(planPath);
  if (!plan.isOk())
    return fail(plan.status());

  if (mode == "consolidate") {
    int64_t completed = 0;
    StatusOr<NamedArrays> full = consolidateCheckpoint(input, step, plan->header, completed);
    if (!full.isOk())
      return fail(full.status());
    Status written = writeSafetensors(*full, output,
                                      {{"producer", "fsdp-ckpt"}, {"completed_steps", std::to_string(completed)}});
    if (!written.isOk())
      return fail(written);
    std::printf("fsdp-ckpt: wrote %zu full tensors of step %" PRId64 " to %s\n", full->size(), completed,
                output.c_str());
    return 0;
  }
  std::map<std::string, std::string> metadata;
  StatusOr<NamedArrays> full = readSafetensors(input, &metadata);
  if (!full.isOk())
    return fail(full.status());
  if (step < 0) {
    char *end = nullptr;
    step = std::strtoll(metadata["completed_steps"].c_str(), &end, 10);
    if (metadata["completed_steps"].empty() || *end || step < 0)
      return fail("'" + input + "' records no completed_steps: pass --step N");
  }
  Status written = writeCheckpointFromFull(output, plan->header, *full, step, plan->contentHash);
  if (!written.isOk())
    return fail(written);
  std::printf("fsdp-ckpt: wrote a sharded checkpoint of step %" PRId64 " for %u rank(s) to %s\n", step,
              plan->header.world_size(), output.c_str());
  return 0;
}
