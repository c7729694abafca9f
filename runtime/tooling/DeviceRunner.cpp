//===- DeviceRunner.cpp - fusion-run's steps on the GPU -------------------===//

#include "fusion/tooling/DeviceRunner.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"

namespace fusion::tooling {

using namespace fusion::runtime;

void checkDeviceMemory(const LaunchPlan &plan, const cuda::Context &ctx,
                       int64_t layers, int device) {
  const std::string what = "the device memory of the run";
  uint64_t args = 0;
  for (const ManifestArgument &a : plan.model().arguments())
    args += static_cast<uint64_t>(plan.argumentBytes(a.index));
  const uint64_t internal = static_cast<uint64_t>(plan.runtimeBufferBytes());
  const uint64_t bytes =
      checkedMul(args, static_cast<uint64_t>(layers), what) + internal;
  const uint64_t free = ctx.freeMemory();
  if (bytes > free)
    throwCapacity("the run needs ", bytes, " bytes of device memory (", args,
                  " bytes of arguments at capacity, the KV caches "
                  "included, times --layers ",
                  layers, ", plus ", internal,
                  " bytes of runtime buffers); device ", device, " has ", free,
                  " bytes free (lower --kv-len(s), --batch, --num-pages "
                  "or --layers)");
}

namespace {

DecodeStep::Options stepOptions(const DeviceRunOptions &o) {
  DecodeStep::Options s;
  // runGraph ignores it, and the timing graph is captured from run().
  s.syncEachKernel = o.syncEach && !o.graph;
  s.launchClusters = o.launchClusters;
  return s;
}

} // namespace

DeviceRunner::DeviceRunner(const cuda::Context &ctx, const Model &model,
                           const FrontHalfSignature &sig,
                           const std::string &ptx, const std::string &ptxName,
                           const Capacity &capacity,
                           const DeviceRunOptions &options)
    : sig_(sig), options_(options),
      step_(ctx, model, ptx, ptxName, capacity, stepOptions(options)) {
  for (const ManifestArgument &a : model.arguments())
    args_.emplace(
        a.index, cuda::DeviceBuffer(
                     static_cast<uint64_t>(step_.plan().argumentBytes(a.index)),
                     "argument \"" + a.name + "\""));
  for (auto &[i, buf] : args_)
    step_.bind(i, buf);
}

void DeviceRunner::upload(const Weights &w,
                          const std::vector<uint16_t> &keyCache,
                          const std::vector<uint16_t> &valueCache) {
  args_.at(sig_.normWeight).upload(w.norm.data(), w.norm.size() * 2);
  args_.at(sig_.qkvWeight).upload(w.qkv.data(), w.qkv.size() * 2);
  if (sig_.qkvBias >= 0)
    args_.at(sig_.qkvBias).upload(w.bias.data(), w.bias.size() * 2);
  args_.at(sig_.keyCache).upload(keyCache.data(), keyCache.size() * 2);
  args_.at(sig_.valueCache).upload(valueCache.data(), valueCache.size() * 2);
}

StepOutputs DeviceRunner::runStep(const HostStep &s, const StepShape &shape,
                                  std::vector<Intermediate> intermediates) {
  const int64_t B = s.view.batch, P = sig_.pageSize, Hkv = sig_.dims.numKVHeads,
                D = sig_.dims.headDim;
  // Ordered on the step's stream (the host data outlives the step).
  CUstream st = step_.stream();
  args_.at(sig_.x).uploadAsync(s.x.data(), s.x.size() * 2, st);
  if (sig_.residual >= 0)
    args_.at(sig_.residual)
        .uploadAsync(s.residual.data(), s.residual.size() * 2, st);
  args_.at(sig_.positions).uploadAsync(s.view.positions.data(), B * 4, st);
  args_.at(sig_.seqLens).uploadAsync(s.view.seq_lens.data(), B * 4, st);
  args_.at(sig_.blockTable)
      .uploadAsync(s.view.block_table.data(), s.view.block_table.size() * 4,
                   st);
  step_.poisonOutputs();
  if (options_.graph)
    step_.runGraph(shape, stepInputs(s.view));
  else
    step_.run(shape, stepInputs(s.view));
  step_.synchronize();

  StepOutputs got;
  got.out.resize(static_cast<size_t>(B * sig_.dims.numQHeads * D));
  step_.downloadResult(sig_.output, shape, got.out.data(), got.out.size() * 2);
  if (sig_.residualOut >= 0) {
    got.residualOut.resize(static_cast<size_t>(B * sig_.hidden));
    step_.downloadResult(sig_.residualOut, shape, got.residualOut.data(),
                         got.residualOut.size() * 2);
  }
  got.kNew.resize(static_cast<size_t>(B * Hkv * D));
  got.vNew.resize(static_cast<size_t>(B * Hkv * D));
  for (int64_t b = 0; b < B; ++b) {
    int32_t pos = s.view.positions[b];
    int32_t page = s.view.block_table[b * s.view.max_pages + pos / P];
    uint64_t off =
        static_cast<uint64_t>(kvCacheOffset(page, pos % P, 0, P, Hkv, D)) * 2;
    args_.at(sig_.keyCache)
        .download(got.kNew.data() + b * Hkv * D, Hkv * D * 2, off);
    args_.at(sig_.valueCache)
        .download(got.vNew.data() + b * Hkv * D, Hkv * D * 2, off);
  }
  for (Intermediate &m : intermediates) {
    m.values.resize(static_cast<size_t>(B * m.rowElems));
    step_.downloadInternal(m.buffer, m.values.data(), m.values.size() * 2);
  }
  got.intermediates = std::move(intermediates);
  return got;
}

Timing DeviceRunner::timeLayerSteps(const StepShape &shape,
                                    const StepInputs &inputs) {
  const CUstream stream = step_.stream();
  std::vector<std::map<int, cuda::DeviceBuffer>> copies(
      static_cast<size_t>(options_.layers - 1));
  for (size_t c = 0; c < copies.size(); ++c)
    for (const auto &[i, buf] : args_)
      copies[c]
          .emplace(i, cuda::DeviceBuffer(buf.bytes(),
                                         buf.label() + " (layer copy " +
                                             std::to_string(c + 1) + ")"))
          .first->second.copyFrom(buf, stream);
  auto bindCopy = [&](size_t c) {
    for (const auto &[i, buf] : c ? copies[c - 1] : args_)
      step_.bind(i, buf);
  };
  auto layerSteps = [&](CUstream s) {
    for (size_t c = 0; c <= copies.size(); ++c) {
      if (!copies.empty())
        bindCopy(c);
      step_.run(shape, inputs, s);
    }
    if (!copies.empty())
      bindCopy(0);
  };
  const std::string what = std::to_string(options_.layers) +
                           " layer-step(s) of \"" +
                           step_.model().function().name + "\"";
  cuda::GraphExec graph;
  if (options_.graph) {
    // The copies' tensor maps, encoded and uploaded outside the capture.
    for (size_t c = 1; c <= copies.size(); ++c) {
      bindCopy(c);
      step_.prepareTensorMaps();
    }
    bindCopy(0);
    graph = cuda::GraphExec::capture(stream, what, layerSteps);
  }
  auto replay = [&] {
    if (graph)
      graph.launch(stream, what);
    else
      layerSteps(stream);
  };
  for (int64_t i = 0; i < options_.warmup; ++i)
    replay();
  step_.synchronize();
  std::vector<cuda::Event> marks;
  for (int64_t i = 0; i <= options_.iters; ++i)
    marks.push_back(cuda::Event::create());
  marks[0].record(stream);
  for (int64_t i = 0; i < options_.iters; ++i) {
    replay();
    marks[i + 1].record(stream);
  }
  step_.synchronize();
  std::vector<double> ms;
  for (int64_t i = 0; i < options_.iters; ++i)
    ms.push_back(cuda::Event::elapsedMs(marks[i], marks[i + 1]));
  return summarizeReplays(std::move(ms), options_.layers);
}

} // namespace fusion::tooling
