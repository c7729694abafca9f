//===- AttentionMma.cpp - tensor-core main loop of decode attention -------===//
//
// See AttentionMma.h. Fragment layouts: Fragments/Mma.h (g = lane / 4,
// q = lane % 4). ldmatrix .x4: lanes 8i..8i+7 give the row addresses of
// matrix i; lane l receives elements (l / 4, 2 (l % 4) .. +1) of each.
//
//===----------------------------------------------------------------------===//

#include "AttentionMma.h"

#include "../Fragments/Abi.h"
#include "../Fragments/AsyncCopy.h"
#include "../Fragments/Mma.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// Tokens per tile: the mma's k (for P V) and two n-blocks (for Q K^T).
constexpr int64_t kTile = kAttentionMmaTileTokens;
static_assert(kTile == 16, "the fragments below assume 16-token tiles");

/// The loop of one warp (see the header).
struct MmaLoop {
  const MmaAttentionInputs &in;
  gpu::GPUModuleOp module;
  int64_t d = 0, pitch = 0, chunks = 0;
  Value lane, warp, g, q4, zero2, ring, keys, values, tiles;
  /// With the CTA ring: the element offset of its first stage (the first
  /// 1 KiB boundary of the dynamic shared memory, as the 128-byte swizzle
  /// of the TMA boxes needs) and the caches' tensor maps (generic pointers).
  Value ringAt, keyMap, valueMap;
  SmallVector<SmallVector<Value, 4>> qa; // [D / 16][4]

  MmaLoop(const MmaAttentionInputs &in, gpu::GPUModuleOp module)
      : in(in), module(module), d(in.shape.headDim),
        pitch(d + kAttentionMmaRowPad), chunks(d / 8) {}

  int64_t stateSize() const { return 2 + d / 4; }
  void emit(ImplicitLocOpBuilder &b);

private:
  void emitIds(ImplicitLocOpBuilder &b);
  void loadQueryFragments(ImplicitLocOpBuilder &b);
  Value loadPage(ImplicitLocOpBuilder &b, Value i);
  void issueTile(ImplicitLocOpBuilder &b, Value i, Value slot, Value page);
  SmallVector<Value> emitTile(ImplicitLocOpBuilder &b, Value i,
                              ValueRange state);
  SmallVector<Value> attendTile(ImplicitLocOpBuilder &b, Value slot,
                                Value tileBase, ValueRange state,
                                bool maskValues);
  SmallVector<Value, 4> emitScores(ImplicitLocOpBuilder &b, Value slotBase,
                                   Value tileBase);
  SmallVector<Value> initialState(ImplicitLocOpBuilder &b);
  void writeState(ImplicitLocOpBuilder &b, ValueRange state);
  // The CTA-wide ring (MmaAttentionInputs::ctaRing).
  void emitCtaRing(ImplicitLocOpBuilder &b);
  void produceTiles(ImplicitLocOpBuilder &b, Value full, Value empty);
  void copyTileBoxes(ImplicitLocOpBuilder &b, Value t, Value page, Value full);
  void consumeTiles(ImplicitLocOpBuilder &b, Value full, Value empty);
  Value tableEntryOfTile(ImplicitLocOpBuilder &b, Value t, Value count);
  /// Element offset of stage `slot` (index), K (kv 0) or V (1): this
  /// warp's own stage (rows of `pitch`), or with the CTA ring the CTA's
  /// (swizzled boxes of kTile x kAttentionRingBoxColumns).
  Value stageBase(ImplicitLocOpBuilder &b, Value slot, int64_t kv) {
    if (in.ctaRing)
      return addI(b, ringAt, mulI(b, addI(b, mulI(b, slot, 2), kv), kTile * d));
    Value stage = addI(b, mulI(b, warp, in.stages), slot);
    return mulI(b, addI(b, mulI(b, stage, 2), kv), kTile * pitch);
  }
  /// The element offset of (row, col + offset) of the K or V tile at
  /// `tileBase`, as a function of `offset` (col + offset a multiple of 8:
  /// the first element of a 16-byte chunk). Padded rows: (row, col)'s
  /// offset, computed here, plus `offset`; or the ring's boxes of
  /// kAttentionRingBoxColumns (swizzledElement).
  std::function<Value(ImplicitLocOpBuilder &, int64_t)>
  chunkOffsets(ImplicitLocOpBuilder &b, Value tileBase, Value row, Value col) {
    if (in.ctaRing)
      return [=, this](ImplicitLocOpBuilder &ib, int64_t offset) {
        return swizzledElement(ib, tileBase, row, addI(ib, col, offset));
      };
    Value laneBase = addI(b, tileBase, addI(b, mulI(b, row, pitch), col));
    return [=](ImplicitLocOpBuilder &ib, int64_t offset) {
      return addI(ib, laneBase, offset);
    };
  }
  /// Element offset of (row, col) of the ring's tile at `tileBase`, where
  /// the 128-byte swizzle stores chunk c of row r of a box at chunk
  /// c ^ (r % 8) (CUDA C++ Programming Guide, "TMA swizzle").
  Value swizzledElement(ImplicitLocOpBuilder &b, Value tileBase, Value row,
                        Value col) {
    const int64_t box = kAttentionRingBoxColumns;
    Value half = divUI(b, col, constIndex(b, box));
    Value chunk = divUI(b, remUI(b, col, constIndex(b, box)), constIndex(b, 8));
    chunk = xorI(b, chunk, remUI(b, row, constIndex(b, 8)));
    Value at = addI(b, mulI(b, half, kTile * box), mulI(b, row, box));
    return addI(b, tileBase, addI(b, at, mulI(b, chunk, 8)));
  }
  /// First token of the warp's tile `i` (i32).
  Value tileStart(ImplicitLocOpBuilder &b, Value i) {
    Value t = addI(b, indexToI32(b, warp), mulI(b, i, constI32(b, in.warps)));
    return addI(b, in.start, mulI(b, t, constI32(b, kTile)));
  }
};

