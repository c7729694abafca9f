//===- StepInputsTest.cpp - the inputs of fusion-run's steps --------------===//

#include "TestUtil.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"
#include "fusion/tooling/StepInputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace fusion::runtime;
using namespace fusion::tooling;

namespace {

/// A front half with pages of 4 tokens, 1 KV head of 2 elements, hidden 8.
FrontHalfSignature tinySignature() {
  FrontHalfSignature sig;
  sig.dtype = DType::F16;
  sig.hidden = 8;
  sig.dims = {2, 1, 2};
  sig.pageSize = 4;
  return sig;
}

TEST(StepInputs, RandomIsSplitMix64) {
  // splitmix64 from state 1 * 0x9E3779B97F4A7C15 + 1 (computed in Python).
  Random rng(1);
  EXPECT_EQ(rng.next(), 0xbeeb8da1658eec67ull);
  EXPECT_EQ(rng.next(), 0xf893a2eefb32555eull);
  Random u(5);
  for (int i = 0; i < 1000; ++i) {
    double v = u.uniform(-2, 3);
    EXPECT_GE(v, -2);
    EXPECT_LT(v, 3);
  }
}

TEST(StepInputs, PoolPagesCountsHistoriesStepsAndOneSpare) {
  // Lengths 2, 19, 42 after two steps: 1 + 2 + 3 pages of 16, plus 3.
  CachePool pool = poolPages({0, 17, 40}, 2, 0, 16);
  EXPECT_EQ(pool.numPages, 9);
  EXPECT_EQ(pool.maxPages, 3);
  EXPECT_EQ(pool.maxLen, 42);
  EXPECT_EQ(poolPages({0, 17, 40}, 2, 20, 16).numPages, 20);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError, poolPages({0, 17, 40}, 2, 4, 16)),
      "--num-pages 4 holds fewer pages than the 9 of 16 tokens");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError, poolPages({2147483647}, 1, 0, 4)),
      "sequence 0: a history of 2147483647 tokens (--kv-len/--kv-lens) plus "
      "--steps 1 = 2147483648 tokens exceeds the 2147483644");
}

TEST(StepInputs, HostCachesMustFitTheMachine) {
  FrontHalfSignature sig = tinySignature();
  checkHostCaches(1000, sig, "--num-pages 1000");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError,
                       checkHostCaches(int64_t(1) << 40, sig, "--num-pages X")),
      "--num-pages X: 1099511627776 pages of K and V cache (32 "
      "bytes per page) held twice");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError, checkedMul(uint64_t(1) << 40,
                                                 uint64_t(1) << 30, "what")),
      "what: the byte count overflows 64 bits");
}

TEST(StepInputs, RandomHistoryFillsExactlyTheHistorySlots) {
  FrontHalfSignature sig = tinySignature();
  Random rng(3);
  RandomHistory h = fillRandomHistory({5, 0, 9}, 10, sig, rng);
  ASSERT_EQ(h.ids, (std::vector<SeqId>{0, 1, 2}));
  EXPECT_EQ(h.kv.length(0), 5);
  EXPECT_EQ(h.kv.length(1), 0);
  EXPECT_EQ(h.kv.length(2), 9);
  EXPECT_EQ(h.kv.pages(0).size(), 2u);
  EXPECT_EQ(h.kv.pages(2).size(), 3u);
  // Round-robin: sequence 0's two pages are not neighbours.
  EXPECT_NE(h.kv.pages(0)[1], h.kv.pages(0)[0] + 1);
  // 10 pages * 4 slots * 2 elements; the 14 history tokens are finite,
  // everything else NaN.
  ASSERT_EQ(h.keyCache.size(), 80u);
  auto finite = [&](const std::vector<uint16_t> &c) {
    int n = 0;
    for (uint16_t e : c)
      n += std::isfinite(toFloat(DType::F16, e));
    return n;
  };
  EXPECT_EQ(finite(h.keyCache), 28);
  EXPECT_EQ(finite(h.valueCache), 28);
  int64_t last = kvCacheOffset(h.kv.pages(2)[2], 0, 0, 4, 1, 2);
  EXPECT_TRUE(std::isfinite(toFloat(DType::F16, h.keyCache[last])));
  EXPECT_TRUE(std::isnan(toFloat(DType::F16, h.keyCache[last + 2])));
}

TEST(StepInputs, RandomStepAppendsOneTokenPerSequence) {
  FrontHalfSignature sig = tinySignature();
  Random rng(3);
  RandomHistory h = fillRandomHistory({5, 0, 9}, 10, sig, rng);
  HostStep s = randomStep(h, rng, sig, 3);
  EXPECT_EQ(s.view.positions, (std::vector<int32_t>{5, 0, 9}));
  EXPECT_EQ(s.view.seq_lens, (std::vector<int32_t>{6, 1, 10}));
  EXPECT_EQ(s.view.block_table.size(), 9u);
  EXPECT_EQ(s.x.size(), 24u);
  EXPECT_TRUE(s.residual.empty());
  sig.residual = 1;
  HostStep next = randomStep(h, rng, sig, 3);
  EXPECT_EQ(next.view.positions, (std::vector<int32_t>{6, 1, 10}));
  EXPECT_EQ(next.residual.size(), 24u);
  StepInputs in = stepInputs(next.view);
  EXPECT_EQ(in.positions, next.view.positions.data());
  EXPECT_EQ(in.blockTable, next.view.block_table.data());
}

TEST(StepInputs, NewTokenRowsReadTheAppendedSlots) {
  FrontHalfSignature sig = tinySignature();
  std::vector<uint16_t> cache(3 * 4 * 2);
  for (size_t i = 0; i < cache.size(); ++i)
    cache[i] = static_cast<uint16_t>(i);
  // Sequence 0 at position 5 (page 2, slot 1), sequence 1 at 0 (page 1).
  BatchView v{2, 2, {0, 2, 1, 0}, {5, 0}, {6, 1}};
  EXPECT_EQ(newTokenRows(cache, v, sig), (std::vector<uint16_t>{18, 19, 8, 9}));
}

TEST(StepInputs, GoldenStepAndShapeCheck) {
  FrontHalfSignature sig = tinySignature();
  GoldenDecodeStep g;
  g.path = "g.safetensors";
  g.dtype = DType::F16;
  g.batch = 2;
  g.hidden = 8;
  g.dims = sig.dims;
  g.hiddenStates.assign(16, 0x3C00);
  GoldenCacheLayout layout;
  layout.maxPages = 2;
  layout.blockTable = {0, 1, 2, 3};
  layout.positions = {3, 4};
  layout.seqLens = {4, 5};
  checkGoldenFits(g, sig, "g");
  HostStep s = goldenStep(g, layout, true);
  EXPECT_EQ(s.view.batch, 2);
  EXPECT_EQ(s.view.positions, layout.positions);
  EXPECT_EQ(s.x, g.hiddenStates);
  EXPECT_EQ(s.residual, std::vector<uint16_t>(16, 0));
  EXPECT_TRUE(goldenStep(g, layout, false).residual.empty());
  g.hidden = 16;
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, checkGoldenFits(g, sig, "g.st")),
      "g.st is f16, hidden 16, heads 2/1, head_dim 2; the "
      "compiled model is f16, 8, 2/1, 2");
}

} // namespace
