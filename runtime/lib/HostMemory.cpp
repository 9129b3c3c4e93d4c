//===- HostMemory.cpp - this host's name and free memory ------------------===//
#include "fsdpc/runtime/Device.h"

#include <unistd.h>

#include <cstdio>

namespace fsdpc::runtime {

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return "localhost";
  return name;
}

uint64_t hostMemoryAvailable() {
  std::FILE *meminfo = std::fopen("/proc/meminfo", "r");
  if (!meminfo)
    return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof(line), meminfo))
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
      break;
  std::fclose(meminfo);
  return static_cast<uint64_t>(kib) * 1024;
}

} // namespace fsdpc::runtime
