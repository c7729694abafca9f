//===- fusion-run.cpp - run a compiled decode layer and check it ----------===//
//
// Runs the front half of a decoder layer compiled by fusion-compile
// (<prefix>.ptx + <prefix>.manifest.json) on the GPU, on random or
// checkpoint weights, over a paged KV cache filled with a random history (or
// with the inputs and history of a Hugging Face golden, --inputs), and
// compares every output with the CPU reference (fusion_reference, fp32 and
// fp64) and, with --inputs, with the golden's tensors. No MLIR: only the
// runtime libraries.
//
// Exit status: 0 all outputs within tolerance, 1 a mismatch (or NaN),
// 2 a usage / input / CUDA error, 77 no CUDA driver or device (a test
// harness reports "skipped").
//
// See `fusion-run --help` and docs/runtime.md.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Compare.h"
#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/DType.h"
#include "fusion/runtime/DecodeStep.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/Golden.h"
#include "fusion/runtime/KVCacheLayout.h"
#include "fusion/runtime/KVCacheManager.h"
#include "fusion/runtime/Manifest.h"
#include "fusion/runtime/Model.h"
#include "fusion/runtime/ModelConfig.h"
#include "fusion/runtime/Reference.h"
#include "fusion/runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace fusion::runtime;

namespace {

constexpr int kExitMismatch = 1;
constexpr int kExitError = 2;
constexpr int kExitSkipped = 77;
/// Most sequences in a run: the attention kernels' grids have a batch
/// dimension, which CUDA bounds to 65535.
constexpr int64_t kMaxBatch = 65535;

const char *const kUsage =
    R"(usage: fusion-run --ptx FILE --manifest FILE [options]

Runs the decode-layer front half compiled by fusion-compile on the GPU and
checks it against the CPU reference (fp32 and fp64).

Inputs
  --ptx FILE              the PTX module (<prefix>.ptx)
  --manifest FILE         its manifest (<prefix>.manifest.json)
  --function NAME         the function to run (default: the only one)
  --weights PATH          a Hugging Face checkpoint directory (config.json +
                          model.safetensors or a sharded index), or one
                          .safetensors file with HF names
                          (model.layers.N.self_attn.q_proj.weight, ...) or
                          packed names (norm_weight, qkv_weight, qkv_bias, or
                          the manifest's argument names)
  --layer N               layer of the checkpoint (default 0)
  --seed N                seed of the random weights, inputs and KV history
                          (default 1); weights are random unless --weights
  --config FILE           a config.json for the reference when the manifest
                          lists no op attributes (checked against them
                          otherwise)
  --inputs FILE           a golden decode_step.safetensors (docs/goldens.md):
                          hidden_states, positions, seq_lens and the K/V
                          history of each sequence instead of random ones
                          (needs --weights, the golden's checkpoint; a
                          residual argument gets zeros); the outputs are also
                          compared with the golden's tensors

Shape of the run
  --batch B               sequences (default 1, or the number of --kv-lens)
  --kv-len L              tokens already in every sequence's cache (default 64)
  --kv-lens L1,L2,...     per-sequence history lengths (mixed lengths)
  --steps N               decode steps, one new token per sequence each
                          (default 1)
  --num-splits S          KV splits of split-KV attention (default: the
                          schedule's policy for the batch and length)
  --num-pages N           pages in the KV cache (default: what the run needs
                          plus one per sequence)
  --graph                 capture the step in a CUDA graph and replay it

Checking and timing
  --tol X                 relative L2 tolerance vs the fp64 reference
                          (default 2e-3 for f16, 1e-2 for bf16)
  --iters N               timed replays of the last step (default 100; 0: no
                          timing), enqueued back to back with a CUDA event
                          between each two; prints the median and the minimum
                          microseconds per layer-step
  --warmup N              untimed replays first (default 10)
  --layers N              layer copies per replay (default 1): every argument
                          (weights, KV caches, step inputs) is copied N-1
                          times on the device from the checked copy 0, and
                          each replay runs the step once on every copy, in
                          one CUDA graph with --graph, so that the L2 cache
                          cannot hold the weights as in a model of N layers
  --json FILE             write the settings, the check result and the timing
                          (us_per_layer_step, median and min) as JSON ("-":
                          to standard output)
  --out FILE              write outputs, references and inputs of the last
                          step to a .safetensors file
  --device N              CUDA device ordinal (default 0)
  --sync-each             synchronize after every kernel (a fault names it)
  --inspect               no GPU: check the PTX against the manifest, print
                          the plan (kernels, grids, buffers) and exit
  --dry-run               no GPU: everything else (weights, KV cache, both
                          references, comparisons, --out), with the fp32
                          reference standing in for the GPU's outputs
  --check-device          only open the CUDA device: exit 0 if there is one,
                          77 if not
  --help
)";

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

struct Options {
  std::string ptx, manifest, function, weights, config, out, inputs;
  int64_t layer = 0;
  uint64_t seed = 1;
  int64_t batch = 0;
  int64_t kvLen = 64;
  std::vector<int64_t> kvLens;
  int64_t steps = 1;
  int64_t numSplits = 0;
  int64_t numPages = 0;
  bool graph = false;
  double tol = 0;
  int64_t iters = 100;
  int64_t warmup = 10;
  int64_t layers = 1;
  std::string json;
  int device = 0;
  bool syncEach = false;
  bool inspect = false;
  bool dryRun = false;
  bool checkDevice = false;
};

[[noreturn]] void usageError(const std::string &message) {
  throw InvalidArgumentError(message +
                             " (fusion-run --help lists the options)");
}

int64_t parseInt(const std::string &flag, const std::string &value, int64_t lo,
                 int64_t hi) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || errno || v < lo || v > hi)
    usageError(flag + " expects an integer in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "], got \"" + value + "\"");
  return v;
}

double parseDouble(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || !(v > 0))
    usageError(flag + " expects a positive number, got \"" + value + "\"");
  return v;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  bool kvLenGiven = false, stepsGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasValue = false;
    if (size_t eq = arg.find('=');
        arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    auto next = [&]() -> std::string {
      if (hasValue)
        return value;
      if (i + 1 >= argc)
        usageError(arg + " needs a value");
      return argv[++i];
    };
    constexpr int64_t kBig = int64_t(1) << 31;
    // Positions, lengths and page ids are int32 (docs/abi.md).
    constexpr int64_t kInt32Max = kBig - 1;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--ptx") {
      o.ptx = next();
    } else if (arg == "--manifest") {
      o.manifest = next();
    } else if (arg == "--function") {
      o.function = next();
    } else if (arg == "--weights") {
      o.weights = next();
    } else if (arg == "--config") {
      o.config = next();
    } else if (arg == "--inputs") {
      o.inputs = next();
    } else if (arg == "--layer") {
      o.layer = parseInt(arg, next(), 0, kBig);
    } else if (arg == "--seed") {
      o.seed = static_cast<uint64_t>(parseInt(arg, next(), 0, INT64_MAX));
    } else if (arg == "--batch") {
      // The attention kernel's grid has a batch dimension (CUDA: at most
      // 65535); the range also keeps per-sequence host data small.
      o.batch = parseInt(arg, next(), 1, kMaxBatch);
    } else if (arg == "--kv-len") {
      o.kvLen = parseInt(arg, next(), 0, kInt32Max);
      kvLenGiven = true;
    } else if (arg == "--kv-lens") {
      std::stringstream ss(next());
      std::string item;
      while (std::getline(ss, item, ','))
        o.kvLens.push_back(parseInt("--kv-lens", item, 0, kInt32Max));
      if (o.kvLens.empty() || o.kvLens.size() > kMaxBatch)
        usageError("--kv-lens needs 1 to " + std::to_string(kMaxBatch) +
                   " lengths");
    } else if (arg == "--steps") {
      o.steps = parseInt(arg, next(), 1, 1 << 20);
      stepsGiven = true;
    } else if (arg == "--num-splits") {
      o.numSplits = parseInt(arg, next(), 1, 1 << 20);
    } else if (arg == "--num-pages") {
      o.numPages = parseInt(arg, next(), 1, kInt32Max);
    } else if (arg == "--graph") {
      o.graph = true;
    } else if (arg == "--tol") {
      o.tol = parseDouble(arg, next());
    } else if (arg == "--iters") {
      o.iters = parseInt(arg, next(), 0, 1 << 24);
    } else if (arg == "--warmup") {
      o.warmup = parseInt(arg, next(), 0, 1 << 24);
    } else if (arg == "--layers") {
      o.layers = parseInt(arg, next(), 1, 1 << 12);
    } else if (arg == "--json") {
      o.json = next();
    } else if (arg == "--out") {
      o.out = next();
    } else if (arg == "--device") {
      o.device = static_cast<int>(parseInt(arg, next(), 0, 1024));
    } else if (arg == "--sync-each") {
      o.syncEach = true;
    } else if (arg == "--inspect") {
      o.inspect = true;
    } else if (arg == "--dry-run") {
      o.dryRun = true;
    } else if (arg == "--check-device") {
      o.checkDevice = true;
    } else {
      usageError("unknown argument \"" + arg + "\"");
    }
  }
  if (o.checkDevice)
    return o;
  if (o.ptx.empty() || o.manifest.empty())
    usageError("--ptx and --manifest are required");
  if (o.layers > 1 && o.iters == 0)
    usageError("--layers " + std::to_string(o.layers) +
               " applies to the timing, which --iters 0 turns off");
  if (!o.inputs.empty()) {
    // The golden fixes the batch, the histories and the single step.
    if (o.batch || kvLenGiven || !o.kvLens.empty() || stepsGiven)
      usageError("--inputs gives the batch, the histories and one step: "
                 "--batch, --kv-len, --kv-lens and --steps do not apply");
    if (o.weights.empty())
      usageError("--inputs needs --weights (the golden's checkpoint "
                 "directory, e.g. test/golden/llama3_gqa)");
    return o;
  }
  if (!o.kvLens.empty()) {
    if (kvLenGiven)
      usageError("give --kv-len or --kv-lens, not both");
    if (o.batch && o.batch != static_cast<int64_t>(o.kvLens.size()))
      usageError("--batch " + std::to_string(o.batch) + " but --kv-lens has " +
                 std::to_string(o.kvLens.size()) + " lengths");
    o.batch = static_cast<int64_t>(o.kvLens.size());
  } else {
    if (!o.batch)
      o.batch = 1;
    o.kvLens.assign(static_cast<size_t>(o.batch), o.kvLen);
  }
  return o;
}

