//===- ScheduleAttrs.cpp - the #fusion.*_schedule attributes --------------===//
//
// Verification and kind names of the typed kernel schedules
// (FusionSchedules.td).
//
//===----------------------------------------------------------------------===//

#include "fusion/Dialect/Fusion/IR/FusionAttrs.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fusion;
namespace contract = ::fusion::contract;

#include "fusion/Dialect/Fusion/IR/FusionAttrInterfaces.cpp.inc"

namespace {
/// A named member of a schedule, for the messages.
using Member = std::pair<StringRef, int64_t>;
} // namespace

/// Checks the members every schedule has: `threads` whole warps, at most
/// contract::kMaxThreadsPerBlock, and each of `counts` at least 1. `kind`
/// names the attribute in the messages.
static LogicalResult
verifySchedule(function_ref<InFlightDiagnostic()> emitError, StringRef kind,
               int64_t threads, ArrayRef<Member> counts) {
  if (threads < 32 || threads > contract::kMaxThreadsPerBlock ||
      threads % 32 != 0)
    return emitError() << kind << " threads must be a multiple of 32 in [32, "
                       << contract::kMaxThreadsPerBlock << "], got " << threads;
  for (auto [name, value] : counts)
    if (value < 1)
      return emitError() << kind << " " << name << " must be positive, got "
                         << value;
  return success();
}

/// Checks that `threads` is 32 x `warps`.
static LogicalResult verifyWarps(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef kind, int64_t threads,
                                 int64_t warps) {
  if (threads != 32 * warps)
    return emitError() << kind << " threads (" << threads
                       << ") must be 32 x warps (" << warps << ")";
  return success();
}

/// Checks an attention schedule's `cluster_splits`: 0 (no cluster combine)
/// or 2 to contract::kMaxClusterSplits.
static LogicalResult
verifyClusterSplits(function_ref<InFlightDiagnostic()> emitError,
                    StringRef kind, int64_t clusterSplits) {
  if (!contract::isValidClusterSplits(clusterSplits))
    return emitError() << kind << " cluster_splits must be 0 or in [2, "
                       << contract::kMaxClusterSplits << "], got "
                       << clusterSplits;
  return success();
}

LogicalResult
ProjectionScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t threads, int64_t warps, int64_t grid,
                               int64_t rowsPerWarp, int64_t pairsPerWarp,
                               int64_t vectorWidth, int64_t kUnroll,
                               int64_t batchTile, int64_t minCtasPerSm,
                               int64_t preloadChunks) {
  StringRef kind = getMnemonic();
  if (failed(verifySchedule(emitError, kind, threads,
                            {{"warps", warps},
                             {"grid", grid},
                             {"rows_per_warp", rowsPerWarp},
                             {"pairs_per_warp", pairsPerWarp},
                             {"vector_width", vectorWidth},
                             {"k_unroll", kUnroll},
                             {"batch_tile", batchTile},
                             {"min_ctas_per_sm", minCtasPerSm}})))
    return failure();
  if (preloadChunks < 0 || (preloadChunks > 0 && batchTile != 1))
    return emitError() << kind << " preload_chunks (" << preloadChunks
                       << ") must be 0, or positive with a batch tile of one "
                          "token";
  return verifyWarps(emitError, kind, threads, warps);
}

StringRef ProjectionScheduleAttr::getKindName() const { return "projection"; }

LogicalResult
ProjectionMmaScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t threads, int64_t warps, int64_t grid,
                                  int64_t rowsPerWarp, int64_t tileTokens,
                                  int64_t kVectors, int64_t kSplit) {
  StringRef kind = getMnemonic();
  if (failed(verifySchedule(emitError, kind, threads,
                            {{"warps", warps},
                             {"grid", grid},
                             {"rows_per_warp", rowsPerWarp},
                             {"tile_tokens", tileTokens},
                             {"k_vectors", kVectors},
                             {"k_split", kSplit}})) ||
      failed(verifyWarps(emitError, kind, threads, warps)))
    return failure();
  if (tileTokens % 8 != 0)
    return emitError() << kind << " tile_tokens (" << tileTokens
                       << ") must be a multiple of 8 (the mma n-tile)";
  if (warps % kSplit != 0)
    return emitError() << kind << " k_split (" << kSplit
                       << ") must divide warps (" << warps << ")";
  return success();
}

