//===- SequencePoolTest.cpp - the engine's host side ----------------------===//
//
// The checks Engine makes before anything launches, and the inputs of each
// step, on the CPU.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/SequencePool.h"

#include "fusion/runtime/Error.h"

#include "TestUtil.h"

#include <array>
#include <limits>

using namespace fusion::runtime;

namespace {

/// At most 2 sequences of 10 tokens in pages of 4 (3 pages each, 6 pages),
/// a vocabulary of 50.
SequencePool smallPool(int64_t numPages = 0) {
  return SequencePool(EngineCapacity{2, 10, numPages}, 4, 50);
}

} // namespace

TEST(SequencePool, Capacities) {
  SequencePool pool = smallPool();
  EXPECT_EQ(pool.maxPagesPerSeq(), 3);
  EXPECT_EQ(pool.numPages(), 6);
  EXPECT_EQ(pool.pageSize(), 4);
  EXPECT_EQ(smallPool(5).numPages(), 5);
  std::string msg = EXPECT_THROW_MSG(
      InvalidArgumentError, SequencePool(EngineCapacity{0, 10, 0}, 4, 50));
  EXPECT_CONTAINS(msg, "maxBatch must be >= 1, got 0");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         SequencePool(EngineCapacity{1, 10, 0}, 4, 0));
  EXPECT_CONTAINS(msg, "vocabulary size must be >= 1, got 0");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         SequencePool(EngineCapacity{1, 10, -1}, 4, 5));
  EXPECT_CONTAINS(msg, "numPages must be >= 0, got -1");
  msg = EXPECT_THROW_MSG(
      CapacityError,
      SequencePool(EngineCapacity{1, int64_t(1) << 31, 0}, 4, 5));
  EXPECT_CONTAINS(msg, "2147483648 tokens per sequence in pages of 4 exceed "
                       "the int32 positions");
  msg = EXPECT_THROW_MSG(
      CapacityError, SequencePool(EngineCapacity{65536, 1 << 20, 0}, 16, 5));
  EXPECT_CONTAINS(msg, "65536 sequences of 65536 pages exceed the int32 page "
                       "ids");
}

TEST(SequencePool, StepRowsDefaultToATokenTile) {
  // 0 resolves to max(maxBatch, 64): 64 rows at maxBatch 2, maxBatch itself
  // above 64; a value >= maxBatch is kept.
  EXPECT_EQ(smallPool().capacity().maxStepRows, 64);
  EXPECT_EQ(
      SequencePool(EngineCapacity{100, 10, 0}, 4, 50).capacity().maxStepRows,
      100);
  EXPECT_EQ(
      SequencePool(EngineCapacity{2, 10, 0, 2}, 4, 50).capacity().maxStepRows,
      2);
  for (int64_t rows : {1, -1})
    EXPECT_CONTAINS(
        EXPECT_THROW_MSG(InvalidArgumentError,
                         SequencePool(EngineCapacity{2, 10, 0, rows}, 4, 50)),
        "maxStepRows must be 0 (the default) or in [maxBatch, 2^31) = [2, "
        "2147483648), got " +
            std::to_string(rows));
}

TEST(SequencePool, StepRowsBoundChunksAndMaxBatchBoundsSequences) {
  // One sequence at a time, up to 4 rows a step, 12 tokens in pages of 4.
  SequencePool pool(EngineCapacity{1, 12, 0, 4}, 4, 50);
  pool.addSequence(1);
  pool.addSequence(2);
  // A chunk of 4 rows of one sequence: positions 0-3, all in page 0.
  HostStep s = pool.prepareRows({1}, {{1, 2, 3, 4}});
  EXPECT_EQ(s.shape.batch, 4);
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(s.seqLens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(pool.length(1), 4);
  EXPECT_EQ(pool.numFreePages(), 3 - 1); // 1 sequence of ceil(12 / 4) pages
  // One row more is refused, naming maxStepRows, and changes nothing.
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError, pool.prepareRows({1}, {{1, 2, 3, 4, 5}})),
      "Engine::prefill: 5 rows (tokens) exceed the engine's maximum of 4 rows "
      "a step (EngineCapacity::maxStepRows)");
  // Two sequences are more than maxBatch 1, in a decode step, a chunk of one
  // row each, a prefill request or a generate request.
  const std::string twoSeqs =
      "2 sequences exceed the engine's maximum batch of 1 "
      "(EngineCapacity::maxBatch)";
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError, pool.prepareStep({1, 2}, {5, 5})),
      "Engine::step: " + twoSeqs);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError, pool.prepareRows({1, 2}, {{5}, {5}})),
      "Engine::prefill: " + twoSeqs);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError, pool.checkPrompts({1, 2}, {{5}, {5}})),
      "Engine::prefill: " + twoSeqs);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CapacityError,
                       pool.checkSteps({1, 2}, {5, 5}, 1, "Engine::generate")),
      "Engine::generate: " + twoSeqs);
  EXPECT_EQ(pool.length(1), 4);
  EXPECT_EQ(pool.length(2), 0);
  EXPECT_EQ(pool.numFreePages(), 2);
}

