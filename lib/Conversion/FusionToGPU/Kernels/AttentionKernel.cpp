//===- AttentionKernel.cpp - split-KV GQA decode attention ----------------===//
//
// Emits the gpu.func of a fusion.kernel that holds one
// fusion.decode_attention: flash-decoding (split-KV) grouped-query attention
// over the paged KV cache, with the combine of the splits in the same kernel.
//
// Semantics (design.md section 2.1, FusionOps.td DecodeAttentionOp):
//   o[b, h] = softmax(q[b, h] . K[b, 0..len_b)^T * scale) V[b, 0..len_b)
// with kv_head = h / G (G = Hq / Hkv), token t of sequence b at page
// block_table[b, t / P], slot t % P. Only tokens below len_b contribute
// (the tensor-core variant's CTA ring copies whole 16-token tiles and masks
// the slots past len_b); len_b = 0 gives zeros.
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
// 2 * unroll K and V loads are issued before any arithmetic (the first
// iteration is peeled so that its K/V loads go out before the query's: q is
// the previous kernel's output, and both come from L2 in one round trip
// instead of two). The dot
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
// last of a sequence runs only full iterations. The num_splits policy's
// min_chunk_tokens is at least tokens_per_iter (AttentionSchedule.cpp), so
// that the policy does not ask for splits the rounding leaves empty. Tokens
// past the end of a split are clamped to its last token (an L1/L2 hit) and
// masked to -inf, so K/V at or past seq_lens[b] is never read (by the CUDA-
// core loop; the CTA ring reads and masks it) and NaN there cannot leak. Page
// addressing is 64-bit: page * (P * Hkv * D) in `index` (i64).
//
// With programmatic dependent launch (sm_90), everything that depends only on
// step inputs no kernel writes is done before griddepcontrol.wait: the
// split's tokens (seq_lens), the block-table pages and so the cache offsets
// of the first iteration's K/V entries (CUDA-core loop), and an L2 prefetch
// of a short split's K/V; after the wait the first iteration reads only q and
// K/V (later iterations, and the tensor-core loop, read their block-table
// pages as they go).
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
//   L = sum_s l_s w_s, o = sum_s w_s o_s / L   (o = 0 when L = 0),
// in one pass over rounds of 8 splits whose loads are all issued first (one
// L2 round trip per round; the running M rescales L and o between rounds).
// The counters must be zero before the first launch; the kernel leaves them
// zero.
//
// Where the launch makes the splits of each (sequence, KV head, head block)
// one thread-block cluster (sm_90: cluster x = grid x = num_splits <=
// cluster_splits, docs/abi.md 3.4), the splits skip the workspaces: each CTA
// stores its partial and statistics into the exchange buffer of the
// cluster's CTA 0 through distributed shared memory (st.shared::cluster)
// and arrives on the cluster barrier; CTA 0 waits and runs the same combine
// from its own shared memory (one round: at most 8 splits). So the combine
// costs one cluster barrier instead of a fence, an atomic and an L2 round
// trip of loads. The barrier's first phase, arrived at before
// griddepcontrol.wait and waited for before the stores, guarantees that CTA 0
// has started; the others exit after arriving. A launch without clusters
// (another runtime, more splits than cluster_splits) takes the workspace
// path, with the same result bit for bit.
//
// With a fused fusion.linear_partials (o_proj, rule 6 of
// --fusion-form-kernels) the kernel yields p[b, g, n], the fp32 projection
// of its head block g's outputs (rounded to the element type first, as the
// attention op's result is) by W_o, instead of the outputs. The combined
// heads go to shared memory (headOut) and every row n of W_o over the
// block's Gc * D columns is a dot product of 8 lanes, summed by shuffles
// (emitOutputProjection). On the cluster path every CTA receives every
// split's partial, combines, and projects the rows of its split's share
// (ceil(H / num_splits) rows); the single-split and workspace paths project
// every row in the CTA that holds the heads. Before griddepcontrol.wait (no
// kernel writes W_o) the CTAs of sequence 0 prefetch their share into L2
// and the CUDA-core kernel loads its first round of rows into registers.
//
//===----------------------------------------------------------------------===//

#include "AttentionMma.h"

#include "../Fragments/Abi.h"
#include "../Fragments/AsyncCopy.h"
#include "../Fragments/Cluster.h"
#include "../Fragments/PagedKV.h"
#include "../Fragments/Reduce.h"
#include "../KernelEmitter.h"
#include "../Schedule/AttentionSchedule.h"

#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>
#include <limits>
#include <tuple>

using namespace mlir;
using namespace mlir::fusion;

namespace {

constexpr int64_t kMaxHeadDim = 256;

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
// Schedule
//===----------------------------------------------------------------------===//

/// The overrides `kernel` carries: the threads, max_splits, kv_unroll and
/// heads_per_cta of its #fusion.split_kv_attention_schedule, if it has one
/// (--convert-fusion-to-gpu then checks that the schedule chosen with them
/// is the one it carries).
AttentionScheduleOverrides getOverrides(KernelOp kernel) {
  auto carried =
      dyn_cast_or_null<SplitKvAttentionScheduleAttr>(kernel.getScheduleAttr());
  if (!carried)
    return {};
  return {carried.getThreads(), carried.getMaxSplits(), carried.getKvUnroll(),
          carried.getHeadsPerCta(), carried.getClusterSplits()};
}

/// The schedule of `kernel`: chooseAttentionSchedule with the overrides of
/// the schedule it carries.
FailureOr<AttentionSchedule> getSchedule(KernelOp kernel,
                                         const AttentionShape &shape,
                                         const TargetInfo &target) {
  std::string error;
  std::optional<AttentionSchedule> s =
      chooseAttentionSchedule(shape, getOverrides(kernel), target, error);
  if (!s)
    return kernel.emitOpError() << error;
  return *s;
}

/// The #fusion.split_kv_attention_schedule of `s`.
FailureOr<SplitKvAttentionScheduleAttr>
getScheduleAttr(KernelOp kernel, const AttentionSchedule &s) {
  return getCheckedSchedule<SplitKvAttentionScheduleAttr>(
      kernel, s.threads, s.maxSplits, s.headsPerCta, s.headBlocks,
      AttentionSchedule::vectorWidth, s.lanesPerRow, s.unroll, s.tokensPerIter,
      s.splitPolicy.targetCtas, s.splitPolicy.minChunkTokens, s.clusterSplits);
}

/// The #fusion.split_kv_attention_mma_schedule of the tensor-core variant.
FailureOr<SplitKvAttentionMmaScheduleAttr>
getMmaScheduleAttr(KernelOp kernel, const AttentionSchedule &s) {
  return getCheckedSchedule<SplitKvAttentionMmaScheduleAttr>(
      kernel, s.threads, s.maxSplits, s.headsPerCta, s.headBlocks,
      s.tokensPerIter, s.stages, s.splitPolicy.targetCtas,
      s.splitPolicy.minChunkTokens, s.clusterSplits, s.ctaRing);
}

//===----------------------------------------------------------------------===//
// The kernel body
//===----------------------------------------------------------------------===//

/// The K/V vectors a row group loads in one iteration, and whether each
/// token is below the split's end.
struct IterationLoads {
  SmallVector<Value> valid, k, v;
};

struct AttentionKernel {
  AttentionShape shape;
  Type elementType;
  double scale = 0.0;
  AttentionSchedule sched;
  gpu::GPUModuleOp module;
  gpu::GPUFuncOp func;

  // Kernel arguments. With a fused fusion.linear_partials (o_proj), `output`
  // is null and the head outputs go to `headOut` (shared, [Gc][D] f32), and
  // from there, projected by `oWeight` ([H, Hq * D]), to `projOut`
  // ([B, Hkv * head_blocks, H] f32).
  Value query, keyCache, valueCache, blockTable, seqLens, output;
  Value oWeight, projOut, headOut;
  int64_t outFeatures = 0;
  Value partialOut, partialStats, counters;
  Value batchArg, maxPagesArg, numSplitsArg;
  // The caches' tensor maps (the CTA ring's; else null).
  Value keyCacheMap, valueCacheMap;
  // Shared memory: the cross-warp merge ([warps][Gc][D] accumulators, then
  // [warps][Gc] maxima, then [warps][Gc] sums), the "last CTA" flag and,
  // with sched.clusterSplits, the cluster combine's exchange buffer
  // ([clusterSplits][Gc][D] accumulators, then [clusterSplits][Gc][2]
  // statistics (m, l)).
  Value smem, smemFlag, exchange;

