//===- AtomicFile.h - Crash-safe file writes --------------------*- C++ -*-===//
//
// Plans, state dicts and checkpoints are written to a temporary file in the
// destination folder, flushed, and renamed over the target, so a crash in the
// middle of a write leaves the previous file intact.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_ATOMICFILE_H
#define FSDPC_RUNTIME_ATOMICFILE_H

#include "fsdpc/runtime/Status.h"

#include <cstdio>
#include <functional>
#include <string>

namespace fsdpc::runtime {

/// Calls `writeBody` with an open FILE* on a temporary file next to `path`,
/// then fsyncs and renames it to `path`. A failing `writeBody` removes the
/// temporary file and leaves `path` untouched.
Status writeFileAtomically(const std::string &path, const std::function<Status(FILE *)> &writeBody);

/// fwrite that turns a short write into a Status naming `path`.
Status writeBytes(FILE *file, const void *data, size_t size, const std::string &path);

/// Reads a whole file.
StatusOr<std::string> readWholeFile(const std::string &path);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_ATOMICFILE_H