void MmaLoop::emitIds(ImplicitLocOpBuilder &b) {
  lane = remUI(b, in.tid, constIndex(b, 32));
  warp = divUI(b, in.tid, constIndex(b, 32));
  g = divUI(b, lane, constIndex(b, 4));
  q4 = remUI(b, lane, constIndex(b, 4));
  auto pairType = VectorType::get({2}, in.elementType);
  zero2 = arith::ConstantOp::create(
      b, pairType,
      DenseElementsAttr::get(pairType, b.getFloatAttr(in.elementType, 0.0)));
  ring = getDynamicSharedPointer(b, module);
  keys = getGlobalPointer(b, in.keyCache);
  values = getGlobalPointer(b, in.valueCache);
  // This warp's tiles: every warps-th of the split's ceil(count / 16).
  Value count = maxSI(b, subI(b, in.end, in.start), constI32(b, 0));
  Value all =
      divUI(b, addI(b, count, constI32(b, kTile - 1)), constI32(b, kTile));
  Value w = indexToI32(b, warp);
  Value mine = divUI(b, addI(b, subI(b, all, w), constI32(b, in.warps - 1)),
                     constI32(b, in.warps));
  tiles = select(b, cmpI(b, CmpIPredicate::slt, w, all), mine, constI32(b, 0));
}

/// Q as the A operand: row g is query head head0 + g (zero for g >= Gc).
void MmaLoop::loadQueryFragments(ImplicitLocOpBuilder &b) {
  Value valid = cmpI(b, CmpIPredicate::ult, g, constIndex(b, in.headsPerCta));
  Value row = addI(b, in.head0, minUI(b, g, constIndex(b, in.headsPerCta - 1)));
  Value base = mulI(b, addI(b, mulI(b, in.seq, in.shape.numHeads), row), d);
  base = addI(b, base, mulI(b, q4, 2));
  for (int64_t kk = 0; kk < d / 16; ++kk) {
    auto pair = [&](int64_t at) {
      Value v = loadVector(b, in.query, addI(b, base, 16 * kk + at), 2);
      return select(b, valid, v, zero2);
    };
    qa.push_back({pair(0), zero2, pair(8), zero2});
  }
}

