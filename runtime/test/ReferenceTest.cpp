//===- ReferenceTest.cpp - CPU reference ops on hand-computed cases -------===//

#include "fusion/runtime/Reference.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"
#include "fusion/runtime/KVCacheManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace fusion::runtime;
using namespace fusion::runtime::ref;

namespace {

using Bits = std::vector<uint16_t>;

constexpr DType F16 = DType::F16;
constexpr DType BF16 = DType::BF16;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

Bits enc(DType dt, const std::vector<double> &values) {
  Bits out;
  for (double v : values)
    out.push_back(fromDouble(dt, v));
  return out;
}

std::vector<double> dec(DType dt, const Bits &bits) {
  std::vector<double> out;
  for (uint16_t b : bits)
    out.push_back(toFloat(dt, b));
  return out;
}

Bits randomBits(DType dt, size_t n, std::mt19937 &rng, double scale = 1.0) {
  std::normal_distribution<double> dist(0.0, scale);
  Bits out(n);
  for (auto &b : out)
    b = fromDouble(dt, dist(rng));
  return out;
}

/// One unit in the last place of `dt` at magnitude |v| (normal range).
double ulp(DType dt, double v) {
  const int mant = dt == F16 ? 10 : 7;
  return std::ldexp(1.0, std::ilogb(std::max(std::fabs(v), 1e-4)) - mant);
}

/// Expects `got` (bits) to be within `ulps` units in the last place of the
/// hand-computed `want` values.
void expectNear(DType dt, const Bits &got, const std::vector<double> &want,
                double ulps = 1.0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(toFloat(dt, got[i]), want[i], ulps * ulp(dt, want[i]))
        << "element " << i;
}

/// Max |a - b| over two bit arrays.
double maxAbsDiff(DType dt, const Bits &a, const Bits &b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(toFloat(dt, a[i])) -
                              toFloat(dt, b[i])));
  return m;
}

#define EXPECT_CONTAINS(str, sub)                                              \
  EXPECT_NE(std::string(str).find(sub), std::string::npos)                     \
      << "expected \"" << (sub) << "\" in: " << (str)

//===----------------------------------------------------------------------===//
// rmsnorm / layernorm
//===----------------------------------------------------------------------===//

TEST(RMSNorm, HandComputed) {
  for (DType dt : {F16, BF16}) {
    // [3, 4], w = 1: mean square 12.5.
    const Bits x = enc(dt, {3, 4}), w = enc(dt, {1, 1});
    Bits y(2);
    NormOptions opts;
    opts.eps = 1e-6;
    rmsnorm(dt, 1, 2, x.data(), nullptr, w.data(), y.data(), nullptr, opts);
    const double inv = 1.0 / std::sqrt(12.5 + 1e-6);
    expectNear(dt, y, {3 * inv, 4 * inv}, 0.5);
    EXPECT_EQ(y, enc(dt, {0.848528, 1.131371}));
  }
}

TEST(RMSNorm, WeightAndUnitOffset) {
  const Bits x = enc(F16, {3, 4}), w = enc(F16, {0.5, -1});
  Bits y(2);
  rmsnorm(F16, 1, 2, x.data(), nullptr, w.data(), y.data(), nullptr);
  const double inv = 1.0 / std::sqrt(12.5 + 1e-6);
  expectNear(F16, y, {1.5 * inv, -4 * inv}, 0.5);
  NormOptions gemma;
  gemma.unit_offset = true; // (1 + w) = {1.5, 0}
  rmsnorm(F16, 1, 2, x.data(), nullptr, w.data(), y.data(), nullptr, gemma);
  expectNear(F16, y, {4.5 * inv, 0.0}, 0.5);
}

TEST(RMSNorm, ResidualAdd) {
  for (DType dt : {F16, BF16}) {
    // h = x + r = [3, 4], normalised as above; h comes back as residual_out.
    const Bits x = enc(dt, {1, 2, 0.5, -8}), r = enc(dt, {2, 2, 2.5, 12});
    const Bits w = enc(dt, {1, 1});
    Bits y(4), h(4);
    rmsnorm(dt, 2, 2, x.data(), r.data(), w.data(), y.data(), h.data());
    EXPECT_EQ(h, enc(dt, {3, 4, 3, 4}));
    const double inv = 1.0 / std::sqrt(12.5 + 1e-6);
    expectNear(dt, y, {3 * inv, 4 * inv, 3 * inv, 4 * inv}, 0.5);
  }
  // h is rounded to the dtype before normalising: 1 + 2^-11 ties to 1 in f16.
  const Bits x = enc(F16, {1, 1}), r = enc(F16, {0x1p-11, 3 * 0x1p-11});
  const Bits w = enc(F16, {1, 1});
  Bits y(2), h(2);
  rmsnorm(F16, 1, 2, x.data(), r.data(), w.data(), y.data(), h.data());
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0x3C02);
}

TEST(RMSNorm, InPlaceResidualAndOutput) {
  std::mt19937 rng(1);
  const int64_t B = 3, H = 64;
  const Bits x = randomBits(F16, B * H, rng), r = randomBits(F16, B * H, rng);
  const Bits w = randomBits(F16, H, rng);
  Bits y(B * H), h(B * H);
  rmsnorm(F16, B, H, x.data(), r.data(), w.data(), y.data(), h.data());
  Bits xy = x, rh = r; // y over x, h over r (vLLM's in-place form).
  rmsnorm(F16, B, H, xy.data(), rh.data(), w.data(), xy.data(), rh.data());
  EXPECT_EQ(xy, y);
  EXPECT_EQ(rh, h);
}

TEST(RMSNorm, F16SquaresThatOverflowF16) {
  // 60000^2 = 3.6e9 and 65504^2 overflow f16 (max 65504) but not fp32: a
  // sum of squares in f16 would give inf and y = 0.
  const int64_t H = 4096;
  Bits x(2 * H), w(H, 0x3C00);
  for (int64_t i = 0; i < H; ++i) {
    x[i] = fromDouble(F16, i % 2 ? -60000.0 : 60000.0);
    x[H + i] = 0x7BFF; // 65504
  }
  Bits y(2 * H);
  rmsnorm(F16, 2, H, x.data(), nullptr, w.data(), y.data(), nullptr);
  for (int64_t i = 0; i < H; ++i) {
    EXPECT_EQ(y[i], i % 2 ? 0xBC00 : 0x3C00) << i;
    EXPECT_EQ(y[H + i], 0x3C00) << i;
  }
  // A single huge channel among small ones.
  Bits z(H, fromDouble(F16, 0.001)), yz(H);
  z[7] = fromDouble(F16, 50000.0);
  rmsnorm(F16, 1, H, z.data(), nullptr, w.data(), yz.data(), nullptr);
  const double ms =
      (50000.0 * 50000.0 +
       (H - 1) * std::pow(static_cast<double>(toFloat(F16, z[0])), 2)) /
      H;
  EXPECT_NEAR(toFloat(F16, yz[7]), 50000.0 / std::sqrt(ms), 0.05);
  EXPECT_TRUE(std::isfinite(toFloat(F16, yz[0])));
}

