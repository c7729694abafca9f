//===- HuggingFace.cpp - decode-layer modules from config.json ------------===//
//
// Field semantics follow transformers' LlamaConfig / MistralConfig /
// Qwen2Config (and runtime/src/ModelConfig.cpp, which reads the same fields
// for the CPU reference; fusion-run checks that both agree).
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
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fusion;
namespace json = llvm::json;
using llvm::Error;
using llvm::Expected;

namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

/// The deepest nesting of arrays and objects accepted: json::parse recurses
/// once per level, and a config.json needs three or four.
constexpr unsigned kMaxJSONDepth = 64;

/// Fails if `text` nests arrays and objects (counted outside strings) more
/// than kMaxJSONDepth deep, before json::parse would recurse that far.
Error checkJSONDepth(StringRef text, StringRef source) {
  unsigned depth = 0;
  bool inString = false, escaped = false;
  for (auto [offset, c] : llvm::enumerate(text)) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJSONDepth)
        return llvm::createStringError(llvm::formatv(
            "{0}: invalid JSON: arrays and objects nested more than {1} deep "
            "(at byte {2}); a config.json needs a few levels",
            source, kMaxJSONDepth, offset));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Error::success();
}

/// `v` as printf's %g writes it (formatv would print 1e-05 as 0.00).
std::string num(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%g", v);
  return s;
}

/// Typed access to the fields of one JSON object. Errors name the field by
/// its dotted path from the root of the config; a JSON null is treated as
/// an absent field (as transformers does for head_dim, rope_scaling, ...).
class FieldReader {
public:
  FieldReader(const json::Object &object, StringRef source, StringRef prefix)
      : object(object), source(source), prefix(prefix) {}

  /// The field `key`, or null if it is absent or null.
  const json::Value *find(StringRef key) const {
    const json::Value *v = object.get(key);
    return v && v->kind() != json::Value::Null ? v : nullptr;
  }
  std::string path(StringRef key) const { return (prefix + key).str(); }
  Error error(StringRef key, const Twine &message) const {
    return llvm::createStringError(llvm::formatv(
        "{0}: field \"{1}\": {2}", source, path(key), message.str()));
  }
  Error missing(StringRef key) const {
    return llvm::createStringError(llvm::formatv(
        "{0}: missing field \"{1}\" (required)", source, path(key)));
  }

  /// An integer in [min, max]; `fallback` when absent (else an error).
  Expected<int64_t> getInt(StringRef key, std::optional<int64_t> fallback,
                           int64_t min, int64_t max = kMaxInt32) const {
    const json::Value *v = find(key);
    if (!v) {
      if (fallback)
        return *fallback;
      return missing(key);
    }
    std::optional<int64_t> i = v->getAsInteger();
    if (!i)
      return error(key, llvm::formatv("expected an integer, got {0}", *v));
    if (*i < min || *i > max)
      return error(key,
                   llvm::formatv("{0} is outside [{1}, {2}]", *i, min, max));
    return *i;
  }

  /// A finite number; `fallback` when absent (else an error).
  Expected<double> getNumber(StringRef key,
                             std::optional<double> fallback) const {
    const json::Value *v = find(key);
    if (!v) {
      if (fallback)
        return *fallback;
      return missing(key);
    }
    std::optional<double> d = v->getAsNumber();
    if (!d || !std::isfinite(*d))
      return error(key, llvm::formatv("expected a number, got {0}", *v));
    return *d;
  }

  /// A string, or std::nullopt when absent.
  Expected<std::optional<std::string>> getString(StringRef key) const {
    const json::Value *v = find(key);
    if (!v)
      return std::optional<std::string>();
    std::optional<StringRef> s = v->getAsString();
    if (!s)
      return error(key, llvm::formatv("expected a string, got {0}", *v));
    return std::optional<std::string>(s->str());
  }

  /// A boolean, or std::nullopt when absent.
  Expected<std::optional<bool>> getBool(StringRef key) const {
    const json::Value *v = find(key);
    if (!v)
      return std::optional<bool>();
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return error(key, llvm::formatv("expected true or false, got {0}", *v));
    return b;
  }

  /// The nested object `key`, or null when absent.
  Expected<const json::Object *> getObject(StringRef key) const {
    const json::Value *v = find(key);
    if (!v)
      return nullptr;
    const json::Object *o = v->getAsObject();
    if (!o)
      return error(key, llvm::formatv("expected an object, got {0}", *v));
    return o;
  }

