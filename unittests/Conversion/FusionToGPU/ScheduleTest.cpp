//===- ScheduleTest.cpp - the schedule choosers on real model shapes ------===//
//
// Every expected value is derived by hand from the rules documented in
// Schedule/ProjectionSchedule.h and Schedule/AttentionSchedule.h for an
// sm_90 target with 132 SMs (227 KiB of shared memory per CTA), not copied
// from the compiler's output; the derivation is in the comments.
//
//===----------------------------------------------------------------------===//

#include "Schedule/AttentionSchedule.h"
#include "Schedule/ElementwiseSchedule.h"
#include "Schedule/ProjectionSchedule.h"

#include <gtest/gtest.h>

using namespace mlir::fusion;

namespace {

const TargetInfo kH100(/*computeCapability=*/90, /*smCount=*/132);
const TargetInfo kTuring(/*computeCapability=*/75, /*smCount=*/132);

/// hidden, (Hq + 2 Hkv) * D / 2 row pairs, f16/bf16.
ProjectionShape projection(int64_t hidden, int64_t hq, int64_t hkv, int64_t d) {
  return {hidden, (hq + 2 * hkv) * d / 2, 2};
}

TEST(ProjectionSchedule, Llama3_8B) {
  // 4096 hidden, 6144 rows = 3072 pairs, 384 row blocks of 16 rows.
  ProjectionShape shape = projection(4096, 32, 8, 128);
  auto mma = chooseProjectionMmaSchedule(shape, kH100);
  ASSERT_TRUE(mma);
  // Pitch 8192 B = 0 mod 128: +64 B = 32 elements.
  EXPECT_EQ(mma->rowStride, 4128);
  // (232448 - 4 * 7 * 32 * 4 * 4) / 8256 = 26 rows, rounded down to 24.
  EXPECT_EQ(mma->tileTokens, 24);
  EXPECT_EQ(mma->dynamicSharedBytes, 24 * 8256);
  EXPECT_EQ(mma->grid, 132);
  // 384 blocks x k_split must fit 132 CTAs x 8 warps = 1056: 2.
  EXPECT_EQ(mma->kSplit, 2);
  EXPECT_EQ(mma->vectors, 8); // 2048 % 256 == 0
  ProjectionSchedule s = chooseProjectionSchedule(shape, true, kH100);
  EXPECT_EQ(s.warps, 8); // ceil(3072 / 8) = 384 >= 132
  EXPECT_EQ(s.blockSize, 256);
  EXPECT_EQ(s.pairsPerWarp, 1); // ceil(3072 / (384 * 8))
  EXPECT_EQ(s.grid, 384);
  EXPECT_EQ(s.batchTile, 1); // the variant takes batches >= 2
  EXPECT_EQ(s.unroll, 2);
  EXPECT_EQ(s.minCtasPerSM, 3); // min(3, 232448 / 9248, 2048 / 256)
}

TEST(ProjectionSchedule, Llama3_8BWithoutTensorCores) {
  ProjectionShape shape = projection(4096, 32, 8, 128);
  EXPECT_FALSE(chooseProjectionMmaSchedule(shape, kTuring));
  ProjectionSchedule s = chooseProjectionSchedule(shape, false, kTuring);
  // 8 x 8192 B > 47104 B: 4 tokens (32768 B).
  EXPECT_EQ(s.batchTile, 4);
  EXPECT_EQ(s.minCtasPerSM, 3); // 232448 / (32800 + 1024) = 6
}

TEST(ProjectionSchedule, Qwen2_7B) {
  // 3584 hidden, 4608 rows = 2304 pairs, 288 row blocks.
  ProjectionShape shape = projection(3584, 28, 4, 128);
  auto mma = chooseProjectionMmaSchedule(shape, kH100);
  ASSERT_TRUE(mma);
  EXPECT_EQ(mma->rowStride, 3616); // 7168 B = 0 mod 128
  EXPECT_EQ(mma->tileTokens, 24);  // 218112 / 7232 = 30 -> 24
  EXPECT_EQ(mma->kSplit, 2);       // 288 * 4 > 1056 >= 288 * 2
  EXPECT_EQ(mma->vectors, 8);      // 1792 % 256 == 0
  ProjectionSchedule s = chooseProjectionSchedule(shape, true, kH100);
  EXPECT_EQ(s.warps, 8);
  EXPECT_EQ(s.grid, 288);
}

TEST(ProjectionSchedule, TinyLlama) {
  // 2048 hidden, 2560 rows = 1280 pairs, 160 row blocks.
  ProjectionShape shape = projection(2048, 32, 4, 64);
  auto mma = chooseProjectionMmaSchedule(shape, kH100);
  ASSERT_TRUE(mma);
  EXPECT_EQ(mma->tileTokens, 32); // 218112 / 4160 = 52 -> capped at 32
  EXPECT_EQ(mma->kSplit, 4);      // 160 * 8 > 1056 >= 160 * 4
  EXPECT_EQ(mma->vectors, 8);     // 512 % 256 == 0
  ProjectionSchedule s = chooseProjectionSchedule(shape, true, kH100);
  EXPECT_EQ(s.warps, 4); // 1280 / 4 = 320 CTAs <= 3 x 132
  EXPECT_EQ(s.grid, 320);
  EXPECT_EQ(s.pairsPerWarp, 1); // ceil(1280 / (320 * 4))
}

TEST(ProjectionSchedule, Group5Hidden5120) {
  // 5120 hidden, 40 + 2 x 8 heads of 128: 3584 pairs, 448 row blocks.
  ProjectionShape shape = projection(5120, 40, 8, 128);
  auto mma = chooseProjectionMmaSchedule(shape, kH100);
  ASSERT_TRUE(mma);
  EXPECT_EQ(mma->tileTokens, 16); // 218112 / 10304 = 21 -> 16
  EXPECT_EQ(mma->kSplit, 2);      // 448 * 4 > 1056 >= 448 * 2
  ProjectionSchedule s = chooseProjectionSchedule(shape, true, kH100);
  // 3584 / 8 = 448 CTAs' worth of pairs, at most 3 x 132 = 396 slots.
  EXPECT_EQ(s.grid, 396);
  EXPECT_EQ(s.pairsPerWarp, 2); // ceil(3584 / (396 * 8))
}

TEST(ProjectionSchedule, Llama3_8BMlpAtBatch1) {
  // gate/up: 4096 hidden, 2 x 14336 rows = 14336 pairs: 1792 CTAs' worth,
  // one per slot of 3 x 132, ceil(14336 / 3168) = 5 rounds.
  ProjectionShape gateUp{4096, 14336, 2};
  ProjectionSchedule s = chooseProjectionSchedule(gateUp, true, kH100);
  EXPECT_EQ(s.grid, 396);
  EXPECT_EQ(s.pairsPerWarp, 5);
  EXPECT_EQ(s.minCtasPerSM, 3);
  EXPECT_EQ(s.reservedSharedBytes, 0);
  // down_proj: 14336 hidden, 4096 rows = 2048 pairs = 256 CTAs' worth, one
  // round of at most two per SM, 117 MB of weights: held to two CTAs per SM.
  ProjectionShape down{14336, 2048, 2};
  s = chooseProjectionSchedule(down, true, kH100);
  EXPECT_EQ(s.grid, 256);
  EXPECT_EQ(s.pairsPerWarp, 1);
  EXPECT_EQ(s.minCtasPerSM, 2);
  EXPECT_EQ(s.unroll, 4);
  // 232448 * 2 / 5 = 92979 bytes per CTA, less 28672 + 32 static and 1024
  // reserved: 63251, down to a multiple of 16.
  EXPECT_EQ(s.reservedSharedBytes, 63248);
  // o_proj (4096 hidden, 2048 pairs): 232448 * 2 / 5 = 92979, less 8192 +
  // 32 static and 1024 reserved: 83731, down to a multiple of 16.
  EXPECT_EQ(chooseProjectionSchedule({4096, 2048, 2}, true, kH100)
                .reservedSharedBytes,
            83728);
  // Without programmatic dependent launch (sm_80, same SM count) nothing is
  // held, nor without the batch variants (the kernel then runs at every
  // batch).
  const TargetInfo sm80(/*computeCapability=*/80, /*smCount=*/132);
  s = chooseProjectionSchedule(down, true, sm80);
  EXPECT_EQ(s.minCtasPerSM, 3);
  EXPECT_EQ(s.reservedSharedBytes, 0);
  EXPECT_EQ(chooseProjectionSchedule(down, false, kH100).reservedSharedBytes,
            0);
  // SmolLM2's down_proj (1536 hidden, 288 pairs, 1.7 MB) stays in L2:
  // nothing is held either.
  s = chooseProjectionSchedule({1536, 288, 2}, true, kH100);
  EXPECT_EQ(s.reservedSharedBytes, 0);
  EXPECT_EQ(s.unroll, 2);
}

TEST(ProjectionSchedule, WeightsInRegistersBeforeTheWait) {
  // SmolLM2's layer kernels: one pair per warp, rows of ceil(576 / 256) = 3
  // and 1536 / 256 = 6 chunks.
  EXPECT_EQ(chooseProjectionSchedule({576, 480, 2}, true, kH100).preloadChunks,
            3); // q/k/v: 2 warps x 240 CTAs
  EXPECT_EQ(chooseProjectionSchedule({1536, 288, 2}, true, kH100).preloadChunks,
            6); // down_proj
  ProjectionSchedule gateUp =
      chooseProjectionSchedule({576, 1536, 2}, true, kH100);
  EXPECT_EQ(gateUp.pairsPerWarp, 1); // 384 CTAs of 4 warps
  EXPECT_EQ(gateUp.preloadChunks, 3);
  // Not: rows of more than 6 chunks (Llama-3-8B's down_proj, one pair per
  // warp), no programmatic dependent launch (sm_80).
  EXPECT_EQ(
      chooseProjectionSchedule({14336, 2048, 2}, true, kH100).preloadChunks, 0);
  EXPECT_EQ(chooseProjectionSchedule({1792, 288, 2}, true, kH100).preloadChunks,
            0); // 7 chunks
  const TargetInfo sm80(/*computeCapability=*/80, /*smCount=*/132);
  EXPECT_EQ(chooseProjectionSchedule({576, 480, 2}, true, sm80).preloadChunks,
            0);
  // Not without a batch variant either (tiles of up to 4 tokens), nor where
  // the 48 registers of 6 chunks exceed a third of the 85 that 3 CTAs of 256
  // threads leave (hidden 1536, 2560 pairs: 320 CTAs of 8 warps).
  EXPECT_EQ(chooseProjectionSchedule({576, 480, 2}, false, kH100).preloadChunks,
            0);
  ProjectionSchedule wide =
      chooseProjectionSchedule({1536, 2560, 2}, true, kH100);
  EXPECT_EQ(wide.pairsPerWarp, 1);
  EXPECT_EQ(wide.blockSize, 256);
  EXPECT_EQ(wide.preloadChunks, 0);
}

TEST(ProjectionSchedule, SeveralPairsPerWarpKeepTheNextOneInFlight) {
  // SmolLM2's LM head: 24576 pairs of rows of 3 chunks in 8-warp CTAs. Two
  // pairs' vectors (2 x 2 rows x 3 chunks x 4 = 48 registers) exceed 2/5 of
  // the 85 that 3 CTAs of 256 threads leave (34), not 2/5 of 2 CTAs' 128
  // (51): 2 CTAs per SM, 264 CTAs, ceil(24576 / 2112) = 12 pairs per warp.
  ProjectionSchedule head =
      chooseProjectionSchedule({576, 24576, 2}, true, kH100);
  EXPECT_EQ(head.warps, 8);
  EXPECT_EQ(head.minCtasPerSM, 2);
  EXPECT_EQ(head.grid, 264);
  EXPECT_EQ(head.pairsPerWarp, 12);
  EXPECT_EQ(head.preloadChunks, 3);
  // Rows of 4 chunks (the Qwen2-0.5B shape's LM head, hidden 896: 75968
  // pairs): 64 registers exceed 2/5 of 2 CTAs' 128 too (they spilled); the
  // kernel keeps 3 CTAs per SM and its pipelined loop. So does its gate/up
  // (4864 pairs: 396 CTAs of 8 warps, 2 pairs per warp).
  ProjectionSchedule wideHead =
      chooseProjectionSchedule({896, 75968, 2}, true, kH100);
  EXPECT_EQ(wideHead.minCtasPerSM, 3);
  EXPECT_EQ(wideHead.grid, 396);
  EXPECT_EQ(wideHead.preloadChunks, 0);
  ProjectionSchedule qwenGateUp =
      chooseProjectionSchedule({896, 4864, 2}, true, kH100);
  EXPECT_EQ(qwenGateUp.warps, 8);
  EXPECT_EQ(qwenGateUp.minCtasPerSM, 3);
  EXPECT_EQ(qwenGateUp.grid, 396);
  EXPECT_EQ(qwenGateUp.pairsPerWarp, 2);
  EXPECT_EQ(qwenGateUp.preloadChunks, 0);
  // Not without a batch variant (tiles of up to 4 tokens).
  EXPECT_EQ(
      chooseProjectionSchedule({576, 24576, 2}, false, kH100).preloadChunks, 0);
}

TEST(ProjectionSchedule, Batch1KernelsSpreadOverTheSMs) {
  // A kernel that runs only at batch 1 takes fewer warps per CTA while the
  // CTAs still make one round of 3 per SM: SmolLM2's gate/up, 1536 pairs,
  // in 384 CTAs of 4 warps (every SM two or three), not 192 of 8 (72 SMs
  // with one CTA, 60 with two).
  ProjectionSchedule gateUp =
      chooseProjectionSchedule({576, 1536, 2}, true, kH100);
  EXPECT_EQ(gateUp.warps, 4);
  EXPECT_EQ(gateUp.blockSize, 128);
  EXPECT_EQ(gateUp.grid, 384);
  // Not where the kernel serves every batch (its CTAs each normalise the
  // whole batch), nor where halving would pass one round (Llama-3-8B's
  // gate/up at batch 1: 14336 pairs).
  ProjectionSchedule batched =
      chooseProjectionSchedule({576, 1536, 2}, false, kH100);
  EXPECT_EQ(batched.warps, 8);
  EXPECT_EQ(batched.grid, 192);
  EXPECT_EQ(chooseProjectionSchedule({4096, 14336, 2}, true, kH100).warps, 8);
  // q/k/v: 480 pairs in 240 CTAs of 2 warps, the fewest warps a CTA takes.
  ProjectionSchedule qkv = chooseProjectionSchedule({576, 480, 2}, true, kH100);
  EXPECT_EQ(qkv.warps, 2);
  EXPECT_EQ(qkv.grid, 240);
}

TEST(ProjectionSchedule, Group6Hidden1000) {
  // 1000 hidden (not a multiple of 32: no variant), 768 pairs.
  ProjectionShape shape = projection(1000, 12, 2, 96);
  EXPECT_FALSE(chooseProjectionMmaSchedule(shape, kH100));
  ProjectionSchedule s = chooseProjectionSchedule(shape, false, kH100);
  EXPECT_EQ(s.warps, 4); // ceil(768 / 8) = 96 < 132, ceil(768 / 4) = 192
  EXPECT_EQ(s.blockSize, 128);
  EXPECT_EQ(s.grid, 192);
  EXPECT_EQ(s.batchTile, 4); // 8 fits 47104 B, capped at 4
  EXPECT_EQ(s.unroll, 2);    // 3 chunks of 256
  EXPECT_EQ(s.minCtasPerSM, 3);
}

TEST(ProjectionSchedule, ArgmaxSlotsInTheStaticBudget) {
  // 5888 hidden: 4 tokens of 5888 f16 fill the 47104-byte static budget
  // exactly; an argmax's slots (getArgmaxSharedBytes(4) = 40 bytes) then
  // leave room for 2 only.
  ProjectionShape head{5888, 1024, 2};
  EXPECT_EQ(chooseProjectionSchedule(head, false, kH100).batchTile, 4);
  head.argmax = true;
  EXPECT_EQ(getArgmaxSharedBytes(4), 40);
  ProjectionSchedule s = chooseProjectionSchedule(head, false, kH100);
  EXPECT_EQ(s.batchTile, 2);
  // 2 x 5888 x 2 + 24 + 4 x 8 warps = 23608 bytes: 9 per 227 KiB, so the
  // cap of 3.
  EXPECT_EQ(s.minCtasPerSM, 3);
}

/// The GEMM-shaped variant's shape: an RMSNorm with a residual unless
/// stated (2 activation rows and a norm-weight row per stage).
ProjectionGemmShape gemmShape(int64_t hidden, int64_t hq, int64_t hkv,
                              int64_t d,
                              ProjectionNorm norm = ProjectionNorm::FoldableRMS,
                              bool residual = true) {
  return {projection(hidden, hq, hkv, d), d, hq + 2 * hkv, norm, residual};
}

const TargetInfo kAmpere(/*computeCapability=*/80, /*smCount=*/108);
const TargetInfo kAda(/*computeCapability=*/89, /*smCount=*/128);

TEST(ProjectionGemmSchedule, Llama3_8B) {
  // 48 heads of 128: one head per row tile (128 / 128 = 1), 48 row tiles.
  auto s = chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), kH100);
  ASSERT_EQ(s.size(), 3u);
  for (const ProjectionGemmSchedule &g : s) {
    EXPECT_EQ(g.tileRows, 128);
    EXPECT_EQ(g.warps(), 8);
    EXPECT_EQ(g.rowTiles, 48);
    // 48 x 8 = 384 > 264 = 2 x 132; 48 x 4 = 192 <= 264, 4096 % 256 == 0.
    EXPECT_EQ(g.kSplit, 4);
    EXPECT_EQ(g.grid(), 192);
    EXPECT_EQ(g.pitchBytes, 144); // 64 f16 + 16
  }
  EXPECT_EQ(s[0].tileTokens, 16);
  EXPECT_EQ(s[0].minBatch, 2);
  EXPECT_EQ(s[1].tileTokens, 32);
  EXPECT_EQ(s[1].minBatch, 17);
  EXPECT_EQ(s[2].tileTokens, 64);
  EXPECT_EQ(s[2].minBatch, 33);
  // 128 weight rows + 64 x and 64 residual rows + 1 norm-weight row; on
  // sm_90 the weight rows come by TMA, unpadded (128 bytes), and the slots
  // start at 1 KiB boundaries: 128 x 128 + 129 x 144 = 34960 -> 35840,
  // 3 slots + 1 KiB to align them.
  EXPECT_EQ(s[2].stageRows, 257);
  EXPECT_TRUE(s[2].tmaWeights);
  EXPECT_EQ(s[2].weightPitchBytes(), 128);
  EXPECT_EQ(s[2].slotBytes, 35840);
  EXPECT_EQ(s[2].stages, 3);
  EXPECT_EQ(s[2].dynamicSharedBytes, 3 * 35840 + 1024); // 108544
  // Two CTAs: 2 x (108544 + 64 + 1024) = 219264 <= 232448 (64: the flag
  // and 6 mbarriers); a 4th stage would leave room for one.
  EXPECT_EQ(s[2].minCtasPerSM, 2);
  // TMA stages cost no registers, so the ring deepens while two CTAs still
  // fit (16 k steps per CTA): 128 x 128 + 33 x 144 = 21136 -> 21504, 5
  // stages: 2 x (5 x 21504 + 1024 + 64 + 1024) = 219264 (6: 262272); 32
  // tokens: 128 x 128 + 65 x 144 = 25744 -> 26624, 4 stages: 217216 (5:
  // 270464).
  EXPECT_EQ(s[0].stages, 5);
  EXPECT_EQ(s[0].dynamicSharedBytes, 5 * 21504 + 1024);
  EXPECT_EQ(s[0].minCtasPerSM, 2);
  EXPECT_EQ(s[1].stages, 4);
  EXPECT_EQ(s[1].dynamicSharedBytes, 4 * 26624 + 1024);
  EXPECT_EQ(s[1].minCtasPerSM, 2);
}

