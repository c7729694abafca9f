//===- ModelTest.cpp - Model, LaunchPlan, FrontHalfSignature --------------===//

#include "fusion/runtime/Model.h"
#include "fusion/runtime/Error.h"

#include "ActivationMaps.h"
#include "CacheMaps.h"
#include "TestUtil.h"

#include <functional>

#include <nlohmann/json.hpp>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using nlohmann::json;

namespace {

Model tinyModel() { return Model::load(dataPath("tiny_decode.manifest.json")); }

/// Binds every argument of `plan` to distinct fake addresses
/// kArgStride * (i + 1) with exactly the bytes they need (the strides keep
/// the buffers apart: bindArgument refuses overlapping caches), internal
/// buffer i to kInternalStride * (i + 1) and the tensor-map table (if any)
/// to kTensorMapTable.
constexpr uint64_t kArgStride = 0x1000000, kInternalStride = 0x40000000,
                   kTensorMapTable = 0x7700000000;
void bindAll(LaunchPlan &plan) {
  for (size_t i = 0; i < plan.model().arguments().size(); ++i)
    plan.bindArgument(static_cast<int>(i), kArgStride * (i + 1),
                      plan.argumentBytes(static_cast<int>(i)));
  for (size_t i = 0; i < plan.model().internalBuffers().size(); ++i)
    plan.setInternal(static_cast<int>(i), kInternalStride * (i + 1));
  if (plan.tensorMapTableBytes() > 0)
    plan.setTensorMapTable(kTensorMapTable);
}

/// The tiny manifest with kernel 0's variants (the compiler's
/// decode_layer_k0_fused_gemm{16,32,64}) replaced by a constructed one from
/// batch 4, decode_layer_k0_fused_tc: grid [2, batch, 1], 128 threads,
/// 135168 bytes of dynamic shared memory.
json tinyJsonWithVariant() {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  j["kernels"][0]["variants"] =
      json::array({{{"min_batch", 4},
                    {"entry", "decode_layer_k0_fused_tc"},
                    {"grid", {2, "batch", 1}},
                    {"block", {128, 1, 1}},
                    {"dynamic_shared_bytes", 135168}}});
  return j;
}

} // namespace

TEST(Model, ResolvesKernelsBuffersAndRoles) {
  Model m = tinyModel();
  EXPECT_EQ(m.function().name, "decode_layer");
  ASSERT_EQ(m.kernels().size(), 2u);
  EXPECT_EQ(m.kernels()[1]->entry, "decode_layer_k1_decode_attention");
  // Each kernel's outputs in result order, then its workspaces: kernel 0's
  // residual_out, rotated query and the 3 workspaces of its GEMM-shaped
  // variants; kernel 1's output and 3 workspaces.
  const auto &b = m.internalBuffers();
  ASSERT_EQ(b.size(), 9u);
  EXPECT_EQ(b[0].role, "residual_out");
  EXPECT_EQ(b[0].label,
            "kernel 0 (decode_layer_k0_fused) output 0 \"residual_out\"");
  EXPECT_EQ(b[1].role, "query");
  EXPECT_EQ(b[2].kind, ParamKind::Workspace);
  EXPECT_EQ(b[2].role, "partial_out");
  EXPECT_TRUE(b[4].zeroInit);
  EXPECT_EQ(b[5].role, "output");
  EXPECT_EQ(b[6].kind, ParamKind::Workspace);
  EXPECT_EQ(b[6].role, "partial_out");
  EXPECT_TRUE(b[8].zeroInit);
  EXPECT_EQ(m.internalForResult(0, 0), 0);
  EXPECT_EQ(m.internalForResult(0, 1), 1);
  EXPECT_EQ(m.internalForResult(1, 0), 5);
  EXPECT_EQ(m.internalForResult(1, 3), -1);

  EXPECT_EQ(m.argumentRole(0), "input");
  EXPECT_EQ(m.argumentRole(2), "norm_weight");
  EXPECT_EQ(m.argumentRole(5), "seq_lens");
  EXPECT_EQ(m.argumentRole(6), "block_table");
  EXPECT_EQ(m.argumentRole(8), "value_cache");
  EXPECT_EQ(m.argumentWithRole("qkv_weight"), 3);
  EXPECT_EQ(m.argumentWithRole("qkv_bias"), -1);
  EXPECT_EQ(m.resultRole(0), "output");
  EXPECT_EQ(m.resultRole(1), "residual_out");
  EXPECT_EQ(m.resultWithRole("residual_out"), 1);
  EXPECT_EQ(m.argumentIndex("k_cache"), 7);
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, m.argumentIndex("kv"));
  EXPECT_CONTAINS(msg, "has no argument \"kv\" (arguments: x, residual, "
                       "norm_w, qkv_w");

  // Parameter sources of the attention kernel.
  const auto &src = m.paramSources(1);
  ASSERT_EQ(src.size(), 12u);
  EXPECT_EQ(src[0].kind, ParamSource::Kind::Internal); // query from kernel 0
  EXPECT_EQ(src[0].index, 1);
  EXPECT_EQ(src[1].kind, ParamSource::Kind::Argument);
  EXPECT_EQ(src[1].index, 7);
  EXPECT_EQ(src[5].index, 5); // output, after kernel 0's 5 buffers
  EXPECT_EQ(src[11].kind, ParamSource::Kind::Scalar);
  EXPECT_EQ(src[11].scalar, "num_splits");

  EXPECT_TRUE(m.usesNumSplits());
  EXPECT_TRUE(m.usesMaxPages());
  EXPECT_EQ(m.maxSplits(), 64); // contract::SplitPolicy's default
}

TEST(Model, DefaultNumSplitsFollowsTheSchedulePolicy) {
  Model m = tinyModel();
  // grid_y = 2: floor(264 / (B * 2)) CTAs-wise, ceil(L / 512) length-wise
  // (min_chunk_tokens: head_dim 16 gives 512 tokens per CTA iteration), at
  // most max_splits = 64.
  EXPECT_EQ(m.defaultNumSplits(1, 1000), 2);    // min(64, 132, 2)
  EXPECT_EQ(m.defaultNumSplits(1, 100000), 64); // max_splits
  EXPECT_EQ(m.defaultNumSplits(1, 4096), 8);    // ceil(4096 / 512) = 8
  EXPECT_EQ(m.defaultNumSplits(3, 100000), 44); // floor(264 / 6)
  EXPECT_EQ(m.defaultNumSplits(64, 4096), 2);   // floor(264 / 128)
  EXPECT_EQ(m.defaultNumSplits(200, 4096), 1);
  EXPECT_EQ(m.defaultNumSplits(1, 0), 1);
  EXPECT_EQ(m.defaultNumSplits(1, 1), 1);
}

