//===- fusion-generate.cpp - generate or score with a compiled model ------===//
//
// A thin driver over the Engine (Engine.h): loads a whole model compiled by
// fusion-compile from `fusion-import --whole-model` and the weights of its
// Hugging Face checkpoint, then either generates greedily from a prompt of
// token ids (B copies as B sequences) and reports the prefill and decode
// times, or (--score) prints the teacher-forced log-probability of every
// token of a text and its perplexity. Token ids only: scripts/generate.py
// converts text with the checkpoint's tokenizer.json.
//
//   fusion-generate --model out/smollm2 --checkpoint build/models/smollm2 \
//                   --ids "504 3575 282 4649 314" --max-new-tokens 32
//   fusion-generate --model out/smollm2 --checkpoint build/models/smollm2 \
//                   --score --ids-file apache.ids
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/Engine.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"
#include "fusion/runtime/LogProbs.h"
#include "fusion/tooling/CommandLine.h"
#include "fusion/tooling/GenerateOptions.h"
#include "fusion/tooling/Weights.h"

#include <chrono>
#include <cstdio>
#include <iostream>

using namespace fusion::runtime;
using namespace fusion::tooling;

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

/// The dtype the model was compiled for (its embedding table's), checked
/// against --dtype.
DType compiledDType(const Model &model, const GenerateOptions &o) {
  const DType dtype = getModelDType(model.manifest(), model.function());
  if (!o.dtype.empty() && o.dtype != dtypeName(dtype))
    throwInvalidArgument("--dtype ", o.dtype, ": ", o.model,
                         " was compiled for ", dtypeName(dtype));
  return dtype;
}

/// The steps Engine::prefill (and score) runs for prompts of `lengths`
/// tokens: its chunks of up to maxStepRows rows.
int64_t prefillSteps(const Engine &engine, const std::vector<size_t> &lengths) {
  return static_cast<int64_t>(
      engine.sequences()
          .planPrefill(lengths, engine.prefillRowsPerSequence())
          .size());
}

/// Greedy generation: prefill, then --max-new-tokens - 1 decode steps
/// (Engine::generate: enqueued back to back, downloaded once).
void generate(Engine &engine, const GenerateOptions &o,
              const std::vector<int32_t> &prompt) {
  std::vector<SeqId> seqs;
  for (int64_t b = 0; b < o.batch; ++b) {
    seqs.push_back(b);
    engine.addSequence(b);
  }
  Clock::time_point start = Clock::now();
  std::vector<int32_t> next = engine.prefill(
      seqs, std::vector<std::vector<int32_t>>(seqs.size(), prompt));
  const double prefillMs = msSince(start);
  std::vector<std::vector<int32_t>> out(seqs.size());
  for (size_t b = 0; b < seqs.size(); ++b)
    out[b].push_back(next[b]);
  start = Clock::now();
  if (o.maxNewTokens > 1) {
    std::vector<std::vector<int32_t>> rest =
        engine.generate(seqs, next, o.maxNewTokens - 1);
    for (size_t b = 0; b < seqs.size(); ++b)
      out[b].insert(out[b].end(), rest[b].begin(), rest[b].end());
  }
  const double decodeMs = msSince(start);

  for (size_t b = 0; b < out.size(); ++b) {
    std::cout << "ids " << b << ":";
    for (int32_t id : out[b])
      std::cout << " " << id;
    std::cout << "\n";
  }
  const int64_t steps =
      prefillSteps(engine, std::vector<size_t>(seqs.size(), prompt.size()));
  std::printf("prefill: %lld steps of up to %lld rows (batch %lld) in %.3f ms "
              "(%.1f us/step)\n",
              static_cast<long long>(steps),
              static_cast<long long>(engine.sequences().capacity().maxStepRows),
              static_cast<long long>(o.batch), prefillMs,
              1000 * prefillMs / static_cast<double>(steps));
  const int64_t decodeSteps = o.maxNewTokens - 1;
  if (decodeSteps == 0) {
    std::printf("decode: no steps (--max-new-tokens 1)\n");
    return;
  }
  std::printf("decode: %lld steps x batch %lld in %.3f ms: %.1f us/step, "
              "%.1f tokens/s\n",
              static_cast<long long>(decodeSteps),
              static_cast<long long>(o.batch), decodeMs,
              1000 * decodeMs / static_cast<double>(decodeSteps),
              static_cast<double>(decodeSteps * o.batch) / (decodeMs / 1000));
}