TEST(SequencePool, StepInputs) {
  SequencePool pool = smallPool();
  pool.addSequence(7);
  pool.addSequence(-3);
  HostStep s = pool.prepareStep({7, -3}, {11, 12});
  EXPECT_EQ(s.shape.batch, 2);
  EXPECT_EQ(s.shape.maxPages, 3); // the fixed width, for the graph
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(s.seqLens, (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(s.blockTable, (std::vector<int32_t>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(s.maxSeqLen, 1);
  StepInputs in = s.inputs();
  EXPECT_EQ(in.positions, s.positions.data());
  EXPECT_EQ(in.blockTable, s.blockTable.data());
  // Sequence 7 alone up to a new page: positions 1..4, page 2 at token 4.
  for (int i = 0; i < 4; ++i)
    s = pool.prepareStep({7}, {1});
  EXPECT_EQ(s.positions, (std::vector<int32_t>{4}));
  EXPECT_EQ(s.seqLens, (std::vector<int32_t>{5}));
  EXPECT_EQ(s.blockTable, (std::vector<int32_t>{0, 2, 0}));
  EXPECT_EQ(pool.length(7), 5);
  EXPECT_EQ(pool.length(-3), 1);
  EXPECT_EQ(pool.numFreePages(), 3);
  pool.removeSequence(7);
  EXPECT_EQ(pool.numFreePages(), 5);
  EXPECT_FALSE(pool.contains(7));
}

TEST(SequencePool, StepErrorsChangeNothing) {
  SequencePool pool = smallPool();
  pool.addSequence(1);
  pool.addSequence(2);
  pool.addSequence(3);
  pool.prepareStep({1}, {5});
  auto unchanged = [&] {
    EXPECT_EQ(pool.length(1), 1);
    EXPECT_EQ(pool.length(2), 0);
    EXPECT_EQ(pool.numFreePages(), 5);
  };
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareStep({}, {}));
  EXPECT_CONTAINS(msg, "Engine::step: no sequences");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareStep({1, 2}, {5}));
  EXPECT_CONTAINS(msg, "Engine::step: 1 token rows for 2 sequences");
  msg = EXPECT_THROW_MSG(CapacityError, pool.prepareStep({1, 2, 3}, {5, 5, 5}));
  EXPECT_CONTAINS(msg, "Engine::step: 3 sequences exceed the engine's maximum "
                       "batch of 2 (EngineCapacity::maxBatch)");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareStep({1, 2}, {5, 50}));
  // The index is the token's among those of its sequence in the request.
  EXPECT_CONTAINS(msg, "Engine::step: token 50 (index 0 of sequence 2) is "
                       "outside the vocabulary [0, 50)");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareStep({2}, {-1}));
  EXPECT_CONTAINS(msg, "token -1 (index 0 of sequence 2)");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareStep({1, 9}, {5, 5}));
  EXPECT_CONTAINS(msg, "Engine::step: unknown sequence 9 (row 1)");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareStep({2, 2}, {5, 5}));
  EXPECT_CONTAINS(msg, "Engine::step: sequence 2 appears twice (rows 0 and 1)");
  unchanged();

  // A full sequence: 10 tokens is the most.
  for (int i = 0; i < 9; ++i)
    pool.prepareStep({1}, {5});
  msg = EXPECT_THROW_MSG(CapacityError, pool.prepareStep({2, 1}, {5, 5}));
  EXPECT_CONTAINS(msg, "Engine::step: sequence 1 holds 10 tokens; 1 more "
                       "exceed the 10 a sequence may hold "
                       "(EngineCapacity::maxTokensPerSeq)");
  EXPECT_EQ(pool.length(2), 0);
}

