//===- ProjectionSchedule.cpp - schedules of the projection kernels -------===//
//
// The measured timings behind these choices are in docs/performance.md,
// "Optimisation log" entries 5, 10, 11 and 14 (H200, Llama-3-8B front half).
//
//===----------------------------------------------------------------------===//

#include "ProjectionSchedule.h"

#include "fusion/contract/Contract.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir::fusion;

std::optional<ProjectionMmaSchedule>
mlir::fusion::chooseProjectionMmaSchedule(const ProjectionShape &shape,
                                          const TargetInfo &target) {
  if (!target.hasTensorCores() || shape.hidden % 32 != 0 ||
      shape.pairs % 8 != 0)
    return std::nullopt;
  ProjectionMmaSchedule s;
  const int64_t rowBlocks = shape.pairs / 8, elemBytes = shape.elementBytes;
  // Rows padded so that their pitch is 64 bytes past a multiple of 128: the
  // 8 lanes of a shared-memory phase read two token rows in different bank
  // halves.
  const int64_t pitch = shape.hidden * elemBytes;
  s.rowStride = shape.hidden + ((64 - pitch % 128 + 128) % 128) / elemBytes;
  const int64_t rowBytes = s.rowStride * elemBytes;
  // Room for the partial sums of the largest split (8) and tile (32
  // tokens), and for the argmax slots of such a tile.
  const int64_t partialBytes = 4 * s.partialFloats(s.warps, 4) +
                               (shape.argmax ? getArgmaxSharedBytes(32) : 0);
  s.tileTokens = std::min<int64_t>(
      32, (target.getMaxSharedBytesPerCTA() - partialBytes) / rowBytes / 8 * 8);
  if (s.tileTokens < 8)
    return std::nullopt;
  s.dynamicSharedBytes = s.tileTokens * rowBytes;
  s.grid = std::min(target.getSMCount(), rowBlocks);
  // Split k over as many warps as the CTAs have for the row blocks (each
  // part a whole number of 32-element steps).
  s.kSplit = s.warps;
  while (s.kSplit > 1 && (rowBlocks * s.kSplit > s.grid * s.warps ||
                          shape.hidden % (32 * s.kSplit) != 0))
    s.kSplit /= 2;
  s.vectors = 8;
  while ((shape.hidden / s.kSplit) % (32 * s.vectors) != 0)
    s.vectors /= 2;
  return s;
}

/// On a target with programmatic dependent launch, a kernel that runs only
/// at batch 1 (it has batch variants), whose weights stream from HBM (above
/// the L2 prefetch budget) and whose grid is one round of between one and two
/// CTAs per SM (Llama-3-8B's o_proj and down_proj: 256 CTAs) runs two CTAs
/// per SM with 4 chunks per step, and reserves
/// dynamic shared memory (unused) so that a third CTA cannot be resident.
/// Under PDL a kernel's CTAs are placed while the previous kernel drains, on
/// the SMs that free up first; without the cap some SMs got three CTAs and
/// others one (docs/performance.md entry 22: -8% on the Llama-3-8B-shape
/// step with these kernels at 126 registers, which had the same effect).
static void holdToTwoCtasPerSM(const ProjectionShape &shape,
                               bool hasBatchVariant, const TargetInfo &target,
                               int64_t chunks, ProjectionSchedule &s) {
  const int64_t weightBytes =
      2 * shape.pairs * shape.hidden * shape.elementBytes;
  const int64_t sms = target.getSMCount();
  if (!hasBatchVariant || s.minCtasPerSM != ProjectionSchedule::kMaxCtasPerSM ||
      chunks < 4 || s.grid <= sms || s.grid > 2 * sms ||
      !target.hasGridDependencyControl() || shouldPrefetchWeights(weightBytes))
    return;
  s.minCtasPerSM = 2;
  s.unroll = 4;
  // A footprint of 2/5 of the SM's shared memory: two CTAs fit, three do
  // not, whatever the allocation granularity.
  const int64_t ctaShared =
      shape.hidden * shape.elementBytes +
      (shape.argmax ? getArgmaxSharedBytes(s.batchTile) : 0) + 4 * s.warps +
      target.getReservedSharedBytesPerCTA();
  s.reservedSharedBytes =
      (target.getOccupancySharedBytes() * 2 / 5 - ctaShared) / 16 * 16;
}