  static constexpr int64_t W = AttentionSchedule::vectorWidth;
  int64_t gc() const { return sched.headsPerCta; }
  int64_t numWarps() const { return sched.stateWarps(); }
  int64_t smemMaxBase() const { return numWarps() * gc() * shape.headDim; }
  int64_t smemSumBase() const { return smemMaxBase() + numWarps() * gc(); }

  void emitBody(ImplicitLocOpBuilder &b);

private:
  /// Rows [begin, end) of the output projection that split `split` takes
  /// when the splits share it (the cluster path).
  std::pair<Value, Value> splitProjectionRows(ImplicitLocOpBuilder &b) {
    // ceil(H / num_splits) rows per split.
    Value ns = i32ToIndex(b, numSplits);
    Value h = constIndex(b, outFeatures);
    Value rows = divUI(b, addI(b, h, subI(b, ns, constIndex(b, 1))), ns);
    Value begin = minUI(b, mulI(b, split, rows), h);
    return {begin, minUI(b, addI(b, begin, rows), h)};
  }
  void prefetchOutputWeights(ImplicitLocOpBuilder &b);
  /// Rows of one round of the output projection per thread.
  static constexpr int64_t kProjectionRowsInFlight = 4;
  /// One round's rows (this thread's) and their W_o vectors [row][head].
  struct ProjectionRound {
    SmallVector<Value> rows;
    SmallVector<SmallVector<Value>> weights;
  };
  ProjectionRound loadProjectionRound(ImplicitLocOpBuilder &b, Value rowBegin,
                                      Value round);
  /// The CUDA-core kernel's first round of its split's W_o share, loaded
  /// into registers before griddepcontrol.wait (emitBody).
  std::optional<ProjectionRound> earlyRound;
  void emitOutputProjection(ImplicitLocOpBuilder &b, Value rowBegin,
                            Value rowEnd,
                            const ProjectionRound *first = nullptr);
  // Values shared by the phases of one CTA.
  Value tid, split, gridY, seq, kvHead, head0, lane, warp, laneInRow, rowInWarp,
      rowGroup, dvec, laneActive, numSplits;
  // The split's setup (emitSplitSetup): whether the CTA has a split, its
  // tokens [start, end) (i32) and, for the CUDA-core loop, the element
  // offsets of the first iteration's K/V entries (0 for an empty split).
  Value active, start, end;
  SmallVector<Value> firstOffsets;