/// The cache page (i64) of the warp's tile `i` (i32) from the block table;
/// for a tile past the warp's last, the sequence's first page's entry is
/// read instead (in the table; the value is never used).
Value MmaLoop::loadPage(ImplicitLocOpBuilder &b, Value i) {
  Value pageSize = constI32(b, in.shape.pageSize);
  Value inTable = select(b, cmpI(b, CmpIPredicate::slt, i, tiles),
                         divUI(b, tileStart(b, i), pageSize), constI32(b, 0));
  Value tableIndex = addI(b, mulI(b, in.seq, i32ToIndex(b, in.maxPages)),
                          i32ToIndex(b, inTable));
  return arith::ExtSIOp::create(b, b.getI64Type(),
                                loadScalar(b, in.blockTable, tableIndex));
}

/// Issues the copies of the warp's tile `i` (i32), in cache page `page`
/// (loadPage), into stage `slot` and commits them as one group. Rows at or
/// past `end` are zero-filled (their source is the tile's first row, which
/// is valid).
void MmaLoop::issueTile(ImplicitLocOpBuilder &b, Value i, Value slot,
                        Value page) {
  const AttentionShape &s = in.shape;
  Value tokenBase = tileStart(b, i);
  Value pageSize = constI32(b, s.pageSize);
  Value slotInPage =
      arith::ExtUIOp::create(b, b.getI64Type(), remUI(b, tokenBase, pageSize));
  Value entry = addI(b, mulI(b, page, constI64(b, s.pageSize)), slotInPage);
  entry = addI(b, mulI(b, entry, constI64(b, s.numKvHeads)),
               arith::IndexCastOp::create(b, b.getI64Type(), in.kvHead));
  entry = mulI(b, entry, constI64(b, d));
  Type i64 = b.getI64Type();
  for (int64_t k = 0; k < 2 * d / 32; ++k) {
    Value c = addI(b, lane, 32 * k);
    Value r = divUI(b, c, constIndex(b, chunks));
    Value j = remUI(b, c, constIndex(b, chunks));
    Value valid = cmpI(b, CmpIPredicate::slt,
                       addI(b, tokenBase, indexToI32(b, r)), in.end);
    Value srcRow = select(b, valid, r, constIndex(b, 0));
    Value src = addI(b, mulI(b, srcRow, s.numKvHeads * d), mulI(b, j, 8));
    src = addI(b, entry, arith::IndexCastOp::create(b, i64, src));
    Value dst = addI(b, mulI(b, r, pitch), mulI(b, j, 8));
    Value bytes = select(b, valid, constI32(b, 16), constI32(b, 0));
    for (int64_t kv = 0; kv < 2; ++kv) {
      Value dstIndex = indexToI32(b, addI(b, stageBase(b, slot, kv), dst));
      copyAsync16(b, offsetPointer(b, ring, dstIndex, in.elementType),
                  offsetPointer(b, kv ? values : keys, src, in.elementType),
                  bytes);
    }
  }
  commitAsyncCopies(b);
}

