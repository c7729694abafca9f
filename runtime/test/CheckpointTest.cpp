//===- CheckpointTest.cpp - HF tensor names, packing, conversion ----------===//

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Error.h"

#include "TestUtil.h"

#include <cmath>
#include <map>

using namespace fusion::runtime;
using namespace fusion::runtime::test;

namespace {

/// A small Qwen2-style model: hidden 8, 2 query heads, 1 KV head, head_dim
/// 4, biases. Every tensor holds distinct bf16 values so that packing
/// mistakes show.
struct TinyCheckpoint {
  static constexpr int64_t H = 8, Hq = 2, Hkv = 1, D = 4;
  std::map<std::string, std::vector<uint16_t>> tensors;
  std::map<std::string, std::vector<int64_t>> shapes;

  TinyCheckpoint(int layers = 2, const std::string &prefix = "model.layers.") {
    int seed = 1;
    auto make = [&](const std::string &name, std::vector<int64_t> shape) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      std::vector<uint16_t> v(n);
      for (int64_t i = 0; i < n; ++i)
        v[i] = doubleToBF16((seed * 1000 + i) / 1024.0);
      ++seed;
      tensors[name] = v;
      shapes[name] = shape;
    };
    for (int l = 0; l < layers; ++l) {
      HFLayerNames n = hfLayerNames(l, prefix);
      make(n.inputLayernorm, {H});
      make(n.qWeight, {Hq * D, H});
      make(n.kWeight, {Hkv * D, H});
      make(n.vWeight, {Hkv * D, H});
      make(n.qBias, {Hq * D});
      make(n.kBias, {Hkv * D});
      make(n.vBias, {Hkv * D});
    }
  }
  std::vector<TensorRef> refs(const std::string &only = "") const {
    std::vector<TensorRef> out;
    for (const auto &[name, data] : tensors)
      if (only.empty() || name.find(only) != std::string::npos)
        out.push_back({name, "BF16", shapes.at(name), data.data()});
    return out;
  }
  static std::string config() {
    return R"({"model_type": "qwen2", "hidden_size": 8,
               "num_attention_heads": 2, "num_key_value_heads": 1,
               "rms_norm_eps": 1e-6, "rope_theta": 1000000.0})";
  }
};

std::vector<uint16_t> toF16(const std::vector<uint16_t> &bf16) {
  std::vector<uint16_t> out;
  for (uint16_t b : bf16)
    out.push_back(floatToF16(bf16ToFloat(b)));
  return out;
}

} // namespace

TEST(Checkpoint, HFLayerNames) {
  HFLayerNames n = hfLayerNames(7);
  EXPECT_EQ(n.inputLayernorm, "model.layers.7.input_layernorm.weight");
  EXPECT_EQ(n.qWeight, "model.layers.7.self_attn.q_proj.weight");
  EXPECT_EQ(n.kWeight, "model.layers.7.self_attn.k_proj.weight");
  EXPECT_EQ(n.vWeight, "model.layers.7.self_attn.v_proj.weight");
  EXPECT_EQ(n.qBias, "model.layers.7.self_attn.q_proj.bias");
  EXPECT_EQ(n.vBias, "model.layers.7.self_attn.v_proj.bias");
  EXPECT_EQ(hfLayerNames(0, "layers.").kWeight,
            "layers.0.self_attn.k_proj.weight");
}

TEST(Checkpoint, PackQKVConcatenatesAlongRows) {
  ref::AttentionDims dims{2, 1, 2};
  std::vector<uint16_t> q = {1, 2, 3, 4, 5, 6, 7, 8}; // [4, 2]
  std::vector<uint16_t> k = {9, 10, 11, 12};          // [2, 2]
  std::vector<uint16_t> v = {13, 14, 15, 16};
  std::vector<uint16_t> p = packQKV(dims, 2, q, k, v);
  std::vector<uint16_t> expected;
  for (uint16_t i = 1; i <= 16; ++i)
    expected.push_back(i);
  EXPECT_EQ(p, expected);
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, packQKV(dims, 2, q, k, {1, 2}));
  EXPECT_CONTAINS(msg, "expected 8/4/4");
}

