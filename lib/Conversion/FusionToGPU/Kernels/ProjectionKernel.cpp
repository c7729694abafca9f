//===- ProjectionKernel.cpp - fused norm -> QKV -> RoPE -> KV append ------===//
//
// The front-half kernel (design.md 2.3):
//
//   [rmsnorm(+residual, unit_offset) | layernorm] -> qkv_proj(+bias)
//       -> [rope: neox/gptj, partial rotary, llama3 scaling]
//       -> [kv_append into the paged cache]
//
// and qkv_proj alone. Schedule:
//  * The output rows of the packed weight are taken two at a time ("pairs"):
//    a RoPE pair (i, i + rd/2) (neox) or (2i, 2i+1) (gptj), otherwise two
//    adjacent rows. One warp computes one pair, so the rotation needs no
//    exchange between warps or CTAs; warps stride over the pairs of the whole
//    weight (grid-stride), and the grid is chosen so that every SM has CTAs
//    at batch 1.
//  * Every CTA normalises the token rows of a batch tile itself (sum of
//    squares in fp32, warp shuffles + shared memory) into shared memory in
//    the activation type (the norm's output is rounded there, as the op
//    says); with a residual, h = round(x + r) is normalised and CTA 0 writes
//    residual_out.
//  * Each lane reads 16-byte vectors (8 elements) of both weight rows, U
//    chunks per loop step (2U independent 16-byte loads per step, up to 4U
//    in flight with the pipelining below), and
//    multiplies each weight vector with the normalised x of all T tokens of
//    the tile (weights are read once per tile), accumulating in fp32. The
//    loop is software-pipelined: step k+1's loads are issued before step k's
//    FMAs (the last step re-issues its own loads instead of branching). The
//    epilogue's position and block-table loads are issued before the loop.
//    Where a batch-1 kernel's rows are short (s.preloadChunks: SmolLM2's
//    layers and LM head), the lane's weight vectors of its warp's first pair
//    are loaded into registers before griddepcontrol.wait, with token 0's
//    position and cache slot (step inputs) and, with one pair per warp, the
//    pair's RoPE inverse frequency, and after it only x is read; a warp with
//    more pairs loads each next pair's vectors before it reduces the current
//    one (its later pairs' inverse frequencies come with them). The loop runs
//    s.pairsPerWarp steps with no guard for pairs past them, so such a kernel
//    relies on the manifest's grid.
//  * Butterfly reductions (gpu.shuffle xor) give every lane the 2T dot
//    products; lane t < T finishes token t: + bias, round (the projection's
//    output), RoPE in fp32 with angle = float(pos) * inv_freq (an fp32 table
//    computed at compile time like the CPU reference), sin/cos with an f64
//    range reduction, round, then stores q (and k/v outputs if yielded) and
//    k/v straight into the paged cache with 64-bit offsets.
//
// With tensor cores (sm_80+) and shapes that allow it, the tensor-core
// variant of ProjectionMmaKernel.cpp is added as a batch variant; the kernel
// here then runs only at batch 1, with tiles of one token.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/AsyncCopy.h"
#include "../Fragments/Reduce.h"
#include "../KernelEmitter.h"
#include "Projection.h"

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// Elements of one row that a warp reads with one 16-byte vector per lane (a
/// "chunk").
constexpr int64_t kChunk = 32 * kVectorWidth;

/// The CUDA-core kernel: the plan, its schedule and its shared memory (the
/// normalised rows of one batch tile, and the reduction scratch).
struct CudaCoreKernel {
  const ProjectionPlan &p;
  const ProjectionSchedule &s;
  Value xs, scratch;
  /// Where s.preloadChunks: the warp's first pair's rows and the lane's
  /// weight vectors of them ([chunk][row A, row B]), loaded before the wait.
  PairRows preloadedRows;
  SmallVector<Value> preloaded;
  /// Where s.preloadChunks: token 0's epilogue inputs, loaded before the
  /// wait too (positions and the block table are step inputs).
  TokenInputs preloadedInputs;