/// S = Q K^T of the tile in stage `slotBase` (its K rows), scaled into the
/// log2 domain and masked: {token 2q, 2q+1, 8+2q, 9+2q} of row g.
SmallVector<Value, 4> MmaLoop::emitScores(ImplicitLocOpBuilder &b,
                                          Value slotBase, Value tileBase) {
  Value zero = constF32(b, 0.0);
  SmallVector<Value, 4> s0{zero, zero, zero, zero}, s1 = s0;
  Value row = addI(b, remUI(b, lane, constIndex(b, 8)),
                   mulI(b, divUI(b, lane, constIndex(b, 16)), 8));
  Value col =
      mulI(b, remUI(b, divUI(b, lane, constIndex(b, 8)), constIndex(b, 2)), 8);
  auto chunkAt = chunkOffsets(b, slotBase, row, col);
  for (int64_t kk = 0; kk < d / 16; ++kk) {
    Value at = indexToI32(b, chunkAt(b, 16 * kk));
    SmallVector<Value, 4> kb = loadMatrixX4(
        b, offsetPointer(b, ring, at, in.elementType), in.elementType);
    s0 = mmaM16N8K16(b, in.elementType, qa[kk], {kb[0], kb[1]}, s0);
    s1 = mmaM16N8K16(b, in.elementType, qa[kk], {kb[2], kb[3]}, s1);
  }
  Value scale = constF32(b, in.scale * M_LOG2E);
  Value token0 = addI(b, tileBase, indexToI32(b, mulI(b, q4, 2)));
  SmallVector<Value, 4> scores;
  const SmallVector<Value, 4> *blocks[] = {&s0, &s1};
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t e = 0; e < 2; ++e) {
      Value token = addI(b, token0, constI32(b, 8 * n + e));
      Value valid = cmpI(b, CmpIPredicate::slt, token, in.end);
      scores.push_back(
          select(b, valid, mulF(b, (*blocks[n])[e], scale), negInfF32(b)));
    }
  return scores;
}

/// One tile: waits for it, issues the tile ST - 1 ahead (its page loaded
/// by the iteration before, the last element of `state`) and loads the page
/// of the tile after it, so that no copy waits for a block-table load;
/// then the online softmax update of the state (m, l, O[D / 8][2], page).
SmallVector<Value> MmaLoop::emitTile(ImplicitLocOpBuilder &b, Value i,
                                     ValueRange state) {
  waitAsyncCopies(b, in.stages - 2);
  NVVM::SyncWarpOp::create(b, constI32(b, -1));
  Value next = addI(b, i, constI32(b, in.stages - 1));
  ifThen(b, cmpI(b, CmpIPredicate::slt, next, tiles),
         [&](ImplicitLocOpBuilder &ib) {
           issueTile(ib, next,
                     i32ToIndex(ib, remUI(ib, next, constI32(ib, in.stages))),
                     state.back());
         });
  Value nextPage = loadPage(b, addI(b, next, constI32(b, 1)));
  ifThen(b, cmpI(b, CmpIPredicate::sge, next, tiles),
         [&](ImplicitLocOpBuilder &ib) { commitAsyncCopies(ib); });
  Value slot = i32ToIndex(b, remUI(b, i, constI32(b, in.stages)));
  SmallVector<Value> out =
      attendTile(b, slot, tileStart(b, i), state.drop_back(), false);
  out.push_back(nextPage);
  return out;
}

