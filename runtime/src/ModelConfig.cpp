//===- ModelConfig.cpp - Hugging Face config.json of decoder models -------===//
//
// The one reader of config.json (see ModelConfig.h). Field semantics follow
// transformers' LlamaConfig / MistralConfig / MixtralConfig / Qwen2Config /
// Qwen2MoeConfig and the attention modules that read them.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/ModelConfig.h"

#include "JsonUtil.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace fusion::runtime {

using jsonutil::json;

namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

/// `v` as printf's %g writes it (1e-05, 0.5, 500000).
std::string num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

/// `v` as an int64 if it is an integer, or a float with an integral value
/// in range (4096.0: some writers emit floats); else nothing.
std::optional<int64_t> asInteger(const json &v) {
  if (v.is_number_unsigned())
    return v.get<uint64_t>() > static_cast<uint64_t>(kMaxInt64)
               ? std::nullopt
               : std::optional<int64_t>(v.get<int64_t>());
  if (v.is_number_integer())
    return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    // [-2^63, 2^63): the doubles that convert to int64 exactly.
    if (std::isfinite(d) && d == std::trunc(d) && d >= -9223372036854775808.0 &&
        d < 9223372036854775808.0)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

/// Typed access to the fields of one JSON object of a config.json. Errors
/// name the field by its dotted path from the root; a JSON null counts as
/// an absent field (as transformers' None does for head_dim, rope_scaling,
/// ...).
class Fields {
public:
  Fields(const json &object, const std::string &source, std::string prefix)
      : object_(&object), source_(&source), prefix_(std::move(prefix)) {}

  /// The field `key`, or null if it is absent or null.
  const json *find(const std::string &key) const {
    auto it = object_->find(key);
    return it == object_->end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string &key) const { return find(key) != nullptr; }
  std::string path(const std::string &key) const { return prefix_ + key; }

  /// Throws FormatError `<source>: field "<path>": <problem>`.
  [[noreturn]] void fail(const std::string &key,
                         const std::string &problem) const {
    throwFormat(*source_, ": field \"", path(key), "\": ", problem);
  }
  /// Throws UnsupportedError `<source>: field "<path>": <problem>`.
  [[noreturn]] void unsupported(const std::string &key,
                                const std::string &problem) const {
    throwUnsupported(*source_, ": field \"", path(key), "\": ", problem);
  }
  /// Throws FormatError `<source>: missing field "<path>" (required)`.
  [[noreturn]] void missing(const std::string &key) const {
    throwFormat(*source_, ": missing field \"", path(key), "\" (required)");
  }

  /// An integer in [min, max]; `fallback` when absent (else an error).
  int64_t getInt(const std::string &key, std::optional<int64_t> fallback,
                 int64_t min, int64_t max = kMaxInt) const {
    const json *v = find(key);
    if (!v) {
      if (!fallback)
        missing(key);
      return *fallback;
    }
    std::optional<int64_t> i = asInteger(*v);
    if (!i)
      fail(key, "expected an integer, got " + jsonutil::describe(*v));
    if (*i < min || *i > max)
      fail(key, std::to_string(*i) + " is outside [" + std::to_string(min) +
                    ", " + std::to_string(max) + "]");
    return *i;
  }
  /// A finite number; `fallback` when absent (else an error).
  double getNumber(const std::string &key,
                   std::optional<double> fallback) const {
    const json *v = find(key);
    if (!v) {
      if (!fallback)
        missing(key);
      return *fallback;
    }
    if (!v->is_number() || !std::isfinite(v->get<double>()))
      fail(key, "expected a number, got " + jsonutil::describe(*v));
    return v->get<double>();
  }
  /// A string, or nothing when absent.
  std::optional<std::string> getString(const std::string &key) const {
    const json *v = find(key);
    if (!v)
      return std::nullopt;
    if (!v->is_string())
      fail(key, "expected a string, got " + jsonutil::describe(*v));
    return v->get<std::string>();
  }
  /// A boolean, or nothing when absent.
  std::optional<bool> getBool(const std::string &key) const {
    const json *v = find(key);
    if (!v)
      return std::nullopt;
    if (!v->is_boolean())
      fail(key, "expected true or false, got " + jsonutil::describe(*v));
    return v->get<bool>();
  }
  /// The nested object `key`, or nothing when absent.
  std::optional<Fields> getObject(const std::string &key) const {
    const json *v = find(key);
    if (!v)
      return std::nullopt;
    if (!v->is_object())
      fail(key, "expected an object, got " + jsonutil::describe(*v));
    return Fields(*v, *source_, path(key) + ".");
  }
  /// The keys whose values are objects, quoted and comma-separated.
  std::string objectKeys() const {
    std::string keys;
    for (auto it = object_->begin(); it != object_->end(); ++it)
      if (it->is_object())
        keys += (keys.empty() ? "\"" : ", \"") + it.key() + "\"";
    return keys;
  }

private:
  const json *object_;
  const std::string *source_;
  std::string prefix_;
};

/// model_type: required, one of ModelConfig::supportedModelTypes().
void parseModelType(const Fields &root, ModelConfig &c) {
  std::optional<std::string> type = root.getString("model_type");
  if (!type)
    root.missing("model_type");
  const std::vector<std::string> &supported =
      ModelConfig::supportedModelTypes();
  if (std::find(supported.begin(), supported.end(), *type) == supported.end()) {
    std::string names;
    for (const std::string &name : supported)
      names += (names.empty() ? "" : ", ") + name;
    root.unsupported("model_type",
                     "\"" + *type + "\" is not supported (supported: " + names +
                         ")");
  }
  c.modelType = *type;
}

/// Checks that the sizes derived from the shapes fit in 64 bits: the rows
/// of the packed q/k/v weight, (heads + 2 * kv_heads) * head_dim, and its
/// elements, rows * hidden_size. Each factor is below 2^31.
void checkSizes(const Fields &root, const ModelConfig &c) {
  const int64_t heads = c.numAttentionHeads + 2 * c.numKeyValueHeads;
  if (heads > kMaxInt64 / c.headDim)
    root.fail("head_dim",
              "(num_attention_heads " + std::to_string(c.numAttentionHeads) +
                  " + 2 * num_key_value_heads " +
                  std::to_string(c.numKeyValueHeads) + ") * head_dim " +
                  std::to_string(c.headDim) +
                  ", the rows of the q/k/v weight, overflows a 64-bit size");
  const int64_t rows = heads * c.headDim;
  if (rows > kMaxInt64 / c.hiddenSize)
    root.fail("hidden_size", "the q/k/v weight of " + std::to_string(rows) +
                                 " x " + std::to_string(c.hiddenSize) +
                                 " elements overflows a 64-bit size");
}

/// hidden_size, the head counts and head_dim (hidden_size /
/// num_attention_heads when absent).
void parseSizes(const Fields &root, ModelConfig &c) {
  c.hiddenSize = root.getInt("hidden_size", std::nullopt, 1);
  c.numAttentionHeads = root.getInt("num_attention_heads", std::nullopt, 1);
  c.numKeyValueHeads =
      root.getInt("num_key_value_heads", c.numAttentionHeads, 1);
  if (c.numAttentionHeads % c.numKeyValueHeads != 0)
    root.fail("num_key_value_heads",
              "num_attention_heads " + std::to_string(c.numAttentionHeads) +
                  " is not a multiple of num_key_value_heads " +
                  std::to_string(c.numKeyValueHeads));
  if (root.has("head_dim")) {
    c.headDim = root.getInt("head_dim", std::nullopt, 1);
  } else {
    if (c.hiddenSize % c.numAttentionHeads != 0)
      root.fail("head_dim", "absent, and hidden_size " +
                                std::to_string(c.hiddenSize) +
                                " is not a multiple of num_attention_heads " +
                                std::to_string(c.numAttentionHeads));
    c.headDim = c.hiddenSize / c.numAttentionHeads;
  }
  checkSizes(root, c);
  c.numHiddenLayers = root.getInt("num_hidden_layers", 0, 0);
  c.maxPositionEmbeddings =
      root.getInt("max_position_embeddings", 0, 0, kMaxInt64);
}

/// The llama3 scaling of the RoPE object `rope`.
ref::Llama3RopeScaling parseLlama3(const Fields &rope) {
  ref::Llama3RopeScaling s;
  s.factor = rope.getNumber("factor", std::nullopt);
  s.lowFreqFactor = rope.getNumber("low_freq_factor", std::nullopt);
  s.highFreqFactor = rope.getNumber("high_freq_factor", std::nullopt);
  s.originalMaxPosition =
      rope.getInt("original_max_position_embeddings", std::nullopt, 1);
  if (!(s.factor > 0))
    rope.fail("factor", "must be > 0, got " + num(s.factor));
  if (!(s.lowFreqFactor > 0))
    rope.fail("low_freq_factor", "must be > 0, got " + num(s.lowFreqFactor));
  if (!(s.highFreqFactor > s.lowFreqFactor))
    rope.fail("high_freq_factor", "must be greater than low_freq_factor " +
                                      num(s.lowFreqFactor) + ", got " +
                                      num(s.highFreqFactor));
  return s;
}

/// The scaling of the RoPE object `rope` (at `key` of the root): its type
/// ("rope_type", else "type") must be "default" or "llama3", and an object
/// without one must not hold per-layer-type parameters.
void parseRopeType(const Fields &root, const std::string &key,
                   const Fields &rope, ModelConfig &c) {
  std::string typeKey = rope.has("rope_type") ? "rope_type" : "type";
  std::optional<std::string> type = rope.getString(typeKey);
  if (!type && !rope.objectKeys().empty())
    root.unsupported(key, "per-layer-type RoPE parameters (" +
                              rope.objectKeys() + ") are not supported");
  std::string kind = type.value_or("default");
  if (kind == "llama3")
    c.llama3Scaling = parseLlama3(rope);
  else if (kind != "default")
    rope.unsupported(typeKey, "RoPE type \"" + kind +
                                  "\" is not supported (fusion.rope "
                                  "implements \"default\" and \"llama3\")");
}

/// The RoPE fields: transformers 5's `rope_parameters` (whose rope_theta
/// wins over the top-level one) if present, else transformers 4's
/// `rope_scaling` next to `rope_theta`. rope_theta must be > 1: RoPE's
/// frequencies theta^(-2i/d) decrease only then.
void parseRope(const Fields &root, ModelConfig &c) {
  c.ropeTheta = root.getNumber("rope_theta", 10000.0);
  std::optional<Fields> thetaFrom = root;
  const std::string key =
      root.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (std::optional<Fields> rope = root.getObject(key)) {
    parseRopeType(root, key, *rope, c);
    if (key == "rope_parameters" && rope->has("rope_theta")) {
      c.ropeTheta = rope->getNumber("rope_theta", std::nullopt);
      thetaFrom = rope;
    }
  }
  if (!(c.ropeTheta > 1))
    thetaFrom->fail("rope_theta", "must be > 1, got " + num(c.ropeTheta));
}

/// rotaryDim = floor(head_dim * partial_rotary_factor). transformers 5
/// reads the factor from rope_parameters (moving a top-level one there when
/// rope_parameters has none), so rope_parameters' wins. Without one the
/// whole head, which must then be even, is rotated.
void parseRotaryDim(const Fields &root, ModelConfig &c) {
  const std::string key = "partial_rotary_factor";
  std::optional<Fields> from = root.getObject("rope_parameters");
  if (!from || !from->has(key))
    from = root.has(key) ? std::optional<Fields>(root) : std::nullopt;
  c.rotaryDim = c.headDim;
  if (!from) {
    if (c.headDim % 2 != 0)
      root.fail("head_dim",
                std::to_string(c.headDim) +
                    (root.has("head_dim")
                         ? ""
                         : " (hidden_size " + std::to_string(c.hiddenSize) +
                               " / num_attention_heads " +
                               std::to_string(c.numAttentionHeads) + ")") +
                    " is odd, and RoPE rotates pairs of elements (without "
                    "partial_rotary_factor the whole head is rotated)");
    return;
  }
  double factor = from->getNumber(key, std::nullopt);
  if (!(factor > 0 && factor <= 1))
    from->fail(key, "must be in (0, 1], got " + num(factor));
  c.rotaryDim = static_cast<int64_t>(std::floor(c.headDim * factor));
  if (c.rotaryDim < 2 || c.rotaryDim % 2 != 0)
    from->fail(key, "head_dim " + std::to_string(c.headDim) + " * " +
                        num(factor) +
                        " does not give an even rotary "
                        "dimension");
}

/// The packed q/k/v bias, as each model's attention module decides it:
/// LlamaAttention reads attention_bias (default false); Qwen2Attention
/// always has biases and MistralAttention / MixtralAttention never;
/// Qwen2MoeAttention reads qkv_bias (default true). An attention_bias the
/// model does not read, and that differs, gives a warning.
void parseBias(const Fields &root, ModelConfig &c) {
  std::optional<bool> attentionBias = root.getBool("attention_bias");
  const std::string &type = c.modelType;
  if (type == "llama") {
    c.attentionBias = attentionBias.value_or(false);
    return;
  }
  std::string reason;
  if (type == "qwen2_moe") {
    c.attentionBias = root.getBool("qkv_bias").value_or(true);
    reason = "qwen2_moe reads qkv_bias (default true)";
  } else {
    c.attentionBias = type == "qwen2";
    reason = type + (c.attentionBias ? " always has" : " never has") +
             " q/k/v biases";
  }
  if (attentionBias && *attentionBias != c.attentionBias)
    c.warnings.push_back(std::string("attention_bias ") +
                         (*attentionBias ? "true" : "false") +
                         " is ignored: " + reason);
}

/// torch_dtype (transformers 4), else dtype (transformers 5).
void parseDtype(const Fields &root, ModelConfig &c) {
  for (const char *key : {"torch_dtype", "dtype"}) {
    std::optional<std::string> d = root.getString(key);
    if (!d)
      continue;
    c.dtypeField = key;
    c.dtypeName = *d;
    if (*d == "float16")
      c.torchDtype = DType::F16;
    else if (*d == "bfloat16")
      c.torchDtype = DType::BF16;
    return;
  }
}

/// A warning for a sliding window in use (use_sliding_window, default
/// true): decode attention attends to the whole sequence.
void parseSlidingWindow(const Fields &root, ModelConfig &c) {
  std::optional<bool> used = root.getBool("use_sliding_window");
  const json *w = root.find("sliding_window");
  if (!w || !used.value_or(true))
    return;
  if (std::optional<int64_t> window = asInteger(*w)) {
    std::string n = std::to_string(*window);
    c.warnings.push_back(
        "sliding_window " + n +
        " is ignored: fusion.decode_attention attends to the "
        "whole sequence (exact only for sequences of at most " +
        n + " tokens)");
  }
}

/// The fields of the rest of the decoder (MLP, vocabulary, LM head).
void parseDecoderBody(const Fields &root, ModelConfig &c) {
  c.intermediateSize = root.getInt("intermediate_size", 0, 1);
  c.vocabSize = root.getInt("vocab_size", 0, 1);
  c.tieWordEmbeddings = root.getBool("tie_word_embeddings").value_or(false);
  c.hiddenAct = root.getString("hidden_act").value_or("silu");
  c.mlpBias = root.getBool("mlp_bias").value_or(false);
}

} // namespace

