//===- ProjectionCommon.cpp - shared pieces of the projection kernels -----===//
//
// See Projection.h; the schedules are described at the top of
// ProjectionKernel.cpp and ProjectionMmaKernel.cpp.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/Activation.h"
#include "../Fragments/Rope.h"
#include "Projection.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fusion;

/// Collects the ops of a projection kernel (at most one of each, and one
/// projection: qkv_proj or linear).
static FailureOr<FrontHalf> collectFrontHalf(KernelOp kernel) {
  FrontHalf ops;
  auto set = [](auto &slot, auto op) {
    bool dup = static_cast<bool>(slot);
    slot = op;
    return dup;
  };
  for (Operation &op : kernel.getBody().front().without_terminator()) {
    bool duplicate =
        llvm::TypeSwitch<Operation *, bool>(&op)
            .Case([&](EmbeddingOp o) { return set(ops.embedding, o); })
            .Case([&](SumPartialsOp o) { return set(ops.sum, o); })
            .Case([&](RMSNormOp o) { return set(ops.rms, o) || ops.layer; })
            .Case([&](LayerNormOp o) { return set(ops.layer, o) || ops.rms; })
            .Case([&](QKVProjOp o) { return set(ops.qkv, o) || ops.linear; })
            .Case([&](LinearOp o) { return set(ops.linear, o) || ops.qkv; })
            .Case([&](RopeOp o) { return set(ops.rope, o); })
            .Case([&](KVAppendOp o) { return set(ops.append, o); })
            .Case([&](SiluMulOp o) { return set(ops.siluMul, o); })
            .Case([&](ArgmaxOp o) { return set(ops.argmax, o); })
            .Default([&](Operation *other) {
              kernel.emitOpError("projection kernel cannot contain '")
                  << other->getName() << "'";
              return true;
            });
    if (duplicate)
      return kernel.emitOpError(
          "projection kernel must hold at most one norm, one qkv_proj or "
          "linear, and one rope, kv_append, silu_mul and argmax (in this "
          "order)");
  }
  if (ops.linear && (ops.rope || ops.append))
    return kernel.emitOpError(
        "unsupported projection kernel: rope and kv_append follow qkv_proj, "
        "not linear");
  if (ops.qkv && (ops.siluMul || ops.argmax))
    return kernel.emitOpError(
        "unsupported projection kernel: silu_mul and argmax follow linear, "
        "not qkv_proj");
  return ops;
}

/// The projection's input (of qkv_proj or linear).
static Value getProjectionInput(FrontHalf ops) {
  return ops.qkv ? ops.qkv.getInput() : ops.linear.getInput();
}

/// Whether `embedding` takes kernel operands and its rows are the input of
/// the norm of `ops` and otherwise only yielded.
static LogicalResult checkEmbedding(EmbeddingOp embedding, FrontHalf ops) {
  Value rows = embedding.getResult();
  Operation *norm = ops.rms ? ops.rms.getOperation() : ops.layer;
  if (!norm || !isa<BlockArgument>(embedding.getTokens()) ||
      !isa<BlockArgument>(embedding.getTable()))
    return failure();
  for (OpOperand &use : rows.getUses()) {
    Operation *user = use.getOwner();
    bool normInput = user == norm && use.getOperandNumber() == 0;
    if (!normInput && !isa<YieldOp>(user))
      return failure();
  }
  return success(llvm::is_contained(rows.getUsers(), norm));
}

/// Checks that the ops form the chain the kernels implement.
static LogicalResult checkChain(KernelOp kernel, FrontHalf ops) {
  auto chainError = [&](StringRef what) {
    return kernel.emitOpError("unsupported projection kernel: ") << what;
  };
  Value normOut = ops.rms     ? ops.rms.getResult()
                  : ops.layer ? ops.layer.getResult()
                              : Value();
  Value input = getProjectionInput(ops);
  StringRef proj = ops.qkv ? "qkv_proj" : "linear";
  if (normOut && input != normOut)
    return chainError("the norm's result must be the ") << proj << " input";
  if (!normOut && !isa<BlockArgument>(input))
    return chainError("the ") << proj << " input must be a kernel operand";
  if (ops.sum && (!ops.rms || ops.rms.getInput() != ops.sum.getResult() ||
                  !ops.sum.getResult().hasOneUse() ||
                  !isa<BlockArgument>(ops.sum.getInput())))
    return chainError("sum_partials must take a kernel operand and feed the "
                      "input of rmsnorm alone");
  if (ops.embedding && failed(checkEmbedding(ops.embedding, ops)))
    return chainError("embedding must take kernel operands and feed the "
                      "input of the norm alone (its result may be yielded)");
  if (ops.siluMul) {
    if (ops.siluMul.getInput() != ops.linear.getResult())
      return chainError("silu_mul must take the result of linear");
    if (!ops.linear.getResult().hasOneUse())
      return chainError("the result of linear must be used by silu_mul alone");
  }
  if (ops.argmax &&
      (ops.siluMul || ops.argmax.getLogits() != ops.linear.getResult()))
    return chainError("argmax must take the result of linear (without "
                      "silu_mul)");
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
  return success();
}

