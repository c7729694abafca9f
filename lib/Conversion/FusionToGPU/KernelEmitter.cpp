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

bool mlir::fusion::isProjectionKernel(KernelOp kernel) {
  return containsOp<QKVProjOp>(kernel);
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
      {"projection", isProjectionKernel, emitProjectionKernel},
      {"attention", isAttentionKernel, emitAttentionKernel},
      {"norm", isNormKernel, emitNormKernel},
      {"head", [](KernelOp) { return true; }, emitHeadKernel},
  };
  return emitters;
}
