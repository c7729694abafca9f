//===- ModelConfigTest.cpp - HF config.json parsing -----------------------===//

#include "fusion/runtime/ModelConfig.h"
#include "fusion/runtime/Error.h"

#include "TestUtil.h"

using namespace fusion::runtime;
using namespace fusion::runtime::test;

TEST(ModelConfig, Llama31) {
  ModelConfig c = ModelConfig::load(dataPath("configs/llama3_8b.json"));
  EXPECT_EQ(c.modelType, "llama");
  EXPECT_EQ(c.hiddenSize, 4096);
  EXPECT_EQ(c.numAttentionHeads, 32);
  EXPECT_EQ(c.numKeyValueHeads, 8);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_EQ(c.rotaryDim, 128);
  EXPECT_EQ(c.numHiddenLayers, 32);
  EXPECT_EQ(c.maxPositionEmbeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  ASSERT_TRUE(c.llama3Scaling.has_value());
  EXPECT_DOUBLE_EQ(c.llama3Scaling->factor, 8.0);
  EXPECT_DOUBLE_EQ(c.llama3Scaling->lowFreqFactor, 1.0);
  EXPECT_DOUBLE_EQ(c.llama3Scaling->highFreqFactor, 4.0);
  EXPECT_EQ(c.llama3Scaling->originalMaxPosition, 8192);
  EXPECT_FALSE(c.attentionBias);
  ASSERT_TRUE(c.torchDtype.has_value());
  EXPECT_EQ(*c.torchDtype, DType::BF16);
  EXPECT_TRUE(c.warnings.empty());

  ref::FrontHalfConfig f = c.frontHalf(DType::F16);
  EXPECT_EQ(f.dtype, DType::F16);
  EXPECT_EQ(f.hidden, 4096);
  EXPECT_EQ(f.dims.numQHeads, 32);
  EXPECT_EQ(f.dims.numKVHeads, 8);
  EXPECT_EQ(f.dims.headDim, 128);
  EXPECT_EQ(f.norm, ref::NormKind::RMSNorm);
  EXPECT_DOUBLE_EQ(f.normOptions.eps, 1e-5);
  EXPECT_EQ(f.rope.pairing, ref::RopePairing::NeoX);
  EXPECT_DOUBLE_EQ(f.rope.theta, 500000.0);
  EXPECT_EQ(f.rope.rotaryDim, 0);
  EXPECT_TRUE(f.rope.llama3.has_value());
  EXPECT_FALSE(f.attention.scale.has_value());
  EXPECT_CONTAINS(c.summary(), "llama: hidden 4096, heads 32/8, head_dim 128");
  EXPECT_CONTAINS(c.summary(), "llama3 x8");
}

TEST(ModelConfig, Qwen2HasBiasWithoutAField) {
  ModelConfig c = ModelConfig::load(dataPath("configs/qwen2_7b.json"));
  EXPECT_EQ(c.hiddenSize, 3584);
  EXPECT_EQ(c.numAttentionHeads, 28);
  EXPECT_EQ(c.numKeyValueHeads, 4);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-6);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 1e6);
  EXPECT_FALSE(c.llama3Scaling.has_value());
  EXPECT_TRUE(c.attentionBias);
  // sliding_window is set but use_sliding_window is false: no warning.
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_CONTAINS(c.summary(), "qkv bias");
}

TEST(ModelConfig, TinyLlamaAndMistral) {
  ModelConfig t = ModelConfig::load(dataPath("configs/tinyllama_1_1b.json"));
  EXPECT_EQ(t.headDim, 64); // hidden / heads
  EXPECT_EQ(t.numKeyValueHeads, 4);
  EXPECT_FALSE(t.llama3Scaling.has_value()); // rope_scaling: null
  EXPECT_DOUBLE_EQ(t.ropeTheta, 10000.0);
  ModelConfig m = ModelConfig::load(dataPath("configs/mistral_7b_v0_3.json"));
  EXPECT_EQ(m.modelType, "mistral");
  EXPECT_EQ(m.headDim, 128);
  EXPECT_DOUBLE_EQ(m.ropeTheta, 1e6);
  EXPECT_FALSE(m.attentionBias);
  EXPECT_TRUE(m.warnings.empty()); // sliding_window: null
}

