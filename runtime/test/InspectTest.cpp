//===- InspectTest.cpp - fusion-run --inspect's launch plan ---------------===//

#include "ActivationMaps.h"
#include "CacheMaps.h"
#include "TestUtil.h"

#include "fusion/tooling/Inspect.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using namespace fusion::tooling;

namespace {

TEST(Inspect, PlanOfTheTinyFunction) {
  Model model = Model::load(dataPath("tiny_decode.manifest.json"));
  std::ostringstream os;
  // Batch 4, 3 pages per sequence, 16 pages of 4 tokens (2 KV heads of 16).
  printPlan(os, model, Capacity{4, 3, 16}, 2);
  std::string plan = os.str();
  EXPECT_CONTAINS(plan, "  kernels (launch order; grids at batch 4):\n");
  // Kernel 0 (its 15 params and the weight's tensor map) and the
  // GEMM-shaped variant batch 4 launches (one CTA: one row tile, no
  // split-K; its staging layout is the compiler's, tested there).
  EXPECT_CONTAINS(plan, "    kernel 0 (decode_layer_k0_fused): grid [32, 1, "
                        "1] = [32, 1, 1], block [64, 1, 1], 16 params, ops "
                        "rmsnorm qkv_proj rope kv_append\n");
  EXPECT_CONTAINS(plan, "      variant for batch >= 2: "
                        "decode_layer_k0_fused_gemm16, grid [1, 1, 1] = [1, "
                        "1, 1], block [256, 1, 1], ");
  EXPECT_CONTAINS(plan, " bytes dynamic shared memory (launched at batch "
                        "4)\n");
  EXPECT_CONTAINS(plan, "      variant for batch >= 33: "
                        "decode_layer_k0_fused_gemm64, grid [1, 1, 1]");
  EXPECT_CONTAINS(plan, "    kernel 1 (decode_layer_k1_decode_attention): "
                        "grid [2, 2, 4] = [num_splits, 2, batch], block "
                        "[256, 1, 1], 12 params, ops decode_attention\n");
  // 16 * 4 * 2 * 16 f16 elements; a [4, 3] int32 block table.
  EXPECT_CONTAINS(plan, "    k_cache f16[num_pages, 4, 2, 16] role key_cache: "
                        "4096\n");
  EXPECT_CONTAINS(plan, "    block_table i32[batch, max_pages] role "
                        "block_table: 48\n");
  EXPECT_CONTAINS(plan, "  runtime buffers (bytes at capacity):\n");
  // f32 [4, 4 heads, max_splits 64, 16], first of kernel 1's scratch.
  EXPECT_CONTAINS(plan, "workspace \"partial_out\" f32[batch, 4, 64, 16]: "
                        "65536 at +0 of the scratch arena\n");
  // After it, partial_stats f32 [4, 4, 64, 2].
  EXPECT_CONTAINS(plan, "workspace \"partial_stats\" f32[batch, 4, 64, 2]: "
                        "8192 at +65536 of the scratch arena\n");
  EXPECT_CONTAINS(plan, "split_counters\" i32[batch, 2] zero-init: 32 at +0 "
                        "of the zero-init arena\n");
  // Scratch: kernel 1's 65536 + 8192 bytes exceed kernel 0's (f32 [4, 1, 128]
  // padded to 2048, then f32 [4, 1]); zero-init: kernel 1's i32 [4, 2] over
  // kernel 0's i32 [4, 1]. In all, also the three f16 outputs of 4 * 64
  // elements each and one 128-byte tensor map: 73728 + 32 + 3 * 512 + 128.
  EXPECT_CONTAINS(plan, "  workspace arenas (shared by the kernels): scratch "
                        "73728, zero-init 32 bytes; runtime buffers in all: "
                        "75424 bytes\n");
  // The qkv weight, (4 + 2 * 2) heads of 16 rows by hidden 64, in one box
  // of 128 rows by 64 columns (128 bytes of f16: the swizzle span).
  EXPECT_CONTAINS(plan, "  tensor maps (128 bytes each, one table):\n"
                        "    kernel 0 (decode_layer_k0_fused) param 13 "
                        "\"weight_map\" of param 3 \"qkv_weight\": f16[128, "
                        "64] in boxes [128, 64], 128-byte swizzle, at +0\n");
  EXPECT_TRUE(plan.size() > 40 &&
              plan.substr(plan.size() - 38) ==
                  "inspect: the PTX matches the manifest\n");
}

// An activation's map (ActivationMaps.h) over its "batch" rows: the
// capacity's batch, 4.
TEST(Inspect, ActivationMapsAtCapacity) {
  Model model(Manifest::parse(
      withActivationMaps(nlohmann::json::parse(
                             readText(dataPath("tiny_decode.manifest.json"))))
          .dump(),
      "m.json"));
  std::ostringstream os;
  printPlan(os, model, Capacity{4, 3, 16}, 2);
  EXPECT_CONTAINS(os.str(), "    kernel 0 (decode_layer_k0_fused) param 14 "
                            "\"input_map\" of param 0 \"input\": f16[batch, "
                            "64] = [4, 64] in boxes [16, 64], 128-byte "
                            "swizzle, at +128\n");
  EXPECT_CONTAINS(os.str(), "param 15 \"residual_map\" of param 2 "
                            "\"residual\": f16[batch, 64] = [4, 64] in boxes "
                            "[16, 64], 128-byte swizzle, at +256\n");
}

// A cache's map (CacheMaps.h) over every token slot of the pool: 16 pages
// of 4 slots, rows of 2 KV heads x 16.
TEST(Inspect, CacheMapsOverThePool) {
  Model model(
      Manifest::parse(withCacheMaps(nlohmann::json::parse(readText(
                                        dataPath("tiny_decode.manifest.json"))))
                          .dump(),
                      "m.json"));
  std::ostringstream os;
  printPlan(os, model, Capacity{4, 3, 16}, 2);
  EXPECT_CONTAINS(os.str(), "    kernel 1 (decode_layer_k1_decode_attention) "
                            "param 9 \"key_cache_map\" of param 1 "
                            "\"key_cache\": f16[num_pages, 4, 2, 16] = [64, "
                            "32] in boxes [16, 64], 128-byte swizzle, at "
                            "+128\n");
}

} // namespace