TEST(ProjectionGemmSchedule, WarpgroupMmaOnSm90a) {
  const TargetInfo sm90a(/*computeCapability=*/90, /*smCount=*/132,
                         /*archSpecific=*/true);
  // Llama-3-8B: 128-row tiles (two warpgroups); every row 128 bytes,
  // unpadded: 128 x 128 + 129 x 128 = 32896 -> 33792 for 64 tokens, and
  // 20608 -> 21504 for 16 (five stages as on sm_90).
  auto s = chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), sm90a);
  ASSERT_EQ(s.size(), 3u);
  for (const ProjectionGemmSchedule &g : s) {
    EXPECT_TRUE(g.wgmma);
    EXPECT_EQ(g.pitchBytes, 128);
    EXPECT_EQ(g.weightPitchBytes(), 128);
  }
  EXPECT_EQ(s[2].slotBytes, 33792);
  EXPECT_EQ(s[2].stages, 3);
  EXPECT_EQ(s[0].slotBytes, 21504);
  EXPECT_EQ(s[0].stages, 5);
  // head_dim 256: one head per 256-row tile, four warpgroups.
  EXPECT_TRUE(
      chooseProjectionGemmSchedules(gemmShape(1024, 2, 1, 256), sm90a)[0]
          .wgmma);
  // 67 heads of 16 rows (1072 rows, an LM head of 16 x a prime): tiles of
  // one head, 16 rows, are not whole warpgroups, so mma.sync.
  ProjectionGemmShape narrow = gemmShape(512, 1, 0, 16);
  narrow.headDim = 16;
  narrow.heads = 67;
  narrow.projection.pairs = 16 * 67 / 2;
  auto n = chooseProjectionGemmSchedules(narrow, sm90a);
  ASSERT_FALSE(n.empty());
  EXPECT_EQ(n[0].tileRows, 16);
  EXPECT_FALSE(n[0].wgmma);
  EXPECT_EQ(n[0].pitchBytes, 144);
  // sm_90 (not arch-specific): mma.sync.
  EXPECT_FALSE(
      chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), kH100)[0]
          .wgmma);
}