TEST(ModelConfig, DefaultsAndExplicitFields) {
  ModelConfig c = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 3072,
          "num_attention_heads": 24, "head_dim": 256})");
  EXPECT_EQ(c.numKeyValueHeads, 24); // defaults to the query heads
  EXPECT_EQ(c.headDim, 256);         // explicit, not hidden / heads
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-6);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 10000.0);
  EXPECT_FALSE(c.torchDtype.has_value());

  // head_dim: null (Mistral) means hidden / heads; float16; an integer
  // written as a float.
  ModelConfig m = ModelConfig::parse(
      R"({"model_type": "mistral", "hidden_size": 4096.0,
          "num_attention_heads": 32, "num_key_value_heads": 8,
          "head_dim": null, "torch_dtype": "float16",
          "sliding_window": 4096})");
  EXPECT_EQ(m.hiddenSize, 4096);
  EXPECT_EQ(m.headDim, 128);
  EXPECT_EQ(*m.torchDtype, DType::F16);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_CONTAINS(m.warnings[0], "sliding_window 4096 is ignored");

  ModelConfig p = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 2048,
          "num_attention_heads": 16, "partial_rotary_factor": 0.25,
          "attention_bias": true, "rope_scaling": {"rope_type": "default"}})");
  EXPECT_EQ(p.headDim, 128);
  EXPECT_EQ(p.rotaryDim, 32);
  EXPECT_EQ(p.frontHalf(DType::BF16).rope.rotaryDim, 32);
  EXPECT_TRUE(p.attentionBias);
  EXPECT_FALSE(p.llama3Scaling.has_value());
}

TEST(ModelConfig, WholeModelFields) {
  // SmolLM2-135M's config.json (tools/convert-gguf writes the same fields).
  ModelConfig c = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
          "num_hidden_layers": 30, "num_attention_heads": 9,
          "num_key_value_heads": 3, "vocab_size": 49152,
          "tie_word_embeddings": true, "hidden_act": "silu"})");
  EXPECT_EQ(c.intermediateSize, 1536);
  EXPECT_EQ(c.vocabSize, 49152);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_EQ(c.decoder(DType::F16).intermediate, 1536);
  EXPECT_NO_THROW(c.checkWholeModel());

  // Defaults (LlamaConfig: untied, silu); the front half needs none of them.
  ModelConfig front = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})");
  EXPECT_FALSE(front.tieWordEmbeddings);
  EXPECT_EQ(front.hiddenAct, "silu");
  try {
    front.checkWholeModel();
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError &e) {
    EXPECT_CONTAINS(e.what(), "field \"intermediate_size\": missing");
  }
  using Case = std::pair<std::string, std::string>;
  for (const auto &[json, field] : std::vector<Case>{
           {R"("model_type": "llama", "hidden_act": "gelu")", "hidden_act"},
           {R"("model_type": "llama", "mlp_bias": true)", "mlp_bias"},
           {R"("model_type": "mixtral")", "model_type"}}) {
    std::string text = R"({"hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 128, "vocab_size": 10, "num_hidden_layers": 2, )" +
                       json + "}";
    ModelConfig m = ModelConfig::parse(text);
    try {
      m.checkWholeModel();
      FAIL() << "expected UnsupportedError for " << json;
    } catch (const UnsupportedError &e) {
      EXPECT_CONTAINS(e.what(), "field \"" + field + "\"");
    }
  }
}

TEST(ModelConfig, RopeParametersOfTransformersV5) {
  ModelConfig c = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 4096,
          "num_attention_heads": 32, "num_key_value_heads": 8,
          "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0,
            "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}})");
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  ASSERT_TRUE(c.llama3Scaling.has_value());
  EXPECT_DOUBLE_EQ(c.llama3Scaling->factor, 32.0);
}

TEST(ModelConfig, Qwen2AlwaysHasBias) {
  // Qwen2Attention builds q/k/v with bias=True whatever the config says
  // (Qwen2Config has no attention_bias field).
  ModelConfig q = ModelConfig::parse(
      R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
          "attention_bias": false})");
  EXPECT_TRUE(q.attentionBias);
  ASSERT_EQ(q.warnings.size(), 1u);
  EXPECT_EQ(q.warnings[0],
            "attention_bias false is ignored: qwen2 always has q/k/v biases");
}

