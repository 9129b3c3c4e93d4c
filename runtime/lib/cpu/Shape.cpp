//===- Shape.cpp - shape and indexing kernels -------------------------------===//
#include "CpuKernels.h"
#include "../KernelChecks.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fsdpc::runtime::cpu {

Status concat(const KernelCall &call) {
  const TensorView &y = call.outputs[0];
  int64_t axis = call.intParam(contract::Param::kAxis, 0);
  if (axis < 0 || axis >= static_cast<int64_t>(y.shape.size()))
    return FSDPC_ERROR(kInvalidArgument, "concat: axis ", axis, " is out of range");
  size_t bytes = dtypeSize(y.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= y.shape[d];
  for (size_t d = axis + 1; d < y.shape.size(); ++d)
    inner *= y.shape[d];
  uint8_t *dst = static_cast<uint8_t *>(y.data);
  int64_t rowBytes = y.shape[axis] * inner * bytes, placed = 0;
  for (const TensorView &x : call.inputs) {
    int64_t chunk = x.shape[axis] * inner * bytes;
    const uint8_t *src = static_cast<const uint8_t *>(x.data);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * rowBytes + placed, src + o * chunk, chunk);
    placed += chunk;
  }
  return Status::ok();
}

Status slice(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  std::vector<int64_t> starts = call.intListParam(contract::Param::kStarts), steps = call.intListParam(contract::Param::kSteps);
  FSDPC_RETURN_IF_ERROR(checkSlice("slice", x.shape, y.shape, starts, steps));
  SliceMap map(x.shape, starts, steps);
  // Signed: a negative step walks back from `in`.
  const int64_t bytes = static_cast<int64_t>(dtypeSize(x.dtype));
  const uint8_t *src = static_cast<const uint8_t *>(x.data);
  uint8_t *dst = static_cast<uint8_t *>(y.data);
  forEachRow<1>(y.shape, {map.strides},
                [&](int64_t row, const std::array<int64_t, 1> &offsets, int64_t count, const std::array<int64_t, 1> &step) {
                  const uint8_t *in = src + (map.base + offsets[0]) * bytes;
                  uint8_t *out = dst + row * count * bytes;
                  if (step[0] == 1)
                    std::memcpy(out, in, count * bytes);
                  else
                    for (int64_t i = 0; i < count; ++i)
                      std::memcpy(out + i * bytes, in + i * step[0] * bytes, bytes);
                });
  return Status::ok();
}

Status sliceGrad(const KernelCall &call) {
  const TensorView &dy = call.inputs[0], &dx = call.outputs[0];
  std::vector<int64_t> starts = call.intListParam(contract::Param::kStarts), steps = call.intListParam(contract::Param::kSteps);
  FSDPC_RETURN_IF_ERROR(checkSlice("slice_grad", dx.shape, dy.shape, starts, steps));
  std::fill(dx.f32(), dx.f32() + dx.numElements(), 0.0f);
  SliceMap map(dx.shape, starts, steps);
  // A slice reads distinct elements, so rows scatter without conflicts.
  forEachRow<1>(dy.shape, {map.strides},
                [&](int64_t row, const std::array<int64_t, 1> &offsets, int64_t count, const std::array<int64_t, 1> &step) {
                  float *out = dx.f32() + map.base + offsets[0];
                  const float *in = dy.f32() + row * count;
                  for (int64_t i = 0; i < count; ++i)
                    out[i * step[0]] = in[i];
                });
  return Status::ok();
}

/// The shared layout (KernelChecks.h), then every index checked on the host.
Status checkedGatherLayout(const char *kernel, const std::vector<int64_t> &data, const TensorView &indices,
                           int64_t axis, GatherLayout &layout) {
  FSDPC_RETURN_IF_ERROR(gatherLayout(kernel, data, indices, axis, layout));
  for (int64_t j = 0; j < layout.count; ++j) {
    int64_t index = indices.i64()[j];
    if (index < -layout.rows || index >= layout.rows)
      return FSDPC_ERROR(kInvalidArgument, kernel, ": index ", index, " is outside [", -layout.rows, ", ",
                         layout.rows, ")");
  }
  return Status::ok();
}

Status gather(const KernelCall &call) {
  const TensorView &data = call.inputs[0], &indices = call.inputs[1], &out = call.outputs[0];
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(checkedGatherLayout("gather", data.shape, indices, call.intParam(contract::Param::kAxis, 0), g));
  size_t bytes = dtypeSize(data.dtype);
  const uint8_t *src = static_cast<const uint8_t *>(data.data);
  uint8_t *dst = static_cast<uint8_t *>(out.data);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < g.count; ++j) {
      int64_t index = indices.i64()[j];
      index += index < 0 ? g.rows : 0;
      std::memcpy(dst + ((o * g.count + j) * g.inner) * bytes, src + ((o * g.rows + index) * g.inner) * bytes,
                  g.inner * bytes);
    }
  return Status::ok();
}

Status gatherGrad(const KernelCall &call) {
  const TensorView &dy = call.inputs[0], &indices = call.inputs[1], &dx = call.outputs[0];
  GatherLayout g;
  FSDPC_RETURN_IF_ERROR(checkedGatherLayout("gather_grad", dx.shape, indices, call.intParam(contract::Param::kAxis, 0), g));
  std::fill(dx.f32(), dx.f32() + dx.numElements(), 0.0f);
  // Sequential over indices, so repeated indices add up in a fixed order.
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < g.count; ++j) {
      int64_t index = indices.i64()[j];
      index += index < 0 ? g.rows : 0;
      float *row = dx.f32() + (o * g.rows + index) * g.inner;
      const float *grad = dy.f32() + (o * g.count + j) * g.inner;
      for (int64_t k = 0; k < g.inner; ++k)
        row[k] += grad[k];
    }
  return Status::ok();
}

