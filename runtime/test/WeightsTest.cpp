//===- WeightsTest.cpp - the weights fusion-run loads ---------------------===//
//
// On the tiny test function (runtime/test/data/tiny_decode: hidden 64, 4 q
// heads, 2 KV heads, head_dim 16, no bias).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/Safetensors.h"
#include "fusion/tooling/Weights.h"

#include <gtest/gtest.h>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using namespace fusion::tooling;

namespace {

struct Tiny {
  Model model = Model::load(dataPath("tiny_decode.manifest.json"));
  FrontHalfSignature sig = FrontHalfSignature::fromModel(model);
};

TEST(Weights, RandomWeightsAreSeeded) {
  Tiny t;
  Weights a = loadWeights({"", 0, 7}, t.model, t.sig, std::nullopt);
  EXPECT_EQ(a.origin, "random (seed 7)");
  ASSERT_EQ(a.norm.size(), 64u);
  EXPECT_EQ(a.qkv.size(), 128u * 64u);
  EXPECT_TRUE(a.bias.empty());
  for (uint16_t e : a.norm) {
    EXPECT_GE(toFloat(DType::F16, e), 0.5f);
    EXPECT_LE(toFloat(DType::F16, e), 1.5f);
  }
  EXPECT_EQ(loadWeights({"", 0, 7}, t.model, t.sig, std::nullopt).qkv, a.qkv);
  EXPECT_NE(loadWeights({"", 0, 8}, t.model, t.sig, std::nullopt).qkv, a.qkv);
  t.sig.qkvBias = 3;
  EXPECT_EQ(loadWeights({"", 0, 7}, t.model, t.sig, std::nullopt).bias.size(),
            128u);
}

TEST(Weights, RandomModelWeightsHaveTheCheckpointShapes) {
  // tiny_model.json: H 64, 4 heads over 2 of 16, I 96, vocab 300, 2
  // layers, tied.
  ModelConfig config = ModelConfig::load(std::string(FUSION_RUNTIME_TEST_DATA) +
                                         "/configs/tiny_model.json");
  ModelWeights w = randomModelWeights(config, DType::F16, 3);
  EXPECT_EQ(w.embedTokens.size(), 300u * 64);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[1].front.qkvWeight.size(), (4u + 2 * 2) * 16 * 64);
  EXPECT_TRUE(w.layers[1].front.qkvBias.empty());
  EXPECT_EQ(w.layers[1].oProj.size(), 64u * 64);
  EXPECT_EQ(w.layers[1].gateUp.size(), 2u * 96 * 64);
  EXPECT_EQ(w.layers[1].down.size(), 64u * 96);
  EXPECT_EQ(w.finalNorm.size(), 64u);
  EXPECT_TRUE(w.lmHead.empty()); // tied
  // Seeded: the same seed gives the same weights, another seed others;
  // norms are near 1 (f16 0x3C00), never exactly 0.
  EXPECT_EQ(randomModelWeights(config, DType::F16, 3).layers[1].down,
            w.layers[1].down);
  EXPECT_NE(randomModelWeights(config, DType::F16, 4).layers[1].down,
            w.layers[1].down);
  for (uint16_t bits : w.finalNorm)
    EXPECT_NEAR(bits, 0x3C00, 0x0200);
}

TEST(Weights, PackedNames) {
  Tiny t;
  TempDir dir;
  std::vector<uint16_t> norm(64), qkv(128 * 64);
  for (size_t i = 0; i < norm.size(); ++i)
    norm[i] = static_cast<uint16_t>(0x3C00 + i);
  for (size_t i = 0; i < qkv.size(); ++i)
    qkv[i] = static_cast<uint16_t>(i % 0x3000);
  // The norm by the manifest's argument name, the q/k/v weight packed.
  std::string file = dir.file("w.safetensors");
  writeSafetensors(file, {{"norm_w", "F16", {64}, norm.data()},
                          {"qkv_weight", "F16", {128, 64}, qkv.data()}});
  Weights w = loadWeights({file, 0, 1}, t.model, t.sig, std::nullopt);
  EXPECT_EQ(w.norm, norm);
  EXPECT_EQ(w.qkv, qkv);
  EXPECT_EQ(w.origin, file + " (packed names)");

  std::string wrong = dir.file("wrong.safetensors");
  writeSafetensors(wrong, {{"norm_weight", "F16", {32}, norm.data()}});
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(FormatError, loadWeights({wrong, 0, 1}, t.model, t.sig,
                                                std::nullopt)),
      "norm_weight is F16[32], expected [64]");
  std::string none = dir.file("none.safetensors");
  writeSafetensors(none, {{"other", "F16", {64}, norm.data()}});
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(FormatError,
                       loadWeights({none, 0, 1}, t.model, t.sig, std::nullopt)),
      "neither model.layers.0.self_attn.q_proj.weight");
}

TEST(Weights, CheckpointLayers) {
  Tiny t;
  std::string dir = dataPath("tiny_checkpoint");
  EXPECT_EQ(checkpointLayers(TensorStore::open(dir)), 2);
  std::optional<ModelConfig> config = ModelConfig::load(dir + "/config.json");
  Weights w = loadWeights({dir, 1, 1}, t.model, t.sig, config);
  EXPECT_EQ(w.origin,
            dir + " layer 1 (Hugging Face names, packed cat(q, k, v))");
  EXPECT_EQ(w.qkv.size(), 128u * 64u);
  EXPECT_NE(loadWeights({dir, 0, 1}, t.model, t.sig, config).qkv, w.qkv);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       loadWeights({dir, 2, 1}, t.model, t.sig, config)),
      "--layer 2: " + dir +
          " has layers 0..1 (num_hidden_layers 2 in its "
          "config.json)");
  // Without config.json: the bound from the tensor names.
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       loadWeights({dir, 5, 1}, t.model, t.sig, std::nullopt)),
      "has layers 0..1 (from its tensor names)");
}

TEST(Weights, ConfigFromSignature) {
  Tiny t;
  ModelConfig c = configFromSignature(t.sig);
  EXPECT_EQ(c.hiddenSize, 64);
  EXPECT_EQ(c.numAttentionHeads, 4);
  EXPECT_EQ(c.numKeyValueHeads, 2);
  EXPECT_EQ(c.headDim, 16);
  EXPECT_EQ(c.rotaryDim, 16);
  EXPECT_FALSE(c.attentionBias);
}

} // namespace
