//===- ModelArgumentsTest.cpp - whole-model arguments -> weights ----------===//
//
// mapModelArguments on the function signature fusion-import --whole-model
// writes for small configs (test/Import/whole-model.mlir checks the same
// signature on the compiler side), written out here argument by argument:
// tied and untied LM heads, the q/k/v bias, and every error.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/ModelArguments.h"

#include "fusion/runtime/Error.h"

#include "TestUtil.h"

using namespace fusion::runtime;

namespace {

/// 2 layers, hidden 64, 4/2 heads of 16 (R = 128), intermediate 96, vocab
/// 300 (runtime/test/data/configs/tiny_model.json, but f16 or bf16 and
/// optionally untied, with the bias).
ModelConfig tinyConfig(bool tied, bool bias) {
  std::string json =
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 2, "num_hidden_layers": 2,
          "intermediate_size": 96, "vocab_size": 300,
          "torch_dtype": "float16", "tie_word_embeddings": )" +
      std::string(tied ? "true" : "false") +
      ", \"attention_bias\": " + (bias ? "true" : "false") + "}";
  return ModelConfig::parse(json, "tiny.json");
}

/// Weights of the config's shapes whose tensors are told apart by size.
ModelWeights tinyWeights(const ModelConfig &c, DType dtype) {
  const size_t H = 64, V = 300, I = 96, R = 128;
  ModelWeights w;
  w.dtype = dtype;
  w.embedTokens.resize(V * H);
  for (int l = 0; l < 2; ++l) {
    DecoderLayerWeights lw;
    lw.front.normWeight.resize(H);
    lw.front.qkvWeight.resize(R * H);
    if (c.attentionBias)
      lw.front.qkvBias.resize(R);
    lw.oProj.resize(H * H);
    lw.postNorm.resize(H);
    lw.gateUp.resize(2 * I * H);
    lw.down.resize(H * I);
    w.layers.push_back(std::move(lw));
  }
  w.finalNorm.resize(H);
  if (!c.tieWordEmbeddings)
    w.lmHead.resize(V * H);
  return w;
}

Dim n(int64_t v) { return Dim{v, ""}; }
Dim s(const char *name) { return Dim{0, name}; }

/// The decode_step function of fusion-import --whole-model for tinyConfig
/// (its printed signature, as manifest arguments), with caches of 4 tokens
/// per page.
ManifestFunction tinyFunction(bool tied, bool bias,
                              ElemType t = ElemType::F16) {
  ManifestFunction f;
  f.name = "decode_step";
  auto add = [&](std::string name, std::string role, std::vector<Dim> shape,
                 ElemType dtype, std::string kind = "tensor") {
    ManifestArgument a;
    a.index = static_cast<int>(f.arguments.size());
    a.name = std::move(name);
    a.role = std::move(role);
    a.kind = std::move(kind);
    a.dtype = dtype;
    a.shape = std::move(shape);
    f.arguments.push_back(std::move(a));
  };
  add("tokens", "tokens", {s("batch")}, ElemType::I32);
  add("embed_w", "weight", {n(300), n(64)}, t);
  for (std::string p : {"l0_", "l1_"}) {
    add(p + "norm_w", "norm_weight", {n(64)}, t);
    add(p + "qkv_w", "qkv_weight", {n(128), n(64)}, t);
    if (bias)
      add(p + "qkv_b", "qkv_bias", {n(128)}, t);
    add(p + "o_w", "weight", {n(64), n(64)}, t);
    add(p + "post_norm_w", "norm_weight", {n(64)}, t);
    add(p + "gate_up_w", "weight", {n(192), n(64)}, t);
    add(p + "down_w", "weight", {n(64), n(96)}, t);
    add(p + "k_cache", "key_cache", {s("num_pages"), n(4), n(2), n(16)}, t,
        "buffer");
    add(p + "v_cache", "value_cache", {s("num_pages"), n(4), n(2), n(16)}, t,
        "buffer");
  }
  add("final_norm_w", "norm_weight", {n(64)}, t);
  if (!tied)
    add("lm_head_w", "weight", {n(300), n(64)}, t);
  add("positions", "positions", {s("batch")}, ElemType::I32);
  add("seq_lens", "seq_lens", {s("batch")}, ElemType::I32);
  add("block_table", "block_table", {s("batch"), s("max_pages")},
      ElemType::I32);
  f.results.push_back({0, ElemType::I32, {s("batch")}, {}});
  f.results.push_back({1, t, {s("batch"), n(300)}, {}});
  return f;
}

