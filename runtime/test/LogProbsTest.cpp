//===- LogProbsTest.cpp - log-softmax and perplexity ----------------------===//
//
// Against values derived by hand: softmax of {1, 2, 3} is e^k / (e + e^2 +
// e^3), so log p(3) = -log(1 + e^-1 + e^-2) = -0.40760596444438; two equal
// logits give log(1/2).
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/LogProbs.h"

#include "fusion/runtime/Error.h"

#include "TestUtil.h"

#include <cmath>
#include <limits>

using namespace fusion::runtime;

namespace {

std::vector<uint16_t> row(DType dtype, std::vector<double> values) {
  std::vector<uint16_t> bits;
  for (double v : values)
    bits.push_back(fromDouble(dtype, v));
  return bits;
}

} // namespace

TEST(LogProbs, HandDerivedValues) {
  for (DType dt : {DType::F16, DType::BF16}) {
    std::vector<uint16_t> r = row(dt, {1, 2, 3});
    EXPECT_NEAR(tokenLogProb(dt, r.data(), 3, 2), -0.40760596444438, 1e-12);
    EXPECT_NEAR(tokenLogProb(dt, r.data(), 3, 1), -1.40760596444438, 1e-12);
    EXPECT_NEAR(tokenLogProb(dt, r.data(), 3, 0), -2.40760596444438, 1e-12);
    // Large equal logits: the max is subtracted before exp (exp(60000)
    // overflows a double).
    r = row(dt, {60000, 60000});
    EXPECT_NEAR(tokenLogProb(dt, r.data(), 2, 1), -std::log(2.0), 1e-12);
    // A single token is certain.
    r = row(dt, {-7});
    EXPECT_EQ(tokenLogProb(dt, r.data(), 1, 0), 0.0);
    // -inf logits have probability 0.
    const double inf = std::numeric_limits<double>::infinity();
    r = row(dt, {0, -inf, 0});
    EXPECT_NEAR(tokenLogProb(dt, r.data(), 3, 0), -std::log(2.0), 1e-12);
    EXPECT_EQ(tokenLogProb(dt, r.data(), 3, 1), -inf);
    // NaN propagates.
    r = row(dt, {0, std::nan(""), 1});
    EXPECT_TRUE(std::isnan(tokenLogProb(dt, r.data(), 3, 2)));
  }
}

TEST(LogProbs, Errors) {
  std::vector<uint16_t> r = row(DType::F16, {1, 2, 3});
  std::string msg = EXPECT_THROW_MSG(InvalidArgumentError,
                                     tokenLogProb(DType::F16, r.data(), 3, 3));
  EXPECT_CONTAINS(msg, "token 3 is outside the vocabulary [0, 3)");
  EXPECT_THROW_MSG(InvalidArgumentError,
                   tokenLogProb(DType::F16, r.data(), 3, -1));
  EXPECT_THROW_MSG(InvalidArgumentError,
                   tokenLogProb(DType::F16, r.data(), 0, 0));
  r = row(DType::F16, {1, std::numeric_limits<double>::infinity()});
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         tokenLogProb(DType::F16, r.data(), 2, 0));
  EXPECT_CONTAINS(msg, "largest logit is inf; softmax is undefined");
}

TEST(LogProbs, Perplexity) {
  // exp of the mean negative log-probability.
  EXPECT_NEAR(perplexity({-std::log(2.0), -std::log(2.0)}), 2.0, 1e-12);
  EXPECT_NEAR(perplexity({-1.0, -3.0}), std::exp(2.0), 1e-12);
  EXPECT_EQ(perplexity({0.0}), 1.0);
  std::string msg = EXPECT_THROW_MSG(InvalidArgumentError, perplexity({}));
  EXPECT_CONTAINS(msg, "perplexity: no tokens scored");
}
