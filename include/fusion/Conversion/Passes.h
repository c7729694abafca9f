//===- Passes.h - fusion conversion passes and pipelines ----------*- C++
//-*-===//

#ifndef FUSION_CONVERSION_PASSES_H
#define FUSION_CONVERSION_PASSES_H

#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;

namespace fusion {

#define GEN_PASS_DECL
#include "fusion/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fusion/Conversion/Passes.h.inc"

/// Options of the `fusion-to-ptx` pipeline.
struct FusionToPTXPipelineOptions
    : public PassPipelineOptions<FusionToPTXPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("Target SM (sm_90, sm_80, ...)"),
                           llvm::cl::init("sm_90")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX ISA feature string"),
                               llvm::cl::init("+ptx80")};
  Option<unsigned> optLevel{*this, "opt-level",
                            llvm::cl::desc("LLVM optimisation level"),
                            llvm::cl::init(3)};
  Option<int64_t> smCount{*this, "sm-count",
                          llvm::cl::desc("SMs the grids should fill"),
                          llvm::cl::init(132)};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu-module-to-binary format: isa (PTX text), bin, "
                     "fatbin"),
      llvm::cl::init("isa")};
};

/// convert-fusion-to-gpu, then gpu.module(convert-scf-to-cf),
/// nvvm-attach-target{chip features O}, gpu.module(convert-gpu-to-nvvm with
/// bare-pointer memrefs, reconcile-unrealized-casts), gpu-module-to-binary.
void buildFusionToPTXPipeline(OpPassManager &pm,
                              const FusionToPTXPipelineOptions &options);

/// Registers `fusion-to-ptx` (PassPipelineRegistration).
void registerFusionToPTXPipeline();

} // namespace fusion
} // namespace mlir

#endif // FUSION_CONVERSION_PASSES_H