TEST(RMSNorm, BF16OutlierChannelAndZeroRow) {
  const int64_t H = 256;
  Bits x(2 * H, 0x3F80), w(H, 0x3F80), y(2 * H), y64(2 * H);
  x[5] = fromDouble(BF16, 3000.0);      // outlier channel in row 0
  std::fill(x.begin() + H, x.end(), 0); // row 1 all zeros
  rmsnorm(BF16, 2, H, x.data(), nullptr, w.data(), y.data(), nullptr);
  rmsnorm(BF16, 2, H, x.data(), nullptr, w.data(), y64.data(), nullptr, {},
          Precision::F64);
  const double inv = 1.0 / std::sqrt((3000.0 * 3000.0 + (H - 1)) / H + 1e-6);
  EXPECT_NEAR(toFloat(BF16, y[5]), 3000.0 * inv, ulp(BF16, 3000 * inv));
  EXPECT_NEAR(toFloat(BF16, y[0]), inv, ulp(BF16, inv));
  for (int64_t i = H; i < 2 * H; ++i)
    EXPECT_EQ(y[i], 0) << "zero row must give zeros, not NaN";
  EXPECT_LE(maxAbsDiff(BF16, y, y64), ulp(BF16, 3000 * inv));
}

TEST(RMSNorm, F32MatchesF64WithinRounding) {
  std::mt19937 rng(2);
  for (DType dt : {F16, BF16}) {
    const int64_t B = 4, H = 3584;
    const Bits x = randomBits(dt, B * H, rng, 3.0), w = randomBits(dt, H, rng);
    Bits y32(B * H), y64(B * H);
    rmsnorm(dt, B, H, x.data(), nullptr, w.data(), y32.data(), nullptr);
    rmsnorm(dt, B, H, x.data(), nullptr, w.data(), y64.data(), nullptr, {},
            Precision::F64);
    int differ = 0;
    for (int64_t i = 0; i < B * H; ++i) {
      const double a = toFloat(dt, y32[i]), b = toFloat(dt, y64[i]);
      EXPECT_LE(std::fabs(a - b), ulp(dt, b)) << i;
      differ += y32[i] != y64[i];
    }
    EXPECT_LT(differ, B * H / 50); // Only near-ties may round differently.
  }
}

TEST(RMSNorm, Errors) {
  const Bits x = enc(F16, {1, 2}), w = enc(F16, {1, 1});
  Bits y(2), h(2);
  EXPECT_THROW(
      rmsnorm(F16, 0, 2, x.data(), nullptr, w.data(), y.data(), nullptr),
      InvalidArgumentError);
  EXPECT_THROW(
      rmsnorm(F16, 1, 2, x.data(), nullptr, nullptr, y.data(), nullptr),
      InvalidArgumentError);
  try {
    rmsnorm(F16, 1, 2, x.data(), nullptr, w.data(), y.data(), h.data());
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgumentError &e) {
    EXPECT_CONTAINS(e.what(), "rmsnorm");
    EXPECT_CONTAINS(e.what(), "residual_out");
  }
}

TEST(LayerNorm, HandComputed) {
  // mean 2.5, biased variance 1.25.
  const Bits x = enc(F16, {1, 2, 3, 4});
  const Bits w = enc(F16, {1, 2, 1, 0.5}), b = enc(F16, {0, 1, -1, 0.25});
  Bits y(4);
  NormOptions opts;
  opts.eps = 1e-5;
  const double inv = 1.0 / std::sqrt(1.25 + 1e-5);
  layernorm(F16, 1, 4, x.data(), nullptr, nullptr, nullptr, y.data(), nullptr,
            opts);
  expectNear(F16, y, {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv}, 0.5);
  layernorm(F16, 1, 4, x.data(), nullptr, w.data(), b.data(), y.data(), nullptr,
            opts);
  expectNear(F16, y,
             {-1.5 * inv, -1.0 * inv + 1, 0.5 * inv - 1, 0.75 * inv + 0.25},
             0.5);
  // Residual: h = x + r.
  const Bits x2 = enc(F16, {0, 0, 0, 0});
  Bits h(4);
  layernorm(F16, 1, 4, x2.data(), x.data(), nullptr, nullptr, y.data(),
            h.data(), opts);
  EXPECT_EQ(h, x);
  expectNear(F16, y, {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv}, 0.5);
  // A constant row has zero variance: (x - mean) = 0, no NaN.
  const Bits c = enc(F16, {7, 7, 7, 7});
  layernorm(F16, 1, 4, c.data(), nullptr, w.data(), b.data(), y.data(), nullptr,
            opts);
  EXPECT_EQ(y, b);
}

//===----------------------------------------------------------------------===//
// qkv_proj
//===----------------------------------------------------------------------===//

TEST(QKVProj, HandComputedWithBias) {
  // H = 2, Hq = Hkv = 1, D = 1: rows q, k, v.
  const Bits x = enc(F16, {2, 3});
  const Bits W = enc(F16, {1, 0, /**/ 0, 1, /**/ 1, 1});
  const Bits bias = enc(F16, {0.5, 0, -1});
  Bits q(1), k(1), v(1);
  qkvProj(F16, 1, 2, {1, 1, 1}, x.data(), W.data(), bias.data(), q.data(),
          k.data(), v.data());
  EXPECT_EQ(dec(F16, q), (std::vector<double>{2.5}));
  EXPECT_EQ(dec(F16, k), (std::vector<double>{3}));
  EXPECT_EQ(dec(F16, v), (std::vector<double>{4}));
  qkvProj(F16, 1, 2, {1, 1, 1}, x.data(), W.data(), nullptr, q.data(), k.data(),
          v.data());
  EXPECT_EQ(dec(F16, q), (std::vector<double>{2}));
  EXPECT_EQ(dec(F16, v), (std::vector<double>{5}));
}

//===----------------------------------------------------------------------===//
// linear / siluMul / embedding
//===----------------------------------------------------------------------===//

TEST(Linear, HandComputed) {
  // x [2, 3], W [2, 3]: y = x W^T.
  const Bits x = enc(F16, {1, 2, 3, /**/ -1, 0.5, 4});
  const Bits W = enc(F16, {1, 0, -1, /**/ 0.25, 0.25, 0.25});
  Bits y(4);
  linear(F16, 2, 3, 2, x.data(), W.data(), y.data());
  EXPECT_EQ(dec(F16, y), (std::vector<double>{-2, 1.5, -5, 0.875}));
}

TEST(Linear, Errors) {
  Bits x(4), W(4), y(4);
  EXPECT_THROW(linear(F16, 0, 2, 2, x.data(), W.data(), y.data()),
               InvalidArgumentError);
  EXPECT_THROW(linear(F16, 2, 2, 2, x.data(), nullptr, y.data()),
               InvalidArgumentError);
}

