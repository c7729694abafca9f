//===- DeviceRunner.h - fusion-run's steps on the GPU -----------*- C++ -*-===//
//
// The compiled layer front half on the GPU for fusion-run: one device buffer
// per argument, the weights and caches uploaded, each step's inputs
// uploaded, the step run (direct launches or a CUDA graph) and its outputs
// read back, and the timed replays over --layers copies of every argument.
// Part of fusion_tooling_device (needs the CUDA headers).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_DEVICERUNNER_H
#define FUSION_TOOLING_DEVICERUNNER_H

#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/DecodeStep.h"
#include "fusion/tooling/Checker.h"
#include "fusion/tooling/StepInputs.h"
#include "fusion/tooling/Timing.h"
#include "fusion/tooling/Weights.h"

#include <map>
#include <string>
#include <vector>

namespace fusion::tooling {

/// Throws CapacityError unless device `device` (`ctx`) has room for the
/// run: every argument of `plan` at capacity, once per each of `layers`
/// copies, plus the runtime's own buffers.
void checkDeviceMemory(const runtime::LaunchPlan &plan,
                       const runtime::cuda::Context &ctx, int64_t layers,
                       int device);

/// How the steps run and are timed.
struct DeviceRunOptions {
  bool graph = false;    ///< capture each step in a CUDA graph
  bool syncEach = false; ///< synchronize after every kernel (not with graph)
  /// DecodeStep::Options::launchClusters (false: --no-clusters).
  bool launchClusters = true;
  int64_t iters = 0, warmup = 0, layers = 1; ///< timeLayerSteps()
};

/// The compiled step of `sig` on the GPU with its arguments bound.
class DeviceRunner {
public:
  /// Loads `ptx` (named `ptxName`) for `model` at `capacity` and allocates
  /// and binds one buffer per argument. `ctx` and `model` must outlive it.
  DeviceRunner(const runtime::cuda::Context &ctx, const runtime::Model &model,
               const runtime::FrontHalfSignature &sig, const std::string &ptx,
               const std::string &ptxName, const runtime::Capacity &capacity,
               const DeviceRunOptions &options);

  /// The num_splits a step of `batch` sequences, the longest `maxSeqLen`
  /// tokens, runs with (DecodeStep::numSplitsFor).
  int64_t numSplitsFor(int64_t batch, int64_t maxSeqLen) {
    return step_.numSplitsFor(batch, maxSeqLen);
  }

  /// Uploads the weights and the K/V caches (as laid out on the host).
  void upload(const Weights &w, const std::vector<uint16_t> &keyCache,
              const std::vector<uint16_t> &valueCache);

  /// Runs the step `s` at `shape` and reads back its outputs, the cache
  /// rows it wrote and the values of `intermediates` (returned in the
  /// outputs).
  StepOutputs runStep(const HostStep &s, const runtime::StepShape &shape,
                      std::vector<Intermediate> intermediates);

  /// Times `iters` replays of the step of `shape` (inputs as uploaded last,
  /// `inputs` their host copies), after `warmup` untimed ones. A replay
  /// runs the step once on each of `layers` copies of every argument, in
  /// order: copy 0 is the checked one, the others are cloned from it on the
  /// device, so that, as in a model whose layers each stream their own
  /// weights and caches, no copy is still in the L2 cache when its turn
  /// comes again. With `graph` one CUDA graph holds the whole replay.
  /// Replays are enqueued back to back with an event between each two, so
  /// no idle gap is timed. The step is idempotent (it rewrites the same
  /// cache slots). Copy 0 is bound again on return.
  Timing timeLayerSteps(const runtime::StepShape &shape,
                        const runtime::StepInputs &inputs);

private:
  const runtime::FrontHalfSignature &sig_;
  DeviceRunOptions options_;
  runtime::DecodeStep step_;
  std::map<int, runtime::cuda::DeviceBuffer> args_;
};

} // namespace fusion::tooling

#endif // FUSION_TOOLING_DEVICERUNNER_H