TEST(ModelConfig, Qwen2MoeBiasIsQkvBias) {
  // Qwen2MoeAttention: bias=config.qkv_bias, Qwen2MoeConfig.qkv_bias
  // defaulting to True; attention_bias is not read.
  const std::string base = R"({"model_type": "qwen2_moe", "hidden_size": 64,
                               "num_attention_heads": 4)";
  ModelConfig byDefault = ModelConfig::parse(base + "}");
  EXPECT_TRUE(byDefault.attentionBias);
  EXPECT_TRUE(byDefault.warnings.empty());
  ModelConfig off = ModelConfig::parse(base + R"(, "qkv_bias": false})");
  EXPECT_FALSE(off.attentionBias);
  EXPECT_TRUE(off.warnings.empty());
  ModelConfig ignored =
      ModelConfig::parse(base + R"(, "attention_bias": false})");
  EXPECT_TRUE(ignored.attentionBias);
  ASSERT_EQ(ignored.warnings.size(), 1u);
  EXPECT_EQ(ignored.warnings[0], "attention_bias false is ignored: qwen2_moe "
                                 "reads qkv_bias (default true)");
  std::string msg = EXPECT_THROW_MSG(
      FormatError, ModelConfig::parse(base + R"(, "qkv_bias": "yes"})", "c"));
  EXPECT_EQ(msg, "c: field \"qkv_bias\": expected true or false, got the "
                 "string \"yes\"");
}

TEST(ModelConfig, MistralAndMixtralNeverHaveBias) {
  // MistralAttention (and Mixtral's, which is Mistral's) builds q/k/v with
  // bias=False; MistralConfig has no attention_bias field.
  for (const char *type : {"mistral", "mixtral"}) {
    SCOPED_TRACE(type);
    ModelConfig m =
        ModelConfig::parse(std::string(R"({"model_type": ")") + type +
                           R"(", "hidden_size": 64, "num_attention_heads": 4,
            "attention_bias": true})");
    EXPECT_FALSE(m.attentionBias);
    ASSERT_EQ(m.warnings.size(), 1u);
    EXPECT_EQ(m.warnings[0], std::string("attention_bias true is ignored: ") +
                                 type + " never has q/k/v biases");
  }
  // Llama reads attention_bias.
  EXPECT_TRUE(ModelConfig::parse(R"({"model_type": "llama", "hidden_size": 64,
      "num_attention_heads": 4, "attention_bias": true})")
                  .attentionBias);
}

TEST(ModelConfig, RopeParametersWin) {
  // transformers 5 reads rope_theta and partial_rotary_factor from
  // rope_parameters (a top-level one only fills in a missing entry), and
  // then ignores rope_scaling.
  ModelConfig r = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
          "rope_theta": 20000, "partial_rotary_factor": 0.5,
          "rope_scaling": {"rope_type": "yarn"},
          "rope_parameters": {"rope_type": "default", "rope_theta": 40000,
                              "partial_rotary_factor": 0.25}})");
  EXPECT_DOUBLE_EQ(r.ropeTheta, 40000.0);
  EXPECT_FALSE(r.llama3Scaling.has_value());
  EXPECT_EQ(r.headDim, 64);
  EXPECT_EQ(r.rotaryDim, 16); // 64 * 0.25, not 64 * 0.5
  // Top-level values fill in what rope_parameters lacks.
  ModelConfig t = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
          "rope_theta": 20000, "partial_rotary_factor": 0.5,
          "rope_parameters": {"rope_type": "default"}})");
  EXPECT_DOUBLE_EQ(t.ropeTheta, 20000.0);
  EXPECT_EQ(t.rotaryDim, 32);
}

TEST(ModelConfig, DtypeAsWritten) {
  ModelConfig f = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "torch_dtype": "float32", "dtype": "bfloat16"})");
  EXPECT_FALSE(f.torchDtype.has_value()); // torch_dtype first
  EXPECT_EQ(f.dtypeName, "float32");
  EXPECT_EQ(f.dtypeField, "torch_dtype");
  ModelConfig b = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "dtype": "bfloat16"})",
      "b.json");
  EXPECT_EQ(b.torchDtype, DType::BF16);
  EXPECT_EQ(b.dtypeField, "dtype");
  EXPECT_EQ(b.source, "b.json");
}