TEST(SiluMul, HandComputed) {
  // gate/up rows: silu(0) * 5 = 0; silu(2) * 1 = 2 / (1 + e^-2);
  // silu(-1) * -2 = 2 / (1 + e).
  const Bits gateUp = enc(F16, {0, 2, -1, /**/ 5, 1, -2});
  Bits y(3);
  siluMul(F16, 1, 3, gateUp.data(), y.data());
  expectNear(F16, y, {0, 2 / (1 + std::exp(-2.0)), 2 / (1 + std::exp(1.0))},
             0.5);
  siluMul(BF16, 1, 3, enc(BF16, {0, 2, -1, 5, 1, -2}).data(), y.data(),
          Precision::F64);
  expectNear(BF16, y, {0, 2 / (1 + std::exp(-2.0)), 2 / (1 + std::exp(1.0))},
             0.5);
}

TEST(Embedding, CopiesRowsAndRejectsOutOfRangeTokens) {
  const Bits table = enc(BF16, {1, 2, /**/ 3, 4, /**/ 5, 6});
  const std::vector<int32_t> tokens = {2, 0, 2};
  Bits y(6, 0xFFFF);
  embedding(3, 3, 2, table.data(), tokens.data(), y.data());
  EXPECT_EQ(dec(BF16, y), (std::vector<double>{5, 6, 1, 2, 5, 6}));
  const std::vector<int32_t> bad = {1, 3};
  Bits untouched(4, 0x1234);
  try {
    embedding(2, 3, 2, table.data(), bad.data(), untouched.data());
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError &e) {
    EXPECT_CONTAINS(e.what(), "row 1: token 3 is outside [0, 3)");
  }
  EXPECT_EQ(untouched, Bits(4, 0x1234));
}

TEST(Argmax, TiesNaNAndInfinities) {
  // Rows: a tie (lowest index wins), NaN first (skipped), -0 vs +0 (equal,
  // so the first), all NaN (0), +inf.
  const Bits logits =
      enc(F16, {1,    3,    3,     2,        /**/ kNaN, -5,        -7,
                kNaN, -0.0, 0.0,   -1,       -2,        /**/ kNaN, kNaN,
                kNaN, kNaN, 65504, INFINITY, -INFINITY, 1});
  std::vector<int32_t> out(5, -1);
  argmax(F16, 5, 4, logits.data(), out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, 0, 0, 1}));
  EXPECT_THROW(argmax(F16, 1, 0, logits.data(), out.data()),
               InvalidArgumentError);
}

TEST(QKVProj, PackedLayoutMapping) {
  // B = 2, H = 3, Hq = 4, Hkv = 2 (group 2), D = 2: 16 rows. Row n of W is
  // e_(n % 3) * (n + 1), so out[b, n] = x[b, n % 3] * (n + 1), exact.
  const AttentionDims dims{4, 2, 2};
  const int64_t B = 2, H = 3, N = dims.qkvRows();
  ASSERT_EQ(N, 16);
  std::vector<double> wv(N * H, 0.0);
  for (int64_t n = 0; n < N; ++n)
    wv[n * H + n % H] = n + 1;
  const Bits W = enc(BF16, wv);
  const Bits x = enc(BF16, {1, 2, 3, -1, -2, -3});
  Bits q(B * 4 * 2), k(B * 2 * 2), v(B * 2 * 2);
  qkvProj(BF16, B, H, dims, x.data(), W.data(), nullptr, q.data(), k.data(),
          v.data());
  auto want = [&](int64_t b, int64_t n) {
    return toFloat(BF16, x[b * H + n % H]) * (n + 1);
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t d = 0; d < 2; ++d)
        EXPECT_EQ(toFloat(BF16, q[(b * 4 + h) * 2 + d]), want(b, h * 2 + d));
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 2; ++d) {
        EXPECT_EQ(toFloat(BF16, k[(b * 2 + h) * 2 + d]),
                  want(b, 8 + h * 2 + d));
        EXPECT_EQ(toFloat(BF16, v[(b * 2 + h) * 2 + d]),
                  want(b, 12 + h * 2 + d));
      }
  }
  // Spot values by hand: q[1, 0, 1] = x[1, 1] * 2 = -4; v[0, 1, 1] = row 15
  // = x[0, 0] * 16 = 16.
  EXPECT_EQ(toFloat(BF16, q[8 + 1]), -4.0f);
  EXPECT_EQ(toFloat(BF16, v[3]), 16.0f);
}

TEST(QKVProj, AccumulatesInFp32) {
  // Partial sums 60000 + 60000 overflow f16; the fp32 sum is exact.
  const Bits x = enc(F16, {60000, 60000, -60000, 1});
  const Bits W = enc(F16, {1, 1, 1, 0, /**/ 1, 0, 0, 0, /**/ 0, 0, 0, 1});
  Bits q(1), k(1), v(1);
  qkvProj(F16, 1, 4, {1, 1, 1}, x.data(), W.data(), nullptr, q.data(), k.data(),
          v.data());
  EXPECT_EQ(toFloat(F16, q[0]), 60000.0f);
  EXPECT_EQ(toFloat(F16, k[0]), 60000.0f);
  EXPECT_EQ(toFloat(F16, v[0]), 1.0f);
}

TEST(QKVProj, F32MatchesF64) {
  std::mt19937 rng(3);
  const AttentionDims dims{5, 1, 64}; // group size 5
  const int64_t B = 3, H = 320;
  const Bits x = randomBits(F16, B * H, rng);
  const Bits W = randomBits(F16, dims.qkvRows() * H, rng, 0.05);
  const Bits bias = randomBits(F16, dims.qkvRows(), rng);
  Bits q32(B * 5 * 64), k32(B * 64), v32(B * 64), q64(q32), k64(k32), v64(v32);
  qkvProj(F16, B, H, dims, x.data(), W.data(), bias.data(), q32.data(),
          k32.data(), v32.data());
  qkvProj(F16, B, H, dims, x.data(), W.data(), bias.data(), q64.data(),
          k64.data(), v64.data(), Precision::F64);
  for (size_t i = 0; i < q32.size(); ++i)
    EXPECT_LE(std::fabs(toFloat(F16, q32[i]) - toFloat(F16, q64[i])),
              ulp(F16, toFloat(F16, q64[i])));
  EXPECT_LE(maxAbsDiff(F16, v32, v64), 0.01);
}

TEST(QKVProj, Errors) {
  Bits x(4), W(64), q(8), k(8), v(8);
  EXPECT_THROW(qkvProj(F16, 1, 4, {3, 2, 2}, x.data(), W.data(), nullptr,
                       q.data(), k.data(), v.data()),
               InvalidArgumentError); // 3 not a multiple of 2
  EXPECT_THROW(qkvProj(F16, 1, 4, {2, 0, 2}, x.data(), W.data(), nullptr,
                       q.data(), k.data(), v.data()),
               InvalidArgumentError);
  EXPECT_THROW(qkvProj(F16, 1, 4, {2, 1, 2}, x.data(), nullptr, nullptr,
                       q.data(), k.data(), v.data()),
               InvalidArgumentError);
}

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

