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

bool mlir::fusion::isProjectionKernel(KernelOp kernel) {
  return containsOp<QKVProjOp>(kernel) || containsOp<LinearOp>(kernel);
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
