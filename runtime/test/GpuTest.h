//===- GpuTest.h - the fixture of the GPU unit tests ------------*- C++ -*-===//
//
// A GoogleTest fixture holding the CUDA context of device 0, or skipping
// the test (GTEST_SKIP, "[  SKIPPED ]", which ctest's SKIP_REGULAR_EXPRESSION
// reports as skipped) when there is no driver or device.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_TEST_GPUTEST_H
#define FUSION_RUNTIME_TEST_GPUTEST_H

#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/Error.h"

#include <gtest/gtest.h>

#include <optional>

namespace fusion::runtime::test {

/// The device context, or a skip when there is none.
class Gpu : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      ctx_.emplace(cuda::Context::open(0));
    } catch (const DeviceUnavailableError &e) {
      GTEST_SKIP() << "no CUDA device: " << e.what();
    }
  }
  const cuda::Context &ctx() const { return *ctx_; }

private:
  std::optional<cuda::Context> ctx_;
};

} // namespace fusion::runtime::test

#endif // FUSION_RUNTIME_TEST_GPUTEST_H