  void emitThreadIds(ImplicitLocOpBuilder &b);
  Value emitIsActive(ImplicitLocOpBuilder &b);
  std::pair<Value, Value> getSplitTokens(ImplicitLocOpBuilder &b);
  void emitSplitSetup(ImplicitLocOpBuilder &b);
  void prefetchKV(ImplicitLocOpBuilder &b);
  void emitCta(ImplicitLocOpBuilder &b);
  SmallVector<SmallVector<Value>> loadQueries(ImplicitLocOpBuilder &b);
  SoftmaxState emitMainLoop(ImplicitLocOpBuilder &b, Value iters);
  /// The paged-cache reader of this CTA's sequence and the lane's element
  /// offset in a K/V row (loop invariants).
  std::pair<PagedKVReader, Value> getCacheReader(ImplicitLocOpBuilder &b);
  /// The element offsets of the K/V entries this row group reads in the
  /// iteration from token `tbase` (clamped to the split's last token,
  /// `splitEnd` - 1).
  SmallVector<Value> getIterationOffsets(ImplicitLocOpBuilder &b,
                                         const PagedKVReader &cache,
                                         Value laneOff, Value tbase,
                                         Value splitEnd);
  IterationLoads emitIterationLoads(ImplicitLocOpBuilder &b,
                                    ArrayRef<Value> offsets, Value tbase);
  SmallVector<SmallVector<Value>> emitScores(ImplicitLocOpBuilder &b,
                                             ArrayRef<SmallVector<Value>> q,
                                             ArrayRef<Value> kRaw);
  void updateSoftmax(ImplicitLocOpBuilder &b, SoftmaxState &st,
                     SmallVector<SmallVector<Value>> &scores,
                     const IterationLoads &loads);
  void mergeRowGroups(ImplicitLocOpBuilder &b, SoftmaxState &st);
  void writeWarpState(ImplicitLocOpBuilder &b, const SoftmaxState &st);
  void readMergedSlot(ImplicitLocOpBuilder &b, Value h, Value dv, Value &m,
                      Value &l, Value &o);
  void emitPartialAndCombine(ImplicitLocOpBuilder &b);
  void emitArrival(ImplicitLocOpBuilder &b);
  void emitWorkspaceCombine(ImplicitLocOpBuilder &b);
  void emitClusterCombine(ImplicitLocOpBuilder &b);
  void emitStoreSlots(
      ImplicitLocOpBuilder &b,
      llvm::function_ref<void(ImplicitLocOpBuilder &, Value head, Value dv)>
          body);
  /// Stores `value` (o: vector<8xf32>, or m / l: f32) at element `at` of
  /// the partials' destination.
  using PartialStore =
      llvm::function_ref<void(ImplicitLocOpBuilder &, Value value, Value at)>;
  void emitStorePartial(
      ImplicitLocOpBuilder &b,
      llvm::function_ref<Value(ImplicitLocOpBuilder &, Value h)> rowOf,
      PartialStore storeOut, PartialStore storeStat, int64_t statBase);
  /// Split s's unnormalised partial of slot (h, dv): (m, l, o).
  using SplitLoader = llvm::function_ref<std::tuple<Value, Value, Value>(
      ImplicitLocOpBuilder &, Value h, Value dv, Value s)>;
  void emitCombine(ImplicitLocOpBuilder &b, Value h, Value dv,
                   SplitLoader load);
  /// Offset of element 8*dv of head `head` of sequence `seq` in a
  /// [B, Hq, D] tensor.
  Value headOffset(ImplicitLocOpBuilder &b, Value head, Value dv) {
    Value row = addI(b, mulI(b, seq, shape.numHeads), head);
    return addI(b, mulI(b, row, shape.headDim), mulI(b, dv, W));
  }
  /// Index of (seq, head, split 0) in the [B, Hq, max_splits] partial grid.
  Value partialRow(ImplicitLocOpBuilder &b, Value head) {
    Value row = addI(b, mulI(b, seq, shape.numHeads), head);
    return mulI(b, row, sched.maxSplits);
  }
  /// (m, l, o) of partial row `row` at vector `dv`: o from the [rows][D]
  /// accumulators `out`, (m, l) from the [rows][2] statistics at element
  /// `statBase` of `stats`.
  std::tuple<Value, Value, Value> loadPartial(ImplicitLocOpBuilder &b,
                                              Value out, Value stats,
                                              int64_t statBase, Value row,
                                              Value dv) {
    // o first, then l, then m: the order of the measured build (entry 30).
    Value o = loadVector(
        b, out, addI(b, mulI(b, row, shape.headDim), mulI(b, dv, W)), W);
    Value stat = addI(b, mulI(b, row, 2), statBase);
    Value l = loadScalar(b, stats, addI(b, stat, 1));
    return {loadScalar(b, stats, stat), l, o};
  }
  /// Writes o * (1 / l) (zeros when l = 0), rounded to the element type,
  /// as vector `dv` of the CTA's head `h` to the output (or, extended back
  /// to f32, to `headOut` for the output projection).
  void storeNormalized(ImplicitLocOpBuilder &b, Value acc, Value l, Value h,
                       Value dv) {
    Value head = projOut ? Value() : addI(b, head0, h);
    Value positive = cmpF(b, CmpFPredicate::OGT, l, constF32(b, 0.0));
    Value inv =
        select(b, positive, divF(b, constF32(b, 1.0), l), constF32(b, 0.0));
    Value o = mulF(b, acc, splat(b, inv, W));
    if (projOut) {
      Value at = addI(b, mulI(b, h, shape.headDim), mulI(b, dv, W));
      storeVector(b, extToF32(b, truncFromF32(b, o, elementType)), headOut, at);
      return;
    }
    Value at = headOffset(b, head, dv);
    storeVector(b, truncFromF32(b, o, elementType), output, at);
  }
};

/// The ids of this thread's CTA, warp, row group and vector.
void AttentionKernel::emitThreadIds(ImplicitLocOpBuilder &b) {
  const int64_t lpr = sched.lanesPerRow, rpw = sched.rowsPerWarp,
                nv = sched.numVecs;
  tid = threadIdX(b);
  split = blockIdX(b);
  gridY = blockIdY(b);
  seq = blockIdZ(b);
  kvHead = gridY;
  Value headBlock = constIndex(b, 0);
  if (sched.headBlocks > 1) {
    kvHead = divUI(b, gridY, constIndex(b, sched.headBlocks));
    headBlock = remUI(b, gridY, constIndex(b, sched.headBlocks));
  }
  head0 = addI(b, mulI(b, kvHead, shape.group), mulI(b, headBlock, gc()));
  lane = remUI(b, tid, constIndex(b, 32));
  warp = divUI(b, tid, constIndex(b, 32));
  laneInRow = lane;
  rowInWarp = constIndex(b, 0);
  if (rpw > 1) {
    laneInRow = remUI(b, lane, constIndex(b, lpr));
    rowInWarp = divUI(b, lane, constIndex(b, lpr));
  }
  rowGroup = addI(b, mulI(b, warp, rpw), rowInWarp);
  dvec = laneInRow;
  laneActive = nullptr;
  if (nv != lpr) {
    dvec = minUI(b, laneInRow, constIndex(b, nv - 1));
    laneActive = cmpI(b, CmpIPredicate::ult, laneInRow, constIndex(b, nv));
  }
}

/// Sets numSplits (num_splits clamped to [1, max_splits]) and returns
/// whether this CTA has a split to do: CTAs past it (a launch with a larger
/// grid) or past the batch do nothing.
Value AttentionKernel::emitIsActive(ImplicitLocOpBuilder &b) {
  numSplits = maxSI(b, minSI(b, numSplitsArg, constI32(b, sched.maxSplits)),
                    constI32(b, 1));
  return andI(b, cmpI(b, CmpIPredicate::slt, indexToI32(b, split), numSplits),
              cmpI(b, CmpIPredicate::slt, indexToI32(b, seq), batchArg));
}

/// This CTA's tokens [start, end) (i32): split s covers [s * chunk,
/// min(len, (s + 1) * chunk)), see the file comment.
std::pair<Value, Value>
AttentionKernel::getSplitTokens(ImplicitLocOpBuilder &b) {
  const int64_t tpi = sched.tokensPerIter;
  Value len = maxSI(b, loadScalar(b, seqLens, seq), constI32(b, 0));
  Value one = constI32(b, 1);
  Value perSplit = divUI(b, addI(b, len, subI(b, numSplits, one)), numSplits);
  Value chunk = mulI(
      b, divUI(b, addI(b, perSplit, constI32(b, tpi - 1)), constI32(b, tpi)),
      constI32(b, tpi));
  Value start = mulI(b, indexToI32(b, split), chunk);
  return {start, minSI(b, len, addI(b, start, chunk))};
}

/// Sets `active`, `start`, `end` and `firstOffsets` (in a branch that reads
/// nothing for a CTA without a split). Built before griddepcontrol.wait where
/// the kernel has one: seq_lens and the block table are step inputs that no
/// kernel writes, so that after the wait the first iteration reads only q and
/// K/V.
void AttentionKernel::emitSplitSetup(ImplicitLocOpBuilder &b) {
  emitThreadIds(b);
  active = emitIsActive(b);
  const int64_t numOffsets = sched.tensorCores ? 0 : sched.unroll;
  SmallVector<Type> types(2, b.getI32Type());
  types.append(numOffsets, b.getIndexType());
  auto zeros = [&](ImplicitLocOpBuilder &zb, TypeRange zeroTypes) {
    return llvm::map_to_vector(zeroTypes, [&](Type t) -> Value {
      return arith::ConstantOp::create(zb, cast<TypedAttr>(zb.getZeroAttr(t)));
    });
  };
  SmallVector<Value> values = ifThenElseValues(
      b, types, active,
      [&](ImplicitLocOpBuilder &ib) {
        auto [first, last] = getSplitTokens(ib);
        SmallVector<Value> v{first, last};
        if (!numOffsets)
          return v;
        TypeRange offsetTypes = TypeRange(types).drop_front(2);
        llvm::append_range(
            v, ifThenElseValues(
                   ib, offsetTypes, cmpI(ib, CmpIPredicate::slt, first, last),
                   [&](ImplicitLocOpBuilder &ob) {
                     auto [cache, laneOff] = getCacheReader(ob);
                     return getIterationOffsets(ob, cache, laneOff, first,
                                                last);
                   },
                   [&](ImplicitLocOpBuilder &zb) {
                     return zeros(zb, offsetTypes);
                   }));
        return v;
      },
      [&](ImplicitLocOpBuilder &zb) { return zeros(zb, types); });
  start = values[0];
  end = values[1];
  firstOffsets.assign(values.begin() + 2, values.end());
}

/// Before griddepcontrol.wait: where this CTA's split has at most one token
/// per thread and the grid's splits fit TargetInfo::kL2PrefetchBytes (each
/// CTA's cap: the budget / CTAs), thread t asks L2 for the K and V entries of
/// token start + t, so that the KV stream is done while the previous kernel
/// (which appends this step's entry) runs; a larger split prefetches
/// nothing (its head would be evicted by the streams before it, as for the
/// weights: shouldPrefetchWeights). The history was written by earlier
/// steps (for the rows of a prefill chunk, partly by this step's front half:
/// docs/abi.md section 1.1); an entry appended this step may be fetched
/// before or after its write, which L2, where both meet, keeps coherent.
void AttentionKernel::prefetchKV(ImplicitLocOpBuilder &b) {
  const int64_t d = shape.headDim;
  const int64_t entryBytes = d * getTypeBytes(elementType);
  ifThen(b, active, [&](ImplicitLocOpBuilder &ib) {
    // The grid: (num_splits, Hkv * head_blocks, batch).
    Value ctas = mulI(ib, mulI(ib, gridDimX(ib), i32ToIndex(ib, batchArg)),
                      shape.numKvHeads * sched.headBlocks);
    Value cap = minUI(
        ib,
        divUI(ib,
              constIndex(ib, TargetInfo::kL2PrefetchBytes / (2 * entryBytes)),
              ctas),
        constIndex(ib, sched.threads));
    Value fits = cmpI(
        ib, CmpIPredicate::ule,
        i32ToIndex(ib, maxSI(ib, subI(ib, end, start), constI32(ib, 0))), cap);
    Value token = addI(ib, start, indexToI32(ib, tid));
    Value wanted = andI(ib, fits, cmpI(ib, CmpIPredicate::slt, token, end));
    ifThen(ib, wanted, [&](ImplicitLocOpBuilder &tb) {
      PagedKVReader cache(tb, {shape.pageSize, shape.numKvHeads, d}, blockTable,
                          maxPagesArg, seq);
      Value byte = mulI(
          tb, cache.getOffset(tb, token, indexToI32(tb, mulI(tb, kvHead, d))),
          getTypeBytes(elementType));
      for (Value cacheBuffer : {keyCache, valueCache})
        prefetchToL2(tb,
                     offsetPointer(tb, getGlobalPointer(tb, cacheBuffer), byte),
                     entryBytes);
    });
  });
}

void AttentionKernel::emitBody(ImplicitLocOpBuilder &b) {
  active = nullptr; // this function's, not an earlier variant's
  earlyRound.reset();
  // The CUDA-core kernel (batches 1 to 3, at most a few CTAs per SM) holds
  // its first round of W_o rows in registers through the loop: the loads
  // overlap the previous kernel instead of following the combine.
  auto loadEarly = [&](ImplicitLocOpBuilder &eb) {
    if (projOut && !sched.tensorCores)
      earlyRound = loadProjectionRound(eb, splitProjectionRows(eb).first,
                                       constIndex(eb, 0));
  };
  emitBeforeGridDependencyWait(b, [&](ImplicitLocOpBuilder &pb) {
    // The first phase of the cluster combine's barrier: this CTA has started
    // (emitClusterCombine).
    if (sched.clusterSplits)
      arriveCluster(pb, /*relaxed=*/true);
    emitSplitSetup(pb);
    prefetchKV(pb);
    if (projOut)
      prefetchOutputWeights(pb);
    loadEarly(pb);
  });
  if (!active) { // no griddepcontrol prologue (before sm_90)
    if (sched.clusterSplits)
      arriveCluster(b, /*relaxed=*/true);
    emitSplitSetup(b);
    loadEarly(b);
  }
  ifThen(b, active, [&](ImplicitLocOpBuilder &ib) { emitCta(ib); });
}

std::pair<PagedKVReader, Value>
AttentionKernel::getCacheReader(ImplicitLocOpBuilder &b) {
  const int64_t d = shape.headDim;
  PagedKVReader cache(b, {shape.pageSize, shape.numKvHeads, d}, blockTable,
                      maxPagesArg, seq);
  return {cache, indexToI32(b, addI(b, mulI(b, kvHead, d), mulI(b, dvec, W)))};
}

SmallVector<Value>
AttentionKernel::getIterationOffsets(ImplicitLocOpBuilder &b,
                                     const PagedKVReader &cache, Value laneOff,
                                     Value tbase, Value splitEnd) {
  Value rowGroupI32 = indexToI32(b, rowGroup);
  Value lastToken = subI(b, splitEnd, constI32(b, 1));
  SmallVector<Value> offsets;
  for (int64_t j = 0; j < sched.unroll; ++j) {
    Value t =
        addI(b, tbase, addI(b, rowGroupI32, constI32(b, j * sched.rowGroups)));
    offsets.push_back(cache.getOffset(b, minSI(b, t, lastToken), laneOff));
  }
  return offsets;
}

/// Issues every K and V load of one iteration at `offsets`
/// (getIterationOffsets of tokens tbase + rowGroup + j * rowGroups) and says
/// which tokens are below the split's end.
IterationLoads AttentionKernel::emitIterationLoads(ImplicitLocOpBuilder &b,
                                                   ArrayRef<Value> offsets,
                                                   Value tbase) {
  IterationLoads loads;
  Value rowGroupI32 = indexToI32(b, rowGroup);
  for (int64_t j = 0; j < sched.unroll; ++j) {
    Value t =
        addI(b, tbase, addI(b, rowGroupI32, constI32(b, j * sched.rowGroups)));
    loads.valid.push_back(cmpI(b, CmpIPredicate::slt, t, end));
    loads.k.push_back(loadVector(b, keyCache, offsets[j], W));
    loads.v.push_back(loadVector(b, valueCache, offsets[j], W));
  }
  return loads;
}

/// Scores (log2 domain) [head][token]: partial dots, then the row-group sum.
SmallVector<SmallVector<Value>>
AttentionKernel::emitScores(ImplicitLocOpBuilder &b,
                            ArrayRef<SmallVector<Value>> q,
                            ArrayRef<Value> kRaw) {
  SmallVector<SmallVector<Value>> scores(gc());
  for (Value raw : kRaw) {
    Value kf = extToF32(b, raw);
    SmallVector<Value> k;
    for (int64_t e = 0; e < W; ++e)
      k.push_back(extract(b, kf, e));
    for (int64_t h = 0; h < gc(); ++h) {
      Value dot = mulF(b, q[h][0], k[0]);
      for (int64_t e = 1; e < W; ++e)
        dot = fma(b, q[h][e], k[e], dot);
      scores[h].push_back(dot);
    }
  }
  SmallVector<Value> flat;
  for (const SmallVector<Value> &row : scores)
    flat.append(row.begin(), row.end());
  warpReduceEach(b, flat, ReduceKind::Sum, sched.lanesPerRow);
  for (int64_t h = 0; h < gc(); ++h)
    for (size_t j = 0; j < kRaw.size(); ++j)
      scores[h][j] = flat[h * kRaw.size() + j];
  return scores;
}

/// The online softmax update of `st` with one iteration's scores and V.
void AttentionKernel::updateSoftmax(ImplicitLocOpBuilder &b, SoftmaxState &st,
                                    SmallVector<SmallVector<Value>> &scores,
                                    const IterationLoads &loads) {
  const int64_t u = sched.unroll;
  SmallVector<SmallVector<Value>> v;
  for (int64_t j = 0; j < u; ++j) {
    Value vf = extToF32(b, loads.v[j]);
    v.emplace_back();
    for (int64_t e = 0; e < W; ++e)
      v.back().push_back(extract(b, vf, e));
  }
  for (int64_t h = 0; h < gc(); ++h) {
    Value mx = st.m[h];
    for (int64_t j = 0; j < u; ++j) {
      scores[h][j] = select(b, loads.valid[j], scores[h][j], negInfF32(b));
      mx = maxF32(b, mx, scores[h][j]);
    }
    Value ms = safeMax(b, mx);
    Value alpha = exp2F32(b, subF(b, st.m[h], ms));
    Value l = mulF(b, st.l[h], alpha);
    SmallVector<Value> acc;
    for (int64_t e = 0; e < W; ++e)
      acc.push_back(mulF(b, st.acc[h][e], alpha));
    for (int64_t j = 0; j < u; ++j) {
      Value pj = exp2F32(b, subF(b, scores[h][j], ms));
      l = addF(b, l, pj);
      for (int64_t e = 0; e < W; ++e)
        acc[e] = fma(b, pj, v[j][e], acc[e]);
    }
    st.m[h] = mx;
    st.l[h] = l;
    st.acc[h] = acc;
  }
}

/// The CTA's loop over its split. The first iteration is peeled, from the
/// offsets emitSplitSetup computed (before the wait where there is one), so
/// that its K/V loads are issued before the queries are loaded (q is the
/// previous kernel's output; both come from L2 in one round trip, where the
/// loop would wait for q, then issue the K/V loads).
SoftmaxState AttentionKernel::emitMainLoop(ImplicitLocOpBuilder &b,
                                           Value iters) {
  SoftmaxState init;
  for (int64_t h = 0; h < gc(); ++h) {
    init.m.push_back(negInfF32(b));
    init.l.push_back(constF32(b, 0.0));
    init.acc.emplace_back(W, constF32(b, 0.0));
  }
  auto iterate = [&](ImplicitLocOpBuilder &ib, ArrayRef<SmallVector<Value>> q,
                     SoftmaxState st, const IterationLoads &loads) {
    SmallVector<SmallVector<Value>> scores = emitScores(ib, q, loads.k);
    updateSoftmax(ib, st, scores, loads);
    return st;
  };
  // The peeled iteration yields q (flat, [head][8]) and the state.
  SmallVector<Value> initValues(gc() * W, constF32(b, 0.0));
  llvm::append_range(initValues, init.flatten());
  SmallVector<Type> types(initValues.size(), b.getF32Type());
  SmallVector<Value> first = ifThenElseValues(
      b, types, cmpI(b, CmpIPredicate::sgt, iters, constI32(b, 0)),
      [&](ImplicitLocOpBuilder &ib) -> SmallVector<Value> {
        IterationLoads loads = emitIterationLoads(ib, firstOffsets, start);
        SmallVector<SmallVector<Value>> q = loadQueries(ib);
        SmallVector<Value> values;
        for (const SmallVector<Value> &row : q)
          llvm::append_range(values, row);
        llvm::append_range(values, iterate(ib, q, init, loads).flatten());
        return values;
      },
      [&](ImplicitLocOpBuilder &) { return initValues; });
  SmallVector<SmallVector<Value>> q;
  for (int64_t h = 0; h < gc(); ++h)
    q.emplace_back(first.begin() + h * W, first.begin() + (h + 1) * W);
  auto [cache, laneOff] = getCacheReader(b); // loop invariants
  SmallVector<Value> results = forLoopWithValues(
      b, constIndex(b, 1), i32ToIndex(b, iters), constIndex(b, 1),
      ArrayRef(first).drop_front(gc() * W),
      [&](ImplicitLocOpBuilder &lb, Value it,
          ValueRange args) -> SmallVector<Value> {
        Value tbase = addI(
            lb, start,
            mulI(lb, indexToI32(lb, it), constI32(lb, sched.tokensPerIter)));
        IterationLoads loads = emitIterationLoads(
            lb, getIterationOffsets(lb, cache, laneOff, tbase, end), tbase);
        return iterate(lb, q, SoftmaxState::unflatten(args, gc(), W), loads)
            .flatten();
      });
  return SoftmaxState::unflatten(results, gc(), W);
}

void AttentionKernel::emitStoreSlots(
    ImplicitLocOpBuilder &b,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body) {
  // Slot j = (head h, vector dv) of the CTA's Gc x D outputs.
  const int64_t slots = gc() * sched.numVecs;
  for (int64_t r = 0; r * sched.threads < slots; ++r) {
    Value j = addI(b, tid, r * sched.threads);
    auto emit = [&](ImplicitLocOpBuilder &ib) {
      Value h = divUI(ib, j, constIndex(ib, sched.numVecs));
      Value dv = remUI(ib, j, constIndex(ib, sched.numVecs));
      body(ib, h, dv);
    };
    if ((r + 1) * sched.threads <= slots)
      emit(b);
    else
      ifThen(b, cmpI(b, CmpIPredicate::ult, j, constIndex(b, slots)), emit);
  }
}

/// Combines the splits' partials of slot (h, dv) (`load`) and writes the
/// output, in one pass over rounds
/// of kCombineSplitsPerRound splits whose loads are all issued before any is
/// used (one L2 round trip per round; SmolLM2's step has at most 8 splits):
///   M' = max(M, m_s...), L = L 2^(M - M') + sum l_s 2^(m_s - M'),
///   O = O 2^(M - M') + sum o_s 2^(m_s - M')
/// (splits past num_splits count as empty: m = -inf, so w = 0).
void AttentionKernel::emitCombine(ImplicitLocOpBuilder &b, Value h, Value dv,
                                  SplitLoader load) {
  constexpr int64_t kCombineSplitsPerRound = 8;
  Type f32 = b.getF32Type();
  Value ns = i32ToIndex(b, numSplits);
  Value lastSplit = subI(b, ns, constIndex(b, 1));
  auto vecF32 = VectorType::get({W}, f32);
  Value zeroVec = arith::ConstantOp::create(
      b, vecF32, DenseElementsAttr::get(vecF32, b.getF32FloatAttr(0.0f)));
  SmallVector<Value> state = forLoopWithValues(
      b, constIndex(b, 0), ns, constIndex(b, kCombineSplitsPerRound),
      ValueRange{negInfF32(b), constF32(b, 0.0), zeroVec},
      [&](ImplicitLocOpBuilder &lb, Value s0,
          ValueRange args) -> SmallVector<Value> {
        SmallVector<Value> m, l, o;
        Value mx = args[0];
        for (int64_t u = 0; u < kCombineSplitsPerRound; ++u) {
          Value s = addI(lb, s0, u);
          auto [ms, ls, os] = load(lb, h, dv, minUI(lb, s, lastSplit));
          Value inRange = cmpI(lb, CmpIPredicate::ult, s, ns);
          m.push_back(select(lb, inRange, ms, negInfF32(lb)));
          l.push_back(ls);
          o.push_back(os);
        }
        for (Value ms : m)
          mx = maxF32(lb, mx, ms);
        Value ms = safeMax(lb, mx);
        Value alpha = exp2F32(lb, subF(lb, args[0], ms));
        Value sumL = mulF(lb, args[1], alpha);
        Value sumO = mulF(lb, args[2], splat(lb, alpha, W));
        for (int64_t u = 0; u < kCombineSplitsPerRound; ++u) {
          Value w = exp2F32(lb, subF(lb, m[u], ms));
          sumL = fma(lb, l[u], w, sumL);
          sumO = vector::FMAOp::create(lb, splat(lb, w, W), o[u], sumO);
        }
        return {mx, sumL, sumO};
      });
  storeNormalized(b, state[2], state[1], h, dv);
}

/// This CTA's queries, pre-scaled into the log2 domain: [head][8] f32.
SmallVector<SmallVector<Value>>
AttentionKernel::loadQueries(ImplicitLocOpBuilder &b) {
  double qScale = scale * M_LOG2E;
  SmallVector<SmallVector<Value>> q;
  for (int64_t h = 0; h < gc(); ++h) {
    Value raw = loadVector(b, query, headOffset(b, addI(b, head0, h), dvec), W);
    Value qf = mulF(b, extToF32(b, raw), splat(b, constF32(b, qScale), W));
    q.emplace_back();
    for (int64_t e = 0; e < W; ++e) {
      Value x = extract(b, qf, e);
      if (laneActive)
        x = select(b, laneActive, x, constF32(b, 0.0));
      q.back().push_back(x);
    }
  }
  return q;
}

/// Merges the row groups of each warp (shuffle xor across row groups).
void AttentionKernel::mergeRowGroups(ImplicitLocOpBuilder &b,
                                     SoftmaxState &st) {
  for (int32_t off = sched.lanesPerRow; off < 32; off *= 2) {
    SmallVector<Value> theirs;
    for (Value x : st.flatten())
      theirs.push_back(shuffleXor(b, x, off));
    mergeStates(b, st, SoftmaxState::unflatten(theirs, gc(), W));
  }
}

/// Writes each warp's merged state to shared memory for the cross-warp
/// merge, then synchronises the CTA.
void AttentionKernel::writeWarpState(ImplicitLocOpBuilder &b,
                                     const SoftmaxState &st) {
  const int64_t d = shape.headDim;
  Value writer = cmpI(b, CmpIPredicate::eq, rowInWarp, constIndex(b, 0));
  if (laneActive)
    writer = andI(b, writer, laneActive);
  ifThen(b, writer, [&](ImplicitLocOpBuilder &ib) {
    for (int64_t h = 0; h < gc(); ++h) {
      Value vec = vector::FromElementsOp::create(
          ib, VectorType::get({W}, ib.getF32Type()), st.acc[h]);
      Value idx = addI(ib, mulI(ib, addI(ib, mulI(ib, warp, gc()), h), d),
                       mulI(ib, dvec, W));
      storeVector(ib, vec, smem, idx);
    }
  });
  ifThen(b, cmpI(b, CmpIPredicate::eq, lane, constIndex(b, 0)),
         [&](ImplicitLocOpBuilder &ib) {
           for (int64_t h = 0; h < gc(); ++h) {
             Value idx = addI(ib, mulI(ib, warp, gc()), h);
             storeScalar(ib, st.m[h], smem, addI(ib, idx, smemMaxBase()));
             storeScalar(ib, st.l[h], smem, addI(ib, idx, smemSumBase()));
           }
         });
  barrier(b);
}

/// The CTA's (m, l, o) for slot (h, dv), merged over warps.
void AttentionKernel::readMergedSlot(ImplicitLocOpBuilder &ib, Value h,
                                     Value dv, Value &m, Value &l, Value &o) {
  const int64_t d = shape.headDim;
  SmallVector<Value> mw, lw;
  m = negInfF32(ib);
  for (int64_t w = 0; w < numWarps(); ++w) {
    mw.push_back(loadScalar(ib, smem, addI(ib, h, w * gc() + smemMaxBase())));
    lw.push_back(loadScalar(ib, smem, addI(ib, h, w * gc() + smemSumBase())));
    m = maxF32(ib, m, mw.back());
  }
  Value ms = safeMax(ib, m);
  l = constF32(ib, 0.0);
  o = nullptr;
  for (int64_t w = 0; w < numWarps(); ++w) {
    Value a = exp2F32(ib, subF(ib, mw[w], ms));
    l = fma(ib, lw[w], a, l);
    Value idx = addI(ib, mulI(ib, addI(ib, h, w * gc()), d), mulI(ib, dv, W));
    Value ow = mulF(ib, loadVector(ib, smem, idx, W), splat(ib, a, W));
    o = o ? addF(ib, o, ow) : ow;
  }
}

/// Thread 0 counts this split's arrival; the CTA that arrives last resets
/// the counter and raises `smemFlag`.
void AttentionKernel::emitArrival(ImplicitLocOpBuilder &b) {
  countArrival(
      b, tid, counters,
      [&](ImplicitLocOpBuilder &tb) {
        return addI(tb, mulI(tb, seq, shape.numKvHeads * sched.headBlocks),
                    gridY);
      },
      numSplits, smemFlag);
}

/// This CTA's merged (m, l, o) of every slot (h, dv), as partial row
/// `rowOf(h)`: o at element row * D + 8 dv (`storeOut`), and by the dv = 0
/// lane (m, l) at statBase + row * 2 (`storeStat`); the layout loadPartial
/// reads.
void AttentionKernel::emitStorePartial(
    ImplicitLocOpBuilder &b,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value h)> rowOf,
    PartialStore storeOut, PartialStore storeStat, int64_t statBase) {
  emitStoreSlots(b, [&](ImplicitLocOpBuilder &sb, Value h, Value dv) {
    Value m, l, o;
    readMergedSlot(sb, h, dv, m, l, o);
    Value row = rowOf(sb, h);
    storeOut(sb, o, addI(sb, mulI(sb, row, shape.headDim), mulI(sb, dv, W)));
    ifThen(sb, cmpI(sb, CmpIPredicate::eq, dv, constIndex(sb, 0)),
           [&](ImplicitLocOpBuilder &tb) {
             Value stat = addI(tb, mulI(tb, row, 2), statBase);
             storeStat(tb, m, stat);
             storeStat(tb, l, addI(tb, stat, 1));
           });
  });
}