TEST(Rope, InvFreq) {
  RopeOptions opts; // theta 10000
  // D = 4: theta^0 = 1, theta^(-1/2) = 1/100.
  std::vector<double> inv = ropeInvFreq(opts, 4);
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_EQ(inv[0], 1.0);
  EXPECT_EQ(inv[1], static_cast<double>(0.01f));
  EXPECT_EQ(ropeInvFreq(opts, 4, Precision::F64)[1], 0.01);
  // Partial rotary: rotary_dim sets the exponent's denominator.
  opts.rotaryDim = 4;
  EXPECT_EQ(ropeInvFreq(opts, 128).size(), 2u);
  EXPECT_EQ(ropeInvFreq(opts, 128)[1], static_cast<double>(0.01f));
  // The F32 values are fp32 numbers close to the F64 ones.
  RopeOptions llama;
  llama.theta = 500000;
  const std::vector<double> f32 = ropeInvFreq(llama, 128);
  const std::vector<double> f64 = ropeInvFreq(llama, 128, Precision::F64);
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(f32[i], static_cast<double>(static_cast<float>(f32[i])));
    EXPECT_NEAR(f32[i], f64[i], 2e-7 * f64[i]);
    EXPECT_NEAR(f64[i], std::pow(500000.0, -2.0 * i / 128), 1e-15 * f64[i]);
  }
}

TEST(Rope, Llama3Scaling) {
  // Llama-3.1-8B: theta 500000, D 128, factor 8, low 1, high 4, orig 8192.
  RopeOptions opts;
  opts.theta = 500000;
  opts.llama3 = Llama3RopeScaling{8.0, 1.0, 4.0, 8192};
  RopeOptions plain = opts;
  plain.llama3.reset();
  for (Precision p : {Precision::F32, Precision::F64}) {
    const std::vector<double> s = ropeInvFreq(opts, 128, p);
    const std::vector<double> u = ropeInvFreq(plain, 128, p);
    const double tol = p == Precision::F32 ? 1e-6 : 1e-14;
    for (int i = 0; i < 64; ++i) {
      const double wavelen = 2 * M_PI / u[i];
      if (wavelen < 8192.0 / 4) { // high frequency: unchanged
        EXPECT_EQ(s[i], u[i]) << i;
      } else if (wavelen > 8192.0 / 1) { // low frequency: divided by 8
        EXPECT_NEAR(s[i], u[i] / 8, tol * u[i]) << i;
      } else { // smooth interpolation
        const double sm = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
        EXPECT_NEAR(s[i], (1 - sm) * u[i] / 8 + sm * u[i], tol * u[i]) << i;
        EXPECT_GT(s[i], u[i] / 8);
        EXPECT_LT(s[i], u[i]);
      }
    }
    // Hand check of the band edges: i = 0..28 high, 29..34 medium, 35.. low
    // (wavelen = 2 pi 500000^(i/64) crosses 2048 near i = 28.2 and 8192
    // near i = 35.0).
    EXPECT_EQ(s[28], u[28]);
    EXPECT_NEAR(s[36], u[36] / 8, tol * u[36]);
    EXPECT_GT(s[31], u[31] / 8);
    EXPECT_LT(s[31], u[31]);
  }
}

TEST(Rope, PositionZeroIsIdentity) {
  std::mt19937 rng(4);
  const AttentionDims dims{4, 2, 16};
  const int64_t B = 3;
  const Bits q = randomBits(BF16, B * 4 * 16, rng);
  const Bits k = randomBits(BF16, B * 2 * 16, rng);
  const std::vector<int32_t> pos(B, 0);
  for (RopePairing pairing : {RopePairing::NeoX, RopePairing::GPTJ})
    for (int64_t rd : {0, 8}) {
      RopeOptions opts;
      opts.pairing = pairing;
      opts.rotaryDim = rd;
      Bits qo(q.size()), ko(k.size());
      rope(BF16, B, dims, q.data(), k.data(), pos.data(), qo.data(), ko.data(),
           opts);
      EXPECT_EQ(qo, q);
      EXPECT_EQ(ko, k);
    }
}

TEST(Rope, HandComputedRotation) {
  // D = 4, theta = 10000, position 1: inv_freq = {1, 0.01}, so the first
  // pair turns by 1 rad and the second by 0.01 rad.
  const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
  const double c2 = 0.9999500004166653, s2 = 0.009999833334166664;
  const AttentionDims dims{1, 1, 4};
  const std::vector<int32_t> pos{1};
  // x = {1, 0, 0, 1} for q, {0.5, 2, -1, 0.25} for k.
  const Bits q = enc(F16, {1, 0, 0, 1}), k = enc(F16, {0.5, 2, -1, 0.25});
  Bits qo(4), ko(4);
  RopeOptions opts;
  // NeoX: pairs (x0, x2) at angle 1 and (x1, x3) at angle 0.01.
  rope(F16, 1, dims, q.data(), k.data(), pos.data(), qo.data(), ko.data(),
       opts);
  expectNear(F16, qo, {c1, -s2, s1, c2});
  expectNear(F16, ko,
             {0.5 * c1 + 1 * s1, 2 * c2 - 0.25 * s2, -1 * c1 + 0.5 * s1,
              0.25 * c2 + 2 * s2});
  // GPT-J: pairs (x0, x1) at angle 1 and (x2, x3) at angle 0.01.
  opts.pairing = RopePairing::GPTJ;
  rope(F16, 1, dims, q.data(), k.data(), pos.data(), qo.data(), ko.data(),
       opts);
  expectNear(F16, qo, {c1, s1, -s2, c2});
  expectNear(F16, ko,
             {0.5 * c1 - 2 * s1, 2 * c1 + 0.5 * s1, -1 * c2 - 0.25 * s2,
              0.25 * c2 - 1 * s2});
  // F64 gives the same to within rounding.
  Bits q64(4);
  rope(F16, 1, dims, q.data(), nullptr, pos.data(), q64.data(), nullptr, opts,
       Precision::F64);
  expectNear(F16, q64, {c1, s1, -s2, c2});
}

