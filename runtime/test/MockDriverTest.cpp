//===- MockDriverTest.cpp - DecodeStep's launches on the mock driver ------===//
//
// The host side of a call on caller tensors (what the PyTorch op does) and
// of runGraph's graph cache, run on libfusion_mock_cuda.so
// ($FUSION_CUDA_DRIVER, set by ctest; also under the sanitizers): the tiny
// front half (runtime/test/data/tiny_decode, two kernels, both marked for
// programmatic dependent launch in its manifest) launched on buffers the test
// owns; and the Engine's host side on engine_mock (EngineMock.h): its
// staging slots and the steps of generate, prefill (chunks of up to
// maxStepRows rows) and score. The mock runs no kernel; it logs each launch,
// copy, event and synchronization, so the test sees what was launched and how.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/DecodeStep.h"
#include "fusion/runtime/Engine.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"

#include "ActivationMaps.h"
#include "CacheMaps.h"
#include "EngineMock.h"
#include "TestUtil.h"
#include "TinyStep.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>

using namespace fusion::runtime;
using namespace fusion::runtime::test;
using nlohmann::json;

namespace {

using LaunchLogFn = int (*)(int *, int, int);

/// The mock driver's test hook `name`, or null when the mock is not loaded.
void *mockSymbol(const char *name) {
  void *mock = dlopen(std::getenv("FUSION_CUDA_DRIVER"), RTLD_NOW);
  return mock ? dlsym(mock, name) : nullptr;
}

/// The mock's log `name` (fusionMockLaunches or fusionMockGraphs), emptied;
/// {-1} when the mock is not loaded.
std::vector<int> takeLog(const char *name) {
  auto log = reinterpret_cast<LaunchLogFn>(mockSymbol(name));
  if (!log)
    return {-1};
  std::vector<int> out(64);
  out.resize(log(out.data(), 64, /*clear=*/1));
  return out;
}
/// Per kernel launch: 1 with programmatic stream serialization, 0 without.
std::vector<int> takeLaunches() { return takeLog("fusionMockLaunches"); }
/// Per kernel launch: its cluster dimension x (1 without a cluster).
std::vector<int> takeClusters() { return takeLog("fusionMockClusters"); }
/// Per cuOccupancyMaxActiveClusters call: its cluster dimension x.
std::vector<int> takeClusterQueries() {
  return takeLog("fusionMockClusterQueries");
}
/// Makes the mock's cuOccupancyMaxActiveClusters return `result` and, with
/// CUDA_SUCCESS, `clusters` (what a device that can run them answers: 16).
void setClusterAnswer(int clusters, CUresult result = CUDA_SUCCESS) {
  using AnswerFn = void (*)(int, int);
  if (auto answer =
          reinterpret_cast<AnswerFn>(mockSymbol("fusionMockClusterAnswer")))
    answer(clusters, result);
}
/// Makes later successful cuOccupancyMaxActiveClusters calls answer `ctas`
/// / the cluster size, as a device with `ctas` resident CTAs in clusters
/// (0: setClusterAnswer's fixed answer again).
void setClusterCtas(int ctas) {
  using CtasFn = void (*)(int);
  if (auto set = reinterpret_cast<CtasFn>(mockSymbol("fusionMockClusterCtas")))
    set(ctas);
}
/// Per graph launch the graph's id, per destruction minus its id (the mock
/// numbers its graph executables 1, 2, ... in instantiation order).
std::vector<int> takeGraphs() { return takeLog("fusionMockGraphs"); }

/// One call of the mock's op log: its kind, argument and stream (the mock
/// numbers streams 1, 2, ... as created; 0 for a call without one).
struct Op {
  char kind;
  uintptr_t arg, stream;
};

/// The mock's op log (fusionMockOps: host staging allocations 'p', uploads
/// 'h', device copies 'd', event records 'r', host waits 'w' and stream
/// waits 'e', graph launches 'g', stream synchronizations 's', memsets
/// 'm'), emptied.
std::vector<Op> takeOps() {
  using OpLogFn = int (*)(char *, uintptr_t *, uintptr_t *, int, int);
  auto log = reinterpret_cast<OpLogFn>(mockSymbol("fusionMockOps"));
  if (!log)
    return {{'?', 0, 0}};
  std::vector<char> kinds(4096);
  std::vector<uintptr_t> args(4096), streams(4096);
  const int n =
      log(kinds.data(), args.data(), streams.data(), 4096, /*clear=*/1);
  std::vector<Op> out;
  for (int i = 0; i < n && i < 4096; ++i)
    out.push_back({kinds[i], args[i], streams[i]});
  return out;
}

/// The mock's log of cuTensorMapEncodeTiled calls (fusionMockTensorMaps:
/// 16 values each), emptied; {{~0}} when the mock is not loaded.
std::vector<std::vector<uint64_t>> takeTensorMaps() {
  using TensorMapLogFn = int (*)(uint64_t *, int, int);
  auto log =
      reinterpret_cast<TensorMapLogFn>(mockSymbol("fusionMockTensorMaps"));
  if (!log)
    return {{~0ull}};
  std::vector<uint64_t> words(16 * 64);
  const int n = log(words.data(), 64, /*clear=*/1);
  std::vector<std::vector<uint64_t>> out;
  for (int i = 0; i < n && i < 64; ++i)
    out.emplace_back(words.begin() + 16 * i, words.begin() + 16 * (i + 1));
  return out;
}

/// The arguments cuTensorMapEncodeTiled must get, in the mock's log layout,
/// for the tiny qkv weight at `address`: f16 [128 rows, 64 columns]
/// ((4 + 2 * 2) heads of 16 by hidden 64) in one box of 128 rows by 64
/// columns (the manifest's), rank 2, innermost dimension first: dims
/// {64, 128}, the row stride 64 * 2 bytes, box {64, 128}, element strides
/// {1, 1}, no interleave, 128-byte swizzle, L2 promotion 256B, no OOB fill.
std::vector<uint64_t> qkvWeightMap(uint64_t address) {
  return {CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
          2,
          address,
          64,
          128,
          64 * 2,
          64,
          128,
          1,
          1,
          CU_TENSOR_MAP_INTERLEAVE_NONE,
          CU_TENSOR_MAP_SWIZZLE_128B,
          CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
          0,
          0};
}

/// The arguments cuTensorMapEncodeTiled must get for an activation map of
/// ActivationMaps.h over `rows` rows at `address`: f16 [rows, 64] in boxes
/// of 16 token rows by 64 columns (the manifest's), innermost dimension
/// first: dims {64, rows}, the row stride 64 * 2 bytes, box {64, 16}, the
/// rest as qkvWeightMap.
std::vector<uint64_t> activationMap(uint64_t address, uint64_t rows) {
  std::vector<uint64_t> map = qkvWeightMap(address);
  map[4] = rows; // dims[1]
  map[7] = 16;   // box[1]
  return map;
}

/// The 16 words of the descriptor at device address `address` (the mock
/// fills each with its encode call's logged arguments).
std::vector<uint64_t> descriptorAt(uint64_t address) {
  std::vector<uint64_t> words(16);
  cuda::copyToHost(words.data(), address, 128, "tensor map");
  return words;
}

/// How many of `ops` are of `kind`.
int count(const std::vector<Op> &ops, char kind) {
  return static_cast<int>(std::count_if(
      ops.begin(), ops.end(), [&](const Op &op) { return op.kind == kind; }));
}

/// Device buffers for every argument and result of the tiny front half at
/// batch `batch` (max_pages 5, num_pages 7), and their DeviceTensors.
struct Tensors {
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<DeviceTensor> arguments, results;

