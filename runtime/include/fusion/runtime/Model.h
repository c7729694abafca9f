//===- Model.h - a compiled model and its launch plan (CPU side) --*- C++
//-*-===//
//
// `Model` is one function of a manifest made ready to run: the kernels it
// launches in order, where each kernel parameter comes from (a function
// argument the caller binds, a buffer the runtime allocates for a kernel
// result or a workspace, or a scalar), and the launch geometry and buffer
// sizes as functions of the run-time sizes.
//
// `LaunchPlan` adds capacities (maximum batch, block-table width, KV pages)
// and device addresses, validates a step's shape against them and produces
// the exact argument list and grid of every launch. It never touches a GPU:
// DecodeStep (DecodeStep.h) feeds its output to cuLaunchKernel, and the unit
// tests inspect it directly.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_MODEL_H
#define FUSION_RUNTIME_MODEL_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/Manifest.h"
#include "fusion/runtime/ReferenceConfig.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusion::runtime {

/// A buffer the runtime owns: the output of a kernel (an intermediate or a
/// function result) or a kernel's workspace.
struct InternalBuffer {
  /// "kernel 1 (entry) output 0 \"output\"" / "... workspace \"partials\"".
  std::string label;
  int kernel = 0;
  /// The kernel parameter it is passed as.
  int param = 0;
  ParamKind kind = ParamKind::Output;
  std::string role;
  ElemType dtype = ElemType::F16;
  std::vector<Dim> shape;
  /// Must be zero before the first launch (the kernel leaves it zero).
  bool zeroInit = false;
};

/// The two workspace arenas of a LaunchPlan: workspaces are scratch that a
/// kernel uses only while it runs, so the kernels of a step share them
/// (docs/abi.md section 1.2). Zero-init workspaces share one that is zeroed
/// once (each kernel leaves its range zero), the others one of plain
/// scratch; the two never alias.
enum class WorkspaceArena { Scratch, ZeroInit };

/// Where one kernel parameter's value comes from.
struct ParamSource {
  enum class Kind { Argument, Internal, TensorMap, Scalar };
  Kind kind = Kind::Argument;
  /// Function argument index (Argument), internal buffer index (Internal)
  /// or tensor-map slot (TensorMap: Model::tensorMaps()).
  int index = 0;
  /// The scalar's role (Scalar): "batch", "max_pages" or "num_splits".
  std::string scalar;
};

/// A TMA descriptor the runtime encodes for tensor_map parameters
/// (contract::TensorMapSpec, docs/abi.md section 3.3): one slot per distinct
/// described buffer and layout, shared by the parameters that agree on both.
struct TensorMapSlot {
  /// "kernel 0 (entry) param 13 \"weight_map\" of param 3 \"qkv_weight\""
  /// (the first parameter that uses the slot).
  std::string label;
  /// The buffer it describes: a function argument or an internal buffer.
  ParamSource target;
  /// Its element type (f16 or bf16) and shape: [rows, cols] (elements),
  /// rows a constant (a weight's) or "batch" (an activation's), or a KV
  /// cache's ["num_pages", P, Hkv, D], read as [num_pages * P, Hkv * D]
  /// (contract::tensorMapRowDims); LaunchPlan::tensorMapRows resolves the
  /// rows.
  ElemType dtype = ElemType::F16;
  std::vector<Dim> shape;
  /// Box and swizzle (spec.of is the first parameter's `of`).
  contract::TensorMapSpec spec;
  /// The columns of the 2-D view (the product of its constant column
  /// dimensions).
  int64_t cols() const;
};

/// One function of a manifest, resolved.
class Model {
public:
  /// The function `function` of `manifest` (empty: its only function).
  /// Throws InvalidArgumentError for an unknown function name.
  Model(Manifest manifest, std::string_view function = {});
  /// Movable (the kernels it points at move with it), not copyable.
  Model(Model &&) = default;
  Model &operator=(Model &&) = default;
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;
  /// Model(Manifest::load(path), function).
  static Model load(const std::string &manifestPath,
                    std::string_view function = {});

