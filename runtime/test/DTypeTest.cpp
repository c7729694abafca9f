//===- DTypeTest.cpp - f16 / bf16 conversions against known bit patterns --===//

#include "fusion/runtime/DType.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

using namespace fusion::runtime;

namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(DTypeF16, KnownValues) {
  EXPECT_EQ(floatToF16(1.0f), 0x3C00);
  EXPECT_EQ(floatToF16(-2.0f), 0xC000);
  EXPECT_EQ(floatToF16(0.5f), 0x3800);
  EXPECT_EQ(floatToF16(0.0f), 0x0000);
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16(65504.0f), 0x7BFF);   // Largest finite.
  EXPECT_EQ(floatToF16(0x1p-14f), 0x0400);   // Smallest normal.
  EXPECT_EQ(floatToF16(0x1p-24f), 0x0001);   // Smallest subnormal.
  EXPECT_EQ(floatToF16(0x3FFp-24f), 0x03FF); // Largest subnormal.
  EXPECT_EQ(floatToF16(0.1f), 0x2E66);
  EXPECT_EQ(floatToF16(3.140625f), 0x4248);
}

TEST(DTypeF16, ToFloatExact) {
  EXPECT_EQ(f16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(f16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(f16ToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(f16ToFloat(0x0400), 0x1p-14f);
  EXPECT_EQ(f16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x8001), -0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x03FF), 0x3FFp-24f);
  EXPECT_EQ(floatBits(f16ToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(f16ToFloat(0x7C00), kInf);
  EXPECT_EQ(f16ToFloat(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7C01)));
}

TEST(DTypeF16, RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = f16ToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(f)))) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(floatToF16(f), h) << std::hex << bits;
  }
}

TEST(DTypeF16, RoundsTiesToEven) {
  // Between 1 (0x3C00) and 1 + 2^-10 (0x3C01): the tie goes to even 0x3C00.
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f), 0x3C00);
  // Between 0x3C01 and 0x3C02: the tie goes to even 0x3C02.
  EXPECT_EQ(floatToF16(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Just above / below the first tie.
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f - 0x1p-20f), 0x3C00);
  // Subnormal ties: 2^-25 (half the smallest subnormal) rounds to 0, 3*2^-25
  // to 2 * 2^-24, 2^-25 plus a bit to the smallest subnormal.
  EXPECT_EQ(floatToF16(0x1p-25f), 0x0000);
  EXPECT_EQ(floatToF16(-0x1p-25f), 0x8000);
  EXPECT_EQ(floatToF16(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(floatToF16(0x1p-25f * 1.0001f), 0x0001);
  EXPECT_EQ(floatToF16(0x1p-26f), 0x0000);
  // Rounding the largest subnormal up gives the smallest normal.
  EXPECT_EQ(floatToF16(0x3FFp-24f + 0x1p-25f), 0x0400);
  // A carry out of the mantissa bumps the exponent: 2 - 2^-12 -> 2.0.
  EXPECT_EQ(floatToF16(2.0f - 0x1p-12f), 0x4000);
}

TEST(DTypeF16, OverflowAndSpecials) {
  // 65520 is the tie between 65504 and 2^16: even is "2^16", i.e. inf.
  EXPECT_EQ(floatToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(floatToF16(65520.0f), 0x7C00);
  EXPECT_EQ(floatToF16(-65520.0f), 0xFC00);
  EXPECT_EQ(floatToF16(1e10f), 0x7C00);
  EXPECT_EQ(floatToF16(kInf), 0x7C00);
  EXPECT_EQ(floatToF16(-kInf), 0xFC00);
  const uint16_t nan = floatToF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_EQ(floatToF16(-std::numeric_limits<float>::quiet_NaN()) & 0x8000,
            0x8000);
  EXPECT_EQ(floatToF16(1e-30f), 0x0000);
}

TEST(DTypeF16, DoubleRoundsOnce) {
  // 1 + 2^-11 + 2^-40: above the tie, so 0x3C01. Rounding through float
  // first would lose the 2^-40 and land on the tie (-> 0x3C00).
  EXPECT_EQ(doubleToF16(1.0 + 0x1p-11 + 0x1p-40), 0x3C01);
  EXPECT_EQ(doubleToF16(65504.0), 0x7BFF);
  EXPECT_EQ(doubleToF16(1e300), 0x7C00);
  EXPECT_EQ(doubleToF16(1e-300), 0x0000);
  EXPECT_EQ(doubleToF16(std::numeric_limits<double>::denorm_min()), 0x0000);
}

TEST(DTypeBF16, KnownValues) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBF16(-2.0f), 0xC000);
  EXPECT_EQ(floatToBF16(0.0f), 0x0000);
  EXPECT_EQ(floatToBF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBF16(3.14159265f), 0x4049); // 0x40490FDB, round down.
  EXPECT_EQ(floatToBF16(bitsFloat(0x7F7F0000)), 0x7F7F); // Largest finite.
  EXPECT_EQ(floatToBF16(0x1p-126f), 0x0080);             // Smallest normal.
  EXPECT_EQ(floatToBF16(0x1p-133f), 0x0001);             // Smallest subnormal.
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0x0001), 0x1p-133f);
  EXPECT_EQ(bf16ToFloat(0x7F80), kInf);
  EXPECT_EQ(bf16ToFloat(0xFF80), -kInf);
  EXPECT_TRUE(std::isnan(bf16ToFloat(0x7FC0)));
}