TEST(Checkpoint, LoadsAndPacksALayerFromADirectory) {
  TempDir dir;
  TinyCheckpoint ck;
  writeText(dir.file("config.json"), TinyCheckpoint::config());
  writeSafetensors(dir.file("model.safetensors"), ck.refs());
  Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_TRUE(c.config.attentionBias);
  EXPECT_EQ(c.tensors.names().size(), 14u);

  for (DType dtype : {DType::BF16, DType::F16}) {
    FrontHalfWeights w = loadFrontHalfWeights(c.tensors, c.config, 1, dtype);
    HFLayerNames n = hfLayerNames(1);
    auto conv = [&](const std::string &name) {
      return dtype == DType::BF16 ? ck.tensors.at(name)
                                  : toF16(ck.tensors.at(name));
    };
    EXPECT_EQ(w.dtype, dtype);
    EXPECT_EQ(w.hidden, 8);
    EXPECT_EQ(w.dims.qkvRows(), 16);
    EXPECT_EQ(w.normWeight, conv(n.inputLayernorm));
    std::vector<uint16_t> qkv = conv(n.qWeight);
    for (const std::string &name : {n.kWeight, n.vWeight}) {
      auto part = conv(name);
      qkv.insert(qkv.end(), part.begin(), part.end());
    }
    EXPECT_EQ(w.qkvWeight, qkv);
    ASSERT_EQ(w.qkvWeight.size(), 16u * 8u);
    // Row 8 (the first K row) is k_proj.weight row 0.
    EXPECT_EQ(w.qkvWeight[8 * 8], conv(n.kWeight)[0]);
    std::vector<uint16_t> bias = conv(n.qBias);
    for (const std::string &name : {n.kBias, n.vBias}) {
      auto part = conv(name);
      bias.insert(bias.end(), part.begin(), part.end());
    }
    EXPECT_EQ(w.qkvBias, bias);
  }
}

TEST(Checkpoint, ShardedIndexAndOtherPrefixes) {
  TempDir dir;
  TinyCheckpoint ck(2, "layers.");
  writeSafetensors(dir.file("model-00001-of-00002.safetensors"),
                   ck.refs("layers.0."));
  writeSafetensors(dir.file("model-00002-of-00002.safetensors"),
                   ck.refs("layers.1."));
  std::string index = R"({"metadata": {"total_size": 0}, "weight_map": {)";
  bool first = true;
  for (const auto &[name, data] : ck.tensors) {
    index += std::string(first ? "" : ",") + "\"" + name + "\": \"" +
             (name.rfind("layers.0.", 0) == 0 ? "model-00001-of-00002"
                                              : "model-00002-of-00002") +
             ".safetensors\"";
    first = false;
  }
  writeText(dir.file("model.safetensors.index.json"), index + "}}");
  writeText(dir.file("config.json"), TinyCheckpoint::config());
  Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.tensors.names().size(), 14u);
  FrontHalfWeights w0 =
      loadFrontHalfWeights(c.tensors, c.config, 0, DType::BF16);
  FrontHalfWeights w1 =
      loadFrontHalfWeights(c.tensors, c.config, 1, DType::BF16);
  EXPECT_EQ(w0.normWeight, ck.tensors.at("layers.0.input_layernorm.weight"));
  EXPECT_EQ(w1.normWeight, ck.tensors.at("layers.1.input_layernorm.weight"));

  // An index pointing at a file without the tensor.
  writeText(dir.file("bad.index.json"),
            R"({"weight_map": {"layers.1.input_layernorm.weight":
                "model-00001-of-00002.safetensors"}})");
  std::string msg = EXPECT_THROW_MSG(
      FormatError, TensorStore::open(dir.file("bad.index.json")));
  EXPECT_CONTAINS(msg, "which has no such tensor");

  // Index entries that leave the checkpoint directory.
  for (const char *file : {"/etc/passwd", "../model-00001-of-00002.safetensors",
                           "sub/../../x.safetensors", ""}) {
    SCOPED_TRACE(file);
    writeText(dir.file("escape.index.json"),
              std::string(R"({"weight_map": {"w": ")") + file + "\"}}");
    msg = EXPECT_THROW_MSG(FormatError,
                           TensorStore::open(dir.file("escape.index.json")));
    EXPECT_CONTAINS(msg, dir.file("escape.index.json") +
                             ": weight_map.w: tensor \"w\" is in \"" + file +
                             "\": shard files must be relative paths inside "
                             "the checkpoint directory");
  }
}

