//===- Weights.cpp - the weights of the layer fusion-run checks -----------===//

#include "fusion/tooling/Weights.h"

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Error.h"
#include "fusion/tooling/StepInputs.h"

#include <algorithm>
#include <cmath>

namespace fusion::tooling {

using namespace fusion::runtime;

ModelConfig configFromSignature(const FrontHalfSignature &sig) {
  ModelConfig c;
  c.modelType = "compiled";
  c.hiddenSize = sig.hidden;
  c.numAttentionHeads = sig.dims.numQHeads;
  c.numKeyValueHeads = sig.dims.numKVHeads;
  c.headDim = sig.dims.headDim;
  c.rotaryDim = sig.dims.headDim;
  c.attentionBias = sig.qkvBias >= 0;
  return c;
}

int64_t checkpointLayers(const TensorStore &store) {
  int64_t layers = 0;
  for (const std::string &name : store.names()) {
    size_t p = name.find("layers.");
    if (p == std::string::npos || (p > 0 && name[p - 1] != '.'))
      continue;
    size_t end = name.find_first_not_of("0123456789", p + 7);
    if (end == p + 7 || end == std::string::npos || name[end] != '.' ||
        end - (p + 7) > 9)
      continue;
    layers = std::max<int64_t>(layers, std::stoll(name.substr(p + 7)) + 1);
  }
  return layers;
}

namespace {

/// Reads one packed tensor of a plain safetensors file by any of `names`.
std::optional<std::vector<uint16_t>>
readPacked(const TensorStore &store, const std::vector<std::string> &names,
           const std::vector<int64_t> &shape, DType dtype) {
  for (const std::string &n : names) {
    const TensorInfo *t = store.find(n);
    if (!t)
      continue;
    if (t->shape != shape) {
      std::string s = "[";
      for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
      throwFormat(store.path(), ": ", n, " is ", t->describe(), ", expected ",
                  s, "]");
    }
    std::vector<uint8_t> bytes = store.read(n);
    return convertTo16(t->dtype, bytes.data(), t->numElements(), dtype,
                       store.path() + ": " + n);
  }
  return std::nullopt;
}

/// Throws InvalidArgumentError if --layer is not a layer of the checkpoint:
/// config.json's num_hidden_layers, or the layers its tensor names hold.
void checkLayer(const WeightSource &src, const TensorStore &store,
                const std::optional<ModelConfig> &config) {
  if (config && config->numHiddenLayers > 0 &&
      src.layer >= config->numHiddenLayers)
    throwInvalidArgument("--layer ", src.layer, ": ", src.path,
                         " has layers 0..", config->numHiddenLayers - 1,
                         " (num_hidden_layers ", config->numHiddenLayers,
                         " in its config.json)");
  int64_t layers = checkpointLayers(store);
  if (layers > 0 && src.layer >= layers)
    throwInvalidArgument("--layer ", src.layer, ": ", src.path,
                         " has layers 0..", layers - 1,
                         " (from its tensor names)");
}

/// Seeded random weights: norm in [0.5, 1.5), q/k/v uniform with the
/// variance of a fan-in initialisation, bias in [-0.5, 0.5).
Weights randomWeights(uint64_t seed, const FrontHalfSignature &sig) {
  const int64_t H = sig.hidden, R = sig.dims.qkvRows();
  Weights w;
  Random rng(seed ^ 0x57E16475ull);
  w.norm = rng.tensor(sig.dtype, H, 0.5, 1.5);
  double a = std::sqrt(3.0 / static_cast<double>(H));
  w.qkv = rng.tensor(sig.dtype, R * H, -a, a);
  if (sig.qkvBias >= 0)
    w.bias = rng.tensor(sig.dtype, R, -0.5, 0.5);
  w.origin = "random (seed " + std::to_string(seed) + ")";
  return w;
}

/// The layer's weights from Hugging Face names, packed into cat(q, k, v).
Weights hfWeights(const WeightSource &src, const TensorStore &store,
                  const FrontHalfSignature &sig,
                  const std::optional<ModelConfig> &config) {
  const int64_t H = sig.hidden, R = sig.dims.qkvRows();
  ModelConfig c = config ? *config : configFromSignature(sig);
  FrontHalfWeights f = loadFrontHalfWeights(store, c, src.layer, sig.dtype);
  if (f.hidden != H || f.dims.qkvRows() != R)
    throwFormat(src.path, ": layer ", src.layer, " has hidden ", f.hidden,
                " and ", f.dims.qkvRows(),
                " qkv rows; the compiled model "
                "has ",
                H, " and ", R);
  Weights w;
  w.norm = std::move(f.normWeight);
  w.qkv = std::move(f.qkvWeight);
  w.bias = std::move(f.qkvBias);
  if (sig.qkvBias >= 0 && w.bias.empty())
    throwFormat(src.path, ": the compiled model has a qkv bias but the "
                          "checkpoint config has attention_bias false");
  if (sig.qkvBias < 0 && !w.bias.empty())
    throwFormat(src.path, ": the checkpoint has q/k/v biases but the "
                          "compiled model takes none");
  w.origin = src.path + " layer " + std::to_string(src.layer) +
             " (Hugging Face names, packed cat(q, k, v))";
  return w;
}

/// The weights from packed names (norm_weight, qkv_weight, qkv_bias, or the
/// manifest's argument names).
Weights packedWeights(const WeightSource &src, const TensorStore &store,
                      const Model &model, const FrontHalfSignature &sig) {
  const int64_t H = sig.hidden, R = sig.dims.qkvRows();
  auto names = [&](const char *packed, int arg) {
    std::vector<std::string> n = {packed};
    if (arg >= 0)
      n.push_back(model.arguments()[arg].name);
    return n;
  };
  auto norm =
      readPacked(store, names("norm_weight", sig.normWeight), {H}, sig.dtype);
  auto qkv =
      readPacked(store, names("qkv_weight", sig.qkvWeight), {R, H}, sig.dtype);
  if (!norm || !qkv)
    throwFormat(src.path, ": neither ", hfLayerNames(src.layer).qWeight,
                " (Hugging Face names) nor ",
                "norm_weight / qkv_weight (packed names) found");
  Weights w;
  w.norm = std::move(*norm);
  w.qkv = std::move(*qkv);
  if (sig.qkvBias >= 0) {
    auto bias =
        readPacked(store, names("qkv_bias", sig.qkvBias), {R}, sig.dtype);
    if (!bias)
      throwFormat(src.path, ": the compiled model has a qkv bias but the "
                            "file has no qkv_bias");
    w.bias = std::move(*bias);
  }
  w.origin = src.path + " (packed names)";
  return w;
}

} // namespace

Weights loadWeights(const WeightSource &src, const Model &model,
                    const FrontHalfSignature &sig,
                    const std::optional<ModelConfig> &config) {
  if (src.path.empty())
    return randomWeights(src.seed, sig);
  TensorStore store = TensorStore::open(src.path);
  checkLayer(src, store, config);
  bool hf =
      store.find(hfLayerNames(src.layer).qWeight) ||
      store.find(hfLayerNames(src.layer, "layers.").qWeight) ||
      store.find(
          hfLayerNames(src.layer, "model.language_model.layers.").qWeight);
  if (hf)
    return hfWeights(src, store, sig, config);
  return packedWeights(src, store, model, sig);
}

/// `n` elements: one random block of at most 2^20, repeated.
static std::vector<uint16_t> repeatedBlock(Random &rng, runtime::DType dtype,
                                           int64_t n, double bound,
                                           double centre = 0.0) {
  const int64_t block = std::min<int64_t>(n, int64_t{1} << 20);
  std::vector<uint16_t> out =
      rng.tensor(dtype, block, centre - bound, centre + bound);
  out.resize(static_cast<size_t>(n));
  for (int64_t i = block; i < n; i += block)
    std::copy_n(out.begin(), std::min(block, n - i), out.begin() + i);
  return out;
}

runtime::ModelWeights randomModelWeights(const runtime::ModelConfig &config,
                                         runtime::DType dtype, uint64_t seed) {
  config.checkWholeModel();
  const int64_t H = config.hiddenSize, I = config.intermediateSize;
  const int64_t V = config.vocabSize;
  const int64_t qWidth = config.numAttentionHeads * config.headDim;
  const int64_t rows = config.dims().qkvRows();
  auto fanIn = [](int64_t k) {
    return std::sqrt(3.0 / static_cast<double>(k));
  };
  Random rng(seed ^ 0x30DE1ull);
  runtime::ModelWeights w;
  w.dtype = dtype;
  w.embedTokens = repeatedBlock(rng, dtype, V * H, 1.0);
  for (int64_t l = 0; l < config.numHiddenLayers; ++l) {
    runtime::DecoderLayerWeights layer;
    layer.front.dtype = dtype;
    layer.front.hidden = H;
    layer.front.dims = config.dims();
    layer.front.normWeight = repeatedBlock(rng, dtype, H, 0.1, 1.0);
    layer.front.qkvWeight = repeatedBlock(rng, dtype, rows * H, fanIn(H));
    if (config.attentionBias)
      layer.front.qkvBias = repeatedBlock(rng, dtype, rows, 0.1);
    layer.oProj = repeatedBlock(rng, dtype, H * qWidth, fanIn(qWidth));
    layer.postNorm = repeatedBlock(rng, dtype, H, 0.1, 1.0);
    layer.gateUp = repeatedBlock(rng, dtype, 2 * I * H, fanIn(H));
    layer.down = repeatedBlock(rng, dtype, H * I, fanIn(I));
    w.layers.push_back(std::move(layer));
  }
  w.finalNorm = repeatedBlock(rng, dtype, H, 0.1, 1.0);
  if (!config.tieWordEmbeddings)
    w.lmHead = repeatedBlock(rng, dtype, V * H, fanIn(H));
  return w;
}

} // namespace fusion::tooling
