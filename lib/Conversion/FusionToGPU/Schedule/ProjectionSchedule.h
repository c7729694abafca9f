//===- ProjectionSchedule.h - projection schedules --------------*- C++ -*-===//
//
// Pure functions from the shape of a projection (norm -> qkv_proj -> rope ->
// kv_append) and the target to the schedules of its kernels: the CUDA-core
// kernel (Kernels/ProjectionKernel.cpp) and its batch variants, GEMM-shaped
// (Kernels/ProjectionGemmKernel.cpp) or tensor-core
// (Kernels/ProjectionMmaKernel.cpp). No IR is built here; the kernels record
// the chosen values as their #fusion.projection_schedule,
// #fusion.projection_gemm_schedule and #fusion.projection_mma_schedule.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_PROJECTIONSCHEDULE_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_PROJECTIONSCHEDULE_H

#include "../TargetInfo.h"

#include "llvm/ADT/SmallVector.h"

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
  /// The kernel ends in an argmax (Kernels/ProjectionArgmax.cpp), whose
  /// slots take getArgmaxSharedBytes of static shared memory in every
  /// variant.
  bool argmax = false;
};

/// Static shared memory of a projection kernel's argmax per CTA, in bytes:
/// one 8-byte key slot per token of the function's token tile and the
/// 4-byte last-CTA flag, padded to 8.
inline constexpr int64_t getArgmaxSharedBytes(int64_t tileTokens) {
  return 8 * tileTokens + 8;
}

