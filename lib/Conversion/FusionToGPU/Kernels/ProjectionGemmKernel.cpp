//===- ProjectionGemmKernel.cpp - the GEMM-shaped projection variant ------===//
//
// With tensor cores and a foldable norm (chooseProjectionGemmSchedules), the
// projection kernel gets GEMM-shaped batch variants `<entry>_gemm<T>` (T =
// tokens per tile) that stream the weights once per tile of up to 64 tokens
// (docs/performance.md, optimisation log entries 15 and 16; the design was
// measured in CUDA C as `gemmNorm` in bench/diagnostics/gemm_projection.cu).
//
// CTA (rowTile, rank) of the grid [rowTiles * kSplit] multiplies weight rows
// [rowTile * R, +R) (R = tileRows: whole heads, 16 rows per warp) with
// every token of the tile over k in [rank * H / kSplit, +H / kSplit). Each
// pipeline stage holds stageK k-elements of the R weight rows, of the T
// token rows (x), of the T residual rows and of the norm weight, copied by
// 16-byte cp.async.cg into a ring of `stages` stages (rows padded by 16
// bytes: ldmatrix is conflict-free). On sm_90 (tmaWeights) the weight rows
// come instead by TMA from the kernel's weight_map, one box per stage (two
// for gate/up), 128-byte swizzled, counted in bytes by the stage's mbarrier:
// bench/diagnostics/gemm_packed_mma.cu measured the stage ring so 13% faster
// than by cp.async (docs/performance.md entry 25); the boxes of the first
// token tile's first stages - 1 steps are issued before griddepcontrol.wait,
// and the ring deepens while the CTAs per SM stay (entry 26). Per stage,
// with an RMSNorm:
//   h = round(x + residual) in place of x (x itself without a residual),
//   written to residual_out by the CTAs of row tile 0; sum(h32^2)
//   accumulated per token in fp32.
// With an embedding before the norm (NormSpec::table), the stage's x rows
// are copied from the table rows the tokens select (getEmbeddingRowOffset,
// after griddepcontrol.wait like every read of x) and the CTAs of row tile 0
// write them where the kernel yields the embedding.
// Then every warp multiplies its 16 rows with the T tokens (ldmatrix.x4 +
// mma.m16n8k16, fp32 accumulators), the weight fragments first multiplied
// by the norm weight: round(W32 * w32) (w32 + 1 with unit_offset). On
// sm_90a (s.wgmma) each warpgroup of four warps multiplies its 64 rows by
// wgmma.mma_async.m64nTk16 instead: the same scaled weight fragments from
// registers, the token rows straight from shared memory (stored 128-byte
// swizzled, read through a matrix descriptor), so no ldmatrix of the
// tokens; the accumulators keep mma.sync's layout (Fragments/Wgmma.h).
// Measured on the H200: the Llama-3-8B front half 6-13% faster at batch 2
// to 8, 1-4.5% from 16 (docs/performance.md entry 40).
//
// Split-K without clusters: every CTA writes its fp32 partial tile
// (partial_out [batch, kSplit, rows]) and its per-token partial sums of
// squares (partial_stats [batch, rowTiles * kSplit]), fences (membar.gl),
// and thread 0 increments the arrival counter of (token tile, row tile) in
// split_counters [batch, rowTiles]. The CTA that sees kSplit - 1 resets the
// counter to 0 (so the workspace stays zero for the next launch or graph
// replay), fences, sums the kSplit partials of each output row pair in a
// fixed order, scales them by 1 / sqrt(sum(h^2) / H + eps) and runs the
// common pair epilogue (bias, rounding, RoPE, q/k/v and KV-cache stores).
// So the projection is round(rstd * sum_k h round(w W) + bias) where the
// CUDA-core kernel computes round(sum_k round(h * rstd * w) W + bias): one
// rounding per product term in both, at another place.
//
// Split-K through a cluster (s.clusterKSplit, the default where the target
// has clusters): launched with the
// kSplit CTAs of a row tile as one thread-block cluster (%cluster_nctarank
// = kSplit; docs/abi.md section 3.4), every CTA writes its partial tile and
// sums of squares over its own stage ring instead (every copy has landed,
// every warp is past the ring), arrives on the cluster barrier (release)
// and waits (acquire); CTA `rank` then reduces row pairs [rank, rank + 1)
// x tileRows / 2 / kSplit of the tile, reading the kSplit partials from the
// cluster's rings by DSMEM (mapa, ld.shared::cluster) in rank order and
// running the same sums, scaling and pair epilogue as the workspace path
// (finishPair), so the results should be bit-identical (not yet checked on
// a GPU); a last cluster barrier
// keeps every ring until the cluster has read it. No workspace, global
// fence (membar.gl) or counter; with TMA weights every thread fences its
// exchange stores for the async proxy (fence.proxy.async) before the first
// cluster barrier, as the next token tile's TMA copies overwrite the ring.
// Launched otherwise, the workspace path runs. A warp-specialised variant
// combines the same way after its loops' CTA barrier: its consumer warps
// hold the accumulators, its fold warps' sums are in shared memory.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/AsyncCopy.h"
#include "../Fragments/Cluster.h"
#include "../Fragments/Embedding.h"
#include "../Fragments/Mma.h"
#include "../Fragments/Reduce.h"
#include "../Fragments/Wgmma.h"
#include "../KernelEmitter.h"
#include "Projection.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// The variant's body for one schedule.
struct GemmKernel {
  const ProjectionPlan &p;
  const ProjectionGemmSchedule &s;
  /// Dynamic shared memory as an element-typed memref and as a pointer; the
  /// first stage slot starts `slotsAt` elements into it (alignSlots); the
  /// flag by which thread 0 tells the CTA that it arrived last.
  Value smem, smemPtr, slotsAt, lastFlag;
  /// Global pointers of the staged buffers (null where absent).
  Value weightPtr, inputPtr, residualPtr, normWeightPtr;
  /// The workspaces.
  Value partials, stats, counters;
  /// With tmaWeights: the weight's TMA descriptor (generic pointer) and the
  /// stages' mbarriers (createStageBarriers).
  Value weightMap, fullBarriers;
  /// Warp-specialised: the token and residual rows' TMA descriptors, and
  /// the stages' `empty` (the consumers released the slot) and `tokens`
  /// (its token rows and norm weight landed) mbarriers.
  Value inputMap, residualMap, emptyBarriers, tokenBarriers;
  /// Warp-specialised: each fold warp's per-token sums of h^2 (f32
  /// [kFoldWarps, tileTokens]), combined after the loops.
  Value foldSums;
  Value tid, lane, warp, rank, rowTile, kBegin, isRowTile0;
  bool rms = false, residual = false;

  int64_t chunksPerRow() const { return s.stageK / kVectorWidth; }
  int64_t pitch() const { return s.pitchBytes / getTypeBytes(p.act); }
  int64_t weightPitch() const {
    return s.weightPitchBytes() / getTypeBytes(p.act);
  }
  int64_t slotElems() const { return s.slotBytes / getTypeBytes(p.act); }
  /// Byte offset of stage `slot` in the dynamic shared memory.
  Value slotByte(ImplicitLocOpBuilder &b, Value slot) {
    return addI(b, mulI(b, slotsAt, getTypeBytes(p.act)),
                mulI(b, slot, s.slotBytes));
  }
  int64_t steps() const { return p.hidden / s.kSplit / s.stageK; }
  int64_t tokenRow() const { return s.tileRows; }
  int64_t residualRow() const { return s.tileRows + s.tileTokens; }
  int64_t normWeightRow() const { return s.stageRows - 1; }
  /// Warp-specialised: the fold warps' h rows, the wgmma's B operand.
  int64_t hRow() const {
    return s.tileRows + s.tileTokens * (residual ? 2 : 1);
  }
  int64_t foldIters() const {
    return llvm::divideCeil(s.tileTokens * chunksPerRow(), s.blockSize());
  }
  /// Element offset of element `col` of row `r` of the rows of one kind
  /// that start at stage row `firstRow` (0: the weight rows, copied by
  /// cp.async where not by TMA; tokenRow(), residualRow(), normWeightRow())
  /// of stage `slot`. With wgmma the token, residual and norm-weight rows
  /// are 128-byte swizzled like the TMA weight rows: 16-byte chunk c at
  /// chunk c ^ (r % 8) (each kind's first row is a multiple of 8).
  Value smemAt(ImplicitLocOpBuilder &b, Value slot, int64_t firstRow, Value r,
               Value col) {
    Value slotAt = addI(b, slotsAt, mulI(b, slot, slotElems()));
    if (firstRow < s.tileRows) {
      assert(firstRow == 0 && !s.tmaWeights && "TMA boxes address the weights");
      return addI(b, slotAt, addI(b, mulI(b, r, weightPitch()), col));
    }
    const int64_t rowAt =
        s.tileRows * weightPitch() + (firstRow - s.tileRows) * pitch();
    if (s.wgmma) {
      Value c8 = constIndex(b, kVectorWidth);
      Value chunk = xorI(b, divUI(b, col, c8), remUI(b, r, constIndex(b, 8)));
      col = addI(b, mulI(b, chunk, kVectorWidth), remUI(b, col, c8));
    }
    return addI(b, addI(b, slotAt, rowAt), addI(b, mulI(b, r, pitch()), col));
  }

