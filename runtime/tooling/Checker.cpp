//===- Checker.cpp - fusion-run's checks of a step's outputs --------------===//

#include "fusion/tooling/Checker.h"

#include "fusion/contract/Contract.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace fusion::tooling {

using namespace fusion::runtime;

namespace {

/// printf into a string.
__attribute__((format(printf, 1, 2))) std::string format(const char *fmt, ...) {
  va_list args, copy;
  va_start(args, fmt);
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string s(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(s.data(), s.size(), fmt, args);
  va_end(args);
  s.pop_back();
  return s;
}

/// " | 3 NaN/inf", or "" for none.
std::string nonFiniteNote(int64_t n) {
  return n ? " | " + std::to_string(n) + " NaN/inf" : "";
}

} // namespace

std::string sci(double v) { return format("%.2e", v); }

double defaultTolerance(DType dtype) {
  return dtype == DType::F16 ? 2e-3 : 1e-2;
}

std::vector<Intermediate> findIntermediates(const Model &model,
                                            const FrontHalfSignature &sig) {
  std::vector<Intermediate> out;
  for (size_t i = 0; i < model.internalBuffers().size(); ++i) {
    const InternalBuffer &b = model.internalBuffers()[i];
    if (b.kind != ParamKind::Output)
      continue;
    bool rope = false, proj = false;
    for (const ManifestKernel *k : model.kernels())
      if (k->index == b.kernel)
        for (const ManifestOp &op : k->ops) {
          rope |= op.name == "rope";
          proj |= op.name == "qkv_proj";
        }
    Intermediate m;
    m.buffer = static_cast<int>(i);
    m.source = "kernel " + std::to_string(b.kernel) + " output " + b.role;
    const int64_t q = sig.dims.numQHeads * sig.dims.headDim,
                  kv = sig.dims.numKVHeads * sig.dims.headDim;
    if (b.role == contract::role::kNormed) {
      m.name = "normed";
      m.rowElems = sig.hidden;
    } else if (b.role == "query" && (rope || proj)) {
      m.name = rope ? "q_rot" : "q";
      m.rowElems = q;
    } else if (b.role == "key" && (rope || proj)) {
      m.name = rope ? "k_rot" : "k";
      m.rowElems = kv;
    } else if (b.role == "value" && proj) {
      m.name = "v";
      m.rowElems = kv;
    } else {
      continue;
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<OutputRow> outputRows(const FrontHalfSignature &sig,
                                  const StepOutputs &got, const RefOutputs &r64,
                                  const RefOutputs &r32) {
  std::vector<OutputRow> rows = {{"output", &got.out, &r64.out, &r32.out}};
  if (sig.residualOut >= 0)
    rows.push_back(
        {"residual_out", &got.residualOut, &r64.residualOut, &r32.residualOut});
  rows.push_back({"k_new", &got.kNew, &r64.k, &r32.k});
  rows.push_back({"v_new", &got.vNew, &r64.v, &r32.v});
  return rows;
}

std::string stepHeading(int64_t step, const BatchView &view) {
  auto [lo, hi] =
      std::minmax_element(view.positions.begin(), view.positions.end());
  std::string s = "step " + std::to_string(step) + " (position" +
                  (view.batch > 1 ? "s " : " ") + std::to_string(*lo);
  if (*hi != *lo)
    s += ".." + std::to_string(*hi);
  return s + "):";
}

std::string StepChecker::check(const std::vector<OutputRow> &rows) {
  std::string lines;
  for (const OutputRow &r : rows) {
    const int64_t n = static_cast<int64_t>(r.out->size());
    ErrorStats g = compareTensors(dtype_, r.out->data(), r.ref64->data(), n);
    ErrorStats g32 = compareTensors(dtype_, r.out->data(), r.ref32->data(), n);
    ErrorStats base =
        compareTensors(dtype_, r.ref32->data(), r.ref64->data(), n);
    bool ok = g.nonFinite == 0 && g.rel < tol_;
    pass_ &= ok;
    auto worst = std::find_if(worstRel_.begin(), worstRel_.end(),
                              [&](const auto &w) { return w.first == r.name; });
    if (worst == worstRel_.end())
      worstRel_.emplace_back(r.name, g.rel);
    else
      worst->second = std::max(worst->second, g.rel);
    lines += format("  %-13s vs fp64: max|d| %s rel %s | vs fp32: max|d| %s "
                    "rel %s | fp32 ref vs fp64: rel %s%s  %s\n",
                    r.name.c_str(), sci(g.maxAbs).c_str(), sci(g.rel).c_str(),
                    sci(g32.maxAbs).c_str(), sci(g32.rel).c_str(),
                    sci(base.rel).c_str(), nonFiniteNote(g.nonFinite).c_str(),
                    ok ? "ok" : "MISMATCH");
  }
  return lines;
}

std::vector<GoldenRow> goldenRows(const GoldenDecodeStep &golden,
                                  const FrontHalfSignature &sig,
                                  const StepOutputs &got, const RefOutputs &r64,
                                  const RefOutputs &r32) {
  std::vector<GoldenRow> rows = {
      {"attn_output", "function result " + std::to_string(sig.output), &got.out,
       &r64.out, &r32.out, &golden.tensor("attn_output"),
       &golden.attnOutputF64},
      {"k_rot", "K cache rows written", &got.kNew, &r64.k, &r32.k,
       &golden.tensor("k_rot")},
      {"v", "V cache rows written", &got.vNew, &r64.v, &r32.v,
       &golden.tensor("v")}};
  for (const Intermediate &m : got.intermediates)
    rows.push_back({m.name, m.source, &m.values, &r64.byGoldenName(m.name),
                    &r32.byGoldenName(m.name), &golden.tensor(m.name)});
  if (sig.residualOut >= 0)
    rows.push_back({"residual_out", "vs hidden_states (x + 0)",
                    &got.residualOut, &r64.residualOut, &r32.residualOut,
                    &golden.hiddenStates});
  return rows;
}

namespace {

/// The per-sequence errors of row `r` against float64, and transformers'
/// own: "    attn_output vs float64 per sequence: ... (transformers' own:
/// ...)".
std::string perSequenceLine(const GoldenDecodeStep &g, const GoldenRow &r,
                            const std::vector<double> &out) {
  const int64_t B = g.batch, n = static_cast<int64_t>(out.size());
  std::vector<ErrorStats> seq =
      compareRows(out.data(), r.golden64->data(), B, n / B);
  std::vector<double> hfOut = toDoubles(g.dtype, r.golden->data(), n);
  std::vector<ErrorStats> hfSeq =
      compareRows(hfOut.data(), r.golden64->data(), B, n / B);
  std::string line = "    " + r.tensor + " vs float64 per sequence:";
  for (const ErrorStats &e : seq)
    line += " " + sci(e.rel);
  line += " (transformers' own:";
  for (const ErrorStats &e : hfSeq)
    line += " " + sci(e.rel);
  return line + ")\n";
}

} // namespace

bool checkGolden(const GoldenDecodeStep &g, const std::vector<GoldenRow> &rows,
                 double tol, std::ostream &os) {
  const int64_t B = g.batch;
  auto cell = [](const ErrorStats &e) {
    return sci(e.rel) + " (" + sci(e.maxAbs) + ")";
  };
  os << format("golden check, %s: relative L2 error of the worst sequence "
               "(max |d|); bound %s against float64 (the CPU fp64 reference, "
               "and attn_output_f64)\n",
               g.path.c_str(), sci(tol).c_str());
  os << format("  %-13s %-27s %-22s %-22s %-22s %-22s\n", "tensor", "source",
               "vs transformers", "vs golden float64", "vs CPU fp64",
               "vs CPU fp32");
  bool pass = true;
  for (const GoldenRow &r : rows) {
    const int64_t n = static_cast<int64_t>(r.out->size());
    std::vector<double> out = toDoubles(g.dtype, r.out->data(), n);
    ErrorStats hf = worstRow(out, toDoubles(g.dtype, r.golden->data(), n), B);
    ErrorStats r64 = worstRow(out, toDoubles(g.dtype, r.ref64->data(), n), B);
    ErrorStats r32 = worstRow(out, toDoubles(g.dtype, r.ref32->data(), n), B);
    std::string f64 = "-";
    bool ok = hf.nonFinite == 0 && r64.rel < tol;
    if (r.golden64) {
      ErrorStats e = worstRow(out, *r.golden64, B);
      f64 = cell(e);
      ok &= e.rel < tol;
    }
    pass &= ok;
    os << format("  %-13s %-27s %-22s %-22s %-22s %-22s%s  %s\n",
                 r.tensor.c_str(), r.source.c_str(), cell(hf).c_str(),
                 f64.c_str(), cell(r64).c_str(), cell(r32).c_str(),
                 nonFiniteNote(hf.nonFinite).c_str(), ok ? "ok" : "MISMATCH");
    if (r.golden64)
      os << perSequenceLine(g, r, out);
  }
  os.flush();
  return pass;
}

} // namespace fusion::tooling
