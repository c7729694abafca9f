//===- Engine.cpp - a whole decoder model on the GPU ----------------------===//

#include "fusion/runtime/Engine.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/LogProbs.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <utility>

namespace fusion::runtime {

namespace {

/// The int32 inputs a step uploads, in their order in a slot's buffers.
constexpr std::array<ModelArgumentKind, 4> kStepInputs = {
    ModelArgumentKind::Tokens, ModelArgumentKind::Positions,
    ModelArgumentKind::SeqLens, ModelArgumentKind::BlockTable};

/// The index of `kind` in kStepInputs, or kStepInputs.size().
size_t stepInputIndex(ModelArgumentKind kind) {
  return static_cast<size_t>(
      std::find(kStepInputs.begin(), kStepInputs.end(), kind) -
      kStepInputs.begin());
}

uint64_t alignTo16(uint64_t bytes) { return (bytes + 15) / 16 * 16; }

/// Removes a sequence when it goes out of scope.
class SequenceGuard {
public:
  SequenceGuard(SequencePool &pool, SeqId id) : pool_(pool), id_(id) {}
  SequenceGuard(const SequenceGuard &) = delete;
  SequenceGuard &operator=(const SequenceGuard &) = delete;
  ~SequenceGuard() { pool_.removeSequence(id_); }

private:
  SequencePool &pool_;
  SeqId id_;
};

} // namespace

Engine::Engine(const cuda::Context &context, Model model,
               const std::string &ptx, const std::string &ptxName,
               const ModelConfig &config, const ModelWeights &weights,
               const EngineCapacity &capacity, const EngineOptions &options)
    : context_(&context), model_(std::move(model)), dtype_(weights.dtype),
      map_(mapModelArguments(model_.manifest(), model_.function(), config,
                             weights)),
      pool_(capacity, map_.pageSize, config.vocabSize), options_(options),
      step_(
          context, model_, ptx, ptxName,
          Capacity{pool_.capacity().maxStepRows, pool_.maxPagesPerSeq(),
                   pool_.numPages()},
          DecodeStep::Options{options.syncEachKernel, options.launchClusters}),
      uploadStream_(cuda::Stream::create()),
      stepStarted_(cuda::Event::create(/*timing=*/false)) {
  bindArguments();
}

void Engine::bindArguments() {
  // A slot's step inputs: one buffer, so that a step uploads them at once,
  // in the order of kStepInputs (the block table last: only its used rows
  // are uploaded), each at capacity at a 16-byte aligned offset.
  uint64_t inputBytes = 0;
  for (ModelArgumentKind kind : kStepInputs)
    for (const ModelArgumentBinding &a : map_.arguments)
      if (a.kind == kind) {
        inputOffsets_[stepInputIndex(kind)] = inputBytes;
        inputBytes += alignTo16(
            static_cast<uint64_t>(step_.plan().argumentBytes(a.argument)));
      }
  for (int k = 0; k < 2; ++k) {
    slots_.push_back(
        {cuda::PinnedHostBuffer(inputBytes, "step inputs (staging)"),
         cuda::DeviceBuffer(inputBytes, "step inputs"),
         cuda::Event::create(/*timing=*/false)});
    slots_.back().device.fill(0);
  }
  bindStepInputs(0);
  for (ModelArgumentBinding &a : map_.arguments) {
    const uint64_t bytes =
        static_cast<uint64_t>(step_.plan().argumentBytes(a.argument));
    if (stepInputIndex(a.kind) < kStepInputs.size())
      continue;
    cuda::DeviceBuffer buffer(bytes, a.name);
    if (a.kind == ModelArgumentKind::Weight) {
      buffer.upload(a.weight->data(), bytes);
      a.weight = nullptr;
      weightBytes_ += bytes;
      step_.bind(a.argument, buffer);
      weights_.push_back(std::move(buffer));
    } else { // a key or value cache
      buffer.fill(0);
      cacheBytes_ += bytes;
      step_.bind(a.argument, buffer);
      caches_.push_back(std::move(buffer));
    }
  }
}

void Engine::bindStepInputs(size_t k) {
  for (const ModelArgumentBinding &a : map_.arguments) {
    const size_t i = stepInputIndex(a.kind);
    if (i < kStepInputs.size())
      step_.bind(a.argument, slots_[k].device.get() + inputOffsets_[i],
                 static_cast<uint64_t>(step_.plan().argumentBytes(a.argument)));
  }
}

Engine::~Engine() { drainQuietly(); }

void Engine::drainQuietly() const noexcept {
  // Each stream on its own: a fault reported by one must not leave the
  // other running. The fault was (or will be) reported by the failing call.
  try {
    uploadStream_.synchronize("the step inputs' uploads");
  } catch (...) {
  }
  try {
    step_.synchronize();
  } catch (...) {
  }
}

void Engine::copyNextTokens(cuda::DeviceBuffer &to, uint64_t offset,
                            size_t rows) {
  to.copyFrom(step_.resultAddress(map_.nextTokens), rows * sizeof(int32_t),
              "the next tokens", step_.stream(), offset);
}

std::vector<int32_t>
Engine::downloadTokens(const cuda::DeviceBuffer &tokens) const {
  step_.synchronize();
  std::vector<int32_t> host(tokens.bytes() / sizeof(int32_t));
  tokens.download(host.data(), tokens.bytes());
  return host;
}

size_t Engine::launch(HostStep s, const LaunchOptions &options) {
  if (options.tokensOnDevice != tokensInNextSlot_)
    throwInvalidArgument("Engine::launch: the step's tokens are ",
                         options.tokensOnDevice ? "not " : "",
                         "in its slot (the last step ",
                         tokensInNextSlot_ ? "wrote" : "did not write",
                         " its next tokens there)");
  context_->makeCurrent();
  last_ = std::move(s);
  last_.shape.numSplits = step_.numSplitsFor(
      last_.shape.batch, pool_.attentionLength(last_.maxSeqLen));
  CUstream stream = step_.stream();
  const size_t k = nextSlot_;
  InputSlot &slot = slots_[k];
  nextSlot_ = (nextSlot_ + 1) % slots_.size();
  slot.uploaded.synchronize();
  auto *host = static_cast<uint8_t *>(slot.host.data());
  const std::vector<int32_t> *values[] = {&last_.tokens, &last_.positions,
                                          &last_.seqLens, &last_.blockTable};
  for (size_t i = 0; i < kStepInputs.size(); ++i)
    std::memcpy(host + inputOffsets_[i], values[i]->data(),
                values[i]->size() * sizeof(int32_t));
  try {
    // Into the buffer the step before last read, up to the block table's
    // last used row (from the positions on where the tokens are on the
    // device), while the last step runs.
    CUstream upload = uploadStream_.get();
    stepStarted_.enqueueWait(upload);
    if (options.onUploadStream)
      options.onUploadStream(upload);
    const uint64_t from = options.tokensOnDevice ? inputOffsets_[1] : 0;
    slot.device.uploadAsync(host + from,
                            inputOffsets_.back() - from +
                                last_.blockTable.size() * sizeof(int32_t),
                            upload, from);
    slot.uploaded.record(upload);
    slot.uploaded.enqueueWait(stream);
    stepStarted_.record(stream);
    bindStepInputs(k);
    step_.redirectResult(map_.nextTokens,
                         options.nextTokensToNextSlot
                             ? slots_[nextSlot_].device.get() + inputOffsets_[0]
                             : 0,
                         inputOffsets_[1] - inputOffsets_[0]);
  } catch (...) {
    drainQuietly(); // the slot's events may predate uploads still queued
    throw;
  }
  if (options_.graph)
    step_.runGraph(last_.shape, last_.inputs());
  else
    step_.run(last_.shape, last_.inputs());
  tokensInNextSlot_ = options.nextTokensToNextSlot;
  return k;
}

void Engine::downloadLogits(std::vector<uint16_t> &logits) const {
  logits.resize(static_cast<size_t>(last_.shape.batch * vocabSize()));
  step_.downloadResult(map_.logits, last_.shape, logits.data(),
                       logits.size() * sizeof(uint16_t));
}

std::vector<int32_t> Engine::download(std::vector<uint16_t> *logits) const {
  const StepShape &shape = last_.shape;
  std::vector<int32_t> next(static_cast<size_t>(shape.batch));
  step_.downloadResult(map_.nextTokens, shape, next.data(),
                       next.size() * sizeof(int32_t));
  if (logits)
    downloadLogits(*logits);
  return next;
}

std::vector<int32_t> Engine::step(const std::vector<SeqId> &seqs,
                                  const std::vector<int32_t> &tokens,
                                  std::vector<uint16_t> *logits) {
  launch(pool_.prepareStep(seqs, tokens));
  return download(logits);
}

int64_t Engine::prefillRowsPerSequence() const {
  return step_.plan().rowsMayShareSequence() ? pool_.capacity().maxStepRows : 1;
}

std::vector<int32_t>
Engine::prefill(const std::vector<SeqId> &seqs,
                const std::vector<std::vector<int32_t>> &prompts,
                std::vector<uint16_t> *logits) {
  pool_.checkPrompts(seqs, prompts);
  context_->makeCurrent();
  const size_t batch = seqs.size(), V = static_cast<size_t>(vocabSize());
  std::vector<size_t> lengths;
  for (const std::vector<int32_t> &p : prompts)
    lengths.push_back(p.size());
  const std::vector<std::vector<PromptChunk>> steps =
      pool_.planPrefill(lengths, prefillRowsPerSequence());
  if (logits)
    logits->assign(batch * V, 0);
  // Every row's next token goes to `collected` (one int32 per prompt token,
  // in step and row order, downloaded once); last[b] is the index there of
  // prompt b's last token.
  const size_t allRows =
      std::accumulate(lengths.begin(), lengths.end(), size_t{0});
  cuda::DeviceBuffer collected(allRows * sizeof(int32_t),
                               "prefill next tokens");
  size_t rowsBefore = 0;
  std::vector<size_t> last(batch);
  std::vector<uint16_t> stepLogits;
  try {
    for (const std::vector<PromptChunk> &chunks : steps) {
      std::vector<SeqId> ids;
      std::vector<std::vector<int32_t>> tokens;
      std::vector<std::pair<size_t, size_t>> ending; // (prompt, row)
      size_t rows = 0;
      for (const PromptChunk &c : chunks) {
        const std::vector<int32_t> &prompt = prompts[c.prompt];
        ids.push_back(seqs[c.prompt]);
        tokens.emplace_back(prompt.begin() + c.begin,
                            prompt.begin() + c.begin + c.count);
        rows += c.count;
        if (c.begin + c.count == prompt.size())
          ending.push_back({c.prompt, rows - 1});
      }
      launch(pool_.prepareRows(ids, tokens));
      copyNextTokens(collected, rowsBefore * sizeof(int32_t), rows);
      for (auto [b, row] : ending)
        last[b] = rowsBefore + row;
      rowsBefore += rows;
      if (!logits || ending.empty())
        continue;
      // Waits for this step: only where a prompt ends.
      downloadLogits(stepLogits);
      for (auto [b, row] : ending)
        std::copy_n(stepLogits.begin() + row * V, V, logits->begin() + b * V);
    }
  } catch (...) {
    drainQuietly(); // before `collected` is freed under queued copies
    throw;
  }
  const std::vector<int32_t> host = downloadTokens(collected);
  std::vector<int32_t> next(batch);
  for (size_t b = 0; b < batch; ++b)
    next[b] = host[last[b]];
  return next;
}

std::vector<std::vector<int32_t>>
Engine::generate(const std::vector<SeqId> &seqs,
                 const std::vector<int32_t> &tokens, int64_t steps) {
  pool_.checkSteps(seqs, tokens, steps, "Engine::generate");
  context_->makeCurrent();
  const size_t batch = seqs.size();
  const uint64_t rowBytes = batch * sizeof(int32_t);
  cuda::DeviceBuffer generated(static_cast<uint64_t>(steps) * rowBytes,
                               "generated tokens");
  const std::vector<int32_t> onDevice(batch, 0); // placeholders, not uploaded
  // Step t's next tokens go straight into step t + 1's slot (no copy
  // between the steps), from where the upload stream copies them into
  // `generated` at step t + 2 (the step that overwrites them has not
  // started); the last step's go to the result buffer as usual.
  std::vector<size_t> slotOf;
  auto copyOut = [&](int64_t t, CUstream stream) {
    generated.copyFrom(slots_[slotOf[t + 1]].device.get() + inputOffsets_[0],
                       rowBytes, "the next tokens", stream,
                       static_cast<uint64_t>(t) * rowBytes);
  };
  try {
    for (int64_t t = 0; t < steps; ++t) {
      LaunchOptions options;
      options.tokensOnDevice = t > 0;
      options.nextTokensToNextSlot = t + 1 < steps;
      if (t >= 2)
        options.onUploadStream = [&, t](CUstream s) { copyOut(t - 2, s); };
      slotOf.push_back(
          launch(pool_.prepareStep(seqs, t == 0 ? tokens : onDevice), options));
    }
    if (steps >= 2)
      copyOut(steps - 2, step_.stream());
    copyNextTokens(generated, static_cast<uint64_t>(steps - 1) * rowBytes,
                   batch);
  } catch (...) {
    drainQuietly(); // before `generated` is freed under queued copies
    tokensInNextSlot_ = false;
    step_.redirectResult(map_.nextTokens, 0, 0);
    throw;
  }
  const std::vector<int32_t> host = downloadTokens(generated);
  std::vector<std::vector<int32_t>> out(batch);
  for (size_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < steps; ++t)
      out[b].push_back(host[static_cast<size_t>(t) * batch + b]);
  return out;
}

std::vector<double> Engine::score(const std::vector<int32_t> &tokens) {
  if (tokens.size() < 2)
    throwInvalidArgument("Engine::score: scoring needs at least 2 tokens, got ",
                         tokens.size());
  const SeqId id = pool_.unusedId();
  pool_.addSequence(id);
  SequenceGuard guard(pool_, id);
  pool_.checkPrompts({id},
                     {std::vector<int32_t>(tokens.begin(), tokens.end() - 1)},
                     "Engine::score");
  pool_.checkToken("Engine::score", id, tokens.size() - 1, tokens.back());
  // Every token but the last, in chunks of rows whose logits are all kept.
  const std::vector<std::vector<PromptChunk>> steps =
      pool_.planPrefill({tokens.size() - 1}, prefillRowsPerSequence());
  const size_t V = static_cast<size_t>(vocabSize());
  std::vector<double> logProbs;
  logProbs.reserve(tokens.size() - 1);
  std::vector<uint16_t> logits;
  for (const std::vector<PromptChunk> &chunks : steps) {
    const PromptChunk &c = chunks.front(); // the one sequence's
    launch(pool_.prepareRows(
        {id},
        {std::vector<int32_t>(tokens.begin() + c.begin,
                              tokens.begin() + c.begin + c.count)},
        "Engine::score"));
    downloadLogits(logits);
    for (size_t i = 0; i < c.count; ++i)
      logProbs.push_back(tokenLogProb(dtype_, logits.data() + i * V,
                                      vocabSize(), tokens[c.begin + i + 1]));
  }
  return logProbs;
}

} // namespace fusion::runtime
