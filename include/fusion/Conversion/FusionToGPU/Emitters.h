//===- Emitters.h - fusion.kernel -> gpu.func emitters ------------*- C++
//-*-===//
//
// One emitter per kernel kind builds a gpu.func from a fusion.kernel with MLIR
// builders (scf/arith/vector/memref/gpu/nvvm) and returns how to launch it,
// described by the structs below.
//
// Kernel ABI (documented for other runtimes in docs/abi.md):
//  * every buffer is a flat 1-D memref lowered with the bare-pointer
//    convention (convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1}): one
//    `.param .u64` device pointer, elements row-major. MLIR 22 lowers only
//    statically shaped memrefs to bare pointers, so the gpu.func argument is
//    `memref<2^40 x T>` (getFlatBufferType in
//    lib/Conversion/FusionToGPU/Fragments/Abi.h), a nominal extent from which
//    nothing is derived;
//  * parameters in order: the fusion.kernel operands (tensors and KV-cache
//    memrefs alike) in operand order, then one output buffer per kernel
//    result in result order, then workspace buffers, then i32 scalars
//    (`batch` first; then `max_pages`, the block-table row length, when a
//    block table is a parameter; then `num_splits` for split-KV attention).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_CONVERSION_FUSIONTOGPU_EMITTERS_H
#define FUSION_CONVERSION_FUSIONTOGPU_EMITTERS_H

#include "fusion/Dialect/Fusion/IR/FusionOps.h"
#include "fusion/contract/Contract.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <array>
#include <string>

namespace mlir::fusion {

/// The compiler-runtime contract (role and dimension names, the num_splits
/// policy, launch limits), shared with the runtime.
namespace contract = ::fusion::contract;

/// The run-time names of the dynamic dimensions of `type`, a kernel operand
/// or result or a function argument or result, in order: num_pages for a
/// cache (a memref), batch and max_pages for a block table (2-D i32), batch
/// otherwise.
SmallVector<StringRef> getDynamicDimNames(Type type);

/// One kernel parameter, in ABI order.
struct KernelParam {
  using Kind = contract::ParamKind;
  Kind kind;
  /// What the buffer holds: one of the contract's roles for `kind`
  /// (contract::kInputRoles, ...; for scalars contract::kScalarRoles).
  std::string role;
  /// Element type of a buffer (f16, bf16, f32, i32) or the scalar's type.
  Type elementType;
  /// Logical row-major shape; each entry is a decimal size or one of the
  /// run-time names contract::kDimNames. Empty for scalars.
  SmallVector<std::string> shape;
  /// Workspace that must be zero before the first launch (the kernel leaves
  /// it zero again, e.g. split-KV arrival counters).
  bool zeroInitialized = false;
  /// A tensor map's descriptor (which input, the box); elementType and
  /// shape are that input's.
  std::optional<contract::TensorMapSpec> tensorMap;
};

/// A kernel specialised for larger batches: same parameters and results as
/// the primary kernel of its KernelLaunch, launched instead of it when the
/// run-time batch is at least `minBatch` (e.g. the tensor-core projection,
/// which streams the weights once per tile of up to 32 tokens).
struct KernelVariant {
  /// Smallest batch (>= 2) this variant is launched for.
  int64_t minBatch = 0;
  /// PTX entry name (a gpu.func of its own).
  std::string entry;
  /// Grid dimensions x, y, z, as in KernelLaunch.
  std::array<std::string, 3> grid;
  /// Threads per block (1-D blocks).
  int64_t blockSize = 0;
  /// Dynamic shared memory in bytes.
  int64_t dynamicSharedBytes = 0;
  /// The schedule the emitter chose for this variant.
  ScheduleAttrInterface schedule;
};

/// How to launch one emitted kernel.
struct KernelLaunch {
  /// PTX entry name (the fusion.kernel's sym_name).
  std::string entry;
  /// Grid dimensions x, y, z: a decimal count or "batch" / "num_splits".
  std::array<std::string, 3> grid;
  /// Threads per block (1-D blocks).
  int64_t blockSize = 0;
  /// Dynamic shared memory in bytes (0 if only static shared memory).
  int64_t dynamicSharedBytes = 0;
  /// Parameters in ABI order.
  SmallVector<KernelParam> params;
  /// The schedule the emitter chose (threads, rows per CTA, vector width,
  /// KV splits, ...), also recorded on the fusion.kernel as `schedule`.
  ScheduleAttrInterface schedule;
  /// Batch-specialised replacements, by ascending minBatch: the runtime
  /// launches the last one whose minBatch <= batch, else this kernel.
  SmallVector<KernelVariant> variants;
};

// The emitters themselves (one per kernel kind, found through a registry)
// are internal to lib/Conversion/FusionToGPU: see KernelEmitter.h there.

} // namespace mlir::fusion

#endif // FUSION_CONVERSION_FUSIONTOGPU_EMITTERS_H
