//===- KVCacheManager.h - paged KV-cache bookkeeping --------------*- C++
//-*-===//
//
// Host-side bookkeeping of a paged KV cache (design.md sections 2.1, 2.4):
// a pool of pages of `page_size` tokens, a block table (list of page ids) per
// sequence, and the per-step batch view (block table, positions, lengths)
// that the kernels read. It owns no device memory: page ids index the
// [num_pages, page_size, num_kv_heads, head_dim] K and V caches (see
// KVCacheLayout.h), which belong to whoever allocates them; one manager
// serves all layers (every layer uses the same page ids).
//
// Errors: every failing call throws (InvalidArgumentError for unknown or
// duplicate ids and bad arguments, CapacityError for an exhausted pool or a
// sequence past its maximum) with a message that names the sequence, the
// request and the capacity, and leaves the manager exactly as it was before
// the call (strong exception guarantee).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_KVCACHEMANAGER_H
#define FUSION_RUNTIME_KVCACHEMANAGER_H

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace fusion::runtime {

/// A caller-chosen sequence identifier (any value; unique among the live
/// sequences of one manager).
using SeqId = int64_t;

/// The per-step inputs of kv_append and decode_attention for a batch of
/// sequences, in the order the caller listed them.
struct BatchView {
  /// Number of rows (sequences).
  int64_t batch = 0;
  /// Row length of `block_table` (the kernels' `max_pages` scalar).
  int64_t max_pages = 0;
  /// int32 [batch, max_pages], row-major: row b lists the pages of sequence
  /// b in token order; entries past the pages it holds are 0 (a valid page,
  /// so a stray read stays in bounds; kernels never read them because they
  /// stop at seq_lens[b]).
  std::vector<int32_t> block_table;
  /// int32 [batch]: index of the first token of this step (the length before
  /// the append) = the RoPE position and the kv_append slot.
  std::vector<int32_t> positions;
  /// int32 [batch]: length after the append = the number of tokens
  /// decode_attention reads.
  std::vector<int32_t> seq_lens;
};

/// Page pool plus per-sequence block tables. Not thread-safe.
///
/// Allocation is deterministic: a fresh manager hands out pages 0, 1, 2, ...
/// in order, and released pages are reused before untouched ones (LIFO, the
/// released sequence's first page first).
class KVCacheManager {
public:
  /// A pool of `numPages` pages of `pageSize` tokens. A sequence may hold at
  /// most `maxPagesPerSeq` pages; 0 means as many as positions fit in int32
  /// and the pool allows (min(numPages, INT32_MAX / pageSize)).
  /// Throws InvalidArgumentError unless numPages in [1, INT32_MAX] (page ids
  /// are int32), pageSize >= 1, maxPagesPerSeq >= 0 and
  /// maxPagesPerSeq * pageSize <= INT32_MAX (positions are int32).
  KVCacheManager(int64_t numPages, int64_t pageSize,
                 int64_t maxPagesPerSeq = 0);

  /// A pool sized to a byte budget for K and V of `numLayers` layers:
  /// num_pages = budgetBytes / (numLayers * kvPageBytes(pageSize, numKVHeads,
  /// headDim, elemSize)), where one page of one layer holds
  /// 2 * pageSize * numKVHeads * headDim * elemSize bytes (K and V).
  /// Throws InvalidArgumentError for non-positive sizes or a budget smaller
  /// than one page (the message gives the page size in bytes).
  static KVCacheManager fromByteBudget(uint64_t budgetBytes, int64_t pageSize,
                                       int64_t numKVHeads, int64_t headDim,
                                       int64_t elemSize, int64_t numLayers = 1,
                                       int64_t maxPagesPerSeq = 0);

  /// Pages needed to hold `tokens` tokens: ceil(tokens / pageSize).
  static int64_t pagesForTokens(int64_t tokens, int64_t pageSize) {
    return (tokens + pageSize - 1) / pageSize;
  }

  int64_t numPages() const { return numPages_; }
  int64_t pageSize() const { return pageSize_; }
  int64_t maxPagesPerSeq() const { return maxPagesPerSeq_; }
  /// maxPagesPerSeq() * pageSize(): the longest a sequence can grow.
  int64_t maxTokensPerSeq() const { return maxPagesPerSeq_ * pageSize_; }
  /// Pages not held by any sequence.
  int64_t numFreePages() const { return static_cast<int64_t>(free_.size()); }
  int64_t numUsedPages() const { return numPages_ - numFreePages(); }
  int64_t numSequences() const { return static_cast<int64_t>(seqs_.size()); }

  /// Whether `id` is a live sequence.
  bool contains(SeqId id) const { return seqs_.count(id) != 0; }
  /// Live sequence ids, ascending.
  std::vector<SeqId> sequences() const;
  /// Tokens held by sequence `id`. Throws InvalidArgumentError if unknown.
  int64_t length(SeqId id) const;
  /// Pages of sequence `id` in token order (page k holds tokens
  /// [k*pageSize, (k+1)*pageSize)). Throws InvalidArgumentError if unknown.
  const std::vector<int32_t> &pages(SeqId id) const;

  /// Starts an empty sequence (length 0, no pages). Throws
  /// InvalidArgumentError if `id` is already live.
  void addSequence(SeqId id);

  /// Reserves slots for `n` (>= 0) new tokens of sequence `id`, allocating
  /// pages as needed, and returns the index of the first new token (the
  /// length before the call). Throws InvalidArgumentError for an unknown id
  /// or n < 0, CapacityError if the sequence would exceed maxPagesPerSeq()
  /// or the pool has too few free pages; on error nothing changes.
  int64_t appendTokens(SeqId id, int64_t n);

  /// Ends sequence `id` and returns its pages to the pool. Throws
  /// InvalidArgumentError if unknown.
  void release(SeqId id);

  /// Releases every sequence.
  void clear();

  /// One decode step for a batch: appends `tokensPerSeq` tokens to each of
  /// `ids` (all or nothing: if any sequence fails, none changes) and returns
  /// the batch view of the step (positions = lengths before, seq_lens =
  /// lengths after). `maxPages` is the block-table row length; 0 picks the
  /// most pages any sequence of the batch holds (at least 1). Pass a fixed
  /// width to keep buffer shapes stable across steps (CUDA graphs).
  /// Throws InvalidArgumentError for an empty, unknown or repeated id,
  /// CapacityError as appendTokens (naming the failing sequence, or the
  /// batch total for pool exhaustion) or if a row needs more than
  /// `maxPages` pages.
  BatchView appendBatch(const std::vector<SeqId> &ids, int64_t tokensPerSeq = 1,
                        int64_t maxPages = 0);

  /// The batch view of the current state, for a step that appended
  /// `newTokens` tokens to each of `ids` (positions[b] = length - newTokens,
  /// seq_lens[b] = length). Typical use: appendTokens(id, 1) for each id,
  /// then batchView(ids). `maxPages` as in appendBatch. Throws
  /// InvalidArgumentError for an unknown or repeated id, newTokens < 0 or a
  /// sequence shorter than newTokens; CapacityError if a row needs more than
  /// `maxPages` pages.
  BatchView batchView(const std::vector<SeqId> &ids, int64_t newTokens = 1,
                      int64_t maxPages = 0) const;

  /// Like batchView, writing into caller buffers (e.g. pinned host memory):
  /// `blockTable` int32 [batch, maxPages] (required, maxPages >= 1),
  /// `positions` and `seqLens` int32 [batch] (each may be null). Unused
  /// block-table entries are set to 0. Throws as batchView; on error the
  /// buffers may be partly written.
  void fillBatchView(const SeqId *ids, int64_t batch, int64_t newTokens,
                     int64_t maxPages, int32_t *blockTable, int32_t *positions,
                     int32_t *seqLens) const;

private:
  struct Sequence {
    int64_t length = 0;
    std::vector<int32_t> pages;
  };

  const Sequence &lookup(SeqId id, const char *fn) const;
  /// Throws unless `ids` are live and distinct.
  void checkBatchIds(const SeqId *ids, int64_t batch, const char *fn) const;
  /// The default block-table width for a batch (see appendBatch).
  int64_t defaultWidth(const SeqId *ids, int64_t batch) const;

  int64_t numPages_;
  int64_t pageSize_;
  int64_t maxPagesPerSeq_;
  /// Free page ids; the next allocation takes free_.back().
  std::vector<int32_t> free_;
  std::unordered_map<SeqId, Sequence> seqs_;
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_KVCACHEMANAGER_H