  /// The weight row staged as row `r` of the tile starting at kernel row
  /// `n0`: the same row, except for gate/up, whose tile t holds the gate
  /// rows of its pairs [t * R/2, +R/2) and then their up rows (I further).
  Value weightRow(ImplicitLocOpBuilder &b, Value n0, Value r) {
    if (!p.gateUp)
      return addI(b, n0, r);
    const int64_t half = s.tileRows / 2;
    Value first = divUI(b, n0, constIndex(b, 2));
    Value isUp = cmpI(b, CmpIPredicate::uge, r, half);
    Value up =
        addI(b, addI(b, first, subI(b, r, constIndex(b, half))), p.headDim / 2);
    return select(b, isUp, up, addI(b, first, r));
  }
  /// The partial-sum rows (kernel rows) of output pair `pair` (`rows` from
  /// getPairRows): its weight rows, except for gate/up (weightRow's order).
  std::pair<Value, Value> partialRows(ImplicitLocOpBuilder &b, Value pair,
                                      const PairRows &rows) {
    if (!p.gateUp)
      return {rows.rowA, rows.rowB};
    const int64_t half = s.tileRows / 2;
    Value tile = divUI(b, pair, constIndex(b, half));
    Value base =
        addI(b, mulI(b, tile, s.tileRows), remUI(b, pair, constIndex(b, half)));
    return {base, addI(b, base, half)};
  }

  void emitPrologue(ImplicitLocOpBuilder &b, gpu::GPUFuncOp func,
                    gpu::GPUModuleOp module, Value weightMapArg, Value batchArg,
                    bool beforeWait);
  void prefetchWeights(ImplicitLocOpBuilder &b);
  void emitBody(ImplicitLocOpBuilder &b);
  void emitTokenTile(ImplicitLocOpBuilder &b, Value tileStart, Value count);
  void copyWeightsByTma(ImplicitLocOpBuilder &b, Value slot, Value k, Value n0);
  void issueWeightBoxes(ImplicitLocOpBuilder &b, Value slot, Value k, Value n0);
  Value stageParity(ImplicitLocOpBuilder &b, Value tileStart, Value step);
  void alignSlots(ImplicitLocOpBuilder &b);
  void copyRows(ImplicitLocOpBuilder &b, Value src, int64_t rows,
                int64_t firstRow, Value slot, Value k,
                llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> rowAt);
  void issueStage(ImplicitLocOpBuilder &b, Value tileStart, Value lastToken,
                  Value step, Value weightsIssued = Value());
  Value sumPartials(ImplicitLocOpBuilder &b, Value tileStart, Value count,
                    Value t, Value k);
  SmallVector<Value> foldActivations(ImplicitLocOpBuilder &b, Value slot,
                                     Value step, Value tileStart, Value count,
                                     ArrayRef<Value> sums);
  void scaleByNormWeight(ImplicitLocOpBuilder &b, Value slot, int64_t kk,
                         SmallVector<Value, 4> &a);
  SmallVector<Value, 4> loadWeightFragment(ImplicitLocOpBuilder &b, Value slot,
                                           int64_t kk);
  void multiplyStage(ImplicitLocOpBuilder &b, Value slot,
                     SmallVector<Value> &acc);
  void multiplyStageByWarpgroup(ImplicitLocOpBuilder &b, Value slot,
                                SmallVector<Value> &acc);
  /// Emits, by the threads that hold them, each token's sum of h^2 over
  /// this CTA's k range as store(b, t, total) (reduceSquares of the
  /// threads' chunk sums, or the fold warps' foldSums).
  using SquareTotals = llvm::function_ref<void(
      ImplicitLocOpBuilder &,
      llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)>)>;
  /// The k loop's results for the combine: each warp's accumulators `acc`
  /// (only where `holdsAcc`, an i1, holds: the consumer warps of a
  /// warp-specialised tile; null: every warp) and the square totals.
  struct Partials {
    ArrayRef<Value> acc;
    Value holdsAcc;
    SquareTotals totals;
  };
  void publishPartials(ImplicitLocOpBuilder &b, Value tileStart, Value count,
                       const Partials &partials);
  void
  forEachAccumulatorWarp(ImplicitLocOpBuilder &b, const Partials &partials,
                         llvm::function_ref<void(ImplicitLocOpBuilder &)> body);
  void storePartialTile(ImplicitLocOpBuilder &b, Value tileStart, Value count,
                        ArrayRef<Value> acc);
  void reduceSquares(
      ImplicitLocOpBuilder &b, ArrayRef<Value> sums,
      llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> store);
  void storePartialSquares(ImplicitLocOpBuilder &b, Value tileStart,
                           Value count, Value t, Value total);
  // Warp-specialised (ProjectionGemmSchedule::warpSpecialized).
  Value ringParity(ImplicitLocOpBuilder &b, Value step, int64_t usesBefore);
  void emitWarpSpecializedTile(ImplicitLocOpBuilder &b, Value tileStart,
                               Value count);
  void produceStages(ImplicitLocOpBuilder &b, Value tileStart, Value first);
  void foldStages(ImplicitLocOpBuilder &b, Value tileStart, Value count,
                  Value first);
  SmallVector<Value> consumeStages(ImplicitLocOpBuilder &b, Value first);
  void emitArrival(ImplicitLocOpBuilder &b, Value tileStart);
  void emitReduction(ImplicitLocOpBuilder &b, Value tileStart, Value count);
  void reduceTile(ImplicitLocOpBuilder &b, Value tileStart, Value count);
  /// Loads split `r`'s partial of kernel row `row`, or its sum of squares,
  /// of the pair's token (finishPair).
  using PartialLoader =
      llvm::function_ref<Value(ImplicitLocOpBuilder &, int64_t r, Value row)>;
  using SquaresLoader =
      llvm::function_ref<Value(ImplicitLocOpBuilder &, int64_t r)>;
  void finishPair(ImplicitLocOpBuilder &b, Value token, Value pair,
                  PartialLoader partial, SquaresLoader squares);
  // Split-K through a cluster (ProjectionGemmSchedule::clusterKSplit).
  void combineSplits(ImplicitLocOpBuilder &b, Value tileStart, Value count,
                     const Partials &partials);
  Value exchangePointer(ImplicitLocOpBuilder &b);
  void exchangeInCluster(ImplicitLocOpBuilder &b, const Partials &partials);
  void reduceInCluster(ImplicitLocOpBuilder &b, Value tileStart, Value count);
};

} // namespace

/// What does not depend on the previous kernel, so that it runs before
/// griddepcontrol.wait (`beforeWait`: where the target has it): the thread
/// and tile indices, the stage slots, before the wait the L2 prefetch of
/// the CTA's weights (shouldPrefetchWeights) and, with tmaWeights, the stage
/// barriers and the TMA copies of the first token tile's first stages - 1
/// weight steps (warp-specialised: `stages`; their bytes land while the
/// previous kernel finishes).
/// `batchArg` is the i32 batch parameter. The weights are model arguments
/// that no kernel writes (docs/abi.md section 1).
void GemmKernel::emitPrologue(ImplicitLocOpBuilder &b, gpu::GPUFuncOp func,
                              gpu::GPUModuleOp module, Value weightMapArg,
                              Value batchArg, bool beforeWait) {
  tid = threadIdX(b);
  lane = laneId(b);
  warp = warpId(b);
  rank = remUI(b, blockIdX(b), constIndex(b, s.kSplit));
  rowTile = divUI(b, blockIdX(b), constIndex(b, s.kSplit));
  kBegin = mulI(b, rank, p.hidden / s.kSplit);
  isRowTile0 = cmpI(b, CmpIPredicate::eq, rowTile, constIndex(b, 0));
  smemPtr = getDynamicSharedPointer(b, module);
  alignSlots(b);
  if (beforeWait)
    prefetchWeights(b);
  if (!s.tmaWeights)
    return;
  weightMap = getGenericPointer(b, weightMapArg);
  // Warp-specialised, a stage is full once the weights' expect_tx and its
  // fold warp arrived; empty once each consumer warp did.
  fullBarriers =
      createStageBarriers(b, func, tid, s.stages, s.warpSpecialized ? 2 : 1);
  if (s.warpSpecialized) {
    emptyBarriers = createStageBarriers(b, func, tid, s.stages, s.warps());
    tokenBarriers = createStageBarriers(b, func, tid, s.stages);
  }
  // Only when the first tile runs and waits for them (batch >= 1; the
  // runtime launches a variant from its minBatch >= 2): a CTA must not exit
  // with bulk copies into its shared memory in flight. (Warp-specialised,
  // every slot is free: the first `stages` steps.)
  const int64_t early = s.warpSpecialized ? s.stages : s.stages - 1;
  ifThen(b, cmpI(b, CmpIPredicate::sgt, batchArg, constI32(b, 0)),
         [&](ImplicitLocOpBuilder &ib) {
           for (int64_t i = 0; i < early && i < steps(); ++i)
             copyWeightsByTma(ib, constIndex(ib, i),
                              addI(ib, kBegin, constIndex(ib, i * s.stageK)),
                              mulI(ib, rowTile, s.tileRows));
         });
}

void GemmKernel::emitBody(ImplicitLocOpBuilder &b) {
  forEachTokenTile(b, p, s.tileTokens,
                   [&](ImplicitLocOpBuilder &tb, Value tileStart, Value count) {
                     if (s.warpSpecialized)
                       emitWarpSpecializedTile(tb, tileStart, count);
                     else
                       emitTokenTile(tb, tileStart, count);
                   });
}

