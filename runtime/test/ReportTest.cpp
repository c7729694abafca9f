//===- ReportTest.cpp - fusion-run's JSON summary and output file ---------===//

#include "TestUtil.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/Safetensors.h"
#include "fusion/tooling/Report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using namespace fusion::tooling;

namespace {

RunSummary summary() {
  RunSummary s;
  s.ptx = "l.ptx";
  s.manifest = "l.json";
  s.function = "layer";
  s.strategy = "decode";
  s.kernels = 3;
  s.hidden = 64;
  s.numHeads = 4;
  s.numKVHeads = 2;
  s.headDim = 16;
  s.pageSize = 4;
  s.batch = 2;
  s.kvLens = {5, 5};
  s.steps = 1;
  s.numSplits = 2;
  s.numPages = 6;
  s.iters = 100;
  s.warmup = 10;
  s.pass = true;
  s.tolerance = 2e-3;
  s.relErrorVsF64 = {{"output", 1e-4}, {"k_new", 2e-4}};
  return s;
}

TEST(Report, SummaryJson) {
  RunSummary s = summary();
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(summaryJson(s));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it)
    keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"ptx",
                                            "manifest",
                                            "function",
                                            "strategy",
                                            "kernels",
                                            "dtype",
                                            "hidden",
                                            "num_heads",
                                            "num_kv_heads",
                                            "head_dim",
                                            "page_size",
                                            "batch",
                                            "kv_lens",
                                            "steps",
                                            "num_splits",
                                            "num_pages",
                                            "graph",
                                            "clusters",
                                            "layers",
                                            "iters",
                                            "warmup",
                                            "device",
                                            "result",
                                            "tolerance",
                                            "rel_error_vs_f64",
                                            "us_per_layer_step",
                                            "us_per_layer_step_min"}));
  EXPECT_EQ(j["dtype"], "f16");
  EXPECT_EQ(j["kv_lens"].get<std::vector<int64_t>>(),
            (std::vector<int64_t>{5, 5}));
  EXPECT_TRUE(j["device"].is_null());
  EXPECT_EQ(j["result"], "pass");
  EXPECT_EQ(j["rel_error_vs_f64"].begin().key(), "output");
  EXPECT_EQ(j["rel_error_vs_f64"]["k_new"], 2e-4);
  EXPECT_TRUE(j["us_per_layer_step"].is_null());
  EXPECT_EQ(j["clusters"], true);
  s.device = "NVIDIA H200";
  s.clusters = false;
  s.timing = Timing{12.5, 11};
  s.pass = false;
  j = nlohmann::ordered_json::parse(summaryJson(s));
  EXPECT_EQ(j["device"], "NVIDIA H200");
  EXPECT_EQ(j["result"], "mismatch");
  EXPECT_EQ(j["us_per_layer_step"], 12.5);
  EXPECT_EQ(j["us_per_layer_step_min"], 11);
  EXPECT_EQ(j["clusters"], false);
}

TEST(Report, WriteSummary) {
  TempDir dir;
  std::ostringstream log;
  writeSummary("-", summary(), log);
  EXPECT_EQ(log.str(), summaryJson(summary()) + "\n");
  std::ostringstream log2;
  writeSummary(dir.file("s.json"), summary(), log2);
  EXPECT_EQ(log2.str(), "wrote " + dir.file("s.json") + "\n");
  EXPECT_EQ(readText(dir.file("s.json")), summaryJson(summary()) + "\n");
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(
          Error, writeSummary(dir.file("no/such/dir.json"), summary(), log2)),
      "cannot write --json file");
}

TEST(Report, RunHeader) {
  RunSummary s = summary();
  RunHeader h;
  h.residual = true;
  h.reference = "rmsnorm eps 1e-05";
  h.referenceOrigin = "the manifest's op attributes";
  h.maxPages = 2;
  h.maxSplits = 8;
  EXPECT_EQ(runHeader(s, h),
            "fusion-run: l.ptx + l.json, function layer (3 kernels, strategy "
            "decode)\n"
            "  model: f16, hidden 64, heads 4/2, head_dim 16, page 4, "
            "residual\n"
            "  reference: rmsnorm eps 1e-05 (from the manifest's op "
            "attributes), tolerance 2.00e-03 relative L2 vs fp64\n"
            "  run: batch 2, history length 5, 1 step(s), 6 pages of 4 "
            "tokens, block-table width 2, num_splits 2 (max 8), direct "
            "launches\n");
  s.kvLens = {3, 9};
  s.graph = true;
  s.layers = 8;
  h.maxSplits = 0;
  EXPECT_CONTAINS(runHeader(s, h), "history lengths 3,9, 1 step(s), 6 pages "
                                   "of 4 tokens, block-table width 2, CUDA "
                                   "graph, timed over 8 layer copies\n");
  s.clusters = false;
  EXPECT_CONTAINS(runHeader(s, h), "CUDA graph, no thread-block clusters, "
                                   "timed over 8 layer copies\n");
  s.clusters = true;
  h.inputs = "g.safetensors";
  h.positions = {3, 100};
  h.notes = {"a note"};
  EXPECT_CONTAINS(runHeader(s, h), "history lengths 3,9 and positions 3,100 "
                                   "from g.safetensors, ");
  EXPECT_CONTAINS(runHeader(s, h), "\n    a note\n");
}

TEST(Report, OutputFile) {
  TempDir dir;
  RunSummary s = summary();
  s.batch = 1;
  s.hidden = 2;
  s.numHeads = 1;
  s.numKVHeads = 1;
  s.headDim = 2;
  HostStep last;
  last.x = {1, 2};
  last.view = {1, 1, {4}, {5}, {6}};
  StepOutputs got;
  got.out = {3, 4};
  got.kNew = {5, 6};
  got.vNew = {7, 8};
  RefOutputs r;
  r.out = {9, 10};
  r.k = {11, 12};
  r.v = {13, 14};
  writeOutputFile(dir.file("o.safetensors"), s, "random (seed 1)", last, got, r,
                  r);
  SafetensorsFile f = SafetensorsFile::open(dir.file("o.safetensors"));
  EXPECT_EQ(f.metadata().at("weights"), "random (seed 1)");
  EXPECT_EQ(f.metadata().at("result"), "pass");
  EXPECT_EQ(f.metadata().at("dry_run"), "true");
  EXPECT_EQ(f.metadata().count("us_per_step"), 0u);
  TensorStore store = TensorStore::fromFile(std::move(f));
  EXPECT_NE(store.find("ref_f32.output"), nullptr);
  EXPECT_EQ(store.find("residual_out"), nullptr);
  EXPECT_EQ(store.find("block_table")->shape, (std::vector<int64_t>{1, 1}));
  std::vector<uint8_t> k = store.read("k_new");
  EXPECT_EQ(k, (std::vector<uint8_t>{5, 0, 6, 0}));
}

} // namespace