TEST(ProjectionGemmSchedule, WarpSpecializedOnSm90a) {
  const TargetInfo sm90a(/*computeCapability=*/90, /*smCount=*/132,
                         /*archSpecific=*/true, /*warpSpecializedGemm=*/true);
  // Llama-3-8B q/k/v with x and the residual TMA-readable: the 16-token
  // variant is warp-specialised. k split 2 (48 x 2 = 96 <= 132 SMs; 4
  // would be 192); stage rows 128 + 3 x 16 (x, residual, h) + 1 = 177 of
  // 128 bytes = 22656 -> 23552; one CTA per SM (96 <= 132), so whole
  // pairs of stages (two fold warps) as 227 KiB hold: 8 x 23552 + 1 KiB +
  // 336 static (flag, 24 mbarriers, 2 x 16 sums) + 1 KiB reserved =
  // 190800, the cap of 8.
  ProjectionGemmShape qkv = gemmShape(4096, 32, 8, 128);
  qkv.tmaTokenRows = true;
  auto s = chooseProjectionGemmSchedules(qkv, sm90a);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_TRUE(s[0].warpSpecialized);
  EXPECT_EQ(s[0].kSplit, 2);
  EXPECT_EQ(s[0].grid(), 96);
  EXPECT_EQ(s[0].stageRows, 177);
  EXPECT_EQ(s[0].slotBytes, 23552);
  EXPECT_EQ(s[0].stages, 8);
  EXPECT_EQ(s[0].dynamicSharedBytes, 8 * 23552 + 1024);
  EXPECT_EQ(s[0].minCtasPerSM, 1);
  EXPECT_EQ(s[0].warps(), 8);
  EXPECT_EQ(s[0].blockSize(), 32 * 11);
  // The 32- and 64-token tiles too, with the same grid: 128 + 3 x 32 + 1 =
  // 225 rows -> 28800 -> 29696 bytes, 6 stages (6 x 29696 + 1024 + 464
  // static + 1024 = 180688; 8 would be 240080 > 227 KiB); 128 + 3 x 64 + 1
  // = 321 rows -> 41088 -> 41984, 4 stages (170704; 6: 254672).
  EXPECT_TRUE(s[1].warpSpecialized);
  EXPECT_EQ(s[1].grid(), 96);
  EXPECT_EQ(s[1].slotBytes, 29696);
  EXPECT_EQ(s[1].stages, 6);
  EXPECT_TRUE(s[2].warpSpecialized);
  EXPECT_EQ(s[2].grid(), 96);
  EXPECT_EQ(s[2].slotBytes, 41984);
  EXPECT_EQ(s[2].stages, 4);
  EXPECT_EQ(s[2].dynamicSharedBytes, 4 * 41984 + 1024);
  // Without a residual: 128 + 2 x 16 + 1 = 161 rows -> 20608 -> 21504.
  ProjectionGemmShape noResidual = qkv;
  noResidual.residual = false;
  EXPECT_EQ(chooseProjectionGemmSchedules(noResidual, sm90a)[0].slotBytes,
            21504);
  // Gate/up (pairs as heads of 2 rows): 14336 pairs, 224 tiles of 128
  // rows; no split fits the SMs once, so k split 1 and two CTAs per SM:
  // 2 x (4 x 23552 + 1024 + 336 + 1024) = 193184 <= 232448, 6 would not.
  ProjectionGemmShape gateUp = qkv;
  gateUp.headDim = 2;
  gateUp.heads = 14336;
  gateUp.projection.pairs = 14336;
  auto g = chooseProjectionGemmSchedules(gateUp, sm90a);
  ASSERT_FALSE(g.empty());
  EXPECT_TRUE(g[0].warpSpecialized);
  EXPECT_EQ(g[0].rowTiles, 224);
  EXPECT_EQ(g[0].kSplit, 1);
  EXPECT_EQ(g[0].minCtasPerSM, 2);
  EXPECT_EQ(g[0].stages, 4);
  // At 32 tokens two CTAs per SM hold one round of stages only
  // (2 x (4 x 29696 + 1024 + 464 + 1024) = 242592 > 232448): the
  // variant is not warp-specialised, nor at 64.
  ASSERT_EQ(g.size(), 3u);
  EXPECT_FALSE(g[1].warpSpecialized);
  EXPECT_FALSE(g[2].warpSpecialized);
  // Not where the token rows need a gather or a sum (tmaTokenRows false),
  // on sm_90 (no wgmma), or where the grid leaves most SMs idle (SmolLM2's
  // q/k/v: 15 tiles of 64 rows, hidden 576 splits by no power of two).
  EXPECT_FALSE(
      chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), sm90a)[0]
          .warpSpecialized);
  EXPECT_FALSE(chooseProjectionGemmSchedules(qkv, kH100)[0].warpSpecialized);
  // Opt-in: sm_90a without warpSpecializedGemm keeps every variant.
  const TargetInfo sm90aDefault(90, 132, /*archSpecific=*/true);
  EXPECT_FALSE(
      chooseProjectionGemmSchedules(qkv, sm90aDefault)[0].warpSpecialized);
  ProjectionGemmShape smol = gemmShape(576, 9, 3, 64);
  smol.tmaTokenRows = true;
  auto small = chooseProjectionGemmSchedules(smol, sm90a);
  ASSERT_FALSE(small.empty());
  EXPECT_FALSE(small[0].warpSpecialized);
}

