//===- AttentionSchedule.cpp - schedule of the split-KV attention ---------===//

#include "AttentionSchedule.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir::fusion;
namespace contract = ::fusion::contract;

/// Checks the overridable members of `s` (see chooseAttentionSchedule).
static bool checkRanges(const AttentionSchedule &s, int64_t group,
                        std::string &error) {
  if (s.threads < 32 || s.threads > 1024 || s.threads % 32 != 0)
    error = ("attention schedule: threads must be a multiple of 32 in "
             "[32, 1024], got " +
             llvm::Twine(s.threads))
                .str();
  else if (s.maxSplits < 1 || s.maxSplits > 1024)
    error = ("attention schedule: max_splits must be in [1, 1024], got " +
             llvm::Twine(s.maxSplits))
                .str();
  else if (s.unroll < 1 || s.unroll > 16)
    error = ("attention schedule: kv_unroll must be in [1, 16], got " +
             llvm::Twine(s.unroll))
                .str();
  else if (s.headsPerCta < 1 || group % s.headsPerCta != 0 ||
           s.headsPerCta > 2 * kMaxAttentionHeadsPerCta)
    error =
        ("attention schedule: heads_per_cta (" + llvm::Twine(s.headsPerCta) +
         ") must divide the group size " + llvm::Twine(group) +
         " and be at most " + llvm::Twine(2 * kMaxAttentionHeadsPerCta))
            .str();
  else
    return true;
  return false;
}

/// Sets s.clusterSplits (the override, or the most that fit) and
/// s.exchangeFloats; false with `error` set when the override is out of
/// range, the target has no clusters, or its buffer does not fit beside the
/// merge buffer in the static shared memory.
static bool chooseClusterSplits(AttentionSchedule &s,
                                const AttentionShape &shape,
                                std::optional<int64_t> override,
                                const TargetInfo &target, std::string &error) {
  const int64_t perSplit = s.headsPerCta * (shape.headDim + 2);
  const int64_t maxStatic = target.getMaxStaticSharedBytes();
  const int64_t fits =
      target.hasClusters()
          ? std::min({contract::kMaxClusterSplits, s.maxSplits,
                      (maxStatic - s.mergeAndFlagBytes()) / (perSplit * 4)})
          : 0;
  s.clusterSplits = override.value_or(fits >= 2 ? fits : 0);
  const int64_t n = s.clusterSplits;
  if (!contract::isValidClusterSplits(n))
    error =
        ("attention schedule: cluster_splits must be 0 or in [2, " +
         llvm::Twine(contract::kMaxClusterSplits) + "], got " + llvm::Twine(n))
            .str();
  else if (n != 0 && !target.hasClusters())
    error = ("attention schedule: cluster_splits " + llvm::Twine(n) +
             " needs thread-block clusters (sm_90+)")
                .str();
  else if (n > s.maxSplits)
    error = ("attention schedule: cluster_splits " + llvm::Twine(n) +
             " is more than max_splits " + llvm::Twine(s.maxSplits))
                .str();
  else if (n > fits)
    error = ("attention schedule: cluster_splits " + llvm::Twine(n) +
             " needs " + llvm::Twine(n * perSplit * 4) +
             " bytes of exchange buffer beside the merge buffer's " +
             llvm::Twine(s.mergeAndFlagBytes()) + ", more than " +
             llvm::Twine(maxStatic))
                .str();
  else {
    s.exchangeFloats = n * perSplit;
    return true;
  }
  return false;
}