TEST(ModelConfig, TryParseReturnsTheError) {
  ModelConfigResult ok = ModelConfig::tryParse(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})",
      "ok.json");
  ASSERT_TRUE(ok.config.has_value());
  EXPECT_EQ(ok.config->headDim, 16);
  EXPECT_TRUE(ok.error.empty());
  ModelConfigResult gemma = ModelConfig::tryParse(
      R"({"model_type": "gemma", "hidden_size": 64, "num_attention_heads": 4})",
      "g.json");
  EXPECT_FALSE(gemma.config.has_value());
  EXPECT_TRUE(gemma.unsupported);
  EXPECT_EQ(gemma.error, "g.json: field \"model_type\": \"gemma\" is not "
                         "supported (supported: llama, mistral, mixtral, "
                         "qwen2, qwen2_moe)");
  ModelConfigResult bad = ModelConfig::tryParse("[1]", "a.json");
  EXPECT_FALSE(bad.unsupported);
  EXPECT_EQ(bad.error, "a.json: expected a JSON object at the top level");
}

namespace {

/// One config of ModelConfigTest's error tables: `fields` after
/// "model_type": "llama", hidden 64, 4 heads (later members of a JSON object
/// replace earlier ones), and a part of the message it must give.
struct ErrorCase {
  const char *name;
  const char *fields;
  bool unsupported; ///< UnsupportedError, else FormatError
  const char *expected;
};

void expectErrors(const std::vector<ErrorCase> &cases) {
  for (const ErrorCase &c : cases) {
    SCOPED_TRACE(c.name);
    std::string text = std::string(R"({"model_type": "llama",
        "hidden_size": 64, "num_attention_heads": 4, )") +
                       c.fields + "}";
    std::string msg =
        c.unsupported ? EXPECT_THROW_MSG(UnsupportedError,
                                         ModelConfig::parse(text, "cfg.json"))
                      : EXPECT_THROW_MSG(FormatError,
                                         ModelConfig::parse(text, "cfg.json"));
    EXPECT_CONTAINS(msg, c.expected);
  }
}

} // namespace

TEST(ModelConfig, ErrorsOfSizesAndTypes) {
  expectErrors({
      {"hidden_size as a string", R"("hidden_size": "4096")", false,
       "cfg.json: field \"hidden_size\": expected an integer, got the string "
       "\"4096\""},
      {"hidden_size out of range", R"("hidden_size": 0)", false,
       "cfg.json: field \"hidden_size\": 0 is outside [1, 2147483647]"},
      {"head counts", R"("num_attention_heads": 6, "num_key_value_heads": 4)",
       false,
       "cfg.json: field \"num_key_value_heads\": num_attention_heads 6 is not "
       "a multiple of num_key_value_heads 4"},
      {"no head_dim", R"("hidden_size": 100, "num_attention_heads": 3)", false,
       "cfg.json: field \"head_dim\": absent, and hidden_size 100 is not a "
       "multiple of num_attention_heads 3"},
      {"odd head_dim", R"("head_dim": 15)", false,
       "cfg.json: field \"head_dim\": 15 is odd, and RoPE rotates pairs of "
       "elements (without partial_rotary_factor the whole head is rotated)"},
      {"odd derived head_dim", R"("hidden_size": 60)", false,
       "cfg.json: field \"head_dim\": 15 (hidden_size 60 / "
       "num_attention_heads 4) is odd"},
      {"q/k/v weight past 64 bits",
       R"("hidden_size": 2147483647, "num_attention_heads": 1,
          "head_dim": 2147483646)",
       false,
       "cfg.json: field \"hidden_size\": the q/k/v weight of 6442450938 x "
       "2147483647 elements overflows a 64-bit size"},
  });
}

