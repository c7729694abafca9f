//===- Timing.cpp - the timing summary of fusion-run ----------------------===//

#include "fusion/tooling/Timing.h"

#include <algorithm>
#include <cstdio>

namespace fusion::tooling {

Timing summarizeReplays(std::vector<double> replayMs, int64_t layers) {
  for (double &t : replayMs)
    t = 1000.0 * t / static_cast<double>(layers);
  std::sort(replayMs.begin(), replayMs.end());
  return Timing{replayMs[replayMs.size() / 2], replayMs.front()};
}

std::string timingLine(const Timing &t, int64_t iters, bool graph,
                       int64_t layers) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "timing: %.2f us/step (median of %lld %s of %lld layer "
                "cop%s each, back to back; min %.2f)",
                t.medianUs, static_cast<long long>(iters),
                graph ? "graph replays" : "direct-launch replays",
                static_cast<long long>(layers), layers > 1 ? "ies" : "y",
                t.minUs);
  return buf;
}

} // namespace fusion::tooling
