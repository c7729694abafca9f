//===- Report.cpp - fusion-run's JSON summary and output file -------------===//

#include "fusion/tooling/Report.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace fusion::tooling {

using namespace fusion::runtime;

namespace {

/// "a,b,c".
template <typename T>
std::string commaList(const std::vector<T> &v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

/// The "  run: ..." line.
std::string runLine(const RunSummary &s, const RunHeader &h) {
  std::ostringstream os;
  os << "  run: batch " << s.batch << ", history";
  bool mixed = std::adjacent_find(s.kvLens.begin(), s.kvLens.end(),
                                  std::not_equal_to<>()) != s.kvLens.end();
  if (!h.inputs.empty())
    os << " lengths " << commaList(s.kvLens) << " and positions "
       << commaList(h.positions) << " from " << h.inputs;
  else if (mixed)
    os << " lengths " << commaList(s.kvLens);
  else
    os << " length " << s.kvLens[0];
  os << ", " << s.steps << " step(s), " << s.numPages << " pages of "
     << s.pageSize << " tokens, block-table width " << h.maxPages;
  if (h.maxSplits)
    os << ", num_splits " << s.numSplits << " (max " << h.maxSplits << ")";
  os << (s.graph ? ", CUDA graph" : ", direct launches");
  if (!s.clusters)
    os << ", no thread-block clusters";
  if (s.layers > 1 && !h.dryRun)
    os << ", timed over " << s.layers << " layer copies";
  os << "\n";
  for (const std::string &note : h.notes)
    os << "    " << note << "\n";
  return os.str();
}

} // namespace

std::string runHeader(const RunSummary &s, const RunHeader &h) {
  std::ostringstream os;
  os << "fusion-run: " << s.ptx << " + " << s.manifest << ", function "
     << s.function << " (" << s.kernels << " kernels";
  if (!s.strategy.empty())
    os << ", strategy " << s.strategy;
  os << ")\n";
  os << "  model: " << dtypeName(s.dtype) << ", hidden " << s.hidden
     << ", heads " << s.numHeads << "/" << s.numKVHeads << ", head_dim "
     << s.headDim << ", page " << s.pageSize << (h.qkvBias ? ", qkv bias" : "")
     << (h.residual ? ", residual" : "") << "\n";
  os << "  reference: " << h.reference << " (from " << h.referenceOrigin
     << "), tolerance " << sci(s.tolerance) << " relative L2 vs fp64\n";
  return os.str() + runLine(s, h);
}

std::string summaryJson(const RunSummary &s) {
  using Json = nlohmann::ordered_json;
  Json j;
  j["ptx"] = s.ptx;
  j["manifest"] = s.manifest;
  j["function"] = s.function;
  j["strategy"] = s.strategy;
  j["kernels"] = s.kernels;
  j["dtype"] = dtypeName(s.dtype);
  j["hidden"] = s.hidden;
  j["num_heads"] = s.numHeads;
  j["num_kv_heads"] = s.numKVHeads;
  j["head_dim"] = s.headDim;
  j["page_size"] = s.pageSize;
  j["batch"] = s.batch;
  j["kv_lens"] = s.kvLens;
  j["steps"] = s.steps;
  j["num_splits"] = s.numSplits;
  j["num_pages"] = s.numPages;
  j["graph"] = s.graph;
  j["clusters"] = s.clusters;
  j["layers"] = s.layers;
  j["iters"] = s.iters;
  j["warmup"] = s.warmup;
  j["device"] = s.device ? Json(*s.device) : Json(nullptr);
  j["result"] = s.pass ? "pass" : "mismatch";
  j["tolerance"] = s.tolerance;
  Json worst = Json::object();
  for (const auto &[name, rel] : s.relErrorVsF64)
    worst[name] = rel;
  j["rel_error_vs_f64"] = worst;
  j["us_per_layer_step"] = s.timing ? Json(s.timing->medianUs) : Json(nullptr);
  j["us_per_layer_step_min"] = s.timing ? Json(s.timing->minUs) : Json(nullptr);
  return j.dump(2);
}

void writeSummary(const std::string &path, const RunSummary &s,
                  std::ostream &log) {
  if (path == "-") {
    log << summaryJson(s) << "\n";
    return;
  }
  std::ofstream os(path);
  os << summaryJson(s) << "\n";
  if (!os)
    throw Error("cannot write --json file " + path + ": " +
                std::strerror(errno));
  log << "wrote " << path << "\n";
}

void writeOutputFile(const std::string &path, const RunSummary &s,
                     const std::string &weightsOrigin, const HostStep &last,
                     const StepOutputs &got, const RefOutputs &r64,
                     const RefOutputs &r32) {
  const int64_t B = s.batch, H = s.hidden, Hq = s.numHeads, Hkv = s.numKVHeads,
                D = s.headDim;
  std::string dt(safetensorsDTypeName(s.dtype));
  std::vector<TensorRef> t = {
      {"output", dt, {B, Hq, D}, got.out.data()},
      {"ref_f64.output", dt, {B, Hq, D}, r64.out.data()},
      {"ref_f32.output", dt, {B, Hq, D}, r32.out.data()},
      {"k_new", dt, {B, Hkv, D}, got.kNew.data()},
      {"v_new", dt, {B, Hkv, D}, got.vNew.data()},
      {"ref_f64.k_new", dt, {B, Hkv, D}, r64.k.data()},
      {"ref_f64.v_new", dt, {B, Hkv, D}, r64.v.data()},
      {"x", dt, {B, H}, last.x.data()},
      {"positions", "I32", {B}, last.view.positions.data()},
      {"seq_lens", "I32", {B}, last.view.seq_lens.data()},
      {"block_table",
       "I32",
       {B, last.view.max_pages},
       last.view.block_table.data()},
  };
  if (!got.residualOut.empty()) {
    t.push_back({"residual_out", dt, {B, H}, got.residualOut.data()});
    t.push_back({"ref_f64.residual_out", dt, {B, H}, r64.residualOut.data()});
  }
  if (!last.residual.empty())
    t.push_back({"residual", dt, {B, H}, last.residual.data()});
  std::map<std::string, std::string> meta = {
      {"ptx", s.ptx},
      {"manifest", s.manifest},
      {"function", s.function},
      {"weights", weightsOrigin},
      {"batch", std::to_string(B)},
      {"steps", std::to_string(s.steps)},
      {"num_splits", std::to_string(s.numSplits)},
      {"graph", s.graph ? "true" : "false"},
      {"result", s.pass ? "pass" : "mismatch"},
  };
  if (s.timing)
    meta["us_per_step"] = std::to_string(s.timing->medianUs);
  if (!s.device)
    meta["dry_run"] = "true";
  writeSafetensors(path, t, meta);
}

} // namespace fusion::tooling