/// Several splits, combined through the workspaces: writes the
/// unnormalised partial and the statistics, publishes them, and the last CTA
/// to arrive combines every split.
void AttentionKernel::emitWorkspaceCombine(ImplicitLocOpBuilder &ib) {
  emitStorePartial(
      ib,
      [&](ImplicitLocOpBuilder &rb, Value h) {
        return addI(rb, partialRow(rb, addI(rb, head0, h)), split);
      },
      [&](ImplicitLocOpBuilder &sb, Value o, Value at) {
        storeVector(sb, o, partialOut, at);
      },
      [&](ImplicitLocOpBuilder &sb, Value x, Value at) {
        storeScalar(sb, x, partialStats, at);
      },
      /*statBase=*/0);
  // Publish the partial, then count this split's arrival.
  fenceGPU(ib);
  barrier(ib);
  emitArrival(ib);
  barrier(ib);
  Value flag = loadScalar(ib, smemFlag, constIndex(ib, 0));
  auto load = [&](ImplicitLocOpBuilder &lb, Value h, Value dv, Value s) {
    Value rs = addI(lb, partialRow(lb, addI(lb, head0, h)), s);
    return loadPartial(lb, partialOut, partialStats, 0, rs, dv);
  };
  ifThen(ib, cmpI(ib, CmpIPredicate::ne, flag, constI32(ib, 0)),
         [&](ImplicitLocOpBuilder &lb) {
           // Acquire: order the reads of the other splits' partials after
           // the counter.
           fenceGPU(lb);
           emitStoreSlots(lb, [&](ImplicitLocOpBuilder &sb, Value h, Value dv) {
             emitCombine(sb, h, dv, load);
           });
           if (projOut)
             emitOutputProjection(lb, constIndex(lb, 0),
                                  constIndex(lb, outFeatures));
         });
}

