//===- CheckerTest.cpp - fusion-run's checks of a step's outputs ----------===//

#include "TestUtil.h"

#include "fusion/tooling/Checker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

using namespace fusion::runtime;
using namespace fusion::tooling;

namespace {

constexpr uint16_t kOne = 0x3C00, kTwo = 0x4000, kHalf = 0x3800, kNaN = 0x7E00;

TEST(Checker, FormatsAndTolerances) {
  EXPECT_EQ(sci(1.234e-4), "1.23e-04");
  EXPECT_EQ(sci(0), "0.00e+00");
  EXPECT_EQ(defaultTolerance(DType::F16), 2e-3);
  EXPECT_EQ(defaultTolerance(DType::BF16), 1e-2);
}

TEST(Checker, StepHeading) {
  BatchView v{3, 1, {0, 1, 2}, {5, 0, 9}, {6, 1, 10}};
  EXPECT_EQ(stepHeading(2, v), "step 2 (positions 0..9):");
  BatchView one{1, 1, {0}, {7}, {8}};
  EXPECT_EQ(stepHeading(0, one), "step 0 (position 7):");
}

TEST(Checker, RowsWithinToleranceAndNaN) {
  std::vector<uint16_t> ref = {kOne, kOne, kOne, kOne};
  std::vector<uint16_t> same = ref, off = {kTwo, kOne, kOne, kOne},
                        nan = {kNaN, kOne, kOne, kOne};
  StepChecker c(DType::F16, 1e-2);
  std::string lines = c.check({{"output", &same, &ref, &ref}});
  EXPECT_EQ(lines, "  output        vs fp64: max|d| 0.00e+00 rel 0.00e+00 | "
                   "vs fp32: max|d| 0.00e+00 rel 0.00e+00 | fp32 ref vs "
                   "fp64: rel 0.00e+00  ok\n");
  EXPECT_TRUE(c.pass());
  // |d| = 1 of ||ref|| = 2: rel 0.5.
  lines = c.check({{"output", &off, &ref, &ref}, {"k_new", &nan, &ref, &ref}});
  EXPECT_CONTAINS(lines, "  output        vs fp64: max|d| 1.00e+00 rel "
                         "5.00e-01 |");
  EXPECT_CONTAINS(lines, " | 1 NaN/inf  MISMATCH\n");
  EXPECT_FALSE(c.pass());
  c.check({{"output", &same, &ref, &ref}});
  ASSERT_EQ(c.worstRel().size(), 2u);
  EXPECT_EQ(c.worstRel()[0].first, "output");
  EXPECT_DOUBLE_EQ(c.worstRel()[0].second, 0.5);
  EXPECT_EQ(c.worstRel()[1].first, "k_new");
}

TEST(Checker, OutputRowsFollowTheSignature) {
  FrontHalfSignature sig;
  StepOutputs got;
  RefOutputs r;
  std::vector<OutputRow> rows = outputRows(sig, got, r, r);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "output");
  EXPECT_EQ(rows[1].name, "k_new");
  EXPECT_EQ(rows[1].out, &got.kNew);
  EXPECT_EQ(rows[2].ref64, &r.v);
  sig.residualOut = 1;
  EXPECT_EQ(outputRows(sig, got, r, r)[1].name, "residual_out");
}

TEST(Checker, IntermediatesOfTheTinyFunction) {
  // Kernel 0 (rmsnorm, qkv_proj, rope, kv_append) writes the rotated query
  // for kernel 1 (its result 1, internal buffer 1 after residual_out); its
  // residual_out and kernel 1's output are no intermediates of the front
  // half.
  Model model =
      Model::load(fusion::runtime::test::dataPath("tiny_decode.manifest.json"));
  std::vector<Intermediate> m =
      findIntermediates(model, FrontHalfSignature::fromModel(model));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].name, "q_rot");
  EXPECT_EQ(m[0].source, "kernel 0 output query");
  EXPECT_EQ(m[0].buffer, 1);
  EXPECT_EQ(m[0].rowElems, 4 * 16);
}

TEST(Compare, WorstRow) {
  ErrorStats w = worstRow({1, 1, 3, 1}, {1, 1, 1, 1}, 2);
  // Row 1: |d| = 2 of ||(1, 1)|| = sqrt(2).
  EXPECT_DOUBLE_EQ(w.maxAbs, 2);
  EXPECT_NEAR(w.rel, 2 / std::sqrt(2.0), 1e-12);
}

TEST(Checker, GoldenTable) {
  GoldenDecodeStep g;
  g.path = "golden.safetensors";
  g.dtype = DType::F16;
  g.batch = 2;
  std::vector<uint16_t> out = {kOne, kHalf}, golden = {kOne, kHalf},
                        bad = {kTwo, kHalf};
  std::vector<double> golden64 = {1, 0.5};
  std::vector<GoldenRow> rows = {{"attn_output", "function result 0", &out,
                                  &out, &out, &golden, &golden64}};
  std::ostringstream os;
  EXPECT_TRUE(checkGolden(g, rows, 1e-2, os));
  EXPECT_CONTAINS(os.str(), "golden check, golden.safetensors: relative L2 "
                            "error of the worst sequence");
  EXPECT_CONTAINS(os.str(), "  attn_output   function result 0");
  EXPECT_CONTAINS(os.str(), "  ok\n    attn_output vs float64 per sequence: "
                            "0.00e+00 0.00e+00 (transformers' own: 0.00e+00 "
                            "0.00e+00)\n");
  rows[0].out = &bad;
  std::ostringstream bados;
  EXPECT_FALSE(checkGolden(g, rows, 1e-2, bados));
  EXPECT_CONTAINS(bados.str(), "MISMATCH");
}

} // namespace