TEST(ProjectionGemmSchedule, ClusterKSplitWhereAskedAndItFits) {
  const TargetInfo sm90(/*computeCapability=*/90, /*smCount=*/132,
                        /*archSpecific=*/false, /*warpSpecializedGemm=*/false,
                        /*clusterKSplit=*/true);
  // Llama-3-8B q/k/v: k split 4 (in [2, 8], dividing the tile's 64 row
  // pairs: 16 per CTA), so every variant combines through a cluster; the
  // 64-token exchange, 64 x (132 + 1) x 4 = 34048 bytes, fits its ring of
  // 3 x 35840.
  auto s = chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), sm90);
  ASSERT_EQ(s.size(), 3u);
  for (const ProjectionGemmSchedule &g : s) {
    EXPECT_TRUE(g.clusterKSplit);
    EXPECT_EQ(g.kSplit, 4);
    EXPECT_LE(g.clusterExchangeBytes(), g.stages * g.slotBytes);
  }
  EXPECT_EQ(s[2].clusterExchangeBytes(), 34048);
  // The schedule is otherwise unchanged (the grid, the ring).
  const TargetInfo off(90, 132, false, false, /*clusterKSplit=*/false);
  auto plain = chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), off);
  EXPECT_EQ(s[0].grid(), plain[0].grid());
  EXPECT_EQ(s[0].dynamicSharedBytes, plain[0].dynamicSharedBytes);
  // On by default; off where not asked for and on a target without clusters.
  EXPECT_TRUE(
      chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), kH100)[0]
          .clusterKSplit);
  EXPECT_FALSE(plain[0].clusterKSplit);
  const TargetInfo ampere(80, 108, false, false, /*clusterKSplit=*/true);
  EXPECT_FALSE(
      chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), ampere)[0]
          .clusterKSplit);
  // SmolLM2's q/k/v (hidden 576: 9 stages, k split 9 > 8): no cluster.
  auto smol = chooseProjectionGemmSchedules(gemmShape(576, 9, 3, 64), sm90);
  ASSERT_FALSE(smol.empty());
  EXPECT_EQ(smol[0].kSplit, 9);
  EXPECT_FALSE(smol[0].clusterKSplit);
  // With the warp-specialised variants too: their k split 2 (96 CTAs,
  // clusters of 2); the 64-token exchange, 34048 bytes, fits 4 x 41984.
  const TargetInfo both(90, 132, /*archSpecific=*/true,
                        /*warpSpecializedGemm=*/true, /*clusterKSplit=*/true);
  ProjectionGemmShape qkv = gemmShape(4096, 32, 8, 128);
  qkv.tmaTokenRows = true;
  for (const ProjectionGemmSchedule &g :
       chooseProjectionGemmSchedules(qkv, both)) {
    EXPECT_TRUE(g.warpSpecialized);
    EXPECT_TRUE(g.clusterKSplit);
    EXPECT_EQ(g.kSplit, 2);
  }
}