std::optional<AttentionSchedule> mlir::fusion::chooseAttentionSchedule(
    const AttentionShape &shape, const AttentionScheduleOverrides &o,
    const TargetInfo &target, std::string &error) {
  AttentionSchedule s;
  int64_t g = shape.group;
  // Heads per CTA: all of the group when it fits in registers, else the
  // largest divisor of G not above kMaxAttentionHeadsPerCta.
  int64_t gc = 1;
  for (int64_t d = std::min(g, kMaxAttentionHeadsPerCta); d >= 1; --d)
    if (g % d == 0) {
      gc = d;
      break;
    }
  // Defaults from a sweep on the H200 (test/gpu/check_attention.py --sweep,
  // 2026-11-29): for Gc <= 4, 256 threads with 4 tokens per row group
  // (~128 registers, 2 CTAs per SM) were fastest at every (B, L) tried; for
  // Gc > 4 (~170-210 registers), 128 threads with 2 tokens.
  s.threads = o.threads.value_or(gc > 4 ? 128 : 256);
  s.maxSplits = o.maxSplits.value_or(s.maxSplits);
  s.unroll = o.unroll.value_or(gc > 4 ? 2 : 4);
  s.headsPerCta = o.headsPerCta.value_or(gc);
  if (!checkRanges(s, g, error))
    return std::nullopt;
  s.headBlocks = g / s.headsPerCta;
  s.numVecs = shape.headDim / AttentionSchedule::vectorWidth;
  s.lanesPerRow = static_cast<int64_t>(llvm::PowerOf2Ceil(s.numVecs));
  s.rowsPerWarp = TargetInfo::kWarpSize / s.lanesPerRow;
  s.rowGroups = (s.threads / TargetInfo::kWarpSize) * s.rowsPerWarp;
  s.tokensPerIter = s.rowGroups * s.unroll;
  s.sharedFloats = (s.threads / 32) * s.headsPerCta * (shape.headDim + 2);
  s.headOutFloats = shape.outputProjection ? s.headsPerCta * shape.headDim : 0;
  const int64_t mergeBytes =
      (s.sharedFloats + s.headOutFloats) * 4 + AttentionSchedule::kFlagBytes;
  if (mergeBytes > target.getMaxStaticSharedBytes()) {
    error = ("attention schedule needs " + llvm::Twine(mergeBytes) +
             " bytes of shared memory (threads " + llvm::Twine(s.threads) +
             ", heads_per_cta " + llvm::Twine(s.headsPerCta) + ", head_dim " +
             llvm::Twine(shape.headDim) + "), more than " +
             llvm::Twine(target.getMaxStaticSharedBytes()))
                .str();
    return std::nullopt;
  }
  if (!chooseClusterSplits(s, shape, o.clusterSplits, target, error))
    return std::nullopt;
  // About one wave of resident CTAs (2 per SM): more splits than that ran
  // slower in the sweep (a second, partial wave).
  s.splitPolicy.targetCtas = contract::kTargetCtasPerSM * target.getSMCount();
  // A split's chunk is rounded up to tokensPerIter, so a split per fewer
  // tokens would be empty (SmolLM2, head_dim 64: 128 tokens per iteration,
  // 9 splits at 576 tokens left 4 empty and 9 partials to combine).
  s.splitPolicy.minChunkTokens =
      std::max(s.splitPolicy.minChunkTokens, s.tokensPerIter);
  return s;
}

std::optional<AttentionSchedule>
mlir::fusion::chooseAttentionMmaSchedule(const AttentionShape &shape,
                                         const AttentionSchedule &primary,
                                         const TargetInfo &target) {
  constexpr int64_t kWarps = 4, kStages = 3, kTile = kAttentionMmaTileTokens;
  if (!target.hasTensorCores() || shape.headDim % 16 != 0 ||
      shape.headDim > 128 || shape.pageSize % kTile != 0 ||
      primary.headsPerCta > 8)
    return std::nullopt;
  AttentionSchedule s = primary;
  s.tensorCores = true;
  // The ring's boxes are 128 bytes of a row (kAttentionRingBoxColumns).
  s.ctaRing = target.wantsAttentionCtaRing() &&
              shape.headDim % kAttentionRingBoxColumns == 0;
  s.threads = (kWarps + (s.ctaRing ? 1 : 0)) * TargetInfo::kWarpSize;
  s.tokensPerIter = kWarps * kTile;
  s.sharedFloats = kWarps * s.headsPerCta * (shape.headDim + 2);
  if (s.ctaRing) {
    // K and V tiles of 16 swizzled rows per stage, from a 1 KiB boundary.
    s.stages = target.getAttentionRingStages();
    s.ringBytes = s.stages * 2 * kTile * shape.headDim * 2 + 1024;
  } else {
    // K and V tiles of 16 rows padded by 16 bytes, `stages` per warp.
    s.stages = kStages;
    s.ringBytes = kWarps * kStages * 2 * kTile *
                  (shape.headDim + kAttentionMmaRowPad) * 2;
  }
  // CTAs per SM by shared memory, up to the num_splits policy's assumption.
  auto ctasPerSM = [&](int64_t exchangeFloats) {
    const int64_t bytes = s.ringBytes + s.ringBarrierBytes() +
                          s.mergeAndFlagBytes() + exchangeFloats * 4 +
                          target.getReservedSharedBytesPerCTA();
    return std::min(contract::kTargetCtasPerSM,
                    target.getOccupancySharedBytes() / bytes);
  };
  // The split grid fills the CTAs that are resident (the ring's 1 per SM).
  if (s.ctaRing)
    s.splitPolicy.targetCtas = ctasPerSM(0) * target.getSMCount();
  // The exchange buffer is static, so it costs even a launch that does not
  // cluster: drop it where it would cost occupancy (Llama-3-8B: 112,772 ->
  // 129,412 bytes a CTA, 2 -> 1 CTA per SM). The ring clusters only to share
  // a fused o_proj, which through the workspaces the last CTA projects alone
  // (H100, docs/performance.md entry 51: the Llama-3-8B front half's
  // clusters of 4 splits took 63.6 us a layer-step at 4 x 4096 against 49.7
  // through the workspaces; SmolLM2's decode step with its o_proj fused,
  // 666.0 us at batch 4 in clusters against 861.5).
  if ((s.ctaRing && !shape.outputProjection) ||
      ctasPerSM(s.exchangeFloats) < ctasPerSM(0)) {
    s.clusterSplits = 0;
    s.exchangeFloats = 0;
  }
  if (s.ringBytes + s.ringBarrierBytes() + s.mergeAndFlagBytes() +
          s.exchangeFloats * 4 >
      target.getMaxSharedBytesPerCTA())
    return std::nullopt;
  return s;
}
