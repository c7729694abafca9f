//===- fusion-run.cpp - run a compiled decode layer and check it ----------===//
//
// Runs the front half of a decoder layer compiled by fusion-compile
// (<prefix>.ptx + <prefix>.manifest.json) on the GPU, on random or
// checkpoint weights, over a paged KV cache filled with a random history (or
// with the inputs and history of a Hugging Face golden, --inputs), and
// compares every output with the CPU reference (fp32 and fp64) and, with
// --inputs, with the golden's tensors. No MLIR. This file only orchestrates;
// the pieces are the tooling library (fusion/tooling/*.h, fusion_tooling and
// fusion_tooling_device), each unit-tested.
//
// Exit status: 0 all outputs within tolerance, 1 a mismatch (or NaN),
// 2 a usage / input / CUDA error, 77 no CUDA driver or device (a test
// harness reports "skipped").
//
// See `fusion-run --help` and docs/runtime.md.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"
#include "fusion/tooling/Checker.h"
#include "fusion/tooling/CommandLine.h"
#include "fusion/tooling/DeviceRunner.h"
#include "fusion/tooling/Inspect.h"
#include "fusion/tooling/Options.h"
#include "fusion/tooling/ReferenceRunner.h"
#include "fusion/tooling/Report.h"
#include "fusion/tooling/RunSetup.h"
#include "fusion/tooling/StepInputs.h"
#include "fusion/tooling/Weights.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

using namespace fusion::runtime;
using namespace fusion::tooling;

