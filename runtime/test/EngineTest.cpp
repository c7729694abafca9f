//===- EngineTest.cpp - the Engine on tiny whole models vs the reference --===//
//
// The Engine against ModelReference (the CPU reference of the whole model) on
// the tiny whole models of runtime/test/data/configs: tiny_model.json (f16,
// 2 layers, tied LM head) and tiny_model_bias_untied.json (bf16, 3 layers,
// GQA 4/1, q/k/v bias, untied LM head), with random weights. Nothing is
// compiled here: the ctest fixture (runtime/test/gpu/compile-model.sh:
// fusion-import --whole-model --page-size=4, then fusion-compile) writes
// $FUSION_ENGINE_MODELS/<config name>.{ptx,manifest.json}.
//
// Every step of mixed-length prompts, greedy decoding, a sequence removed
// and another started on its pages: the logits of each step within the
// bound of ModelGoldenTest (relative RMS of the worst row), the next tokens
// the argmax of the engine's own logits and the reference's wherever its
// top-2 gap exceeds the logit error. Prefill and score against the same
// reference, and the host-side errors leave the engine usable. Skipped
// without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Engine.h"
#include "fusion/runtime/Compare.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"
#include "fusion/runtime/LogProbs.h"
#include "fusion/runtime/Reference.h"
#include "fusion/tooling/ModelReference.h"

#include "GpuTest.h"
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using fusion::tooling::ModelReference;

namespace {

/// Token t of every prompt that has one: the sequences, their tokens and
/// their rows (indices into `seqs`), as one step feeds them.
struct PromptColumn {
  std::vector<SeqId> ids;
  std::vector<int32_t> tokens;
  std::vector<size_t> rows;
};
PromptColumn promptColumn(const std::vector<SeqId> &seqs,
                          const std::vector<std::vector<int32_t>> &prompts,
                          size_t t) {
  PromptColumn c;
  for (size_t b = 0; b < seqs.size(); ++b)
    if (t < prompts[b].size()) {
      c.ids.push_back(seqs[b]);
      c.tokens.push_back(prompts[b][t]);
      c.rows.push_back(b);
    }
  return c;
}

/// Deterministic uniform numbers (a 64-bit LCG).
class Lcg {
public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  double uniform(double lo, double hi) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * static_cast<double>(state_ >> 11) / 0x1p53;
  }
  int32_t token(int64_t vocab) {
    return static_cast<int32_t>(uniform(0, 1) * static_cast<double>(vocab));
  }

private:
  uint64_t state_;
};

std::vector<uint16_t> uniform(DType dt, int64_t n, double bound, Lcg &rng,
                              double center = 0) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t &x : v)
    x = fromDouble(dt, center + rng.uniform(-bound, bound));
  return v;
}

/// Random weights of `c`: projections U(-sqrt(3/K), sqrt(3/K)) (unit
/// variance outputs), norm weights U(0.5, 1.5), embeddings and LM head
/// U(-1, 1) (logits of a few units, so that top-2 gaps are wide).
ModelWeights randomWeights(const ModelConfig &c, DType dt, uint64_t seed) {
  Lcg rng(seed);
  const int64_t H = c.hiddenSize, V = c.vocabSize, I = c.intermediateSize,
                R = c.dims().qkvRows(), Q = c.numAttentionHeads * c.headDim;
  auto scale = [](int64_t k) {
    return std::sqrt(3.0 / static_cast<double>(k));
  };
  ModelWeights w;
  w.dtype = dt;
  w.embedTokens = uniform(dt, V * H, 1.0, rng);
  for (int64_t l = 0; l < c.numHiddenLayers; ++l) {
    DecoderLayerWeights lw;
    lw.front.dtype = dt;
    lw.front.hidden = H;
    lw.front.dims = c.dims();
    lw.front.normWeight = uniform(dt, H, 0.5, rng, 1.0);
    lw.front.qkvWeight = uniform(dt, R * H, scale(H), rng);
    if (c.attentionBias)
      lw.front.qkvBias = uniform(dt, R, 0.2, rng);
    lw.oProj = uniform(dt, H * Q, scale(Q), rng);
    lw.postNorm = uniform(dt, H, 0.5, rng, 1.0);
    lw.gateUp = uniform(dt, 2 * I * H, scale(H), rng);
    lw.down = uniform(dt, H * I, scale(I), rng);
    w.layers.push_back(std::move(lw));
  }
  w.finalNorm = uniform(dt, H, 0.5, rng, 1.0);
  if (!c.tieWordEmbeddings)
    w.lmHead = uniform(dt, V * H, 1.0, rng);
  return w;
}