/// The online softmax update of (m, l, O[D / 8][2]) = `state` by the tile
/// of tokens from `tileBase` (i32) in stage `slot`. With `maskValues` (the
/// CTA ring) the V fragments of tokens at or past `end` are zeroed (the
/// boxes copied those slots: stale or NaN, and 0 x NaN = NaN); else those
/// rows were zero-filled.
SmallVector<Value> MmaLoop::attendTile(ImplicitLocOpBuilder &b, Value slot,
                                       Value tileBase, ValueRange state,
                                       bool maskValues) {
  SmallVector<Value, 4> s = emitScores(b, stageBase(b, slot, 0), tileBase);
  // Online softmax of row g (the 4 lanes of a row hold its 16 tokens).
  Value mx = maxF32(b, maxF32(b, s[0], s[1]), maxF32(b, s[2], s[3]));
  for (int32_t off : {1, 2})
    mx = maxF32(b, mx, shuffleXor(b, mx, off));
  Value m = maxF32(b, state[0], mx);
  Value ms = safeMax(b, m);
  Value corr = exp2F32(b, subF(b, state[0], ms));
  SmallVector<Value, 4> p;
  for (Value x : s)
    p.push_back(exp2F32(b, subF(b, x, ms)));
  Value sum = addF(b, addF(b, p[0], p[1]), addF(b, p[2], p[3]));
  for (int32_t off : {1, 2})
    sum = addF(b, sum, shuffleXor(b, sum, off));
  SmallVector<Value> out{m, fma(b, state[1], corr, sum)};
  // O += P V: P from the scores in the A layout, V rows transposed.
  auto pair = [&](Value x, Value y) {
    auto f32x2 = VectorType::get({2}, b.getF32Type());
    return truncFromF32(b, vector::FromElementsOp::create(b, f32x2, {x, y}),
                        in.elementType);
  };
  SmallVector<Value, 4> pa{pair(p[0], p[1]), zero2, pair(p[2], p[3]), zero2};
  Value row = addI(
      b, remUI(b, lane, constIndex(b, 8)),
      mulI(b, remUI(b, divUI(b, lane, constIndex(b, 8)), constIndex(b, 2)), 8));
  Value col = mulI(b, divUI(b, lane, constIndex(b, 16)), 8);
  auto chunkAt = chunkOffsets(b, stageBase(b, slot, 1), row, col);
  Value zero = constF32(b, 0.0);
  Value valueMasks[2];
  if (maskValues) {
    auto maskType = VectorType::get({2}, b.getI1Type());
    Value token0 = addI(b, tileBase, indexToI32(b, mulI(b, q4, 2)));
    for (int64_t h = 0; h < 2; ++h) {
      SmallVector<Value, 2> bits;
      for (int64_t e = 0; e < 2; ++e)
        bits.push_back(cmpI(b, CmpIPredicate::slt,
                            addI(b, token0, constI32(b, 8 * h + e)), in.end));
      valueMasks[h] = vector::FromElementsOp::create(b, maskType, bits);
    }
  }
  for (int64_t db = 0; db < d / 16; ++db) {
    Value at = indexToI32(b, chunkAt(b, 16 * db));
    SmallVector<Value, 4> vb =
        loadMatrixX4(b, offsetPointer(b, ring, at, in.elementType),
                     in.elementType, /*transpose=*/true);
    // vb[0], vb[2]: tokens 2q, 2q + 1; vb[1], vb[3]: 8 + 2q, 9 + 2q.
    for (int64_t m = 0; maskValues && m < 4; ++m)
      vb[m] = select(b, valueMasks[m % 2], vb[m], zero2);
    for (int64_t h = 0; h < 2; ++h) {
      int64_t nb = 2 * db + h;
      SmallVector<Value, 4> c{mulF(b, state[2 + 2 * nb], corr),
                              mulF(b, state[3 + 2 * nb], corr), zero, zero};
      SmallVector<Value, 4> o =
          mmaM16N8K16(b, in.elementType, pa, {vb[2 * h], vb[2 * h + 1]}, c);
      out.push_back(o[0]);
      out.push_back(o[1]);
    }
  }
  return out;
}

/// The warp's (m, l, O) of head g to the merge buffer.
void MmaLoop::writeState(ImplicitLocOpBuilder &b, ValueRange state) {
  Value head = addI(b, mulI(b, warp, in.headsPerCta), g);
  Value valid = cmpI(b, CmpIPredicate::ult, g, constIndex(b, in.headsPerCta));
  ifThen(b, valid, [&](ImplicitLocOpBuilder &ib) {
    auto f32x2 = VectorType::get({2}, ib.getF32Type());
    Value base = addI(ib, mulI(ib, head, d), mulI(ib, q4, 2));
    for (int64_t nb = 0; nb < d / 8; ++nb) {
      Value v = vector::FromElementsOp::create(
          ib, f32x2, {state[2 + 2 * nb], state[3 + 2 * nb]});
      storeVector(ib, v, in.merge, addI(ib, base, 8 * nb));
    }
    ifThen(ib, cmpI(ib, CmpIPredicate::eq, q4, constIndex(ib, 0)),
           [&](ImplicitLocOpBuilder &tb) {
             storeScalar(tb, state[0], in.merge, addI(tb, head, in.maxBase));
             storeScalar(tb, state[1], in.merge, addI(tb, head, in.sumBase));
           });
  });
}

