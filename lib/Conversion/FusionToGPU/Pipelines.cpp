//===- Pipelines.cpp - the fusion-to-ptx pass pipeline --------------------===//

#include "fusion/Conversion/Passes.h"
#include "fusion/Transforms/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::fusion;

void mlir::fusion::buildFusionToPTXPipeline(
    OpPassManager &pm, const FusionToPTXPipelineOptions &options) {
  ConvertFusionToGPUPassOptions convertOptions;
  convertOptions.smCount = options.smCount;
  // What the kernels may use follows the chip ("sm_90a" -> 90).
  StringRef chip = options.chip;
  unsigned sm = 0;
  if (chip.consume_front("sm_") &&
      !chip.take_while(llvm::isDigit).getAsInteger(10, sm))
    convertOptions.targetSM = sm;
  pm.addPass(createConvertFusionToGPUPass(convertOptions));

  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createSCFToControlFlowPass());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &lower = pm.nest<gpu::GPUModuleOp>();
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  nvvm.indexBitwidth = 64;
  lower.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  lower.addPass(createReconcileUnrealizedCastsPass());

  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::fusion::registerFusionToPTXPipeline() {
  PassPipelineRegistration<FusionToPTXPipelineOptions>(
      "fusion-to-ptx",
      "Lower fusion.kernel regions to PTX: convert-fusion-to-gpu, "
      "convert-gpu-to-nvvm (bare-pointer memrefs), nvvm-attach-target, "
      "gpu-module-to-binary",
      buildFusionToPTXPipeline);
}
