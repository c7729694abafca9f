//===- ProjectionEmitter.cpp - fused norm -> QKV -> RoPE -> KV append -----===//
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
//  * Butterfly reductions (gpu.shuffle xor) give every lane the 2T dot
//    products; lane t < T finishes token t: + bias, round (the projection's
//    output), RoPE in fp32 with angle = float(pos) * inv_freq (an fp32 table
//    computed at compile time like the CPU reference), sin/cos with an f64
//    range reduction, round, then stores q (and k/v outputs if yielded) and
//    k/v straight into the paged cache with 64-bit offsets.
//
// With tensor cores (sm_80+) and shapes that allow it, a second gpu.func
// `<entry>_mma` is emitted and recorded as a batch variant (Emitters.h): the
// runtime launches it from batch 2 and the kernel above, then with tiles of
// one token, only at batch 1. The variant normalises tiles of up to 32 tokens
// into dynamic shared memory and runs mma.m16n8k16 over 16-row weight blocks
// (emitMmaTiles; docs/performance.md entries 8-11).
//
//===----------------------------------------------------------------------===//

#include "EmitterUtils.h"

#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// The ops of a front-half kernel body.
struct FrontHalf {
  RMSNormOp rms;
  LayerNormOp layer;
  QKVProjOp qkv;
  RopeOp rope;
  KVAppendOp append;
};

/// Everything the body builder needs, resolved to gpu.func values.
struct ProjectionPlan {
  FrontHalf ops;
  Type act;
  int64_t hidden = 0, hq = 0, hkv = 0, headDim = 0, rows = 0, pairs = 0;
  int64_t rotaryDim = 0;
  bool neox = true;
  int64_t pageSize = 0;
  NormSpec norm;
  Value weight, bias;
  Value ropePositions, invFreq;
  // Destinations: raw projection outputs, rotated outputs, caches.
  Value qRaw, kRaw, vRaw, qRot, kRot;
  Value keyCache, valueCache, blockTable, appendPositions, maxPages;
  bool appendKeyRotated = false;
  Value batch;
  // Schedule.
  int64_t warps = 8, blockSize = 256, batchTile = 4, unroll = 4;
  int64_t pairsPerWarp = 1, grid = 1, minCtasPerSM = 1;
  Value xs, scratch;
};

} // namespace

/// Finds the front-half ops and checks they form the chain the emitter
/// implements.
static FailureOr<FrontHalf> analyse(KernelOp kernel) {
  FrontHalf ops;
  for (Operation &op : kernel.getBody().front().without_terminator()) {
    bool duplicate =
        llvm::TypeSwitch<Operation *, bool>(&op)
            .Case([&](RMSNormOp o) {
              bool dup = ops.rms || ops.layer;
              ops.rms = o;
              return dup;
            })
            .Case([&](LayerNormOp o) {
              bool dup = ops.rms || ops.layer;
              ops.layer = o;
              return dup;
            })
            .Case([&](QKVProjOp o) {
              bool dup = static_cast<bool>(ops.qkv);
              ops.qkv = o;
              return dup;
            })
            .Case([&](RopeOp o) {
              bool dup = static_cast<bool>(ops.rope);
              ops.rope = o;
              return dup;
            })
            .Case([&](KVAppendOp o) {
              bool dup = static_cast<bool>(ops.append);
              ops.append = o;
              return dup;
            })
            .Default([&](Operation *other) {
              kernel.emitOpError("projection kernel cannot contain '")
                  << other->getName() << "'";
              return true;
            });
    if (duplicate)
      return kernel.emitOpError(
          "projection kernel must hold at most one norm, qkv_proj, rope and "
          "kv_append (in this order)");
  }
  auto chainError = [&](StringRef what) {
    return kernel.emitOpError("unsupported projection kernel: ") << what;
  };
  Value normOut = ops.rms     ? ops.rms.getResult()
                  : ops.layer ? ops.layer.getResult()
                              : Value();
  if (normOut && ops.qkv.getInput() != normOut)
    return chainError("the norm's result must be the qkv_proj input");
  if (!normOut && !isa<BlockArgument>(ops.qkv.getInput()))
    return chainError("the qkv_proj input must be a kernel operand");
  if (ops.rope && (ops.rope.getQuery() != ops.qkv.getQuery() ||
                   ops.rope.getKey() != ops.qkv.getKey()))
    return chainError("rope must rotate the query and key of qkv_proj");
  if (ops.append) {
    Value key = ops.append.getKey();
    if (key != ops.qkv.getKey() && (!ops.rope || key != ops.rope.getKeyOut()))
      return chainError("kv_append must append the (rotated) key of qkv_proj");
    if (ops.append.getValue() != ops.qkv.getValue())
      return chainError("kv_append must append the value of qkv_proj");
  }
  return ops;
}

/// The two weight rows of output pair `pair` (see the file comment) and
/// their offsets `da`, `db` inside the head.
struct PairRows {
  Value head, j, rotated, da, db, rowA, rowB;
};

static PairRows getPairRows(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                            Value pair) {
  const int64_t D = p.headDim, halfD = D / 2, halfRd = p.rotaryDim / 2;
  PairRows r;
  r.head = arith::DivUIOp::create(b, pair, constIndex(b, halfD));
  r.j = arith::RemUIOp::create(b, pair, constIndex(b, halfD));
  r.rotated = arith::ConstantIntOp::create(b, 0, 1);
  if (p.ops.rope) {
    Value qk =
        cmpI(b, arith::CmpIPredicate::ult, r.head, constIndex(b, p.hq + p.hkv));
    Value inRd = cmpI(b, arith::CmpIPredicate::ult, r.j, constIndex(b, halfRd));
    r.rotated = arith::AndIOp::create(b, qk, inRd);
  }
  Value headBase = mulIndex(b, r.head, D);
  Value twoJ = mulIndex(b, r.j, 2);
  r.da = twoJ;
  r.db = addIndex(b, twoJ, 1);
  if (p.ops.rope && p.neox) {
    r.da = arith::SelectOp::create(b, r.rotated, r.j, twoJ);
    r.db = arith::SelectOp::create(b, r.rotated, addIndex(b, r.j, halfRd),
                                   addIndex(b, twoJ, 1));
  }
  r.rowA = addIndex(b, headBase, r.da);
  r.rowB = addIndex(b, headBase, r.db);
  return r;
}