/// The heads of the projection's packed weight (see Projection.h): those
/// of qkv_proj, or the output row pairs of a linear layer.
static LogicalResult planHeads(KernelOp kernel, FrontHalf ops,
                               ProjectionPlan &p) {
  if (QKVProjOp qkv = ops.qkv) {
    p.hq = qkv.getNumHeads();
    p.hkv = qkv.getNumKvHeads();
    p.headDim = qkv.getHeadDim();
    return success();
  }
  const int64_t n =
      cast<ShapedType>(ops.linear.getWeight().getType()).getDimSize(0);
  if (n % 2 != 0)
    return kernel.emitOpError("linear output size ")
           << n << " is odd; the projection computes rows in pairs";
  p.gateUp = static_cast<bool>(ops.siluMul);
  p.hq = p.gateUp ? 1 : n / 2;
  p.hkv = 0;
  p.headDim = p.gateUp ? n : 2;
  return success();
}

FailureOr<ProjectionPlan>
mlir::fusion::analyseProjection(KernelOp kernel, const TargetInfo &target) {
  ProjectionPlan p;
  FailureOr<FrontHalf> ops = collectFrontHalf(kernel);
  if (failed(ops) || failed(checkChain(kernel, *ops)) ||
      failed(planHeads(kernel, *ops, p)))
    return failure();
  p.ops = *ops;
  auto inputType = cast<ShapedType>(getProjectionInput(p.ops).getType());
  p.act = inputType.getElementType();
  // A [B, Hq, D] linear input (o_proj) is read as [B, Hq * D].
  p.hidden = 1;
  for (int64_t dim : inputType.getShape().drop_front())
    p.hidden *= dim;
  p.rows = (p.hq + 2 * p.hkv) * p.headDim;
  p.pairs = p.rows / 2;

  // Shapes the schedules support.
  if (p.hidden % 8 != 0)
    return kernel.emitOpError("hidden size ")
           << p.hidden
           << " is not a multiple of 8 (the projection reads 16-byte vectors "
              "of 8 elements)";
  if (p.headDim % 2 != 0)
    return kernel.emitOpError("head_dim ")
           << p.headDim << " is odd; the projection computes rows in pairs";
  const int64_t elemBytes = getTypeBytes(p.act);
  const int64_t budget = target.getStaticSharedBudget();
  if (p.hidden > budget / elemBytes)
    return kernel.emitOpError("hidden size ")
           << p.hidden << " needs more shared memory per token row than the "
           << budget << " bytes available (" << elemBytes
           << " bytes per element)";
  if (p.ops.rope) {
    p.rotaryDim = p.ops.rope.getEffectiveRotaryDim();
    p.neox = p.ops.rope.getPairing() == RopePairing::neox;
  }
  if (p.ops.append) {
    auto cacheType = cast<MemRefType>(p.ops.append.getKeyCache().getType());
    p.cache = {cacheType.getDimSize(1), p.hkv, p.headDim};
    p.appendKeyRotated =
        p.ops.rope && p.ops.append.getKey() == p.ops.rope.getKeyOut();
  }
  return p;
}

ProjectionShape mlir::fusion::getProjectionShape(const ProjectionPlan &p) {
  return {p.hidden, p.pairs, getTypeBytes(p.act),
          static_cast<bool>(p.ops.argmax)};
}

