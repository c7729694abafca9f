//===- AttentionEmitter.cpp - split-KV GQA decode attention ---------------===//
//
// Emits the gpu.func of a fusion.kernel that holds one
// fusion.decode_attention: flash-decoding (split-KV) grouped-query attention
// over the paged KV cache, with the combine of the splits in the same kernel.
//
// Semantics (design.md section 2.1, FusionOps.td DecodeAttentionOp):
//   o[b, h] = softmax(q[b, h] . K[b, 0..len_b)^T * scale) V[b, 0..len_b)
// with kv_head = h / G (G = Hq / Hkv), token t of sequence b at page
// block_table[b, t / P], slot t % P. Only tokens below len_b are read;
// len_b = 0 gives zeros.
//
// Launch: grid (num_splits, Hkv * head_blocks, batch), `threads` threads per
// CTA (default 256 when a CTA holds at most 4 heads, else 128). One CTA per
// (split, KV head, sequence) handles the query heads of one KV group (all G of
// them when G <= 8, else G / Gc blocks of Gc heads, Gc the largest divisor of G
// not above 8), so every K/V byte is read from HBM once (twice or more only
// when G > 8).
//
// Thread layout: a K/V row (D elements) is read as D/8 16-byte vectors
// (vector<8 x f16|bf16>, alignment 16), one per lane of a "row group" of
// LPR = nextPowerOf2(D/8) lanes (D = 80 -> 10 of 16 lanes active; the idle
// lanes re-read the last vector and hold zero queries). A warp holds 32/LPR
// row groups; each row group walks its own tokens with its own online
// softmax (running max m, sum l, and an fp32 accumulator of its 8 output
// elements for each of the Gc heads), `unroll` tokens per iteration whose
// 2 * unroll K and V loads are issued before any arithmetic. The dot
// products q.k are summed over the row group with gpu.shuffle xor (all 32
// lanes of every warp run the same iterations: no shuffle in divergent
// code). Scores live in the log2 domain: q is pre-multiplied by
// scale * log2(e) and exponentials are `ex2.approx.ftz.f32` through the
// NVVM intrinsic (no libdevice call, no math dialect).
//
// Split s covers tokens [s * chunk, min(len, (s + 1) * chunk)) with
//   chunk = roundUp(ceil(len / num_splits), tokens_per_iter)
// where tokens_per_iter = (threads / 32) * (32 / LPR) * unroll is the number
// of tokens the CTA consumes per iteration (16..128): every split but the
// last of a sequence runs only full iterations. Tokens past the end of a
// split are clamped to its last token (an L1/L2 hit) and masked to -inf, so
// K/V at or past seq_lens[b] is never read and NaN there cannot leak. Page
// addressing is 64-bit: page * (P * Hkv * D) in `index` (i64).
//
// End of a CTA: the row groups are merged (shuffle xor across row groups of
// a warp, then across warps through shared memory). With num_splits == 1 the
// CTA normalises and writes o directly (no workspace traffic). Otherwise it
// writes its UNNORMALISED partial accumulator o_s (fp32, [B, Hq, max_splits,
// D]) and its statistics (m_s in the log2 domain, -inf for an empty split,
// and l_s; fp32 pairs [B, Hq, max_splits, 2]), every thread fences
// (membar.gl), the CTA synchronises, and thread 0 atomically increments the
// arrival counter of (b, kv_head, head_block). The CTA that sees
// num_splits - 1 (the last to arrive) resets the counter to 0, fences again
// and combines:
//   M = max_s m_s, w_s = 2^(m_s - M) (0 for an empty split),
//   L = sum_s l_s w_s, o = sum_s w_s o_s / L   (o = 0 when L = 0).
// The counters must be zero before the first launch; the kernel leaves them
// zero.
//
//===----------------------------------------------------------------------===//

#include "EmitterUtils.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// The schedule of one attention kernel (recorded in KernelLaunch::schedule).
struct AttentionSchedule {
  int64_t threads = 256;
  /// Upper bound on num_splits; sizes the workspace.
  int64_t maxSplits = contract::SplitPolicy().maxSplits;
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
  /// The recommended num_splits policy (contract::chooseNumSplits).
  contract::SplitPolicy splitPolicy;
};

/// Static facts about the op.
struct AttentionShape {
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0, pageSize = 0, group = 0;
  Type elementType;
  double scale = 0.0;
};

constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kMaxHeadsPerCta = 8;

//===----------------------------------------------------------------------===//
// Small builders not (yet) in EmitterUtils
//===----------------------------------------------------------------------===//

/// 2^x with `ex2.approx.ftz.f32` (the NVVM intrinsic: no libdevice call).
/// 2^-inf = +0.
Value exp2F32(ImplicitLocOpBuilder &b, Value x) {
  auto call = LLVM::CallIntrinsicOp::create(
      b, b.getF32Type(), b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
      ValueRange{x});
  return call.getResult(0);
}

/// membar.gl (fence.sc.gpu): orders this thread's memory accesses at GPU
/// scope.
void fenceGPU(ImplicitLocOpBuilder &b) {
  NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
}

