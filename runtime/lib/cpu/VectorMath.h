//===- VectorMath.h - straight-line math that vectorises --------------------===//
//
// Helpers the CPU kernels share: exp, the normal CDF and tanh written as
// straight-line arithmetic (libm's calls do not vectorise), and a sum over
// independent lanes.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CPU_VECTORMATH_H
#define FSDPC_RUNTIME_CPU_VECTORMATH_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fsdpc::runtime::cpu {

// Elementwise loops only pay for threads above this many elements.
constexpr int64_t kParallelThreshold = 1 << 15;

/// exp in straight-line arithmetic the compiler vectorises, unlike libm's:
/// Cephes' expf (reduction by ln 2 in two parts, a degree-6 polynomial,
/// within 2 ulp). Arguments below -87.3 give 0 (so exp(-inf) = 0, as
/// masked softmax positions need); above 88.3 they are clamped there. NaN
/// gives NaN: it fails both comparisons, so it takes the lower clamp here
/// (the conversion to int below is undefined for NaN) and is returned as
/// it came at the end.
inline float vectorExp(float argument) {
  const float x = argument >= -87.3f ? std::min(argument, 88.3f) : -87.3f;
  const float scaled = x * 1.44269504088896341f + 0.5f;
  int n = static_cast<int>(scaled);
  n -= static_cast<float>(n) > scaled; // floor, for negative arguments too
  const float fn = static_cast<float>(n);
  float r = x - fn * 0.693359375f;
  r += fn * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float power;
  std::memcpy(&power, &bits, sizeof(power));
  return argument < -87.3f ? 0.0f : argument != argument ? argument : p * power;
}

/// 1 + erf(x / sqrt 2), GELU's 2 Phi(x), to an absolute 1.5e-7: erfc of
/// |x| / sqrt 2 by Abramowitz and Stegun 7.1.26 on vectorExp, vectorisable
/// unlike libm's erf, and taken as 2 - erfc for x >= 0. GELU multiplies it
/// by x / 2, so its error stays below float rounding for x >= 0 and below
/// 1e-7 * |x| in the negative tail. (A relatively exact erfc fit costs 12%
/// more of a GPT step on 2 CPU cores; the graph.erf kernel keeps libm's erf.)
/// `gaussian` is exp(-x^2 / 2), which GELU's gradient needs as well.
inline float twiceNormalCdf(float x, float gaussian) {
  const float a = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float erfc = poly * gaussian;
  return x >= 0.0f ? 2.0f - erfc : erfc;
}

inline float vectorTanh(float u) { return 1.0f - 2.0f / (vectorExp(2.0f * u) + 1.0f); }

/// sum of term(0..n) in double, over eight independent lanes: the loop
/// vectorises and does not wait on one running sum's add latency.
template <typename Term> double laneSum(int64_t n, Term term) {
  double lanes[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k)
      lanes[k] += term(j + k);
  double total = 0;
  for (; j < n; ++j)
    total += term(j);
  for (int k = 0; k < 8; ++k)
    total += lanes[k];
  return total;
}


} // namespace fsdpc::runtime::cpu

#endif // FSDPC_RUNTIME_CPU_VECTORMATH_H