  DeviceTensor make(ElemType dtype, std::vector<int64_t> shape) {
    int64_t n = 1;
    std::vector<int64_t> strides(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = n;
      n *= shape[d];
    }
    buffers.emplace_back(n * elemTypeSize(dtype), "test tensor");
    return DeviceTensor{buffers.back().get(), dtype, shape, strides, 0};
  }
  explicit Tensors(int64_t batch) {
    const ElemType h = ElemType::F16, i = ElemType::I32;
    buffers.reserve(16);
    arguments = {
        make(h, {batch, 64}), make(h, {batch, 64}),   make(h, {64}),
        make(h, {128, 64}),   make(i, {batch}),       make(i, {batch}),
        make(i, {batch, 5}),  make(h, {7, 4, 2, 16}), make(h, {7, 4, 2, 16})};
    results = {make(h, {batch, 4, 16}), make(h, {batch, 64})};
  }
};

/// Binds every argument of `step` to a buffer of tinyArguments (returned:
/// keep them while the step runs).
std::vector<cuda::DeviceBuffer> bindTinyArguments(const cuda::Context &context,
                                                  DecodeStep &step) {
  std::vector<cuda::DeviceBuffer> args = tinyArguments(context, step, 1);
  for (size_t i = 0; i < args.size(); ++i)
    step.bind(static_cast<int>(i), args[i]);
  return args;
}

/// The model of the tiny manifest as `edit` changes it, for `ptx` (the tiny
/// PTX changed to match: its fingerprint is set to `ptx`'s).
Model editedModel(const std::function<json(json)> &edit,
                  const std::string &ptx) {
  json j = edit(json::parse(readText(dataPath("tiny_decode.manifest.json"))));
  j["ptx_fnv1a64"] = ptxFingerprintHex(ptx);
  return Model(Manifest::parse(j.dump(), "edited.manifest.json"));
}

/// The tiny manifest with its 16-token GEMM variant as 4 CTAs split over k
/// that combine through a cluster (cluster_k_split).
Model clusterKSplitModel() {
  json j = json::parse(readText(dataPath("tiny_decode.manifest.json")));
  json &v = j["kernels"][0]["variants"][0];
  v["grid"] = {4, 1, 1};
  v["schedule"]["k_split"] = 4;
  v["schedule"]["cluster_k_split"] = true;
  return Model(Manifest::parse(j.dump(), "m.json"));
}

class MockDriver : public ::testing::Test {
protected:
  void SetUp() override {
    if (!std::getenv("FUSION_CUDA_DRIVER"))
      GTEST_SKIP() << "needs $FUSION_CUDA_DRIVER (the mock driver; ctest "
                      "sets it)";
    context = std::make_unique<cuda::Context>(cuda::Context::open());
    model = std::make_unique<Model>(
        Model::load(dataPath("tiny_decode.manifest.json")));
    step = std::make_unique<DecodeStep>(*context, *model,
                                        readPtx(dataPath("tiny_decode.ptx")),
                                        "tiny_decode.ptx", Capacity{4, 1, 1});
    takeLaunches();
    setClusterAnswer(16);
    setClusterCtas(0);
    takeClusterQueries();
  }
  std::unique_ptr<cuda::Context> context;
  std::unique_ptr<Model> model;
  std::unique_ptr<DecodeStep> step;
};

} // namespace

TEST_F(MockDriver, RunOnTensorsLaunchesTheFirstKernelWithoutPDL) {
  cuda::Stream stream = cuda::Stream::create();
  Tensors t(3);
  step->runOnTensors(t.arguments, t.results, 2, stream.get());
  // Kernel 0 waits for the caller's previous kernel in full; kernel 1
  // follows ours with programmatic dependent launch, as the manifest says.
  EXPECT_EQ(takeLaunches(), (std::vector<int>{0, 1}));
  // run() on the runtime's own buffers keeps the manifest's PDL for both.
  EXPECT_TRUE(model->kernels()[0]->programmaticDependentLaunch);
}

TEST_F(MockDriver, RunOnTensorsChecksBeforeLaunching) {
  cuda::Stream stream = cuda::Stream::create();
  Tensors big(5); // the step was loaded for batch 4
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(
          CapacityError,
          step->runOnTensors(big.arguments, big.results, 2, stream.get())),
      "the step was loaded for batch 4");
  Tensors t(3);
  t.results[1].address = t.arguments[0].address; // residual_out onto x
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(
          InvalidArgumentError,
          step->runOnTensors(t.arguments, t.results, 2, stream.get())),
      "result 1 (residual_out) of \"decode_layer\" overlaps argument \"x\"");
  EXPECT_TRUE(takeLaunches().empty());
}