/// Several splits in one thread-block cluster (grid x = cluster x =
/// num_splits <= cluster_splits): every CTA stores its unnormalised partial
/// into the exchange buffer of the cluster's CTA 0 (split 0) through
/// distributed shared memory and arrives on the cluster barrier (release);
/// CTA 0 waits (acquire) and combines from its own shared memory. The
/// barrier's first phase (arrived at before griddepcontrol.wait, waited
/// for here) guarantees that CTA 0 has started before anyone stores into
/// it; CTA 0 cannot exit before the second phase completes, and the others
/// exit without waiting. With the output projection (projOut) every CTA
/// stores its partial into every CTA of the cluster, every CTA waits,
/// combines and projects its split's share of W_o's rows (its first round
/// loaded before the exchange, or before griddepcontrol.wait).
void AttentionKernel::emitClusterCombine(ImplicitLocOpBuilder &ib) {
  const int64_t statBase = sched.clusterSplits * gc() * shape.headDim;
  // The first round of this split's W_o rows, loaded while the splits are
  // exchanged and combined.
  std::optional<ProjectionRound> first = earlyRound;
  Value rowBegin, rowEnd;
  if (projOut) {
    std::tie(rowBegin, rowEnd) = splitProjectionRows(ib);
    if (!first)
      first = loadProjectionRound(ib, rowBegin, constIndex(ib, 0));
  }
  waitCluster(ib);
  // Where the CTAs project their share of o_proj, every CTA needs the
  // combined heads: each stores its partial into every CTA's buffer.
  const int64_t receivers = projOut ? sched.clusterSplits : 1;
  Value local = getSharedPointer(ib, exchange);
  Value remote0 = mapSharedToCta(ib, local, constI32(ib, 0));
  Type f32 = ib.getF32Type();
  auto storeRemote = [&](int64_t alignment) {
    return [&, alignment](ImplicitLocOpBuilder &sb, Value x, Value at) {
      storeToCluster(sb, x, offsetPointer(sb, remote0, at, f32), alignment);
      for (int64_t c = 1; c < receivers; ++c)
        ifThen(sb, cmpI(sb, CmpIPredicate::slt, constI32(sb, c), numSplits),
               [&, c](ImplicitLocOpBuilder &rb) {
                 Value remote = mapSharedToCta(rb, local, constI32(rb, c));
                 storeToCluster(rb, x, offsetPointer(rb, remote, at, f32),
                                alignment);
               });
    };
  };
  emitStorePartial(
      ib,
      [&](ImplicitLocOpBuilder &rb, Value h) {
        return addI(rb, mulI(rb, split, gc()), h);
      },
      storeRemote(/*alignment=*/16), storeRemote(/*alignment=*/4), statBase);
  arriveCluster(ib);
  auto load = [&](ImplicitLocOpBuilder &lb, Value h, Value dv, Value s) {
    Value row = addI(lb, mulI(lb, s, gc()), h);
    return loadPartial(lb, exchange, exchange, statBase, row, dv);
  };
  auto combine = [&](ImplicitLocOpBuilder &lb) {
    waitCluster(lb);
    emitStoreSlots(lb, [&](ImplicitLocOpBuilder &sb, Value h, Value dv) {
      emitCombine(sb, h, dv, load);
    });
  };
  if (!projOut) {
    ifThen(ib, cmpI(ib, CmpIPredicate::eq, split, constIndex(ib, 0)), combine);
    return;
  }
  combine(ib);
  emitOutputProjection(ib, rowBegin, rowEnd, &*first);
}