/// Where shouldPrefetchWeights (in emitPrologue): thread r < tileRows asks
/// L2 for the CTA's k range of its staged row r, so that the weight stream
/// is done while the previous kernel runs.
void GemmKernel::prefetchWeights(ImplicitLocOpBuilder &b) {
  const int64_t elemBytes = getTypeBytes(p.act);
  if (!shouldPrefetchWeights(p.rows * p.hidden * elemBytes))
    return;
  ifThen(b, cmpI(b, CmpIPredicate::ult, tid, constIndex(b, s.tileRows)),
         [&](ImplicitLocOpBuilder &ib) {
           Value n0 = mulI(ib, rowTile, s.tileRows);
           Value elem =
               addI(ib, mulI(ib, weightRow(ib, n0, tid), p.hidden), kBegin);
           prefetchToL2(ib,
                        offsetPointer(ib, getGlobalPointer(ib, p.weight),
                                      mulI(ib, elem, elemBytes)),
                        p.hidden / s.kSplit * elemBytes);
         });
}

/// Copies k-elements [k, k + stageK) of `rows` rows of `src` (row r starts
/// at element rowAt(r)) to rows firstRow.. of stage `slot`: 16 bytes per
/// thread and copy, the CTA's threads over the rows' chunks.
void GemmKernel::copyRows(
    ImplicitLocOpBuilder &b, Value src, int64_t rows, int64_t firstRow,
    Value slot, Value k,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> rowAt) {
  const int64_t chunks = rows * chunksPerRow(), threads = s.blockSize();
  const int64_t elemBytes = getTypeBytes(p.act);
  for (int64_t it = 0; it * threads < chunks; ++it) {
    Value c = addI(b, tid, it * threads);
    auto copy = [&](ImplicitLocOpBuilder &cb) {
      Value r = divUI(cb, c, constIndex(cb, chunksPerRow()));
      Value col =
          mulI(cb, remUI(cb, c, constIndex(cb, chunksPerRow())), kVectorWidth);
      Value srcElem = addI(cb, addI(cb, rowAt(cb, r), k), col);
      Value dst = smemAt(cb, slot, firstRow, r, col);
      Value dstByte = mulI(cb, dst, elemBytes);
      Value srcByte = mulI(cb, srcElem, elemBytes);
      Value global = offsetPointer(cb, src, srcByte);
      copyAsync16(cb, offsetPointer(cb, smemPtr, dstByte), global);
    };
    if ((it + 1) * threads <= chunks)
      copy(b);
    else
      ifThen(b, cmpI(b, CmpIPredicate::ult, c, constIndex(b, chunks)), copy);
  }
}

/// Sets slotsAt: with tmaWeights the first 1 KiB boundary of the dynamic
/// shared memory (the schedule allows 1 KiB for this), where the 128-byte
/// swizzle of the TMA boxes is the one multiplyStage reads; else 0.
void GemmKernel::alignSlots(ImplicitLocOpBuilder &b) {
  if (!s.tmaWeights) {
    slotsAt = constIndex(b, 0);
    return;
  }
  Value address = arith::IndexCastOp::create(
      b, b.getIndexType(),
      LLVM::PtrToIntOp::create(b, b.getI32Type(), smemPtr));
  Value kb = constIndex(b, 1024);
  Value pad = remUI(b, subI(b, kb, remUI(b, address, kb)), kb);
  slotsAt = divUI(b, pad, constIndex(b, getTypeBytes(p.act)));
}

/// Thread 0's TMA copies of k-elements [k, k + stageK) of the tile's weight
/// rows (from kernel row n0) into stage `slot`: it arms the stage's barrier
/// for their bytes, then copies one box of tileRows rows (gate/up: the gate
/// rows' box, then the up rows'). The CTA barrier before (every warp is done
/// with the slot) and the proxy fence order the slot's last ldmatrix reads
/// before the copies overwrite it.
void GemmKernel::copyWeightsByTma(ImplicitLocOpBuilder &b, Value slot, Value k,
                                  Value n0) {
  ifThen(b, cmpI(b, CmpIPredicate::eq, tid, constIndex(b, 0)),
         [&](ImplicitLocOpBuilder &tb) { issueWeightBoxes(tb, slot, k, n0); });
}

/// copyWeightsByTma's copies, by the calling thread.
void GemmKernel::issueWeightBoxes(ImplicitLocOpBuilder &b, Value slot, Value k,
                                  Value n0) {
  Value full = stageBarrier(b, fullBarriers, slot);
  fenceSharedForBulkCopies(b);
  arriveExpectingBytes(b, full, s.tileRows * s.weightPitchBytes());
  Value dst = offsetPointer(b, smemPtr, slotByte(b, slot));
  if (!p.gateUp) {
    copyTensorBox(b, dst, weightMap, {k, n0}, full);
    return;
  }
  const int64_t half = s.tileRows / 2;
  copyTensorBox(b, dst, weightMap, {k, weightRow(b, n0, constIndex(b, 0))},
                full);
  copyTensorBox(
      b, offsetPointer(b, dst, constIndex(b, half * s.weightPitchBytes())),
      weightMap, {k, weightRow(b, n0, constIndex(b, half))}, full);
}

/// The parity (i32) of the phase of stage step % stages's barrier that
/// step `step` of the token tile at `tileStart` waits for: the barrier's
/// uses in the earlier tiles (each tile uses stage j for its steps j,
/// j + stages, ...) plus step / stages, mod 2.
Value GemmKernel::stageParity(ImplicitLocOpBuilder &b, Value tileStart,
                              Value step) {
  Value stages = constIndex(b, s.stages);
  Value slot = remUI(b, step, stages);
  const int64_t uses = steps() / s.stages;
  Value usesPerTile = select(
      b, cmpI(b, CmpIPredicate::ult, slot, constIndex(b, steps() % s.stages)),
      constIndex(b, uses + 1), constIndex(b, uses));
  Value tile = divUI(b, tileStart, constIndex(b, s.tileTokens));
  Value phase = addI(b, mulI(b, tile, usesPerTile), divUI(b, step, stages));
  return arith::IndexCastOp::create(b, b.getI32Type(),
                                    remUI(b, phase, constIndex(b, 2)));
}

/// Issues the copies of pipeline step `step` into stage step % stages and
/// commits them as one group; with tmaWeights, the weights' TMA copies only
/// where `weightsIssued` (i1) is false or absent (emitPrologue issued them).
/// Token rows past the batch repeat its last token (`lastToken`); their results
/// are never stored. With an embedding, a token's x row is its table row.
void GemmKernel::issueStage(ImplicitLocOpBuilder &b, Value tileStart,
                            Value lastToken, Value step, Value weightsIssued) {
  const int64_t H = p.hidden;
  Value slot = remUI(b, step, constIndex(b, s.stages));
  Value k = addI(b, kBegin, mulI(b, step, s.stageK));
  Value n0 = mulI(b, rowTile, s.tileRows);
  if (s.tmaWeights && weightsIssued)
    ifThen(b, notI1(b, weightsIssued), [&](ImplicitLocOpBuilder &ib) {
      copyWeightsByTma(ib, slot, k, n0);
    });
  else if (s.tmaWeights)
    copyWeightsByTma(b, slot, k, n0);
  else
    copyRows(b, weightPtr, s.tileRows, 0, slot, k,
             [&](ImplicitLocOpBuilder &ib, Value r) {
               return mulI(ib, weightRow(ib, n0, r), H);
             });
  auto tokenOf = [&](ImplicitLocOpBuilder &ib, Value r) {
    return minUI(ib, addI(ib, tileStart, r), lastToken);
  };
  auto tokenAt = [&](ImplicitLocOpBuilder &ib, Value r) {
    return mulI(ib, tokenOf(ib, r), H);
  };
  auto tableRowAt = [&](ImplicitLocOpBuilder &ib, Value r) {
    return getEmbeddingRowOffset(ib, p.norm.ids, tokenOf(ib, r), p.norm.vocab,
                                 H);
  };
  if (inputPtr && p.norm.table)
    copyRows(b, inputPtr, s.tileTokens, tokenRow(), slot, k, tableRowAt);
  else if (inputPtr)
    copyRows(b, inputPtr, s.tileTokens, tokenRow(), slot, k, tokenAt);
  if (residual)
    copyRows(b, residualPtr, s.tileTokens, residualRow(), slot, k, tokenAt);
  if (rms)
    copyRows(
        b, normWeightPtr, 1, normWeightRow(), slot, k,
        [&](ImplicitLocOpBuilder &ib, Value) { return constIndex(ib, 0); });
  commitAsyncCopies(b);
}