TEST(DTypeBF16, RoundsTiesToEven) {
  EXPECT_EQ(floatToBF16(bitsFloat(0x3F808000)), 0x3F80); // tie -> even
  EXPECT_EQ(floatToBF16(bitsFloat(0x3F818000)), 0x3F82); // tie -> even
  EXPECT_EQ(floatToBF16(bitsFloat(0x3F808001)), 0x3F81); // above tie
  EXPECT_EQ(floatToBF16(bitsFloat(0x3F807FFF)), 0x3F80); // below tie
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(floatToBF16(1.0f + 3 * 0x1p-8f), 0x3F82);
  // Subnormal tie: half the smallest subnormal rounds to zero.
  EXPECT_EQ(floatToBF16(0x1p-134f), 0x0000);
  EXPECT_EQ(floatToBF16(3 * 0x1p-134f), 0x0002);
}

TEST(DTypeBF16, OverflowAndSpecials) {
  // FLT_MAX (0x7F7FFFFF) is above the tie 0x7F7F8000: rounds to inf.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(floatToBF16(bitsFloat(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(floatToBF16(bitsFloat(0x7F7F8000)), 0x7F80); // tie, odd -> inf
  EXPECT_EQ(floatToBF16(kInf), 0x7F80);
  EXPECT_EQ(floatToBF16(-kInf), 0xFF80);
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::quiet_NaN()), 0x7FC0);
  // A NaN whose payload sits only in the low bits must stay NaN, not inf.
  const uint16_t nan = floatToBF16(bitsFloat(0x7F800001));
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(doubleToBF16(1e300), 0x7F80);
  EXPECT_EQ(doubleToBF16(-1e300), 0xFF80);
}

TEST(DTypeBF16, RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = bf16ToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(f)))) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(floatToBF16(f), h) << std::hex << bits;
  }
}

// Every float rounds to one of its two neighbouring 16-bit values, the
// nearer one, ties to even: check that on a sweep of float patterns.
template <typename ToBits, typename ToFloat>
void checkNearest(ToBits toBits, ToFloat toFloatFn, float maxFinite) {
  for (uint32_t u = 0; u < 0x7F800000u; u += 0x1235) {
    const float f = bitsFloat(u);
    const uint16_t r = toBits(f);
    const float rf = toFloatFn(r);
    if (std::isinf(rf)) {
      EXPECT_GE(f, maxFinite) << std::hex << u;
      continue;
    }
    const float up = toFloatFn(static_cast<uint16_t>(r + 1));
    const float down = r == 0 ? 0.0f : toFloatFn(static_cast<uint16_t>(r - 1));
    const double err = std::fabs(static_cast<double>(f) - rf);
    EXPECT_LE(err, std::fabs(static_cast<double>(up) - f)) << std::hex << u;
    EXPECT_LE(err, std::fabs(static_cast<double>(down) - f)) << std::hex << u;
    // Negation is symmetric.
    EXPECT_EQ(toBits(-f), static_cast<uint16_t>(r | 0x8000)) << std::hex << u;
  }
}

TEST(DTypeSweep, F16IsNearest) {
  checkNearest(floatToF16, f16ToFloat, 65504.0f);
}

TEST(DTypeSweep, BF16IsNearest) {
  checkNearest(floatToBF16, bf16ToFloat, bitsFloat(0x7F7F0000));
}

TEST(DTypeGeneric, DispatchesOnDType) {
  EXPECT_EQ(fromFloat(DType::F16, 1.0f), 0x3C00);
  EXPECT_EQ(fromFloat(DType::BF16, 1.0f), 0x3F80);
  EXPECT_EQ(toFloat(DType::F16, 0x3C00), 1.0f);
  EXPECT_EQ(toFloat(DType::BF16, 0x3F80), 1.0f);
  EXPECT_EQ(fromDouble(DType::F16, 0.1), 0x2E66);
  EXPECT_EQ(roundToDType(DType::F16, 0.1f), f16ToFloat(0x2E66));
  EXPECT_EQ(dtypeName(DType::F16), "f16");
  EXPECT_EQ(dtypeName(DType::BF16), "bf16");
}

} // namespace