/// Before griddepcontrol.wait (no kernel writes W_o): the CTAs of sequence
/// 0 ask L2 for the W_o rows of their split's share of the output
/// projection (splitProjectionRows), over the columns of their heads, so
/// that whichever CTA projects finds them there.
void AttentionKernel::prefetchOutputWeights(ImplicitLocOpBuilder &b) {
  const int64_t bytes = gc() * shape.headDim * getTypeBytes(elementType);
  Value first =
      andI(b, active, cmpI(b, CmpIPredicate::eq, seq, constIndex(b, 0)));
  ifThen(b, first, [&](ImplicitLocOpBuilder &ib) {
    auto [rowBegin, rowEnd] = splitProjectionRows(ib);
    Value base = getGlobalPointer(ib, oWeight);
    forLoop(
        ib, addI(ib, rowBegin, tid), rowEnd, constIndex(ib, sched.threads),
        [&](ImplicitLocOpBuilder &lb, Value n) {
          Value at = addI(lb, mulI(lb, n, shape.numHeads * shape.headDim),
                          mulI(lb, head0, shape.headDim));
          prefetchToL2(
              lb,
              offsetPointer(lb, base, mulI(lb, at, getTypeBytes(elementType))),
              bytes);
        });
  });
}

/// o_proj of the CTA's heads (headOut, written by the combine) for output
/// rows [rowBegin, rowEnd): projOut[seq, gridY, n] =
/// sum_{h < Gc, d < D} headOut[h][d] * W_o[n, (head0 + h) * D + d] in fp32.
/// A row is taken by LPR lanes (one 8-element vector of each head per lane,
/// lanes past D / 8 idle), then summed over them by shuffles; in each round
/// a thread has the loads of kProjectionRowsInFlight rows issued together.
/// `first` is round 0's loads where the caller issued them early
/// (loadProjectionRound). Called by every thread of the CTA (the barrier,
/// and shuffles in a uniform loop).
void AttentionKernel::emitOutputProjection(ImplicitLocOpBuilder &b,
                                           Value rowBegin, Value rowEnd,
                                           const ProjectionRound *first) {
  const int64_t lpr = sched.lanesPerRow, d = shape.headDim;
  const int64_t rowsPerPass = sched.threads / lpr;
  barrier(b); // headOut is complete
  Value laneInRow = remUI(b, tid, constIndex(b, lpr));
  Value lanesUsed =
      cmpI(b, CmpIPredicate::ult, laneInRow, constIndex(b, sched.numVecs));
  Value dv = minUI(b, laneInRow, constIndex(b, sched.numVecs - 1));
  Value zero = splat(b, constF32(b, 0.0), W);
  SmallVector<Value> heads;
  for (int64_t h = 0; h < gc(); ++h)
    heads.push_back(select(
        b, lanesUsed, loadVector(b, headOut, addI(b, mulI(b, dv, W), h * d), W),
        zero));
  // Row (seq, gridY) of the [B, Hkv * head_blocks, H] partials.
  Value out =
      mulI(b, addI(b, mulI(b, seq, shape.numKvHeads * sched.headBlocks), gridY),
           outFeatures);
  auto finish = [&](ImplicitLocOpBuilder &lb, const ProjectionRound &round) {
    SmallVector<Value> sums;
    for (const auto &weights : round.weights) {
      Value acc = zero;
      for (int64_t h = 0; h < gc(); ++h)
        acc =
            vector::FMAOp::create(lb, extToF32(lb, weights[h]), heads[h], acc);
      sums.push_back(
          vector::ReductionOp::create(lb, vector::CombiningKind::ADD, acc));
    }
    warpReduceEach(lb, sums, ReduceKind::Sum, lpr);
    for (auto [n, sum] : llvm::zip(round.rows, sums)) {
      Value store =
          andI(lb, cmpI(lb, CmpIPredicate::eq, laneInRow, constIndex(lb, 0)),
               cmpI(lb, CmpIPredicate::ult, n, rowEnd));
      ifThen(lb, store, [&, n = n, sum = sum](ImplicitLocOpBuilder &sb) {
        storeScalar(sb, sum, projOut, addI(sb, out, n));
      });
    }
  };
  Value count = subI(b, rowEnd, rowBegin);
  Value perRound = constIndex(b, rowsPerPass * kProjectionRowsInFlight);
  Value rounds =
      divUI(b, addI(b, count, subI(b, perRound, constIndex(b, 1))), perRound);
  Value next = constIndex(b, 0);
  if (first) {
    finish(b, *first);
    next = constIndex(b, 1);
  }
  forLoop(b, next, rounds, constIndex(b, 1),
          [&](ImplicitLocOpBuilder &lb, Value round) {
            finish(lb, loadProjectionRound(lb, rowBegin, round));
          });
}