/// What the epilogue needs of one token, loaded before the dot products so
/// that these loads overlap the weight stream.
struct TokenInputs {
  Value token;
  Value ropePosition; ///< null without rope
  Value cacheSlot;    ///< page * page_size + slot of the new KV entry, or null
};

/// Loads the RoPE position of `token` and, with kv_append, its block-table
/// entry (positions and block table as the kernel's operands).
static TokenInputs loadTokenInputs(ImplicitLocOpBuilder &b,
                                   const ProjectionPlan &p, Value token) {
  TokenInputs in;
  in.token = token;
  if (p.ops.rope)
    in.ropePosition = loadScalar(b, p.ropePositions, token);
  if (p.ops.append) {
    Value pos = i32ToIndex(b, loadScalar(b, p.appendPositions, token));
    Value pageIndex = arith::DivSIOp::create(b, pos, constIndex(b, p.pageSize));
    Value slot = arith::RemSIOp::create(b, pos, constIndex(b, p.pageSize));
    Value tableIndex =
        addIndex(b, mulIndex(b, token, i32ToIndex(b, p.maxPages)), pageIndex);
    Value page = i32ToIndex(b, loadScalar(b, p.blockTable, tableIndex));
    in.cacheSlot = addIndex(b, mulIndex(b, page, p.pageSize), slot);
  }
  return in;
}

/// Finishes output pair `rows` of one token from its fp32 dot products:
/// + bias, round (the projection's outputs), RoPE, then the stores of q / k
/// / v and of the new KV-cache entries.
static void emitPairEpilogue(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                             const PairRows &rows, const TokenInputs &in,
                             Value sumA, Value sumB) {
  const int64_t D = p.headDim;
  Value head = rows.head, token = in.token;
  if (p.bias) {
    sumA = arith::AddFOp::create(b, sumA,
                                 extToF32(b, loadScalar(b, p.bias, rows.rowA)));
    sumB = arith::AddFOp::create(b, sumB,
                                 extToF32(b, loadScalar(b, p.bias, rows.rowB)));
  }
  // The projection's outputs, rounded once.
  Value rawA = truncFromF32(b, sumA, p.act);
  Value rawB = truncFromF32(b, sumB, p.act);
  Value outA = rawA, outB = rawB;
  if (p.ops.rope) {
    Value freqIndex =
        arith::SelectOp::create(b, rows.rotated, rows.j, constIndex(b, 0));
    auto [rotA, rotB] = emitRopeRotation(b, rawA, rawB, in.ropePosition,
                                         p.invFreq, freqIndex, p.act);
    outA = arith::SelectOp::create(b, rows.rotated, rotA, rawA);
    outB = arith::SelectOp::create(b, rows.rotated, rotB, rawB);
  }
  auto storePair = [&](ImplicitLocOpBuilder &b, Value buffer, Value base,
                       Value va, Value vb) {
    storeScalar(b, va, buffer, addIndex(b, base, rows.da));
    storeScalar(b, vb, buffer, addIndex(b, base, rows.db));
  };
  // Element offset of the token's new entry for `kvHead` in a cache.
  auto cacheBase = [&](ImplicitLocOpBuilder &b, Value kvHead) {
    return mulIndex(b, addIndex(b, mulIndex(b, in.cacheSlot, p.hkv), kvHead),
                    D);
  };
  Value isQ = cmpI(b, arith::CmpIPredicate::ult, head, constIndex(b, p.hq));
  Value isK = arith::AndIOp::create(
      b, arith::XOrIOp::create(b, isQ, arith::ConstantIntOp::create(b, 1, 1)),
      cmpI(b, arith::CmpIPredicate::ult, head, constIndex(b, p.hq + p.hkv)));
  Value isV =
      cmpI(b, arith::CmpIPredicate::uge, head, constIndex(b, p.hq + p.hkv));
  if (p.qRaw || p.qRot)
    ifThen(b, isQ, [&](ImplicitLocOpBuilder &b) {
      Value base = mulIndex(b, addIndex(b, mulIndex(b, token, p.hq), head), D);
      if (p.qRaw)
        storePair(b, p.qRaw, base, rawA, rawB);
      if (p.qRot)
        storePair(b, p.qRot, base, outA, outB);
    });
  if (p.kRaw || p.kRot || p.keyCache)
    ifThen(b, isK, [&](ImplicitLocOpBuilder &b) {
      Value kvHead = arith::SubIOp::create(b, head, constIndex(b, p.hq));
      Value base =
          mulIndex(b, addIndex(b, mulIndex(b, token, p.hkv), kvHead), D);
      if (p.kRaw)
        storePair(b, p.kRaw, base, rawA, rawB);
      if (p.kRot)
        storePair(b, p.kRot, base, outA, outB);
      if (p.keyCache) {
        Value cache = cacheBase(b, kvHead);
        if (p.appendKeyRotated)
          storePair(b, p.keyCache, cache, outA, outB);
        else
          storePair(b, p.keyCache, cache, rawA, rawB);
      }
    });
  if (p.vRaw || p.valueCache)
    ifThen(b, isV, [&](ImplicitLocOpBuilder &b) {
      Value kvHead =
          arith::SubIOp::create(b, head, constIndex(b, p.hq + p.hkv));
      if (p.vRaw) {
        Value base =
            mulIndex(b, addIndex(b, mulIndex(b, token, p.hkv), kvHead), D);
        storePair(b, p.vRaw, base, rawA, rawB);
      }
      if (p.valueCache)
        storePair(b, p.valueCache, cacheBase(b, kvHead), rawA, rawB);
    });
}

/// `for tileStart in [0, batch) step tile`: calls `body` with the tile's
/// first token and its token count (min(tile, batch - tileStart)) after a
/// barrier, so that the previous tile's readers are done with the shared
/// rows the body overwrites.
static void forEachTokenTile(
    ImplicitLocOpBuilder &b, Value batch, int64_t tile,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body) {
  forLoop(b, constIndex(b, 0), batch, constIndex(b, tile),
          [&](ImplicitLocOpBuilder &b, Value tileStart) {
            Value count = arith::MinSIOp::create(
                b, constIndex(b, tile),
                arith::SubIOp::create(b, batch, tileStart));
            barrier(b);
            body(b, tileStart, count);
          });
}

