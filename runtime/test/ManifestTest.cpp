//===- ManifestTest.cpp - manifests and PTX signatures --------------------===//

#include "fusion/runtime/Manifest.h"
#include "fusion/runtime/Error.h"

#include "ActivationMaps.h"
#include "CacheMaps.h"
#include "TestUtil.h"

#include <nlohmann/json.hpp>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using nlohmann::json;

namespace {

json tinyJson() {
  return json::parse(readText(dataPath("tiny_decode.manifest.json")));
}

/// Parses `j` as a manifest called "m.json".
Manifest parseJson(const json &j) {
  return Manifest::parse(j.dump(), "m.json");
}

/// The tiny manifest with kernel 0's variants (the compiler's
/// decode_layer_k0_fused_gemm{16,32,64} from batch 2, 17 and 33) replaced by
/// two constructed ones:
/// a tensor-core launch from batch 8 (more than 48 KiB of dynamic shared
/// memory, a grid that grows with the batch) and one from batch 64 (only the
/// required members).
json tinyJsonWithVariants() {
  json j = tinyJson();
  j["kernels"][0]["variants"] = json::array(
      {{{"min_batch", 8},
        {"entry", "decode_layer_k0_fused_tc"},
        {"grid", {48, "batch", 1}},
        {"block", {128, 1, 1}},
        {"dynamic_shared_bytes", 135168},
        {"static_shared_bytes", 16},
        {"schedule", {{"kind", "projection_mma"}, {"batch_tile", 16}}}},
       {{"min_batch", 64},
        {"entry", "decode_layer_k0_fused_tc64"},
        {"grid", {96, 1, 1}},
        {"block", {256, 1, 1}}}});
  return j;
}

} // namespace

