//===- AttentionSchedule.h - split-KV attention schedule --------*- C++ -*-===//
//
// A pure function from the shape of a fusion.decode_attention, the
// overrides in its kernel's #fusion.split_kv_attention_schedule and the
// target to the attention kernel's schedule (Kernels/AttentionKernel.cpp).
// No IR is built.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ATTENTIONSCHEDULE_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ATTENTIONSCHEDULE_H

#include "../TargetInfo.h"
#include "fusion/contract/Contract.h"

#include "llvm/Support/MathExtras.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::fusion {

/// The static facts of the op the schedule depends on.
struct AttentionShape {
  /// Query heads Hq, KV heads Hkv, head_dim D, page size P and the group
  /// size G = Hq / Hkv.
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0, pageSize = 0, group = 0;
  /// Whether the kernel also projects its heads by W_o (a fused
  /// fusion.linear_partials): it then keeps them in shared memory.
  bool outputProjection = false;
};

/// Members of the kernel's #fusion.split_kv_attention_schedule that override
/// the defaults (`threads`, `max_splits`, `kv_unroll`, `heads_per_cta`,
/// `cluster_splits`).
struct AttentionScheduleOverrides {
  std::optional<int64_t> threads, maxSplits, unroll, headsPerCta, clusterSplits;
};

/// Most query heads a CTA holds by default (their accumulators live in
/// registers).
inline constexpr int64_t kMaxAttentionHeadsPerCta = 8;

/// The schedule of one attention kernel (recorded in KernelLaunch::schedule).
struct AttentionSchedule {
  int64_t threads = 256;
  /// Upper bound on num_splits; sizes the workspace.
  int64_t maxSplits = ::fusion::contract::SplitPolicy().maxSplits;
  /// Tokens per row group per loop iteration (K/V loads in flight: 2x this).
  int64_t unroll = 4;
  /// Query heads per CTA (Gc) and head blocks per KV head (G / Gc).
  int64_t headsPerCta = 1;
  int64_t headBlocks = 1;
  static constexpr int64_t vectorWidth = 8;
  /// D / 8 vectors per row, lanes per row group, row groups per warp / CTA.
  int64_t numVecs = 0;
  int64_t lanesPerRow = 0;
  int64_t rowsPerWarp = 0;
  int64_t rowGroups = 0;
  /// Tokens per CTA iteration; split chunks are a multiple of it.
  int64_t tokensPerIter = 0;
  /// Static shared memory: floats of the cross-warp merge.
  int64_t sharedFloats = 0;
  /// Most splits combined through a thread-block cluster (0: never), and
  /// the floats of the exchange buffer split 0's CTA receives them in
  /// (clusterSplits x Gc x (D + 2)).
  int64_t clusterSplits = 0;
  int64_t exchangeFloats = 0;
  /// Bytes of the "last CTA" flag after the merge buffer.
  static constexpr int64_t kFlagBytes = 4;
  /// Floats of the combined head outputs (Gc x D) a kernel with an output
  /// projection keeps after the flag; 0 without one.
  int64_t headOutFloats = 0;
  /// Static shared memory up to the exchange buffer: the merge buffer, the
  /// flag and the head outputs, each rounded up to 32-byte alignment.
  int64_t mergeAndFlagBytes() const {
    return llvm::alignTo(sharedFloats * 4 + kFlagBytes, 32) +
           llvm::alignTo(headOutFloats * 4, 32);
  }
  /// The recommended num_splits policy (contract::chooseNumSplits), with
  /// targetCtas = contract::kTargetCtasPerSM x the SM count.
  ::fusion::contract::SplitPolicy splitPolicy;
  /// The tensor-core loop (Kernels/AttentionMma.h) with `stages` ring
  /// stages per warp in `ringBytes` of dynamic shared memory; with
  /// `ctaRing`, one ring of `stages` tiles for the CTA, filled by a producer
  /// warp (the last; `threads` counts it).
  bool tensorCores = false;
  bool ctaRing = false;
  int64_t stages = 0;
  int64_t ringBytes = 0;
  /// The warps that hold softmax state (all but the producer warp).
  int64_t stateWarps() const { return threads / 32 - (ctaRing ? 1 : 0); }
  /// Static shared memory of the CTA ring's mbarriers (full and empty, 8
  /// bytes each per stage).
  int64_t ringBarrierBytes() const { return ctaRing ? 2 * stages * 8 : 0; }
};

/// Batches from which the runtime launches the tensor-core variant.
inline constexpr int64_t kAttentionMmaMinBatch = 4;
/// Tokens per tile of the tensor-core loop, and the elements its
/// shared-memory rows are padded by (16 bytes).
inline constexpr int64_t kAttentionMmaTileTokens = 16;
inline constexpr int64_t kAttentionMmaRowPad = 8;
/// The CTA-wide ring's TMA boxes' columns (128 bytes of f16/bf16, the
/// 128-byte swizzle span): bench/diagnostics/decode_attention_ring.cu's
/// `tma S16 W4` (docs/performance.md entry 50).
inline constexpr int64_t kAttentionRingBoxColumns = 64;

/// The schedule for `shape` on `target`, or nullopt with `error` set when an
/// override is out of range or the merge buffer exceeds the static shared
/// memory. Defaults: Gc = G when G <= 8, else the largest divisor of G not
/// above 8; 256 threads and 4 tokens per row group for Gc <= 4, else 128
/// and 2; max_splits from contract::SplitPolicy; cluster_splits the most
/// (up to contract::kMaxClusterSplits and max_splits) whose exchange buffer
/// fits the static shared memory beside the merge buffer, on targets with
/// clusters (sm_90+; else 0).
std::optional<AttentionSchedule>
chooseAttentionSchedule(const AttentionShape &shape,
                        const AttentionScheduleOverrides &overrides,
                        const TargetInfo &target, std::string &error);

/// The schedule of the tensor-core variant of the kernel `primary` was
/// chosen for (same heads per CTA, head blocks, max_splits and split
/// policy, so the same parameters and workspaces), or nullopt where it does
/// not apply: a target without tensor cores, head_dim not a multiple of 16
/// or above 128 (the accumulators live in registers), pages not a multiple
/// of 16 tokens, more than 8 heads per CTA, or a ring larger than the
/// target's shared memory. It keeps the primary's exchange buffer only
/// where that leaves as many CTAs per SM (up to contract::kTargetCtasPerSM)
/// as the ring and merge buffer alone allow; else its cluster_splits is 0. 4
/// warps of 16-token tiles, 3 stages: the best design of
/// bench/diagnostics/decode_attention.cu at 2 CTAs per SM (docs/performance.md
/// entry 16). Where the target asks for the CTA-wide ring
/// (TargetInfo::wantsAttentionCtaRing) and head_dim is a multiple of
/// kAttentionRingBoxColumns, the same 4 warps consume and a fifth produces
/// into TargetInfo::getAttentionRingStages stages of swizzled tiles (the
/// default 16: 1 CTA per SM at head_dim 128, bench/diagnostics/
/// decode_attention_ring.cu's `tma S16 W4`),
/// the split policy's target_ctas is the CTAs that fit per SM x SMs, and
/// cluster_splits is 0 unless the kernel projects o_proj (whose rows the
/// cluster's CTAs share).
std::optional<AttentionSchedule>
chooseAttentionMmaSchedule(const AttentionShape &shape,
                           const AttentionSchedule &primary,
                           const TargetInfo &target);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ATTENTIONSCHEDULE_H