/// The CUDA-core kernel's schedule: one warp per output row pair, warps
/// striding over the pairs of the whole weight.
struct ProjectionSchedule {
  /// Warps per CTA (8, halved down to 2 while that leaves SMs idle at
  /// batch 1) and threads per CTA.
  int64_t warps = 8, blockSize = 256;
  /// Row pairs per warp (rounds of the grid-stride loop, the last one
  /// partial) and CTAs (grid x: at most minCtasPerSM per SM).
  int64_t pairsPerWarp = 1, grid = 1;
  /// Tokens normalised into shared memory per tile (1 with the tensor-core
  /// variant, else up to 4 as the 46 KiB static budget allows).
  int64_t batchTile = 4;
  /// 256-element chunks per warp and loop step (before dividing by the
  /// sub-tile's token count).
  int64_t unroll = 2;
  /// `.minnctapersm` hint: at most kMaxCtasPerSM, as shared memory and
  /// threads allow; 2 where the kernel is held to two CTAs per SM (below),
  /// or where two pairs of preloaded rows need the registers of 2
  /// (preloadChunks).
  int64_t minCtasPerSM = 1;
  /// The hint's cap (docs/performance.md entries 5 and 14: 4 forces 64
  /// registers and spills), and so the CTAs per SM of one round of the grid.
  static constexpr int64_t kMaxCtasPerSM = 3;
  /// Dynamic shared memory the launch reserves and the kernel does not use,
  /// in bytes: nonzero where a batch-1 kernel is held to two CTAs per SM
  /// (chooseProjectionSchedule documents when).
  int64_t reservedSharedBytes = 0;
  /// 256-element chunks of a pair's two weight rows that every lane holds in
  /// registers (all of them; the warp's first pair loaded before
  /// griddepcontrol.wait, each next pair's while the previous one is
  /// reduced), or 0: the weights are loaded after the wait, in the pipelined
  /// loop. Nonzero only on a target with programmatic dependent launch, in a
  /// batch-1 kernel (batchTile 1) whose rows have at most kMaxPreloadChunks
  /// chunks, where the vectors fit the registers (chooseProjectionSchedule:
  /// SmolLM2's layers, hidden 576 and 1536, and its LM head).
  int64_t preloadChunks = 0;
  static constexpr int64_t kMaxPreloadChunks = 6;
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

/// How the GEMM-shaped variant would have to treat the kernel's norm.
enum class ProjectionNorm {
  /// No norm: the projection's input is a kernel operand.
  None,
  /// RMSNorm whose normalised activations are used only by the projection:
  /// folded into the weight pass (the variant applies).
  FoldableRMS,
  /// LayerNorm, or a norm whose output the kernel must also write: the
  /// variant does not apply (the tensor-core variant takes these kernels).
  Other,
};

/// What the GEMM-shaped variant's schedule depends on besides the
/// ProjectionShape.
struct ProjectionGemmShape {
  ProjectionShape projection;
  /// Elements per head and heads of the packed weight (Hq + 2 Hkv).
  int64_t headDim = 0, heads = 0;
  ProjectionNorm norm = ProjectionNorm::None;
  /// The norm adds a residual (a second activation row per token).
  bool residual = false;
  /// The token rows (x, and the residual) are kernel parameters that TMA
  /// can read in boxes: no embedding gather, no summed partials.
  bool tmaTokenRows = false;
};

/// The GEMM-shaped variant's schedule (Kernels/ProjectionGemmKernel.cpp): a
/// CTA multiplies a tile of `tileRows` weight rows with a tile of up to
/// `tileTokens` tokens over hidden / kSplit of k, staging both through a
/// ring of `stages` shared-memory stages of `stageK` k-elements; the kSplit
/// CTAs of a row tile sum their fp32 partials through global workspaces.
struct ProjectionGemmSchedule {
  /// Weight rows per CTA: whole heads, 16 per warp (one m16 mma row block).
  int64_t tileRows = 0;
  /// Tokens per token tile (16, 32 or 64: pairs of 8-token mma n-tiles).
  int64_t tileTokens = 0;
  /// CTAs that split the hidden dimension of a row tile (split-K).
  int64_t kSplit = 1;
  /// k-elements per pipeline stage and stages in the ring.
  int64_t stageK = 64, stages = 3;
  /// Row tiles (rows / tileRows); the grid has rowTiles * kSplit CTAs.
  int64_t rowTiles = 0;
  /// Rows of one stage: the weight rows, the token rows, the residual rows
  /// (with a residual) and one row of the norm weight (RMSNorm).
  int64_t stageRows = 0;
  /// Bytes between two staged rows: stageK elements and 16 bytes of padding
  /// (8 consecutive rows then start in 8 different 16-byte bank groups, so
  /// ldmatrix is conflict-free); with wgmma stageK elements, unpadded.
  int64_t pitchBytes = 0;
  /// The weight rows arrive by TMA (sm_90: cp.async.bulk.tensor from the
  /// kernel's weight_map, one box per stage, per half for gate/up) as
  /// unpadded 128-byte rows, 16-byte chunk c of row r at chunk c ^ (r % 8)
  /// (the 128-byte swizzle, which is conflict-free for ldmatrix); the stage
  /// slots then start at 1 KiB boundaries. Else all rows are padded.
  bool tmaWeights = false;
  /// The warps multiply by warpgroup MMA (sm_90a, with tmaWeights, 128-byte
  /// stage rows and row tiles of whole warpgroups of 64 rows): each
  /// `wgmma.mma_async.m64nTk16` takes its warpgroup's weight fragments from
  /// registers (ldmatrix, scaled by the norm weight as for mma.sync) and the
  /// token rows from shared memory, which are then stored 128-byte swizzled
  /// like the weight rows (as are the residual and norm-weight rows); else
  /// mma.sync.m16n8k16 with both operands by ldmatrix.
  bool wgmma = false;
  /// Warp-specialised (with wgmma; docs/gemm-warp-specialized-plan.md): the
  /// warps() consumer warps only multiply; one producer warp issues each
  /// stage's TMA copies (the weight box, the token and residual rows by the
  /// kernel's input_map / residual_map, the norm weight by a bulk copy) and
  /// kFoldWarps fold warps run the norm's pass into the stage's h rows,
  /// all synchronised by per-stage mbarriers (full, empty, tokens) with no
  /// CTA barrier in the loop. The stage rows are then the weights, x, the
  /// residual (with one), h and the norm weight.
  bool warpSpecialized = false;
  /// The kSplit CTAs of a row tile combine their partials through a
  /// thread-block cluster when launched as one (cluster_k_split, opt-in:
  /// TargetInfo::wantsClusterKSplit; sm_90, 2 <= kSplit <= 8 dividing the
  /// tile's row pairs): after the k loop each CTA
  /// writes its partial tile and sums of squares over its stage ring
  /// (clusterExchangeBytes fit in stages * slotBytes) and reduces 1/kSplit
  /// of the tile's row pairs from the cluster's rings by DSMEM.
  bool clusterKSplit = false;
  /// Bytes of one stage slot: the weight rows, then the other rows at
  /// pitchBytes (rounded up to 1 KiB with tmaWeights).
  int64_t slotBytes = 0;
  /// Dynamic shared memory: stages * slotBytes, plus 1 KiB with tmaWeights
  /// (the kernel aligns the slots to 1 KiB at run time).
  int64_t dynamicSharedBytes = 0;
  /// Smallest batch this variant is launched for.
  int64_t minBatch = 0;
  /// `.minnctapersm` hint: 2 where two CTAs fit an SM's threads and shared
  /// memory at up to 256 threads (ptxas then keeps to 128 registers), else 1.
  int64_t minCtasPerSM = 1;