TEST_F(MockDriver, WorkspacesShareTwoArenasZeroedOnce) {
  takeOps();
  DecodeStep fresh(*context, *model, readPtx(dataPath("tiny_decode.ptx")),
                   "tiny_decode.ptx", Capacity{4, 1, 1});
  std::vector<uintptr_t> memsets;
  for (const Op &op : takeOps())
    if (op.kind == 'm')
      memsets.push_back(op.arg);
  // Internal buffers (ModelTest): 0, 1 and 5 the outputs; kernel 0's
  // workspaces 2, 3 (scratch) and 4 (zero-init), kernel 1's 6, 7 and 8.
  const uint64_t scratch = fresh.internal(2).address;
  const uint64_t zero = fresh.internal(4).address;
  // Both kernels' workspaces start at the arenas' bases; at batch 4 kernel
  // 0's partial_stats follows its partial_out of 4 * 128 * 4 bytes, kernel
  // 1's its partial_out of 4 * 4 * 64 * 16 * 4.
  EXPECT_EQ(fresh.internal(6).address, scratch);
  EXPECT_EQ(fresh.internal(3).address, scratch + 2048);
  EXPECT_EQ(fresh.internal(7).address, scratch + 65536);
  EXPECT_EQ(fresh.internal(8).address, zero);
  EXPECT_EQ(fresh.internal(8).bytes, 4u * 2 * 4);
  // No two workspaces of one kernel overlap, nor any zero-init one a
  // scratch one.
  const std::vector<InternalBuffer> &buffers = model->internalBuffers();
  for (int i = 0; i < 9; ++i)
    for (int j = i + 1; j < 9; ++j) {
      if (buffers[i].kind != ParamKind::Workspace ||
          buffers[j].kind != ParamKind::Workspace ||
          (buffers[i].kernel != buffers[j].kernel &&
           buffers[i].zeroInit == buffers[j].zeroInit))
        continue;
      SCOPED_TRACE(buffers[i].label + " / " + buffers[j].label);
      DecodeStep::BufferView a = fresh.internal(i), b = fresh.internal(j);
      EXPECT_TRUE(a.address + a.bytes <= b.address ||
                  b.address + b.bytes <= a.address);
    }
  // One memset per output and per arena, at construction only.
  EXPECT_EQ(memsets.size(), 5u);
  EXPECT_EQ(std::count(memsets.begin(), memsets.end(), zero), 1);
  EXPECT_EQ(std::count(memsets.begin(), memsets.end(), scratch), 1);
  cuda::Stream stream = cuda::Stream::create();
  Tensors t(3);
  fresh.runOnTensors(t.arguments, t.results, 2, stream.get());
  for (const Op &op : takeOps())
    EXPECT_NE(op.kind, 'm');
  std::vector<int32_t> counters(8, -1);
  fresh.downloadInternal(8, counters.data(), 32);
  EXPECT_EQ(counters, std::vector<int32_t>(8, 0));
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       fresh.downloadInternal(8, counters.data(), 36)),
      "holds 32 bytes, asked for 36");
}

TEST_F(MockDriver, LaunchesTheSplitsAsOneClusterUpToClusterSplits) {
  // The fixture's attention kernel (kernel 1) has cluster_splits 8; the
  // mock rejects a cluster that does not divide the grid or exceeds 8.
  std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, *step);
  takeClusters();
  for (auto [splits, clusterX] : {std::pair{1, 1}, {5, 5}, {8, 8}, {9, 1}}) {
    step->run(StepShape{1, 1, splits}, TinyInputs(1, 1).view());
    EXPECT_EQ(takeClusters(), (std::vector<int>{1, clusterX})) << splits;
  }
}

TEST_F(MockDriver, LaunchesAClusterKSplitVariantInClustersOfItsKSplit) {
  // The fixture's 16-token GEMM variant as 4 CTAs split over k that combine
  // through a cluster (cluster_k_split): its launches at batch 2 carry
  // clusters of 4 CTAs; the mock checks that they divide grid x.
  Model clustered = clusterKSplitModel();
  DecodeStep s(*context, clustered, readPtx(dataPath("tiny_decode.ptx")),
               "tiny_decode.ptx", Capacity{4, 1, 4});
  std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, s);
  takeClusters();
  s.run(StepShape{2, 1, 1}, TinyInputs(2, 1).view());
  EXPECT_EQ(takeClusters(), (std::vector<int>{4, 1}));
  s.run(StepShape{1, 1, 1}, TinyInputs(1, 1).view());
  EXPECT_EQ(takeClusters(), (std::vector<int>{1, 1}));
}

TEST_F(MockDriver, ClusterLaunchErrorsNameTheCluster) {
  // The mock rejects a cluster that does not divide grid x, as the driver.
  unsigned grid[3] = {4, 1, 1}, block[3] = {32, 1, 1};
  EXPECT_CONTAINS(EXPECT_THROW_MSG(CudaError,
                                   cuda::launchKernel(nullptr, "k", grid, block,
                                                      0, nullptr, nullptr,
                                                      /*programmatic=*/true,
                                                      /*clusterX=*/3)),
                  "cuLaunchKernelEx(k, grid [4, 1, 1], block [32, 1, 1], 0 "
                  "bytes dynamic shared memory, programmatic stream "
                  "serialization, clusters of 3 CTAs)");
}

TEST_F(MockDriver, LaunchesWithoutAClusterWhereTheDeviceCannotRunIt) {
  // The driver says so with 0 clusters or with an error that means "not
  // supported"; the kernels then combine through their workspaces.
  const std::pair<int, CUresult> answers[] = {
      {0, CUDA_SUCCESS},
      {16, CUDA_ERROR_INVALID_CLUSTER_SIZE},
      {16, CUDA_ERROR_NOT_SUPPORTED}};
  Model clustered = clusterKSplitModel();
  for (auto [clusters, result] : answers) {
    SCOPED_TRACE(result);
    setClusterAnswer(clusters, result);
    DecodeStep s(*context, clustered, readPtx(dataPath("tiny_decode.ptx")),
                 "tiny_decode.ptx", Capacity{4, 1, 4});
    std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, s);
    takeClusters();
    s.run(StepShape{1, 1, 5}, TinyInputs(1, 1).view()); // attention splits
    s.run(StepShape{2, 1, 1}, TinyInputs(2, 1).view()); // the k-split GEMM
    EXPECT_EQ(takeClusters(), (std::vector<int>{1, 1, 1, 1}));
    EXPECT_EQ(takeClusterQueries(), (std::vector<int>{5, 4}));
  }
}

TEST_F(MockDriver, KeepsTheClusterWhereTheDeviceCanRunIt) {
  setClusterAnswer(1);
  std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, *step);
  takeClusters();
  step->run(StepShape{1, 1, 5}, TinyInputs(1, 1).view());
  EXPECT_EQ(takeClusters(), (std::vector<int>{1, 5}));
  EXPECT_EQ(takeClusterQueries(), std::vector<int>{5});
}

