//===- SinusoidalTable.h - Fixed sinusoidal position tables -----*- C++ -*-===//
//
// Marian's, Pegasus's and Whisper's encoders hold their position embeddings
// as a table of sines and cosines that torch never trains (requires_grad
// False). TorchScript exports keep no trainability, so the table arrives as
// an initializer like any weight; its values say what it is.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_LIB_IMPORT_SINUSOIDALTABLE_H
#define FSDPC_LIB_IMPORT_SINUSOIDALTABLE_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace fsdpc::import {

/// Whether `table` ([rows, width], row-major) holds in every column j either
/// sin(p w_j) or cos(p w_j) of its row p, for frequencies w_j in (0, pi),
/// with most columns varying (a table of zeros or ones is no such table).
/// The values may be float32 roundings of phases computed in float32 (up to
/// a few 1e-5 at phases near 1500).
bool isSinusoidalPositionTable(const std::vector<float> &table, llvm::ArrayRef<int64_t> shape);

} // namespace fsdpc::import

#endif // FSDPC_LIB_IMPORT_SINUSOIDALTABLE_H