TEST(Rope, PartialRotary) {
  // D = 6, rotary_dim = 4: same angles as above, x4 and x5 pass through.
  const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
  const double c2 = 0.9999500004166653, s2 = 0.009999833334166664;
  const AttentionDims dims{2, 1, 6};
  const std::vector<int32_t> pos{1};
  const Bits q = enc(F16, {1, 0, 0, 1, 7, -3, /**/ 0, 1, 1, 0, 0.1, 1e4});
  Bits qo(12);
  RopeOptions opts;
  opts.rotaryDim = 4;
  rope(F16, 1, dims, q.data(), nullptr, pos.data(), qo.data(), nullptr, opts);
  expectNear(F16, qo, {c1, -s2, s1, c2, 7, -3, /**/ -s1, c2, c1, s2, 0.1, 1e4});
  EXPECT_EQ(qo[4], q[4]);
  EXPECT_EQ(qo[11], q[11]);
  opts.pairing = RopePairing::GPTJ;
  rope(F16, 1, dims, q.data(), nullptr, pos.data(), qo.data(), nullptr, opts);
  expectNear(F16, qo, {c1, s1, -s2, c2, 7, -3, /**/ -s1, c1, c2, s2, 0.1, 1e4});
}

TEST(Rope, InPlaceAndPerRowPositions) {
  std::mt19937 rng(5);
  const AttentionDims dims{6, 3, 64};
  const int64_t B = 4;
  const Bits q = randomBits(F16, B * 6 * 64, rng);
  const Bits k = randomBits(F16, B * 3 * 64, rng);
  const std::vector<int32_t> pos{0, 1, 4097, 131071};
  RopeOptions opts;
  opts.theta = 500000;
  opts.llama3 = Llama3RopeScaling{};
  Bits qo(q.size()), ko(k.size());
  rope(F16, B, dims, q.data(), k.data(), pos.data(), qo.data(), ko.data(),
       opts);
  Bits qi = q, ki = k;
  rope(F16, B, dims, qi.data(), ki.data(), pos.data(), qi.data(), ki.data(),
       opts);
  EXPECT_EQ(qi, qo);
  EXPECT_EQ(ki, ko);
  // Row 0 (position 0) is unchanged, the others are not.
  EXPECT_TRUE(std::equal(q.begin(), q.begin() + 6 * 64, qo.begin()));
  EXPECT_FALSE(
      std::equal(q.begin() + 6 * 64, q.begin() + 12 * 64, qo.begin() + 6 * 64));
  // Rotations preserve each pair's norm.
  for (int64_t h = 0; h < B * 6; ++h)
    for (int64_t i = 0; i < 32; ++i) {
      const double a = toFloat(F16, q[h * 64 + i]),
                   b = toFloat(F16, q[h * 64 + i + 32]);
      const double c = toFloat(F16, qo[h * 64 + i]),
                   d = toFloat(F16, qo[h * 64 + i + 32]);
      EXPECT_NEAR(std::hypot(a, b), std::hypot(c, d),
                  2 * ulp(F16, std::hypot(a, b)) + 1e-6);
    }
}

TEST(Rope, LargePositionsF32VersusF64) {
  // At position 131071 the fp32 angle pos * inv_freq carries an absolute
  // error up to about |angle| * 2^-23 (~0.01 rad for the fastest pairs),
  // as Hugging Face's fp32 computation does; the F64 variant has none.
  std::mt19937 rng(6);
  const AttentionDims dims{1, 1, 128};
  const Bits q = randomBits(F16, 128, rng);
  const std::vector<int32_t> pos{131071};
  RopeOptions opts;
  opts.theta = 500000;
  Bits q32(128), q64(128);
  rope(F16, 1, dims, q.data(), nullptr, pos.data(), q32.data(), nullptr, opts);
  rope(F16, 1, dims, q.data(), nullptr, pos.data(), q64.data(), nullptr, opts,
       Precision::F64);
  double maxAbs = 0;
  for (uint16_t b : q)
    maxAbs = std::max(maxAbs, std::fabs(static_cast<double>(toFloat(F16, b))));
  EXPECT_LE(maxAbsDiff(F16, q32, q64), 0.02 * maxAbs);
  // Position 1 is exact enough that both agree to within rounding.
  const std::vector<int32_t> one{1};
  rope(F16, 1, dims, q.data(), nullptr, one.data(), q32.data(), nullptr, opts);
  rope(F16, 1, dims, q.data(), nullptr, one.data(), q64.data(), nullptr, opts,
       Precision::F64);
  EXPECT_LE(maxAbsDiff(F16, q32, q64), ulp(F16, maxAbs));
}

TEST(Rope, Errors) {
  const AttentionDims dims{1, 1, 4};
  Bits q(4), qo(4), k(4);
  std::vector<int32_t> pos{-1};
  EXPECT_THROW(
      rope(F16, 1, dims, q.data(), nullptr, pos.data(), qo.data(), nullptr),
      InvalidArgumentError);
  pos[0] = 0;
  RopeOptions odd;
  odd.rotaryDim = 3;
  EXPECT_THROW(rope(F16, 1, dims, q.data(), nullptr, pos.data(), qo.data(),
                    nullptr, odd),
               InvalidArgumentError);
  RopeOptions big;
  big.rotaryDim = 6;
  EXPECT_THROW(ropeInvFreq(big, 4), InvalidArgumentError);
  RopeOptions bad;
  bad.llama3 = Llama3RopeScaling{8.0, 4.0, 1.0, 8192};
  EXPECT_THROW(ropeInvFreq(bad, 4), InvalidArgumentError);
  EXPECT_THROW(
      rope(F16, 1, dims, q.data(), k.data(), pos.data(), qo.data(), nullptr),
      InvalidArgumentError);
}

//===----------------------------------------------------------------------===//
// kv_append
//===----------------------------------------------------------------------===//

struct CacheBuffers {
  int64_t numPages, P, Hkv, D;
  Bits key, value;
  CacheBuffers(int64_t numPages, int64_t P, int64_t Hkv, int64_t D,
               uint16_t fill)
      : numPages(numPages), P(P), Hkv(Hkv), D(D),
        key(numPages * P * Hkv * D, fill), value(key) {}
  PagedKVCache view() {
    return PagedKVCache{key.data(), value.data(), numPages, P, Hkv, D};
  }
};

TEST(KVAppend, WritesTheSlotOfEachPosition) {
  // 3 pages of P = 2 tokens, Hkv = 2, D = 3. Row 0's pages are {2, 0}, row
  // 1's {1, 2}; row 0 writes token 3 (page index 1 -> page 0, slot 1), row 1
  // token 0 (page 1, slot 0).
  CacheBuffers c(3, 2, 2, 3, 0xFFFF);
  const std::vector<int32_t> table{2, 0, 1, 2};
  const std::vector<int32_t> pos{3, 0};
  Bits k(2 * 2 * 3), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<uint16_t>(100 + i);
    v[i] = static_cast<uint16_t>(200 + i);
  }
  kvAppend(2, k.data(), v.data(), pos.data(), {table.data(), 2}, c.view());
  Bits wantK(c.key.size(), 0xFFFF), wantV(wantK);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 3; ++d) {
      // ((page * P + slot) * Hkv + h) * D + d
      wantK[((0 * 2 + 1) * 2 + h) * 3 + d] = k[(0 * 2 + h) * 3 + d];
      wantV[((0 * 2 + 1) * 2 + h) * 3 + d] = v[(0 * 2 + h) * 3 + d];
      wantK[((1 * 2 + 0) * 2 + h) * 3 + d] = k[(1 * 2 + h) * 3 + d];
      wantV[((1 * 2 + 0) * 2 + h) * 3 + d] = v[(1 * 2 + h) * 3 + d];
    }
  EXPECT_EQ(c.key, wantK);
  EXPECT_EQ(c.value, wantV);
  EXPECT_EQ(c.key[6], 100 + 0); // page 0, slot 1, head 0, d 0 = k[0,0,0]
  EXPECT_EQ(c.value[12 + 5], 200 + 6 + 5); // page 1 slot 0 h1 d2 = v[1,1,2]
}

