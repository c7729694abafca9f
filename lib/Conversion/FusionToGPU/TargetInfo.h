//===- TargetInfo.h - the GPU the kernels target ----------------*- C++ -*-===//
//
// The facts about the target GPU that the schedules and kernels depend on,
// in one place: built once per run of convert-fusion-to-gpu from its
// `sm-count` and `target-sm` options and passed to every schedule chooser
// and emitter. Hardware limits come from the CUDA C Programming Guide,
// "Technical Specifications per Compute Capability" (through
// fusion/contract/Contract.h where the runtime needs them too).
//
// The options, not the gpu.module's `#nvvm.target`, are the source: the
// target is attached by nvvm-attach-target after this pass in
// buildFusionToPTXPipeline, and attaching it earlier would change the
// pipeline that produces the PTX.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_TARGETINFO_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_TARGETINFO_H

#include "fusion/Conversion/AttentionRingStages.h"

#include <cstdint>

namespace mlir::fusion {

/// The target GPU of the emitted kernels.
class TargetInfo {
public:
  /// `computeCapability` is major x 10 + minor (90 for sm_90 and sm_90a);
  /// `smCount` the streaming multiprocessors the grids should fill;
  /// `archSpecific` whether the PTX targets the chip's architecture-specific
  /// features too (sm_90a: PTX that runs on compute capability 9.0 only);
  /// `warpSpecializedGemm` whether the GEMM-shaped projection may be
  /// warp-specialised where it has warpgroup MMA (opt-in,
  /// chooseProjectionGemmSchedules); `clusterKSplit` whether the
  /// GEMM-shaped projection's split-K CTAs may combine through a cluster
  /// where the target has clusters (the passes' default,
  /// chooseProjectionGemmSchedules);
  /// `attentionCtaRing` whether the tensor-core attention variant streams
  /// K/V through a CTA-wide ring filled by TMA boxes where the target has
  /// bulk copies (opt-in, chooseAttentionMmaSchedule), of
  /// `attentionRingStages` stages.
  TargetInfo(int64_t computeCapability, int64_t smCount,
             bool archSpecific = false, bool warpSpecializedGemm = false,
             bool clusterKSplit = true, bool attentionCtaRing = false,
             int64_t attentionRingStages = kDefaultAttentionRingStages)
      : computeCapability(computeCapability), smCount(smCount),
        attentionRingStages(attentionRingStages), archSpecific(archSpecific),
        warpSpecializedGemm(warpSpecializedGemm), clusterKSplit(clusterKSplit),
        attentionCtaRing(attentionCtaRing) {}

  /// Compute capability x 10.
  int64_t getComputeCapability() const { return computeCapability; }
  /// Streaming multiprocessors the grids fill at batch 1 (132 on an
  /// H100/H200 SXM).
  int64_t getSMCount() const { return smCount; }

  /// f16/bf16 `mma.sync` (sm_80+).
  bool hasTensorCores() const { return computeCapability >= 80; }
  /// `griddepcontrol` (programmatic dependent launch, sm_90+).
  bool hasGridDependencyControl() const { return computeCapability >= 90; }
  /// `cp.async.bulk` with mbarrier transaction counts (sm_90+).
  bool hasBulkCopies() const { return computeCapability >= 90; }
  /// Thread-block clusters with distributed shared memory (sm_90+).
  bool hasClusters() const { return computeCapability >= 90; }
  /// Warpgroup MMA, `wgmma.mma_async` (sm_90a only).
  bool hasWarpgroupMma() const {
    return archSpecific && computeCapability == 90;
  }
  /// The warp-specialised GEMM-shaped projection is asked for (it needs
  /// warpgroup MMA too).
  bool wantsWarpSpecializedGemm() const {
    return warpSpecializedGemm && hasWarpgroupMma();
  }
  /// The GEMM-shaped projection's cluster reduction (cluster_k_split) is
  /// asked for and the target has clusters.
  bool wantsClusterKSplit() const { return clusterKSplit && hasClusters(); }
  /// The tensor-core attention's CTA-wide K/V ring is asked for and the
  /// target has bulk copies.
  bool wantsAttentionCtaRing() const {
    return attentionCtaRing && hasBulkCopies();
  }
  /// Stages of the CTA-wide ring (the attention-ring-stages option).
  int64_t getAttentionRingStages() const { return attentionRingStages; }

  /// Threads per warp.
  static constexpr int64_t kWarpSize = 32;
  /// Rows (M) of one warpgroup MMA: four warps of 16 rows.
  static constexpr int64_t kWarpgroupMmaRows = 64;
  /// Most threads per CTA (every compute capability).
  int64_t getMaxThreadsPerBlock() const;
  /// Most resident threads per SM (sm_75: 1024; 2048 from sm_80 on, but the
  /// occupancy hint assumes 2048 on every target, see getOccupancySharedBytes).
  int64_t getMaxThreadsPerSM() const { return 2048; }
  /// 32-bit registers per SM (sm_70 to sm_90) and the most one thread may
  /// use.
  int64_t getRegistersPerSM() const { return 64 * 1024; }
  static constexpr int64_t kMaxRegistersPerThread = 255;
  /// Most static shared memory per CTA, in bytes (48 KiB on every chip).
  int64_t getMaxStaticSharedBytes() const;
  /// The static shared memory a kernel plans with: the 48 KiB limit less
  /// 2 KiB for reduction scratch and flags (46 KiB = 47104 bytes).
  int64_t getStaticSharedBudget() const { return 46 * 1024; }
  /// Most static + dynamic shared memory per CTA after the opt-in, in bytes
  /// (227 KiB on sm_90, 163 KiB on sm_80/87, 99 KiB on sm_86/89).
  int64_t getMaxSharedBytesPerCTA() const;
  /// Shared memory per SM the occupancy hint (`.minnctapersm`) divides, in
  /// bytes: 227 KiB, the H100/H200 figure, on every target (as the tuned
  /// schedules were measured with it).
  int64_t getOccupancySharedBytes() const { return 227 * 1024; }
  /// Shared memory the driver reserves per resident CTA, in bytes.
  int64_t getReservedSharedBytesPerCTA() const { return 1024; }
  /// Bytes a kernel asks L2 to prefetch before griddepcontrol.wait, over all
  /// its CTAs (its weights, or the K/V rows its splits read first). Under
  /// programmatic dependent launch the next kernels start while this one
  /// runs and each prefetches this much ahead: 8 MiB keeps the prefetches
  /// of a few kernels well inside the 50 MB L2 of an H100/H200, so that
  /// they are not evicted before they are read.
  static constexpr int64_t kL2PrefetchBytes = 8 << 20;

private:
  int64_t computeCapability;
  int64_t smCount;
  int64_t attentionRingStages;
  bool archSpecific, warpSpecializedGemm, clusterKSplit, attentionCtaRing;
};

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_TARGETINFO_H