std::string readFile(const std::string &path, const char *what) {
  std::ifstream is(path, std::ios::binary);
  if (!is)
    throw Error(std::string("cannot open ") + what + " " + path + ": " +
                std::strerror(errno));
  std::ostringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

//===----------------------------------------------------------------------===//
// Random data (splitmix64: the same numbers on every platform)
//===----------------------------------------------------------------------===//

class Random {
public:
  explicit Random(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
  std::vector<uint16_t> tensor(DType dtype, int64_t n, double lo, double hi) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (uint16_t &e : v)
      e = fromDouble(dtype, uniform(lo, hi));
    return v;
  }

private:
  uint64_t state_;
};

uint16_t nanBits(DType dtype) { return dtype == DType::F16 ? 0x7E00 : 0x7FC0; }

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2e", v);
  return buf;
}

//===----------------------------------------------------------------------===//
// Reference configuration and weights
//===----------------------------------------------------------------------===//

/// Differences between the reference the ops describe and a config.json.
/// Sizes compare exactly; eps, rope_theta and the llama3 factors compare as
/// float32, the precision the kernels use them in (a GGUF-converted
/// config's rms_norm_eps 9.999999747378752e-06 is float32(1e-5)), and print
/// with all their digits.
std::vector<std::string> configMismatches(const ref::FrontHalfConfig &ops,
                                          const ref::FrontHalfConfig &cfg) {
  std::vector<std::string> out;
  auto differ = [&](const char *what, double a, double b) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s: kernels %.17g, config %.17g", what, a,
                  b);
    out.push_back(buf);
  };
  auto size = [&](const char *what, int64_t a, int64_t b) {
    if (a != b)
      differ(what, static_cast<double>(a), static_cast<double>(b));
  };
  auto fp32 = [&](const char *what, double a, double b) {
    if (static_cast<float>(a) != static_cast<float>(b))
      differ(what, a, b);
  };
  size("num_attention_heads", ops.dims.numQHeads, cfg.dims.numQHeads);
  size("num_key_value_heads", ops.dims.numKVHeads, cfg.dims.numKVHeads);
  size("head_dim", ops.dims.headDim, cfg.dims.headDim);
  size("hidden_size", ops.hidden, cfg.hidden);
  fp32("rms_norm_eps", ops.normOptions.eps, cfg.normOptions.eps);
  fp32("rope_theta", ops.rope.theta, cfg.rope.theta);
  size("rotary_dim", ops.rope.rotaryDim, cfg.rope.rotaryDim);
  if (ops.rope.llama3.has_value() != cfg.rope.llama3.has_value())
    out.push_back(std::string("llama3 rope scaling: kernels ") +
                  (ops.rope.llama3 ? "yes" : "no") + ", config " +
                  (cfg.rope.llama3 ? "yes" : "no"));
  else if (ops.rope.llama3) {
    fp32("rope_scaling.factor", ops.rope.llama3->factor,
         cfg.rope.llama3->factor);
    fp32("rope_scaling.low_freq_factor", ops.rope.llama3->lowFreqFactor,
         cfg.rope.llama3->lowFreqFactor);
    fp32("rope_scaling.high_freq_factor", ops.rope.llama3->highFreqFactor,
         cfg.rope.llama3->highFreqFactor);
    size("rope_scaling.original_max_position_embeddings",
         ops.rope.llama3->originalMaxPosition,
         cfg.rope.llama3->originalMaxPosition);
  }
  return out;
}

/// A ModelConfig describing the compiled shapes (to read HF-named tensors
/// when no config.json is given).
ModelConfig configFromSignature(const FrontHalfSignature &sig) {
  ModelConfig c;
  c.modelType = "compiled";
  c.hiddenSize = sig.hidden;
  c.numAttentionHeads = sig.dims.numQHeads;
  c.numKeyValueHeads = sig.dims.numKVHeads;
  c.headDim = sig.dims.headDim;
  c.rotaryDim = sig.dims.headDim;
  c.attentionBias = sig.qkvBias >= 0;
  return c;
}

/// Reads one packed tensor of a plain safetensors file by any of `names`.
std::optional<std::vector<uint16_t>>
readPacked(const TensorStore &store, const std::vector<std::string> &names,
           const std::vector<int64_t> &shape, DType dtype) {
  for (const std::string &n : names) {
    const TensorInfo *t = store.find(n);
    if (!t)
      continue;
    if (t->shape != shape) {
      std::string s = "[";
      for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
      throwFormat(store.path(), ": ", n, " is ", t->describe(), ", expected ",
                  s, "]");
    }
    std::vector<uint8_t> bytes = store.read(n);
    return convertTo16(t->dtype, bytes.data(), t->numElements(), dtype,
                       store.path() + ": " + n);
  }
  return std::nullopt;
}

/// The layers of a checkpoint: 1 + the largest N of its tensor names
/// "...layers.N.<rest>" (0 if it has none).
int64_t checkpointLayers(const TensorStore &store) {
  int64_t layers = 0;
  for (const std::string &name : store.names()) {
    size_t p = name.find("layers.");
    if (p == std::string::npos || (p > 0 && name[p - 1] != '.'))
      continue;
    size_t end = name.find_first_not_of("0123456789", p + 7);
    if (end == p + 7 || end == std::string::npos || name[end] != '.' ||
        end - (p + 7) > 9)
      continue;
    layers = std::max<int64_t>(layers, std::stoll(name.substr(p + 7)) + 1);
  }
  return layers;
}

/// Throws InvalidArgumentError if --layer is not a layer of the checkpoint:
/// config.json's num_hidden_layers, or the layers its tensor names hold.
void checkLayer(const Options &o, const TensorStore &store,
                const std::optional<ModelConfig> &config) {
  if (config && config->numHiddenLayers > 0 &&
      o.layer >= config->numHiddenLayers)
    throwInvalidArgument("--layer ", o.layer, ": ", o.weights,
                         " has layers 0..", config->numHiddenLayers - 1,
                         " (num_hidden_layers ", config->numHiddenLayers,
                         " in its config.json)");
  int64_t layers = checkpointLayers(store);
  if (layers > 0 && o.layer >= layers)
    throwInvalidArgument("--layer ", o.layer, ": ", o.weights,
                         " has layers 0..", layers - 1,
                         " (from its tensor names)");
}

