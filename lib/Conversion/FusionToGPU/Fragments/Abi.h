//===- Abi.h - params, gpu.func, argument binding ---------------*- C++ -*-===//
//
// The kernel ABI of include/fusion/Conversion/FusionToGPU/Emitters.h (and
// docs/abi.md) on the compiler side: the parameter list of a fusion.kernel,
// the gpu.func built from it, the one map from kernel body values to gpu.func
// arguments (KernelArgs) every kernel uses, shared-memory buffers, and the
// `fusion.launch` attribute recorded for the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ABI_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ABI_H

#include "../KernelBuilder.h"
#include "../TargetInfo.h"
#include "fusion/Conversion/FusionToGPU/Emitters.h"

#include <string>

namespace mlir::fusion {

/// Symbol name of the gpu.module that holds every emitted kernel.
inline constexpr llvm::StringLiteral kKernelModuleName = "fusion_kernels";

/// Nominal extent of the flat 1-D buffer memrefs of a gpu.func.
///
/// The ABI passes every buffer as one bare device pointer. MLIR 22's
/// bare-pointer convention (convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv})
/// only accepts statically shaped memrefs, so a buffer is typed
/// `memref<1099511627776 x T>` (2^40 elements) instead of `memref<?xT>`. The
/// extent is nominal: nothing is bounds-checked or derived from it; the true
/// size of each buffer is in its KernelParam::shape.
inline constexpr int64_t kFlatBufferExtent = int64_t(1) << 40;

/// `memref<kFlatBufferExtent x elementType>`.
MemRefType getFlatBufferType(Type elementType);

/// The ABI shape of a shaped value: static sizes in decimal, dynamic ones
/// named by `dynamicNames` in order (e.g. {"batch"} for tensor<?x4096xf16>,
/// {"num_pages"} for a cache, {"batch", "max_pages"} for a block table).
SmallVector<std::string> getABIShape(ShapedType type,
                                     ArrayRef<StringRef> dynamicNames);

/// The role of a kernel operand, from the op in the body that uses it (one
/// of contract::kInputRoles; contract::role::kUnused if nothing uses it).
std::string getOperandRole(KernelOp kernel, unsigned operandIndex);

/// The role of a kernel result, from the op that yields it (one of
/// contract::kOutputRoles).
std::string getResultRole(KernelOp kernel, unsigned resultIndex);

/// The default parameter list of a kernel in ABI order: one Input per
/// operand, one Output per result, then the i32 scalar `batch`, then
/// `max_pages` when a block table is an operand. Emitters append workspace
/// buffers before the scalars and scalars after them as they need.
SmallVector<KernelParam> getDefaultKernelParams(KernelOp kernel);

/// Index of the first parameter with `role` (-1 if none).
int findParam(ArrayRef<KernelParam> params, StringRef role);

/// Inserts `added` before the first scalar of `params` (the ABI order:
/// inputs, outputs, workspaces, tensor maps, scalars).
void insertBeforeScalars(SmallVector<KernelParam> &params,
                         ArrayRef<KernelParam> added);

/// Inserts (before the scalars) a tensor map of role `role` over input
/// parameter `index`, of its dtype and shape, in boxes of `boxRows` x
/// `boxCols` (contract::TensorMapSpec).
void insertTensorMap(SmallVector<KernelParam> &params, int64_t index,
                     StringRef role, int64_t boxRows, int64_t boxCols);

/// Creates `gpu.func @name(...) kernel` at the end of `module` with one
/// argument per parameter (a flat buffer memref for buffers, the scalar type
/// for scalars) and `known_block_size = [blockSize, 1, 1]`. On a target with
/// griddepcontrol the body starts with `griddepcontrol.launch_dependents` and
/// `griddepcontrol.wait` (programmatic dependent launch). The builder is
/// left before the body's `gpu.return`.
gpu::GPUFuncOp createKernelFunc(OpBuilder &builder, Location loc,
                                gpu::GPUModuleOp module, StringRef name,
                                ArrayRef<KernelParam> params, int64_t blockSize,
                                const TargetInfo &target);

/// Runs `body` with `b` set before the `griddepcontrol.wait` of the
/// gpu.func `b` builds (createKernelFunc's prologue; after what earlier calls
/// placed there), then restores `b`'s insertion point; does nothing where the
/// function has no such prologue (a target without griddepcontrol). `body` may
/// only touch memory that no earlier kernel of the stream writes (e.g. prefetch
/// weights into L2): under programmatic dependent launch it runs while the
/// previous kernel is still running.
void emitBeforeGridDependencyWait(
    ImplicitLocOpBuilder &b,
    llvm::function_ref<void(ImplicitLocOpBuilder &)> body);

/// The gpu.func arguments of a kernel's body values and parameters: the one
/// binding every kernel uses.
class KernelArgs {
public:
  /// `func` was created from `params` for `kernel` (createKernelFunc).
  KernelArgs(KernelOp kernel, gpu::GPUFuncOp func, ArrayRef<KernelParam> params)
      : kernel(kernel), func(func), params(params) {}

