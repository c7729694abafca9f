//===- Checkpoint.cpp - Hugging Face checkpoints -> packed weights --------===//

#include "fusion/runtime/Checkpoint.h"

#include "JsonUtil.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"
#include "fusion/runtime/Manifest.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fusion::runtime {

namespace fs = std::filesystem;
using jsonutil::json;
using jsonutil::Node;

HFLayerNames hfLayerNames(int64_t layer, std::string_view prefix) {
  std::string p = std::string(prefix) + std::to_string(layer) + ".";
  HFLayerNames n;
  n.inputLayernorm = p + "input_layernorm.weight";
  n.qWeight = p + "self_attn.q_proj.weight";
  n.kWeight = p + "self_attn.k_proj.weight";
  n.vWeight = p + "self_attn.v_proj.weight";
  n.qBias = p + "self_attn.q_proj.bias";
  n.kBias = p + "self_attn.k_proj.bias";
  n.vBias = p + "self_attn.v_proj.bias";
  n.oWeight = p + "self_attn.o_proj.weight";
  n.postAttentionLayernorm = p + "post_attention_layernorm.weight";
  n.gateWeight = p + "mlp.gate_proj.weight";
  n.upWeight = p + "mlp.up_proj.weight";
  n.downWeight = p + "mlp.down_proj.weight";
  return n;
}

//===----------------------------------------------------------------------===//
// TensorStore
//===----------------------------------------------------------------------===//

TensorStore TensorStore::fromFile(SafetensorsFile file) {
  TensorStore store;
  store.path_ = file.path();
  for (const TensorInfo &t : file.tensors())
    store.index_.emplace(t.name, 0);
  store.files_.push_back(std::move(file));
  return store;
}

namespace {

/// The shard file name `n` of tensor `tensor` in a checkpoint index: a
/// relative path that stays in the index's directory (no root, no ".."
/// component; checked lexically, so the symlinks of a Hugging Face cache
/// snapshot still work). Throws FormatError naming the entry otherwise.
std::string shardPath(const Node &n, const std::string &tensor) {
  std::string file = n.asString();
  fs::path p(file);
  bool leaves = file.empty() || p.has_root_path();
  for (const fs::path &part : p)
    leaves |= part == "..";
  if (leaves)
    n.fail("tensor \"" + tensor + "\" is in \"" + file +
           "\": shard files must be relative paths inside the checkpoint "
           "directory (no leading /, no \"..\")");
  return file;
}

} // namespace

TensorStore TensorStore::open(const std::string &path) {
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "model.safetensors.index.json"))
      return open((p / "model.safetensors.index.json").string());
    if (fs::exists(p / "model.safetensors"))
      return open((p / "model.safetensors").string());
    throw Error("checkpoint directory " + path +
                " has neither model.safetensors nor "
                "model.safetensors.index.json");
  }
  std::string name = p.filename().string();
  if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
    // A sharded checkpoint's index: {"weight_map": {"tensor": "file"}}.
    json doc = jsonutil::parse(
        readFile(path, "checkpoint index", kMaxJsonFileBytes), path);
    Node root(doc, path);
    Node map = root.at("weight_map");
    map.expectObject();
    TensorStore store;
    store.path_ = path;
    std::map<std::string, size_t> fileIndex;
    for (auto it = doc["weight_map"].begin(); it != doc["weight_map"].end();
         ++it) {
      std::string file =
          shardPath(Node(it.value(), path, "weight_map." + it.key()), it.key());
      auto [pos, inserted] = fileIndex.emplace(file, store.files_.size());
      if (inserted)
        store.files_.push_back(
            SafetensorsFile::open((p.parent_path() / file).string()));
      const SafetensorsFile &f = store.files_[pos->second];
      if (!f.contains(it.key()))
        throwFormat(path, ": weight_map puts \"", it.key(), "\" in ", file,
                    ", which has no such tensor");
      store.index_.emplace(it.key(), pos->second);
    }
    return store;
  }
  return fromFile(SafetensorsFile::open(path));
}

const SafetensorsFile *TensorStore::fileOf(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &files_[it->second];
}

const TensorInfo *TensorStore::find(std::string_view name) const {
  const SafetensorsFile *f = fileOf(name);
  return f ? f->find(name) : nullptr;
}

const TensorInfo &TensorStore::info(std::string_view name) const {
  if (const TensorInfo *t = find(name))
    return *t;
  throwFormat(path_, ": no tensor \"", name, "\" (", index_.size(),
              " tensors)");
}

std::vector<uint8_t> TensorStore::read(std::string_view name) const {
  const SafetensorsFile *f = fileOf(name);
  if (!f)
    throwFormat(path_, ": no tensor \"", name, "\" (", index_.size(),
                " tensors)");
  return f->read(name);
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  for (const auto &[n, i] : index_)
    out.push_back(n);
  return out;
}

//===----------------------------------------------------------------------===//
// Conversion and packing
//===----------------------------------------------------------------------===//

std::vector<uint16_t> convertTo16(std::string_view srcDType, const void *src,
                                  int64_t count, DType dtype,
                                  const std::string &what) {
  std::vector<uint16_t> out(static_cast<size_t>(count));
  auto check = [&](int64_t i, double value, uint16_t bits) {
    if (std::isfinite(value) && !std::isfinite(toFloat(dtype, bits)))
      throwFormat(what, ": element ", i, " (", value, ") overflows ",
                  dtypeName(dtype));
  };
  if (srcDType == "F16" || srcDType == "BF16") {
    DType from = srcDType == "F16" ? DType::F16 : DType::BF16;
    const uint16_t *in = static_cast<const uint16_t *>(src);
    if (from == dtype) {
      std::memcpy(out.data(), in, static_cast<size_t>(count) * 2);
      return out;
    }
    for (int64_t i = 0; i < count; ++i) {
      float v = toFloat(from, in[i]);
      out[i] = fromFloat(dtype, v);
      check(i, v, out[i]);
    }
    return out;
  }
  if (srcDType == "F32") {
    const float *in = static_cast<const float *>(src);
    for (int64_t i = 0; i < count; ++i) {
      out[i] = fromFloat(dtype, in[i]);
      check(i, in[i], out[i]);
    }
    return out;
  }
  if (srcDType == "F64") {
    const double *in = static_cast<const double *>(src);
    for (int64_t i = 0; i < count; ++i) {
      out[i] = fromDouble(dtype, in[i]);
      check(i, in[i], out[i]);
    }
    return out;
  }
  throwUnsupported(what, ": cannot convert dtype ", srcDType, " to ",
                   dtypeName(dtype), " (supported: F16, BF16, F32, F64)");
}

std::vector<uint16_t> packQKV(const ref::AttentionDims &dims, int64_t cols,
                              const std::vector<uint16_t> &q,
                              const std::vector<uint16_t> &k,
                              const std::vector<uint16_t> &v) {
  if (dims.numQHeads < 1 || dims.numKVHeads < 1 || dims.headDim < 1 || cols < 1)
    throwInvalidArgument("packQKV: invalid dims (heads ", dims.numQHeads, "/",
                         dims.numKVHeads, ", head_dim ", dims.headDim,
                         ", cols ", cols, ")");
  size_t qn = static_cast<size_t>(dims.numQHeads * dims.headDim * cols);
  size_t kvn = static_cast<size_t>(dims.numKVHeads * dims.headDim * cols);
  if (q.size() != qn || k.size() != kvn || v.size() != kvn)
    throwInvalidArgument("packQKV: got q/k/v of ", q.size(), "/", k.size(), "/",
                         v.size(), " elements, expected ", qn, "/", kvn, "/",
                         kvn);
  std::vector<uint16_t> out;
  out.reserve(qn + 2 * kvn);
  out.insert(out.end(), q.begin(), q.end());
  out.insert(out.end(), k.begin(), k.end());
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

namespace {

std::vector<uint16_t> readTensor(const TensorStore &store,
                                 const std::string &name,
                                 const std::vector<int64_t> &shape,
                                 const std::string &why, DType dtype) {
  const TensorInfo &t = store.info(name);
  if (t.shape != shape)
    throwFormat(store.path(), ": ", name, " is ", t.describe(), ", expected ",
                shapeString(shape), " ", why);
  std::vector<uint8_t> bytes = store.read(name);
  return convertTo16(t.dtype, bytes.data(), t.numElements(), dtype,
                     store.path() + ": " + name);
}

/// The names of layer `layer` under the first known prefix that has it.
HFLayerNames findLayer(const TensorStore &store, int64_t layer) {
  static const char *const prefixes[] = {"model.layers.", "layers.",
                                         "model.language_model.layers."};
  for (const char *prefix : prefixes) {
    HFLayerNames names = hfLayerNames(layer, prefix);
    if (store.find(names.qWeight))
      return names;
  }
  throwFormat(store.path(), ": no layer ", layer, " (looked for ",
              hfLayerNames(layer).qWeight, ", layers.", layer,
              ".self_attn.q_proj.weight, model.language_model.layers.", layer,
              ".self_attn.q_proj.weight)");
}

} // namespace

FrontHalfWeights loadFrontHalfWeights(const TensorStore &store,
                                      const ModelConfig &config, int64_t layer,
                                      DType dtype) {
  HFLayerNames names = findLayer(store, layer);
  FrontHalfWeights w;
  w.dtype = dtype;
  w.hidden = config.hiddenSize;
  w.dims = config.dims();
  const int64_t H = config.hiddenSize, D = config.headDim;
  const int64_t hq = config.numAttentionHeads, hkv = config.numKeyValueHeads;
  std::string qWhy = "for " + std::to_string(hq) + " heads of " +
                     std::to_string(D) + " and hidden " + std::to_string(H);
  std::string kvWhy = "for " + std::to_string(hkv) + " KV heads of " +
                      std::to_string(D) + " and hidden " + std::to_string(H);
  w.normWeight = readTensor(store, names.inputLayernorm, {H},
                            "for hidden " + std::to_string(H), dtype);
  auto q = readTensor(store, names.qWeight, {hq * D, H}, qWhy, dtype);
  auto k = readTensor(store, names.kWeight, {hkv * D, H}, kvWhy, dtype);
  auto v = readTensor(store, names.vWeight, {hkv * D, H}, kvWhy, dtype);
  w.qkvWeight = packQKV(w.dims, H, q, k, v);
  if (config.attentionBias) {
    auto qb = readTensor(store, names.qBias, {hq * D}, qWhy, dtype);
    auto kb = readTensor(store, names.kBias, {hkv * D}, kvWhy, dtype);
    auto vb = readTensor(store, names.vBias, {hkv * D}, kvWhy, dtype);
    w.qkvBias = packQKV(w.dims, 1, qb, kb, vb);
  }
  return w;
}

DecoderLayerWeights loadDecoderLayerWeights(const TensorStore &store,
                                            const ModelConfig &config,
                                            int64_t layer, DType dtype) {
  DecoderLayerWeights w;
  w.front = loadFrontHalfWeights(store, config, layer, dtype);
  HFLayerNames names = findLayer(store, layer);
  const int64_t H = config.hiddenSize, I = config.intermediateSize;
  const int64_t qWidth = config.numAttentionHeads * config.headDim;
  std::string hWhy = "for hidden " + std::to_string(H);
  std::string oWhy = hWhy + " and " + std::to_string(config.numAttentionHeads) +
                     " heads of " + std::to_string(config.headDim);
  std::string mlpWhy = hWhy + " and intermediate_size " + std::to_string(I);
  w.oProj = readTensor(store, names.oWeight, {H, qWidth}, oWhy, dtype);
  w.postNorm =
      readTensor(store, names.postAttentionLayernorm, {H}, hWhy, dtype);
  w.gateUp = readTensor(store, names.gateWeight, {I, H}, mlpWhy, dtype);
  std::vector<uint16_t> up =
      readTensor(store, names.upWeight, {I, H}, mlpWhy, dtype);
  w.gateUp.insert(w.gateUp.end(), up.begin(), up.end());
  w.down = readTensor(store, names.downWeight, {H, I}, mlpWhy, dtype);
  return w;
}

ModelWeights loadModelWeights(const TensorStore &store,
                              const ModelConfig &config, DType dtype) {
  config.checkWholeModel();
  ModelWeights w;
  w.dtype = dtype;
  const int64_t H = config.hiddenSize, V = config.vocabSize;
  std::string vWhy = "for vocab_size " + std::to_string(V) + " and hidden " +
                     std::to_string(H);
  w.embedTokens =
      readTensor(store, "model.embed_tokens.weight", {V, H}, vWhy, dtype);
  for (int64_t l = 0; l < config.numHiddenLayers; ++l)
    w.layers.push_back(loadDecoderLayerWeights(store, config, l, dtype));
  w.finalNorm = readTensor(store, "model.norm.weight", {H},
                           "for hidden " + std::to_string(H), dtype);
  if (!config.tieWordEmbeddings)
    w.lmHead = readTensor(store, "lm_head.weight", {V, H}, vWhy, dtype);
  return w;
}

Checkpoint Checkpoint::open(const std::string &dir) {
  fs::path p(dir);
  std::error_code ec;
  if (!fs::is_directory(p, ec))
    throw Error("checkpoint " + dir + " is not a directory");
  Checkpoint c{ModelConfig::load((p / "config.json").string()),
               TensorStore::open(dir)};
  return c;
}

} // namespace fusion::runtime
