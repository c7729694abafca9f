//===- HuggingFace.cpp - decode-layer modules from config.json ------------===//
//
// Maps the one config.json reader's result, fusion::runtime::ModelConfig
// (runtime/src/ModelConfig.cpp, where every field is read), to a module of
// fusion ops.
//
//===----------------------------------------------------------------------===//

#include "fusion/Import/HuggingFace.h"

#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "fusion/Dialect/Fusion/IR/FusionOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <limits>

using namespace mlir;
using namespace mlir::fusion;
using ::fusion::runtime::ModelConfig;

namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

/// The activation element type: options.dtype if given, else the config's
/// torch_dtype / dtype; null (after a diagnostic naming the field) if that
/// is not f16 or bf16.
Type getActivationType(MLIRContext *context, const ModelConfig &c,
                       const DecodeLayerOptions &options, Location loc) {
  std::string dtype = options.dtype;
  if (dtype.empty() && c.torchDtype)
    dtype = *c.torchDtype == ::fusion::runtime::DType::F16 ? "f16" : "bf16";
  if (dtype == "f16")
    return Float16Type::get(context);
  if (dtype == "bf16")
    return BFloat16Type::get(context);
  if (!options.dtype.empty())
    emitError(loc) << "unknown dtype '" << options.dtype
                   << "'; expected f16 or bf16";
  else if (c.dtypeName.empty())
    emitError(loc) << c.source
                   << ": no field \"torch_dtype\" or \"dtype\"; pass --dtype "
                      "f16 or --dtype bf16";
  else
    emitError(loc) << c.source << ": field \"" << c.dtypeField << "\": \""
                   << c.dtypeName
                   << "\" is not float16 or bfloat16; pass --dtype f16 or "
                      "--dtype bf16";
  return nullptr;
}

/// Checks the function name and the page size.
LogicalResult checkOptions(const DecodeLayerOptions &options, Location loc) {
  if (!isValidKernelName(options.functionName))
    return emitError(loc) << "function name \"" << options.functionName
                          << "\" cannot name kernels (they are named after "
                             "the function): expected "
                          << describeKernelNameRule();
  if (options.pageSize < 1 || options.pageSize > kMaxInt32)
    return emitError(loc) << "page size must be in [1, " << kMaxInt32
                          << "], got " << options.pageSize;
  return success();
}

/// The arguments of the decode-layer function, in the order of
/// examples/llama3_8b.mlir (qkv_b after qkv_w as in examples/qwen2_7b.mlir);
/// optional ones are absent without the residual add or the bias.
struct DecodeLayerArgs {
  unsigned x, normW, qkvW, positions, seqLens, blockTable, kCache, vCache;
  std::optional<unsigned> residual, qkvB;
  SmallVector<Type> types;
  SmallVector<Location> locs;

  unsigned add(OpBuilder &b, Location loc, StringRef name, Type type) {
    types.push_back(type);
    locs.push_back(NameLoc::get(b.getStringAttr(name), loc));
    return static_cast<unsigned>(types.size() - 1);
  }
};

/// The tensor types of one decode step with activations of type `act`.
struct DecodeLayerTypes {
  RankedTensorType act, q, kv, vec, table;
  MemRefType cache;

  DecodeLayerTypes(OpBuilder &b, const ModelConfig &c, Type element,
                   int64_t pageSize) {
    const int64_t dyn = ShapedType::kDynamic, H = c.hiddenSize,
                  Hq = c.numAttentionHeads, Hkv = c.numKeyValueHeads,
                  D = c.headDim;
    act = RankedTensorType::get({dyn, H}, element);
    q = RankedTensorType::get({dyn, Hq, D}, element);
    kv = RankedTensorType::get({dyn, Hkv, D}, element);
    vec = RankedTensorType::get({dyn}, b.getI32Type());
    table = RankedTensorType::get({dyn, dyn}, b.getI32Type());
    cache = MemRefType::get({dyn, pageSize, Hkv, D}, element);
  }
};

DecodeLayerArgs declareArgs(OpBuilder &b, const ModelConfig &c,
                            const DecodeLayerTypes &t, bool residual,
                            Location loc) {
  Type element = t.act.getElementType();
  const int64_t H = c.hiddenSize, rows = c.dims().qkvRows();
  DecodeLayerArgs a;
  a.x = a.add(b, loc, "x", t.act);
  if (residual)
    a.residual = a.add(b, loc, "residual", t.act);
  a.normW = a.add(b, loc, "norm_w", RankedTensorType::get({H}, element));
  a.qkvW = a.add(b, loc, "qkv_w", RankedTensorType::get({rows, H}, element));
  if (c.attentionBias)
    a.qkvB = a.add(b, loc, "qkv_b", RankedTensorType::get({rows}, element));
  a.positions = a.add(b, loc, "positions", t.vec);
  a.seqLens = a.add(b, loc, "seq_lens", t.vec);
  a.blockTable = a.add(b, loc, "block_table", t.table);
  a.kCache = a.add(b, loc, "k_cache", t.cache);
  a.vCache = a.add(b, loc, "v_cache", t.cache);
  return a;
}