  const Manifest &manifest() const { return manifest_; }
  const ManifestFunction &function() const { return *function_; }
  const std::vector<ManifestArgument> &arguments() const {
    return function_->arguments;
  }
  const std::vector<ManifestResult> &results() const {
    return function_->results;
  }
  /// The kernels in launch order.
  const std::vector<const ManifestKernel *> &kernels() const {
    return kernels_;
  }
  /// Sources of the parameters of kernels()[i], in ABI order.
  const std::vector<ParamSource> &paramSources(size_t i) const {
    return sources_[i];
  }
  /// Buffers the runtime allocates (kernel outputs and workspaces).
  const std::vector<InternalBuffer> &internalBuffers() const {
    return internal_;
  }
  /// The internal buffer holding result `r` of manifest kernel `kernel`.
  int internalForResult(int kernel, int r) const;
  /// The TMA descriptors the tensor_map parameters point at, by slot.
  const std::vector<TensorMapSlot> &tensorMaps() const { return tensorMaps_; }

  /// Index of the argument called `name`; throws InvalidArgumentError
  /// listing the arguments if there is none.
  int argumentIndex(std::string_view name) const;
  /// The role of argument `i`: the role of the first kernel parameter bound
  /// to it ("input", "residual", "norm_weight", "qkv_weight", "qkv_bias",
  /// "positions", "seq_lens", "block_table", "key_cache", "value_cache",
  /// ...), or "unused".
  const std::string &argumentRole(int i) const { return argRoles_[i]; }
  /// The first argument with role `role`, or -1.
  int argumentWithRole(std::string_view role) const;
  /// The role of result `r` (the role of the kernel output it comes from,
  /// e.g. "output", "residual_out"; an argument's role if it is one).
  const std::string &resultRole(int r) const { return resultRoles_[r]; }
  /// The first result with role `role`, or -1.
  int resultWithRole(std::string_view role) const;

  /// Whether some kernel takes num_splits / max_pages.
  bool usesNumSplits() const { return usesNumSplits_; }
  bool usesMaxPages() const { return usesMaxPages_; }
  /// The largest num_splits every kernel accepts (min of their
  /// schedule.max_splits; 1 if none uses num_splits).
  int64_t maxSplits() const { return maxSplits_; }
  /// The num_splits policy of the first split-KV kernel, from the grid and
  /// schedule of the launch `batch` selects (ManifestKernel::launchFor; the
  /// kernel's own schedule for members a variant's lacks):
  /// max(1, min(max_splits, floor(target_ctas / (batch * grid_y)),
  /// ceil(maxSeqLen / min_chunk_tokens))); 1 if no kernel uses num_splits
  /// (target_ctas defaults to 264, min_chunk_tokens to 64).
  int64_t defaultNumSplits(int64_t batch, int64_t maxSeqLen) const;

private:
  /// The slot of tensor_map parameter `p` of `kernel`, whose `of` comes
  /// from `target`: an existing slot of the same buffer and layout, or a
  /// new one.
  int tensorMapSlot(const ManifestKernel &kernel, const ManifestParam &p,
                    const ParamSource &target);

  Manifest manifest_;
  const ManifestFunction *function_ = nullptr;
  std::vector<const ManifestKernel *> kernels_;
  std::vector<std::vector<ParamSource>> sources_;
  std::vector<InternalBuffer> internal_;
  std::vector<TensorMapSlot> tensorMaps_;
  std::vector<std::string> argRoles_;
  std::vector<std::string> resultRoles_;
  bool usesNumSplits_ = false;
  bool usesMaxPages_ = false;
  int64_t maxSplits_ = 1;
};

/// Capacities the buffers are allocated for.
struct Capacity {
  /// Largest batch a step may use.
  int64_t maxBatch = 1;
  /// Largest block-table row length (max_pages) a step may use.
  int64_t maxPages = 1;
  /// Pages in the KV cache buffers (the "num_pages" size).
  int64_t numPages = 1;
  /// The sizes at capacity (num_splits = its largest value).
  Symbols symbols(int64_t maxSplits) const {
    return {maxBatch, maxSplits, maxPages, numPages};
  }
};

