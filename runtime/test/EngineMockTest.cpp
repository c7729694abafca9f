//===- EngineMockTest.cpp - the Engine's mechanics on a GPU ---------------===//
//
// The Engine on test/data/engine_mock.ptx, two hand-written kernels with the
// arguments of a compiled whole model (tiny_model.json, pages of 4 tokens):
// the first appends each row's token to the cache, the second computes an
// integer function of each row's token, position (seq_lens - 1), page,
// embedding row and previous token (read from the cache; the PTX file says
// which), with one-hot logits at the result. The manifest is written here. A
// host model of the same function predicts every next token, so this checks the
// mechanics, not the math (EngineTest.cpp checks that on compiled models):
// the weights bound by name and uploaded, the caches bound per layer and
// kept across steps, the step inputs (tokens, positions, seq_lens, block
// table of the pool's pages), graph capture and direct launches, the
// downloads, chunked prefill (several rows of one sequence in a step, the
// previous token read from a slot the step itself appended) with prompts of
// different lengths, generate (the
// next tokens fed back on the device), score's
// log-softmax, and errors before any launch. Skipped without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Engine.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheManager.h"

#include "EngineMock.h"
#include "GpuTest.h"
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>

using namespace fusion::runtime;
using namespace fusion::runtime::test;

namespace {

/// The mock kernels on the host, with their own page pool of the engine's
/// sizes (allocation is deterministic, so where the steps append in the same
/// order the pages are the engine's).
class HostMock {
public:
  void addSequence(SeqId id) { cache_.addSequence(id); }
  void removeSequence(SeqId id) {
    cache_.release(id);
    last_.erase(id);
  }
  /// A step of tokens[b], consecutive tokens of sequence seqs[b], one row
  /// each (the pages of seqs[0]'s first); the next token of every row.
  std::vector<int32_t> rows(const std::vector<SeqId> &seqs,
                            const std::vector<std::vector<int32_t>> &tokens) {
    std::vector<int32_t> next;
    for (size_t b = 0; b < seqs.size(); ++b) {
      const int64_t start =
          cache_.appendTokens(seqs[b], static_cast<int64_t>(tokens[b].size()));
      const std::vector<int32_t> &pages = cache_.pages(seqs[b]);
      for (size_t i = 0; i < tokens[b].size(); ++i) {
        const int64_t pos = start + static_cast<int64_t>(i);
        const int64_t page = pages[pos / kPage];
        const int64_t prev = pos > 0 ? last_.at(seqs[b]) : 0;
        const int32_t token = tokens[b][i];
        next.push_back(static_cast<int32_t>(
            (token + 3 * pos + 5 * page + 7 * (token % 5) + 13 * prev) %
            kVocab));
        last_[seqs[b]] = token;
      }
    }
    return next;
  }
  /// A decode step: one token of each sequence.
  std::vector<int32_t> step(const std::vector<SeqId> &seqs,
                            const std::vector<int32_t> &tokens) {
    std::vector<std::vector<int32_t>> each;
    for (int32_t token : tokens)
      each.push_back({token});
    return rows(seqs, each);
  }

private:
  KVCacheManager cache_{18, kPage, 6};
  std::map<SeqId, int32_t> last_;
};

class EngineMock : public Gpu {
protected:
  std::unique_ptr<Engine> makeEngine(const EngineOptions &options) {
    return makeMockEngine(ctx(), options);
  }

  /// Checks `logits` ([batch, 300]) are one-hot at `next`.
  static void expectOneHot(const std::vector<uint16_t> &logits,
                           const std::vector<int32_t> &next) {
    ASSERT_EQ(logits.size(), next.size() * kVocab);
    for (size_t b = 0; b < next.size(); ++b)
      for (int64_t v = 0; v < kVocab; ++v)
        ASSERT_EQ(f16ToFloat(logits[b * kVocab + v]), v == next[b] ? 1.f : 0.f)
            << "row " << b << ", logit " << v;
  }

