//===- Options.cpp - fusion-run's command line ----------------------------===//

#include "fusion/tooling/Options.h"

#include "fusion/tooling/CommandLine.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

namespace fusion::tooling {

using runtime::InvalidArgumentError;

namespace {

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
  --config FILE           a config.json checked against the kernels' op
                          attributes (the reference is built from those)
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
                          schedule's policy for the batch and length, lowered
                          on a GPU until the attention's clusters fit one
                          wave)
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
  --no-clusters           launch every kernel without thread-block clusters:
                          the split-KV attention and cluster_k_split GEMMs
                          combine through global-memory workspaces instead,
                          with the same results (for compute-sanitizer
                          racecheck, which cannot run cluster launches, and
                          to compare the two combines)
  --inspect               no GPU: check the PTX against the manifest, print
                          the plan (kernels, grids, buffers) and exit
  --dry-run               no GPU: everything else (weights, KV cache, both
                          references, comparisons, --out), with the fp32
                          reference standing in for the GPU's outputs
  --check-device          only open the CUDA device: exit 0 if there is one,
                          77 if not
  --help
)";

constexpr std::string_view kTool = "fusion-run";

[[noreturn]] void usageError(const std::string &message) {
  tooling::usageError(kTool, message);
}

int64_t parseInt(const std::string &flag, const std::string &value, int64_t lo,
                 int64_t hi) {
  return parseIntOption(kTool, flag, value, lo, hi);
}

double parseDouble(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || !(v > 0))
    usageError(flag + " expects a positive number, got \"" + value + "\"");
  return v;
}

/// The options given on the command line that have defaults.
struct Given {
  bool kvLen = false, steps = false;
};

/// Sets `flag` in `o` from `value()` (called only for flags that take one);
/// false if `flag` is not an option.
bool setOption(Options &o, Given &given, const std::string &flag,
               const std::function<std::string()> &value) {
  constexpr int64_t kBig = int64_t(1) << 31;
  // Positions, lengths and page ids are int32 (docs/abi.md).
  constexpr int64_t kInt32Max = kBig - 1;
  std::map<std::string, std::string *> strings = {
      {"--ptx", &o.ptx},           {"--manifest", &o.manifest},
      {"--function", &o.function}, {"--weights", &o.weights},
      {"--config", &o.config},     {"--inputs", &o.inputs},
      {"--json", &o.json},         {"--out", &o.out}};
  std::map<std::string, bool *> flags = {{"--graph", &o.graph},
                                         {"--sync-each", &o.syncEach},
                                         {"--no-clusters", &o.noClusters},
                                         {"--inspect", &o.inspect},
                                         {"--dry-run", &o.dryRun},
                                         {"--check-device", &o.checkDevice}};
  if (auto s = strings.find(flag); s != strings.end()) {
    *s->second = value();
  } else if (auto f = flags.find(flag); f != flags.end()) {
    *f->second = true;
  } else if (flag == "--layer") {
    o.layer = parseInt(flag, value(), 0, kBig);
  } else if (flag == "--seed") {
    o.seed = static_cast<uint64_t>(parseInt(flag, value(), 0, INT64_MAX));
  } else if (flag == "--batch") {
    // The attention kernel's grid has a batch dimension (CUDA: at most
    // 65535); the range also keeps per-sequence host data small.
    o.batch = parseInt(flag, value(), 1, kMaxBatch);
  } else if (flag == "--kv-len") {
    o.kvLen = parseInt(flag, value(), 0, kInt32Max);
    given.kvLen = true;
  } else if (flag == "--kv-lens") {
    std::stringstream ss(value());
    std::string item;
    while (std::getline(ss, item, ','))
      o.kvLens.push_back(parseInt("--kv-lens", item, 0, kInt32Max));
    if (o.kvLens.empty() || o.kvLens.size() > kMaxBatch)
      usageError("--kv-lens needs 1 to " + std::to_string(kMaxBatch) +
                 " lengths");
  } else if (flag == "--steps") {
    o.steps = parseInt(flag, value(), 1, 1 << 20);
    given.steps = true;
  } else if (flag == "--num-splits") {
    o.numSplits = parseInt(flag, value(), 1, 1 << 20);
  } else if (flag == "--num-pages") {
    o.numPages = parseInt(flag, value(), 1, kInt32Max);
  } else if (flag == "--tol") {
    o.tol = parseDouble(flag, value());
  } else if (flag == "--iters") {
    o.iters = parseInt(flag, value(), 0, 1 << 24);
  } else if (flag == "--warmup") {
    o.warmup = parseInt(flag, value(), 0, 1 << 24);
  } else if (flag == "--layers") {
    o.layers = parseInt(flag, value(), 1, 1 << 12);
  } else if (flag == "--device") {
    o.device = static_cast<int>(parseInt(flag, value(), 0, 1024));
  } else {
    return false;
  }
  return true;
}

/// Checks that the files fusion-run writes (--out, --json unless "-") are
/// neither one another nor any file it reads, and that --out can be
/// replaced by a rename (runtime::regularOutputFile).
void checkOutputPaths(const Options &o) {
  const std::pair<const char *, const std::string *> outputs[] = {
      {"--out", &o.out}, {"--json", &o.json}};
  const std::pair<const char *, const std::string *> files[] = {
      {"--ptx", &o.ptx},         {"--manifest", &o.manifest},
      {"--config", &o.config},   {"--inputs", &o.inputs},
      {"--weights", &o.weights}, {"--out", &o.out}};
  if (!o.out.empty())
    runtime::regularOutputFile(o.out, "--out"); // before any work is done
  for (auto [flag, path] : outputs) {
    if (path->empty() || *path == "-")
      continue;
    for (auto [other, file] : files)
      if (file != path && !file->empty() && runtime::sameFile(*path, *file))
        usageError(std::string(flag) + " " + *path + " is the file " + other +
                   " names; fusion-run would overwrite it");
  }
}

/// Checks the options against each other and fills in the batch and the
/// per-sequence lengths.
void finish(Options &o, const Given &given) {
  if (o.ptx.empty() || o.manifest.empty())
    usageError("--ptx and --manifest are required");
  checkOutputPaths(o);
  if (o.layers > 1 && o.iters == 0)
    usageError("--layers " + std::to_string(o.layers) +
               " applies to the timing, which --iters 0 turns off");
  if (!o.inputs.empty()) {
    // The golden fixes the batch, the histories and the single step.
    if (o.batch || given.kvLen || !o.kvLens.empty() || given.steps)
      usageError("--inputs gives the batch, the histories and one step: "
                 "--batch, --kv-len, --kv-lens and --steps do not apply");
    if (o.weights.empty())
      usageError("--inputs needs --weights (the golden's checkpoint "
                 "directory, e.g. test/golden/llama3_gqa)");
    return;
  }
  if (!o.kvLens.empty()) {
    if (given.kvLen)
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
}

} // namespace

const char *usage() { return kUsage; }

Options parseOptions(const std::vector<std::string> &args) {
  Options o;
  Given given;
  o.help = parseArguments(
      kTool, args,
      [&](const std::string &flag, const std::function<std::string()> &value) {
        return setOption(o, given, flag, value);
      });
  if (!o.help && !o.checkDevice)
    finish(o, given);
  return o;
}

} // namespace fusion::tooling