/// The norm's pass over stage `slot` (step `step`): h = round(x + r) in
/// place of x (with a residual), residual_out (and the embedding's rows x),
/// and the sums of h^2 (`sums`: one f32 per chunk of this thread, whose
/// token is the same in every step). Returns the new sums.
SmallVector<Value> GemmKernel::foldActivations(ImplicitLocOpBuilder &b,
                                               Value slot, Value step,
                                               Value tileStart, Value count,
                                               ArrayRef<Value> sums) {
  const int64_t chunks = s.tileTokens * chunksPerRow(), H = p.hidden;
  Value k = addI(b, kBegin, mulI(b, step, s.stageK));
  SmallVector<Value> result;
  for (int64_t it = 0; it < foldIters(); ++it) {
    Value c = addI(b, tid, it * s.blockSize());
    auto fold = [&](ImplicitLocOpBuilder &fb) -> SmallVector<Value> {
      Value t = divUI(fb, c, constIndex(fb, chunksPerRow()));
      Value col =
          mulI(fb, remUI(fb, c, constIndex(fb, chunksPerRow())), kVectorWidth);
      Value xAt = smemAt(fb, slot, tokenRow(), t, col);
      Value x = p.norm.partials
                    ? sumPartials(fb, tileStart, count, t, addI(fb, k, col))
                    : loadVector(fb, smem, xAt, kVectorWidth);
      // Row tile 0's CTAs write the token's row of `out` (if any).
      auto storeOutput = [&](Value out, Value v) {
        if (!out)
          return;
        Value writes =
            andI(fb, isRowTile0, cmpI(fb, CmpIPredicate::ult, t, count));
        ifThen(fb, writes, [&](ImplicitLocOpBuilder &wb) {
          Value at =
              addI(wb, mulI(wb, addI(wb, tileStart, t), H), addI(wb, k, col));
          storeVector(wb, v, out, at);
        });
      };
      storeOutput(p.norm.gatheredOut, x);
      Value h = x;
      if (residual) {
        Value r = loadVector(fb, smem, smemAt(fb, slot, residualRow(), t, col),
                             kVectorWidth);
        h = truncFromF32(fb, addF(fb, extToF32(fb, h), extToF32(fb, r)), p.act);
      }
      if (residual || p.norm.partials)
        storeVector(fb, h, smem, xAt);
      storeOutput(p.norm.residualOut, h);
      Value h32 = extToF32(fb, h);
      Value squares = vector::ReductionOp::create(
          fb, vector::CombiningKind::ADD, mulF(fb, h32, h32));
      return {addF(fb, sums[it], squares)};
    };
    if ((it + 1) * s.blockSize() <= chunks)
      result.push_back(fold(b).front());
    else
      result.push_back(ifThenElseValues(b, TypeRange{sums[it].getType()},
                                        cmpI(b, CmpIPredicate::ult, c,
                                             constIndex(b, chunks)),
                                        fold,
                                        [&](ImplicitLocOpBuilder &) {
                                          return SmallVector<Value>{sums[it]};
                                        })
                           .front());
  }
  // The mma reads the rows other threads rewrote (wgmma through the async
  // proxy).
  if (s.wgmma && (residual || p.norm.partials))
    fenceSharedForBulkCopies(b);
  if (residual || p.norm.partials)
    barrier(b);
  return result;
}

/// x = round(sum_g partials[token, g, k..k+8)) (fusion.sum_partials, in
/// order of g) of tile row `t`, rows past the batch repeating its last token.
Value GemmKernel::sumPartials(ImplicitLocOpBuilder &b, Value tileStart,
                              Value count, Value t, Value k) {
  const NormSpec &norm = p.norm;
  Value token =
      addI(b, tileStart, minUI(b, t, subI(b, count, constIndex(b, 1))));
  Value sum;
  for (int64_t g = 0; g < norm.numPartials; ++g) {
    Value at = addI(
        b, mulI(b, addI(b, mulI(b, token, norm.numPartials), g), p.hidden), k);
    Value v = loadVector(b, norm.partials, at, kVectorWidth);
    sum = sum ? addF(b, sum, v) : v;
  }
  return truncFromF32(b, sum, p.act);
}

/// This warp's A fragment `a` (columns 2q, 2q + 1 in registers 0, 1 and
/// 2q + 8, 2q + 9 in registers 2, 3 of k step `kk`) multiplied by the norm
/// weight of those columns: round(W32 * w32) (w32 + 1 with unit_offset), so
/// that the norm weight costs no pass over the activations and the weights
/// cannot overflow (|W w| is small where |h w| need not be).
void GemmKernel::scaleByNormWeight(ImplicitLocOpBuilder &b, Value slot,
                                   int64_t kk, SmallVector<Value, 4> &a) {
  Value col = addI(b, mulI(b, remUI(b, lane, constIndex(b, 4)), 2), kk * 16);
  for (int64_t half = 0; half < 2; ++half) {
    Value w = loadVector(b, smem,
                         smemAt(b, slot, normWeightRow(), constIndex(b, 0),
                                addI(b, col, 8 * half)),
                         2);
    Value w32 = getNormWeightF32(b, p.norm, w);
    for (int64_t r = 0; r < 2; ++r) {
      Value &reg = a[2 * half + r];
      reg = truncFromF32(b, mulF(b, extToF32(b, reg), w32), p.act);
    }
  }
}

/// This warp's A fragment (Fragments/Mma.h) of k step `kk` of stage `slot`:
/// its 16 weight rows, multiplied by the norm weight with an RMSNorm.
/// ldmatrix.x4 addresses: matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) from
/// lanes 0-15 (row lane % 16, k half lane / 16), 16-byte chunk c = 2 kk +
/// lane / 16 of the row, at c ^ (row % 8) when swizzled (row % 8 is
/// lane % 8).
SmallVector<Value, 4> GemmKernel::loadWeightFragment(ImplicitLocOpBuilder &b,
                                                     Value slot, int64_t kk) {
  Value c16 = constIndex(b, 16);
  Value row = addI(b, mulI(b, warp, 16), remUI(b, lane, c16));
  Value chunk = addI(b, divUI(b, lane, c16), 2 * kk);
  if (s.tmaWeights)
    chunk = xorI(b, chunk, remUI(b, lane, constIndex(b, 8)));
  Value at =
      addI(b, slotByte(b, slot),
           addI(b, mulI(b, row, s.weightPitchBytes()), mulI(b, chunk, 16)));
  SmallVector<Value, 4> a =
      loadMatrixX4(b, offsetPointer(b, smemPtr, at), p.act);
  if (rms)
    scaleByNormWeight(b, slot, kk, a);
  return a;
}

/// The mma of one stage: this warp's 16 weight rows (A, row-major) with the
/// tile's token rows (B, one token per column), stageK / 16 k-steps.
/// Accumulator 2n + i: tokens 16n + 8i + [0, 8).
void GemmKernel::multiplyStage(ImplicitLocOpBuilder &b, Value slot,
                               SmallVector<Value> &acc) {
  if (s.wgmma)
    return multiplyStageByWarpgroup(b, slot, acc);
  const int64_t pb = s.pitchBytes;
  // ldmatrix.x4 addresses of B: matrices (tokens 0-7 | 8-15, k half
  // (lane / 8) % 2) so that registers 0, 1 are the B fragment of tokens 0-7
  // and registers 2, 3 that of tokens 8-15.
  Value c16 = constIndex(b, 16), c8 = constIndex(b, 8);
  Value tokenInPair =
      addI(b, remUI(b, lane, c8), mulI(b, divUI(b, lane, c16), 8));
  Value laneB = addI(
      b, addI(b, mulI(b, tokenInPair, pb), s.tileRows * s.weightPitchBytes()),
      mulI(b, remUI(b, divUI(b, lane, c8), constIndex(b, 2)), 16));
  Value stageBase = slotByte(b, slot);
  for (int64_t kk = 0; kk < s.stageK / 16; ++kk) {
    Value kByte = addI(b, stageBase, kk * 32);
    SmallVector<Value, 4> a = loadWeightFragment(b, slot, kk);
    for (int64_t n = 0; n < s.tileTokens / 16; ++n) {
      Value at = addI(b, addI(b, laneB, kByte), n * 16 * pb);
      SmallVector<Value, 4> bm =
          loadMatrixX4(b, offsetPointer(b, smemPtr, at), p.act);
      for (int64_t i = 0; i < 2; ++i) {
        ArrayRef<Value> c = ArrayRef<Value>(acc).slice(4 * (2 * n + i), 4);
        SmallVector<Value, 4> d =
            mmaM16N8K16(b, p.act, a, {bm[2 * i], bm[2 * i + 1]}, c);
        std::copy(d.begin(), d.end(), acc.begin() + 4 * (2 * n + i));
      }
    }
  }
}

/// The stage by warpgroup MMA (s.wgmma): the A fragments of all k steps
/// first, then the accumulators and fragments pinned in their registers
/// and one wgmma.fence covering them, then one
/// m64n<tileTokens>k16 wgmma per k step with the swizzled token rows as B
/// (the descriptor's start 32 bytes further per k step), committed and
/// waited for before the ring reuses the slot (the results pinned again, so
/// that nothing reads them before the wait). Warp w's accumulators are
/// rows 16w .. 16w + 15, in mma.sync's layout (Fragments/Wgmma.h).
void GemmKernel::multiplyStageByWarpgroup(ImplicitLocOpBuilder &b, Value slot,
                                          SmallVector<Value> &acc) {
  const int64_t kSteps = s.stageK / 16;
  SmallVector<Value> operands(acc);
  for (int64_t kk = 0; kk < kSteps; ++kk)
    llvm::append_range(operands, loadWeightFragment(b, slot, kk));
  // Every operand in its register before the fence, none written after it.
  operands = pinWarpgroupOperands(b, operands);
  acc.assign(operands.begin(), operands.begin() + acc.size());
  ArrayRef<Value> a = ArrayRef<Value>(operands).drop_front(acc.size());
  fenceWarpgroupMma(b);
  // B: the token rows (h after the norm's pass); warp-specialised, the fold
  // warps' h rows.
  const int64_t bRow = s.warpSpecialized ? hRow() : tokenRow();
  Value tokens = addI(b, slotByte(b, slot),
                      s.tileRows * s.weightPitchBytes() +
                          (bRow - s.tileRows) * s.pitchBytes);
  Value base = LLVM::PtrToIntOp::create(b, b.getI32Type(), smemPtr);
  Value tokensAt = addI(b, base, indexToI32(b, tokens));
  for (int64_t kk = 0; kk < kSteps; ++kk) {
    Value descriptor = getSwizzled128Descriptor(
        b, addI(b, tokensAt, constI32(b, static_cast<int32_t>(kk * 32))));
    acc = warpgroupMmaM64K16(b, p.act, a.slice(4 * kk, 4), descriptor, acc);
  }
  commitAndWaitWarpgroupMma(b, 0);
  acc = pinWarpgroupOperands(b, acc);
}