TEST(SequencePool, RowsOfOneSequenceInOneStep) {
  // Up to 6 sequences (and the default 64 rows) a step, 12 tokens a
  // sequence in pages of 4: block tables of 3 pages; pages are handed out
  // 0, 1, 2, ... in order.
  SequencePool pool(EngineCapacity{6, 12, 0}, 4, 50);
  pool.addSequence(7);
  pool.addSequence(9);
  HostStep s = pool.prepareRows({7}, {{1, 2, 3}}); // positions 0-2, page 0
  EXPECT_EQ(s.shape.batch, 3);
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(s.seqLens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(s.blockTable, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0}));
  // Sequence 7's positions 3, 4, 5 cross into its second page (1, taken
  // first: its rows come first); sequence 9's positions 0, 1 take page 2.
  // Each row reads its sequence up to its own token: seq_lens = position + 1.
  s = pool.prepareRows({7, 9}, {{10, 11, 12}, {20, 21}});
  EXPECT_EQ(s.shape.batch, 5);
  EXPECT_EQ(s.shape.maxPages, 3);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{10, 11, 12, 20, 21}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{3, 4, 5, 0, 1}));
  EXPECT_EQ(s.seqLens, (std::vector<int32_t>{4, 5, 6, 1, 2}));
  EXPECT_EQ(s.blockTable, (std::vector<int32_t>{0, 1, 0, //
                                                0, 1, 0, //
                                                0, 1, 0, //
                                                2, 0, 0, //
                                                2, 0, 0}));
  EXPECT_EQ(s.maxSeqLen, 6);
  EXPECT_EQ(pool.length(7), 6);
  EXPECT_EQ(pool.length(9), 2);
  EXPECT_EQ(pool.numFreePages(), 18 - 3); // 6 sequences of 3 pages
  // A one-token step is the same with one row per sequence.
  s = pool.prepareStep({9, 7}, {30, 31});
  EXPECT_EQ(s.positions, (std::vector<int32_t>{2, 6}));
  EXPECT_EQ(s.seqLens, (std::vector<int32_t>{3, 7}));
  EXPECT_EQ(s.blockTable, (std::vector<int32_t>{2, 0, 0, 0, 1, 0}));
}

TEST(SequencePool, RowErrorsChangeNothing) {
  // Up to 2 sequences and 4 rows a step, 6 tokens a sequence (2 pages of
  // 4), 3 pages in all.
  SequencePool pool(EngineCapacity{2, 6, 3, 4}, 4, 50);
  pool.addSequence(1);
  pool.addSequence(2);
  pool.prepareRows({1, 2}, {{0, 0, 0}, {0}}); // pages 0 and 1
  pool.prepareRows({2}, {{0, 0, 0}});         // sequence 2 fills page 1
  auto unchanged = [&] {
    EXPECT_EQ(pool.length(1), 3);
    EXPECT_EQ(pool.length(2), 4);
    EXPECT_EQ(pool.numFreePages(), 1);
  };
  std::string msg = EXPECT_THROW_MSG(
      CapacityError, pool.prepareRows({1, 2}, {{5, 5, 5}, {5, 5}}));
  EXPECT_CONTAINS(msg, "Engine::prefill: 5 rows (tokens) exceed the engine's "
                       "maximum of 4 rows a step "
                       "(EngineCapacity::maxStepRows)");
  msg = EXPECT_THROW_MSG(CapacityError, pool.prepareRows({2}, {{5, 5, 5}}));
  EXPECT_CONTAINS(msg, "Engine::prefill: sequence 2 holds 4 tokens; 3 more "
                       "exceed the 6 a sequence may hold");
  // Sequence 1's positions 3 and 4 need its second page, sequence 2's
  // position 4 a third: 2 pages, 1 free.
  msg = EXPECT_THROW_MSG(CapacityError,
                         pool.prepareRows({1, 2}, {{5, 5}, {5}}, "Engine::x"));
  EXPECT_CONTAINS(msg, "Engine::x: the step needs 2 new pages; 1 of 3 are "
                       "free");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareRows({1}, {{}}));
  EXPECT_CONTAINS(msg, "Engine::prefill: no tokens for sequence 1");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, pool.prepareRows({1}, {{1, 50}}));
  EXPECT_CONTAINS(msg, "token 50 (index 1 of sequence 1) is outside the "
                       "vocabulary");
  unchanged();
  // What fits: sequence 1's positions 3 and 4 (its second page, the last).
  HostStep s = pool.prepareRows({1}, {{5, 6}});
  EXPECT_EQ(s.positions, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(s.blockTable, (std::vector<int32_t>{0, 2, 0, 2}));
  EXPECT_EQ(pool.numFreePages(), 0);
}

