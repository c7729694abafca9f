//===- ProjectionMmaKernel.cpp - the tensor-core projection variant -------===//
//
// With tensor cores (sm_80+) and shapes that allow it
// (chooseProjectionMmaSchedule), a second gpu.func `<entry>_mma` is emitted
// for a projection kernel and recorded as a batch variant (Emitters.h): the
// runtime launches it from batch 2 and the CUDA-core kernel
// (ProjectionKernel.cpp), then with tiles of one token, only at batch 1.
//
// Schedule: for every tile of up to 32 tokens the CTA normalises the tile
// into dynamic shared memory (one warp per token), then every warp takes
// blocks of 16 weight rows (8 pairs, the pairs' first rows as fragment rows
// 0-7 and their second rows as 8-15) and multiplies them with all tokens of
// the tile with mma.m16n8k16, kSplit warps per block splitting k (so that
// enough warps stream weights); the parts' sums meet in shared memory and
// part 0 runs the common pair epilogue (docs/performance.md optimisation log
// entries 8-11 and 13).
//
//===----------------------------------------------------------------------===//

#include "../Fragments/Mma.h"
#include "../KernelEmitter.h"
#include "Projection.h"

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// The variant's body: the plan, its schedule, shared memory (`xs`: the
/// tile, tileTokens rows of rowStride elements; `partials`: the split-k
/// sums) and the values shared by its phases.
struct MmaKernel {
  const ProjectionPlan &p;
  const ProjectionMmaSchedule &s;
  Value xs, partials;
  int64_t nTiles = 0;
  // This lane's mma fragment coordinates (PTX ISA: groupID g and
  // threadID_in_group t4) and k offset, and its warp's place in the CTA.
  Value lane, warp, g, t4, laneK, isCta0;
  Value slot, part, kBegin, isFirstPart;

  void emitBody(ImplicitLocOpBuilder &b);
  void emitTile(ImplicitLocOpBuilder &b, Value tileStart, Value count);
  void emitRowBlock(ImplicitLocOpBuilder &b, Value roundBase,
                    ArrayRef<TokenInputs> inputs, ArrayRef<Value> valid);
  SmallVector<Value> emitDotProducts(ImplicitLocOpBuilder &b, Value wA,
                                     Value wB);
  void multiplyStep(ImplicitLocOpBuilder &ib, Value k, ArrayRef<Value> w,
                    SmallVector<Value> &acc);
  SmallVector<Value> sumSplitK(ImplicitLocOpBuilder &b, SmallVector<Value> acc);
};

} // namespace

void MmaKernel::emitBody(ImplicitLocOpBuilder &b) {
  nTiles = s.tileTokens / 8;
  lane = laneId(b);
  warp = warpId(b);
  g = divUI(b, lane, constIndex(b, 4));
  t4 = remUI(b, lane, constIndex(b, 4));
  laneK = mulI(b, t4, kVectorWidth);
  isCta0 = cmpI(b, CmpIPredicate::eq, blockIdX(b), constIndex(b, 0));
  forEachTokenTile(b, p, s.tileTokens,
                   [&](ImplicitLocOpBuilder &tb, Value tileStart, Value count) {
                     emitTile(tb, tileStart, count);
                   });
}

/// One tile: normalise its tokens, load what the epilogue needs of them,
/// then go round the row blocks.
void MmaKernel::emitTile(ImplicitLocOpBuilder &b, Value tileStart,
                         Value count) {
  // A warp normalises a token of up to 32 * 8 * 16 = 4096 elements with
  // all its loads in flight at once (the variant has no register cap);
  // LayerNorm, with its bias and second pass, spills at 16 (ptxas).
  const int64_t normChunks = p.norm.kind == NormSpec::Kind::Layer ? 8 : 16;
  forLoop(b, warp, count, constIndex(b, s.warps),
          [&](ImplicitLocOpBuilder &nb, Value t) {
            emitNormalizeToken(nb, p.norm, addI(nb, tileStart, t), xs,
                               mulI(nb, t, s.rowStride), isCta0,
                               /*scratch=*/Value(), s.blockSize(),
                               /*warpOnly=*/true, normChunks);
          });
  barrier(b);
  // This lane finishes tokens 8n + 2t + i of the tile (the columns of
  // its accumulator registers); rows beyond `count` are not stored.
  SmallVector<TokenInputs> inputs;
  SmallVector<Value> valid;
  Value last = subI(b, count, constIndex(b, 1));
  for (int64_t n = 0; n < nTiles; ++n)
    for (int64_t i = 0; i < 2; ++i) {
      Value t = addI(b, mulI(b, t4, 2), 8 * n + i);
      valid.push_back(cmpI(b, CmpIPredicate::ult, t, count));
      inputs.push_back(
          loadTokenInputs(b, p, addI(b, tileStart, minUI(b, t, last))));
    }
  // Row blocks of 16 rows go round-robin over the CTAs (block-major,
  // so that every CTA gets some); within a CTA, slots() row blocks
  // are in flight at once, each split over kSplit warps that take
  // consecutive k ranges of kPart elements.
  const int64_t slots = s.slots(), kPart = p.hidden / s.kSplit;
  const int64_t rowBlocks = p.pairs / 8;
  slot = remUI(b, warp, constIndex(b, slots));
  part = divUI(b, warp, constIndex(b, slots));
  kBegin = mulI(b, part, kPart);
  isFirstPart = cmpI(b, CmpIPredicate::eq, part, constIndex(b, 0));
  forLoop(b, blockIdX(b), constIndex(b, rowBlocks), mulI(b, gridDimX(b), slots),
          [&](ImplicitLocOpBuilder &rb, Value roundBase) {
            emitRowBlock(rb, roundBase, inputs, valid);
          });
}

