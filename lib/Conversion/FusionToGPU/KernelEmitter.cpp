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

/// Whether `op` is a fusion op that no emitter builds yet: embedding,
/// argmax, and silu_mul other than in the epilogue of the linear layer that
/// computes its input.
static bool hasNoLowering(Operation *op) {
  if (auto silu = dyn_cast<SiluMulOp>(op))
    return !isa_and_nonnull<LinearOp>(silu.getInput().getDefiningOp());
  return isa<EmbeddingOp, ArgmaxOp>(op);
}

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
  return containsOp<QKVProjOp>(kernel) || containsOp<LinearOp>(kernel);
}

bool mlir::fusion::isAttentionKernel(KernelOp kernel) {
  return containsOp<DecodeAttentionOp>(kernel);
}

bool mlir::fusion::isNormKernel(KernelOp kernel) {
  auto ops = kernel.getBody().front().without_terminator();
  return llvm::hasSingleElement(ops) &&
         isa<RMSNormOp, LayerNormOp>(*ops.begin());
}

ArrayRef<KernelEmitter> mlir::fusion::getKernelEmitters() {
  static const KernelEmitter emitters[] = {
      // First: a kernel holding an op without an emitter fails at that op,
      // whatever else it holds.
      {"unlowered", isUnloweredKernel, emitUnloweredKernel},
      {"projection", isProjectionKernel, emitProjectionKernel},
      {"attention", isAttentionKernel, emitAttentionKernel},
      {"norm", isNormKernel, emitNormKernel},
      {"head", [](KernelOp) { return true; }, emitHeadKernel},
  };
  return emitters;
}
