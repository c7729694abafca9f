//===- ModelConfig.cpp - Hugging Face config.json of decoder models -------===//

#include "fusion/runtime/ModelConfig.h"

#include "JsonUtil.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"

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

/// The model types whose attention block is the Llama one (RMSNorm, packed
/// q/k/v, NeoX RoPE); the importer (lib/Import/HuggingFace.cpp) accepts the
/// same ones.
constexpr const char *kSupportedModelTypes[] = {"llama", "mistral", "mixtral",
                                                "qwen2", "qwen2_moe"};

/// The llama3 scaling of the rope object `rope`.
ref::Llama3RopeScaling parseLlama3(const Node &rope) {
  ref::Llama3RopeScaling s;
  s.factor = rope.at("factor").asNumber();
  s.lowFreqFactor = rope.at("low_freq_factor").asNumber();
  s.highFreqFactor = rope.at("high_freq_factor").asNumber();
  s.originalMaxPosition =
      rope.at("original_max_position_embeddings").asInt(1, kMaxInt);
  if (!(s.factor > 0))
    rope.at("factor").fail("must be > 0");
  if (!(s.lowFreqFactor > 0))
    rope.at("low_freq_factor").fail("must be > 0");
  if (!(s.highFreqFactor > s.lowFreqFactor))
    rope.at("high_freq_factor").fail("must be greater than low_freq_factor");
  return s;
}

/// The RoPE fields, as the importer reads them: transformers 5's
/// rope_parameters (which may hold rope_theta) if present, else
/// transformers 4's rope_scaling next to rope_theta; a type of "default"
/// or "llama3" ("rope_type", else "type").
void parseRope(const Node &root, ModelConfig &config) {
  if (auto t = root.find("rope_theta"))
    config.ropeTheta = t->asNumber();
  std::optional<Node> rope = root.find("rope_parameters");
  const bool isParameters = rope.has_value();
  if (!rope)
    rope = root.find("rope_scaling");
  if (!rope)
    return;
  rope->expectObject();
  std::optional<Node> type = rope->find("rope_type");
  if (!type)
    type = rope->find("type");
  if (!type)
    for (auto it = rope->raw().begin(); it != rope->raw().end(); ++it)
      if (it->is_object())
        rope->fail("per-layer-type RoPE parameters (\"" + it.key() +
                   "\", ...) are not supported");
  if (isParameters)
    if (auto theta = rope->find("rope_theta"))
      config.ropeTheta = theta->asNumber();
  std::string kind = type ? type->asString() : "default";
  if (kind == "llama3")
    config.llama3Scaling = parseLlama3(*rope);
  else if (kind != "default")
    throwUnsupported(type->where(), ": rope scaling type \"", kind,
                     "\" is not supported (the kernels and the reference "
                     "implement \"default\" and \"llama3\")");
}

/// rotaryDim from partial_rotary_factor (top level, or inside
/// rope_parameters); the whole head, which must then be even, without one.
void parseRotaryDim(const Node &root, ModelConfig &c) {
  std::optional<Node> f = root.find("partial_rotary_factor");
  if (!f)
    if (auto p = root.find("rope_parameters"); p && p->isObject())
      f = p->find("partial_rotary_factor");
  c.rotaryDim = c.headDim;
  if (!f) {
    if (c.headDim % 2 != 0)
      root.fail("head_dim " + std::to_string(c.headDim) +
                " is odd, and RoPE rotates pairs of elements (without "
                "partial_rotary_factor the whole head is rotated)");
    return;
  }
  double factor = f->asNumber();
  if (!(factor > 0 && factor <= 1))
    f->fail("partial_rotary_factor must be in (0, 1]");
  c.rotaryDim = static_cast<int64_t>(std::floor(c.headDim * factor));
  if (c.rotaryDim < 2 || c.rotaryDim % 2 != 0)
    f->fail("head_dim " + std::to_string(c.headDim) + " * " +
            std::to_string(factor) + " does not give an even rotary_dim");
}