  /// The argument of `bodyValue` if it is a kernel operand (a block argument
  /// of the body), else null (also for a null value).
  Value input(Value bodyValue) const;
  /// The output buffer of `bodyValue` if the kernel yields it (the first
  /// result that does), else null.
  Value output(Value bodyValue) const;
  /// The argument of the first parameter with `role` (a scalar such as
  /// contract::dim::kBatch or a workspace role), null if there is none.
  Value param(StringRef role) const;

  gpu::GPUFuncOp getFunc() const { return func; }

private:
  // Mutable: the op accessors are not const.
  mutable KernelOp kernel;
  mutable gpu::GPUFuncOp func;
  ArrayRef<KernelParam> params;
};

/// Adds a workgroup (shared memory) attribution
/// `memref<count x elementType, #gpu.address_space<workgroup>>` to `func`,
/// `alignment`-byte aligned (`llvm.align`; 16 lets vector<8xf16> accesses be
/// ld.shared.v4).
Value addWorkgroupBuffer(gpu::GPUFuncOp func, Type elementType, int64_t count,
                         int64_t alignment = 16);

/// A `memref<count x elementType, workgroup>` view of the kernel's dynamic
/// shared memory (offset 0, 16-byte aligned); the launch must pass at least
/// count * sizeof(elementType) bytes of dynamic shared memory. Declares the
/// module's extern `.shared` array the lowering reuses (the lowering's own
/// global is internal, and the NVPTX backend demotes it to a one-byte static
/// `.shared` variable).
Value getDynamicSharedBuffer(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module,
                             Type elementType, int64_t count);

/// The address (`!llvm.ptr<3>`) of the kernel's dynamic shared memory, for
/// NVVM ops that take pointers (cp.async, ldmatrix); declares the same
/// extern `.shared` array as getDynamicSharedBuffer.
Value getDynamicSharedPointer(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module);

/// Checks `launch` (and its variants) against what CUDA can launch: entry
/// names that are PTX identifiers (isValidKernelName), 1 to
/// contract::kMaxThreadsPerBlock threads, and numeric grid dimensions in
/// [1, contract::kMaxGridDims]; run-time dimensions ("batch", "num_splits") are
/// the launcher's to check. Reports the first violation on `kernel`.
LogicalResult verifyLaunchLimits(KernelOp kernel, const KernelLaunch &launch);

/// The `#fusion.launch` of `launch`, emitted for `kernel` into `module`:
/// with each entry's `static_smem` (the bytes of its workgroup attributions)
/// and, when the entry starts with createKernelFunc's griddepcontrol
/// prologue, `programmatic_dependent_launch`. Fails with a diagnostic on
/// `kernel` when the launch breaks the contract the attributes verify (e.g. a
/// parameter role the contract does not know: an op without a case in
/// getUseRole / getResultRole).
FailureOr<LaunchAttr> getLaunchAttr(KernelOp kernel, const KernelLaunch &launch,
                                    gpu::GPUModuleOp module);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ABI_H