  void prefetchWeights(ImplicitLocOpBuilder &b);
  void preloadWeights(ImplicitLocOpBuilder &b);
  void emitBody(ImplicitLocOpBuilder &b);
  void normalizeTile(ImplicitLocOpBuilder &b, Value tileStart, Value count,
                     Value isCta0);
  void emitPairs(ImplicitLocOpBuilder &b, int64_t numTokens, Value tileStart,
                 Value tokenBase);
  SmallVector<Value> emitDotProducts(ImplicitLocOpBuilder &b, int64_t T,
                                     Value xTileBase, Value laneOffset,
                                     Value wA, Value wB);
  SmallVector<Value> emitPreloadedDotProducts(ImplicitLocOpBuilder &b,
                                              int64_t T, Value xTileBase,
                                              Value laneOffset,
                                              ArrayRef<Value> vectors);
  void emitPreloadedPairs(ImplicitLocOpBuilder &b, int64_t T, Value xTileBase,
                          Value laneOffset, const TokenInputs &inputs,
                          Value lane);
  Value validPairOrZero(ImplicitLocOpBuilder &b, Value pair);
  SmallVector<Value> loadPairVectors(ImplicitLocOpBuilder &b,
                                     const PairRows &rows);
  TokenInputs preloadTokenInputs(ImplicitLocOpBuilder &b);
  TokenInputs getTokenInputs(ImplicitLocOpBuilder &b, Value token);
  void finishPair(ImplicitLocOpBuilder &b, int64_t T, const PairRows &rows,
                  SmallVector<Value> acc, const TokenInputs &inputs,
                  Value lane);
  /// The first pair of this warp (of the grid-stride loop).
  Value warpFirstPair(ImplicitLocOpBuilder &b) {
    return addI(b, mulI(b, blockIdX(b), s.warps), warpId(b));
  }
  void accumulate(ImplicitLocOpBuilder &ib, int64_t T, Value xTileBase,
                  ArrayRef<Value> wVecs, ArrayRef<Value> elems,
                  SmallVector<Value> &acc);
  SmallVector<Value> accumulateInRow(
      ImplicitLocOpBuilder &b, int64_t T, Value xTileBase, Value e,
      ValueRange acc,
      llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)> vectors);
};

} // namespace

/// Dot products of one loop step: weight vectors wVecs ([u][row]) at
/// element offsets `elems` (per u) with the T tokens of the tile, into the
/// 2T fp32 accumulators.
void CudaCoreKernel::accumulate(ImplicitLocOpBuilder &ib, int64_t T,
                                Value xTileBase, ArrayRef<Value> wVecs,
                                ArrayRef<Value> elems,
                                SmallVector<Value> &acc) {
  const int64_t H = p.hidden;
  for (size_t u = 0; u < elems.size(); ++u) {
    Value wa = extToF32(ib, wVecs[2 * u]);
    Value wb = extToF32(ib, wVecs[2 * u + 1]);
    for (int64_t t = 0; t < T; ++t) {
      Value xIndex = addI(ib, addI(ib, xTileBase, t * H), elems[u]);
      Value x = extToF32(ib, loadVector(ib, xs, xIndex, kVectorWidth));
      for (int64_t e = 0; e < kVectorWidth; ++e) {
        Value xe = extract(ib, x, e);
        acc[2 * t] = fma(ib, extract(ib, wa, e), xe, acc[2 * t]);
        acc[2 * t + 1] = fma(ib, extract(ib, wb, e), xe, acc[2 * t + 1]);
      }
    }
  }
}

/// accumulate() of the lane's chunk at element `e` only where `e` is inside
/// the row (a row's last, partial chunk); `vectors` gives the chunk's weight
/// vectors (row A, row B) inside that guard.
SmallVector<Value> CudaCoreKernel::accumulateInRow(
    ImplicitLocOpBuilder &b, int64_t T, Value xTileBase, Value e,
    ValueRange acc,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)> vectors) {
  Value inRow = cmpI(b, CmpIPredicate::ult, e, constIndex(b, p.hidden));
  return ifThenElseValues(
      b, acc.getTypes(), inRow,
      [&](ImplicitLocOpBuilder &tb) {
        SmallVector<Value> wVecs = vectors(tb);
        SmallVector<Value> next(acc.begin(), acc.end());
        accumulate(tb, T, xTileBase, wVecs, {e}, next);
        return next;
      },
      [&](ImplicitLocOpBuilder &) {
        return SmallVector<Value>(acc.begin(), acc.end());
      });
}

