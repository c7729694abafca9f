//===- RunSetup.h - what a fusion-run run is, before the GPU ----*- C++ -*-===//
//
// From the options and the compiled front half: the golden (--inputs), the
// config.json, the reference, the tolerance, the KV-cache geometry (checked
// against the host's memory), num_splits, and the summary and header the
// run reports; and a launch plan of that shape validated with fake
// addresses before anything large is allocated.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_RUNSETUP_H
#define FUSION_TOOLING_RUNSETUP_H

#include "fusion/runtime/Golden.h"
#include "fusion/runtime/Model.h"
#include "fusion/runtime/ModelConfig.h"
#include "fusion/tooling/Options.h"
#include "fusion/tooling/ReferenceRunner.h"
#include "fusion/tooling/Report.h"
#include "fusion/tooling/StepInputs.h"

#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace fusion::tooling {

/// What a run of a layer front half needs before it touches the GPU.
struct RunSetup {
  /// A setup of `model` (PTX text `ptx`, front half `sig`); the rest is
  /// filled in by setUpRun().
  RunSetup(runtime::Model model, std::string ptx,
           runtime::FrontHalfSignature sig)
      : model(std::move(model)), ptx(std::move(ptx)), sig(std::move(sig)) {}

  runtime::Model model;
  std::string ptx; ///< the PTX text
  runtime::FrontHalfSignature sig;
  std::optional<runtime::GoldenDecodeStep> golden;  ///< --inputs
  std::optional<runtime::GoldenCacheLayout> layout; ///< with a golden
  std::optional<runtime::ModelConfig> config;       ///< the config.json
  ReferenceSetup reference;
  double tol = 0;        ///< --tol, or defaultTolerance()
  CachePool pool;        ///< the KV cache (a golden's layout, or poolPages())
  int64_t numSplits = 0; ///< --num-splits, or the model's policy (on a GPU
                         ///< then DeviceRunner::numSplitsFor)
  RunSummary summary;    ///< the settings (no result yet)
  RunHeader header;      ///< the log's first lines

  /// The shape of every step.
  runtime::StepShape shape() const {
    return {summary.batch, pool.maxPages, numSplits};
  }
  /// The capacity of the run.
  runtime::Capacity capacity() const {
    return {summary.batch, pool.maxPages, pool.numPages};
  }
};

/// Sets up the run of `o` on `model` (whose PTX text is `ptx`) with front
/// half `sig`: loads --inputs and the config.json (--config, or the
/// --weights directory's; its warnings go to `log`), resolves the
/// reference, lays out the cache and checks the host can hold it, picks
/// num_splits. Throws InvalidArgumentError / CapacityError for a request
/// the run cannot meet.
RunSetup setUpRun(const Options &o, runtime::Model model, std::string ptx,
                  runtime::FrontHalfSignature sig, std::ostream &log);

/// A launch plan of `s`'s shape with fake addresses, validated: the step
/// shape fits the model before any work (the GPU path checks again with
/// real ones); its checkStepInputs() checks each step's inputs in a dry run.
runtime::LaunchPlan probePlan(const RunSetup &s);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_RUNSETUP_H
