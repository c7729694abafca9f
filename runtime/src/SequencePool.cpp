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

/// `capacity` with maxStepRows resolved (0: max(maxBatch,
/// kDefaultMaxStepRows)) after checking it.
EngineCapacity withStepRows(EngineCapacity capacity) {
  if (capacity.maxStepRows == 0)
    capacity.maxStepRows = std::max(capacity.maxBatch, kDefaultMaxStepRows);
  else if (capacity.maxStepRows < capacity.maxBatch ||
           capacity.maxStepRows > kInt32Max)
    throwInvalidArgument("SequencePool: maxStepRows must be 0 (the default) "
                         "or in [maxBatch, 2^31) = [",
                         capacity.maxBatch, ", ", kInt32Max + 1, "), got ",
                         capacity.maxStepRows);
  return capacity;
}

} // namespace

SequencePool::SequencePool(const EngineCapacity &capacity, int64_t pageSize,
                           int64_t vocabSize)
    : capacity_(withStepRows(capacity)), vocab_(vocabSize),
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

HostStep
SequencePool::prepareRows(const std::vector<SeqId> &seqs,
                          const std::vector<std::vector<int32_t>> &tokens,
                          const char *what) {
  checkBatch(what, seqs, tokens.size());
  std::vector<int64_t> counts;
  int64_t rows = 0;
  for (size_t b = 0; b < seqs.size(); ++b) {
    if (tokens[b].empty())
      throwInvalidArgument(what, ": no tokens for sequence ", seqs[b]);
    for (size_t i = 0; i < tokens[b].size(); ++i)
      checkToken(what, seqs[b], i, tokens[b][i]);
    counts.push_back(static_cast<int64_t>(tokens[b].size()));
    rows += counts.back();
  }
  if (rows > capacity_.maxStepRows)
    throwCapacity(
        what, ": ", rows, " rows (tokens) exceed the engine's maximum of ",
        capacity_.maxStepRows, " rows a step (EngineCapacity::maxStepRows)");
  checkGrowth(what, "the step needs", seqs, counts);

  HostStep s;
  const int64_t width = maxPagesPerSeq();
  s.shape.batch = rows;
  s.shape.maxPages = width;
  s.blockTable.assign(static_cast<size_t>(rows * width), 0);
  auto row = s.blockTable.begin();
  for (size_t b = 0; b < seqs.size(); ++b) {
    // Cannot fail after the checks; allocates the pages of every row.
    const int64_t start = cache_.appendTokens(seqs[b], counts[b]);
    const std::vector<int32_t> &pages = cache_.pages(seqs[b]);
    for (int64_t i = 0; i < counts[b]; ++i, row += width) {
      s.tokens.push_back(tokens[b][static_cast<size_t>(i)]);
      s.positions.push_back(static_cast<int32_t>(start + i));
      s.seqLens.push_back(static_cast<int32_t>(start + i + 1));
      std::copy(pages.begin(), pages.end(), row);
    }
    s.maxSeqLen = std::max(s.maxSeqLen, start + counts[b]);
  }
  return s;
}

HostStep SequencePool::prepareStep(const std::vector<SeqId> &seqs,
                                   const std::vector<int32_t> &tokens) {
  std::vector<std::vector<int32_t>> rows;
  for (int32_t token : tokens)
    rows.push_back({token});
  return prepareRows(seqs, rows, "Engine::step");
}

std::vector<std::vector<PromptChunk>>
SequencePool::planPrefill(const std::vector<size_t> &lengths,
                          int64_t rowsPerSeq) const {
  if (rowsPerSeq < 1)
    throwInvalidArgument("SequencePool::planPrefill: rows per sequence must "
                         "be at least 1, got ",
                         rowsPerSeq);
  size_t left = 0;
  for (size_t p = 0; p < lengths.size(); ++p) {
    if (lengths[p] == 0)
      throwInvalidArgument("SequencePool::planPrefill: prompt ", p,
                           " is empty");
    left += lengths[p];
  }
  if (static_cast<int64_t>(lengths.size()) > capacity_.maxBatch)
    throwCapacity("SequencePool::planPrefill: ", lengths.size(),
                  " prompts exceed the engine's maximum batch of ",
                  capacity_.maxBatch, " (EngineCapacity::maxBatch)");
  const size_t maxRows = static_cast<size_t>(capacity_.maxStepRows);
  const size_t perSeq = static_cast<size_t>(rowsPerSeq);
  std::vector<size_t> done(lengths.size(), 0);
  std::vector<std::vector<PromptChunk>> steps;
  while (left > 0) {
    std::vector<PromptChunk> &step = steps.emplace_back();
    size_t rows = 0;
    for (size_t p = 0; p < lengths.size() && rows < maxRows; ++p) {
      const size_t take =
          std::min({lengths[p] - done[p], perSeq, maxRows - rows});
      if (take == 0)
        continue;
      step.push_back({p, done[p], take});
      done[p] += take;
      rows += take;
      left -= take;
    }
  }
  return steps;
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
