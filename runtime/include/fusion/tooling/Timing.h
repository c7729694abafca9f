//===- Timing.h - the timing summary of fusion-run --------------*- C++ -*-===//
//
// Microseconds per layer-step from the CUDA event intervals of the timed
// replays (LayerTimer.h runs them), and the report line.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_TIMING_H
#define FUSION_TOOLING_TIMING_H

#include <cstdint>
#include <string>
#include <vector>

namespace fusion::tooling {

/// Microseconds per layer-step over the timed replays.
struct Timing {
  double medianUs = 0, minUs = 0;
};

/// The median (the upper one of an even count) and the minimum of
/// `replayMs` (milliseconds per replay, at least one) in microseconds per
/// layer-step, a replay running `layers` layer-steps.
Timing summarizeReplays(std::vector<double> replayMs, int64_t layers);

/// "timing: 12.34 us/step (median of 100 graph replays of 8 layer copies
/// each, back to back; min 12.00)".
std::string timingLine(const Timing &t, int64_t iters, bool graph,
                       int64_t layers);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_TIMING_H