/// The 2T dot products of weight rows wA, wB (element offsets) with the
/// tile's tokens: the pipelined main loop, then a guarded tail loop.
SmallVector<Value> CudaCoreKernel::emitDotProducts(ImplicitLocOpBuilder &b,
                                                   int64_t T, Value xTileBase,
                                                   Value laneOffset, Value wA,
                                                   Value wB) {
  const int64_t chunk = kChunk;
  // Fewer chunks per step for bigger token tiles: the loads in flight stay
  // about the same and the registers bounded (2T accumulators).
  const int64_t unroll = std::max<int64_t>(1, s.unroll / T);
  const int64_t step = unroll * chunk;
  const int64_t H = p.hidden, mainEnd = (H / step) * step;
  // The element offsets of the 2U weight vectors of step k.
  auto elemsOf = [&](ImplicitLocOpBuilder &ib, Value k) {
    SmallVector<Value> elems;
    for (int64_t u = 0; u < unroll; ++u)
      elems.push_back(addI(ib, addI(ib, k, u * chunk), laneOffset));
    return elems;
  };
  SmallVector<Value> acc(2 * T, constF32(b, 0.0));
  if (mainEnd > 0)
    acc = emitPipelinedLoop(
        b, constIndex(b, 0), constIndex(b, mainEnd), step,
        [&](ImplicitLocOpBuilder &ib) {
          return constIndex(ib, mainEnd - step);
        },
        2 * T,
        [&](ImplicitLocOpBuilder &ib, Value k) {
          return loadRowPairVectors(ib, p.weight, wA, wB, elemsOf(ib, k));
        },
        [&](ImplicitLocOpBuilder &ib, Value k, ArrayRef<Value> wVecs,
            SmallVector<Value> &next) {
          accumulate(ib, T, xTileBase, wVecs, elemsOf(ib, k), next);
        });
  if (mainEnd < H)
    acc = forLoopWithValues(
        b, constIndex(b, mainEnd), constIndex(b, H), constIndex(b, chunk), acc,
        [&](ImplicitLocOpBuilder &ib, Value k, ValueRange args) {
          Value e = addI(ib, k, laneOffset);
          return accumulateInRow(
              ib, T, xTileBase, e, args, [&](ImplicitLocOpBuilder &tb) {
                return loadRowPairVectors(tb, p.weight, wA, wB, {e});
              });
        });
  return acc;
}

/// The same dot products from the preloaded vectors: the whole chunks, then
/// the last, partial one in the lanes whose elements are inside the row.
SmallVector<Value>
CudaCoreKernel::emitPreloadedDotProducts(ImplicitLocOpBuilder &b, int64_t T,
                                         Value xTileBase, Value laneOffset,
                                         ArrayRef<Value> vectors) {
  const int64_t whole = p.hidden / kChunk;
  SmallVector<Value> elems;
  for (int64_t c = 0; c < whole; ++c)
    elems.push_back(addI(b, laneOffset, c * kChunk));
  SmallVector<Value> acc(2 * T, constF32(b, 0.0));
  accumulate(b, T, xTileBase, vectors.take_front(2 * whole), elems, acc);
  if (whole == s.preloadChunks)
    return acc;
  return accumulateInRow(b, T, xTileBase, addI(b, laneOffset, whole * kChunk),
                         acc, [&](ImplicitLocOpBuilder &) {
                           return llvm::to_vector(
                               vectors.drop_front(2 * whole));
                         });
}

/// Reduces a pair's 2T dot products over the warp; lane t < T finishes
/// token t (the epilogue).
void CudaCoreKernel::finishPair(ImplicitLocOpBuilder &b, int64_t T,
                                const PairRows &rows, SmallVector<Value> acc,
                                const TokenInputs &inputs, Value lane) {
  for (Value &a : acc)
    a = warpReduce(b, a, ReduceKind::Sum);
  Value active = cmpI(b, CmpIPredicate::ult, lane, constIndex(b, T));
  ifThen(b, active, [&](ImplicitLocOpBuilder &eb) {
    Value sumA = acc[0], sumB = acc[1];
    for (int64_t t = 1; t < T; ++t) {
      Value isT = cmpI(eb, CmpIPredicate::eq, lane, constIndex(eb, t));
      sumA = select(eb, isT, acc[2 * t], sumA);
      sumB = select(eb, isT, acc[2 * t + 1], sumB);
    }
    emitPairEpilogue(eb, p, rows, inputs, sumA, sumB);
  });
}