Status oneHot(const KernelCall &call) {
  const TensorView &labels = call.inputs[0], &out = call.outputs[0];
  if (labels.dtype != plan::I64 || out.dtype != plan::F32 || out.shape.size() != labels.shape.size() + 1 ||
      out.numElements() != labels.numElements() * out.shape.back())
    return FSDPC_ERROR(kInvalidArgument, "one_hot: int64 labels ", shapeString(labels.shape), " and f32 output ",
                       shapeString(out.shape), " do not match");
  const int64_t rows = labels.numElements(), depth = out.shape.back();
  const int64_t ignoreIndex = call.intParam(contract::Param::kIgnoreIndex, INT64_MIN);
  std::fill(out.f32(), out.f32() + out.numElements(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = labels.i64()[r];
    if (label == ignoreIndex)
      continue;
    if (label < 0 || label >= depth)
      return FSDPC_ERROR(kInvalidArgument, "one_hot: label ", label, " at position ", r, " is outside [0, ", depth,
                         ")");
    out.f32()[r * depth + label] = 1.0f;
  }
  return Status::ok();
}

Status argReduce(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  int64_t outer = 0, size = 0, inner = 0; // set by argReduceLayout; GCC cannot see it
  FSDPC_RETURN_IF_ERROR(argReduceLayout(call, outer, size, inner));
  if (x.dtype != plan::F32 && x.dtype != plan::I64)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": the CPU kernel takes an f32 or i64 input");
  const bool isMax = call.instruction->op() == "arg_max";
  const bool last = call.intParam(contract::Param::kSelectLastIndex, 0) != 0;
  int64_t *py = out.i64();
  auto reduce = [&](const auto *px) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < inner; ++k) {
        const auto *column = px + o * size * inner + k;
        int64_t best = 0;
        for (int64_t j = 1; j < size; ++j)
          if (argReduceReplaces(column[best * inner], column[j * inner], isMax, last))
            best = j;
        py[o * inner + k] = best;
      }
  };
  if (x.dtype == plan::F32)
    reduce(x.f32());
  else
    reduce(x.i64());
  return Status::ok();
}

Status trilu(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (x.shape.size() < 2 || x.numElements() != y.numElements())
    return FSDPC_ERROR(kInvalidArgument, "trilu: needs rank 2 or more and equal sizes");
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back(), k = call.intParam(contract::Param::kK, 0);
  bool upper = call.intParam(contract::Param::kUpper, 1);
  int64_t n = y.numElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = (i / cols) % rows, c = i % cols;
    bool keep = upper ? c - r >= k : c - r <= k;
    y.f32()[i] = keep ? x.f32()[i] : 0.0f;
  }
  return Status::ok();
}


namespace {

/// y = x permuted, for elements of type T: output rows in parallel, each
/// reading its input elements a fixed stride apart.
template <typename T>
void permute(const TensorView &x, const TensorView &y, const std::vector<int64_t> &permStrides) {
  const T *px = static_cast<const T *>(x.data);
  T *py = static_cast<T *>(y.data);
  forEachRow<1>(y.shape, {permStrides},
                [&](int64_t row, const std::array<int64_t, 1> &offset, int64_t count,
                    const std::array<int64_t, 1> &step) {
                  T *out = py + row * count;
                  const T *in = px + offset[0];
                  for (int64_t i = 0; i < count; ++i)
                    out[i] = in[i * step[0]];
                });
}

} // namespace

// Any dtype (the plan validator checked the perm and shapes): integer
// tensors are transposed too, as i64 after the device's widening.
Status transpose(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  std::vector<int64_t> perm = call.intListParam(contract::Param::kPerm);
  size_t rank = x.shape.size();
  if (perm.size() != rank)
    return FSDPC_ERROR(kInvalidArgument, "transpose: perm has ", perm.size(), " entries for rank ", rank);
  std::vector<int64_t> inStrides = stridesOf(x.shape), permStrides(rank);
  for (size_t d = 0; d < rank; ++d)
    permStrides[d] = inStrides[perm[d]];
  switch (dtypeSize(x.dtype)) {
  case 8:
    permute<int64_t>(x, y, permStrides);
    break;
  case 4:
    permute<float>(x, y, permStrides);
    break;
  case 2:
    permute<uint16_t>(x, y, permStrides);
    break;
  default:
    permute<uint8_t>(x, y, permStrides);
  }
  return Status::ok();
}

Status copy(const KernelCall &call) {
  const TensorView &x = call.inputs[0], &y = call.outputs[0];
  if (x.numElements() != y.numElements() || x.dtype != y.dtype)
    return FSDPC_ERROR(kInvalidArgument, "copy: ", shapeString(x.shape), " and ", shapeString(y.shape), " differ");
  std::memcpy(y.data, x.data, x.numElements() * dtypeSize(x.dtype));
  return Status::ok();
}

Status fill(const KernelCall &call) {
  float value = static_cast<float>(call.floatParam(contract::Param::kValue, 0.0));
  std::fill(call.outputs[0].f32(), call.outputs[0].f32() + call.outputs[0].numElements(), value);
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu
