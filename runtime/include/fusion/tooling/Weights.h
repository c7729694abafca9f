//===- Weights.h - the weights of the layer fusion-run checks ---*- C++ -*-===//
//
// The norm, q/k/v and bias weights of the compiled layer front half: random
// (seeded), or one layer of a checkpoint with Hugging Face names (packed into
// cat(q, k, v)), or a plain safetensors file with packed names.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_WEIGHTS_H
#define FUSION_TOOLING_WEIGHTS_H

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Model.h"
#include "fusion/runtime/ModelConfig.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fusion::tooling {

/// Where the weights come from.
struct WeightSource {
  /// A checkpoint directory or .safetensors file; empty: random weights.
  std::string path;
  int64_t layer = 0; ///< the layer of the checkpoint
  uint64_t seed = 1; ///< the seed of random weights
};

/// The weights of one layer front half, in the compiled dtype.
struct Weights {
  std::vector<uint16_t> norm; ///< [hidden]
  std::vector<uint16_t> qkv;  ///< [q + k + v rows, hidden]
  std::vector<uint16_t> bias; ///< [q + k + v rows], empty without a bias
  /// Where they came from, for the report ("random (seed 1)", ...).
  std::string origin;
};

/// A ModelConfig describing the compiled shapes (to read HF-named tensors
/// when no config.json is given).
runtime::ModelConfig
configFromSignature(const runtime::FrontHalfSignature &sig);

/// The layers of a checkpoint: 1 + the largest N of its tensor names
/// "...layers.N.<rest>" (0 if it has none).
int64_t checkpointLayers(const runtime::TensorStore &store);

/// The weights of `model` (signature `sig`) from `source`. `config` is the
/// checkpoint's config.json, if any: its num_hidden_layers bounds the layer.
/// Throws InvalidArgumentError for a layer the checkpoint does not have and
/// FormatError for tensors that do not fit the compiled model.
Weights loadWeights(const WeightSource &source, const runtime::Model &model,
                    const runtime::FrontHalfSignature &sig,
                    const std::optional<runtime::ModelConfig> &config);

/// Seeded random weights of a whole model of `config`'s shapes, laid out as
/// runtime::loadModelWeights returns a checkpoint's: norms uniform in
/// [0.9, 1.1), every matrix uniform in +-sqrt(3 / K) (a fan-in
/// initialisation; the embedding in +-1), biases in +-0.1. Each tensor
/// repeats one random block of at most 2^20 elements, so that the 16 GB of
/// a Llama-3-8B shape fill in seconds: values for timing, not for
/// numerics. Throws UnsupportedError as config.checkWholeModel() does.
runtime::ModelWeights randomModelWeights(const runtime::ModelConfig &config,
                                         runtime::DType dtype, uint64_t seed);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_WEIGHTS_H
