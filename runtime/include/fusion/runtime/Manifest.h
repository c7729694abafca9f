//===- Manifest.h - the compiler's kernel manifest ----------------*- C++
//-*-===//
//
// `fusion-compile` writes <prefix>.ptx and <prefix>.manifest.json (format:
// docs/abi.md). This header holds the manifest as plain C++ data, its parser
// and validator, and a scanner of the PTX entry signatures so that the two
// files can be checked against each other without a GPU.
//
// Manifest shape (version 2; unknown members are ignored):
//
//   { "format": "fusion-manifest", "version": 2, "ptx": "model.ptx",
//     "ptx_fnv1a64": "<16 hex digits: contract::ptxFingerprint of the PTX>",
//     "functions": [ { "name": "decode_layer",
//         "arguments": [ {"index": 0, "name": "x", "kind": "tensor"|"buffer",
//                         "role": "input", (a param role or "unused")
//                         "dtype": "f16", "shape": ["batch", 4096]}, ... ],
//         "kernels": [0, 1],                   (launch order)
//         "results": [ {"index": 0, "dtype": "f16", "shape": [...],
//                       "source": {"kernel": 1, "result": 0}
//                               | {"argument": 3}}, ... ] } ],
//     "kernels": [ { "index": 0, "function": "decode_layer", "name": "...",
//         <launch>,                            (the primary launch)
//         "variants": [ {"min_batch": 8, <launch>}, ... ],      (optional)
//         "ops": [ {"op": "rmsnorm", "attributes": {"epsilon": 1e-5}},
//                  {"op": "rope", "attributes": {"theta": 5e5,
//                   "pairing": "neox", "scaling": {...}}}, ... ],
//                                              (optional)
//         "params": [ {"index": 0,
//                      "kind": "input"|"output"|"workspace"|"tensor_map"
//                              |"scalar",
//                      "role": "input", "dtype": "f16"|"bf16"|"f32"|"i32",
//                      "shape": [<dim>, ...],  (buffers and tensor maps)
//                      "zero_init": true,      (workspaces, optional)
//                      "tensor_map": {"of": 3, "box": [64, 64],
//                                     "swizzle_bytes": 128},
//                                              (tensor maps only)
//                      "binding": {"argument": i}          (inputs)
//                               | {"kernel": k, "result": r,
//                                  "reshaped": true}
//                               | {"result": r}   (outputs: result r of
//                                                  this kernel)
//                    }, ... ] } ] }
//
// where <launch> is
//
//   "entry": "<PTX .entry name>",
//   "grid": [<dim>, <dim>, <dim>],             (a count, "batch" or
//                                               "num_splits")
//   "block": [256, 1, 1],
//   "dynamic_shared_bytes": 0, "static_shared_bytes": 2048,  (optional)
//   "schedule": { "max_splits": 32, ... }      (optional)
//
// A kernel's variants have its parameters and are in strictly ascending
// min_batch (>= 2); a step of batch B launches the last variant whose
// min_batch <= B instead of the primary launch (ManifestKernel::launchFor).
//
// A <dim> is an integer in [1, 2^31 - 1] (or its decimal string) or one of
// the run-time sizes "batch", "num_splits", "max_pages" (block-table row
// length), "num_pages" (pages in the KV cache).
//
// Validation is complete: "format" and "version" are required; every member
// has its type and range (grid dimensions within the CUDA limits, block
// [1..1024, 1, 1], shared memory within contract::kMaxSharedBytesPerBlock
// and contract::kMaxStaticSharedBytes, constant
// parts of shapes below kMaxConstantBytes, workspaces [batch, ...]); kinds
// and roles are from the known vocabularies (contract::paramRoles); the
// attributes of the ops the reference reads (rmsnorm, layernorm, qkv_proj,
// rope, decode_attention) are present and typed; bindings and results refer to
// real arguments and earlier kernels with the same dtype and element count;
// a tensor map (contract::TensorMapSpec) describes an input of its kernel
// whose role its own names (weight_map: weight or qkv_weight, input_map:
// input, residual_map: residual; contract::tensorMapTargetRoles) with the
// map's dtype (f16 or bf16) and 2-D shape [rows, cols] (rows a constant or
// "batch", cols a constant of a multiple of 16 bytes), in boxes of
// [1..256] x [1..256] elements whose row is the 128-byte swizzle span.
//
// Errors: FormatError naming the file and the JSON path of the problem
// ("model.manifest.json: kernels[1].params[4].binding: kernel 3 is not an
// earlier kernel"), UnsupportedError for a newer format version.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_MANIFEST_H
#define FUSION_RUNTIME_MANIFEST_H