TEST(Model, DefaultNumSplitsFollowsTheVariantOfTheBatch) {
  // From batch 16 the attention kernel runs a variant with 4 head blocks
  // and twice the CTA target.
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  j["kernels"][1]["variants"] = json::array(
      {{{"min_batch", 16},
        {"entry", "decode_layer_k1_decode_attention_wide"},
        {"grid", {"num_splits", 4, "batch"}},
        {"block", {128, 1, 1}},
        {"schedule", {{"target_ctas", 1056}, {"min_chunk_tokens", 64}}}}});
  Model m(Manifest::parse(j.dump(), "m.json"));
  EXPECT_EQ(m.defaultNumSplits(15, 100000), 8);  // floor(264 / (15 * 2))
  EXPECT_EQ(m.defaultNumSplits(16, 100000), 16); // floor(1056 / (16 * 4))
}

TEST(LaunchPlan, SizesAtCapacity) {
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{8, 16, 100});
  EXPECT_EQ(plan.argumentBytes(0), 8 * 64 * 2);           // x
  EXPECT_EQ(plan.argumentBytes(3), 128 * 64 * 2);         // qkv_w
  EXPECT_EQ(plan.argumentBytes(6), 8 * 16 * 4);           // block table
  EXPECT_EQ(plan.argumentBytes(7), 100 * 4 * 2 * 16 * 2); // k cache
  EXPECT_EQ(plan.internalBytes(0), 8 * 64 * 2);           // residual_out
  EXPECT_EQ(plan.internalBytes(1), 8 * 4 * 16 * 2);       // query
  // Kernel 0's workspaces: [batch, 1 split, 128 rows], [batch, 1 x 1],
  // [batch, 1 row tile].
  EXPECT_EQ(plan.internalBytes(2), 8 * 1 * 128 * 4); // partial_out
  EXPECT_EQ(plan.internalBytes(3), 8 * 1 * 4);       // partial_stats
  EXPECT_EQ(plan.internalBytes(4), 8 * 1 * 4);       // counters
  // Kernel 1's: [batch, 4 heads, 64 splits, 16], [batch, 2 KV heads].
  EXPECT_EQ(plan.internalBytes(6), 8 * 4 * 64 * 16 * 4); // partial_out
  EXPECT_EQ(plan.internalBytes(8), 8 * 2 * 4);           // counters
  EXPECT_EQ(plan.resultBytes(0, (StepShape{3, 5, 2})), 3 * 4 * 16 * 2);
  EXPECT_EQ(plan.resultBytes(1, (StepShape{3, 5, 2})), 3 * 64 * 2);
}

TEST(LaunchPlan, KernelsShareTheWorkspaceArenas) {
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{8, 16, 100});
  // Kernel 0's scratch: partial_out (8 * 128 * 4 = 4096 bytes) at 0, then
  // partial_stats (8 * 4 = 32 bytes) at 4096. Kernel 1's, from 0 again:
  // partial_out (8 * 4 * 64 * 16 * 4 = 131072) at 0, then partial_stats
  // (8 * 4 * 64 * 2 * 4 = 16384) at 131072.
  EXPECT_EQ(plan.workspaceArena(2), WorkspaceArena::Scratch);
  EXPECT_EQ(plan.workspaceOffset(2), 0);
  EXPECT_EQ(plan.workspaceOffset(3), 4096);
  EXPECT_EQ(plan.workspaceOffset(6), 0);
  EXPECT_EQ(plan.workspaceOffset(7), 131072);
  // The split counters, each its kernel's only zero-init workspace: at 0.
  EXPECT_EQ(plan.workspaceArena(4), WorkspaceArena::ZeroInit);
  EXPECT_EQ(plan.workspaceArena(8), WorkspaceArena::ZeroInit);
  EXPECT_EQ(plan.workspaceOffset(4), 0);
  EXPECT_EQ(plan.workspaceOffset(8), 0);
  // The larger kernel sizes each arena: max(4096 + 32, 131072 + 16384) and
  // max(8 * 1 * 4, 8 * 2 * 4).
  EXPECT_EQ(plan.arenaBytes(WorkspaceArena::Scratch), 147456);
  EXPECT_EQ(plan.arenaBytes(WorkspaceArena::ZeroInit), 64);
  // Plus the outputs residual_out [8, 64], query [8, 4, 16] and output
  // [8, 4, 16], f16: 3 * 1024 bytes (one buffer per workspace took
  // 4096 + 32 + 32 + 131072 + 16384 + 64 = 151680 bytes), and the table of
  // one 128-byte tensor map (the qkv weight's).
  EXPECT_EQ(plan.runtimeBufferBytes(), 147456 + 64 + 3 * 1024 + 128);
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, (void)plan.workspaceOffset(0));
  EXPECT_CONTAINS(msg, "internal buffer 0 is not a workspace");
}

TEST(LaunchPlan, AlignsEachWorkspaceOfAKernel) {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  // Kernel 0's partial_out as f32 [batch, 1, 3]: 8 * 3 * 4 = 96 bytes, so
  // partial_stats (32 bytes) starts at the next multiple of 256.
  json &partialOut = j["kernels"][0]["params"][10];
  ASSERT_EQ(partialOut["role"], "partial_out");
  partialOut["shape"] = json::array({"batch", 1, 3});
  Model m(Manifest::parse(j.dump(), "m.json"));
  LaunchPlan plan(m, Capacity{8, 16, 100});
  EXPECT_EQ(plan.internalBytes(2), 96);
  EXPECT_EQ(plan.workspaceOffset(2), 0);
  EXPECT_EQ(plan.workspaceOffset(3), 256);
  EXPECT_EQ(LaunchPlan::kWorkspaceAlignment, 256);
}

TEST(LaunchPlan, ClustersTheSplitsUpToClusterSplits) {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  j["kernels"][1]["schedule"]["cluster_splits"] = 3;
  Model m(Manifest::parse(j.dump(), "m.json"));
  LaunchPlan plan(m, Capacity{8, 16, 100});
  bindAll(plan);
  // StepShape{batch, max_pages, num_splits}: one split has nothing to
  // combine; 2 and 3 splits are one cluster each; 4 exceed cluster_splits.
  const std::pair<int64_t, uint32_t> cases[] = {{1, 1}, {2, 2}, {3, 3}, {4, 1}};
  for (auto [splits, clusterX] : cases) {
    std::vector<PreparedLaunch> l = plan.prepare(StepShape{2, 5, splits});
    EXPECT_EQ(l[1].grid[0], static_cast<uint32_t>(splits));
    EXPECT_EQ(l[1].clusterX, clusterX) << splits << " splits";
  }
}

