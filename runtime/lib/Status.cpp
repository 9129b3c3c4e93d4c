#include "fsdpc/runtime/Status.h"

#include <cstring>

namespace fsdpc::runtime {

std::string Status::toString() const {
  if (isOk())
    return "ok";
  // Keep only the path from "runtime/" on: absolute build paths are noise.
  const char *shortFile = std::strstr(file_, "runtime/");
  return detail::concat(message_, " (", shortFile ? shortFile : file_, ":", line_, ")");
}

} // namespace fsdpc::runtime
