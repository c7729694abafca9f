//===- RunSetup.cpp - what a fusion-run run is, before the GPU ------------===//

#include "fusion/tooling/RunSetup.h"

#include "fusion/tooling/Checker.h"

#include <algorithm>
#include <filesystem>

namespace fusion::tooling {

using namespace fusion::runtime;

namespace {

/// The config.json of the run (--config, or the --weights directory's) and
/// the reference; the cache geometry, checked against the host's memory.
void setUpReferenceAndCache(const Options &o, RunSetup &s, std::ostream &log) {
  std::string configPath = o.config;
  if (configPath.empty() && !o.weights.empty() &&
      std::filesystem::is_directory(o.weights))
    configPath = (std::filesystem::path(o.weights) / "config.json").string();
  if (!configPath.empty())
    s.config = ModelConfig::load(configPath);
  if (s.config)
    for (const std::string &w : s.config->warnings)
      log << "warning: " << configPath << ": " << w << "\n";
  s.reference = resolveReference(s.sig, s.config, configPath, o.manifest);
  s.tol = o.tol > 0 ? o.tol : defaultTolerance(s.sig.dtype);
  if (s.golden) {
    checkGoldenFits(*s.golden, s.sig, o.inputs);
    if (o.numPages)
      checkHostCaches(o.numPages, s.sig,
                      "--num-pages " + std::to_string(o.numPages));
    // The history laid out for a function that appends at the RoPE
    // position (GoldenCacheLayout; sequence 3 of the goldens).
    s.layout = layoutGoldenCache(*s.golden, s.sig.pageSize, o.numPages);
    s.pool = {
        s.layout->numPages, s.layout->maxPages,
        *std::max_element(s.layout->seqLens.begin(), s.layout->seqLens.end())};
    return;
  }
  s.pool = poolPages(o.kvLens, o.steps, o.numPages, s.sig.pageSize);
  checkHostCaches(s.pool.numPages, s.sig,
                  o.numPages
                      ? "--num-pages " + std::to_string(o.numPages)
                      : "--batch " + std::to_string(o.batch) +
                            " histories of --kv-len/--kv-lens (longest " +
                            std::to_string(s.pool.maxLen - o.steps) +
                            " tokens) plus --steps " + std::to_string(o.steps));
}

/// The summary's settings (its result is filled in at the end).
RunSummary summarize(const Options &o, const RunSetup &s) {
  RunSummary r;
  r.ptx = o.ptx;
  r.manifest = o.manifest;
  r.function = s.model.function().name;
  r.strategy = s.model.manifest().strategy;
  r.kernels = static_cast<int64_t>(s.model.kernels().size());
  r.dtype = s.sig.dtype;
  r.hidden = s.sig.hidden;
  r.numHeads = s.sig.dims.numQHeads;
  r.numKVHeads = s.sig.dims.numKVHeads;
  r.headDim = s.sig.dims.headDim;
  r.pageSize = s.sig.pageSize;
  r.batch = s.golden ? s.golden->batch : o.batch;
  r.kvLens = o.kvLens;
  if (s.golden)
    r.kvLens.assign(s.golden->historyLens.begin(), s.golden->historyLens.end());
  r.steps = o.steps;
  r.numSplits = s.numSplits;
  r.numPages = s.pool.numPages;
  r.graph = o.graph;
  r.clusters = !o.noClusters;
  r.layers = o.layers;
  r.iters = o.iters;
  r.warmup = o.warmup;
  r.tolerance = s.tol;
  return r;
}

/// The log's first lines.
RunHeader header(const Options &o, const RunSetup &s) {
  RunHeader h;
  h.qkvBias = s.sig.qkvBias >= 0;
  h.residual = s.sig.residual >= 0;
  h.reference = describeReference(s.reference.config);
  h.referenceOrigin = s.reference.origin;
  if (s.golden) {
    h.inputs = o.inputs;
    h.positions = s.golden->positions;
  }
  h.maxPages = s.pool.maxPages;
  h.maxSplits = s.model.usesNumSplits() ? s.model.maxSplits() : 0;
  h.dryRun = o.dryRun;
  if (s.layout)
    h.notes = s.layout->notes;
  return h;
}

} // namespace

RunSetup setUpRun(const Options &o, Model model, std::string ptx,
                  FrontHalfSignature sig, std::ostream &log) {
  RunSetup s(std::move(model), std::move(ptx), std::move(sig));
  if (!o.inputs.empty())
    s.golden = GoldenDecodeStep::load(o.inputs);
  setUpReferenceAndCache(o, s, log);
  const int64_t B = s.golden ? s.golden->batch : o.batch;
  s.numSplits =
      o.numSplits ? o.numSplits : s.model.defaultNumSplits(B, s.pool.maxLen);
  s.summary = summarize(o, s);
  s.header = header(o, s);
  return s;
}

LaunchPlan probePlan(const RunSetup &s) {
  LaunchPlan probe(s.model, s.capacity());
  // Distinct, aligned fake addresses (bindArgument refuses overlapping
  // caches).
  uint64_t next = 0x1000;
  for (const ManifestArgument &a : s.model.arguments()) {
    auto bytes = static_cast<uint64_t>(probe.argumentBytes(a.index));
    probe.bindArgument(a.index, next, bytes);
    next += (bytes + 255) / 256 * 256 + 256;
  }
  for (size_t i = 0; i < s.model.internalBuffers().size(); ++i)
    probe.setInternal(static_cast<int>(i), 0x1000);
  if (probe.tensorMapTableBytes() > 0)
    probe.setTensorMapTable(0x1000);
  probe.validate(s.shape());
  return probe;
}

} // namespace fusion::tooling