TEST(ModelConfig, ErrorsOfRopeBiasAndDtype) {
  expectErrors({
      {"yarn", R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})", true,
       "cfg.json: field \"rope_scaling.rope_type\": RoPE type \"yarn\" is not "
       "supported (fusion.rope implements \"default\" and \"llama3\")"},
      {"linear (type)", R"("rope_scaling": {"type": "linear", "factor": 2.0})",
       true, "cfg.json: field \"rope_scaling.type\": RoPE type \"linear\""},
      {"per-layer-type rope_parameters",
       R"("rope_parameters": {"full_attention": {"rope_type": "default"},
                              "sliding_attention": {"rope_type": "default"}})",
       true,
       "cfg.json: field \"rope_parameters\": per-layer-type RoPE parameters "
       "(\"full_attention\", \"sliding_attention\") are not supported"},
      {"rope_scaling not an object", R"("rope_scaling": 2)", false,
       "cfg.json: field \"rope_scaling\": expected an object, got 2"},
      {"llama3 without low_freq_factor",
       R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})", false,
       "cfg.json: missing field \"rope_scaling.low_freq_factor\" (required)"},
      {"llama3 high <= low",
       R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 4, "high_freq_factor": 1,
          "original_max_position_embeddings": 8192})",
       false,
       "cfg.json: field \"rope_scaling.high_freq_factor\": must be greater "
       "than low_freq_factor 4, got 1"},
      {"rope_theta 0.5", R"("rope_theta": 0.5)", false,
       "cfg.json: field \"rope_theta\": must be > 1, got 0.5"},
      {"rope_theta inside rope_parameters",
       R"("rope_parameters": {"rope_type": "default", "rope_theta": -1})",
       false,
       "cfg.json: field \"rope_parameters.rope_theta\": must be > 1, "
       "got -1"},
      {"rms_norm_eps 0", R"("rms_norm_eps": 0)", false,
       "cfg.json: field \"rms_norm_eps\": must be > 0, got 0"},
      {"partial_rotary_factor 0", R"("partial_rotary_factor": 0)", false,
       "cfg.json: field \"partial_rotary_factor\": must be in (0, 1], got 0"},
      {"partial_rotary_factor giving an odd rotary_dim",
       R"("partial_rotary_factor": 0.2)", false,
       "cfg.json: field \"partial_rotary_factor\": head_dim 16 * 0.2 does not "
       "give an even rotary dimension"},
      {"partial_rotary_factor in rope_parameters",
       R"("rope_parameters": {"partial_rotary_factor": 2})", false,
       "cfg.json: field \"rope_parameters.partial_rotary_factor\": must be in "
       "(0, 1], got 2"},
      {"attention_bias not a bool", R"("attention_bias": 1)", false,
       "cfg.json: field \"attention_bias\": expected true or false, got 1"},
      {"torch_dtype not a string", R"("torch_dtype": 16)", false,
       "cfg.json: field \"torch_dtype\": expected a string, got 16"},
      {"use_sliding_window not a bool", R"("use_sliding_window": "yes")", false,
       "cfg.json: field \"use_sliding_window\": expected true or false"},
      {"num_hidden_layers negative", R"("num_hidden_layers": -1)", false,
       "cfg.json: field \"num_hidden_layers\": -1 is outside [0, "
       "2147483647]"},
  });
}

TEST(ModelConfig, ErrorsOfTheDocument) {
  // model_type: required, and only the supported types.
  std::string msg = EXPECT_THROW_MSG(
      FormatError,
      ModelConfig::parse(R"({"hidden_size": 64, "num_attention_heads": 4})",
                         "cfg.json"));
  EXPECT_EQ(msg, "cfg.json: missing field \"model_type\" (required)");
  msg = EXPECT_THROW_MSG(
      UnsupportedError,
      ModelConfig::parse(R"({"model_type": "gemma", "hidden_size": 64,
                             "num_attention_heads": 4})",
                         "cfg.json"));
  EXPECT_EQ(msg, "cfg.json: field \"model_type\": \"gemma\" is not supported "
                 "(supported: llama, mistral, mixtral, qwen2, qwen2_moe)");
  msg = EXPECT_THROW_MSG(FormatError, ModelConfig::parse("{", "cfg.json"));
  EXPECT_CONTAINS(msg, "cfg.json: invalid JSON");
  msg = EXPECT_THROW_MSG(
      FormatError,
      ModelConfig::parse("{\"x\": " + std::string(40000, '['), "cfg.json"));
  EXPECT_CONTAINS(msg, "cfg.json: invalid JSON: arrays and objects nested "
                       "more than 64 levels deep");
  msg = EXPECT_THROW_MSG(Error, ModelConfig::load("/nonexistent/config.json"));
  EXPECT_CONTAINS(msg, "cannot open config /nonexistent/config.json");
}
