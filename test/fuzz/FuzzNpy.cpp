//===- FuzzNpy.cpp - libFuzzer target: the .npy reader ----------------------===//
#include "FuzzInput.h"
#include "fsdpc/runtime/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fsdpc::runtime::StatusOr<fsdpc::runtime::HostArray> read = fsdpc::runtime::readNpy(writeFuzzInput(data, size, ".npy"));
  // A file that reads must hold exactly the bytes its shape needs.
  if (read.isOk() && read->bytes.size() != static_cast<size_t>(read->numElements()) * 8 &&
      read->bytes.size() != static_cast<size_t>(read->numElements()) * 4)
    __builtin_trap();
  return 0;
}