ProjectionGemmShape
mlir::fusion::getProjectionGemmShape(const ProjectionPlan &p) {
  ProjectionGemmShape shape;
  shape.projection = getProjectionShape(p);
  // Gate/up tiles hold whole pairs (ProjectionGemmKernel.cpp stages the
  // gate rows of a tile's pairs, then their up rows): "heads" of 2 rows.
  shape.headDim = p.gateUp ? 2 : p.headDim;
  shape.heads = p.gateUp ? p.pairs : p.hq + 2 * p.hkv;
  if (RMSNormOp rms = p.ops.rms) {
    bool yielded = llvm::any_of(rms.getResult().getUsers(),
                                [](Operation *u) { return isa<YieldOp>(u); });
    shape.norm = yielded ? ProjectionNorm::Other : ProjectionNorm::FoldableRMS;
    shape.residual = static_cast<bool>(rms.getResidual());
    shape.tmaTokenRows =
        !p.ops.embedding && !p.ops.sum && isa<BlockArgument>(rms.getInput()) &&
        (!rms.getResidual() || isa<BlockArgument>(rms.getResidual()));
  } else if (p.ops.layer) {
    shape.norm = ProjectionNorm::Other;
  }
  return shape;
}

/// The module global holding the RoPE inverse frequencies of the kernel
/// `entry` (shared by its variants).
static std::string getInvFreqTableName(StringRef entry) {
  return (entry + "_inv_freq").str();
}

/// Resolves the buffers and scalars of `p` to `args`, at the builder's
/// insertion point. The RoPE table is the module global `invFreqName`.
static LogicalResult bindPlan(ImplicitLocOpBuilder &b, ProjectionPlan &p,
                              KernelOp kernel, const KernelArgs &args,
                              gpu::GPUModuleOp module, StringRef invFreqName) {
  p.batchArg = args.param(contract::dim::kBatch);
  p.batch = i32ToIndex(b, p.batchArg);
  p.maxPages = args.param(contract::dim::kMaxPages);
  Operation *normOp =
      p.ops.rms ? p.ops.rms.getOperation() : p.ops.layer.getOperation();
  p.norm = getNormSpec(normOp, args);
  if (!normOp)
    p.norm.input = args.input(getProjectionInput(p.ops));
  p.norm.hidden = p.hidden;
  p.norm.elementType = p.act;
  if (QKVProjOp qkv = p.ops.qkv) {
    p.weight = args.input(qkv.getWeight());
    p.bias = args.input(qkv.getBias());
    p.qRaw = args.output(qkv.getQuery());
    p.kRaw = args.output(qkv.getKey());
    p.vRaw = args.output(qkv.getValue());
  } else {
    p.weight = args.input(p.ops.linear.getWeight());
    p.qRaw = args.output(p.ops.linear.getResult());
    if (p.ops.siluMul)
      p.siluOut = args.output(p.ops.siluMul.getResult());
  }
  if (RopeOp rope = p.ops.rope) {
    p.qRot = args.output(rope.getQueryOut());
    p.kRot = args.output(rope.getKeyOut());
    p.ropePositions = args.input(rope.getPositions());
    p.invFreq = getRopeInvFreqTable(b, module, rope, invFreqName);
    // Before griddepcontrol.wait where the kernel has one: code placed there
    // (getPairRows) may read the table.
    emitBeforeGridDependencyWait(b, [&](ImplicitLocOpBuilder &pb) {
      p.invFreq.getDefiningOp()->moveBefore(pb.getInsertionBlock(),
                                            pb.getInsertionPoint());
    });
  }
  if (KVAppendOp append = p.ops.append) {
    p.keyCache = args.input(append.getKeyCache());
    p.valueCache = args.input(append.getValueCache());
    p.blockTable = args.input(append.getBlockTable());
    p.appendPositions = args.input(append.getPositions());
  }
  if (!p.weight || !(p.norm.input || p.norm.partials || p.norm.table) ||
      (p.ops.rope && !p.ropePositions) ||
      (p.ops.append && (!p.keyCache || !p.valueCache || !p.blockTable ||
                        !p.appendPositions || !p.maxPages)))
    return kernel.emitOpError(
        "unsupported projection kernel: weights, positions, caches and the "
        "block table must be kernel operands");
  if (p.gateUp && !p.siluOut)
    return kernel.emitOpError(
        "unsupported projection kernel: it must yield the result of silu_mul");
  if (p.ops.argmax && !(p.tokensOut = args.output(p.ops.argmax.getResult())))
    return kernel.emitOpError(
        "unsupported projection kernel: it must yield the result of argmax");
  return success();
}

