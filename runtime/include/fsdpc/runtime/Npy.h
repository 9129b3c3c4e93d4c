//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads C-order little-endian arrays of float32/float64 (as f32) and
// int32/int64 (as i64): what numpy.save writes for training data.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_NPY_H
#define FSDPC_RUNTIME_NPY_H

#include "fsdpc/runtime/HostArray.h"
#include "fsdpc/runtime/Status.h"

#include <string>

namespace fsdpc::runtime {

StatusOr<HostArray> readNpy(const std::string &path);
Status writeNpy(const HostArray &array, const std::string &path);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_NPY_H
