//===- EngineSmolLM2Test.cpp - the Engine on SmolLM2 vs transformers ------===//
//
// The Engine on the real SmolLM2-135M checkpoint ($FUSION_SMOLLM2_DIR, from
// scripts/get-smollm2.sh) compiled by the ctest fixture
// (runtime/test/gpu/compile-model.sh: fusion-import --whole-model --dtype=f16
// of its config.json, then fusion-compile; $FUSION_SMOLLM2_MODEL is the
// prefix) against transformers' numbers in test/golden/smollm2/reference.json
// for the dtype it was compiled for:
//
// - the teacher-forced perplexity of the whole Apache-2.0 text (2,215
//   tokens, 2,214 scored, no BOS: the number reference.json holds, so the
//   whole text, not a prefix), within 0.1% in f16 (issue 15's bar) and 0.5%
//   in bf16;
// - the greedy continuations of the five prompts, run as five sequences of
//   one batch: equal to transformers' ids up to the first step whose top-2
//   logit gap in reference.json is under 0.25 (a near-tie the two
//   implementations' roundings may break differently; f16 logits differ
//   from float64 by about 0.02).
//
// Skipped without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Engine.h"
#include "fusion/runtime/File.h"
#include "fusion/runtime/LogProbs.h"

#include "GpuTest.h"
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include <nlohmann/json.hpp>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using nlohmann::json;

namespace {

const char *const kReference = FUSION_GOLDEN_DIR "/smollm2/reference.json";

/// Top-2 gaps under this are near-ties: the ids after one are not compared.
constexpr double kNearTie = 0.25;

class EngineSmolLM2 : public Gpu {
protected:
  void SetUp() override {
    Gpu::SetUp();
    if (IsSkipped())
      return;
    const char *dir = std::getenv("FUSION_SMOLLM2_DIR");
    const char *model = std::getenv("FUSION_SMOLLM2_MODEL");
    ASSERT_TRUE(dir && *dir && model && *model)
        << "FUSION_SMOLLM2_DIR and FUSION_SMOLLM2_MODEL are not set (ctest "
           "sets them: the fixtures fetch the checkpoint and compile it)";
    dir_ = dir;
    prefix_ = model;
    reference_ = json::parse(readText(kReference));
  }

  /// An engine of the compiled model with the checkpoint's weights in its
  /// dtype, for `maxBatch` sequences of `maxTokens` tokens.
  std::unique_ptr<Engine> makeEngine(int64_t maxBatch, int64_t maxTokens) {
    Model model = Model::load(prefix_ + ".manifest.json", "decode_step");
    const ManifestArgument &table =
        model.arguments()[model.argumentIndex("embed_w")];
    dtype_ = table.dtype == ElemType::BF16 ? DType::BF16 : DType::F16;
    Checkpoint ckpt = Checkpoint::open(dir_);
    return std::make_unique<Engine>(
        ctx(), std::move(model), readPtx(prefix_ + ".ptx"), prefix_ + ".ptx",
        ckpt.config, loadModelWeights(ckpt.tensors, ckpt.config, dtype_),
        EngineCapacity{maxBatch, maxTokens, 0});
  }

  /// reference.json's numbers for the compiled dtype.
  const json &dtypeReference() const {
    return reference_.at("dtypes").at(dtype_ == DType::F16 ? "float16"
                                                           : "bfloat16");
  }

  std::string dir_, prefix_;
  json reference_;
  DType dtype_ = DType::F16;
};

} // namespace

TEST_F(EngineSmolLM2, PerplexityOfTheApacheText) {
  std::vector<int32_t> ids = reference_.at("text_ids");
  std::unique_ptr<Engine> engine =
      makeEngine(1, static_cast<int64_t>(ids.size()));
  std::vector<double> logProbs = engine->score(ids);
  ASSERT_EQ(logProbs.size(), ids.size() - 1);
  const json &want = dtypeReference().at("text");
  ASSERT_EQ(want.at("tokens_scored").get<size_t>(), logProbs.size());
  const double ppl = perplexity(logProbs);
  const double wantPpl = want.at("perplexity").get<double>();
  const double bound = dtype_ == DType::F16 ? 1e-3 : 5e-3;
  std::printf("%s perplexity %.6f, transformers %.6f (relative %.2e)\n",
              std::string(dtypeName(dtype_)).c_str(), ppl, wantPpl,
              std::fabs(ppl - wantPpl) / wantPpl);
  EXPECT_LT(std::fabs(ppl - wantPpl) / wantPpl, bound);
}

TEST_F(EngineSmolLM2, GreedyContinuationsOfThePrompts) {
  const json &prompts = reference_.at("prompt_ids");
  const json &greedy = dtypeReference().at("greedy");
  std::unique_ptr<Engine> engine = makeEngine(5, 64);
  std::vector<SeqId> seqs;
  std::vector<std::vector<int32_t>> promptIds;
  size_t steps = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    seqs.push_back(static_cast<SeqId>(p));
    engine->addSequence(seqs.back());
    promptIds.push_back(prompts[p].get<std::vector<int32_t>>());
    steps = std::max(steps, greedy[p].at("ids").size());
  }
  std::vector<std::vector<int32_t>> out(seqs.size());
  std::vector<int32_t> next = engine->prefill(seqs, promptIds);
  for (size_t i = 0; i < steps; ++i) {
    for (size_t b = 0; b < seqs.size(); ++b)
      out[b].push_back(next[b]);
    if (i + 1 < steps)
      next = engine->step(seqs, next);
  }
  for (size_t p = 0; p < seqs.size(); ++p) {
    std::vector<int32_t> want = greedy[p].at("ids");
    std::vector<double> gaps = greedy[p].at("top2_gap");
    size_t compared = 0;
    while (compared < want.size() && gaps[compared] >= kNearTie)
      ++compared;
    // Up to and including the first near-tie's own choice is not
    // compared; everything before it must be transformers' ids.
    ASSERT_GE(compared, 1u) << "prompt " << p;
    std::vector<int32_t> got(out[p].begin(), out[p].begin() + compared);
    want.resize(compared);
    EXPECT_EQ(got, want) << "prompt " << p << " (the first " << compared
                         << " tokens, before a top-2 gap under " << kNearTie
                         << ")";
    std::printf("prompt %zu: %zu of %zu tokens compared\n", p, compared,
                greedy[p].at("ids").size());
  }
}
