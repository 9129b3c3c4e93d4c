//===- HostDevice.h - functions both the CPU and CUDA backends compile -*- C++ -*-===//
//
// FSDPC_HOST_DEVICE marks an inline function that the CPU kernels and the
// CUDA kernels share, so that both backends compute the same thing from one
// definition (the learning-rate schedule, arg_max's tie and NaN rules).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_HOSTDEVICE_H
#define FSDPC_RUNTIME_HOSTDEVICE_H

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FSDPC_HOST_DEVICE __host__ __device__
#else
#define FSDPC_HOST_DEVICE
#endif

namespace fsdpc::runtime {

/// A float cast to an integer, truncated toward zero, defined for every
/// value: NaN, the infinities and anything outside int64 give INT64_MIN, as
/// x86's conversion (and so torch on the CPU) does. C++ leaves those
/// undefined and CUDA's conversion saturates, so the cast kernels of both
/// backends and the importer's constant folding use this one.
FSDPC_HOST_DEVICE inline int64_t truncateToInt64(double value) {
  if (value >= -9223372036854775808.0 && value < 9223372036854775808.0)
    return static_cast<int64_t>(value);
  return INT64_MIN;
}

/// Integer arithmetic of the kernels on i64 tensors (token ids, positions,
/// the last token's index that a classifier head computes), defined for
/// every operand: sums, differences and products wrap around as two's
/// complement (torch's integer tensors do; C++ leaves signed overflow
/// undefined), a quotient truncates toward zero as ONNX's Div and C's `/`,
/// and a division by zero gives 0 (as numpy, and the importer's folding of
/// constants; torch raises) instead of trapping the kernel.
enum class IntegerArithmetic { kAdd, kSub, kMul, kDiv };

FSDPC_HOST_DEVICE inline int64_t integerArithmetic(IntegerArithmetic op, int64_t a, int64_t b) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
  case IntegerArithmetic::kAdd:
    return static_cast<int64_t>(ua + ub);
  case IntegerArithmetic::kSub:
    return static_cast<int64_t>(ua - ub);
  case IntegerArithmetic::kMul:
    return static_cast<int64_t>(ua * ub);
  case IntegerArithmetic::kDiv:
    if (b == 0)
      return 0;
    if (b == -1) // INT64_MIN / -1 overflows: it wraps to INT64_MIN, as the negation does
      return static_cast<int64_t>(0 - ua);
    return a / b;
  }
  return 0;
}

/// An attention score from its product q . k: scale times it, or with a
/// softcap c > 0, c tanh(scale (q . k) / c), as Gemma 2 computes it (times
/// scale, over c, tanh, times c). Where `slope` is given, it gets the
/// score's derivative by the product: scale, or scale (1 - tanh^2), which
/// the backward kernels multiply dS by.
FSDPC_HOST_DEVICE inline float attentionScore(float product, float scale, float softcap, float *slope = nullptr) {
  if (softcap == 0.0f) {
    if (slope)
      *slope = scale;
    return product * scale;
  }
  const float t = tanhf(product * scale / softcap);
  if (slope)
    *slope = scale * (1.0f - t * t);
  return t * softcap;
}

/// A query row's softmax with an attention sink: a learned logit `sink` per
/// head that joins the row's denominator without a value (GPT-OSS), so
/// that a query may give every key little weight. Given the row's largest
/// score `rowMax` (-inf where every key is masked) and its sum of
/// exp(score - rowMax), returns the factor that turns sum_j exp(s_j -
/// rowMax) v_j into the output, and writes the row's logsumexp with the
/// sink in it, from which the gradient kernels recompute each probability
/// unchanged. A row without keys gets output 0 and logsumexp `sink`.
FSDPC_HOST_DEVICE inline float attentionSinkScale(float rowMax, float rowSum, float sink, float *lse) {
  const float top = fmaxf(rowMax, sink);
  const float kept = rowSum == 0.0f ? 0.0f : expf(rowMax - top); // the keys' part, rescaled to top
  const float total = rowSum * kept + expf(sink - top);
  *lse = top + logf(total);
  return kept / total;
}

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_HOSTDEVICE_H