/// The W_o loads of round `round` of the output projection from row
/// `rowBegin` (see emitOutputProjection): rows past the end are clamped to
/// the last row of W_o, and not stored.
AttentionKernel::ProjectionRound
AttentionKernel::loadProjectionRound(ImplicitLocOpBuilder &b, Value rowBegin,
                                     Value round) {
  const int64_t lpr = sched.lanesPerRow, d = shape.headDim;
  const int64_t rowsPerPass = sched.threads / lpr;
  Value laneInRow = remUI(b, tid, constIndex(b, lpr));
  Value rowInPass = divUI(b, tid, constIndex(b, lpr));
  Value dv = minUI(b, laneInRow, constIndex(b, sched.numVecs - 1));
  ProjectionRound loads;
  for (int64_t u = 0; u < kProjectionRowsInFlight; ++u) {
    Value pass = addI(b, mulI(b, round, kProjectionRowsInFlight), u);
    Value n = addI(b, rowBegin, addI(b, mulI(b, pass, rowsPerPass), rowInPass));
    loads.rows.push_back(n);
    Value row = minUI(b, n, constIndex(b, outFeatures - 1));
    loads.weights.emplace_back();
    for (int64_t h = 0; h < gc(); ++h) {
      Value at = addI(b, mulI(b, row, shape.numHeads * d),
                      addI(b, mulI(b, addI(b, head0, h), d), mulI(b, dv, W)));
      loads.weights.back().push_back(loadVector(b, oWeight, at, W));
    }
  }
  return loads;
}

/// Several splits: through the cluster where the launch made the splits one
/// cluster (cluster x = num_splits <= cluster_splits, one cluster along x),
/// else through the workspaces.
void AttentionKernel::emitPartialAndCombine(ImplicitLocOpBuilder &ib) {
  if (!sched.clusterSplits) {
    emitWorkspaceCombine(ib);
    return;
  }
  Value clustered =
      andI(ib,
           andI(ib, cmpI(ib, CmpIPredicate::eq, getClusterCtas(ib), numSplits),
                cmpI(ib, CmpIPredicate::eq, getClustersX(ib), constI32(ib, 1))),
           cmpI(ib, CmpIPredicate::sle, numSplits,
                constI32(ib, sched.clusterSplits)));
  ifThenElse(
      ib, clustered, [&](ImplicitLocOpBuilder &cb) { emitClusterCombine(cb); },
      [&](ImplicitLocOpBuilder &wb) { emitWorkspaceCombine(wb); });
}

void AttentionKernel::emitCta(ImplicitLocOpBuilder &b) {
  const int64_t tpi = sched.tokensPerIter;
  Value one = constI32(b, 1);
  Value count = maxSI(b, subI(b, end, start), constI32(b, 0));
  Value iters =
      divUI(b, addI(b, count, constI32(b, tpi - 1)), constI32(b, tpi));

  if (sched.tensorCores) {
    MmaAttentionInputs in;
    in.shape = shape;
    in.elementType = elementType;
    in.scale = scale;
    in.headsPerCta = gc();
    in.warps = numWarps();
    in.stages = sched.stages;
    in.ctaRing = sched.ctaRing;
    in.func = func;
    in.query = query;
    in.keyCache = keyCache;
    in.valueCache = valueCache;
    in.blockTable = blockTable;
    in.maxPages = maxPagesArg;
    in.keyCacheMap = keyCacheMap;
    in.valueCacheMap = valueCacheMap;
    in.seq = seq;
    in.kvHead = kvHead;
    in.head0 = head0;
    in.tid = tid;
    in.start = start;
    in.end = end;
    in.merge = smem;
    in.maxBase = smemMaxBase();
    in.sumBase = smemSumBase();
    emitMmaAttentionWarps(b, module, in);
  } else {
    SoftmaxState st = emitMainLoop(b, iters);
    mergeRowGroups(b, st);
    writeWarpState(b, st);
  }

  Value single = cmpI(b, CmpIPredicate::eq, numSplits, one);
  ifThenElse(
      b, single,
      [&](ImplicitLocOpBuilder &ib) {
        // One split: normalise and write the output directly.
        emitStoreSlots(ib, [&](ImplicitLocOpBuilder &sb, Value h, Value dv) {
          Value m, l, o;
          readMergedSlot(sb, h, dv, m, l, o);
          storeNormalized(sb, o, l, h, dv);
        });
        // The only split is split 0, whose share is every row.
        if (projOut)
          emitOutputProjection(ib, constIndex(ib, 0),
                               constIndex(ib, outFeatures),
                               earlyRound ? &*earlyRound : nullptr);
      },
      [&](ImplicitLocOpBuilder &ib) { emitPartialAndCombine(ib); });
}

//===----------------------------------------------------------------------===//
// The kernel's op, shape and parameters
//===----------------------------------------------------------------------===//

/// The kernel's one fusion.decode_attention, its operands' argument numbers
/// and the index of the result yielding it.
struct AttentionOperands {
  DecodeAttentionOp op;
  /// The o_proj the kernel also computes (rule 6 of --fusion-form-kernels),
  /// or null.
  LinearPartialsOp projection;
  SmallVector<unsigned> operandArgs;
  int resultIndex = -1;
};

FailureOr<AttentionOperands> findAttention(KernelOp kernel) {
  AttentionOperands found;
  for (Operation &nested : kernel.getBody().front().without_terminator()) {
    auto attention = dyn_cast<DecodeAttentionOp>(nested);
    auto projection = dyn_cast<LinearPartialsOp>(nested);
    if (projection && found.op && !found.projection &&
        projection.getInput() == found.op.getResult() &&
        found.op.getResult().hasOneUse()) {
      found.projection = projection;
      continue;
    }
    if (!attention || found.op)
      return kernel.emitOpError()
             << "attention emitter: the kernel must hold exactly one "
                "fusion.decode_attention, optionally followed by one "
                "fusion.linear_partials of its result (its only use), and "
                "nothing else, found '"
             << nested.getName() << "'";
    found.op = attention;
  }
  if (!found.op)
    return kernel.emitOpError()
           << "attention emitter: no fusion.decode_attention in the kernel";
  Block &body = kernel.getBody().front();
  for (Value operand : found.op->getOperands()) {
    auto arg = dyn_cast<BlockArgument>(operand);
    if (!arg || arg.getOwner() != &body)
      return kernel.emitOpError()
             << "attention emitter: every operand of fusion.decode_attention "
                "must be a kernel operand";
    found.operandArgs.push_back(arg.getArgNumber());
  }
  if (found.operandArgs[1] == found.operandArgs[2])
    return kernel.emitOpError()
           << "attention emitter: key_cache and value_cache must be distinct "
              "kernel operands";
  if (found.projection && !isa<BlockArgument>(found.projection.getWeight()))
    return kernel.emitOpError()
           << "attention emitter: the weight of fusion.linear_partials must "
              "be a kernel operand";
  Value result =
      found.projection ? found.projection.getResult() : found.op.getResult();
  YieldOp yield = kernel.getYield();
  for (auto [index, value] : llvm::enumerate(yield.getValues()))
    if (value == result) {
      if (found.resultIndex >= 0)
        return kernel.emitOpError()
               << "attention emitter: the attention result is yielded twice";
      found.resultIndex = static_cast<int>(index);
    }
  if (found.resultIndex < 0 || yield.getValues().size() != 1)
    return kernel.emitOpError()
           << "attention emitter: the kernel must yield exactly the "
              "attention output (or its fusion.linear_partials)";
  return found;
}

