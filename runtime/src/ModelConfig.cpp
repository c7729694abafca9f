//===- ModelConfig.cpp - Hugging Face config.json of decoder models -------===//

#include "fusion/runtime/ModelConfig.h"

#include "JsonUtil.h"
#include "fusion/runtime/Error.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace fusion::runtime {

using jsonutil::json;
using jsonutil::Node;

namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

/// Reads the rope_type / type of a rope_scaling or rope_parameters object
/// and fills `config` (theta only from rope_parameters).
void parseRope(const Node &rope, ModelConfig &config, bool isParameters) {
  rope.expectObject();
  std::string type = "default";
  if (auto t = rope.find("rope_type"))
    type = t->asString();
  else if (auto t2 = rope.find("type"))
    type = t2->asString();
  if (isParameters)
    if (auto theta = rope.find("rope_theta"))
      config.ropeTheta = theta->asNumber();
  if (type == "default")
    return;
  if (type == "llama3") {
    ref::Llama3RopeScaling s;
    s.factor = rope.at("factor").asNumber();
    s.lowFreqFactor = rope.at("low_freq_factor").asNumber();
    s.highFreqFactor = rope.at("high_freq_factor").asNumber();
    s.originalMaxPosition =
        rope.at("original_max_position_embeddings").asInt(1, kMaxInt);
    if (!(s.factor > 0) || !(s.lowFreqFactor > 0) ||
        !(s.highFreqFactor > s.lowFreqFactor))
      rope.fail("llama3 scaling needs factor > 0 and high_freq_factor > "
                "low_freq_factor > 0");
    config.llama3Scaling = s;
    return;
  }
  throwUnsupported(rope.where(), ": rope scaling type \"", type,
                   "\" is not supported (the reference implements \"default\" "
                   "and \"llama3\")");
}

} // namespace

