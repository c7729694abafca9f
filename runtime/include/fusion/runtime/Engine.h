//===- Engine.h - a whole decoder model on the GPU --------------*- C++ -*-===//
//
// The Engine runs the decode step of a whole model, compiled from
// `fusion-import --whole-model` by fusion-compile (the function
// `decode_step`: embedding, every layer, final norm, LM head, argmax), for
// several sequences at once:
//
//   cuda::Context ctx = cuda::Context::open();
//   Checkpoint ckpt = Checkpoint::open("build/models/smollm2");
//   Engine engine(ctx, Model::load("out/smollm2.manifest.json", "decode_step"),
//                 readFile("out/smollm2.ptx"), "out/smollm2.ptx", ckpt.config,
//                 loadModelWeights(ckpt.tensors, ckpt.config, DType::F16),
//                 EngineCapacity{/*maxBatch=*/4, /*maxTokensPerSeq=*/512});
//   engine.addSequence(0);
//   std::vector<int32_t> next = engine.prefill({0}, {promptIds});
//   for (int i = 0; i < 32; ++i)
//     next = engine.step({0}, next);
//
// Construction maps every argument of the function to a weight, a cache or
// a step input (mapModelArguments, ModelArguments.h: by name, with kind,
// role, dtype and shape checked), uploads every weight once, allocates one
// K and one V pool per layer ([num_pages, P, Hkv, D], P from the manifest's
// caches, zeroed) and the step inputs at capacity, and builds a DecodeStep
// (DecodeStep.h), which loads the PTX and owns the launches and the CUDA
// graph; every buffer with a batch dimension is sized for
// EngineCapacity::maxStepRows rows, the largest step (a prefill chunk), not
// maxBatch. The host side (sequences, pages, every check of a request, the
// int32 inputs of a step) is a SequencePool (SequencePool.h): one
// KVCacheManager for all layers, since every layer uses the same page ids.
//
// A step uploads the token ids, positions, lengths and block table (a fixed
// width of ceil(maxTokensPerSeq / P) pages, so the graph is reused), replays
// a CUDA graph (DecodeStep::runGraph, which keeps the graphs of recent
// step shapes: one per batch and num_splits), and downloads the next tokens
// (and the logits when asked). num_splits is DecodeStep::numSplitsFor (the
// schedule's policy, fitted to the device's clusters) for the
// longest sequence rounded up to a power of two (at most maxTokensPerSeq),
// so that a growing sequence changes it, and captures a graph, a few times
// rather than every 64 tokens (SequencePool::attentionLength). Prefill runs
// the prompts through the same decode step in chunks: a step's rows may be
// consecutive tokens of one sequence (row r at position p_r with seq_lens
// p_r + 1 and the sequence's block-table row; its K/V appended before the
// step's attention reads positions [0, p_r]: causal prefill), so a prompt of
// n tokens takes ceil(n / maxStepRows) steps rather than n, even at
// maxBatch 1 (maxStepRows defaults to kDefaultMaxStepRows, SequencePool.h).
//
// Errors: a bad request (more than maxBatch sequences, token ids, unknown or
// repeated sequences, a sequence past maxTokensPerSeq, too few free pages)
// throws the runtime's InvalidArgumentError / CapacityError before anything
// launches and leaves the engine unchanged; construction throws FormatError /
// UnsupportedError for a function, config or weights that do not match; CUDA
// failures are CudaError, after which the engine's sequences are undefined.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_ENGINE_H
#define FUSION_RUNTIME_ENGINE_H

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/DecodeStep.h"
#include "fusion/runtime/Model.h"
#include "fusion/runtime/ModelArguments.h"
#include "fusion/runtime/ModelConfig.h"
#include "fusion/runtime/SequencePool.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fusion::runtime {

/// How an Engine launches its steps.
struct EngineOptions {
  /// Replay each step as a CUDA graph (DecodeStep::runGraph); false:
  /// launch its kernels one by one (DecodeStep::run).
  bool graph = true;
  /// With graph = false, synchronize after every kernel so that a fault
  /// names it (slow; for debugging).
  bool syncEachKernel = false;
  /// DecodeStep::Options::launchClusters: false launches every kernel
  /// without a thread-block cluster (the same results; for compute-sanitizer
  /// racecheck and to compare the cluster combines with the workspace ones).
  bool launchClusters = true;
};