Value cmpF(ImplicitLocOpBuilder &b, arith::CmpFPredicate pred, Value lhs,
           Value rhs) {
  return arith::CmpFOp::create(b, pred, lhs, rhs);
}
Value select(ImplicitLocOpBuilder &b, Value cond, Value lhs, Value rhs) {
  return arith::SelectOp::create(b, cond, lhs, rhs);
}
Value addF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::AddFOp::create(b, lhs, rhs);
}
Value subF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::SubFOp::create(b, lhs, rhs);
}
Value mulF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MulFOp::create(b, lhs, rhs);
}
Value addI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::AddIOp::create(b, lhs, rhs);
}
Value mulI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MulIOp::create(b, lhs, rhs);
}
Value minSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MinSIOp::create(b, lhs, rhs);
}
Value maxSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MaxSIOp::create(b, lhs, rhs);
}
Value negInf(ImplicitLocOpBuilder &b) {
  return constF32(b, -std::numeric_limits<double>::infinity());
}
/// The max to subtract: `m`, or 0 when m = -inf (nothing seen yet), so that
/// 2^(-inf - safe) = 0 and never 2^(-inf + inf) = NaN.
Value safeMax(ImplicitLocOpBuilder &b, Value m) {
  Value isNegInf = cmpF(b, arith::CmpFPredicate::OEQ, m, negInf(b));
  return select(b, isNegInf, constF32(b, 0.0), m);
}
Value splat(ImplicitLocOpBuilder &b, Value scalar, int64_t width) {
  return vector::BroadcastOp::create(
      b, VectorType::get({width}, scalar.getType()), scalar);
}
/// Builds `scf.if cond {then} else {else}` without results.
void ifThenElse(ImplicitLocOpBuilder &b, Value cond,
                llvm::function_ref<void(ImplicitLocOpBuilder &)> thenBuilder,
                llvm::function_ref<void(ImplicitLocOpBuilder &)> elseBuilder) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/true);
  ImplicitLocOpBuilder thenB(b.getLoc(), b.getContext());
  thenB.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  thenBuilder(thenB);
  ImplicitLocOpBuilder elseB(b.getLoc(), b.getContext());
  elseB.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  elseBuilder(elseB);
}

/// Online-softmax state of one row group (or lane) for Gc heads: the running
/// max m (log2 domain), sum l and the 8 accumulated output elements per head.
struct SoftmaxState {
  SmallVector<Value> m, l;
  SmallVector<SmallVector<Value>> acc; // [head][8]

  SmallVector<Value> flatten() const {
    SmallVector<Value> values(m);
    values.append(l.begin(), l.end());
    for (const auto &a : acc)
      values.append(a.begin(), a.end());
    return values;
  }
  static SoftmaxState unflatten(ValueRange values, int64_t heads,
                                int64_t width) {
    SoftmaxState state;
    state.m.assign(values.begin(), values.begin() + heads);
    state.l.assign(values.begin() + heads, values.begin() + 2 * heads);
    for (int64_t h = 0; h < heads; ++h) {
      auto begin = values.begin() + 2 * heads + h * width;
      state.acc.emplace_back(begin, begin + width);
    }
    return state;
  }
};

/// Merges state `o` into `s` for every head (log2-domain LSE merge).
void mergeStates(ImplicitLocOpBuilder &b, SoftmaxState &s,
                 const SoftmaxState &o) {
  for (size_t h = 0; h < s.m.size(); ++h) {
    Value mx = maxF32(b, s.m[h], o.m[h]);
    Value ms = safeMax(b, mx);
    Value a = exp2F32(b, subF(b, s.m[h], ms));
    Value c = exp2F32(b, subF(b, o.m[h], ms));
    s.l[h] = fma(b, o.l[h], c, mulF(b, s.l[h], a));
    for (size_t e = 0; e < s.acc[h].size(); ++e)
      s.acc[h][e] = fma(b, o.acc[h][e], c, mulF(b, s.acc[h][e], a));
    s.m[h] = mx;
  }
}

//===----------------------------------------------------------------------===//
// Validation and schedule
//===----------------------------------------------------------------------===//

FailureOr<int64_t> getScheduleInt(KernelOp kernel, StringRef name,
                                  int64_t defaultValue) {
  DictionaryAttr schedule = kernel.getScheduleAttr();
  if (!schedule)
    return defaultValue;
  Attribute attr = schedule.get(name);
  if (!attr)
    return defaultValue;
  auto intAttr = dyn_cast<IntegerAttr>(attr);
  if (!intAttr) {
    kernel.emitOpError() << "schedule entry '" << name
                         << "' must be an integer, got " << attr;
    return failure();
  }
  return intAttr.getInt();
}

