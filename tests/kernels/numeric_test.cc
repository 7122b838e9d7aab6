#include "kernels/numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace convtune {
namespace {

TEST(NumericTest, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = HalfToFloat(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), bits) << std::hex << h;
  }
}

TEST(NumericTest, HalfKnownValuesAndRounding) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToHalf(65504.f), 0x7bff);
  EXPECT_EQ(FloatToHalf(70000.f), 0x7c00);
  // 1 + 2^-11 is halfway between 1 and the next half: ties to even (1).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);
}

TEST(NumericTest, ConversionErrorIsWithinHalfAnUlp) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1000.f, 1000.f);
  for (int i = 0; i < 100000; ++i) {
    const float f = dist(rng);
    EXPECT_LE(std::fabs(HalfToFloat(FloatToHalf(f)) - f),
              std::fabs(f) * std::ldexp(1.0f, -11));
    EXPECT_LE(std::fabs(Bf16ToFloat(FloatToBf16(f)) - f),
              std::fabs(f) * std::ldexp(1.0f, -8));
  }
}

TEST(NumericTest, Bf16KnownValues) {
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_TRUE(std::isnan(
      Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace convtune