/// The shape of `op`, checked against what the kernel supports.
LogicalResult getShape(KernelOp kernel, DecodeAttentionOp op,
                       AttentionShape &shape, Type &elementType) {
  auto queryType = op.getQuery().getType();
  auto cacheType = op.getKeyCache().getType();
  shape.numHeads = queryType.getDimSize(1);
  shape.headDim = queryType.getDimSize(2);
  shape.numKvHeads = cacheType.getDimSize(2);
  shape.pageSize = cacheType.getDimSize(1);
  shape.group = shape.numHeads / shape.numKvHeads;
  elementType = queryType.getElementType();
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
  if (!elementType.isF16() && !elementType.isBF16())
    return kernel.emitOpError()
           << "attention emitter: unsupported element type " << elementType;
  return success();
}

/// The kernel's parameters: the default ones, the split-KV workspaces
/// before the scalars, with `cacheMaps` (a variant's CTA ring) the caches'
/// tensor maps after them, and num_splits last.
SmallVector<KernelParam> getAttentionParams(KernelOp kernel,
                                            const AttentionShape &shape,
                                            const AttentionSchedule &sched,
                                            bool cacheMaps) {
  MLIRContext *context = kernel.getContext();
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32);
  SmallVector<KernelParam> params = getDefaultKernelParams(kernel);
  namespace role = contract::role;
  const std::string batch(contract::dim::kBatch);
  std::string hq = std::to_string(shape.numHeads),
              ms = std::to_string(sched.maxSplits),
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
       {batch, std::to_string(shape.numKvHeads * sched.headBlocks)},
       /*zeroInitialized=*/true},
  };
  insertBeforeScalars(params, workspace);
  if (cacheMaps)
    for (auto [target, map] : {std::pair{role::kKeyCache, role::kKeyCacheMap},
                               {role::kValueCache, role::kValueCacheMap}})
      insertTensorMap(params, findParam(params, target), map,
                      kAttentionMmaTileTokens, kAttentionRingBoxColumns);
  params.push_back({KernelParam::Kind::Scalar,
                    std::string(contract::dim::kNumSplits),
                    i32,
                    {}});
  return params;
}

/// Binds the kernel's arguments and shared memory to `kernel`.
void bindArguments(AttentionKernel &k, const AttentionOperands &found,
                   const KernelArgs &args) {
  DecodeAttentionOp op = found.op;
  k.func = args.getFunc();
  k.query = args.input(op.getQuery());
  k.keyCache = args.input(op.getKeyCache());
  k.valueCache = args.input(op.getValueCache());
  k.blockTable = args.input(op.getBlockTable());
  k.seqLens = args.input(op.getSeqLens());
  k.output = args.output(op.getResult());
  k.oWeight = k.projOut = k.headOut = nullptr;
  if (LinearPartialsOp projection = found.projection) {
    k.oWeight = args.input(projection.getWeight());
    k.projOut = args.output(projection.getResult());
    k.outFeatures = projection.getResult().getType().getDimSize(2);
  }
  k.partialOut = args.param(contract::role::kPartialOut);
  k.partialStats = args.param(contract::role::kPartialStats);
  k.counters = args.param(contract::role::kSplitCounters);
  k.batchArg = args.param(contract::dim::kBatch);
  k.maxPagesArg = args.param(contract::dim::kMaxPages);
  k.numSplitsArg = args.param(contract::dim::kNumSplits);
  k.keyCacheMap = args.param(contract::role::kKeyCacheMap);
  k.valueCacheMap = args.param(contract::role::kValueCacheMap);
  MLIRContext *context = op.getContext();
  // Vector accesses (vector<8xf32>) to the merge buffer: 32-byte aligned.
  k.smem = addWorkgroupBuffer(args.getFunc(), Float32Type::get(context),
                              k.sched.sharedFloats, /*alignment=*/32);
  k.smemFlag =
      addWorkgroupBuffer(args.getFunc(), IntegerType::get(context, 32), 1);
  if (k.projOut)
    k.headOut = addWorkgroupBuffer(args.getFunc(), Float32Type::get(context),
                                   k.sched.headOutFloats, /*alignment=*/32);
  k.exchange = nullptr;
  if (k.sched.exchangeFloats)
    k.exchange = addWorkgroupBuffer(args.getFunc(), Float32Type::get(context),
                                    k.sched.exchangeFloats, /*alignment=*/32);
}

/// Emits `<entry>_mma`, the tensor-core variant of the kernel `primary`
/// was emitted for, and records it in `launch` (same parameters and grid).
LogicalResult emitMmaVariant(KernelOp kernel, gpu::GPUModuleOp module,
                             const AttentionOperands &found,
                             const AttentionKernel &primary,
                             const AttentionSchedule &sched,
                             KernelLaunch &launch, const TargetInfo &target) {
  AttentionKernel k = primary;
  k.sched = sched;
  KernelVariant variant;
  variant.minBatch = kAttentionMmaMinBatch;
  variant.entry = launch.entry + "_mma";
  variant.grid = launch.grid;
  variant.blockSize = sched.threads;
  variant.dynamicSharedBytes = sched.ringBytes;
  ImplicitLocOpBuilder b(kernel.getLoc(), kernel.getContext());
  gpu::GPUFuncOp func =
      createKernelFunc(b, kernel.getLoc(), module, variant.entry, launch.params,
                       sched.threads, target);
  bindArguments(k, found, KernelArgs(kernel, func, launch.params));
  k.emitBody(b);
  FailureOr<SplitKvAttentionMmaScheduleAttr> schedule =
      getMmaScheduleAttr(kernel, sched);
  if (failed(schedule))
    return failure();
  variant.schedule = *schedule;
  launch.variants.push_back(std::move(variant));
  return success();
}

} // namespace

FailureOr<KernelLaunch>
mlir::fusion::emitAttentionKernel(KernelOp kernel, const TargetInfo &target,
                                  gpu::GPUModuleOp module) {
  FailureOr<AttentionOperands> found = findAttention(kernel);
  if (failed(found))
    return failure();
  AttentionKernel k;
  k.module = module;
  if (failed(getShape(kernel, found->op, k.shape, k.elementType)))
    return failure();
  k.shape.outputProjection = static_cast<bool>(found->projection);
  k.scale = found->op.getEffectiveScale();
  FailureOr<AttentionSchedule> sched = getSchedule(kernel, k.shape, target);
  if (failed(sched))
    return failure();
  k.sched = *sched;
  if (LinearPartialsOp projection = found->projection) {
    int64_t blocks = projection.getResult().getType().getDimSize(1);
    if (blocks != k.shape.numKvHeads * k.sched.headBlocks)
      return kernel.emitOpError()
             << "attention emitter: fusion.linear_partials must have one "
                "block per CTA's heads ("
             << k.shape.numKvHeads * k.sched.headBlocks
             << " = KV heads x head blocks), got " << blocks;
  }

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  std::optional<AttentionSchedule> mma =
      chooseAttentionMmaSchedule(k.shape, k.sched, target);
  launch.params =
      getAttentionParams(kernel, k.shape, k.sched, mma && mma->ctaRing);
  ImplicitLocOpBuilder b(kernel.getLoc(), kernel.getContext());
  gpu::GPUFuncOp func =
      createKernelFunc(b, kernel.getLoc(), module, kernel.getSymName(),
                       launch.params, k.sched.threads, target);
  bindArguments(k, *found, KernelArgs(kernel, func, launch.params));
  k.emitBody(b);

  launch.grid = {std::string(contract::dim::kNumSplits),
                 std::to_string(k.shape.numKvHeads * k.sched.headBlocks),
                 std::string(contract::dim::kBatch)};
  launch.blockSize = k.sched.threads;
  launch.dynamicSharedBytes = 0;
  FailureOr<SplitKvAttentionScheduleAttr> schedule =
      getScheduleAttr(kernel, k.sched);
  if (failed(schedule))
    return failure();
  launch.schedule = *schedule;
  if (mma &&
      failed(emitMmaVariant(kernel, module, *found, k, *mma, launch, target)))
    return failure();
  return launch;
}