/// A compiled whole model with its weights and KV caches on one GPU.
/// Neither copyable nor movable (its DecodeStep points into it).
class Engine {
public:
  /// `model` is the manifest function compiled from fusion-import
  /// --whole-model of `config` (Model::load(path, "decode_step")), `ptx` its
  /// PTX (`ptxName` names it in messages), `weights` loadModelWeights(store,
  /// config, dtype) in the dtype it was compiled for (copied to the GPU;
  /// the host copy may be dropped afterwards). `context` must outlive the
  /// engine. Throws FormatError / UnsupportedError as mapModelArguments,
  /// InvalidArgumentError / CapacityError for capacities SequencePool
  /// rejects, and the errors of DecodeStep (PTX against manifest, JIT) and
  /// of the allocations.
  Engine(const cuda::Context &context, Model model, const std::string &ptx,
         const std::string &ptxName, const ModelConfig &config,
         const ModelWeights &weights, const EngineCapacity &capacity,
         const EngineOptions &options = {});
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;
  /// Waits for the engine's streams (work they enqueued may still read the
  /// input slots) before freeing anything.
  ~Engine();

  const Model &model() const { return model_; }
  const SequencePool &sequences() const { return pool_; }
  /// The activation dtype (the weights', f16 or bf16).
  DType dtype() const { return dtype_; }
  int64_t vocabSize() const { return pool_.vocabSize(); }
  /// Bytes of weights and of KV caches on the GPU.
  uint64_t weightBytes() const { return weightBytes_; }
  uint64_t cacheBytes() const { return cacheBytes_; }
  /// CUDA graph captures so far (DecodeStep::graphCaptures).
  int graphCaptures() const { return step_.graphCaptures(); }

  /// Starts an empty sequence; InvalidArgumentError if `id` is live.
  void addSequence(SeqId id) { pool_.addSequence(id); }
  /// Ends sequence `id` and frees its pages; InvalidArgumentError if
  /// unknown.
  void removeSequence(SeqId id) { pool_.removeSequence(id); }
  /// Tokens sequence `id` holds.
  int64_t length(SeqId id) const { return pool_.length(id); }

  /// One decode step: tokens[b] is appended to sequence seqs[b] (at
  /// position length(seqs[b])) and run through the model. Returns the
  /// greedy next token of each row (the argmax of its logits, [batch]);
  /// with `logits`, also resizes it to [batch, vocab] and fills it with the
  /// logits (dtype() bit patterns). Throws as SequencePool::prepareStep
  /// before anything changes or launches.
  std::vector<int32_t> step(const std::vector<SeqId> &seqs,
                            const std::vector<int32_t> &tokens,
                            std::vector<uint16_t> *logits = nullptr);

  /// Runs prompts[b] through sequence seqs[b] in chunked steps: the prompt
  /// tokens, one row each, packed into steps of at most maxStepRows rows
  /// (SequencePool::planPrefill with prefillRowsPerSequence(): a prompt's
  /// consecutive tokens share a step, and several prompts may share one),
  /// each row attending to its sequence's tokens up to its own (causal). So
  /// prompts of N tokens in all take ceil(N / maxStepRows) steps. The steps
  /// are enqueued back to back (as generate: every row's next token
  /// collected on the device and downloaded once; with `logits` the host
  /// waits only for the steps where a prompt ends). num_splits of each step
  /// is chosen for its longest seq_lens. Returns each sequence's greedy next
  /// token after its last prompt token (the argmax of that token's row); with
  /// `logits`, [batch, vocab]: row b the logits of prompt b's last token.
  /// Throws as SequencePool::checkPrompts before anything changes or
  /// launches; after a CudaError the sequences are undefined.
  std::vector<int32_t> prefill(const std::vector<SeqId> &seqs,
                               const std::vector<std::vector<int32_t>> &prompts,
                               std::vector<uint16_t> *logits = nullptr);

  /// Greedy decoding of `steps` tokens without a host round trip per step:
  /// as `steps` calls of step(), each fed the previous call's next tokens
  /// (tokens[b] first), but step t's argmax writes step t + 1's input
  /// tokens into its input slot on the device and the host enqueues the
  /// steps back to back (its staging waits only for the uploads two steps
  /// back), so the GPU does not idle between steps. Returns [batch][steps]: row
  /// b the greedy tokens sequence seqs[b] gets (downloaded once, at the end).
  /// Throws as SequencePool::checkSteps before anything changes or launches;
  /// after a CudaError the sequences are undefined (as after step()).
  std::vector<std::vector<int32_t>> generate(const std::vector<SeqId> &seqs,
                                             const std::vector<int32_t> &tokens,
                                             int64_t steps);

  /// The most rows one sequence takes in a step of prefill() or score():
  /// maxStepRows where the model's cache appends precede its reads
  /// (LaunchPlan::rowsMayShareSequence: every compiled model), else 1 (one
  /// token of each prompt a step).
  int64_t prefillRowsPerSequence() const;

