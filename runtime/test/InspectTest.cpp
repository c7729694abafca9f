//===- InspectTest.cpp - fusion-run --inspect's launch plan ---------------===//

#include "TestUtil.h"

#include "fusion/tooling/Inspect.h"

#include <gtest/gtest.h>

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
  EXPECT_CONTAINS(plan, "grid [2, 2, 4] = [num_splits, 2, batch], block "
                        "[128, 1, 1], 12 params, ops decode_attention\n");
  // 16 * 4 * 2 * 16 f16 elements; a [4, 3] int32 block table.
  EXPECT_CONTAINS(plan, "    k_cache f16[num_pages, 4, 2, 16] role key_cache: "
                        "4096\n");
  EXPECT_CONTAINS(plan, "    block_table i32[batch, max_pages] role "
                        "block_table: 48\n");
  EXPECT_CONTAINS(plan, "  runtime buffers (bytes at capacity):\n");
  EXPECT_CONTAINS(plan, "split_counters\" i32[batch, 2] zero-init: 32\n");
  EXPECT_TRUE(plan.size() > 40 &&
              plan.substr(plan.size() - 38) ==
                  "inspect: the PTX matches the manifest\n");
}

} // namespace