  FieldReader nested(const json::Object &child, StringRef key) const {
    return FieldReader(child, source, path(key) + ".");
  }

private:
  const json::Object &object;
  StringRef source;
  std::string prefix;
};

/// Reads the RoPE fields: transformers 5's `rope_parameters` (which holds
/// rope_theta) or transformers 4's `rope_scaling` next to `rope_theta`.
Error parseRope(const FieldReader &root, HFDecoderConfig &c) {
  StringRef ropeKey = "rope_parameters";
  Expected<const json::Object *> rope = root.getObject(ropeKey);
  if (!rope)
    return rope.takeError();
  if (!*rope) {
    ropeKey = "rope_scaling";
    rope = root.getObject(ropeKey);
    if (!rope)
      return rope.takeError();
  }
  Expected<double> theta = root.getNumber("rope_theta", 10000.0);
  if (!theta)
    return theta.takeError();
  c.ropeTheta = *theta;
  if (!*rope)
    return Error::success();

  FieldReader r = root.nested(**rope, ropeKey);
  StringRef typeKey = r.find("rope_type") ? "rope_type" : "type";
  Expected<std::optional<std::string>> type = r.getString(typeKey);
  if (!type)
    return type.takeError();
  if (!*type) {
    // Per-layer-type parameters ({"full_attention": {...}, ...}).
    SmallVector<std::string> nestedKeys;
    for (const auto &kv : **rope)
      if (kv.second.getAsObject())
        nestedKeys.push_back(("\"" + StringRef(kv.first) + "\"").str());
    if (!nestedKeys.empty())
      return root.error(ropeKey, "per-layer-type RoPE parameters (" +
                                     llvm::join(nestedKeys, ", ") +
                                     ") are not supported");
  }
  if (ropeKey == "rope_parameters") {
    Expected<double> t = r.getNumber("rope_theta", c.ropeTheta);
    if (!t)
      return t.takeError();
    c.ropeTheta = *t;
  }
  std::string kind = type->value_or("default");
  if (kind == "default")
    return Error::success();
  if (kind != "llama3")
    return r.error(typeKey, "RoPE type \"" + kind +
                                "\" is not supported (fusion.rope implements "
                                "\"default\" and \"llama3\")");
  HFLlama3Scaling s;
  Expected<double> factor = r.getNumber("factor", std::nullopt);
  if (!factor)
    return factor.takeError();
  Expected<double> low = r.getNumber("low_freq_factor", std::nullopt);
  if (!low)
    return low.takeError();
  Expected<double> high = r.getNumber("high_freq_factor", std::nullopt);
  if (!high)
    return high.takeError();
  Expected<int64_t> original =
      r.getInt("original_max_position_embeddings", std::nullopt, 1);
  if (!original)
    return original.takeError();
  s.factor = *factor;
  s.lowFreqFactor = *low;
  s.highFreqFactor = *high;
  s.originalMaxPosition = *original;
  if (!(s.factor > 0))
    return r.error("factor",
                   llvm::formatv("must be > 0, got {0}", num(s.factor)));
  if (!(s.lowFreqFactor > 0))
    return r.error("low_freq_factor",
                   llvm::formatv("must be > 0, got {0}", num(s.lowFreqFactor)));
  if (!(s.highFreqFactor > s.lowFreqFactor))
    return r.error("high_freq_factor",
                   llvm::formatv("must be greater than low_freq_factor {0}, "
                                 "got {1}",
                                 num(s.lowFreqFactor), num(s.highFreqFactor)));
  c.llama3Scaling = s;
  return Error::success();
}

/// Checks that the sizes derived from the shapes fit in 64 bits: the rows
/// of the packed q/k/v weight, (heads + 2 * kv_heads) * head_dim, and its
/// elements, rows * hidden_size.
Error checkSizes(const FieldReader &r, const HFDecoderConfig &c) {
  std::optional<int64_t> kvRows = llvm::checkedMul<int64_t>(2, c.numKVHeads);
  std::optional<int64_t> heads =
      kvRows ? llvm::checkedAdd(c.numHeads, *kvRows) : std::nullopt;
  std::optional<int64_t> rows =
      heads ? llvm::checkedMul(*heads, c.headDim) : std::nullopt;
  if (!rows)
    return r.error(
        "head_dim",
        llvm::formatv("(num_attention_heads {0} + 2 * num_key_value_heads "
                      "{1}) * head_dim {2}, the rows of the q/k/v weight, "
                      "overflows a 64-bit size",
                      c.numHeads, c.numKVHeads, c.headDim));
  if (!llvm::checkedMul(*rows, c.hiddenSize))
    return r.error("hidden_size",
                   llvm::formatv("the q/k/v weight of {0} x {1} elements "
                                 "overflows a 64-bit size",
                                 *rows, c.hiddenSize));
  return Error::success();
}