/// One CTA per resident slot (`minCtasPerSM` per SM), fewer where the pairs
/// give fewer warps' work, and the pairs per warp that grid leaves.
static void fillResidentSlots(const ProjectionShape &shape,
                              const TargetInfo &target, ProjectionSchedule &s) {
  s.grid = std::min<int64_t>(llvm::divideCeil(shape.pairs, s.warps),
                             target.getSMCount() * s.minCtasPerSM);
  s.pairsPerWarp = llvm::divideCeil(shape.pairs, s.grid * s.warps);
}

/// On a target with programmatic dependent launch, in a batch-1 kernel
/// (one-token tiles) whose rows have at most kMaxPreloadChunks chunks, the
/// lane's vectors of its warp's first pair are loaded into registers before
/// the wait: under programmatic dependent launch they then arrive while the
/// previous kernel runs, and after the wait only x is read. With one pair per
/// warp (SmolLM2's layers) the vectors (4 registers each) may take a third of
/// the registers `.minnctapersm` leaves a thread, so that they do not spill
/// (docs/performance.md entry 27). With more pairs per warp (SmolLM2's LM
/// head: 8 at 3 CTAs per SM, 12 at 2) the loads of the next pair are issued
/// before this one is reduced, so two pairs' vectors may take 2/5 of the
/// registers, at 2 CTAs per SM (each with more pairs) where 3 leave too few:
/// SmolLM2's LM head (3 chunks: 48 of 2 CTAs' 128 registers; at 3 CTAs, 85
/// registers by this rule and 80 as ptxas allocated them, it spilled;
/// docs/performance.md entry 34). Rows of 4 chunks
/// (64 registers, half of 128: the Qwen2-0.5B shape's gate/up and LM head)
/// spilled 8-24 bytes and are left to the pipelined loop; fewer than 2 CTAs
/// per SM was not measured.
static void preloadShortRows(const ProjectionShape &shape,
                             const TargetInfo &target, ProjectionSchedule &s) {
  const int64_t rowChunks = llvm::divideCeil(shape.hidden, 256);
  if (!target.hasGridDependencyControl() || s.batchTile != 1 ||
      rowChunks > ProjectionSchedule::kMaxPreloadChunks)
    return;
  auto registers = [&](int64_t ctasPerSM) {
    return std::min(TargetInfo::kMaxRegistersPerThread,
                    target.getRegistersPerSM() / (ctasPerSM * s.blockSize));
  };
  const int64_t pairRegisters = 2 * rowChunks * 4;
  if (s.pairsPerWarp == 1) {
    if (pairRegisters <= registers(s.minCtasPerSM) / 3)
      s.preloadChunks = rowChunks;
    return;
  }
  auto twoPairsFit = [&](int64_t ctasPerSM) {
    return 5 * 2 * pairRegisters <= 2 * registers(ctasPerSM);
  };
  const int64_t ctasPerSM = std::min<int64_t>(s.minCtasPerSM, 2);
  if (!twoPairsFit(ctasPerSM))
    return;
  if (!twoPairsFit(s.minCtasPerSM)) {
    s.minCtasPerSM = ctasPerSM;
    fillResidentSlots(shape, target, s);
  }
  s.preloadChunks = rowChunks;
}