/// One tiny model: its config, weights, engine and reference.
class EngineTiny : public Gpu,
                   public ::testing::WithParamInterface<const char *> {
protected:
  void SetUp() override {
    Gpu::SetUp();
    if (IsSkipped())
      return;
    const char *dir = std::getenv("FUSION_ENGINE_MODELS");
    ASSERT_TRUE(dir && *dir)
        << "FUSION_ENGINE_MODELS is not set (ctest sets it; its fixture "
           "compiles the tiny models with runtime/test/gpu/compile-model.sh)";
    config_ = ModelConfig::load(dataPath("configs/") + GetParam() + ".json");
    dtype_ = *config_.torchDtype;
    weights_ = randomWeights(config_, dtype_, 2026);
    prefix_ = std::string(dir) + "/" + GetParam();
    engine_ = makeEngine();
    reference_ = std::make_unique<ModelReference>(
        config_, weights_, engine_->sequences().numPages(),
        engine_->sequences().pageSize());
  }

  /// An engine of the compiled model with weights_ for `capacity`; by
  /// default 3 sequences and 3 rows a step (so that short prompts take
  /// several chunks), 24 tokens a sequence.
  std::unique_ptr<Engine>
  makeEngine(const EngineCapacity &capacity = EngineCapacity{3, 24, 0, 3}) {
    return std::make_unique<Engine>(
        ctx(), Model::load(prefix_ + ".manifest.json", "decode_step"),
        readPtx(prefix_ + ".ptx"), prefix_ + ".ptx", config_, weights_,
        capacity);
  }

  /// The bound on the relative RMS error of the logits (ModelGoldenTest's).
  double tolerance() const { return dtype_ == DType::F16 ? 0.01 : 0.06; }

  /// One step of both; checks the logits and the next tokens and returns
  /// the engine's next tokens.
  std::vector<int32_t> checkStep(const std::vector<SeqId> &seqs,
                                 const std::vector<int32_t> &tokens,
                                 const std::string &what) {
    std::vector<uint16_t> logits;
    std::vector<int32_t> next = engine_->step(seqs, tokens, &logits);
    std::vector<uint16_t> want = reference_->step(seqs, tokens);
    checkLogits(logits, want, next, what);
    return next;
  }

  /// `logits` (the engine's, with its `next` tokens) against the
  /// reference's `want`, [batch, vocab] each.
  void checkLogits(const std::vector<uint16_t> &logits,
                   const std::vector<uint16_t> &want,
                   const std::vector<int32_t> &next, const std::string &what) {
    const int64_t B = static_cast<int64_t>(next.size()), V = config_.vocabSize;
    ASSERT_EQ(logits.size(), static_cast<size_t>(B * V)) << what;
    std::vector<double> got = toDoubles(dtype_, logits.data(), B * V);
    std::vector<double> ref = toDoubles(dtype_, want.data(), B * V);
    ErrorStats e = worstRow(got, ref, B);
    EXPECT_EQ(e.nonFinite, 0) << what;
    EXPECT_LT(e.rel, tolerance()) << what;
    std::vector<int32_t> own(static_cast<size_t>(B)), refNext(own.size());
    ref::argmax(dtype_, B, V, logits.data(), own.data());
    ref::argmax(dtype_, B, V, want.data(), refNext.data());
    EXPECT_EQ(next, own) << what << ": the argmax kernel";
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> row(ref.begin() + b * V, ref.begin() + (b + 1) * V);
      std::nth_element(row.begin(), row.begin() + 1, row.end(),
                       std::greater<>());
      if (row[0] - row[1] > 2 * e.maxAbs) {
        EXPECT_EQ(next[b], refNext[b]) << what << ", row " << b;
      }
    }
  }

  std::string prefix_; ///< the compiled model's files, without .ptx
  ModelConfig config_;
  DType dtype_ = DType::F16;
  ModelWeights weights_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ModelReference> reference_;
};

} // namespace

