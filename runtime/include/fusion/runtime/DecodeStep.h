//===- DecodeStep.h - run a compiled decode step on the GPU -------*- C++
//-*-===//
//
// DecodeStep loads the PTX of a Model, allocates the buffers the runtime owns
// (each kernel output, and two arenas the kernels' workspaces share, sized
// for a Capacity: LaunchPlan::workspaceOffset), takes the caller's
// device buffers for the function arguments (activations, weights,
// positions, block table, KV caches), and launches the kernels of one step
// in manifest order on a stream, directly or as a CUDA graph captured once
// per step shape and replayed. A kernel with batch variants is launched as
// the variant the step's batch selects (ManifestKernel::launchFor), in
// thread-block clusters where the manifest asks for them and the device can
// run them (asked once per entry and cluster size), else without a cluster
// (and never with Options::launchClusters false). numSplitsFor fits the
// split policy to the clusters the device runs at once.
//
//   cuda::Context ctx = cuda::Context::open();
//   Model model = Model::load("model.manifest.json");
//   DecodeStep step(ctx, model, readFile("model.ptx"), "model.ptx",
//                   Capacity{/*maxBatch=*/8, /*maxPages=*/64,
//                   /*numPages=*/512});
//   step.bind("x", xBuffer);  ...                // every argument
//   // upload positions, seq_lens, block_table (host copies pos, lens, bt)
//   step.runGraph({batch, maxPages, numSplits},  // capture + replay
//                 StepInputs{pos, lens, bt});
//   step.synchronize();
//   step.downloadResult(0, shape, host.data(), host.size() * 2);
//
// Checks: construction checks the PTX entries against the manifest
// (parameter count and kinds) before loading it; bind() checks sizes and
// alignment; run() and runGraph() check the step shape
// (LaunchPlan::validate) and the step's positions, lengths and block table
// (LaunchPlan::checkStepInputs) before launching anything: the kernels trust
// them. runOnTensors() checks the tensors (checkCallTensors) but cannot read
// the device-side positions, lengths and block table. Errors are the
// runtime's exceptions (Error.h) and name the kernel involved.
//
// Tensor maps (docs/abi.md section 3.3): the TMA descriptors that
// tensor_map parameters point at (of weights, and of activation inputs over
// the capacity's batch rows: LaunchPlan::tensorMapRows) live in one
// allocation per set of described addresses and rows
// (LaunchPlan::tensorMapTableBytes), encoded and uploaded by the first run()
// or runGraph() with those buffers bound (prepareTensorMaps), never changed
// while the DecodeStep lives.
//
// Graphs capture the kernel arguments (device addresses and the batch,
// max_pages, num_splits scalars), not the contents of the buffers: write
// the new token's inputs, positions, seq_lens and block table into the
// bound buffers before each replay. runGraph keeps the graphs of the last
// kMaxGraphs (step shape, stream, bound addresses) and captures only one it
// does not hold, so a caller that alternates between two sets of input
// buffers (Engine: one uploads while the other is read) replays both.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_DECODESTEP_H
#define FUSION_RUNTIME_DECODESTEP_H