namespace {

/// (prompt, begin, count) of each chunk of each step.
std::vector<std::vector<std::array<size_t, 3>>>
chunks(const std::vector<std::vector<PromptChunk>> &steps) {
  std::vector<std::vector<std::array<size_t, 3>>> out;
  for (const std::vector<PromptChunk> &step : steps) {
    out.emplace_back();
    for (const PromptChunk &c : step)
      out.back().push_back({c.prompt, c.begin, c.count});
  }
  return out;
}

} // namespace

TEST(SequencePool, PrefillPlan) {
  // 3 sequences and 3 rows a step.
  SequencePool pool(EngineCapacity{3, 24, 0, 3}, 4, 50);
  using Steps = std::vector<std::vector<std::array<size_t, 3>>>;
  // Prompts of 5 and 2 tokens, 7 rows: ceil(7 / 3) = 3 steps, filled in
  // prompt order; prompt 0 ends in step 1 (row 1), prompt 1 in step 2.
  EXPECT_EQ(chunks(pool.planPrefill({5, 2}, 3)),
            (Steps{{{0, 0, 3}}, {{0, 3, 2}, {1, 0, 1}}, {{1, 1, 1}}}));
  // One prompt of 10: ceil(10 / 3) = 4 steps, the last of one row.
  EXPECT_EQ(chunks(pool.planPrefill({10}, 3)),
            (Steps{{{0, 0, 3}}, {{0, 3, 3}}, {{0, 6, 3}}, {{0, 9, 1}}}));
  // One row a prompt a step: token t of each prompt in step t.
  EXPECT_EQ(chunks(pool.planPrefill({3, 1}, 1)),
            (Steps{{{0, 0, 1}, {1, 0, 1}}, {{0, 1, 1}}, {{0, 2, 1}}}));
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, pool.planPrefill({2}, 0));
  EXPECT_CONTAINS(msg, "rows per sequence must be at least 1, got 0");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, pool.planPrefill({2, 0}, 3));
  EXPECT_CONTAINS(msg, "prompt 1 is empty");
  msg = EXPECT_THROW_MSG(CapacityError, pool.planPrefill({1, 1, 1, 1}, 3));
  EXPECT_CONTAINS(msg, "4 prompts exceed the engine's maximum batch of 3 "
                       "(EngineCapacity::maxBatch)");
  // At maxBatch 1 with the default step (64 rows): a prompt of 150 takes
  // ceil(150 / 64) = 3 steps of 64, 64 and 150 - 128 = 22 rows.
  SequencePool one(EngineCapacity{1, 200, 0}, 16, 50);
  EXPECT_EQ(chunks(one.planPrefill({150}, 64)),
            (Steps{{{0, 0, 64}}, {{0, 64, 64}}, {{0, 128, 22}}}));
}

TEST(SequencePool, ExhaustedPages) {
  // 3 pages for sequences that could each hold 3.
  SequencePool pool = smallPool(3);
  pool.addSequence(1);
  pool.addSequence(2);
  for (int i = 0; i < 5; ++i) // sequence 1: 2 pages
    pool.prepareStep({1}, {0});
  pool.prepareStep({2}, {0}); // sequence 2: the last page
  for (int i = 0; i < 3; ++i)
    pool.prepareStep({1, 2}, {0, 0}); // fills both pages to 8 and 4
  std::string msg =
      EXPECT_THROW_MSG(CapacityError, pool.prepareStep({1, 2}, {0, 0}));
  EXPECT_CONTAINS(msg, "Engine::step: the step needs 2 new pages; 0 of 3 are "
                       "free");
  EXPECT_EQ(pool.length(1), 8);
  EXPECT_EQ(pool.length(2), 4);
}