TEST(LaunchPlan, ClustersTheKSplitOfAClusterKSplitVariant) {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  json &v = j["kernels"][0]["variants"][0];
  v["grid"] = {4, 1, 1};
  v["schedule"]["k_split"] = 4;
  v["schedule"]["cluster_k_split"] = true;
  Model m(Manifest::parse(j.dump(), "m.json"));
  LaunchPlan plan(m, Capacity{8, 16, 100});
  bindAll(plan);
  // Batch 2: the 16-token variant, its 4 CTAs as one cluster (grid
  // unchanged); batch 1: the primary launch, no cluster.
  std::vector<PreparedLaunch> l = plan.prepare(StepShape{2, 5, 4});
  EXPECT_EQ(l[0].grid, (std::array<uint32_t, 3>{4, 1, 1}));
  EXPECT_EQ(l[0].clusterX, 4u);
  EXPECT_EQ(plan.prepare(StepShape{1, 5, 4})[0].clusterX, 1u);
}

TEST(LaunchPlan, PreparesLaunchesInOrder) {
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{8, 16, 100});
  bindAll(plan);
  std::vector<PreparedLaunch> l = plan.prepare(StepShape{3, 5, 4});
  ASSERT_EQ(l.size(), 2u);
  // Batch 3 >= 2: kernel 0 launches as its GEMM-shaped variant of 16-token
  // tiles with the kernel's parameters: one CTA of 256 threads (the 128
  // rows are one row tile of 8 warps, hidden 64 one stage: no split-K),
  // with the variant's dynamic shared memory.
  EXPECT_EQ(l[0].kernel, 0);
  EXPECT_EQ(l[0].variant, 0);
  EXPECT_EQ(l[0].entry, "decode_layer_k0_fused_gemm16");
  EXPECT_EQ(l[0].grid, (std::array<uint32_t, 3>{1, 1, 1}));
  EXPECT_EQ(l[0].block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(l[0].dynamicSharedBytes,
            m.kernels()[0]->variants[0].dynamicSharedBytes);
  ASSERT_EQ(l[0].args.size(), 16u);
  // The fused kernel's inputs in operand order (docs/abi.md section 4):
  // x, norm_w, residual (rmsnorm's operands), qkv_w, positions, k_cache,
  // v_cache, block_table.
  const uint64_t argOrder[] = {0, 2, 1, 3, 4, 7, 8, 6};
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(l[0].args[i].isScalar);
    EXPECT_EQ(l[0].args[i].pointer, kArgStride * (argOrder[i] + 1)) << i;
  }
  EXPECT_EQ(l[0].args[8].pointer, kInternalStride);     // residual_out buffer
  EXPECT_EQ(l[0].args[9].pointer, kInternalStride * 2); // query buffer
  for (int i = 10; i < 13; ++i)                         // the workspaces
    EXPECT_EQ(l[0].args[i].pointer, kInternalStride * (i - 7)) << i;
  // The qkv weight's tensor map: the table's only slot, at its start.
  EXPECT_FALSE(l[0].args[13].isScalar);
  EXPECT_EQ(l[0].args[13].pointer, kTensorMapTable);
  EXPECT_TRUE(l[0].args[14].isScalar);
  EXPECT_EQ(l[0].args[14].scalar, 3); // batch
  EXPECT_EQ(l[0].args[15].scalar, 5); // max_pages

  EXPECT_EQ(l[1].kernel, 1);
  EXPECT_EQ(l[1].variant, -1);
  EXPECT_EQ(l[1].entry, "decode_layer_k1_decode_attention");
  EXPECT_EQ(l[1].grid, (std::array<uint32_t, 3>{4, 2, 3}));
  EXPECT_EQ(l[1].block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(l[1].args[0].pointer, kInternalStride * 2); // query from kernel 0
  EXPECT_EQ(l[1].args[1].pointer, kArgStride * 8);      // k_cache
  EXPECT_EQ(l[1].args[4].pointer, kArgStride * 6);      // seq_lens
  EXPECT_EQ(l[1].args[5].pointer, kInternalStride * 6); // output
  EXPECT_EQ(l[1].args[8].pointer, kInternalStride * 9); // counters
  EXPECT_EQ(l[1].args[9].scalar, 3);
  EXPECT_EQ(l[1].args[10].scalar, 5);
  EXPECT_EQ(l[1].args[11].scalar, 4); // num_splits
  // The fixture's schedule has cluster_splits 8: the 4 splits of each
  // (sequence, KV head) run as one cluster; kernel 0 has no splits.
  EXPECT_EQ(l[1].clusterX, 4u);
  EXPECT_EQ(l[0].clusterX, 1u);

  EXPECT_EQ(plan.resultAddress(0), kInternalStride * 6); // attention output
  EXPECT_EQ(plan.resultAddress(1), kInternalStride);     // residual_out

  // Batch 1: the primary entry, 32 CTAs of 64 threads, the same arguments.
  std::vector<PreparedLaunch> one = plan.prepare(StepShape{1, 5, 4});
  EXPECT_EQ(one[0].variant, -1);
  EXPECT_EQ(one[0].entry, "decode_layer_k0_fused");
  EXPECT_EQ(one[0].grid, (std::array<uint32_t, 3>{32, 1, 1}));
  EXPECT_EQ(one[0].block, (std::array<uint32_t, 3>{64, 1, 1}));
  EXPECT_EQ(one[0].dynamicSharedBytes, 0u);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(one[0].args[i].pointer, l[0].args[i].pointer) << i;
}

TEST(LaunchPlan, PreparesProgrammaticDependentLaunch) {
  // The compiler marks both kernels of an sm_90 build; kernel 0 without the
  // member (as for an older chip) is constructed here. The flag is the
  // kernel's, for its primary launch and its variant alike.
  json j = tinyJsonWithVariant();
  for (bool kernel0 : {true, false}) {
    SCOPED_TRACE(kernel0);
    if (!kernel0)
      j["kernels"][0].erase("programmatic_dependent_launch");
    Model m(Manifest::parse(j.dump(), "m.json"));
    LaunchPlan plan(m, Capacity{8, 16, 100});
    bindAll(plan);
    for (int64_t batch : {1, 8}) {
      SCOPED_TRACE(batch);
      std::vector<PreparedLaunch> l = plan.prepare(StepShape{batch, 5, 4});
      ASSERT_EQ(l.size(), 2u);
      EXPECT_EQ(l[0].programmaticDependentLaunch, kernel0);
      EXPECT_TRUE(l[1].programmaticDependentLaunch);
    }
  }
}

