#include "fsdpc/runtime/Communicator.h"

namespace fsdpc::runtime {

Status checkGroup(Group group, int worldSize) {
  if (group.size < 1 || group.stride < 1 || worldSize % (group.size * group.stride) != 0)
    return FSDPC_ERROR(kInvalidArgument, "a group of ", group.size, " ranks with stride ", group.stride,
                       " does not partition a world of ", worldSize);
  return Status::ok();
}

} // namespace fsdpc::runtime