/// The 16-byte vectors of weight rows `wA` and `wB` (element offsets of this
/// lane's first elements) at `offsets` past them, row A then row B for each:
/// independent loads, all in flight at once.
static SmallVector<Value> loadRowPairVectors(ImplicitLocOpBuilder &b,
                                             Value weight, Value wA, Value wB,
                                             ArrayRef<Value> offsets) {
  constexpr int64_t kWidth = 8;
  SmallVector<Value> vectors;
  for (Value e : offsets) {
    vectors.push_back(loadVector(b, weight, addIndex(b, wA, e), kWidth));
    vectors.push_back(loadVector(b, weight, addIndex(b, wB, e), kWidth));
  }
  return vectors;
}

/// A software-pipelined `scf.for k = begin to end step step` carrying
/// `numAcc` f32 accumulators (from zero) and the weight vectors of one step:
/// step k + step's vectors (`loadStep`, at most `last`: the last step
/// reloads itself, an L1 hit, instead of branching) are loaded before
/// `compute` consumes step k's. Returns the final accumulators.
static SmallVector<Value> emitPipelinedLoop(
    ImplicitLocOpBuilder &b, Value begin, Value end, int64_t step,
    llvm::function_ref<Value(ImplicitLocOpBuilder &)> last, int64_t numAcc,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value)>
        loadStep,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, ArrayRef<Value>,
                            SmallVector<Value> &)>
        compute) {
  SmallVector<Value> init(numAcc, constF32(b, 0.0));
  llvm::append_range(init, loadStep(b, begin));
  auto loop = scf::ForOp::create(
      b, begin, end, constIndex(b, step), init,
      [&](OpBuilder &nb, Location loc, Value k, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value nextK =
            arith::MinUIOp::create(ib, addIndex(ib, k, step), last(ib));
        SmallVector<Value> acc(args.take_front(numAcc));
        SmallVector<Value> prefetched = loadStep(ib, nextK);
        compute(ib, k, llvm::to_vector(args.drop_front(numAcc)), acc);
        llvm::append_range(acc, prefetched);
        scf::YieldOp::create(ib, acc);
      });
  return SmallVector<Value>(loop.getResults().take_front(numAcc));
}

/// The warp-level work for tiles of `T` tokens starting at `tokenBase`:
/// every warp loops over its pairs of output rows.
static void emitPairs(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                      int64_t numTokens, Value tileStart, Value tokenBase) {
  constexpr int64_t kWidth = 8;
  const int64_t T = numTokens;
  const int64_t chunk = 32 * kWidth; // elements per warp and step
  // Fewer chunks per step for bigger token tiles: the loads in flight stay
  // about the same and the registers bounded (2T accumulators).
  const int64_t unroll = std::max<int64_t>(1, p.unroll / T);
  const int64_t step = unroll * chunk;
  const int64_t mainEnd = (p.hidden / step) * step;
  const int64_t H = p.hidden;

  Value lane = laneId(b);
  Value warp = warpId(b);
  Value firstPair = addIndex(b, mulIndex(b, blockIdX(b), p.warps), warp);
  Value pairStride = mulIndex(b, gridDimX(b), p.warps);
  Value laneOffset = mulIndex(b, lane, kWidth);
  Value xTileBase = mulIndex(b, tokenBase, H);
  // The token lane t < T finishes (lanes >= T: the last one, unused), and
  // what the epilogue needs of it, loaded before the dot products so that
  // those loads overlap the weight stream.
  Value token = addIndex(b, addIndex(b, tileStart, tokenBase),
                         arith::MinUIOp::create(b, lane, constIndex(b, T - 1)));
  TokenInputs inputs = loadTokenInputs(b, p, token);

  forLoop(
      b, firstPair, constIndex(b, p.pairs), pairStride,
      [&](ImplicitLocOpBuilder &b, Value pair) {
        PairRows rows = getPairRows(b, p, pair);
        Value wA = mulIndex(b, rows.rowA, H);
        Value wB = mulIndex(b, rows.rowB, H);

        // Dot products: 2T fp32 accumulators.
        auto accumulate = [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> wVecs,
                              ArrayRef<Value> elems, SmallVector<Value> &acc) {
          // wVecs: [u][row] weight vectors; elems: element offset per u.
          for (size_t u = 0; u < elems.size(); ++u) {
            Value wa = extToF32(ib, wVecs[2 * u]);
            Value wb = extToF32(ib, wVecs[2 * u + 1]);
            for (int64_t t = 0; t < T; ++t) {
              Value xIndex =
                  addIndex(ib, addIndex(ib, xTileBase, t * H), elems[u]);
              Value x = extToF32(ib, loadVector(ib, p.xs, xIndex, kWidth));
              for (int64_t e = 0; e < kWidth; ++e) {
                Value xe = vector::ExtractOp::create(ib, x, e);
                acc[2 * t] = fma(ib, vector::ExtractOp::create(ib, wa, e), xe,
                                 acc[2 * t]);
                acc[2 * t + 1] = fma(ib, vector::ExtractOp::create(ib, wb, e),
                                     xe, acc[2 * t + 1]);
              }
            }
          }
        };
        // The 2U weight vectors of step k: independent 16-byte loads.
        auto elemsOf = [&](ImplicitLocOpBuilder &ib, Value k) {
          SmallVector<Value> elems;
          for (int64_t u = 0; u < unroll; ++u)
            elems.push_back(
                addIndex(ib, addIndex(ib, k, u * chunk), laneOffset));
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
                accumulate(ib, wVecs, elemsOf(ib, k), next);
              });
        if (mainEnd < H) {
          auto loop = scf::ForOp::create(
              b, constIndex(b, mainEnd), constIndex(b, H), constIndex(b, chunk),
              acc, [&](OpBuilder &nb, Location loc, Value k, ValueRange args) {
                ImplicitLocOpBuilder ib(loc, nb);
                Value e = addIndex(ib, k, laneOffset);
                Value inBounds =
                    cmpI(ib, arith::CmpIPredicate::ult, e, constIndex(ib, H));
                auto ifOp = scf::IfOp::create(
                    ib, inBounds,
                    [&](OpBuilder &tb, Location tl) {
                      ImplicitLocOpBuilder tib(tl, tb);
                      SmallVector<Value> wVecs =
                          loadRowPairVectors(tib, p.weight, wA, wB, {e});
                      SmallVector<Value> next(args.begin(), args.end());
                      accumulate(tib, wVecs, {e}, next);
                      scf::YieldOp::create(tib, next);
                    },
                    [&](OpBuilder &eb, Location el) {
                      scf::YieldOp::create(eb, el, args);
                    });
                scf::YieldOp::create(ib, ifOp.getResults());
              });
          acc.assign(loop.getResults().begin(), loop.getResults().end());
        }
        for (Value &a : acc)
          a = warpReduce(b, a, ReduceKind::Sum);

        // Epilogue: lane t < T finishes token tileStart + tokenBase + t.
        Value active =
            cmpI(b, arith::CmpIPredicate::ult, lane, constIndex(b, T));
        ifThen(b, active, [&](ImplicitLocOpBuilder &b) {
          Value sumA = acc[0], sumB = acc[1];
          for (int64_t t = 1; t < T; ++t) {
            Value isT =
                cmpI(b, arith::CmpIPredicate::eq, lane, constIndex(b, t));
            sumA = arith::SelectOp::create(b, isT, acc[2 * t], sumA);
            sumB = arith::SelectOp::create(b, isT, acc[2 * t + 1], sumB);
          }
          emitPairEpilogue(b, p, rows, inputs, sumA, sumB);
        });
      });
}