TEST_F(MockDriver, LaunchClustersFalseLaunchesEveryKernelWithoutACluster) {
  // Batch 2 (3 for runOnTensors) and 5 splits: the k-split GEMM variant in
  // clusters of 4 and the attention in clusters of 5, on a device that can
  // run both; with launchClusters false neither, and nothing is asked.
  Model clustered = clusterKSplitModel();
  const std::string ptx = readPtx(dataPath("tiny_decode.ptx"));
  cuda::Stream stream = cuda::Stream::create();
  DecodeStep withClusters(*context, clustered, ptx, "tiny_decode.ptx",
                          Capacity{4, 1, 4});
  std::vector<cuda::DeviceBuffer> args =
      bindTinyArguments(*context, withClusters);
  takeClusters();
  withClusters.run(StepShape{2, 1, 5}, TinyInputs(2, 1).view());
  EXPECT_EQ(takeClusters(), (std::vector<int>{4, 5}));
  EXPECT_EQ(takeClusterQueries(), (std::vector<int>{4, 5}));

  DecodeStep::Options options;
  options.launchClusters = false;
  DecodeStep s(*context, clustered, ptx, "tiny_decode.ptx", Capacity{4, 1, 4},
               options);
  std::vector<cuda::DeviceBuffer> sArgs = bindTinyArguments(*context, s);
  takeClusters();
  s.run(StepShape{2, 1, 5}, TinyInputs(2, 1).view());
  EXPECT_EQ(takeClusters(), (std::vector<int>{1, 1})) << "run";
  s.runGraph(StepShape{2, 1, 5}, TinyInputs(2, 1).view()); // the capture
  EXPECT_EQ(takeClusters(), (std::vector<int>{1, 1})) << "runGraph";
  Tensors t(3);
  s.runOnTensors(t.arguments, t.results, 5, stream.get());
  EXPECT_EQ(takeClusters(), (std::vector<int>{1, 1})) << "runOnTensors";
  EXPECT_TRUE(takeClusterQueries().empty());
}

TEST_F(MockDriver, AsksOncePerClusterAcrossStepsAndReplays) {
  std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, *step);
  for (int i = 0; i < 3; ++i) {
    step->run(StepShape{1, 1, 5}, TinyInputs(1, 1).view());
    step->runGraph(StepShape{1, 1, 5}, TinyInputs(1, 1).view());
  }
  cuda::Stream stream = cuda::Stream::create();
  Tensors t(3);
  step->runOnTensors(t.arguments, t.results, 5, stream.get());
  EXPECT_EQ(takeClusterQueries(), std::vector<int>{5});
  // Another cluster size is another question, asked once too.
  step->run(StepShape{1, 1, 8}, TinyInputs(1, 1).view());
  step->runGraph(StepShape{1, 1, 8}, TinyInputs(1, 1).view());
  step->run(StepShape{1, 1, 5}, TinyInputs(1, 1).view());
  EXPECT_EQ(takeClusterQueries(), std::vector<int>{8});
}

TEST_F(MockDriver, ClusterQueryErrorsNameTheEntry) {
  // Any other error is the driver's or ours: reported before any launch,
  // and not remembered.
  setClusterAnswer(0, CUDA_ERROR_INVALID_VALUE);
  std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, *step);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(CudaError,
                       step->run(StepShape{1, 1, 5}, TinyInputs(1, 1).view())),
      "cuOccupancyMaxActiveClusters(decode_layer_k1_decode_attention, grid "
      "[5, 2, 1], block [256, 1, 1], 0 bytes dynamic shared memory, "
      "clusters of 5 CTAs): ");
  EXPECT_TRUE(takeLaunches().empty());
  setClusterAnswer(16);
  takeClusters();
  step->run(StepShape{1, 1, 5}, TinyInputs(1, 1).view());
  EXPECT_EQ(takeClusters(), (std::vector<int>{1, 5}));
}

TEST_F(MockDriver, MaxActiveClustersAsksForAGridOfWholeClusters) {
  // Grid x 6 in clusters of 4: the query's grid is rounded up to 8 (the
  // mock, as the driver, rejects a grid x that clusters do not divide).
  unsigned grid[3] = {6, 1, 1}, block[3] = {32, 1, 1};
  EXPECT_EQ(cuda::maxActiveClusters(nullptr, "k", grid, block, 0, 4), 16);
  EXPECT_EQ(takeClusterQueries(), std::vector<int>{4});
}

TEST_F(MockDriver, NumSplitsFitTheAttentionClustersInOneWave) {
  // The tiny attention's grid is [num_splits, 2, batch], one cluster of
  // num_splits CTAs per (KV head, sequence); its policy gives 8 splits for
  // 4096 tokens at batches 1 and 2 (ceil(4096 / 512)).
  ASSERT_EQ(model->defaultNumSplits(2, 4096), 8);
  const std::string ptx = readPtx(dataPath("tiny_decode.ptx"));
  auto fitted = [&](int ctas, int64_t batch, bool launchClusters = true) {
    setClusterCtas(ctas);
    DecodeStep::Options options;
    options.launchClusters = launchClusters;
    DecodeStep s(*context, *model, ptx, "tiny_decode.ptx", Capacity{4, 1, 1},
                 options);
    return s.numSplitsFor(batch, 4096);
  };
  EXPECT_EQ(fitted(16, 1), 8); // 2 clusters of 8 in 16 CTAs
  EXPECT_EQ(fitted(15, 1), 7); // 15 / 8 = 1 cluster; 15 / 7 = 2
  EXPECT_EQ(fitted(9, 1), 4);  // 9 / 5 = 1; 9 / 4 = 2
  EXPECT_EQ(fitted(20, 2), 5); // 4 clusters: 20 / 6 = 3; 20 / 5 = 4
  EXPECT_EQ(fitted(20, 2, /*launchClusters=*/false), 5); // the same splits
  // No cluster of 8 fits at all: launched without clusters, so all 8 stay.
  EXPECT_EQ(fitted(7, 1), 8);
  // One query per cluster size tried, then remembered.
  setClusterCtas(15);
  takeClusterQueries();
  EXPECT_EQ(step->numSplitsFor(1, 4096), 7);
  EXPECT_EQ(step->numSplitsFor(1, 4096), 7);
  EXPECT_EQ(step->numSplitsFor(1, 4000), 7);
  EXPECT_EQ(takeClusterQueries(), (std::vector<int>{8, 7}));
  // One split (1 token: no cluster) asks nothing, nor does a batch above
  // the capacity (4): the policy's value, which the launch will refuse.
  EXPECT_EQ(step->numSplitsFor(1, 1), 1);
  EXPECT_EQ(step->numSplitsFor(5, 4096), 8);
  EXPECT_TRUE(takeClusterQueries().empty());
  // Any other error of the query reaches the caller, naming the entry.
  setClusterAnswer(0, CUDA_ERROR_INVALID_VALUE);
  setClusterCtas(0);
  DecodeStep fresh(*context, *model, ptx, "tiny_decode.ptx", Capacity{4, 1, 1});
  EXPECT_CONTAINS(EXPECT_THROW_MSG(CudaError, fresh.numSplitsFor(2, 4096)),
                  "cuOccupancyMaxActiveClusters(decode_layer_k1_decode_"
                  "attention, grid [8, 2, 2]");
}

