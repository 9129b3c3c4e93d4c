//===- FuzzSafetensors.cpp - libFuzzer target: the safetensors reader ------===//
#include "FuzzInput.h"
#include "fsdpc/runtime/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::map<std::string, std::string> metadata;
  fsdpc::runtime::StatusOr<fsdpc::runtime::NamedArrays> read =
      fsdpc::runtime::readSafetensors(writeFuzzInput(data, size, ".safetensors"), &metadata);
  if (read.isOk())
    for (const auto &[name, array] : *read)
      if (array.bytes.size() != static_cast<size_t>(array.numElements()) * fsdpc::runtime::dtypeSize(array.dtype))
        __builtin_trap();
  return 0;
}
