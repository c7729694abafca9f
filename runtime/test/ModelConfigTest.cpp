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

TEST(ModelConfig, RulesOfTheImporter) {
  // The importer's rules (lib/Import/HuggingFace.cpp) for the fields both
  // read; the accepted side of each is in the tests above.
  ModelConfig q = ModelConfig::parse(
      R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
          "attention_bias": false})");
  EXPECT_TRUE(q.attentionBias); // Qwen2Attention always has biases
  ASSERT_EQ(q.warnings.size(), 1u);
  EXPECT_CONTAINS(q.warnings[0], "attention_bias false is ignored: qwen2");
  // rope_parameters wins: rope_scaling is then not read at all.
  ModelConfig r = ModelConfig::parse(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "rope_theta": 20000, "rope_scaling": {"rope_type": "yarn"},
          "rope_parameters": {"rope_type": "default",
                              "partial_rotary_factor": 0.5}})");
  EXPECT_DOUBLE_EQ(r.ropeTheta, 20000.0);
  EXPECT_FALSE(r.llama3Scaling.has_value());
  EXPECT_EQ(r.rotaryDim, 8);
}

TEST(ModelConfig, Errors) {
  struct Case {
    const char *name;
    const char *fields; ///< after "model_type": "llama", hidden 64, 4 heads
    bool unsupported;   ///< UnsupportedError, else FormatError
    const char *expected;
  };
  const Case cases[] = {
      {"hidden_size as a string", R"("hidden_size": "4096")", false,
       "cfg.json: hidden_size: expected an integer, got the string \"4096\""},
      {"head counts", R"("num_attention_heads": 6, "num_key_value_heads": 4)",
       false, "not a multiple of num_key_value_heads 4"},
      {"no head_dim", R"("hidden_size": 100, "num_attention_heads": 3)", false,
       "no head_dim"},
      {"odd head_dim", R"("head_dim": 15)", false,
       "cfg.json: head_dim 15 is odd, and RoPE rotates pairs"},
      {"q/k/v weight past 64 bits",
       R"("hidden_size": 2147483647, "num_attention_heads": 2147483647,
          "head_dim": 2147483646)",
       false, "overflows a 64-bit size"},
      {"yarn", R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})", true,
       "cfg.json: rope_scaling.rope_type: rope scaling type \"yarn\" is not "
       "supported"},
      {"linear (type)", R"("rope_scaling": {"type": "linear", "factor": 2.0})",
       true, "\"linear\""},
      {"per-layer-type rope_parameters",
       R"("rope_parameters": {"full_attention": {"rope_type": "default"}})",
       false,
       "cfg.json: rope_parameters: per-layer-type RoPE parameters "
       "(\"full_attention\", ...) are not supported"},
      {"llama3 without low_freq_factor",
       R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})", false,
       "rope_scaling: missing member \"low_freq_factor\""},
      {"llama3 high <= low",
       R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 4, "high_freq_factor": 1,
          "original_max_position_embeddings": 8192})",
       false,
       "rope_scaling.high_freq_factor: must be greater than low_freq_factor"},
      {"rope_theta 0.5", R"("rope_theta": 0.5)", false,
       "cfg.json: rope_theta: rope_theta must be > 1"},
      {"rope_theta inside rope_parameters",
       R"("rope_parameters": {"rope_type": "default", "rope_theta": -1})",
       false, "cfg.json: rope_parameters.rope_theta: rope_theta must be > 1"},
      {"rms_norm_eps 0", R"("rms_norm_eps": 0)", false,
       "cfg.json: rms_norm_eps: rms_norm_eps must be > 0"},
      {"partial_rotary_factor 0", R"("partial_rotary_factor": 0)", false,
       "partial_rotary_factor must be in (0, 1]"},
      {"partial_rotary_factor giving an odd rotary_dim",
       R"("partial_rotary_factor": 0.2)", false,
       "does not give an even rotary_dim"},
      {"attention_bias not a bool", R"("attention_bias": 1)", false,
       "cfg.json: attention_bias: expected true or false, got 1"},
      {"torch_dtype not a string", R"("torch_dtype": 16)", false,
       "cfg.json: torch_dtype: expected a string, got 16"},
      {"use_sliding_window not a bool", R"("use_sliding_window": "yes")", false,
       "cfg.json: use_sliding_window: expected true or false"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    // Later members of a JSON object replace earlier ones (nlohmann).
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
  // model_type: required, and only the types the importer accepts.
  std::string msg = EXPECT_THROW_MSG(
      FormatError,
      ModelConfig::parse(R"({"hidden_size": 64, "num_attention_heads": 4})",
                         "cfg.json"));
  EXPECT_CONTAINS(msg, "cfg.json: missing member \"model_type\"");
  msg = EXPECT_THROW_MSG(
      UnsupportedError,
      ModelConfig::parse(R"({"model_type": "gemma", "hidden_size": 64,
                             "num_attention_heads": 4})",
                         "cfg.json"));
  EXPECT_CONTAINS(msg, "cfg.json: model_type: \"gemma\" is not supported "
                       "(supported: llama, mistral, mixtral, qwen2, "
                       "qwen2_moe");
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
