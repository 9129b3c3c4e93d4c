//===- FuzzPlan.cpp - libFuzzer target: the plan loader and validator -------===//
//
// readPlanFile checks the hash, then validatePlan; the hash would stop every
// mutation, so each input is also parsed as a plan whose hash is fixed up
// first (what a deliberate edit does), which exercises the validator.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "fsdpc/runtime/PlanFile.h"

#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace fsdpc::runtime;
  (void)readPlanFile(writeFuzzInput(data, size, ".plan"));
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
        (void)readPlanFile(writeFuzzInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), ".plan"));
      }
    }
  }
  return 0;
}