TEST_F(MockDriver, RedirectResultChecksItsTarget) {
  DecodeStep step(*context, *model, readPtx(dataPath("tiny_decode.ptx")),
                  "tiny_decode.ptx", Capacity{4, 1, 4});
  const CUdeviceptr own = step.resultAddress(0);
  ASSERT_NE(own, 0u);
  const int internal = step.plan().model().internalForResult(
      step.plan().model().results()[0].source.index,
      step.plan().model().results()[0].source.result);
  ASSERT_GE(internal, 0);
  const uint64_t bytes =
      static_cast<uint64_t>(step.plan().internalBytes(internal));
  cuda::DeviceBuffer other(bytes + 16, "other result");
  step.redirectResult(0, other.get() + 16, bytes);
  EXPECT_EQ(step.resultAddress(0), other.get() + 16);
  step.redirectResult(0, 0, 0); // back to its own buffer
  EXPECT_EQ(step.resultAddress(0), own);
  EXPECT_CONTAINS(
      EXPECT_THROW_MSG(InvalidArgumentError,
                       step.redirectResult(0, other.get(), bytes - 1)),
      "needs " + std::to_string(bytes) + " bytes");
  EXPECT_THROW(step.redirectResult(0, other.get() + 4, bytes),
               InvalidArgumentError); // not 16-byte aligned
  EXPECT_CONTAINS(EXPECT_THROW_MSG(InvalidArgumentError,
                                   step.redirectResult(99, other.get(), bytes)),
                  "no result 99");
  EXPECT_EQ(step.resultAddress(0), own); // the refused calls changed nothing
}

TEST_F(MockDriver, RunGraphKeepsTheGraphsOfRecentShapes) {
  auto graphs = std::make_unique<DecodeStep>(
      *context, *model, readPtx(dataPath("tiny_decode.ptx")), "tiny_decode.ptx",
      Capacity{4, 1, 4});
  std::vector<cuda::DeviceBuffer> args = tinyArguments(*context, *graphs, 1);
  for (size_t i = 0; i < args.size(); ++i)
    graphs->bind(static_cast<int>(i), args[i]);
  takeLaunches();
  takeGraphs();
  // Runs a step of `batch` rows and `splits` splits; returns the graph
  // launched (-1 if not exactly one).
  auto run = [&](int64_t batch, int64_t splits) {
    graphs->runGraph(StepShape{batch, 1, splits}, TinyInputs(batch, 1).view());
    std::vector<int> log = takeGraphs();
    return log.size() == 1 ? log[0] : -1;
  };
  // The mock numbers graph executables in instantiation order. A capture
  // records the step's two kernel launches; a replay records none.
  const int first = run(2, 1);
  const int second = run(3, 1);
  EXPECT_EQ(second, first + 1);
  EXPECT_EQ(run(2, 1), first);
  EXPECT_EQ(graphs->graphCaptures(), 2);
  EXPECT_EQ(takeLaunches().size(), 4u);
  // kMaxGraphs (32) are kept, the least recently used dropped (destroyed)
  // first.
  constexpr int K = 32;
  ASSERT_EQ(DecodeStep::kMaxGraphs, size_t{K});
  for (int64_t splits = 2; splits <= K - 1; ++splits)
    EXPECT_EQ(run(3, splits), second + splits - 1);
  EXPECT_EQ(run(2, 1), first); // kept, now the most recently used
  graphs->runGraph(StepShape{3, 1, K}, TinyInputs(3, 1).view());
  EXPECT_EQ(takeGraphs(), (std::vector<int>{-second, second + K - 1}));
  EXPECT_EQ(run(2, 1), first);
  EXPECT_EQ(run(3, 1), -1); // dropped: one destroyed, a new one launched
  EXPECT_EQ(graphs->graphCaptures(), K + 2);
  const int third = second + K;
  // Graphs are kept by the addresses they hold: binding argument 0 to other
  // memory captures anew (the least recently used dropped), binding it back
  // replays the graph of those addresses, and binding the same memory again
  // changes nothing.
  cuda::DeviceBuffer other(args[0].bytes(), "other x");
  graphs->bind(0, other);
  EXPECT_EQ(run(3, 1), -1);
  EXPECT_EQ(graphs->graphCaptures(), K + 3);
  graphs->bind(0, args[0]);
  EXPECT_EQ(run(3, 1), third);
  graphs->bind(0, args[0]);
  EXPECT_EQ(run(3, 1), third);
  EXPECT_EQ(graphs->graphCaptures(), K + 3);
  // The step destroys the K it keeps.
  graphs.reset();
  std::vector<int> log = takeGraphs();
  EXPECT_EQ(log.size(), size_t{K});
  EXPECT_TRUE(std::all_of(log.begin(), log.end(), [](int g) { return g < 0; }));
}

