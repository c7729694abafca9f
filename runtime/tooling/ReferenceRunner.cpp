//===- ReferenceRunner.cpp - the CPU reference of a compiled layer --------===//

#include "fusion/tooling/ReferenceRunner.h"

#include "fusion/runtime/Error.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>
#include <thread>

namespace fusion::tooling {

using namespace fusion::runtime;

std::vector<std::string> configMismatches(const ref::FrontHalfConfig &ops,
                                          const ref::FrontHalfConfig &cfg) {
  std::vector<std::string> out;
  auto differ = [&](const char *what, double a, double b) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s: kernels %.17g, config %.17g", what, a,
                  b);
    out.push_back(buf);
  };
  auto size = [&](const char *what, int64_t a, int64_t b) {
    if (a != b)
      differ(what, static_cast<double>(a), static_cast<double>(b));
  };
  auto fp32 = [&](const char *what, double a, double b) {
    if (static_cast<float>(a) != static_cast<float>(b))
      differ(what, a, b);
  };
  size("num_attention_heads", ops.dims.numQHeads, cfg.dims.numQHeads);
  size("num_key_value_heads", ops.dims.numKVHeads, cfg.dims.numKVHeads);
  size("head_dim", ops.dims.headDim, cfg.dims.headDim);
  size("hidden_size", ops.hidden, cfg.hidden);
  fp32("rms_norm_eps", ops.normOptions.eps, cfg.normOptions.eps);
  fp32("rope_theta", ops.rope.theta, cfg.rope.theta);
  size("rotary_dim", ops.rope.rotaryDim, cfg.rope.rotaryDim);
  if (ops.rope.llama3.has_value() != cfg.rope.llama3.has_value())
    out.push_back(std::string("llama3 rope scaling: kernels ") +
                  (ops.rope.llama3 ? "yes" : "no") + ", config " +
                  (cfg.rope.llama3 ? "yes" : "no"));
  else if (ops.rope.llama3) {
    fp32("rope_scaling.factor", ops.rope.llama3->factor,
         cfg.rope.llama3->factor);
    fp32("rope_scaling.low_freq_factor", ops.rope.llama3->lowFreqFactor,
         cfg.rope.llama3->lowFreqFactor);
    fp32("rope_scaling.high_freq_factor", ops.rope.llama3->highFreqFactor,
         cfg.rope.llama3->highFreqFactor);
    size("rope_scaling.original_max_position_embeddings",
         ops.rope.llama3->originalMaxPosition,
         cfg.rope.llama3->originalMaxPosition);
  }
  return out;
}

ReferenceSetup resolveReference(const FrontHalfSignature &sig,
                                const std::optional<ModelConfig> &config,
                                const std::string &configPath,
                                const std::string &manifestPath) {
  if (!sig.reference)
    throw InvalidArgumentError(
        manifestPath +
        " lists no op attributes for its kernels; the CPU reference is built "
        "from them (recompile the model with fusion-compile)");
  ReferenceSetup r;
  r.config = *sig.reference;
  r.origin = "the manifest's op attributes";
  if (config) {
    std::vector<std::string> diffs =
        configMismatches(r.config, config->frontHalf(sig.dtype));
    if (!diffs.empty()) {
      std::string all;
      for (const std::string &d : diffs)
        all += "\n  " + d;
      throw InvalidArgumentError("the compiled kernels do not match " +
                                 configPath + ":" + all);
    }
    r.origin += " (matches " + configPath + ")";
  }
  r.config.dtype = sig.dtype;
  r.config.hidden = sig.hidden;
  r.config.dims = sig.dims;
  return r;
}

std::string describeReference(const ref::FrontHalfConfig &c) {
  std::ostringstream os;
  os << (c.norm == ref::NormKind::RMSNorm ? "rmsnorm" : "layernorm") << " eps "
     << c.normOptions.eps << (c.normOptions.unit_offset ? " (1 + w)" : "")
     << ", rope "
     << (c.rope.pairing == ref::RopePairing::NeoX ? "neox" : "gptj")
     << " theta " << c.rope.theta;
  if (c.rope.rotaryDim)
    os << " rotary_dim " << c.rope.rotaryDim;
  if (c.rope.llama3)
    os << " llama3 x" << c.rope.llama3->factor;
  if (c.attention.scale)
    os << ", scale " << *c.attention.scale;
  return os.str();
}

const std::vector<uint16_t> &
RefOutputs::byGoldenName(const std::string &name) const {
  if (name == "normed")
    return normed;
  if (name == "q")
    return qProj;
  if (name == "k")
    return kProj;
  if (name == "q_rot")
    return qRot;
  if (name == "k_rot")
    return k;
  if (name == "v")
    return v;
  return out;
}

namespace {

/// Runs the reference on row (sequence) `b` of the step `s` into `r`.
void runRow(const ref::FrontHalfConfig &cfg, const Weights &w,
            const HostStep &s, const ref::PagedKVCache &cache, bool hasResidual,
            ref::Precision precision, int64_t b, RefOutputs &r) {
  const int64_t H = cfg.hidden, Hq = cfg.dims.numQHeads,
                Hkv = cfg.dims.numKVHeads, D = cfg.dims.headDim;
  ref::FrontHalfInputs in;
  in.x = s.x.data() + b * H;
  in.residual = hasResidual ? s.residual.data() + b * H : nullptr;
  in.normWeight = w.norm.data();
  in.qkvWeight = w.qkv.data();
  in.qkvBias = w.bias.empty() ? nullptr : w.bias.data();
  in.positions = s.view.positions.data() + b;
  in.seqLens = s.view.seq_lens.data() + b;
  in.blockTable = {s.view.block_table.data() + b * s.view.max_pages,
                   s.view.max_pages};
  ref::FrontHalfOutputs out;
  out.attnOut = r.out.data() + b * Hq * D;
  out.residualOut = hasResidual ? r.residualOut.data() + b * H : nullptr;
  out.k = r.k.data() + b * Hkv * D;
  out.v = r.v.data() + b * Hkv * D;
  out.normed = r.normed.data() + b * H;
  out.q = r.qRot.data() + b * Hq * D;
  out.qProj = r.qProj.data() + b * Hq * D;
  out.kProj = r.kProj.data() + b * Hkv * D;
  ref::decodeLayerFrontHalf(cfg, 1, in, cache, out, precision);
}

} // namespace

RefOutputs runReference(const ref::FrontHalfConfig &cfg, const Weights &w,
                        const HostStep &s, const ref::PagedKVCache &cache,
                        bool hasResidual, ref::Precision precision) {
  const int64_t B = s.view.batch, H = cfg.hidden;
  const int64_t Hq = cfg.dims.numQHeads, Hkv = cfg.dims.numKVHeads,
                D = cfg.dims.headDim;
  RefOutputs r;
  r.out.resize(B * Hq * D);
  r.residualOut.resize(B * H);
  r.k.resize(B * Hkv * D);
  r.v.resize(B * Hkv * D);
  r.normed.resize(B * H);
  r.qProj.resize(B * Hq * D);
  r.qRot.resize(B * Hq * D);
  r.kProj.resize(B * Hkv * D);
  // Rows are independent (distinct cache pages): split them over threads.
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<int64_t>(threads, B));
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (int64_t b = t; b < B; b += threads)
          runRow(cfg, w, s, cache, hasResidual, precision, b, r);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (std::thread &t : pool)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
  return r;
}

} // namespace fusion::tooling