  /// Teacher-forced scoring of `tokens` in a fresh sequence (removed at the
  /// end): element i - 1 of the result is log p(tokens[i] | tokens[0..i))
  /// (tokenLogProb, LogProbs.h: float64 log-softmax of the logits on the
  /// host) for i in [1, n): n - 1 log-probabilities, tokens[0] unscored (no
  /// BOS is added). tokens[0..n-1) run as prefill's chunks (steps of up to
  /// prefillRowsPerSequence() rows), the logits of every row downloaded
  /// after its step. Needs room for n - 1 tokens. Throws
  /// InvalidArgumentError for fewer than 2 tokens or one outside the
  /// vocabulary, CapacityError as prefill, before anything launches.
  std::vector<double> score(const std::vector<int32_t> &tokens);

private:
  /// Uploads the weights (map_'s host pointers, cleared afterwards: the
  /// caller's ModelWeights may go away), allocates and zeroes the caches
  /// and binds them, and lays out and allocates each slot's step inputs at
  /// capacity.
  void bindArguments();
  /// Binds the step-input arguments to slot `k`'s device buffer.
  void bindStepInputs(size_t k);
  /// How launch() gets a step's token ids and where its next tokens go.
  struct LaunchOptions {
    /// The token ids are the previous step's next tokens, which it wrote
    /// into this step's slot (nextTokensToNextSlot); s.tokens is not
    /// uploaded. Exactly when the previous launch had nextTokensToNextSlot
    /// (launch() throws otherwise: an upload of the tokens would race with
    /// the previous step writing them).
    bool tokensOnDevice = false;
    /// The step's next tokens are written into the tokens of the next
    /// slot instead of the result buffer (performance.md entry 37): no copy
    /// between the two steps.
    bool nextTokensToNextSlot = false;
    /// Enqueued on uploadStream_ before this step's upload, where every
    /// step before the last one has finished (e.g. to copy out the next
    /// tokens the step before last wrote into a slot).
    std::function<void(CUstream)> onUploadStream;
  };
  /// Uploads the inputs of `s` through the next slot (on uploadStream_) and
  /// launches it (num_splits chosen here by DecodeStep::numSplitsFor at
  /// SequencePool::attentionLength); `s` is kept in last_. Returns the
  /// slot's index.
  size_t launch(HostStep s, const LaunchOptions &options);
  size_t launch(HostStep s) { return launch(std::move(s), LaunchOptions()); }
  /// Copies the last step's first `rows` next tokens (int32) to byte
  /// `offset` of `to`, ordered on the step's stream.
  void copyNextTokens(cuda::DeviceBuffer &to, uint64_t offset, size_t rows);
  /// Waits for the step's stream and downloads all of `tokens` (int32).
  std::vector<int32_t> downloadTokens(const cuda::DeviceBuffer &tokens) const;
  /// Waits for the step's stream and downloads the last step's logits into
  /// `logits`, resized to [batch, vocab] (dtype() bit patterns).
  void downloadLogits(std::vector<uint16_t> &logits) const;
  /// The next tokens of the last step, and its logits when asked.
  std::vector<int32_t> download(std::vector<uint16_t> *logits) const;

  /// Waits for both streams, ignoring a fault they report: for error paths,
  /// before memory the enqueued work may read is reused or freed.
  void drainQuietly() const noexcept;

  const cuda::Context *context_;
  Model model_;
  DType dtype_;
  ModelArgumentMap map_;
  SequencePool pool_;
  EngineOptions options_;
  DecodeStep step_;
  std::vector<cuda::DeviceBuffer> weights_, caches_;
  /// Where each step input (tokens, positions, seq_lens, block table at
  /// capacity) lies in a slot's buffers (bytes).
  std::array<uint64_t, 4> inputOffsets_{};
  uint64_t weightBytes_ = 0, cacheBytes_ = 0;
  /// The last step's host inputs.
  HostStep last_;
  /// The step inputs of two steps, used in turn, so that a step's upload
  /// overlaps the step before it (performance.md entry 36): the inputs in
  /// page-locked host memory and on the device (the buffer the step's
  /// arguments are bound to); `uploaded`, recorded on uploadStream_ after
  /// the upload, is waited for by the step on the step's stream and by the
  /// host before it writes `host` again.
  struct InputSlot {
    cuda::PinnedHostBuffer host;
    cuda::DeviceBuffer device;
    cuda::Event uploaded;
  };
  std::vector<InputSlot> slots_;
  size_t nextSlot_ = 0;
  /// The uploads' stream.
  cuda::Stream uploadStream_;
  /// Recorded on the step's stream just before each step's kernels, after
  /// its copies: the next upload waits for it, so that it writes a slot only
  /// after the step before last (which read it) has finished, and starts
  /// while a step runs, not among the copies between two steps.
  cuda::Event stepStarted_;
  /// Whether the last step wrote its next tokens into slot nextSlot_'s
  /// tokens (LaunchOptions::nextTokensToNextSlot).
  bool tokensInNextSlot_ = false;
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_ENGINE_H