FailureOr<AttentionSchedule> chooseSchedule(KernelOp kernel,
                                            const AttentionShape &shape) {
  AttentionSchedule s;
  int64_t g = shape.group;
  // Heads per CTA: all of the group when it fits in registers, else the
  // largest divisor of G not above kMaxHeadsPerCta.
  int64_t gc = 1;
  for (int64_t d = std::min(g, kMaxHeadsPerCta); d >= 1; --d)
    if (g % d == 0) {
      gc = d;
      break;
    }
  // Defaults from a sweep on the H200 (test/gpu/check_attention.py --sweep,
  // 2026-11-29): for Gc <= 4, 256 threads with 4 tokens per row group
  // (~128 registers, 2 CTAs per SM) were fastest at every (B, L) tried; for
  // Gc > 4 (~170-210 registers), 128 threads with 2 tokens.
  auto threads = getScheduleInt(kernel, "threads", gc > 4 ? 128 : 256);
  auto maxSplits =
      getScheduleInt(kernel, contract::schedule::kMaxSplits, s.maxSplits);
  auto unroll = getScheduleInt(kernel, "kv_unroll", gc > 4 ? 2 : 4);
  auto headsPerCta = getScheduleInt(kernel, "heads_per_cta", gc);
  if (failed(threads) || failed(maxSplits) || failed(unroll) ||
      failed(headsPerCta))
    return failure();
  s.threads = *threads;
  s.maxSplits = *maxSplits;
  s.unroll = *unroll;
  s.headsPerCta = *headsPerCta;
  if (s.threads < 32 || s.threads > 1024 || s.threads % 32 != 0)
    return kernel.emitOpError()
           << "attention schedule: threads must be a multiple of 32 in "
              "[32, 1024], got "
           << s.threads;
  if (s.maxSplits < 1 || s.maxSplits > 1024)
    return kernel.emitOpError()
           << "attention schedule: max_splits must be in [1, 1024], got "
           << s.maxSplits;
  if (s.unroll < 1 || s.unroll > 16)
    return kernel.emitOpError()
           << "attention schedule: kv_unroll must be in [1, 16], got "
           << s.unroll;
  if (s.headsPerCta < 1 || g % s.headsPerCta != 0 ||
      s.headsPerCta > 2 * kMaxHeadsPerCta)
    return kernel.emitOpError()
           << "attention schedule: heads_per_cta (" << s.headsPerCta
           << ") must divide the group size " << g << " and be at most "
           << 2 * kMaxHeadsPerCta;
  s.headBlocks = g / s.headsPerCta;
  s.numVecs = shape.headDim / AttentionSchedule::vectorWidth;
  s.lanesPerRow = static_cast<int64_t>(llvm::PowerOf2Ceil(s.numVecs));
  s.rowsPerWarp = 32 / s.lanesPerRow;
  s.rowGroups = (s.threads / 32) * s.rowsPerWarp;
  s.tokensPerIter = s.rowGroups * s.unroll;
  s.sharedFloats = (s.threads / 32) * s.headsPerCta * (shape.headDim + 2);
  if (s.sharedFloats * 4 + 4 > contract::kMaxStaticSharedBytes)
    return kernel.emitOpError()
           << "attention schedule needs " << s.sharedFloats * 4 + 4
           << " bytes of shared memory (threads " << s.threads
           << ", heads_per_cta " << s.headsPerCta << ", head_dim "
           << shape.headDim << "), more than "
           << contract::kMaxStaticSharedBytes;
  return s;
}

DictionaryAttr getScheduleAttr(MLIRContext *context,
                               const AttentionSchedule &s) {
  Builder b(context);
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  return b.getDictionaryAttr({
      b.getNamedAttr("kind", b.getStringAttr("split_kv_attention")),
      b.getNamedAttr("threads", i64(s.threads)),
      b.getNamedAttr(contract::schedule::kMaxSplits, i64(s.maxSplits)),
      b.getNamedAttr("heads_per_cta", i64(s.headsPerCta)),
      b.getNamedAttr("head_blocks", i64(s.headBlocks)),
      b.getNamedAttr("vector_width", i64(AttentionSchedule::vectorWidth)),
      b.getNamedAttr("lanes_per_row", i64(s.lanesPerRow)),
      b.getNamedAttr("kv_unroll", i64(s.unroll)),
      b.getNamedAttr("chunk_multiple", i64(s.tokensPerIter)),
      b.getNamedAttr("chunk_policy",
                     b.getStringAttr("chunk = roundUp(ceil(len / num_splits), "
                                     "chunk_multiple); split s reads tokens "
                                     "[s*chunk, min(len, (s+1)*chunk))")),
      b.getNamedAttr(contract::schedule::kTargetCtas,
                     i64(s.splitPolicy.targetCtas)),
      b.getNamedAttr(contract::schedule::kMinChunkTokens,
                     i64(s.splitPolicy.minChunkTokens)),
      b.getNamedAttr(contract::schedule::kNumSplitsPolicy,
                     b.getStringAttr(contract::kNumSplitsPolicyFormula)),
      b.getNamedAttr("partials", b.getStringAttr("unnormalized")),
  });
}

//===----------------------------------------------------------------------===//
// The emitter
//===----------------------------------------------------------------------===//

struct AttentionEmitter {
  AttentionShape shape;
  AttentionSchedule sched;

  // Kernel arguments.
  Value query, keyCache, valueCache, blockTable, seqLens, output;
  Value partialOut, partialStats, counters;
  Value batchArg, maxPagesArg, numSplitsArg;
  // Shared memory: the cross-warp merge ([warps][Gc][D] accumulators, then
  // [warps][Gc] maxima, then [warps][Gc] sums) and the "last CTA" flag.
  Value smem, smemFlag;

  static constexpr int64_t W = AttentionSchedule::vectorWidth;
  int64_t gc() const { return sched.headsPerCta; }
  int64_t numWarps() const { return sched.threads / 32; }
  int64_t smemMaxBase() const { return numWarps() * gc() * shape.headDim; }
  int64_t smemSumBase() const { return smemMaxBase() + numWarps() * gc(); }

  void emitBody(ImplicitLocOpBuilder &b);

private:
  // Values shared by the phases of one CTA.
  Value tid, split, gridY, seq, kvHead, head0, lane, warp, laneInRow, rowInWarp,
      rowGroup, dvec, laneActive, numSplits;

