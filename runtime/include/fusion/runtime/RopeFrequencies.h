//===- RopeFrequencies.h - RoPE inverse frequencies in fp32 -----*- C++ -*-===//
//
// The one implementation of the fp32 table of RoPE inverse frequencies
// (radians per position) that the kernels use. The compiler's emitters embed
// it in the PTX (lib/Conversion/FusionToGPU, computeRopeInvFreq) and the CPU
// reference rotates with it (Reference.cpp, ropeInvFreq with Precision::F32),
// so both read the same floats.
//
// Header-only and dependency-free (the C++ standard library only), so that
// both the runtime, which never depends on MLIR, and the compiler include it.
//
// Its callers compile it without fused multiply-add contraction: the CPU
// reference passes -ffp-contract=off, and the compiler targets baseline
// x86-64, which has no FMA instructions. (`a * b + c` is two roundings.)
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_ROPEFREQUENCIES_H
#define FUSION_RUNTIME_ROPEFREQUENCIES_H

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace fusion::runtime {

/// Llama-3.1 frequency scaling (Hugging Face rope_type "llama3",
/// _compute_llama3_parameters). The defaults are Llama 3.1's.
struct Llama3RopeScaling {
  double factor = 8.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPosition = 8192;
};

/// The rotaryDim/2 inverse frequencies of RoPE in fp32, step by step as
/// Hugging Face computes them in fp32 tensors:
///
///   inv_freq[i] = 1.0f / float(theta) ** (float(2i) / float(rotaryDim))
///
/// (`1.0 / (base ** (arange(0, dim, 2).float() / dim))`, the power correctly
/// rounded to fp32), then, with `llama3` scaling, as
/// _compute_llama3_parameters does (x / t = (1/t) * x; its Python-float
/// constants orig / low_freq_factor, orig / high_freq_factor and
/// high_freq_factor - low_freq_factor computed in double, then used as fp32):
///
///   wavelen = (1 / inv) * float(2 pi)
///   wavelen > orig / low_freq_factor  -> inv / factor
///   wavelen < orig / high_freq_factor -> inv
///   otherwise s = ((1 / wavelen) * orig - low) / (high - low),
///             (1 - s) * inv / factor + s * inv.
///
/// Preconditions (checked by the callers, not here): rotaryDim even and
/// >= 2, theta > 0, and for llama3 factor > 0, 0 < low < high.
inline std::vector<float>
ropeInvFreqF32(double theta, int64_t rotaryDim,
               const std::optional<Llama3RopeScaling> &llama3 = std::nullopt) {
  constexpr double kTwoPi = 2.0 * 3.14159265358979323846;
  const float thetaF = static_cast<float>(theta);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(rotaryDim / 2));
  for (int64_t i = 0; i < rotaryDim / 2; ++i) {
    const float exponent =
        static_cast<float>(2 * i) / static_cast<float>(rotaryDim);
    // theta ** exponent correctly rounded to fp32.
    const float power = static_cast<float>(
        std::pow(static_cast<double>(thetaF), static_cast<double>(exponent)));
    float inv = 1.0f / power;
    if (llama3) {
      const Llama3RopeScaling &s = *llama3;
      const double origD = static_cast<double>(s.originalMaxPosition);
      const float factor = static_cast<float>(s.factor);
      const float low = static_cast<float>(s.lowFreqFactor);
      const float orig = static_cast<float>(origD);
      const float lowWavelen = static_cast<float>(origD / s.lowFreqFactor);
      const float highWavelen = static_cast<float>(origD / s.highFreqFactor);
      const float span = static_cast<float>(s.highFreqFactor - s.lowFreqFactor);
      const float wavelen = (1.0f / inv) * static_cast<float>(kTwoPi);
      if (wavelen > lowWavelen) {
        inv = inv / factor;
      } else if (!(wavelen < highWavelen)) {
        const float smooth = ((1.0f / wavelen) * orig - low) / span;
        inv = (1.0f - smooth) * inv / factor + smooth * inv;
      }
    }
    out.push_back(inv);
  }
  return out;
}

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_ROPEFREQUENCIES_H
