//===- ReferenceConfig.h - configuration of the reference ops ---*- C++ -*-===//
//
// The option and geometry structs of the CPU reference ops (Reference.h):
// head counts, norm, RoPE and attention options, and the configuration of a
// decoder layer's front half. The runtime proper (ModelConfig, Model,
// Checkpoint) describes layers with them without pulling in the reference
// itself, which only the checkers link (fusion_reference).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_REFERENCECONFIG_H
#define FUSION_RUNTIME_REFERENCECONFIG_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/RopeFrequencies.h"

#include <cstdint>
#include <optional>

namespace fusion::runtime::ref {

/// Options of rmsnorm and layernorm.
struct NormOptions {
  /// Added to the mean square (rmsnorm) or the variance (layernorm); used as
  /// float(eps) under Precision::F32.
  double eps = 1e-6;
  /// rmsnorm only: scale by (1 + w) instead of w (Gemma's GemmaRMSNorm).
  bool unit_offset = false;
};

/// Head geometry of one attention layer. numQHeads must be a positive
/// multiple of numKVHeads (any group size, e.g. 5, 6, 7); headDim >= 1.
struct AttentionDims {
  int64_t numQHeads = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  /// Rows of the packed QKV weight: (numQHeads + 2 * numKVHeads) * headDim.
  int64_t qkvRows() const { return (numQHeads + 2 * numKVHeads) * headDim; }
};

/// Which elements of a head a rotation pairs.
enum class RopePairing {
  /// x[i] with x[i + rotary_dim/2] (GPT-NeoX; Hugging Face rotate_half /
  /// apply_rotary_pos_emb; Llama, Mistral, Qwen2).
  NeoX,
  /// x[2i] with x[2i + 1] (GPT-J rotate_every_two, interleaved).
  GPTJ,
};

/// Llama-3.1 frequency scaling (RopeFrequencies.h).
using Llama3RopeScaling = fusion::runtime::Llama3RopeScaling;

/// Options of rope.
struct RopeOptions {
  RopePairing pairing = RopePairing::NeoX;
  /// RoPE base (Hugging Face rope_theta); float(theta) under F32.
  double theta = 10000.0;
  /// Rotated leading elements of each head: even, <= head_dim; 0 means
  /// head_dim. The remaining elements pass through (partial rotary,
  /// GPT-NeoX rotary_pct).
  int64_t rotaryDim = 0;
  /// Llama-3.1 scaling of the frequencies, if any.
  std::optional<Llama3RopeScaling> llama3;
};

/// Options of decodeAttention.
struct AttentionOptions {
  /// Softmax scale; default 1/sqrt(head_dim). float(scale) under F32.
  std::optional<double> scale;
};

/// The normalisation in front of attention.
enum class NormKind { RMSNorm, LayerNorm };

/// Static configuration of decodeLayerFrontHalf.
struct FrontHalfConfig {
  DType dtype = DType::F16;
  int64_t hidden = 0;
  AttentionDims dims;
  NormKind norm = NormKind::RMSNorm;
  NormOptions normOptions;
  RopeOptions rope;
  AttentionOptions attention;
};

/// Static configuration of a whole decoder layer (decoderLayer): the front
/// half, then o_proj, the post-attention RMSNorm (frontHalf.normOptions) and
/// the SwiGLU MLP of width `intermediate`.
struct DecoderConfig {
  FrontHalfConfig frontHalf;
  int64_t intermediate = 0;
};

} // namespace fusion::runtime::ref

#endif // FUSION_RUNTIME_REFERENCECONFIG_H