/// The mma of one loop step: J vectors of rows wa/wb (in `w`) with the
/// tile's token rows.
void MmaKernel::multiplyStep(ImplicitLocOpBuilder &ib, Value k,
                             ArrayRef<Value> w, SmallVector<Value> &acc) {
  for (int64_t j = 0; j < s.vectors; ++j) {
    Value wa = w[2 * j], wb = w[2 * j + 1];
    Value e = addI(ib, addI(ib, k, 32 * j), laneK);
    SmallVector<Value> xv;
    for (int64_t n = 0; n < nTiles; ++n) {
      Value tokenRow = addI(ib, g, 8 * n);
      xv.push_back(loadVector(
          ib, xs, addI(ib, mulI(ib, tokenRow, s.rowStride), e), kVectorWidth));
    }
    for (int64_t half = 0; half < 2; ++half) {
      int64_t at = 4 * half;
      SmallVector<Value> aFrag{
          getFragmentPair(ib, wa, at), getFragmentPair(ib, wb, at),
          getFragmentPair(ib, wa, at + 2), getFragmentPair(ib, wb, at + 2)};
      for (int64_t n = 0; n < nTiles; ++n) {
        SmallVector<Value> bFrag{getFragmentPair(ib, xv[n], at),
                                 getFragmentPair(ib, xv[n], at + 2)};
        SmallVector<Value, 4> d = mmaM16N8K16(
            ib, p.act, aFrag, bFrag, ArrayRef<Value>(acc).slice(4 * n, 4));
        std::copy(d.begin(), d.end(), acc.begin() + 4 * n);
      }
    }
  }
}

/// The dot products of rows `wA`, `wB` (element offsets of this lane's
/// first vectors) over this warp's k range. Lane (g, t) reads elements
/// [k + 32j + 8t, +8) of rows g and g + 8 and of token rows g: one 16-byte
/// vector each. The k order inside a step is permuted identically for both
/// operands (mma h of a vector uses its elements 4h..4h+3 as fragment
/// columns 2t, 2t+1, 2t+8, 2t+9), which leaves every dot product unchanged.
SmallVector<Value> MmaKernel::emitDotProducts(ImplicitLocOpBuilder &b, Value wA,
                                              Value wB) {
  const int64_t kPart = p.hidden / s.kSplit, step = 32 * s.vectors;
  return emitPipelinedLoop(
      b, kBegin, addI(b, kBegin, kPart), step,
      [&](ImplicitLocOpBuilder &ib) { return addI(ib, kBegin, kPart - step); },
      4 * nTiles,
      [&](ImplicitLocOpBuilder &ib, Value k) {
        SmallVector<Value> offsets;
        for (int64_t j = 0; j < s.vectors; ++j)
          offsets.push_back(addI(ib, k, 32 * j));
        return loadRowPairVectors(ib, p.weight, wA, wB, offsets);
      },
      [&](ImplicitLocOpBuilder &ib, Value k, ArrayRef<Value> w,
          SmallVector<Value> &acc) { multiplyStep(ib, k, w, acc); });
}

/// Parts 1.. hand their sums to part 0 through shared memory
/// (ProjectionMmaSchedule::partialFloats: register c of lane l at [c][l],
/// conflict-free); returns part 0's totals (the others' own sums).
SmallVector<Value> MmaKernel::sumSplitK(ImplicitLocOpBuilder &b,
                                        SmallVector<Value> acc) {
  const int64_t slots = s.slots();
  auto at = [&](ImplicitLocOpBuilder &ib, Value fromPart, int64_t c) {
    Value owner =
        addI(ib, mulI(ib, subI(ib, fromPart, constIndex(ib, 1)), slots), slot);
    return addI(ib, mulI(ib, owner, 32 * 4 * nTiles), addI(ib, lane, 32 * c));
  };
  ifThen(b, notI1(b, isFirstPart), [&](ImplicitLocOpBuilder &wb) {
    for (int64_t c = 0; c < 4 * nTiles; ++c)
      storeScalar(wb, acc[c], partials, at(wb, part, c));
  });
  barrier(b);
  SmallVector<Type> types(4 * nTiles, b.getF32Type());
  acc = ifThenElseValues(
      b, types, isFirstPart,
      [&](ImplicitLocOpBuilder &ib) {
        SmallVector<Value> sum(acc);
        for (int64_t from = 1; from < s.kSplit; ++from)
          for (int64_t c = 0; c < 4 * nTiles; ++c)
            sum[c] =
                addF(ib, sum[c],
                     loadScalar(ib, partials, at(ib, constIndex(ib, from), c)));
        return sum;
      },
      [&](ImplicitLocOpBuilder &) { return acc; });
  // Read before the next round's partials are written.
  barrier(b);
  return acc;
}