TEST(ProjectionGemmSchedule, HeadDimsAndGroups) {
  // TinyLlama: 32 + 2 x 4 = 40 heads of 64: two per tile (128 rows), 20
  // tiles; k split 8 (160 <= 264, 2048 % 512 == 0).
  auto tiny = chooseProjectionGemmSchedules(gemmShape(2048, 32, 4, 64), kH100);
  ASSERT_EQ(tiny.size(), 3u);
  EXPECT_EQ(tiny[0].tileRows, 128);
  EXPECT_EQ(tiny[0].rowTiles, 20);
  EXPECT_EQ(tiny[0].kSplit, 8);
  // 14 + 2 x 2 = 18 heads of 64 (Qwen2-0.5B-like): 2 divides 18.
  auto g7 = chooseProjectionGemmSchedules(gemmShape(896, 14, 2, 64), kH100);
  ASSERT_EQ(g7.size(), 3u);
  EXPECT_EQ(g7[0].tileRows, 128);
  EXPECT_EQ(g7[0].rowTiles, 9);
  // 896 = 14 x 64: 896 % 512 != 0, 896 % 256 != 0, 896 % 128 == 0 -> 2.
  EXPECT_EQ(g7[0].kSplit, 2);
  // SmolLM2: 9 + 2 x 3 = 15 heads of 64, one per tile; hidden 576 is 9
  // stages of 64, which no power of two divides: k split 9 (15 x 9 = 135
  // <= 264).
  auto smol = chooseProjectionGemmSchedules(gemmShape(576, 9, 3, 64), kH100);
  ASSERT_EQ(smol.size(), 3u);
  EXPECT_EQ(smol[0].rowTiles, 15);
  EXPECT_EQ(smol[0].kSplit, 9);
  // One k step per CTA: the ring stays at 3 stages (deeper would only cost
  // shared memory).
  EXPECT_EQ(smol[0].stages, 3);
  // 5 + 2 x 1 = 7 heads of 64: 2 does not divide 7, one head per tile: 64
  // rows, 4 warps.
  auto odd = chooseProjectionGemmSchedules(gemmShape(512, 5, 1, 64), kH100);
  ASSERT_EQ(odd.size(), 3u);
  EXPECT_EQ(odd[0].tileRows, 64);
  EXPECT_EQ(odd[0].blockSize(), 128);
  EXPECT_EQ(odd[0].rowTiles, 7);
  // head_dim 96: 128 / 96 = 1 head, 96 rows (6 warps); head_dim 80: 80
  // rows (5 warps).
  EXPECT_EQ(chooseProjectionGemmSchedules(gemmShape(1024, 8, 2, 96), kH100)[0]
                .tileRows,
            96);
  EXPECT_EQ(chooseProjectionGemmSchedules(gemmShape(2560, 32, 32, 80), kH100)[0]
                .tileRows,
            80);
  // head_dim 256 (Gemma): one head, 16 warps, one CTA per SM (512 threads).
  auto gemma =
      chooseProjectionGemmSchedules(gemmShape(3072, 16, 2, 256), kH100);
  ASSERT_EQ(gemma.size(), 3u);
  EXPECT_EQ(gemma[2].tileRows, 256);
  EXPECT_EQ(gemma[2].blockSize(), 512);
  EXPECT_EQ(gemma[2].minCtasPerSM, 1);
  // 256 weight rows of 128 bytes + 128 + 1 rows of 144 = 51344 -> 52224
  // (1 KiB); k split 8 leaves 6 k steps per CTA, and one CTA fits 4
  // stages + 1 KiB: 209920 + 64 + 1024 <= 232448 (5: 263168).
  EXPECT_EQ(gemma[2].kSplit, 8);
  EXPECT_EQ(gemma[2].stages, 4);
  EXPECT_EQ(gemma[2].dynamicSharedBytes, 4 * 52224 + 1024);
}