/// The module global holding the RoPE inverse frequencies of the kernel
/// `entry` (shared by its variants).
static std::string getInvFreqTableName(StringRef entry) {
  return (entry + "_inv_freq").str();
}

/// Resolves the buffers and scalars of `p` to the arguments of `func` (a
/// gpu.func with the kernel's parameter list `params`), at the builder's
/// insertion point. The RoPE table is the module global `invFreqName`.
static LogicalResult bindPlan(ImplicitLocOpBuilder &b, ProjectionPlan &p,
                              KernelOp kernel, gpu::GPUFuncOp func,
                              ArrayRef<KernelParam> params,
                              gpu::GPUModuleOp module, StringRef invFreqName) {
  QKVProjOp qkv = p.ops.qkv;
  Block &body = kernel.getBody().front();
  auto arg = [&](Value bodyValue) -> Value {
    if (!bodyValue)
      return nullptr;
    auto blockArg = dyn_cast<BlockArgument>(bodyValue);
    if (!blockArg || blockArg.getOwner() != &body)
      return nullptr;
    return func.getArgument(blockArg.getArgNumber());
  };
  auto output = [&](Value bodyValue) -> Value {
    if (!bodyValue)
      return nullptr;
    for (auto [index, yielded] : llvm::enumerate(kernel.getYield().getValues()))
      if (yielded == bodyValue)
        return func.getArgument(kernel.getInputs().size() + index);
    return nullptr;
  };
  p.batch =
      i32ToIndex(b, func.getArgument(findParam(params, contract::dim::kBatch)));
  if (int maxPages = findParam(params, contract::dim::kMaxPages); maxPages >= 0)
    p.maxPages = func.getArgument(maxPages);

  p.weight = arg(qkv.getWeight());
  p.bias = arg(qkv.getBias());
  p.norm.hidden = p.hidden;
  p.norm.elementType = p.act;
  if (RMSNormOp rms = p.ops.rms) {
    p.norm.kind = NormSpec::Kind::RMS;
    p.norm.epsilon = rms.getEpsilon().convertToDouble();
    p.norm.unitOffset = rms.getUnitOffset();
    p.norm.input = arg(rms.getInput());
    p.norm.residual = arg(rms.getResidual());
    p.norm.weight = arg(rms.getWeight());
    p.norm.residualOut = output(rms.getResidualOut());
    p.norm.normedOut = output(rms.getResult());
  } else if (LayerNormOp layer = p.ops.layer) {
    p.norm.kind = NormSpec::Kind::Layer;
    p.norm.epsilon = layer.getEpsilon().convertToDouble();
    p.norm.input = arg(layer.getInput());
    p.norm.weight = arg(layer.getWeight());
    p.norm.bias = arg(layer.getBias());
    p.norm.normedOut = output(layer.getResult());
  } else {
    p.norm.input = arg(qkv.getInput());
  }
  p.qRaw = output(qkv.getQuery());
  p.kRaw = output(qkv.getKey());
  p.vRaw = output(qkv.getValue());
  if (RopeOp rope = p.ops.rope) {
    p.qRot = output(rope.getQueryOut());
    p.kRot = output(rope.getKeyOut());
    p.ropePositions = arg(rope.getPositions());
    p.invFreq = getRopeInvFreqTable(b, module, rope, invFreqName);
  }
  if (KVAppendOp append = p.ops.append) {
    p.keyCache = arg(append.getKeyCache());
    p.valueCache = arg(append.getValueCache());
    p.blockTable = arg(append.getBlockTable());
    p.appendPositions = arg(append.getPositions());
  }
  if (!p.weight || !p.norm.input || (p.ops.rope && !p.ropePositions) ||
      (p.ops.append && (!p.keyCache || !p.valueCache || !p.blockTable ||
                        !p.appendPositions || !p.maxPages)))
    return kernel.emitOpError(
        "unsupported projection kernel: weights, positions, caches and the "
        "block table must be kernel operands");
  return success();
}

/// Creates the gpu.func `entry` with `launch`'s parameters and `blockSize`
/// threads and binds `p` to its arguments (RoPE table: that of the primary
/// entry, shared by its variants); `b` is left in its body.
static FailureOr<gpu::GPUFuncOp>
createProjectionFunc(ImplicitLocOpBuilder &b, ProjectionPlan &p,
                     KernelOp kernel, gpu::GPUModuleOp module,
                     const KernelLaunch &launch, StringRef entry,
                     int64_t blockSize) {
  gpu::GPUFuncOp func = createKernelFunc(b, kernel.getLoc(), module, entry,
                                         launch.params, blockSize);
  if (failed(bindPlan(b, p, kernel, func, launch.params, module,
                      getInvFreqTableName(launch.entry))))
    return failure();
  return func;
}

/// The tensor-core variant's schedule (see emitMmaVariant).
struct MmaSchedule {
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
  /// Workgroup f32 buffer for the partial sums of parts 1..kSplit-1.
  Value partials;