  void emitCta(ImplicitLocOpBuilder &b);
  SoftmaxState emitMainLoop(ImplicitLocOpBuilder &b,
                            ArrayRef<SmallVector<Value>> q, Value start,
                            Value end, Value iters);
  void emitStoreSlots(
      ImplicitLocOpBuilder &b,
      llvm::function_ref<void(ImplicitLocOpBuilder &, Value head, Value dv)>
          body);
  void emitCombine(ImplicitLocOpBuilder &b, Value head, Value dv);
  /// Offset of element 8*dv of head `head` of sequence `seq` in a
  /// [B, Hq, D] tensor.
  Value headOffset(ImplicitLocOpBuilder &b, Value head, Value dv) {
    Value row = addIndex(b, mulIndex(b, seq, shape.numHeads), head);
    return addIndex(b, mulIndex(b, row, shape.headDim), mulIndex(b, dv, W));
  }
  /// Index of (seq, head, split 0) in the [B, Hq, max_splits] partial grid.
  Value partialRow(ImplicitLocOpBuilder &b, Value head) {
    Value row = addIndex(b, mulIndex(b, seq, shape.numHeads), head);
    return mulIndex(b, row, sched.maxSplits);
  }
  /// Writes o * (1 / l) (zeros when l = 0) to the output.
  void storeNormalized(ImplicitLocOpBuilder &b, Value acc, Value l, Value head,
                       Value dv) {
    Value positive = cmpF(b, arith::CmpFPredicate::OGT, l, constF32(b, 0.0));
    Value inv =
        select(b, positive, arith::DivFOp::create(b, constF32(b, 1.0), l),
               constF32(b, 0.0));
    Value o = mulF(b, acc, splat(b, inv, W));
    storeVector(b, truncFromF32(b, o, shape.elementType), output,
                headOffset(b, head, dv));
  }
};

void AttentionEmitter::emitBody(ImplicitLocOpBuilder &b) {
  const int64_t lpr = sched.lanesPerRow, rpw = sched.rowsPerWarp,
                nv = sched.numVecs;
  tid = threadIdX(b);
  split = blockIdX(b);
  gridY = blockIdY(b);
  seq = gpu::BlockIdOp::create(b, gpu::Dimension::z);
  kvHead = gridY;
  Value headBlock = constIndex(b, 0);
  if (sched.headBlocks > 1) {
    kvHead = arith::DivUIOp::create(b, gridY, constIndex(b, sched.headBlocks));
    headBlock =
        arith::RemUIOp::create(b, gridY, constIndex(b, sched.headBlocks));
  }
  head0 = addIndex(b, mulIndex(b, kvHead, shape.group),
                   mulIndex(b, headBlock, gc()));
  lane = arith::RemUIOp::create(b, tid, constIndex(b, 32));
  warp = arith::DivUIOp::create(b, tid, constIndex(b, 32));
  laneInRow = lane;
  rowInWarp = constIndex(b, 0);
  if (rpw > 1) {
    laneInRow = arith::RemUIOp::create(b, lane, constIndex(b, lpr));
    rowInWarp = arith::DivUIOp::create(b, lane, constIndex(b, lpr));
  }
  rowGroup = addIndex(b, mulIndex(b, warp, rpw), rowInWarp);
  dvec = laneInRow;
  laneActive = nullptr;
  if (nv != lpr) {
    dvec = arith::MinUIOp::create(b, laneInRow, constIndex(b, nv - 1));
    laneActive =
        cmpI(b, arith::CmpIPredicate::ult, laneInRow, constIndex(b, nv));
  }
  // num_splits clamped to [1, max_splits]; CTAs past it (a launch with a
  // larger grid) do nothing.
  numSplits = maxSI(b, minSI(b, numSplitsArg, constI32(b, sched.maxSplits)),
                    constI32(b, 1));
  Value active = arith::AndIOp::create(
      b, cmpI(b, arith::CmpIPredicate::slt, indexToI32(b, split), numSplits),
      cmpI(b, arith::CmpIPredicate::slt, indexToI32(b, seq), batchArg));
  ifThen(b, active, [&](ImplicitLocOpBuilder &ib) { emitCta(ib); });
}