ProjectionSchedule
mlir::fusion::chooseProjectionSchedule(const ProjectionShape &shape,
                                       bool hasBatchVariant,
                                       const TargetInfo &target) {
  ProjectionSchedule s;
  const int64_t smCount = target.getSMCount();
  const int64_t budget = target.getStaticSharedBudget();
  // 8 warps; fewer when that leaves SMs idle at batch 1, or, in a kernel that
  // runs only at batch 1 (every CTA normalises the whole batch, so more CTAs
  // would cost more at larger batches), when CTAs of half as many warps still
  // make at most one round of resident CTAs: the pairs then spread evenly
  // over the SMs (SmolLM2's gate/up: 1536 pairs in 192 CTAs of 8 warps left
  // 72 SMs one CTA and 60 two; 384 CTAs of 4 warps give every SM two or
  // three, and each CTA's norm reduces over 4 warps: -2.8% per step,
  // docs/performance.md entry 32).
  auto ctasOf = [&](int64_t warps) {
    return static_cast<int64_t>(llvm::divideCeil(shape.pairs, warps));
  };
  s.warps = 8;
  while (s.warps > 2 &&
         (ctasOf(s.warps) < smCount ||
          (hasBatchVariant &&
           ctasOf(s.warps / 2) <= ProjectionSchedule::kMaxCtasPerSM * smCount)))
    s.warps /= 2;
  s.blockSize = TargetInfo::kWarpSize * s.warps;
  // The normalised tokens of a tile, and the argmax's slots for them.
  auto tileShared = [&](int64_t tokens) {
    return tokens * shape.hidden * shape.elementBytes +
           (shape.argmax ? getArgmaxSharedBytes(tokens) : 0);
  };
  s.batchTile = 8;
  while (s.batchTile > 1 && tileShared(s.batchTile) > budget)
    s.batchTile /= 2;
  // With the tensor-core variant, this kernel only runs at batch 1: a tile
  // of one token (entries 11 and 14).
  s.batchTile = std::min<int64_t>(s.batchTile, hasBatchVariant ? 1 : 4);
  const int64_t chunks = shape.hidden / 256;
  s.unroll = chunks >= 2 ? 2 : 1;
  // Ask ptxas for at least 3 CTAs per SM (.minnctapersm; bounds the
  // registers per thread: 80 at 256 threads), as shared memory allows
  // (entries 5 and 14: 4 forces 64 registers and spills; the hint caps every
  // batch-tile path of the kernel at 80 registers).
  const int64_t ctaShared = tileShared(s.batchTile) + 4 * s.warps;
  s.minCtasPerSM = std::max<int64_t>(
      1, std::min<int64_t>(
             {ProjectionSchedule::kMaxCtasPerSM,
              target.getOccupancySharedBytes() /
                  (ctaShared + target.getReservedSharedBytesPerCTA()),
              target.getMaxThreadsPerSM() / s.blockSize}));
  // One CTA per resident slot, fewer where the pairs give fewer warps'
  // work: every SM then streams the same share. (A grid between one and two
  // rounds of slots, like Llama-3-8B gate/up's 299 CTAs on 396 slots, left
  // a third of the SMs with one CTA more; docs/performance.md entry 22.)
  fillResidentSlots(shape, target, s);
  holdToTwoCtasPerSM(shape, hasBatchVariant, target, chunks, s);
  preloadShortRows(shape, target, s);
  return s;
}

/// The largest tile of whole heads for the GEMM-shaped variant: m * headDim
/// rows with m dividing `heads`, at most 128 rows (one head when a head is
/// larger); 0 when that is not a multiple of 16 rows or above 256.
static int64_t chooseGemmTileRows(int64_t headDim, int64_t heads) {
  int64_t m = std::max<int64_t>(1, 128 / headDim);
  while (m > 1 && heads % m != 0)
    --m;
  const int64_t rows = m * headDim;
  return rows % 16 == 0 && rows <= 256 ? rows : 0;
}