Manifest manifestNamed() {
  Manifest m;
  m.source = "tiny.manifest.json";
  return m;
}

/// The binding of the argument called `name`.
const ModelArgumentBinding &binding(const ModelArgumentMap &map,
                                    const std::string &name) {
  for (const ModelArgumentBinding &b : map.arguments)
    if (b.name == name)
      return b;
  ADD_FAILURE() << "no binding " << name;
  return map.arguments.front();
}

/// The error message of mapping `f` for the tied, bias-free f16 config.
std::string mappingError(const ManifestFunction &f) {
  ModelConfig c = tinyConfig(true, false);
  ModelWeights w = tinyWeights(c, DType::F16);
  return EXPECT_THROW_MSG(FormatError,
                          mapModelArguments(manifestNamed(), f, c, w));
}

ManifestArgument &argument(ManifestFunction &f, const std::string &name) {
  for (ManifestArgument &a : f.arguments)
    if (a.name == name)
      return a;
  throw std::logic_error("no argument " + name);
}

} // namespace

TEST(ModelArguments, TiedWithoutBias) {
  ModelConfig c = tinyConfig(true, false);
  ModelWeights w = tinyWeights(c, DType::F16);
  ManifestFunction f = tinyFunction(true, false);
  ModelArgumentMap map = mapModelArguments(manifestNamed(), f, c, w);
  ASSERT_EQ(map.arguments.size(), f.arguments.size());
  for (size_t i = 0; i < f.arguments.size(); ++i) {
    EXPECT_EQ(map.arguments[i].argument, static_cast<int>(i));
    EXPECT_EQ(map.arguments[i].name, f.arguments[i].name);
  }
  EXPECT_EQ(map.pageSize, 4);
  EXPECT_EQ(map.tokens, 0);
  EXPECT_EQ(map.positions, 19);
  EXPECT_EQ(map.seqLens, 20);
  EXPECT_EQ(map.blockTable, 21);
  EXPECT_EQ(map.keyCaches, (std::vector<int>{8, 16}));
  EXPECT_EQ(map.valueCaches, (std::vector<int>{9, 17}));
  EXPECT_EQ(map.nextTokens, 0);
  EXPECT_EQ(map.logits, 1);
  // Each weight argument points at its tensor; the tied head is embed_w.
  EXPECT_EQ(binding(map, "embed_w").weight, &w.embedTokens);
  EXPECT_EQ(binding(map, "l0_norm_w").weight, &w.layers[0].front.normWeight);
  EXPECT_EQ(binding(map, "l0_qkv_w").weight, &w.layers[0].front.qkvWeight);
  EXPECT_EQ(binding(map, "l1_o_w").weight, &w.layers[1].oProj);
  EXPECT_EQ(binding(map, "l1_post_norm_w").weight, &w.layers[1].postNorm);
  EXPECT_EQ(binding(map, "l1_gate_up_w").weight, &w.layers[1].gateUp);
  EXPECT_EQ(binding(map, "l1_down_w").weight, &w.layers[1].down);
  EXPECT_EQ(binding(map, "l1_down_w").layer, 1);
  EXPECT_EQ(binding(map, "final_norm_w").weight, &w.finalNorm);
  EXPECT_EQ(binding(map, "final_norm_w").layer, -1);
  EXPECT_EQ(binding(map, "l1_k_cache").kind, ModelArgumentKind::KeyCache);
  EXPECT_EQ(binding(map, "l1_k_cache").weight, nullptr);
  EXPECT_EQ(binding(map, "block_table").kind, ModelArgumentKind::BlockTable);
}