  /// Threads per CTA.
  int64_t blockSize() const { return 32 * warps; }
  /// Row blocks in flight per CTA.
  int64_t slots() const { return warps / kSplit; }
  /// f32 elements of `partials` for a split of `split` and `n` 8-token column
  /// blocks: register c of lane l of part p (1..split-1) and slot s at
  /// [((p - 1) * slots + s) * 32 * 4n + 32c + l].
  int64_t partialFloats(int64_t split, int64_t n) const {
    return (split - 1) * (warps / split) * 32 * 4 * n;
  }
};

/// Body of the tensor-core variant: for every tile of up to tileTokens
/// tokens, the CTA normalises the tile into shared memory (one warp per
/// token), then every warp takes blocks of 16 weight rows (8 pairs, the
/// pairs' first rows as fragment rows 0-7 and their second rows as 8-15)
/// and multiplies them with all tokens of the tile with mma.m16n8k16, kSplit
/// warps per block splitting k (so that enough warps stream weights). `xs`
/// is the tile in shared memory: tileTokens rows of rowStride elements of
/// the activation type.
static void emitMmaTiles(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                         const MmaSchedule &s, Value xs) {
  constexpr int64_t kWidth = 8;
  // A warp normalises a token of up to 32 * 8 * 16 = 4096 elements with
  // all its loads in flight at once (the variant has no register cap);
  // LayerNorm, with its bias and second pass, spills at 16 (ptxas).
  const int64_t normChunks = p.norm.kind == NormSpec::Kind::Layer ? 8 : 16;
  const int64_t H = p.hidden, J = s.vectors, step = 32 * J;
  const int64_t nTiles = s.tileTokens / 8;
  Value lane = laneId(b), warp = warpId(b);
  // The mma fragment coordinates of this lane (PTX ISA: groupID g and
  // threadID_in_group t).
  Value g = arith::DivUIOp::create(b, lane, constIndex(b, 4));
  Value t4 = arith::RemUIOp::create(b, lane, constIndex(b, 4));
  Value laneK = mulIndex(b, t4, kWidth);
  Value isCta0 =
      cmpI(b, arith::CmpIPredicate::eq, blockIdX(b), constIndex(b, 0));
  // Fragment registers: elements [at, at + 2) of a 16-byte vector.
  auto pairOf = [&](ImplicitLocOpBuilder &ib, Value v, int64_t at) -> Value {
    return vector::ShuffleOp::create(ib, v, v, ArrayRef<int64_t>{at, at + 1});
  };
  forEachTokenTile(
      b, p.batch, s.tileTokens,
      [&](ImplicitLocOpBuilder &b, Value tileStart, Value count) {
        forLoop(b, warp, count, constIndex(b, s.warps),
                [&](ImplicitLocOpBuilder &b, Value t) {
                  emitNormalizeToken(b, p.norm, addIndex(b, tileStart, t), xs,
                                     mulIndex(b, t, s.rowStride), isCta0,
                                     /*scratch=*/Value(), s.blockSize(),
                                     /*warpOnly=*/true, normChunks);
                });
        barrier(b);
        // This lane finishes tokens 8n + 2t + i of the tile (the columns of
        // its accumulator registers); rows beyond `count` are not stored.
        SmallVector<TokenInputs> inputs;
        SmallVector<Value> valid;
        Value last = arith::SubIOp::create(b, count, constIndex(b, 1));
        for (int64_t n = 0; n < nTiles; ++n)
          for (int64_t i = 0; i < 2; ++i) {
            Value t = addIndex(b, mulIndex(b, t4, 2), 8 * n + i);
            valid.push_back(cmpI(b, arith::CmpIPredicate::ult, t, count));
            inputs.push_back(loadTokenInputs(
                b, p,
                addIndex(b, tileStart, arith::MinUIOp::create(b, t, last))));
          }
        // Row blocks of 16 rows go round-robin over the CTAs (block-major,
        // so that every CTA gets some); within a CTA, slots() row blocks
        // are in flight at once, each split over kSplit warps that take
        // consecutive k ranges of kPart elements.
        const int64_t slots = s.slots(), kPart = H / s.kSplit;
        const int64_t rowBlocks = p.pairs / 8;
        Value slot = arith::RemUIOp::create(b, warp, constIndex(b, slots));
        Value part = arith::DivUIOp::create(b, warp, constIndex(b, slots));
        Value kBegin = mulIndex(b, part, kPart);
        Value isFirstPart =
            cmpI(b, arith::CmpIPredicate::eq, part, constIndex(b, 0));
        // The dot products of rows `wA`, `wB` (element offsets of this
        // lane's first vectors) over this warp's k range. Lane (g, t) reads
        // elements [k + 32j + 8t, +8) of rows g and g + 8 and of token rows
        // g: one 16-byte vector each. The k order inside a step is permuted
        // identically for both operands (mma h of a vector uses its elements
        // 4h..4h+3 as fragment columns 2t, 2t+1, 2t+8, 2t+9), which leaves
        // every dot product unchanged.
        auto dotProducts = [&](ImplicitLocOpBuilder &b, Value wA, Value wB) {
          return emitPipelinedLoop(
              b, kBegin, addIndex(b, kBegin, kPart), step,
              [&](ImplicitLocOpBuilder &ib) {
                return addIndex(ib, kBegin, kPart - step);
              },
              4 * nTiles,
              [&](ImplicitLocOpBuilder &ib, Value k) {
                SmallVector<Value> offsets;
                for (int64_t j = 0; j < J; ++j)
                  offsets.push_back(addIndex(ib, k, 32 * j));
                return loadRowPairVectors(ib, p.weight, wA, wB, offsets);
              },
              [&](ImplicitLocOpBuilder &ib, Value k, ArrayRef<Value> w,
                  SmallVector<Value> &acc) {
                for (int64_t j = 0; j < J; ++j) {
                  Value wa = w[2 * j], wb = w[2 * j + 1];
                  Value e = addIndex(ib, addIndex(ib, k, 32 * j), laneK);
                  SmallVector<Value> xv;
                  for (int64_t n = 0; n < nTiles; ++n) {
                    Value tokenRow = addIndex(ib, g, 8 * n);
                    xv.push_back(loadVector(
                        ib, xs,
                        addIndex(ib, mulIndex(ib, tokenRow, s.rowStride), e),
                        kWidth));
                  }
                  for (int64_t half = 0; half < 2; ++half) {
                    int64_t at = 4 * half;
                    SmallVector<Value> aFrag{
                        pairOf(ib, wa, at), pairOf(ib, wb, at),
                        pairOf(ib, wa, at + 2), pairOf(ib, wb, at + 2)};
                    for (int64_t n = 0; n < nTiles; ++n) {
                      SmallVector<Value> bFrag{pairOf(ib, xv[n], at),
                                               pairOf(ib, xv[n], at + 2)};
                      SmallVector<Value, 4> d =
                          mmaM16N8K16(ib, p.act, aFrag, bFrag,
                                      ArrayRef<Value>(acc).slice(4 * n, 4));
                      std::copy(d.begin(), d.end(), acc.begin() + 4 * n);
                    }
                  }
                }
              });
        };
        // Builds `scf.if cond -> (4 * nTiles x f32)`: thenValues() or zeros.
        auto ifAccumulators =
            [&](ImplicitLocOpBuilder &b, Value cond,
                llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)>
                    thenValues,
                ArrayRef<Value> elseValues) {
              SmallVector<Type> types(4 * nTiles, b.getF32Type());
              auto ifOp = scf::IfOp::create(b, types, cond,
                                            /*withElseRegion=*/true);
              ImplicitLocOpBuilder ib(b.getLoc(), b.getContext());
              ib.setInsertionPointToStart(ifOp.thenBlock());
              scf::YieldOp::create(ib, thenValues(ib));
              ib.setInsertionPointToStart(ifOp.elseBlock());
              scf::YieldOp::create(ib, elseValues);
              return SmallVector<Value>(ifOp.getResults());
            };
        forLoop(
            b, blockIdX(b), constIndex(b, rowBlocks),
            mulIndex(b, gridDimX(b), slots),
            [&](ImplicitLocOpBuilder &b, Value roundBase) {
              Value rowBlock =
                  addIndex(b, roundBase, mulIndex(b, slot, gridDimX(b)));
              Value active = cmpI(b, arith::CmpIPredicate::ult, rowBlock,
                                  constIndex(b, rowBlocks));
              // Inactive warps take row block 0's rows, unused.
              rowBlock = arith::SelectOp::create(b, active, rowBlock,
                                                 constIndex(b, 0));
              PairRows rows =
                  getPairRows(b, p, addIndex(b, mulIndex(b, rowBlock, 8), g));
              Value wA = addIndex(b, mulIndex(b, rows.rowA, H), laneK);
              Value wB = addIndex(b, mulIndex(b, rows.rowB, H), laneK);
              SmallVector<Value> zeros(4 * nTiles, constF32(b, 0.0));
              SmallVector<Value> acc = ifAccumulators(
                  b, active,
                  [&](ImplicitLocOpBuilder &ib) {
                    return dotProducts(ib, wA, wB);
                  },
                  zeros);
              if (s.kSplit > 1) {
                // Parts 1.. hand their sums to part 0 through shared memory
                // (MmaSchedule::partialFloats: register c of lane l at
                // [c][l], conflict-free).
                auto at = [&](ImplicitLocOpBuilder &b, Value fromPart,
                              int64_t c) {
                  Value owner =
                      addIndex(b,
                               mulIndex(b,
                                        arith::SubIOp::create(b, fromPart,
                                                              constIndex(b, 1)),
                                        slots),
                               slot);
                  return addIndex(b, mulIndex(b, owner, 32 * 4 * nTiles),
                                  addIndex(b, lane, 32 * c));
                };
                ifThen(
                    b,
                    arith::XOrIOp::create(
                        b, isFirstPart, arith::ConstantIntOp::create(b, 1, 1)),
                    [&](ImplicitLocOpBuilder &b) {
                      for (int64_t c = 0; c < 4 * nTiles; ++c)
                        storeScalar(b, acc[c], s.partials, at(b, part, c));
                    });
                barrier(b);
                acc = ifAccumulators(
                    b, isFirstPart,
                    [&](ImplicitLocOpBuilder &ib) {
                      SmallVector<Value> sum(acc);
                      for (int64_t from = 1; from < s.kSplit; ++from)
                        for (int64_t c = 0; c < 4 * nTiles; ++c)
                          sum[c] = arith::AddFOp::create(
                              ib, sum[c],
                              loadScalar(ib, s.partials,
                                         at(ib, constIndex(ib, from), c)));
                      return sum;
                    },
                    acc);
                // Read before the next round's partials are written.
                barrier(b);
              }
              // Registers c0, c1: first rows (g) of tokens 2t, 2t + 1;
              // c2, c3: second rows (g + 8). Part 0 finishes the block.
              ifThen(b, arith::AndIOp::create(b, active, isFirstPart),
                     [&](ImplicitLocOpBuilder &b) {
                       for (int64_t n = 0; n < nTiles; ++n)
                         for (int64_t i = 0; i < 2; ++i) {
                           Value sumA = acc[4 * n + i];
                           Value sumB = acc[4 * n + 2 + i];
                           ifThen(b, valid[2 * n + i],
                                  [&](ImplicitLocOpBuilder &b) {
                                    emitPairEpilogue(b, p, rows,
                                                     inputs[2 * n + i], sumA,
                                                     sumB);
                                  });
                         }
                     });
            });
      });
}

