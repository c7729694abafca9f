//===- KVCacheManagerTest.cpp - paged KV-cache bookkeeping ----------------===//

#include "fusion/runtime/KVCacheManager.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>

#define EXPECT_CONTAINS(str, sub)                                              \
  EXPECT_NE((str).find(sub), std::string::npos)                                \
      << "expected \"" << (sub) << "\" in: " << (str)

using namespace fusion::runtime;

namespace {

/// Everything observable about a manager, for "state unchanged" checks.
struct Snapshot {
  int64_t freePages;
  std::map<SeqId, std::pair<int64_t, std::vector<int32_t>>> seqs;
  bool operator==(const Snapshot &o) const {
    return freePages == o.freePages && seqs == o.seqs;
  }
};

Snapshot snapshot(const KVCacheManager &m) {
  Snapshot s{m.numFreePages(), {}};
  for (SeqId id : m.sequences())
    s.seqs[id] = {m.length(id), m.pages(id)};
  return s;
}

/// Runs `fn`, expects it to throw E, and returns the message.
template <typename E, typename Fn>
std::string expectThrow(Fn fn) {
  try {
    fn();
  } catch (const E &e) {
    return e.what();
  } catch (const std::exception &e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

TEST(KVCacheManager, ConstructionAndAccessors) {
  KVCacheManager m(8, 16, 4);
  EXPECT_EQ(m.numPages(), 8);
  EXPECT_EQ(m.pageSize(), 16);
  EXPECT_EQ(m.maxPagesPerSeq(), 4);
  EXPECT_EQ(m.maxTokensPerSeq(), 64);
  EXPECT_EQ(m.numFreePages(), 8);
  EXPECT_EQ(m.numUsedPages(), 0);
  EXPECT_EQ(m.numSequences(), 0);

  KVCacheManager unlimited(8, 16);
  EXPECT_EQ(unlimited.maxPagesPerSeq(), 8);
}

TEST(KVCacheManager, RejectsBadConstruction) {
  EXPECT_THROW(KVCacheManager(0, 16), InvalidArgumentError);
  EXPECT_THROW(KVCacheManager(8, 0), InvalidArgumentError);
  EXPECT_THROW(KVCacheManager(8, 16, -1), InvalidArgumentError);
  EXPECT_THROW(KVCacheManager(int64_t{1} << 31, 16), InvalidArgumentError);
  // Positions are int32: 2^27 pages of 16 tokens do not fit.
  EXPECT_THROW(KVCacheManager(8, 16, int64_t{1} << 27), InvalidArgumentError);
  // The default per-sequence maximum is clamped so positions fit in int32.
  KVCacheManager big(8, int64_t{1} << 30);
  EXPECT_EQ(big.maxPagesPerSeq(), 1);
  EXPECT_LE(big.maxTokensPerSeq(), std::numeric_limits<int32_t>::max());
}

TEST(KVCacheManager, FromByteBudget) {
  // Llama-3-8B layer geometry: 2 * 16 * 8 * 128 * 2 = 65536 bytes per page.
  EXPECT_EQ(kvPageBytes(16, 8, 128, 2), 65536);
  KVCacheManager m =
      KVCacheManager::fromByteBudget(65536 * 10 + 100, 16, 8, 128, 2);
  EXPECT_EQ(m.numPages(), 10);
  EXPECT_EQ(m.pageSize(), 16);
  // 32 layers share the budget.
  KVCacheManager layers = KVCacheManager::fromByteBudget(
      uint64_t{65536} * 32 * 7, 16, 8, 128, 2, 32);
  EXPECT_EQ(layers.numPages(), 7);
  const std::string msg = expectThrow<InvalidArgumentError>(
      [] { KVCacheManager::fromByteBudget(1000, 16, 8, 128, 2); });
  EXPECT_CONTAINS(msg, "65536 bytes");
  EXPECT_THROW(KVCacheManager::fromByteBudget(1 << 20, 16, 0, 128, 2),
               InvalidArgumentError);
}

TEST(KVCacheManager, AllocatesPagesAsNeeded) {
  KVCacheManager m(8, 4);
  m.addSequence(7);
  EXPECT_TRUE(m.contains(7));
  EXPECT_EQ(m.length(7), 0);
  EXPECT_TRUE(m.pages(7).empty());

  EXPECT_EQ(m.appendTokens(7, 1), 0); // First token: one page.
  EXPECT_EQ(m.pages(7), (std::vector<int32_t>{0}));
  EXPECT_EQ(m.appendTokens(7, 3), 1); // Fills page 0 exactly.
  EXPECT_EQ(m.length(7), 4);
  EXPECT_EQ(m.pages(7).size(), 1u);
  EXPECT_EQ(m.appendTokens(7, 1), 4); // Token 4 opens page 1.
  EXPECT_EQ(m.pages(7), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.appendTokens(7, 0), 5); // No-op.
  EXPECT_EQ(m.length(7), 5);
  EXPECT_EQ(m.appendTokens(7, 6), 5); // 11 tokens: 3 pages.
  EXPECT_EQ(m.pages(7), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(m.numFreePages(), 5);
  EXPECT_EQ(m.numUsedPages(), 3);

  m.addSequence(-3); // Any id works.
  m.appendTokens(-3, 5);
  EXPECT_EQ(m.pages(-3), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(m.sequences(), (std::vector<SeqId>{-3, 7}));
}

TEST(KVCacheManager, GrowingAPageAtATimeIsLinear) {
  // A history appended a page at a time (as fusion-run fills it) must not
  // copy the page list on every append: with geometric growth the list
  // moves about log2(pages) times, with an exact reserve once per page.
  const int64_t pages = 4096;
  KVCacheManager kv(pages, 16);
  kv.addSequence(0);
  int moves = 0;
  const int32_t *last = nullptr;
  for (int64_t p = 0; p < pages; ++p) {
    kv.appendTokens(0, 16);
    moves += kv.pages(0).data() != last;
    last = kv.pages(0).data();
  }
  EXPECT_EQ(kv.length(0), pages * 16);
  EXPECT_LE(moves, 2 * 12 + 2); // 4096 = 2^12
}

TEST(KVCacheManager, ReusesPagesAfterRelease) {
  KVCacheManager m(4, 2);
  m.addSequence(1);
  m.addSequence(2);
  m.appendTokens(1, 4); // pages 0, 1
  m.appendTokens(2, 3); // pages 2, 3
  EXPECT_EQ(m.numFreePages(), 0);
  m.release(1);
  EXPECT_FALSE(m.contains(1));
  EXPECT_EQ(m.numFreePages(), 2);
  m.addSequence(3);
  m.appendTokens(3, 4);
  // The released pages come back, first page first.
  EXPECT_EQ(m.pages(3), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.numFreePages(), 0);
  // A released id can be added again, empty.
  m.addSequence(1);
  EXPECT_EQ(m.length(1), 0);
  m.release(1);
  m.clear();
  EXPECT_EQ(m.numFreePages(), 4);
  EXPECT_EQ(m.numSequences(), 0);
  // After clear every page can be handed out again.
  m.addSequence(9);
  m.appendTokens(9, 8);
  std::vector<int32_t> pages = m.pages(9);
  std::sort(pages.begin(), pages.end());
  EXPECT_EQ(pages, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(KVCacheManager, ExhaustionLeavesStateIntact) {
  KVCacheManager m(4, 4);
  m.addSequence(1);
  m.addSequence(2);
  m.appendTokens(1, 6); // 2 pages
  m.appendTokens(2, 3); // 1 page
  const Snapshot before = snapshot(m);
  // Sequence 2 at length 3: +10 tokens = 13 -> 4 pages, needs 3 more, 1 free.
  const std::string msg =
      expectThrow<CapacityError>([&] { m.appendTokens(2, 10); });
  EXPECT_CONTAINS(msg, "sequence 2");
  EXPECT_CONTAINS(msg, "10 tokens");
  EXPECT_CONTAINS(msg, "3 more pages");
  EXPECT_CONTAINS(msg, "only 1 of 4 pages are free");
  EXPECT_TRUE(snapshot(m) == before);
  // What fits still works afterwards.
  EXPECT_EQ(m.appendTokens(2, 5), 3);
  EXPECT_EQ(m.numFreePages(), 0);
  // Appends within the last page need no new page even when the pool is full.
  EXPECT_EQ(m.appendTokens(1, 2), 6);
  const Snapshot full = snapshot(m);
  EXPECT_THROW(m.appendTokens(1, 1), CapacityError);
  EXPECT_TRUE(snapshot(m) == full);
}

TEST(KVCacheManager, PerSequenceMaximum) {
  KVCacheManager m(16, 4, 2); // At most 8 tokens per sequence.
  m.addSequence(5);
  m.appendTokens(5, 7);
  const Snapshot before = snapshot(m);
  const std::string msg =
      expectThrow<CapacityError>([&] { m.appendTokens(5, 2); });
  EXPECT_CONTAINS(msg, "sequence 5");
  EXPECT_CONTAINS(msg, "2 tokens");
  EXPECT_CONTAINS(msg, "length 7");
  EXPECT_CONTAINS(msg, "2 pages (8 tokens)");
  EXPECT_TRUE(snapshot(m) == before);
  EXPECT_EQ(m.appendTokens(5, 1), 7);
  EXPECT_EQ(m.length(5), 8);
  EXPECT_THROW(m.appendTokens(5, 1), CapacityError);
  // A huge request does not overflow the arithmetic.
  EXPECT_THROW(m.appendTokens(5, std::numeric_limits<int64_t>::max()),
               CapacityError);
  EXPECT_EQ(m.length(5), 8);
}

TEST(KVCacheManager, UnknownAndDuplicateIds) {
  KVCacheManager m(4, 4);
  m.addSequence(1);
  m.appendTokens(1, 2);
  const Snapshot before = snapshot(m);
  std::string msg =
      expectThrow<InvalidArgumentError>([&] { m.addSequence(1); });
  EXPECT_CONTAINS(msg, "sequence 1 already exists");
  msg = expectThrow<InvalidArgumentError>([&] { m.appendTokens(42, 1); });
  EXPECT_CONTAINS(msg, "unknown sequence 42");
  EXPECT_CONTAINS(msg, "appendTokens");
  EXPECT_THROW(m.release(42), InvalidArgumentError);
  EXPECT_THROW(m.length(42), InvalidArgumentError);
  EXPECT_THROW(m.pages(42), InvalidArgumentError);
  EXPECT_THROW(m.appendTokens(1, -1), InvalidArgumentError);
  EXPECT_THROW(m.batchView({1, 42}), InvalidArgumentError);
  msg = expectThrow<InvalidArgumentError>([&] { m.batchView({1, 1}); });
  EXPECT_CONTAINS(msg, "sequence 1 appears more than once");
  EXPECT_THROW(m.appendBatch({1, 1}), InvalidArgumentError);
  EXPECT_THROW(m.appendBatch({}), InvalidArgumentError);
  EXPECT_TRUE(snapshot(m) == before);
}

TEST(KVCacheManager, BatchViewHandComputed) {
  KVCacheManager m(16, 4);
  for (SeqId id : {10, 20, 30})
    m.addSequence(id);
  m.appendTokens(10, 5); // pages 0, 1
  m.appendTokens(20, 1); // page 2
  m.appendTokens(30, 9); // pages 3, 4, 5
  // This step: one token each.
  m.appendTokens(10, 1); // length 6, still pages 0, 1
  m.appendTokens(20, 1); // length 2
  m.appendTokens(30, 1); // length 10, still 3 pages

  // Caller order, not id order.
  BatchView v = m.batchView({30, 10, 20});
  EXPECT_EQ(v.batch, 3);
  EXPECT_EQ(v.max_pages, 3); // The most pages any row holds.
  EXPECT_EQ(v.block_table, (std::vector<int32_t>{3, 4, 5, //
                                                 0, 1, 0, //
                                                 2, 0, 0}));
  EXPECT_EQ(v.positions, (std::vector<int32_t>{9, 5, 1}));
  EXPECT_EQ(v.seq_lens, (std::vector<int32_t>{10, 6, 2}));

  // Fixed width, unused entries 0.
  BatchView wide = m.batchView({20}, 1, 5);
  EXPECT_EQ(wide.max_pages, 5);
  EXPECT_EQ(wide.block_table, (std::vector<int32_t>{2, 0, 0, 0, 0}));
  // Too narrow for sequence 30.
  const std::string msg = expectThrow<CapacityError>([&] {
    m.batchView({10, 30}, 1, 2);
  });
  EXPECT_CONTAINS(msg, "sequence 30");
  // newTokens = 0: positions equal lengths.
  EXPECT_EQ(m.batchView({10}, 0).positions, (std::vector<int32_t>{6}));
  // A sequence shorter than the step is an error.
  m.addSequence(40);
  EXPECT_THROW(m.batchView({40}), InvalidArgumentError);

  // Raw-buffer form, with a row pitch larger than needed.
  int32_t table[2 * 4];
  std::fill(std::begin(table), std::end(table), -7);
  int32_t positions[2], lens[2];
  m.fillBatchView(std::vector<SeqId>{20, 30}.data(), 2, 1, 4, table, positions,
                  lens);
  EXPECT_EQ(std::vector<int32_t>(table, table + 8),
            (std::vector<int32_t>{2, 0, 0, 0, 3, 4, 5, 0}));
  EXPECT_EQ(positions[0], 1);
  EXPECT_EQ(positions[1], 9);
  EXPECT_EQ(lens[0], 2);
  EXPECT_EQ(lens[1], 10);
}

TEST(KVCacheManager, AppendBatchIsAllOrNothing) {
  KVCacheManager m(5, 2, 3);
  m.addSequence(1);
  m.addSequence(2);
  m.addSequence(3);
  m.appendTokens(1, 2); // page 0 (full)
  m.appendTokens(2, 1); // page 1
  m.appendTokens(3, 4); // pages 2, 3 (full)

  BatchView v = m.appendBatch({1, 2}); // 1 opens page 4; 2 fits in page 1.
  EXPECT_EQ(v.block_table, (std::vector<int32_t>{0, 4, 1, 0}));
  EXPECT_EQ(v.positions, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(v.seq_lens, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(m.numFreePages(), 0);

  // Sequences 2 and 3 each need a new page; the pool is empty. Nothing may
  // change, not even sequence 1, which would fit in its last page.
  const Snapshot before = snapshot(m);
  std::string msg = expectThrow<CapacityError>([&] {
    m.appendBatch({2, 1, 3});
  });
  EXPECT_CONTAINS(msg, "needs 2 more pages");
  EXPECT_CONTAINS(msg, "only 0 of 5 pages are free");
  EXPECT_TRUE(snapshot(m) == before);

  // Per-sequence maximum (3 pages = 6 tokens), naming the row.
  m.release(1); // frees pages 0, 4
  const Snapshot before2 = snapshot(m);
  msg = expectThrow<CapacityError>([&] { m.appendBatch({2, 3}, 3); });
  EXPECT_CONTAINS(msg, "sequence 3 (row 1)");
  EXPECT_CONTAINS(msg, "per-sequence maximum is 3 pages (6 tokens)");
  EXPECT_TRUE(snapshot(m) == before2);

  // Fixed block-table width too narrow: error before any change.
  msg = expectThrow<CapacityError>([&] { m.appendBatch({2, 3}, 1, 2); });
  EXPECT_CONTAINS(msg, "sequence 3");
  EXPECT_TRUE(snapshot(m) == before2);

  // A fitting step with a fixed width: the released pages 0 then 4 are
  // handed out in row order.
  v = m.appendBatch({3, 2}, 1, 3);
  EXPECT_EQ(v.max_pages, 3);
  EXPECT_EQ(v.block_table, (std::vector<int32_t>{2, 3, 0, 1, 4, 0}));
  EXPECT_EQ(v.positions, (std::vector<int32_t>{4, 2}));
  EXPECT_EQ(v.seq_lens, (std::vector<int32_t>{5, 3}));
}

TEST(KVCacheManager, RandomOperationsKeepInvariants) {
  // Random adds, appends (single and batched, some failing) and releases,
  // checked against a simple model of the lengths after every operation.
  std::mt19937 rng(123);
  KVCacheManager m(40, 3, 6);
  std::map<SeqId, int64_t> model;
  SeqId nextId = 0;
  for (int op = 0; op < 4000; ++op) {
    const Snapshot before = snapshot(m);
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    std::vector<SeqId> live;
    for (const auto &e : model)
      live.push_back(e.first);
    auto pick = [&] {
      return live[std::uniform_int_distribution<size_t>(0,
                                                        live.size() - 1)(rng)];
    };
    if (kind == 0 || live.empty()) {
      m.addSequence(nextId);
      model[nextId++] = 0;
    } else if (kind == 1) {
      const SeqId id = pick();
      m.release(id);
      model.erase(id);
    } else if (kind <= 6) {
      const SeqId id = pick();
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 7)(rng);
      const int64_t newLen = model[id] + n;
      const int64_t need = KVCacheManager::pagesForTokens(newLen, 3) -
                           KVCacheManager::pagesForTokens(model[id], 3);
      const bool fits = newLen <= 18 && need <= m.numFreePages();
      try {
        EXPECT_EQ(m.appendTokens(id, n), model[id]);
        EXPECT_TRUE(fits);
        model[id] = newLen;
      } catch (const CapacityError &) {
        EXPECT_FALSE(fits);
        EXPECT_TRUE(snapshot(m) == before);
      }
    } else {
      std::vector<SeqId> ids = live;
      std::shuffle(ids.begin(), ids.end(), rng);
      ids.resize(std::uniform_int_distribution<size_t>(1, ids.size())(rng));
      int64_t need = 0;
      bool perSeqOk = true;
      for (SeqId id : ids) {
        need += KVCacheManager::pagesForTokens(model[id] + 1, 3) -
                KVCacheManager::pagesForTokens(model[id], 3);
        perSeqOk &= model[id] + 1 <= 18;
      }
      const bool fits = perSeqOk && need <= m.numFreePages();
      try {
        const BatchView v = m.appendBatch(ids, 1, 6);
        EXPECT_TRUE(fits);
        for (size_t b = 0; b < ids.size(); ++b) {
          EXPECT_EQ(v.positions[b], model[ids[b]]);
          EXPECT_EQ(v.seq_lens[b], model[ids[b]] + 1);
          const std::vector<int32_t> &pages = m.pages(ids[b]);
          for (int64_t p = 0; p < 6; ++p)
            EXPECT_EQ(v.block_table[b * 6 + p],
                      p < static_cast<int64_t>(pages.size()) ? pages[p] : 0);
          model[ids[b]] += 1;
        }
      } catch (const CapacityError &) {
        EXPECT_FALSE(fits);
        EXPECT_TRUE(snapshot(m) == before);
      }
    }
    // Invariants: lengths match the model, each sequence holds exactly the
    // pages its length needs, no page is held twice, used + free = total.
    std::set<int32_t> held;
    int64_t heldCount = 0;
    ASSERT_EQ(m.numSequences(), static_cast<int64_t>(model.size()));
    for (const auto &[id, len] : model) {
      ASSERT_EQ(m.length(id), len);
      ASSERT_EQ(static_cast<int64_t>(m.pages(id).size()),
                KVCacheManager::pagesForTokens(len, 3));
      for (int32_t p : m.pages(id)) {
        ASSERT_GE(p, 0);
        ASSERT_LT(p, 40);
        held.insert(p);
        ++heldCount;
      }
    }
    ASSERT_EQ(static_cast<int64_t>(held.size()), heldCount);
    ASSERT_EQ(heldCount, m.numUsedPages());
  }
}

TEST(KVCacheManager, ContiguousIsOnePagePerSequence) {
  // A contiguous cache of 3 sequences x 100 tokens.
  KVCacheManager m(3, 100, 1);
  for (SeqId id = 0; id < 3; ++id) {
    m.addSequence(id);
    m.appendTokens(id, 100);
  }
  BatchView v = m.batchView({0, 1, 2});
  EXPECT_EQ(v.max_pages, 1);
  EXPECT_EQ(v.block_table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_THROW(m.appendTokens(0, 1), CapacityError);
}

TEST(KVCacheLayout, Offsets) {
  // [num_pages, P=4, Hkv=2, D=8]
  EXPECT_EQ(kvCacheOffset(0, 0, 0, 4, 2, 8), 0);
  EXPECT_EQ(kvCacheOffset(0, 0, 1, 4, 2, 8), 8);
  EXPECT_EQ(kvCacheOffset(0, 1, 0, 4, 2, 8), 16);
  EXPECT_EQ(kvCacheOffset(1, 0, 0, 4, 2, 8), 64);
  EXPECT_EQ(kvPageElements(4, 2, 8), 64);
  // 64-bit: page 2^20 of a 16 x 8 x 128 layout is past 2^31 elements.
  EXPECT_EQ(kvCacheOffset(int64_t{1} << 20, 0, 0, 16, 8, 128),
            int64_t{1} << 34);
}

} // namespace