  /// Steps of mixed batches on both; every next token and logit checked.
  void runSteps(Engine &engine, HostMock &host) {
    for (SeqId id : {4, 5, 6}) {
      engine.addSequence(id);
      host.addSequence(id);
    }
    std::vector<uint16_t> logits;
    std::vector<int32_t> tokens = {1, 299, 42};
    for (int i = 0; i < 9; ++i) { // past two pages
      std::vector<int32_t> next = engine.step({4, 5, 6}, tokens, &logits);
      ASSERT_EQ(next, host.step({4, 5, 6}, tokens)) << "step " << i;
      expectOneHot(logits, next);
      tokens = next;
    }
    // A subset in another order, then a removed sequence's pages reused.
    std::vector<int32_t> next = engine.step({6, 4}, {tokens[2], tokens[0]});
    EXPECT_EQ(next, host.step({6, 4}, {tokens[2], tokens[0]}));
    engine.removeSequence(5);
    host.removeSequence(5);
    engine.addSequence(9);
    host.addSequence(9);
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> in = {next[0], static_cast<int32_t>(i), next[1]};
      std::vector<int32_t> out = engine.step({6, 9, 4}, in, &logits);
      ASSERT_EQ(out, host.step({6, 9, 4}, in)) << "reused pages, step " << i;
      expectOneHot(logits, out);
      next = {out[0], out[2]};
    }
    EXPECT_EQ(engine.length(4), 16);
    EXPECT_EQ(engine.length(9), 6);
  }
};

} // namespace

TEST_F(EngineMock, StepsThroughTheGraph) {
  std::unique_ptr<Engine> engine = makeEngine({});
  // Every weight once (the tied head is embed_w), K and V of each layer.
  const uint64_t weights =
      2 * (kVocab * kHidden +
           kLayers * (2 * kHidden + 128 * kHidden + kHidden * kHidden +
                      2 * 96 * kHidden + 96 * kHidden) +
           kHidden);
  EXPECT_EQ(engine->weightBytes(), weights);
  EXPECT_EQ(engine->cacheBytes(), uint64_t{2 * kLayers * 18 * 4 * 2 * 16 * 2});
  HostMock host;
  runSteps(*engine, host);
  // A graph per batch and input slot (the steps alternate between two):
  // batch 3 in both slots, batch 2 in one, then batch 3 again in both,
  // replayed, not captured again.
  EXPECT_EQ(engine->graphCaptures(), 3);
}

TEST_F(EngineMock, StepsWithDirectLaunches) {
  std::unique_ptr<Engine> engine = makeEngine({false, true});
  HostMock host;
  runSteps(*engine, host);
  EXPECT_EQ(engine->graphCaptures(), 0);
}

TEST_F(EngineMock, GenerateMatchesSteps) {
  for (bool graph : {true, false}) {
    SCOPED_TRACE(graph ? "graph" : "direct launches");
    std::unique_ptr<Engine> engine = makeEngine({graph, false});
    HostMock host;
    for (SeqId id : {4, 5, 6}) {
      engine->addSequence(id);
      host.addSequence(id);
    }
    std::vector<int32_t> tokens = {1, 299, 42};
    std::vector<std::vector<int32_t>> ids =
        engine->generate({4, 5, 6}, tokens, 9); // past two pages
    ASSERT_EQ(ids.size(), 3u);
    for (size_t t = 0; t < 9; ++t) {
      tokens = host.step({4, 5, 6}, tokens);
      for (size_t b = 0; b < 3; ++b)
        ASSERT_EQ(ids[b].at(t), tokens[b]) << "row " << b << ", step " << t;
    }
    // A step after generate continues the same sequences.
    EXPECT_EQ(engine->step({5, 4}, {tokens[1], tokens[0]}),
              host.step({5, 4}, {tokens[1], tokens[0]}));
    EXPECT_EQ(engine->length(4), 10);
    EXPECT_EQ(engine->length(6), 9);
  }
}