TEST(Checkpoint, ShapeAndNameErrors) {
  TinyCheckpoint ck(1);
  TensorStore store = TensorStore::fromFile(
      SafetensorsFile::fromBytes(encodeSafetensors(ck.refs()), "ck"));
  ModelConfig config = ModelConfig::parse(TinyCheckpoint::config());
  std::string msg;
  msg = EXPECT_THROW_MSG(FormatError,
                         loadFrontHalfWeights(store, config, 3, DType::F16));
  EXPECT_CONTAINS(msg, "ck: no layer 3");
  EXPECT_CONTAINS(msg, "model.layers.3.self_attn.q_proj.weight");

  // A config with 2 KV heads does not match k_proj [4, 8].
  ModelConfig twoKV = ModelConfig::parse(
      R"({"model_type": "qwen2", "hidden_size": 8, "num_attention_heads": 2,
          "num_key_value_heads": 2, "head_dim": 4})");
  msg = EXPECT_THROW_MSG(FormatError,
                         loadFrontHalfWeights(store, twoKV, 0, DType::F16));
  EXPECT_CONTAINS(msg, "model.layers.0.self_attn.k_proj.weight is BF16[4, 8], "
                       "expected [8, 8] for 2 KV heads of 4 and hidden 8");

  // Bias expected but absent.
  TensorStore noBias = TensorStore::fromFile(SafetensorsFile::fromBytes(
      encodeSafetensors(ck.refs("weight")), "nobias"));
  msg = EXPECT_THROW_MSG(FormatError,
                         loadFrontHalfWeights(noBias, config, 0, DType::F16));
  EXPECT_CONTAINS(msg, "nobias: no tensor \"model.layers.0.self_attn.q_proj."
                       "bias\"");
  // ... and fine without attention_bias.
  config.attentionBias = false;
  EXPECT_TRUE(
      loadFrontHalfWeights(noBias, config, 0, DType::F16).qkvBias.empty());
}

TEST(Checkpoint, WholeModelWeights) {
  // The tiny model plus its MLP (I = 3), embedding and final norm; untied.
  TinyCheckpoint ck(2);
  const int64_t H = TinyCheckpoint::H, I = 3, V = 5;
  auto add = [&](const std::string &name, std::vector<int64_t> shape,
                 double base) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<uint16_t> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = doubleToBF16(base + i / 64.0);
    ck.tensors[name] = v;
    ck.shapes[name] = shape;
  };
  for (int l = 0; l < 2; ++l) {
    HFLayerNames n = hfLayerNames(l);
    add(n.oWeight, {H, TinyCheckpoint::Hq * TinyCheckpoint::D}, 10 * l + 1);
    add(n.postAttentionLayernorm, {H}, 10 * l + 2);
    add(n.gateWeight, {I, H}, 10 * l + 3);
    add(n.upWeight, {I, H}, 10 * l + 4);
    add(n.downWeight, {H, I}, 10 * l + 5);
  }
  add("model.embed_tokens.weight", {V, H}, 100);
  add("model.norm.weight", {H}, 200);
  std::string cfg = R"({"model_type": "qwen2", "hidden_size": 8,
      "num_attention_heads": 2, "num_key_value_heads": 1,
      "intermediate_size": 3, "vocab_size": 5, "num_hidden_layers": 2,
      "tie_word_embeddings": true})";
  ModelConfig config = ModelConfig::parse(cfg);
  TensorStore store = TensorStore::fromFile(
      SafetensorsFile::fromBytes(encodeSafetensors(ck.refs()), "ck"));
  ModelWeights w = loadModelWeights(store, config, DType::BF16);
  ASSERT_EQ(w.layers.size(), 2u);
  const DecoderLayerWeights &l1 = w.layers[1];
  // gateUp = cat([gate, up]) along rows.
  std::vector<uint16_t> gateUp = ck.tensors[hfLayerNames(1).gateWeight];
  const auto &up = ck.tensors[hfLayerNames(1).upWeight];
  gateUp.insert(gateUp.end(), up.begin(), up.end());
  EXPECT_EQ(l1.gateUp, gateUp);
  EXPECT_EQ(l1.down, ck.tensors[hfLayerNames(1).downWeight]);
  EXPECT_EQ(l1.oProj, ck.tensors[hfLayerNames(1).oWeight]);
  EXPECT_EQ(l1.postNorm, ck.tensors[hfLayerNames(1).postAttentionLayernorm]);
  EXPECT_EQ(w.finalNorm, ck.tensors["model.norm.weight"]);
  // Tied: no lm_head read, the embedding is the head.
  EXPECT_TRUE(w.lmHead.empty());
  EXPECT_EQ(&w.lmHeadWeight(), &w.embedTokens);

  // Untied without lm_head.weight; a wrong MLP shape.
  config.tieWordEmbeddings = false;
  std::string msg = EXPECT_THROW_MSG(
      FormatError, loadModelWeights(store, config, DType::BF16));
  EXPECT_CONTAINS(msg, "ck: no tensor \"lm_head.weight\"");
  config.intermediateSize = 4;
  msg = EXPECT_THROW_MSG(FormatError,
                         loadModelWeights(store, config, DType::BF16));
  EXPECT_CONTAINS(msg, "model.layers.0.mlp.gate_proj.weight is BF16[3, 8], "
                       "expected [4, 8] for hidden 8 and intermediate_size 4");
}

