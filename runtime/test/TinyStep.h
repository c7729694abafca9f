//===- TinyStep.h - the tiny front half's step inputs -----------*- C++ -*-===//
//
// runtime/test/data/tiny_decode (two kernels, pages of 4 tokens): valid
// step inputs and bound argument buffers, shared by the GPU tests
// (CudaTest.cpp) and the mock-driver tests (MockDriverTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_TEST_TINYSTEP_H
#define FUSION_RUNTIME_TEST_TINYSTEP_H

#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/DecodeStep.h"

#include <cstdint>
#include <vector>

namespace fusion::runtime::test {

/// Valid step inputs of the tiny model (pages of 4 tokens) for `batch`
/// rows and block tables of `maxPages`: row b holds one token, the new one,
/// at position 0 of page b.
struct TinyInputs {
  TinyInputs(int64_t batch, int64_t maxPages)
      : pos(batch, 0), lens(batch, 1), table(batch * maxPages, 0) {
    for (int64_t b = 0; b < batch; ++b)
      table[b * maxPages] = static_cast<int32_t>(b);
  }
  StepInputs view() const { return {pos.data(), lens.data(), table.data()}; }
  std::vector<int32_t> pos, lens, table;
};

/// A device buffer for every argument of `step`'s function, sized at its
/// capacity and zeroed, the positions, seq_lens and block_table arguments
/// holding TinyInputs(capacity batch, maxPages): valid inputs for every
/// step of at most that batch with block tables of `maxPages` (the rows of
/// a smaller batch are a prefix). The kernels are the compiler's, so they
/// read these.
inline std::vector<cuda::DeviceBuffer> tinyArguments(const cuda::Context &ctx,
                                                     const DecodeStep &step,
                                                     int64_t maxPages) {
  TinyInputs inputs(step.plan().capacity().maxBatch, maxPages);
  std::vector<cuda::DeviceBuffer> args;
  for (const ManifestArgument &a : step.plan().model().arguments()) {
    args.emplace_back(step.plan().argumentBytes(a.index), a.name);
    args.back().fill(0);
    const std::vector<int32_t> *host = a.role == "positions"     ? &inputs.pos
                                       : a.role == "seq_lens"    ? &inputs.lens
                                       : a.role == "block_table" ? &inputs.table
                                                                 : nullptr;
    if (host)
      args.back().upload(host->data(), host->size() * sizeof(int32_t));
  }
  ctx.synchronize();
  return args;
}

} // namespace fusion::runtime::test

#endif // FUSION_RUNTIME_TEST_TINYSTEP_H
