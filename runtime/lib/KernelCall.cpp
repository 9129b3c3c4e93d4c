#include "fsdpc/runtime/Kernels.h"

namespace fsdpc::runtime {

double KernelCall::floatAttr(const std::string &name, double fallback) const {
  auto it = instruction->float_attrs().find(name);
  return it == instruction->float_attrs().end() ? fallback : it->second;
}

int64_t KernelCall::intAttr(const std::string &name, int64_t fallback) const {
  auto it = instruction->int_attrs().find(name);
  return it == instruction->int_attrs().end() ? fallback : it->second;
}

std::vector<int64_t> KernelCall::intListAttr(const std::string &name) const {
  auto it = instruction->int_list_attrs().find(name);
  if (it == instruction->int_list_attrs().end())
    return {};
  return {it->second.values().begin(), it->second.values().end()};
}

std::string KernelCall::stringAttr(const std::string &name, const std::string &fallback) const {
  auto it = instruction->string_attrs().find(name);
  return it == instruction->string_attrs().end() ? fallback : it->second;
}

} // namespace fsdpc::runtime
