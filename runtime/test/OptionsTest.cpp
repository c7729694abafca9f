//===- OptionsTest.cpp - fusion-run's command line ------------------------===//

#include "TestUtil.h"

#include "fusion/runtime/Error.h"
#include "fusion/tooling/Options.h"

#include <gtest/gtest.h>

using namespace fusion::tooling;
using fusion::runtime::InvalidArgumentError;

namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"--ptx", "l.ptx", "--manifest", "l.json"});
  return parseOptions(args);
}

TEST(Options, MixedLengthsSetTheBatch) {
  Options o = parse({"--kv-lens", "0,5,13", "--steps", "3", "--graph",
                     "--tol=1e-3", "--layer", "2", "--json", "-"});
  EXPECT_EQ(o.ptx, "l.ptx");
  EXPECT_EQ(o.manifest, "l.json");
  EXPECT_EQ(o.batch, 3);
  EXPECT_EQ(o.kvLens, (std::vector<int64_t>{0, 5, 13}));
  EXPECT_EQ(o.steps, 3);
  EXPECT_TRUE(o.graph);
  EXPECT_DOUBLE_EQ(o.tol, 1e-3);
  EXPECT_EQ(o.layer, 2);
  EXPECT_EQ(o.json, "-");
  // Defaults.
  EXPECT_EQ(o.iters, 100);
  EXPECT_EQ(o.warmup, 10);
  EXPECT_EQ(o.layers, 1);
  EXPECT_EQ(o.seed, 1u);
  EXPECT_FALSE(o.dryRun);
}

TEST(Options, OneLengthRepeatedForTheBatch) {
  Options o = parse({"--batch", "4", "--kv-len", "9", "--dry-run"});
  EXPECT_EQ(o.kvLens, (std::vector<int64_t>(4, 9)));
  EXPECT_TRUE(o.dryRun);
  EXPECT_EQ(parse({}).kvLens, (std::vector<int64_t>{64}));
}

TEST(Options, NoClusters) {
  EXPECT_FALSE(parse({}).noClusters);
  Options o = parse({"--no-clusters", "--graph", "--sync-each"});
  EXPECT_TRUE(o.noClusters);
  EXPECT_TRUE(o.graph);
  EXPECT_TRUE(o.syncEach);
  EXPECT_CONTAINS(usage(), "--no-clusters           launch every kernel "
                           "without thread-block clusters");
}

TEST(Options, GoldenInputsKeepTheirOwnShape) {
  Options o = parse({"--inputs", "g.safetensors", "--weights", "dir"});
  EXPECT_EQ(o.batch, 0);
  EXPECT_TRUE(o.kvLens.empty());
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parse({"--inputs", "g", "--weights", "d",
                                          "--batch", "2"})),
                  "--batch, --kv-len, --kv-lens and --steps do not apply");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, parse({"--inputs", "g"})),
      "--inputs needs --weights");
}

TEST(Options, BadRequestsNameTheOption) {
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, parse({"--batch", "2147483648"})),
      "--batch expects an integer in [1, 65535], got \"2147483648\"");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       parse({"--kv-len", "3", "--kv-lens", "1,2"})),
      "give --kv-len or --kv-lens, not both");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parse({"--batch", "3", "--kv-lens", "1,2"})),
                  "--batch 3 but --kv-lens has 2 lengths");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parse({"--layers", "8", "--iters", "0"})),
                  "--layers 8 applies to the timing, which --iters 0");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, parse({"--tol", "-1"})),
      "--tol expects a positive number");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError, parse({"--bogus"})),
                  "unknown argument \"--bogus\" (fusion-run --help");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError, parse({"--steps"})),
                  "--steps needs a value");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, parseOptions({"--dry-run"})),
      "--ptx and --manifest are required");
}

TEST(Options, HelpAndCheckDeviceNeedNoModel) {
  Options help = parseOptions({"--help", "--bogus"});
  EXPECT_TRUE(help.help);
  EXPECT_CONTAINS(usage(), "usage: fusion-run --ptx FILE --manifest FILE");
  Options check = parseOptions({"--check-device", "--device", "3"});
  EXPECT_TRUE(check.checkDevice);
  EXPECT_EQ(check.device, 3);
}

} // namespace
