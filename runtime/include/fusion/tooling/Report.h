//===- Report.h - fusion-run's JSON summary and output file -----*- C++ -*-===//
//
// What a run reports besides its log: the JSON summary (--json: settings,
// result, worst errors, timing) and the .safetensors file of the last step's
// outputs, references and inputs (--out).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_REPORT_H
#define FUSION_TOOLING_REPORT_H

#include "fusion/runtime/DType.h"
#include "fusion/tooling/Checker.h"
#include "fusion/tooling/Timing.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace fusion::tooling {

/// The settings and the result of a run.
struct RunSummary {
  std::string ptx, manifest, function, strategy;
  int64_t kernels = 0;
  runtime::DType dtype = runtime::DType::F16;
  int64_t hidden = 0, numHeads = 0, numKVHeads = 0, headDim = 0;
  int64_t pageSize = 0, batch = 0;
  std::vector<int64_t> kvLens; ///< the history lengths
  int64_t steps = 0, numSplits = 0, numPages = 0;
  bool graph = false;
  /// False with --no-clusters (no kernel launched in a cluster).
  bool clusters = true;
  int64_t layers = 1, iters = 0, warmup = 0;
  /// The GPU's name; none in a dry run.
  std::optional<std::string> device;
  bool pass = false;
  double tolerance = 0;
  /// The worst relative L2 error vs fp64 of each output.
  std::vector<std::pair<std::string, double>> relErrorVsF64;
  /// None without timing (a dry run, --iters 0).
  std::optional<Timing> timing;
};

/// What the first lines of a run's log say beyond its RunSummary.
struct RunHeader {
  bool qkvBias = false, residual = false; ///< the layer has them
  /// describeReference() of the reference.
  std::string reference;
  /// Where the reference came from (ReferenceSetup::origin).
  std::string referenceOrigin;
  /// With --inputs: the golden's path and positions (its history lengths
  /// are the summary's kvLens); empty otherwise.
  std::string inputs;
  std::vector<int32_t> positions;
  int64_t maxPages = 1;  ///< the block-table width
  int64_t maxSplits = 0; ///< 0: the function takes no num_splits
  bool dryRun = false;
  /// Notes on the cache layout, one indented line each.
  std::vector<std::string> notes;
};

/// The first lines of a run's log: "fusion-run: PTX + MANIFEST, function
/// ...", the model, the reference and tolerance, the run's shape.
std::string runHeader(const RunSummary &s, const RunHeader &h);

/// The JSON summary of `s` (indented by 2, keys in a fixed order;
/// us_per_layer_step and its _min are null without timing, device in a dry
/// run).
std::string summaryJson(const RunSummary &s);

/// Writes summaryJson(s) to `path`, or to `log` for "-" (then "wrote PATH"
/// goes to `log`). Throws Error when the file cannot be written.
void writeSummary(const std::string &path, const RunSummary &s,
                  std::ostream &log);

/// Writes the last step of a run to the .safetensors file `path`: the
/// outputs `got`, the references' (ref_f64.*, ref_f32.output), the step's
/// inputs, and metadata from `s` (and `weightsOrigin`).
void writeOutputFile(const std::string &path, const RunSummary &s,
                     const std::string &weightsOrigin, const HostStep &last,
                     const StepOutputs &got, const RefOutputs &r64,
                     const RefOutputs &r32);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_REPORT_H
