//===- fusion-opt.cpp - the fusion compiler driver ------------------------===//
//
// MlirOptMain with the fusion dialect and passes plus every upstream dialect,
// extension and pass (func, arith, tensor, scf, memref, vector, gpu, nvvm,
// llvm, ...), so pipelines from fusion ops to PTX run in one tool.
//
//===----------------------------------------------------------------------===//

#include "fusion/Conversion/Passes.h"
#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "fusion/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::fusion::registerFusionTransformsPasses();
  mlir::fusion::registerFusionConversionPasses();
  mlir::fusion::registerFusionToPTXPipeline();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates gpu.module bodies to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  registry.insert<mlir::fusion::FusionDialect>();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "fusion compiler: LLM decode operator fusion\n", registry));
}
