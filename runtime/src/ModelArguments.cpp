//===- ModelArguments.cpp - a whole-model step's arguments -> weights -----===//

#include "fusion/runtime/ModelArguments.h"

#include "fusion/runtime/Error.h"

#include <map>
#include <tuple>

namespace fusion::runtime {

namespace {

namespace role = contract::role;
namespace dim = contract::dim;

/// One argument the whole model has.
struct Expected {
  std::string name;
  ModelArgumentKind kind = ModelArgumentKind::Weight;
  std::string_view role;
  ElemType dtype = ElemType::F16;
  std::vector<Dim> shape;
  const std::vector<uint16_t> *weight = nullptr;
  int64_t layer = -1;
};

ElemType elemTypeOf(DType dtype) {
  return dtype == DType::F16 ? ElemType::F16 : ElemType::BF16;
}
Dim constant(int64_t value) { return Dim{value, ""}; }
Dim symbol(std::string_view name) { return Dim{0, std::string(name)}; }

/// The arguments of the whole model of `c` in declaration order
/// (buildDecodeModelModule's), with caches of `pageSize` tokens per page.
std::vector<Expected> expectedArguments(const ModelConfig &c,
                                        const ModelWeights &w,
                                        int64_t pageSize) {
  const ElemType t = elemTypeOf(w.dtype);
  const int64_t H = c.hiddenSize, V = c.vocabSize, I = c.intermediateSize,
                R = c.dims().qkvRows(),
                qWidth = c.numAttentionHeads * c.headDim;
  const std::vector<Dim> batch = {symbol(dim::kBatch)};
  std::vector<Expected> e;
  auto weight = [&](std::string name, std::string_view r,
                    std::vector<Dim> shape, const std::vector<uint16_t> &data,
                    int64_t layer) {
    e.push_back({std::move(name), ModelArgumentKind::Weight, r, t,
                 std::move(shape), &data, layer});
  };
  auto input = [&](std::string name, ModelArgumentKind kind, std::string_view r,
                   std::vector<Dim> shape) {
    e.push_back({std::move(name), kind, r, ElemType::I32, std::move(shape)});
  };
  input("tokens", ModelArgumentKind::Tokens, role::kTokens, batch);
  weight("embed_w", role::kWeight, {constant(V), constant(H)}, w.embedTokens,
         -1);
  for (int64_t l = 0; l < static_cast<int64_t>(w.layers.size()); ++l) {
    const DecoderLayerWeights &lw = w.layers[l];
    const std::string p = "l" + std::to_string(l) + "_";
    weight(p + "norm_w", role::kNormWeight, {constant(H)}, lw.front.normWeight,
           l);
    weight(p + "qkv_w", role::kQKVWeight, {constant(R), constant(H)},
           lw.front.qkvWeight, l);
    if (c.attentionBias)
      weight(p + "qkv_b", role::kQKVBias, {constant(R)}, lw.front.qkvBias, l);
    weight(p + "o_w", role::kWeight, {constant(H), constant(qWidth)}, lw.oProj,
           l);
    weight(p + "post_norm_w", role::kNormWeight, {constant(H)}, lw.postNorm, l);
    weight(p + "gate_up_w", role::kWeight, {constant(2 * I), constant(H)},
           lw.gateUp, l);
    weight(p + "down_w", role::kWeight, {constant(H), constant(I)}, lw.down, l);
    const std::vector<Dim> cache = {symbol(dim::kNumPages), constant(pageSize),
                                    constant(c.numKeyValueHeads),
                                    constant(c.headDim)};
    for (auto [name, kind, r] :
         {std::tuple{"k_cache", ModelArgumentKind::KeyCache, role::kKeyCache},
          std::tuple{"v_cache", ModelArgumentKind::ValueCache,
                     role::kValueCache}}) {
      e.push_back({p + name, kind, r, t, cache, nullptr, l});
    }
  }
  weight("final_norm_w", role::kNormWeight, {constant(H)}, w.finalNorm, -1);
  if (!c.tieWordEmbeddings)
    weight("lm_head_w", role::kWeight, {constant(V), constant(H)}, w.lmHead,
           -1);
  input("positions", ModelArgumentKind::Positions, role::kPositions, batch);
  input("seq_lens", ModelArgumentKind::SeqLens, role::kSeqLens, batch);
  input("block_table", ModelArgumentKind::BlockTable, role::kBlockTable,
        {symbol(dim::kBatch), symbol(dim::kMaxPages)});
  return e;
}

/// Builds the messages of one function's problems.
struct Reporter {
  const Manifest &manifest;
  const ManifestFunction &function;
  const ModelConfig &config;

  /// Throws FormatError "<manifest>: function "<name>": <args>".
  template <typename... Args>
  [[noreturn]] void fail(Args &&...args) const {
    throwFormat(manifest.source, ": function \"", function.name,
                "\": ", std::forward<Args>(args)...);
  }
  /// "the whole model of config.json (2 layers, tied embeddings, no q/k/v
  /// bias)".
  std::string model() const {
    return detail::concat(
        "the whole model of ", config.source, " (", config.numHiddenLayers,
        " layers, ",
        config.tieWordEmbeddings ? "tied embeddings" : "untied lm_head_w",
        config.attentionBias ? ", q/k/v bias" : ", no q/k/v bias", ")");
  }
};

/// The page size of the caches: dimension 1 of l0_k_cache's shape.
int64_t findPageSize(const Reporter &r) {
  for (const ManifestArgument &a : r.function.arguments)
    if (a.name == "l0_k_cache") {
      if (a.shape.size() != 4 || a.shape[1].isSymbol() || a.shape[1].value < 1)
        r.fail("argument ", a.index, " \"l0_k_cache\" has shape ",
               shapeString(a.shape),
               "; expected [num_pages, page_size, kv_heads, head_dim]");
      return a.shape[1].value;
    }
  r.fail("has no argument \"l0_k_cache\", which ", r.model(),
         " needs (compile the output of fusion-import --whole-model)");
}

/// Checks argument `a` against what the whole model expects of it.
void checkArgument(const Reporter &r, const ManifestArgument &a,
                   const Expected &e) {
  auto where = [&] {
    return detail::concat("argument ", a.index, " \"", a.name, "\"");
  };
  const bool buffer = e.kind == ModelArgumentKind::KeyCache ||
                      e.kind == ModelArgumentKind::ValueCache;
  const std::string_view kind =
      buffer ? contract::argument::kBuffer : contract::argument::kTensor;
  if (a.kind != kind)
    r.fail(where(), " is a ", a.kind, "; expected a ", kind);
  if (a.role != e.role)
    r.fail(where(), " has role \"", a.role, "\"; expected \"", e.role, "\"");
  if (a.dtype != e.dtype)
    r.fail(where(), " is ", elemTypeName(a.dtype), "; expected ",
           elemTypeName(e.dtype),
           e.dtype == ElemType::I32 ? "" : " (the weights' dtype)");
  if (a.shape != e.shape)
    r.fail(where(), " has shape ", shapeString(a.shape), "; ", r.model(),
           " gives it ", shapeString(e.shape));
  if (e.weight) {
    const int64_t n = numElements(e.shape, Symbols{});
    if (static_cast<int64_t>(e.weight->size()) != n)
      r.fail(where(), " ", shapeString(e.shape), " has ", n,
             " elements; its host tensor holds ", e.weight->size(),
             " (weights loaded for another config?)");
  }
}

/// Finds and checks the results: next tokens, then logits.
void mapResults(const Reporter &r, const ModelConfig &c, ElemType dtype,
                ModelArgumentMap &map) {
  const auto &results = r.function.results;
  const std::vector<Dim> tokens = {symbol(dim::kBatch)};
  const std::vector<Dim> logits = {symbol(dim::kBatch), constant(c.vocabSize)};
  if (results.size() != 2 || results[0].dtype != ElemType::I32 ||
      results[0].shape != tokens || results[1].dtype != dtype ||
      results[1].shape != logits) {
    std::string got;
    for (const ManifestResult &res : results)
      got += (got.empty() ? "" : ", ") + std::string(elemTypeName(res.dtype)) +
             shapeString(res.shape);
    r.fail("returns (", got, "); ", r.model(), " returns (i32",
           shapeString(tokens), ", ", elemTypeName(dtype), shapeString(logits),
           "): the next tokens and the logits");
  }
  map.nextTokens = 0;
  map.logits = 1;
}

} // namespace

ModelArgumentMap mapModelArguments(const Manifest &manifest,
                                   const ManifestFunction &function,
                                   const ModelConfig &config,
                                   const ModelWeights &weights) {
  config.checkWholeModel();
  const Reporter r{manifest, function, config};
  if (static_cast<int64_t>(weights.layers.size()) != config.numHiddenLayers)
    r.fail("the weights have ", weights.layers.size(), " layers; ",
           config.source, " has ", config.numHiddenLayers);
  ModelArgumentMap map;
  map.pageSize = findPageSize(r);
  std::vector<Expected> expected =
      expectedArguments(config, weights, map.pageSize);
  std::map<std::string, size_t, std::less<>> byName;
  for (size_t i = 0; i < expected.size(); ++i)
    byName.emplace(expected[i].name, i);

  std::vector<int> argumentOf(expected.size(), -1);
  for (const ManifestArgument &a : function.arguments) {
    auto it = byName.find(a.name);
    if (it == byName.end())
      r.fail("argument ", a.index, " \"", a.name, "\" is not an argument of ",
             r.model());
    if (argumentOf[it->second] >= 0)
      r.fail("arguments ", argumentOf[it->second], " and ", a.index,
             " are both named \"", a.name, "\"");
    const Expected &e = expected[it->second];
    checkArgument(r, a, e);
    argumentOf[it->second] = a.index;
    map.arguments.push_back({a.index, a.name, e.kind, e.weight, e.layer});
  }
  for (size_t i = 0; i < expected.size(); ++i)
    if (argumentOf[i] < 0)
      r.fail("has no argument \"", expected[i].name, "\", which ", r.model(),
             " needs");

  map.keyCaches.assign(weights.layers.size(), -1);
  map.valueCaches.assign(weights.layers.size(), -1);
  for (const ModelArgumentBinding &b : map.arguments) {
    switch (b.kind) {
    case ModelArgumentKind::Tokens:
      map.tokens = b.argument;
      break;
    case ModelArgumentKind::Positions:
      map.positions = b.argument;
      break;
    case ModelArgumentKind::SeqLens:
      map.seqLens = b.argument;
      break;
    case ModelArgumentKind::BlockTable:
      map.blockTable = b.argument;
      break;
    case ModelArgumentKind::KeyCache:
      map.keyCaches[b.layer] = b.argument;
      break;
    case ModelArgumentKind::ValueCache:
      map.valueCaches[b.layer] = b.argument;
      break;
    case ModelArgumentKind::Weight:
      break;
    }
  }
  mapResults(r, config, elemTypeOf(weights.dtype), map);
  return map;
}

DType getModelDType(const Manifest &manifest,
                    const ManifestFunction &function) {
  for (const ManifestArgument &a : function.arguments)
    if (a.name == "embed_w") {
      if (a.dtype == ElemType::F16)
        return DType::F16;
      if (a.dtype == ElemType::BF16)
        return DType::BF16;
      throwFormat(manifest.source, ": function \"", function.name,
                  "\": embed_w is ", elemTypeName(a.dtype),
                  ", not an activation dtype (f16 or bf16)");
    }
  throwFormat(manifest.source, ": function \"", function.name,
              "\" has no argument embed_w: not a whole model "
              "(fusion-import --whole-model)");
}

} // namespace fusion::runtime