TEST(ModelArguments, UntiedWithBiasInBf16) {
  ModelConfig c = tinyConfig(false, true);
  ModelWeights w = tinyWeights(c, DType::BF16);
  ManifestFunction f = tinyFunction(false, true, ElemType::BF16);
  ModelArgumentMap map = mapModelArguments(manifestNamed(), f, c, w);
  EXPECT_EQ(map.arguments.size(), 25u);
  EXPECT_EQ(binding(map, "lm_head_w").weight, &w.lmHead);
  EXPECT_EQ(binding(map, "embed_w").weight, &w.embedTokens);
  EXPECT_EQ(binding(map, "l1_qkv_b").weight, &w.layers[1].front.qkvBias);
  EXPECT_EQ(map.keyCaches, (std::vector<int>{9, 18}));
  EXPECT_EQ(map.blockTable, 24);
}

TEST(ModelArguments, ExtraAndMissingArguments) {
  // A tied model has no lm_head_w.
  std::string msg = mappingError(tinyFunction(false, false));
  EXPECT_CONTAINS(msg, "tiny.manifest.json: function \"decode_step\": "
                       "argument 19 \"lm_head_w\" is not an argument of the "
                       "whole model of tiny.json (2 layers, tied embeddings, "
                       "no q/k/v bias)");
  // Nor a bias without attention_bias.
  msg = mappingError(tinyFunction(true, true));
  EXPECT_CONTAINS(msg, "argument 4 \"l0_qkv_b\" is not an argument of");
  // A missing argument is named.
  ManifestFunction f = tinyFunction(true, false);
  f.arguments.erase(f.arguments.begin() + 12); // l1_o_w
  msg = mappingError(f);
  EXPECT_CONTAINS(msg, "function \"decode_step\": has no argument \"l1_o_w\", "
                       "which the whole model of tiny.json");
  // The untied config needs lm_head_w.
  ModelConfig untied = tinyConfig(false, false);
  ModelWeights w = tinyWeights(untied, DType::F16);
  msg = EXPECT_THROW_MSG(
      FormatError,
      mapModelArguments(manifestNamed(), tinyFunction(true, false), untied, w));
  EXPECT_CONTAINS(msg, "has no argument \"lm_head_w\"");
  // Two arguments of one name.
  f = tinyFunction(true, false);
  argument(f, "l1_norm_w").name = "l0_norm_w";
  msg = mappingError(f);
  EXPECT_CONTAINS(msg, "arguments 2 and 10 are both named \"l0_norm_w\"");
}

