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
//===----------------------------------------------------------------------===//

#include "EmitterUtils.h"

#include "llvm/ADT/TypeSwitch.h"

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
  const int64_t H = p.hidden, D = p.headDim;

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
  Value ropePosition =
      p.ops.rope ? loadScalar(b, p.ropePositions, token) : Value();
  Value cacheSlot; // page * page_size + slot of the token's new KV entry
  if (p.ops.append) {
    Value pos = i32ToIndex(b, loadScalar(b, p.appendPositions, token));
    Value pageIndex = arith::DivSIOp::create(b, pos, constIndex(b, p.pageSize));
    Value slot = arith::RemSIOp::create(b, pos, constIndex(b, p.pageSize));
    Value tableIndex =
        addIndex(b, mulIndex(b, token, i32ToIndex(b, p.maxPages)), pageIndex);
    Value page = i32ToIndex(b, loadScalar(b, p.blockTable, tableIndex));
    cacheSlot = addIndex(b, mulIndex(b, page, p.pageSize), slot);
  }

  forLoop(
      b, firstPair, constIndex(b, p.pairs), pairStride,
      [&](ImplicitLocOpBuilder &b, Value pair) {
        PairRows rows = getPairRows(b, p, pair);
        Value head = rows.head, rotated = rows.rotated;
        Value da = rows.da, db = rows.db, rowA = rows.rowA, rowB = rows.rowB;
        Value wA = mulIndex(b, rowA, H);
        Value wB = mulIndex(b, rowB, H);

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
        auto loadStep = [&](ImplicitLocOpBuilder &ib, Value k) {
          SmallVector<Value> wVecs;
          for (int64_t u = 0; u < unroll; ++u) {
            Value e = addIndex(ib, addIndex(ib, k, u * chunk), laneOffset);
            wVecs.push_back(
                loadVector(ib, p.weight, addIndex(ib, wA, e), kWidth));
            wVecs.push_back(
                loadVector(ib, p.weight, addIndex(ib, wB, e), kWidth));
          }
          return wVecs;
        };
        SmallVector<Value> acc(2 * T, constF32(b, 0.0));
        if (mainEnd > 0) {
          // Software-pipelined: step k + step's loads are issued before
          // step k's FMAs (the last step reloads itself: an L1 hit).
          SmallVector<Value> init = acc;
          llvm::append_range(init, loadStep(b, constIndex(b, 0)));
          auto loop = scf::ForOp::create(
              b, constIndex(b, 0), constIndex(b, mainEnd), constIndex(b, step),
              init, [&](OpBuilder &nb, Location loc, Value k, ValueRange args) {
                ImplicitLocOpBuilder ib(loc, nb);
                Value nextK = arith::MinUIOp::create(
                    ib, addIndex(ib, k, step), constIndex(ib, mainEnd - step));
                SmallVector<Value> next(args.take_front(2 * T));
                SmallVector<Value> prefetched = loadStep(ib, nextK);
                SmallVector<Value> elems;
                for (int64_t u = 0; u < unroll; ++u)
                  elems.push_back(
                      addIndex(ib, addIndex(ib, k, u * chunk), laneOffset));
                accumulate(ib, llvm::to_vector(args.drop_front(2 * T)), elems,
                           next);
                llvm::append_range(next, prefetched);
                scf::YieldOp::create(ib, next);
              });
          acc.assign(loop.getResults().begin(),
                     loop.getResults().begin() + 2 * T);
        }
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
                      SmallVector<Value> wVecs{
                          loadVector(tib, p.weight, addIndex(tib, wA, e),
                                     kWidth),
                          loadVector(tib, p.weight, addIndex(tib, wB, e),
                                     kWidth)};
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
          if (p.bias) {
            sumA = arith::AddFOp::create(
                b, sumA, extToF32(b, loadScalar(b, p.bias, rowA)));
            sumB = arith::AddFOp::create(
                b, sumB, extToF32(b, loadScalar(b, p.bias, rowB)));
          }
          // The projection's outputs, rounded once.
          Value rawA = truncFromF32(b, sumA, p.act);
          Value rawB = truncFromF32(b, sumB, p.act);
          Value outA = rawA, outB = rawB;
          if (p.ops.rope) {
            Value freqIndex =
                arith::SelectOp::create(b, rotated, rows.j, constIndex(b, 0));
            auto [rotA, rotB] = emitRopeRotation(b, rawA, rawB, ropePosition,
                                                 p.invFreq, freqIndex, p.act);
            outA = arith::SelectOp::create(b, rotated, rotA, rawA);
            outB = arith::SelectOp::create(b, rotated, rotB, rawB);
          }
          auto storePair = [&](ImplicitLocOpBuilder &b, Value buffer,
                               Value base, Value va, Value vb) {
            storeScalar(b, va, buffer, addIndex(b, base, da));
            storeScalar(b, vb, buffer, addIndex(b, base, db));
          };
          // Element offset of the token's new entry for `kvHead` in a cache.
          auto cacheBase = [&](ImplicitLocOpBuilder &b, Value kvHead) {
            return mulIndex(
                b, addIndex(b, mulIndex(b, cacheSlot, p.hkv), kvHead), D);
          };
          Value isQ =
              cmpI(b, arith::CmpIPredicate::ult, head, constIndex(b, p.hq));
          Value isK = arith::AndIOp::create(
              b,
              arith::XOrIOp::create(b, isQ,
                                    arith::ConstantIntOp::create(b, 1, 1)),
              cmpI(b, arith::CmpIPredicate::ult, head,
                   constIndex(b, p.hq + p.hkv)));
          Value isV = cmpI(b, arith::CmpIPredicate::uge, head,
                           constIndex(b, p.hq + p.hkv));
          if (p.qRaw || p.qRot)
            ifThen(b, isQ, [&](ImplicitLocOpBuilder &b) {
              Value base =
                  mulIndex(b, addIndex(b, mulIndex(b, token, p.hq), head), D);
              if (p.qRaw)
                storePair(b, p.qRaw, base, rawA, rawB);
              if (p.qRot)
                storePair(b, p.qRot, base, outA, outB);
            });
          if (p.kRaw || p.kRot || p.keyCache)
            ifThen(b, isK, [&](ImplicitLocOpBuilder &b) {
              Value kvHead =
                  arith::SubIOp::create(b, head, constIndex(b, p.hq));
              Value base = mulIndex(
                  b, addIndex(b, mulIndex(b, token, p.hkv), kvHead), D);
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
                Value base = mulIndex(
                    b, addIndex(b, mulIndex(b, token, p.hkv), kvHead), D);
                storePair(b, p.vRaw, base, rawA, rawB);
              }
              if (p.valueCache)
                storePair(b, p.valueCache, cacheBase(b, kvHead), rawA, rawB);
            });
        });
      });
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
  if (p.hidden * elemBytes > kSharedBudget)
    return kernel.emitOpError("hidden size ")
           << p.hidden << " needs " << p.hidden * elemBytes
           << " bytes of shared memory per token row; at most " << kSharedBudget
           << " are available";
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
  p.batchTile = std::min<int64_t>(p.batchTile, 4);
  const int64_t chunks = p.hidden / 256;
  p.unroll = chunks >= 2 ? 2 : 1;

  // Parameters and the gpu.func.
  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = p.blockSize;
  launch.grid = {std::to_string(p.grid), "1", "1"};
  OpBuilder builder(kernel.getContext());
  gpu::GPUFuncOp func =
      createKernelFunc(builder, kernel.getLoc(), module, launch.entry,
                       launch.params, p.blockSize);
  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
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
  p.batch = i32ToIndex(b, func.getArgument(findParam(launch.params, "batch")));
  if (int maxPages = findParam(launch.params, "max_pages"); maxPages >= 0)
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
    p.invFreq =
        getRopeInvFreqTable(b, module, rope, launch.entry + "_inv_freq");
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

  // Shared memory: the normalised rows of one batch tile, and the
  // reduction scratch.
  p.xs = addWorkgroupBuffer(func, p.act, p.batchTile * p.hidden);
  // Ask ptxas for at least 3 CTAs per SM (.minnctapersm; bounds the
  // registers per thread: 80 at 256 threads), as shared memory allows
  // (227 KiB per SM, ~1 KiB reserved per CTA). Measured on the H200 for the
  // Llama-3-8B front half: 3 is best at B=4 (33.0 us vs 40.9 without the
  // hint) and B=16 (104 vs 123) and even at B=1 (19.2 vs 19.4); 4 forces 64
  // registers and spills (28.6 us at B=1). (docs/performance.md; the hint
  // also caps every batch-tile path of the kernel at 80 registers.)
  const int64_t ctaShared = p.batchTile * p.hidden * elemBytes + 4 * p.warps;
  p.minCtasPerSM = std::max<int64_t>(
      1, std::min<int64_t>(
             {3, (227 * 1024) / (ctaShared + 1024), 2048 / p.blockSize}));
  func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(p.minCtasPerSM));
  p.scratch = addWorkgroupBuffer(func, b.getF32Type(), p.warps);

  // for tileStart in [0, batch) step batchTile:
  Value isCta0 =
      cmpI(b, arith::CmpIPredicate::eq, blockIdX(b), constIndex(b, 0));
  forLoop(
      b, constIndex(b, 0), p.batch, constIndex(b, p.batchTile),
      [&](ImplicitLocOpBuilder &b, Value tileStart) {
        Value count = arith::MinSIOp::create(
            b, constIndex(b, p.batchTile),
            arith::SubIOp::create(b, p.batch, tileStart));
        // The previous tile's readers are done with the shared rows.
        barrier(b);
        // One token: the whole CTA normalises it (lowest latency). Several:
        // warp t % warps normalises token t with shuffles only, in parallel.
        Value single =
            cmpI(b, arith::CmpIPredicate::eq, count, constIndex(b, 1));
        auto ifSingle = scf::IfOp::create(b, single, /*withElseRegion=*/true);
        {
          ImplicitLocOpBuilder tb(b.getLoc(), b.getContext());
          tb.setInsertionPoint(ifSingle.thenBlock()->getTerminator());
          emitNormalizeToken(tb, p.norm, tileStart, p.xs, constIndex(tb, 0),
                             isCta0, p.scratch, p.blockSize);
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
  return launch;
}