/// Smallest batch the tensor-core variant is launched for: measured on the
/// H200 for Llama-3-8B (docs/performance.md), it beats the CUDA-core kernel
/// from batch 2 (23.2 vs 29.1 us with tiles of 4) and loses at batch 1
/// (22.5 vs 16.0 with tiles of 1).
constexpr int64_t kMmaMinBatch = 2;

/// The tensor-core variant's schedule, if the target has tensor cores and
/// the shapes allow it: hidden % 32 == 0 (whole 32-element k steps), pairs
/// % 8 == 0 (16-row blocks) and at least 8 token rows in shared memory.
static std::optional<MmaSchedule> chooseMmaSchedule(const ProjectionPlan &p,
                                                    gpu::GPUModuleOp module) {
  if (!hasTensorCores(module) || p.hidden % 32 != 0 || p.pairs % 8 != 0)
    return std::nullopt;
  MmaSchedule s;
  const int64_t rowBlocks = p.pairs / 8, elemBytes = getTypeBytes(p.act);
  // Rows padded so that their pitch is 64 bytes past a multiple of 128: the
  // 8 lanes of a shared-memory phase read two token rows in different bank
  // halves.
  const int64_t pitch = p.hidden * elemBytes;
  s.rowStride = p.hidden + ((64 - pitch % 128 + 128) % 128) / elemBytes;
  const int64_t rowBytes = s.rowStride * elemBytes;
  // Room for the partial sums of the largest split (8) and tile (32 tokens).
  const int64_t partialBytes = 4 * s.partialFloats(s.warps, 4);
  s.tileTokens = std::min<int64_t>(
      32, (getMaxSharedBytesPerCTA(module) - partialBytes) / rowBytes / 8 * 8);
  if (s.tileTokens < 8)
    return std::nullopt;
  s.dynamicSharedBytes = s.tileTokens * rowBytes;
  s.grid = std::min(getSMCount(module), rowBlocks);
  // Split k over as many warps as the CTAs have for the row blocks (each
  // part a whole number of 32-element steps).
  s.kSplit = s.warps;
  while (s.kSplit > 1 && (rowBlocks * s.kSplit > s.grid * s.warps ||
                          p.hidden % (32 * s.kSplit) != 0))
    s.kSplit /= 2;
  s.vectors = 8;
  while ((p.hidden / s.kSplit) % (32 * s.vectors) != 0)
    s.vectors /= 2;
  return s;
}

