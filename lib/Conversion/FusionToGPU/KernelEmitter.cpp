//===- KernelEmitter.cpp - the registry of kernel emitters ----------------===//

#include "KernelEmitter.h"

using namespace mlir;
using namespace mlir::fusion;

/// Whether the body of `kernel` holds an op of type `OpTy`.
template <typename OpTy>
static bool containsOp(KernelOp kernel) {
  return kernel.getBody()
      .walk([](OpTy) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

/// Whether the body of `kernel` is a single op of one of the types `OpTys`.
template <typename... OpTys>
static bool isSingleOpKernel(KernelOp kernel) {
  auto ops = kernel.getBody().front().without_terminator();
  return llvm::hasSingleElement(ops) && isa<OpTys...>(*ops.begin());
}

/// Whether `op` is a fusion op that no emitter builds yet.
static bool hasNoLowering(Operation *op) { return isa<LinearOp>(op); }

bool mlir::fusion::isUnloweredKernel(KernelOp kernel) {
  return kernel.getBody()
      .walk([](Operation *op) {
        return hasNoLowering(op) ? WalkResult::interrupt()
                                 : WalkResult::advance();
      })
      .wasInterrupted();
}

FailureOr<KernelLaunch> mlir::fusion::emitUnloweredKernel(KernelOp kernel,
                                                          const TargetInfo &,
                                                          gpu::GPUModuleOp) {
  kernel.getBody().walk([&](Operation *op) {
    if (hasNoLowering(op))
      op->emitOpError("has no GPU lowering yet (kernel ")
          << kernel.getSymName() << " cannot be compiled)";
  });
  return failure();
}

bool mlir::fusion::isProjectionKernel(KernelOp kernel) {
  return containsOp<QKVProjOp>(kernel);
}

bool mlir::fusion::isAttentionKernel(KernelOp kernel) {
  return containsOp<DecodeAttentionOp>(kernel);
}

bool mlir::fusion::isNormKernel(KernelOp kernel) {
  return isSingleOpKernel<RMSNormOp, LayerNormOp>(kernel);
}

bool mlir::fusion::isEmbeddingKernel(KernelOp kernel) {
  return isSingleOpKernel<EmbeddingOp>(kernel);
}

bool mlir::fusion::isArgmaxKernel(KernelOp kernel) {
  return isSingleOpKernel<ArgmaxOp>(kernel);
}

bool mlir::fusion::isSiluMulKernel(KernelOp kernel) {
  return isSingleOpKernel<SiluMulOp>(kernel);
}

ArrayRef<KernelEmitter> mlir::fusion::getKernelEmitters() {
  static const KernelEmitter emitters[] = {
      // First: a kernel holding an op without an emitter fails at that op,
      // whatever else it holds.
      {"unlowered", isUnloweredKernel, emitUnloweredKernel},
      {"projection", isProjectionKernel, emitProjectionKernel},
      {"attention", isAttentionKernel, emitAttentionKernel},
      {"norm", isNormKernel, emitNormKernel},
      {"embedding", isEmbeddingKernel, emitEmbeddingKernel},
      {"argmax", isArgmaxKernel, emitArgmaxKernel},
      {"silu_mul", isSiluMulKernel, emitSiluMulKernel},
      {"head", [](KernelOp) { return true; }, emitHeadKernel},
  };
  return emitters;
}
