//===- FuzzInput.h - one fuzz input as a file the readers open ---*- C++ -*-===//
//
// The readers under test take paths (as fsdp-run passes them), so each input
// is written to one file per process in /dev/shm (or /tmp) and read back.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_TEST_FUZZ_FUZZINPUT_H
#define FSDPC_TEST_FUZZ_FUZZINPUT_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

inline std::string writeFuzzInput(const uint8_t *data, size_t size, const char *suffix) {
  static const std::string path = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                                  "/fsdpc-fuzz-" + std::to_string(getpid()) + suffix;
  if (std::FILE *file = std::fopen(path.c_str(), "wb")) {
    if (size)
      std::fwrite(data, 1, size, file);
    std::fclose(file);
  }
  return path;
}

#endif // FSDPC_TEST_FUZZ_FUZZINPUT_H
