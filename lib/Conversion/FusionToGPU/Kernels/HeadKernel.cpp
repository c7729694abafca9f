//===- HeadKernel.cpp - rope / kv_append alone ----------------------------===//
//
// The head kernels of the `none` strategy, with the numerics of the fused
// kernel (the same fragments build both): rope, kv_append, or rope ->
// kv_append, one CTA per (head slot, token), grid = [slots, batch]; thread j
// of a CTA owns element pair j of the head (the RoPE pair (j, j + rd/2) or
// (2j, 2j+1)), so a rotation never crosses threads. Slots are the query
// heads (rope), the key heads, and the value heads (kv_append); key/value go
// to the paged cache at (block_table[b, pos / P], pos % P) with 64-bit
// offsets.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/Abi.h"
#include "../Fragments/PagedKV.h"
#include "../Fragments/Rope.h"
#include "../KernelEmitter.h"
#include "../Schedule/ElementwiseSchedule.h"

#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// The kernel's shape, bound arguments and per-thread values.
struct HeadKernel {
  RopeOp rope;
  KVAppendOp append;
  Type act;
  int64_t headDim = 0, hq = 0, hkv = 0, rotaryDim = 0;
  int64_t qSlots = 0, kSlots = 0, vSlots = 0, qkSlots = 0;
  bool neox = true;
  PagedKVLayout cache;
  Value qIn, kIn, vIn, qOut, kOut, positions, invFreq;
  Value keyCache, valueCache, blockTable, appendPositions, maxPages;
  // This thread's head slot, token and element pair.
  Value slot, token, j, rotated, da, db;

  void emitBody(ImplicitLocOpBuilder &b);
  void emitPairs(ImplicitLocOpBuilder &b);
  Value headBase(ImplicitLocOpBuilder &b, int64_t heads, Value head) {
    return mulI(b, addI(b, mulI(b, token, heads), head), headDim);
  }
  void storePair(ImplicitLocOpBuilder &b, Value buffer, Value base, Value va,
                 Value vb) {
    storeScalar(b, va, buffer, addI(b, base, da));
    storeScalar(b, vb, buffer, addI(b, base, db));
  }
  std::pair<Value, Value> rotate(ImplicitLocOpBuilder &b, Value a, Value c) {
    if (!rope)
      return {a, c};
    Value pos = loadScalar(b, positions, token);
    return emitRopePair(b, a, c, pos, loadRopeInvFreq(b, invFreq, j, rotated),
                        rotated, act,
                        /*selectSecondFirst=*/true);
  }
  Value cacheBase(ImplicitLocOpBuilder &b, Value kvHead) {
    Value tokenSlot = getAppendCacheSlot(b, cache, appendPositions, blockTable,
                                         maxPages, token);
    return getCacheEntryOffset(b, cache, tokenSlot, kvHead);
  }
};

/// Finds the kernel's rope and kv_append (in this order), or reports that
/// no emitter builds it.
LogicalResult findHeadOps(KernelOp kernel, RopeOp &rope, KVAppendOp &append) {
  SmallVector<Operation *> ops;
  for (Operation &op : kernel.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (auto r = dyn_cast<RopeOp>(op); r && !rope && !append) {
      rope = r;
      continue;
    }
    if (auto a = dyn_cast<KVAppendOp>(op); a && !append) {
      append = a;
      continue;
    }
    return kernel.emitOpError("no emitter for a kernel of ")
           << ops.size() << " op(s) containing '" << op->getName()
           << "'; supported: one rmsnorm, layernorm, embedding, argmax or "
              "silu_mul, rope, kv_append, rope -> kv_append, or kernels with "
              "qkv_proj / linear / decode_attention";
  }
  if (!rope && !append)
    return kernel.emitOpError("empty kernel");
  if (rope && append && append.getKey() != rope.getKeyOut() &&
      append.getValue() != rope.getKeyOut())
    return kernel.emitOpError(
        "unsupported kernel: kv_append must append the key rope produces");
  if (rope && append && append.getValue() == rope.getKeyOut())
    return kernel.emitOpError(
        "unsupported kernel: kv_append appends rope's key as the value");
  return success();
}

/// The shape of the kernel's heads and slots (`slots` the total).
LogicalResult getShape(KernelOp kernel, HeadKernel &k, int64_t &slots) {
  ShapedType headType = k.rope ? cast<ShapedType>(k.rope.getKey().getType())
                               : cast<ShapedType>(k.append.getKey().getType());
  k.act = headType.getElementType();
  k.headDim = headType.getDimSize(2);
  k.hkv = headType.getDimSize(1);
  k.hq =
      k.rope ? cast<ShapedType>(k.rope.getQuery().getType()).getDimSize(1) : 0;
  if (k.headDim % 2 != 0)
    return kernel.emitOpError("head_dim ")
           << k.headDim << " is odd; elements are processed in pairs";
  k.rotaryDim = k.rope ? k.rope.getEffectiveRotaryDim() : 0;
  k.neox = !k.rope || k.rope.getPairing() == RopePairing::neox;
  k.qSlots = k.hq;
  k.kSlots = k.hkv;
  k.vSlots = k.append ? k.hkv : 0;
  std::optional<int64_t> qkSlots = llvm::checkedAdd(k.qSlots, k.kSlots);
  std::optional<int64_t> all =
      qkSlots ? llvm::checkedAdd(*qkSlots, k.vSlots) : std::nullopt;
  if (!all)
    return kernel.emitOpError("the head count ")
           << k.qSlots << " + " << k.kSlots << " + " << k.vSlots
           << " overflows a 64-bit integer";
  k.qkSlots = *qkSlots;
  slots = *all;
  return success();
}