// fusion-compile's manifest for runtime/test/data/tiny_decode.mlir (hidden
// 64, 4 query and 2 KV heads of 16, pages of 4 tokens, f16, sm_90, strategy
// decode): the fused front half (kernel 0) and split-KV attention (kernel 1).
TEST(Manifest, ParsesTheTinyManifest) {
  Manifest m = Manifest::load(dataPath("tiny_decode.manifest.json"));
  EXPECT_EQ(m.version, 2);
  // The hash of the PTX written with it.
  EXPECT_EQ(m.ptxFingerprint,
            ptxFingerprintHex(readText(dataPath("tiny_decode.ptx"))));
  EXPECT_EQ(m.ptx, "tiny_decode.ptx");
  EXPECT_EQ(m.chip, "sm_90");
  EXPECT_EQ(m.strategy, "decode");
  ASSERT_EQ(m.functions.size(), 1u);
  const ManifestFunction &f = m.function();
  EXPECT_EQ(&f, &m.function("decode_layer"));
  EXPECT_EQ(f.arguments.size(), 9u);
  EXPECT_EQ(f.arguments[6].name, "block_table");
  EXPECT_EQ(shapeString(f.arguments[6].shape), "[batch, max_pages]");
  EXPECT_EQ(f.arguments[7].kind, "buffer");
  EXPECT_EQ(shapeString(f.arguments[7].shape), "[num_pages, 4, 2, 16]");
  EXPECT_EQ(f.kernels, (std::vector<int>{0, 1}));
  // Result 0, the attention output, is kernel 1's; result 1 (%h, the
  // residual sum) is kernel 0's result 0 (docs/abi.md section 4).
  ASSERT_EQ(f.results.size(), 2u);
  EXPECT_EQ(f.results[0].source.kind, Binding::Kind::KernelResult);
  EXPECT_EQ(f.results[0].source.index, 1);
  EXPECT_EQ(f.results[1].source.index, 0);
  EXPECT_EQ(f.results[1].source.result, 0);

  ASSERT_EQ(m.kernels.size(), 2u);
  // Kernel 0: rmsnorm + residual -> qkv_proj -> rope -> kv_append. Its
  // 64 row pairs (128 packed q/k/v rows) over 2 warps of 64 threads (the
  // emitter halves its 8 warps while that leaves SMs idle at batch 1) are
  // 32 CTAs; static shared memory is one normalised row (64 f16) and a
  // float per warp.
  const ManifestKernel &k0 = m.kernels[0];
  EXPECT_EQ(k0.entry, "decode_layer_k0_fused");
  EXPECT_EQ(k0.grid[0].value, 32);
  EXPECT_EQ(k0.block, (std::array<int64_t, 3>{64, 1, 1}));
  EXPECT_EQ(k0.staticSharedBytes, 64 * 2 + 2 * 4);
  // 10 buffers, the 3 workspaces of the GEMM-shaped variants, the tensor
  // map of the qkv weight they stage by TMA, 2 scalars.
  EXPECT_EQ(k0.params.size(), 16u);
  EXPECT_FALSE(k0.usesNumSplits());
  EXPECT_TRUE(k0.usesMaxPages());
  EXPECT_EQ(k0.maxSplits(), 1);
  // Outputs in result order: residual_out (result 0), the rotated query.
  EXPECT_EQ(k0.numOutputs(), 2);
  EXPECT_EQ(k0.output(0)->role, "residual_out");
  EXPECT_EQ(k0.output(1)->role, "query");
  EXPECT_EQ(k0.scheduleStrings.at("kind"), "projection");
  EXPECT_EQ(k0.label(), "kernel 0 (decode_layer_k0_fused)");
  EXPECT_TRUE(k0.programmaticDependentLaunch); // an sm_90 build
  // From batch 2, 17 and 33 the GEMM-shaped projection in token tiles of
  // 16, 32 and 64, with the same parameters: the 128 rows are one tile of 8
  // warps (8 heads of 16), and hidden 64 is one 64-element stage, so no
  // split-K: one CTA.
  ASSERT_EQ(k0.variants.size(), 3u);
  EXPECT_EQ(k0.variants[0].minBatch, 2);
  EXPECT_EQ(k0.variants[0].entry, "decode_layer_k0_fused_gemm16");
  EXPECT_EQ(k0.variants[0].block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(k0.variants[0].grid[0].value, 1);
  EXPECT_EQ(k0.variants[0].scheduleStrings.at("kind"), "projection_gemm");
  EXPECT_EQ(k0.variants[1].minBatch, 17);
  EXPECT_EQ(k0.variants[2].minBatch, 33);
  EXPECT_EQ(k0.variants[2].entry, "decode_layer_k0_fused_gemm64");
  // Workspaces: partial_out f32 [batch, 1 split, 128 rows], partial_stats
  // f32 [batch, 1 tile x 1 split], split_counters i32 [batch, 1 tile].
  const ManifestParam &partials = k0.params[10];
  EXPECT_EQ(partials.role, "partial_out");
  EXPECT_EQ(partials.bytes(Symbols{3, 4, 5, 100}), 3 * 1 * 128 * 4);
  EXPECT_EQ(k0.params[11].role, "partial_stats");
  EXPECT_EQ(k0.params[12].role, "split_counters");
  EXPECT_TRUE(k0.params[12].zeroInit);

  // Kernel 1: split-KV attention on a grid [num_splits, num_kv_heads (2) *
  // head_blocks (1), batch]; max_splits and target_ctas (2 per SM of 132)
  // are the contract's SplitPolicy defaults.
  const ManifestKernel &k1 = m.kernels[1];
  EXPECT_EQ(k1.entry, "decode_layer_k1_decode_attention");
  EXPECT_EQ(k1.grid[0].symbol, "num_splits");
  EXPECT_EQ(k1.grid[1].value, 2);
  EXPECT_EQ(k1.grid[2].symbol, "batch");
  EXPECT_TRUE(k1.usesNumSplits());
  EXPECT_EQ(k1.maxSplits(), 64);
  EXPECT_EQ(k1.scheduleInts.at("target_ctas"), 264);
  EXPECT_EQ(k1.scheduleInts.at("heads_per_cta"), 2); // 4 query heads / 2
  EXPECT_TRUE(k1.variants.empty());
  const ManifestParam &q = k1.params[0];
  EXPECT_EQ(q.kind, ParamKind::Input);
  EXPECT_EQ(q.binding.kind, Binding::Kind::KernelResult);
  EXPECT_EQ(q.binding.str(), "result 1 of kernel 0");
  const ManifestParam &counters = k1.params[8];
  EXPECT_EQ(counters.kind, ParamKind::Workspace);
  EXPECT_TRUE(counters.zeroInit);
  EXPECT_EQ(counters.dtype, ElemType::I32);
  Symbols s{3, 4, 5, 100};
  EXPECT_EQ(counters.bytes(s), 3 * 2 * 4);
  EXPECT_EQ(k1.gridFor(s), (std::array<int64_t, 3>{4, 2, 3}));
  // partial_out: f32 [batch, 4 heads, max_splits, 16].
  EXPECT_EQ(k1.params[6].bytes(s), 3 * 4 * 64 * 16 * 4);
}

TEST(Manifest, ParsesVariants) {
  Manifest m = parseJson(tinyJsonWithVariants());
  const ManifestKernel &k0 = m.kernels[0];
  ASSERT_EQ(k0.variants.size(), 2u);
  const ManifestVariant &tc = k0.variants[0];
  EXPECT_EQ(tc.minBatch, 8);
  EXPECT_EQ(tc.entry, "decode_layer_k0_fused_tc");
  EXPECT_EQ(tc.grid[0].value, 48);
  EXPECT_EQ(tc.grid[1].symbol, "batch");
  EXPECT_EQ(tc.block, (std::array<int64_t, 3>{128, 1, 1}));
  EXPECT_EQ(tc.dynamicSharedBytes, 135168);
  EXPECT_EQ(tc.staticSharedBytes, 16);
  EXPECT_EQ(tc.scheduleStrings.at("kind"), "projection_mma");
  EXPECT_EQ(tc.scheduleInts.at("batch_tile"), 16);
  EXPECT_EQ(tc.gridFor(Symbols{13, 1, 1, 1}),
            (std::array<int64_t, 3>{48, 13, 1}));
  const ManifestVariant &big = k0.variants[1];
  EXPECT_EQ(big.minBatch, 64);
  EXPECT_EQ(big.grid[1].value, 1); // missing dimensions are 1
  EXPECT_EQ(big.block[0], 256);
  EXPECT_EQ(big.dynamicSharedBytes, 0);
  EXPECT_EQ(big.scheduleJson, "{}");
  // The primary launch is unchanged; kernel 1 has no variants.
  EXPECT_EQ(k0.entry, "decode_layer_k0_fused");
  EXPECT_EQ(k0.block[0], 64);
  EXPECT_TRUE(m.kernels[1].variants.empty());
  EXPECT_EQ(k0.label(0), "kernel 0 (decode_layer_k0_fused) variant min_batch "
                         "8 (decode_layer_k0_fused_tc)");
  EXPECT_EQ(k0.label(-1), k0.label());
}

TEST(Manifest, ParsesProgrammaticDependentLaunch) {
  // An sm_90 build marks both kernels; the member is optional (false when
  // absent, as in builds for older chips): constructed here for kernel 0.
  json j = tinyJson();
  Manifest both = parseJson(j);
  EXPECT_TRUE(both.kernels[0].programmaticDependentLaunch);
  EXPECT_TRUE(both.kernels[1].programmaticDependentLaunch);
  j["kernels"][0].erase("programmatic_dependent_launch");
  Manifest m = parseJson(j);
  EXPECT_FALSE(m.kernels[0].programmaticDependentLaunch);
  EXPECT_TRUE(m.kernels[1].programmaticDependentLaunch);
  j["kernels"][1]["programmatic_dependent_launch"] = 1;
  EXPECT_CONTAINS(EXPECT_THROW_MSG(FormatError, parseJson(j)),
                  "m.json: kernels[1].programmatic_dependent_launch: "
                  "expected true or false");
}

TEST(Manifest, SelectsTheLaunchForABatch) {
  Manifest m = parseJson(tinyJsonWithVariants());
  const ManifestKernel &k0 = m.kernels[0];
  // Below the first min_batch: the primary launch.
  for (int64_t batch : {1, 2, 7}) {
    SCOPED_TRACE(batch);
    EXPECT_EQ(k0.variantFor(batch), -1);
    EXPECT_EQ(&k0.launchFor(batch), static_cast<const LaunchGeometry *>(&k0));
  }
  // At and above a boundary: the last variant whose min_batch <= batch.
  EXPECT_EQ(k0.variantFor(8), 0);
  EXPECT_EQ(k0.launchFor(8).entry, "decode_layer_k0_fused_tc");
  EXPECT_EQ(k0.variantFor(13), 0);
  EXPECT_EQ(k0.variantFor(63), 0);
  EXPECT_EQ(k0.launchFor(63).dynamicSharedBytes, 135168);
  EXPECT_EQ(k0.variantFor(64), 1);
  EXPECT_EQ(k0.launchFor(64).entry, "decode_layer_k0_fused_tc64");
  EXPECT_EQ(k0.variantFor(100000), 1);
  // A kernel without variants always launches itself.
  const ManifestKernel &k1 = m.kernels[1];
  EXPECT_EQ(k1.variantFor(1000), -1);
  EXPECT_EQ(&k1.launchFor(1000), static_cast<const LaunchGeometry *>(&k1));
}

TEST(Manifest, VariantErrorsNameTheFileAndPath) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *expected;
  };
  const Case cases[] = {
      {"not an array",
       [](json &j) {
         j["kernels"][0]["variants"] = {{"min_batch", 8}};
       },
       "m.json: kernels[0].variants: expected an array"},
      {"min_batch below 2",
       [](json &j) { j["kernels"][0]["variants"][0]["min_batch"] = 1; },
       "m.json: kernels[0].variants[0].min_batch: min_batch 1 is below 2"},
      {"min_batch not an integer",
       [](json &j) { j["kernels"][0]["variants"][0]["min_batch"] = "8"; },
       "kernels[0].variants[0].min_batch: expected an integer"},
      {"missing min_batch",
       [](json &j) { j["kernels"][0]["variants"][1].erase("min_batch"); },
       "kernels[0].variants[1]: missing member \"min_batch\""},
      {"equal min_batch",
       [](json &j) { j["kernels"][0]["variants"][1]["min_batch"] = 8; },
       "kernels[0].variants[1].min_batch: min_batch 8 after min_batch 8 "
       "(variants are in strictly ascending min_batch)"},
      {"descending min_batch",
       [](json &j) { j["kernels"][0]["variants"][1]["min_batch"] = 4; },
       "kernels[0].variants[1].min_batch: min_batch 4 after min_batch 8"},
      {"empty entry",
       [](json &j) { j["kernels"][0]["variants"][0]["entry"] = ""; },
       "kernels[0].variants[0].entry: empty entry name"},
      {"missing entry",
       [](json &j) { j["kernels"][0]["variants"][0].erase("entry"); },
       "kernels[0].variants[0]: missing member \"entry\""},
      {"bad grid name",
       [](json &j) { j["kernels"][0]["variants"][0]["grid"][1] = "max_pages"; },
       "kernels[0].variants[0].grid[1]: unknown size \"max_pages\""},
      {"too many threads",
       [](json &j) {
         j["kernels"][0]["variants"][0]["block"] = {2048, 1, 1};
       },
       "kernels[0].variants[0].block[0]: value 2048 is outside [1, 1024]"},
      {"negative shared memory",
       [](json &j) {
         j["kernels"][0]["variants"][0]["dynamic_shared_bytes"] = -1;
       },
       "kernels[0].variants[0].dynamic_shared_bytes: value -1 is outside"},
      {"clustered attention variant not over num_splits",
       [](json &j) {
         j["kernels"][1]["variants"] =
             json::array({{{"min_batch", 4},
                           {"entry", "decode_layer_k1_decode_attention_mma"},
                           {"grid", {4, 2, "batch"}},
                           {"block", {128, 1, 1}},
                           {"schedule", {{"cluster_splits", 8}}}}});
       },
       "kernels[1].variants[0].grid: a launch with cluster_splits needs grid "
       "x = num_splits, got 4"},
      {"entry shared with another signature",
       [](json &j) {
         j["kernels"][1]["variants"] =
             json::array({j["kernels"][0]["variants"][0]});
         j["kernels"][1]["variants"][0]["entry"] = "decode_layer_k0_fused";
       },
       "kernels[1].variants[0].entry: entry \"decode_layer_k0_fused\" is "
       "shared with kernel 0 but the parameters differ"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    json j = tinyJsonWithVariants();
    c.mutate(j);
    std::string msg = EXPECT_THROW_MSG(FormatError, parseJson(j));
    EXPECT_CONTAINS(msg, c.expected);
  }
}