/// Makes `s` (a wgmma variant) warp-specialised where that applies: a
/// foldable RMSNorm over TMA-readable token rows, a tile of whole token
/// boxes (kTokenBoxRows) and a grid that fills at least half the SMs. Fewer,
/// longer CTAs than the split-K rule of the other variants (nothing waits per
/// stage but the data; bench/diagnostics/gemm_warp_specialized.cu,
/// docs/performance.md entries 42 and 43: k split 2, 8 stages, for the 8B
/// shape's q/k/v): the largest power-of-two split up to 8 whose grid fits the
/// SMs once, then as many stages, in whole rounds of the fold warps, as one CTA
/// per SM holds, or, where the grid passes the SMs, as two CTAs per SM hold.
/// Returns false (and leaves `s`) where the target does not ask for it, it does
/// not apply or fewer than two rounds of stages fit (with one round a fold
/// warp's next stage is the one the consumers wait for: not measured, the
/// non-specialised variant keeps three stages there; the Llama-3-8B shape's
/// gate/up at 32 and 64 tokens).
static bool chooseWarpSpecialized(const ProjectionGemmShape &shape,
                                  const TargetInfo &target,
                                  ProjectionGemmSchedule &s) {
  const ProjectionShape &proj = shape.projection;
  const int64_t sms = target.getSMCount();
  if (!target.wantsWarpSpecializedGemm() || !s.wgmma ||
      s.tileTokens % kTokenBoxRows != 0 || !shape.tmaTokenRows ||
      shape.norm != ProjectionNorm::FoldableRMS)
    return false;
  ProjectionGemmSchedule w = s;
  w.warpSpecialized = true;
  w.kSplit = 8;
  while (w.kSplit > 1 && (w.rowTiles * w.kSplit > sms ||
                          proj.hidden % (w.stageK * w.kSplit) != 0))
    w.kSplit /= 2;
  if (2 * w.grid() < sms)
    return false;
  // x, the residual, h: T rows each; the norm weight: one.
  w.stageRows = w.tileRows + w.tileTokens * (shape.residual ? 3 : 2) + 1;
  w.slotBytes = llvm::alignTo(w.stageRows * w.pitchBytes, 1024);
  w.minCtasPerSM = w.grid() > sms ? 2 : 1;
  const int64_t staticBytes =
      warpSpecializedStaticSharedBytes(w.tileTokens) +
      (proj.argmax ? getArgmaxSharedBytes(w.tileTokens) : 0);
  auto ctaShared = [&](int64_t stages) {
    return stages * w.slotBytes + 1024 + staticBytes +
           target.getReservedSharedBytesPerCTA();
  };
  const int64_t maxStages =
      std::min(kMaxWarpSpecializedStages, proj.hidden / w.stageK / w.kSplit);
  // Whole rounds of the fold warps (each owns the slots of its steps).
  constexpr int64_t kFold = ProjectionGemmSchedule::kFoldWarps;
  w.stages = 0;
  while (w.stages + kFold <= maxStages &&
         w.minCtasPerSM * ctaShared(w.stages + kFold) <=
             target.getOccupancySharedBytes() &&
         ctaShared(w.stages + kFold) - target.getReservedSharedBytesPerCTA() <=
             target.getMaxSharedBytesPerCTA())
    w.stages += kFold;
  if (w.stages < 2 * kFold)
    return false;
  w.dynamicSharedBytes = w.stages * w.slotBytes + 1024;
  s = w;
  return true;
}

int64_t ProjectionGemmSchedule::clusterExchangeBytes() const {
  return ::fusion::contract::clusterExchangeBytes(tileTokens, tileRows);
}

/// Sets s.clusterKSplit where the target asks for it and it applies: k
/// split in [2, 8] (contract::isValidClusterKSplit) dividing the tile's row
/// pairs (each CTA reduces an equal share) and the exchange fits the stage
/// ring (warp-specialised too: its consumer warps' accumulators and fold
/// warps' sums go to the exchange after the loops' CTA barrier).
static void chooseClusterKSplit(const TargetInfo &target,
                                ProjectionGemmSchedule &s) {
  s.clusterKSplit = target.wantsClusterKSplit() &&
                    ::fusion::contract::isValidClusterKSplit(s.kSplit) &&
                    (s.tileRows / 2) % s.kSplit == 0 &&
                    s.clusterExchangeBytes() <= s.stages * s.slotBytes;
}