Error parseConfig(const FieldReader &r, HFDecoderConfig &c) {
  Expected<std::optional<std::string>> modelType = r.getString("model_type");
  if (!modelType)
    return modelType.takeError();
  if (!*modelType)
    return r.missing("model_type");
  c.modelType = **modelType;
  ArrayRef<llvm::StringLiteral> supported = getSupportedHFModelTypes();
  if (!llvm::is_contained(supported, c.modelType)) {
    SmallVector<StringRef> names(supported.begin(), supported.end());
    return r.error("model_type", "\"" + c.modelType +
                                     "\" is not supported (supported: " +
                                     llvm::join(names, ", ") + ")");
  }

  Expected<int64_t> hidden = r.getInt("hidden_size", std::nullopt, 1);
  if (!hidden)
    return hidden.takeError();
  Expected<int64_t> heads = r.getInt("num_attention_heads", std::nullopt, 1);
  if (!heads)
    return heads.takeError();
  Expected<int64_t> kvHeads = r.getInt("num_key_value_heads", *heads, 1);
  if (!kvHeads)
    return kvHeads.takeError();
  c.hiddenSize = *hidden;
  c.numHeads = *heads;
  c.numKVHeads = *kvHeads;
  if (c.numHeads % c.numKVHeads != 0)
    return r.error("num_key_value_heads",
                   llvm::formatv("num_attention_heads {0} is not a multiple "
                                 "of num_key_value_heads {1}",
                                 c.numHeads, c.numKVHeads));
  if (r.find("head_dim")) {
    Expected<int64_t> headDim = r.getInt("head_dim", std::nullopt, 1);
    if (!headDim)
      return headDim.takeError();
    c.headDim = *headDim;
  } else {
    if (c.hiddenSize % c.numHeads != 0)
      return r.error("head_dim",
                     llvm::formatv("absent, and hidden_size {0} is not a "
                                   "multiple of num_attention_heads {1}",
                                   c.hiddenSize, c.numHeads));
    c.headDim = c.hiddenSize / c.numHeads;
  }

  if (Error e = checkSizes(r, c))
    return e;

  Expected<double> eps = r.getNumber("rms_norm_eps", 1e-6);
  if (!eps)
    return eps.takeError();
  if (!(*eps > 0))
    return r.error("rms_norm_eps",
                   llvm::formatv("must be > 0, got {0}", num(*eps)));
  c.rmsNormEps = *eps;

  if (Error e = parseRope(r, c))
    return e;
  // RoPE's frequencies theta^(-2i/d) decrease only for theta > 1.
  if (!(c.ropeTheta > 1))
    return r.error(r.find("rope_parameters") ? "rope_parameters.rope_theta"
                                             : "rope_theta",
                   llvm::formatv("must be > 1, got {0}", num(c.ropeTheta)));

  // partial_rotary_factor: top level (transformers 4) or inside
  // rope_parameters (transformers 5).
  StringRef partialKey = "partial_rotary_factor";
  std::optional<FieldReader> partial;
  if (r.find(partialKey))
    partial.emplace(r);
  else if (const json::Value *p = r.find("rope_parameters"))
    if (p->getAsObject() &&
        r.nested(*p->getAsObject(), "rope_parameters").find(partialKey))
      partial.emplace(r.nested(*p->getAsObject(), "rope_parameters"));
  c.rotaryDim = c.headDim;
  if (!partial && c.headDim % 2 != 0)
    return r.error("head_dim",
                   llvm::formatv("{0}{1} is odd, and RoPE rotates pairs of "
                                 "elements (without partial_rotary_factor "
                                 "the whole head is rotated)",
                                 c.headDim,
                                 r.find("head_dim")
                                     ? std::string()
                                     : llvm::formatv(" (hidden_size {0} / "
                                                     "num_attention_heads {1})",
                                                     c.hiddenSize, c.numHeads)
                                           .str()));
  if (partial) {
    Expected<double> f = partial->getNumber(partialKey, std::nullopt);
    if (!f)
      return f.takeError();
    if (!(*f > 0 && *f <= 1))
      return partial->error(
          partialKey, llvm::formatv("must be in (0, 1], got {0}", num(*f)));
    c.rotaryDim = static_cast<int64_t>(std::floor(c.headDim * *f));
    if (c.rotaryDim < 2 || c.rotaryDim % 2 != 0)
      return partial->error(
          partialKey, llvm::formatv("head_dim {0} * {1} does not give an even "
                                    "rotary dimension",
                                    c.headDim, num(*f)));
  }

  // Qwen2Attention always has q/k/v biases (bias=True); its config has no
  // attention_bias field.
  bool qwen2 = c.modelType == "qwen2" || c.modelType == "qwen2_moe";
  Expected<std::optional<bool>> bias = r.getBool("attention_bias");
  if (!bias)
    return bias.takeError();
  c.attentionBias = qwen2 || bias->value_or(false);
  if (qwen2 && *bias && !**bias)
    c.warnings.push_back("attention_bias false is ignored: " + c.modelType +
                         " always has q/k/v biases");

  for (StringRef key : {"torch_dtype", "dtype"}) {
    Expected<std::optional<std::string>> d = r.getString(key);
    if (!d)
      return d.takeError();
    if (!*d)
      continue;
    c.dtypeField = key.str();
    if (**d == "float16")
      c.dtype = "f16";
    else if (**d == "bfloat16")
      c.dtype = "bf16";
    else
      c.dtype = **d;
    break;
  }

  // decode_attention attends to the whole sequence.
  Expected<std::optional<bool>> useSliding = r.getBool("use_sliding_window");
  if (!useSliding)
    return useSliding.takeError();
  if (const json::Value *w = r.find("sliding_window"))
    if (std::optional<int64_t> window = w->getAsInteger();
        window && useSliding->value_or(true))
      c.warnings.push_back(llvm::formatv(
          "sliding_window {0} is ignored: fusion.decode_attention attends to "
          "the whole sequence (exact only for sequences of at most {0} "
          "tokens)",
          *window));
  return Error::success();
}

} // namespace

