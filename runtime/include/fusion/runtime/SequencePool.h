//===- SequencePool.h - the host side of the engine -------------*- C++ -*-===//
//
// What the Engine (Engine.h) does on the host, kept apart so that it is
// unit-tested without a GPU: the live sequences and their KV pages (one
// KVCacheManager for every layer), every check of a request (batch, token
// ids, unknown or repeated sequences, sequence length, free pages) made
// before anything changes or launches, the int32 inputs of each step
// (tokens, positions, seq_lens, a block table of a fixed width so that the
// step's CUDA graph is reused; a step's rows may be consecutive tokens of
// one sequence) and the chunked steps of a prefill. Two bounds: a request
// and a decode step name at most maxBatch sequences; a step holds at most
// maxStepRows rows (a prefill chunk may be longer than a decode batch).
//
// Errors: InvalidArgumentError (a bad request: no sequences, sizes that
// differ, a token outside the vocabulary, an unknown or repeated sequence)
// and CapacityError (more sequences than maxBatch, more rows than
// maxStepRows, a sequence past its maximum length, too few free pages);
// messages name the sequence, the value and the bound. A failing call
// changes nothing.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_SEQUENCEPOOL_H
#define FUSION_RUNTIME_SEQUENCEPOOL_H

#include "fusion/runtime/KVCacheManager.h"
#include "fusion/runtime/Model.h"

#include <cstdint>
#include <vector>

namespace fusion::runtime {

/// The rows of one step when EngineCapacity::maxStepRows is 0 (at least
/// maxBatch): one token tile of the compiled GEMM-shaped projection variants
/// (16, 32 or 64 tokens a tile; more rows loop over tiles), so that a prefill
/// chunk fills a tile instead of running one token a step.
constexpr int64_t kDefaultMaxStepRows = 64;

/// The sizes an engine is built for.
struct EngineCapacity {
  /// Most sequences in one request and in one decode step (>= 1).
  int64_t maxBatch = 1;
  /// Most tokens a sequence may hold: prompt plus generated (>= 1).
  int64_t maxTokensPerSeq = 2048;
  /// Pages in each layer's K and V pools; 0: enough for maxBatch sequences
  /// of maxTokensPerSeq tokens (maxBatch * ceil(maxTokensPerSeq / P)).
  int64_t numPages = 0;
  /// Most rows (tokens) in one step: a prefill or score chunk (several
  /// consecutive tokens of a sequence) or a decode step (one row a
  /// sequence, so at most maxBatch of them). 0: max(maxBatch,
  /// kDefaultMaxStepRows); else >= maxBatch. The engine sizes every buffer
  /// with a batch dimension for this many rows (the step inputs, their two
  /// pinned staging images, the intermediates, workspaces and logits:
  /// docs/runtime.md gives the bytes a row costs); pages stay sized by
  /// maxBatch.
  int64_t maxStepRows = 0;
};

/// The host inputs of one step of `shape.batch` rows. A row is one token of
/// a sequence; several rows may be consecutive tokens of one sequence (a
/// prefill chunk: SequencePool::prepareRows), listed in token order.
struct HostStep {
  /// batch (the rows) and maxPages (the pool's fixed block-table width);
  /// numSplits is the caller's to choose.
  StepShape shape;
  /// [batch] token ids, positions (the token's index in its sequence) and
  /// seq_lens (position + 1: the tokens attention reads for the row).
  std::vector<int32_t> tokens, positions, seqLens;
  /// [batch, shape.maxPages], row-major: row r lists every page its
  /// sequence holds after the step (the same row for each row of one
  /// sequence); unused entries 0.
  std::vector<int32_t> blockTable;
  /// The largest seq_lens of the step.
  int64_t maxSeqLen = 0;
  /// Pointers into this step's vectors, for DecodeStep.
  StepInputs inputs() const {
    return {positions.data(), seqLens.data(), blockTable.data()};
  }
};

/// Tokens [begin, begin + count) of prompt `prompt`, as rows of one step.
struct PromptChunk {
  size_t prompt = 0, begin = 0, count = 0;
};

/// The sequences of an engine and the host side of its steps. Not
/// thread-safe.
class SequencePool {
public:
  /// A pool for `capacity` with pages of `pageSize` tokens over a vocabulary
  /// of `vocabSize` tokens. Throws InvalidArgumentError for maxBatch,
  /// maxTokensPerSeq, pageSize or vocabSize < 1, numPages < 0, or
  /// maxStepRows neither 0 nor in [maxBatch, 2^31), and CapacityError when
  /// pages or positions would not fit in int32.
  SequencePool(const EngineCapacity &capacity, int64_t pageSize,
               int64_t vocabSize);

