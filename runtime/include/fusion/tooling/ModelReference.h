//===- ModelReference.h - a whole decoder model on the CPU ------*- C++ -*-===//
//
// The CPU reference of a whole decoder model with Hugging Face
// LlamaForCausalLM semantics: token embedding -> every decoder layer
// (ref::decoderLayer: RMSNorm, packed QKV, RoPE, KV append, GQA attention,
// o_proj, post-attention RMSNorm, SwiGLU MLP) -> final RMSNorm -> LM head,
// one decode token per sequence per step. It owns the paged K/V caches of
// every layer (one KVCacheManager for all layers, as the GPU engine) and is
// the golden the whole-model kernels are checked against; it is itself
// checked against transformers on the real SmolLM2 checkpoint
// (runtime/test/ModelGoldenTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_MODELREFERENCE_H
#define FUSION_TOOLING_MODELREFERENCE_H

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/KVCacheManager.h"
#include "fusion/runtime/ModelConfig.h"
#include "fusion/runtime/Reference.h"

#include <cstdint>
#include <vector>

namespace fusion::tooling {

/// What one ModelReference::step may report besides the logits.
struct ModelStepTaps {
  /// [numLayers][B * H]: Hugging Face's output of each layer
  /// (round(x_out + residual_out), its hidden_states[l + 1]).
  std::vector<std::vector<uint16_t>> layerOutputs;
  /// [B * H]: the final RMSNorm's output (the LM head's input).
  std::vector<uint16_t> finalNorm;
};

/// A decoder model on the CPU with its own paged KV cache.
class ModelReference {
public:
  /// `weights` as loadModelWeights(config, weights.dtype) returns them;
  /// config.checkWholeModel() must hold. The caches hold `numPages` pages
  /// of `pageSize` tokens per layer, shared by all sequences. Throws
  /// UnsupportedError / InvalidArgumentError for a config or sizes the
  /// reference cannot run.
  ModelReference(
      const runtime::ModelConfig &config, runtime::ModelWeights weights,
      int64_t numPages, int64_t pageSize = 16,
      runtime::ref::Precision precision = runtime::ref::Precision::F32);

  /// Starts an empty sequence. Throws InvalidArgumentError if `id` is live.
  void addSequence(runtime::SeqId id) { cache_.addSequence(id); }
  /// Ends a sequence and frees its pages.
  void removeSequence(runtime::SeqId id) { cache_.release(id); }
  /// Tokens sequence `id` holds.
  int64_t length(runtime::SeqId id) const { return cache_.length(id); }

  /// One decode step: tokens[b] (in [0, vocab)) is appended to sequence
  /// seqs[b] at position length(seqs[b]) and run through the model. Returns
  /// the logits [B, vocab] in the weights' dtype. Fills `taps` when given.
  /// Throws InvalidArgumentError (unknown or repeated sequence, a token out
  /// of range, sizes differ) or CapacityError (cache full) before changing
  /// anything.
  std::vector<uint16_t> step(const std::vector<runtime::SeqId> &seqs,
                             const std::vector<int32_t> &tokens,
                             ModelStepTaps *taps = nullptr);

private:
  runtime::ref::PagedKVCache layerCache(int64_t layer);

  runtime::ModelConfig config_;
  runtime::ModelWeights weights_;
  runtime::ref::DecoderConfig decoder_;
  runtime::ref::Precision precision_;
  runtime::KVCacheManager cache_;
  /// Per layer: K then V pages, [numPages, pageSize, Hkv, D] each.
  std::vector<std::vector<uint16_t>> kv_;
};

} // namespace fusion::tooling

#endif // FUSION_TOOLING_MODELREFERENCE_H