TEST(KVAppend, ErrorsWriteNothing) {
  CacheBuffers c(3, 2, 1, 2, 0x1234);
  const Bits before = c.key;
  Bits k(4, 1), v(4, 2);
  // Row 1: position 4 needs page index 2 but rows have 2 entries.
  std::vector<int32_t> table{0, 1, 2, 0};
  std::vector<int32_t> pos{0, 4};
  try {
    kvAppend(2, k.data(), v.data(), pos.data(), {table.data(), 2}, c.view());
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgumentError &e) {
    EXPECT_CONTAINS(e.what(), "row 1");
    EXPECT_CONTAINS(e.what(), "token 4");
  }
  // Row 1: page id 3 is outside [0, 3).
  table = {0, 1, 3, 0};
  pos = {0, 0};
  try {
    kvAppend(2, k.data(), v.data(), pos.data(), {table.data(), 2}, c.view());
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgumentError &e) {
    EXPECT_CONTAINS(e.what(), "block_table[1, 0] = 3");
  }
  pos = {0, -1};
  EXPECT_THROW(
      kvAppend(2, k.data(), v.data(), pos.data(), {table.data(), 2}, c.view()),
      InvalidArgumentError);
  EXPECT_EQ(c.key, before);
  EXPECT_EQ(c.value, before);
}

//===----------------------------------------------------------------------===//
// decode_attention
//===----------------------------------------------------------------------===//

/// Writes token t of row b (page table[b, t / P], slot t % P) for kv head h.
void putToken(CacheBuffers &c, const std::vector<int32_t> &table,
              int64_t maxPages, int64_t b, int64_t t, int64_t h, const Bits &kv,
              const Bits &vv) {
  const int64_t page = table[b * maxPages + t / c.P];
  const int64_t off = kvCacheOffset(page, t % c.P, h, c.P, c.Hkv, c.D);
  std::copy(kv.begin(), kv.end(), c.key.begin() + off);
  std::copy(vv.begin(), vv.end(), c.value.begin() + off);
}

TEST(DecodeAttention, OneTokenReturnsV) {
  for (DType dt : {F16, BF16}) {
    CacheBuffers c(2, 4, 1, 3, 0);
    const std::vector<int32_t> table{1};
    const Bits v = enc(dt, {0.25, -3, 1000});
    putToken(c, table, 1, 0, 0, 0, enc(dt, {5, 6, 7}), v);
    const Bits q = enc(dt, {1, 2, 3});
    const std::vector<int32_t> lens{1};
    Bits o(3);
    decodeAttention(dt, 1, 1, q.data(), c.view(), {table.data(), 1},
                    lens.data(), o.data());
    EXPECT_EQ(o, v);
  }
}

TEST(DecodeAttention, EqualScoresGiveTheMean) {
  // q = 0: every score is 0, softmax is uniform.
  CacheBuffers c(1, 4, 1, 3, 0);
  const std::vector<int32_t> table{0};
  putToken(c, table, 1, 0, 0, 0, enc(F16, {1, 2, 3}), enc(F16, {1, 2, 3}));
  putToken(c, table, 1, 0, 1, 0, enc(F16, {-4, 5, 9}), enc(F16, {3, 4, 6}));
  const Bits q = enc(F16, {0, 0, 0});
  const std::vector<int32_t> lens{2};
  Bits o(3);
  decodeAttention(F16, 1, 1, q.data(), c.view(), {table.data(), 1}, lens.data(),
                  o.data());
  EXPECT_EQ(o, enc(F16, {2, 3, 4.5}));
}

TEST(DecodeAttention, HandComputedSoftmax) {
  // Scores 0 and 1 (scale 1): weights 1/(1+e) and e/(1+e).
  CacheBuffers c(1, 2, 1, 2, 0);
  const std::vector<int32_t> table{0};
  putToken(c, table, 1, 0, 0, 0, enc(F16, {0, 0}), enc(F16, {1, 0}));
  putToken(c, table, 1, 0, 1, 0, enc(F16, {1, 0}), enc(F16, {0, 1}));
  const Bits q = enc(F16, {1, 0});
  const std::vector<int32_t> lens{2};
  Bits o(2);
  AttentionOptions opts;
  opts.scale = 1.0;
  decodeAttention(F16, 1, 1, q.data(), c.view(), {table.data(), 1}, lens.data(),
                  o.data(), opts);
  expectNear(F16, o, {0.2689414213699951, 0.7310585786300049}, 0.5);
  // Default scale 1/sqrt(D) = 1/sqrt(2): scores 0 and 0.7071.
  decodeAttention(F16, 1, 1, q.data(), c.view(), {table.data(), 1}, lens.data(),
                  o.data());
  const double e = std::exp(1 / std::sqrt(2.0));
  expectNear(F16, o, {1 / (1 + e), e / (1 + e)}, 0.5);
}

TEST(DecodeAttention, GQAHeadsShareTheirGroupsKVHead) {
  // With one token the output of head h is V of kv head h / group.
  for (auto [Hq, Hkv] :
       {std::pair<int64_t, int64_t>{6, 2}, {10, 2}, {7, 1}, {8, 8}, {12, 4}}) {
    const int64_t D = 4, group = Hq / Hkv;
    CacheBuffers c(1, 1, Hkv, D, 0);
    const std::vector<int32_t> table{0};
    for (int64_t h = 0; h < Hkv; ++h)
      putToken(c, table, 1, 0, 0, h, enc(F16, {1, 1, 1, 1}),
               enc(F16, {double(h), h + 0.5, -1.0 - h, 100.0 + h}));
    std::mt19937 rng(7);
    const Bits q = randomBits(F16, Hq * D, rng);
    const std::vector<int32_t> lens{1};
    Bits o(Hq * D);
    decodeAttention(F16, 1, Hq, q.data(), c.view(), {table.data(), 1},
                    lens.data(), o.data());
    for (int64_t h = 0; h < Hq; ++h) {
      const double kvh = static_cast<double>(h / group);
      EXPECT_EQ(Bits(o.begin() + h * D, o.begin() + (h + 1) * D),
                enc(F16, {kvh, kvh + 0.5, -1 - kvh, 100 + kvh}))
          << "Hq " << Hq << " Hkv " << Hkv << " head " << h;
    }
  }
  // Two tokens: query heads of one group see the same K/V but their own q.
  CacheBuffers c(1, 2, 1, 2, 0);
  const std::vector<int32_t> table{0};
  putToken(c, table, 1, 0, 0, 0, enc(F16, {0, 0}), enc(F16, {1, 0}));
  putToken(c, table, 1, 0, 1, 0, enc(F16, {1, 0}), enc(F16, {0, 1}));
  const Bits q = enc(F16, {0, 0, /**/ 1, 0}); // head 0 uniform, head 1 not
  const std::vector<int32_t> lens{2};
  Bits o(4);
  AttentionOptions opts;
  opts.scale = 1.0;
  decodeAttention(F16, 1, 2, q.data(), c.view(), {table.data(), 1}, lens.data(),
                  o.data(), opts);
  expectNear(F16, o, {0.5, 0.5, 0.2689414213699951, 0.7310585786300049}, 0.5);
}