/// The rope op of `c` (NeoX pairing, rotary_dim when partial, llama3
/// scaling) on the projected query and key.
RopeOp createRope(OpBuilder &b, const ModelConfig &c, const DecodeLayerTypes &t,
                  QKVProjOp qkv, Value positions, Location loc) {
  MLIRContext *context = b.getContext();
  Llama3RopeScalingAttr scaling;
  if (c.llama3Scaling)
    scaling = Llama3RopeScalingAttr::get(
        context, llvm::APFloat(c.llama3Scaling->factor),
        llvm::APFloat(c.llama3Scaling->lowFreqFactor),
        llvm::APFloat(c.llama3Scaling->highFreqFactor),
        c.llama3Scaling->originalMaxPosition);
  return RopeOp::create(
      b, loc, t.q, t.kv, qkv.getQuery(), qkv.getKey(), positions,
      RopePairingAttr::get(context, RopePairing::neox),
      b.getF64FloatAttr(c.ropeTheta),
      c.rotaryDim != c.headDim ? b.getI64IntegerAttr(c.rotaryDim)
                               : IntegerAttr(),
      scaling);
}

/// Fills the function's entry block: rmsnorm -> qkv_proj -> rope ->
/// kv_append -> decode_attention, returning the attention output (and the
/// residual).
void buildBody(OpBuilder &b, const ModelConfig &c, const DecodeLayerTypes &t,
               const DecodeLayerArgs &a, Block *entry, Location loc) {
  auto arg = [&](unsigned i) -> Value { return entry->getArgument(i); };
  auto norm = RMSNormOp::create(
      b, loc, t.act, a.residual ? Type(t.act) : Type(), arg(a.x), arg(a.normW),
      a.residual ? arg(*a.residual) : Value(), b.getF64FloatAttr(c.rmsNormEps));
  auto qkv = QKVProjOp::create(
      b, loc, t.q, t.kv, t.kv, norm.getResult(), arg(a.qkvW),
      a.qkvB ? arg(*a.qkvB) : Value(), b.getI64IntegerAttr(c.numAttentionHeads),
      b.getI64IntegerAttr(c.numKeyValueHeads), b.getI64IntegerAttr(c.headDim));
  RopeOp rope = createRope(b, c, t, qkv, arg(a.positions), loc);
  KVAppendOp::create(b, loc, rope.getKeyOut(), qkv.getValue(), arg(a.kCache),
                     arg(a.vCache), arg(a.blockTable), arg(a.positions));
  auto attention = DecodeAttentionOp::create(
      b, loc, t.q, rope.getQueryOut(), arg(a.kCache), arg(a.vCache),
      arg(a.blockTable), arg(a.seqLens), FloatAttr());
  SmallVector<Value> results = {attention.getResult()};
  if (a.residual)
    results.push_back(norm.getResidualOut());
  func::ReturnOp::create(b, loc, results);
}

} // namespace

llvm::Expected<ModelConfig>
mlir::fusion::parseHFDecoderConfig(StringRef text, StringRef source) {
  ::fusion::runtime::ModelConfigResult result = ModelConfig::tryParse(
      std::string_view(text.data(), text.size()), source.str());
  if (!result.config)
    return llvm::createStringError(result.error);
  return std::move(*result.config);
}

OwningOpRef<ModuleOp>
mlir::fusion::buildDecodeLayerModule(MLIRContext *context, const ModelConfig &c,
                                     const DecodeLayerOptions &options,
                                     Location loc) {
  context->getOrLoadDialect<FusionDialect>();
  context->getOrLoadDialect<func::FuncDialect>();
  Type element = getActivationType(context, c, options, loc);
  if (!element || failed(checkOptions(options, loc)))
    return nullptr;

  OpBuilder b(context);
  DecodeLayerTypes types(b, c, element, options.pageSize);
  DecodeLayerArgs args = declareArgs(b, c, types, options.residual, loc);
  SmallVector<Type> resultTypes = {types.q};
  if (options.residual)
    resultTypes.push_back(types.act);

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, loc, options.functionName,
                                   b.getFunctionType(args.types, resultTypes));
  Block *entry = b.createBlock(&func.getBody(), {}, args.types, args.locs);
  buildBody(b, c, types, args, entry, loc);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}