/// The preloaded kernel's pairs: the warp's first pair from the vectors
/// loaded before the wait; where the warp has more (s.pairsPerWarp), each
/// step issues the loads of the next pair before it reduces this one, so
/// that a pair's loads are in flight while the previous one is finished.
/// No guard on the pairs past the manifest's grid (docs/abi.md: a launch
/// must use it): there every pair has its warp and step.
void CudaCoreKernel::emitPreloadedPairs(ImplicitLocOpBuilder &b, int64_t T,
                                        Value xTileBase, Value laneOffset,
                                        const TokenInputs &inputs, Value lane) {
  Value firstPair = warpFirstPair(b);
  auto finish = [&](ImplicitLocOpBuilder &ib, Value pair, const PairRows &rows,
                    ArrayRef<Value> vectors) {
    Value has = cmpI(ib, CmpIPredicate::ult, pair, constIndex(ib, p.pairs));
    ifThen(ib, has, [&](ImplicitLocOpBuilder &hb) {
      finishPair(
          hb, T, rows,
          emitPreloadedDotProducts(hb, T, xTileBase, laneOffset, vectors),
          inputs, lane);
    });
  };
  if (s.pairsPerWarp == 1)
    return finish(b, firstPair, preloadedRows, preloaded);
  Value pairStride = constIndex(b, s.grid * s.warps);
  forLoopWithValues(
      b, constIndex(b, 0), constIndex(b, s.pairsPerWarp), constIndex(b, 1),
      preloaded, [&](ImplicitLocOpBuilder &lb, Value i, ValueRange current) {
        Value pair = addI(lb, firstPair, mulI(lb, i, pairStride));
        SmallVector<Value> next = loadPairVectors(
            lb, getPairRows(lb, p,
                            validPairOrZero(lb, addI(lb, pair, pairStride))));
        finish(lb, pair, getPairRows(lb, p, validPairOrZero(lb, pair)),
               llvm::to_vector(current));
        return next;
      });
}

/// The warp-level work for tiles of `numTokens` tokens starting at
/// `tokenBase`: every warp loops over its pairs of output rows, or over its
/// preloaded ones (emitPreloadedPairs).
void CudaCoreKernel::emitPairs(ImplicitLocOpBuilder &b, int64_t numTokens,
                               Value tileStart, Value tokenBase) {
  const int64_t T = numTokens;
  Value lane = laneId(b);
  Value firstPair = warpFirstPair(b);
  Value pairStride = mulI(b, gridDimX(b), s.warps);
  Value laneOffset = mulI(b, lane, kVectorWidth);
  Value xTileBase = mulI(b, tokenBase, p.hidden);
  // The token lane t < T finishes (lanes >= T: the last one, unused), and
  // what the epilogue needs of it, loaded before the dot products so that
  // those loads overlap the weight stream.
  Value token = addI(b, addI(b, tileStart, tokenBase),
                     minUI(b, lane, constIndex(b, T - 1)));
  TokenInputs inputs = getTokenInputs(b, token);

  if (!preloaded.empty())
    return emitPreloadedPairs(b, T, xTileBase, laneOffset, inputs, lane);
  forLoop(b, firstPair, constIndex(b, p.pairs), pairStride,
          [&](ImplicitLocOpBuilder &lb, Value pair) {
            PairRows rows = getPairRows(lb, p, pair);
            Value wA = mulI(lb, rows.rowA, p.hidden);
            Value wB = mulI(lb, rows.rowB, p.hidden);
            finishPair(lb, T, rows,
                       emitDotProducts(lb, T, xTileBase, laneOffset, wA, wB),
                       inputs, lane);
          });
}