#include "fusion/contract/Contract.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fusion::runtime {

/// Element types of kernel parameters and function arguments.
enum class ElemType { F16, BF16, F32, I32 };
/// "f16", "bf16", "f32", "i32".
std::string_view elemTypeName(ElemType type);
/// Bytes per element (2 or 4).
int64_t elemTypeSize(ElemType type);
/// Parses "f16", "bf16", "f32", "i32"; nullopt otherwise.
std::optional<ElemType> parseElemType(std::string_view name);

/// Largest byte size of the constant dimensions of a shape (128 TiB): more
/// than any GPU holds, so a larger shape is malformed.
inline constexpr int64_t kMaxConstantBytes = int64_t(1) << 47;

/// Values of the run-time sizes a shape or grid dimension can name.
struct Symbols {
  int64_t batch = 0;
  int64_t num_splits = 1;
  int64_t max_pages = 0;
  int64_t num_pages = 0;
  /// The value of "batch", "num_splits", "max_pages" or "num_pages".
  std::optional<int64_t> lookup(std::string_view name) const;
};

/// One dimension: a constant, or a run-time size named by `symbol`.
struct Dim {
  int64_t value = 0;
  std::string symbol; ///< empty for a constant
  bool isSymbol() const { return !symbol.empty(); }
  /// The dimension's value under `symbols` (throws InvalidArgumentError for
  /// an unknown name).
  int64_t evaluate(const Symbols &symbols) const;
  /// "4096" or "batch".
  std::string str() const;
  bool operator==(const Dim &o) const {
    return value == o.value && symbol == o.symbol;
  }
};
/// "[batch, 32, 128]".
std::string shapeString(const std::vector<Dim> &shape);
/// "[2, 32, 128]".
std::string shapeString(const std::vector<int64_t> &shape);
/// The columns of the 2-D view a tensor map reads of an input of `shape`
/// (contract::tensorMapRowDims): the product of its column dimensions,
/// constants in every shape the manifest parser accepts for a map.
int64_t tensorMapColumns(const std::vector<Dim> &shape);
/// Product of the dimensions under `symbols`.
int64_t numElements(const std::vector<Dim> &shape, const Symbols &symbols);

using contract::ParamKind;
using contract::paramKindName;

/// "a, b or c" of contract::paramRoles(kind), for messages.
std::string roleList(ParamKind kind);

/// Where an input comes from (inputs), or which result of its kernel an
/// output is (outputs).
struct Binding {
  enum class Kind {
    None,         ///< workspaces and scalars
    Argument,     ///< function argument `index`
    KernelResult, ///< result `result` of the earlier kernel `index`
    OwnResult,    ///< an output param: result `result` of this kernel
  };
  Kind kind = Kind::None;
  int index = -1;
  int result = -1;
  /// The value is a reshape of the source (same elements, other shape).
  bool reshaped = false;
  std::string str() const;
};

/// One kernel parameter, in ABI order.
struct ManifestParam {
  int index = 0;
  ParamKind kind = ParamKind::Input;
  std::string role;
  ElemType dtype = ElemType::F16;
  std::vector<Dim> shape; ///< empty for scalars
  bool zeroInit = false;
  Binding binding;
  /// The descriptor of a tensor_map parameter (set iff kind is TensorMap;
  /// its dtype and shape are those of parameter tensorMap->of).
  std::optional<contract::TensorMapSpec> tensorMap;
  /// Passed as a 64-bit device address (buffers and tensor maps).
  bool isBuffer() const { return kind != ParamKind::Scalar; }
  int64_t bytes(const Symbols &symbols) const {
    return numElements(shape, symbols) * elemTypeSize(dtype);
  }
};