/// The run-time sizes of one decode step.
struct StepShape {
  int64_t batch = 1;
  /// Block-table row length (the block table buffer is [batch, maxPages]).
  int64_t maxPages = 1;
  /// KV splits of split-KV attention; ignored unless the model uses them.
  int64_t numSplits = 1;
  bool operator==(const StepShape &o) const {
    return batch == o.batch && maxPages == o.maxPages &&
           numSplits == o.numSplits;
  }
  bool operator!=(const StepShape &o) const { return !(*this == o); }
};

/// The host copies of a step's int32 inputs: what the caller uploads to the
/// arguments with roles "positions", "seq_lens" and "block_table" (a null
/// pointer for a role the function does not have). Not owning.
struct StepInputs {
  const int32_t *positions = nullptr;  ///< [batch]
  const int32_t *seqLens = nullptr;    ///< [batch]
  const int32_t *blockTable = nullptr; ///< [batch, StepShape::maxPages]
};

/// One kernel argument: a device address or an i32.
struct KernelArg {
  bool isScalar = false;
  uint64_t pointer = 0;
  int32_t scalar = 0;
};

/// Everything cuLaunchKernel needs for one kernel of a step: the launch
/// its batch selects (ManifestKernel::launchFor).
struct PreparedLaunch {
  /// Position in Model::kernels() (launch order).
  int kernel = 0;
  /// The kernel's variant launched (ManifestKernel::variantFor), or -1 for
  /// its primary launch.
  int variant = -1;
  /// The PTX entry, grid, block and dynamic shared memory (bytes) of that
  /// launch.
  std::string entry;
  std::array<uint32_t, 3> grid{};
  std::array<uint32_t, 3> block{};
  uint32_t dynamicSharedBytes = 0;
  /// Launch with programmatic stream serialization
  /// (ManifestKernel::programmaticDependentLaunch).
  bool programmaticDependentLaunch = false;
  /// The thread-block cluster's x dimension (1: no cluster):
  /// ManifestKernel::clusterXFor (a split-KV attention kernel's splits as
  /// one cluster, a cluster_k_split variant's k_split). DecodeStep sets it
  /// to 1 where the device cannot run such clusters.
  uint32_t clusterX = 1;
  std::vector<KernelArg> args;
};

/// Kernel `kernel` (position in model.kernels()) launched at `sizes`,
/// without its arguments: the variant `sizes.batch` selects, its entry,
/// grid, block, dynamic shared memory, programmatic dependent launch and
/// cluster x. LaunchPlan::prepare adds the arguments.
PreparedLaunch launchGeometry(const Model &model, int kernel,
                              const Symbols &sizes);

/// A Model with capacities and device addresses: validates steps and
/// produces launches. Holds a reference to the Model (keep it alive).
class LaunchPlan {
public:
  /// Throws InvalidArgumentError for capacities < 1 and CapacityError if a
  /// buffer, or a kernel's workspaces together, at capacity exceed 2^63
  /// bytes.
  LaunchPlan(const Model &model, const Capacity &capacity);

  const Model &model() const { return *model_; }
  const Capacity &capacity() const { return capacity_; }

  /// Bytes argument `i` needs at capacity.
  int64_t argumentBytes(int i) const;
  /// Bytes internal buffer `i` needs at capacity.
  int64_t internalBytes(int i) const;
  /// Bytes of the result `r` for a step of `shape` (what to copy back).
  int64_t resultBytes(int r, const StepShape &shape) const;

  /// Workspace offsets in an arena are multiples of this (what a separate
  /// cuMemAlloc would give).
  static constexpr int64_t kWorkspaceAlignment = 256;
  /// The arena of internal buffer `i`, a workspace: ZeroInit if it is
  /// zero_init, else Scratch.
  WorkspaceArena workspaceArena(int i) const;
  /// Byte offset of internal buffer `i`, a workspace, in its arena: a
  /// kernel's workspaces of one arena lie one after another in parameter
  /// order from offset 0, each at a multiple of kWorkspaceAlignment, so
  /// they never overlap each other; those of different kernels overlap.
  /// Throws InvalidArgumentError if `i` is not a workspace.
  int64_t workspaceOffset(int i) const;
  /// Bytes of arena `a` at capacity: the most that one kernel's workspaces
  /// in it span (0 if no kernel has one).
  int64_t arenaBytes(WorkspaceArena a) const {
    return arenaBytes_[static_cast<int>(a)];
  }
  /// Device memory the runtime allocates at capacity: every kernel output
  /// (each its own buffer), the two arenas and the tensor-map table.
  int64_t runtimeBufferBytes() const;

