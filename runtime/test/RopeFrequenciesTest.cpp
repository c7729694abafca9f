//===- RopeFrequenciesTest.cpp - the shared fp32 inv_freq table -----------===//
//
// Expected values are derived by hand: powers of the base that are exact in
// fp32, and Llama-3.1's three wavelength bands worked out on paper.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/RopeFrequencies.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace fusion::runtime;

TEST(RopeFrequencies, DefaultIsThetaToTheMinusTwoIOverD) {
  // theta 16, rotary_dim 8: exponents 0, 1/4, 1/2, 3/4 give powers 1, 2, 4,
  // 8, all exact in fp32.
  std::vector<float> inv = ropeInvFreqF32(16.0, 8);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_EQ(inv[0], 1.0f);
  EXPECT_EQ(inv[1], 0.5f);
  EXPECT_EQ(inv[2], 0.25f);
  EXPECT_EQ(inv[3], 0.125f);
  // theta 10000, rotary_dim 4: 1 and 1 / 10000^(1/2) = 1/100, correctly
  // rounded to the fp32 nearest 0.01.
  inv = ropeInvFreqF32(10000.0, 4);
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_EQ(inv[0], 1.0f);
  EXPECT_EQ(inv[1], 0.01f);
}

TEST(RopeFrequencies, PartialRotaryUsesTheRotaryDimension) {
  // theta 256: a whole head of 16 has exponents i/8 (256^(1/8) = 2), so
  // 1, 1/2, 1/4, ...; a rotary_dim of 8 has exponents i/4: 1, 1/4, 1/16,
  // 1/64.
  std::vector<float> whole = ropeInvFreqF32(256.0, 16);
  ASSERT_EQ(whole.size(), 8u);
  EXPECT_EQ(whole[1], 0.5f);
  EXPECT_EQ(whole[7], 1.0f / 128);
  std::vector<float> partial = ropeInvFreqF32(256.0, 8);
  ASSERT_EQ(partial.size(), 4u);
  EXPECT_EQ(partial[1], 0.25f);
  EXPECT_EQ(partial[3], 1.0f / 64);
}

TEST(RopeFrequencies, Llama3ScalesTheThreeBands) {
  // theta 256, rotary_dim 8: inv 1, 1/4, 1/16, 1/64, wavelengths 2 pi / inv
  // = 6.3, 25.1, 100.5, 402.1. original 64, low_freq_factor 1,
  // high_freq_factor 4: low wavelength 64, high wavelength 16.
  Llama3RopeScaling s{8.0, 1.0, 4.0, 64};
  std::vector<float> inv = ropeInvFreqF32(256.0, 8, s);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_EQ(inv[0], 1.0f); // 6.3 < 16: high frequency, kept
  // 16 <= 25.1 <= 64: smooth = (64 / 25.1 - 1) / (4 - 1) = (8/pi - 1) / 3,
  // inv = (1 - smooth) * (1/4) / 8 + smooth * (1/4).
  const double smooth = (8.0 / M_PI - 1.0) / 3.0;
  EXPECT_NEAR(inv[1], (1 - smooth) * 0.25 / 8 + smooth * 0.25, 1e-6);
  EXPECT_EQ(inv[2], 0.0625f / 8); // 100.5 > 64: low frequency, / factor
  EXPECT_EQ(inv[3], 0.015625f / 8);
  // Without scaling the same table is unchanged.
  EXPECT_EQ(ropeInvFreqF32(256.0, 8)[2], 0.0625f);
}
