//===- Checkpoint.h - Hugging Face checkpoints -> packed weights --*- C++
//-*-===//
//
// Reads the tensors of a decoder layer's front half from a Hugging Face
// checkpoint and lays them out as the compiled kernels (and the CPU
// reference) expect:
//
//   HF tensor (layer N)                             packed argument
//   model.layers.N.input_layernorm.weight [H]       norm weight [H]
//   model.layers.N.self_attn.q_proj.weight [Hq*D, H]   rows [0, Hq*D)
//   model.layers.N.self_attn.k_proj.weight [Hkv*D, H]  rows [Hq*D, (Hq+Hkv)*D)
//   model.layers.N.self_attn.v_proj.weight [Hkv*D, H]  rows [(Hq+Hkv)*D, ...)
//     of the qkv weight [(Hq + 2*Hkv)*D, H] = cat([q, k, v], dim=0)
//   model.layers.N.self_attn.{q,k,v}_proj.bias     qkv bias [(Hq + 2*Hkv)*D]
//                                                   = cat([q, k, v]) (Qwen2)
//
// Row h*D + d of each part is element d of head h (docs/runtime.md, qkvProj).
// Tensors are converted to the compiled dtype with one rounding (F16, BF16,
// F32 or F64 sources). bf16 -> f16 is exact in f16's normal range; values
// below it round through the subnormals, and a finite value that overflows
// f16 is an error.
//
// A checkpoint is a directory with config.json and model.safetensors, or a
// sharded model.safetensors.index.json ("weight_map": tensor -> file), or a
// single .safetensors file. Layer prefixes "model.layers.", "layers." and
// "model.language_model.layers." are recognised.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_CHECKPOINT_H
#define FUSION_RUNTIME_CHECKPOINT_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/ModelConfig.h"
#include "fusion/runtime/ReferenceConfig.h"
#include "fusion/runtime/Safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace fusion::runtime {

/// The Hugging Face names of the front-half tensors of one layer.
struct HFLayerNames {
  std::string inputLayernorm;
  std::string qWeight, kWeight, vWeight;
  std::string qBias, kBias, vBias;
  std::string oWeight, postAttentionLayernorm;
  std::string gateWeight, upWeight, downWeight;
};

/// Names of layer `layer` under `prefix` (e.g. "model.layers.").
HFLayerNames hfLayerNames(int64_t layer,
                          std::string_view prefix = "model.layers.");

/// The tensors of one safetensors file or of a sharded checkpoint, by name.
class TensorStore {
public:
  /// `path` is a .safetensors file, a model.safetensors.index.json, or a
  /// directory holding model.safetensors or model.safetensors.index.json.
  /// Throws Error / FormatError naming the path.
  static TensorStore open(const std::string &path);
  /// A store over one already opened file.
  static TensorStore fromFile(SafetensorsFile file);

  const TensorInfo *find(std::string_view name) const;
  /// Throws FormatError naming the checkpoint if `name` is absent.
  const TensorInfo &info(std::string_view name) const;
  std::vector<uint8_t> read(std::string_view name) const;
  /// Every tensor name, sorted.
  std::vector<std::string> names() const;
  /// What was opened (for messages).
  const std::string &path() const { return path_; }

private:
  const SafetensorsFile *fileOf(std::string_view name) const;

  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t, std::less<>> index_;
};

/// Converts `count` elements of safetensors dtype `srcDType` ("F16",
/// "BF16", "F32", "F64") at `src` to `dtype` bit patterns, rounding once
/// (nearest-even). Throws UnsupportedError for another source dtype and
/// FormatError, naming `what` and the first offending element, if a finite
/// value overflows `dtype`.
std::vector<uint16_t> convertTo16(std::string_view srcDType, const void *src,
                                  int64_t count, DType dtype,
                                  const std::string &what);

/// cat([q, k, v], dim = 0) of row-major matrices with `cols` columns:
/// q has dims.numQHeads * D rows, k and v dims.numKVHeads * D rows each (for
/// biases pass cols = 1). Throws InvalidArgumentError on null inputs or
/// sizes that do not match.
std::vector<uint16_t> packQKV(const ref::AttentionDims &dims, int64_t cols,
                              const std::vector<uint16_t> &q,
                              const std::vector<uint16_t> &k,
                              const std::vector<uint16_t> &v);

/// The packed front-half weights of one layer in one dtype.
struct FrontHalfWeights {
  DType dtype = DType::F16;
  int64_t hidden = 0;
  ref::AttentionDims dims;
  std::vector<uint16_t> normWeight; ///< [hidden]
  std::vector<uint16_t> qkvWeight;  ///< [(Hq + 2*Hkv) * D, hidden]
  std::vector<uint16_t> qkvBias;    ///< [(Hq + 2*Hkv) * D], empty if none
};

/// Reads layer `layer` of `store` (HF names, the prefix detected) with the
/// shapes `config` implies, converts to `dtype` and packs q/k/v. The bias is
/// read when config.attentionBias (all three biases must then exist).
/// Throws FormatError naming the tensor on a missing tensor or a shape
/// mismatch (e.g. "model.layers.0.self_attn.k_proj.weight is BF16[512, 2048],
/// expected [1024, 2048] for 8 KV heads of 128").
FrontHalfWeights loadFrontHalfWeights(const TensorStore &store,
                                      const ModelConfig &config, int64_t layer,
                                      DType dtype);

/// The weights of a whole decoder layer in one dtype (H = hidden, I =
/// intermediate_size): the front half, then
///   self_attn.o_proj.weight [H, Hq*D]          oProj
///   post_attention_layernorm.weight [H]        postNorm
///   cat([mlp.gate_proj.weight, mlp.up_proj.weight]) [2*I, H]   gateUp
///   mlp.down_proj.weight [H, I]                down
struct DecoderLayerWeights {
  FrontHalfWeights front;
  std::vector<uint16_t> oProj, postNorm, gateUp, down;
};

/// Every weight of a decoder model in one dtype.
struct ModelWeights {
  DType dtype = DType::F16;
  std::vector<uint16_t> embedTokens; ///< [vocab, H] model.embed_tokens
  std::vector<DecoderLayerWeights> layers;
  std::vector<uint16_t> finalNorm; ///< [H] model.norm
  /// [vocab, H] lm_head; empty when tie_word_embeddings (then embedTokens).
  std::vector<uint16_t> lmHead;
  const std::vector<uint16_t> &lmHeadWeight() const {
    return lmHead.empty() ? embedTokens : lmHead;
  }
};

/// Layer `layer` of `store` as loadFrontHalfWeights, plus the o_proj, the
/// post-attention norm and the MLP. Throws FormatError naming a missing
/// tensor or a shape that does not match `config`.
DecoderLayerWeights loadDecoderLayerWeights(const TensorStore &store,
                                            const ModelConfig &config,
                                            int64_t layer, DType dtype);

/// The whole model: model.embed_tokens.weight, every layer, model.norm.weight
/// and lm_head.weight (unless tied). Throws UnsupportedError if
/// config.checkWholeModel() does, FormatError as loadDecoderLayerWeights.
ModelWeights loadModelWeights(const TensorStore &store,
                              const ModelConfig &config, DType dtype);

/// A Hugging Face checkpoint directory: config.json plus its tensors.
struct Checkpoint {
  ModelConfig config;
  TensorStore tensors;
  /// Opens `dir`/config.json and the safetensors of `dir`.
  static Checkpoint open(const std::string &dir);
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_CHECKPOINT_H
