//===- FuzzPlan.cpp - libFuzzer target: plan loader, validator and kernels -===//
//
// readPlanFile checks the hash, then validatePlan; the hash would stop every
// mutation, so each input is also parsed as a plan whose hash is fixed up
// first (what a deliberate edit does), which exercises the validator. A plan
// that validates is then run for one training step (and its forward pass)
// on the CPU device under ASan: after validation no kernel may read or write
// outside its operands, whatever the plan says.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "fsdpc/runtime/CpuDevice.h"
#include "fsdpc/runtime/Executor.h"
#include "fsdpc/runtime/PlanFile.h"

#include <cstring>
#include <string>

namespace {

using namespace fsdpc;
using namespace fsdpc::runtime;

/// Whether running `plan` stays small enough for a fuzz iteration: a
/// validated plan may still ask for long loops (a batch of 2^40 empty
/// matrices), which would be a timeout here rather than a finding.
bool smallEnoughToRun(const PlanFile &plan) {
  const plan::PlanHeader &h = plan.header;
  if (h.persistent_bytes() + h.transient_bytes() > (uint64_t(1) << 20) || h.instructions_size() > 4096)
    return false;
  for (const plan::Tensor &tensor : h.tensors()) {
    int64_t nonzero = 1;
    for (int64_t d : tensor.shape())
      if (d > 0 && (nonzero *= d) > (int64_t(1) << 18))
        return false;
  }
  return true;
}

void runOnce(PlanFile plan) {
  if (!smallEnoughToRun(plan))
    return;
  const bool forward = plan.header.has_forward_instructions();
  StatusOr<std::unique_ptr<Executor>> executor = Executor::create(std::move(plan), createCpuDevice());
  if (!executor.isOk())
    return;
  (void)(*executor)->runStep(1);
  if (forward)
    (void)(*executor)->runForwardPass(2);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (StatusOr<PlanFile> plan = readPlanFile(writeFuzzInput(data, size, ".plan")); plan.isOk())
    runOnce(std::move(*plan));
  // The same bytes with a correct content hash: [magic 8][version 4][pad 4]
  // [header length 8][hash 8][header][pad to 64][data].
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (bytes.size() >= 32) {
    uint64_t headerLength;
    std::memcpy(&headerLength, bytes.data() + 16, 8);
    if (headerLength <= bytes.size() - 32) {
      const uint64_t dataStart = (32 + headerLength + kSectionAlignment - 1) / kSectionAlignment * kSectionAlignment;
      if (dataStart <= bytes.size()) {
        uint64_t hash = fnv1a64(bytes.data() + 32, headerLength);
        hash = fnv1a64(bytes.data() + dataStart, bytes.size() - dataStart, hash);
        std::memcpy(bytes.data() + 24, &hash, 8);
        StatusOr<PlanFile> plan =
            readPlanFile(writeFuzzInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), ".plan"));
        if (plan.isOk())
          runOnce(std::move(*plan));
      }
    }
  }
  return 0;
}