struct Weights {
  std::vector<uint16_t> norm, qkv, bias;
  std::string origin;
};

Weights loadWeights(const Options &o, const Model &model,
                    const FrontHalfSignature &sig,
                    const std::optional<ModelConfig> &config) {
  Weights w;
  const int64_t H = sig.hidden, R = sig.dims.qkvRows();
  if (o.weights.empty()) {
    Random rng(o.seed ^ 0x57E16475ull);
    w.norm = rng.tensor(sig.dtype, H, 0.5, 1.5);
    double a = std::sqrt(3.0 / static_cast<double>(H));
    w.qkv = rng.tensor(sig.dtype, R * H, -a, a);
    if (sig.qkvBias >= 0)
      w.bias = rng.tensor(sig.dtype, R, -0.5, 0.5);
    w.origin = "random (seed " + std::to_string(o.seed) + ")";
    return w;
  }
  TensorStore store = TensorStore::open(o.weights);
  checkLayer(o, store, config);
  std::string layerQ = hfLayerNames(o.layer).qWeight;
  bool hf =
      store.find(layerQ) ||
      store.find(hfLayerNames(o.layer, "layers.").qWeight) ||
      store.find(hfLayerNames(o.layer, "model.language_model.layers.").qWeight);
  if (hf) {
    ModelConfig c = config ? *config : configFromSignature(sig);
    FrontHalfWeights f = loadFrontHalfWeights(store, c, o.layer, sig.dtype);
    if (f.hidden != H || f.dims.qkvRows() != R)
      throwFormat(o.weights, ": layer ", o.layer, " has hidden ", f.hidden,
                  " and ", f.dims.qkvRows(),
                  " qkv rows; the compiled model "
                  "has ",
                  H, " and ", R);
    w.norm = std::move(f.normWeight);
    w.qkv = std::move(f.qkvWeight);
    w.bias = std::move(f.qkvBias);
    if (sig.qkvBias >= 0 && w.bias.empty())
      throwFormat(o.weights, ": the compiled model has a qkv bias but the "
                             "checkpoint config has attention_bias false");
    if (sig.qkvBias < 0 && !w.bias.empty())
      throwFormat(o.weights, ": the checkpoint has q/k/v biases but the "
                             "compiled model takes none");
    w.origin = o.weights + " layer " + std::to_string(o.layer) +
               " (Hugging Face names, packed cat(q, k, v))";
    return w;
  }
  auto names = [&](const char *packed, int arg) {
    std::vector<std::string> n = {packed};
    if (arg >= 0)
      n.push_back(model.arguments()[arg].name);
    return n;
  };
  auto norm =
      readPacked(store, names("norm_weight", sig.normWeight), {H}, sig.dtype);
  auto qkv =
      readPacked(store, names("qkv_weight", sig.qkvWeight), {R, H}, sig.dtype);
  if (!norm || !qkv)
    throwFormat(o.weights, ": neither ", layerQ, " (Hugging Face names) nor ",
                "norm_weight / qkv_weight (packed names) found");
  w.norm = std::move(*norm);
  w.qkv = std::move(*qkv);
  if (sig.qkvBias >= 0) {
    auto bias =
        readPacked(store, names("qkv_bias", sig.qkvBias), {R}, sig.dtype);
    if (!bias)
      throwFormat(o.weights, ": the compiled model has a qkv bias but the "
                             "file has no qkv_bias");
    w.bias = std::move(*bias);
  }
  w.origin = o.weights + " (packed names)";
  return w;
}

std::string describeReference(const ref::FrontHalfConfig &c) {
  std::ostringstream os;
  os << (c.norm == ref::NormKind::RMSNorm ? "rmsnorm" : "layernorm") << " eps "
     << c.normOptions.eps << (c.normOptions.unit_offset ? " (1 + w)" : "")
     << ", rope "
     << (c.rope.pairing == ref::RopePairing::NeoX ? "neox" : "gptj")
     << " theta " << c.rope.theta;
  if (c.rope.rotaryDim)
    os << " rotary_dim " << c.rope.rotaryDim;
  if (c.rope.llama3)
    os << " llama3 x" << c.rope.llama3->factor;
  if (c.attention.scale)
    os << ", scale " << *c.attention.scale;
  return os.str();
}

//===----------------------------------------------------------------------===//
// The CPU reference, rows in parallel
//===----------------------------------------------------------------------===//

/// The host copies of a step's int32 inputs in `v`.
StepInputs stepInputs(const BatchView &v) {
  return {v.positions.data(), v.seq_lens.data(), v.block_table.data()};
}

struct HostStep {
  std::vector<uint16_t> x, residual;
  BatchView view;
};

struct RefOutputs {
  std::vector<uint16_t> out, residualOut, k, v;
  /// The intermediates: normed, q and k before and after RoPE.
  std::vector<uint16_t> normed, qProj, kProj, qRot;

  /// The intermediate called `name` in the goldens (docs/goldens.md).
  const std::vector<uint16_t> &byGoldenName(const std::string &name) const {
    if (name == "normed")
      return normed;
    if (name == "q")
      return qProj;
    if (name == "k")
      return kProj;
    if (name == "q_rot")
      return qRot;
    if (name == "k_rot")
      return k;
    if (name == "v")
      return v;
    return out;
  }
};

RefOutputs runReference(const ref::FrontHalfConfig &cfg, const Weights &w,
                        const HostStep &s, const ref::PagedKVCache &cache,
                        bool hasResidual, ref::Precision precision) {
  const int64_t B = s.view.batch, H = cfg.hidden;
  const int64_t Hq = cfg.dims.numQHeads, Hkv = cfg.dims.numKVHeads,
                D = cfg.dims.headDim;
  RefOutputs r;
  r.out.resize(B * Hq * D);
  r.residualOut.resize(B * H);
  r.k.resize(B * Hkv * D);
  r.v.resize(B * Hkv * D);
  r.normed.resize(B * H);
  r.qProj.resize(B * Hq * D);
  r.qRot.resize(B * Hq * D);
  r.kProj.resize(B * Hkv * D);
  // Rows are independent (distinct cache pages): split them over threads.
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<int64_t>(threads, B));
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (int64_t b = t; b < B; b += threads) {
          ref::FrontHalfInputs in;
          in.x = s.x.data() + b * H;
          in.residual = hasResidual ? s.residual.data() + b * H : nullptr;
          in.normWeight = w.norm.data();
          in.qkvWeight = w.qkv.data();
          in.qkvBias = w.bias.empty() ? nullptr : w.bias.data();
          in.positions = s.view.positions.data() + b;
          in.seqLens = s.view.seq_lens.data() + b;
          in.blockTable = {s.view.block_table.data() + b * s.view.max_pages,
                           s.view.max_pages};
          ref::FrontHalfOutputs out;
          out.attnOut = r.out.data() + b * Hq * D;
          out.residualOut =
              hasResidual ? r.residualOut.data() + b * H : nullptr;
          out.k = r.k.data() + b * Hkv * D;
          out.v = r.v.data() + b * Hkv * D;
          out.normed = r.normed.data() + b * H;
          out.q = r.qRot.data() + b * Hq * D;
          out.qProj = r.qProj.data() + b * Hq * D;
          out.kProj = r.kProj.data() + b * Hkv * D;
          ref::decodeLayerFrontHalf(cfg, 1, in, cache, out, precision);
        }
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (std::thread &t : pool)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
  return r;
}

//===----------------------------------------------------------------------===//
// Intermediates and the golden check (--inputs)
//===----------------------------------------------------------------------===//

/// A kernel output holding an intermediate of the front half.
struct Intermediate {
  /// What it holds, by its golden name: "normed", "q", "k", "v" (qkv_proj
  /// outputs) or "q_rot", "k_rot" (outputs of a kernel that applies RoPE).
  std::string name;
  /// "kernel 2 output query".
  std::string source;
  int buffer = 0; ///< Model::internalBuffers() index
  int64_t rowElems = 0;
  std::vector<uint16_t> values;
};

