//===- ReferenceRunner.h - the CPU reference of a compiled layer -*- C++
//-*-===//
//
// The reference configuration of the compiled layer (from the manifest's op
// attributes, checked against a config.json, or from the config.json alone)
// and the CPU reference of one decode step over its rows in parallel.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_REFERENCERUNNER_H
#define FUSION_TOOLING_REFERENCERUNNER_H

#include "fusion/runtime/Model.h"
#include "fusion/runtime/ModelConfig.h"
#include "fusion/runtime/Reference.h"
#include "fusion/tooling/StepInputs.h"
#include "fusion/tooling/Weights.h"

#include <optional>
#include <string>
#include <vector>

namespace fusion::tooling {

namespace ref = runtime::ref;

/// Differences between the reference the ops describe and a config.json.
/// Sizes compare exactly; eps, rope_theta and the llama3 factors compare as
/// float32, the precision the kernels use them in (a GGUF-converted
/// config's rms_norm_eps 9.999999747378752e-06 is float32(1e-5)), and print
/// with all their digits ("rope_theta: kernels 500000, config 1000000").
std::vector<std::string> configMismatches(const ref::FrontHalfConfig &ops,
                                          const ref::FrontHalfConfig &cfg);

/// The reference configuration of a compiled layer and where it came from.
struct ReferenceSetup {
  ref::FrontHalfConfig config;
  /// "the manifest's op attributes (matches <config.json>)", or the path.
  std::string origin;
};

/// The reference of `sig`, built from its kernels' op attributes alone (the
/// compiled semantics; every manifest fusion-compile writes lists them). A
/// `config` (read from `configPath`, e.g. a checkpoint's config.json) is only
/// checked against them. Throws InvalidArgumentError when they disagree or
/// when the manifest (`manifestPath`) lists no op attributes.
ReferenceSetup
resolveReference(const runtime::FrontHalfSignature &sig,
                 const std::optional<runtime::ModelConfig> &config,
                 const std::string &configPath,
                 const std::string &manifestPath);

/// One line describing a reference ("rmsnorm eps 1e-05, rope neox theta
/// 500000 llama3 x8").
std::string describeReference(const ref::FrontHalfConfig &c);

/// The reference's outputs of one step, each [B, ...] row-major.
struct RefOutputs {
  std::vector<uint16_t> out, residualOut, k, v;
  /// The intermediates: normed, q and k before and after RoPE.
  std::vector<uint16_t> normed, qProj, kProj, qRot;

  /// The intermediate called `name` in the goldens (docs/goldens.md):
  /// normed, q, k, q_rot, k_rot, v; anything else is the output.
  const std::vector<uint16_t> &byGoldenName(const std::string &name) const;
};

/// Runs the reference of `cfg` with weights `w` on the step `s` at
/// `precision`, appending each sequence's new K/V to `cache`; the rows
/// (sequences) run on parallel threads. `hasResidual`: the layer adds
/// s.residual and writes residualOut.
RefOutputs runReference(const ref::FrontHalfConfig &cfg, const Weights &w,
                        const HostStep &s, const ref::PagedKVCache &cache,
                        bool hasResidual, ref::Precision precision);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_REFERENCERUNNER_H