TEST(DecodeAttention, LengthZeroGivesZeros) {
  CacheBuffers c(2, 4, 1, 4, fromDouble(F16, kNaN));
  const std::vector<int32_t> table{0, 1, 1, 0};
  const std::vector<int32_t> lens{0, 0};
  const Bits q = enc(F16, {1, 2, 3, 4, 5, 6, 7, 8});
  Bits o(8, 0x5555);
  decodeAttention(F16, 2, 1, q.data(), c.view(), {table.data(), 2}, lens.data(),
                  o.data());
  EXPECT_EQ(o, Bits(8, 0));
  // Length 0 needs no valid page at all.
  const std::vector<int32_t> badTable{-5, 99};
  const std::vector<int32_t> zero{0};
  decodeAttention(F16, 1, 1, q.data(), c.view(), {badTable.data(), 2},
                  zero.data(), o.data(), {}, Precision::F64);
  EXPECT_EQ(Bits(o.begin(), o.begin() + 4), Bits(4, 0));
}

TEST(DecodeAttention, NaNInUnusedSlotsDoesNotLeak) {
  // Mixed lengths, none a multiple of the page size; unused block-table
  // entries 0 point at a page whose other slots hold NaN.
  std::mt19937 rng(8);
  const int64_t B = 3, Hq = 4, Hkv = 2, D = 8, P = 4, maxPages = 4;
  const std::vector<int32_t> lens{5, 1, 10};
  const std::vector<int32_t> table{3, 0, 0, 0, //
                                   5, 0, 0, 0, //
                                   1, 4, 2, 0};
  const Bits q = randomBits(F16, B * Hq * D, rng);
  Bits out[2];
  for (int fill = 0; fill < 2; ++fill) {
    CacheBuffers c(6, P, Hkv, D,
                   fill ? fromDouble(F16, kNaN) : fromDouble(F16, 0.0));
    std::mt19937 tokRng(9); // the same valid tokens both times
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < lens[b]; ++t)
        for (int64_t h = 0; h < Hkv; ++h)
          putToken(c, table, maxPages, b, t, h, randomBits(F16, D, tokRng),
                   randomBits(F16, D, tokRng));
    out[fill].assign(B * Hq * D, 0);
    decodeAttention(F16, B, Hq, q.data(), c.view(), {table.data(), maxPages},
                    lens.data(), out[fill].data());
  }
  EXPECT_EQ(out[0], out[1]);
  for (uint16_t b : out[1])
    EXPECT_TRUE(std::isfinite(toFloat(F16, b)));
}

TEST(DecodeAttention, PagedEqualsContiguous) {
  // The same 11 tokens in scattered pages of 4 and in one contiguous page.
  std::mt19937 rng(10);
  const int64_t Hq = 6, Hkv = 3, D = 80, L = 11;
  const Bits q = randomBits(BF16, Hq * D, rng);
  CacheBuffers paged(5, 4, Hkv, D, 0), contig(1, 16, Hkv, D, 0);
  const std::vector<int32_t> pTable{4, 0, 2}, cTable{0};
  for (int64_t t = 0; t < L; ++t)
    for (int64_t h = 0; h < Hkv; ++h) {
      const Bits kv = randomBits(BF16, D, rng), vv = randomBits(BF16, D, rng);
      putToken(paged, pTable, 3, 0, t, h, kv, vv);
      putToken(contig, cTable, 1, 0, t, h, kv, vv);
    }
  const std::vector<int32_t> lens{L};
  Bits o1(Hq * D), o2(Hq * D), o64(Hq * D);
  decodeAttention(BF16, 1, Hq, q.data(), paged.view(), {pTable.data(), 3},
                  lens.data(), o1.data());
  decodeAttention(BF16, 1, Hq, q.data(), contig.view(), {cTable.data(), 1},
                  lens.data(), o2.data());
  EXPECT_EQ(o1, o2);
  decodeAttention(BF16, 1, Hq, q.data(), paged.view(), {pTable.data(), 3},
                  lens.data(), o64.data(), {}, Precision::F64);
  EXPECT_LE(maxAbsDiff(BF16, o1, o64), 0.01);
}

TEST(DecodeAttention, Errors) {
  CacheBuffers c(2, 2, 2, 2, 0);
  const std::vector<int32_t> table{0, 1};
  Bits q(8), o(8);
  std::vector<int32_t> lens{5}; // needs 3 pages, the row has 2
  try {
    decodeAttention(F16, 1, 4, q.data(), c.view(), {table.data(), 2},
                    lens.data(), o.data());
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgumentError &e) {
    EXPECT_CONTAINS(e.what(), "decode_attention");
    EXPECT_CONTAINS(e.what(), "row 0");
  }
  lens = {1};
  EXPECT_THROW(decodeAttention(F16, 1, 3, q.data(), c.view(), {table.data(), 2},
                               lens.data(), o.data()),
               InvalidArgumentError); // 3 query heads, 2 kv heads
  lens = {-1};
  EXPECT_THROW(decodeAttention(F16, 1, 4, q.data(), c.view(), {table.data(), 2},
                               lens.data(), o.data()),
               InvalidArgumentError);
  const std::vector<int32_t> bad{0, 2};
  lens = {3};
  EXPECT_THROW(decodeAttention(F16, 1, 4, q.data(), c.view(), {bad.data(), 2},
                               lens.data(), o.data()),
               InvalidArgumentError); // page 2 of 2
}

//===----------------------------------------------------------------------===//
// decodeLayerFrontHalf, driven by the KV-cache manager
//===----------------------------------------------------------------------===//

