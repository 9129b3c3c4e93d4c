//===- NewerOnnxSchemas.h - ONNX op versions newer than libonnx -*- C++ -*-===//
#ifndef FSDPC_IMPORT_NEWERONNXSCHEMAS_H
#define FSDPC_IMPORT_NEWERONNXSCHEMAS_H

#include <cstdint>

namespace fsdpc::import {

/// The newest default-domain opset the importer accepts.
constexpr int64_t kNewestOnnxOpset = 21;
/// The newest ONNX IR version the importer accepts (IR 9 and 10 add only
/// element types fsdpc does not compute with).
constexpr int64_t kNewestOnnxIrVersion = 10;

/// Adds to libonnx's registry the versions of supported ops that opsets 18
/// to 21 introduced and libonnx 1.12 lacks. Idempotent.
void registerNewerOnnxSchemas();

} // namespace fsdpc::import

#endif // FSDPC_IMPORT_NEWERONNXSCHEMAS_H