TEST_F(MockDriver, GenerateStagesThroughAlternatingSlots) {
  takeOps();
  std::unique_ptr<Engine> engine = makeMockEngine(*context);
  // The engine's only page-locked allocations: two images of its step
  // inputs.
  std::vector<uintptr_t> slots;
  for (const Op &op : takeOps())
    if (op.kind == 'p')
      slots.push_back(op.arg);
  ASSERT_EQ(slots.size(), 2u);
  engine->addSequence(1);
  engine->addSequence(2);
  takeGraphs();
  engine->generate({1, 2}, {5, 7}, 5);
  // Step t uses slot t % 2 (performance.md entries 36-37). The host waits
  // for the slot's `uploaded` event (the upload of step t - 2) before it
  // writes the slot. The upload stream waits for the `started` event
  // (recorded on the step's stream just before step t - 1's graph, so after
  // step t - 2), copies step t - 2's next tokens out of the slot step t - 1
  // read (from step 2 on), uploads the inputs (from step 1 on without the
  // tokens: step t - 1 wrote them into this slot) and records `uploaded`.
  // The step's stream waits for `uploaded`, records `started` and launches
  // the graph: no copy between two steps. After the last step, the step's
  // stream copies out the last two steps' tokens.
  std::vector<Op> ops = takeOps();
  // One synchronization, of the step's stream, before the download.
  ASSERT_EQ(count(ops, 's'), 1);
  ASSERT_EQ(ops.back().kind, 's');
  const uintptr_t step = ops.back().stream;
  ops.pop_back();
  std::vector<uintptr_t> uploaded;
  uintptr_t started = 0, upload = 0;
  size_t i = 0;
  // The next op: its kind and stream checked, its argument returned.
  auto next = [&](char kind, uintptr_t stream) {
    EXPECT_LT(i, ops.size());
    if (i >= ops.size())
      return uintptr_t{0};
    EXPECT_EQ(ops[i].kind, kind) << "op " << i;
    EXPECT_EQ(ops[i].stream, stream) << "op " << i;
    return ops[i++].arg;
  };
  std::vector<uintptr_t> copiedTo;
  for (size_t t = 0; t < 5; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    uploaded.push_back(next('w', 0));
    if (t == 0) {
      ASSERT_LT(i, ops.size());
      upload = ops[i].stream;
      started = ops[i].arg;
      EXPECT_NE(upload, step);
    }
    EXPECT_EQ(next('e', upload), started);
    if (t >= 2)
      copiedTo.push_back(next('d', upload));
    const uintptr_t source = next('h', upload);
    if (t == 0)
      EXPECT_EQ(source, slots[0]); // with the tokens
    else
      EXPECT_GT(source, slots[t % 2]); // from the positions on
    EXPECT_EQ(next('r', upload), uploaded[t]);
    EXPECT_EQ(next('e', step), uploaded[t]);
    EXPECT_EQ(next('r', step), started);
    next('g', step);
    EXPECT_NE(uploaded[t], started);
    if (t >= 2)
      EXPECT_EQ(uploaded[t], uploaded[t - 2]);
    else if (t == 1)
      EXPECT_NE(uploaded[1], uploaded[0]);
  }
  copiedTo.push_back(next('d', step));
  copiedTo.push_back(next('d', step));
  EXPECT_EQ(i, ops.size());
  // Into the rows of steps 0..4 of the result, in order: 4 bytes a token.
  ASSERT_EQ(copiedTo.size(), 5u);
  for (size_t t = 1; t < 5; ++t)
    EXPECT_EQ(copiedTo[t], copiedTo[0] + t * 2 * sizeof(int32_t));
  // One graph per slot (each binds its own device buffers and writes its
  // next tokens into the other slot), replayed in turn, and one for the
  // last step (slot 0, its next tokens into the result buffer).
  std::vector<int> graphs = takeGraphs();
  ASSERT_EQ(graphs.size(), 5u);
  EXPECT_NE(graphs[0], graphs[1]);
  EXPECT_EQ(graphs[2], graphs[0]);
  EXPECT_EQ(graphs[3], graphs[1]);
  EXPECT_NE(graphs[4], graphs[0]);
  EXPECT_NE(graphs[4], graphs[1]);
  EXPECT_EQ(engine->graphCaptures(), 3);
  // After generate the next tokens are the result buffer's again, so a step
  // uploads its own tokens without waiting for the last one (one
  // synchronization: its download), in slot 1 with its next tokens in the
  // result buffer: a fourth graph.
  takeOps();
  engine->step({1, 2}, {3, 4});
  EXPECT_EQ(count(takeOps(), 's'), 1);
  EXPECT_EQ(engine->graphCaptures(), 4);
}

TEST_F(MockDriver, PrefillWaitsOnlyWhereLogitsAreAsked) {
  std::unique_ptr<Engine> engine = makeMockEngine(*context); // 3 rows a step
  for (SeqId id : {1, 2, 3, 4})
    engine->addSequence(id);
  takeOps();
  // Prompts of 5 and 2 tokens: 7 rows in steps of at most 3, so
  // ceil(7 / 3) = 3 steps (prompt 0's tokens 0-2; its tokens 3-4 and prompt
  // 1's token 0; prompt 1's token 1), one upload each, and one wait (the
  // final download).
  engine->prefill({1, 2}, {{3, 1, 4, 1, 5}, {9, 2}});
  std::vector<Op> ops = takeOps();
  EXPECT_EQ(count(ops, 'h'), 3);
  EXPECT_EQ(count(ops, 's'), 1);
  EXPECT_EQ(engine->length(1), 5);
  EXPECT_EQ(engine->length(2), 2);
  // With logits: also at the two steps where a prompt ends (steps 1 and 2).
  std::vector<uint16_t> logits;
  engine->prefill({3, 4}, {{3, 1, 4, 1, 5}, {9, 2}}, &logits);
  ops = takeOps();
  EXPECT_EQ(count(ops, 'h'), 3);
  EXPECT_EQ(count(ops, 's'), 3);
  EXPECT_EQ(logits.size(), 2u * 300);
}