/// Adds the tensor-core variant of a projection kernel with schedule `s`,
/// launched for batches of at least kMmaMinBatch: it streams the weights
/// once per tile of up to 32 tokens (the CUDA-core kernel: once per token
/// when the variant exists, once per 4 tokens otherwise).
static LogicalResult emitMmaVariant(KernelOp kernel, gpu::GPUModuleOp module,
                                    ProjectionPlan p, MmaSchedule s,
                                    KernelLaunch &launch) {
  KernelVariant variant;
  variant.minBatch = kMmaMinBatch;
  variant.entry = launch.entry + "_mma";
  variant.grid = {std::to_string(s.grid), "1", "1"};
  variant.blockSize = s.blockSize();
  variant.dynamicSharedBytes = s.dynamicSharedBytes;
  ImplicitLocOpBuilder b(kernel.getLoc(), kernel.getContext());
  FailureOr<gpu::GPUFuncOp> func = createProjectionFunc(
      b, p, kernel, module, launch, variant.entry, s.blockSize());
  if (failed(func))
    return failure();
  Value xs =
      getDynamicSharedBuffer(b, module, p.act, s.tileTokens * s.rowStride);
  if (s.kSplit > 1)
    s.partials = addWorkgroupBuffer(
        *func, b.getF32Type(), s.partialFloats(s.kSplit, s.tileTokens / 8));
  emitMmaTiles(b, p, s, xs);

  Builder attrs(kernel.getContext());
  variant.schedule = attrs.getDictionaryAttr({
      attrs.getNamedAttr("kind", attrs.getStringAttr("projection_mma")),
      attrs.getNamedAttr("min_batch", attrs.getI64IntegerAttr(kMmaMinBatch)),
      attrs.getNamedAttr("threads", attrs.getI64IntegerAttr(s.blockSize())),
      attrs.getNamedAttr("warps", attrs.getI64IntegerAttr(s.warps)),
      attrs.getNamedAttr("grid", attrs.getI64IntegerAttr(s.grid)),
      attrs.getNamedAttr("rows_per_warp", attrs.getI64IntegerAttr(16)),
      attrs.getNamedAttr("tile_tokens", attrs.getI64IntegerAttr(s.tileTokens)),
      attrs.getNamedAttr("k_vectors", attrs.getI64IntegerAttr(s.vectors)),
      attrs.getNamedAttr("k_split", attrs.getI64IntegerAttr(s.kSplit)),
  });
  launch.variants.push_back(std::move(variant));
  return success();
}

