//===- KVCacheManager.cpp - paged KV-cache bookkeeping --------------------===//

#include "fusion/runtime/KVCacheManager.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace fusion::runtime {

namespace {
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
} // namespace

KVCacheManager::KVCacheManager(int64_t numPages, int64_t pageSize,
                               int64_t maxPagesPerSeq)
    : numPages_(numPages), pageSize_(pageSize),
      maxPagesPerSeq_(maxPagesPerSeq) {
  if (numPages < 1 || numPages > kInt32Max)
    throwInvalidArgument("KVCacheManager: num_pages must be in [1, ", kInt32Max,
                         "] (page ids are int32), got ", numPages);
  if (pageSize < 1)
    throwInvalidArgument("KVCacheManager: page_size must be >= 1, got ",
                         pageSize);
  if (pageSize > kInt32Max)
    throwInvalidArgument("KVCacheManager: page_size ", pageSize,
                         " exceeds INT32_MAX (positions are int32)");
  if (maxPagesPerSeq < 0)
    throwInvalidArgument("KVCacheManager: max_pages_per_seq must be >= 0 "
                         "(0 = unlimited), got ",
                         maxPagesPerSeq);
  if (maxPagesPerSeq == 0) {
    maxPagesPerSeq_ = std::min(numPages, kInt32Max / pageSize);
  } else if (maxPagesPerSeq > kInt32Max / pageSize) {
    throwInvalidArgument("KVCacheManager: max_pages_per_seq ", maxPagesPerSeq,
                         " * page_size ", pageSize,
                         " exceeds INT32_MAX tokens (positions are int32)");
  }
  free_.reserve(static_cast<size_t>(numPages));
  for (int64_t p = numPages - 1; p >= 0; --p)
    free_.push_back(static_cast<int32_t>(p));
}

KVCacheManager KVCacheManager::fromByteBudget(
    uint64_t budgetBytes, int64_t pageSize, int64_t numKVHeads, int64_t headDim,
    int64_t elemSize, int64_t numLayers, int64_t maxPagesPerSeq) {
  if (pageSize < 1 || numKVHeads < 1 || headDim < 1 || elemSize < 1 ||
      numLayers < 1)
    throwInvalidArgument(
        "KVCacheManager::fromByteBudget: page_size, num_kv_heads, head_dim, "
        "elem_size and num_layers must be >= 1, got ",
        pageSize, ", ", numKVHeads, ", ", headDim, ", ", elemSize, ", ",
        numLayers);
  const uint64_t perPage = static_cast<uint64_t>(kvPageBytes(
                               pageSize, numKVHeads, headDim, elemSize)) *
                           static_cast<uint64_t>(numLayers);
  const uint64_t pages = budgetBytes / perPage;
  if (pages == 0)
    throwInvalidArgument("KVCacheManager::fromByteBudget: budget of ",
                         budgetBytes, " bytes is smaller than one page (",
                         perPage, " bytes = 2 (K,V) * ", pageSize, " tokens * ",
                         numKVHeads, " kv heads * ", headDim, " * ", elemSize,
                         " bytes * ", numLayers, " layers)");
  const int64_t numPages =
      static_cast<int64_t>(std::min<uint64_t>(pages, kInt32Max));
  return KVCacheManager(numPages, pageSize, maxPagesPerSeq);
}

std::vector<SeqId> KVCacheManager::sequences() const {
  std::vector<SeqId> ids;
  ids.reserve(seqs_.size());
  for (const auto &entry : seqs_)
    ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end());
  return ids;
}

const KVCacheManager::Sequence &KVCacheManager::lookup(SeqId id,
                                                       const char *fn) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    throwInvalidArgument("KVCacheManager::", fn, ": unknown sequence ", id);
  return it->second;
}

int64_t KVCacheManager::length(SeqId id) const {
  return lookup(id, "length").length;
}

const std::vector<int32_t> &KVCacheManager::pages(SeqId id) const {
  return lookup(id, "pages").pages;
}