/// The intermediates the compiled function materialises: every kernel output
/// with role normed / query / key / value (a fused kernel yields only what a
/// later kernel reads, e.g. the rotated query; strategy none yields all).
std::vector<Intermediate> findIntermediates(const Model &model,
                                            const FrontHalfSignature &sig) {
  std::vector<Intermediate> out;
  for (size_t i = 0; i < model.internalBuffers().size(); ++i) {
    const InternalBuffer &b = model.internalBuffers()[i];
    if (b.kind != ParamKind::Output)
      continue;
    bool rope = false, proj = false;
    for (const ManifestKernel *k : model.kernels())
      if (k->index == b.kernel)
        for (const ManifestOp &op : k->ops) {
          rope |= op.name == "rope";
          proj |= op.name == "qkv_proj";
        }
    Intermediate m;
    m.buffer = static_cast<int>(i);
    m.source = "kernel " + std::to_string(b.kernel) + " output " + b.role;
    const int64_t q = sig.dims.numQHeads * sig.dims.headDim,
                  kv = sig.dims.numKVHeads * sig.dims.headDim;
    if (b.role == "normed") {
      m.name = "normed";
      m.rowElems = sig.hidden;
    } else if (b.role == "query" && (rope || proj)) {
      m.name = rope ? "q_rot" : "q";
      m.rowElems = q;
    } else if (b.role == "key" && (rope || proj)) {
      m.name = rope ? "k_rot" : "k";
      m.rowElems = kv;
    } else if (b.role == "value" && proj) {
      m.name = "v";
      m.rowElems = kv;
    } else {
      continue;
    }
    out.push_back(std::move(m));
  }
  return out;
}

/// The worst per-sequence error of `out` against `ref` (`rows` sequences).
ErrorStats worstSequence(const std::vector<double> &out,
                         const std::vector<double> &ref, int64_t rows) {
  ErrorStats w;
  for (const ErrorStats &e :
       compareRows(out.data(), ref.data(), rows,
                   static_cast<int64_t>(out.size()) / rows))
    w = w.worst(e);
  return w;
}

/// One output of the step checked against a golden tensor.
struct GoldenRow {
  std::string tensor; ///< the golden's name for it
  std::string source; ///< where the run read it
  const std::vector<uint16_t> *out, *ref64, *ref32;
  /// The golden tensor (transformers), and the float64 one if any.
  const std::vector<uint16_t> *golden;
  const std::vector<double> *golden64 = nullptr;
};

/// Prints the golden table; returns whether every row is within `tol`
/// against float64 (the CPU fp64 reference, and attn_output_f64).
bool checkGolden(const GoldenDecodeStep &g, const std::vector<GoldenRow> &rows,
                 double tol) {
  const int64_t B = g.batch;
  auto cell = [](const ErrorStats &e) {
    return sci(e.rel) + " (" + sci(e.maxAbs) + ")";
  };
  std::printf("golden check, %s: relative L2 error of the worst sequence "
              "(max |d|); bound %s against float64 (the CPU fp64 reference, "
              "and attn_output_f64)\n",
              g.path.c_str(), sci(tol).c_str());
  std::printf("  %-13s %-27s %-22s %-22s %-22s %-22s\n", "tensor", "source",
              "vs transformers", "vs golden float64", "vs CPU fp64",
              "vs CPU fp32");
  bool pass = true;
  for (const GoldenRow &r : rows) {
    const int64_t n = static_cast<int64_t>(r.out->size());
    std::vector<double> out = toDoubles(g.dtype, r.out->data(), n);
    ErrorStats hf =
        worstSequence(out, toDoubles(g.dtype, r.golden->data(), n), B);
    ErrorStats r64 =
        worstSequence(out, toDoubles(g.dtype, r.ref64->data(), n), B);
    ErrorStats r32 =
        worstSequence(out, toDoubles(g.dtype, r.ref32->data(), n), B);
    std::string f64 = "-";
    bool ok = hf.nonFinite == 0 && r64.rel < tol;
    if (r.golden64) {
      ErrorStats e = worstSequence(out, *r.golden64, B);
      f64 = cell(e);
      ok &= e.rel < tol;
    }
    pass &= ok;
    std::printf(
        "  %-13s %-27s %-22s %-22s %-22s %-22s%s  %s\n", r.tensor.c_str(),
        r.source.c_str(), cell(hf).c_str(), f64.c_str(), cell(r64).c_str(),
        cell(r32).c_str(),
        hf.nonFinite
            ? (" | " + std::to_string(hf.nonFinite) + " NaN/inf").c_str()
            : "",
        ok ? "ok" : "MISMATCH");
    if (r.golden64) {
      std::vector<ErrorStats> seq =
          compareRows(out.data(), r.golden64->data(), B, n / B);
      std::vector<double> hfOut = toDoubles(g.dtype, r.golden->data(), n);
      std::vector<ErrorStats> hfSeq =
          compareRows(hfOut.data(), r.golden64->data(), B, n / B);
      std::printf("    %s vs float64 per sequence:", r.tensor.c_str());
      for (const ErrorStats &e : seq)
        std::printf(" %s", sci(e.rel).c_str());
      std::printf(" (transformers' own:");
      for (const ErrorStats &e : hfSeq)
        std::printf(" %s", sci(e.rel).c_str());
      std::printf(")\n");
    }
  }
  std::fflush(stdout);
  return pass;
}

//===----------------------------------------------------------------------===//
// Timing
//===----------------------------------------------------------------------===//

/// Microseconds per layer-step over the timed replays.
struct Timing {
  double medianUs = 0, minUs = 0;
};

/// Times `o.iters` replays of the step of `shape`, whose inputs are in
/// `args` (copy 0, bound to `step`; `inputs` are the host copies of its
/// positions, lengths and block table), after `o.warmup` untimed ones. A replay
/// runs the step once on each of `o.layers` copies of every argument, in
/// order: copy 0 is `args`, the others are cloned from it on the device,
/// so that, as in a model whose layers each stream their own weights and
/// caches, no copy is still in the L2 cache when its turn comes again. With
/// --graph one CUDA graph holds the whole replay. Replays are enqueued back
/// to back with an event between each two, so no idle gap is timed. The
/// step is idempotent (it rewrites the same cache slots). Copy 0 is bound
/// again on return.
Timing timeLayerSteps(const Options &o, DecodeStep &step,
                      const std::map<int, cuda::DeviceBuffer> &args,
                      const StepShape &shape, const StepInputs &inputs) {
  const CUstream stream = step.stream();
  std::vector<std::map<int, cuda::DeviceBuffer>> copies(
      static_cast<size_t>(o.layers - 1));
  for (size_t c = 0; c < copies.size(); ++c)
    for (const auto &[i, buf] : args)
      copies[c]
          .emplace(i, cuda::DeviceBuffer(buf.bytes(),
                                         buf.label() + " (layer copy " +
                                             std::to_string(c + 1) + ")"))
          .first->second.copyFrom(buf, stream);
  auto bindCopy = [&](size_t c) {
    for (const auto &[i, buf] : c ? copies[c - 1] : args)
      step.bind(i, buf);
  };
  auto layerSteps = [&](CUstream s) {
    for (size_t c = 0; c <= copies.size(); ++c) {
      if (!copies.empty())
        bindCopy(c);
      step.run(shape, inputs, s);
    }
    if (!copies.empty())
      bindCopy(0);
  };
  const std::string what = std::to_string(o.layers) + " layer-step(s) of \"" +
                           step.model().function().name + "\"";
  cuda::GraphExec graph;
  if (o.graph)
    graph = cuda::GraphExec::capture(stream, what, layerSteps);
  auto replay = [&] {
    if (graph)
      graph.launch(stream, what);
    else
      layerSteps(stream);
  };
  for (int64_t i = 0; i < o.warmup; ++i)
    replay();
  step.synchronize();
  std::vector<cuda::Event> marks;
  for (int64_t i = 0; i <= o.iters; ++i)
    marks.push_back(cuda::Event::create());
  marks[0].record(stream);
  for (int64_t i = 0; i < o.iters; ++i) {
    replay();
    marks[i + 1].record(stream);
  }
  step.synchronize();
  std::vector<double> us;
  for (int64_t i = 0; i < o.iters; ++i)
    us.push_back(1000.0 * cuda::Event::elapsedMs(marks[i], marks[i + 1]) /
                 static_cast<double>(o.layers));
  std::sort(us.begin(), us.end());
  return Timing{us[us.size() / 2], us.front()};
}

//===----------------------------------------------------------------------===//
// Capacity (checked before anything large is allocated)
//===----------------------------------------------------------------------===//