/// The tiny manifest with its 16-token GEMM variant split over k in 4 CTAs
/// per row tile (one row tile: grid 4) that combine through a cluster.
static json clusterKSplitManifest() {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  json &v = j["kernels"][0]["variants"][0];
  v["grid"] = {4, 1, 1};
  v["schedule"]["grid"] = 4;
  v["schedule"]["k_split"] = 4;
  v["schedule"]["cluster_k_split"] = true;
  return j;
}

TEST(Manifest, ParsesClusterKSplit) {
  Manifest m = parseJson(clusterKSplitManifest());
  const ManifestKernel &k = m.kernels[0];
  EXPECT_TRUE(k.variants[0].clusterKSplit);
  EXPECT_FALSE(k.variants[1].clusterKSplit);
  EXPECT_FALSE(k.clusterKSplit);
  // The row tile's 4 CTAs as one cluster from batch 2 (the variant), none
  // at batch 1 (the primary launch) or batch 17 (the 32-token variant).
  EXPECT_EQ(k.clusterXFor(2, 1), 4);
  EXPECT_EQ(k.clusterXFor(1, 1), 1);
  EXPECT_EQ(k.clusterXFor(17, 1), 1);
}

TEST(Manifest, ClusterKSplitErrorsNameTheLaunch) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *expected;
  };
  const Case cases[] = {
      {"k split of one", [](json &v) { v["schedule"]["k_split"] = 1; },
       "m.json: kernels[0].variants[0].schedule: cluster_k_split needs a "
       "projection_gemm schedule with k_split in [2, 8]"},
      {"k split past the portable cluster",
       [](json &v) {
         v["schedule"]["k_split"] = 16;
         v["grid"] = {16, 1, 1};
       },
       "k_split in [2, 8]"},
      {"another kind",
       [](json &v) { v["schedule"]["kind"] = "projection_mma"; },
       "needs a projection_gemm schedule"},
      {"not a bool", [](json &v) { v["schedule"]["cluster_k_split"] = 1; },
       "kernels[0].variants[0].schedule.cluster_k_split: expected"},
      {"grid not a multiple of the split",
       [](json &v) {
         v["grid"] = {6, 1, 1};
       },
       "kernels[0].variants[0].grid: a launch with cluster_k_split needs "
       "a constant grid [x, 1, 1] with x a multiple of k_split (4)"},
      {"grid over the batch",
       [](json &v) {
         v["grid"] = {4, 1, "batch"};
       },
       "a constant grid [x, 1, 1]"},
      {"shared memory without room for the exchange",
       [](json &v) { v["dynamic_shared_bytes"] = 8000; },
       "kernels[0].variants[0].schedule: cluster_k_split needs 8512 bytes "
       "of dynamic shared memory for its exchange, got 8000"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    json j = clusterKSplitManifest();
    c.mutate(j["kernels"][0]["variants"][0]);
    std::string msg = EXPECT_THROW_MSG(FormatError, parseJson(j));
    EXPECT_CONTAINS(msg, c.expected);
  }
}

TEST(Manifest, DimsAndSymbols) {
  Symbols s{2, 3, 4, 5};
  EXPECT_EQ(s.lookup("batch"), 2);
  EXPECT_EQ(s.lookup("num_splits"), 3);
  EXPECT_EQ(s.lookup("max_pages"), 4);
  EXPECT_EQ(s.lookup("num_pages"), 5);
  EXPECT_FALSE(s.lookup("seq_len").has_value());
  Dim d{0, "max_pages"};
  EXPECT_EQ(d.evaluate(s), 4);
  EXPECT_EQ((Dim{7, ""}.evaluate(s)), 7);
  std::vector<Dim> shape = {{0, "batch"}, {0, "max_pages"}, {3, ""}};
  EXPECT_EQ(numElements(shape, s), 24);
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, (Dim{0, "seq_len"}.evaluate(s)));
  EXPECT_CONTAINS(msg, "unknown run-time size \"seq_len\"");
  EXPECT_EQ(elemTypeSize(ElemType::BF16), 2);
  EXPECT_EQ(elemTypeSize(ElemType::F32), 4);
  EXPECT_EQ(parseElemType("bf16"), ElemType::BF16);
  EXPECT_FALSE(parseElemType("f64").has_value());
}

TEST(Manifest, AcceptsOptionalMembersAndDecimalStrings) {
  json j = tinyJson();
  j["kernels"][0]["grid"] = json::array({"32", 1, "1"}); // as strings
  j["kernels"][0]["params"][8].erase("binding"); // outputs default in order
  j["kernels"][0]["params"][9].erase("binding");
  j["model"] = {{"hidden_size", 64}}; // unknown members are ignored
  j["extra"] = "ignored";
  Manifest m = parseJson(j);
  EXPECT_EQ(m.kernels[0].grid[0].value, 32);
  EXPECT_EQ(m.kernels[0].grid[2].value, 1);
  EXPECT_EQ(m.kernels[0].block[0], 64);
  EXPECT_EQ(m.kernels[0].params[8].binding.result, 0);
  EXPECT_EQ(m.kernels[0].params[9].binding.result, 1);
}

