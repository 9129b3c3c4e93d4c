//===- HostArray.h - A typed n-d array in host memory -----------*- C++ -*-===//
#ifndef FSDPC_RUNTIME_HOSTARRAY_H
#define FSDPC_RUNTIME_HOSTARRAY_H

#include "plan.pb.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace fsdpc::runtime {

/// Bytes per element; 0 for a dtype this runtime does not know.
inline size_t dtypeSize(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
  case plan::I32:
    return 4;
  case plan::I64:
    return 8;
  case plan::BF16:
  case plan::F16:
    return 2;
  case plan::BOOL:
    return 1;
  default:
    return 0;
  }
}

/// Whether `dtype` is a float type kernels widen to f32 (bf16, f16).
inline bool isNarrowFloat(plan::DType dtype) { return dtype == plan::BF16 || dtype == plan::F16; }

/// Elements of a shape (1 for a scalar).
inline int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The bytes of `shape` at `elementBytes` each, or -1 when a dimension is
/// negative or the size would pass `limit` (what a file can hold). Untrusted
/// headers (.npy, safetensors, plans) are sized with this, before anything
/// is allocated, so a product that wraps around cannot pass a size check.
inline int64_t checkedByteSize(const std::vector<int64_t> &shape, int64_t elementBytes, int64_t limit) {
  int64_t bytes = elementBytes;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    if (d != 0 && bytes > limit / d)
      return -1;
    bytes *= d;
  }
  return bytes <= limit ? bytes : -1;
}

/// Row-major array; `bytes` holds the elements of `dtype` (f32 or i64).
struct HostArray {
  plan::DType dtype = plan::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numElements() const { return elementCount(shape); }
  template <typename T> T *data() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *data() const { return reinterpret_cast<const T *>(bytes.data()); }

  static HostArray f32(std::vector<int64_t> shape, const float *values) {
    return make(plan::F32, std::move(shape), values);
  }
  static HostArray i64(std::vector<int64_t> shape, const int64_t *values) {
    return make(plan::I64, std::move(shape), values);
  }

private:
  /// `values` (may be null: zeros) holds the elements of `dtype`.
  static HostArray make(plan::DType dtype, std::vector<int64_t> shape, const void *values) {
    HostArray a;
    a.dtype = dtype;
    a.shape = std::move(shape);
    a.bytes.resize(a.numElements() * dtypeSize(dtype));
    if (values)
      std::memcpy(a.bytes.data(), values, a.bytes.size());
    return a;
  }
};

/// The transpose of a 2-D f32 array (a MatMul operand and its nn.Linear
/// weight).
inline HostArray transposed2d(const HostArray &array) {
  const int64_t rows = array.shape[0], cols = array.shape[1];
  HostArray result = HostArray::f32({cols, rows}, nullptr);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      result.data<float>()[c * rows + r] = array.data<float>()[r * cols + c];
  return result;
}

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_HOSTARRAY_H
