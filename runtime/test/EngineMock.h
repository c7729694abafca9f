//===- EngineMock.h - the mock whole model of the Engine tests --*- C++ -*-===//
//
// test/data/engine_mock.ptx (two hand-written kernels with the arguments of
// a compiled whole model of tiny_model.json, pages of 4 tokens: one appends
// to the KV cache, the next reads it), its manifest and its weights: shared by
// EngineMockTest.cpp (on a GPU) and MockDriverTest.cpp (the host side on the
// mock driver).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_TEST_ENGINEMOCK_H
#define FUSION_RUNTIME_TEST_ENGINEMOCK_H

#include "fusion/contract/Contract.h"
#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/DType.h"
#include "fusion/runtime/Engine.h"
#include "fusion/runtime/ModelConfig.h"

#include "TestUtil.h"

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace fusion::runtime::test {

constexpr int64_t kVocab = 300, kHidden = 64, kPage = 4, kLayers = 2;

/// tiny_model.json: 2 layers, hidden 64, 4/2 heads of 16, intermediate 96,
/// vocab 300, tied.
inline ModelConfig mockConfig() {
  return ModelConfig::load(dataPath("configs/tiny_model.json"));
}

/// The manifest of engine_mock.ptx: decode_step's arguments as
/// fusion-import --whole-model --page-size=4 declares them, bound to the
/// parameters of its two kernels (the PTX file lists them).
inline std::string mockManifest(const std::string &ptx) {
  nlohmann::json args = nlohmann::json::array();
  auto add = [&](std::string name, std::string role, nlohmann::json shape,
                 std::string dtype = "f16", std::string kind = "tensor") {
    args.push_back({{"index", args.size()},
                    {"name", name},
                    {"role", role},
                    {"kind", kind},
                    {"dtype", dtype},
                    {"shape", shape}});
  };
  add("tokens", "tokens", {"batch"}, "i32");
  add("embed_w", "weight", {kVocab, kHidden});
  for (std::string p : {"l0_", "l1_"}) {
    add(p + "norm_w", "norm_weight", {kHidden});
    add(p + "qkv_w", "qkv_weight", {128, kHidden});
    add(p + "o_w", "weight", {kHidden, kHidden});
    add(p + "post_norm_w", "norm_weight", {kHidden});
    add(p + "gate_up_w", "weight", {192, kHidden});
    add(p + "down_w", "weight", {kHidden, 96});
    add(p + "k_cache", "key_cache", {"num_pages", kPage, 2, 16}, "f16",
        "buffer");
    add(p + "v_cache", "value_cache", {"num_pages", kPage, 2, 16}, "f16",
        "buffer");
  }
  add("final_norm_w", "norm_weight", {kHidden});
  add("positions", "positions", {"batch"}, "i32");
  add("seq_lens", "seq_lens", {"batch"}, "i32");
  add("block_table", "block_table", {"batch", "max_pages"}, "i32");

  // Kernel 0 appends (arguments 0, 17, 19, 21: tokens, l1_v_cache,
  // positions, block_table); kernel 1 reads (every argument but positions)
  // and writes the results.
  auto kernel = [&](int index, std::string entry,
                    const std::vector<int> &arguments, bool results) {
    nlohmann::json params = nlohmann::json::array();
    for (int a : arguments)
      params.push_back({{"index", params.size()},
                        {"kind", "input"},
                        {"role", args[a]["role"]},
                        {"dtype", args[a]["dtype"]},
                        {"shape", args[a]["shape"]},
                        {"binding", {{"argument", a}}}});
    if (results) {
      params.push_back({{"index", params.size()},
                        {"kind", "output"},
                        {"role", "tokens"},
                        {"dtype", "i32"},
                        {"shape", {"batch"}},
                        {"binding", {{"result", 0}}}});
      params.push_back({{"index", params.size()},
                        {"kind", "output"},
                        {"role", "output"},
                        {"dtype", "f16"},
                        {"shape", {"batch", kVocab}},
                        {"binding", {{"result", 1}}}});
    }
    for (const char *scalar : {"batch", "max_pages"})
      params.push_back({{"index", params.size()},
                        {"kind", "scalar"},
                        {"role", scalar},
                        {"dtype", "i32"}});
    return nlohmann::json{
        {"index", index},  {"function", "decode_step"}, {"name", entry},
        {"entry", entry},  {"grid", {"batch", 1, 1}},   {"block", {32, 1, 1}},
        {"params", params}};
  };
  std::vector<int> readArguments;
  for (int a = 0; a < static_cast<int>(args.size()); ++a)
    if (a != 19)
      readArguments.push_back(a);
  char hex[17];
  std::snprintf(
      hex, sizeof hex, "%016llx",
      static_cast<unsigned long long>(fusion::contract::ptxFingerprint(ptx)));
  nlohmann::json m = {
      {"format", "fusion-manifest"},
      {"version", 2},
      {"ptx", "engine_mock.ptx"},
      {"ptx_fnv1a64", hex},
      {"chip", "sm_90"},
      {"strategy", "none"},
      {"functions",
       {{{"name", "decode_step"},
         {"arguments", args},
         {"kernels", {0, 1}},
         {"results",
          {{{"index", 0},
            {"dtype", "i32"},
            {"shape", {"batch"}},
            {"source", {{"kernel", 1}, {"result", 0}}}},
           {{"index", 1},
            {"dtype", "f16"},
            {"shape", {"batch", kVocab}},
            {"source", {{"kernel", 1}, {"result", 1}}}}}}}}},
      {"kernels",
       {kernel(0, "decode_step_k0_mock_append", {0, 17, 19, 21}, false),
        kernel(1, "decode_step_k1_mock", readArguments, true)}}};
  return m.dump();
}

/// Weights of mockConfig() that are zero except embed_w[t, 0] = t % 5.
inline ModelWeights mockWeights(const ModelConfig &c) {
  ModelWeights w;
  w.dtype = DType::F16;
  w.embedTokens.assign(kVocab * kHidden, 0);
  for (int64_t t = 0; t < kVocab; ++t)
    w.embedTokens[t * kHidden] = floatToF16(static_cast<float>(t % 5));
  for (int64_t l = 0; l < kLayers; ++l) {
    DecoderLayerWeights lw;
    lw.front.normWeight.assign(kHidden, 0);
    lw.front.qkvWeight.assign(128 * kHidden, 0);
    lw.oProj.assign(kHidden * kHidden, 0);
    lw.postNorm.assign(kHidden, 0);
    lw.gateUp.assign(2 * c.intermediateSize * kHidden, 0);
    lw.down.assign(kHidden * c.intermediateSize, 0);
    w.layers.push_back(std::move(lw));
  }
  w.finalNorm.assign(kHidden, 0);
  return w;
}

/// An Engine of engine_mock.ptx with mockWeights for `capacity`; by default
/// batches up to 3, 3 rows a step (so that short prompts take several
/// chunks), 24 tokens a sequence (6 pages of 4).
inline std::unique_ptr<Engine>
makeMockEngine(const cuda::Context &ctx, const EngineOptions &options = {},
               const EngineCapacity &capacity = EngineCapacity{3, 24, 0, 3}) {
  const std::string ptx = readText(dataPath("engine_mock.ptx"));
  const ModelConfig config = mockConfig();
  return std::make_unique<Engine>(
      ctx, Model(Manifest::parse(mockManifest(ptx), "engine_mock.json")), ptx,
      "engine_mock.ptx", config, mockWeights(config), capacity, options);
}

} // namespace fusion::runtime::test

#endif // FUSION_RUNTIME_TEST_ENGINEMOCK_H
