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

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::fusion {

/// The static facts of the op the schedule depends on.
struct AttentionShape {
  /// Query heads Hq, KV heads Hkv, head_dim D, page size P and the group
  /// size G = Hq / Hkv.
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0, pageSize = 0, group = 0;
};

/// Members of the kernel's #fusion.split_kv_attention_schedule that override
/// the defaults (`threads`, `max_splits`, `kv_unroll`, `heads_per_cta`).
struct AttentionScheduleOverrides {
  std::optional<int64_t> threads, maxSplits, unroll, headsPerCta;
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
  /// The recommended num_splits policy (contract::chooseNumSplits), with
  /// targetCtas = contract::kTargetCtasPerSM x the SM count.
  ::fusion::contract::SplitPolicy splitPolicy;
};

/// The schedule for `shape` on `target`, or nullopt with `error` set when an
/// override is out of range or the merge buffer exceeds the static shared
/// memory. Defaults: Gc = G when G <= 8, else the largest divisor of G not
/// above 8; 256 threads and 4 tokens per row group for Gc <= 4, else 128
/// and 2; max_splits from contract::SplitPolicy.
std::optional<AttentionSchedule>
chooseAttentionSchedule(const AttentionShape &shape,
                        const AttentionScheduleOverrides &overrides,
                        const TargetInfo &target, std::string &error);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ATTENTIONSCHEDULE_H
