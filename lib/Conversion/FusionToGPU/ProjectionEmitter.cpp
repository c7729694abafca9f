//===- ProjectionEmitter.cpp - fused norm -> QKV -> RoPE -> KV append -----===//

#include "EmitterUtils.h"

using namespace mlir;
using namespace mlir::fusion;

FailureOr<KernelLaunch>
mlir::fusion::emitProjectionKernel(KernelOp kernel, gpu::GPUModuleOp module) {
  return kernel.emitOpError("projection emitter not built yet");
}