TEST(Checkpoint, ConvertsWithOneRounding) {
  std::vector<float> f32 = {1.0f, 0.1f, -65504.0f, 1e-8f};
  std::vector<uint16_t> h = convertTo16("F32", f32.data(), 4, DType::F16, "t");
  for (size_t i = 0; i < f32.size(); ++i)
    EXPECT_EQ(h[i], floatToF16(f32[i]));
  std::vector<double> f64 = {1.0 + 1e-12, -3.0};
  std::vector<uint16_t> b = convertTo16("F64", f64.data(), 2, DType::BF16, "t");
  EXPECT_EQ(b[0], doubleToBF16(1.0 + 1e-12));
  EXPECT_EQ(b[1], doubleToBF16(-3.0));
  // NaN and inf pass through; a finite overflow is an error.
  std::vector<float> special = {NAN, INFINITY};
  std::vector<uint16_t> s =
      convertTo16("F32", special.data(), 2, DType::F16, "t");
  EXPECT_TRUE(std::isnan(f16ToFloat(s[0])));
  EXPECT_TRUE(std::isinf(f16ToFloat(s[1])));
  std::vector<uint16_t> big = {doubleToBF16(1e6)};
  std::string msg = EXPECT_THROW_MSG(
      FormatError, convertTo16("BF16", big.data(), 1, DType::F16, "w.weight"));
  EXPECT_CONTAINS(msg, "w.weight: element 0 (");
  EXPECT_CONTAINS(msg, "overflows f16");
  msg = EXPECT_THROW_MSG(UnsupportedError,
                         convertTo16("I8", big.data(), 1, DType::F16, "w"));
  EXPECT_CONTAINS(msg, "cannot convert dtype I8");
}

TEST(Checkpoint, OpenErrors) {
  TempDir dir;
  std::string msg = EXPECT_THROW_MSG(Error, TensorStore::open(dir.path()));
  EXPECT_CONTAINS(msg, "has neither model.safetensors nor");
  msg = EXPECT_THROW_MSG(Error, Checkpoint::open(dir.file("nothing")));
  EXPECT_CONTAINS(msg, "is not a directory");
}

TEST(Checkpoint, TheTinyCheckpointMatchesTheTinyManifest) {
  // runtime/test/data/tiny_checkpoint (make_tiny_checkpoint.py).
  Checkpoint c = Checkpoint::open(dataPath("tiny_checkpoint"));
  EXPECT_EQ(c.config.hiddenSize, 64);
  EXPECT_EQ(c.config.numAttentionHeads, 4);
  EXPECT_EQ(c.config.numKeyValueHeads, 2);
  EXPECT_EQ(c.config.headDim, 16);
  ASSERT_TRUE(c.config.llama3Scaling.has_value());
  for (int layer = 0; layer < 2; ++layer) {
    FrontHalfWeights w =
        loadFrontHalfWeights(c.tensors, c.config, layer, DType::F16);
    EXPECT_EQ(w.qkvWeight.size(), 128u * 64u);
    EXPECT_EQ(w.normWeight.size(), 64u);
    EXPECT_TRUE(w.qkvBias.empty());
    // Row 64 of the packed weight is row 0 of k_proj.
    std::vector<uint8_t> k = c.tensors.read(hfLayerNames(layer).kWeight);
    uint16_t k0 = static_cast<uint16_t>(k[0] | (k[1] << 8));
    EXPECT_EQ(w.qkvWeight[64 * 64], floatToF16(bf16ToFloat(k0)));
  }
}