/// Writes this CTA's partial tile and per-token partial sums of squares,
/// then publishes them (membar.gl, barrier). Lane (g, q) of warp w holds
/// rows 16w + g (+ 8 for registers 2, 3) for tokens 8n + 2q (+ 1 for
/// registers 1, 3) in accumulators 4n..4n+3.
void GemmKernel::publishPartials(ImplicitLocOpBuilder &b, Value tileStart,
                                 Value count, const Partials &partials) {
  forEachAccumulatorWarp(b, partials, [&](ImplicitLocOpBuilder &ab) {
    storePartialTile(ab, tileStart, count, partials.acc);
  });
  partials.totals(b, [&](ImplicitLocOpBuilder &sb, Value t, Value total) {
    storePartialSquares(sb, tileStart, count, t, total);
  });
  fenceGPU(b);
  barrier(b);
}

/// `body` in the warps that hold accumulators (Partials::holdsAcc).
void GemmKernel::forEachAccumulatorWarp(
    ImplicitLocOpBuilder &b, const Partials &partials,
    llvm::function_ref<void(ImplicitLocOpBuilder &)> body) {
  if (partials.holdsAcc)
    ifThen(b, partials.holdsAcc, body);
  else
    body(b);
}

/// For each token of the tile, this CTA's sum of h^2 over its k range: the
/// per-chunk sums `sums` (foldActivations') reduced over the token's
/// chunksPerRow() threads (consecutive lanes), then `store`(t, total) by the
/// token's first thread.
void GemmKernel::reduceSquares(
    ImplicitLocOpBuilder &b, ArrayRef<Value> sums,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> store) {
  for (int64_t it = 0; it < static_cast<int64_t>(sums.size()); ++it) {
    Value total = warpReduce(b, sums[it], ReduceKind::Sum, chunksPerRow());
    Value c = addI(b, tid, it * s.blockSize());
    Value t = divUI(b, c, constIndex(b, chunksPerRow()));
    Value first =
        cmpI(b, CmpIPredicate::eq, remUI(b, c, constIndex(b, chunksPerRow())),
             constIndex(b, 0));
    Value inTile = cmpI(b, CmpIPredicate::ult, c,
                        constIndex(b, s.tileTokens * chunksPerRow()));
    ifThen(b, andI(b, first, inTile),
           [&](ImplicitLocOpBuilder &sb) { store(sb, t, total); });
  }
}

/// This warp's accumulators (publishPartials' layout) into partial_out.
void GemmKernel::storePartialTile(ImplicitLocOpBuilder &b, Value tileStart,
                                  Value count, ArrayRef<Value> acc) {
  Value g = divUI(b, lane, constIndex(b, 4));
  Value q = remUI(b, lane, constIndex(b, 4));
  Value row0 =
      addI(b, addI(b, mulI(b, rowTile, s.tileRows), mulI(b, warp, 16)), g);
  for (int64_t n = 0; n < s.tileTokens / 8; ++n)
    for (int64_t e = 0; e < 4; ++e) {
      Value t = addI(b, mulI(b, q, 2), 8 * n + (e & 1));
      ifThen(b, cmpI(b, CmpIPredicate::ult, t, count),
             [&](ImplicitLocOpBuilder &sb) {
               Value slotRow =
                   addI(sb, mulI(sb, addI(sb, tileStart, t), s.kSplit), rank);
               Value at = addI(sb, mulI(sb, slotRow, p.rows),
                               addI(sb, row0, 8 * (e >> 1)));
               storeScalar(sb, acc[4 * n + e], partials, at);
             });
    }
}

/// Token `t`'s (of the tile) sum of h^2 over this CTA's k range, `total`,
/// into partial_stats, where the token is in the batch.
void GemmKernel::storePartialSquares(ImplicitLocOpBuilder &b, Value tileStart,
                                     Value count, Value t, Value total) {
  ifThen(
      b, cmpI(b, CmpIPredicate::ult, t, count), [&](ImplicitLocOpBuilder &sb) {
        Value token = addI(sb, tileStart, t);
        Value at = addI(
            sb,
            mulI(sb, addI(sb, mulI(sb, token, s.rowTiles), rowTile), s.kSplit),
            rank);
        storeScalar(sb, total, stats, at);
      });
}

/// Thread 0 counts this CTA's arrival at (token tile, row tile); the CTA
/// that arrives last resets the counter and sets `lastFlag`.
void GemmKernel::emitArrival(ImplicitLocOpBuilder &b, Value tileStart) {
  countArrival(
      b, tid, counters,
      [&](ImplicitLocOpBuilder &tb) {
        Value tokenTile = divUI(tb, tileStart, constIndex(tb, s.tileTokens));
        return addI(tb, mulI(tb, tokenTile, s.rowTiles), rowTile);
      },
      constI32(b, s.kSplit), lastFlag);
  barrier(b);
}

/// Output row pair `pair` (of the kernel) of token `token`: the kSplit
/// partials of its two rows summed in rank order, scaled by the token's
/// RMSNorm inverse (its kSplit sums of squares summed in rank order), and
/// the common pair epilogue. Both combines run this, so that they round
/// alike.
void GemmKernel::finishPair(ImplicitLocOpBuilder &b, Value token, Value pair,
                            PartialLoader partial, SquaresLoader squares) {
  PairRows rows = getPairRows(b, p, pair);
  auto [rowA, rowB] = partialRows(b, pair, rows);
  Value sumA, sumB, sumSquares;
  for (int64_t r = 0; r < s.kSplit; ++r) {
    Value a = partial(b, r, rowA);
    Value c = partial(b, r, rowB);
    sumA = sumA ? addF(b, sumA, a) : a;
    sumB = sumB ? addF(b, sumB, c) : c;
    if (!rms)
      continue;
    Value sq = squares(b, r);
    sumSquares = sumSquares ? addF(b, sumSquares, sq) : sq;
  }
  if (rms) {
    Value inv = getRMSInverse(b, p.norm, sumSquares);
    sumA = mulF(b, sumA, inv);
    sumB = mulF(b, sumB, inv);
  }
  emitPairEpilogue(b, p, rows, loadTokenInputs(b, p, token), sumA, sumB);
}

/// The last CTA of a (token tile, row tile): finishPair for each of the
/// tile's output row pairs and tokens, from the workspaces.
void GemmKernel::emitReduction(ImplicitLocOpBuilder &b, Value tileStart,
                               Value count) {
  const int64_t tilePairs = s.tileRows / 2;
  Value work = mulI(b, count, tilePairs);
  forLoop(b, tid, work, constIndex(b, s.blockSize()),
          [&](ImplicitLocOpBuilder &lb, Value idx) {
            Value token =
                addI(lb, tileStart, divUI(lb, idx, constIndex(lb, tilePairs)));
            Value pair = addI(lb, mulI(lb, rowTile, tilePairs),
                              remUI(lb, idx, constIndex(lb, tilePairs)));
            auto partial = [&](ImplicitLocOpBuilder &rb, int64_t r, Value row) {
              Value base =
                  mulI(rb, addI(rb, mulI(rb, token, s.kSplit), r), p.rows);
              return loadScalar(rb, partials, addI(rb, base, row));
            };
            auto squares = [&](ImplicitLocOpBuilder &rb, int64_t r) {
              Value at =
                  addI(rb,
                       mulI(rb, addI(rb, mulI(rb, token, s.rowTiles), rowTile),
                            s.kSplit),
                       r);
              return loadScalar(rb, stats, at);
            };
            finishPair(lb, token, pair, partial, squares);
          });
}

/// One token tile: the pipelined weight pass, the partials, the arrival and
/// (last CTA) the reduction and epilogue.
void GemmKernel::emitTokenTile(ImplicitLocOpBuilder &b, Value tileStart,
                               Value count) {
  Value lastToken = subI(b, addI(b, tileStart, count), constIndex(b, 1));
  // Stages 0 .. stages - 2 in flight before the loop (empty groups past the
  // last step keep the group count of the waits right); with tmaWeights the
  // first tile's weights are on their way since emitPrologue.
  Value firstTile =
      s.tmaWeights ? cmpI(b, CmpIPredicate::eq, tileStart, constIndex(b, 0))
                   : Value();
  for (int64_t i = 0; i + 1 < s.stages; ++i) {
    if (i < steps())
      issueStage(b, tileStart, lastToken, constIndex(b, i), firstTile);
    else
      commitAsyncCopies(b);
  }
  const int64_t numAcc = 4 * s.tileTokens / 8;
  const int64_t numSums = rms ? foldIters() : 0;
  SmallVector<Value> init(numAcc, constF32(b, 0.0));
  init.append(numSums, constF32(b, 0.0));
  SmallVector<Value> results = forLoopWithValues(
      b, constIndex(b, 0), constIndex(b, steps()), constIndex(b, 1), init,
      [&](ImplicitLocOpBuilder &lb, Value step,
          ValueRange args) -> SmallVector<Value> {
        // Step `step` has landed (at most stages - 2 later groups pending)
        // and every warp is done with the stage the next copies overwrite.
        waitAsyncCopies(lb, s.stages - 2);
        // The wgmmas read the token rows through the async proxy.
        if (s.wgmma)
          fenceSharedForBulkCopies(lb);
        if (s.tmaWeights)
          waitBarrierPhase(
              lb,
              stageBarrier(lb, fullBarriers,
                           remUI(lb, step, constIndex(lb, s.stages))),
              stageParity(lb, tileStart, step));
        barrier(lb);
        Value next = addI(lb, step, s.stages - 1);
        ifThenElse(
            lb, cmpI(lb, CmpIPredicate::ult, next, constIndex(lb, steps())),
            [&](ImplicitLocOpBuilder &ib) {
              issueStage(ib, tileStart, lastToken, next);
            },
            [&](ImplicitLocOpBuilder &ib) { commitAsyncCopies(ib); });
        Value slot = remUI(lb, step, constIndex(lb, s.stages));
        SmallVector<Value> acc(args.take_front(numAcc));
        SmallVector<Value> sums(args.drop_front(numAcc));
        if (rms)
          sums = foldActivations(lb, slot, step, tileStart, count, sums);
        multiplyStage(lb, slot, acc);
        llvm::append_range(acc, sums);
        return acc;
      });
  waitAsyncCopies(b, 0);
  ArrayRef<Value> all(results);
  auto totals = [&](ImplicitLocOpBuilder &sb, auto store) {
    reduceSquares(sb, all.drop_front(numAcc), store);
  };
  combineSplits(b, tileStart, count, {all.take_front(numAcc), Value(), totals});
}