/// a * b, or a CapacityError saying `what` overflows 64-bit sizes.
uint64_t checkedMul(uint64_t a, uint64_t b, const std::string &what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throwCapacity(what, ": the byte count overflows 64 bits");
  return r;
}

/// The page pool of a run with random histories: pages for each
/// sequence's history plus its --steps tokens, plus one per sequence, or
/// --num-pages. Throws CapacityError (naming the options) for a sequence
/// longer than int32 positions allow, more pages than int32 page ids
/// allow, or a --num-pages below what the run needs.
int64_t poolPages(const Options &o, int64_t P, int64_t &maxPages,
                  int64_t &maxLen) {
  // KVCacheManager: a sequence holds at most INT32_MAX / P pages.
  const int64_t maxTokens = std::numeric_limits<int32_t>::max() / P * P;
  int64_t needed = 0;
  maxPages = 1;
  maxLen = 0;
  for (size_t b = 0; b < o.kvLens.size(); ++b) {
    const int64_t len = o.kvLens[b] + o.steps;
    if (len > maxTokens)
      throwCapacity("sequence ", b, ": a history of ", o.kvLens[b],
                    " tokens (--kv-len/--kv-lens) plus --steps ", o.steps,
                    " = ", len, " tokens exceeds the ", maxTokens,
                    " a sequence can hold (positions are int32; pages of ", P,
                    " tokens)");
    const int64_t pages = KVCacheManager::pagesForTokens(len, P);
    maxPages = std::max(maxPages, pages);
    maxLen = std::max(maxLen, len);
    needed += pages;
  }
  needed += static_cast<int64_t>(o.kvLens.size());
  if (o.numPages && o.numPages < needed)
    throwCapacity("--num-pages ", o.numPages, " holds fewer pages than the ",
                  needed, " of ", P,
                  " tokens the run needs (the histories plus --steps, plus "
                  "one per sequence)");
  if (!o.numPages && needed > std::numeric_limits<int32_t>::max())
    throwCapacity("the run needs ", needed, " pages of ", P,
                  " tokens for --batch ", o.kvLens.size(),
                  " histories of --kv-len(s) plus --steps; page ids "
                  "are int32 (at most 2147483647 pages)");
  return o.numPages ? o.numPages : needed;
}

/// Throws CapacityError unless the host can hold the run's caches: the K and
/// V caches of `numPages` pages, each held twice (the fp64 and the fp32
/// references evolve separately). `cause` names the options that set
/// numPages.
void checkHostCaches(int64_t numPages, const FrontHalfSignature &sig,
                     const std::string &cause) {
  const uint64_t pageBytes = static_cast<uint64_t>(
      kvPageBytes(sig.pageSize, sig.dims.numKVHeads, sig.dims.headDim, 2));
  const uint64_t bytes =
      checkedMul(2 * pageBytes, static_cast<uint64_t>(numPages), cause);
  const uint64_t memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  if (bytes / 2 > memory / 2) // bytes > memory, without overflow
    throwCapacity(cause, ": ", numPages, " pages of K and V cache (", pageBytes,
                  " bytes per page) held twice on the host for the "
                  "fp64 and fp32 references take ",
                  bytes, " bytes, more than this machine's ", memory,
                  " bytes of memory");
}

/// Throws CapacityError unless the device has room for the run: every
/// argument at capacity, once per --layers copy, plus the runtime's own
/// buffers.
void checkDeviceMemory(const Options &o, const LaunchPlan &plan,
                       const cuda::Context &ctx) {
  const std::string what = "the device memory of the run";
  uint64_t args = 0, internal = 0;
  for (const ManifestArgument &a : plan.model().arguments())
    args += static_cast<uint64_t>(plan.argumentBytes(a.index));
  for (size_t i = 0; i < plan.model().internalBuffers().size(); ++i)
    internal += static_cast<uint64_t>(plan.internalBytes(static_cast<int>(i)));
  const uint64_t bytes =
      checkedMul(args, static_cast<uint64_t>(o.layers), what) + internal;
  const uint64_t free = ctx.freeMemory();
  if (bytes > free)
    throwCapacity("the run needs ", bytes, " bytes of device memory (", args,
                  " bytes of arguments at capacity, the KV caches "
                  "included, times --layers ",
                  o.layers, ", plus ", internal,
                  " bytes of runtime buffers); device ", o.device, " has ",
                  free,
                  " bytes free (lower --kv-len(s), --batch, --num-pages "
                  "or --layers)");
}

//===----------------------------------------------------------------------===//
// Main
//===----------------------------------------------------------------------===//

/// The launch plan of `model` at `cap` (--inspect).
void printPlan(const Model &model, const Capacity &cap, int64_t numSplits) {
  LaunchPlan plan(model, cap);
  Symbols s = cap.symbols(numSplits);
  auto printLaunch = [&](const LaunchGeometry &l) {
    auto g = l.gridFor(s);
    std::cout << "grid [" << g[0] << ", " << g[1] << ", " << g[2] << "] = ["
              << l.grid[0].str() << ", " << l.grid[1].str() << ", "
              << l.grid[2].str() << "], block [" << l.block[0] << ", "
              << l.block[1] << ", " << l.block[2] << "]";
    if (l.dynamicSharedBytes > 0)
      std::cout << ", " << l.dynamicSharedBytes
                << " bytes dynamic shared memory";
  };
  std::cout << "  kernels (launch order; grids at batch " << s.batch << "):\n";
  for (const ManifestKernel *k : model.kernels()) {
    std::cout << "    " << k->label() << ": ";
    printLaunch(*k);
    std::cout << ", " << k->params.size() << " params";
    if (!k->ops.empty()) {
      std::cout << ", ops";
      for (const ManifestOp &op : k->ops)
        std::cout << " " << op.name;
    }
    std::cout << "\n";
    // Batch variants; a step of batch >= min_batch launches one instead.
    for (size_t v = 0; v < k->variants.size(); ++v) {
      std::cout << "      variant for batch >= " << k->variants[v].minBatch
                << ": " << k->variants[v].entry << ", ";
      printLaunch(k->variants[v]);
      if (k->variantFor(s.batch) == static_cast<int>(v))
        std::cout << " (launched at batch " << s.batch << ")";
      std::cout << "\n";
    }
  }
  std::cout << "  arguments (bytes at capacity):\n";
  for (const ManifestArgument &a : model.arguments())
    std::cout << "    " << a.name << " " << elemTypeName(a.dtype)
              << shapeString(a.shape) << " role " << model.argumentRole(a.index)
              << ": " << plan.argumentBytes(a.index) << "\n";
  std::cout << "  runtime buffers (bytes at capacity):\n";
  for (size_t i = 0; i < model.internalBuffers().size(); ++i) {
    const InternalBuffer &b = model.internalBuffers()[i];
    std::cout << "    " << b.label << " " << elemTypeName(b.dtype)
              << shapeString(b.shape) << (b.zeroInit ? " zero-init" : "")
              << ": " << plan.internalBytes(static_cast<int>(i)) << "\n";
  }
  std::cout << "inspect: the PTX matches the manifest\n";
}