/// Before griddepcontrol.wait, where s.preloadChunks: every weight vector
/// the lane reads of its warp's first pair (pair 0's for a warp without one,
/// which never uses them), so that after the wait only x is read.
void CudaCoreKernel::preloadWeights(ImplicitLocOpBuilder &b) {
  emitBeforeGridDependencyWait(b, [&](ImplicitLocOpBuilder &pb) {
    Value pair = warpFirstPair(pb);
    preloadedRows = getPairRows(pb, p, validPairOrZero(pb, pair));
    preloaded = loadPairVectors(pb, preloadedRows);
    preloadedInputs = preloadTokenInputs(pb);
  });
  assert(!preloaded.empty() &&
         "preloadChunks needs the griddepcontrol prologue");
}

/// `pair` where it is one of the weight's pairs, else pair 0 (whose loads
/// are harmless and never used).
Value CudaCoreKernel::validPairOrZero(ImplicitLocOpBuilder &b, Value pair) {
  Value has = cmpI(b, CmpIPredicate::ult, pair, constIndex(b, p.pairs));
  return select(b, has, pair, constIndex(b, 0));
}

/// Every weight vector the lane reads of `rows` ([chunk][row A, row B]); in
/// the last, partial chunk the lanes past the row's end read its first
/// vector again.
SmallVector<Value> CudaCoreKernel::loadPairVectors(ImplicitLocOpBuilder &b,
                                                   const PairRows &rows) {
  Value laneOffset = mulI(b, laneId(b), kVectorWidth);
  SmallVector<Value> elems;
  for (int64_t c = 0; c < s.preloadChunks; ++c) {
    Value e = addI(b, laneOffset, c * kChunk);
    if ((c + 1) * kChunk > p.hidden)
      e = select(b, cmpI(b, CmpIPredicate::ult, e, constIndex(b, p.hidden)), e,
                 constIndex(b, 0));
    elems.push_back(e);
  }
  return loadRowPairVectors(b, p.weight, mulI(b, rows.rowA, p.hidden),
                            mulI(b, rows.rowB, p.hidden), elems);
}

/// The loaded values of `in` (position, then cache slot, where present).
static SmallVector<Value> getLoadedValues(const TokenInputs &in) {
  SmallVector<Value> values;
  for (Value v : {in.ropePosition, in.cacheSlot})
    if (v)
      values.push_back(v);
  return values;
}

/// The TokenInputs of `token` from getLoadedValues' list.
static TokenInputs getTokenInputsFrom(const ProjectionPlan &p, Value token,
                                      ArrayRef<Value> values) {
  TokenInputs in{token, Value(), Value()};
  const Value *next = values.begin();
  if (p.ops.rope)
    in.ropePosition = *next++;
  if (p.ops.append)
    in.cacheSlot = *next++;
  return in;
}

/// Token 0's epilogue inputs (see loadTokenInputs), in a branch that reads
/// nothing for an empty batch.
TokenInputs CudaCoreKernel::preloadTokenInputs(ImplicitLocOpBuilder &b) {
  Value zero = constIndex(b, 0);
  SmallVector<Type> types;
  if (p.ops.rope)
    types.push_back(b.getI32Type());
  if (p.ops.append)
    types.push_back(b.getIndexType());
  if (types.empty())
    return {zero, Value(), Value()};
  SmallVector<Value> values = ifThenElseValues(
      b, types, cmpI(b, CmpIPredicate::sgt, p.batchArg, constI32(b, 0)),
      [&](ImplicitLocOpBuilder &ib) {
        return getLoadedValues(loadTokenInputs(ib, p, zero));
      },
      [&](ImplicitLocOpBuilder &eb) {
        return llvm::map_to_vector(types, [&](Type t) -> Value {
          return arith::ConstantOp::create(eb,
                                           cast<TypedAttr>(eb.getZeroAttr(t)));
        });
      });
  return getTokenInputsFrom(p, zero, values);
}

/// The epilogue inputs of `token`: a preloaded kernel's for token 0, else
/// loaded here.
TokenInputs CudaCoreKernel::getTokenInputs(ImplicitLocOpBuilder &b,
                                           Value token) {
  SmallVector<Value> pre = getLoadedValues(preloadedInputs);
  if (preloaded.empty() || pre.empty())
    return loadTokenInputs(b, p, token);
  SmallVector<Value> values = ifThenElseValues(
      b, ValueRange(pre).getTypes(),
      cmpI(b, CmpIPredicate::eq, token, constIndex(b, 0)),
      [&](ImplicitLocOpBuilder &) { return pre; },
      [&](ImplicitLocOpBuilder &lb) {
        return getLoadedValues(loadTokenInputs(lb, p, token));
      });
  return getTokenInputsFrom(p, token, values);
}

