//===- RowKernel.h - one vector of a token's row per thread -----*- C++ -*-===//
//
// The shape the embedding and the standalone silu_mul kernels share: grid
// [batch, chunks], CTA (b, c) handles vectors [c * threads, +threads) of
// token b's row, one vector per thread (Schedule/ElementwiseSchedule.h,
// chooseRowChunks), and records a #fusion.row_schedule.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_ROWKERNEL_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_ROWKERNEL_H

#include "../Fragments/Abi.h"
#include "../KernelEmitter.h"

namespace mlir::fusion {

/// Emits the gpu.func of `kernel` for rows of `vectors` vectors of `width`
/// elements: `bind` takes the kernel's arguments (failing with a diagnostic
/// when they are not what the op needs), then `body` runs for the thread's
/// token (index) and vector (index, < vectors). Returns the launch with
/// its #fusion.row_schedule of `kind`.
FailureOr<KernelLaunch> emitRowKernel(
    KernelOp kernel, gpu::GPUModuleOp module, const TargetInfo &target,
    RowKind kind, int64_t vectors, int64_t width,
    llvm::function_ref<LogicalResult(const KernelArgs &)> bind,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value token, Value vec)>
        body);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_ROWKERNEL_H