/// Teacher-forced log-probabilities of `ids` and their perplexity.
void score(Engine &engine, const std::vector<int32_t> &ids) {
  Clock::time_point start = Clock::now();
  std::vector<double> logProbs = engine.score(ids);
  const double ms = msSince(start);
  std::printf("score: %zu tokens, %zu scored (token 0 is not; no BOS added)\n",
              ids.size(), logProbs.size());
  double sum = 0;
  for (size_t i = 0; i < logProbs.size(); ++i) {
    std::printf("logprob %zu %d %.6f\n", i + 1, ids[i + 1], logProbs[i]);
    sum += logProbs[i];
  }
  std::printf("perplexity: %.6f (mean negative log-prob %.6f over %zu "
              "tokens)\n",
              perplexity(logProbs), -sum / static_cast<double>(logProbs.size()),
              logProbs.size());
  const int64_t steps = prefillSteps(engine, {ids.size() - 1});
  std::printf("time: %lld steps of up to %lld rows in %.3f ms (%.1f "
              "us/step)\n",
              static_cast<long long>(steps),
              static_cast<long long>(engine.sequences().capacity().maxStepRows),
              ms, 1000 * ms / static_cast<double>(steps));
}

int run(const GenerateOptions &o) {
  std::vector<int32_t> ids =
      o.idsFile.empty()
          ? o.ids
          : parseTokenIds(readFile(o.idsFile, "token ids", uint64_t{1} << 30),
                          o.idsFile);
  if (o.score && ids.size() < 2)
    throwInvalidArgument("--score needs at least 2 token ids, got ",
                         ids.size());
  Model model = Model::load(o.model + ".manifest.json", o.function);
  const std::string ptxName = o.model + ".ptx";
  std::string ptx = readPtx(ptxName);
  const DType dtype = compiledDType(model, o);
  // Random weights need only the checkpoint's config.json.
  const ModelConfig config =
      o.randomWeights ? ModelConfig::load(o.checkpoint + "/config.json")
                      : Checkpoint::open(o.checkpoint).config;
  for (const std::string &w : config.warnings)
    std::cerr << "fusion-generate: warning: " << w << "\n";
  cuda::Context ctx = cuda::Context::open(o.device);

  EngineCapacity capacity;
  capacity.maxBatch = o.batch;
  capacity.maxStepRows = o.prefillRows;
  const int64_t needed =
      o.score ? static_cast<int64_t>(ids.size()) - 1
              : static_cast<int64_t>(ids.size()) + o.maxNewTokens - 1;
  capacity.maxTokensPerSeq = o.maxTokens ? o.maxTokens : needed;
  Engine engine(
      ctx, std::move(model), ptx, ptxName, config,
      o.randomWeights
          ? randomModelWeights(config, dtype, *o.randomWeights)
          : loadModelWeights(TensorStore::open(o.checkpoint), config, dtype),
      capacity, EngineOptions{!o.noGraph, o.syncEach, !o.noClusters});
  std::cout << "fusion-generate: " << o.model << " on " << ctx.name() << ": "
            << config.summary() << ", " << config.numHiddenLayers
            << " layers, vocab " << engine.vocabSize() << ", "
            << dtypeName(dtype) << "; " << (engine.weightBytes() >> 20)
            << " MiB of weights, " << (engine.cacheBytes() >> 20)
            << " MiB of KV cache (" << engine.sequences().numPages()
            << " pages of " << engine.sequences().pageSize() << " tokens)"
            << (o.noClusters ? "; no thread-block clusters" : "") << "\n";
  if (o.score)
    score(engine, ids);
  else
    generate(engine, o, ids);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  return runToolMain("fusion-generate", [&] {
    GenerateOptions o =
        parseGenerateOptions(std::vector<std::string>(argv + 1, argv + argc));
    if (o.help) {
      std::cout << generateUsage();
      return 0;
    }
    if (o.checkDevice) {
      cuda::Context ctx = cuda::Context::open(o.device);
      std::cout << "CUDA device " << o.device << ": " << ctx.name() << "\n";
      return 0;
    }
    return run(o);
  });
}