/// Before griddepcontrol.wait, where shouldPrefetchWeights: lane 2i + j of
/// each warp asks L2 for row j of the warp's i-th pair (every pair of the
/// warp: at most 16), so that this kernel's weight stream is done while the
/// previous kernel runs.
void CudaCoreKernel::prefetchWeights(ImplicitLocOpBuilder &b) {
  const int64_t rowBytes = p.hidden * getTypeBytes(p.act);
  const int64_t rounds = llvm::divideCeil(p.pairs, s.grid * s.warps);
  if (!shouldPrefetchWeights(2 * p.pairs * rowBytes) ||
      rounds > TargetInfo::kWarpSize / 2)
    return;
  emitBeforeGridDependencyWait(b, [&](ImplicitLocOpBuilder &pb) {
    Value lane = laneId(pb);
    Value round = divUI(pb, lane, constIndex(pb, 2));
    Value pair = addI(pb, warpFirstPair(pb),
                      mulI(pb, round, mulI(pb, gridDimX(pb), s.warps)));
    Value wanted =
        andI(pb, cmpI(pb, CmpIPredicate::ult, round, constIndex(pb, rounds)),
             cmpI(pb, CmpIPredicate::ult, pair, constIndex(pb, p.pairs)));
    ifThen(pb, wanted, [&](ImplicitLocOpBuilder &ib) {
      PairRows rows = getPairRows(ib, p, pair);
      Value isB = cmpI(ib, CmpIPredicate::ne,
                       remUI(ib, lane, constIndex(ib, 2)), constIndex(ib, 0));
      Value row = select(ib, isB, rows.rowB, rows.rowA);
      prefetchToL2(ib,
                   offsetPointer(ib, getGlobalPointer(ib, p.weight),
                                 mulI(ib, row, rowBytes)),
                   rowBytes);
    });
  });
}

/// Normalises the `count` tokens of the tile into `xs`. One token: the whole
/// CTA normalises it (lowest latency). Several: warp t % warps normalises
/// token t with shuffles only, in parallel.
void CudaCoreKernel::normalizeTile(ImplicitLocOpBuilder &b, Value tileStart,
                                   Value count, Value isCta0) {
  auto normalizeSingle = [&](ImplicitLocOpBuilder &sb) {
    emitNormalizeToken(sb, p.norm, tileStart, xs, constIndex(sb, 0), isCta0,
                       scratch, s.blockSize);
  };
  if (s.batchTile == 1)
    return normalizeSingle(b);
  Value single = cmpI(b, CmpIPredicate::eq, count, constIndex(b, 1));
  ifThenElse(b, single, normalizeSingle, [&](ImplicitLocOpBuilder &tb) {
    Value warp = warpId(tb);
    for (int64_t t = 0; t < s.batchTile; ++t) {
      Value present = cmpI(tb, CmpIPredicate::ult, constIndex(tb, t), count);
      Value mine =
          cmpI(tb, CmpIPredicate::eq, warp, constIndex(tb, t % s.warps));
      ifThen(tb, andI(tb, present, mine), [&](ImplicitLocOpBuilder &wb) {
        emitNormalizeToken(wb, p.norm, addI(wb, tileStart, t), xs,
                           constIndex(wb, t * p.hidden), isCta0, scratch,
                           s.blockSize, /*warpOnly=*/true);
      });
    }
  });
}

