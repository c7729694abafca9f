//===- RunSetupTest.cpp - what a fusion-run run is, before the GPU --------===//
//
// On the tiny test function (runtime/test/data/tiny_decode: pages of 4
// tokens, hidden 64, 4/2 heads of 16, a residual).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "fusion/runtime/Error.h"
#include "fusion/tooling/RunSetup.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using namespace fusion::tooling;

namespace {

RunSetup setUp(std::vector<std::string> args, std::ostream &log) {
  args.insert(args.begin(),
              {"--ptx", dataPath("tiny_decode.ptx"), "--manifest",
               dataPath("tiny_decode.manifest.json"), "--dry-run"});
  Options o = parseOptions(args);
  Model model = Model::load(o.manifest);
  FrontHalfSignature sig = FrontHalfSignature::fromModel(model);
  return setUpRun(o, std::move(model), "", std::move(sig), log);
}

TEST(RunSetup, RandomHistories) {
  std::ostringstream log;
  RunSetup s = setUp({"--kv-lens", "0,1,5,13", "--steps", "3"}, log);
  // After 3 steps: 3, 4, 8, 16 tokens = 1 + 1 + 2 + 4 pages of 4, plus 4.
  EXPECT_EQ(s.pool.numPages, 12);
  EXPECT_EQ(s.pool.maxPages, 4);
  EXPECT_EQ(s.pool.maxLen, 16);
  EXPECT_EQ(s.summary.batch, 4);
  EXPECT_EQ(s.summary.kvLens, (std::vector<int64_t>{0, 1, 5, 13}));
  EXPECT_EQ(s.summary.hidden, 64);
  EXPECT_EQ(s.tol, 2e-3);
  EXPECT_EQ(s.reference.origin, "the manifest's op attributes");
  EXPECT_EQ(s.header.reference, describeReference(s.reference.config));
  EXPECT_TRUE(s.header.residual);
  EXPECT_TRUE(s.header.dryRun);
  EXPECT_EQ(s.shape().batch, 4);
  EXPECT_EQ(s.capacity().numPages, 12);
  EXPECT_TRUE(log.str().empty());
  LaunchPlan probe = probePlan(s);
  EXPECT_EQ(probe.capacity().numPages, 12);
}

TEST(RunSetup, ConfigChecks) {
  std::ostringstream log;
  RunSetup s = setUp({"--config", dataPath("configs/tiny_gguf_eps.json")}, log);
  EXPECT_CONTAINS(s.reference.origin, "(matches ");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(
          InvalidArgumentError,
          setUp({"--config", dataPath("configs/qwen2_7b.json")}, log)),
      "rope_theta: kernels 500000, config 1000000");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError,
                       setUp({"--kv-lens", "5,100", "--num-pages", "4"}, log)),
      "--num-pages 4 holds fewer pages than the 30 of 4 tokens");
}

} // namespace