TEST_F(MockDriver, PrefillRunsChunksOfAtMostMaxStepRows) {
  // engine_mock appends in its first kernel and reads in its second, so a
  // step's rows may be tokens of one sequence: 3 (maxStepRows) a step.
  std::unique_ptr<Engine> engine = makeMockEngine(*context);
  ASSERT_EQ(engine->prefillRowsPerSequence(), 3);
  engine->addSequence(1);
  takeOps();
  takeGraphs();
  // A prompt of 10 tokens: ceil(10 / 3) = 4 steps of 3, 3, 3 and 1 rows
  // (10 decode steps before), one upload and one graph launch each, enqueued
  // back to back: one wait, the final download; two events recorded a step
  // (after its upload, after its graph).
  std::vector<int32_t> prompt = {5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  engine->prefill({1}, {prompt});
  std::vector<Op> ops = takeOps();
  EXPECT_EQ(count(ops, 'h'), 4);
  EXPECT_EQ(count(ops, 'r'), 8);
  EXPECT_EQ(count(ops, 's'), 1);
  EXPECT_EQ(ops.back().kind, 's');
  EXPECT_EQ(takeGraphs().size(), 4u);
  // A graph per step shape (one num_splits: the mock has no split
  // attention) and input slot: batch 3 in slots 0, 1 and 0, batch 1 in
  // slot 1: three captures.
  EXPECT_EQ(engine->graphCaptures(), 3);
  EXPECT_EQ(engine->length(1), 10);
  // Score: tokens 0-6 of 8 as rows, ceil(7 / 3) = 3 steps, each waited for
  // (its logits are downloaded); the sequence is removed afterwards.
  const int64_t freePages = engine->sequences().numFreePages();
  EXPECT_EQ(engine->score({1, 2, 3, 4, 5, 6, 7, 8}).size(), 7u);
  ops = takeOps();
  EXPECT_EQ(count(ops, 'h'), 3);
  EXPECT_EQ(count(ops, 's'), 3);
  EXPECT_EQ(engine->sequences().numFreePages(), freePages);
}

TEST_F(MockDriver, PrefillChunksExceedTheBatch) {
  // One sequence (maxBatch 1) but 4 rows a step: a prompt of 10 tokens takes
  // ceil(10 / 4) = 3 steps of 4, 4 and 2 rows, one upload and one graph
  // launch each, and one wait (the final download).
  std::unique_ptr<Engine> engine =
      makeMockEngine(*context, {}, EngineCapacity{1, 24, 0, 4});
  ASSERT_EQ(engine->prefillRowsPerSequence(), 4);
  engine->addSequence(1);
  takeOps();
  takeGraphs();
  const std::vector<int32_t> prompt = {5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  engine->prefill({1}, {prompt});
  std::vector<Op> ops = takeOps();
  EXPECT_EQ(count(ops, 'h'), 3);
  EXPECT_EQ(count(ops, 's'), 1);
  EXPECT_EQ(takeGraphs().size(), 3u);
  // Batch 4 in slots 0 and 1, batch 2 in slot 0: three captures.
  EXPECT_EQ(engine->graphCaptures(), 3);
  EXPECT_EQ(engine->length(1), 10);
  // A decode step is still one sequence: two are refused before anything
  // is uploaded.
  engine->addSequence(2);
  EXPECT_THROW(engine->step({1, 2}, {3, 3}), CapacityError);
  EXPECT_EQ(count(takeOps(), 'h'), 0);
  // Score of 11 tokens: rows 0-9, 3 steps again, each waited for.
  EXPECT_EQ(engine->score({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}).size(), 10u);
  EXPECT_EQ(count(takeOps(), 's'), 3);

  // The default step at maxBatch 1 is 64 rows: the prompt is one step.
  engine = makeMockEngine(*context, {}, EngineCapacity{1, 24, 0});
  ASSERT_EQ(engine->prefillRowsPerSequence(), 64);
  engine->addSequence(1);
  takeOps();
  engine->prefill({1}, {prompt});
  EXPECT_EQ(count(takeOps(), 'h'), 1);
  EXPECT_EQ(engine->graphCaptures(), 1);
}

// The tiny fixture's kernel 0 takes the qkv weight's tensor map (param 13):
// encoded once for the bound weight, uploaded to the table, whose address
// every launch of kernel 0 (primary entry and variants) gets.
TEST_F(MockDriver, EncodesTheWeightsTensorMapOnce) {
  // 4 pages: a page per row of the block tables of TinyInputs.
  step = std::make_unique<DecodeStep>(*context, *model,
                                      readPtx(dataPath("tiny_decode.ptx")),
                                      "tiny_decode.ptx", Capacity{4, 1, 4});
  std::vector<cuda::DeviceBuffer> args = tinyArguments(*context, *step, 1);
  for (size_t i = 0; i < args.size(); ++i)
    step->bind(static_cast<int>(i), args[i]);
  takeTensorMaps();
  ASSERT_EQ(model->tensorMaps().size(), 1u);
  EXPECT_EQ(step->plan().tensorMapTableBytes(), 128);
  EXPECT_EQ(step->plan().tensorMapTarget(0), args[3].get()); // qkv_w
  EXPECT_EQ(step->plan().tensorMapAddress(0), 0u); // not before the 1st step

  step->run(StepShape{1, 1, 1}, TinyInputs(1, 1).view());
  const uint64_t table = step->plan().tensorMapAddress(0);
  EXPECT_NE(table, 0u);
  EXPECT_EQ(table % 64, 0u);
  const std::vector<uint64_t> expected = qkvWeightMap(args[3].get());
  EXPECT_EQ(takeTensorMaps(), std::vector<std::vector<uint64_t>>{expected});
  EXPECT_EQ(descriptorAt(table), expected);
  // Batch 1 launches the primary entry, batch 3 a GEMM-shaped variant:
  // both are passed the descriptor's address as param 13.
  for (int64_t batch : {1, 3}) {
    std::vector<PreparedLaunch> l =
        step->plan().prepare(StepShape{batch, 1, 1});
    EXPECT_EQ(l[0].variant, batch == 1 ? -1 : 0);
    EXPECT_EQ(l[0].args[13].pointer, table) << batch;
    EXPECT_FALSE(l[0].args[13].isScalar);
  }
  // Later steps, direct or through a graph, encode nothing.
  step->run(StepShape{3, 1, 1}, TinyInputs(3, 1).view());
  step->runGraph(StepShape{2, 1, 1}, TinyInputs(2, 1).view());
  EXPECT_TRUE(takeTensorMaps().empty());

  // A weight bound to other memory: encoded again, into a table of its
  // own; the first one stays as it was (an older graph may replay it), and
  // is used again when the weight is bound back.
  cuda::DeviceBuffer other(args[3].bytes(), "other qkv_w");
  step->bind(3, other);
  step->runGraph(StepShape{2, 1, 1}, TinyInputs(2, 1).view());
  EXPECT_EQ(takeTensorMaps(),
            std::vector<std::vector<uint64_t>>{qkvWeightMap(other.get())});
  const uint64_t second = step->plan().tensorMapAddress(0);
  EXPECT_NE(second, table);
  EXPECT_EQ(descriptorAt(second), qkvWeightMap(other.get()));
  EXPECT_EQ(descriptorAt(table), expected);
  step->bind(3, args[3]);
  step->prepareTensorMaps();
  EXPECT_EQ(step->plan().tensorMapAddress(0), table);
  EXPECT_TRUE(takeTensorMaps().empty());
}

TEST_F(MockDriver, RunOnTensorsEncodesATablePerWeight) {
  cuda::Stream stream = cuda::Stream::create();
  takeTensorMaps();
  Tensors t(3);
  step->runOnTensors(t.arguments, t.results, 2, stream.get());
  step->runOnTensors(t.arguments, t.results, 2, stream.get());
  // Argument 3 is the qkv weight [128, 64]: encoded by the first call only.
  EXPECT_EQ(takeTensorMaps(), std::vector<std::vector<uint64_t>>{
                                  qkvWeightMap(t.arguments[3].address)});
  // Other weights: a table of their own, the first one kept.
  Tensors u(2);
  step->runOnTensors(u.arguments, u.results, 2, stream.get());
  EXPECT_EQ(takeTensorMaps(), std::vector<std::vector<uint64_t>>{
                                  qkvWeightMap(u.arguments[3].address)});
  step->runOnTensors(t.arguments, t.results, 2, stream.get());
  EXPECT_TRUE(takeTensorMaps().empty());
}

// A kernel 0 that also maps its activation inputs (ActivationMaps.h): x
// (argument 0) and the residual (argument 1), f16 ["batch", 64], in boxes of
// 16 token rows. run() encodes them over the capacity's batch, 4 rows: what
// the step sizes those arguments for and bind() requires them to hold, so
// the map never reads past them; a step of batch 1 or 3 reads rows it does
// not store. runOnTensors encodes them over the call's batch, the rows of
// the caller's tensors, and again when the batch changes at the same
// addresses.
TEST_F(MockDriver, EncodesActivationMapsOverTheBuffersRows) {
  const std::string ptx =
      withActivationMapParams(readPtx(dataPath("tiny_decode.ptx")));
  Model maps = editedModel([](json j) { return withActivationMaps(j); }, ptx);
  DecodeStep s(*context, maps, ptx, "maps.ptx", Capacity{4, 1, 4});
  std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, s);
  EXPECT_EQ(args[0].bytes(), 4u * 64 * 2); // x: 4 rows of 64 f16
  takeTensorMaps();

  s.run(StepShape{1, 1, 1}, TinyInputs(1, 1).view());
  const std::vector<std::vector<uint64_t>> atCapacity = {
      qkvWeightMap(args[3].get()), activationMap(args[0].get(), 4),
      activationMap(args[1].get(), 4)};
  EXPECT_EQ(takeTensorMaps(), atCapacity);
  const uint64_t table = s.plan().tensorMapAddress(0);
  EXPECT_EQ(descriptorAt(table + 128), atCapacity[1]);
  EXPECT_EQ(descriptorAt(table + 256), atCapacity[2]);
  // Every launch of kernel 0, primary entry or variant, gets the slots'
  // addresses; the steps of other batches encode nothing.
  for (int64_t batch : {1, 3}) {
    std::vector<PreparedLaunch> l = s.plan().prepare(StepShape{batch, 1, 1});
    EXPECT_EQ(l[0].args[14].pointer, table + 128) << batch;
    EXPECT_EQ(l[0].args[15].pointer, table + 256) << batch;
  }
  s.run(StepShape{3, 1, 1}, TinyInputs(3, 1).view());
  s.runGraph(StepShape{2, 1, 1}, TinyInputs(2, 1).view());
  EXPECT_TRUE(takeTensorMaps().empty());

  cuda::Stream stream = cuda::Stream::create();
  Tensors t(3);
  s.runOnTensors(t.arguments, t.results, 2, stream.get());
  s.runOnTensors(t.arguments, t.results, 2, stream.get());
  EXPECT_EQ(takeTensorMaps(), (std::vector<std::vector<uint64_t>>{
                                  qkvWeightMap(t.arguments[3].address),
                                  activationMap(t.arguments[0].address, 3),
                                  activationMap(t.arguments[1].address, 3)}));
  // The same memory as a call of batch 2 (the batch dimension of x, the
  // residual, positions, seq_lens, the block table and both results): its
  // maps cover 2 rows.
  for (int a : {0, 1, 4, 5, 6})
    t.arguments[a].shape[0] = 2;
  for (DeviceTensor &d : t.results)
    d.shape[0] = 2;
  s.runOnTensors(t.arguments, t.results, 2, stream.get());
  EXPECT_EQ(takeTensorMaps(), (std::vector<std::vector<uint64_t>>{
                                  qkvWeightMap(t.arguments[3].address),
                                  activationMap(t.arguments[0].address, 2),
                                  activationMap(t.arguments[1].address, 2)}));
}

// A kernel 1 that also maps the caches (CacheMaps.h): k_cache and v_cache
// (arguments 7 and 8), f16 ["num_pages", 4, 2, 16], each encoded as the
// 2-D [num_pages * 4, 32] it reads: dims {32, 16} for 4 pages, the row
// stride 32 * 2 bytes, boxes of 64 columns by 16 token slots. Encoded once
// for the bound caches, and again when a cache is bound elsewhere.
TEST_F(MockDriver, EncodesCacheMapsOverThePool) {
  const std::string ptx =
      withCacheMapParams(readPtx(dataPath("tiny_decode.ptx")));
  Model maps = editedModel([](json j) { return withCacheMaps(j); }, ptx);
  DecodeStep s(*context, maps, ptx, "maps.ptx", Capacity{4, 1, 4});
  std::vector<cuda::DeviceBuffer> args = bindTinyArguments(*context, s);
  EXPECT_EQ(args[7].bytes(), 4u * 4 * 2 * 16 * 2); // 4 pages of 4 slots
  takeTensorMaps();
  auto cacheMap = [](uint64_t address) {
    std::vector<uint64_t> map = qkvWeightMap(address);
    map[3] = 32;     // dims[0]: 2 KV heads x 16
    map[4] = 4 * 4;  // dims[1]: 4 pages x 4 token slots
    map[5] = 32 * 2; // the row stride in bytes
    map[7] = 16;     // box[1]: 16 token slots
    return map;
  };
  s.run(StepShape{1, 1, 1}, TinyInputs(1, 1).view());
  EXPECT_EQ(takeTensorMaps(),
            (std::vector<std::vector<uint64_t>>{qkvWeightMap(args[3].get()),
                                                cacheMap(args[7].get()),
                                                cacheMap(args[8].get())}));
  const uint64_t table = s.plan().tensorMapAddress(0);
  EXPECT_EQ(descriptorAt(table + 128), cacheMap(args[7].get()));
  std::vector<PreparedLaunch> l = s.plan().prepare(StepShape{3, 1, 1});
  EXPECT_EQ(l[1].args[9].pointer, table + 128);
  EXPECT_EQ(l[1].args[10].pointer, table + 256);
  s.runGraph(StepShape{2, 1, 1}, TinyInputs(2, 1).view());
  EXPECT_TRUE(takeTensorMaps().empty());

  cuda::DeviceBuffer other(args[7].bytes(), "other k_cache");
  s.bind(7, other);
  s.run(StepShape{1, 1, 1}, TinyInputs(1, 1).view());
  EXPECT_EQ(takeTensorMaps(),
            (std::vector<std::vector<uint64_t>>{qkvWeightMap(args[3].get()),
                                                cacheMap(other.get()),
                                                cacheMap(args[8].get())}));
}

TEST_F(MockDriver, TensorMapErrorsNameTheKernelAndParam) {
  std::vector<cuda::DeviceBuffer> args = tinyArguments(*context, *step, 1);
  for (size_t i = 0; i < args.size(); ++i)
    step->bind(static_cast<int>(i), args[i]);
  // The mock rejects a weight at 0xBAD000 (CUDA_ERROR_INVALID_VALUE).
  step->bind(3, 0xBAD000, args[3].bytes());
  std::string msg = EXPECT_THROW_MSG(
      CudaError, step->run(StepShape{1, 1, 1}, TinyInputs(1, 1).view()));
  EXPECT_CONTAINS(msg, "cuTensorMapEncodeTiled(kernel 0 "
                       "(decode_layer_k0_fused) param 13 \"weight_map\" of "
                       "param 3 \"qkv_weight\": ");
  EXPECT_CONTAINS(msg, " at 0xbad000, [128, 64] elements, rows of 128 bytes, "
                       "box [128, 64]");
  EXPECT_TRUE(takeLaunches().empty());
}