/// Binds the kernel's buffers; fails unless they are kernel operands.
LogicalResult bindArguments(KernelOp kernel, HeadKernel &k,
                            const KernelArgs &args) {
  RopeOp rope = k.rope;
  KVAppendOp append = k.append;
  k.qIn = rope ? args.input(rope.getQuery()) : Value();
  k.kIn = rope ? args.input(rope.getKey()) : args.input(append.getKey());
  k.vIn = append ? args.input(append.getValue()) : Value();
  k.qOut = rope ? args.output(rope.getQueryOut()) : Value();
  k.kOut = rope ? args.output(rope.getKeyOut()) : Value();
  k.positions = rope ? args.input(rope.getPositions()) : Value();
  if (append) {
    k.keyCache = args.input(append.getKeyCache());
    k.valueCache = args.input(append.getValueCache());
    k.blockTable = args.input(append.getBlockTable());
    k.appendPositions = args.input(append.getPositions());
    k.maxPages = args.param(contract::dim::kMaxPages);
    k.cache = {cast<MemRefType>(append.getKeyCache().getType()).getDimSize(1),
               k.hkv, k.headDim};
  }
  if ((rope && (!k.qIn || !k.kIn || !k.positions)) ||
      (append && (!k.kIn || !k.vIn || !k.keyCache || !k.valueCache ||
                  !k.blockTable || !k.appendPositions)))
    return kernel.emitOpError(
        "unsupported kernel: inputs, positions, caches and the block table "
        "must be kernel operands");
  return success();
}

} // namespace

/// Element pair j of the slot's head: rotate (q, k), copy into the outputs
/// and the cache.
void HeadKernel::emitPairs(ImplicitLocOpBuilder &b) {
  Value isQ = cmpI(b, CmpIPredicate::ult, slot, qSlots);
  Value isV = cmpI(b, CmpIPredicate::uge, slot, qkSlots);
  rotated = constBool(b, false);
  if (rope)
    rotated = andI(b, cmpI(b, CmpIPredicate::ult, j, rotaryDim / 2),
                   cmpI(b, CmpIPredicate::ult, slot, qkSlots));
  std::tie(da, db) =
      getRopePairOffsets(b, j, rotated, rope && neox, rotaryDim / 2);
  if (qSlots > 0)
    ifThen(b, isQ, [&](ImplicitLocOpBuilder &qb) {
      Value base = headBase(qb, hq, slot);
      Value a = loadScalar(qb, qIn, addI(qb, base, da));
      Value c = loadScalar(qb, qIn, addI(qb, base, db));
      auto [ra, rc] = rotate(qb, a, c);
      if (qOut)
        storePair(qb, qOut, base, ra, rc);
    });
  Value isK = andI(b, cmpI(b, CmpIPredicate::uge, slot, qSlots),
                   cmpI(b, CmpIPredicate::ult, slot, qkSlots));
  ifThen(b, isK, [&](ImplicitLocOpBuilder &kb) {
    Value kvHead = subI(kb, slot, constIndex(kb, qSlots));
    Value base = headBase(kb, hkv, kvHead);
    Value a = loadScalar(kb, kIn, addI(kb, base, da));
    Value c = loadScalar(kb, kIn, addI(kb, base, db));
    auto [ra, rc] = rotate(kb, a, c);
    if (kOut)
      storePair(kb, kOut, base, ra, rc);
    if (append)
      storePair(kb, keyCache, cacheBase(kb, kvHead), ra, rc);
  });
  if (vSlots > 0)
    ifThen(b, isV, [&](ImplicitLocOpBuilder &vb) {
      Value kvHead = subI(vb, slot, constIndex(vb, qSlots + kSlots));
      Value base = headBase(vb, hkv, kvHead);
      Value a = loadScalar(vb, vIn, addI(vb, base, da));
      Value c = loadScalar(vb, vIn, addI(vb, base, db));
      storePair(vb, valueCache, cacheBase(vb, kvHead), a, c);
    });
}

void HeadKernel::emitBody(ImplicitLocOpBuilder &b) {
  slot = blockIdX(b);
  token = blockIdY(b);
  j = threadIdX(b);
  ifThen(b, cmpI(b, CmpIPredicate::ult, j, headDim / 2),
         [&](ImplicitLocOpBuilder &pb) { emitPairs(pb); });
}

FailureOr<KernelLaunch> mlir::fusion::emitHeadKernel(KernelOp kernel,
                                                     const TargetInfo &target,
                                                     gpu::GPUModuleOp module) {
  HeadKernel k;
  int64_t slots = 0;
  if (failed(findHeadOps(kernel, k.rope, k.append)) ||
      failed(getShape(kernel, k, slots)))
    return failure();
  const int64_t blockSize = chooseHeadBlockSize(k.headDim);

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = blockSize;
  launch.grid = {std::to_string(slots), std::string(contract::dim::kBatch),
                 "1"};
  OpBuilder builder(kernel.getContext());
  gpu::GPUFuncOp func =
      createKernelFunc(builder, kernel.getLoc(), module, launch.entry,
                       launch.params, blockSize, target);
  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
  if (failed(bindArguments(kernel, k, KernelArgs(kernel, func, launch.params))))
    return failure();
  if (k.rope)
    k.invFreq =
        getRopeInvFreqTable(b, module, k.rope, launch.entry + "_inv_freq");
  k.emitBody(b);

  HeadKind kind = k.rope && k.append ? HeadKind::rope_kv_append
                  : k.rope           ? HeadKind::rope
                                     : HeadKind::kv_append;
  FailureOr<HeadScheduleAttr> schedule = getCheckedSchedule<HeadScheduleAttr>(
      kernel, kind, blockSize, slots, /*elementsPerThread=*/int64_t(2));
  if (failed(schedule))
    return failure();
  launch.schedule = *schedule;
  return launch;
}