FailureOr<gpu::GPUFuncOp> mlir::fusion::createProjectionFunc(
    ImplicitLocOpBuilder &b, ProjectionPlan &p, KernelOp kernel,
    gpu::GPUModuleOp module, const KernelLaunch &launch, StringRef entry,
    int64_t blockSize, int64_t tileTokens, const TargetInfo &target) {
  gpu::GPUFuncOp func = createKernelFunc(b, kernel.getLoc(), module, entry,
                                         launch.params, blockSize, target);
  KernelArgs args(kernel, func, launch.params);
  if (failed(bindPlan(b, p, kernel, args, module,
                      getInvFreqTableName(launch.entry))))
    return failure();
  if (p.ops.argmax)
    bindProjectionArgmax(b, p, func, args, tileTokens, blockSize);
  return func;
}

PairRows mlir::fusion::getPairRows(ImplicitLocOpBuilder &b,
                                   const ProjectionPlan &p, Value pair) {
  const int64_t D = p.headDim, halfD = D / 2, halfRd = p.rotaryDim / 2;
  PairRows r;
  r.head = divUI(b, pair, constIndex(b, halfD));
  r.j = remUI(b, pair, constIndex(b, halfD));
  r.rotated = constBool(b, false);
  if (p.ops.rope) {
    Value qk = cmpI(b, CmpIPredicate::ult, r.head, constIndex(b, p.hq + p.hkv));
    Value inRd = cmpI(b, CmpIPredicate::ult, r.j, constIndex(b, halfRd));
    r.rotated = andI(b, qk, inRd);
    r.invFreq = loadRopeInvFreq(b, p.invFreq, r.j, r.rotated);
  }
  Value headBase = mulI(b, r.head, D);
  if (p.gateUp) // Gate row j and up row I + j: NeoX pairs over the head.
    std::tie(r.da, r.db) =
        getRopePairOffsets(b, r.j, constBool(b, true), true, halfD);
  else
    std::tie(r.da, r.db) =
        getRopePairOffsets(b, r.j, r.rotated, p.ops.rope && p.neox, halfRd);
  r.rowA = addI(b, headBase, r.da);
  r.rowB = addI(b, headBase, r.db);
  return r;
}

TokenInputs mlir::fusion::loadTokenInputs(ImplicitLocOpBuilder &b,
                                          const ProjectionPlan &p,
                                          Value token) {
  TokenInputs in;
  in.token = token;
  if (p.ops.rope)
    in.ropePosition = loadScalar(b, p.ropePositions, token);
  if (p.ops.append)
    in.cacheSlot = getAppendCacheSlot(b, p.cache, p.appendPositions,
                                      p.blockTable, p.maxPages, token);
  return in;
}

/// Stores (va, vb) at offsets rows.da / rows.db past `base` of `buffer`.
static void storePair(ImplicitLocOpBuilder &b, const PairRows &rows,
                      Value buffer, Value base, Value va, Value vb) {
  storeScalar(b, va, buffer, addI(b, base, rows.da));
  storeScalar(b, vb, buffer, addI(b, base, rows.db));
}