TEST(LaunchPlan, PreparesTheVariantTheBatchSelects) {
  Model m(Manifest::parse(tinyJsonWithVariant().dump(), "m.json"));
  LaunchPlan plan(m, Capacity{8, 16, 100});
  bindAll(plan);
  std::vector<PreparedLaunch> below = plan.prepare(StepShape{3, 5, 4});
  EXPECT_EQ(below[0].variant, -1);
  EXPECT_EQ(below[0].entry, "decode_layer_k0_fused");
  EXPECT_EQ(below[0].grid, (std::array<uint32_t, 3>{32, 1, 1}));
  EXPECT_EQ(below[0].block, (std::array<uint32_t, 3>{64, 1, 1}));
  EXPECT_EQ(below[0].dynamicSharedBytes, 0u);

  for (int64_t batch : {4, 8}) {
    SCOPED_TRACE(batch);
    std::vector<PreparedLaunch> l = plan.prepare(StepShape{batch, 5, 4});
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[0].kernel, 0);
    EXPECT_EQ(l[0].variant, 0);
    EXPECT_EQ(l[0].entry, "decode_layer_k0_fused_tc");
    EXPECT_EQ(l[0].grid,
              (std::array<uint32_t, 3>{2, static_cast<uint32_t>(batch), 1}));
    EXPECT_EQ(l[0].block, (std::array<uint32_t, 3>{128, 1, 1}));
    EXPECT_EQ(l[0].dynamicSharedBytes, 135168u);
    // The same arguments as the primary launch (same ABI).
    ASSERT_EQ(l[0].args.size(), below[0].args.size());
    for (size_t i = 0; i < 14; ++i)
      EXPECT_EQ(l[0].args[i].pointer, below[0].args[i].pointer) << i;
    EXPECT_EQ(l[0].args[14].scalar, batch);
    // Kernel 1 has no variant.
    EXPECT_EQ(l[1].variant, -1);
    EXPECT_EQ(l[1].entry, "decode_layer_k1_decode_attention");
  }
}

TEST(LaunchPlan, BindingErrors) {
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{8, 16, 100});
  std::string msg;
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         plan.bindArgument("x", 0x1000, 8 * 64 * 2 - 1));
  EXPECT_CONTAINS(msg, "argument \"x\" (f16[batch, 64]) needs 1024 bytes at "
                       "capacity (batch 8, max_pages 16, num_pages 100), got "
                       "a buffer of 1023 bytes");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         plan.bindArgument("k_cache", 0x1000, 100));
  EXPECT_CONTAINS(msg, "f16[num_pages, 4, 2, 16]) needs 25600 bytes");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, plan.bindArgument(0, 0, 4096));
  EXPECT_CONTAINS(msg, "null device address");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         plan.bindArgument("x", 0x1008, 1 << 20));
  EXPECT_CONTAINS(msg, "device address 0x1008 is not 16-byte aligned");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, plan.bindArgument(12, 1, 1));
  EXPECT_CONTAINS(msg, "no argument 12");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         plan.bindArgument("xx", 0x1000, 1 << 20));
  EXPECT_CONTAINS(msg, "no argument \"xx\"");

  plan.bindRole("block_table", 0x7000, 8 * 16 * 4);
  EXPECT_EQ(plan.argumentAddress(6), 0x7000u);
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         plan.bindRole("qkv_bias", 0x7000, 1 << 20));
  EXPECT_CONTAINS(msg, "has no argument with role \"qkv_bias\" (roles: "
                       "input, residual, norm_weight, qkv_weight");

  // Memory a kernel writes (the caches) must not overlap another argument;
  // read-only tensors may share.
  LaunchPlan shared(m, Capacity{8, 16, 100});
  shared.bindArgument("k_cache", 0x100000, shared.argumentBytes(7));
  msg = EXPECT_THROW_MSG(
      InvalidArgumentError,
      shared.bindArgument("v_cache", 0x100000 + 25600 - 16, 25600));
  EXPECT_CONTAINS(msg, "argument \"v_cache\" (25600 bytes at 0x1063f0) "
                       "overlaps argument \"k_cache\" (25600 bytes at "
                       "0x100000), and the kernels write one of them");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         shared.bindArgument("x", 0x100000 + 4096, 1024));
  EXPECT_CONTAINS(msg, "argument \"x\" (1024 bytes at 0x101000) overlaps "
                       "argument \"k_cache\"");
  shared.bindArgument("v_cache", 0x100000 + 25600, 25600); // adjacent: fine
  shared.bindArgument("x", 0x1000, 1024);
  shared.bindArgument("residual", 0x1000, 1024); // shares x's memory

  EXPECT_EQ(plan.bindingKey()[0], 0u);
  plan.bindArgument("x", 0x1000, 1024);
  EXPECT_TRUE(plan.isBound(0));
  // Argument 0's address is the first of the addresses graphs capture.
  EXPECT_EQ(plan.bindingKey()[0], 0x1000u);

  // Everything else unbound: all listed at once.
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, plan.validate(StepShape{1, 1, 1}));
  EXPECT_CONTAINS(msg, "unbound arguments: residual, norm_w, qkv_w, "
                       "positions, seq_lens, k_cache, v_cache");
  for (int i = 1; i < 9; ++i)
    plan.bindArgument(i, kArgStride * (i + 1), plan.argumentBytes(i));
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, plan.validate(StepShape{1, 1, 1}));
  EXPECT_CONTAINS(msg, "internal buffer kernel 0 (decode_layer_k0_fused) "
                       "output 0 \"residual_out\" has no device memory");
}

TEST(LaunchPlan, StepShapeErrors) {
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{8, 16, 100});
  bindAll(plan);
  plan.validate(StepShape{8, 16, 32});
  std::string msg;
  msg = EXPECT_THROW_MSG(CapacityError, plan.validate(StepShape{9, 1, 1}));
  EXPECT_CONTAINS(msg, "decode step of \"decode_layer\": batch 9 exceeds the "
                       "batch the buffers were allocated for (8)");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, plan.validate(StepShape{0, 1, 1}));
  EXPECT_CONTAINS(msg, "batch must be >= 1, got 0");
  msg = EXPECT_THROW_MSG(CapacityError, plan.validate(StepShape{1, 17, 1}));
  EXPECT_CONTAINS(msg, "block-table width max_pages 17 exceeds the width the "
                       "buffers were allocated for (16)");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, plan.validate(StepShape{1, 0, 1}));
  EXPECT_CONTAINS(msg, "max_pages >= 1");
  plan.validate(StepShape{1, 1, 64}); // max_splits
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         plan.validate(StepShape{1, 1, 65}));
  EXPECT_CONTAINS(msg, "num_splits 65 is outside [1, 64]");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, plan.prepare(StepShape{1, 1, 0}));
  EXPECT_CONTAINS(msg, "num_splits 0 is outside [1, 64]");

  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, LaunchPlan(m, Capacity{0, 1, 1}));
  EXPECT_CONTAINS(msg, "capacities must be >= 1");
}

TEST(LaunchPlan, GridLimits) {
  // The attention kernel's grid is [num_splits, 2, batch]: z = batch is
  // bounded by CUDA's 65535 (kernel 0's grids are constant).
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{70000, 1, 1});
  bindAll(plan);
  plan.validate(StepShape{65535, 1, 1});
  std::string msg = EXPECT_THROW_MSG(InvalidArgumentError,
                                     plan.validate(StepShape{65536, 1, 1}));
  EXPECT_CONTAINS(msg, "kernel 1 (decode_layer_k1_decode_attention): grid "
                       "dimension 2 = batch = 65536 is outside [1, 65535]");
}

