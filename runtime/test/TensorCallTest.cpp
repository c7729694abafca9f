//===- TensorCallTest.cpp - checkCallTensors
//-------------------------------===//
//
// The sizes and checks of a call on caller tensors, on the tiny front half
// (runtime/test/data/tiny_decode: x, residual [batch, 64]; norm_w [64];
// qkv_w [128, 64]; positions, seq_lens [batch]; block_table
// [batch, max_pages]; k_cache, v_cache [num_pages, 4, 2, 16]; results
// output [batch, 4, 16] and residual_out [batch, 64]). The expected shapes
// are written out here from those manifest shapes.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/TensorCall.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/Model.h"

#include "TestUtil.h"

using namespace fusion::runtime;
using namespace fusion::runtime::test;

namespace {

/// Row-major contiguous strides of `shape`.
std::vector<int64_t> contiguous(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

DeviceTensor tensor(uint64_t address, ElemType dtype,
                    std::vector<int64_t> shape) {
  std::vector<int64_t> strides = contiguous(shape);
  return DeviceTensor{address, dtype, std::move(shape), std::move(strides), 0};
}

struct Call {
  std::vector<DeviceTensor> arguments, results;
};

/// A valid call of the tiny front half: batch 3, max_pages 5, num_pages 7.
Call validCall() {
  const ElemType h = ElemType::F16, i = ElemType::I32;
  Call c;
  c.arguments = {
      tensor(0x10000, h, {3, 64}),      tensor(0x20000, h, {3, 64}),
      tensor(0x30000, h, {64}),         tensor(0x40000, h, {128, 64}),
      tensor(0x50000, i, {3}),          tensor(0x60000, i, {3}),
      tensor(0x70000, i, {3, 5}),       tensor(0x80000, h, {7, 4, 2, 16}),
      tensor(0x90000, h, {7, 4, 2, 16})};
  c.results = {tensor(0xa0000, h, {3, 4, 16}), tensor(0xb0000, h, {3, 64})};
  return c;
}

std::string failure(const Call &c, int device = 0) {
  Model m = Model::load(dataPath("tiny_decode.manifest.json"));
  return EXPECT_THROW_MSG(InvalidArgumentError,
                          checkCallTensors(m, c.arguments, c.results, device));
}

} // namespace

TEST(TensorCall, ReadsTheSizesFromTheShapes) {
  Model m = Model::load(dataPath("tiny_decode.manifest.json"));
  Call c = validCall();
  Symbols s = checkCallTensors(m, c.arguments, c.results, 0);
  EXPECT_EQ(s.batch, 3);
  EXPECT_EQ(s.max_pages, 5);
  EXPECT_EQ(s.num_pages, 7);
  EXPECT_EQ(s.num_splits, 1);
}

TEST(TensorCall, SizeOneDimensionsMayHaveAnyStride) {
  Model m = Model::load(dataPath("tiny_decode.manifest.json"));
  Call c = validCall();
  // A batch-1 row as torch slices it out of a larger tensor: x[2:3].
  c.arguments[0] = tensor(0x10000, ElemType::F16, {1, 64});
  c.arguments[0].strides = {4096, 1};
  c.arguments[1] = tensor(0x20000, ElemType::F16, {1, 64});
  c.arguments[1].strides = {999, 1};
  for (int a : {4, 5})
    c.arguments[a] = tensor(0x50000 + 0x10000 * (a - 4), ElemType::I32, {1});
  c.arguments[6] = tensor(0x70000, ElemType::I32, {1, 5});
  c.results = {tensor(0xa0000, ElemType::F16, {1, 4, 16}),
               tensor(0xb0000, ElemType::F16, {1, 64})};
  EXPECT_EQ(checkCallTensors(m, c.arguments, c.results, 0).batch, 1);
}

TEST(TensorCall, NamesTheTensorThatDiffers) {
  Call c = validCall();
  c.arguments[3].dtype = ElemType::BF16;
  std::string msg = failure(c);
  EXPECT_CONTAINS(msg, "argument \"qkv_w\" (qkv_weight)");
  EXPECT_CONTAINS(msg, "dtype bf16, the compiled function takes f16");

  c = validCall();
  c.arguments[3] = tensor(0x40000, ElemType::F16, {128, 65});
  EXPECT_CONTAINS(failure(c), "shape [128, 65]; the compiled function takes "
                              "[128, 64] (dimension 1)");

  c = validCall();
  c.arguments[2] = tensor(0x30000, ElemType::F16, {1, 64});
  EXPECT_CONTAINS(failure(c), "argument \"norm_w\" (norm_weight) of "
                              "\"decode_layer\": shape [1, 64] with 2 strides");

  c = validCall();
  c.results[1] = tensor(0xb0000, ElemType::F16, {4, 64});
  msg = failure(c);
  EXPECT_CONTAINS(msg, "result 1 (residual_out)");
  EXPECT_CONTAINS(msg, "gives batch = 4; argument \"x\" (input) of "
                       "\"decode_layer\" gave 3");
}

TEST(TensorCall, RefusesStridedViews) {
  // K of a [num_pages, 2, page, kv_heads, head_dim] cache (FlashInfer's
  // NHD layout with K and V interleaved per page): a page stride of 256.
  Call c = validCall();
  c.arguments[7].strides = {256, 32, 16, 1};
  std::string msg = failure(c);
  EXPECT_CONTAINS(msg, "argument \"k_cache\" (key_cache)");
  EXPECT_CONTAINS(msg, "dimension 0 has stride 256, expected 128");
  // A transposed weight.
  c = validCall();
  c.arguments[3].strides = {1, 128};
  EXPECT_CONTAINS(failure(c), "not row-major contiguous");
}

TEST(TensorCall, ResultsGetMemoryOfTheirOwn) {
  // The output [3, 4, 16] f16 is 384 bytes: at 0x80000 + 256 it overlaps
  // k_cache [7, 4, 2, 16] (0x80000, 1792 bytes).
  Call c = validCall();
  c.results[0].address = 0x80000 + 256;
  EXPECT_CONTAINS(failure(c), "result 0 (output) of \"decode_layer\" overlaps "
                              "argument \"k_cache\" (key_cache)");
  c = validCall();
  c.results[1].address = c.results[0].address + 256;
  EXPECT_CONTAINS(failure(c), "result 0 (output) of \"decode_layer\" "
                              "overlaps result 1 (residual_out)");
  // Adjacent is fine: residual_out right after the output's 384 bytes.
  Model m = Model::load(dataPath("tiny_decode.manifest.json"));
  c = validCall();
  c.results[1].address = c.results[0].address + 384;
  EXPECT_EQ(checkCallTensors(m, c.arguments, c.results, 0).batch, 3);
}

TEST(TensorCall, RefusesBadAddressesDevicesAndCounts) {
  Call c = validCall();
  c.arguments[4].address = 0x50004;
  EXPECT_CONTAINS(failure(c), "device address 327684 is not 16-byte aligned");
  c = validCall();
  c.results[0].address = 0;
  EXPECT_CONTAINS(failure(c), "result 0 (output) of \"decode_layer\": device "
                              "address 0 is null");
  c = validCall();
  EXPECT_CONTAINS(failure(c, /*device=*/1),
                  "on CUDA device 0; the compiled function was loaded on "
                  "device 1");
  c = validCall();
  c.results.pop_back();
  EXPECT_CONTAINS(failure(c), "9 argument and 1 result tensors; the function "
                              "has 9 arguments and 2 results");
  c = validCall();
  c.arguments[6] = tensor(0x70000, ElemType::I32, {3, 0});
  EXPECT_CONTAINS(failure(c), "gives max_pages = 0 (must be >= 1)");
}