TEST_P(EngineTiny, EveryStepMatchesTheReference) {
  Lcg rng(7);
  const std::vector<SeqId> seqs = {10, 11, 12};
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t n : {5, 9, 2}) {
    prompts.emplace_back();
    for (int64_t i = 0; i < n; ++i)
      prompts.back().push_back(rng.token(config_.vocabSize));
  }
  for (SeqId id : seqs) {
    engine_->addSequence(id);
    reference_->addSequence(id);
  }
  // The prompts token by token, the rows of the longer ones only at the
  // end; a sequence's first generated token once its prompt is done.
  std::vector<int32_t> next(seqs.size());
  for (size_t t = 0; t < 9; ++t) {
    PromptColumn c = promptColumn(seqs, prompts, t);
    std::vector<int32_t> out =
        checkStep(c.ids, c.tokens, "prompt step " + std::to_string(t));
    for (size_t j = 0; j < c.rows.size(); ++j)
      next[c.rows[j]] = out[j];
  }
  // Greedy decoding of all three (up to 17 tokens: past 4 pages of 4).
  for (int i = 0; i < 8; ++i)
    next = checkStep(seqs, next, "decode step " + std::to_string(i));
  EXPECT_EQ(engine_->length(11), 17);
  // Sequence 11 ends; 13 starts on its pages, batched with the others.
  engine_->removeSequence(11);
  reference_->removeSequence(11);
  engine_->addSequence(13);
  reference_->addSequence(13);
  std::vector<int32_t> pair = {next[2], next[0]};
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> out = checkStep({12, 13, 10}, {pair[0], 7, pair[1]},
                                         "reused pages " + std::to_string(i));
    pair = {out[0], out[2]};
  }
  EXPECT_GE(engine_->graphCaptures(), 2); // batches 3, 2, 1 and 3
}

TEST_P(EngineTiny, PrefillAndScoreMatchTheReference) {
  Lcg rng(11);
  std::vector<int32_t> a, b;
  for (int i = 0; i < 7; ++i)
    a.push_back(rng.token(config_.vocabSize));
  for (int i = 0; i < 3; ++i)
    b.push_back(rng.token(config_.vocabSize));
  const int64_t V = config_.vocabSize;
  for (SeqId id : {1, 2}) {
    engine_->addSequence(id);
    reference_->addSequence(id);
  }
  std::vector<uint16_t> logits;
  std::vector<int32_t> next = engine_->prefill({1, 2}, {a, b}, &logits);
  std::vector<uint16_t> want(static_cast<size_t>(2 * V)), row;
  for (size_t t = 0; t < a.size(); ++t) {
    row = t < b.size() ? reference_->step({1, 2}, {a[t], b[t]})
                       : reference_->step({1}, {a[t]});
    if (t + 1 == b.size())
      std::copy_n(row.begin() + V, V, want.begin() + V);
  }
  std::copy_n(row.begin(), V, want.begin());
  checkLogits(logits, want, next, "prefill");
  EXPECT_EQ(engine_->length(1), 7);
  EXPECT_EQ(engine_->length(2), 3);

  // Score a text: log-softmax of the reference's teacher-forced logits.
  std::vector<int32_t> text;
  for (int i = 0; i < 12; ++i)
    text.push_back(rng.token(V));
  const int64_t freePages = engine_->sequences().numFreePages();
  std::vector<double> logProbs = engine_->score(text);
  ASSERT_EQ(logProbs.size(), text.size() - 1);
  EXPECT_EQ(engine_->sequences().numFreePages(), freePages);
  reference_->addSequence(99);
  const double bound = dtype_ == DType::F16 ? 0.02 : 0.15;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    row = reference_->step({99}, {text[i]});
    double lp = tokenLogProb(dtype_, row.data(), V, text[i + 1]);
    EXPECT_NEAR(logProbs[i], lp, bound) << "token " << i + 1;
  }
  EXPECT_GT(perplexity(logProbs), 1.0);
}