TEST(Manifest, ErrorsNameTheFileAndPath) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *expected;
  };
  const Case cases[] = {
      {"unknown size name",
       [](json &j) { j["kernels"][1]["params"][6]["shape"][0] = "dynamic"; },
       "m.json: kernels[1].params[6].shape[0]: unknown size \"dynamic\""},
      {"bad grid name",
       [](json &j) { j["kernels"][1]["grid"][0] = "max_pages"; },
       "kernels[1].grid[0]: unknown size \"max_pages\""},
      {"bad dtype",
       [](json &j) { j["kernels"][0]["params"][0]["dtype"] = "f64"; },
       "kernels[0].params[0].dtype: unsupported dtype \"f64\""},
      {"kinds out of ABI order",
       [](json &j) {
         std::swap(j["kernels"][0]["params"][9], j["kernels"][0]["params"][10]);
         j["kernels"][0]["params"][9]["index"] = 9;
         j["kernels"][0]["params"][10]["index"] = 10;
       },
       "kernels[0].params[10].kind: parameter of kind output after one of "
       "kind workspace"},
      {"unknown scalar",
       [](json &j) { j["kernels"][0]["params"][15]["role"] = "seq_len"; },
       "kernels[0].params[15].role: unknown scalar \"seq_len\""},
      {"input without binding",
       [](json &j) { j["kernels"][0]["params"][3].erase("binding"); },
       "kernels[0].params[3]: input \"qkv_weight\" has no binding"},
      {"untraceable input",
       [](json &j) {
         j["kernels"][0]["params"][3]["binding"] = {{"unknown", true}};
       },
       "kernels[0].params[3].binding: the compiler could not trace"},
      {"binding to a later kernel",
       [](json &j) {
         j["kernels"][0]["params"][0]["binding"] = {{"kernel", 1},
                                                    {"result", 0}};
       },
       "kernels[0].params[0].binding: kernel 1 is not an earlier kernel"},
      {"binding to a missing result",
       [](json &j) {
         j["kernels"][1]["params"][0]["binding"] = {{"kernel", 0},
                                                    {"result", 5}};
       },
       "kernels[1].params[0].binding: kernel 0 has no result 5"},
      {"binding to a missing argument",
       [](json &j) {
         j["kernels"][0]["params"][0]["binding"] = {{"argument", 9}};
       },
       "has only 9 arguments"},
      {"dtype differs from the source",
       [](json &j) { j["kernels"][1]["params"][0]["dtype"] = "bf16"; },
       "kernels[1].params[0]: dtype bf16 but its source (result 1 of kernel "
       "0) is f16"},
      {"element count differs from the source",
       // Kernel 0's query output (result 1) as [batch, 8, 16].
       [](json &j) { j["kernels"][0]["params"][9]["shape"][1] = 8; },
       "kernels[1].params[0]: shape [batch, 4, 16] but its source"},
      {"split-KV workspace not sized by max_splits",
       [](json &j) { j["kernels"][1]["params"][6]["shape"][2] = 4; },
       "kernels[1].params: split-KV attention needs a workspace "
       "\"partial_out\" of shape [batch, 4, 64, 16]"},
      {"split-KV statistics of the wrong width",
       [](json &j) { j["kernels"][1]["params"][7]["shape"][3] = 1; },
       "needs a workspace \"partial_stats\" of shape [batch, 4, 64, 2]"},
      {"split counters not per (sequence, grid y)",
       [](json &j) {
         j["kernels"][1]["params"][8]["shape"] = {"batch", 1};
       },
       "needs a workspace \"split_counters\" of shape [batch, 2]"},
      {"split counters not zero_init",
       [](json &j) { j["kernels"][1]["params"][8].erase("zero_init"); },
       "kernels[1].params: split_counters must be zero_init"},
      {"cluster of one split",
       [](json &j) { j["kernels"][1]["schedule"]["cluster_splits"] = 1; },
       "kernels[1].schedule: cluster_splits must be 0 or in [2, 8], got 1"},
      {"cluster past the portable size",
       [](json &j) { j["kernels"][1]["schedule"]["cluster_splits"] = 16; },
       "kernels[1].schedule: cluster_splits must be 0 or in [2, 8], got 16"},
      {"split-KV grid y other than num_kv_heads * head_blocks",
       [](json &j) { j["kernels"][1]["grid"][1] = 1; },
       "kernels[1].grid: split-KV attention runs on a grid [num_splits, 2 "
       "(num_kv_heads * head_blocks), batch]"},
      {"zero chunking parameter",
       [](json &j) { j["kernels"][1]["schedule"]["min_chunk_tokens"] = 0; },
       "kernels[1].schedule: split-KV attention needs a positive integer "
       "\"min_chunk_tokens\""},
      {"variant entry equal to the kernel's",
       [](json &j) {
         json v = j["kernels"][0];
         v.erase("params");
         v.erase("index");
         v["min_batch"] = 2;
         j["kernels"][0]["variants"] = json::array({v});
       },
       "kernels[0].variants[0].entry: variant entry "
       "\"decode_layer_k0_fused\" is the kernel's or another variant's"},
      {"num_splits without max_splits",
       [](json &j) { j["kernels"][1]["schedule"].erase("max_splits"); },
       "m.json: kernels[1]: the kernel uses num_splits but its schedule has "
       "no max_splits"},
      {"output out of order",
       [](json &j) {
         j["kernels"][0]["params"][8]["binding"] = {{"result", 1}};
       },
       "kernels[0].params[8].binding: output parameter should be result 0"},
      {"scalar with a binding",
       [](json &j) {
         j["kernels"][0]["params"][13]["binding"] = {{"argument", 0}};
       },
       "workspaces, tensor maps and scalars have no binding"},
      {"too many threads",
       [](json &j) {
         j["kernels"][0]["block"] = {2048, 1, 1};
       },
       "kernels[0].block[0]: value 2048 is outside [1, 1024]"},
      {"shared entry with another signature",
       [](json &j) { j["kernels"][1]["entry"] = "decode_layer_k0_fused"; },
       "kernels[1].entry: entry \"decode_layer_k0_fused\" is shared with "
       "kernel 0 but the parameters differ"},
      {"kernel launched twice",
       [](json &j) {
         j["functions"][0]["kernels"] = {0, 1, 1};
       },
       "functions[0].kernels[2]: kernel 1 is launched twice"},
      {"result from a missing kernel",
       [](json &j) {
         j["functions"][0]["results"][0]["source"] = {{"kernel", 4},
                                                      {"result", 0}};
       },
       "functions[0].results[0].source: kernel 4 is not launched"},
      {"wrong format", [](json &j) { j["format"] = "something-else"; },
       "m.json: format: not a fusion manifest"},
      {"missing member", [](json &j) { j["kernels"][0].erase("entry"); },
       "m.json: kernels[0]: missing member \"entry\""},
      {"index mismatch", [](json &j) { j["kernels"][1]["index"] = 3; },
       "kernels[1].index: kernel index 3 at position 1"},
      // Complete validation (issue 11): every member typed and in range.
      {"missing version", [](json &j) { j.erase("version"); },
       "m.json: missing member \"version\""},
      {"missing format", [](json &j) { j.erase("format"); },
       "m.json: missing member \"format\""},
      {"2-entry block",
       [](json &j) {
         j["kernels"][0]["block"] = {256, 1};
       },
       "kernels[0].block: expected 3 dimensions [threads, 1, 1], got 2"},
      {"block as a number", [](json &j) { j["kernels"][0]["block"] = 256; },
       "kernels[0].block: expected an array, got 256"},
      {"2-D block",
       [](json &j) {
         j["kernels"][0]["block"] = {128, 2, 1};
       },
       "kernels[0].block[1]: thread blocks are 1-D ([threads, 1, 1]), got 2"},
      {"1-entry grid", [](json &j) { j["kernels"][0]["grid"] = {32}; },
       "kernels[0].grid: expected 3 dimensions [x, y, z], got 1"},
      {"grid y past the CUDA limit",
       [](json &j) { j["kernels"][0]["grid"][1] = 65536; },
       "kernels[0].grid[1]: grid dimension 65536 is outside the CUDA limit "
       "[1, 65535]"},
      {"zero grid", [](json &j) { j["kernels"][0]["grid"][0] = 0; },
       "kernels[0].grid[0]: value 0 is outside [1, 2147483647]"},
      {"dynamic shared memory past the hardware",
       [](json &j) { j["kernels"][0]["dynamic_shared_bytes"] = 2147483647; },
       "kernels[0].dynamic_shared_bytes: 2147483647 bytes of dynamic shared "
       "memory plus 136 static exceed the 232448 bytes (227 KiB, sm_90)"},
      {"static shared memory past 48 KiB",
       [](json &j) { j["kernels"][0]["static_shared_bytes"] = 49153; },
       "kernels[0].static_shared_bytes: value 49153 is outside [0, 49152]"},
      {"unknown argument kind",
       [](json &j) { j["functions"][0]["arguments"][0]["kind"] = "pointer"; },
       "functions[0].arguments[0].kind: unknown argument kind \"pointer\""},
      {"missing argument kind",
       [](json &j) { j["functions"][0]["arguments"][0].erase("kind"); },
       "functions[0].arguments[0]: missing member \"kind\""},
      {"missing argument role",
       [](json &j) { j["functions"][0]["arguments"][0].erase("role"); },
       "functions[0].arguments[0]: missing member \"role\""},
      {"unknown argument role",
       [](json &j) { j["functions"][0]["arguments"][0]["role"] = "hidden"; },
       "functions[0].arguments[0].role: unknown argument role \"hidden\""},
      {"argument role disagrees with its parameter",
       [](json &j) { j["functions"][0]["arguments"][0]["role"] = "residual"; },
       "kernels[0].params[0].role: role \"input\" but its source, argument 0 "
       "(\"x\"), has role \"residual\""},
      {"a bound argument marked unused",
       [](json &j) { j["functions"][0]["arguments"][5]["role"] = "unused"; },
       "kernels[1].params[4].role: role \"seq_lens\" but its source, "
       "argument 5 (\"seq_lens\"), has role \"unused\""},
      {"unknown input role",
       [](json &j) { j["kernels"][0]["params"][0]["role"] = "hidden"; },
       "kernels[0].params[0].role: unknown role \"hidden\" for an input "
       "parameter (expected \"input\", \"residual\""},
      {"unknown output role",
       [](json &j) { j["kernels"][0]["params"][8]["role"] = "key_cache"; },
       "kernels[0].params[8].role: unknown role \"key_cache\" for an output"},
      {"unknown workspace role",
       [](json &j) { j["kernels"][1]["params"][6]["role"] = "scratch"; },
       "kernels[1].params[6].role: unknown role \"scratch\" for a"},
      {"workspace without its batch dimension",
       [](json &j) { j["kernels"][1]["params"][8]["shape"] = {2}; },
       "kernels[1].params[8].shape: workspace shape [2] does not start with "
       "the batch dimension"},
      {"zero_init on an output",
       [](json &j) { j["kernels"][0]["params"][8]["zero_init"] = true; },
       "kernels[0].params[8].zero_init: only workspaces are zero-initialised"},
      {"result shape of 2^63-1",
       [](json &j) {
         j["functions"][0]["results"][0]["shape"] = {"batch",
                                                     9223372036854775807LL};
       },
       "functions[0].results[0].shape[1]: value 9223372036854775807 is "
       "outside [1, 2147483647]"},
      {"constant dimensions past 128 TiB",
       [](json &j) {
         j["functions"][0]["arguments"][3]["shape"] = {2147483647, 2147483647};
       },
       "functions[0].arguments[3].shape: the constant dimensions of "
       "[2147483647, 2147483647]... of f16 alone hold more than 2^47 bytes"},
      {"result shape differs from its source",
       [](json &j) {
         j["functions"][0]["results"][0]["shape"] = {"batch", 4};
       },
       "functions[0].results[0]: shape [batch, 4] but its source (result 0 "
       "of kernel 1) has shape [batch, 4, 16]"},
      {"result index",
       [](json &j) { j["functions"][0]["results"][1]["index"] = 0; },
       "functions[0].results[1].index: result index 0 at position 1"},
      {"missing epsilon",
       [](json &j) {
         j["kernels"][0]["ops"][0]["attributes"].erase("epsilon");
       },
       "kernels[0].ops[0].attributes: missing attribute \"epsilon\" of "
       "rmsnorm (required)"},
      {"scale as a size name",
       [](json &j) {
         j["kernels"][1]["ops"][0]["attributes"]["scale"] = "batch";
       },
       "kernels[1].ops[0].attributes.scale: expected a number, got the "
       "string \"batch\""},
      {"negative scale",
       [](json &j) { j["kernels"][1]["ops"][0]["attributes"]["scale"] = -1; },
       "kernels[1].ops[0].attributes.scale: expected a finite number > 0, got "
       "-1"},
      {"bias as a huge number",
       [](json &j) {
         j["kernels"][0]["ops"][1]["attributes"]["bias"] =
             json::parse("18446744073709551616");
       },
       "kernels[0].ops[1].attributes.bias: expected true or false, got "
       "1.8446744073709552e+19"},
      {"fractional head count",
       [](json &j) {
         j["kernels"][0]["ops"][1]["attributes"]["num_heads"] = 4.5;
       },
       "kernels[0].ops[1].attributes.num_heads: expected an integer, got 4.5"},
      {"scaling without its factor",
       [](json &j) {
         j["kernels"][0]["ops"][2]["attributes"]["scaling"].erase("factor");
       },
       "kernels[0].ops[2].attributes.scaling: missing attribute \"factor\" "
       "of rope scaling (required)"},
      {"ops without attributes",
       [](json &j) { j["kernels"][0]["ops"][2].erase("attributes"); },
       "kernels[0].ops[2]: missing member \"attributes\" of rope"},
      {"max_splits past int32",
       [](json &j) { j["kernels"][1]["schedule"]["max_splits"] = 1LL << 40; },
       "m.json: kernels[1]: the kernel uses num_splits but its schedule has "
       "no max_splits in [1, 2147483647]"},
      {"nesting past the limit",
       [](json &j) {
         json deep = json::array();
         for (int i = 0; i < 70; ++i)
           deep = json::array({deep});
         j["extra"] = deep;
       },
       "m.json: invalid JSON: arrays and objects nested more than 64 levels "
       "deep"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    json j = tinyJson();
    c.mutate(j);
    std::string msg = EXPECT_THROW_MSG(FormatError, parseJson(j));
    EXPECT_CONTAINS(msg, c.expected);
  }
}