TEST(LaunchPlan, GridLimitsOfTheVariant) {
  json j = tinyJsonWithVariant();
  j["kernels"][0]["variants"][0]["grid"] = {1, 1, "batch"};
  Model m(Manifest::parse(j.dump(), "m.json"));
  LaunchPlan plan(m, Capacity{70000, 1, 1});
  bindAll(plan);
  plan.validate(StepShape{3, 1, 1}); // the primary's grid is constant
  std::string msg = EXPECT_THROW_MSG(InvalidArgumentError,
                                     plan.validate(StepShape{65536, 1, 1}));
  EXPECT_CONTAINS(msg, "kernel 0 (decode_layer_k0_fused) variant min_batch 4 "
                       "(decode_layer_k0_fused_tc): grid dimension 2 = batch "
                       "= 65536 is outside [1, 65535]");
}

TEST(LaunchPlan, NoSplitsNoBlockTable) {
  // A model with one kernel that takes only batch: num_splits and max_pages
  // are ignored.
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  j["functions"][0]["kernels"] = {0};
  j["functions"][0]["results"] = {j["functions"][0]["results"][1]};
  j["functions"][0]["results"][0]["index"] = 0;
  j["kernels"].erase(1);
  auto &params = j["kernels"][0]["params"];
  params.erase(15); // max_pages
  Model m(Manifest::parse(j.dump(), "m.json"));
  EXPECT_FALSE(m.usesNumSplits());
  EXPECT_FALSE(m.usesMaxPages());
  EXPECT_EQ(m.maxSplits(), 1);
  EXPECT_EQ(m.defaultNumSplits(1, 4096), 1);
  LaunchPlan plan(m, Capacity{4, 4, 4});
  bindAll(plan);
  EXPECT_EQ(plan.prepare(StepShape{2, 0, 0}).size(), size_t(1));
}

TEST(LaunchPlan, ChecksStepInputs) {
  // Pages of 4 tokens, block tables of 3 pages (12 tokens), 16 pages.
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{4, 3, 16});
  bindAll(plan);
  struct Step {
    std::vector<int32_t> pos, lens, table;
  };
  // Row 0: 6 tokens in pages 0, 1, the new one at position 5 (page 1);
  // row 1: 1 token at position 0 in page 2.
  const Step valid{{5, 0}, {6, 1}, {0, 1, 0, 2, 0, 0}};
  auto check = [&](const Step &s) {
    plan.checkStepInputs(StepShape{2, 3, 1},
                         {s.pos.data(), s.lens.data(), s.table.data()});
  };
  check(valid);
  // A read-only shared prefix page (3), and a golden-style row whose new
  // token (position 9: logical page 2 -> page 5, slot 1) is the window's
  // token 1 (logical page 0 -> page 5).
  check({{5, 9}, {6, 2}, {3, 1, 0, 5, 0, 5}});
  check({{5, 4}, {6, 5}, {3, 1, 0, 3, 2, 0}});

  struct Case {
    const char *name;
    std::function<void(Step &)> mutate;
    bool capacity; ///< CapacityError, else InvalidArgumentError
    const char *expected;
  };
  const Case cases[] = {
      {"position past the row", [](Step &s) { s.pos[1] = 12; }, true,
       "decode step of \"decode_layer\": sequence (row) 1: position 12 is "
       "past the 12 tokens its block-table row addresses (max_pages 3 * page "
       "size 4)"},
      {"position 2^31-1", [](Step &s) { s.pos[0] = 2147483647; }, true,
       "sequence (row) 0: position 2147483647 is past the 12 tokens"},
      {"negative position", [](Step &s) { s.pos[1] = -1; }, false,
       "sequence (row) 1: position -1 is negative"},
      {"seq_lens past the row", [](Step &s) { s.lens[0] = 13; }, true,
       "sequence (row) 0: seq_lens 13 is past the 12 tokens"},
      {"negative seq_lens", [](Step &s) { s.lens[0] = -2; }, false,
       "sequence (row) 0: seq_lens -2 is negative"},
      {"new token not read", [](Step &s) { s.lens[0] = 5; }, false,
       "sequence (row) 0: the new token's slot (position 5: page 1, slot 1) "
       "is not among the seq_lens = 5 slots attention reads"},
      {"new token of an empty row", [](Step &s) { s.lens[1] = 0; }, false,
       "sequence (row) 1: the new token's slot (position 0: page 2, slot 0) "
       "is not among the seq_lens = 0 slots attention reads"},
      {"page id past the pool", [](Step &s) { s.table[1] = 16; }, false,
       "sequence (row) 0: block_table[0, 1] = 16 (a page attention reads) "
       "is not a page of the cache [0, 16)"},
      {"negative page id", [](Step &s) { s.table[3] = -1; }, false,
       "sequence (row) 1: block_table[1, 0] = -1"},
      {"two rows write one page", [](Step &s) { s.table[3] = 1; }, false,
       "sequences (rows) 0 and 1 both write page 1"},
      {"a row reads a page another writes",
       [](Step &s) {
         s.pos[1] = 4;
         s.lens[1] = 5;
         s.table = {0, 1, 0, 1, 2, 0};
       },
       false,
       "sequence (row) 0 writes page 1, which sequence (row) 1 reads "
       "(block_table[1, 0])"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    Step s = valid;
    c.mutate(s);
    std::string msg = c.capacity
                          ? EXPECT_THROW_MSG(CapacityError, check(s))
                          : EXPECT_THROW_MSG(InvalidArgumentError, check(s));
    EXPECT_CONTAINS(msg, c.expected);
  }
  std::string msg = EXPECT_THROW_MSG(
      InvalidArgumentError,
      plan.checkStepInputs(StepShape{2, 3, 1},
                           {nullptr, valid.lens.data(), valid.table.data()}));
  EXPECT_CONTAINS(msg, "no host copy of the positions input to check");
  // The step shape itself is checked too.
  msg = EXPECT_THROW_MSG(CapacityError,
                         plan.checkStepInputs(StepShape{5, 3, 1}, {}));
  EXPECT_CONTAINS(msg, "batch 5 exceeds");
}