TEST_P(EngineTiny, ChunkedPrefillMatchesTokenSteps) {
  // Prompts of 13, 1 and 6 tokens: 20 rows in ceil(20 / 3) = 7 steps, up to
  // 3 rows of one sequence a step (its K/V appended by the step's front
  // half, read by the step's attention), against Engine::step one token at a
  // time on a second engine with the same weights: the logits of each
  // prompt's last token within the tolerance, the next tokens equal
  // wherever the top-2 gap exceeds the logit error (greedy ids may differ
  // only on near ties).
  ASSERT_EQ(engine_->prefillRowsPerSequence(), 3)
      << "the compiled model appends and reads the cache in one kernel";
  Lcg rng(13);
  const std::vector<SeqId> seqs = {1, 2, 3};
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t n : {13, 1, 6}) {
    prompts.emplace_back();
    for (int64_t i = 0; i < n; ++i)
      prompts.back().push_back(rng.token(config_.vocabSize));
  }
  std::unique_ptr<Engine> stepped = makeEngine();
  for (SeqId id : seqs) {
    engine_->addSequence(id);
    stepped->addSequence(id);
  }
  std::vector<uint16_t> logits, stepLogits;
  std::vector<int32_t> next = engine_->prefill(seqs, prompts, &logits);
  const size_t V = static_cast<size_t>(config_.vocabSize);
  std::vector<uint16_t> want(seqs.size() * V);
  for (size_t t = 0; t < prompts[0].size(); ++t) {
    PromptColumn c = promptColumn(seqs, prompts, t);
    const std::vector<size_t> &rows = c.rows;
    stepped->step(c.ids, c.tokens, &stepLogits);
    for (size_t j = 0; j < rows.size(); ++j)
      if (t + 1 == prompts[rows[j]].size())
        std::copy_n(stepLogits.begin() + j * V, V, want.begin() + rows[j] * V);
  }
  checkLogits(logits, want, next, "chunked prefill");
  // The caches agree: a decode step of the same tokens on both.
  std::vector<int32_t> out = engine_->step(seqs, next, &logits);
  stepped->step(seqs, next, &stepLogits);
  checkLogits(logits, stepLogits, out, "decode after the chunked prefill");
}

TEST_P(EngineTiny, OneSequenceChunkMatchesTokenSteps) {
  // maxBatch 1 with the default step (64 rows): a prompt of 20 tokens is one
  // step of 20 rows (past one token tile of 16 where the projections have
  // GEMM-shaped variants), against Engine::step one token at a time: the
  // logits of the last token within the tolerance, then a decode step on
  // both.
  std::unique_ptr<Engine> chunked = makeEngine(EngineCapacity{1, 24, 0});
  std::unique_ptr<Engine> stepped = makeEngine(EngineCapacity{1, 24, 0});
  ASSERT_EQ(chunked->prefillRowsPerSequence(), 64);
  Lcg rng(17);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i)
    prompt.push_back(rng.token(config_.vocabSize));
  chunked->addSequence(1);
  stepped->addSequence(1);
  std::vector<uint16_t> logits, stepLogits;
  std::vector<int32_t> next = chunked->prefill({1}, {prompt}, &logits);
  EXPECT_EQ(chunked->graphCaptures(), 1); // one step
  for (int32_t token : prompt)
    stepped->step({1}, {token}, &stepLogits);
  checkLogits(logits, stepLogits, next, "one 20-row chunk");
  std::vector<int32_t> out = chunked->step({1}, next, &logits);
  stepped->step({1}, next, &stepLogits);
  checkLogits(logits, stepLogits, out, "decode after the 20-row chunk");
}

TEST_P(EngineTiny, BadRequestsLaunchNothing) {
  engine_->addSequence(5);
  reference_->addSequence(5);
  EXPECT_THROW(engine_->step({5}, {static_cast<int32_t>(config_.vocabSize)}),
               InvalidArgumentError);
  EXPECT_THROW(engine_->step({5, 6}, {1, 2}), InvalidArgumentError);
  EXPECT_THROW(engine_->prefill({5}, {std::vector<int32_t>(25, 1)}),
               CapacityError);
  EXPECT_THROW(engine_->score({1}), InvalidArgumentError);
  EXPECT_EQ(engine_->length(5), 0);
  // The engine still runs, from an unchanged cache.
  checkStep({5}, {3}, "after the errors");
  checkStep({5}, {4}, "after the errors");
}

INSTANTIATE_TEST_SUITE_P(Configs, EngineTiny,
                         ::testing::Values("tiny_model",
                                           "tiny_model_bias_untied"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });
