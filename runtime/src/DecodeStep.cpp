//===- DecodeStep.cpp - run a compiled decode step on the GPU -------------===//

#include "fusion/runtime/DecodeStep.h"

#include "fusion/contract/Contract.h"
#include "fusion/runtime/Error.h"

#include <algorithm>

namespace fusion::runtime {

namespace {
/// The function of `launch`'s entry in `module`, opted in to its dynamic
/// shared memory when static + dynamic exceeds the default 48 KiB.
CUfunction loadFunction(const cuda::Module &module,
                        const LaunchGeometry &launch) {
  CUfunction f = module.function(launch.entry);
  if (launch.dynamicSharedBytes > 0 &&
      launch.dynamicSharedBytes + launch.staticSharedBytes >
          contract::kMaxStaticSharedBytes)
    cuda::setMaxDynamicSharedMemory(
        f, launch.entry, static_cast<int>(launch.dynamicSharedBytes));
  return f;
}

/// The descriptors of `plan`'s tensor-map slots, in slot order (one
/// contract::kTensorMapBytes apart, the table's layout), each encoded for
/// the address its buffer has in `plan` (every one set) and the rows `plan`
/// sizes that buffer for (LaunchPlan::tensorMapRows: an activation's
/// "batch" rows at the plan's capacity).
std::vector<CUtensorMap> encodeTensorMaps(const LaunchPlan &plan) {
  static_assert(sizeof(CUtensorMap) == contract::kTensorMapBytes &&
                alignof(CUtensorMap) % contract::kTensorMapAlignment == 0);
  const std::vector<TensorMapSlot> &slots = plan.model().tensorMaps();
  std::vector<CUtensorMap> maps;
  for (size_t i = 0; i < slots.size(); ++i) {
    const TensorMapSlot &t = slots[i];
    cuda::TiledTensor2D tensor;
    tensor.dataType = t.dtype == ElemType::BF16
                          ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                          : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    tensor.address = plan.tensorMapTarget(static_cast<int>(i));
    tensor.rows =
        static_cast<uint64_t>(plan.tensorMapRows(static_cast<int>(i)));
    tensor.cols = static_cast<uint64_t>(t.cols());
    tensor.rowBytes =
        tensor.cols * static_cast<uint64_t>(elemTypeSize(t.dtype));
    tensor.boxRows = static_cast<uint32_t>(t.spec.boxRows);
    tensor.boxCols = static_cast<uint32_t>(t.spec.boxCols);
    tensor.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    maps.push_back(cuda::encodeTensorMap(tensor, t.label));
  }
  return maps;
}

/// What `plan`'s tensor maps encode that may change between plans: per
/// slot, the device address of the buffer it describes and its rows
/// (LaunchPlan::tensorMapRows, which a runOnTensors call's batch sets for
/// an activation's map).
std::vector<uint64_t> tensorMapTargets(const LaunchPlan &plan) {
  std::vector<uint64_t> targets;
  for (size_t i = 0; i < plan.model().tensorMaps().size(); ++i) {
    targets.push_back(plan.tensorMapTarget(static_cast<int>(i)));
    targets.push_back(
        static_cast<uint64_t>(plan.tensorMapRows(static_cast<int>(i))));
  }
  return targets;
}
} // namespace

DecodeStep::DecodeStep(const cuda::Context &context, const Model &model,
                       const std::string &ptx, const std::string &ptxName,
                       const Capacity &capacity)
    : DecodeStep(context, model, ptx, ptxName, capacity, Options()) {}

DecodeStep::DecodeStep(const cuda::Context &context, const Model &model,
                       const std::string &ptx, const std::string &ptxName,
                       const Capacity &capacity, const Options &options)
    : context_(&context), model_(&model), options_(options),
      plan_(model, capacity),
      module_((checkPtxAgainstManifest(ptx, ptxName, model.manifest()),
               checkChipRuns(model.manifest(), context.computeCapability()),
               context.makeCurrent(), cuda::Module::loadPtx(ptx, ptxName))),
      stream_(cuda::Stream::create()) {
  for (const ManifestKernel *k : model.kernels()) {
    std::vector<CUfunction> functions{loadFunction(module_, *k)};
    for (const ManifestVariant &v : k->variants)
      functions.push_back(loadFunction(module_, v));
    functions_.push_back(std::move(functions));
  }
  allocateRuntimeBuffers();
}

void DecodeStep::allocateRuntimeBuffers() {
  // Zero everything once: the zero-init arena needs it (each kernel leaves
  // its range zero), and the rest starts deterministic.
  for (WorkspaceArena a : {WorkspaceArena::Scratch, WorkspaceArena::ZeroInit}) {
    const int64_t bytes = plan_.arenaBytes(a);
    if (bytes == 0)
      continue;
    cuda::DeviceBuffer &arena = arenas_[static_cast<int>(a)];
    arena = cuda::DeviceBuffer(static_cast<uint64_t>(bytes),
                               a == WorkspaceArena::ZeroInit
                                   ? "zero-init workspace arena"
                                   : "scratch workspace arena");
    arena.fill(0);
  }
  const auto &buffers = model_->internalBuffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const int bi = static_cast<int>(i);
    if (buffers[i].kind == ParamKind::Workspace) {
      plan_.setInternal(
          bi, arenas_[static_cast<int>(plan_.workspaceArena(bi))].get() +
                  static_cast<uint64_t>(plan_.workspaceOffset(bi)));
      continue;
    }
    outputs_.emplace_back(static_cast<uint64_t>(plan_.internalBytes(bi)),
                          buffers[i].label);
    outputs_.back().fill(0);
    plan_.setInternal(bi, outputs_.back().get());
  }
  for (size_t i = 0; i < buffers.size(); ++i)
    ownInternal_.push_back(plan_.internalAddress(static_cast<int>(i)));
}

void DecodeStep::redirectResult(int r, CUdeviceptr address, uint64_t bytes) {
  const auto &results = model_->results();
  if (r < 0 || r >= static_cast<int>(results.size()))
    throwInvalidArgument("DecodeStep::redirectResult: no result ", r, " (",
                         results.size(), ")");
  const Binding &source = results[r].source;
  const int i = source.kind == Binding::Kind::Argument
                    ? -1
                    : model_->internalForResult(source.index, source.result);
  if (address == 0) { // back to the own buffer (nothing to do for none)
    if (i >= 0)
      plan_.setInternal(i, ownInternal_[i]);
    return;
  }
  if (i < 0)
    throwInvalidArgument("DecodeStep::redirectResult: result ", r,
                         " is not written by a kernel into its own buffer");
  const uint64_t need = static_cast<uint64_t>(plan_.internalBytes(i));
  if (bytes < need || address % contract::kBufferAlignment != 0)
    throwInvalidArgument("DecodeStep::redirectResult: result ", r, " (",
                         model_->internalBuffers()[i].label, ") needs ", need,
                         " bytes at a ", contract::kBufferAlignment,
                         "-byte aligned address, got ", bytes, " at 0x",
                         std::hex, address);
  plan_.setInternal(i, address);
}

void DecodeStep::prepareTensorMaps() {
  if (plan_.tensorMapTableBytes() == 0)
    return;
  for (size_t i = 0; i < model_->tensorMaps().size(); ++i)
    if (plan_.tensorMapTarget(static_cast<int>(i)) == 0)
      return; // unbound: prepare() reports it
  std::vector<uint64_t> targets = tensorMapTargets(plan_);
  context_->makeCurrent();
  const CUdeviceptr table = tensorMapTable(plan_, std::move(targets));
  if (plan_.tensorMapAddress(0) != table)
    plan_.setTensorMapTable(table);
}

CUdeviceptr DecodeStep::tensorMapTable(const LaunchPlan &plan,
                                       std::vector<uint64_t> targets) {
  auto it = tensorMapTables_.find(targets);
  if (it == tensorMapTables_.end()) {
    std::vector<CUtensorMap> maps = encodeTensorMaps(plan);
    cuda::DeviceBuffer table(maps.size() * sizeof(CUtensorMap), "tensor maps");
    table.upload(maps.data(), table.bytes());
    it = tensorMapTables_.emplace(std::move(targets), std::move(table)).first;
  }
  return it->second.get();
}

DecodeStep::BufferView DecodeStep::internal(int i) const {
  if (i < 0 || i >= static_cast<int>(model_->internalBuffers().size()))
    throwInvalidArgument("DecodeStep::internal: no internal buffer ", i, " (",
                         model_->internalBuffers().size(), ")");
  return BufferView{plan_.internalAddress(i),
                    static_cast<uint64_t>(plan_.internalBytes(i))};
}

void DecodeStep::downloadInternal(int i, void *dst, uint64_t bytes) const {
  const BufferView view = internal(i);
  const std::string &label = model_->internalBuffers()[i].label;
  if (bytes > view.bytes)
    throwInvalidArgument("DecodeStep::downloadInternal: ", label, " holds ",
                         view.bytes, " bytes, asked for ", bytes);
  cuda::synchronize(stream_.get(), stepLabel());
  cuda::copyToHost(dst, view.address, bytes, label);
}

void DecodeStep::bind(int i, CUdeviceptr address, uint64_t bytes) {
  plan_.bindArgument(i, address, bytes);
}

void DecodeStep::bind(int i, const cuda::DeviceBuffer &buffer) {
  plan_.bindArgument(i, buffer.get(), buffer.bytes());
}

void DecodeStep::bind(std::string_view name, const cuda::DeviceBuffer &buffer) {
  plan_.bindArgument(name, buffer.get(), buffer.bytes());
}

void DecodeStep::bindRole(std::string_view role,
                          const cuda::DeviceBuffer &buffer) {
  plan_.bindRole(role, buffer.get(), buffer.bytes());
}

void DecodeStep::downloadResult(int r, const StepShape &shape, void *dst,
                                uint64_t capacity) const {
  if (r < 0 || r >= static_cast<int>(model_->results().size()))
    throwInvalidArgument("DecodeStep::downloadResult: no result ", r, " (",
                         model_->results().size(), " results)");
  uint64_t bytes = static_cast<uint64_t>(plan_.resultBytes(r, shape));
  if (bytes > capacity)
    throwInvalidArgument("DecodeStep::downloadResult: result ", r, " (",
                         model_->resultRole(r), ") of batch ", shape.batch,
                         " is ", bytes, " bytes; the destination holds ",
                         capacity);
  CUdeviceptr src = plan_.resultAddress(r);
  // The result was written on the step's stream.
  cuda::synchronize(stream_.get(), stepLabel());
  if (!src)
    throwInvalidArgument("DecodeStep::downloadResult: result ", r,
                         " has no device buffer (unbound argument)");
  cuda::copyToHost(dst, src, bytes,
                   "result " + std::to_string(r) + " (" +
                       model_->resultRole(r) + ") of " + stepLabel());
}

void DecodeStep::poisonOutputs(CUstream stream) {
  if (!stream)
    stream = stream_.get();
  for (cuda::DeviceBuffer &b : outputs_)
    b.fill(0xFF, stream);
}

std::string DecodeStep::stepLabel() const {
  std::string s = "decode step of \"" + model_->function().name + "\" (";
  for (size_t i = 0; i < model_->kernels().size(); ++i)
    s += (i ? ", " : "") + model_->kernels()[i]->entry;
  return s + ")";
}

std::vector<PreparedLaunch>
DecodeStep::prepareLaunches(const LaunchPlan &plan, const StepShape &shape) {
  std::vector<PreparedLaunch> launches = plan.prepare(shape);
  for (PreparedLaunch &l : launches)
    if (l.clusterX > 1 && (!options_.launchClusters || activeClusters(l) == 0))
      l.clusterX = 1;
  return launches;
}

int DecodeStep::activeClusters(const PreparedLaunch &l) {
  const CUfunction f = function(l);
  const auto key =
      std::make_tuple(f, l.clusterX, l.block, l.dynamicSharedBytes);
  auto it = activeClusters_.find(key);
  if (it == activeClusters_.end()) {
    unsigned grid[3] = {l.grid[0], l.grid[1], l.grid[2]};
    unsigned block[3] = {l.block[0], l.block[1], l.block[2]};
    const int clusters = cuda::maxActiveClusters(
        f, l.entry, grid, block, l.dynamicSharedBytes, l.clusterX);
    it = activeClusters_.emplace(key, clusters).first;
  }
  return it->second;
}

int64_t DecodeStep::numSplitsFor(int64_t batch, int64_t maxSeqLen) {
  const int64_t policy = model_->defaultNumSplits(batch, maxSeqLen);
  if (batch > plan_.capacity().maxBatch)
    return policy;
  const auto key = std::make_pair(std::max<int64_t>(batch, 1), policy);
  auto it = numSplits_.find(key);
  if (it == numSplits_.end()) {
    context_->makeCurrent();
    int64_t n = policy;
    while (n > 1 && !clustersFitOneWave(StepShape{key.first, 1, n}))
      --n;
    it = numSplits_.emplace(key, n).first;
  }
  return it->second;
}

bool DecodeStep::clustersFitOneWave(const StepShape &shape) {
  const Symbols sizes{shape.batch, shape.numSplits, shape.maxPages, 1};
  for (size_t i = 0; i < model_->kernels().size(); ++i) {
    if (!model_->kernels()[i]->usesNumSplits())
      continue;
    const PreparedLaunch l =
        launchGeometry(*model_, static_cast<int>(i), sizes);
    if (l.clusterX <= 1)
      continue;
    const int active = activeClusters(l);
    const int64_t clusters =
        int64_t{l.grid[0] / l.clusterX} * l.grid[1] * l.grid[2];
    if (active > 0 && clusters > active)
      return false;
  }
  return true;
}

void DecodeStep::launchAll(const std::vector<PreparedLaunch> &launches,
                           CUstream stream, bool syncEach) {
  for (const PreparedLaunch &l : launches) {
    // cuLaunchKernelEx copies the arguments, so local storage suffices.
    std::vector<CUdeviceptr> pointers(l.args.size());
    std::vector<int32_t> scalars(l.args.size());
    std::vector<void *> params(l.args.size());
    for (size_t i = 0; i < l.args.size(); ++i) {
      if (l.args[i].isScalar) {
        scalars[i] = l.args[i].scalar;
        params[i] = &scalars[i];
      } else {
        pointers[i] = static_cast<CUdeviceptr>(l.args[i].pointer);
        params[i] = &pointers[i];
      }
    }
    unsigned grid[3] = {l.grid[0], l.grid[1], l.grid[2]};
    unsigned block[3] = {l.block[0], l.block[1], l.block[2]};
    cuda::launchKernel(function(l), l.entry, grid, block, l.dynamicSharedBytes,
                       stream, params.data(), l.programmaticDependentLaunch,
                       l.clusterX);
    if (syncEach) {
      try {
        context_->synchronize("kernel " + l.entry);
      } catch (const CudaError &e) {
        throw CudaError(std::string(e.what()) + " [kernel " +
                            std::to_string(l.kernel) +
                            " of the step: " + l.entry + "]",
                        e.code(), e.errorName());
      }
    }
  }
}

void DecodeStep::run(const StepShape &shape, const StepInputs &inputs,
                     CUstream stream) {
  if (!stream)
    stream = stream_.get();
  prepareTensorMaps(); // the table's address is part of the step's checks
  plan_.checkStepInputs(shape, inputs);
  context_->makeCurrent();
  launchAll(prepareLaunches(plan_, shape), stream, options_.syncEachKernel);
}

