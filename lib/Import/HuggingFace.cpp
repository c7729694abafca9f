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

/// The activation element type: `requested` if not empty, else the config's
/// torch_dtype / dtype; null (after a diagnostic naming the field) if that
/// is not f16 or bf16.
Type getActivationType(MLIRContext *context, const ModelConfig &c,
                       StringRef requested, Location loc) {
  std::string dtype = requested.str();
  if (dtype.empty() && c.torchDtype)
    dtype = *c.torchDtype == ::fusion::runtime::DType::F16 ? "f16" : "bf16";
  if (dtype == "f16")
    return Float16Type::get(context);
  if (dtype == "bf16")
    return BFloat16Type::get(context);
  if (!requested.empty())
    emitError(loc) << "unknown dtype '" << requested
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
LogicalResult checkOptions(StringRef functionName, int64_t pageSize,
                           Location loc) {
  if (!isValidKernelName(functionName))
    return emitError(loc) << "function name \"" << functionName
                          << "\" cannot name kernels (they are named after "
                             "the function): expected "
                          << describeKernelNameRule();
  if (pageSize < 1 || pageSize > kMaxInt32)
    return emitError(loc) << "page size must be in [1, " << kMaxInt32
                          << "], got " << pageSize;
  return success();
}

/// The arguments of a function being declared: their types and NameLocs.
class ArgList {
public:
  ArgList(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  /// Appends argument `name` of `type`; returns its index.
  unsigned add(StringRef name, Type type) {
    types.push_back(type);
    locs.push_back(NameLoc::get(b.getStringAttr(name), loc));
    return static_cast<unsigned>(types.size() - 1);
  }
  SmallVector<Type> types;
  SmallVector<Location> locs;

private:
  OpBuilder &b;
  Location loc;
};

/// The tensor types of one decode step with activations of type `act`.
struct DecodeLayerTypes {
  RankedTensorType act, q, kv, vec, table, normWeight, qkvWeight, qkvBias;
  MemRefType cache;

  DecodeLayerTypes(OpBuilder &b, const ModelConfig &c, Type element,
                   int64_t pageSize) {
    const int64_t dyn = ShapedType::kDynamic, H = c.hiddenSize,
                  Hq = c.numAttentionHeads, Hkv = c.numKeyValueHeads,
                  D = c.headDim, rows = c.dims().qkvRows();
    act = RankedTensorType::get({dyn, H}, element);
    q = RankedTensorType::get({dyn, Hq, D}, element);
    kv = RankedTensorType::get({dyn, Hkv, D}, element);
    vec = RankedTensorType::get({dyn}, b.getI32Type());
    table = RankedTensorType::get({dyn, dyn}, b.getI32Type());
    normWeight = RankedTensorType::get({H}, element);
    qkvWeight = RankedTensorType::get({rows, H}, element);
    qkvBias = RankedTensorType::get({rows}, element);
    cache = MemRefType::get({dyn, pageSize, Hkv, D}, element);
  }
};

/// Indices of the front-half weights of one layer (qkv_b only with the
/// attention bias).
struct FrontHalfWeightArgs {
  unsigned normW, qkvW;
  std::optional<unsigned> qkvB;
};

/// Declares `<prefix>norm_w`, `<prefix>qkv_w` and, with the attention bias,
/// `<prefix>qkv_b`.
FrontHalfWeightArgs addFrontHalfWeights(ArgList &a, const ModelConfig &c,
                                        const DecodeLayerTypes &t,
                                        const Twine &prefix) {
  FrontHalfWeightArgs w;
  w.normW = a.add((prefix + "norm_w").str(), t.normWeight);
  w.qkvW = a.add((prefix + "qkv_w").str(), t.qkvWeight);
  if (c.attentionBias)
    w.qkvB = a.add((prefix + "qkv_b").str(), t.qkvBias);
  return w;
}

/// Indices of the per-step inputs every layer shares.
struct StepArgs {
  unsigned positions, seqLens, blockTable;
};

StepArgs addStepInputs(ArgList &a, const DecodeLayerTypes &t) {
  StepArgs s;
  s.positions = a.add("positions", t.vec);
  s.seqLens = a.add("seq_lens", t.vec);
  s.blockTable = a.add("block_table", t.table);
  return s;
}

/// Indices of one layer's K and V caches.
struct CacheArgs {
  unsigned k, v;
};

CacheArgs addCaches(ArgList &a, const DecodeLayerTypes &t,
                    const Twine &prefix) {
  return {a.add((prefix + "k_cache").str(), t.cache),
          a.add((prefix + "v_cache").str(), t.cache)};
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

/// The values the front half of one layer reads (residual and qkvB may be
/// null).
struct FrontHalfValues {
  Value x, residual, normW, qkvW, qkvB, positions, seqLens, blockTable, kCache,
      vCache;
};

/// What the front half returns: the attention output [B, Hq, D] and the
/// norm's residual_out (null without a residual).
struct FrontHalfResults {
  Value attention, residualOut;
};

/// rmsnorm -> qkv_proj -> rope -> kv_append -> decode_attention.
FrontHalfResults buildFrontHalf(OpBuilder &b, const ModelConfig &c,
                                const DecodeLayerTypes &t,
                                const FrontHalfValues &v, Location loc) {
  auto norm =
      RMSNormOp::create(b, loc, t.act, v.residual ? Type(t.act) : Type(), v.x,
                        v.normW, v.residual, b.getF64FloatAttr(c.rmsNormEps));
  auto qkv = QKVProjOp::create(
      b, loc, t.q, t.kv, t.kv, norm.getResult(), v.qkvW, v.qkvB,
      b.getI64IntegerAttr(c.numAttentionHeads),
      b.getI64IntegerAttr(c.numKeyValueHeads), b.getI64IntegerAttr(c.headDim));
  RopeOp rope = createRope(b, c, t, qkv, v.positions, loc);
  KVAppendOp::create(b, loc, rope.getKeyOut(), qkv.getValue(), v.kCache,
                     v.vCache, v.blockTable, v.positions);
  auto attention =
      DecodeAttentionOp::create(b, loc, t.q, rope.getQueryOut(), v.kCache,
                                v.vCache, v.blockTable, v.seqLens, FloatAttr());
  return {attention.getResult(), norm.getResidualOut()};
}

/// The element type and the checked options, after loading the dialects;
/// null after a diagnostic.
Type prepare(MLIRContext *context, const ModelConfig &c, StringRef dtype,
             StringRef functionName, int64_t pageSize, Location loc) {
  context->getOrLoadDialect<FusionDialect>();
  context->getOrLoadDialect<func::FuncDialect>();
  Type element = getActivationType(context, c, dtype, loc);
  if (!element || failed(checkOptions(functionName, pageSize, loc)))
    return nullptr;
  return element;
}

/// A module with one function `name` of `args` and `resultTypes`, whose
/// entry block `fillBody` fills (ending with the return); null if it does
/// not verify.
OwningOpRef<ModuleOp> buildModule(OpBuilder &b, StringRef name,
                                  const ArgList &args,
                                  ArrayRef<Type> resultTypes, Location loc,
                                  function_ref<void(Block *entry)> fillBody) {
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, loc, name,
                                   b.getFunctionType(args.types, resultTypes));
  Block *entry = b.createBlock(&func.getBody(), {}, args.types, args.locs);
  fillBody(entry);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

/// The value of optional argument `i` of `entry` (null when absent).
Value optionalArg(Block *entry, std::optional<unsigned> i) {
  return i ? entry->getArgument(*i) : Value();
}

//===----------------------------------------------------------------------===//
// The whole model
//===----------------------------------------------------------------------===//

/// The back-half and model-level types (I = intermediate_size, V = vocab).
struct ModelTypes {
  RankedTensorType oWeight, gateUpWeight, downWeight, vocabTable, gateUp, mlp,
      logits;

  ModelTypes(const ModelConfig &c, Type element) {
    const int64_t dyn = ShapedType::kDynamic, H = c.hiddenSize,
                  I = c.intermediateSize, V = c.vocabSize,
                  qWidth = c.numAttentionHeads * c.headDim;
    oWeight = RankedTensorType::get({H, qWidth}, element);
    gateUpWeight = RankedTensorType::get({2 * I, H}, element);
    downWeight = RankedTensorType::get({H, I}, element);
    vocabTable = RankedTensorType::get({V, H}, element);
    gateUp = RankedTensorType::get({dyn, 2 * I}, element);
    mlp = RankedTensorType::get({dyn, I}, element);
    logits = RankedTensorType::get({dyn, V}, element);
  }
};

/// Argument indices of one decoder layer.
struct LayerArgs {
  FrontHalfWeightArgs front;
  unsigned oW, postNormW, gateUpW, downW;
  CacheArgs caches;
};

/// Argument indices of the whole decode step, in declaration order.
struct ModelArgs {
  unsigned tokens, embedW, finalNormW;
  SmallVector<LayerArgs> layers;
  std::optional<unsigned> lmHeadW; ///< absent with tied embeddings
  StepArgs step;
};

ModelArgs declareModelArgs(ArgList &a, const ModelConfig &c,
                           const DecodeLayerTypes &t, const ModelTypes &m) {
  ModelArgs args;
  args.tokens = a.add("tokens", t.vec);
  args.embedW = a.add("embed_w", m.vocabTable);
  for (int64_t l = 0; l < c.numHiddenLayers; ++l) {
    std::string p = "l" + std::to_string(l) + "_";
    LayerArgs la;
    la.front = addFrontHalfWeights(a, c, t, p);
    la.oW = a.add(p + "o_w", m.oWeight);
    la.postNormW = a.add(p + "post_norm_w", t.normWeight);
    la.gateUpW = a.add(p + "gate_up_w", m.gateUpWeight);
    la.downW = a.add(p + "down_w", m.downWeight);
    la.caches = addCaches(a, t, p);
    args.layers.push_back(la);
  }
  args.finalNormW = a.add("final_norm_w", t.normWeight);
  if (!c.tieWordEmbeddings)
    args.lmHeadW = a.add("lm_head_w", m.vocabTable);
  args.step = addStepInputs(a, t);
  return args;
}

/// The residual stream between layers (vLLM's): the layer's input is
/// x + residual, with no residual before the first layer.
struct Stream {
  Value x, residual;
};

/// One decoder layer (ref::decoderLayer): the front half, o_proj, the
/// post-attention norm with the residual add, gate/up, SwiGLU, down_proj.
Stream buildLayer(OpBuilder &b, const ModelConfig &c, const DecodeLayerTypes &t,
                  const ModelTypes &m, const ModelArgs &args,
                  const LayerArgs &la, Block *entry, Stream in, Location loc) {
  auto arg = [&](unsigned i) -> Value { return entry->getArgument(i); };
  FrontHalfValues v{in.x,
                    in.residual,
                    arg(la.front.normW),
                    arg(la.front.qkvW),
                    optionalArg(entry, la.front.qkvB),
                    arg(args.step.positions),
                    arg(args.step.seqLens),
                    arg(args.step.blockTable),
                    arg(la.caches.k),
                    arg(la.caches.v)};
  FrontHalfResults front = buildFrontHalf(b, c, t, v, loc);
  // Layer 0's norm has no residual: the stream is its input.
  Value residual = in.residual ? front.residualOut : in.x;
  auto o = LinearOp::create(b, loc, t.act, front.attention, arg(la.oW));
  auto post =
      RMSNormOp::create(b, loc, t.act, t.act, o.getResult(), arg(la.postNormW),
                        residual, b.getF64FloatAttr(c.rmsNormEps));
  auto gateUp =
      LinearOp::create(b, loc, m.gateUp, post.getResult(), arg(la.gateUpW));
  auto act = SiluMulOp::create(b, loc, m.mlp, gateUp.getResult());
  auto down = LinearOp::create(b, loc, t.act, act.getResult(), arg(la.downW));
  return {down.getResult(), post.getResidualOut()};
}

/// The embedding, every layer, the final norm, the LM head and argmax;
/// returns the next tokens and the logits.
void buildModelBody(OpBuilder &b, const ModelConfig &c,
                    const DecodeLayerTypes &t, const ModelTypes &m,
                    const ModelArgs &args, Block *entry, Location loc) {
  auto arg = [&](unsigned i) -> Value { return entry->getArgument(i); };
  auto embedding =
      EmbeddingOp::create(b, loc, t.act, arg(args.tokens), arg(args.embedW));
  Stream stream{embedding.getResult(), Value()};
  for (const LayerArgs &la : args.layers)
    stream = buildLayer(b, c, t, m, args, la, entry, stream, loc);
  auto norm =
      RMSNormOp::create(b, loc, t.act, t.act, stream.x, arg(args.finalNormW),
                        stream.residual, b.getF64FloatAttr(c.rmsNormEps));
  Value lmHead = arg(args.lmHeadW ? *args.lmHeadW : args.embedW);
  auto logits = LinearOp::create(b, loc, m.logits, norm.getResult(), lmHead);
  auto next = ArgmaxOp::create(b, loc, t.vec, logits.getResult());
  func::ReturnOp::create(b, loc,
                         ValueRange{next.getResult(), logits.getResult()});
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
  Type element = prepare(context, c, options.dtype, options.functionName,
                         options.pageSize, loc);
  if (!element)
    return nullptr;
  OpBuilder b(context);
  DecodeLayerTypes t(b, c, element, options.pageSize);
  // The order of examples/llama3_8b.mlir (qkv_b after qkv_w as in
  // examples/qwen2_7b.mlir).
  ArgList args(b, loc);
  unsigned x = args.add("x", t.act);
  std::optional<unsigned> residual;
  if (options.residual)
    residual = args.add("residual", t.act);
  FrontHalfWeightArgs weights = addFrontHalfWeights(args, c, t, "");
  StepArgs step = addStepInputs(args, t);
  CacheArgs caches = addCaches(args, t, "");
  SmallVector<Type> resultTypes = {t.q};
  if (options.residual)
    resultTypes.push_back(t.act);

  return buildModule(
      b, options.functionName, args, resultTypes, loc, [&](Block *entry) {
        auto arg = [&](unsigned i) -> Value { return entry->getArgument(i); };
        FrontHalfValues v{arg(x),
                          optionalArg(entry, residual),
                          arg(weights.normW),
                          arg(weights.qkvW),
                          optionalArg(entry, weights.qkvB),
                          arg(step.positions),
                          arg(step.seqLens),
                          arg(step.blockTable),
                          arg(caches.k),
                          arg(caches.v)};
        FrontHalfResults r = buildFrontHalf(b, c, t, v, loc);
        SmallVector<Value> results = {r.attention};
        if (r.residualOut)
          results.push_back(r.residualOut);
        func::ReturnOp::create(b, loc, results);
      });
}

OwningOpRef<ModuleOp>
mlir::fusion::buildDecodeModelModule(MLIRContext *context, const ModelConfig &c,
                                     const DecodeModelOptions &options,
                                     Location loc) {
  Type element = prepare(context, c, options.dtype, options.functionName,
                         options.pageSize, loc);
  if (!element)
    return nullptr;
  if (std::string problem = c.wholeModelProblem(); !problem.empty()) {
    emitError(loc) << problem;
    return nullptr;
  }
  OpBuilder b(context);
  DecodeLayerTypes t(b, c, element, options.pageSize);
  ModelTypes m(c, element);
  ArgList argList(b, loc);
  ModelArgs args = declareModelArgs(argList, c, t, m);
  return buildModule(
      b, options.functionName, argList, {t.vec, m.logits}, loc,
      [&](Block *entry) { buildModelBody(b, c, t, m, args, entry, loc); });
}
