//===- ModelConfig.h - Hugging Face config.json of decoder models -*- C++
//-*-===//
//
// The one reader of a Hugging Face `config.json` (LlamaConfig, MistralConfig,
// MixtralConfig, Qwen2Config, Qwen2MoeConfig): the fields the front half of a
// decoder layer needs, with transformers' semantics. The runtime builds its
// CPU reference configuration from it, and the compiler's importer
// (lib/Import/HuggingFace.cpp, fusion-import) builds the fusion-op module
// from it, so both accept and reject the same configs.
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
//     high_freq_factor,                    longrope, ...) -> UnsupportedError;
//     original_max_position_embeddings}    per-layer-type parameters
//                                          ({"full_attention": {...}}) ->
//                                          UnsupportedError
//   rope_parameters {rope_theta, ...,      transformers 5's spelling of the
//     partial_rotary_factor}               two above; when present,
//                                          rope_scaling is not read and its
//                                          rope_theta wins over the top level
//   partial_rotary_factor (default 1; in   rotaryDim = floor(head_dim * f);
//     rope_parameters, else top level)     rope_parameters' wins, as in
//                                          transformers 5
//   attention_bias (llama; default false)  attentionBias: packed q/k/v bias.
//   qkv_bias (qwen2_moe; default true)     qwen2 always has one, mistral and
//                                          mixtral never; a field the model
//                                          does not read gives a warning
//   torch_dtype / dtype                    torchDtype (float16/bfloat16),
//                                          dtypeName, dtypeField
//   num_hidden_layers,                     numHiddenLayers,
//   max_position_embeddings                maxPositionEmbeddings
//   sliding_window, use_sliding_window     a warning when a window is in use
//   intermediate_size, vocab_size          intermediateSize, vocabSize (0 when
//                                            absent; the whole model needs
//                                            them)
//   tie_word_embeddings (default false)    tieWordEmbeddings: lm_head is
//                                            embed_tokens (LlamaConfig default)
//   hidden_act (default silu), mlp_bias    hiddenAct, mlpBias; the whole model
//     (llama; default false)                 needs silu and no MLP bias
//
// A JSON null counts as an absent field (as transformers' None).
//
// Errors name the config and the field by its path:
//   config.json: field "rope_parameters.rope_type": RoPE type "yarn" is not
//   supported (fusion.rope implements "default" and "llama3")
//   config.json: missing field "hidden_size" (required)
// FormatError: invalid JSON, a field of the wrong type or range, inconsistent
// head counts, a q/k/v weight past 64-bit sizes. UnsupportedError: a
// model_type or RoPE scaling the kernels do not implement.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_MODELCONFIG_H
#define FUSION_RUNTIME_MODELCONFIG_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/ReferenceConfig.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusion::runtime {

struct ModelConfigResult;

/// The attention-relevant part of a Hugging Face decoder config.json.
struct ModelConfig {
  /// The config's name in messages (the `source` given to parse).
  std::string source;
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
  /// Packed q/k/v bias (see the table above for which field says so).
  bool attentionBias = false;
  /// The checkpoint's dtype, if float16 or bfloat16.
  std::optional<DType> torchDtype;
  /// The dtype as written ("float16", "float32", ...); empty if absent.
  std::string dtypeName;
  /// The field dtypeName came from ("torch_dtype" or "dtype"), for messages.
  std::string dtypeField;
  /// The MLP's width and the vocabulary (0 when config.json has none).
  int64_t intermediateSize = 0;
  int64_t vocabSize = 0;
  /// The LM head is the token embedding (tie_word_embeddings).
  bool tieWordEmbeddings = false;
  /// The MLP activation (hidden_act) and whether its linears have biases.
  std::string hiddenAct = "silu";
  bool mlpBias = false;
  /// Fields read but not modelled that could matter (a sliding_window in
  /// use, a bias field the model type ignores); tools print them.
  std::vector<std::string> warnings;

  /// The model_types accepted, whose attention block is the Llama one
  /// (RMSNorm, packed q/k/v, NeoX RoPE, GQA softmax attention with scale
  /// 1/sqrt(head_dim)): llama, mistral, mixtral, qwen2, qwen2_moe.
  static const std::vector<std::string> &supportedModelTypes();

  /// Parses config.json text (`source` names it in messages). Throws
  /// FormatError or UnsupportedError (see the file comment).
  static ModelConfig parse(std::string_view json,
                           const std::string &source = "config.json");
  /// parse() without exceptions, for callers built without them (the
  /// compiler): the config, or the error's message.
  static ModelConfigResult tryParse(std::string_view json,
                                    const std::string &source) noexcept;
  /// Reads and parses a config.json file. Throws Error if it cannot be read.
  static ModelConfig load(const std::string &path);

  /// The head geometry (query heads, kv heads, head_dim).
  ref::AttentionDims dims() const {
    return {numAttentionHeads, numKeyValueHeads, headDim};
  }
  /// The CPU reference configuration of the layer's front half in `dtype`:
  /// RMSNorm (eps) with the residual add, packed QKV (with bias if
  /// attentionBias), NeoX RoPE (theta, rotaryDim, llama3 scaling), default
  /// attention scale 1/sqrt(head_dim).
  ref::FrontHalfConfig frontHalf(DType dtype) const;
  /// The CPU reference configuration of a whole decoder layer in `dtype`:
  /// frontHalf(dtype) plus intermediateSize.
  ref::DecoderConfig decoder(DType dtype) const {
    return {frontHalf(dtype), intermediateSize};
  }
  /// Throws UnsupportedError naming the field when the whole decoder model
  /// (embedding, every layer with its SwiGLU MLP, final norm, LM head), not
  /// only the front half, is outside what the runtime implements: a mixture
  /// of experts (mixtral, qwen2_moe), a hidden_act other than silu, MLP
  /// biases, or no intermediate_size / vocab_size / num_hidden_layers.
  void checkWholeModel() const;
  /// The message checkWholeModel() would throw, or an empty string when the
  /// whole model is supported; for callers built without exceptions (the
  /// compiler's importer).
  std::string wholeModelProblem() const;
  /// One line: "llama: hidden 4096, heads 32/8, head_dim 128, eps 1e-05,
  /// rope_theta 500000 (llama3 x8), no bias".
  std::string summary() const;
};

/// What ModelConfig::tryParse returns: `config`, or the message of the
/// FormatError or UnsupportedError that parse() would have thrown.
struct ModelConfigResult {
  std::optional<ModelConfig> config;
  std::string error;
  /// The error is an UnsupportedError (else a FormatError).
  bool unsupported = false;
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_MODELCONFIG_H