/// model_type: required, one of kSupportedModelTypes.
std::string parseModelType(const Node &root) {
  Node t = root.at("model_type");
  std::string type = t.asString();
  std::string names;
  for (const char *k : kSupportedModelTypes) {
    if (type == k)
      return type;
    names += std::string(names.empty() ? "" : ", ") + k;
  }
  throwUnsupported(t.where(), ": \"", type,
                   "\" is not supported (supported: ", names,
                   "; their attention block is the Llama one the kernels "
                   "implement)");
}

/// The head counts and sizes, with the packed q/k/v weight's element count
/// (rows (heads + 2 kv_heads) * head_dim times hidden_size) in 64 bits.
void parseSizes(const Node &root, ModelConfig &c) {
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
  // Each factor is below 2^31 and heads + 2 kv_heads below 2^33.
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t heads = c.numAttentionHeads + 2 * c.numKeyValueHeads;
  if (heads > max / c.headDim || heads * c.headDim > max / c.hiddenSize)
    root.fail("the q/k/v weight of (" + std::to_string(c.numAttentionHeads) +
              " + 2 * " + std::to_string(c.numKeyValueHeads) + ") * " +
              std::to_string(c.headDim) + " rows of " +
              std::to_string(c.hiddenSize) +
              " elements overflows a 64-bit size");
}

/// attention_bias (always true for qwen2, whose config has no such field),
/// torch_dtype / dtype and the sliding-window warning.
void parseBiasDtypeWindow(const Node &root, ModelConfig &c) {
  // Qwen2Attention always has q/k/v biases (bias=True).
  bool qwen2 = c.modelType == "qwen2" || c.modelType == "qwen2_moe";
  c.attentionBias = qwen2;
  if (auto b = root.find("attention_bias")) {
    c.attentionBias = qwen2 || b->asBool();
    if (qwen2 && !b->asBool())
      c.warnings.push_back("attention_bias false is ignored: " + c.modelType +
                           " always has q/k/v biases");
  }
  std::optional<Node> dtype = root.find("torch_dtype");
  if (!dtype)
    dtype = root.find("dtype");
  if (dtype) {
    std::string d = dtype->asString();
    if (d == "float16")
      c.torchDtype = DType::F16;
    else if (d == "bfloat16")
      c.torchDtype = DType::BF16;
  }
  bool slidingUsed = true;
  if (auto u = root.find("use_sliding_window"))
    slidingUsed = u->asBool();
  if (auto w = root.find("sliding_window"))
    if (w->isInteger() && slidingUsed)
      c.warnings.push_back(
          "sliding_window " + std::to_string(w->asInt()) +
          " is ignored: the reference attends to the whole sequence");
}

} // namespace

ModelConfig ModelConfig::parse(std::string_view text,
                               const std::string &source) {
  json doc = jsonutil::parse(text, source);
  Node root(doc, source);
  root.expectObject();
  ModelConfig c;
  c.modelType = parseModelType(root);
  parseSizes(root, c);
  if (auto n = root.find("num_hidden_layers"))
    c.numHiddenLayers = n->asInt(0, kMaxInt);
  if (auto n = root.find("max_position_embeddings"))
    c.maxPositionEmbeddings = n->asInt(0, std::numeric_limits<int64_t>::max());
  if (auto e = root.find("rms_norm_eps")) {
    c.rmsNormEps = e->asNumber();
    if (!(c.rmsNormEps > 0))
      e->fail("rms_norm_eps must be > 0");
  }
  parseRope(root, c);
  if (!(c.ropeTheta > 1))
    (root.has("rope_parameters") && root.at("rope_parameters").has("rope_theta")
         ? root.at("rope_parameters").at("rope_theta")
         : root.at("rope_theta"))
        .fail("rope_theta must be > 1 (RoPE's frequencies theta^(-2i/d) "
              "decrease only then), got " +
              std::to_string(c.ropeTheta));
  parseRotaryDim(root, c);
  parseBiasDtypeWindow(root, c);
  return c;
}

ModelConfig ModelConfig::load(const std::string &path) {
  return parse(readFile(path, "config", kMaxJsonFileBytes), path);
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