SoftmaxState AttentionEmitter::emitMainLoop(ImplicitLocOpBuilder &b,
                                            ArrayRef<SmallVector<Value>> q,
                                            Value start, Value end,
                                            Value iters) {
  const int64_t p = shape.pageSize, hkv = shape.numKvHeads, d = shape.headDim,
                u = sched.unroll, rgt = sched.rowGroups,
                lpr = sched.lanesPerRow;
  // Loop invariants.
  Value btRow = mulIndex(b, seq, i32ToIndex(b, maxPagesArg));
  Value laneOff =
      indexToI32(b, addIndex(b, mulIndex(b, kvHead, d), mulIndex(b, dvec, W)));
  Value rowGroupI32 = indexToI32(b, rowGroup);
  Value lastToken = arith::SubIOp::create(b, end, constI32(b, 1));
  Value pageStride = constIndex(b, p * hkv * d);

  SoftmaxState init;
  for (int64_t h = 0; h < gc(); ++h) {
    init.m.push_back(negInf(b));
    init.l.push_back(constF32(b, 0.0));
    init.acc.emplace_back(W, constF32(b, 0.0));
  }
  auto loop = scf::ForOp::create(
      b, constIndex(b, 0), i32ToIndex(b, iters), constIndex(b, 1),
      init.flatten(),
      [&](OpBuilder &ob, Location loc, Value it, ValueRange args) {
        ImplicitLocOpBuilder lb(loc, ob);
        SoftmaxState st = SoftmaxState::unflatten(args, gc(), W);
        Value tbase = addI(
            lb, start,
            mulI(lb, indexToI32(lb, it), constI32(lb, sched.tokensPerIter)));
        // Issue every K and V load of the iteration first.
        SmallVector<Value> valid, kRaw, vRaw;
        for (int64_t j = 0; j < u; ++j) {
          Value t =
              addI(lb, tbase, addI(lb, rowGroupI32, constI32(lb, j * rgt)));
          valid.push_back(cmpI(lb, arith::CmpIPredicate::slt, t, end));
          Value tc = minSI(lb, t, lastToken);
          Value pageIdx = arith::DivUIOp::create(lb, tc, constI32(lb, p));
          Value slot = arith::RemUIOp::create(lb, tc, constI32(lb, p));
          Value page = loadScalar(lb, blockTable,
                                  addIndex(lb, btRow, i32ToIndex(lb, pageIdx)));
          Value inPage =
              addI(lb, mulI(lb, slot, constI32(lb, hkv * d)), laneOff);
          Value off =
              addIndex(lb, mulIndex(lb, i32ToIndex(lb, page), pageStride),
                       i32ToIndex(lb, inPage));
          kRaw.push_back(loadVector(lb, keyCache, off, W));
          vRaw.push_back(loadVector(lb, valueCache, off, W));
        }
        // Scores (log2 domain): partial dots, then the row-group sum.
        SmallVector<SmallVector<Value>> scores(gc()); // [head][token]
        for (int64_t j = 0; j < u; ++j) {
          Value kf = extToF32(lb, kRaw[j]);
          SmallVector<Value> k;
          for (int64_t e = 0; e < W; ++e)
            k.push_back(vector::ExtractOp::create(lb, kf, e));
          for (int64_t h = 0; h < gc(); ++h) {
            Value dot = mulF(lb, q[h][0], k[0]);
            for (int64_t e = 1; e < W; ++e)
              dot = fma(lb, q[h][e], k[e], dot);
            scores[h].push_back(dot);
          }
        }
        for (int32_t off = lpr / 2; off >= 1; off /= 2)
          for (int64_t h = 0; h < gc(); ++h)
            for (int64_t j = 0; j < u; ++j) {
              auto sh = gpu::ShuffleOp::create(lb, scores[h][j], off, 32,
                                               gpu::ShuffleMode::XOR);
              scores[h][j] = addF(lb, scores[h][j], sh.getShuffleResult());
            }
        SmallVector<SmallVector<Value>> v;
        for (int64_t j = 0; j < u; ++j) {
          Value vf = extToF32(lb, vRaw[j]);
          v.emplace_back();
          for (int64_t e = 0; e < W; ++e)
            v.back().push_back(vector::ExtractOp::create(lb, vf, e));
        }
        // Online softmax update.
        for (int64_t h = 0; h < gc(); ++h) {
          Value mx = st.m[h];
          for (int64_t j = 0; j < u; ++j) {
            scores[h][j] = select(lb, valid[j], scores[h][j], negInf(lb));
            mx = maxF32(lb, mx, scores[h][j]);
          }
          Value ms = safeMax(lb, mx);
          Value alpha = exp2F32(lb, subF(lb, st.m[h], ms));
          Value l = mulF(lb, st.l[h], alpha);
          SmallVector<Value> acc;
          for (int64_t e = 0; e < W; ++e)
            acc.push_back(mulF(lb, st.acc[h][e], alpha));
          for (int64_t j = 0; j < u; ++j) {
            Value pj = exp2F32(lb, subF(lb, scores[h][j], ms));
            l = addF(lb, l, pj);
            for (int64_t e = 0; e < W; ++e)
              acc[e] = fma(lb, pj, v[j][e], acc[e]);
          }
          st.m[h] = mx;
          st.l[h] = l;
          st.acc[h] = acc;
        }
        scf::YieldOp::create(lb, st.flatten());
      });
  return SoftmaxState::unflatten(loop.getResults(), gc(), W);
}

void AttentionEmitter::emitStoreSlots(
    ImplicitLocOpBuilder &b,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body) {
  // Slot j = (head h, vector dv) of the CTA's Gc x D outputs.
  const int64_t slots = gc() * sched.numVecs;
  for (int64_t r = 0; r * sched.threads < slots; ++r) {
    Value j = addIndex(b, tid, r * sched.threads);
    auto emit = [&](ImplicitLocOpBuilder &ib) {
      Value h = arith::DivUIOp::create(ib, j, constIndex(ib, sched.numVecs));
      Value dv = arith::RemUIOp::create(ib, j, constIndex(ib, sched.numVecs));
      body(ib, h, dv);
    };
    if ((r + 1) * sched.threads <= slots)
      emit(b);
    else
      ifThen(b, cmpI(b, arith::CmpIPredicate::ult, j, constIndex(b, slots)),
             emit);
  }
}

void AttentionEmitter::emitCombine(ImplicitLocOpBuilder &b, Value h, Value dv) {
  Type f32 = b.getF32Type();
  Value head = addIndex(b, head0, h);
  Value row = partialRow(b, head);
  Value ns = i32ToIndex(b, numSplits);
  Value zero = constIndex(b, 0), one = constIndex(b, 1);
  // M = max_s m_s.
  auto maxLoop = scf::ForOp::create(
      b, zero, ns, one, ValueRange{negInf(b)},
      [&](OpBuilder &ob, Location loc, Value s, ValueRange args) {
        ImplicitLocOpBuilder lb(loc, ob);
        Value m =
            loadScalar(lb, partialStats, mulIndex(lb, addIndex(lb, row, s), 2));
        scf::YieldOp::create(lb, ValueRange{maxF32(lb, args[0], m)});
      });
  Value ms = safeMax(b, maxLoop.getResult(0));
  // L = sum l_s 2^(m_s - M), O = sum o_s 2^(m_s - M).
  auto vecF32 = VectorType::get({W}, f32);
  Value zeroVec = arith::ConstantOp::create(
      b, vecF32, DenseElementsAttr::get(vecF32, b.getF32FloatAttr(0.0f)));
  auto sumLoop = scf::ForOp::create(
      b, zero, ns, one, ValueRange{constF32(b, 0.0), zeroVec},
      [&](OpBuilder &ob, Location loc, Value s, ValueRange args) {
        ImplicitLocOpBuilder lb(loc, ob);
        Value rs = addIndex(lb, row, s);
        Value statIdx = mulIndex(lb, rs, 2);
        Value m = loadScalar(lb, partialStats, statIdx);
        Value l = loadScalar(lb, partialStats, addIndex(lb, statIdx, 1));
        Value w = exp2F32(lb, subF(lb, m, ms));
        Value o = loadVector(
            lb, partialOut,
            addIndex(lb, mulIndex(lb, rs, shape.headDim), mulIndex(lb, dv, W)),
            W);
        Value newL = fma(lb, l, w, args[0]);
        Value newO = vector::FMAOp::create(lb, splat(lb, w, W), o, args[1]);
        scf::YieldOp::create(lb, ValueRange{newL, newO});
      });
  storeNormalized(b, sumLoop.getResult(1), sumLoop.getResult(0), head, dv);
}