void CudaCoreKernel::emitBody(ImplicitLocOpBuilder &b) {
  Value isCta0 = cmpI(b, CmpIPredicate::eq, blockIdX(b), constIndex(b, 0));
  forEachTokenTile(b, p, s.batchTile,
                   [&](ImplicitLocOpBuilder &tb, Value tileStart, Value count) {
                     normalizeTile(tb, tileStart, count, isCta0);
                     barrier(tb);
                     // Binary decomposition of count: sub-tiles of T =
                     // batchTile, ..., 1 tokens, each reading the weights once.
                     for (int64_t T = s.batchTile; T >= 1; T /= 2) {
                       Value bit = andI(tb, count, constIndex(tb, T));
                       Value has =
                           cmpI(tb, CmpIPredicate::ne, bit, constIndex(tb, 0));
                       // Offset of this sub-tile: count with bits below 2T
                       // cleared.
                       Value base =
                           andI(tb, count, constIndex(tb, ~(2 * T - 1)));
                       ifThen(tb, has, [&](ImplicitLocOpBuilder &sb) {
                         emitPairs(sb, T, tileStart, base);
                       });
                     }
                   });
}

/// The #fusion.projection_schedule of `s` (each warp computes row pairs).
static FailureOr<ProjectionScheduleAttr>
getScheduleAttr(KernelOp kernel, const ProjectionSchedule &s) {
  return getCheckedSchedule<ProjectionScheduleAttr>(
      kernel, s.blockSize, s.warps, s.grid, /*rowsPerWarp=*/int64_t(2),
      s.pairsPerWarp, kVectorWidth, s.unroll, s.batchTile, s.minCtasPerSM,
      s.preloadChunks);
}

FailureOr<KernelLaunch>
mlir::fusion::emitProjectionKernel(KernelOp kernel, const TargetInfo &target,
                                   gpu::GPUModuleOp module) {
  FailureOr<ProjectionPlan> analysed = analyseProjection(kernel, target);
  if (failed(analysed))
    return failure();
  ProjectionPlan &p = *analysed;
  ProjectionShape shape = getProjectionShape(p);
  // The GEMM-shaped variants where they apply, else the tensor-core one.
  ProjectionGemmShape gemmShape = getProjectionGemmShape(p);
  SmallVector<ProjectionGemmSchedule, 3> gemm =
      chooseProjectionGemmSchedules(gemmShape, target);
  std::optional<ProjectionMmaSchedule> mma;
  if (gemm.empty())
    mma = chooseProjectionMmaSchedule(shape, target);
  ProjectionSchedule s =
      chooseProjectionSchedule(shape, mma || !gemm.empty(), target);

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  if (!gemm.empty())
    appendProjectionGemmWorkspaces(
        launch.params, gemm, p.rows,
        gemmShape.norm == ProjectionNorm::FoldableRMS, kernel.getContext());
  if (!gemm.empty() && gemm.front().tmaWeights)
    appendProjectionWeightMap(launch.params, gemm.front(), p);
  if (llvm::any_of(gemm, [](const ProjectionGemmSchedule &g) {
        return g.warpSpecialized;
      }))
    appendProjectionActivationMaps(launch.params, gemm.front(), p);
  if (p.ops.argmax)
    appendArgmaxWorkspaces(launch.params, kernel.getContext());
  launch.blockSize = s.blockSize;
  launch.grid = {std::to_string(s.grid), "1", "1"};
  launch.dynamicSharedBytes = s.reservedSharedBytes;
  ImplicitLocOpBuilder b(kernel.getLoc(), kernel.getContext());
  FailureOr<gpu::GPUFuncOp> func =
      createProjectionFunc(b, p, kernel, module, launch, launch.entry,
                           s.blockSize, s.batchTile, target);
  if (failed(func))
    return failure();
  CudaCoreKernel k{p, s, Value(), Value()};
  k.xs = addWorkgroupBuffer(*func, p.act, s.batchTile * p.hidden);
  (*func)->setAttr("nvvm.minctasm", b.getI32IntegerAttr(s.minCtasPerSM));
  k.scratch = addWorkgroupBuffer(*func, b.getF32Type(), s.warps);
  if (s.preloadChunks)
    k.preloadWeights(b);
  else
    k.prefetchWeights(b);
  k.emitBody(b);

  FailureOr<ProjectionScheduleAttr> schedule = getScheduleAttr(kernel, s);
  if (failed(schedule))
    return failure();
  launch.schedule = *schedule;
  if (mma &&
      failed(emitProjectionMmaVariant(kernel, module, p, *mma, launch, target)))
    return failure();
  for (const ProjectionGemmSchedule &g : gemm)
    if (failed(emitProjectionGemmVariant(kernel, module, p, g, launch, target)))
      return failure();
  return launch;
}
