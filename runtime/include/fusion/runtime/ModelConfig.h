//===- ModelConfig.h - Hugging Face config.json of decoder models -*- C++
//-*-===//
//
// The fields of a Hugging Face `config.json` (LlamaConfig, MistralConfig,
// Qwen2Config and friends) that the front half of a decoder layer needs, and
// the CPU reference configuration built from them, so that the runtime can
// check a compiled model against the reference using a real checkpoint.
//
//   config.json field                      ModelConfig
//   model_type (required: llama, mistral,  modelType; others ->
//     mixtral, qwen2, qwen2_moe)             UnsupportedError
//   hidden_size                            hiddenSize
//   num_attention_heads                    numAttentionHeads
//   num_key_value_heads (default: heads)   numKeyValueHeads
//   head_dim (default/null: hidden/heads)  headDim (even unless
//                                            partial_rotary_factor)
//   rms_norm_eps (> 0)                     rmsNormEps (default 1e-6)
//   rope_theta (> 1)                       ropeTheta (default 10000)
//   rope_scaling {rope_type|type: llama3,  llama3Scaling; "default"/null: none;
//     factor, low_freq_factor,             other types (linear, dynamic, yarn,
//     high_freq_factor,                    longrope, ...) -> UnsupportedError
//     original_max_position_embeddings}    (the reference has no such scaling)
//   rope_parameters {rope_theta, ...}      (transformers v5 spelling of the two
//                                          above; when present, rope_scaling
//                                          is not read)
//   partial_rotary_factor (default 1;      rotaryDim = head_dim * factor
//     top level or in rope_parameters)
//   attention_bias (default false;         attentionBias: packed q/k/v bias
//     always true for model_type qwen2,
//     whose config has no such field)
//   torch_dtype / dtype                    torchDtype (float16/bfloat16 only)
//   num_hidden_layers,                     numHiddenLayers,
//   max_position_embeddings, model_type    maxPositionEmbeddings, modelType
//
// The rules are those of fusion-import (lib/Import/HuggingFace.cpp), so the
// two accept and reject the same configs.
//
// Errors: FormatError (invalid JSON, a field of the wrong type or range,
// inconsistent head counts, a q/k/v weight past 64-bit sizes),
// UnsupportedError (an unsupported model_type, rope scaling without a
// reference).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_MODELCONFIG_H
#define FUSION_RUNTIME_MODELCONFIG_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/Reference.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusion::runtime {

/// The attention-relevant part of a Hugging Face decoder config.json.
struct ModelConfig {
  std::string modelType;
  int64_t hiddenSize = 0;
  int64_t numAttentionHeads = 0;
  int64_t numKeyValueHeads = 0;
  int64_t headDim = 0;
  int64_t numHiddenLayers = 0;
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  std::optional<ref::Llama3RopeScaling> llama3Scaling;
  /// Rotated leading elements of each head; equal to headDim unless
  /// partial_rotary_factor < 1.
  int64_t rotaryDim = 0;
  bool attentionBias = false;
  /// The checkpoint's dtype, if float16 or bfloat16.
  std::optional<DType> torchDtype;
  /// Fields read but not modelled that could matter (a sliding_window in
  /// use, attention_bias false for qwen2); tools print them.
  std::vector<std::string> warnings;

  /// Parses config.json text (`source` names it in messages).
  static ModelConfig parse(std::string_view json,
                           const std::string &source = "config.json");
  /// Reads and parses a config.json file. Throws Error if it cannot be read.
  static ModelConfig load(const std::string &path);

  ref::AttentionDims dims() const {
    return {numAttentionHeads, numKeyValueHeads, headDim};
  }
  /// The CPU reference configuration of the layer's front half in `dtype`:
  /// RMSNorm (eps) with the residual add, packed QKV (with bias if
  /// attentionBias), NeoX RoPE (theta, rotaryDim, llama3 scaling), default
  /// attention scale 1/sqrt(head_dim).
  ref::FrontHalfConfig frontHalf(DType dtype) const;
  /// One line: "llama: hidden 4096, heads 32/8, head_dim 128, eps 1e-05,
  /// rope_theta 500000 (llama3 x8), no bias".
  std::string summary() const;
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_MODELCONFIG_H