TEST(LaunchPlan, RowsOfOneSequenceShareItsPages) {
  // Pages of 4 tokens, block tables of 3 pages, 16 pages. Rows 0-2: the
  // tokens at positions 3, 4, 5 of one sequence (pages 0, 1; the same
  // block-table row), each reading up to its own token; row 3: another
  // sequence's first token (page 2).
  struct Step {
    std::vector<int32_t> pos, lens, table;
  };
  const Step chunk{
      {3, 4, 5, 0}, {4, 5, 6, 1}, {0, 1, 0, 0, 1, 0, 0, 1, 0, 2, 0, 0}};
  auto check = [](const LaunchPlan &plan, const Step &s) {
    plan.checkStepInputs(StepShape{4, 3, 1},
                         {s.pos.data(), s.lens.data(), s.table.data()});
  };
  // The tiny front half appends in kernel 0 and reads in kernel 1.
  Model m = tinyModel();
  EXPECT_TRUE(LaunchPlan(m, Capacity{4, 3, 16}).rowsMayShareSequence());
  LaunchPlan plan(m, Capacity{4, 3, 16});
  bindAll(plan);
  check(plan, chunk);
  Step s = chunk;
  s.pos[1] = 3; // rows 0 and 1 append to one slot
  s.lens[1] = 4;
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError, check(plan, s)),
                  "sequences (rows) 0 and 1 both write slot 3 of page 0");
  s = chunk;
  s.table[8] = 3; // row 2's block table differs: another sequence
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError, check(plan, s)),
                  "sequences (rows) 1 and 2 both write page 1");

  // Kernel 1 also taking the positions appends and reads in one kernel: a
  // row could read a slot another row of the step has not written yet.
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  json &params = j["kernels"][1]["params"];
  params.insert(params.begin() + 5, json{{"kind", "input"},
                                         {"role", "positions"},
                                         {"dtype", "i32"},
                                         {"shape", {"batch"}},
                                         {"binding", {{"argument", 4}}}});
  for (size_t i = 0; i < params.size(); ++i)
    params[i]["index"] = i;
  Model fused(Manifest::parse(j.dump(), "fused.json"));
  LaunchPlan fusedPlan(fused, Capacity{4, 3, 16});
  bindAll(fusedPlan);
  EXPECT_FALSE(fusedPlan.rowsMayShareSequence());
  // Positions 4 and 5 (rows 1 and 2) are both in logical page 1, page 1.
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, check(fusedPlan, chunk)),
      "sequences (rows) 1 and 2 both write page 1");
}

TEST(FrontHalfSignature, FromTheTinyModel) {
  Model m = tinyModel();
  FrontHalfSignature s = FrontHalfSignature::fromModel(m);
  EXPECT_EQ(s.dtype, DType::F16);
  EXPECT_EQ(s.hidden, 64);
  EXPECT_EQ(s.dims.numQHeads, 4);
  EXPECT_EQ(s.dims.numKVHeads, 2);
  EXPECT_EQ(s.dims.headDim, 16);
  EXPECT_EQ(s.pageSize, 4);
  EXPECT_EQ(s.x, 0);
  EXPECT_EQ(s.residual, 1);
  EXPECT_EQ(s.normWeight, 2);
  EXPECT_EQ(s.qkvWeight, 3);
  EXPECT_EQ(s.qkvBias, -1);
  EXPECT_EQ(s.normBias, -1);
  EXPECT_EQ(s.positions, 4);
  EXPECT_EQ(s.seqLens, 5);
  EXPECT_EQ(s.blockTable, 6);
  EXPECT_EQ(s.keyCache, 7);
  EXPECT_EQ(s.valueCache, 8);
  EXPECT_EQ(s.output, 0);
  EXPECT_EQ(s.residualOut, 1);
}

TEST(FrontHalfSignature, RejectsOtherFunctions) {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  j["functions"][0]["arguments"][3]["shape"] = {96, 64};
  j["kernels"][0]["params"][3]["shape"] = {96, 64};
  j["kernels"][0]["params"][13]["shape"] = {96, 64}; // its tensor map
  Model m(Manifest::parse(j.dump(), "m.json"));
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, FrontHalfSignature::fromModel(m));
  EXPECT_CONTAINS(msg, "qkv weight \"qkv_w\" has shape [96, 64], expected "
                       "[128, 64] for 4/2 heads of 16");

  // Two layers: a second qkv weight argument.
  json two = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  json extra = two["functions"][0]["arguments"][3];
  extra["index"] = 9;
  extra["name"] = "qkv_w_1";
  two["functions"][0]["arguments"].push_back(extra);
  json k2 = two["kernels"][0];
  k2["index"] = 2;
  k2["params"][3]["binding"] = {{"argument", 9}};
  k2["params"][8].erase("binding");
  k2["params"][9].erase("binding");
  two["kernels"].push_back(k2);
  two["functions"][0]["kernels"].push_back(2);
  Model m3(Manifest::parse(two.dump(), "m.json"));
  msg = EXPECT_THROW_MSG(UnsupportedError, FrontHalfSignature::fromModel(m3));
  EXPECT_CONTAINS(msg, "has 2 qkv weights (2 layers)");

  json k = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  k["kernels"][1]["params"][4]["role"] = "positions";
  k["functions"][0]["arguments"][5]["role"] = "positions";
  Model m2(Manifest::parse(k.dump(), "m.json"));
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, FrontHalfSignature::fromModel(m2));
  EXPECT_CONTAINS(msg, "no argument with role \"seq_lens\"");
}

TEST(FrontHalfSignature, ReferenceFromTheKernelOps) {
  FrontHalfSignature s = FrontHalfSignature::fromModel(tinyModel());
  ASSERT_TRUE(s.reference.has_value());
  const ref::FrontHalfConfig &c = *s.reference;
  EXPECT_EQ(c.dtype, DType::F16);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.dims.qkvRows(), 128);
  EXPECT_EQ(c.norm, ref::NormKind::RMSNorm);
  EXPECT_DOUBLE_EQ(c.normOptions.eps, 1e-5);
  EXPECT_FALSE(c.normOptions.unit_offset);
  EXPECT_EQ(c.rope.pairing, ref::RopePairing::NeoX);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.rope.rotaryDim, 0); // = head_dim
  ASSERT_TRUE(c.rope.llama3.has_value());
  EXPECT_DOUBLE_EQ(c.rope.llama3->factor, 8.0);
  EXPECT_EQ(c.rope.llama3->originalMaxPosition, 8192);
  EXPECT_FALSE(c.attention.scale.has_value()); // 0.25 = 1/sqrt(16)

  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  auto &ops = j["kernels"][0]["ops"];
  ops[0] = {{"op", "rmsnorm"},
            {"attributes",
             {{"epsilon", 1e-6}, {"residual", true}, {"unit_offset", true}}}};
  ops[2]["attributes"] = {
      {"pairing", "gptj"}, {"rotary_dim", 8}, {"theta", 10000}};
  j["kernels"][1]["ops"][0]["attributes"]["scale"] = 0.125;
  Model m(Manifest::parse(j.dump(), "m.json"));
  FrontHalfSignature t = FrontHalfSignature::fromModel(m);
  ASSERT_TRUE(t.reference.has_value());
  EXPECT_TRUE(t.reference->normOptions.unit_offset);
  EXPECT_EQ(t.reference->rope.pairing, ref::RopePairing::GPTJ);
  EXPECT_EQ(t.reference->rope.rotaryDim, 8);
  EXPECT_FALSE(t.reference->rope.llama3.has_value());
  EXPECT_DOUBLE_EQ(*t.reference->attention.scale, 0.125);

  // No ops at all: no reference (the caller needs config.json or flags).
  for (auto &k : j["kernels"])
    k.erase("ops");
  Model none(Manifest::parse(j.dump(), "m.json"));
  EXPECT_FALSE(FrontHalfSignature::fromModel(none).reference.has_value());
}