/// (m, l, O) before the first tile: -inf, 0, zeros.
SmallVector<Value> MmaLoop::initialState(ImplicitLocOpBuilder &b) {
  SmallVector<Value> init{negInfF32(b), constF32(b, 0.0)};
  init.append(d / 4, constF32(b, 0.0));
  return init;
}

void MmaLoop::emit(ImplicitLocOpBuilder &b) {
  emitIds(b);
  if (in.ctaRing) {
    emitCtaRing(b);
    barrier(b);
    return;
  }
  loadQueryFragments(b);
  for (int64_t i = 0; i + 1 < in.stages; ++i) {
    ifThen(b, cmpI(b, CmpIPredicate::slt, constI32(b, i), tiles),
           [&](ImplicitLocOpBuilder &ib) {
             issueTile(ib, constI32(ib, i), constIndex(ib, i),
                       loadPage(ib, constI32(ib, i)));
           });
    ifThen(b, cmpI(b, CmpIPredicate::sge, constI32(b, i), tiles),
           [&](ImplicitLocOpBuilder &ib) { commitAsyncCopies(ib); });
  }
  SmallVector<Value> init = initialState(b);
  init.push_back(loadPage(b, constI32(b, in.stages - 1)));
  SmallVector<Value> state =
      forLoopWithValues(b, constI32(b, 0), tiles, constI32(b, 1), init,
                        [&](ImplicitLocOpBuilder &lb, Value i,
                            ValueRange args) { return emitTile(lb, i, args); });
  waitAsyncCopies(b, 0);
  state.pop_back();
  writeState(b, state);
  barrier(b);
}

//===----------------------------------------------------------------------===//
// The CTA-wide ring (bench/diagnostics/decode_attention_ring.cu's `tma`)
//===----------------------------------------------------------------------===//

/// The ring's full barriers (one arrival: the producer's expect_tx, plus the
/// copies' bytes) and empty barriers (one arrival: the slot's consumer
/// warp); warps below `warps` consume, the last produces. Every thread
/// reaches the caller's CTA barrier after it.
void MmaLoop::emitCtaRing(ImplicitLocOpBuilder &b) {
  // The first 1 KiB boundary of the ring (the schedule allows 1 KiB).
  Value address = arith::IndexCastOp::create(
      b, b.getIndexType(), LLVM::PtrToIntOp::create(b, b.getI32Type(), ring));
  Value kb = constIndex(b, 1024);
  ringAt = divUI(b, remUI(b, subI(b, kb, remUI(b, address, kb)), kb),
                 constIndex(b, getTypeBytes(in.elementType)));
  keyMap = getGenericPointer(b, in.keyCacheMap);
  valueMap = getGenericPointer(b, in.valueCacheMap);
  Value barriers = createStageBarriers(b, in.func, in.tid, 2 * in.stages);
  Value empty = stageBarrier(b, barriers, constIndex(b, in.stages));
  ifThenElse(
      b, cmpI(b, CmpIPredicate::ult, warp, constIndex(b, in.warps)),
      [&](ImplicitLocOpBuilder &cb) {
        loadQueryFragments(cb);
        consumeTiles(cb, barriers, empty);
      },
      [&](ImplicitLocOpBuilder &pb) { produceTiles(pb, barriers, empty); });
}

/// The block-table entry (i32) of the split's tile `t` (i32) of `count`
/// (for t >= count the sequence's first entry: in the table, never used).
Value MmaLoop::tableEntryOfTile(ImplicitLocOpBuilder &b, Value t, Value count) {
  Value token = addI(b, in.start, mulI(b, t, constI32(b, kTile)));
  Value column =
      select(b, cmpI(b, CmpIPredicate::slt, t, count),
             divUI(b, token, constI32(b, in.shape.pageSize)), constI32(b, 0));
  return loadScalar(b, in.blockTable,
                    addI(b, mulI(b, in.seq, i32ToIndex(b, in.maxPages)),
                         i32ToIndex(b, column)));
}