void DecodeStep::runGraph(const StepShape &shape, const StepInputs &inputs,
                          CUstream stream) {
  if (!stream)
    stream = stream_.get();
  prepareTensorMaps(); // the table's address is part of the step's checks
  plan_.checkStepInputs(shape, inputs);
  context_->makeCurrent();
  std::vector<PreparedLaunch> launches = prepareLaunches(plan_, shape);
  std::vector<uint64_t> key = plan_.bindingKey();
  auto hit =
      std::find_if(graphs_.begin(), graphs_.end(), [&](const CachedGraph &g) {
        return g.shape == shape && g.stream == stream && g.bindingKey == key;
      });
  if (hit == graphs_.end()) {
    CachedGraph g{
        shape, stream, std::move(key),
        cuda::GraphExec::capture(stream, stepLabel(), [&](CUstream s) {
          launchAll(launches, s, /*syncEach=*/false);
        })};
    ++captures_;
    if (graphs_.size() == kMaxGraphs)
      graphs_.pop_back();
    graphs_.insert(graphs_.begin(), std::move(g));
  } else {
    std::rotate(graphs_.begin(), hit, hit + 1);
  }
  graphs_.front().exec.launch(stream, stepLabel());
}

void DecodeStep::runOnTensors(const std::vector<DeviceTensor> &arguments,
                              const std::vector<DeviceTensor> &results,
                              int64_t numSplits, CUstream stream) {
  const Symbols sizes =
      checkCallTensors(*model_, arguments, results, context_->ordinal());
  LaunchPlan plan(*model_,
                  Capacity{sizes.batch, sizes.max_pages, sizes.num_pages});
  for (size_t i = 0; i < arguments.size(); ++i) {
    const int ai = static_cast<int>(i);
    plan.bindArgument(ai, arguments[i].address, plan.argumentBytes(ai));
  }
  const auto &buffers = model_->internalBuffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const int bi = static_cast<int>(i);
    if (plan.internalBytes(bi) > plan_.internalBytes(bi))
      throwCapacity(stepLabel(), ": a call of batch ", sizes.batch,
                    " and block-table width ", sizes.max_pages, " needs ",
                    plan.internalBytes(bi), " bytes for ", buffers[i].label,
                    "; the step was loaded for batch ",
                    plan_.capacity().maxBatch, " and width ",
                    plan_.capacity().maxPages, " (", plan_.internalBytes(bi),
                    " bytes)");
    // Each buffer's memory at capacity holds the call's: a workspace keeps
    // its slot of the capacity layout (slots of one kernel never overlap).
    plan.setInternal(bi, plan_.internalAddress(bi));
  }
  for (size_t r = 0; r < results.size(); ++r) {
    const Binding &source = model_->results()[r].source;
    if (source.kind == Binding::Kind::Argument)
      throwUnsupported(stepLabel(), ": result ", r, " is argument ",
                       source.index,
                       "; runOnTensors needs every result to "
                       "be a kernel output");
    plan.setInternal(model_->internalForResult(source.index, source.result),
                     results[r].address);
  }
  context_->makeCurrent();
  if (plan.tensorMapTableBytes() > 0)
    plan.setTensorMapTable(tensorMapTable(plan, tensorMapTargets(plan)));
  std::vector<PreparedLaunch> launches =
      prepareLaunches(plan, StepShape{sizes.batch, sizes.max_pages, numSplits});
  // The kernel before ours on the caller's stream is not ours: it may
  // trigger its dependents early while still writing our inputs, and our
  // second kernel reads seq_lens and the block table before its
  // griddepcontrol.wait (docs/abi.md). So the first waits for it in full.
  launches.front().programmaticDependentLaunch = false;
  launchAll(launches, stream, /*syncEach=*/false);
}

void DecodeStep::synchronize(CUstream stream) const {
  cuda::synchronize(stream ? stream : stream_.get(), stepLabel());
}

} // namespace fusion::runtime
