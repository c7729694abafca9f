//===- GoldenTest.cpp - the CPU reference against the HF goldens ----------===//
//
// Runs the reference ops (rmsnorm -> qkvProj -> rope -> kvAppend ->
// decodeAttention), in F32 and in F64, on each committed golden of
// test/golden (its checkpoint and decode_step.safetensors, docs/goldens.md)
// and compares every intermediate with transformers' tensor of the same name
// and the attention output also with the float64 result, per sequence:
// relative L2 error under 2e-3 (f16) / 1e-2 (bf16), design.md section 3.
// The table of errors is printed (ctest -V, or --output-on-failure).
//
// The ops are called one by one as the goldens define the step: RoPE at
// `positions`, the append at slot `history_lens`, attention over `seq_lens`.
// A second test checks the layout fusion-run uses for compiled functions
// (append at the RoPE position, GoldenCacheLayout) against the first.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Compare.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/Golden.h"
#include "fusion/runtime/KVCacheLayout.h"
#include "fusion/runtime/ModelConfig.h"
#include "fusion/runtime/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace fusion::runtime;
using namespace fusion::runtime::ref;

namespace {

using Bits = std::vector<uint16_t>;

std::string goldenDir(const std::string &name) {
  return std::string(FUSION_GOLDEN_DIR) + "/" + name;
}

/// A golden with its checkpoint, weights packed in the golden's dtype.
struct Case {
  GoldenDecodeStep golden;
  ModelConfig config;
  FrontHalfConfig reference;
  FrontHalfWeights weights;