void KVCacheManager::addSequence(SeqId id) {
  if (contains(id))
    throwInvalidArgument("KVCacheManager::addSequence: sequence ", id,
                         " already exists (length ", seqs_.at(id).length, ")");
  seqs_.emplace(id, Sequence{});
}

int64_t KVCacheManager::appendTokens(SeqId id, int64_t n) {
  const Sequence &seq = lookup(id, "appendTokens");
  if (n < 0)
    throwInvalidArgument("KVCacheManager::appendTokens: sequence ", id,
                         ": token count must be >= 0, got ", n);
  const int64_t oldLen = seq.length;
  if (n > maxTokensPerSeq() - oldLen)
    throwCapacity("KVCacheManager::appendTokens: sequence ", id,
                  ": cannot append ", n, " tokens to length ", oldLen,
                  ": the per-sequence maximum is ", maxPagesPerSeq_, " pages (",
                  maxTokensPerSeq(), " tokens); sequence left unchanged");
  const int64_t newLen = oldLen + n;
  const int64_t need = pagesForTokens(newLen, pageSize_) -
                       static_cast<int64_t>(seq.pages.size());
  if (need > numFreePages())
    throwCapacity("KVCacheManager::appendTokens: sequence ", id,
                  ": cannot append ", n, " tokens (length ", oldLen, " -> ",
                  newLen, " needs ", need, " more pages of ", pageSize_,
                  " tokens): only ", numFreePages(), " of ", numPages_,
                  " pages are free; sequence left unchanged");
  Sequence &mut = seqs_.at(id);
  // push_back grows geometrically: appending a page at a time stays linear
  // (an exact reserve here would copy the whole list every time).
  for (int64_t i = 0; i < need; ++i) {
    mut.pages.push_back(free_.back());
    free_.pop_back();
  }
  mut.length = newLen;
  return oldLen;
}

void KVCacheManager::release(SeqId id) {
  const Sequence &seq = lookup(id, "release");
  // Push in reverse so the sequence's first page is handed out first again.
  for (auto it = seq.pages.rbegin(); it != seq.pages.rend(); ++it)
    free_.push_back(*it);
  seqs_.erase(id);
}

void KVCacheManager::clear() {
  for (const SeqId id : sequences())
    release(id);
}

void KVCacheManager::checkBatchIds(const SeqId *ids, int64_t batch,
                                   const char *fn) const {
  if (batch < 1)
    throwInvalidArgument("KVCacheManager::", fn,
                         ": the batch must hold at least one sequence, got ",
                         batch);
  if (!ids)
    throwInvalidArgument("KVCacheManager::", fn, ": null sequence-id list");
  std::unordered_set<SeqId> seen;
  for (int64_t b = 0; b < batch; ++b) {
    lookup(ids[b], fn);
    if (!seen.insert(ids[b]).second)
      throwInvalidArgument("KVCacheManager::", fn, ": sequence ", ids[b],
                           " appears more than once in the batch (row ", b,
                           ")");
  }
}

int64_t KVCacheManager::defaultWidth(const SeqId *ids, int64_t batch) const {
  int64_t width = 1;
  for (int64_t b = 0; b < batch; ++b)
    width = std::max<int64_t>(width, seqs_.at(ids[b]).pages.size());
  return width;
}

