// bf16 and f16 conversions: round trips over every bit pattern, and rounding
// to nearest even checked against the two neighbours of each value.
#include "fsdpc/runtime/Float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace fsdpc::runtime;

namespace {

TEST(Float16, EveryBf16RoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = bf16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(f)))) << bits;
    else
      EXPECT_EQ(floatToBf16(f), bits) << bits;
  }
}

TEST(Float16, EveryF16RoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = halfToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f)))) << bits;
    else
      EXPECT_EQ(floatToHalf(f), bits) << bits;
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  // Ties go to the even neighbour: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(65520.0f))));
  EXPECT_TRUE(std::isinf(bf16ToFloat(floatToBf16(std::numeric_limits<float>::max()))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
}

/// The representable neighbours of `x` below and above, found by walking
/// the narrow type's bit patterns: an independent reference for rounding.
template <typename ToFloat> void expectNearestEven(float x, uint16_t got, ToFloat toFloat) {
  double best = std::numeric_limits<double>::infinity();
  uint16_t bestBits = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    double v = toFloat(static_cast<uint16_t>(bits));
    if (std::isnan(v) || std::isinf(v))
      continue;
    double d = std::abs(v - static_cast<double>(x));
    if (d < best || (d == best && (bits & 1) == 0 && v != 0.0)) {
      best = d;
      bestBits = static_cast<uint16_t>(bits);
    }
  }
  EXPECT_EQ(toFloat(got), toFloat(bestBits)) << "x = " << x;
}

TEST(Float16, RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-30, 15), mantissa(1, 2);
  for (int i = 0; i < 300; ++i) {
    float x = std::ldexp(mantissa(rng), static_cast<int>(exponent(rng))) * (i % 2 ? -1.0f : 1.0f);
    expectNearestEven(x, floatToBf16(x), bf16ToFloat);
    if (std::abs(x) < 65504.0f)
      expectNearestEven(x, floatToHalf(x), halfToFloat);
  }
}

} // namespace
