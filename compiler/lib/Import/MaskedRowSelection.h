//===- MaskedRowSelection.h - Boolean row selection without NonZero -*- C++ -*-===//
//
// `x[mask].view(B, -1, H)[:, j]`, the selection a classification head makes
// with a boolean mask (BART's: each sample's last end-of-sequence token),
// exports as NonZero, whose shape depends on the data. When every group of
// the mask holds the same number of selected elements, as the model
// itself requires, the same values come from static shapes; this rewrites
// the ONNX graph so.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_LIB_IMPORT_MASKEDROWSELECTION_H
#define FSDPC_LIB_IMPORT_MASKEDROWSELECTION_H

#include "onnx/onnx_pb.h"

#include <cstdint>

namespace fsdpc::import {

/// Rewrites each chain
///
///   NonZero(mask) -> Transpose(perm [1, 0]) -> GatherND(x, .) ->
///   Reshape(., s) -> Gather(., j, axis 1)         j a constant scalar
///
/// whose intermediate values nothing else reads, into ops of static shape
/// that compute, per group g of the s[0] equal groups of the mask (and of
/// x's leading dimensions alike), x's row at the group's j-th selected
/// element (j < 0 counts from the last): the value the chain computes when
/// every group holds the same number of selected elements. A group without
/// a j-th one gives zeros (torch fails there). Opsets from 11 (CumSum).
void rewriteMaskedRowSelections(onnx::GraphProto &graph, int64_t opset);

} // namespace fsdpc::import

#endif // FSDPC_LIB_IMPORT_MASKEDROWSELECTION_H