  /// Bytes of the tensor-map table: contract::kTensorMapBytes per slot of
  /// Model::tensorMaps(), slot i at byte i * kTensorMapBytes (so each is
  /// kTensorMapAlignment-aligned); 0 without tensor maps.
  int64_t tensorMapTableBytes() const;
  /// Sets the device address of the table, which the owner allocates and
  /// fills (DecodeStep). Throws InvalidArgumentError for a null address or
  /// one not aligned to contract::kTensorMapAlignment.
  void setTensorMapTable(uint64_t address);
  /// The device address of slot `i`'s descriptor, what its tensor_map
  /// parameters are passed (0 before setTensorMapTable).
  uint64_t tensorMapAddress(int i) const;
  /// The device address of the buffer slot `i` describes (its argument's
  /// binding or its internal buffer; 0 while unset).
  uint64_t tensorMapTarget(int i) const;
  /// The rows slot `i`'s descriptor covers: its shape's row dimensions
  /// (contract::tensorMapRowDims) resolved at capacity, the rows
  /// argumentBytes / internalBytes size its buffer for (a weight's constant
  /// rows; an activation's "batch" rows: the capacity's batch, past the
  /// step's; a KV cache's num_pages * P token slots). Throws
  /// InvalidArgumentError if the buffer bound to it (when set) holds fewer
  /// than rows * cols elements, so that the map never reads past it, or if
  /// the rows reach 2^31 (the kernels' TMA row coordinates are i32).
  int64_t tensorMapRows(int i) const;

  /// Binds function argument `i` (or the one called `name`) to device
  /// memory at `address` holding `bytes`. Throws InvalidArgumentError for
  /// an unknown argument, a null or not 16-byte aligned address, fewer
  /// bytes than the argument needs at capacity (the message gives its shape
  /// and the capacities), or memory that overlaps another bound argument
  /// where either is a buffer the kernels write (kind "buffer": the caches).
  void bindArgument(int i, uint64_t address, uint64_t bytes);
  void bindArgument(std::string_view name, uint64_t address, uint64_t bytes);
  /// Binds the first argument whose role is `role` (Model::argumentRole:
  /// "key_cache", "block_table", ...). Throws InvalidArgumentError listing
  /// the roles if none has it.
  void bindRole(std::string_view role, uint64_t address, uint64_t bytes);
  bool isBound(int i) const { return argAddress_[i] != 0; }
  uint64_t argumentAddress(int i) const { return argAddress_[i]; }
  /// Sets the address of internal buffer `i` (the owner allocates
  /// internalBytes(i)). Throws InvalidArgumentError for a null address.
  void setInternal(int i, uint64_t address);
  uint64_t internalAddress(int i) const { return internalAddress_[i]; }
  /// The device address of function result `r` (an internal buffer, or a
  /// bound argument).
  uint64_t resultAddress(int r) const;
  /// The device addresses a captured CUDA graph holds: every argument's,
  /// every internal buffer's and the tensor-map table's, in that order. A
  /// graph captured under another key is stale for this plan; one captured
  /// under the same key may be replayed (the buffers' contents are not part
  /// of it).
  std::vector<uint64_t> bindingKey() const;

  /// Throws unless a step of `shape` can run: CapacityError for a batch
  /// above maxBatch or a block-table width above maxPages,
  /// InvalidArgumentError for batch < 1, maxPages < 1 (when a kernel reads
  /// a block table), numSplits outside [1, maxSplits] (when a kernel uses
  /// it), unbound arguments (all listed), unset internal buffers, an unset
  /// tensor-map table (when a kernel has tensor maps), or a grid
  /// dimension (of the launch shape.batch selects) out of the CUDA limits.
  void validate(const StepShape &shape) const;
  /// validate(shape), then the launches of the step in order, each the
  /// kernel's variant for shape.batch or its primary launch.
  std::vector<PreparedLaunch> prepare(const StepShape &shape) const;