FailureOr<KernelLaunch>
mlir::fusion::emitProjectionKernel(KernelOp kernel, gpu::GPUModuleOp module) {
  FailureOr<FrontHalf> analysed = analyse(kernel);
  if (failed(analysed))
    return failure();
  ProjectionPlan p;
  p.ops = *analysed;
  QKVProjOp qkv = p.ops.qkv;
  auto inputType = cast<ShapedType>(qkv.getInput().getType());
  p.act = inputType.getElementType();
  p.hidden = inputType.getDimSize(1);
  p.hq = qkv.getNumHeads();
  p.hkv = qkv.getNumKvHeads();
  p.headDim = qkv.getHeadDim();
  p.rows = (p.hq + 2 * p.hkv) * p.headDim;
  p.pairs = p.rows / 2;

  // Shapes the schedule supports.
  if (p.hidden % 8 != 0)
    return kernel.emitOpError("hidden size ")
           << p.hidden
           << " is not a multiple of 8 (the projection reads 16-byte vectors "
              "of 8 elements)";
  if (p.headDim % 2 != 0)
    return kernel.emitOpError("head_dim ")
           << p.headDim << " is odd; the projection computes rows in pairs";
  const int64_t elemBytes = getTypeBytes(p.act);
  constexpr int64_t kSharedBudget = 46 * 1024; // of the 48 KiB static limit
  if (p.hidden > kSharedBudget / elemBytes)
    return kernel.emitOpError("hidden size ")
           << p.hidden << " needs more shared memory per token row than the "
           << kSharedBudget << " bytes available (" << elemBytes
           << " bytes per element)";
  if (p.ops.rope) {
    p.rotaryDim = p.ops.rope.getEffectiveRotaryDim();
    p.neox = p.ops.rope.getPairing() == RopePairing::neox;
  }
  if (p.ops.append) {
    auto cacheType = cast<MemRefType>(p.ops.append.getKeyCache().getType());
    p.pageSize = cacheType.getDimSize(1);
    p.appendKeyRotated =
        p.ops.rope && p.ops.append.getKey() == p.ops.rope.getKeyOut();
  }

  // Schedule: 8 warps; fewer when that leaves SMs idle at batch 1.
  const int64_t smCount = getSMCount(module);
  p.warps = 8;
  while (p.warps > 2 &&
         static_cast<int64_t>(llvm::divideCeil(p.pairs, p.warps)) < smCount)
    p.warps /= 2;
  p.blockSize = 32 * p.warps;
  p.pairsPerWarp = std::max<int64_t>(1, p.pairs / (p.warps * 2 * smCount));
  p.grid = llvm::divideCeil(p.pairs, p.warps * p.pairsPerWarp);
  p.batchTile = 8;
  while (p.batchTile > 1 && p.batchTile * p.hidden * elemBytes > kSharedBudget)
    p.batchTile /= 2;
  // With the tensor-core variant, this kernel only runs at batch 1: a tile
  // of one token (measured: 16.0 us at batch 1 vs 19.2 with tiles of 4).
  std::optional<MmaSchedule> mma = chooseMmaSchedule(p, module);
  p.batchTile = std::min<int64_t>(p.batchTile, mma ? 1 : 4);
  const int64_t chunks = p.hidden / 256;
  p.unroll = chunks >= 2 ? 2 : 1;

  // Parameters and the gpu.func.
  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = p.blockSize;
  launch.grid = {std::to_string(p.grid), "1", "1"};
  ImplicitLocOpBuilder b(kernel.getLoc(), kernel.getContext());
  FailureOr<gpu::GPUFuncOp> func = createProjectionFunc(
      b, p, kernel, module, launch, launch.entry, p.blockSize);
  if (failed(func))
    return failure();

  // Shared memory: the normalised rows of one batch tile, and the
  // reduction scratch.
  p.xs = addWorkgroupBuffer(*func, p.act, p.batchTile * p.hidden);
  // Ask ptxas for at least 3 CTAs per SM (.minnctapersm; bounds the
  // registers per thread: 80 at 256 threads), as shared memory allows
  // (227 KiB per SM, ~1 KiB reserved per CTA). Measured on the H200 for the
  // Llama-3-8B front half: with tiles of 1, 16.0 us at B=1 vs 16.7 without
  // the hint; with tiles of 4 (no tensor-core variant), 3 is best at B=4
  // (33.0 us vs 40.9) and B=16 (104 vs 123) and even at B=1 (19.2 vs 19.4);
  // 4 forces 64 registers and spills (28.6 us at B=1). (docs/performance.md;
  // the hint caps every batch-tile path of the kernel at 80 registers.)
  const int64_t ctaShared = p.batchTile * p.hidden * elemBytes + 4 * p.warps;
  p.minCtasPerSM = std::max<int64_t>(
      1, std::min<int64_t>(
             {3, (227 * 1024) / (ctaShared + 1024), 2048 / p.blockSize}));
  (*func)->setAttr("nvvm.minctasm", b.getI32IntegerAttr(p.minCtasPerSM));
  p.scratch = addWorkgroupBuffer(*func, b.getF32Type(), p.warps);

  Value isCta0 =
      cmpI(b, arith::CmpIPredicate::eq, blockIdX(b), constIndex(b, 0));
  forEachTokenTile(
      b, p.batch, p.batchTile,
      [&](ImplicitLocOpBuilder &b, Value tileStart, Value count) {
        // One token: the whole CTA normalises it (lowest latency). Several:
        // warp t % warps normalises token t with shuffles only, in parallel.
        auto normalizeSingle = [&](ImplicitLocOpBuilder &b) {
          emitNormalizeToken(b, p.norm, tileStart, p.xs, constIndex(b, 0),
                             isCta0, p.scratch, p.blockSize);
        };
        if (p.batchTile == 1) {
          normalizeSingle(b);
        } else {
          Value single =
              cmpI(b, arith::CmpIPredicate::eq, count, constIndex(b, 1));
          auto ifSingle = scf::IfOp::create(b, single, /*withElseRegion=*/true);
          ImplicitLocOpBuilder tb(b.getLoc(), b.getContext());
          tb.setInsertionPoint(ifSingle.thenBlock()->getTerminator());
          normalizeSingle(tb);
          tb.setInsertionPoint(ifSingle.elseBlock()->getTerminator());
          Value warp = warpId(tb);
          for (int64_t t = 0; t < p.batchTile; ++t) {
            Value present =
                cmpI(tb, arith::CmpIPredicate::ult, constIndex(tb, t), count);
            Value mine = cmpI(tb, arith::CmpIPredicate::eq, warp,
                              constIndex(tb, t % p.warps));
            ifThen(tb, arith::AndIOp::create(tb, present, mine),
                   [&](ImplicitLocOpBuilder &b) {
                     emitNormalizeToken(b, p.norm, addIndex(b, tileStart, t),
                                        p.xs, constIndex(b, t * p.hidden),
                                        isCta0, p.scratch, p.blockSize,
                                        /*warpOnly=*/true);
                   });
          }
        }
        barrier(b);
        // Binary decomposition of count: sub-tiles of T = batchTile, ..., 1
        // tokens, each reading the weights once.
        for (int64_t T = p.batchTile; T >= 1; T /= 2) {
          Value bit = arith::AndIOp::create(b, count, constIndex(b, T));
          Value has = cmpI(b, arith::CmpIPredicate::ne, bit, constIndex(b, 0));
          // Offset of this sub-tile: count with bits below 2T cleared.
          Value base =
              arith::AndIOp::create(b, count, constIndex(b, ~(2 * T - 1)));
          ifThen(b, has, [&](ImplicitLocOpBuilder &b) {
            emitPairs(b, p, T, tileStart, base);
          });
        }
      });

  Builder attrs(kernel.getContext());
  launch.schedule = attrs.getDictionaryAttr({
      attrs.getNamedAttr("kind", attrs.getStringAttr("projection")),
      attrs.getNamedAttr("threads", attrs.getI64IntegerAttr(p.blockSize)),
      attrs.getNamedAttr("warps", attrs.getI64IntegerAttr(p.warps)),
      attrs.getNamedAttr("grid", attrs.getI64IntegerAttr(p.grid)),
      attrs.getNamedAttr("rows_per_warp", attrs.getI64IntegerAttr(2)),
      attrs.getNamedAttr("pairs_per_warp",
                         attrs.getI64IntegerAttr(p.pairsPerWarp)),
      attrs.getNamedAttr("vector_width", attrs.getI64IntegerAttr(8)),
      attrs.getNamedAttr("k_unroll", attrs.getI64IntegerAttr(p.unroll)),
      attrs.getNamedAttr("batch_tile", attrs.getI64IntegerAttr(p.batchTile)),
      attrs.getNamedAttr("min_ctas_per_sm",
                         attrs.getI64IntegerAttr(p.minCtasPerSM)),
  });
  if (mma && failed(emitMmaVariant(kernel, module, p, *mma, launch)))
    return failure();
  return launch;
}
