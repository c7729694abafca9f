//===- ElementwiseEmitter.cpp - single-op norm / RoPE / KV-append kernels -===//
//
// The kernels of the `none` strategy that are not projections, with the
// numerics of the fused kernel (the same helpers build both):
//  * rmsnorm / layernorm: one CTA per token (grid = [batch]); the row is
//    normalised by emitNormalizeToken (fp32 sums, warp shuffles + shared
//    memory) and written to the outputs.
//  * rope, kv_append, or rope -> kv_append: one CTA per (head slot, token),
//    grid = [slots, batch]; thread j of a CTA owns element pair j of the
//    head (the RoPE pair (j, j + rd/2) or (2j, 2j+1)), so a rotation never
//    crosses threads. Slots are the query heads (rope), the key heads, and
//    the value heads (kv_append); key/value go to the paged cache at
//    (block_table[b, pos / P], pos % P) with 64-bit offsets.
//
//===----------------------------------------------------------------------===//

#include "EmitterUtils.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace mlir::fusion;

namespace {
/// Resolves kernel body values to gpu.func arguments.
struct ArgMap {
  mutable KernelOp kernel;
  mutable gpu::GPUFuncOp func;
  Value arg(Value bodyValue) const {
    if (!bodyValue)
      return nullptr;
    auto blockArg = dyn_cast<BlockArgument>(bodyValue);
    if (!blockArg || blockArg.getOwner() != &kernel.getBody().front())
      return nullptr;
    return func.getArgument(blockArg.getArgNumber());
  }
  Value output(Value bodyValue) const {
    if (!bodyValue)
      return nullptr;
    for (auto [index, yielded] : llvm::enumerate(kernel.getYield().getValues()))
      if (yielded == bodyValue)
        return func.getArgument(kernel.getInputs().size() + index);
    return nullptr;
  }
};
} // namespace

static DictionaryAttr scheduleAttr(MLIRContext *context, StringRef kind,
                                   int64_t threads,
                                   ArrayRef<NamedAttribute> extra = {}) {
  Builder b(context);
  SmallVector<NamedAttribute> entries{
      b.getNamedAttr("kind", b.getStringAttr(kind)),
      b.getNamedAttr("threads", b.getI64IntegerAttr(threads))};
  entries.append(extra.begin(), extra.end());
  return b.getDictionaryAttr(entries);
}