TEST(FrontHalfSignature, OpsThatContradictTheBuffers) {
  auto check = [](const std::function<void(json &)> &mutate,
                  const std::string &expected) {
    json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
    mutate(j);
    Model m(Manifest::parse(j.dump(), "m.json"));
    std::string msg = EXPECT_THROW_MSG(Error, FrontHalfSignature::fromModel(m));
    EXPECT_CONTAINS(msg, expected);
  };
  check(
      [](json &j) {
        j["kernels"][0]["ops"][1]["attributes"]["num_kv_heads"] = 1;
      },
      "qkv_proj num_kv_heads = 1 but the buffers imply 2");
  check([](json &j) { j["kernels"][0]["ops"][1]["attributes"]["bias"] = true; },
        "qkv_proj bias = true but the function has no qkv_bias argument");
  check(
      [](json &j) {
        j["kernels"][0]["ops"][0]["attributes"]["residual"] = false;
      },
      "the rmsnorm op has no residual but the function has residual argument");
  check([](json &j) { j["kernels"][1]["ops"] = json::array(); },
        "the kernels' ops have no decode_attention");
  check(
      [](json &j) {
        j["kernels"][0]["ops"][2]["attributes"]["pairing"] = "interleaved";
      },
      "unknown rope pairing \"interleaved\"");
  check(
      [](json &j) {
        j["kernels"][0]["ops"][2]["attributes"]["scaling"]["type"] = "yarn";
      },
      "rope scaling \"yarn\" has no reference");
}

// Tensor-map slots: one per distinct described buffer and layout. The
// fixture's kernel 0 maps the qkv weight (argument 3, f16 [128, 64]) in one
// box of 128 x 64; here a second map of it in the same box shares the slot,
// a third in boxes of 64 x 64 gets slot 1, 128 bytes further.
TEST(LaunchPlan, TensorMapsShareSlotsOfOneWeightAndLayout) {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  json &params = j["kernels"][0]["params"];
  json same = params[13], smaller = params[13];
  smaller["tensor_map"]["box"] = {64, 64};
  params.insert(params.begin() + 14, {same, smaller});
  for (size_t i = 0; i < params.size(); ++i)
    params[i]["index"] = i;
  Model m(Manifest::parse(j.dump(), "m.json"));
  ASSERT_EQ(m.tensorMaps().size(), 2u);
  const TensorMapSlot &t = m.tensorMaps()[0];
  EXPECT_EQ(t.label, "kernel 0 (decode_layer_k0_fused) param 13 "
                     "\"weight_map\" of param 3 \"qkv_weight\"");
  EXPECT_EQ(t.target.kind, ParamSource::Kind::Argument);
  EXPECT_EQ(t.target.index, 3);
  EXPECT_EQ(t.dtype, ElemType::F16);
  EXPECT_EQ(shapeString(t.shape), "[128, 64]");
  EXPECT_EQ(t.spec.boxRows, 128);
  EXPECT_EQ(m.tensorMaps()[1].spec.boxRows, 64);
  EXPECT_EQ(m.paramSources(0)[13].index, 0);
  EXPECT_EQ(m.paramSources(0)[14].index, 0);
  EXPECT_EQ(m.paramSources(0)[15].index, 1);

  LaunchPlan plan(m, Capacity{8, 16, 100});
  EXPECT_EQ(plan.tensorMapTableBytes(), 2 * 128);
  EXPECT_EQ(plan.tensorMapAddress(0), 0u); // no table yet
  bindAll(plan);
  EXPECT_EQ(plan.tensorMapTarget(0), kArgStride * 4);
  EXPECT_EQ(plan.tensorMapTarget(1), kArgStride * 4);
  std::vector<PreparedLaunch> l = plan.prepare(StepShape{1, 5, 4});
  EXPECT_EQ(l[0].args[13].pointer, kTensorMapTable);
  EXPECT_EQ(l[0].args[14].pointer, kTensorMapTable);
  EXPECT_EQ(l[0].args[15].pointer, kTensorMapTable + 128);
  EXPECT_EQ(l[0].args[16].scalar, 1); // batch
}

// The maps of kernel 0's activation inputs (ActivationMaps.h): x
// (argument 0) and the residual (argument 1), f16 ["batch", 64], each a
// slot of its own after the weight's. Their rows are the capacity's batch,
// the rows the plan sizes (and bindArgument requires of) those arguments.
TEST(LaunchPlan, ActivationMapsCoverTheCapacitysRows) {
  Model m(Manifest::parse(withActivationMaps(json::parse(readText(dataPath(
                                                 "tiny_decode.manifest.json"))))
                              .dump(),
                          "m.json"));
  ASSERT_EQ(m.tensorMaps().size(), 3u);
  const TensorMapSlot &x = m.tensorMaps()[1], &r = m.tensorMaps()[2];
  EXPECT_EQ(x.label, "kernel 0 (decode_layer_k0_fused) param 14 "
                     "\"input_map\" of param 0 \"input\"");
  EXPECT_EQ(x.target.kind, ParamSource::Kind::Argument);
  EXPECT_EQ(x.target.index, 0);
  EXPECT_EQ(shapeString(x.shape), "[batch, 64]");
  EXPECT_EQ(x.spec.boxRows, 16);
  EXPECT_EQ(x.spec.boxCols, 64);
  EXPECT_EQ(r.label, "kernel 0 (decode_layer_k0_fused) param 15 "
                     "\"residual_map\" of param 2 \"residual\"");
  EXPECT_EQ(r.target.kind, ParamSource::Kind::Argument);
  EXPECT_EQ(r.target.index, 1);
  EXPECT_EQ(m.paramSources(0)[14].kind, ParamSource::Kind::TensorMap);
  EXPECT_EQ(m.paramSources(0)[14].index, 1);
  EXPECT_EQ(m.paramSources(0)[15].index, 2);

  for (int64_t maxBatch : {1, 5, 8}) {
    SCOPED_TRACE(maxBatch);
    LaunchPlan plan(m, Capacity{maxBatch, 16, 100});
    EXPECT_EQ(plan.tensorMapTableBytes(), 3 * 128);
    EXPECT_EQ(plan.tensorMapRows(0), 128); // the weight's constant rows
    EXPECT_EQ(plan.tensorMapRows(1), maxBatch);
    EXPECT_EQ(plan.tensorMapRows(2), maxBatch);
    // The arguments the maps describe hold maxBatch rows of 64 f16.
    EXPECT_EQ(plan.argumentBytes(0), maxBatch * 64 * 2);
    EXPECT_EQ(plan.argumentBytes(1), maxBatch * 64 * 2);
    bindAll(plan);
    EXPECT_EQ(plan.tensorMapTarget(1), kArgStride * 1);
    EXPECT_EQ(plan.tensorMapTarget(2), kArgStride * 2);
    EXPECT_EQ(plan.tensorMapRows(1), maxBatch); // the bound buffers hold them
    // Every step below the capacity passes the same maps (its batch is a
    // scalar): the slots' addresses in the table.
    std::vector<PreparedLaunch> l = plan.prepare(StepShape{1, 5, 4});
    EXPECT_EQ(l[0].args[13].pointer, kTensorMapTable);
    EXPECT_EQ(l[0].args[14].pointer, kTensorMapTable + 128);
    EXPECT_EQ(l[0].args[15].pointer, kTensorMapTable + 256);
    EXPECT_TRUE(l[0].args[16].isScalar);
    EXPECT_EQ(l[0].args[16].scalar, 1); // batch
  }
}