TEST(ProjectionGemmSchedule, NormsAndTargets) {
  // No norm (the unfused qkv_proj kernel): only the x rows are staged.
  auto none = chooseProjectionGemmSchedules(
      gemmShape(4096, 32, 8, 128, ProjectionNorm::None, false), kH100);
  ASSERT_EQ(none.size(), 3u);
  EXPECT_EQ(none[2].stageRows, 128 + 64);
  // RMSNorm without a residual: x and the norm weight.
  auto noResidual = chooseProjectionGemmSchedules(
      gemmShape(4096, 32, 8, 128, ProjectionNorm::FoldableRMS, false), kH100);
  EXPECT_EQ(noResidual[2].stageRows, 128 + 64 + 1);
  // LayerNorm (or a norm output the kernel writes): no GEMM variant.
  EXPECT_TRUE(chooseProjectionGemmSchedules(
                  gemmShape(4096, 32, 8, 128, ProjectionNorm::Other), kH100)
                  .empty());
  // No tensor cores, or hidden not a multiple of 64.
  EXPECT_TRUE(
      chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), kTuring)
          .empty());
  EXPECT_TRUE(chooseProjectionGemmSchedules(gemmShape(4064, 32, 8, 128), kH100)
                  .empty());
  // sm_80 (163 KiB per CTA, 108 SMs): 3 stages still fit at 64 tokens;
  // 48 x 4 = 192 <= 216.
  auto ampere =
      chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), kAmpere);
  ASSERT_EQ(ampere.size(), 3u);
  EXPECT_EQ(ampere[2].stages, 3);
  EXPECT_EQ(ampere[2].kSplit, 4);
  // No TMA before sm_90: the weight rows are padded like the others.
  EXPECT_FALSE(ampere[2].tmaWeights);
  EXPECT_EQ(ampere[2].weightPitchBytes(), 144);
  EXPECT_EQ(ampere[2].dynamicSharedBytes, 3 * 257 * 144);
  // sm_89 (99 KiB = 101376 bytes, less 40): 3 x 37008 = 111024 does not fit,
  // 2 stages (74016) do; 32 tokens (193 rows, 83376 bytes) keep 3.
  auto ada = chooseProjectionGemmSchedules(gemmShape(4096, 32, 8, 128), kAda);
  ASSERT_EQ(ada.size(), 3u);
  EXPECT_EQ(ada[1].stages, 3);
  EXPECT_EQ(ada[2].stages, 2);
  EXPECT_EQ(ada[2].dynamicSharedBytes, 2 * 257 * 144);
}

/// Hq, Hkv, D with pages of 16 slots.
AttentionShape attention(int64_t hq, int64_t hkv, int64_t d) {
  return {hq, hkv, d, 16, hq / hkv};
}

std::optional<AttentionSchedule>
choose(const AttentionShape &shape,
       const AttentionScheduleOverrides &overrides = {}) {
  std::string error;
  auto s = chooseAttentionSchedule(shape, overrides, kH100, error);
  EXPECT_EQ(s.has_value(), error.empty()) << error;
  return s;
}

TEST(WeightPrefetch, OnlyWholeSmallWeights) {
  // SmolLM2's gate/up: 3072 x 576 f16 = 3.4 MiB; its LM head: 49152 x 576
  // = 54 MiB; Llama-3-8B's QKV: 6144 x 4096 = 48 MiB; the 8 MiB budget.
  EXPECT_TRUE(shouldPrefetchWeights(3072 * 576 * 2));
  EXPECT_FALSE(shouldPrefetchWeights(int64_t{49152} * 576 * 2));
  EXPECT_FALSE(shouldPrefetchWeights(int64_t{6144} * 4096 * 2));
  EXPECT_TRUE(shouldPrefetchWeights(8 << 20));
  EXPECT_FALSE(shouldPrefetchWeights((8 << 20) + 16));
}

TEST(AttentionSchedule, Llama3_8B) {
  auto s = choose(attention(32, 8, 128)); // G = 4
  ASSERT_TRUE(s);
  EXPECT_EQ(s->headsPerCta, 4);
  EXPECT_EQ(s->headBlocks, 1);
  EXPECT_EQ(s->threads, 256);
  EXPECT_EQ(s->unroll, 4);
  EXPECT_EQ(s->lanesPerRow, 16); // 128 / 8 vectors
  EXPECT_EQ(s->rowsPerWarp, 2);
  EXPECT_EQ(s->tokensPerIter, 64); // 8 warps x 2 rows x 4
  EXPECT_EQ(s->sharedFloats, 8 * 4 * 130);
  EXPECT_EQ(s->splitPolicy.targetCtas, 264); // 2 per SM
  EXPECT_EQ(s->maxSplits, 64);
}

TEST(AttentionSchedule, ClusterSplitsFitTheStaticSharedMemory) {
  // Llama-3-8B: merge 8 x 4 x 130 floats + the 4-byte flag = 16644 bytes,
  // at 32 bytes 16672; 2080 bytes per split: (49152 - 16672) / 2080 = 15
  // splits would fit, capped at 8.
  auto l8 = choose(attention(32, 8, 128));
  ASSERT_TRUE(l8);
  EXPECT_EQ(l8->clusterSplits, 8);
  EXPECT_EQ(l8->exchangeFloats, 8 * 4 * 130);
  // G = 8, D = 256, 128 threads: merge 4 x 8 x 258 = 8256 floats (33028
  // bytes with the flag, at 32 bytes 33056), 8256 bytes per split:
  // (49152 - 33056) / 8256 = 1 split, so none.
  auto wide = choose(attention(16, 2, 256));
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->sharedFloats, 8256);
  EXPECT_EQ(wide->clusterSplits, 0);
  EXPECT_EQ(wide->exchangeFloats, 0);
  // An override of 0 turns it off; sm_80 has no clusters.
  AttentionScheduleOverrides off;
  off.clusterSplits = 0;
  EXPECT_EQ(choose(attention(32, 8, 128), off)->clusterSplits, 0);
  std::string error;
  auto a100 = chooseAttentionSchedule(attention(32, 8, 128), {},
                                      TargetInfo(80, 108), error);
  ASSERT_TRUE(a100) << error;
  EXPECT_EQ(a100->clusterSplits, 0);
  AttentionScheduleOverrides four;
  four.clusterSplits = 4;
  EXPECT_FALSE(chooseAttentionSchedule(attention(32, 8, 128), four,
                                       TargetInfo(80, 108), error));
  EXPECT_EQ(error, "attention schedule: cluster_splits 4 needs thread-block "
                   "clusters (sm_90+)");
  // No more than max_splits: the default follows it, an override may not
  // exceed it.
  AttentionScheduleOverrides three;
  three.maxSplits = 3;
  EXPECT_EQ(choose(attention(32, 8, 128), three)->clusterSplits, 3);
  three.maxSplits = 1;
  EXPECT_EQ(choose(attention(32, 8, 128), three)->clusterSplits, 0);
  four.maxSplits = 3;
  EXPECT_FALSE(chooseAttentionSchedule(attention(32, 8, 128), four, kH100,
                                       error));
  EXPECT_EQ(error,
            "attention schedule: cluster_splits 4 is more than max_splits 3");
}

TEST(AttentionSchedule, HeadOutputsOfTheOutputProjectionCountInSharedMemory) {
  // G = 8, D = 128, one KV head (128 threads): merge 4 x 8 x 130 floats +
  // the flag = 16644 bytes, at 32 bytes 16672; 4160 bytes per split:
  // (49152 - 16672) / 4160 = 7 splits. With the output projection (rule 6)
  // the 8 x 128 head outputs (4096 bytes) come first: (49152 - 20768) /
  // 4160 = 6, and the whole static shared memory stays within 48 KiB.
  AttentionShape shape = attention(8, 1, 128);
  auto plain = choose(shape);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->headOutFloats, 0);
  EXPECT_EQ(plain->clusterSplits, 7);
  shape.outputProjection = true;
  auto projecting = choose(shape);
  ASSERT_TRUE(projecting);
  EXPECT_EQ(projecting->headOutFloats, 8 * 128);
  EXPECT_EQ(projecting->mergeAndFlagBytes(), 16672 + 4096);
  EXPECT_EQ(projecting->clusterSplits, 6);
  EXPECT_LE(projecting->mergeAndFlagBytes() + projecting->exchangeFloats * 4,
            kH100.getMaxStaticSharedBytes());
}