  explicit Case(const std::string &name)
      : golden(GoldenDecodeStep::load(goldenDir(name) +
                                      "/decode_step.safetensors")) {
    Checkpoint ckpt = Checkpoint::open(goldenDir(name));
    config = ckpt.config;
    reference = config.frontHalf(golden.dtype);
    weights = loadFrontHalfWeights(ckpt.tensors, config, 0, golden.dtype);
  }
  double tolerance() const { return golden.dtype == DType::F16 ? 2e-3 : 1e-2; }
};

/// The step as the goldens define it, op by op; the tensors by golden name.
std::map<std::string, Bits> runOps(const Case &c, Precision precision) {
  const GoldenDecodeStep &g = c.golden;
  const FrontHalfConfig &f = c.reference;
  const int64_t B = g.batch, H = g.hidden, Hq = g.dims.numQHeads,
                Hkv = g.dims.numKVHeads, D = g.dims.headDim;
  // One page per sequence, as long as the longest sequence.
  const int64_t P = *std::max_element(g.seqLens.begin(), g.seqLens.end());
  Bits kCache(B * P * Hkv * D), vCache(kCache.size());
  std::vector<int32_t> table(B);
  for (int64_t b = 0; b < B; ++b) {
    table[b] = static_cast<int32_t>(b);
    std::copy(g.kHistory[b].begin(), g.kHistory[b].end(),
              kCache.begin() + kvCacheOffset(b, 0, 0, P, Hkv, D));
    std::copy(g.vHistory[b].begin(), g.vHistory[b].end(),
              vCache.begin() + kvCacheOffset(b, 0, 0, P, Hkv, D));
  }
  PagedKVCache cache{kCache.data(), vCache.data(), B, P, Hkv, D};
  BlockTable bt{table.data(), 1};

  std::map<std::string, Bits> t;
  for (auto [name, n] : {std::pair{"normed", B * H},
                         {"q", B * Hq * D},
                         {"k", B * Hkv * D},
                         {"v", B * Hkv * D},
                         {"q_rot", B * Hq * D},
                         {"k_rot", B * Hkv * D},
                         {"attn_output", B * Hq * D}})
    t[name].resize(static_cast<size_t>(n));
  const Bits *bias = c.weights.qkvBias.empty() ? nullptr : &c.weights.qkvBias;
  rmsnorm(g.dtype, B, H, g.hiddenStates.data(), nullptr,
          c.weights.normWeight.data(), t["normed"].data(), nullptr,
          f.normOptions, precision);
  qkvProj(g.dtype, B, H, g.dims, t["normed"].data(), c.weights.qkvWeight.data(),
          bias ? bias->data() : nullptr, t["q"].data(), t["k"].data(),
          t["v"].data(), precision);
  rope(g.dtype, B, g.dims, t["q"].data(), t["k"].data(), g.positions.data(),
       t["q_rot"].data(), t["k_rot"].data(), f.rope, precision);
  kvAppend(B, t["k_rot"].data(), t["v"].data(), g.historyLens.data(), bt,
           cache);
  decodeAttention(g.dtype, B, Hq, t["q_rot"].data(), cache, bt,
                  g.seqLens.data(), t["attn_output"].data(), f.attention,
                  precision);
  return t;
}

void printRow(const std::string &model, DType dtype, const char *precision,
              const std::string &tensor, const char *against,
              const ErrorStats &s, double bound) {
  std::printf("| %s | %s | %s | %s | %s | %.2e | %.2e | %.0e | %s |\n",
              model.c_str(), dtype == DType::F16 ? "f16" : "bf16", precision,
              tensor.c_str(), against, s.rel, s.maxAbs, bound,
              s.rel < bound && s.nonFinite == 0 ? "ok" : "FAIL");
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, ReferenceMatchesTransformersAndFloat64) {
  const Case c(GetParam());
  const GoldenDecodeStep &g = c.golden;
  const double tol = c.tolerance();
  EXPECT_EQ(g.hidden, c.config.hiddenSize);
  EXPECT_EQ(g.dims.numQHeads, c.config.numAttentionHeads);
  EXPECT_EQ(g.dims.numKVHeads, c.config.numKeyValueHeads);
  EXPECT_EQ(g.dims.headDim, c.config.headDim);

  // inv_freq: the reference's fp32 sequence is transformers' bit for bit.
  std::vector<double> inv = ropeInvFreq(c.reference.rope, g.dims.headDim);
  EXPECT_EQ(inv, g.invFreq);

  std::printf("| model | dtype | reference | tensor | against | rel err "
              "(worst seq) | max abs err | bound | result |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  for (Precision p : {Precision::F32, Precision::F64}) {
    const char *pname = p == Precision::F32 ? "F32" : "F64";
    std::map<std::string, Bits> out = runOps(c, p);
    for (const char *name :
         {"normed", "q", "k", "v", "q_rot", "k_rot", "attn_output"}) {
      const Bits &want = g.tensor(name);
      ErrorStats s = worstRow(
          toDoubles(g.dtype, out[name].data(),
                    static_cast<int64_t>(want.size())),
          toDoubles(g.dtype, want.data(), static_cast<int64_t>(want.size())),
          g.batch);
      printRow(GetParam(), g.dtype, pname, name, "transformers", s, tol);
      EXPECT_EQ(s.nonFinite, 0) << name;
      EXPECT_LT(s.rel, tol) << pname << " " << name << " vs transformers";
    }
    const Bits &o = out["attn_output"];
    ErrorStats s =
        worstRow(toDoubles(g.dtype, o.data(), static_cast<int64_t>(o.size())),
                 g.attnOutputF64, g.batch);
    printRow(GetParam(), g.dtype, pname, "attn_output", "float64", s, tol);
    EXPECT_EQ(s.nonFinite, 0);
    EXPECT_LT(s.rel, tol) << pname << " attn_output vs attn_output_f64";
  }
  std::fflush(stdout);
}

/// decodeLayerFrontHalf on the layout fusion-run gives compiled functions
/// (append at the RoPE position): the same K/V rows and intermediates as
/// the op-by-op step, and an attention output within the bound of the
/// float64 golden for every sequence whose window holds the golden's tokens.
TEST_P(GoldenTest, CompiledFunctionLayoutMatches) {
  const Case c(GetParam());
  const GoldenDecodeStep &g = c.golden;
  const int64_t B = g.batch, Hq = g.dims.numQHeads, Hkv = g.dims.numKVHeads,
                D = g.dims.headDim;
  const std::map<std::string, Bits> ops = runOps(c, Precision::F32);
  // 100000 = 6250 * 16 = 3125 * 32: sequence 3's new token takes window
  // slot 0; at 64 (100000 % 64 = 32, 4 tokens) it cannot.
  std::string msg =
      EXPECT_THROW_MSG(UnsupportedError, layoutGoldenCache(g, 64));
  EXPECT_CONTAINS(msg, "sequence 3: RoPE position 100000 is slot 32 of its "
                       "page of 64 tokens, outside the window of 4 tokens");
  for (int64_t pageSize : {16, 32, 4}) {
    SCOPED_TRACE("page size " + std::to_string(pageSize));
    GoldenCacheLayout l = layoutGoldenCache(g, pageSize);
    ASSERT_EQ(l.notes.size(), static_cast<size_t>(B));
    EXPECT_EQ(l.maxPages, 100000 / pageSize + 1);
    EXPECT_CONTAINS(l.notes[3], "mapped onto the page of window slot 0");
    FrontHalfInputs in;
    in.x = g.hiddenStates.data();
    in.normWeight = c.weights.normWeight.data();
    in.qkvWeight = c.weights.qkvWeight.data();
    in.qkvBias = c.weights.qkvBias.empty() ? nullptr : c.weights.qkvBias.data();
    in.positions = l.positions.data();
    in.seqLens = l.seqLens.data();
    in.blockTable = {l.blockTable.data(), l.maxPages};
    PagedKVCache cache{
        l.keyCache.data(), l.valueCache.data(), l.numPages, pageSize, Hkv, D};
    Bits attn(B * Hq * D), normed(B * g.hidden), qRot(B * Hq * D),
        kRot(B * Hkv * D), v(B * Hkv * D), q(B * Hq * D), k(B * Hkv * D);
    FrontHalfOutputs outs;
    outs.attnOut = attn.data();
    outs.normed = normed.data();
    outs.q = qRot.data();
    outs.k = kRot.data();
    outs.v = v.data();
    outs.qProj = q.data();
    outs.kProj = k.data();
    decodeLayerFrontHalf(c.reference, B, in, cache, outs);
    EXPECT_EQ(normed, ops.at("normed"));
    EXPECT_EQ(q, ops.at("q"));
    EXPECT_EQ(k, ops.at("k"));
    EXPECT_EQ(qRot, ops.at("q_rot"));
    EXPECT_EQ(kRot, ops.at("k_rot"));
    EXPECT_EQ(v, ops.at("v"));
    for (int64_t b = 0; b < B; ++b) {
      // The K/V rows in the cache where the function writes them.
      int64_t off = l.newTokenOffset(b, g.dims);
      EXPECT_EQ(
          Bits(l.keyCache.begin() + off, l.keyCache.begin() + off + Hkv * D),
          Bits(kRot.begin() + b * Hkv * D, kRot.begin() + (b + 1) * Hkv * D));
      EXPECT_EQ(Bits(l.valueCache.begin() + off,
                     l.valueCache.begin() + off + Hkv * D),
                Bits(v.begin() + b * Hkv * D, v.begin() + (b + 1) * Hkv * D));
      std::vector<double> got =
          toDoubles(g.dtype, attn.data() + b * Hq * D, Hq * D);
      ErrorStats s = compareValues(got.data(),
                                   g.attnOutputF64.data() + b * Hq * D, Hq * D);
      EXPECT_LT(s.rel, c.tolerance()) << l.notes[b];
      // Only the order of the attention sums differs from the op-by-op
      // step: at most a few units of the last place.
      ErrorStats vsOps =
          compareTensors(g.dtype, attn.data() + b * Hq * D,
                         ops.at("attn_output").data() + b * Hq * D, Hq * D);
      EXPECT_LT(vsOps.rel, g.dtype == DType::F16 ? 1e-3 : 8e-3) << l.notes[b];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, GoldenTest,
                         ::testing::Values("llama3_gqa", "qwen2_bias_g7",
                                           "llama_hd64", "llama_bf16"),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                           return i.param;
                         });

TEST(GoldenFile, MissingTensorIsNamed) {
  std::string msg = EXPECT_THROW_MSG(
      FormatError,
      GoldenDecodeStep::load(goldenDir("llama3_gqa") + "/model.safetensors"));
  EXPECT_CONTAINS(msg, "hidden_states");
}

} // namespace