TEST(Manifest, VersionAndFunctionErrors) {
  json j = tinyJson();
  j["version"] = 3;
  std::string msg = EXPECT_THROW_MSG(UnsupportedError, parseJson(j));
  EXPECT_CONTAINS(msg, "m.json: version: manifest version 3");
  j = tinyJson();
  j["version"] = 1; // before argument roles and the PTX fingerprint
  msg = EXPECT_THROW_MSG(UnsupportedError, parseJson(j));
  EXPECT_CONTAINS(msg, "manifest version 1 (this runtime reads version 2)");
  Manifest m = parseJson(tinyJson());
  msg = EXPECT_THROW_MSG(InvalidArgumentError, m.function("prefill"));
  EXPECT_CONTAINS(msg, "no function \"prefill\" (functions: decode_layer)");
  msg = EXPECT_THROW_MSG(
      FormatError, Manifest::parse("{\"format\": \"fusion-manifest\", "
                                   "\"version\": 2, \"ptx_fnv1a64\": "
                                   "\"0123456789abcdef\", \"kernels\": 3}",
                                   "x"));
  EXPECT_CONTAINS(msg, "x: kernels: expected an array, got 3");
  // 40000 nested arrays: an error, not a stack overflow.
  msg = EXPECT_THROW_MSG(
      FormatError,
      Manifest::parse("{\"x\": " + std::string(40000, '['), "deep.json"));
  EXPECT_CONTAINS(msg, "deep.json: invalid JSON: arrays and objects nested "
                       "more than 64 levels deep");
  msg = EXPECT_THROW_MSG(Error, Manifest::load("/nonexistent.json"));
  EXPECT_CONTAINS(msg, "cannot open manifest /nonexistent.json");
}

//===----------------------------------------------------------------------===//
// PTX signatures
//===----------------------------------------------------------------------===//

TEST(PtxEntries, ScansSignatures) {
  // The compiler's PTX: the fused kernel, its three GEMM-shaped variants
  // and the attention kernel, with 14 (kernel 0: 10, 3 workspaces and a
  // tensor map) or 10 pointers (.u64) and then 2 (kernel 0: batch, max_pages)
  // or 3 (attention: batch, max_pages, num_splits) i32 scalars (.u32) in ABI
  // order.
  std::vector<PtxEntry> e =
      scanPtxEntries(readText(dataPath("tiny_decode.ptx")), "tiny.ptx");
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0].name, "decode_layer_k0_fused");
  EXPECT_EQ(e[1].name, "decode_layer_k0_fused_gemm16");
  EXPECT_EQ(e[2].name, "decode_layer_k0_fused_gemm32");
  EXPECT_EQ(e[3].name, "decode_layer_k0_fused_gemm64");
  EXPECT_EQ(e[4].name, "decode_layer_k1_decode_attention");
  std::vector<std::string> kernel0Types(14, ".u64");
  kernel0Types.insert(kernel0Types.end(), 2, ".u32");
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(e[i].paramTypes, kernel0Types);
  ASSERT_EQ(e[4].paramTypes.size(), 12u);
  EXPECT_EQ(e[4].paramTypes[8], ".u64"); // the split counters
  EXPECT_EQ(e[4].paramTypes[9], ".u32"); // batch

  // Forms the compiler's PTX does not use: .entry in comments (skipped), a
  // pointer with a state space, by-value aggregates, an entry without
  // parameters, a .func (no entry).
  std::vector<PtxEntry> other = scanPtxEntries(
      "// .entry fake_line(\n/* a comment with .entry fake( inside */\n"
      ".entry k(.param .align 8 .b8 k_param_0[16], .param .s32 k_param_1,\n"
      "  .param .u64 .ptr .global .align 16 k_param_2)\n"
      ".entry noparams()\n.visible .func f(.param .u64 x)\n");
  ASSERT_EQ(other.size(), 2u);
  EXPECT_EQ(other[0].name, "k");
  EXPECT_EQ(other[0].paramTypes,
            (std::vector<std::string>{".b8[16]", ".s32", ".u64"}));
  EXPECT_TRUE(other[1].paramTypes.empty());
  std::string msg = EXPECT_THROW_MSG(
      FormatError, scanPtxEntries(".entry k(.param .u64 a", "p.ptx"));
  EXPECT_CONTAINS(msg, "p.ptx: .entry k: unterminated parameter list");
}