ArrayRef<llvm::StringLiteral> mlir::fusion::getSupportedHFModelTypes() {
  static constexpr llvm::StringLiteral types[] = {"llama", "mistral", "mixtral",
                                                  "qwen2", "qwen2_moe"};
  return types;
}

Expected<HFDecoderConfig> mlir::fusion::parseHFDecoderConfig(StringRef text,
                                                             StringRef source) {
  if (Error e = checkJSONDepth(text, source))
    return std::move(e);
  Expected<json::Value> doc = json::parse(text);
  if (!doc)
    return llvm::createStringError(llvm::formatv(
        "{0}: invalid JSON: {1}", source, llvm::toString(doc.takeError())));
  const json::Object *root = doc->getAsObject();
  if (!root)
    return llvm::createStringError(
        llvm::formatv("{0}: expected a JSON object at the top level", source));
  HFDecoderConfig c;
  c.source = source.str();
  if (Error e = parseConfig(FieldReader(*root, source, ""), c))
    return std::move(e);
  return c;
}

OwningOpRef<ModuleOp> mlir::fusion::buildDecodeLayerModule(
    MLIRContext *context, const HFDecoderConfig &c,
    const DecodeLayerOptions &options, Location loc) {
  context->getOrLoadDialect<FusionDialect>();
  context->getOrLoadDialect<func::FuncDialect>();

  std::string dtype = options.dtype.empty() ? c.dtype : options.dtype;
  Type act;
  if (dtype == "f16") {
    act = Float16Type::get(context);
  } else if (dtype == "bf16") {
    act = BFloat16Type::get(context);
  } else if (!options.dtype.empty()) {
    emitError(loc) << "unknown dtype '" << options.dtype
                   << "'; expected f16 or bf16";
    return nullptr;
  } else if (c.dtype.empty()) {
    emitError(loc) << c.source
                   << ": no field \"torch_dtype\" or \"dtype\"; pass --dtype "
                      "f16 or --dtype bf16";
    return nullptr;
  } else {
    emitError(loc) << c.source << ": field \"" << c.dtypeField << "\": \""
                   << c.dtype
                   << "\" is not float16 or bfloat16; pass --dtype f16 or "
                      "--dtype bf16";
    return nullptr;
  }
  if (!isValidKernelName(options.functionName)) {
    emitError(loc) << "function name \"" << options.functionName
                   << "\" cannot name kernels (they are named after the "
                      "function): expected "
                   << describeKernelNameRule();
    return nullptr;
  }
  if (options.pageSize < 1 || options.pageSize > kMaxInt32) {
    emitError(loc) << "page size must be in [1, " << kMaxInt32 << "], got "
                   << options.pageSize;
    return nullptr;
  }

  OpBuilder b(context);
  const int64_t dyn = ShapedType::kDynamic;
  const int64_t H = c.hiddenSize, Hq = c.numHeads, Hkv = c.numKVHeads,
                D = c.headDim, rows = (Hq + 2 * Hkv) * D;
  Type i32 = b.getI32Type();
  auto actType = RankedTensorType::get({dyn, H}, act);
  auto qType = RankedTensorType::get({dyn, Hq, D}, act);
  auto kvType = RankedTensorType::get({dyn, Hkv, D}, act);
  auto vecType = RankedTensorType::get({dyn}, i32);
  auto tableType = RankedTensorType::get({dyn, dyn}, i32);
  auto cacheType = MemRefType::get({dyn, options.pageSize, Hkv, D}, act);
  auto named = [&](StringRef name) -> Location {
    return NameLoc::get(b.getStringAttr(name), loc);
  };

  // Arguments in the order of examples/llama3_8b.mlir (qkv_b after qkv_w as
  // in examples/qwen2_7b.mlir).
  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  auto addArg = [&](StringRef name, Type type) {
    argTypes.push_back(type);
    argLocs.push_back(named(name));
    return static_cast<unsigned>(argTypes.size() - 1);
  };
  unsigned x = addArg("x", actType);
  std::optional<unsigned> residual;
  if (options.residual)
    residual = addArg("residual", actType);
  unsigned normW = addArg("norm_w", RankedTensorType::get({H}, act));
  unsigned qkvW = addArg("qkv_w", RankedTensorType::get({rows, H}, act));
  std::optional<unsigned> qkvB;
  if (c.attentionBias)
    qkvB = addArg("qkv_b", RankedTensorType::get({rows}, act));
  unsigned positions = addArg("positions", vecType);
  unsigned seqLens = addArg("seq_lens", vecType);
  unsigned blockTable = addArg("block_table", tableType);
  unsigned kCache = addArg("k_cache", cacheType);
  unsigned vCache = addArg("v_cache", cacheType);
  SmallVector<Type> resultTypes = {qType};
  if (options.residual)
    resultTypes.push_back(actType);

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, loc, options.functionName,
                                   b.getFunctionType(argTypes, resultTypes));
  Block *entry = b.createBlock(&func.getBody(), {}, argTypes, argLocs);
  auto arg = [&](unsigned i) -> Value { return entry->getArgument(i); };

  auto norm = RMSNormOp::create(
      b, loc, actType, options.residual ? Type(actType) : Type(), arg(x),
      arg(normW), residual ? arg(*residual) : Value(),
      b.getF64FloatAttr(c.rmsNormEps));
  auto qkv = QKVProjOp::create(
      b, loc, qType, kvType, kvType, norm.getResult(), arg(qkvW),
      qkvB ? arg(*qkvB) : Value(), b.getI64IntegerAttr(Hq),
      b.getI64IntegerAttr(Hkv), b.getI64IntegerAttr(D));
  Llama3RopeScalingAttr scaling;
  if (c.llama3Scaling)
    scaling = Llama3RopeScalingAttr::get(
        context, llvm::APFloat(c.llama3Scaling->factor),
        llvm::APFloat(c.llama3Scaling->lowFreqFactor),
        llvm::APFloat(c.llama3Scaling->highFreqFactor),
        c.llama3Scaling->originalMaxPosition);
  auto rope = RopeOp::create(
      b, loc, qType, kvType, qkv.getQuery(), qkv.getKey(), arg(positions),
      RopePairingAttr::get(context, RopePairing::neox),
      b.getF64FloatAttr(c.ropeTheta),
      c.rotaryDim != D ? b.getI64IntegerAttr(c.rotaryDim) : IntegerAttr(),
      scaling);
  KVAppendOp::create(b, loc, rope.getKeyOut(), qkv.getValue(), arg(kCache),
                     arg(vCache), arg(blockTable), arg(positions));
  auto attention = DecodeAttentionOp::create(
      b, loc, qType, rope.getQueryOut(), arg(kCache), arg(vCache),
      arg(blockTable), arg(seqLens), FloatAttr());
  SmallVector<Value> results = {attention.getResult()};
  if (options.residual)
    results.push_back(norm.getResidualOut());
  func::ReturnOp::create(b, loc, results);

  if (failed(verify(*module)))
    return nullptr;
  return module;
}