TEST(ModelArguments, MismatchedShapeDtypeRoleKind) {
  ManifestFunction f = tinyFunction(true, false);
  argument(f, "l1_qkv_w").shape = {n(96), n(64)};
  EXPECT_CONTAINS(mappingError(f),
                  "argument 11 \"l1_qkv_w\" has shape [96, 64]; the whole "
                  "model of tiny.json (2 layers, tied embeddings, no q/k/v "
                  "bias) gives it [128, 64]");
  f = tinyFunction(true, false);
  argument(f, "l0_gate_up_w").dtype = ElemType::BF16;
  EXPECT_CONTAINS(mappingError(f), "argument 6 \"l0_gate_up_w\" is bf16; "
                                   "expected f16 (the weights' dtype)");
  f = tinyFunction(true, false);
  argument(f, "positions").dtype = ElemType::F32;
  EXPECT_CONTAINS(mappingError(f),
                  "argument 19 \"positions\" is f32; expected i32");
  f = tinyFunction(true, false);
  argument(f, "l0_post_norm_w").role = "weight";
  EXPECT_CONTAINS(mappingError(f), "argument 5 \"l0_post_norm_w\" has role "
                                   "\"weight\"; expected \"norm_weight\"");
  f = tinyFunction(true, false);
  argument(f, "l0_v_cache").kind = "tensor";
  EXPECT_CONTAINS(mappingError(f),
                  "argument 9 \"l0_v_cache\" is a tensor; expected a buffer");
  // Every cache has l0_k_cache's page size.
  f = tinyFunction(true, false);
  argument(f, "l1_v_cache").shape[1] = n(8);
  EXPECT_CONTAINS(mappingError(f),
                  "argument 17 \"l1_v_cache\" has shape [num_pages, 8, 2, "
                  "16]; the whole model of tiny.json (2 layers, tied "
                  "embeddings, no q/k/v bias) gives it [num_pages, 4, 2, 16]");
  f = tinyFunction(true, false);
  argument(f, "l0_k_cache").shape = {s("num_pages"), s("batch"), n(2), n(16)};
  EXPECT_CONTAINS(mappingError(f),
                  "argument 8 \"l0_k_cache\" has shape [num_pages, batch, 2, "
                  "16]; expected [num_pages, page_size, kv_heads, head_dim]");
}

TEST(ModelArguments, ResultsAndHostTensors) {
  ManifestFunction f = tinyFunction(true, false);
  std::swap(f.results[0], f.results[1]);
  EXPECT_CONTAINS(mappingError(f),
                  "returns (f16[batch, 300], i32[batch]); the whole model of "
                  "tiny.json (2 layers, tied embeddings, no q/k/v bias) "
                  "returns (i32[batch], f16[batch, 300])");
  f = tinyFunction(true, false);
  f.results.pop_back();
  EXPECT_CONTAINS(mappingError(f), "returns (i32[batch]); ");

  // Host tensors of another config.
  ModelConfig c = tinyConfig(true, false);
  ModelWeights w = tinyWeights(c, DType::F16);
  w.layers[1].down.resize(64 * 80);
  std::string msg = EXPECT_THROW_MSG(
      FormatError,
      mapModelArguments(manifestNamed(), tinyFunction(true, false), c, w));
  EXPECT_CONTAINS(msg, "argument 15 \"l1_down_w\" [64, 96] has 6144 elements; "
                       "its host tensor holds 5120 (weights loaded for "
                       "another config?)");
  w = tinyWeights(c, DType::F16);
  w.layers.pop_back();
  msg = EXPECT_THROW_MSG(
      FormatError,
      mapModelArguments(manifestNamed(), tinyFunction(true, false), c, w));
  EXPECT_CONTAINS(msg, "the weights have 1 layers; tiny.json has 2");
  // A config outside the whole model.
  c.hiddenAct = "gelu";
  msg = EXPECT_THROW_MSG(
      UnsupportedError,
      mapModelArguments(manifestNamed(), tinyFunction(true, false), c, w));
  EXPECT_CONTAINS(msg, "field \"hidden_act\": \"gelu\" is not silu");
}

TEST(ModelArguments, ModelDTypeIsTheEmbeddingTables) {
  EXPECT_EQ(getModelDType(manifestNamed(), tinyFunction(true, false)),
            DType::F16);
  EXPECT_EQ(
      getModelDType(manifestNamed(), tinyFunction(false, true, ElemType::BF16)),
      DType::BF16);
  ManifestFunction f = tinyFunction(true, false);
  argument(f, "embed_w").dtype = ElemType::F32;
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(FormatError, getModelDType(manifestNamed(), f)),
      "tiny.manifest.json: function \"decode_step\": embed_w is "
      "f32, not an activation dtype (f16 or bf16)");
  argument(f, "embed_w").name = "table";
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(FormatError, getModelDType(manifestNamed(), f)),
      "function \"decode_step\" has no argument embed_w");
}
