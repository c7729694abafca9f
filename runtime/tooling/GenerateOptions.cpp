//===- GenerateOptions.cpp - fusion-generate's command line ---------------===//

#include "fusion/tooling/GenerateOptions.h"

#include "fusion/tooling/CommandLine.h"

#include "fusion/runtime/Error.h"

#include <limits>
#include <map>
#include <sstream>

namespace fusion::tooling {

namespace {

constexpr std::string_view kTool = "fusion-generate";

const char *const kUsage =
    R"(usage: fusion-generate --model PREFIX --checkpoint DIR (--ids "1 2 3" | --ids-file FILE) [options]

Runs a whole decoder model compiled by fusion-compile from fusion-import
--whole-model on the GPU with the weights of a Hugging Face checkpoint:
greedy generation from a prompt of token ids, or (--score) the
teacher-forced log-probability of every token of a text and its perplexity.
Prefill (and --score) runs the prompt through the decode step in chunks of
up to --prefill-rows consecutive tokens a step. Token ids only:
scripts/generate.py turns text into ids and back with the checkpoint's
tokenizer.json.

Inputs
  --model PREFIX          PREFIX.ptx and PREFIX.manifest.json (fusion-compile
                          -o PREFIX)
  --random-weights SEED   seeded random weights of the shapes of DIR's
                          config.json instead of its safetensors (for
                          timing models without a checkpoint)
  --checkpoint DIR        config.json and model.safetensors (or a sharded
                          index) of the same model
  --dtype f16|bf16        the weights' dtype (default: the compiled model's;
                          another value is an error)
  --function NAME         the manifest function (default decode_step)
  --ids "1 2 3"           the prompt (or, with --score, the text) as token ids
  --ids-file FILE         the same, read from FILE (whitespace-separated)

Generation
  --batch B               run B copies of the prompt as B sequences (default 1)
  --max-new-tokens N      tokens generated per sequence (default 32)

Scoring
  --score                 print log p(id[i] | id[0..i)) for i >= 1 and the
                          perplexity exp(-mean log p) over those n - 1 tokens
                          (id[0] is not scored; no BOS is added)

Other
  --max-tokens N          the longest a sequence may grow (default: the
                          prompt plus --max-new-tokens, or the text less one)
  --prefill-rows N        tokens (rows) of one prefill or score step, at least
                          --batch (default: the engine's, at least --batch and
                          one token tile of the projection GEMMs); the
                          engine's buffers are sized for N rows
  --device N              CUDA device ordinal (default 0)
  --no-graph              launch the kernels one by one instead of replaying a
                          CUDA graph
  --sync-each             with --no-graph: synchronize after every kernel (a
                          fault names it)
  --no-clusters           launch every kernel without thread-block clusters:
                          the split-KV attention and cluster_k_split GEMMs
                          combine through global-memory workspaces instead,
                          with the same results (for compute-sanitizer
                          racecheck, which cannot run cluster launches, and
                          to compare the two combines)
  --check-device          only open the CUDA device: exit 0 if there is one,
                          77 if not
  --help

Exit status: 0 success, 2 a usage, input or CUDA error, 77 no CUDA device.
)";

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

bool setOption(GenerateOptions &o, bool &idsGiven, const std::string &flag,
               const std::function<std::string()> &value) {
  std::map<std::string, std::string *> strings = {
      {"--model", &o.model},
      {"--checkpoint", &o.checkpoint},
      {"--dtype", &o.dtype},
      {"--function", &o.function},
      {"--ids-file", &o.idsFile}};
  std::map<std::string, bool *> flags = {{"--score", &o.score},
                                         {"--no-graph", &o.noGraph},
                                         {"--sync-each", &o.syncEach},
                                         {"--no-clusters", &o.noClusters},
                                         {"--check-device", &o.checkDevice}};
  if (auto s = strings.find(flag); s != strings.end()) {
    *s->second = value();
  } else if (auto f = flags.find(flag); f != flags.end()) {
    *f->second = true;
  } else if (flag == "--ids") {
    o.ids = parseTokenIds(value(), "--ids");
    idsGiven = true;
  } else if (flag == "--batch") {
    o.batch = parseIntOption(kTool, flag, value(), 1, 65535);
  } else if (flag == "--max-new-tokens") {
    o.maxNewTokens = parseIntOption(kTool, flag, value(), 1, kInt32Max);
  } else if (flag == "--max-tokens") {
    o.maxTokens = parseIntOption(kTool, flag, value(), 1, kInt32Max);
  } else if (flag == "--prefill-rows") {
    o.prefillRows = parseIntOption(kTool, flag, value(), 1, kInt32Max);
  } else if (flag == "--random-weights") {
    o.randomWeights = static_cast<uint64_t>(
        parseIntOption(kTool, flag, value(), 0, kInt32Max));
  } else if (flag == "--device") {
    o.device = static_cast<int>(parseIntOption(kTool, flag, value(), 0, 1024));
  } else {
    return false;
  }
  return true;
}

/// Checks the options against each other.
void finish(const GenerateOptions &o, bool idsGiven) {
  if (o.model.empty() || o.checkpoint.empty())
    usageError(kTool, "--model and --checkpoint are required");
  if (idsGiven == !o.idsFile.empty())
    usageError(kTool, "give the token ids with one of --ids and --ids-file");
  if (!o.dtype.empty() && o.dtype != "f16" && o.dtype != "bf16")
    usageError(kTool, "--dtype expects f16 or bf16, got \"" + o.dtype + "\"");
  if (o.score && o.batch != 1)
    usageError(kTool, "--score scores one text; --batch does not apply");
  if (o.prefillRows != 0 && o.prefillRows < o.batch)
    usageError(kTool, "--prefill-rows " + std::to_string(o.prefillRows) +
                          " is below --batch " + std::to_string(o.batch) +
                          " (a decode step is --batch rows)");
  if (o.syncEach && !o.noGraph)
    usageError(kTool, "--sync-each applies to --no-graph (a CUDA graph "
                      "cannot synchronize between its kernels)");
}

} // namespace

const char *generateUsage() { return kUsage; }

GenerateOptions parseGenerateOptions(const std::vector<std::string> &args) {
  GenerateOptions o;
  bool idsGiven = false;
  o.help = parseArguments(
      kTool, args,
      [&](const std::string &flag, const std::function<std::string()> &value) {
        return setOption(o, idsGiven, flag, value);
      });
  if (!o.help && !o.checkDevice)
    finish(o, idsGiven);
  return o;
}

std::vector<int32_t> parseTokenIds(const std::string &text,
                                   const std::string &what) {
  std::istringstream is(text);
  std::vector<int32_t> ids;
  std::string word;
  while (is >> word)
    ids.push_back(static_cast<int32_t>(parseIntOption(
        kTool, what + " (token " + std::to_string(ids.size()) + ")", word, 0,
        kInt32Max)));
  if (ids.empty())
    usageError(kTool, what + " holds no token ids");
  return ids;
}

} // namespace fusion::tooling