/// rmsnorm / layernorm alone: one CTA per token.
static FailureOr<KernelLaunch> emitNormKernel(KernelOp kernel, Operation *op,
                                              gpu::GPUModuleOp module) {
  NormSpec spec;
  Value input = op->getOperand(0);
  auto inputType = cast<ShapedType>(input.getType());
  spec.hidden = inputType.getDimSize(1);
  spec.elementType = inputType.getElementType();
  if (spec.hidden % 8 != 0)
    return kernel.emitOpError("hidden size ")
           << spec.hidden
           << " is not a multiple of 8 (the norm reads 16-byte vectors of 8 "
              "elements)";
  constexpr int64_t kSharedBudget = 46 * 1024;
  const int64_t elemBytes = getTypeBytes(spec.elementType);
  if (spec.hidden > kSharedBudget / elemBytes)
    return kernel.emitOpError("hidden size ")
           << spec.hidden << " needs more shared memory per token row than the "
           << kSharedBudget << " bytes available (" << elemBytes
           << " bytes per element)";
  int64_t blockSize = std::min<int64_t>(
      256, std::max<int64_t>(32, llvm::alignTo(spec.hidden / 8, 32)));

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = blockSize;
  launch.grid = {std::string(contract::dim::kBatch), "1", "1"};
  OpBuilder builder(kernel.getContext());
  gpu::GPUFuncOp func = createKernelFunc(
      builder, kernel.getLoc(), module, launch.entry, launch.params, blockSize);
  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
  ArgMap map{kernel, func};
  if (auto rms = dyn_cast<RMSNormOp>(op)) {
    spec.kind = NormSpec::Kind::RMS;
    spec.epsilon = rms.getEpsilon().convertToDouble();
    spec.unitOffset = rms.getUnitOffset();
    spec.input = map.arg(rms.getInput());
    spec.weight = map.arg(rms.getWeight());
    spec.residual = map.arg(rms.getResidual());
    spec.residualOut = map.output(rms.getResidualOut());
    spec.normedOut = map.output(rms.getResult());
    if (rms.getResidual() && !spec.residual)
      return kernel.emitOpError("the residual must be a kernel operand");
  } else {
    auto layer = cast<LayerNormOp>(op);
    spec.kind = NormSpec::Kind::Layer;
    spec.epsilon = layer.getEpsilon().convertToDouble();
    spec.input = map.arg(layer.getInput());
    spec.weight = map.arg(layer.getWeight());
    spec.bias = map.arg(layer.getBias());
    spec.normedOut = map.output(layer.getResult());
  }
  if (!spec.input || !spec.weight)
    return kernel.emitOpError("norm operands must be kernel operands");

  Value row = addWorkgroupBuffer(func, spec.elementType, spec.hidden);
  Value scratch = addWorkgroupBuffer(func, b.getF32Type(), blockSize / 32);
  Value token = blockIdX(b);
  emitNormalizeToken(b, spec, token, row, constIndex(b, 0),
                     arith::ConstantIntOp::create(b, 1, 1), scratch, blockSize);
  launch.schedule = scheduleAttr(
      kernel.getContext(), "norm_row", blockSize,
      {builder.getNamedAttr("vector_width", builder.getI64IntegerAttr(8)),
       builder.getNamedAttr("tokens_per_cta", builder.getI64IntegerAttr(1))});
  return launch;
}