TEST(AttentionSchedule, MmaVariantKeepsClustersOnlyWithoutCostingOccupancy) {
  // Llama-3-8B: ring 4 warps x 3 stages x (K, V) x 16 x 136 x 2 = 104448
  // bytes; merge 4 x 4 x 130 floats + flag = 8324, at 32 bytes 8352; 1024
  // reserved: 113824 bytes, 2 CTAs per SM (232448 / 113824). The primary's
  // exchange buffer (8 x 4 x 130 x 4 = 16640 bytes) would make it 130464,
  // 1 per SM: dropped.
  auto l8 = choose(attention(32, 8, 128));
  ASSERT_EQ(l8->clusterSplits, 8);
  auto mma = chooseAttentionMmaSchedule(attention(32, 8, 128), *l8, kH100);
  ASSERT_TRUE(mma);
  EXPECT_EQ(mma->ringBytes, 104448);
  EXPECT_EQ(mma->clusterSplits, 0);
  EXPECT_EQ(mma->exchangeFloats, 0);
  // G = 8 (128 threads): merge 4 x 8 x 130 floats + flag -> 16672 bytes;
  // the primary fits (49152 - 16672) / 4160 = 7 splits. 104448 + 16672 +
  // 1024 = 122144 bytes is 1 CTA per SM with or without the 7 x 4160
  // bytes of exchange buffer: kept.
  auto g8 = choose(attention(64, 8, 128));
  ASSERT_EQ(g8->clusterSplits, 7);
  auto g8mma = chooseAttentionMmaSchedule(attention(64, 8, 128), *g8, kH100);
  ASSERT_TRUE(g8mma);
  EXPECT_EQ(g8mma->clusterSplits, 7);
  EXPECT_EQ(g8mma->exchangeFloats, 7 * 8 * 130);
}

TEST(AttentionSchedule, Qwen2_7B) {
  auto s = choose(attention(28, 4, 128)); // G = 7 > 4
  ASSERT_TRUE(s);
  EXPECT_EQ(s->headsPerCta, 7);
  EXPECT_EQ(s->threads, 128);
  EXPECT_EQ(s->unroll, 2);
  EXPECT_EQ(s->tokensPerIter, 16); // 4 warps x 2 rows x 2
}

TEST(AttentionSchedule, TinyLlama) {
  auto s = choose(attention(32, 4, 64)); // G = 8, D = 64
  ASSERT_TRUE(s);
  EXPECT_EQ(s->headsPerCta, 8);
  EXPECT_EQ(s->lanesPerRow, 8);
  EXPECT_EQ(s->rowsPerWarp, 4);
  EXPECT_EQ(s->tokensPerIter, 32); // 4 warps x 4 rows x 2
}

TEST(AttentionSchedule, Group6HeadDim96AndLargeGroups) {
  auto s = choose(attention(12, 2, 96)); // G = 6, 12 vectors in 16 lanes
  ASSERT_TRUE(s);
  EXPECT_EQ(s->numVecs, 12);
  EXPECT_EQ(s->lanesPerRow, 16);
  EXPECT_EQ(s->threads, 128);
  auto big = choose(attention(48, 4, 128)); // G = 12: 2 blocks of 6
  ASSERT_TRUE(big);
  EXPECT_EQ(big->headsPerCta, 6);
  EXPECT_EQ(big->headBlocks, 2);
}

TEST(AttentionSchedule, NoSplitIsEmptyByTheChunkRounding) {
  // SmolLM2 (G = 3, D = 64): 8 warps x 4 rows x 4 tokens = 128 per
  // iteration, so a split per 64 tokens would leave every other split of a
  // chunk rounded up to 128 empty; at 576 tokens: 5 splits, all used.
  auto smol = choose(attention(9, 3, 64));
  ASSERT_TRUE(smol);
  EXPECT_EQ(smol->tokensPerIter, 128);
  EXPECT_EQ(smol->splitPolicy.minChunkTokens, 128);
  EXPECT_EQ(::fusion::contract::chooseNumSplits(smol->splitPolicy, 1, 3, 576),
            5);
  // Fewer tokens per iteration keep the contract's 64.
  auto llama = choose(attention(32, 8, 128));
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->splitPolicy.minChunkTokens, 64);
  auto qwen = choose(attention(28, 4, 128));
  ASSERT_TRUE(qwen);
  EXPECT_EQ(qwen->splitPolicy.minChunkTokens, 64);
}

TEST(AttentionSchedule, Overrides) {
  AttentionScheduleOverrides o;
  o.threads = 64;
  o.maxSplits = 8;
  auto s = choose(attention(32, 8, 128), o);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->threads, 64);
  EXPECT_EQ(s->maxSplits, 8);
  std::string error;
  o.threads = 48;
  EXPECT_FALSE(chooseAttentionSchedule(attention(32, 8, 128), o, kH100, error));
  EXPECT_NE(error.find("threads must be a multiple of 32"), std::string::npos);
}

TEST(AttentionSchedule, TensorCoreVariant) {
  auto primary = choose(attention(32, 8, 128));
  ASSERT_TRUE(primary);
  auto s = chooseAttentionMmaSchedule(attention(32, 8, 128), *primary, kH100);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->tensorCores);
  EXPECT_EQ(s->threads, 128);
  EXPECT_EQ(s->stages, 3);
  EXPECT_EQ(s->tokensPerIter, 64); // 4 warps x 16-token tiles
  // 4 warps x 3 stages x K and V x 16 rows x (128 + 8) x 2 bytes.
  EXPECT_EQ(s->ringBytes, 104448);
  EXPECT_EQ(s->sharedFloats, 4 * 4 * 130);
  // The same workspaces and split policy as the kernel it varies.
  EXPECT_EQ(s->headsPerCta, primary->headsPerCta);
  EXPECT_EQ(s->headBlocks, primary->headBlocks);
  EXPECT_EQ(s->maxSplits, primary->maxSplits);
  EXPECT_EQ(s->splitPolicy.targetCtas, primary->splitPolicy.targetCtas);
}