const std::vector<std::string> &ModelConfig::supportedModelTypes() {
  static const std::vector<std::string> types = {"llama", "mistral", "mixtral",
                                                 "qwen2", "qwen2_moe"};
  return types;
}

ModelConfig ModelConfig::parse(std::string_view text,
                               const std::string &source) {
  json doc = jsonutil::parse(text, source);
  if (!doc.is_object())
    throwFormat(source, ": expected a JSON object at the top level");
  Fields root(doc, source, "");
  ModelConfig c;
  c.source = source;
  parseModelType(root, c);
  parseSizes(root, c);
  c.rmsNormEps = root.getNumber("rms_norm_eps", 1e-6);
  if (!(c.rmsNormEps > 0))
    root.fail("rms_norm_eps", "must be > 0, got " + num(c.rmsNormEps));
  parseRope(root, c);
  parseRotaryDim(root, c);
  parseBias(root, c);
  parseDtype(root, c);
  parseSlidingWindow(root, c);
  parseDecoderBody(root, c);
  return c;
}

ModelConfigResult ModelConfig::tryParse(std::string_view text,
                                        const std::string &source) noexcept {
  ModelConfigResult result;
  try {
    result.config = parse(text, source);
  } catch (const UnsupportedError &e) {
    result.error = e.what();
    result.unsupported = true;
  } catch (const std::exception &e) {
    result.error = e.what();
  }
  return result;
}

ModelConfig ModelConfig::load(const std::string &path) {
  return parse(readFile(path, "config", kMaxJsonFileBytes), path);
}

std::string ModelConfig::wholeModelProblem() const {
  auto problem = [&](const std::string &field, const std::string &what) {
    return detail::concat(source, ": field \"", field, "\": ", what,
                          " (the whole-model runtime implements Llama-style "
                          "decoders with a SwiGLU MLP)");
  };
  if (modelType == "mixtral" || modelType == "qwen2_moe")
    return problem("model_type", modelType + " has a mixture-of-experts MLP");
  if (hiddenAct != "silu")
    return problem("hidden_act", "\"" + hiddenAct + "\" is not silu");
  if (mlpBias)
    return problem("mlp_bias", "MLP biases are not supported");
  if (intermediateSize == 0)
    return problem("intermediate_size", "missing");
  if (vocabSize == 0)
    return problem("vocab_size", "missing");
  if (numHiddenLayers == 0)
    return problem("num_hidden_layers", "missing or 0");
  return {};
}

void ModelConfig::checkWholeModel() const {
  if (std::string problem = wholeModelProblem(); !problem.empty())
    throw UnsupportedError(problem);
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