  /// Throws unless the step's int32 inputs satisfy the kernels'
  /// preconditions (docs/runtime.md, "Launch preconditions"): for each row
  /// b (sequence b of the step), with P the page size of the caches and
  /// the row's capacity C = shape.maxPages * P tokens:
  /// - 0 <= positions[b] < C (CapacityError past C) when a kernel appends
  ///   to the caches (takes positions and a cache);
  /// - 0 <= seq_lens[b] <= C (CapacityError past C) when a kernel reads the
  ///   caches (takes seq_lens), and the appended slot is one of the
  ///   seq_lens[b] slots read;
  /// - every block-table entry the row uses (logical pages below
  ///   ceil(seq_lens[b] / P) and positions[b] / P) in [0, num_pages);
  /// - no page written by one row (the appended slot's) used by another,
  ///   unless both are tokens of one sequence (the same block-table row)
  ///   and rowsMayShareSequence(); no slot written by two rows.
  /// InvalidArgumentError otherwise (a null pointer for a role the function
  /// has, a negative value, a page id, a shared page). Messages name the
  /// row, the value and the bound. Call it with the values uploaded for
  /// each step; it reads only host memory.
  void checkStepInputs(const StepShape &shape, const StepInputs &in) const;
  /// Whether several rows of one step may be tokens of one sequence (a
  /// prefill chunk: row r at position p_r, seq_lens p_r + 1, the sequence's
  /// block-table row): true unless a kernel both appends to the caches and
  /// reads them (takes positions, seq_lens and a cache), where a row could
  /// read a slot another row of the step has not written yet. Kernels run
  /// in order, so an append in an earlier kernel is done before attention
  /// reads (docs/abi.md section 1.1).
  bool rowsMayShareSequence() const;

private:
  /// Throws InvalidArgumentError if [address, address + bytes) overlaps a
  /// bound argument other than `i` where either is a buffer kernels write.
  void checkNoOverlap(int i, uint64_t address, uint64_t bytes) const;
  /// Fills workspaceOffset_ and arenaBytes_ (see workspaceOffset).
  void layOutWorkspaces();

  const Model *model_;
  Capacity capacity_;
  std::vector<uint64_t> argAddress_;
  std::vector<uint64_t> argBytes_; ///< bytes of each bound argument
  std::vector<uint64_t> internalAddress_;
  /// Per internal buffer: its offset in its arena, -1 for an output.
  std::vector<int64_t> workspaceOffset_;
  /// Indexed by WorkspaceArena.
  std::array<int64_t, 2> arenaBytes_{};
  uint64_t tensorMapTable_ = 0;
};

/// The front half of a decoder layer as a compiled function exposes it:
/// which argument/result plays which role and the shapes they imply. Found
/// from the parameter roles, not from argument names.
struct FrontHalfSignature {
  DType dtype = DType::F16;
  int64_t hidden = 0;
  ref::AttentionDims dims;
  int64_t pageSize = 0;
  /// Argument indices (-1 when absent: residual, qkvBias).
  int x = -1, residual = -1, normWeight = -1, normBias = -1, qkvWeight = -1,
      qkvBias = -1, positions = -1, seqLens = -1, blockTable = -1,
      keyCache = -1, valueCache = -1;
  /// Result indices (-1 when absent: residualOut).
  int output = -1, residualOut = -1;
  /// The reference configuration read from the kernels' "ops" (norm kind
  /// and epsilon, unit offset, rope pairing / theta / rotary_dim / llama3
  /// scaling, attention scale), or nothing if the manifest lists no ops.
  std::optional<ref::FrontHalfConfig> reference;

  /// Reads the signature from `model`. Throws InvalidArgumentError naming
  /// the missing role or the inconsistent shape if the function is not a
  /// front half (x [batch, H], norm weight [H], qkv weight
  /// [(Hq + 2 Hkv) D, H], caches [num_pages, P, Hkv, D], output
  /// [batch, Hq, D]), or if its ops contradict the shapes (head counts,
  /// bias) or are missing one of norm, qkv_proj, rope, decode_attention;
  /// UnsupportedError for an unknown rope pairing or scaling type, or a
  /// function of several layers.
  static FrontHalfSignature fromModel(const Model &model);
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_MODEL_H