/// One op a kernel computes, with its attributes (the manifest's "ops").
/// Nested objects are flattened with dotted keys ("scaling.factor").
struct ManifestOp {
  std::string name; ///< "rmsnorm", "qkv_proj", "rope", "kv_append", ...
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> strings;
  std::map<std::string, bool> flags;
  bool flag(const std::string &key) const {
    auto it = flags.find(key);
    return it != flags.end() && it->second;
  }
};

/// How to launch one PTX entry: a kernel's primary launch or one of its
/// batch variants.
struct LaunchGeometry {
  std::string entry;
  std::array<Dim, 3> grid;
  std::array<int64_t, 3> block{1, 1, 1};
  /// Shared memory in bytes: passed to cuLaunchKernel / reported.
  int64_t dynamicSharedBytes = 0;
  int64_t staticSharedBytes = 0;
  /// The schedule object as JSON text ("{}" if absent).
  std::string scheduleJson = "{}";
  /// Its integer and string members (e.g. max_splits, kind).
  std::map<std::string, int64_t> scheduleInts;
  std::map<std::string, std::string> scheduleStrings;
  /// schedule.cluster_k_split (false when absent): a projection_gemm launch
  /// whose k_split CTAs per row tile run as one thread-block cluster.
  bool clusterKSplit = false;

  /// The grid under `symbols`.
  std::array<int64_t, 3> gridFor(const Symbols &symbols) const;
  /// schedule.cluster_splits: the most splits this launch may combine in a
  /// thread-block cluster (0 when absent: never).
  int64_t clusterSplits() const;
};

/// A batch-specialised replacement of a kernel's primary launch: same
/// parameters, its own entry, grid, block, shared memory and schedule.
struct ManifestVariant : LaunchGeometry {
  /// Launched for run-time batches >= minBatch (>= 2).
  int64_t minBatch = 0;
};

/// One kernel: its parameters, its primary launch (the LaunchGeometry base)
/// and its batch variants. Several kernels may share an entry (the compiler
/// emits identical kernels, e.g. the layers of a model, once).
struct ManifestKernel : LaunchGeometry {
  int index = 0;
  std::string function;
  std::string name;
  std::vector<ManifestParam> params;
  /// The ops it computes, in order (empty if the manifest does not say).
  std::vector<ManifestOp> ops;
  /// Batch variants by strictly ascending minBatch (often none).
  std::vector<ManifestVariant> variants;
  /// "programmatic_dependent_launch": the kernel and its variants start with
  /// griddepcontrol, so a launch with programmatic stream serialization may
  /// overlap the end of the previous kernel in the stream (sm_90+).
  bool programmaticDependentLaunch = false;

  /// The variant launched for `batch`: the index of the last one whose
  /// minBatch <= batch, or -1 for the primary launch.
  int variantFor(int64_t batch) const;
  /// What to launch for `batch`: variants[variantFor(batch)] or the primary
  /// launch (*this). Launch through this, not through `entry` / `grid`.
  const LaunchGeometry &launchFor(int64_t batch) const;

  /// Whether a grid (primary or variant) or a scalar parameter uses
  /// num_splits.
  bool usesNumSplits() const;
  /// Whether a scalar parameter is max_pages.
  bool usesMaxPages() const;
  /// schedule.max_splits (1 for a kernel that does not use num_splits).
  int64_t maxSplits() const;
  /// The cluster dimension x of its launch at `batch` with `numSplits`
  /// splits: contract::chooseClusterX of that launch's cluster_splits for a
  /// kernel that uses num_splits, else contract::chooseKSplitClusterX of its
  /// cluster_k_split and k_split (1: no cluster).
  int64_t clusterXFor(int64_t batch, int64_t numSplits) const;
  /// Number of output params (= kernel results).
  int numOutputs() const;
  /// The output param for result `r`, or null.
  const ManifestParam *output(int r) const;
  /// "kernel 1 (decode_layer_kernel_1)".
  std::string label() const;
  /// label(), plus " variant min_batch 8 (entry)" for variant `v` >= 0.
  std::string label(int v) const;
};

