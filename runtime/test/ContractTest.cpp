//===- ContractTest.cpp - the compiler-runtime contract, by hand ----------===//
//
// Every expected number is derived by hand from docs/abi.md section 3.4:
//   num_splits = max(1, min(max_splits, floor(target_ctas / (batch * grid_y)),
//                           ceil(max_seq_len / min_chunk_tokens)))
//
//===----------------------------------------------------------------------===//

#include "fusion/contract/Contract.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>
#include <vector>

using namespace fusion::contract;

namespace {

// The policy is constexpr: a launcher may evaluate it at compile time.
static_assert(chooseNumSplits(SplitPolicy(), 1, 8, 1000) == 16);

TEST(ContractTest, ClusterSplitsAreZeroOrTwoToEight) {
  EXPECT_TRUE(isValidClusterSplits(0));
  EXPECT_FALSE(isValidClusterSplits(1)); // a cluster of one combines nothing
  EXPECT_TRUE(isValidClusterSplits(2));
  EXPECT_TRUE(isValidClusterSplits(8));
  EXPECT_FALSE(isValidClusterSplits(9)); // past the portable cluster size
  EXPECT_FALSE(isValidClusterSplits(-1));
}

TEST(ContractTest, ClusterXIsTheSplitsWhenTheyFitTheCluster) {
  EXPECT_EQ(chooseClusterX(8, 1), 1); // one split: nothing to combine
  EXPECT_EQ(chooseClusterX(8, 2), 2);
  EXPECT_EQ(chooseClusterX(8, 5), 5); // any size up to 8, not only powers of 2
  EXPECT_EQ(chooseClusterX(8, 8), 8);
  EXPECT_EQ(chooseClusterX(8, 9), 1); // more than the kernel's cluster_splits
  EXPECT_EQ(chooseClusterX(4, 5), 1);
  EXPECT_EQ(chooseClusterX(0, 4), 1);  // the kernel has no cluster combine
  EXPECT_EQ(chooseClusterX(16, 9), 1); // never past the portable 8
}

TEST(ContractTest, KSplitClusterIsTheRowTilesCtasWhenAskedAndPortable) {
  EXPECT_FALSE(isValidClusterKSplit(1)); // one CTA per row tile: no split
  EXPECT_TRUE(isValidClusterKSplit(2));
  EXPECT_TRUE(isValidClusterKSplit(8));
  EXPECT_FALSE(isValidClusterKSplit(9)); // SmolLM2's odd splits go past 8
  EXPECT_EQ(chooseKSplitClusterX(true, 4), 4);
  EXPECT_EQ(chooseKSplitClusterX(true, 8), 8);
  EXPECT_EQ(chooseKSplitClusterX(false, 4), 1); // not asked for
  EXPECT_EQ(chooseKSplitClusterX(true, 1), 1);
  EXPECT_EQ(chooseKSplitClusterX(true, 9), 1);
}

TEST(ContractTest, ClusterExchangeIsThePaddedPartialTileAndTheSquares) {
  EXPECT_EQ(clusterExchangePitch(128), 132);
  // 64 tokens x 132 floats + 64 sums of squares, 4 bytes each.
  EXPECT_EQ(clusterExchangeBytes(64, 128), 4 * 64 * 133);
  EXPECT_EQ(clusterExchangeBytes(16, 128), 8512);
}

TEST(ContractTest, DefaultSplitPolicyIsThe132SMOne) {
  SplitPolicy p;
  EXPECT_EQ(p.maxSplits, 64);
  EXPECT_EQ(p.targetCtas, 264); // 2 CTAs per SM x 132 SMs
  EXPECT_EQ(p.minChunkTokens, 64);
}

TEST(ContractTest, NumSplitsIsBoundedByLength) {
  SplitPolicy p; // 64, 264, 64
  // 264 / (1 * 8) = 33 CTAs' worth; ceil(1000 / 64) = ceil(15.6) = 16.
  EXPECT_EQ(chooseNumSplits(p, 1, 8, 1000), 16);
  // Exactly one chunk, and one token more: ceil(64/64) = 1, ceil(65/64) = 2.
  EXPECT_EQ(chooseNumSplits(p, 1, 8, 64), 1);
  EXPECT_EQ(chooseNumSplits(p, 1, 8, 65), 2);
}

TEST(ContractTest, NumSplitsIsBoundedByOneWaveRoundedDown) {
  SplitPolicy p;
  // ceil(100000 / 64) = 1563 is no bound; 264 / 8 = 33.
  EXPECT_EQ(chooseNumSplits(p, 1, 8, 100000), 33);
  // 264 / (5 * 8) = 6.6: floor, not round or ceil.
  EXPECT_EQ(chooseNumSplits(p, 5, 8, 100000), 6);
  // A custom policy: 1056 / (16 * 4) = 16.5 -> 16; ceil(1000 / 128) = 8.
  SplitPolicy q{/*maxSplits=*/32, /*targetCtas=*/1056, /*minChunkTokens=*/128};
  EXPECT_EQ(chooseNumSplits(q, 16, 4, 100000), 16);
  EXPECT_EQ(chooseNumSplits(q, 16, 4, 1000), 8);
}

TEST(ContractTest, NumSplitsIsBoundedByMaxSplits) {
  SplitPolicy p;
  // 264 / (1 * 2) = 132 and ceil(10^6 / 64) = 15625, so max_splits = 64.
  EXPECT_EQ(chooseNumSplits(p, 1, 2, 1000000), 64);
  SplitPolicy q{/*maxSplits=*/3, /*targetCtas=*/264, /*minChunkTokens=*/64};
  EXPECT_EQ(chooseNumSplits(q, 1, 8, 1000), 3);
}

TEST(ContractTest, NumSplitsIsAtLeastOne) {
  SplitPolicy p;
  // 264 / (64 * 8) = 0.5 -> 0, raised to 1.
  EXPECT_EQ(chooseNumSplits(p, 64, 8, 4096), 1);
  // An empty cache counts as one token: ceil(1 / 64) = 1.
  EXPECT_EQ(chooseNumSplits(p, 1, 8, 0), 1);
  // batch and grid_y below 1 count as 1: min(64, 264, ceil(10^5 / 64)).
  EXPECT_EQ(chooseNumSplits(p, 0, 0, 100000), 64);
  EXPECT_EQ(chooseNumSplits(p, -3, 8, 100000), 33);
}

TEST(ContractTest, SharedMemoryLimitsPerChip) {
  EXPECT_EQ(maxSharedBytesPerBlock(90), 232448); // 227 KiB
  EXPECT_EQ(maxSharedBytesPerBlock(80), 166912); // 163 KiB
  EXPECT_EQ(maxSharedBytesPerBlock(87), 166912);
  EXPECT_EQ(maxSharedBytesPerBlock(86), 101376); // 99 KiB
  EXPECT_EQ(maxSharedBytesPerBlock(89), 101376);
  EXPECT_EQ(maxSharedBytesPerBlock(75), 65536); // 64 KiB
  EXPECT_EQ(kMaxSharedBytesPerBlock, 232448);
}

TEST(ContractTest, RoleVocabularies) {
  EXPECT_EQ(paramKindName(ParamKind::Input), "input");
  EXPECT_EQ(paramKindName(ParamKind::Output), "output");
  EXPECT_EQ(paramKindName(ParamKind::Workspace), "workspace");
  EXPECT_EQ(paramKindName(ParamKind::Scalar), "scalar");
  EXPECT_EQ(parseParamKind("workspace"), ParamKind::Workspace);
  EXPECT_EQ(parseParamKind("scalar"), ParamKind::Scalar);
  EXPECT_EQ(parseParamKind("Input"), std::nullopt);
  // No vocabulary lists a role twice, and "unused" is an input role of none.
  std::set<std::string_view> inputs(kInputRoles.begin(), kInputRoles.end());
  std::set<std::string_view> outputs(kOutputRoles.begin(), kOutputRoles.end());
  EXPECT_EQ(inputs.size(), kInputRoles.size());
  EXPECT_EQ(outputs.size(), kOutputRoles.size());
  EXPECT_EQ(inputs.count(role::kUnused), 0u);
  // Each kind's list: roles of that kind only.
  EXPECT_EQ(paramRoles(ParamKind::Input).size(), kInputRoles.size());
  EXPECT_TRUE(paramRoles(ParamKind::Input).contains("block_table"));
  EXPECT_TRUE(paramRoles(ParamKind::Output).contains("residual_out"));
  EXPECT_FALSE(paramRoles(ParamKind::Input).contains("residual_out"));
  EXPECT_TRUE(paramRoles(ParamKind::Workspace).contains("split_counters"));
  EXPECT_FALSE(paramRoles(ParamKind::Workspace).contains("output"));
  EXPECT_TRUE(paramRoles(ParamKind::Scalar).contains("num_splits"));
  EXPECT_FALSE(paramRoles(ParamKind::Scalar).contains("num_pages"));
  EXPECT_EQ(paramRoles(ParamKind::Scalar)[0], "batch");
}

// Each tensor-map role describes inputs of its own roles (docs/abi.md 3.3).
TEST(ContractTest, TensorMapRolesNameTheirInputs) {
  const RoleList maps = paramRoles(ParamKind::TensorMap);
  EXPECT_EQ(maps.size(), 5u);
  EXPECT_TRUE(maps.contains("weight_map"));
  EXPECT_TRUE(maps.contains("input_map"));
  EXPECT_TRUE(maps.contains("residual_map"));
  EXPECT_TRUE(maps.contains("key_cache_map"));
  EXPECT_TRUE(maps.contains("value_cache_map"));
  EXPECT_FALSE(maps.contains("input"));
  auto targets = [](std::string_view map) {
    std::vector<std::string_view> roles;
    for (std::string_view r : tensorMapTargetRoles(map))
      roles.push_back(r);
    return roles;
  };
  using Roles = std::vector<std::string_view>;
  EXPECT_EQ(targets("weight_map"), (Roles{"weight", "qkv_weight"}));
  EXPECT_EQ(targets("input_map"), Roles{"input"});
  EXPECT_EQ(targets("residual_map"), Roles{"residual"});
  EXPECT_EQ(targets("key_cache_map"), Roles{"key_cache"});
  EXPECT_EQ(targets("value_cache_map"), Roles{"value_cache"});
  EXPECT_EQ(targets("input"), Roles{});
  EXPECT_EQ(targets(""), Roles{});
  // Every target is an input role.
  for (std::string_view map : maps)
    for (std::string_view r : tensorMapTargetRoles(map))
      EXPECT_TRUE(paramRoles(ParamKind::Input).contains(r)) << map << r;
}

// A tensor map reads a KV cache [num_pages, P, Hkv, D] as [num_pages * P,
// Hkv * D] (a row per token slot) and any other input as its own 2-D shape.
TEST(ContractTest, TensorMapRowDimensions) {
  EXPECT_EQ(tensorMapRowDims(4), 2u);
  EXPECT_EQ(tensorMapRowDims(2), 1u);
}

// FNV-1a 64 test vectors (Fowler/Noll/Vo reference: the empty string is the
// offset basis; "a" and "foobar" from the published table).
TEST(ContractTest, PtxFingerprintIsFnv1a64) {
  EXPECT_EQ(fusion::contract::ptxFingerprint(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fusion::contract::ptxFingerprint("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fusion::contract::ptxFingerprint("foobar"), 0x85944171f73967e8ull);
}

} // namespace
