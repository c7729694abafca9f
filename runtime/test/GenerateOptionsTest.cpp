//===- GenerateOptionsTest.cpp - fusion-generate's command line -----------===//

#include "TestUtil.h"

#include "fusion/runtime/Error.h"
#include "fusion/tooling/GenerateOptions.h"

#include <gtest/gtest.h>

using namespace fusion::tooling;
using fusion::runtime::InvalidArgumentError;

namespace {

GenerateOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"--model", "out/m", "--checkpoint", "ckpt"});
  return parseGenerateOptions(args);
}

TEST(GenerateOptions, GenerationAndDefaults) {
  GenerateOptions o = parse({"--ids", " 1 2\t30 ", "--batch=4",
                             "--max-new-tokens", "8", "--dtype", "bf16"});
  EXPECT_EQ(o.model, "out/m");
  EXPECT_EQ(o.checkpoint, "ckpt");
  EXPECT_EQ(o.ids, (std::vector<int32_t>{1, 2, 30}));
  EXPECT_EQ(o.batch, 4);
  EXPECT_EQ(o.maxNewTokens, 8);
  EXPECT_EQ(o.dtype, "bf16");
  EXPECT_EQ(o.function, "decode_step");
  EXPECT_EQ(o.maxTokens, 0);
  EXPECT_EQ(o.prefillRows, 0);
  EXPECT_EQ(
      parse({"--ids", "5", "--batch", "4", "--prefill-rows", "4"}).prefillRows,
      4);
  EXPECT_FALSE(o.score);
  EXPECT_FALSE(o.noGraph);
  EXPECT_EQ(parse({"--ids", "5"}).maxNewTokens, 32);
  EXPECT_FALSE(o.randomWeights);
  EXPECT_EQ(parse({"--ids", "5", "--random-weights", "7"}).randomWeights,
            std::optional<uint64_t>(7));
}

TEST(GenerateOptions, NoClusters) {
  EXPECT_FALSE(parse({"--ids", "1"}).noClusters);
  // With the graph or without, as for a compute-sanitizer run.
  EXPECT_TRUE(parse({"--ids", "1", "--no-clusters"}).noClusters);
  GenerateOptions o =
      parse({"--ids", "1", "--no-graph", "--sync-each", "--no-clusters"});
  EXPECT_TRUE(o.noClusters);
  EXPECT_TRUE(o.noGraph);
  EXPECT_TRUE(o.syncEach);
  EXPECT_CONTAINS(generateUsage(), "--no-clusters           launch every "
                                   "kernel without thread-block clusters");
}

TEST(GenerateOptions, Score) {
  GenerateOptions o = parse({"--score", "--ids-file", "text.ids"});
  EXPECT_TRUE(o.score);
  EXPECT_EQ(o.idsFile, "text.ids");
  EXPECT_TRUE(o.ids.empty());
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       parse({"--score", "--ids", "1 2", "--batch", "2"})),
      "--score scores one text; --batch does not apply");
}

TEST(GenerateOptions, BadRequestsNameTheOption) {
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, parse({"--ids", "1 x 3"})),
      "--ids (token 1) expects an integer in [0, 2147483647], got \"x\" "
      "(fusion-generate --help lists the options)");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, parse({"--ids", "-1"})),
      "--ids (token 0) expects an integer in [0, 2147483647], got \"-1\"");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError, parse({"--ids", " "})),
                  "--ids holds no token ids");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError, parse({})),
                  "give the token ids with one of --ids and --ids-file");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parse({"--ids", "1", "--ids-file", "f"})),
                  "give the token ids with one of --ids and --ids-file");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parse({"--ids", "1", "--batch", "0"})),
                  "--batch expects an integer in [1, 65535], got \"0\"");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(
          InvalidArgumentError,
          parse({"--ids", "1", "--batch", "4", "--prefill-rows", "3"})),
      "--prefill-rows 3 is below --batch 4 (a decode step is --batch rows)");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       parse({"--ids", "1", "--prefill-rows", "0"})),
      "--prefill-rows expects an integer in [1, 2147483647], got "
      "\"0\"");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       parse({"--ids", "1", "--max-new-tokens", "0"})),
      "--max-new-tokens expects an integer in [1, 2147483647]");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parse({"--ids", "1", "--dtype", "f32"})),
                  "--dtype expects f16 or bf16, got \"f32\"");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parse({"--ids", "1", "--sync-each"})),
                  "--sync-each applies to --no-graph");
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parseGenerateOptions({"--ids", "1"})),
                  "--model and --checkpoint are required");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, parse({"--ids", "1", "--top-k"})),
      "unknown argument \"--top-k\" (fusion-generate --help");
}

TEST(GenerateOptions, HelpAndCheckDeviceNeedNoModel) {
  EXPECT_TRUE(parseGenerateOptions({"--help", "--bogus"}).help);
  EXPECT_CONTAINS(generateUsage(), "usage: fusion-generate --model PREFIX");
  GenerateOptions check = parseGenerateOptions({"--check-device"});
  EXPECT_TRUE(check.checkDevice);
}

TEST(GenerateOptions, TokenIds) {
  EXPECT_EQ(parseTokenIds("7\n8 9\n", "ids.txt"),
            (std::vector<int32_t>{7, 8, 9}));
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   parseTokenIds("1 2147483648", "ids.txt")),
                  "ids.txt (token 1) expects an integer in [0, 2147483647]");
}

} // namespace
