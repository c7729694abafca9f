//===- TimingTest.cpp - the timing summary of fusion-run ------------------===//

#include "fusion/tooling/Timing.h"

#include <gtest/gtest.h>

using namespace fusion::tooling;

namespace {

TEST(Timing, MedianAndMinimumPerLayerStep) {
  // Replays of 2 layer-steps: 50, 100, 150, 200 us per layer-step; the
  // upper median of an even count.
  Timing t = summarizeReplays({0.3, 0.1, 0.2, 0.4}, 2);
  EXPECT_DOUBLE_EQ(t.medianUs, 150);
  EXPECT_DOUBLE_EQ(t.minUs, 50);
  Timing one = summarizeReplays({0.012}, 1);
  EXPECT_DOUBLE_EQ(one.medianUs, 12);
  EXPECT_DOUBLE_EQ(one.minUs, 12);
}

TEST(Timing, ReportLine) {
  EXPECT_EQ(timingLine({12.346, 12}, 100, true, 8),
            "timing: 12.35 us/step (median of 100 graph replays of 8 layer "
            "copies each, back to back; min 12.00)");
  EXPECT_EQ(timingLine({3, 2.5}, 20, false, 1),
            "timing: 3.00 us/step (median of 20 direct-launch replays of 1 "
            "layer copy each, back to back; min 2.50)");
}

} // namespace
