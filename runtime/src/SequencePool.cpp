//===- SequencePool.cpp - the host side of the decode engine --------------===//

#include "fusion/runtime/SequencePool.h"

#include "fusion/runtime/Error.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

namespace fusion::runtime {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

/// The KV-cache manager of `capacity` after checking it.
KVCacheManager makeCache(const EngineCapacity &capacity, int64_t pageSize,
                         int64_t vocabSize) {
  for (auto [what, value] : {std::pair{"maxBatch", capacity.maxBatch},
                             {"maxTokensPerSeq", capacity.maxTokensPerSeq},
                             {"page size", pageSize},
                             {"vocabulary size", vocabSize}})
    if (value < 1)
      throwInvalidArgument("SequencePool: ", what, " must be >= 1, got ",
                           value);
  if (capacity.numPages < 0)
    throwInvalidArgument("SequencePool: numPages must be >= 0, got ",
                         capacity.numPages);
  const int64_t width =
      KVCacheManager::pagesForTokens(capacity.maxTokensPerSeq, pageSize);
  if (width > kInt32Max / pageSize)
    throwCapacity("SequencePool: ", capacity.maxTokensPerSeq,
                  " tokens per sequence in pages of ", pageSize,
                  " exceed the int32 positions of the kernels");
  int64_t pages = capacity.numPages;
  if (pages == 0) {
    if (width > kInt32Max / capacity.maxBatch)
      throwCapacity("SequencePool: ", capacity.maxBatch, " sequences of ",
                    width, " pages exceed the int32 page ids of the kernels");
    pages = capacity.maxBatch * width;
  }
  if (pages > kInt32Max)
    throwCapacity("SequencePool: ", pages,
                  " pages exceed the int32 page ids of the kernels");
  return KVCacheManager(pages, pageSize, width);
}

} // namespace

SequencePool::SequencePool(const EngineCapacity &capacity, int64_t pageSize,
                           int64_t vocabSize)
    : capacity_(capacity), vocab_(vocabSize),
      cache_(makeCache(capacity, pageSize, vocabSize)) {}

SeqId SequencePool::unusedId() const {
  SeqId id = std::numeric_limits<SeqId>::min();
  while (cache_.contains(id))
    ++id;
  return id;
}

void SequencePool::checkBatch(const char *what, const std::vector<SeqId> &seqs,
                              size_t count) const {
  if (seqs.empty())
    throwInvalidArgument(what, ": no sequences");
  if (count != seqs.size())
    throwInvalidArgument(what, ": ", count, " token rows for ", seqs.size(),
                         " sequences");
  if (static_cast<int64_t>(seqs.size()) > capacity_.maxBatch)
    throwCapacity(what, ": ", seqs.size(),
                  " sequences exceed the engine's maximum batch of ",
                  capacity_.maxBatch, " (EngineCapacity::maxBatch)");
  std::unordered_map<SeqId, size_t> rows;
  for (size_t b = 0; b < seqs.size(); ++b) {
    if (!cache_.contains(seqs[b]))
      throwInvalidArgument(what, ": unknown sequence ", seqs[b], " (row ", b,
                           ")");
    if (auto [it, fresh] = rows.emplace(seqs[b], b); !fresh)
      throwInvalidArgument(what, ": sequence ", seqs[b],
                           " appears twice (rows ", it->second, " and ", b,
                           ")");
  }
}

void SequencePool::checkToken(const char *what, SeqId id, size_t index,
                              int32_t token) const {
  if (token < 0 || token >= vocab_)
    throwInvalidArgument(what, ": token ", token, " (index ", index,
                         " of sequence ", id,
                         ") is outside the vocabulary [0, ", vocab_, ")");
}

int64_t SequencePool::attentionLength(int64_t maxSeqLen) const {
  int64_t length = 1;
  while (length < maxSeqLen)
    length *= 2;
  return std::min(length, capacity_.maxTokensPerSeq);
}

HostStep SequencePool::prepareStep(const std::vector<SeqId> &seqs,
                                   const std::vector<int32_t> &tokens) {
  const char *what = "Engine::step";
  checkBatch(what, seqs, tokens.size());
  int64_t newPages = 0;
  for (size_t b = 0; b < seqs.size(); ++b) {
    checkToken(what, seqs[b], b, tokens[b]);
    const int64_t length = cache_.length(seqs[b]);
    if (length >= capacity_.maxTokensPerSeq)
      throwCapacity(what, ": sequence ", seqs[b], " holds ", length,
                    " tokens, the most a sequence may hold "
                    "(EngineCapacity::maxTokensPerSeq)");
    newPages += length % pageSize() == 0 ? 1 : 0;
  }
  if (newPages > numFreePages())
    throwCapacity(what, ": the step needs ", newPages, " new pages; ",
                  numFreePages(), " of ", numPages(), " are free");

  BatchView view = cache_.appendBatch(seqs, 1, maxPagesPerSeq());
  HostStep s;
  s.shape.batch = view.batch;
  s.shape.maxPages = view.max_pages;
  s.tokens = tokens;
  s.positions = std::move(view.positions);
  s.seqLens = std::move(view.seq_lens);
  s.blockTable = std::move(view.block_table);
  for (int32_t len : s.seqLens)
    s.maxSeqLen = std::max<int64_t>(s.maxSeqLen, len);
  return s;
}

void SequencePool::checkPrompts(
    const std::vector<SeqId> &seqs,
    const std::vector<std::vector<int32_t>> &prompts, const char *what) const {
  checkBatch(what, seqs, prompts.size());
  std::vector<int64_t> growth;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const std::vector<int32_t> &prompt = prompts[b];
    if (prompt.empty())
      throwInvalidArgument(what, ": the prompt of sequence ", seqs[b],
                           " is empty");
    for (size_t i = 0; i < prompt.size(); ++i)
      checkToken(what, seqs[b], i, prompt[i]);
    growth.push_back(static_cast<int64_t>(prompt.size()));
  }
  checkGrowth(what, "the prompts need", seqs, growth);
}

void SequencePool::checkSteps(const std::vector<SeqId> &seqs,
                              const std::vector<int32_t> &tokens, int64_t steps,
                              const char *what) const {
  if (steps < 1)
    throwInvalidArgument(what, ": steps must be at least 1, got ", steps);
  checkBatch(what, seqs, tokens.size());
  for (size_t b = 0; b < seqs.size(); ++b)
    checkToken(what, seqs[b], 0, tokens[b]);
  checkGrowth(what, "the steps need", seqs,
              std::vector<int64_t>(seqs.size(), steps));
}

void SequencePool::checkGrowth(const char *what, const char *need,
                               const std::vector<SeqId> &seqs,
                               const std::vector<int64_t> &tokens) const {
  int64_t newPages = 0;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const int64_t length = cache_.length(seqs[b]);
    if (tokens[b] > capacity_.maxTokensPerSeq - length)
      throwCapacity(what, ": sequence ", seqs[b], " holds ", length,
                    " tokens; ", tokens[b], " more exceed the ",
                    capacity_.maxTokensPerSeq,
                    " a sequence may hold (EngineCapacity::maxTokensPerSeq)");
    const int64_t after = length + tokens[b];
    newPages += KVCacheManager::pagesForTokens(after, pageSize()) -
                KVCacheManager::pagesForTokens(length, pageSize());
  }
  if (newPages > numFreePages())
    throwCapacity(what, ": ", need, " ", newPages, " new pages; ",
                  numFreePages(), " of ", numPages(), " are free");
}

} // namespace fusion::runtime