StringRef ProjectionMmaScheduleAttr::getKindName() const {
  return "projection_mma";
}

LogicalResult ProjectionGemmScheduleAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t threads,
    int64_t warps, int64_t grid, int64_t tileRows, int64_t tileTokens,
    int64_t kSplit, int64_t stageK, int64_t stages, int64_t minCtasPerSm,
    bool warpgroupMma, bool warpSpecialized, bool clusterKSplit) {
  StringRef kind = getMnemonic();
  if (failed(verifySchedule(emitError, kind, threads,
                            {{"warps", warps},
                             {"grid", grid},
                             {"tile_rows", tileRows},
                             {"tile_tokens", tileTokens},
                             {"k_split", kSplit},
                             {"stage_k", stageK},
                             {"stages", stages},
                             {"min_ctas_per_sm", minCtasPerSm}})))
    return failure();
  if (warpSpecialized && !warpgroupMma)
    return emitError() << kind << " warp_specialized needs warpgroup_mma";
  // warp_specialized: a producer warp and two fold warps besides `warps`.
  if (!warpSpecialized && failed(verifyWarps(emitError, kind, threads, warps)))
    return failure();
  if (warpSpecialized && threads != 32 * (warps + 3))
    return emitError() << kind << " threads (" << threads
                       << ") must be 32 x (warps + 3) with warp_specialized "
                          "(warps "
                       << warps << ")";
  if (tileRows != 16 * warps)
    return emitError() << kind << " tile_rows (" << tileRows
                       << ") must be 16 x warps (" << warps
                       << "): one mma row block per warp";
  if (tileTokens % 16 != 0)
    return emitError() << kind << " tile_tokens (" << tileTokens
                       << ") must be a multiple of 16 (pairs of mma n-tiles)";
  if (stageK % 16 != 0)
    return emitError() << kind << " stage_k (" << stageK
                       << ") must be a multiple of 16 (the mma k-step)";
  if (grid % kSplit != 0)
    return emitError() << kind << " grid (" << grid
                       << ") must be a multiple of k_split (" << kSplit
                       << "): k_split CTAs per row tile";
  if (stages < 2)
    return emitError() << kind << " stages (" << stages
                       << ") must be at least 2 (one stage in flight while "
                          "one is computed)";
  if (warpgroupMma && (tileRows % 64 != 0 || stageK != 64 || tileTokens > 256))
    return emitError() << kind
                       << " warpgroup_mma needs tile_rows a multiple of 64 "
                          "(whole warpgroups), stage_k 64 (128-byte rows) and "
                          "tile_tokens at most 256 (wgmma's n), got "
                       << tileRows << ", " << stageK << " and " << tileTokens;
  if (clusterKSplit &&
      (!contract::isValidClusterKSplit(kSplit) || (tileRows / 2) % kSplit != 0))
    return emitError() << kind << " cluster_k_split needs k_split in [2, "
                       << contract::kMaxClusterSplits
                       << "] dividing the tile's row pairs (" << tileRows / 2
                       << "), got k_split " << kSplit;
  return success();
}

StringRef ProjectionGemmScheduleAttr::getKindName() const {
  return "projection_gemm";
}

LogicalResult SplitKvAttentionScheduleAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t threads,
    int64_t maxSplits, int64_t headsPerCta, int64_t headBlocks,
    int64_t vectorWidth, int64_t lanesPerRow, int64_t kvUnroll,
    int64_t chunkMultiple, int64_t targetCtas, int64_t minChunkTokens,
    int64_t clusterSplits) {
  StringRef kind = getMnemonic();
  if (failed(verifySchedule(emitError, kind, threads,
                            {{"max_splits", maxSplits},
                             {"heads_per_cta", headsPerCta},
                             {"head_blocks", headBlocks},
                             {"vector_width", vectorWidth},
                             {"lanes_per_row", lanesPerRow},
                             {"kv_unroll", kvUnroll},
                             {"chunk_multiple", chunkMultiple},
                             {"target_ctas", targetCtas},
                             {"min_chunk_tokens", minChunkTokens}})))
    return failure();
  if (!llvm::isPowerOf2_64(lanesPerRow) || lanesPerRow > 32)
    return emitError() << kind << " lanes_per_row (" << lanesPerRow
                       << ") must be a power of two up to 32";
  return verifyClusterSplits(emitError, kind, clusterSplits);
}

StringRef SplitKvAttentionScheduleAttr::getKindName() const {
  return "split_kv_attention";
}

LogicalResult SplitKvAttentionMmaScheduleAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t threads,
    int64_t maxSplits, int64_t headsPerCta, int64_t headBlocks,
    int64_t chunkMultiple, int64_t stages, int64_t targetCtas,
    int64_t minChunkTokens, int64_t clusterSplits, bool ctaRing) {
  StringRef kind = getMnemonic();
  if (failed(verifySchedule(emitError, kind, threads,
                            {{"max_splits", maxSplits},
                             {"heads_per_cta", headsPerCta},
                             {"head_blocks", headBlocks},
                             {"chunk_multiple", chunkMultiple},
                             {"stages", stages},
                             {"target_ctas", targetCtas},
                             {"min_chunk_tokens", minChunkTokens}})))
    return failure();
  if (stages < 2)
    return emitError() << kind << " stages (" << stages
                       << ") must be at least 2 (one tile in flight while "
                          "one is computed)";
  // cta_ring: the last warp produces, each slot has one consumer warp.
  const int64_t consumers = threads / 32 - 1;
  if (ctaRing && (consumers < 1 || stages % consumers != 0))
    return emitError() << kind << " cta_ring needs a consumer warp besides "
                       << "the producer and stages (" << stages
                       << ") a multiple of the consumer warps (" << consumers
                       << ")";
  return verifyClusterSplits(emitError, kind, clusterSplits);
}

StringRef SplitKvAttentionMmaScheduleAttr::getKindName() const {
  return "split_kv_attention_mma";
}

LogicalResult
NormRowScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            int64_t threads, int64_t vectorWidth,
                            int64_t tokensPerCta) {
  return verifySchedule(
      emitError, getMnemonic(), threads,
      {{"vector_width", vectorWidth}, {"tokens_per_cta", tokensPerCta}});
}

StringRef NormRowScheduleAttr::getKindName() const { return "norm_row"; }

LogicalResult
HeadScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         HeadKind kind, int64_t threads, int64_t headSlots,
                         int64_t elementsPerThread) {
  return verifySchedule(
      emitError, getMnemonic(), threads,
      {{"head_slots", headSlots}, {"elements_per_thread", elementsPerThread}});
}

StringRef HeadScheduleAttr::getKindName() const {
  return stringifyHeadKind(getKind());
}

LogicalResult
RowScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        RowKind kind, int64_t threads, int64_t chunks,
                        int64_t vectorWidth, int64_t unroll) {
  StringRef name = getMnemonic();
  if (failed(verifySchedule(emitError, name, threads,
                            {{"chunks", chunks},
                             {"vector_width", vectorWidth},
                             {"unroll", unroll}})))
    return failure();
  if (!llvm::isPowerOf2_64(vectorWidth) || vectorWidth > 8)
    return emitError() << name << " vector_width (" << vectorWidth
                       << ") must be 1, 2, 4 or 8 (at most 16 bytes of "
                          "f16/bf16)";
  if (kind == RowKind::argmax && chunks != 1)
    return emitError() << name << " chunks (" << chunks
                       << ") must be 1 for argmax: one CTA reduces a row";
  return success();
}

StringRef RowScheduleAttr::getKindName() const {
  return stringifyRowKind(getKind());
}
