//===- ReferenceRunnerTest.cpp - the reference of a compiled layer --------===//

#include "TestUtil.h"

#include "fusion/runtime/Error.h"
#include "fusion/tooling/ReferenceRunner.h"

#include <gtest/gtest.h>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using namespace fusion::tooling;

namespace {

ref::FrontHalfConfig llamaLike() {
  ref::FrontHalfConfig c;
  c.hidden = 64;
  c.dims = {4, 2, 16};
  c.normOptions.eps = 1e-5;
  c.rope.theta = 500000;
  return c;
}

TEST(ReferenceRunner, ConfigMismatchesCompareEpsAndThetaAsFloat32) {
  ref::FrontHalfConfig ops = llamaLike(), cfg = llamaLike();
  EXPECT_TRUE(configMismatches(ops, cfg).empty());
  // A GGUF-converted config's float32(1e-5) is the same eps.
  cfg.normOptions.eps = 9.999999747378752e-06;
  EXPECT_TRUE(configMismatches(ops, cfg).empty());
  cfg.rope.theta = 1000000;
  cfg.dims.numKVHeads = 8;
  EXPECT_EQ(
      configMismatches(ops, cfg),
      (std::vector<std::string>{"num_key_value_heads: kernels 2, config 8",
                                "rope_theta: kernels 500000, config 1000000"}));
  cfg = llamaLike();
  cfg.rope.llama3 = ref::Llama3RopeScaling{};
  EXPECT_EQ(configMismatches(ops, cfg),
            (std::vector<std::string>{
                "llama3 rope scaling: kernels no, config yes"}));
}

TEST(ReferenceRunner, ResolveReference) {
  FrontHalfSignature sig;
  sig.hidden = 64;
  sig.dims = {4, 2, 16};
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       resolveReference(sig, std::nullopt, "", "m.json")),
      "m.json lists no op attributes");
  sig.reference = llamaLike();
  sig.reference->hidden = 0; // filled in from the signature
  ReferenceSetup r = resolveReference(sig, std::nullopt, "", "m.json");
  EXPECT_EQ(r.origin, "the manifest's op attributes");
  EXPECT_EQ(r.config.hidden, 64);
  EXPECT_EQ(r.config.rope.theta, 500000);
  EXPECT_EQ(describeReference(r.config),
            "rmsnorm eps 1e-05, rope neox theta 500000");
}

TEST(ReferenceRunner, ByGoldenName) {
  RefOutputs r;
  r.normed = {1};
  r.qProj = {2};
  r.kProj = {3};
  r.qRot = {4};
  r.k = {5};
  r.v = {6};
  r.out = {7};
  EXPECT_EQ(r.byGoldenName("normed"), r.normed);
  EXPECT_EQ(r.byGoldenName("q"), r.qProj);
  EXPECT_EQ(r.byGoldenName("k"), r.kProj);
  EXPECT_EQ(r.byGoldenName("q_rot"), r.qRot);
  EXPECT_EQ(r.byGoldenName("k_rot"), r.k);
  EXPECT_EQ(r.byGoldenName("v"), r.v);
  EXPECT_EQ(r.byGoldenName("attn_output"), r.out);
}

TEST(ReferenceRunner, RowsInParallelEqualOneBatchedCall) {
  ref::FrontHalfConfig cfg = llamaLike();
  FrontHalfSignature sig;
  sig.dtype = DType::F16;
  sig.hidden = 64;
  sig.dims = cfg.dims;
  sig.pageSize = 4;
  sig.residual = 1;
  Random rng(9);
  RandomHistory h = fillRandomHistory({3, 0, 9, 4, 17}, 20, sig, rng);
  HostStep s = randomStep(h, rng, sig, 6);
  Weights w;
  w.norm = rng.tensor(DType::F16, 64, 0.5, 1.5);
  w.qkv = rng.tensor(DType::F16, 128 * 64, -0.2, 0.2);
  std::vector<uint16_t> k1 = h.keyCache, v1 = h.valueCache;
  std::vector<uint16_t> k2 = h.keyCache, v2 = h.valueCache;
  ref::PagedKVCache c1{k1.data(), v1.data(), 20, 4, 2, 16};
  ref::PagedKVCache c2{k2.data(), v2.data(), 20, 4, 2, 16};
  RefOutputs r = runReference(cfg, w, s, c1, true, ref::Precision::F32);
  // The same step in one call of the reference over the whole batch.
  std::vector<uint16_t> out(5 * 64), res(5 * 64), kNew(5 * 32), vNew(5 * 32);
  ref::FrontHalfInputs in;
  in.x = s.x.data();
  in.residual = s.residual.data();
  in.normWeight = w.norm.data();
  in.qkvWeight = w.qkv.data();
  in.positions = s.view.positions.data();
  in.seqLens = s.view.seq_lens.data();
  in.blockTable = {s.view.block_table.data(), s.view.max_pages};
  ref::FrontHalfOutputs o;
  o.attnOut = out.data();
  o.residualOut = res.data();
  o.k = kNew.data();
  o.v = vNew.data();
  ref::decodeLayerFrontHalf(cfg, 5, in, c2, o, ref::Precision::F32);
  EXPECT_EQ(r.out, out);
  EXPECT_EQ(r.residualOut, res);
  EXPECT_EQ(r.k, kNew);
  EXPECT_EQ(r.v, vNew);
  EXPECT_EQ(k1, k2);
}

} // namespace