// The maps of the caches (CacheMaps.h): arguments 7 and 8, ["num_pages",
// 4, 2, 16], each a slot after the weight's. A map reads its cache as
// [num_pages * 4, 2 * 16]: every token slot of the pool the plan sizes
// (and bindArgument requires of) the cache for. Rows of 2^31 and more do
// not fit the kernel's i32 coordinates.
TEST(LaunchPlan, CacheMapsCoverEveryTokenSlotOfThePool) {
  Model m(Manifest::parse(withCacheMaps(json::parse(readText(dataPath(
                                            "tiny_decode.manifest.json"))))
                              .dump(),
                          "m.json"));
  ASSERT_EQ(m.tensorMaps().size(), 3u);
  const TensorMapSlot &k = m.tensorMaps()[1], &v = m.tensorMaps()[2];
  EXPECT_EQ(k.label, "kernel 1 (decode_layer_k1_decode_attention) param 9 "
                     "\"key_cache_map\" of param 1 \"key_cache\"");
  EXPECT_EQ(k.target.kind, ParamSource::Kind::Argument);
  EXPECT_EQ(k.target.index, 7);
  EXPECT_EQ(v.target.index, 8);
  EXPECT_EQ(k.cols(), 32);
  EXPECT_EQ(m.tensorMaps()[0].cols(), 64); // the weight's [128, 64]
  EXPECT_EQ(m.paramSources(1)[9].kind, ParamSource::Kind::TensorMap);
  EXPECT_EQ(m.paramSources(1)[9].index, 1);
  EXPECT_EQ(m.paramSources(1)[10].index, 2);
  for (int64_t pages : {1, 100}) {
    SCOPED_TRACE(pages);
    LaunchPlan plan(m, Capacity{8, 16, pages});
    EXPECT_EQ(plan.tensorMapRows(1), pages * 4);
    EXPECT_EQ(plan.tensorMapRows(2), pages * 4);
    EXPECT_EQ(plan.argumentBytes(7), pages * 4 * 32 * 2);
    bindAll(plan);
    EXPECT_EQ(plan.tensorMapTarget(1), kArgStride * 8);
    EXPECT_EQ(plan.tensorMapRows(1), pages * 4);
    std::vector<PreparedLaunch> l = plan.prepare(StepShape{1, 5, 4});
    EXPECT_EQ(l[1].args[9].pointer, kTensorMapTable + 128);
    EXPECT_EQ(l[1].args[10].pointer, kTensorMapTable + 256);
    EXPECT_TRUE(l[1].args[11].isScalar);
  }
  LaunchPlan below(m, Capacity{1, 1, (int64_t{1} << 29) - 1});
  EXPECT_EQ(below.tensorMapRows(1), (int64_t{1} << 31) - 4);
  LaunchPlan huge(m, Capacity{1, 1, int64_t{1} << 29});
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError, huge.tensorMapRows(1)),
      "\"key_cache_map\" of param 1 \"key_cache\" covers 2147483648 rows "
      "([num_pages, 4, 2, 16] at capacity");
}

// Two maps of one activation in one box share a slot; another box, or the
// same box over another input, gets its own.
TEST(LaunchPlan, ActivationMapsShareSlotsOfOneBufferAndBox) {
  json j = withActivationMaps(
      json::parse(readText(dataPath("tiny_decode.manifest.json"))));
  json &params = j["kernels"][0]["params"];
  json same = params[14], taller = params[14];
  taller["tensor_map"]["box"] = {64, 64};
  params.insert(params.begin() + 16, {same, taller});
  for (size_t i = 0; i < params.size(); ++i)
    params[i]["index"] = i;
  Model m(Manifest::parse(j.dump(), "m.json"));
  ASSERT_EQ(m.tensorMaps().size(), 4u);
  EXPECT_EQ(m.paramSources(0)[14].index, 1); // x, boxes of 16 rows
  EXPECT_EQ(m.paramSources(0)[15].index, 2); // the residual, 16 rows
  EXPECT_EQ(m.paramSources(0)[16].index, 1); // x again, 16 rows
  EXPECT_EQ(m.paramSources(0)[17].index, 3); // x, boxes of 64 rows
  EXPECT_EQ(m.tensorMaps()[3].target.index, 0);
  EXPECT_EQ(m.tensorMaps()[3].spec.boxRows, 64);
  LaunchPlan plan(m, Capacity{3, 1, 1});
  EXPECT_EQ(plan.tensorMapRows(3), 3);
}

TEST(LaunchPlan, TensorMapTableErrors) {
  Model m = tinyModel();
  LaunchPlan plan(m, Capacity{4, 4, 4});
  for (size_t i = 0; i < m.arguments().size(); ++i)
    plan.bindArgument(static_cast<int>(i), kArgStride * (i + 1),
                      plan.argumentBytes(static_cast<int>(i)));
  for (size_t i = 0; i < m.internalBuffers().size(); ++i)
    plan.setInternal(static_cast<int>(i), kInternalStride * (i + 1));
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, plan.prepare(StepShape{1, 1, 1}));
  EXPECT_CONTAINS(msg, "the tensor maps (kernel 0 (decode_layer_k0_fused) "
                       "param 13 \"weight_map\" of param 3 \"qkv_weight\", "
                       "...) have no device memory");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         plan.setTensorMapTable(kTensorMapTable + 32));
  EXPECT_CONTAINS(msg, "is null or not 64-byte aligned");
  EXPECT_THROW(plan.setTensorMapTable(0), InvalidArgumentError);
  plan.setTensorMapTable(kTensorMapTable + 64);
  EXPECT_EQ(plan.bindingKey().back(),
            kTensorMapTable + 64); // graphs capture the address
  EXPECT_EQ(plan.prepare(StepShape{1, 1, 1})[0].args[13].pointer,
            kTensorMapTable + 64);
  EXPECT_THROW((void)plan.tensorMapAddress(1), InvalidArgumentError);
}