  /// Bytes between two staged weight rows.
  int64_t weightPitchBytes() const {
    return tmaWeights && !wgmma ? pitchBytes - 16 : pitchBytes;
  }
  /// The warps that multiply (16 weight rows each).
  int64_t warps() const { return tileRows / 16; }
  /// The producer warp and the fold warps of a warp-specialised variant.
  static constexpr int64_t kFoldWarps = 2;
  int64_t supportWarps() const { return warpSpecialized ? 1 + kFoldWarps : 0; }
  int64_t blockSize() const { return 32 * (warps() + supportWarps()); }
  int64_t grid() const { return rowTiles * kSplit; }
  /// Bytes of the cluster exchange (contract::clusterExchangeBytes).
  int64_t clusterExchangeBytes() const;
};

/// Most pipeline stages of a GEMM-shaped variant.
inline constexpr int64_t kMaxGemmStages = 6;

/// Static shared memory of a GEMM-shaped variant: its arrival flag, padded,
/// and up to kMaxGemmStages stage mbarriers of 8 bytes (plus
/// getArgmaxSharedBytes with an argmax).
inline constexpr int64_t kGemmStaticSharedBytes = 16 + 8 * kMaxGemmStages;
/// Most stages of a warp-specialised variant.
inline constexpr int64_t kMaxWarpSpecializedStages = 8;
/// Token rows per TMA box of a warp-specialised variant's input_map and
/// residual_map (one map serves every variant of the kernel, so the box is
/// the smallest tile's; a tile of T tokens takes T / 16 boxes per stage).
inline constexpr int64_t kTokenBoxRows = 16;
/// Static shared memory of a warp-specialised variant of `tileTokens`
/// tokens: the arrival flag, three mbarriers per stage and the fold warps'
/// f32 sums of every token.
inline constexpr int64_t warpSpecializedStaticSharedBytes(int64_t tileTokens) {
  return 16 + 3 * 8 * kMaxWarpSpecializedStages +
         4 * ProjectionGemmSchedule::kFoldWarps * tileTokens;
}

/// The GEMM-shaped variants of a projection kernel, by ascending minBatch
/// (token tiles of 16 from batch 2, 32 from 17, 64 from 33; larger batches
/// loop over tiles of 64), or none where the variant does not apply: no
/// tensor cores (sm < 80: cp.async, ldmatrix), a norm other than a
/// foldable RMSNorm, hidden not a multiple of 64 (whole stages), or no
/// tile of whole heads that is a multiple of 16 rows. tileRows is the
/// largest multiple m * headDim <= 128 with m dividing heads (headDim
/// itself when above 128), kSplit the largest power of two up to 8 with
/// rowTiles * kSplit <= 2 * SMs and hidden a multiple of 64 * kSplit (where
/// that is 1: the largest divisor d <= 16 of hidden / 64 with rowTiles * d
/// <= 2 * SMs, e.g. 9 for hidden 576), and
/// stages 3 (2 where 3 do not fit the target's shared memory per CTA, less
/// kGemmStaticSharedBytes); with TMA weights (a stage then costs no
/// registers) up to kMaxGemmStages, as long as the CTAs per SM that 3
/// allow still fit and the CTA has that many k steps. With TMA weights on
/// an arch-specific target (sm_90a) and row tiles of whole warpgroups (a
/// multiple of 64 rows), the variants multiply by warpgroup MMA (`wgmma`).
/// Where the target asks for it (wantsWarpSpecializedGemm), the 16-token
/// variant of a foldable RMSNorm with tmaTokenRows is then warp-specialised
/// where its grid fills at least half the SMs (chooseWarpSpecialized;
/// docs/performance.md entries 43 and 44).
llvm::SmallVector<ProjectionGemmSchedule, 3>
chooseProjectionGemmSchedules(const ProjectionGemmShape &shape,
                              const TargetInfo &target);

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

/// The CUDA-core kernel's schedule; `hasBatchVariant` when
/// chooseProjectionGemmSchedules or chooseProjectionMmaSchedule gave one
/// (then this kernel runs only at batch 1, with tiles of one token). The
/// grid is one CTA per resident slot (fewer when the pairs give less work);
/// a batch-1 kernel streaming more than the L2 prefetch budget from a grid
/// of at most two CTAs per SM is held to two per SM on sm_90+
/// (`reservedSharedBytes`, unroll 4); a batch-1 kernel of short rows holds
/// them in registers (`preloadChunks`), at two CTAs per SM where its warps
/// have several pairs and three would leave too few registers.
ProjectionSchedule chooseProjectionSchedule(const ProjectionShape &shape,
                                            bool hasBatchVariant,
                                            const TargetInfo &target);

/// Whether a kernel streaming `weightBytes` of weights prefetches all of
/// them into L2 before griddepcontrol.wait: only when they fit
/// TargetInfo::kL2PrefetchBytes. Such a kernel is latency-bound and its
/// stream is done while the previous kernel runs; the head of a larger
/// stream, prefetched while earlier kernels stream tens of MB through L2,
/// is evicted before it is read and costs bandwidth (Llama-3-8B shape on
/// the H200: 2-6% slower at batch 1 with 2-8 MiB heads; docs/performance.md).
bool shouldPrefetchWeights(int64_t weightBytes);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_PROJECTIONSCHEDULE_H