struct ManifestArgument {
  int index = 0;
  std::string name;
  std::string kind; ///< "tensor" or "buffer"
  /// The "role": an input role or kUnusedRole. The parser checks that it
  /// is the role of every kernel parameter bound to the argument.
  std::string role;
  ElemType dtype = ElemType::F16;
  std::vector<Dim> shape;
};

struct ManifestResult {
  int index = 0;
  ElemType dtype = ElemType::F16;
  std::vector<Dim> shape;
  Binding source; ///< Argument or KernelResult
};

struct ManifestFunction {
  std::string name;
  std::vector<ManifestArgument> arguments;
  std::vector<int> kernels; ///< launch order
  std::vector<ManifestResult> results;
};

/// A parsed and validated manifest.
struct Manifest {
  /// Where it was read from (for messages).
  std::string source;
  int64_t version = 1;
  std::string ptx;
  /// contract::ptxFingerprint of the PTX it describes (16 hex digits).
  std::string ptxFingerprint;
  std::string chip;
  std::string strategy;
  std::vector<ManifestFunction> functions;
  std::vector<ManifestKernel> kernels;
  /// Parses and validates manifest text (see the file comment). `source`
  /// names it in messages.
  static Manifest parse(std::string_view text,
                        const std::string &source = "<manifest>");
  /// Reads and parses a manifest file. Throws Error if it cannot be read.
  static Manifest load(const std::string &path);

  /// The function called `name`; with an empty name, the only function.
  /// Throws InvalidArgumentError listing the functions otherwise.
  const ManifestFunction &function(std::string_view name = {}) const;
};

/// The signature of one PTX `.entry`: its name and the type of each
/// parameter (".u64", ".u32", ".b32", ...; ".b8[16]" for arrays).
struct PtxEntry {
  std::string name;
  std::vector<std::string> paramTypes;
};
/// Every `.entry` of a PTX module, in order (comments are skipped).
/// Throws FormatError (naming `source`) for an unterminated parameter list.
std::vector<PtxEntry> scanPtxEntries(std::string_view ptx,
                                     const std::string &source = "<ptx>");

/// Checks that `ptx` is the PTX `manifest` was written with: its
/// contract::ptxFingerprint equals the manifest's. Throws FormatError naming
/// both files and both hashes.
void checkPtxFingerprint(std::string_view ptx, const std::string &ptxName,
                         const Manifest &manifest);

/// Checks that every kernel of `manifest` has an entry in `ptx` whose
/// parameters match the manifest: one 64-bit (.u64/.b64/.s64) parameter per
/// buffer, one 32-bit (.u32/.b32/.s32) per i32 scalar, in order; the same
/// for the entry of each of its variants. Throws FormatError naming the
/// kernel (and variant), the entry and the first mismatch.
void checkPtxEntries(std::string_view ptx, const std::string &ptxName,
                     const Manifest &manifest);

/// Checks that a GPU of `computeCapability` (major, minor; what
/// cuda::Context::computeCapability returns) runs the PTX of `manifest`,
/// whose `chip` is `sm_<major><minor>` (PTX runs from that
/// compute capability on) or `sm_<major><minor>a` (architecture-specific
/// PTX, e.g. sm_90a's warpgroup MMA: that compute capability only; PTX ISA,
/// "Target ISA notes"). Throws UnsupportedError naming both and the chip to
/// compile for instead (the portable sm_<major><minor> on a later GPU, the
/// GPU's own on an older one); FormatError for a chip of another form. A
/// manifest without a chip is not checked.
void checkChipRuns(const Manifest &manifest,
                   std::pair<int, int> computeCapability);

/// checkPtxFingerprint, then checkPtxEntries: what a runtime checks before
/// loading `ptx` for `manifest`.
void checkPtxAgainstManifest(std::string_view ptx, const std::string &ptxName,
                             const Manifest &manifest);

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_MANIFEST_H
