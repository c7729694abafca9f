//===- KernelEmitter.h - the registry of kernel emitters --------*- C++ -*-===//
//
// convert-fusion-to-gpu builds each fusion.kernel with the first emitter of
// getKernelEmitters() that matches it (XLA's GetFusionEmitter): a new kernel
// kind is a new entry here and a file in Kernels/, not an edit of the pass.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELEMITTER_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELEMITTER_H

#include "TargetInfo.h"
#include "fusion/Conversion/FusionToGPU/Emitters.h"

namespace mlir::fusion {

/// One kind of kernel.
struct KernelEmitter {
  /// For diagnostics and debugging ("projection", "attention", ...).
  StringRef name;
  /// Whether this emitter builds `kernel`.
  bool (*matches)(KernelOp kernel);
  /// Builds `kernel`'s gpu.func(s) in `module` and returns how to launch
  /// them; reports unsupported kernels on `kernel` and fails.
  FailureOr<KernelLaunch> (*emit)(KernelOp kernel, const TargetInfo &target,
                                  gpu::GPUModuleOp module);
};

/// The emitters in the order they are tried; the last one matches every
/// kernel.
ArrayRef<KernelEmitter> getKernelEmitters();

/// `AttrT(params...)`, the schedule an emitter chose for `kernel`, through the
/// attribute's own verifier (FusionSchedules.td): a schedule the verifier
/// rejects (a shape past what the kernel supports, or an emitter bug) is an
/// error on the kernel, not an attribute that the manifest carries and
/// fusion-opt cannot parse back.
template <typename AttrT, typename... Params>
FailureOr<AttrT> getCheckedSchedule(KernelOp kernel, Params... params) {
  AttrT attr = AttrT::getChecked(
      [&] { return kernel.emitOpError("has no valid schedule: "); },
      kernel.getContext(), params...);
  if (!attr)
    return failure();
  return attr;
}

/// Kernels/ProjectionKernel.cpp: a kernel containing fusion.qkv_proj or
/// fusion.linear: the front half `[embedding ->] [rmsnorm|layernorm] ->
/// qkv_proj -> [rope] -> [kv_append]` or a linear layer `[embedding |
/// sum_partials ->] [rmsnorm|layernorm] -> linear -> [silu_mul]`
/// (Kernels/Projection.h).
bool isProjectionKernel(KernelOp kernel);
FailureOr<KernelLaunch> emitProjectionKernel(KernelOp kernel,
                                             const TargetInfo &target,
                                             gpu::GPUModuleOp module);

/// Kernels/AttentionKernel.cpp: a kernel containing fusion.decode_attention
/// (split-KV GQA decode attention with the combine in the same kernel).
bool isAttentionKernel(KernelOp kernel);
FailureOr<KernelLaunch> emitAttentionKernel(KernelOp kernel,
                                            const TargetInfo &target,
                                            gpu::GPUModuleOp module);

/// Kernels/NormKernel.cpp: one rmsnorm or layernorm alone.
bool isNormKernel(KernelOp kernel);
FailureOr<KernelLaunch> emitNormKernel(KernelOp kernel,
                                       const TargetInfo &target,
                                       gpu::GPUModuleOp module);

/// Kernels/EmbeddingKernel.cpp: one fusion.embedding alone (a row gather,
/// ids clamped to the table).
bool isEmbeddingKernel(KernelOp kernel);
FailureOr<KernelLaunch> emitEmbeddingKernel(KernelOp kernel,
                                            const TargetInfo &target,
                                            gpu::GPUModuleOp module);

/// Kernels/ArgmaxKernel.cpp: one fusion.argmax alone (one CTA per row).
bool isArgmaxKernel(KernelOp kernel);
FailureOr<KernelLaunch> emitArgmaxKernel(KernelOp kernel,
                                         const TargetInfo &target,
                                         gpu::GPUModuleOp module);

/// Kernels/SiluMulKernel.cpp: one fusion.silu_mul alone (the unfused SwiGLU
/// activation).
bool isSiluMulKernel(KernelOp kernel);
FailureOr<KernelLaunch> emitSiluMulKernel(KernelOp kernel,
                                          const TargetInfo &target,
                                          gpu::GPUModuleOp module);

/// Kernels/HeadKernel.cpp: rope, kv_append or rope -> kv_append (and the
/// error for any other kernel).
FailureOr<KernelLaunch> emitHeadKernel(KernelOp kernel,
                                       const TargetInfo &target,
                                       gpu::GPUModuleOp module);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELEMITTER_H
