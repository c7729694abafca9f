//===- ProjectionSchedule.h - projection schedules --------------*- C++ -*-===//
//
// Pure functions from the shape of a projection (norm -> qkv_proj -> rope ->
// kv_append) and the target to the schedules of its two kernels: the
// CUDA-core kernel (Kernels/ProjectionKernel.cpp) and its tensor-core batch
// variant (Kernels/ProjectionMmaKernel.cpp). No IR is built here; the
// kernels record the chosen values as their #fusion.projection_schedule and
// #fusion.projection_mma_schedule.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_PROJECTIONSCHEDULE_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_PROJECTIONSCHEDULE_H

#include "../TargetInfo.h"

#include <cstdint>
#include <optional>

namespace mlir::fusion {

/// What the projection schedules depend on.
struct ProjectionShape {
  /// Elements per token row (the qkv_proj input's second dimension).
  int64_t hidden = 0;
  /// Output row pairs: (Hq + 2 Hkv) * head_dim / 2.
  int64_t pairs = 0;
  /// Bytes per activation element (2 for f16/bf16).
  int64_t elementBytes = 2;
};

/// The CUDA-core kernel's schedule: one warp per output row pair, warps
/// striding over the pairs of the whole weight.
struct ProjectionSchedule {
  /// Warps per CTA (8, halved down to 2 while that leaves SMs idle at
  /// batch 1) and threads per CTA.
  int64_t warps = 8, blockSize = 256;
  /// Row pairs per warp and grid step, and CTAs (grid x).
  int64_t pairsPerWarp = 1, grid = 1;
  /// Tokens normalised into shared memory per tile (1 with the tensor-core
  /// variant, else up to 4 as the 46 KiB static budget allows).
  int64_t batchTile = 4;
  /// 256-element chunks per warp and loop step (before dividing by the
  /// sub-tile's token count).
  int64_t unroll = 2;
  /// `.minnctapersm` hint: at most 3, as shared memory and threads allow.
  int64_t minCtasPerSM = 1;
};

/// The tensor-core variant's schedule.
struct ProjectionMmaSchedule {
  /// One CTA per SM: the token tile fills shared memory and the kernel, with
  /// no register cap, takes up to 255 registers per thread.
  int64_t warps = 8, grid = 1;
  /// Tokens per tile (a multiple of 8: tileTokens / 8 n-tiles of mma).
  int64_t tileTokens = 8;
  /// 16-byte weight vectors per row and lane in one loop step (`k_vectors`).
  int64_t vectors = 1;
  /// Elements between two token rows in shared memory.
  int64_t rowStride = 0;
  /// Dynamic shared memory: tileTokens rows of rowStride elements.
  int64_t dynamicSharedBytes = 0;
  /// Warps that share one row block, each taking hidden / kSplit of k.
  int64_t kSplit = 1;

  /// Threads per CTA.
  int64_t blockSize() const { return 32 * warps; }
  /// Row blocks in flight per CTA.
  int64_t slots() const { return warps / kSplit; }
  /// f32 elements of the partial sums for a split of `split` and `n` 8-token
  /// column blocks: register c of lane l of part p (1..split-1) and slot s at
  /// [((p - 1) * slots + s) * 32 * 4n + 32c + l].
  int64_t partialFloats(int64_t split, int64_t n) const {
    return (split - 1) * (warps / split) * 32 * 4 * n;
  }
};

/// Smallest batch the tensor-core variant is launched for (it beats the
/// CUDA-core kernel from batch 2 and loses at batch 1: docs/performance.md,
/// optimisation log entry 10).
inline constexpr int64_t kProjectionMmaMinBatch = 2;

/// The tensor-core variant's schedule, if `target` has tensor cores and the
/// shape allows it: hidden % 32 == 0 (whole 32-element k steps), pairs % 8
/// == 0 (16-row blocks) and room for at least 8 token rows in shared memory.
std::optional<ProjectionMmaSchedule>
chooseProjectionMmaSchedule(const ProjectionShape &shape,
                            const TargetInfo &target);

/// The CUDA-core kernel's schedule; `hasMmaVariant` when
/// chooseProjectionMmaSchedule gave one (then this kernel runs only at
/// batch 1, with tiles of one token).
ProjectionSchedule chooseProjectionSchedule(const ProjectionShape &shape,
                                            bool hasMmaVariant,
                                            const TargetInfo &target);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_PROJECTIONSCHEDULE_H