void mlir::fusion::emitPairEpilogue(ImplicitLocOpBuilder &b,
                                    const ProjectionPlan &p,
                                    const PairRows &rows, const TokenInputs &in,
                                    Value sumA, Value sumB) {
  const int64_t D = p.headDim;
  Value head = rows.head, token = in.token;
  if (p.bias) {
    sumA = addF(b, sumA, extToF32(b, loadScalar(b, p.bias, rows.rowA)));
    sumB = addF(b, sumB, extToF32(b, loadScalar(b, p.bias, rows.rowB)));
  }
  // The projection's outputs, rounded once.
  Value rawA = truncFromF32(b, sumA, p.act);
  Value rawB = truncFromF32(b, sumB, p.act);
  if (p.gateUp) {
    Value act = emitSiluMul(b, extToF32(b, rawA), extToF32(b, rawB));
    storeScalar(b, truncFromF32(b, act, p.act), p.siluOut,
                addI(b, mulI(b, token, D / 2), rows.j));
    return;
  }
  if (p.tokensOut)
    emitArgmaxCandidates(b, p, rows, token, rawA, rawB);
  Value outA = rawA, outB = rawB;
  if (p.ops.rope)
    std::tie(outA, outB) = emitRopePair(b, rawA, rawB, in.ropePosition,
                                        rows.invFreq, rows.rotated, p.act);
  Value isQ = cmpI(b, CmpIPredicate::ult, head, constIndex(b, p.hq));
  Value isK =
      andI(b, notI1(b, isQ),
           cmpI(b, CmpIPredicate::ult, head, constIndex(b, p.hq + p.hkv)));
  Value isV = cmpI(b, CmpIPredicate::uge, head, constIndex(b, p.hq + p.hkv));
  if (p.qRaw || p.qRot)
    ifThen(b, isQ, [&](ImplicitLocOpBuilder &qb) {
      Value base = mulI(qb, addI(qb, mulI(qb, token, p.hq), head), D);
      if (p.qRaw)
        storePair(qb, rows, p.qRaw, base, rawA, rawB);
      if (p.qRot)
        storePair(qb, rows, p.qRot, base, outA, outB);
    });
  if (p.kRaw || p.kRot || p.keyCache)
    ifThen(b, isK, [&](ImplicitLocOpBuilder &kb) {
      Value kvHead = subI(kb, head, constIndex(kb, p.hq));
      Value base = mulI(kb, addI(kb, mulI(kb, token, p.hkv), kvHead), D);
      if (p.kRaw)
        storePair(kb, rows, p.kRaw, base, rawA, rawB);
      if (p.kRot)
        storePair(kb, rows, p.kRot, base, outA, outB);
      if (p.keyCache) {
        Value cache = getCacheEntryOffset(kb, p.cache, in.cacheSlot, kvHead);
        if (p.appendKeyRotated)
          storePair(kb, rows, p.keyCache, cache, outA, outB);
        else
          storePair(kb, rows, p.keyCache, cache, rawA, rawB);
      }
    });
  if (p.vRaw || p.valueCache)
    ifThen(b, isV, [&](ImplicitLocOpBuilder &vb) {
      Value kvHead = subI(vb, head, constIndex(vb, p.hq + p.hkv));
      if (p.vRaw) {
        Value base = mulI(vb, addI(vb, mulI(vb, token, p.hkv), kvHead), D);
        storePair(vb, rows, p.vRaw, base, rawA, rawB);
      }
      if (p.valueCache)
        storePair(vb, rows, p.valueCache,
                  getCacheEntryOffset(vb, p.cache, in.cacheSlot, kvHead), rawA,
                  rawB);
    });
}

void mlir::fusion::forEachTokenTile(
    ImplicitLocOpBuilder &b, const ProjectionPlan &p, int64_t tile,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body) {
  assert((!p.tokensOut || tile == p.argmaxTile) &&
         "the argmax slots are those of this tile");
  forLoop(b, constIndex(b, 0), p.batch, constIndex(b, tile),
          [&](ImplicitLocOpBuilder &lb, Value tileStart) {
            Value count =
                minSI(lb, constIndex(lb, tile), subI(lb, p.batch, tileStart));
            barrier(lb);
            body(lb, tileStart, count);
            if (p.tokensOut)
              publishArgmaxTile(lb, p, tileStart, count);
          });
  if (p.tokensOut)
    finishArgmax(b, p);
}

SmallVector<Value> mlir::fusion::loadRowPairVectors(ImplicitLocOpBuilder &b,
                                                    Value weight, Value wA,
                                                    Value wB,
                                                    ArrayRef<Value> offsets) {
  SmallVector<Value> vectors;
  for (Value e : offsets) {
    vectors.push_back(loadVector(b, weight, addI(b, wA, e), kVectorWidth));
    vectors.push_back(loadVector(b, weight, addI(b, wB, e), kVectorWidth));
  }
  return vectors;
}

SmallVector<Value> mlir::fusion::emitPipelinedLoop(
    ImplicitLocOpBuilder &b, Value begin, Value end, int64_t step,
    llvm::function_ref<Value(ImplicitLocOpBuilder &)> last, int64_t numAcc,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value)>
        loadStep,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, ArrayRef<Value>,
                            SmallVector<Value> &)>
        compute) {
  SmallVector<Value> init(numAcc, constF32(b, 0.0));
  llvm::append_range(init, loadStep(b, begin));
  SmallVector<Value> results = forLoopWithValues(
      b, begin, end, constIndex(b, step), init,
      [&](ImplicitLocOpBuilder &ib, Value k,
          ValueRange args) -> SmallVector<Value> {
        Value nextK = minUI(ib, addI(ib, k, step), last(ib));
        SmallVector<Value> acc(args.take_front(numAcc));
        SmallVector<Value> prefetched = loadStep(ib, nextK);
        compute(ib, k, llvm::to_vector(args.drop_front(numAcc)), acc);
        llvm::append_range(acc, prefetched);
        return acc;
      });
  results.resize(numAcc);
  return results;
}