int run(const Options &o) {
  // --- Model, PTX, signature -------------------------------------------------
  Model model = Model::load(o.manifest, o.function);
  std::string ptx = readFile(o.ptx, "PTX");
  checkPtxAgainstManifest(ptx, o.ptx, model.manifest());
  std::optional<FrontHalfSignature> maybeSig;
  try {
    maybeSig = FrontHalfSignature::fromModel(model);
  } catch (const Error &e) {
    if (!o.inspect)
      throw;
    // --inspect shows the plan of any function.
    std::cout << "fusion-run: " << o.ptx << " + " << o.manifest << ", function "
              << model.function().name << " (" << model.kernels().size()
              << " kernels): not a single decode "
              << "layer front half (" << e.what() << ")\n";
    int64_t P = 16;
    int kc = model.argumentWithRole("key_cache");
    if (kc >= 0 && model.arguments()[kc].shape.size() > 1 &&
        !model.arguments()[kc].shape[1].isSymbol())
      P = model.arguments()[kc].shape[1].value;
    int64_t maxPages = 1, maxLen = 0;
    int64_t numPages = poolPages(o, P, maxPages, maxLen);
    int64_t numSplits =
        o.numSplits ? o.numSplits : model.defaultNumSplits(o.batch, maxLen);
    printPlan(model, Capacity{o.batch, maxPages, numPages}, numSplits);
    return 0;
  }
  const FrontHalfSignature &sig = *maybeSig;
  std::optional<GoldenDecodeStep> golden;
  if (!o.inputs.empty())
    golden = GoldenDecodeStep::load(o.inputs);
  const int64_t B = golden ? golden->batch : o.batch, P = sig.pageSize;
  const int64_t Hq = sig.dims.numQHeads, Hkv = sig.dims.numKVHeads,
                D = sig.dims.headDim, H = sig.hidden;

  // --- Reference configuration ----------------------------------------------
  std::optional<ModelConfig> config;
  std::string configPath = o.config;
  if (configPath.empty() && !o.weights.empty() &&
      std::filesystem::is_directory(o.weights))
    configPath = (std::filesystem::path(o.weights) / "config.json").string();
  if (!configPath.empty())
    config = ModelConfig::load(configPath);
  if (config)
    for (const std::string &w : config->warnings)
      std::cout << "warning: " << configPath << ": " << w << "\n";
  ref::FrontHalfConfig reference;
  std::string referenceOrigin;
  if (sig.reference) {
    reference = *sig.reference;
    referenceOrigin = "the manifest's op attributes";
    if (config) {
      std::vector<std::string> diffs =
          configMismatches(reference, config->frontHalf(sig.dtype));
      if (!diffs.empty()) {
        std::string all;
        for (const std::string &d : diffs)
          all += "\n  " + d;
        throw InvalidArgumentError("the compiled kernels do not match " +
                                   configPath + ":" + all);
      }
      referenceOrigin += " (matches " + configPath + ")";
    }
  } else if (config) {
    reference = config->frontHalf(sig.dtype);
    if (sig.normBias >= 0)
      reference.norm = ref::NormKind::LayerNorm;
    if (config->hiddenSize != H || config->numAttentionHeads != Hq ||
        config->numKeyValueHeads != Hkv || config->headDim != D)
      throw InvalidArgumentError(
          configPath + " describes hidden " +
          std::to_string(config->hiddenSize) + ", heads " +
          std::to_string(config->numAttentionHeads) + "/" +
          std::to_string(config->numKeyValueHeads) + ", head_dim " +
          std::to_string(config->headDim) + "; the compiled model has " +
          std::to_string(H) + ", " + std::to_string(Hq) + "/" +
          std::to_string(Hkv) + ", " + std::to_string(D));
    referenceOrigin = configPath;
  } else {
    throw InvalidArgumentError(
        o.manifest +
        " lists no op attributes (an older fusion-compile); "
        "pass --config config.json (or --weights DIR with one) so the "
        "reference knows eps, rope_theta and rope_scaling");
  }
  reference.dtype = sig.dtype;
  reference.hidden = H;
  reference.dims = sig.dims;
  const double tol =
      o.tol > 0 ? o.tol : (sig.dtype == DType::F16 ? 2e-3 : 1e-2);
  if (golden && (golden->dtype != sig.dtype || golden->hidden != H ||
                 golden->dims.numQHeads != Hq ||
                 golden->dims.numKVHeads != Hkv || golden->dims.headDim != D))
    throw InvalidArgumentError(
        o.inputs + " is " + std::string(dtypeName(golden->dtype)) +
        ", hidden " + std::to_string(golden->hidden) + ", heads " +
        std::to_string(golden->dims.numQHeads) + "/" +
        std::to_string(golden->dims.numKVHeads) + ", head_dim " +
        std::to_string(golden->dims.headDim) + "; the compiled model is " +
        std::string(dtypeName(sig.dtype)) + ", " + std::to_string(H) + ", " +
        std::to_string(Hq) + "/" + std::to_string(Hkv) + ", " +
        std::to_string(D));

  // --- Cache geometry -------------------------------------------------------
  // Random histories: pages for history + steps, plus one per sequence.
  // A golden: its history laid out for a function that appends at the RoPE
  // position (GoldenCacheLayout; sequence 3 of the goldens).
  std::optional<GoldenCacheLayout> layout;
  int64_t maxPages = 1, numPages = 0, maxLen = 0;
  if (golden) {
    if (o.numPages)
      checkHostCaches(o.numPages, sig,
                      "--num-pages " + std::to_string(o.numPages));
    layout = layoutGoldenCache(*golden, P, o.numPages);
    maxPages = layout->maxPages;
    numPages = layout->numPages;
    maxLen = *std::max_element(layout->seqLens.begin(), layout->seqLens.end());
  } else {
    numPages = poolPages(o, P, maxPages, maxLen);
    checkHostCaches(
        numPages, sig,
        o.numPages ? "--num-pages " + std::to_string(o.numPages)
                   : "--batch " + std::to_string(B) +
                         " histories of --kv-len/--kv-lens (longest " +
                         std::to_string(maxLen - o.steps) +
                         " tokens) plus --steps " + std::to_string(o.steps));
  }
  int64_t numSplits =
      o.numSplits ? o.numSplits : model.defaultNumSplits(B, maxLen);

  std::cout << "fusion-run: " << o.ptx << " + " << o.manifest << ", function "
            << model.function().name << " (" << model.kernels().size()
            << " kernels";
  if (!model.manifest().strategy.empty())
    std::cout << ", strategy " << model.manifest().strategy;
  std::cout << ")\n";
  std::cout << "  model: " << dtypeName(sig.dtype) << ", hidden " << H
            << ", heads " << Hq << "/" << Hkv << ", head_dim " << D << ", page "
            << P << (sig.qkvBias >= 0 ? ", qkv bias" : "")
            << (sig.residual >= 0 ? ", residual" : "") << "\n";
  std::cout << "  reference: " << describeReference(reference) << " (from "
            << referenceOrigin << "), tolerance " << sci(tol)
            << " relative L2 vs fp64\n";
  std::cout << "  run: batch " << B << ", history";
  auto list = [](const std::vector<int32_t> &v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i)
      out += (i ? "," : "") + std::to_string(v[i]);
    return out;
  };
  bool mixed = std::adjacent_find(o.kvLens.begin(), o.kvLens.end(),
                                  std::not_equal_to<>()) != o.kvLens.end();
  if (golden) {
    std::cout << " lengths " << list(golden->historyLens) << " and positions "
              << list(golden->positions) << " from " << o.inputs;
  } else if (mixed) {
    std::cout << " lengths";
    for (size_t i = 0; i < o.kvLens.size(); ++i)
      std::cout << (i ? "," : " ") << o.kvLens[i];
  } else {
    std::cout << " length " << o.kvLens[0];
  }
  std::cout << ", " << o.steps << " step(s), " << numPages << " pages of " << P
            << " tokens, block-table width " << maxPages;
  if (model.usesNumSplits())
    std::cout << ", num_splits " << numSplits << " (max " << model.maxSplits()
              << ")";
  std::cout << (o.graph ? ", CUDA graph" : ", direct launches");
  if (o.layers > 1 && !o.dryRun)
    std::cout << ", timed over " << o.layers << " layer copies";
  std::cout << "\n";
  if (layout)
    for (const std::string &note : layout->notes)
      std::cout << "    " << note << "\n";

  // The step shape against the model, before any work (fake addresses; the
  // GPU path checks again with real ones). The probe also checks each
  // step's inputs in a dry run.
  LaunchPlan probe(model, Capacity{B, maxPages, numPages});
  for (const ManifestArgument &a : model.arguments())
    probe.bindArgument(a.index, 0x1000,
                       static_cast<uint64_t>(probe.argumentBytes(a.index)));
  for (size_t i = 0; i < model.internalBuffers().size(); ++i)
    probe.setInternal(static_cast<int>(i), 0x1000);
  probe.validate(StepShape{B, maxPages, numSplits});

  if (o.inspect) {
    printPlan(model, Capacity{B, maxPages, numPages}, numSplits);
    return 0;
  }

  // --- The device (skip early when there is none) ----------------------------
  const bool gpu = !o.dryRun;
  std::optional<cuda::Context> ctx;
  if (gpu) {
    ctx.emplace(cuda::Context::open(o.device));
    auto cc = ctx->computeCapability();
    std::cout << "  device " << o.device << ": " << ctx->name() << " (sm_"
              << cc.first << cc.second << ", " << ctx->multiprocessorCount()
              << " SMs), driver " << cuda::Context::driverVersion() << "\n";
    checkDeviceMemory(o, probe, *ctx);
  } else {
    std::cout << "  dry run: no GPU; the fp32 reference stands in for the "
                 "kernels' outputs\n";
  }

  // --- Host data -------------------------------------------------------------
  Weights weights = loadWeights(o, model, sig, config);
  std::cout << "  weights: " << weights.origin << "\n";
  Random rng(o.seed);
  KVCacheManager kv(numPages, P);
  std::vector<SeqId> ids;
  const int64_t cacheElems = numPages * P * Hkv * D;
  std::vector<uint16_t> kHost, vHost;
  if (layout) {
    kHost = std::move(layout->keyCache);
    vHost = std::move(layout->valueCache);
    std::cout << "  inputs: hidden_states, positions, seq_lens and the K/V "
                 "history of "
              << o.inputs;
    if (sig.residual >= 0)
      std::cout << "; residual = zeros (the golden is of layer 0, whose "
                   "norm reads x: x + 0 = x exactly)";
    std::cout << "\n";
  } else {
    for (int64_t b = 0; b < B; ++b) {
      ids.push_back(b);
      kv.addSequence(b);
    }
    // The history, a page at a time round-robin, so that every sequence's
    // pages are scattered over the pool.
    for (int64_t done = 0;; done += P) {
      bool any = false;
      for (int64_t b = 0; b < B; ++b) {
        int64_t n = std::min<int64_t>(P, o.kvLens[b] - done);
        if (n > 0) {
          kv.appendTokens(b, n);
          any = true;
        }
      }
      if (!any)
        break;
    }
    // Random K/V for the history, NaN everywhere else (must never be read).
    kHost.assign(cacheElems, nanBits(sig.dtype));
    vHost.assign(cacheElems, nanBits(sig.dtype));
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<int32_t> &pages = kv.pages(b);
      for (int64_t t = 0; t < o.kvLens[b]; ++t) {
        int64_t off = kvCacheOffset(pages[t / P], t % P, 0, P, Hkv, D);
        for (int64_t e = 0; e < Hkv * D; ++e) {
          kHost[off + e] = fromDouble(sig.dtype, rng.uniform(-1, 1));
          vHost[off + e] = fromDouble(sig.dtype, rng.uniform(-1, 1));
        }
      }
    }
  }

  // --- Device buffers --------------------------------------------------------
  DecodeStep::Options stepOptions;
  // runGraph ignores it, and the timing graph is captured from run().
  stepOptions.syncEachKernel = o.syncEach && !o.graph;
  Capacity capacity{B, maxPages, numPages};
  std::optional<DecodeStep> step;
  std::map<int, cuda::DeviceBuffer> args;
  if (gpu) {
    step.emplace(*ctx, model, ptx, o.ptx, capacity, stepOptions);
    for (const ManifestArgument &a : model.arguments())
      args.emplace(a.index,
                   cuda::DeviceBuffer(static_cast<uint64_t>(
                                          step->plan().argumentBytes(a.index)),
                                      "argument \"" + a.name + "\""));
    for (auto &[i, buf] : args)
      step->bind(i, buf);
    args.at(sig.normWeight)
        .upload(weights.norm.data(), weights.norm.size() * 2);
    args.at(sig.qkvWeight).upload(weights.qkv.data(), weights.qkv.size() * 2);
    if (sig.qkvBias >= 0)
      args.at(sig.qkvBias).upload(weights.bias.data(), weights.bias.size() * 2);
    args.at(sig.keyCache).upload(kHost.data(), kHost.size() * 2);
    args.at(sig.valueCache).upload(vHost.data(), vHost.size() * 2);
  }

  // The reference caches (fp32 and fp64 evolve separately).
  std::vector<uint16_t> k32 = kHost, v32 = vHost;
  std::vector<uint16_t> &k64 = kHost, &v64 = vHost;
  ref::PagedKVCache cache32{k32.data(), v32.data(), numPages, P, Hkv, D};
  ref::PagedKVCache cache64{k64.data(), v64.data(), numPages, P, Hkv, D};

  // --- Steps -----------------------------------------------------------------
  bool pass = true;
  // The worst relative L2 error vs fp64 of each output over the steps.
  nlohmann::ordered_json worstRel = nlohmann::ordered_json::object();
  HostStep last;
  RefOutputs lastRef64, lastRef32;
  std::vector<uint16_t> out(B * Hq * D), residualOut(B * H);
  std::vector<uint16_t> kNew(B * Hkv * D), vNew(B * Hkv * D);
  StepShape shape{B, maxPages, numSplits};
  const bool hasResidual = sig.residual >= 0;
  // With a golden, the intermediates the kernels write are checked too.
  std::vector<Intermediate> intermediates;
  if (golden)
    intermediates = findIntermediates(model, sig);
  for (int64_t s = 0; s < o.steps; ++s) {
    HostStep hs;
    if (golden) {
      hs.view = BatchView{B, maxPages, layout->blockTable, layout->positions,
                          layout->seqLens};
      hs.x = golden->hiddenStates;
      if (hasResidual)
        hs.residual.assign(static_cast<size_t>(B * H), 0);
    } else {
      hs.view = kv.appendBatch(ids, 1, maxPages);
      hs.x = rng.tensor(sig.dtype, B * H, -2, 2);
      if (hasResidual)
        hs.residual = rng.tensor(sig.dtype, B * H, -2, 2);
    }
    // The kernels trust positions, lengths and block tables: check them
    // before anything runs (DecodeStep checks again before it launches).
    const StepInputs inputs = stepInputs(hs.view);
    probe.checkStepInputs(shape, inputs);
    if (gpu) {
      // Ordered on the step's stream (the host data outlives the step).
      CUstream st = step->stream();
      args.at(sig.x).uploadAsync(hs.x.data(), hs.x.size() * 2, st);
      if (hasResidual)
        args.at(sig.residual)
            .uploadAsync(hs.residual.data(), hs.residual.size() * 2, st);
      args.at(sig.positions).uploadAsync(hs.view.positions.data(), B * 4, st);
      args.at(sig.seqLens).uploadAsync(hs.view.seq_lens.data(), B * 4, st);
      args.at(sig.blockTable)
          .uploadAsync(hs.view.block_table.data(),
                       hs.view.block_table.size() * 4, st);
      step->poisonOutputs();
      if (o.graph)
        step->runGraph(shape, inputs);
      else
        step->run(shape, inputs);
      step->synchronize();

      step->downloadResult(sig.output, shape, out.data(), out.size() * 2);
      if (sig.residualOut >= 0)
        step->downloadResult(sig.residualOut, shape, residualOut.data(),
                             residualOut.size() * 2);
      for (int64_t b = 0; b < B; ++b) {
        int32_t pos = hs.view.positions[b];
        int32_t page = hs.view.block_table[b * maxPages + pos / P];
        uint64_t off =
            static_cast<uint64_t>(kvCacheOffset(page, pos % P, 0, P, Hkv, D)) *
            2;
        args.at(sig.keyCache)
            .download(kNew.data() + b * Hkv * D, Hkv * D * 2, off);
        args.at(sig.valueCache)
            .download(vNew.data() + b * Hkv * D, Hkv * D * 2, off);
      }
      for (Intermediate &m : intermediates) {
        m.values.resize(static_cast<size_t>(B * m.rowElems));
        step->internal(m.buffer).download(m.values.data(), m.values.size() * 2);
      }
    }

    RefOutputs r64 = runReference(reference, weights, hs, cache64, hasResidual,
                                  ref::Precision::F64);
    RefOutputs r32 = runReference(reference, weights, hs, cache32, hasResidual,
                                  ref::Precision::F32);
    if (!gpu) {
      // The dry run's "kernel outputs", read back from the fp32 cache as
      // the GPU path reads its cache.
      out = r32.out;
      residualOut = r32.residualOut;
      for (int64_t b = 0; b < B; ++b) {
        int32_t pos = hs.view.positions[b];
        int32_t page = hs.view.block_table[b * maxPages + pos / P];
        int64_t off = kvCacheOffset(page, pos % P, 0, P, Hkv, D);
        std::copy_n(k32.begin() + off, Hkv * D, kNew.begin() + b * Hkv * D);
        std::copy_n(v32.begin() + off, Hkv * D, vNew.begin() + b * Hkv * D);
      }
      for (Intermediate &m : intermediates)
        m.values = r32.byGoldenName(m.name);
    }
    struct Row {
      const char *name;
      const std::vector<uint16_t> &gpu, &r64, &r32;
    };
    std::vector<Row> rows = {{"output", out, r64.out, r32.out}};
    if (sig.residualOut >= 0)
      rows.push_back(
          {"residual_out", residualOut, r64.residualOut, r32.residualOut});
    rows.push_back({"k_new", kNew, r64.k, r32.k});
    rows.push_back({"v_new", vNew, r64.v, r32.v});
    auto [lo, hi] =
        std::minmax_element(hs.view.positions.begin(), hs.view.positions.end());
    std::cout << "step " << s << " (position" << (B > 1 ? "s " : " ") << *lo;
    if (*hi != *lo)
      std::cout << ".." << *hi;
    std::cout << "):\n";
    for (const Row &r : rows) {
      const int64_t n = static_cast<int64_t>(r.gpu.size());
      ErrorStats g = compareTensors(sig.dtype, r.gpu.data(), r.r64.data(), n);
      ErrorStats g32 = compareTensors(sig.dtype, r.gpu.data(), r.r32.data(), n);
      ErrorStats base =
          compareTensors(sig.dtype, r.r32.data(), r.r64.data(), n);
      bool ok = g.nonFinite == 0 && g.rel < tol;
      pass &= ok;
      worstRel[r.name] = std::max(worstRel.value(r.name, 0.0), g.rel);
      std::printf(
          "  %-13s vs fp64: max|d| %s rel %s | vs fp32: max|d| %s "
          "rel %s | fp32 ref vs fp64: rel %s%s  %s\n",
          r.name, sci(g.maxAbs).c_str(), sci(g.rel).c_str(),
          sci(g32.maxAbs).c_str(), sci(g32.rel).c_str(), sci(base.rel).c_str(),
          g.nonFinite
              ? (" | " + std::to_string(g.nonFinite) + " NaN/inf").c_str()
              : "",
          ok ? "ok" : "MISMATCH");
    }
    std::fflush(stdout);
    if (golden) {
      std::vector<GoldenRow> goldenRows = {
          {"attn_output", "function result " + std::to_string(sig.output), &out,
           &r64.out, &r32.out, &golden->tensor("attn_output"),
           &golden->attnOutputF64},
          {"k_rot", "K cache rows written", &kNew, &r64.k, &r32.k,
           &golden->tensor("k_rot")},
          {"v", "V cache rows written", &vNew, &r64.v, &r32.v,
           &golden->tensor("v")}};
      for (const Intermediate &m : intermediates)
        goldenRows.push_back(
            {m.name, m.source, &m.values, &r64.byGoldenName(m.name),
             &r32.byGoldenName(m.name), &golden->tensor(m.name)});
      if (sig.residualOut >= 0)
        goldenRows.push_back({"residual_out", "vs hidden_states (x + 0)",
                              &residualOut, &r64.residualOut, &r32.residualOut,
                              &golden->hiddenStates});
      pass &= checkGolden(*golden, goldenRows, tol);
    }
    last = std::move(hs);
    lastRef64 = std::move(r64);
    lastRef32 = std::move(r32);
  }

  // --- Timing ---------------------------------------------------------------
  std::optional<Timing> timing;
  if (gpu && o.iters > 0) {
    timing = timeLayerSteps(o, *step, args, shape, stepInputs(last.view));
    std::printf("timing: %.2f us/step (median of %lld %s of %lld layer "
                "cop%s each, back to back; min %.2f)\n",
                timing->medianUs, static_cast<long long>(o.iters),
                o.graph ? "graph replays" : "direct-launch replays",
                static_cast<long long>(o.layers), o.layers > 1 ? "ies" : "y",
                timing->minUs);
  }

  // --- JSON summary ---------------------------------------------------------
  if (!o.json.empty()) {
    nlohmann::ordered_json j;
    j["ptx"] = o.ptx;
    j["manifest"] = o.manifest;
    j["function"] = model.function().name;
    j["strategy"] = model.manifest().strategy;
    j["kernels"] = model.kernels().size();
    j["dtype"] = dtypeName(sig.dtype);
    j["hidden"] = H;
    j["num_heads"] = Hq;
    j["num_kv_heads"] = Hkv;
    j["head_dim"] = D;
    j["page_size"] = P;
    j["batch"] = B;
    if (golden)
      j["kv_lens"] = golden->historyLens;
    else
      j["kv_lens"] = o.kvLens;
    j["steps"] = o.steps;
    j["num_splits"] = numSplits;
    j["num_pages"] = numPages;
    j["graph"] = o.graph;
    j["layers"] = o.layers;
    j["iters"] = o.iters;
    j["warmup"] = o.warmup;
    j["device"] = gpu ? nlohmann::ordered_json(ctx->name()) : nullptr;
    j["result"] = pass ? "pass" : "mismatch";
    j["tolerance"] = tol;
    j["rel_error_vs_f64"] = worstRel;
    j["us_per_layer_step"] =
        timing ? nlohmann::ordered_json(timing->medianUs) : nullptr;
    j["us_per_layer_step_min"] =
        timing ? nlohmann::ordered_json(timing->minUs) : nullptr;
    if (o.json == "-") {
      std::cout << j.dump(2) << "\n";
    } else {
      std::ofstream os(o.json);
      os << j.dump(2) << "\n";
      if (!os)
        throw Error("cannot write --json file " + o.json + ": " +
                    std::strerror(errno));
      std::cout << "wrote " << o.json << "\n";
    }
  }

  // --- Output file ----------------------------------------------------------
  if (!o.out.empty()) {
    std::string dt(safetensorsDTypeName(sig.dtype));
    std::vector<TensorRef> t = {
        {"output", dt, {B, Hq, D}, out.data()},
        {"ref_f64.output", dt, {B, Hq, D}, lastRef64.out.data()},
        {"ref_f32.output", dt, {B, Hq, D}, lastRef32.out.data()},
        {"k_new", dt, {B, Hkv, D}, kNew.data()},
        {"v_new", dt, {B, Hkv, D}, vNew.data()},
        {"ref_f64.k_new", dt, {B, Hkv, D}, lastRef64.k.data()},
        {"ref_f64.v_new", dt, {B, Hkv, D}, lastRef64.v.data()},
        {"x", dt, {B, H}, last.x.data()},
        {"positions", "I32", {B}, last.view.positions.data()},
        {"seq_lens", "I32", {B}, last.view.seq_lens.data()},
        {"block_table", "I32", {B, maxPages}, last.view.block_table.data()},
    };
    if (sig.residualOut >= 0) {
      t.push_back({"residual_out", dt, {B, H}, residualOut.data()});
      t.push_back(
          {"ref_f64.residual_out", dt, {B, H}, lastRef64.residualOut.data()});
    }
    if (hasResidual)
      t.push_back({"residual", dt, {B, H}, last.residual.data()});
    std::map<std::string, std::string> meta = {
        {"ptx", o.ptx},
        {"manifest", o.manifest},
        {"function", model.function().name},
        {"weights", weights.origin},
        {"batch", std::to_string(B)},
        {"steps", std::to_string(o.steps)},
        {"num_splits", std::to_string(numSplits)},
        {"graph", o.graph ? "true" : "false"},
        {"result", pass ? "pass" : "mismatch"},
    };
    if (timing)
      meta["us_per_step"] = std::to_string(timing->medianUs);
    if (!gpu)
      meta["dry_run"] = "true";
    writeSafetensors(o.out, t, meta);
    std::cout << "wrote " << o.out << "\n";
  }
  std::cout << (pass ? "PASS" : "FAIL: outputs differ from the reference")
            << "\n";
  return pass ? 0 : kExitMismatch;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options o = parseOptions(argc, argv);
    if (o.checkDevice) {
      cuda::Context ctx = cuda::Context::open(o.device);
      std::cout << "CUDA device " << o.device << ": " << ctx.name() << "\n";
      return 0;
    }
    return run(o);
  } catch (const DeviceUnavailableError &e) {
    std::cout << "no CUDA device: skipped (" << e.what() << ")\n";
    return kExitSkipped;
  } catch (const CudaError &e) {
    std::cerr << "fusion-run: CUDA error: " << e.what() << "\n";
    return kExitError;
  } catch (const std::exception &e) {
    std::cerr << "fusion-run: " << e.what() << "\n";
    return kExitError;
  }
}