void AttentionEmitter::emitCta(ImplicitLocOpBuilder &b) {
  const int64_t d = shape.headDim, lpr = sched.lanesPerRow;
  const int64_t tpi = sched.tokensPerIter;
  // --- This CTA's tokens ----------------------------------------------------
  Value len = maxSI(b, loadScalar(b, seqLens, seq), constI32(b, 0));
  Value one = constI32(b, 1);
  Value perSplit = arith::DivUIOp::create(
      b, addI(b, len, arith::SubIOp::create(b, numSplits, one)), numSplits);
  Value chunk =
      mulI(b,
           arith::DivUIOp::create(b, addI(b, perSplit, constI32(b, tpi - 1)),
                                  constI32(b, tpi)),
           constI32(b, tpi));
  Value start = mulI(b, indexToI32(b, split), chunk);
  Value end = minSI(b, len, addI(b, start, chunk));
  Value count = maxSI(b, arith::SubIOp::create(b, end, start), constI32(b, 0));
  Value iters = arith::DivUIOp::create(b, addI(b, count, constI32(b, tpi - 1)),
                                       constI32(b, tpi));

  // --- Queries, pre-scaled into the log2 domain -----------------------------
  double qScale = shape.scale * M_LOG2E;
  SmallVector<SmallVector<Value>> q;
  for (int64_t h = 0; h < gc(); ++h) {
    Value raw =
        loadVector(b, query, headOffset(b, addIndex(b, head0, h), dvec), W);
    Value qf = mulF(b, extToF32(b, raw), splat(b, constF32(b, qScale), W));
    q.emplace_back();
    for (int64_t e = 0; e < W; ++e) {
      Value x = vector::ExtractOp::create(b, qf, e);
      if (laneActive)
        x = select(b, laneActive, x, constF32(b, 0.0));
      q.back().push_back(x);
    }
  }

  SoftmaxState st = emitMainLoop(b, q, start, end, iters);

  // --- Merge the row groups of each warp ------------------------------------
  for (int32_t off = lpr; off < 32; off *= 2) {
    SmallVector<Value> mine = st.flatten(), theirs;
    for (Value x : mine)
      theirs.push_back(
          gpu::ShuffleOp::create(b, x, off, 32, gpu::ShuffleMode::XOR)
              .getShuffleResult());
    mergeStates(b, st, SoftmaxState::unflatten(theirs, gc(), W));
  }

  // --- Merge the warps through shared memory --------------------------------
  Value writer = cmpI(b, arith::CmpIPredicate::eq, rowInWarp, constIndex(b, 0));
  if (laneActive)
    writer = arith::AndIOp::create(b, writer, laneActive);
  ifThen(b, writer, [&](ImplicitLocOpBuilder &ib) {
    for (int64_t h = 0; h < gc(); ++h) {
      Value vec = vector::FromElementsOp::create(
          ib, VectorType::get({W}, ib.getF32Type()), st.acc[h]);
      Value idx = addIndex(
          ib, mulIndex(ib, addIndex(ib, mulIndex(ib, warp, gc()), h), d),
          mulIndex(ib, dvec, W));
      storeVector(ib, vec, smem, idx);
    }
  });
  ifThen(b, cmpI(b, arith::CmpIPredicate::eq, lane, constIndex(b, 0)),
         [&](ImplicitLocOpBuilder &ib) {
           for (int64_t h = 0; h < gc(); ++h) {
             Value idx = addIndex(ib, mulIndex(ib, warp, gc()), h);
             storeScalar(ib, st.m[h], smem, addIndex(ib, idx, smemMaxBase()));
             storeScalar(ib, st.l[h], smem, addIndex(ib, idx, smemSumBase()));
           }
         });
  barrier(b);

  // The CTA's (m, l, o) for slot (h, dv), merged over warps.
  auto mergedSlot = [&](ImplicitLocOpBuilder &ib, Value h, Value dv, Value &m,
                        Value &l, Value &o) {
    SmallVector<Value> mw, lw;
    m = negInf(ib);
    for (int64_t w = 0; w < numWarps(); ++w) {
      mw.push_back(
          loadScalar(ib, smem, addIndex(ib, h, w * gc() + smemMaxBase())));
      lw.push_back(
          loadScalar(ib, smem, addIndex(ib, h, w * gc() + smemSumBase())));
      m = maxF32(ib, m, mw.back());
    }
    Value ms = safeMax(ib, m);
    l = constF32(ib, 0.0);
    o = nullptr;
    for (int64_t w = 0; w < numWarps(); ++w) {
      Value a = exp2F32(ib, subF(ib, mw[w], ms));
      l = fma(ib, lw[w], a, l);
      Value idx = addIndex(ib, mulIndex(ib, addIndex(ib, h, w * gc()), d),
                           mulIndex(ib, dv, W));
      Value ow = mulF(ib, loadVector(ib, smem, idx, W), splat(ib, a, W));
      o = o ? addF(ib, o, ow) : ow;
    }
  };

  Value single = cmpI(b, arith::CmpIPredicate::eq, numSplits, one);
  ifThenElse(
      b, single,
      [&](ImplicitLocOpBuilder &ib) {
        // One split: normalise and write the output directly.
        emitStoreSlots(ib, [&](ImplicitLocOpBuilder &sb, Value h, Value dv) {
          Value m, l, o;
          mergedSlot(sb, h, dv, m, l, o);
          storeNormalized(sb, o, l, addIndex(sb, head0, h), dv);
        });
      },
      [&](ImplicitLocOpBuilder &ib) {
        // Several splits: write the unnormalised partial and the statistics.
        emitStoreSlots(ib, [&](ImplicitLocOpBuilder &sb, Value h, Value dv) {
          Value m, l, o;
          mergedSlot(sb, h, dv, m, l, o);
          Value rs =
              addIndex(sb, partialRow(sb, addIndex(sb, head0, h)), split);
          storeVector(sb, o, partialOut,
                      addIndex(sb, mulIndex(sb, rs, d), mulIndex(sb, dv, W)));
          ifThen(sb, cmpI(sb, arith::CmpIPredicate::eq, dv, constIndex(sb, 0)),
                 [&](ImplicitLocOpBuilder &tb) {
                   Value statIdx = mulIndex(tb, rs, 2);
                   storeScalar(tb, m, partialStats, statIdx);
                   storeScalar(tb, l, partialStats, addIndex(tb, statIdx, 1));
                 });
        });
        // Publish the partial, then count this split's arrival.
        fenceGPU(ib);
        barrier(ib);
        ifThen(
            ib, cmpI(ib, arith::CmpIPredicate::eq, tid, constIndex(ib, 0)),
            [&](ImplicitLocOpBuilder &tb) {
              Value counterIdx = addIndex(
                  tb, mulIndex(tb, seq, shape.numKvHeads * sched.headBlocks),
                  gridY);
              Value old = memref::AtomicRMWOp::create(
                  tb, arith::AtomicRMWKind::addi, constI32(tb, 1), counters,
                  ValueRange{counterIdx});
              Value last =
                  cmpI(tb, arith::CmpIPredicate::eq, old,
                       arith::SubIOp::create(tb, numSplits, constI32(tb, 1)));
              storeScalar(tb, arith::ExtUIOp::create(tb, tb.getI32Type(), last),
                          smemFlag, constIndex(tb, 0));
              // The last CTA resets the counter for the next launch.
              ifThen(tb, last, [&](ImplicitLocOpBuilder &rb) {
                memref::AtomicRMWOp::create(rb, arith::AtomicRMWKind::assign,
                                            constI32(rb, 0), counters,
                                            ValueRange{counterIdx});
              });
            });
        barrier(ib);
        Value flag = loadScalar(ib, smemFlag, constIndex(ib, 0));
        ifThen(ib, cmpI(ib, arith::CmpIPredicate::ne, flag, constI32(ib, 0)),
               [&](ImplicitLocOpBuilder &lb) {
                 // Acquire: order the reads of the other splits' partials
                 // after the counter.
                 fenceGPU(lb);
                 emitStoreSlots(lb, [&](ImplicitLocOpBuilder &sb, Value h,
                                        Value dv) { emitCombine(sb, h, dv); });
               });
      });
}

} // namespace