#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/Model.h"
#include "fusion/runtime/TensorCall.h"

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace fusion::runtime {

class DecodeStep {
public:
  struct Options {
    /// Synchronize after every kernel of run() so that a fault (e.g.
    /// CUDA_ERROR_ILLEGAL_ADDRESS) names the kernel that caused it. Slow;
    /// for debugging. Ignored by runGraph() and runOnTensors().
    bool syncEachKernel = false;
    /// Launch kernels in thread-block clusters where the manifest asks for
    /// them and the device can run them; false: launch every kernel without
    /// a cluster (clusterX 1; run(), runGraph() and runOnTensors() ask the
    /// driver nothing, numSplitsFor still does), so
    /// that the split-KV attention and cluster_k_split GEMMs combine through
    /// their workspaces, with the same results (docs/abi.md section 3.4).
    /// For tools that cannot run cluster launches (compute-sanitizer
    /// racecheck) and to compare the two combines. Applies to run(),
    /// runGraph() and runOnTensors().
    bool launchClusters = true;
  };

  /// Checks `ptx` against the model's manifest, JIT-loads it, resolves
  /// every kernel entry and variant entry (opting in to more than 48 KiB of
  /// shared memory where a launch needs it) and allocates (and zeroes) the
  /// kernel outputs and the workspace arenas for `capacity`
  /// (LaunchPlan::runtimeBufferBytes). `ptxName` names the PTX in messages.
  /// `context` and `model` must outlive the DecodeStep.
  DecodeStep(const cuda::Context &context, const Model &model,
             const std::string &ptx, const std::string &ptxName,
             const Capacity &capacity);
  DecodeStep(const cuda::Context &context, const Model &model,
             const std::string &ptx, const std::string &ptxName,
             const Capacity &capacity, const Options &options);

  const Model &model() const { return *model_; }
  const LaunchPlan &plan() const { return plan_; }
  const cuda::Module &module() const { return module_; }
  /// The stream run() and runGraph() use when given none.
  CUstream stream() const { return stream_.get(); }

  /// Binds function argument `i` (or the one called `name`) to device
  /// memory. See LaunchPlan::bindArgument for the checks.
  void bind(int i, CUdeviceptr address, uint64_t bytes);
  void bind(int i, const cuda::DeviceBuffer &buffer);
  void bind(std::string_view name, const cuda::DeviceBuffer &buffer);
  /// Binds the argument with role `role` (LaunchPlan::bindRole).
  void bindRole(std::string_view role, const cuda::DeviceBuffer &buffer);

  /// The device memory of one runtime buffer.
  struct BufferView {
    CUdeviceptr address = 0;
    uint64_t bytes = 0;
  };
  /// Runtime buffer `i` (Model::internalBuffers()), LaunchPlan::internalBytes
  /// at capacity: a kernel output's own allocation, or a workspace's slot in
  /// its arena (LaunchPlan::workspaceOffset), which other kernels' workspaces
  /// overlap, so it holds what its kernel left only until the next kernel
  /// with workspaces in that arena runs. Throws InvalidArgumentError for an
  /// unknown `i`.
  BufferView internal(int i) const;
  /// Waits for stream() and copies the first `bytes` of runtime buffer `i`
  /// to `dst`. Throws InvalidArgumentError for an unknown `i` or more bytes
  /// than the buffer holds. (Synchronize any other stream first.)
  void downloadInternal(int i, void *dst, uint64_t bytes) const;
  /// Device address of function result `r`.
  CUdeviceptr resultAddress(int r) const { return plan_.resultAddress(r); }
  /// Makes the kernel that writes function result `r` write it to
  /// `address` (at least `bytes`, which must cover the result at capacity)
  /// in later launches and graphs instead of its own buffer; `address` 0
  /// goes back to the own buffer (and does nothing for a result that has
  /// none: a function argument). Graphs are kept per address (runGraph).
  /// The caller keeps the memory valid and orders its other uses. Throws
  /// InvalidArgumentError for an unknown `r`, a result that is a function
  /// argument, too few bytes or an address not 16-byte aligned.
  void redirectResult(int r, CUdeviceptr address, uint64_t bytes);
  /// Waits for stream() and copies result `r` of a step of `shape` (its
  /// first LaunchPlan::resultBytes bytes) to `dst`, which holds `capacity`
  /// bytes. (Synchronize any other stream the step ran on first.)
  void downloadResult(int r, const StepShape &shape, void *dst,
                      uint64_t capacity) const;

  /// Fills every kernel output buffer (not the workspace arenas) with 0xFF
  /// bytes,
  /// NaN in f16, bf16 and f32, so that an element a kernel fails to write
  /// shows up as NaN. Stream-ordered on `stream` (null: stream()).
  void poisonOutputs(CUstream stream = nullptr);

  /// Checks every launch precondition first: the shape against the
  /// capacity (LaunchPlan::validate) and `inputs`, the host copies of the
  /// positions, seq_lens and block table the caller uploaded for this step,
  /// against the block tables and the page pool
  /// (LaunchPlan::checkStepInputs); then launches the kernels in order on
  /// `stream` (null: stream()), each as LaunchPlan::prepare selects for
  /// shape.batch. Throws (before any launch) as those do.
  void run(const StepShape &shape, const StepInputs &inputs,
           CUstream stream = nullptr);
  /// As run(), through a CUDA graph: the one captured for this shape and
  /// stream with the current bound addresses (LaunchPlan::bindingKey), else
  /// a new capture (kept with the kMaxGraphs most recently used ones), then
  /// launched. `inputs` are checked on every call.
  void runGraph(const StepShape &shape, const StepInputs &inputs,
                CUstream stream = nullptr);
  /// Launches one step on tensors its caller owns (a framework's custom
  /// op: python/fusion/ops.py) on `stream`: `arguments[i]` is function
  /// argument i, `results[r]` the memory result r is written to. The call's
  /// sizes come from the tensors (checkCallTensors, which also checks
  /// them), not from the capacity; `numSplits` as in StepShape. The bindings
  /// of bind() are neither used nor changed. The runtime's own buffers
  /// (intermediates, workspaces) are this DecodeStep's: a call that needs
  /// more than the capacity gave them throws CapacityError. Nothing
  /// synchronizes, allocates or copies, so the caller may capture the call
  /// into its own CUDA graph, except on the first call with a model that
  /// has tensor maps and weights at new addresses: it encodes their
  /// descriptors and uploads them (kept for later calls with those weights;
  /// make that call before capturing). The same holds for the maps of
  /// activation inputs (input_map, residual_map), which cover the call's
  /// batch rows of the caller's tensor: each new (address, batch) of such an
  /// argument encodes and uploads a table that is kept until the DecodeStep
  /// is destroyed, so pass activations in buffers that a graph would reuse
  /// anyway (static addresses). Calls must be ordered on one stream
  /// (they share those buffers). Unlike run(), the positions, seq_lens and
  /// block table stay in device memory the runtime never reads: the caller
  /// guarantees the launch preconditions of LaunchPlan::checkStepInputs
  /// (out-of-range values are undefined behaviour, as in FlashInfer). The
  /// first kernel is launched without programmatic dependent launch, so it
  /// starts after the caller's previous kernel has finished.
  void runOnTensors(const std::vector<DeviceTensor> &arguments,
                    const std::vector<DeviceTensor> &results, int64_t numSplits,
                    CUstream stream);
  /// The num_splits for a step of `batch` sequences whose longest holds
  /// `maxSeqLen` tokens: the manifest's policy (Model::defaultNumSplits),
  /// lowered while a split-KV attention launch of the step would, in the
  /// clusters the manifest asks for (contract::chooseClusterX), need more
  /// clusters than the device runs at once (a positive
  /// cuda::maxActiveClusters; where it answers 0 the launch goes without
  /// clusters and the splits stay): the policy counts CTAs per SM, but a
  /// cluster's CTAs share a GPC, and a second wave of a few clusters costs
  /// up to the kernel's time again (docs/abi.md section 3.4). Independent of
  /// Options::launchClusters, so that a step without clusters computes the
  /// same splits. The policy's value, unasked, for a batch above the
  /// capacity (the launch will refuse it). Answers are kept per (batch,
  /// policy value). Throws the query's CudaError.
  int64_t numSplitsFor(int64_t batch, int64_t maxSeqLen);
  /// Encodes the tensor maps (docs/abi.md section 3.3) for the current
  /// bindings and uploads them, unless a table for the same described
  /// addresses (and rows: LaunchPlan::tensorMapRows) exists; points the
  /// plan at that table. run() and runGraph() call it; call it before
  /// capturing run() into a graph of one's own after binding weights (or
  /// mapped activations) to new memory (the upload is synchronous).
  /// Nothing to do without tensor maps or while a described argument is
  /// unbound. Throws CudaError if the driver rejects a descriptor.
  void prepareTensorMaps();
  /// Number of graph captures so far.
  int graphCaptures() const { return captures_; }
  /// Graphs runGraph keeps (least recently used dropped first): a batch
  /// that shrinks and grows, a split count that changes, or bindings that
  /// alternate replay instead of capturing again (8 shapes with the
  /// Engine's four bindings a shape: two input slots, each with its next
  /// tokens in the other slot or in the result buffer).
  static constexpr size_t kMaxGraphs = 32;
  /// Waits for `stream` (null: stream()); a kernel fault is reported here
  /// with the kernels of the step.
  void synchronize(CUstream stream = nullptr) const;

private:
  /// Allocates and zeroes each kernel output and the two workspace arenas,
  /// and sets their addresses in plan_.
  void allocateRuntimeBuffers();
  /// The device address of the tensor-map table for the buffers `plan`
  /// binds (`targets`: their addresses and rows, tensorMapTargets): the one
  /// uploaded earlier for the same ones, or a new one encoded and uploaded now
  /// (kept until the DecodeStep is destroyed, so that launches and graphs
  /// that use it stay valid).
  CUdeviceptr tensorMapTable(const LaunchPlan &plan,
                             std::vector<uint64_t> targets);
  /// `plan`'s launches for `shape` (LaunchPlan::prepare), each with
  /// clusterX 1 (no cluster) where the device cannot run its clusters
  /// (activeClusters 0), or every one without asking with
  /// Options::launchClusters false: the kernels then combine through their
  /// workspaces (docs/abi.md section 3.4).
  std::vector<PreparedLaunch> prepareLaunches(const LaunchPlan &plan,
                                              const StepShape &shape);
  /// How many of `l`'s clusters the device runs at once
  /// (cuda::maxActiveClusters, after the constructor set the function's
  /// dynamic shared memory limit; 0: it cannot run them), asked once per
  /// function, cluster size, block and dynamic shared memory
  /// (activeClusters_). Throws the query's CudaError.
  int activeClusters(const PreparedLaunch &l);
  /// Whether every split-KV attention launch of `shape` that the manifest
  /// puts in clusters either fits its clusters in one wave or cannot use
  /// clusters at all (numSplitsFor).
  bool clustersFitOneWave(const StepShape &shape);
  /// The function `l` launches: its kernel's variant, or primary entry.
  CUfunction function(const PreparedLaunch &l) const {
    return functions_[l.kernel][l.variant + 1];
  }
  void launchAll(const std::vector<PreparedLaunch> &launches, CUstream stream,
                 bool syncEach);
  std::string stepLabel() const;

  const cuda::Context *context_;
  const Model *model_;
  Options options_;
  LaunchPlan plan_;
  cuda::Module module_;
  /// Per kernel (launch order): its primary entry's function, then one per
  /// variant (index variant + 1).
  std::vector<std::vector<CUfunction>> functions_;
  /// activeClusters' answers, by function, cluster size x, block and
  /// dynamic shared memory bytes.
  std::map<std::tuple<CUfunction, uint32_t, std::array<uint32_t, 3>, uint32_t>,
           int>
      activeClusters_;
  /// numSplitsFor's answers, by batch and policy value.
  std::map<std::pair<int64_t, int64_t>, int64_t> numSplits_;
  /// The kernel outputs, in Model::internalBuffers() order.
  std::vector<cuda::DeviceBuffer> outputs_;
  /// Per internal buffer, the address allocateRuntimeBuffers gave it.
  std::vector<uint64_t> ownInternal_;
  /// Indexed by WorkspaceArena; unallocated when its arenaBytes is 0.
  std::array<cuda::DeviceBuffer, 2> arenas_;
  /// Tables of the descriptors of Model::tensorMaps()
  /// (LaunchPlan::tensorMapTableBytes each), by the addresses and rows of
  /// the buffers they describe: one per set of weights (and mapped
  /// activations) bound or called with.
  std::map<std::vector<uint64_t>, cuda::DeviceBuffer> tensorMapTables_;
  cuda::Stream stream_;
  /// A captured step: valid for its shape, stream and bound addresses.
  struct CachedGraph {
    StepShape shape;
    CUstream stream = nullptr;
    std::vector<uint64_t> bindingKey;
    cuda::GraphExec exec;
  };
  /// Most recently used first.
  std::vector<CachedGraph> graphs_;
  int captures_ = 0;
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_DECODESTEP_H