namespace {

constexpr int kExitMismatch = 1;

/// The host's K/V caches and step source: a random history, or the golden's.
struct HostData {
  Random rng;
  std::optional<RandomHistory> history;
  std::vector<uint16_t> keyCache, valueCache;
};

/// The caches of `s` (a golden's layout, taken, or a random history).
HostData hostData(const Options &o, RunSetup &s) {
  HostData d{Random(o.seed), std::nullopt, {}, {}};
  if (s.layout) {
    d.keyCache = std::move(s.layout->keyCache);
    d.valueCache = std::move(s.layout->valueCache);
    std::cout << "  inputs: hidden_states, positions, seq_lens and the K/V "
                 "history of "
              << o.inputs;
    if (s.sig.residual >= 0)
      std::cout << "; residual = zeros (the golden is of layer 0, whose "
                   "norm reads x: x + 0 = x exactly)";
    std::cout << "\n";
    return d;
  }
  d.history = fillRandomHistory(o.kvLens, s.pool.numPages, s.sig, d.rng);
  d.keyCache = std::move(d.history->keyCache);
  d.valueCache = std::move(d.history->valueCache);
  return d;
}

/// The last step's inputs, outputs and references (for --out and timing).
struct LastStep {
  HostStep in;
  StepOutputs got;
  RefOutputs r64, r32;
};

/// Runs the steps on the GPU (`device`) or, in a dry run (no device), with
/// the fp32 reference standing in, and checks each with `checker`.
LastStep runSteps(const Options &o, RunSetup &s, HostData &d,
                  const Weights &weights, const LaunchPlan &probe,
                  const StepShape &shape, DeviceRunner *device,
                  StepChecker &checker) {
  // The reference caches (fp32 and fp64 evolve separately).
  std::vector<uint16_t> k32 = d.keyCache, v32 = d.valueCache;
  const int64_t numPages = s.pool.numPages, P = s.sig.pageSize,
                Hkv = s.sig.dims.numKVHeads, D = s.sig.dims.headDim;
  ref::PagedKVCache cache32{k32.data(), v32.data(), numPages, P, Hkv, D};
  ref::PagedKVCache cache64{
      d.keyCache.data(), d.valueCache.data(), numPages, P, Hkv, D};
  const bool hasResidual = s.sig.residual >= 0;
  std::vector<Intermediate> intermediates;
  if (s.golden) // the intermediates the kernels write are checked too
    intermediates = findIntermediates(s.model, s.sig);
  LastStep last;
  for (int64_t step = 0; step < o.steps; ++step) {
    HostStep in = s.golden
                      ? goldenStep(*s.golden, *s.layout, hasResidual)
                      : randomStep(*d.history, d.rng, s.sig, shape.maxPages);
    // The kernels trust positions, lengths and block tables: check them
    // before anything runs (DecodeStep checks again before it launches).
    probe.checkStepInputs(shape, stepInputs(in.view));
    StepOutputs got;
    if (device)
      got = device->runStep(in, shape, intermediates);
    RefOutputs r64 = runReference(s.reference.config, weights, in, cache64,
                                  hasResidual, ref::Precision::F64);
    RefOutputs r32 = runReference(s.reference.config, weights, in, cache32,
                                  hasResidual, ref::Precision::F32);
    if (!device) {
      // The dry run's "kernel outputs", read back from the fp32 cache as
      // the GPU path reads its cache.
      got.out = r32.out;
      if (s.sig.residualOut >= 0)
        got.residualOut = r32.residualOut;
      got.kNew = newTokenRows(k32, in.view, s.sig);
      got.vNew = newTokenRows(v32, in.view, s.sig);
      got.intermediates = intermediates;
      for (Intermediate &m : got.intermediates)
        m.values = r32.byGoldenName(m.name);
    }
    std::cout << stepHeading(step, in.view) << "\n"
              << checker.check(outputRows(s.sig, got, r64, r32)) << std::flush;
    if (s.golden)
      checker.record(checkGolden(*s.golden,
                                 goldenRows(*s.golden, s.sig, got, r64, r32),
                                 s.tol, std::cout));
    last = {std::move(in), std::move(got), std::move(r64), std::move(r32)};
  }
  return last;
}

/// Opens the GPU (--device) unless --dry-run and checks that the run fits.
std::optional<cuda::Context> openDevice(const Options &o,
                                        const LaunchPlan &probe) {
  if (o.dryRun) {
    std::cout << "  dry run: no GPU; the fp32 reference stands in for the "
                 "kernels' outputs\n";
    return std::nullopt;
  }
  cuda::Context ctx = cuda::Context::open(o.device);
  auto cc = ctx.computeCapability();
  std::cout << "  device " << o.device << ": " << ctx.name() << " (sm_"
            << cc.first << cc.second << ", " << ctx.multiprocessorCount()
            << " SMs), driver " << cuda::Context::driverVersion() << "\n";
  checkDeviceMemory(probe, ctx, o.layers, o.device);
  return ctx;
}

/// Without --num-splits: the num_splits the device runs (DeviceRunner::
/// numSplitsFor), which may be below the policy's in the header.
void fitNumSplits(const Options &o, RunSetup &s, DeviceRunner &device) {
  if (o.numSplits)
    return;
  const int64_t n = device.numSplitsFor(s.summary.batch, s.pool.maxLen);
  if (n != s.numSplits)
    std::cout << "  num_splits " << n << ": " << s.numSplits
              << " splits' clusters would not run in one wave\n";
  s.numSplits = s.summary.numSplits = n;
}

/// Times the last step (on a GPU, unless --iters 0), writes --json and --out
/// and the verdict.
int finish(const Options &o, RunSummary &r, const std::string &weightsOrigin,
           const LastStep &last, DeviceRunner *device, const StepShape &shape) {
  if (device && o.iters > 0) {
    r.timing = device->timeLayerSteps(shape, stepInputs(last.in.view));
    std::cout << timingLine(*r.timing, o.iters, o.graph, o.layers) << "\n";
  }
  if (!o.json.empty())
    writeSummary(o.json, r, std::cout);
  if (!o.out.empty()) {
    writeOutputFile(o.out, r, weightsOrigin, last.in, last.got, last.r64,
                    last.r32);
    std::cout << "wrote " << o.out << "\n";
  }
  std::cout << (r.pass ? "PASS" : "FAIL: outputs differ from the reference")
            << "\n";
  return r.pass ? 0 : kExitMismatch;
}

int run(const Options &o) {
  Model model = Model::load(o.manifest, o.function);
  std::string ptx = readPtx(o.ptx);
  checkPtxAgainstManifest(ptx, o.ptx, model.manifest());
  std::optional<FrontHalfSignature> sig;
  try {
    sig = FrontHalfSignature::fromModel(model);
  } catch (const Error &e) {
    if (!o.inspect)
      throw;
    inspectFunction(std::cout, o, model, e.what()); // any function's plan
    return 0;
  }
  RunSetup s =
      setUpRun(o, std::move(model), std::move(ptx), std::move(*sig), std::cout);
  std::cout << runHeader(s.summary, s.header);
  LaunchPlan probe = probePlan(s);
  if (o.inspect) {
    printPlan(std::cout, s.model, s.capacity(), s.numSplits);
    return 0;
  }
  std::optional<cuda::Context> ctx = openDevice(o, probe);
  Weights weights =
      loadWeights({o.weights, o.layer, o.seed}, s.model, s.sig, s.config);
  std::cout << "  weights: " << weights.origin << "\n";
  HostData d = hostData(o, s);
  std::unique_ptr<DeviceRunner> device;
  if (ctx) {
    device = std::make_unique<DeviceRunner>(
        *ctx, s.model, s.sig, s.ptx, o.ptx, s.capacity(),
        DeviceRunOptions{o.graph, o.syncEach, !o.noClusters, o.iters, o.warmup,
                         o.layers});
    device->upload(weights, d.keyCache, d.valueCache);
    fitNumSplits(o, s, *device);
  }
  const StepShape shape = s.shape();
  StepChecker checker(s.sig.dtype, s.tol);
  LastStep last =
      runSteps(o, s, d, weights, probe, shape, device.get(), checker);
  s.summary.pass = checker.pass();
  s.summary.relErrorVsF64 = checker.worstRel();
  if (ctx)
    s.summary.device = ctx->name();
  return finish(o, s.summary, weights.origin, last, device.get(), shape);
}

} // namespace

int main(int argc, char **argv) {
  return runToolMain("fusion-run", [&] {
    Options o = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
    if (o.help) {
      std::cout << usage();
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