FailureOr<KernelLaunch>
mlir::fusion::emitAttentionKernel(KernelOp kernel, gpu::GPUModuleOp module) {
  // --- The one op of the kernel ----------------------------------------------
  DecodeAttentionOp op;
  for (Operation &nested : kernel.getBody().front().without_terminator()) {
    auto attention = dyn_cast<DecodeAttentionOp>(nested);
    if (!attention || op)
      return kernel.emitOpError()
             << "attention emitter: the kernel must hold exactly one "
                "fusion.decode_attention and nothing else, found '"
             << nested.getName() << "'";
    op = attention;
  }
  if (!op)
    return kernel.emitOpError()
           << "attention emitter: no fusion.decode_attention in the kernel";
  Block &body = kernel.getBody().front();
  SmallVector<unsigned> operandArgs;
  for (Value operand : op->getOperands()) {
    auto arg = dyn_cast<BlockArgument>(operand);
    if (!arg || arg.getOwner() != &body)
      return kernel.emitOpError()
             << "attention emitter: every operand of fusion.decode_attention "
                "must be a kernel operand";
    operandArgs.push_back(arg.getArgNumber());
  }
  if (operandArgs[1] == operandArgs[2])
    return kernel.emitOpError()
           << "attention emitter: key_cache and value_cache must be distinct "
              "kernel operands";
  YieldOp yield = kernel.getYield();
  int resultIndex = -1;
  for (auto [index, value] : llvm::enumerate(yield.getValues()))
    if (value == op.getResult()) {
      if (resultIndex >= 0)
        return kernel.emitOpError()
               << "attention emitter: the attention result is yielded twice";
      resultIndex = static_cast<int>(index);
    }
  if (resultIndex < 0 || yield.getValues().size() != 1)
    return kernel.emitOpError()
           << "attention emitter: the kernel must yield exactly the "
              "attention output";

  // --- Shape
  // ------------------------------------------------------------------
  AttentionShape shape;
  auto queryType = op.getQuery().getType();
  auto cacheType = op.getKeyCache().getType();
  shape.numHeads = queryType.getDimSize(1);
  shape.headDim = queryType.getDimSize(2);
  shape.numKvHeads = cacheType.getDimSize(2);
  shape.pageSize = cacheType.getDimSize(1);
  shape.group = shape.numHeads / shape.numKvHeads;
  shape.elementType = queryType.getElementType();
  shape.scale = op.getEffectiveScale();
  if (shape.headDim % AttentionSchedule::vectorWidth != 0)
    return kernel.emitOpError()
           << "attention emitter: head_dim " << shape.headDim
           << " is not a multiple of 8 (K/V rows are read as 16-byte "
              "vectors)";
  if (shape.headDim > kMaxHeadDim)
    return kernel.emitOpError()
           << "attention emitter: head_dim " << shape.headDim
           << " is larger than " << kMaxHeadDim;
  std::optional<int64_t> pageHeads =
      llvm::checkedMul(shape.pageSize, shape.numKvHeads);
  std::optional<int64_t> pageElements =
      pageHeads ? llvm::checkedMul(*pageHeads, shape.headDim) : std::nullopt;
  if (!pageElements || *pageElements > std::numeric_limits<int32_t>::max())
    return kernel.emitOpError()
           << "attention emitter: a page of " << shape.pageSize << " x "
           << shape.numKvHeads << " x " << shape.headDim
           << " elements is too large (in-page offsets are 32-bit)";
  if (!shape.elementType.isF16() && !shape.elementType.isBF16())
    return kernel.emitOpError()
           << "attention emitter: unsupported element type "
           << shape.elementType;

  FailureOr<AttentionSchedule> sched = chooseSchedule(kernel, shape);
  if (failed(sched))
    return failure();
  // About one wave of resident CTAs (2 per SM): more splits than that ran
  // slower in the sweep (a second, partial wave).
  sched->splitPolicy.targetCtas =
      contract::kTargetCtasPerSM * getSMCount(module);

  // --- Parameters
  // ---------------------------------------------------------------
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32);
  SmallVector<KernelParam> params = getDefaultKernelParams(kernel);
  auto firstScalar = llvm::find_if(params, [](const KernelParam &p) {
    return p.kind == KernelParam::Kind::Scalar;
  });
  size_t workspaceIndex = firstScalar - params.begin();
  namespace role = contract::role;
  const std::string batch(contract::dim::kBatch),
      numSplits(contract::dim::kNumSplits);
  std::string hq = std::to_string(shape.numHeads),
              ms = std::to_string(sched->maxSplits),
              dim = std::to_string(shape.headDim);
  SmallVector<KernelParam> workspace{
      {KernelParam::Kind::Workspace,
       std::string(role::kPartialOut),
       f32,
       {batch, hq, ms, dim}},
      {KernelParam::Kind::Workspace,
       std::string(role::kPartialStats),
       f32,
       {batch, hq, ms, "2"}},
      {KernelParam::Kind::Workspace,
       std::string(role::kSplitCounters),
       i32,
       {batch, std::to_string(shape.numKvHeads * sched->headBlocks)},
       /*zeroInitialized=*/true},
  };
  params.insert(params.begin() + workspaceIndex, workspace.begin(),
                workspace.end());
  params.push_back({KernelParam::Kind::Scalar, numSplits, i32, {}});

  // --- The gpu.func
  // -------------------------------------------------------------
  ImplicitLocOpBuilder b(kernel.getLoc(), context);
  gpu::GPUFuncOp func = createKernelFunc(
      b, kernel.getLoc(), module, kernel.getSymName(), params, sched->threads);
  AttentionEmitter emitter;
  emitter.shape = shape;
  emitter.sched = *sched;
  emitter.query = func.getArgument(operandArgs[0]);
  emitter.keyCache = func.getArgument(operandArgs[1]);
  emitter.valueCache = func.getArgument(operandArgs[2]);
  emitter.blockTable = func.getArgument(operandArgs[3]);
  emitter.seqLens = func.getArgument(operandArgs[4]);
  unsigned numInputs = kernel.getInputs().size();
  emitter.output = func.getArgument(numInputs + resultIndex);
  emitter.partialOut = func.getArgument(workspaceIndex);
  emitter.partialStats = func.getArgument(workspaceIndex + 1);
  emitter.counters = func.getArgument(workspaceIndex + 2);
  auto scalarArg = [&](StringRef role) {
    return func.getArgument(findParam(params, role));
  };
  emitter.batchArg = scalarArg(contract::dim::kBatch);
  emitter.maxPagesArg = scalarArg(contract::dim::kMaxPages);
  emitter.numSplitsArg = scalarArg(contract::dim::kNumSplits);
  emitter.smem = addWorkgroupBuffer(func, f32, sched->sharedFloats);
  // Vector accesses (vector<8xf32>) to the merge buffer: align it (the default
  // alignment of a workgroup global is its element's).
  func.setWorkgroupAttributionAttr(func.getNumWorkgroupAttributions() - 1,
                                   LLVM::LLVMDialect::getAlignAttrName(),
                                   b.getI64IntegerAttr(32));
  emitter.smemFlag = addWorkgroupBuffer(func, i32, 1);
  emitter.emitBody(b);

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.grid = {numSplits,
                 std::to_string(shape.numKvHeads * sched->headBlocks), batch};
  launch.blockSize = sched->threads;
  launch.dynamicSharedBytes = 0;
  launch.params = std::move(params);
  launch.schedule = getScheduleAttr(context, *sched);
  return launch;
}