/// After the partials are published: the arrival and, in the CTA that
/// arrives last, the reduction and the epilogue.
void GemmKernel::reduceTile(ImplicitLocOpBuilder &b, Value tileStart,
                            Value count) {
  emitArrival(b, tileStart);
  Value flag = loadScalar(b, lastFlag, constIndex(b, 0));
  ifThen(b, cmpI(b, CmpIPredicate::ne, flag, constI32(b, 0)),
         [&](ImplicitLocOpBuilder &lb) {
           // Acquire: the other CTAs' partials are read after the counter.
           fenceGPU(lb);
           emitReduction(lb, tileStart, count);
         });
}

//===----------------------------------------------------------------------===//
// Split-K through a cluster (ProjectionGemmSchedule::clusterKSplit)
//===----------------------------------------------------------------------===//

/// After the k loop of emitTokenTile (accumulators `acc`, this thread's
/// sums of h^2 `sums`): with clusterKSplit and a launch that made the row
/// tile's kSplit CTAs one cluster, the combine through the cluster; else
/// (and always without clusterKSplit) through the workspaces.
void GemmKernel::combineSplits(ImplicitLocOpBuilder &b, Value tileStart,
                               Value count, const Partials &partials) {
  auto workspaces = [&](ImplicitLocOpBuilder &wb) {
    publishPartials(wb, tileStart, count, partials);
    reduceTile(wb, tileStart, count);
  };
  if (!s.clusterKSplit)
    return workspaces(b);
  // One grid dimension and kSplit | grid x: the cluster is the kSplit
  // consecutive CTAs of this row tile, and its rank is `rank`.
  Value clustered = cmpI(b, CmpIPredicate::eq, getClusterCtas(b),
                         constI32(b, static_cast<int32_t>(s.kSplit)));
  ifThenElse(
      b, clustered,
      [&](ImplicitLocOpBuilder &cb) {
        exchangeInCluster(cb, partials);
        reduceInCluster(cb, tileStart, count);
      },
      workspaces);
}

/// The exchange: this CTA's first stage slot (`slotsAt`) as a shared-space
/// pointer, f32 [tileTokens][clusterExchangePitch] partials, then the
/// tileTokens sums of squares.
Value GemmKernel::exchangePointer(ImplicitLocOpBuilder &b) {
  return offsetPointer(b, smemPtr, mulI(b, slotsAt, getTypeBytes(p.act)));
}

/// Writes this CTA's partial tile (publishPartials' accumulator layout) and
/// per-token sums of squares into its exchange, over the stage ring: the
/// barrier first (every copy has landed, every warp is past its last
/// stage; with TMA the proxy fence orders the async proxy's use of the
/// ring before these stores), then, with TMA, a second proxy fence that
/// orders these stores before the next tile's copies into the ring, and
/// the cluster barrier that publishes the exchange to the cluster
/// (arrive.release, wait.acquire).
void GemmKernel::exchangeInCluster(ImplicitLocOpBuilder &b,
                                   const Partials &partials) {
  const int64_t pitch = contract::clusterExchangePitch(s.tileRows);
  if (s.tmaWeights)
    fenceSharedForBulkCopies(b);
  barrier(b);
  Value exchange = exchangePointer(b);
  Type f32 = b.getF32Type();
  auto store = [&](ImplicitLocOpBuilder &sb, Value v, Value at) {
    LLVM::StoreOp::create(sb, v, offsetPointer(sb, exchange, at, f32), 4);
  };
  forEachAccumulatorWarp(b, partials, [&](ImplicitLocOpBuilder &ab) {
    Value g = divUI(ab, lane, constIndex(ab, 4));
    Value q = remUI(ab, lane, constIndex(ab, 4));
    Value row0 = addI(ab, mulI(ab, warp, 16), g);
    for (int64_t n = 0; n < s.tileTokens / 8; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value t = addI(ab, mulI(ab, q, 2), 8 * n + (e & 1));
        store(ab, partials.acc[4 * n + e],
              addI(ab, mulI(ab, t, pitch), addI(ab, row0, 8 * (e >> 1))));
      }
  });
  partials.totals(b, [&](ImplicitLocOpBuilder &sb, Value t, Value total) {
    store(sb, total, addI(sb, t, s.tileTokens * pitch));
  });
  // These generic-proxy stores are in slot 0, which the next token tile's
  // TMA copies (async proxy) overwrite: each writing thread fences them for
  // the async proxy before the cluster barriers that order them before the
  // copies (thread 0's fence in issueWeightBoxes orders only its own).
  if (s.tmaWeights)
    fenceSharedForBulkCopies(b);
  arriveCluster(b);
  waitCluster(b);
}

/// CTA `rank` of the cluster: finishPair for the tile's row pairs
/// [rank * share, +share) (share = tileRows / 2 / kSplit) and every token,
/// the partials and sums of squares read from the kSplit CTAs' exchanges
/// (mapa, ld.shared::cluster); then the cluster barrier after which the
/// rings may be reused (the next token tile) or the CTAs exit.
void GemmKernel::reduceInCluster(ImplicitLocOpBuilder &b, Value tileStart,
                                 Value count) {
  const int64_t pitch = contract::clusterExchangePitch(s.tileRows);
  const int64_t tilePairs = s.tileRows / 2, share = tilePairs / s.kSplit;
  Value exchange = exchangePointer(b);
  Type f32 = b.getF32Type();
  Value n0 = mulI(b, rowTile, s.tileRows);
  Value work = mulI(b, count, share);
  forLoop(b, tid, work, constIndex(b, s.blockSize()),
          [&](ImplicitLocOpBuilder &lb, Value idx) {
            Value t = divUI(lb, idx, constIndex(lb, share));
            Value token = addI(lb, tileStart, t);
            Value pair = addI(lb, mulI(lb, rowTile, tilePairs),
                              addI(lb, mulI(lb, rank, share),
                                   remUI(lb, idx, constIndex(lb, share))));
            // Each load maps its own address (loadFromCluster: no mapped
            // address is hoisted out of the loop or live across the k loop).
            auto load = [&](ImplicitLocOpBuilder &rb, int64_t r, Value at) {
              return loadFromCluster(rb, offsetPointer(rb, exchange, at, f32),
                                     static_cast<int32_t>(r));
            };
            auto partial = [&](ImplicitLocOpBuilder &rb, int64_t r, Value row) {
              return load(rb, r,
                          addI(rb, mulI(rb, t, pitch), subI(rb, row, n0)));
            };
            auto squares = [&](ImplicitLocOpBuilder &rb, int64_t r) {
              return load(rb, r, addI(rb, t, s.tileTokens * pitch));
            };
            finishPair(lb, token, pair, partial, squares);
          });
  arriveCluster(b);
  waitCluster(b);
}

//===----------------------------------------------------------------------===//
// Warp-specialised (docs/gemm-warp-specialized-plan.md)
//===----------------------------------------------------------------------===//

/// The parity (i32) of ((`step` / stages) + `offset`) mod 2: with offset 0
/// the phase of the slot's barriers that global step `step` waits for (the
/// ring's phases run on across token tiles), with 1 that of the slot's
/// previous use.
Value GemmKernel::ringParity(ImplicitLocOpBuilder &b, Value step,
                             int64_t offset) {
  Value phase = addI(b, divUI(b, step, constIndex(b, s.stages)), offset);
  return arith::IndexCastOp::create(b, b.getI32Type(),
                                    remUI(b, phase, constIndex(b, 2)));
}

/// One token tile, warp-specialised: the consumer warps, the producer
/// warp's lane 0 and the fold warps each run their loop over the CTA's
/// steps (global steps `first` + step, `first` = the earlier tiles' steps),
/// synchronised by the stages' mbarriers only; then, after a CTA barrier
/// (the fold warps' sums are in foldSums, every slot is consumed), the
/// consumers' accumulators and the fold warps' sums are combined as in
/// emitTokenTile (combineSplits: through the cluster or the workspaces).
void GemmKernel::emitWarpSpecializedTile(ImplicitLocOpBuilder &b,
                                         Value tileStart, Value count) {
  Value first =
      mulI(b, divUI(b, tileStart, constIndex(b, s.tileTokens)), steps());
  Value producer = constIndex(b, s.warps());
  Value consumer = cmpI(b, CmpIPredicate::ult, warp, producer);
  SmallVector<Type> accTypes(4 * s.tileTokens / 8, b.getF32Type());
  SmallVector<Value> acc = ifThenElseValues(
      b, accTypes, consumer,
      [&](ImplicitLocOpBuilder &cb) { return consumeStages(cb, first); },
      [&](ImplicitLocOpBuilder &ob) {
        ifThenElse(
            ob, cmpI(ob, CmpIPredicate::eq, warp, producer),
            [&](ImplicitLocOpBuilder &pb) {
              ifThen(pb, cmpI(pb, CmpIPredicate::eq, lane, constIndex(pb, 0)),
                     [&](ImplicitLocOpBuilder &lb) {
                       produceStages(lb, tileStart, first);
                     });
            },
            [&](ImplicitLocOpBuilder &fb) {
              foldStages(fb, tileStart, count, first);
            });
        return SmallVector<Value>(accTypes.size(), constF32(ob, 0.0));
      });
  barrier(b);
  // The fold warps' sums of each token, added in fold-warp order.
  auto totals = [&](ImplicitLocOpBuilder &tb, auto store) {
    ifThen(tb, cmpI(tb, CmpIPredicate::ult, tid, constIndex(tb, s.tileTokens)),
           [&](ImplicitLocOpBuilder &sb) {
             Value total;
             for (int64_t f = 0; f < ProjectionGemmSchedule::kFoldWarps; ++f) {
               Value v =
                   loadScalar(sb, foldSums, addI(sb, tid, f * s.tileTokens));
               total = total ? addF(sb, total, v) : v;
             }
             store(sb, tid, total);
           });
  };
  combineSplits(b, tileStart, count, {acc, consumer, totals});
}

/// The producer warp's lane 0, for each step: once the consumers released
/// the slot's previous step (`empty`), on `tokens` the TMA boxes of the
/// tile's tileTokens x rows from row tileStart (kTokenBoxRows rows each;
/// the same of the residual rows) and the norm weight's stageK elements by
/// a bulk copy, then the weight boxes
/// on `full` (global steps below `stages` emitPrologue issued: the schedule
/// keeps stages <= steps, so those are the first tile's). The token rows
/// go first: the fold warp's work on them overlaps the weights' flight.
/// Rows past the batch are read (the maps cover the buffers' capacity rows,
/// TMA fills rows past them with zeros) and reach only tokens whose results
/// are never stored.
void GemmKernel::produceStages(ImplicitLocOpBuilder &b, Value tileStart,
                               Value first) {
  const int64_t elemBytes = getTypeBytes(p.act);
  const int64_t tokenBytes =
      s.tileTokens * s.pitchBytes * (residual ? 2 : 1) + s.stageK * elemBytes;
  Value n0 = mulI(b, rowTile, s.tileRows);
  forLoop(
      b, constIndex(b, 0), constIndex(b, steps()), constIndex(b, 1),
      [&](ImplicitLocOpBuilder &lb, Value step) {
        Value g = addI(lb, first, step);
        Value slot = remUI(lb, g, constIndex(lb, s.stages));
        Value k = addI(lb, kBegin, mulI(lb, step, s.stageK));
        Value reused =
            cmpI(lb, CmpIPredicate::uge, g, constIndex(lb, s.stages));
        ifThen(lb, reused, [&](ImplicitLocOpBuilder &wb) {
          waitBarrierPhase(wb, stageBarrier(wb, emptyBarriers, slot),
                           ringParity(wb, g, 1));
        });
        Value tokens = stageBarrier(lb, tokenBarriers, slot);
        arriveExpectingBytes(lb, tokens, tokenBytes);
        auto rowAt = [&](int64_t row) {
          Value zero = constIndex(lb, 0);
          return offsetPointer(
              lb, smemPtr,
              mulI(lb, smemAt(lb, slot, row, zero, zero), elemBytes));
        };
        for (int64_t r = 0; r < s.tileTokens; r += kTokenBoxRows) {
          Value row = addI(lb, tileStart, r);
          copyTensorBox(lb, rowAt(tokenRow() + r), inputMap, {k, row}, tokens);
          if (residual)
            copyTensorBox(lb, rowAt(residualRow() + r), residualMap, {k, row},
                          tokens);
        }
        copyBulk(lb, rowAt(normWeightRow()),
                 offsetPointer(lb, normWeightPtr, mulI(lb, k, elemBytes)),
                 s.stageK * elemBytes, tokens);
        ifThen(lb, reused, [&](ImplicitLocOpBuilder &wb) {
          issueWeightBoxes(wb, slot, k, n0);
        });
      });
}

/// Fold warp f (of kFoldWarps) takes the global steps f, f + kFoldWarps,
/// ..., so that each owns whole slots (stages % kFoldWarps == 0: a slot's
/// `tokens` phases are then waited for in order by one warp) and the fold
/// warps' per-stage latencies overlap (bench/diagnostics/
/// gemm_warp_specialized.cu: one fold warp for every stage was 1.3x
/// slower). For each of its steps: once the slot's token rows landed,
/// h = round(x + residual) into the slot's h rows (128-byte swizzled: the
/// wgmma's B), the async-proxy fence (the wgmmas read h) and the warp's
/// arrival on `full`; then residual_out (row tile step % rowTiles writes
/// it) and the sums of h^2 of every token. Only the last kDeferredChunks
/// chunks of each lane wait for after the arrival (a 16-token tile: all of
/// them); the earlier ones are finished before it, so that larger tiles do
/// not hold every chunk in registers (64 tokens: 16 chunks, 64 registers).
/// At the end its per-token sums go to foldSums.
void GemmKernel::foldStages(ImplicitLocOpBuilder &b, Value tileStart,
                            Value count, Value first) {
  constexpr int64_t kFold = ProjectionGemmSchedule::kFoldWarps;
  constexpr int64_t kDeferredChunks = 4;
  const int64_t iters = s.tileTokens * chunksPerRow() / 32, H = p.hidden;
  Value f = subI(b, warp, constIndex(b, s.warps() + 1));
  Value cpr = constIndex(b, chunksPerRow());
  SmallVector<Value> init(iters, constF32(b, 0.0));
  SmallVector<Value> sums = forLoopWithValues(
      b, constIndex(b, 0), constIndex(b, steps()), constIndex(b, 1), init,
      [&](ImplicitLocOpBuilder &lb, Value step,
          ValueRange args) -> SmallVector<Value> {
        Value g = addI(lb, first, step);
        Value mine =
            cmpI(lb, CmpIPredicate::eq, remUI(lb, g, constIndex(lb, kFold)), f);
        auto fold = [&](ImplicitLocOpBuilder &fb) -> SmallVector<Value> {
          Value slot = remUI(fb, g, constIndex(fb, s.stages));
          waitBarrierPhase(fb, stageBarrier(fb, tokenBarriers, slot),
                           ringParity(fb, g, 0));
          Value k = addI(fb, kBegin, mulI(fb, step, s.stageK));
          auto chunkAt = [&](int64_t it) {
            Value c = addI(fb, lane, 32 * it);
            return std::make_pair(divUI(fb, c, cpr),
                                  mulI(fb, remUI(fb, c, cpr), kVectorWidth));
          };
          // Off the consumers' path where it can be: residual_out (the row
          // tiles take the steps in turn, so that no CTA stores every
          // stage's rows) and the sums of squares of chunk `it`.
          Value writer =
              cmpI(fb, CmpIPredicate::eq,
                   remUI(fb, step, constIndex(fb, s.rowTiles)), rowTile);
          SmallVector<Value> out(args);
          auto finish = [&](int64_t it, Value h) {
            auto [t, col] = chunkAt(it);
            if (Value dst = p.norm.residualOut)
              ifThen(fb,
                     andI(fb, writer, cmpI(fb, CmpIPredicate::ult, t, count)),
                     [&](ImplicitLocOpBuilder &wb) {
                       Value at = addI(wb, mulI(wb, addI(wb, tileStart, t), H),
                                       addI(wb, k, col));
                       storeVector(wb, h, dst, at);
                     });
            Value h32 = extToF32(fb, h);
            Value squares = vector::ReductionOp::create(
                fb, vector::CombiningKind::ADD, mulF(fb, h32, h32));
            out[it] = addF(fb, args[it], squares);
          };
          const int64_t deferFrom =
              std::max<int64_t>(0, iters - kDeferredChunks);
          SmallVector<Value> deferred;
          for (int64_t it = 0; it < iters; ++it) {
            auto [t, col] = chunkAt(it);
            Value h = loadVector(fb, smem, smemAt(fb, slot, tokenRow(), t, col),
                                 kVectorWidth);
            if (residual) {
              Value r =
                  loadVector(fb, smem, smemAt(fb, slot, residualRow(), t, col),
                             kVectorWidth);
              h = truncFromF32(fb, addF(fb, extToF32(fb, h), extToF32(fb, r)),
                               p.act);
            }
            storeVector(fb, h, smem, smemAt(fb, slot, hRow(), t, col));
            if (it < deferFrom)
              finish(it, h);
            else
              deferred.push_back(h);
          }
          fenceSharedForBulkCopies(fb);
          NVVM::SyncWarpOp::create(fb, constI32(fb, -1));
          arriveOnBarrier(fb, stageBarrier(fb, fullBarriers, slot),
                          cmpI(fb, CmpIPredicate::eq, lane, constIndex(fb, 0)));
          for (auto [i, h] : llvm::enumerate(deferred))
            finish(deferFrom + static_cast<int64_t>(i), h);
          return out;
        };
        return ifThenElseValues(
            lb, ValueRange(args).getTypes(), mine, fold,
            [&](ImplicitLocOpBuilder &) { return SmallVector<Value>(args); });
      });
  // A token's chunksPerRow() chunks are consecutive lanes.
  for (int64_t it = 0; it < iters; ++it) {
    Value total = warpReduce(b, sums[it], ReduceKind::Sum, chunksPerRow());
    Value c = addI(b, lane, 32 * it);
    ifThen(b, cmpI(b, CmpIPredicate::eq, remUI(b, c, cpr), constIndex(b, 0)),
           [&](ImplicitLocOpBuilder &sb) {
             Value at = addI(sb, mulI(sb, f, s.tileTokens), divUI(sb, c, cpr));
             storeScalar(sb, total, foldSums, at);
           });
  }
}

/// The consumer warps, for each step: once the slot is full, the stage by
/// warpgroup MMA (the weight fragments scaled by the norm weight, times h;
/// waited for), then each warp's arrival on `empty`. Returns the
/// accumulators.
/// (Leaving a group in flight and releasing the slot a step later needs
/// the A fragments in other registers each step: with one loop body that
/// reused them, memcheck's slower timing showed wrong products; unrolled
/// by two it was correct but not faster on the H200, performance.md entry
/// 45.)
SmallVector<Value> GemmKernel::consumeStages(ImplicitLocOpBuilder &b,
                                             Value first) {
  SmallVector<Value> init(4 * s.tileTokens / 8, constF32(b, 0.0));
  return forLoopWithValues(
      b, constIndex(b, 0), constIndex(b, steps()), constIndex(b, 1), init,
      [&](ImplicitLocOpBuilder &lb, Value step,
          ValueRange args) -> SmallVector<Value> {
        Value g = addI(lb, first, step);
        Value slot = remUI(lb, g, constIndex(lb, s.stages));
        waitBarrierPhase(lb, stageBarrier(lb, fullBarriers, slot),
                         ringParity(lb, g, 0));
        SmallVector<Value> a(args);
        multiplyStageByWarpgroup(lb, slot, a);
        // Every lane's ldmatrix of the slot before lane 0's arrival.
        NVVM::SyncWarpOp::create(lb, constI32(lb, -1));
        arriveOnBarrier(lb, stageBarrier(lb, emptyBarriers, slot),
                        cmpI(lb, CmpIPredicate::eq, lane, constIndex(lb, 0)));
        return a;
      });
}

void mlir::fusion::appendProjectionGemmWorkspaces(
    SmallVector<KernelParam> &params, ArrayRef<ProjectionGemmSchedule> variants,
    int64_t rows, bool rmsNorm, MLIRContext *context) {
  // The variants share the workspaces: sized for the largest k split (a
  // warp-specialised variant splits less than the others).
  ProjectionGemmSchedule s = variants.front();
  for (const ProjectionGemmSchedule &v : variants)
    s.kSplit = std::max(s.kSplit, v.kSplit);
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32);
  const std::string batch(contract::dim::kBatch);
  namespace role = contract::role;
  SmallVector<KernelParam> workspaces{
      {KernelParam::Kind::Workspace,
       std::string(role::kPartialOut),
       f32,
       {batch, std::to_string(s.kSplit), std::to_string(rows)}},
      {KernelParam::Kind::Workspace,
       std::string(role::kSplitCounters),
       i32,
       {batch, std::to_string(s.rowTiles)},
       /*zeroInitialized=*/true},
  };
  if (rmsNorm)
    workspaces.insert(workspaces.begin() + 1,
                      {KernelParam::Kind::Workspace,
                       std::string(role::kPartialStats),
                       f32,
                       {batch, std::to_string(s.rowTiles * s.kSplit)}});
  insertBeforeScalars(params, workspaces);
}

void mlir::fusion::appendProjectionWeightMap(SmallVector<KernelParam> &params,
                                             const ProjectionGemmSchedule &s,
                                             const ProjectionPlan &p) {
  // Input parameters are the kernel's operands in order. (A copy: the op
  // accessors are not const.)
  FrontHalf ops = p.ops;
  auto operand = dyn_cast<BlockArgument>(ops.qkv ? ops.qkv.getWeight()
                                                 : ops.linear.getWeight());
  if (!operand)
    return;
  const int64_t index = operand.getArgNumber();
  const KernelParam &weight = params[index];
  assert(weight.kind == KernelParam::Kind::Input &&
         (weight.role == contract::role::kWeight ||
          weight.role == contract::role::kQKVWeight) &&
         "the projection's weight is an input parameter");
  (void)weight;
  insertTensorMap(params, index, contract::role::kWeightMap,
                  p.gateUp ? s.tileRows / 2 : s.tileRows, s.stageK);
}

void mlir::fusion::appendProjectionActivationMaps(
    SmallVector<KernelParam> &params, const ProjectionGemmSchedule &s,
    const ProjectionPlan &p) {
  RMSNormOp rms = p.ops.rms;
  assert(rms && "warp-specialised variants fold an RMSNorm");
  auto insert = [&](Value operand, StringRef role) {
    insertTensorMap(params, cast<BlockArgument>(operand).getArgNumber(), role,
                    kTokenBoxRows, s.stageK);
  };
  insert(rms.getInput(), contract::role::kInputMap);
  if (Value residual = rms.getResidual())
    insert(residual, contract::role::kResidualMap);
}

/// The #fusion.projection_gemm_schedule of `s`.
static FailureOr<ProjectionGemmScheduleAttr>
getScheduleAttr(KernelOp kernel, const ProjectionGemmSchedule &s) {
  return getCheckedSchedule<ProjectionGemmScheduleAttr>(
      kernel, s.blockSize(), s.warps(), s.grid(), s.tileRows, s.tileTokens,
      s.kSplit, s.stageK, s.stages, s.minCtasPerSM, s.wgmma, s.warpSpecialized,
      s.clusterKSplit);
}

LogicalResult mlir::fusion::emitProjectionGemmVariant(
    KernelOp kernel, gpu::GPUModuleOp module, ProjectionPlan p,
    const ProjectionGemmSchedule &s, KernelLaunch &launch,
    const TargetInfo &target) {
  // chooseClusterKSplit sets clusterKSplit only where the exchange fits the
  // stage ring, so no schedule it makes reaches this; a diagnostic rather
  // than an assert, which Release builds drop.
  if (s.clusterKSplit && s.clusterExchangeBytes() > s.stages * s.slotBytes)
    return kernel.emitOpError("the GEMM-shaped projection's cluster exchange (")
           << s.clusterExchangeBytes()
           << " bytes) does not fit its stage ring (" << s.stages * s.slotBytes
           << " bytes)";
  KernelVariant variant;
  variant.minBatch = s.minBatch;
  variant.entry = launch.entry + "_gemm" + std::to_string(s.tileTokens);
  variant.grid = {std::to_string(s.grid()), "1", "1"};
  variant.blockSize = s.blockSize();
  variant.dynamicSharedBytes = s.dynamicSharedBytes;
  ImplicitLocOpBuilder b(kernel.getLoc(), kernel.getContext());
  FailureOr<gpu::GPUFuncOp> func =
      createProjectionFunc(b, p, kernel, module, launch, variant.entry,
                           s.blockSize(), s.tileTokens, target);
  if (failed(func))
    return failure();
  auto arg = [&](StringRef role) {
    return func->getArgument(findParam(launch.params, role));
  };
  GemmKernel k{p, s};
  k.rms = p.norm.kind == NormSpec::Kind::RMS;
  if (p.norm.table && !k.rms)
    return kernel.emitOpError("the GEMM-shaped projection gathers embedding "
                              "rows only for an RMSNorm");
  k.residual = static_cast<bool>(p.norm.residual);
  const bool beforeWait = target.hasGridDependencyControl();
  auto prologue = [&](ImplicitLocOpBuilder &pb) {
    k.emitPrologue(pb, *func, module,
                   s.tmaWeights ? arg(contract::role::kWeightMap) : Value(),
                   arg(contract::dim::kBatch), beforeWait);
  };
  if (beforeWait)
    emitBeforeGridDependencyWait(b, prologue);
  else
    prologue(b);
  k.smem = getDynamicSharedBuffer(b, module, p.act,
                                  s.dynamicSharedBytes / getTypeBytes(p.act));
  k.lastFlag = addWorkgroupBuffer(*func, b.getI32Type(), 1);
  if (s.warpSpecialized)
    k.foldSums =
        addWorkgroupBuffer(*func, b.getF32Type(),
                           ProjectionGemmSchedule::kFoldWarps * s.tileTokens);
  (*func)->setAttr("nvvm.minctasm", b.getI32IntegerAttr(s.minCtasPerSM));
  k.weightPtr = getGlobalPointer(b, p.weight);
  if (p.norm.input || p.norm.table)
    k.inputPtr =
        getGlobalPointer(b, p.norm.table ? p.norm.table : p.norm.input);
  if (k.residual)
    k.residualPtr = getGlobalPointer(b, p.norm.residual);
  if (k.rms)
    k.normWeightPtr = getGlobalPointer(b, p.norm.weight);
  if (s.warpSpecialized) {
    k.inputMap = getGenericPointer(b, arg(contract::role::kInputMap));
    if (k.residual)
      k.residualMap = getGenericPointer(b, arg(contract::role::kResidualMap));
  }
  k.partials = arg(contract::role::kPartialOut);
  if (k.rms)
    k.stats = arg(contract::role::kPartialStats);
  k.counters = arg(contract::role::kSplitCounters);
  k.emitBody(b);

  FailureOr<ProjectionGemmScheduleAttr> schedule = getScheduleAttr(kernel, s);
  if (failed(schedule))
    return failure();
  variant.schedule = *schedule;
  launch.variants.push_back(std::move(variant));
  return success();
}
