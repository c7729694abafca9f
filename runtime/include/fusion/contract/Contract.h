//===- Contract.h - the compiler-runtime contract ---------------*- C++ -*-===//
//
// The facts the compiler (fusion-compile, the emitters) and every launcher
// of its kernels (the runtime, bench/diagnostics) must agree on, defined once:
// the manifest's format name and version, the parameter kinds and role
// vocabulary, the run-time dimension names, the num_splits policy of split-KV
// attention, and the CUDA launch limits both sides check. docs/abi.md
// describes the same contract in prose.
//
// Where it lives, and why: this header is plain C++17 (no MLIR, LLVM or JSON)
// under runtime/include, because the runtime is the project that must build
// on its own (`cmake -S runtime` on the GPU machine) and never depends on the
// compiler. The dependency may point the other way: the top-level build adds
// runtime/include to the compiler's include path, so the compiler includes
// this file as "fusion/contract/Contract.h" too. The Python scripts
// (test/gpu/check_attention.py, docs/abi.md's CuPy example) still re-implement
// the num_splits policy and name this header as its definition.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_CONTRACT_CONTRACT_H
#define FUSION_CONTRACT_CONTRACT_H

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fusion::contract {

//===----------------------------------------------------------------------===//
// Manifest format
//===----------------------------------------------------------------------===//

/// The manifest's top-level "format" value.
inline constexpr std::string_view kManifestFormat = "fusion-manifest";
/// The manifest's top-level "version" the compiler writes and the runtime
/// reads (bumped when the manifest changes incompatibly). Version 2 added
/// kPtxFingerprintKey and made functions[].arguments[].role required.
inline constexpr int64_t kManifestVersion = 2;

/// The manifest member holding ptxFingerprint() of the PTX it was written
/// with, as 16 lowercase hex digits: a runtime refuses a PTX file that is
/// not the one its manifest describes (the entry signatures alone do not
/// show a model compiled for other shapes).
inline constexpr std::string_view kPtxFingerprintKey = "ptx_fnv1a64";

/// The 64-bit FNV-1a hash of `text` (Fowler, Noll, Vo; offset basis
/// 14695981039346656037, prime 1099511628211): detects a mismatched file,
/// not tampering.
constexpr uint64_t ptxFingerprint(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

//===----------------------------------------------------------------------===//
// Parameters and roles (docs/abi.md sections 1 and 3.3)
//===----------------------------------------------------------------------===//

/// The kind of a kernel parameter, in the order the ABI lists them. A
/// tensor map is the device address of a TMA descriptor that the launcher
/// encodes for another (input) parameter of the kernel (TensorMapSpec).
enum class ParamKind { Input, Output, Workspace, TensorMap, Scalar };

/// The manifest spelling of `kind`: "input", "output", "workspace",
/// "tensor_map" or "scalar".
constexpr std::string_view paramKindName(ParamKind kind) {
  switch (kind) {
  case ParamKind::Input:
    return "input";
  case ParamKind::Output:
    return "output";
  case ParamKind::Workspace:
    return "workspace";
  case ParamKind::TensorMap:
    return "tensor_map";
  case ParamKind::Scalar:
    break;
  }
  return "scalar";
}

/// The kind spelled `name` (paramKindName's inverse); nullopt for any other
/// string.
constexpr std::optional<ParamKind> parseParamKind(std::string_view name) {
  for (ParamKind kind :
       {ParamKind::Input, ParamKind::Output, ParamKind::Workspace,
        ParamKind::TensorMap, ParamKind::Scalar})
    if (paramKindName(kind) == name)
      return kind;
  return std::nullopt;
}

/// The kind of a function argument (docs/abi.md section 3.1).
namespace argument {
/// A read-only input.
inline constexpr std::string_view kTensor = "tensor";
/// State the caller owns and the kernels update in place (the KV caches).
inline constexpr std::string_view kBuffer = "buffer";
} // namespace argument

/// Roles: what a parameter (or a function argument) holds. A role name may
/// be shared by an input and an output ("query", "key", "value").
namespace role {
// Inputs.
inline constexpr std::string_view kInput = "input";
inline constexpr std::string_view kResidual = "residual";
inline constexpr std::string_view kNormWeight = "norm_weight";
inline constexpr std::string_view kNormBias = "norm_bias";
inline constexpr std::string_view kQKVWeight = "qkv_weight";
inline constexpr std::string_view kQKVBias = "qkv_bias";
inline constexpr std::string_view kQuery = "query";
inline constexpr std::string_view kKey = "key";
inline constexpr std::string_view kValue = "value";
inline constexpr std::string_view kPositions = "positions";
inline constexpr std::string_view kSeqLens = "seq_lens";
inline constexpr std::string_view kBlockTable = "block_table";
inline constexpr std::string_view kKeyCache = "key_cache";
inline constexpr std::string_view kValueCache = "value_cache";
/// The weight of fusion.linear ([N, K]) and the table of fusion.embedding
/// ([V, H]): one role, so that a tied LM head binds one argument as both.
inline constexpr std::string_view kWeight = "weight";
/// Token ids: fusion.embedding's input, fusion.argmax's result.
inline constexpr std::string_view kTokens = "tokens";
/// fusion.argmax's input ([batch, V]).
inline constexpr std::string_view kLogits = "logits";
// Outputs (besides query, key and value).
inline constexpr std::string_view kNormed = "normed";
inline constexpr std::string_view kResidualOut = "residual_out";
inline constexpr std::string_view kOutput = "output";
// Workspaces of split-KV attention: partial outputs, their softmax
// statistics, and the zero-initialised arrival counters.
inline constexpr std::string_view kPartialOut = "partial_out";
inline constexpr std::string_view kPartialStats = "partial_stats";
inline constexpr std::string_view kSplitCounters = "split_counters";
// Workspaces of an argmax folded into the projection that computes the
// logits (docs/abi.md 3.3), both zero-initialised and left zero: one packed
// 64-bit key per token ([batch, 2] i32 words, little-endian), and the
// kernel's CTA arrival counter (element 0 of a [batch] i32 workspace: every
// workspace is sized by the batch).
inline constexpr std::string_view kArgmaxKeys = "argmax_keys";
inline constexpr std::string_view kArgmaxArrivals = "argmax_arrivals";
// Tensor maps (TensorMapSpec): the TMA descriptor of an input of the
// kernel. weight_map describes a `weight` or `qkv_weight` input (a constant
// [rows, cols]), input_map the `input` and residual_map the `residual`
// input (activations, ["batch", H]: TensorMapSpec says which rows),
// key_cache_map and value_cache_map the `key_cache` and `value_cache`
// inputs (["num_pages", P, Hkv, D], read as one row per token slot).
inline constexpr std::string_view kWeightMap = "weight_map";
inline constexpr std::string_view kInputMap = "input_map";
inline constexpr std::string_view kResidualMap = "residual_map";
inline constexpr std::string_view kKeyCacheMap = "key_cache_map";
inline constexpr std::string_view kValueCacheMap = "value_cache_map";
// Function arguments that no kernel parameter reads.
inline constexpr std::string_view kUnused = "unused";
} // namespace role

/// The roles an input parameter may have; a function argument has one of
/// them or role::kUnused.
inline constexpr std::array<std::string_view, 17> kInputRoles = {
    role::kInput,     role::kResidual,   role::kNormWeight, role::kNormBias,
    role::kQKVWeight, role::kQKVBias,    role::kQuery,      role::kKey,
    role::kValue,     role::kPositions,  role::kSeqLens,    role::kBlockTable,
    role::kKeyCache,  role::kValueCache, role::kWeight,     role::kTokens,
    role::kLogits};
/// The roles an output parameter may have.
inline constexpr std::array<std::string_view, 7> kOutputRoles = {
    role::kNormed, role::kResidualOut, role::kQuery, role::kKey,
    role::kValue,  role::kOutput,      role::kTokens};
/// The roles a workspace parameter may have.
inline constexpr std::array<std::string_view, 5> kWorkspaceRoles = {
    role::kPartialOut, role::kPartialStats, role::kSplitCounters,
    role::kArgmaxKeys, role::kArgmaxArrivals};
/// The roles a tensor-map parameter may have (tensorMapTargetRoles gives
/// the roles of the input each describes).
inline constexpr std::array<std::string_view, 5> kTensorMapRoles = {
    role::kWeightMap, role::kInputMap, role::kResidualMap, role::kKeyCacheMap,
    role::kValueCacheMap};

//===----------------------------------------------------------------------===//
// Tensor maps (docs/abi.md section 3.3)
//===----------------------------------------------------------------------===//

/// A tensor_map parameter's TMA descriptor, as the manifest describes it
/// (`"tensor_map": {"of", "box", "swizzle_bytes"}`, its `role`, `dtype` and
/// `shape`, the last two those of input `of`, whose role the map's role
/// names: tensorMapTargetRoles). The launcher passes the device address
/// (kTensorMapAlignment-aligned, kTensorMapBytes long, constant while any
/// launch that reads it may run or replay) of the CUtensorMap that
///   cuTensorMapEncodeTiled(map, F16 or BF16 (dtype), rank 2,
///     address bound to parameter `of`, globalDim {cols, rows},
///     globalStrides {cols * element bytes}, boxDim {box[1], box[0]},
///     elementStrides {1, 1}, CU_TENSOR_MAP_INTERLEAVE_NONE,
///     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
///     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
/// encodes (CUDA driver API, sm_90+): the row-major [rows, cols] view of
/// the input (tensorMapRowDims) read in boxes of box[0] rows x box[1]
/// columns, 128-byte swizzled. cols is the product of the shape's column
/// dimensions, constants. A 2-D input is its own view: rows is shape[0]
/// where that is a constant (a weight_map's); where it is dim::kBatch (an
/// input_map's or a residual_map's ["batch", H]) it is the rows of the
/// buffer the launcher binds to `of`: those it allocated it for (the
/// capacity's batch, never more than the buffer holds), or those of the
/// caller's tensor. A KV cache ["num_pages", P, Hkv, D] (key_cache_map,
/// value_cache_map) is viewed as [num_pages * P, Hkv * D], one row per
/// token slot, num_pages the pages of the cache bound to `of` (rows must
/// stay below 2^31: the kernel's row coordinates are i32). Every launcher
/// encodes these maps, not only this runtime. The kernel reads whole boxes:
/// rows of the box past the tensor read as zeros (OOB fill none), and rows
/// between the step's batch and `rows` (stale contents of a larger buffer)
/// reach only tokens whose results the kernel never stores; a cache box's
/// rows past a sequence's length are masked by the kernel.
struct TensorMapSpec {
  /// Index of the kernel parameter whose buffer the map describes.
  int64_t of = -1;
  /// Box rows and columns (elements); box[1] * element bytes == swizzle.
  int64_t boxRows = 0, boxCols = 0;
  /// The swizzle span in bytes (only 128 today).
  int64_t swizzleBytes = 128;
};
/// How many leading dimensions of a tensor map's input form the rows of its
/// 2-D view (the rest form the columns): 2 for a KV cache of rank 4
/// [num_pages, P, Hkv, D] (a row per token slot), else 1.
constexpr size_t tensorMapRowDims(size_t rank) { return rank == 4 ? 2 : 1; }
/// Size and alignment of a CUtensorMap in device memory.
inline constexpr int64_t kTensorMapBytes = 128;
inline constexpr int64_t kTensorMapAlignment = 64;

//===----------------------------------------------------------------------===//
// Run-time dimensions (docs/abi.md section 1)
//===----------------------------------------------------------------------===//

/// Names of the sizes known only at run time. A shape or grid dimension is a
/// constant or one of these; each scalar parameter (an i32 by value) is
/// named after the one it passes.
namespace dim {
/// Sequences in the step (one new token each).
inline constexpr std::string_view kBatch = "batch";
/// Columns of the block table.
inline constexpr std::string_view kMaxPages = "max_pages";
/// Pages in the KV-cache pool (sizes the caches only; never a scalar).
inline constexpr std::string_view kNumPages = "num_pages";
/// KV splits of split-KV attention (chooseNumSplits).
inline constexpr std::string_view kNumSplits = "num_splits";
} // namespace dim

/// Every run-time dimension name.
inline constexpr std::array<std::string_view, 4> kDimNames = {
    dim::kBatch, dim::kMaxPages, dim::kNumPages, dim::kNumSplits};
/// The roles a scalar parameter may have, in ABI order.
inline constexpr std::array<std::string_view, 3> kScalarRoles = {
    dim::kBatch, dim::kMaxPages, dim::kNumSplits};

/// A constant list of role names (a view of one of the arrays above).
struct RoleList {
  const std::string_view *first = nullptr;
  size_t count = 0;
  constexpr const std::string_view *begin() const { return first; }
  constexpr const std::string_view *end() const { return first + count; }
  constexpr size_t size() const { return count; }
  constexpr std::string_view operator[](size_t i) const { return first[i]; }
  /// Whether `role` is in the list.
  constexpr bool contains(std::string_view role) const {
    for (std::string_view r : *this)
      if (r == role)
        return true;
    return false;
  }
};

/// The roles a parameter of `kind` may have: kInputRoles, kOutputRoles,
/// kWorkspaceRoles, kTensorMapRoles or kScalarRoles (function arguments
/// take the input roles
/// or role::kUnused).
constexpr RoleList paramRoles(ParamKind kind) {
  switch (kind) {
  case ParamKind::Input:
    return {kInputRoles.data(), kInputRoles.size()};
  case ParamKind::Output:
    return {kOutputRoles.data(), kOutputRoles.size()};
  case ParamKind::Workspace:
    return {kWorkspaceRoles.data(), kWorkspaceRoles.size()};
  case ParamKind::TensorMap:
    return {kTensorMapRoles.data(), kTensorMapRoles.size()};
  case ParamKind::Scalar:
    break;
  }
  return {kScalarRoles.data(), kScalarRoles.size()};
}

/// The input roles of role::kWeightMap's targets.
inline constexpr std::array<std::string_view, 2> kWeightMapTargetRoles = {
    role::kWeight, role::kQKVWeight};
/// The input roles a tensor map of role `mapRole` may describe: kWeight or
/// kQKVWeight (weight_map), kInput (input_map), kResidual (residual_map),
/// kKeyCache (key_cache_map) or kValueCache (value_cache_map); none for any
/// other role.
constexpr RoleList tensorMapTargetRoles(std::string_view mapRole) {
  if (mapRole == role::kWeightMap)
    return {kWeightMapTargetRoles.data(), kWeightMapTargetRoles.size()};
  if (mapRole == role::kInputMap)
    return {&role::kInput, 1};
  if (mapRole == role::kResidualMap)
    return {&role::kResidual, 1};
  if (mapRole == role::kKeyCacheMap)
    return {&role::kKeyCache, 1};
  if (mapRole == role::kValueCacheMap)
    return {&role::kValueCache, 1};
  return {};
}

//===----------------------------------------------------------------------===//
// The num_splits policy of split-KV attention (docs/abi.md section 3.4)
//===----------------------------------------------------------------------===//

/// Schedule keys of an attention kernel that parameterise the policy.
namespace schedule {
/// Upper bound on num_splits; also sizes the workspaces.
inline constexpr std::string_view kMaxSplits = "max_splits";
/// CTAs the split grid should reach (about one wave).
inline constexpr std::string_view kTargetCtas = "target_ctas";
/// Fewest KV tokens worth a split of their own.
inline constexpr std::string_view kMinChunkTokens = "min_chunk_tokens";
/// The policy's formula, for readers of the manifest (informative only).
inline constexpr std::string_view kNumSplitsPolicy = "num_splits_policy";
/// Most splits the kernel combines through a thread-block cluster (0:
/// never); chooseClusterX is the launch rule (docs/abi.md section 3.4).
inline constexpr std::string_view kClusterSplits = "cluster_splits";
/// A GEMM-shaped projection variant (kind projection_gemm) whose k_split
/// CTAs of a row tile combine their partials through a thread-block cluster
/// (true; absent: false); chooseKSplitClusterX is the launch rule
/// (docs/abi.md section 3.4).
inline constexpr std::string_view kClusterKSplit = "cluster_k_split";
/// The CTAs of a projection_gemm row tile (k_split consecutive CTAs of
/// grid x).
inline constexpr std::string_view kKSplit = "k_split";
} // namespace schedule

/// Most CTAs of a portable thread-block cluster (CUDA C Programming Guide,
/// "Thread Block Clusters"), so the most splits a cluster combines.
inline constexpr int64_t kMaxClusterSplits = 8;

/// Resident attention CTAs per SM the default target_ctas assumes (the
/// compiler sets target_ctas = kTargetCtasPerSM x its SM count).
inline constexpr int64_t kTargetCtasPerSM = 2;

/// The members of an attention kernel's schedule that choose num_splits. The
/// defaults are the compiler's for an H100/H200 (132 SMs); the runtime falls
/// back on them for a member a manifest lacks.
struct SplitPolicy {
  /// Schedule key kMaxSplits.
  int64_t maxSplits = 64;
  /// Schedule key kTargetCtas.
  int64_t targetCtas = kTargetCtasPerSM * 132;
  /// Schedule key kMinChunkTokens.
  int64_t minChunkTokens = 64;
};

/// The policy as the manifest states it (schedule key kNumSplitsPolicy);
/// chooseNumSplits computes it.
inline constexpr std::string_view kNumSplitsPolicyFormula =
    "num_splits = max(1, min(max_splits, floor(target_ctas / (batch * "
    "grid_y)), ceil(max_seq_len / min_chunk_tokens)))";

/// How a split-KV attention kernel divides a sequence of `len` tokens among
/// its splits, as the manifest states it (informative only: the kernel
/// computes it; `chunk_multiple` is a member of its schedule).
inline constexpr std::string_view kChunkPolicyFormula =
    "chunk = roundUp(ceil(len / num_splits), chunk_multiple); split s reads "
    "tokens [s*chunk, min(len, (s+1)*chunk))";

/// The num_splits to launch an attention kernel with: as many splits as keep
/// the grid within about one wave (`policy.targetCtas` CTAs over `batch` x
/// `gridY` CTAs per split), at most one per `policy.minChunkTokens` tokens of
/// the longest sequence (`maxSeqLen` tokens), at most `policy.maxSplits`, and
/// at least 1. `gridY` is the grid's y dimension of the launch the batch
/// selects. Every member of `policy` must be >= 1; a `batch`, `gridY` or
/// `maxSeqLen` below 1 counts as 1.
constexpr int64_t chooseNumSplits(const SplitPolicy &policy, int64_t batch,
                                  int64_t gridY, int64_t maxSeqLen) {
  const int64_t ctasPerSplit =
      std::max<int64_t>(1, batch) * std::max<int64_t>(1, gridY);
  const int64_t byCtas = policy.targetCtas / ctasPerSplit;
  const int64_t byLength =
      (std::max<int64_t>(1, maxSeqLen) + policy.minChunkTokens - 1) /
      policy.minChunkTokens;
  return std::max<int64_t>(1, std::min({policy.maxSplits, byCtas, byLength}));
}

/// Whether `clusterSplits` is a valid schedule value (key kClusterSplits):
/// 0 (never) or 2 to kMaxClusterSplits.
constexpr bool isValidClusterSplits(int64_t clusterSplits) {
  return clusterSplits == 0 ||
         (clusterSplits >= 2 && clusterSplits <= kMaxClusterSplits);
}

/// The cluster dimension x of a launch of `numSplits` splits of a kernel
/// whose schedule has `clusterSplits` (schedule key kClusterSplits): the
/// splits as one cluster (grid x = cluster x = numSplits) when 2 <=
/// numSplits <= min(clusterSplits, kMaxClusterSplits), else 1 (no cluster).
constexpr int64_t chooseClusterX(int64_t clusterSplits, int64_t numSplits) {
  return numSplits >= 2 && numSplits <= clusterSplits &&
                 numSplits <= kMaxClusterSplits
             ? numSplits
             : 1;
}

/// Whether a projection_gemm schedule with `kSplit` CTAs per row tile may
/// set cluster_k_split: 2 <= kSplit <= kMaxClusterSplits (one portable
/// cluster holds the row tile's CTAs).
constexpr bool isValidClusterKSplit(int64_t kSplit) {
  return kSplit >= 2 && kSplit <= kMaxClusterSplits;
}

/// The cluster dimension x of a launch of a projection_gemm variant whose
/// schedule has `clusterKSplit` (schedule key kClusterKSplit) and `kSplit`
/// (kKSplit): the k_split consecutive CTAs of each row tile as one cluster
/// (grid x, rowTiles * kSplit, unchanged) when clusterKSplit and
/// isValidClusterKSplit(kSplit), else 1 (no cluster: the kernel then sums
/// the partials through its workspaces, in the same order).
constexpr int64_t chooseKSplitClusterX(bool clusterKSplit, int64_t kSplit) {
  return clusterKSplit && isValidClusterKSplit(kSplit) ? kSplit : 1;
}

/// Floats between two token rows of a cluster_k_split variant's exchange
/// tile: its tile_rows plus 4, so that a warp's accumulator stores (8 rows
/// x 4 token pairs) fall in 32 different banks.
constexpr int64_t clusterExchangePitch(int64_t tileRows) {
  return tileRows + 4;
}

/// Bytes of a cluster_k_split variant's dynamic shared memory that each CTA
/// exchanges with its cluster: its fp32 partial tile (tile_tokens rows at
/// clusterExchangePitch), then the tile's tile_tokens fp32 partial sums of
/// squares. The variant's dynamic_shared_bytes hold at least this.
constexpr int64_t clusterExchangeBytes(int64_t tileTokens, int64_t tileRows) {
  return 4 * tileTokens * (clusterExchangePitch(tileRows) + 1);
}

//===----------------------------------------------------------------------===//
// Launch limits (CUDA C Programming Guide, "Technical Specifications per
// Compute Capability")
//===----------------------------------------------------------------------===//

/// The most threads a thread block may have (every compute capability).
inline constexpr int64_t kMaxThreadsPerBlock = 1024;
/// The largest grid dimensions x, y, z.
inline constexpr std::array<int64_t, 3> kMaxGridDims = {2147483647, 65535,
                                                        65535};
/// The most static shared memory a thread block may have, in bytes (48 KiB
/// on every chip), which is also the most static plus dynamic shared memory
/// it gets without the opt-in (cuFuncSetAttribute
/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, docs/abi.md section 1).
inline constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;
/// The alignment in bytes of every buffer parameter (the kernels use 16-byte
/// vector loads).
inline constexpr int64_t kBufferAlignment = 16;

/// The most shared memory (static plus dynamic, after the opt-in) one thread
/// block may use on compute capability `sm` (major x 10 + minor), in bytes:
/// 227 KiB on sm_90, 163 KiB on sm_80/87, 99 KiB on sm_86/89, 64 KiB below.
constexpr int64_t maxSharedBytesPerBlock(int64_t sm) {
  if (sm >= 90)
    return 227 * 1024;
  if (sm == 80 || sm == 87)
    return 163 * 1024;
  if (sm >= 80)
    return 99 * 1024;
  return 64 * 1024;
}

/// The most shared memory a manifest may ask for on any chip we compile for
/// (sm_90's; a device's own smaller limit is the driver's to report).
inline constexpr int64_t kMaxSharedBytesPerBlock = maxSharedBytesPerBlock(90);

} // namespace fusion::contract

#endif // FUSION_CONTRACT_CONTRACT_H