TEST(ManifestChip, ChecksTheComputeCapabilityTheChipRunsOn) {
  Manifest m;
  m.source = "model.manifest.json";
  // sm_90: compute capability 9.0 and later (PTX JIT-compiles forward).
  m.chip = "sm_90";
  checkChipRuns(m, {9, 0});
  checkChipRuns(m, {10, 0});
  std::string msg =
      EXPECT_THROW_MSG(UnsupportedError, checkChipRuns(m, {8, 9}));
  EXPECT_CONTAINS(msg, "model.manifest.json was compiled for sm_90 (compute "
                       "capability 9.0 or later); this GPU has compute "
                       "capability 8.9: compile with --chip=sm_89");
  // sm_90a (warpgroup MMA): compute capability 9.0 only, not later ones.
  m.chip = "sm_90a";
  checkChipRuns(m, {9, 0});
  msg = EXPECT_THROW_MSG(UnsupportedError, checkChipRuns(m, {10, 0}));
  EXPECT_CONTAINS(msg, "compiled for sm_90a (architecture-specific PTX: "
                       "compute capability 9.0 only); this GPU has compute "
                       "capability 10.0: compile with --chip=sm_90");
  EXPECT_THROW(checkChipRuns(m, {8, 6}), UnsupportedError);
  m.chip = "sm_80";
  checkChipRuns(m, {8, 6});
  // No chip: not checked; a chip of another form: a format error.
  m.chip = "";
  checkChipRuns(m, {7, 5});
  for (const char *bad : {"compute_90", "sm_9", "sm_9x", "sm_", "a"}) {
    m.chip = bad;
    msg = EXPECT_THROW_MSG(FormatError, checkChipRuns(m, {9, 0}));
    EXPECT_CONTAINS(msg, "is not sm_<compute capability>[a]");
  }
}

TEST(PtxEntries, ChecksThePtxAgainstTheManifest) {
  // The compiler's pair: the fingerprint and every entry (kernel 0's
  // variants decode_layer_k0_fused_gemm* included) match.
  Manifest m = Manifest::load(dataPath("tiny_decode.manifest.json"));
  std::string ptx = readText(dataPath("tiny_decode.ptx"));
  checkPtxAgainstManifest(ptx, "tiny.ptx", m);

  // Another PTX with the same entries (a model compiled for other shapes,
  // or one byte changed) is not the manifest's: its fingerprint differs.
  std::string edited = ptx;
  edited.back() = edited.back() == '\n' ? ' ' : '\n';
  std::string msg = EXPECT_THROW_MSG(
      FormatError, checkPtxAgainstManifest(edited, "tiny.ptx", m));
  EXPECT_CONTAINS(msg, "tiny.ptx: not the PTX ");
  EXPECT_CONTAINS(msg, "(its FNV-1a hash is " + ptxFingerprintHex(edited) +
                           ", the manifest's ptx_fnv1a64 is " +
                           ptxFingerprintHex(ptx) + "): compile them together");
  checkPtxEntries(edited, "tiny.ptx", m);

  const std::string attention = "decode_layer_k1_decode_attention";
  std::string renamed = ptx;
  for (size_t p; (p = renamed.find(attention)) != std::string::npos;)
    renamed.replace(p, attention.size(), "other_attention");
  msg = EXPECT_THROW_MSG(FormatError, checkPtxEntries(renamed, "tiny.ptx", m));
  EXPECT_CONTAINS(msg, "tiny.ptx: no .entry decode_layer_k1_decode_attention "
                       "for kernel 1");

  std::string fewer = ptx;
  std::string last = ",\n\t.param .u32 " + attention + "_param_11";
  ASSERT_NE(fewer.find(last), std::string::npos);
  fewer.erase(fewer.find(last), last.size());
  msg = EXPECT_THROW_MSG(FormatError, checkPtxEntries(fewer, "tiny.ptx", m));
  EXPECT_CONTAINS(msg, ".entry decode_layer_k1_decode_attention has 11 "
                       "parameters but");
  EXPECT_CONTAINS(msg, "lists 12");

  // Parameter 9 of kernel 0 is its second output, the rotated query
  // (outputs follow the 8 inputs in result order: residual_out, query).
  std::string wrongType = ptx;
  std::string from = ".param .u64 .ptr .align 1 decode_layer_k0_fused_param_9";
  ASSERT_NE(wrongType.find(from), std::string::npos);
  wrongType.replace(wrongType.find(from), from.size(),
                    ".param .u32 decode_layer_k0_fused_param_9");
  msg =
      EXPECT_THROW_MSG(FormatError, checkPtxEntries(wrongType, "tiny.ptx", m));
  EXPECT_CONTAINS(msg, ".entry decode_layer_k0_fused parameter 9 is .u32 but");
  EXPECT_CONTAINS(msg, "output \"query\" (a 64-bit pointer)");
}

TEST(PtxEntries, ChecksVariantEntriesLikeKernelEntries) {
  // Two constructed variants of kernel 0 (tinyJsonWithVariants), their
  // entries copies of the compiler's decode_layer_k0_fused_gemm16 (the same
  // parameters as the kernel's).
  Manifest m = parseJson(tinyJsonWithVariants());
  std::string ptx = readText(dataPath("tiny_decode.ptx"));
  std::string full = withEntryCopy(
      withEntryCopy(ptx, "decode_layer_k0_fused_gemm16",
                    "decode_layer_k0_fused_tc"),
      "decode_layer_k0_fused_gemm16", "decode_layer_k0_fused_tc64");
  checkPtxEntries(full, "tiny.ptx", m);

  // A variant entry missing from the PTX.
  std::string msg = EXPECT_THROW_MSG(
      FormatError,
      checkPtxEntries(withEntryCopy(ptx, "decode_layer_k0_fused_gemm16",
                                    "decode_layer_k0_fused_tc"),
                      "tiny.ptx", m));
  EXPECT_CONTAINS(msg, "tiny.ptx: no .entry decode_layer_k0_fused_tc64 for "
                       "kernel 0 (decode_layer_k0_fused) variant min_batch 64 "
                       "(decode_layer_k0_fused_tc64) of m.json");

  // A variant entry whose signature differs from the kernel's parameters.
  std::string wrongType = full;
  std::string from = ".param .u32 decode_layer_k0_fused_tc_param_14";
  ASSERT_NE(wrongType.find(from), std::string::npos);
  wrongType.replace(wrongType.find(from), from.size(),
                    ".param .u64 decode_layer_k0_fused_tc_param_14");
  msg =
      EXPECT_THROW_MSG(FormatError, checkPtxEntries(wrongType, "tiny.ptx", m));
  EXPECT_CONTAINS(msg, ".entry decode_layer_k0_fused_tc parameter 14 is .u64 "
                       "but m.json says scalar \"batch\" (a 32-bit i32) for "
                       "kernel 0 (decode_layer_k0_fused) variant min_batch 8");

  std::string fewer = full;
  from = ",\n\t.param .u32 decode_layer_k0_fused_tc64_param_15";
  ASSERT_NE(fewer.find(from), std::string::npos);
  fewer.erase(fewer.find(from), from.size());
  msg = EXPECT_THROW_MSG(FormatError, checkPtxEntries(fewer, "tiny.ptx", m));
  EXPECT_CONTAINS(msg, ".entry decode_layer_k0_fused_tc64 has 15 parameters "
                       "but m.json lists 16 for kernel 0 "
                       "(decode_layer_k0_fused) variant min_batch 64");

  // The compiler's own variant entry is checked too: without it (renamed in
  // the PTX) the real manifest is refused.
  Manifest real = Manifest::load(dataPath("tiny_decode.manifest.json"));
  const std::string variant = "decode_layer_k0_fused_gemm16";
  std::string noVariant = ptx;
  for (size_t p; (p = noVariant.find(variant)) != std::string::npos;)
    noVariant.replace(p, variant.size(), "other_gemm16");
  msg = EXPECT_THROW_MSG(FormatError,
                         checkPtxEntries(noVariant, "tiny.ptx", real));
  EXPECT_CONTAINS(msg, "tiny.ptx: no .entry decode_layer_k0_fused_gemm16 for "
                       "kernel 0 (decode_layer_k0_fused) variant min_batch 2 "
                       "(decode_layer_k0_fused_gemm16)");
}