TEST(FrontHalf, MatchesTheChainOfOpsOverSeveralSteps) {
  std::mt19937 rng(11);
  const DType dt = F16;
  const int64_t H = 96, Hq = 6, Hkv = 2, D = 16, P = 4, maxPages = 4;
  FrontHalfConfig cfg;
  cfg.dtype = dt;
  cfg.hidden = H;
  cfg.dims = {Hq, Hkv, D};
  cfg.normOptions.eps = 1e-5;
  cfg.rope.theta = 500000;
  cfg.rope.llama3 = Llama3RopeScaling{};
  const Bits normW = randomBits(dt, H, rng);
  const Bits W = randomBits(dt, cfg.dims.qkvRows() * H, rng, 0.1);
  const Bits bias = randomBits(dt, cfg.dims.qkvRows(), rng);

  KVCacheManager mgr(12, P, maxPages);
  CacheBuffers fused(12, P, Hkv, D, fromDouble(dt, kNaN));
  CacheBuffers chain = fused;
  mgr.addSequence(100);
  mgr.addSequence(200);
  mgr.appendTokens(200, 6); // pretend 200 already has 6 tokens (prefill)
  for (int64_t t = 0; t < 6; ++t)
    for (int64_t h = 0; h < Hkv; ++h) {
      const Bits kv = randomBits(dt, D, rng), vv = randomBits(dt, D, rng);
      putToken(fused, mgr.pages(200), maxPages, 0, t, h, kv, vv);
      putToken(chain, mgr.pages(200), maxPages, 0, t, h, kv, vv);
    }

  for (int step = 0; step < 5; ++step) {
    const std::vector<SeqId> ids{200, 100};
    const BatchView view = mgr.appendBatch(ids, 1, maxPages);
    const int64_t B = view.batch;
    const Bits x = randomBits(dt, B * H, rng), r = randomBits(dt, B * H, rng);
    FrontHalfInputs in;
    in.x = x.data();
    in.residual = r.data();
    in.normWeight = normW.data();
    in.qkvWeight = W.data();
    in.qkvBias = bias.data();
    in.positions = view.positions.data();
    in.seqLens = view.seq_lens.data();
    in.blockTable = {view.block_table.data(), view.max_pages};
    Bits o(B * Hq * D), h(B * H), q(B * Hq * D);
    FrontHalfOutputs outs;
    outs.attnOut = o.data();
    outs.residualOut = h.data();
    outs.q = q.data();
    decodeLayerFrontHalf(cfg, B, in, fused.view(), outs);

    // The same by hand.
    Bits n2(B * H), h2(B * H), q2(B * Hq * D), k2(B * Hkv * D), v2(B * Hkv * D),
        o2(B * Hq * D);
    rmsnorm(dt, B, H, x.data(), r.data(), normW.data(), n2.data(), h2.data(),
            cfg.normOptions);
    qkvProj(dt, B, H, cfg.dims, n2.data(), W.data(), bias.data(), q2.data(),
            k2.data(), v2.data());
    rope(dt, B, cfg.dims, q2.data(), k2.data(), view.positions.data(),
         q2.data(), k2.data(), cfg.rope);
    kvAppend(B, k2.data(), v2.data(), view.positions.data(), in.blockTable,
             chain.view());
    decodeAttention(dt, B, Hq, q2.data(), chain.view(), in.blockTable,
                    view.seq_lens.data(), o2.data());
    EXPECT_EQ(o, o2) << "step " << step;
    EXPECT_EQ(h, h2);
    EXPECT_EQ(q, q2);
    EXPECT_EQ(fused.key, chain.key);
    EXPECT_EQ(fused.value, chain.value);
    for (uint16_t b : o)
      ASSERT_TRUE(std::isfinite(toFloat(dt, b)));
  }
  EXPECT_EQ(mgr.length(100), 5);
  EXPECT_EQ(mgr.length(200), 11);
}

TEST(FrontHalf, FirstTokenAttendsToItself) {
  // Length 1 after the append: the output of every head is its group's v.
  std::mt19937 rng(12);
  const DType dt = BF16;
  const int64_t H = 32, Hq = 4, Hkv = 2, D = 8;
  FrontHalfConfig cfg;
  cfg.dtype = dt;
  cfg.hidden = H;
  cfg.dims = {Hq, Hkv, D};
  cfg.norm = NormKind::LayerNorm;
  cfg.rope.pairing = RopePairing::GPTJ;
  cfg.rope.rotaryDim = 4;
  const Bits x = randomBits(dt, H, rng), lnW = randomBits(dt, H, rng),
             lnB = randomBits(dt, H, rng);
  const Bits W = randomBits(dt, cfg.dims.qkvRows() * H, rng, 0.2);
  CacheBuffers c(2, 4, Hkv, D, fromDouble(dt, kNaN));
  const std::vector<int32_t> table{1}, pos{0}, lens{1};
  FrontHalfInputs in;
  in.x = x.data();
  in.normWeight = lnW.data();
  in.normBias = lnB.data();
  in.qkvWeight = W.data();
  in.positions = pos.data();
  in.seqLens = lens.data();
  in.blockTable = {table.data(), 1};
  Bits o(Hq * D), v(Hkv * D);
  FrontHalfOutputs outs;
  outs.attnOut = o.data();
  outs.v = v.data();
  decodeLayerFrontHalf(cfg, 1, in, c.view(), outs);
  for (int64_t h = 0; h < Hq; ++h)
    EXPECT_EQ(Bits(o.begin() + h * D, o.begin() + (h + 1) * D),
              Bits(v.begin() + (h / 2) * D, v.begin() + (h / 2 + 1) * D));
}

TEST(FrontHalf, InconsistentLengthsWriteNothing) {
  const int64_t H = 8;
  FrontHalfConfig cfg;
  cfg.hidden = H;
  cfg.dims = {2, 1, 4};
  const Bits x(H, 0x3C00), w(H, 0x3C00), W(cfg.dims.qkvRows() * H, 0x3C00);
  CacheBuffers c(2, 4, 1, 4, 0x7777);
  const Bits before = c.key;
  const std::vector<int32_t> table{0}, pos{2}, lens{2};
  FrontHalfInputs in;
  in.x = x.data();
  in.normWeight = w.data();
  in.qkvWeight = W.data();
  in.positions = pos.data();
  in.seqLens = lens.data();
  in.blockTable = {table.data(), 1};
  Bits o(8, 0x1111);
  FrontHalfOutputs outs;
  outs.attnOut = o.data();
  try {
    decodeLayerFrontHalf(cfg, 1, in, c.view(), outs);
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgumentError &e) {
    EXPECT_CONTAINS(e.what(), "positions + 1");
  }
  EXPECT_EQ(c.key, before);
  EXPECT_EQ(o, Bits(8, 0x1111));
  // A cache whose head geometry differs from the layer's.
  const std::vector<int32_t> lens3{3};
  in.seqLens = lens3.data();
  CacheBuffers wrong(2, 4, 2, 4, 0);
  EXPECT_THROW(decodeLayerFrontHalf(cfg, 1, in, wrong.view(), outs),
               InvalidArgumentError);
}

} // namespace