BatchView KVCacheManager::appendBatch(const std::vector<SeqId> &ids,
                                      int64_t tokensPerSeq, int64_t maxPages) {
  const int64_t batch = static_cast<int64_t>(ids.size());
  checkBatchIds(ids.data(), batch, "appendBatch");
  if (tokensPerSeq < 0)
    throwInvalidArgument(
        "KVCacheManager::appendBatch: token count must be >= 0, got ",
        tokensPerSeq);
  if (maxPages < 0)
    throwInvalidArgument(
        "KVCacheManager::appendBatch: max_pages must be >= 0, got ", maxPages);

  // Check everything before changing anything.
  int64_t totalNeed = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const SeqId id = ids[b];
    const Sequence &seq = seqs_.at(id);
    if (tokensPerSeq > maxTokensPerSeq() - seq.length)
      throwCapacity("KVCacheManager::appendBatch: sequence ", id, " (row ", b,
                    "): cannot append ", tokensPerSeq, " tokens to length ",
                    seq.length, ": the per-sequence maximum is ",
                    maxPagesPerSeq_, " pages (", maxTokensPerSeq(),
                    " tokens); no sequence changed");
    const int64_t pagesAfter =
        pagesForTokens(seq.length + tokensPerSeq, pageSize_);
    if (maxPages > 0 && pagesAfter > maxPages)
      throwCapacity("KVCacheManager::appendBatch: sequence ", id, " (row ", b,
                    "): length ", seq.length + tokensPerSeq, " needs ",
                    pagesAfter, " pages but the block table has room for ",
                    maxPages, " per row; no sequence changed");
    totalNeed += pagesAfter - static_cast<int64_t>(seq.pages.size());
  }
  if (totalNeed > numFreePages())
    throwCapacity("KVCacheManager::appendBatch: appending ", tokensPerSeq,
                  " tokens to each of ", batch, " sequences needs ", totalNeed,
                  " more pages of ", pageSize_, " tokens: only ",
                  numFreePages(), " of ", numPages_,
                  " pages are free; no sequence changed");

  for (int64_t b = 0; b < batch; ++b)
    appendTokens(ids[b], tokensPerSeq); // Cannot fail after the checks.
  return batchView(ids, tokensPerSeq, maxPages);
}

BatchView KVCacheManager::batchView(const std::vector<SeqId> &ids,
                                    int64_t newTokens, int64_t maxPages) const {
  const int64_t batch = static_cast<int64_t>(ids.size());
  checkBatchIds(ids.data(), batch, "batchView");
  if (maxPages < 0)
    throwInvalidArgument(
        "KVCacheManager::batchView: max_pages must be >= 0, got ", maxPages);
  BatchView view;
  view.batch = batch;
  view.max_pages = maxPages > 0 ? maxPages : defaultWidth(ids.data(), batch);
  view.block_table.assign(static_cast<size_t>(batch * view.max_pages), 0);
  view.positions.assign(static_cast<size_t>(batch), 0);
  view.seq_lens.assign(static_cast<size_t>(batch), 0);
  fillBatchView(ids.data(), batch, newTokens, view.max_pages,
                view.block_table.data(), view.positions.data(),
                view.seq_lens.data());
  return view;
}

void KVCacheManager::fillBatchView(const SeqId *ids, int64_t batch,
                                   int64_t newTokens, int64_t maxPages,
                                   int32_t *blockTable, int32_t *positions,
                                   int32_t *seqLens) const {
  checkBatchIds(ids, batch, "fillBatchView");
  if (newTokens < 0)
    throwInvalidArgument(
        "KVCacheManager::fillBatchView: new-token count must be >= 0, got ",
        newTokens);
  if (maxPages < 1)
    throwInvalidArgument(
        "KVCacheManager::fillBatchView: max_pages must be >= 1, got ",
        maxPages);
  if (!blockTable)
    throwInvalidArgument("KVCacheManager::fillBatchView: null block table");
  for (int64_t b = 0; b < batch; ++b) {
    const Sequence &seq = seqs_.at(ids[b]);
    if (seq.length < newTokens)
      throwInvalidArgument("KVCacheManager::fillBatchView: sequence ", ids[b],
                           " (row ", b, ") has length ", seq.length,
                           ", fewer than the ", newTokens,
                           " tokens of this step");
    const int64_t held = static_cast<int64_t>(seq.pages.size());
    if (held > maxPages)
      throwCapacity("KVCacheManager::fillBatchView: sequence ", ids[b],
                    " (row ", b, ") holds ", held, " pages (length ",
                    seq.length, ") but the block table has room for ", maxPages,
                    " per row");
    int32_t *row = blockTable + b * maxPages;
    std::copy(seq.pages.begin(), seq.pages.end(), row);
    std::fill(row + held, row + maxPages, 0);
    if (positions)
      positions[b] = static_cast<int32_t>(seq.length - newTokens);
    if (seqLens)
      seqLens[b] = static_cast<int32_t>(seq.length);
  }
}

} // namespace fusion::runtime