TEST(SequencePool, Prompts) {
  SequencePool pool = smallPool(4);
  pool.addSequence(1);
  pool.addSequence(2);
  pool.checkPrompts({1, 2}, {{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4}});
  EXPECT_EQ(pool.length(1), 0); // checking changes nothing
  std::string msg = EXPECT_THROW_MSG(
      CapacityError, pool.checkPrompts({1, 2}, {{1, 2, 3, 4, 5, 6, 7, 8, 9},
                                                {1, 2, 3, 4, 5}}));
  EXPECT_CONTAINS(msg, "Engine::prefill: the prompts need 5 new pages; 4 of 4 "
                       "are free");
  msg = EXPECT_THROW_MSG(CapacityError,
                         pool.checkPrompts({1}, {std::vector<int32_t>(11, 0)}));
  EXPECT_CONTAINS(msg, "Engine::prefill: sequence 1 holds 0 tokens; 11 more "
                       "exceed the 10 a sequence may hold");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         pool.checkPrompts({1, 2}, {{1}, {}}));
  EXPECT_CONTAINS(msg, "Engine::prefill: the prompt of sequence 2 is empty");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         pool.checkPrompts({2}, {{1, 2, 77}}, "Engine::score"));
  EXPECT_CONTAINS(msg, "Engine::score: token 77 (index 2 of sequence 2) is "
                       "outside the vocabulary [0, 50)");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, pool.checkPrompts({4}, {{1}}));
  EXPECT_CONTAINS(msg, "Engine::prefill: unknown sequence 4");
  // Pages already held count: sequence 1 at 3 tokens needs 1 more page for
  // 2 tokens, not 2.
  for (int i = 0; i < 3; ++i)
    pool.prepareStep({1}, {0});
  pool.checkPrompts({1, 2}, {{1, 2}, {1, 2, 3, 4, 5, 6, 7, 8}});
}

TEST(SequencePool, Steps) {
  SequencePool pool = smallPool(4); // pages of 4 tokens, 10 tokens a sequence
  pool.addSequence(1);
  pool.addSequence(2);
  pool.prepareStep({1}, {0});
  // 1 + 2 new pages of the 3 free: sequence 1 already holds one.
  pool.checkSteps({1, 2}, {3, 4}, 7, "Engine::generate");
  EXPECT_EQ(pool.length(1), 1); // checking changes nothing
  std::string msg = EXPECT_THROW_MSG(
      CapacityError, pool.checkSteps({1, 2}, {3, 4}, 9, "Engine::generate"));
  EXPECT_CONTAINS(msg, "Engine::generate: the steps need 5 new pages; 3 of 4 "
                       "are free");
  // In time independent of the steps, with no overflow of length + steps.
  msg = EXPECT_THROW_MSG(CapacityError,
                         pool.checkSteps({1}, {3},
                                         std::numeric_limits<int64_t>::max(),
                                         "Engine::generate"));
  EXPECT_CONTAINS(msg, "Engine::generate: sequence 1 holds 1 tokens; "
                       "9223372036854775807 more exceed the 10");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         pool.checkSteps({1}, {3}, 0, "Engine::generate"));
  EXPECT_CONTAINS(msg, "Engine::generate: steps must be at least 1, got 0");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         pool.checkSteps({1}, {50}, 2, "Engine::generate"));
  EXPECT_CONTAINS(msg, "Engine::generate: token 50 (index 0 of sequence 1)");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         pool.checkSteps({1, 2}, {3}, 2, "Engine::generate"));
  EXPECT_CONTAINS(msg, "Engine::generate: 1 token rows for 2 sequences");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError,
                       pool.checkSteps({1, 1}, {3, 3}, 2, "Engine::generate"));
  EXPECT_CONTAINS(msg, "Engine::generate: sequence 1 appears twice");
}

TEST(SequencePool, UnusedId) {
  SequencePool pool = smallPool();
  SeqId id = pool.unusedId();
  pool.addSequence(id);
  SeqId other = pool.unusedId();
  EXPECT_NE(other, id);
  EXPECT_FALSE(pool.contains(other));
}

TEST(SequencePool, AttentionLengthIsThePowerOfTwoAtOrAbove) {
  // smallPool: at most 10 tokens per sequence.
  SequencePool pool = smallPool();
  EXPECT_EQ(pool.attentionLength(1), 1);
  EXPECT_EQ(pool.attentionLength(2), 2);
  EXPECT_EQ(pool.attentionLength(3), 4);
  EXPECT_EQ(pool.attentionLength(5), 8);
  EXPECT_EQ(pool.attentionLength(8), 8);
  EXPECT_EQ(pool.attentionLength(9), 10); // the capacity, not 16
  EXPECT_EQ(pool.attentionLength(10), 10);
  SequencePool large(EngineCapacity{1, 2048, 0}, 16, 50);
  EXPECT_EQ(large.attentionLength(513), 1024);
  EXPECT_EQ(large.attentionLength(1024), 1024);
  EXPECT_EQ(large.attentionLength(1025), 2048);
}