TEST(AttentionSchedule, TensorCoreVariantWithCtaRing) {
  const TargetInfo ring(90, 132, /*archSpecific=*/false,
                        /*warpSpecializedGemm=*/false, /*clusterKSplit=*/false,
                        /*attentionCtaRing=*/true);
  auto primary = choose(attention(32, 8, 128));
  ASSERT_TRUE(primary);
  auto s = chooseAttentionMmaSchedule(attention(32, 8, 128), *primary, ring);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->ctaRing);
  // 4 consumer warps + the producer; the same 64 tokens per round.
  EXPECT_EQ(s->threads, 160);
  EXPECT_EQ(s->stateWarps(), 4);
  EXPECT_EQ(s->tokensPerIter, 64);
  // 16 stages of 2 x 16 x 128 x 2 = 8192 bytes (unpadded: swizzled TMA
  // boxes) + 1 KiB of alignment = 132096; one CTA per SM, so the split
  // policy targets 132 CTAs (the per-warp rings': 2 x 132).
  EXPECT_EQ(s->stages, 16);
  EXPECT_EQ(s->ringBytes, 132096);
  EXPECT_EQ(s->splitPolicy.targetCtas, 132);
  EXPECT_EQ(primary->splitPolicy.targetCtas, 264);
  EXPECT_EQ(s->maxSplits, primary->maxSplits);
  // attention-ring-stages 8: 8 x 8192 + 1024 = 66560 bytes, 2 CTAs per SM.
  auto withStages = [&](int64_t stages) {
    return chooseAttentionMmaSchedule(attention(32, 8, 128), *primary,
                                      TargetInfo(90, 132, false, false, false,
                                                 /*attentionCtaRing=*/true,
                                                 stages));
  };
  auto s8 = withStages(8);
  ASSERT_TRUE(s8);
  EXPECT_TRUE(s8->ctaRing);
  EXPECT_EQ(s8->stages, 8);
  EXPECT_EQ(s8->ringBytes, 66560);
  EXPECT_EQ(s8->splitPolicy.targetCtas, 264);
  // The most stages the option takes still fit one CTA at head_dim 128:
  // 24 x 8192 + 1024 = 197632 bytes.
  auto sMax = withStages(kMaxAttentionRingStages);
  ASSERT_TRUE(sMax);
  EXPECT_EQ(sMax->stages, 24);
  EXPECT_EQ(sMax->ringBytes, 197632);
  // D = 64: 16 stages of 2 x 16 x 64 x 2 = 4096 bytes + 1 KiB = 66560:
  // three such rings would fit 227 KiB, the policy's 2 CTAs per SM do.
  auto small = choose(attention(32, 4, 64));
  ASSERT_TRUE(small);
  auto d64 = chooseAttentionMmaSchedule(attention(32, 4, 64), *small, ring);
  ASSERT_TRUE(d64);
  EXPECT_TRUE(d64->ctaRing);
  EXPECT_EQ(d64->stages, 16);
  EXPECT_EQ(d64->ringBytes, 66560);
  EXPECT_EQ(d64->splitPolicy.targetCtas, 264);
  // The ring combines its splits through the workspaces, unless the kernel
  // projects o_proj (the cluster's CTAs share its rows): then the primary's
  // cluster_splits stays (1 CTA per SM either way).
  EXPECT_EQ(s->clusterSplits, 0);
  EXPECT_EQ(s->exchangeFloats, 0);
  AttentionShape projected = attention(32, 8, 128);
  projected.outputProjection = true;
  auto withO = choose(projected);
  ASSERT_TRUE(withO);
  ASSERT_GT(withO->clusterSplits, 0);
  auto o = chooseAttentionMmaSchedule(projected, *withO, ring);
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->ctaRing);
  EXPECT_EQ(o->clusterSplits, withO->clusterSplits);
  EXPECT_EQ(o->exchangeFloats, withO->exchangeFloats);
  // D = 96 is not a whole number of 64-column boxes: the per-warp rings.
  auto d96primary = choose(attention(32, 8, 96));
  ASSERT_TRUE(d96primary);
  auto d96 =
      chooseAttentionMmaSchedule(attention(32, 8, 96), *d96primary, ring);
  ASSERT_TRUE(d96);
  EXPECT_FALSE(d96->ctaRing);
  EXPECT_EQ(d96->threads, 128);
  // Opt-in, and only with bulk copies (sm_90).
  auto off = chooseAttentionMmaSchedule(attention(32, 8, 128), *primary, kH100);
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->ctaRing);
  const TargetInfo ampere(80, 108, false, false, false,
                          /*attentionCtaRing=*/true);
  auto a = chooseAttentionMmaSchedule(attention(32, 8, 128), *primary, ampere);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->ctaRing);
  EXPECT_EQ(a->threads, 128);
}

TEST(AttentionSchedule, TensorCoreVariantOnlyWhereItApplies) {
  auto mma = [](const AttentionShape &shape, const TargetInfo &target) {
    auto primary = choose(shape);
    return primary && chooseAttentionMmaSchedule(shape, *primary, target);
  };
  EXPECT_TRUE(mma(attention(32, 4, 64), kH100));     // D = 64, G = 8
  EXPECT_TRUE(mma(attention(32, 2, 128), kH100));    // G = 16: 2 blocks of 8
  EXPECT_FALSE(mma(attention(32, 8, 128), kTuring)); // no mma.sync
  EXPECT_FALSE(mma(attention(8, 2, 256), kH100));    // D > 128
  EXPECT_FALSE(mma(attention(12, 4, 72), kH100));    // D not a multiple of 16
  EXPECT_TRUE(mma(attention(12, 4, 80), kH100));     // D = 80 = 5 x 16
  AttentionShape pages12 = attention(32, 8, 128);
  pages12.pageSize = 12; // a tile would span pages
  EXPECT_FALSE(mma(pages12, kH100));
  // sm_86: 99 KiB per CTA cannot hold the 104448-byte ring.
  EXPECT_FALSE(mma(attention(32, 8, 128), TargetInfo(86, 84)));
}

TEST(ElementwiseSchedule, BlockSizes) {
  EXPECT_EQ(chooseNormBlockSize(4096), 256); // 512 vectors, capped
  EXPECT_EQ(chooseNormBlockSize(1000), 128); // 125 vectors -> 4 warps
  EXPECT_EQ(chooseNormBlockSize(64), 32);
  EXPECT_EQ(chooseHeadBlockSize(128), 64);
  EXPECT_EQ(chooseHeadBlockSize(96), 64);
}

TEST(ElementwiseSchedule, RowSchedules) {
  // The widest vector of at most 8 elements that divides the row.
  EXPECT_EQ(chooseRowVectorWidth(14336), 8);
  EXPECT_EQ(chooseRowVectorWidth(100), 4);
  EXPECT_EQ(chooseRowVectorWidth(6), 2);
  EXPECT_EQ(chooseRowVectorWidth(1001), 1);
  // One vector per thread, up to 256 threads, whole warps.
  auto chunks = [](int64_t vectors) {
    RowChunks r = chooseRowChunks(vectors);
    return std::make_pair(r.threads, r.chunks);
  };
  EXPECT_EQ(chunks(1792), std::make_pair(int64_t(256), int64_t(7)));
  EXPECT_EQ(chunks(512), std::make_pair(int64_t(256), int64_t(2)));
  EXPECT_EQ(chunks(257), std::make_pair(int64_t(256), int64_t(2)));
  EXPECT_EQ(chunks(72), std::make_pair(int64_t(96), int64_t(1)));
  EXPECT_EQ(chunks(3), std::make_pair(int64_t(32), int64_t(1)));
  // argmax: kArgmaxUnroll vectors per thread and step, 32 to 1024 threads.
  EXPECT_EQ(chooseArgmaxBlockSize(16032), 1024); // Llama-3, capped
  EXPECT_EQ(chooseArgmaxBlockSize(4096), 1024);
  EXPECT_EQ(chooseArgmaxBlockSize(1001), 256); // 251 per step
  EXPECT_EQ(chooseArgmaxBlockSize(25), 32);
}

} // namespace
