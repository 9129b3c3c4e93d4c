#include "fsdpc/runtime/Kernels.h"

namespace fsdpc::runtime {

DecodedParams decodeParams(const plan::Instruction &inst) {
  DecodedParams params;
  auto slot = [&](const std::string &name) -> ParamValue * {
    contract::Param id = contract::findParam(name);
    if (id == contract::Param::kCount)
      return nullptr;
    ParamValue &value = params[static_cast<size_t>(id)];
    value.present = true;
    return &value;
  };
  for (const auto &[name, v] : inst.int_attrs())
    if (ParamValue *p = slot(name))
      p->i = v;
  for (const auto &[name, v] : inst.float_attrs())
    if (ParamValue *p = slot(name))
      p->f = v;
  for (const auto &[name, v] : inst.int_list_attrs())
    if (ParamValue *p = slot(name))
      p->list.assign(v.values().begin(), v.values().end());
  for (const auto &[name, v] : inst.string_attrs())
    if (ParamValue *p = slot(name))
      p->s = v;
  return params;
}

} // namespace fsdpc::runtime