ModelConfig ModelConfig::parse(std::string_view text,
                               const std::string &source) {
  json doc = jsonutil::parse(text, source);
  Node root(doc, source);
  root.expectObject();
  ModelConfig c;
  if (auto t = root.find("model_type"))
    c.modelType = t->asString();
  c.hiddenSize = root.at("hidden_size").asInt(1, kMaxInt);
  c.numAttentionHeads = root.at("num_attention_heads").asInt(1, kMaxInt);
  c.numKeyValueHeads = c.numAttentionHeads;
  if (auto n = root.find("num_key_value_heads"))
    c.numKeyValueHeads = n->asInt(1, kMaxInt);
  if (c.numAttentionHeads % c.numKeyValueHeads != 0)
    root.at("num_key_value_heads")
        .fail("num_attention_heads " + std::to_string(c.numAttentionHeads) +
              " is not a multiple of num_key_value_heads " +
              std::to_string(c.numKeyValueHeads));
  if (auto d = root.find("head_dim")) {
    c.headDim = d->asInt(1, kMaxInt);
  } else {
    if (c.hiddenSize % c.numAttentionHeads != 0)
      root.fail("no head_dim, and hidden_size " + std::to_string(c.hiddenSize) +
                " is not a multiple of num_attention_heads " +
                std::to_string(c.numAttentionHeads));
    c.headDim = c.hiddenSize / c.numAttentionHeads;
  }
  if (auto n = root.find("num_hidden_layers"))
    c.numHiddenLayers = n->asInt(0, kMaxInt);
  if (auto n = root.find("max_position_embeddings"))
    c.maxPositionEmbeddings = n->asInt(0, std::numeric_limits<int64_t>::max());
  if (auto e = root.find("rms_norm_eps")) {
    c.rmsNormEps = e->asNumber();
    if (!(c.rmsNormEps >= 0) || !std::isfinite(c.rmsNormEps))
      e->fail("rms_norm_eps must be a finite number >= 0");
  }
  if (auto t = root.find("rope_theta"))
    c.ropeTheta = t->asNumber();
  if (auto s = root.find("rope_scaling"))
    parseRope(*s, c, /*isParameters=*/false);
  if (auto p = root.find("rope_parameters")) {
    c.llama3Scaling.reset();
    parseRope(*p, c, /*isParameters=*/true);
  }
  if (!(c.ropeTheta > 0) || !std::isfinite(c.ropeTheta))
    root.fail("rope_theta must be a finite number > 0, got " +
              std::to_string(c.ropeTheta));
  c.rotaryDim = c.headDim;
  if (auto f = root.find("partial_rotary_factor")) {
    double factor = f->asNumber();
    if (!(factor > 0 && factor <= 1))
      f->fail("partial_rotary_factor must be in (0, 1]");
    c.rotaryDim = static_cast<int64_t>(std::floor(c.headDim * factor));
    if (c.rotaryDim < 2 || c.rotaryDim % 2 != 0)
      f->fail("head_dim " + std::to_string(c.headDim) + " * " +
              std::to_string(factor) + " does not give an even rotary_dim");
  }
  // Qwen2Attention always has q/k/v biases; its config has no field for it.
  bool qwen2 = c.modelType == "qwen2" || c.modelType == "qwen2_moe";
  c.attentionBias = qwen2;
  if (auto b = root.find("attention_bias"))
    c.attentionBias = b->asBool();
  std::optional<Node> dtype = root.find("torch_dtype");
  if (!dtype)
    dtype = root.find("dtype");
  if (dtype && dtype->isString()) {
    std::string d = dtype->asString();
    if (d == "float16")
      c.torchDtype = DType::F16;
    else if (d == "bfloat16")
      c.torchDtype = DType::BF16;
  }

  static const char *const known[] = {"llama", "mistral", "mixtral", "qwen2",
                                      "qwen2_moe"};
  bool isKnown = false;
  for (const char *k : known)
    isKnown |= c.modelType == k;
  if (!isKnown)
    c.warnings.push_back(
        "model_type \"" + c.modelType +
        "\" is not one of llama, mistral, mixtral, qwen2, qwen2_moe; assuming "
        "a Llama-style attention block (RMSNorm, NeoX RoPE)");
  bool slidingUsed = true;
  if (auto u = root.find("use_sliding_window"))
    slidingUsed = u->isBool() && u->asBool();
  if (auto w = root.find("sliding_window"))
    if (w->isInteger() && slidingUsed)
      c.warnings.push_back(
          "sliding_window " + std::to_string(w->asInt()) +
          " is ignored: the reference attends to the whole sequence");
  return c;
}

ModelConfig ModelConfig::load(const std::string &path) {
  std::ifstream is(path, std::ios::binary);
  if (!is)
    throw Error("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << is.rdbuf();
  return parse(ss.str(), path);
}

ref::FrontHalfConfig ModelConfig::frontHalf(DType dtype) const {
  ref::FrontHalfConfig f;
  f.dtype = dtype;
  f.hidden = hiddenSize;
  f.dims = dims();
  f.norm = ref::NormKind::RMSNorm;
  f.normOptions.eps = rmsNormEps;
  f.rope.pairing = ref::RopePairing::NeoX;
  f.rope.theta = ropeTheta;
  f.rope.rotaryDim = rotaryDim == headDim ? 0 : rotaryDim;
  f.rope.llama3 = llama3Scaling;
  return f;
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << (modelType.empty() ? "model" : modelType) << ": hidden " << hiddenSize
     << ", heads " << numAttentionHeads << "/" << numKeyValueHeads
     << ", head_dim " << headDim;
  if (rotaryDim != headDim)
    os << " (rotary_dim " << rotaryDim << ")";
  os << ", eps " << rmsNormEps << ", rope_theta " << ropeTheta;
  if (llama3Scaling)
    os << " (llama3 x" << llama3Scaling->factor << ")";
  os << (attentionBias ? ", qkv bias" : ", no bias");
  return os.str();
}

} // namespace fusion::runtime