TEST_F(EngineMock, PrefillAndScore) {
  std::unique_ptr<Engine> engine = makeEngine({});
  HostMock host;
  for (SeqId id : {1, 2}) {
    engine->addSequence(id);
    host.addSequence(id);
  }
  const std::vector<int32_t> a = {3, 1, 4, 1, 5}, b = {9, 2};
  std::vector<uint16_t> logits;
  std::vector<int32_t> next = engine->prefill({1, 2}, {a, b}, &logits);
  // 7 rows in steps of at most 3, filled in prompt order: a[0..3); a[3..5)
  // and b[0]; b[1]. Prompt a ends at row 1 of step 1, b at row 0 of step 2.
  host.rows({1}, {{3, 1, 4}});
  const int32_t endA = host.rows({1, 2}, {{1, 5}, {9}})[1];
  const int32_t endB = host.rows({2}, {{2}})[0];
  EXPECT_EQ(next, (std::vector<int32_t>{endA, endB}));
  expectOneHot(logits, next);

  // score: a fresh sequence (the pool's unused id) removed at the end; the
  // log-softmax of a one-hot row is 1 - log(e + 299) at the hot token and
  // -log(e + 299) elsewhere.
  const std::vector<int32_t> text = {7, 100, 0, 250, 33, 33};
  const int64_t freePages = engine->sequences().numFreePages();
  std::vector<double> logProbs = engine->score(text);
  EXPECT_EQ(engine->sequences().numFreePages(), freePages);
  ASSERT_EQ(logProbs.size(), text.size() - 1);
  const SeqId scored = std::numeric_limits<SeqId>::min();
  host.addSequence(scored);
  const double logZ = std::log(std::exp(1.0) + 299);
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    int32_t hot = host.step({scored}, {text[i]})[0];
    EXPECT_NEAR(logProbs[i], (text[i + 1] == hot ? 1.0 : 0.0) - logZ, 1e-12)
        << "token " << i + 1;
  }
}