// The compiler's tensor map of the qkv weight (kernel 0, param 13): the
// device address of the descriptor of input 3, f16 [128, 64], read in one
// box of 128 rows by 64 columns (64 f16 = the 128-byte swizzle span).
TEST(Manifest, ParsesTensorMaps) {
  Manifest m = parseJson(tinyJson());
  const ManifestParam &map = m.kernels[0].params[13];
  EXPECT_EQ(map.kind, ParamKind::TensorMap);
  EXPECT_EQ(map.role, "weight_map");
  EXPECT_EQ(map.dtype, ElemType::F16);
  EXPECT_EQ(shapeString(map.shape), "[128, 64]");
  EXPECT_EQ(map.binding.kind, Binding::Kind::None);
  EXPECT_TRUE(map.isBuffer()); // passed as a 64-bit address
  ASSERT_TRUE(map.tensorMap.has_value());
  EXPECT_EQ(map.tensorMap->of, 3);
  EXPECT_EQ(map.tensorMap->boxRows, 128);
  EXPECT_EQ(map.tensorMap->boxCols, 64);
  EXPECT_EQ(map.tensorMap->swizzleBytes, 128);
  for (const ManifestParam &p : m.kernels[0].params)
    EXPECT_EQ(p.tensorMap.has_value(), p.index == 13) << p.index;

  // The documented example's spelling: decimal strings, a smaller box, bf16.
  json j = tinyJson();
  for (json *shape : {&j["functions"][0]["arguments"][3]["shape"],
                      &j["kernels"][0]["params"][3]["shape"],
                      &j["kernels"][0]["params"][13]["shape"]})
    *shape = {"128", "64"};
  j["kernels"][0]["params"][13]["tensor_map"]["box"] = {64, 64};
  Manifest strings = parseJson(j);
  EXPECT_EQ(strings.kernels[0].params[13].shape[0].value, 128);
  EXPECT_EQ(strings.kernels[0].params[13].tensorMap->boxRows, 64);
}

TEST(Manifest, TensorMapErrorsNameTheKernelAndParam) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *expected;
  };
  auto map = [](json &j) -> json & { return j["kernels"][0]["params"][13]; };
  const Case cases[] = {
      {"of an output", [&](json &j) { map(j)["tensor_map"]["of"] = 8; },
       "kernels[0].params[13].tensor_map.of: tensor map of kernel 0 "
       "(decode_layer_k0_fused) describes parameter 8, which is not an input "
       "of the kernel"},
      {"of no parameter", [&](json &j) { map(j)["tensor_map"]["of"] = 40; },
       "describes parameter 40, which is not an input of the kernel"},
      {"of a negative index", [&](json &j) { map(j)["tensor_map"]["of"] = -1; },
       "kernels[0].params[13].tensor_map.of: value -1 is outside"},
      {"of an activation",
       [&](json &j) {
         map(j)["tensor_map"]["of"] = 0;
         map(j)["shape"] = {"batch", 64};
       },
       "kernels[0].params[13].tensor_map.of: tensor map \"weight_map\" of "
       "kernel 0 (decode_layer_k0_fused) describes input 0 \"input\"; each "
       "map role describes inputs of its roles (weight_map: \"weight\" or "
       "\"qkv_weight\"; input_map: \"input\"; residual_map: \"residual\"; "
       "key_cache_map: \"key_cache\"; value_cache_map: \"value_cache\")"},
      {"another dtype than the weight",
       [&](json &j) { map(j)["dtype"] = "bf16"; },
       "kernels[0].params[13].tensor_map.of: tensor map \"weight_map\" of "
       "kernel 0 (decode_layer_k0_fused) is bf16[128, 64] but input 3 "
       "\"qkv_weight\" is f16[128, 64]"},
      {"another shape than the weight",
       [&](json &j) {
         map(j)["shape"] = {64, 128};
       },
       "is f16[64, 128] but input 3 \"qkv_weight\" is f16[128, 64]"},
      {"f32", [&](json &j) { map(j)["dtype"] = "f32"; },
       "kernels[0].params[13].tensor_map: tensor maps describe f16 or bf16 "
       "tensors, not f32"},
      {"three dimensions",
       [&](json &j) {
         map(j)["shape"] = {2, 64, 64};
       },
       "tensor maps describe a 2-D [rows, cols] tensor, rows a constant or "
       "\"batch\" and cols a constant, or a KV cache [\"num_pages\", P, Hkv, "
       "D] of constants, not [2, 64, 64]"},
      {"a cache of run-time page size",
       [&](json &j) {
         map(j)["shape"] = {"num_pages", "batch", 2, 16};
       },
       "a KV cache [\"num_pages\", P, Hkv, D] of constants, not [num_pages, "
       "batch, 2, 16]"},
      {"a cache of batch pages",
       [&](json &j) {
         map(j)["shape"] = {"batch", 4, 2, 16};
       },
       "of constants, not [batch, 4, 2, 16]"},
      {"cache rows not a multiple of 16 bytes",
       [&](json &j) {
         map(j)["shape"] = {"num_pages", 4, 1, 4};
       },
       "rows of [num_pages, 4, 1, 4] f16 are 8 bytes, not a multiple of 16"},
      {"rows of another run-time size",
       [&](json &j) {
         map(j)["shape"] = {"max_pages", 64};
       },
       "of constants, not [max_pages, 64]"},
      {"run-time columns",
       [&](json &j) {
         map(j)["shape"] = {128, "batch"};
       },
       "of constants, not [128, batch]"},
      {"batch rows of a weight",
       [&](json &j) {
         map(j)["shape"] = {"batch", 64};
       },
       "tensor map \"weight_map\" of kernel 0 (decode_layer_k0_fused) is "
       "f16[batch, 64] but input 3 \"qkv_weight\" is f16[128, 64]"},
      {"rows not a multiple of 16 bytes",
       [&](json &j) {
         map(j)["shape"] = {128, 60};
       },
       "rows of [128, 60] f16 are 120 bytes, not a multiple of 16"},
      {"box of one dimension",
       [&](json &j) { map(j)["tensor_map"]["box"] = {64}; },
       "kernels[0].params[13].tensor_map.box: expected [box_rows, box_cols], "
       "got 1 values"},
      {"box rows above 256",
       [&](json &j) {
         map(j)["tensor_map"]["box"] = {512, 64};
       },
       "kernels[0].params[13].tensor_map.box[0]: value 512 is outside [1, "
       "256]"},
      {"empty box",
       [&](json &j) {
         map(j)["tensor_map"]["box"] = {0, 64};
       },
       "tensor_map.box[0]: value 0 is outside [1, 256]"},
      {"box row not the swizzle span",
       [&](json &j) {
         map(j)["tensor_map"]["box"] = {64, 32};
       },
       "kernels[0].params[13].tensor_map.box: box_cols 32 x 2 bytes (f16) is "
       "not the 128-byte swizzle span"},
      {"another swizzle",
       [&](json &j) { map(j)["tensor_map"]["swizzle_bytes"] = 64; },
       "tensor_map.swizzle_bytes: swizzle_bytes 64 (the runtime encodes "
       "128-byte swizzled maps only)"},
      {"no swizzle",
       [&](json &j) { map(j)["tensor_map"].erase("swizzle_bytes"); },
       "kernels[0].params[13].tensor_map: missing member \"swizzle_bytes\""},
      {"a binding",
       [&](json &j) {
         map(j)["binding"] = {{"argument", 3}};
       },
       "kernels[0].params[13].binding: workspaces, tensor maps and scalars "
       "have no binding"},
      {"no tensor_map object", [&](json &j) { map(j).erase("tensor_map"); },
       "kernels[0].params[13]: tensor_map parameter without its "
       "\"tensor_map\" object"},
      {"a tensor_map object on a workspace",
       [&](json &j) {
         j["kernels"][0]["params"][10]["tensor_map"] = map(j)["tensor_map"];
       },
       "kernels[0].params[10].tensor_map: only tensor_map parameters "
       "describe a tensor map"},
      {"another role", [&](json &j) { map(j)["role"] = "weight"; },
       "kernels[0].params[13].role: unknown role \"weight\" for an "
       "tensor_map parameter (expected \"weight_map\", \"input_map\", "
       "\"residual_map\", \"key_cache_map\" or \"value_cache_map\")"},
      {"after a scalar",
       [](json &j) {
         json &params = j["kernels"][0]["params"];
         std::swap(params[13], params[14]);
         params[13]["index"] = 13;
         params[14]["index"] = 14;
       },
       "kernels[0].params[14].kind: parameter of kind tensor_map after one "
       "of kind scalar"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    json j = tinyJson();
    c.mutate(j);
    std::string msg = EXPECT_THROW_MSG(FormatError, parseJson(j));
    EXPECT_CONTAINS(msg, "m.json: ");
    EXPECT_CONTAINS(msg, c.expected);
  }
}

