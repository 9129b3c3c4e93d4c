//===- Float16.h - bf16 and f16 storage <-> f32 -----------------*- C++ -*-===//
//
// bf16 and f16 are storage types: values are widened to f32 to compute and
// rounded back to nearest, ties to even, on every store, as torch does on
// the CPU. NaNs stay NaNs (quiet); overflow rounds to infinity.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_FLOAT16_H
#define FSDPC_RUNTIME_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace fsdpc::runtime {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// bf16 is the upper half of an f32.
inline float bf16ToFloat(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep the sign, make it quiet
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Add half an ulp of bf16, plus one if the kept part is odd (ties to even).
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) // inf or NaN
    return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN
    return static_cast<uint16_t>(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) // rounds to a value past 65504: infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) { // below 2^-14: a subnormal (or zero) of f16
    // Scale so that one f16 subnormal ulp (2^-24) is 1, then round to even
    // in float arithmetic: exact, since the result fits in 11 bits.
    float scaled = bitsFloat(magnitude) * 16777216.0f;
    float rounded = scaled + 8388608.0f - 8388608.0f; // ties to even at 2^23
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(rounded));
  }
  // Normal: rebias the exponent, round the 13 dropped bits to even.
  uint32_t rebased = magnitude - (112u << 23);
  rebased += 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rebased >> 13));
}

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_FLOAT16_H