TEST_F(EngineMock, ChunkedPrefillMatchesTokenSteps) {
  // Prompts of 11, 1 and 6 tokens: 18 rows in ceil(18 / 3) = 6 steps of 3
  // (up to 3 rows of one sequence a step) on one engine; on another,
  // Engine::step one token at a time, each prompt in turn. The mock's next
  // token depends on the row's page, and prefill fills its steps from the
  // prompts in order, so both take the pages in the same order (prompt 0's
  // three, prompt 1's one, prompt 2's two). The mock is exact: the next
  // tokens and the one-hot logits must be equal.
  const std::vector<SeqId> seqs = {4, 5, 6};
  const std::vector<std::vector<int32_t>> prompts = {
      {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, {250}, {2, 7, 1, 8, 2, 8}};
  for (bool graph : {true, false}) {
    SCOPED_TRACE(graph ? "graph" : "direct launches");
    std::unique_ptr<Engine> chunked = makeEngine({graph, false});
    std::unique_ptr<Engine> stepped = makeEngine({graph, false});
    ASSERT_EQ(chunked->prefillRowsPerSequence(), 3);
    for (SeqId id : seqs) {
      chunked->addSequence(id);
      stepped->addSequence(id);
    }
    std::vector<uint16_t> logits, stepLogits;
    std::vector<int32_t> next = chunked->prefill(seqs, prompts, &logits);
    std::vector<int32_t> want;
    std::vector<uint16_t> wantLogits;
    for (size_t b = 0; b < seqs.size(); ++b) {
      std::vector<int32_t> out;
      for (int32_t token : prompts[b])
        out = stepped->step({seqs[b]}, {token}, &stepLogits);
      want.push_back(out[0]);
      wantLogits.insert(wantLogits.end(), stepLogits.begin(), stepLogits.end());
    }
    EXPECT_EQ(next, want);
    EXPECT_EQ(logits, wantLogits);
    expectOneHot(logits, next);
    // The caches agree: a decode step after the prefill continues alike.
    EXPECT_EQ(chunked->step(seqs, next), stepped->step(seqs, want));
    EXPECT_EQ(chunked->length(4), 12);
  }
}

TEST_F(EngineMock, ChunksLongerThanTheBatch) {
  // maxBatch 1: a prompt of 10 tokens as one step of 10 rows (the default
  // 64 rows a step) and as ceil(10 / 4) = 3 steps of 4, 4 and 2 rows
  // (maxStepRows 4), against Engine::step one token at a time on a fresh
  // engine. One sequence, so both take pages 0, 1, 2 in order; the mock is
  // exact.
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  for (int64_t rows : {0, 4}) {
    SCOPED_TRACE("maxStepRows " + std::to_string(rows));
    std::unique_ptr<Engine> chunked =
        makeMockEngine(ctx(), {}, EngineCapacity{1, 24, 0, rows});
    std::unique_ptr<Engine> stepped =
        makeMockEngine(ctx(), {}, EngineCapacity{1, 24, 0});
    chunked->addSequence(1);
    stepped->addSequence(1);
    std::vector<uint16_t> logits, wantLogits;
    std::vector<int32_t> want;
    for (int32_t token : prompt)
      want = stepped->step({1}, {token}, &wantLogits);
    EXPECT_EQ(chunked->prefill({1}, {prompt}, &logits), want);
    EXPECT_EQ(logits, wantLogits);
    expectOneHot(logits, want);
    // One capture a step shape and input slot: batch 10 in slot 0; batch 4
    // in slots 0 and 1, batch 2 in slot 0.
    EXPECT_EQ(chunked->graphCaptures(), rows == 0 ? 1 : 3);
    EXPECT_EQ(chunked->length(1), 10);
    // The caches agree: a decode step after the prefill continues alike.
    EXPECT_EQ(chunked->step({1}, want), stepped->step({1}, want));
  }
}

TEST_F(EngineMock, BadRequestsLaunchNothing) {
  std::unique_ptr<Engine> engine = makeEngine({});
  HostMock host;
  engine->addSequence(1);
  host.addSequence(1);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, engine->step({1}, {300})),
      "Engine::step: token 300 (index 0 of sequence 1) is outside the "
      "vocabulary [0, 300)");
  EXPECT_THROW(engine->step({1, 2, 3, 4}, {0, 0, 0, 0}), CapacityError);
  EXPECT_THROW(engine->prefill({1}, {std::vector<int32_t>(25, 0)}),
               CapacityError);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, engine->generate({1}, {7}, 0)),
      "Engine::generate: steps must be at least 1, got 0");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, engine->generate({1}, {300}, 2)),
      "Engine::generate: token 300");
  EXPECT_THROW(engine->generate({1}, {7}, 25), CapacityError);
  EXPECT_THROW(engine->score({5}), InvalidArgumentError);
  EXPECT_THROW(engine->score(std::vector<int32_t>(26, 0)), CapacityError);
  EXPECT_EQ(engine->length(1), 0);
  EXPECT_EQ(engine->graphCaptures(), 0);
  // The first step after the errors sees an empty sequence.
  EXPECT_EQ(engine->step({1}, {8}), host.step({1}, {8}));
  // A model compiled for another config is refused at construction.
  std::string ptx = readText(dataPath("engine_mock.ptx"));
  ModelConfig other = mockConfig();
  other.vocabSize = 200;
  ModelWeights w = mockWeights(mockConfig());
  std::string msg = EXPECT_THROW_MSG(
      FormatError,
      Engine(ctx(), Model(Manifest::parse(mockManifest(ptx), "mock.json")), ptx,
             "engine_mock.ptx", other, w, EngineCapacity{}));
  EXPECT_CONTAINS(msg, "argument 1 \"embed_w\" has shape [300, 64]");
}