/// rope and/or kv_append: one CTA per (head slot, token).
static FailureOr<KernelLaunch> emitHeadKernel(KernelOp kernel, RopeOp rope,
                                              KVAppendOp append,
                                              gpu::GPUModuleOp module) {
  if (rope && append && append.getKey() != rope.getKeyOut() &&
      append.getValue() != rope.getKeyOut())
    return kernel.emitOpError(
        "unsupported kernel: kv_append must append the key rope produces");
  if (rope && append && append.getValue() == rope.getKeyOut())
    return kernel.emitOpError(
        "unsupported kernel: kv_append appends rope's key as the value");
  ShapedType headType = rope ? cast<ShapedType>(rope.getKey().getType())
                             : cast<ShapedType>(append.getKey().getType());
  Type act = headType.getElementType();
  const int64_t D = headType.getDimSize(2);
  const int64_t hkv = headType.getDimSize(1);
  const int64_t hq =
      rope ? cast<ShapedType>(rope.getQuery().getType()).getDimSize(1) : 0;
  if (D % 2 != 0)
    return kernel.emitOpError("head_dim ")
           << D << " is odd; elements are processed in pairs";
  const int64_t rotaryDim = rope ? rope.getEffectiveRotaryDim() : 0;
  const bool neox = !rope || rope.getPairing() == RopePairing::neox;
  const int64_t qSlots = hq, kSlots = hkv, vSlots = append ? hkv : 0;
  std::optional<int64_t> qkSlots = llvm::checkedAdd(qSlots, kSlots);
  std::optional<int64_t> slots =
      qkSlots ? llvm::checkedAdd(*qkSlots, vSlots) : std::nullopt;
  if (!slots)
    return kernel.emitOpError("the head count ")
           << qSlots << " + " << kSlots << " + " << vSlots
           << " overflows a 64-bit integer";
  const int64_t blockSize = std::max<int64_t>(32, llvm::alignTo(D / 2, 32));

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = blockSize;
  launch.grid = {std::to_string(*slots), std::string(contract::dim::kBatch),
                 "1"};
  OpBuilder builder(kernel.getContext());
  gpu::GPUFuncOp func = createKernelFunc(
      builder, kernel.getLoc(), module, launch.entry, launch.params, blockSize);
  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
  ArgMap map{kernel, func};

  Value qIn = rope ? map.arg(rope.getQuery()) : Value();
  Value kIn = rope ? map.arg(rope.getKey()) : map.arg(append.getKey());
  Value vIn = append ? map.arg(append.getValue()) : Value();
  Value qOut = rope ? map.output(rope.getQueryOut()) : Value();
  Value kOut = rope ? map.output(rope.getKeyOut()) : Value();
  Value positions = rope ? map.arg(rope.getPositions()) : Value();
  Value keyCache, valueCache, blockTable, appendPositions, maxPages;
  int64_t pageSize = 0;
  if (append) {
    keyCache = map.arg(append.getKeyCache());
    valueCache = map.arg(append.getValueCache());
    blockTable = map.arg(append.getBlockTable());
    appendPositions = map.arg(append.getPositions());
    maxPages =
        func.getArgument(findParam(launch.params, contract::dim::kMaxPages));
    pageSize = cast<MemRefType>(append.getKeyCache().getType()).getDimSize(1);
  }
  if ((rope && (!qIn || !kIn || !positions)) ||
      (append && (!kIn || !vIn || !keyCache || !valueCache || !blockTable ||
                  !appendPositions)))
    return kernel.emitOpError(
        "unsupported kernel: inputs, positions, caches and the block table "
        "must be kernel operands");
  Value invFreq =
      rope ? getRopeInvFreqTable(b, module, rope, launch.entry + "_inv_freq")
           : Value();

  Value slot = blockIdX(b);
  Value token = blockIdY(b);
  Value j = threadIdX(b);
  auto cmp = [&](ImplicitLocOpBuilder &b, arith::CmpIPredicate pred, Value l,
                 int64_t r) {
    return arith::CmpIOp::create(b, pred, l, constIndex(b, r));
  };
  ifThen(
      b, cmp(b, arith::CmpIPredicate::ult, j, D / 2),
      [&](ImplicitLocOpBuilder &b) {
        Value isQ = cmp(b, arith::CmpIPredicate::ult, slot, qSlots);
        Value isV = cmp(b, arith::CmpIPredicate::uge, slot, *qkSlots);
        Value rotated = arith::ConstantIntOp::create(b, 0, 1);
        if (rope)
          rotated = arith::AndIOp::create(
              b, cmp(b, arith::CmpIPredicate::ult, j, rotaryDim / 2),
              cmp(b, arith::CmpIPredicate::ult, slot, *qkSlots));
        Value twoJ = mulIndex(b, j, 2);
        Value da = twoJ, db = addIndex(b, twoJ, 1);
        if (rope && neox) {
          da = arith::SelectOp::create(b, rotated, j, twoJ);
          db = arith::SelectOp::create(
              b, rotated, addIndex(b, j, rotaryDim / 2), addIndex(b, twoJ, 1));
        }
        auto headBase = [&](ImplicitLocOpBuilder &b, int64_t heads,
                            Value head) {
          return mulIndex(b, addIndex(b, mulIndex(b, token, heads), head), D);
        };
        auto storePair = [&](ImplicitLocOpBuilder &b, Value buffer, Value base,
                             Value va, Value vb) {
          storeScalar(b, va, buffer, addIndex(b, base, da));
          storeScalar(b, vb, buffer, addIndex(b, base, db));
        };
        auto rotate = [&](ImplicitLocOpBuilder &b, Value a, Value c) {
          if (!rope)
            return std::make_pair(a, c);
          Value pos = loadScalar(b, positions, token);
          Value freq = arith::SelectOp::create(b, rotated, j, constIndex(b, 0));
          auto [ra, rc] = emitRopeRotation(b, a, c, pos, invFreq, freq, act);
          return std::make_pair(
              Value(arith::SelectOp::create(b, rotated, ra, a)),
              Value(arith::SelectOp::create(b, rotated, rc, c)));
        };
        auto cacheBase = [&](ImplicitLocOpBuilder &b, Value kvHead) {
          Value pos = i32ToIndex(b, loadScalar(b, appendPositions, token));
          Value pageIndex =
              arith::DivSIOp::create(b, pos, constIndex(b, pageSize));
          Value inPage =
              arith::RemSIOp::create(b, pos, constIndex(b, pageSize));
          Value tableIndex = addIndex(
              b, mulIndex(b, token, i32ToIndex(b, maxPages)), pageIndex);
          Value page = i32ToIndex(b, loadScalar(b, blockTable, tableIndex));
          Value tokenSlot = addIndex(b, mulIndex(b, page, pageSize), inPage);
          return mulIndex(b, addIndex(b, mulIndex(b, tokenSlot, hkv), kvHead),
                          D);
        };
        if (qSlots > 0)
          ifThen(b, isQ, [&](ImplicitLocOpBuilder &b) {
            Value base = headBase(b, hq, slot);
            Value a = loadScalar(b, qIn, addIndex(b, base, da));
            Value c = loadScalar(b, qIn, addIndex(b, base, db));
            auto [ra, rc] = rotate(b, a, c);
            if (qOut)
              storePair(b, qOut, base, ra, rc);
          });
        Value isK = arith::AndIOp::create(
            b, cmp(b, arith::CmpIPredicate::uge, slot, qSlots),
            cmp(b, arith::CmpIPredicate::ult, slot, *qkSlots));
        ifThen(b, isK, [&](ImplicitLocOpBuilder &b) {
          Value kvHead = arith::SubIOp::create(b, slot, constIndex(b, qSlots));
          Value base = headBase(b, hkv, kvHead);
          Value a = loadScalar(b, kIn, addIndex(b, base, da));
          Value c = loadScalar(b, kIn, addIndex(b, base, db));
          auto [ra, rc] = rotate(b, a, c);
          if (kOut)
            storePair(b, kOut, base, ra, rc);
          if (append)
            storePair(b, keyCache, cacheBase(b, kvHead), ra, rc);
        });
        if (vSlots > 0)
          ifThen(b, isV, [&](ImplicitLocOpBuilder &b) {
            Value kvHead =
                arith::SubIOp::create(b, slot, constIndex(b, qSlots + kSlots));
            Value base = headBase(b, hkv, kvHead);
            Value a = loadScalar(b, vIn, addIndex(b, base, da));
            Value c = loadScalar(b, vIn, addIndex(b, base, db));
            storePair(b, valueCache, cacheBase(b, kvHead), a, c);
          });
      });
  StringRef kind = rope && append ? "rope_kv_append"
                   : rope         ? "rope"
                                  : "kv_append";
  launch.schedule = scheduleAttr(
      kernel.getContext(), kind, blockSize,
      {builder.getNamedAttr("head_slots", builder.getI64IntegerAttr(*slots)),
       builder.getNamedAttr("elements_per_thread",
                            builder.getI64IntegerAttr(2))});
  return launch;
}

FailureOr<KernelLaunch>
mlir::fusion::emitElementwiseKernel(KernelOp kernel, gpu::GPUModuleOp module) {
  SmallVector<Operation *> ops;
  for (Operation &op : kernel.getBody().front().without_terminator())
    ops.push_back(&op);
  if (ops.size() == 1 && isa<RMSNormOp, LayerNormOp>(ops[0]))
    return emitNormKernel(kernel, ops[0], module);
  RopeOp rope;
  KVAppendOp append;
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
           << "'; supported: one rmsnorm or layernorm, rope, kv_append, "
              "rope -> kv_append, or kernels with qkv_proj / decode_attention";
  }
  if (!rope && !append)
    return kernel.emitOpError("empty kernel");
  return emitHeadKernel(kernel, rope, append, module);
}