/// The producer warp: for each tile t of the split, once its slot t % S is
/// free (the empty phase of the slot's previous use), copyTileBoxes. Lane l
/// holds the block-table entries of tiles 32 j + l (this batch) and
/// 32 (j + 1) + l (the next, loaded a batch ahead), so that no copy waits
/// for a block-table load; tile t's page is lane t % 32's entry.
void MmaLoop::produceTiles(ImplicitLocOpBuilder &b, Value full, Value empty) {
  Value count = maxSI(b, subI(b, in.end, in.start), constI32(b, 0));
  Value n =
      divUI(b, addI(b, count, constI32(b, kTile - 1)), constI32(b, kTile));
  Value l = indexToI32(b, lane);
  Value c32 = constI32(b, 32);
  Value stages = constI32(b, in.stages);
  forLoopWithValues(
      b, constI32(b, 0), n, constI32(b, 1),
      {tableEntryOfTile(b, l, n), tableEntryOfTile(b, addI(b, l, c32), n)},
      [&](ImplicitLocOpBuilder &lb, Value t,
          ValueRange entries) -> SmallVector<Value> {
        // A new batch: the next one's entries become this one's, and the
        // one after is loaded.
        Value newBatch = andI(
            lb, cmpI(lb, CmpIPredicate::eq, remUI(lb, t, c32), constI32(lb, 0)),
            cmpI(lb, CmpIPredicate::ugt, t, constI32(lb, 0)));
        SmallVector<Value> batch = ifThenElseValues(
            lb, ValueRange(entries).getTypes(), newBatch,
            [&](ImplicitLocOpBuilder &nb) -> SmallVector<Value> {
              return {entries[1],
                      tableEntryOfTile(nb, addI(nb, addI(nb, t, c32), l), n)};
            },
            [&](ImplicitLocOpBuilder &) {
              return SmallVector<Value>(entries);
            });
        Value page = arith::ExtSIOp::create(
            lb, lb.getI64Type(), shuffleIdx(lb, batch[0], remUI(lb, t, c32)));
        Value slot = i32ToIndex(lb, remUI(lb, t, stages));
        ifThen(lb, cmpI(lb, CmpIPredicate::uge, t, stages),
               [&](ImplicitLocOpBuilder &wb) {
                 Value use = divUI(wb, t, stages);
                 Value parity =
                     remUI(wb, subI(wb, use, constI32(wb, 1)), constI32(wb, 2));
                 waitBarrierPhase(wb, stageBarrier(wb, empty, slot), parity);
                 // The consumer's ldmatrix reads of the slot (ordered by the
                 // empty barrier) before the TMA copies overwrite it.
                 fenceSharedForBulkCopies(wb);
               });
        copyTileBoxes(lb, t, page, stageBarrier(lb, full, slot));
        return batch;
      });
}

