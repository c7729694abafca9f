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
  SmallVector<Value, 4> emitScores(ImplicitLocOpBuilder &b, Value slotBase,
                                   Value tileBase);
  void writeState(ImplicitLocOpBuilder &b, ValueRange state);
  /// Element offset of this warp's stage `slot` (index), K (kv 0) or V (1).
  Value stageBase(ImplicitLocOpBuilder &b, Value slot, int64_t kv) {
    Value stage = addI(b, mulI(b, warp, in.stages), slot);
    return mulI(b, addI(b, mulI(b, stage, 2), kv), kTile * pitch);
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
  Value laneBase = addI(b, slotBase, addI(b, mulI(b, row, pitch), col));
  for (int64_t kk = 0; kk < d / 16; ++kk) {
    Value at = indexToI32(b, addI(b, laneBase, 16 * kk));
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
  SmallVector<Value, 4> s =
      emitScores(b, stageBase(b, slot, 0), tileStart(b, i));
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
  Value laneBase =
      addI(b, stageBase(b, slot, 1), addI(b, mulI(b, row, pitch), col));
  Value zero = constF32(b, 0.0);
  for (int64_t db = 0; db < d / 16; ++db) {
    Value at = indexToI32(b, addI(b, laneBase, 16 * db));
    SmallVector<Value, 4> vb =
        loadMatrixX4(b, offsetPointer(b, ring, at, in.elementType),
                     in.elementType, /*transpose=*/true);
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
  out.push_back(nextPage);
  return out;
}

/// The warp's (m, l, O) of head g to the merge buffer, then a CTA barrier.
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
  barrier(b);
}

void MmaLoop::emit(ImplicitLocOpBuilder &b) {
  emitIds(b);
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
  SmallVector<Value> init{negInfF32(b), constF32(b, 0.0)};
  init.append(d / 4, constF32(b, 0.0));
  init.push_back(loadPage(b, constI32(b, in.stages - 1)));
  SmallVector<Value> state =
      forLoopWithValues(b, constI32(b, 0), tiles, constI32(b, 1), init,
                        [&](ImplicitLocOpBuilder &lb, Value i,
                            ValueRange args) { return emitTile(lb, i, args); });
  waitAsyncCopies(b, 0);
  state.pop_back();
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