/// One row block of this warp's round: the dot products, the split-k sum,
/// and part 0's epilogue.
void MmaKernel::emitRowBlock(ImplicitLocOpBuilder &b, Value roundBase,
                             ArrayRef<TokenInputs> inputs,
                             ArrayRef<Value> valid) {
  const int64_t rowBlocks = p.pairs / 8, H = p.hidden;
  Value rowBlock = addI(b, roundBase, mulI(b, slot, gridDimX(b)));
  Value active =
      cmpI(b, CmpIPredicate::ult, rowBlock, constIndex(b, rowBlocks));
  // Inactive warps take row block 0's rows, unused.
  rowBlock = select(b, active, rowBlock, constIndex(b, 0));
  PairRows rows = getPairRows(b, p, addI(b, mulI(b, rowBlock, 8), g));
  Value wA = addI(b, mulI(b, rows.rowA, H), laneK);
  Value wB = addI(b, mulI(b, rows.rowB, H), laneK);
  SmallVector<Value> zeros(4 * nTiles, constF32(b, 0.0));
  SmallVector<Type> types(4 * nTiles, b.getF32Type());
  SmallVector<Value> acc = ifThenElseValues(
      b, types, active,
      [&](ImplicitLocOpBuilder &ib) { return emitDotProducts(ib, wA, wB); },
      [&](ImplicitLocOpBuilder &) { return zeros; });
  if (s.kSplit > 1)
    acc = sumSplitK(b, acc);
  // Registers c0, c1: first rows (g) of tokens 2t, 2t + 1; c2, c3: second
  // rows (g + 8). Part 0 finishes the block.
  ifThen(b, andI(b, active, isFirstPart), [&](ImplicitLocOpBuilder &eb) {
    for (int64_t n = 0; n < nTiles; ++n)
      for (int64_t i = 0; i < 2; ++i) {
        Value sumA = acc[4 * n + i];
        Value sumB = acc[4 * n + 2 + i];
        ifThen(eb, valid[2 * n + i], [&](ImplicitLocOpBuilder &tb) {
          emitPairEpilogue(tb, p, rows, inputs[2 * n + i], sumA, sumB);
        });
      }
  });
}

/// The #fusion.projection_mma_schedule of `s` (each warp computes blocks of
/// 16 rows: the mma m-tile).
static FailureOr<ProjectionMmaScheduleAttr>
getScheduleAttr(KernelOp kernel, const ProjectionMmaSchedule &s) {
  return getCheckedSchedule<ProjectionMmaScheduleAttr>(
      kernel, s.blockSize(), s.warps, s.grid, /*rowsPerWarp=*/int64_t(16),
      s.tileTokens, s.vectors, s.kSplit);
}

LogicalResult mlir::fusion::emitProjectionMmaVariant(
    KernelOp kernel, gpu::GPUModuleOp module, ProjectionPlan p,
    const ProjectionMmaSchedule &s, KernelLaunch &launch,
    const TargetInfo &target) {
  KernelVariant variant;
  variant.minBatch = kProjectionMmaMinBatch;
  variant.entry = launch.entry + "_mma";
  variant.grid = {std::to_string(s.grid), "1", "1"};
  variant.blockSize = s.blockSize();
  variant.dynamicSharedBytes = s.dynamicSharedBytes;
  ImplicitLocOpBuilder b(kernel.getLoc(), kernel.getContext());
  FailureOr<gpu::GPUFuncOp> func =
      createProjectionFunc(b, p, kernel, module, launch, variant.entry,
                           s.blockSize(), s.tileTokens, target);
  if (failed(func))
    return failure();
  MmaKernel k{p, s, Value(), Value()};
  k.xs = getDynamicSharedBuffer(b, module, p.act, s.tileTokens * s.rowStride);
  if (s.kSplit > 1)
    k.partials = addWorkgroupBuffer(
        *func, b.getF32Type(), s.partialFloats(s.kSplit, s.tileTokens / 8));
  k.emitBody(b);

  FailureOr<ProjectionMmaScheduleAttr> schedule = getScheduleAttr(kernel, s);
  if (failed(schedule))
    return failure();
  variant.schedule = *schedule;
  launch.variants.push_back(std::move(variant));
  return success();
}
