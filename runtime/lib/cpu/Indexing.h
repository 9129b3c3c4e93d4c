//===- Indexing.h - shapes, strides and broadcasting ------------------------===//
//
// Index arithmetic the CPU kernels share: numpy broadcasting, row-major
// strides, loops over rows of a strided view, and splitting a shape around
// an axis.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CPU_INDEXING_H
#define FSDPC_RUNTIME_CPU_INDEXING_H

#include "fsdpc/runtime/Float16.h"
#include "fsdpc/runtime/HostDevice.h"
#include "fsdpc/runtime/Kernels.h"
#include "VectorMath.h"

#include <array>
#include <string>
#include <vector>

namespace fsdpc::runtime::cpu {

/// Element i of a float tensor of any float dtype, as f32.
inline float loadFloat(const TensorView &v, int64_t i) {
  switch (v.dtype) {
  case plan::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(v.data)[i]);
  case plan::F16:
    return halfToFloat(static_cast<const uint16_t *>(v.data)[i]);
  default:
    return v.f32()[i];
  }
}
/// Stores `value` as element i, rounding to nearest even for bf16 and f16.
inline void storeFloat(const TensorView &v, int64_t i, float value) {
  switch (v.dtype) {
  case plan::BF16:
    static_cast<uint16_t *>(v.data)[i] = floatToBf16(value);
    break;
  case plan::F16:
    static_cast<uint16_t *>(v.data)[i] = floatToHalf(value);
    break;
  default:
    v.f32()[i] = value;
  }
}
/// Element i of an integer or bool tensor, as i64.
inline int64_t loadInteger(const TensorView &v, int64_t i) {
  switch (v.dtype) {
  case plan::I32:
    return static_cast<const int32_t *>(v.data)[i];
  case plan::BOOL:
    return static_cast<const uint8_t *>(v.data)[i] != 0;
  default:
    return v.i64()[i];
  }
}
inline void storeInteger(const TensorView &v, int64_t i, int64_t value) {
  switch (v.dtype) {
  case plan::I32:
    static_cast<int32_t *>(v.data)[i] = static_cast<int32_t>(value);
    break;
  case plan::BOOL:
    static_cast<uint8_t *>(v.data)[i] = value != 0;
    break;
  default:
    v.i64()[i] = value;
  }
}

/// to = from, element by element, between any dtypes of the same count:
/// through f32 for floats (bf16 and f16 round to nearest even on the store)
/// and through i64 for integers; float to integer truncates. The cast kernel
/// and the CPU device's widening of narrow operands both use it.
inline void castElements(const TensorView &from, const TensorView &to) {
  const int64_t n = from.numElements();
  const bool floatIn = from.dtype == plan::F32 || isNarrowFloat(from.dtype);
  const bool floatOut = to.dtype == plan::F32 || isNarrowFloat(to.dtype);
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    if (floatIn && floatOut)
      storeFloat(to, i, loadFloat(from, i));
    else if (floatIn)
      storeInteger(to, i, truncateToInt64(loadFloat(from, i)));
    else if (floatOut)
      storeFloat(to, i, static_cast<float>(loadInteger(from, i)));
    else
      storeInteger(to, i, loadInteger(from, i));
  }
}


inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Strides of `shape` seen from an index space of `outShape` under numpy
/// broadcasting: 0 where `shape` broadcasts, missing leading dims included.
inline std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape, const std::vector<int64_t> &outShape) {
  size_t rank = outShape.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t dim = shape.size() - 1 - i;
    size_t outDim = rank - 1 - i;
    strides[outDim] = shape[dim] == 1 ? 0 : stride;
    stride *= shape[dim];
  }
  return strides;
}

inline bool broadcastsTo(const std::vector<int64_t> &shape, const std::vector<int64_t> &outShape) {
  if (shape.size() > outShape.size())
    return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[shape.size() - 1 - i], o = outShape[outShape.size() - 1 - i];
    if (d != o && d != 1)
      return false;
  }
  return true;
}

/// Calls body(outIndex, offsetA, offsetB) for every element of `outShape`.
template <typename Body>
void forEachBroadcast(const std::vector<int64_t> &outShape, const std::vector<int64_t> &stridesA,
                      const std::vector<int64_t> &stridesB, Body body) {
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  if (total == 0)
    return;
  size_t rank = outShape.size();
  if (rank == 0) {
    body(0, 0, 0);
    return;
  }
  int64_t inner = outShape[rank - 1];
  int64_t outer = total / inner;
  int64_t innerA = stridesA[rank - 1], innerB = stridesB[rank - 1];
#pragma omp parallel for if (total > kParallelThreshold)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rest = o, offA = 0, offB = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      int64_t idx = rest % outShape[d];
      rest /= outShape[d];
      offA += idx * stridesA[d];
      offB += idx * stridesB[d];
    }
    for (int64_t i = 0; i < inner; ++i)
      body(o * inner + i, offA + i * innerA, offB + i * innerB);
  }
}


/// Row-major strides of a shape, in elements.
inline std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Offset, under `strides`, of the element with row-major position `flat`
/// in `shape`.
inline int64_t offsetOf(int64_t flat, const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t offset = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    offset += (flat % shape[d]) * strides[d];
    flat /= shape[d];
  }
  return offset;
}

/// Calls body(row, offsets, count, steps) for each row (run along the last
/// dimension) of `shape`, in parallel: offsets[j] is where operand j's row
/// starts under strides[j], and steps[j] its stride along the row. The
/// div/mod work is per row, not per element.
template <size_t N, typename Body>
void forEachRow(const std::vector<int64_t> &shape, const std::array<std::vector<int64_t>, N> &strides, Body body) {
  int64_t total = elementCount(shape);
  if (total == 0)
    return;
  if (shape.empty()) {
    std::array<int64_t, N> offsets{}, steps{};
    body(0, offsets, 1, steps);
    return;
  }
  int64_t count = shape.back(), rows = total / count;
  std::vector<int64_t> outer(shape.begin(), shape.end() - 1);
  std::array<int64_t, N> steps;
  std::array<std::vector<int64_t>, N> outerStrides;
  for (size_t j = 0; j < N; ++j) {
    steps[j] = strides[j].back();
    outerStrides[j].assign(strides[j].begin(), strides[j].end() - 1);
  }
#pragma omp parallel for if (total > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    std::array<int64_t, N> offsets;
    for (size_t j = 0; j < N; ++j)
      offsets[j] = offsetOf(r, outer, outerStrides[j]);
    body(r, offsets, count, steps);
  }
}


/// Splits a shape around `axis` into [outer, axisSize, inner].
inline bool splitAroundAxis(const std::vector<int64_t> &shape, int64_t axis, int64_t &outer, int64_t &size, int64_t &inner) {
  int64_t rank = shape.size();
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return false;
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  size = shape[axis];
  return true;
}

/// Softmax-family kernels: `body(in..., out, count, stride)` runs on each
/// slice along the axis, with the slice's elements `stride` apart.
template <typename Body> Status alongAxis(const KernelCall &call, Body body) {
  int64_t outer, size, inner;
  if (!splitAroundAxis(call.outputs[0].shape, call.intParam(contract::Param::kAxis, -1), outer, size, inner))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": axis out of range");
#pragma omp parallel for collapse(2) if (outer * size * inner > kParallelThreshold)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      body(o * size * inner + i, size, inner);
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu

#endif // FSDPC_RUNTIME_CPU_INDEXING_H
