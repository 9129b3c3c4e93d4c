//===- CompositePatterns.h - ONNX ops built from graph primitives -*- C++ -*-===//
#ifndef FSDPC_LIB_IMPORT_COMPOSITEPATTERNS_H
#define FSDPC_LIB_IMPORT_COMPOSITEPATTERNS_H

#include "ImportContext.h"

namespace fsdpc::import {

mlir::LogicalResult convertLeakyRelu(NodeImporter &n);
mlir::LogicalResult convertElu(NodeImporter &n);
mlir::LogicalResult convertSoftplus(NodeImporter &n);
mlir::LogicalResult convertMish(NodeImporter &n);
mlir::LogicalResult convertHardSigmoid(NodeImporter &n);
mlir::LogicalResult convertHardSwish(NodeImporter &n);
mlir::LogicalResult convertClip(NodeImporter &n);
/// Abs of a runtime float tensor.
mlir::LogicalResult convertRuntimeAbs(NodeImporter &n);
/// Min or Max of runtime float tensors, any number of them.
mlir::LogicalResult convertRuntimeMinMax(NodeImporter &n, bool isMax);
mlir::LogicalResult convertGlobalAveragePool(NodeImporter &n);
/// LRN (local response normalisation across channels) from squares,
/// channel slices and exp/log.
mlir::LogicalResult convertLrn(NodeImporter &n);
mlir::LogicalResult convertTile(NodeImporter &n);
mlir::LogicalResult convertScatterND(NodeImporter &n);
/// An integer scatter whose indices are constants: row r of the result
/// ([rows, inner] of the data's elements) is the data's row source[r] for
/// source[r] < rows, else the updates' row source[r] - rows, as one gather
/// from both concatenated. Sets output 0 in the data's shape.
mlir::LogicalResult scatterIntegerRows(NodeImporter &n, mlir::Value data, mlir::Value updates,
                                       llvm::ArrayRef<int64_t> source, int64_t inner);
/// GatherND of float data: its index tuples become rows of the data
/// flattened over the batch and indexed dimensions, then one gather.
mlir::LogicalResult convertGatherND(NodeImporter &n);
/// GatherElements of runtime float data along `axis` by int64 indices of
/// its rank.
mlir::LogicalResult convertRuntimeGatherElements(NodeImporter &n, mlir::Value data, mlir::Value indices, int64_t axis);
mlir::LogicalResult convertCumSum(NodeImporter &n);
/// ReduceSum of a runtime i64 tensor, exact.
mlir::LogicalResult convertIntegerReduceSum(NodeImporter &n);
enum class ComposedReduction { kMax, kMin, kSumSquare, kL1, kL2, kLogSum, kLogSumExp, kProd };
mlir::LogicalResult convertComposedReduction(NodeImporter &n, ComposedReduction kind);
template <ComposedReduction Kind> mlir::LogicalResult convertReduction(NodeImporter &n) {
  return convertComposedReduction(n, Kind);
}
/// ReduceProd: integer constants fold (a shape's element count); float
/// tensors are products of halves.
mlir::LogicalResult convertReduceProd(NodeImporter &n);
mlir::LogicalResult convertMeanVarianceNormalization(NodeImporter &n);
mlir::LogicalResult convertLpNormalization(NodeImporter &n);
mlir::LogicalResult convertBatchNormalization(NodeImporter &n);
mlir::LogicalResult convertInstanceNormalization(NodeImporter &n);
mlir::LogicalResult convertGroupNormalization(NodeImporter &n);
mlir::LogicalResult convertConv(NodeImporter &n);
mlir::LogicalResult convertConvTranspose(NodeImporter &n);
mlir::LogicalResult convertAveragePool(NodeImporter &n);
mlir::LogicalResult convertMaxPool(NodeImporter &n);
mlir::LogicalResult convertSoftsign(NodeImporter &n);
mlir::LogicalResult convertSelu(NodeImporter &n);
mlir::LogicalResult convertCelu(NodeImporter &n);
/// Sum or Mean of float tensors, any number of them, broadcast together.
mlir::LogicalResult convertVariadicSum(NodeImporter &n, bool mean);
mlir::LogicalResult convertHardmax(NodeImporter &n);
mlir::LogicalResult convertGlobalMaxPool(NodeImporter &n);
mlir::LogicalResult convertDepthToSpace(NodeImporter &n);
mlir::LogicalResult convertSpaceToDepth(NodeImporter &n);
mlir::LogicalResult convertPad(NodeImporter &n);
// LogicPatterns.cpp.
/// Equal, Greater, Less, GreaterOrEqual, LessOrEqual of runtime tensors.
mlir::LogicalResult convertRuntimeComparison(NodeImporter &n, graph::ComparePredicate predicate);
enum class LogicOp { kAnd, kOr, kXor, kNot };
/// And, Or, Xor, Not of runtime boolean tensors.
mlir::LogicalResult convertRuntimeLogic(NodeImporter &n, LogicOp op);
/// Where choosing between two runtime i64 tensors by an i64 mask (inputs
/// checked and broadcasting by the caller).
mlir::LogicalResult convertIntegerWhere(NodeImporter &n);
/// Cast of a runtime float tensor to bool: x != 0.
mlir::LogicalResult convertFloatToBool(NodeImporter &n);
mlir::LogicalResult convertIsInf(NodeImporter &n);
mlir::LogicalResult convertSign(NodeImporter &n);
mlir::LogicalResult convertThresholdedRelu(NodeImporter &n);
mlir::LogicalResult convertShrink(NodeImporter &n);
mlir::LogicalResult convertPRelu(NodeImporter &n);
/// OneHot of runtime integer indices: comparisons with the positions.
mlir::LogicalResult convertOneHot(NodeImporter &n);
/// TopK as K rounds of arg_max, each winner masked out of the next.
mlir::LogicalResult convertTopK(NodeImporter &n);
/// ScatterElements (and opset 9's Scatter) through a mask of the places
/// each index names.
mlir::LogicalResult convertScatterElements(NodeImporter &n);
// MathPatterns.cpp.
mlir::LogicalResult convertTan(NodeImporter &n);
mlir::LogicalResult convertAsin(NodeImporter &n);
mlir::LogicalResult convertAcos(NodeImporter &n);
mlir::LogicalResult convertSinh(NodeImporter &n);
mlir::LogicalResult convertCosh(NodeImporter &n);
mlir::LogicalResult convertAsinh(NodeImporter &n);
mlir::LogicalResult convertAcosh(NodeImporter &n);
mlir::LogicalResult convertAtanh(NodeImporter &n);
/// Mod of runtime float tensors: C's fmod with `truncated`, Python's
/// remainder (the divisor's sign) without.
mlir::LogicalResult convertRuntimeMod(NodeImporter &n, bool truncated);
// RecurrentPatterns.cpp.
mlir::LogicalResult convertLstm(NodeImporter &n);
mlir::LogicalResult convertGru(NodeImporter &n);
mlir::LogicalResult convertRnn(NodeImporter &n);
// EinsumPattern.cpp.
mlir::LogicalResult convertEinsum(NodeImporter &n);
// ResizePatterns.cpp.
mlir::LogicalResult convertResize(NodeImporter &n);
/// GridSample of a 4-D input: bilinear or nearest; zeros, border or
/// reflection padding.
mlir::LogicalResult convertGridSample(NodeImporter &n);
mlir::LogicalResult convertUpsample(NodeImporter &n);
// LossPatterns.cpp.
mlir::LogicalResult convertSoftmaxCrossEntropyLoss(NodeImporter &n);
mlir::LogicalResult convertNegativeLogLikelihoodLoss(NodeImporter &n);

} // namespace fsdpc::import

#endif // FSDPC_LIB_IMPORT_COMPOSITEPATTERNS_H
