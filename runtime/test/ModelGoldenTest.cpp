//===- ModelGoldenTest.cpp - the whole-model reference vs transformers ----===//
//
// ModelReference on the real SmolLM2-135M-Instruct checkpoint (made by
// scripts/get-smollm2.sh; FUSION_SMOLLM2_DIR) against the float64 hidden
// states and logits transformers computes for the same prompt
// (test/golden/smollm2/activations.safetensors, made by
// test/golden/make_smollm2_goldens.py). The reference runs the prompt as
// decode steps (one token at a time through the paged KV cache) in f16 and
// bf16 with fp32 arithmetic, as the kernels do; transformers runs it as one
// float64 forward pass. So this checks, on real activations (|h| reaches
// ~1e4), every op of the layer, the layer wiring, the cache and the
// checkpoint conversion (q/k row order, gate/up packing, tied LM head) at
// once; the tolerances are the 16-bit rounding the reference adds.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Compare.h"
#include "fusion/runtime/Safetensors.h"
#include "fusion/tooling/ModelReference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

using namespace fusion::runtime;
using fusion::tooling::ModelReference;
using fusion::tooling::ModelStepTaps;

namespace {

const char *const kGolden =
    FUSION_GOLDEN_DIR "/smollm2/activations.safetensors";

std::vector<double> readF64(const SafetensorsFile &f, const std::string &name) {
  const TensorInfo &t = f.info(name);
  EXPECT_EQ(t.dtype, "F64") << name;
  std::vector<uint8_t> bytes = f.read(name);
  std::vector<double> out(static_cast<size_t>(t.numElements()));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(double));
  return out;
}

/// ||got - want|| / ||want|| over all elements (Compare.h); a non-finite
/// output fails.
double relativeRms(DType dtype, const std::vector<uint16_t> &got,
                   const std::vector<double> &want) {
  EXPECT_EQ(got.size(), want.size());
  std::vector<double> values = toDoubles(dtype, got.data(), got.size());
  ErrorStats e = compareValues(values.data(), want.data(), want.size());
  EXPECT_EQ(e.nonFinite, 0);
  return e.rel;
}

class SmolLM2Golden : public ::testing::TestWithParam<DType> {};

TEST_P(SmolLM2Golden, ReferenceMatchesTransformersFloat64) {
  const char *dir = std::getenv("FUSION_SMOLLM2_DIR");
  ASSERT_TRUE(dir && *dir)
      << "FUSION_SMOLLM2_DIR is not set (ctest sets it; "
         "the checkpoint comes from scripts/get-smollm2.sh)";
  const DType dt = GetParam();
  Checkpoint ckpt = Checkpoint::open(dir);
  SafetensorsFile golden = SafetensorsFile::open(kGolden);
  std::vector<uint8_t> idBytes = golden.read("input_ids");
  std::vector<int32_t> ids(idBytes.size() / 4);
  std::memcpy(ids.data(), idBytes.data(), idBytes.size());
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t H = ckpt.config.hiddenSize, V = ckpt.config.vocabSize;

  ModelReference model(ckpt.config,
                       loadModelWeights(ckpt.tensors, ckpt.config, dt),
                       /*numPages=*/2, /*pageSize=*/16);
  model.addSequence(7);
  // Rows of the layers the golden saved, gathered over the steps.
  const std::vector<int> layers = {0, 1, 14};
  std::vector<std::vector<uint16_t>> outs(layers.size());
  std::vector<uint16_t> finalNorm, logits;
  for (int64_t t = 0; t < T; ++t) {
    ModelStepTaps taps;
    logits = model.step({7}, {ids[t]}, &taps);
    for (size_t i = 0; i < layers.size(); ++i)
      outs[i].insert(outs[i].end(), taps.layerOutputs[layers[i]].begin(),
                     taps.layerOutputs[layers[i]].end());
    finalNorm.insert(finalNorm.end(), taps.finalNorm.begin(),
                     taps.finalNorm.end());
  }
  ASSERT_EQ(finalNorm.size(), static_cast<size_t>(T * H));
  // Bounds: about 3x the largest error measured (f16: 0.0028, final_norm;
  // bf16: 0.019, final_norm); a wrong op, wiring or weight layout is O(1).
  const double tol = dt == DType::F16 ? 0.01 : 0.06;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string name = "layer_" + std::to_string(layers[i]) + "_output";
    double err = relativeRms(dt, outs[i], readF64(golden, name));
    EXPECT_LT(err, tol) << name;
    std::printf("%s %s: relative rms error %.3g\n",
                std::string(dtypeName(dt)).c_str(), name.c_str(), err);
  }
  double normErr = relativeRms(dt, finalNorm, readF64(golden, "final_norm"));
  EXPECT_LT(normErr, tol);
  std::vector<double> want = readF64(golden, "last_logits");
  double logitErr = relativeRms(dt, logits, want);
  EXPECT_LT(logitErr, tol);
  std::printf("%s final_norm %.3g, last_logits %.3g\n",
              std::string(dtypeName(dt)).c_str(), normErr, logitErr);
  // The next token is the same (the golden's top-2 gap is large here).
  std::vector<double> got = toDoubles(dt, logits.data(), V);
  EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
            std::max_element(want.begin(), want.end()) - want.begin());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SmolLM2Golden,
                         ::testing::Values(DType::F16, DType::BF16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