  /// The capacity it was built for, maxStepRows resolved (never 0).
  const EngineCapacity &capacity() const { return capacity_; }
  int64_t pageSize() const { return cache_.pageSize(); }
  int64_t numPages() const { return cache_.numPages(); }
  int64_t numFreePages() const { return cache_.numFreePages(); }
  /// The block-table width of every step: ceil(maxTokensPerSeq / pageSize).
  int64_t maxPagesPerSeq() const { return cache_.maxPagesPerSeq(); }
  /// The length a step's num_splits is chosen for (the schedule's policy,
  /// DecodeStep::numSplitsFor) when its longest sequence holds `maxSeqLen`
  /// tokens: the next power of two, at most maxTokensPerSeq, so that a
  /// growing sequence changes num_splits (and the step's CUDA graph) a few
  /// times rather than at every multiple of the policy's chunk.
  int64_t attentionLength(int64_t maxSeqLen) const;
  int64_t vocabSize() const { return vocab_; }

  /// Starts an empty sequence. Throws InvalidArgumentError if `id` is live.
  void addSequence(SeqId id) { cache_.addSequence(id); }
  /// Ends sequence `id`, freeing its pages. Throws InvalidArgumentError if
  /// unknown.
  void removeSequence(SeqId id) { cache_.release(id); }
  bool contains(SeqId id) const { return cache_.contains(id); }
  /// Tokens sequence `id` holds. Throws InvalidArgumentError if unknown.
  int64_t length(SeqId id) const { return cache_.length(id); }
  /// An id that no live sequence has.
  SeqId unusedId() const;

  /// Checks a step appending tokens[b], one or more consecutive tokens of
  /// sequence seqs[b], one row each (the rows of seqs[0] first), and, if it
  /// can run, appends them (allocating the pages they need) and returns its
  /// inputs. Throws (changing nothing) InvalidArgumentError for no
  /// sequences, sizes that differ, no tokens for a sequence, a token outside
  /// [0, vocabSize), an unknown or repeated sequence; CapacityError for more
  /// than maxBatch sequences or maxStepRows rows, a sequence that would
  /// exceed maxTokensPerSeq, or too few free pages. Messages start with
  /// `what` and name the bound (EngineCapacity::maxBatch / maxStepRows).
  HostStep prepareRows(const std::vector<SeqId> &seqs,
                       const std::vector<std::vector<int32_t>> &tokens,
                       const char *what = "Engine::prefill");
  /// prepareRows for one token per sequence (a decode step), as
  /// "Engine::step".
  HostStep prepareStep(const std::vector<SeqId> &seqs,
                       const std::vector<int32_t> &tokens);
  /// The steps of a prefill of prompts of `lengths` tokens (each >= 1, at
  /// most maxBatch prompts): at most maxStepRows rows a step and at most
  /// `rowsPerSeq` rows of one prompt, each step filled from the prompts in
  /// order before the next starts, so a prompt's chunks are consecutive and
  /// in token order. That is ceil(sum(lengths) / maxStepRows) steps when
  /// rowsPerSeq >= maxStepRows, and max(lengths) steps (one token of each
  /// prompt a step) when rowsPerSeq is 1. Throws InvalidArgumentError for
  /// rowsPerSeq < 1 or a length of 0, CapacityError for more than maxBatch
  /// prompts.
  std::vector<std::vector<PromptChunk>>
  planPrefill(const std::vector<size_t> &lengths, int64_t rowsPerSeq) const;
  /// Throws as prepareRows would for any step of running prompts[b] through
  /// sequence seqs[b]: an empty prompt, a token out of range, a sequence
  /// that would exceed maxTokensPerSeq, more pages than are free in all (and
  /// as prepareRows for the sequences). Messages start with `what`. Changes
  /// nothing.
  void checkPrompts(const std::vector<SeqId> &seqs,
                    const std::vector<std::vector<int32_t>> &prompts,
                    const char *what = "Engine::prefill") const;
  /// Throws as prepareStep would for any of `steps` steps that each append
  /// one token to every sequence seqs[b], the first tokens[b] (the others
  /// come from the device: not checked here): InvalidArgumentError
  /// "<what>: steps must be at least 1" for steps < 1, then as checkPrompts
  /// for prompts of `steps` tokens, in time independent of `steps`. Changes
  /// nothing.
  void checkSteps(const std::vector<SeqId> &seqs,
                  const std::vector<int32_t> &tokens, int64_t steps,
                  const char *what) const;
  /// Throws InvalidArgumentError "<what>: token <token> (index <index> of
  /// sequence <id>) is outside the vocabulary [0, vocabSize)" unless it is
  /// in it.
  void checkToken(const char *what, SeqId id, size_t index,
                  int32_t token) const;

private:
  /// Throws unless `seqs` are live, distinct, at most maxBatch and as many
  /// as `count` (the entries of the request's tokens).
  void checkBatch(const char *what, const std::vector<SeqId> &seqs,
                  size_t count) const;
  /// Throws CapacityError unless every seqs[b] can hold tokens[b] more
  /// tokens and the pages that takes are free ("<what>: <need> N new
  /// pages; F of P are free").
  void checkGrowth(const char *what, const char *need,
                   const std::vector<SeqId> &seqs,
                   const std::vector<int64_t> &tokens) const;

  EngineCapacity capacity_;
  int64_t vocab_;
  KVCacheManager cache_;
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_SEQUENCEPOOL_H