llvm::SmallVector<ProjectionGemmSchedule, 3>
mlir::fusion::chooseProjectionGemmSchedules(const ProjectionGemmShape &shape,
                                            const TargetInfo &target) {
  const ProjectionShape &proj = shape.projection;
  constexpr int64_t kStageK = 64;
  const int64_t tileRows = chooseGemmTileRows(shape.headDim, shape.heads);
  if (!target.hasTensorCores() || shape.norm == ProjectionNorm::Other ||
      proj.hidden % kStageK != 0 || tileRows == 0)
    return {};
  ProjectionGemmSchedule base;
  base.tileRows = tileRows;
  base.rowTiles = shape.heads * shape.headDim / tileRows;
  base.stageK = kStageK;
  // Split k until the grid would pass two CTAs per SM (docs/performance.md
  // entry 15: split-K is what fills the GPU; non-powers of two were slower).
  base.kSplit = 8;
  while (base.kSplit > 1 &&
         (base.rowTiles * base.kSplit > 2 * target.getSMCount() ||
          proj.hidden % (kStageK * base.kSplit) != 0))
    base.kSplit /= 2;
  // No power of two divides the stages (hidden 576 = 9 stages: SmolLM2):
  // the largest other divisor up to 16 that keeps the grid in bounds, so
  // that small row counts still spread over the SMs.
  const int64_t stages = proj.hidden / kStageK;
  for (int64_t d = 16; base.kSplit == 1 && d > 2; --d)
    if (stages % d == 0 && base.rowTiles * d <= 2 * target.getSMCount())
      base.kSplit = d;
  const int64_t rowBytes = kStageK * proj.elementBytes;
  base.tmaWeights =
      target.hasBulkCopies() &&
      rowBytes == ::fusion::contract::TensorMapSpec().swizzleBytes;
  base.wgmma = base.tmaWeights && target.hasWarpgroupMma() &&
               tileRows % TargetInfo::kWarpgroupMmaRows == 0;
  base.pitchBytes = base.wgmma ? rowBytes : rowBytes + 16;
  llvm::SmallVector<ProjectionGemmSchedule, 3> schedules;
  for (auto [tokens, minBatch] :
       {std::pair<int64_t, int64_t>{16, 2}, {32, 17}, {64, 33}}) {
    ProjectionGemmSchedule s = base;
    s.tileTokens = tokens;
    s.minBatch = minBatch;
    s.stageRows = tileRows + tokens * (shape.residual ? 2 : 1) +
                  (shape.norm == ProjectionNorm::FoldableRMS ? 1 : 0);
    const int64_t staticBytes =
        kGemmStaticSharedBytes +
        (proj.argmax ? getArgmaxSharedBytes(tokens) : 0);
    const int64_t budget = target.getMaxSharedBytesPerCTA() - staticBytes;
    const int64_t slotAlign = s.tmaWeights ? 1024 : 1;
    s.slotBytes = llvm::alignTo(tileRows * s.weightPitchBytes() +
                                    (s.stageRows - tileRows) * s.pitchBytes,
                                slotAlign);
    auto bytes = [&](int64_t stages) {
      return stages * s.slotBytes + (s.tmaWeights ? slotAlign : 0);
    };
    auto ctaShared = [&](int64_t stages) {
      return bytes(stages) + staticBytes +
             target.getReservedSharedBytesPerCTA();
    };
    s.stages = 3;
    while (s.stages > 2 && bytes(s.stages) > budget)
      --s.stages;
    if (bytes(s.stages) > budget)
      break;
    const int64_t occupancy = target.getOccupancySharedBytes();
    s.minCtasPerSM =
        s.blockSize() <= 256 && 2 * ctaShared(s.stages) <= occupancy ? 2 : 1;
    // TMA stages cost no registers: deepen the ring while the CTAs per SM
    // stay and the CTA has the k steps (Llama-3-8B shape at batch 16:
    // gate/up 5 stages, the whole step 7% faster; docs/performance.md
    // entry 26).
    const int64_t maxStages = std::min(kMaxGemmStages, stages / base.kSplit);
    while (s.tmaWeights && s.stages < maxStages &&
           bytes(s.stages + 1) <= budget &&
           s.minCtasPerSM * ctaShared(s.stages + 1) <= occupancy)
      ++s.stages;
    s.dynamicSharedBytes = bytes(s.stages);
    chooseWarpSpecialized(shape, target, s);
    chooseClusterKSplit(target, s);
    schedules.push_back(s);
  }
  return schedules;
}

bool mlir::fusion::shouldPrefetchWeights(int64_t weightBytes) {
  return weightBytes <= TargetInfo::kL2PrefetchBytes;
}