// The maps of the caches (CacheMaps.h): kernel 1's key_cache_map (param 9)
// describes param 1, the key cache, and its value_cache_map (param 10)
// param 2, both f16 ["num_pages", 4, 2, 16] like the caches. A cache map
// of the other cache, or of another shape, is refused.
TEST(Manifest, ParsesCacheTensorMaps) {
  Manifest m = parseJson(withCacheMaps(tinyJson()));
  const std::vector<ManifestParam> &params = m.kernels[1].params;
  ASSERT_EQ(params.size(), 14u);
  const ManifestParam &k = params[9], &v = params[10];
  EXPECT_EQ(k.kind, ParamKind::TensorMap);
  EXPECT_EQ(k.role, "key_cache_map");
  EXPECT_EQ(shapeString(k.shape), "[num_pages, 4, 2, 16]");
  ASSERT_TRUE(k.tensorMap.has_value());
  EXPECT_EQ(k.tensorMap->of, 1);
  EXPECT_EQ(k.tensorMap->boxRows, 16);
  EXPECT_EQ(k.tensorMap->boxCols, 64);
  EXPECT_EQ(v.role, "value_cache_map");
  ASSERT_TRUE(v.tensorMap.has_value());
  EXPECT_EQ(v.tensorMap->of, 2);

  json swapped = withCacheMaps(tinyJson());
  swapped["kernels"][1]["params"][9]["tensor_map"]["of"] = 2;
  EXPECT_CONTAINS(EXPECT_THROW_MSG(FormatError, parseJson(swapped)),
                  "tensor map \"key_cache_map\" of kernel 1 "
                  "(decode_layer_k1_decode_attention) describes input 2 "
                  "\"value_cache\"");
  json other = withCacheMaps(tinyJson());
  other["kernels"][1]["params"][9]["shape"] = {"num_pages", 4, 1, 32};
  EXPECT_CONTAINS(EXPECT_THROW_MSG(FormatError, parseJson(other)),
                  "is f16[num_pages, 4, 1, 32] but input 1 \"key_cache\" is "
                  "f16[num_pages, 4, 2, 16]");
}

// The maps of a warp-specialised projection's activation inputs
// (ActivationMaps.h): kernel 0's input_map (param 14) describes param 0, the
// "input" x, and its residual_map (param 15) param 2, the "residual", both
// f16 ["batch", 64] like the inputs, read in boxes of 16 token rows by 64
// columns.
TEST(Manifest, ParsesActivationTensorMaps) {
  Manifest m = parseJson(withActivationMaps(tinyJson()));
  const std::vector<ManifestParam> &params = m.kernels[0].params;
  ASSERT_EQ(params.size(), 18u);
  const ManifestParam &input = params[14], &residual = params[15];
  EXPECT_EQ(input.kind, ParamKind::TensorMap);
  EXPECT_EQ(input.role, "input_map");
  EXPECT_EQ(input.dtype, ElemType::F16);
  ASSERT_EQ(input.shape.size(), 2u);
  EXPECT_EQ(input.shape[0].symbol, "batch");
  EXPECT_EQ(input.shape[1].value, 64);
  ASSERT_TRUE(input.tensorMap.has_value());
  EXPECT_EQ(input.tensorMap->of, 0);
  EXPECT_EQ(params[0].role, "input");
  EXPECT_EQ(input.tensorMap->boxRows, 16);
  EXPECT_EQ(input.tensorMap->boxCols, 64);
  EXPECT_EQ(input.tensorMap->swizzleBytes, 128);
  EXPECT_EQ(residual.role, "residual_map");
  EXPECT_EQ(shapeString(residual.shape), "[batch, 64]");
  ASSERT_TRUE(residual.tensorMap.has_value());
  EXPECT_EQ(residual.tensorMap->of, 2);
  EXPECT_EQ(params[2].role, "residual");
  // The weight's map is unchanged, the scalars follow the maps.
  EXPECT_EQ(params[13].role, "weight_map");
  EXPECT_EQ(params[16].role, "batch");
  EXPECT_EQ(params[17].role, "max_pages");
  // Boxes of 64 token rows (T = 64) too.
  Manifest t64 = parseJson(withActivationMaps(tinyJson(), 64));
  EXPECT_EQ(t64.kernels[0].params[15].tensorMap->boxRows, 64);
}

TEST(Manifest, ActivationMapErrorsNameTheRoles) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *expected;
  };
  auto param = [](json &j, int i) -> json & {
    return j["kernels"][0]["params"][i];
  };
  const std::string pairs =
      "; each map role describes inputs of its roles (weight_map: \"weight\" "
      "or \"qkv_weight\"; input_map: \"input\"; residual_map: "
      "\"residual\"; key_cache_map: \"key_cache\"; value_cache_map: "
      "\"value_cache\")";
  const Case cases[] = {
      {"an input_map of the weight",
       [&](json &j) {
         param(j, 14)["tensor_map"]["of"] = 3;
         param(j, 14)["shape"] = {128, 64};
       },
       "kernels[0].params[14].tensor_map.of: tensor map \"input_map\" of "
       "kernel 0 (decode_layer_k0_fused) describes input 3 \"qkv_weight\""},
      {"an input_map of the residual",
       [&](json &j) { param(j, 14)["tensor_map"]["of"] = 2; },
       "kernels[0].params[14].tensor_map.of: tensor map \"input_map\" of "
       "kernel 0 (decode_layer_k0_fused) describes input 2 \"residual\""},
      {"a residual_map of the input",
       [&](json &j) { param(j, 15)["tensor_map"]["of"] = 0; },
       "kernels[0].params[15].tensor_map.of: tensor map \"residual_map\" of "
       "kernel 0 (decode_layer_k0_fused) describes input 0 \"input\""},
      {"a weight_map of the input",
       [&](json &j) { param(j, 15)["role"] = "weight_map"; },
       "kernels[0].params[15].tensor_map.of: tensor map \"weight_map\" of "
       "kernel 0 (decode_layer_k0_fused) describes input 2 \"residual\""},
      {"another dtype than the input",
       [&](json &j) { param(j, 14)["dtype"] = "bf16"; },
       "kernels[0].params[14].tensor_map.of: tensor map \"input_map\" of "
       "kernel 0 (decode_layer_k0_fused) is bf16[batch, 64] but input 0 "
       "\"input\" is f16[batch, 64]"},
      {"constant rows of a batch-row input",
       [&](json &j) {
         param(j, 15)["shape"] = {16, 64};
       },
       "kernels[0].params[15].tensor_map.of: tensor map \"residual_map\" of "
       "kernel 0 (decode_layer_k0_fused) is f16[16, 64] but input 2 "
       "\"residual\" is f16[batch, 64]"},
      {"another row width than the input",
       [&](json &j) {
         param(j, 14)["shape"] = {"batch", 128};
       },
       "tensor map \"input_map\" of kernel 0 (decode_layer_k0_fused) is "
       "f16[batch, 128] but input 0 \"input\" is f16[batch, 64]"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    json j = withActivationMaps(tinyJson());
    c.mutate(j);
    std::string msg = EXPECT_THROW_MSG(FormatError, parseJson(j));
    EXPECT_CONTAINS(msg, "m.json: ");
    EXPECT_CONTAINS(msg, c.expected);
    // A role mismatch lists which inputs each map role describes.
    if (std::string(c.expected).find("describes input") != std::string::npos) {
      EXPECT_CONTAINS(msg, pairs);
    }
  }
}