/// Tile t's K and V rows into its slot by lane 0: it arms the slot's `full`
/// barrier for the whole tile, then copies, of each cache, the d /
/// kAttentionRingBoxColumns boxes of the tile's 16 token slots (rows
/// page * P + t's first slot in the page, of the cache viewed as
/// [num_pages * P, Hkv * D]) at this KV head's columns. Rows at or past
/// `end` are copied too (stale or NaN slots of the page); the consumer
/// masks them.
void MmaLoop::copyTileBoxes(ImplicitLocOpBuilder &b, Value t, Value page,
                            Value full) {
  const AttentionShape &s = in.shape;
  const int64_t box = kAttentionRingBoxColumns;
  ifThen(b, cmpI(b, CmpIPredicate::eq, lane, constIndex(b, 0)),
         [&](ImplicitLocOpBuilder &cb) {
           arriveExpectingBytes(cb, full,
                                2 * kTile * d * getTypeBytes(in.elementType));
           Value tokenBase =
               addI(cb, in.start, mulI(cb, t, constI32(cb, kTile)));
           Value row =
               addI(cb,
                    mulI(cb, arith::TruncIOp::create(cb, cb.getI32Type(), page),
                         constI32(cb, s.pageSize)),
                    remUI(cb, tokenBase, constI32(cb, s.pageSize)));
           Value rowIndex = i32ToIndex(cb, row);
           Value slot = i32ToIndex(cb, remUI(cb, t, constI32(cb, in.stages)));
           for (int64_t kv = 0; kv < 2; ++kv)
             for (int64_t h = 0; h < d / box; ++h) {
               Value dst = addI(cb, stageBase(cb, slot, kv), h * kTile * box);
               Value col = addI(cb, mulI(cb, in.kvHead, d), h * box);
               copyTensorBox(
                   cb,
                   offsetPointer(cb, ring, indexToI32(cb, dst), in.elementType),
                   kv ? valueMap : keyMap, {col, rowIndex}, full);
             }
         });
}

/// Consumer warp w: tiles w, w + W, ... of the split (its i-th is tile
/// t = w + i W, in slot t % S, phase t / S of the slot's full barrier),
/// each attended and then released on the slot's empty barrier by lane 0
/// after a warp sync; then its state to the merge buffer. Only a split's
/// last tile can end before 16 tokens, so the loop runs the warp's tiles
/// but its last, whose V rows past `end` are masked (stale or NaN slots
/// the producer's boxes copied).
void MmaLoop::consumeTiles(ImplicitLocOpBuilder &b, Value full, Value empty) {
  Value stages = constI32(b, in.stages);
  Value w = indexToI32(b, warp);
  auto tile = [&](ImplicitLocOpBuilder &lb, Value i, ValueRange args,
                  bool lastTile) {
    Value t = addI(lb, w, mulI(lb, i, constI32(lb, in.warps)));
    Value slot = i32ToIndex(lb, remUI(lb, t, stages));
    waitBarrierPhase(lb, stageBarrier(lb, full, slot),
                     remUI(lb, divUI(lb, t, stages), constI32(lb, 2)));
    SmallVector<Value> out =
        attendTile(lb, slot, tileStart(lb, i), args, lastTile);
    NVVM::SyncWarpOp::create(lb, constI32(lb, -1));
    arriveOnBarrier(lb, stageBarrier(lb, empty, slot),
                    cmpI(lb, CmpIPredicate::eq, lane, constIndex(lb, 0)));
    return out;
  };
  Value last = maxSI(b, subI(b, tiles, constI32(b, 1)), constI32(b, 0));
  SmallVector<Value> state = forLoopWithValues(
      b, constI32(b, 0), last, constI32(b, 1), initialState(b),
      [&](ImplicitLocOpBuilder &lb, Value i, ValueRange args) {
        return tile(lb, i, args, false);
      });
  state = ifThenElseValues(
      b, ValueRange(state).getTypes(),
      cmpI(b, CmpIPredicate::sgt, tiles, constI32(b, 0)),
      [&](ImplicitLocOpBuilder &lb) { return tile(lb, last, state, true); },
      [&](ImplicitLocOpBuilder &) { return SmallVector<Value>(state); });
  writeState(b, state);
}

} // namespace

Value mlir::fusion::safeMax(ImplicitLocOpBuilder &b, Value m) {
  Value isNegInf = cmpF(b, CmpFPredicate::OEQ, m, negInfF32(b));
  return select(b, isNegInf, constF32(b, 0.0), m);
}

void mlir::fusion::emitMmaAttentionWarps(ImplicitLocOpBuilder &b,
                                         gpu::GPUModuleOp module,
                                         const MmaAttentionInputs &in) {
  MmaLoop(in, module).emit(b);
}
