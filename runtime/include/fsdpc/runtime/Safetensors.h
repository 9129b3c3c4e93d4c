//===- Safetensors.h - The safetensors state-dict format --------*- C++ -*-===//
//
// An 8-byte little-endian header length, a JSON header mapping each tensor
// name to {dtype, shape, data_offsets}, then the raw little-endian data.
// This is the format torch users load with `safetensors.torch.load_file`.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_SAFETENSORS_H
#define FSDPC_RUNTIME_SAFETENSORS_H

#include "fsdpc/runtime/HostArray.h"
#include "fsdpc/runtime/Status.h"

#include <map>
#include <string>
#include <vector>

namespace fsdpc::runtime {

using NamedArrays = std::vector<std::pair<std::string, HostArray>>;

/// A file's size and the FNV-1a hash of its bytes: what a sharded
/// checkpoint's manifest records of each rank's file.
struct FileDigest {
  uint64_t bytes = 0;
  uint64_t fnv1a64 = 0;
};

/// Writes atomically. Names keep the order given. `digest`, if given,
/// receives the size and hash of the bytes written.
Status writeSafetensors(const NamedArrays &arrays, const std::string &path,
                        const std::map<std::string, std::string> &metadata = {}, FileDigest *digest = nullptr);
/// Reads F32, F64 (as f32), I64 and I32 (as i64) tensors, and the string
/// metadata into `metadata` if given.
StatusOr<NamedArrays> readSafetensors(const std::string &path, std::map<std::string, std::string> *metadata = nullptr);
/// The same from a file's bytes already in memory (`path` names it in
/// errors).
StatusOr<NamedArrays> parseSafetensors(const std::string &bytes, const std::string &path,
                                       std::map<std::string, std::string> *metadata = nullptr);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_SAFETENSORS_H
