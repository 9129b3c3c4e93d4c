//===- WeightStore.h - Parameter values kept outside the IR -----*- C++ -*-===//
//
// Parameters are referenced from the IR by name only (as IREE's external
// parameters are): printing a 4M-parameter model's IR should not print 16 MB
// of hex. The importer fills this store from the ONNX initializers and the
// plan writer copies each parameter's bytes into the plan.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_IMPORT_WEIGHTSTORE_H
#define FSDPC_IMPORT_WEIGHTSTORE_H

#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <vector>

namespace fsdpc {

struct WeightStore {
  /// Little-endian f32 values by ONNX initializer name.
  llvm::StringMap<std::vector<float>> values;
};

} // namespace fsdpc

#endif // FSDPC_IMPORT_WEIGHTSTORE_H
