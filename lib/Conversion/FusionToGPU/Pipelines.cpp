//===- Pipelines.cpp - the fusion-to-ptx pass pipeline --------------------===//

#include "fusion/Conversion/Passes.h"
#include "fusion/Transforms/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::fusion;

ArrayRef<SupportedChip> mlir::fusion::getSupportedChips() {
  // Minimum PTX versions: PTX ISA, "PTX Target Architecture" release notes.
  static constexpr SupportedChip chips[] = {
      {"sm_75", 75, 63},
      {"sm_80", 80, 70},
      {"sm_86", 86, 71},
      {"sm_87", 87, 74},
      {"sm_89", 89, 78},
      {"sm_90", 90, 78},
      {"sm_90a", 90, 80, /*archSpecific=*/true},
  };
  return chips;
}

const SupportedChip *mlir::fusion::lookupSupportedChip(StringRef name) {
  for (const SupportedChip &chip : getSupportedChips())
    if (chip.name == name)
      return &chip;
  return nullptr;
}

LogicalResult
mlir::fusion::verifySMCount(int64_t value,
                            function_ref<void(const Twine &)> emitError) {
  if (value >= 1 && value <= kMaxSMCount)
    return success();
  emitError(Twine(value) + " is outside [1, " + Twine(kMaxSMCount) +
            "] (the number of streaming multiprocessors the grids fill)");
  return failure();
}

LogicalResult mlir::fusion::verifyAttentionRingStages(
    int64_t value, function_ref<void(const Twine &)> emitError) {
  if (value >= kAttentionRingStagesMultiple &&
      value <= kMaxAttentionRingStages &&
      value % kAttentionRingStagesMultiple == 0)
    return success();
  emitError(Twine(value) + " is not a multiple of " +
            Twine(kAttentionRingStagesMultiple) + " in [" +
            Twine(kAttentionRingStagesMultiple) + ", " +
            Twine(kMaxAttentionRingStages) +
            "] (the CTA-wide attention ring's stages: a multiple of its "
            "consumer warps, at most what fits at head_dim 128)");
  return failure();
}

/// The PTX ISA versions (x 10) LLVM 22's NVPTX backend can emit, from the
/// oldest one a supported chip needs.
static constexpr unsigned kPTXVersions[] = {63, 64, 65, 70, 71, 72, 73, 74,
                                            75, 76, 77, 78, 80, 81, 82, 83,
                                            84, 85, 86, 87, 88, 90};

/// Checks the `features` option against `chip`: exactly `+ptxNN`.
static LogicalResult verifyFeatures(StringRef features,
                                    const SupportedChip &chip,
                                    function_ref<void(const Twine &)> error) {
  StringRef digits = features;
  unsigned version = 0;
  if (!digits.consume_front("+ptx") || digits.size() != 2 ||
      !llvm::all_of(digits, llvm::isDigit) ||
      digits.getAsInteger(10, version) ||
      !llvm::is_contained(kPTXVersions, version)) {
    error("\"" + features +
          "\" is not a PTX ISA version LLVM can emit for the supported "
          "chips; expected +ptxNN from +ptx63 to +ptx90 (e.g. +ptx80)");
    return failure();
  }
  if (version < chip.minPTXVersion) {
    error("\"" + features + "\" is older than " + chip.name +
          " (which needs +ptx" + Twine(chip.minPTXVersion) + " or newer)");
    return failure();
  }
  return success();
}

LogicalResult mlir::fusion::verifyFusionToPTXOptions(
    const FusionToPTXPipelineOptions &options,
    function_ref<void(StringRef, const Twine &)> emitError) {
  const SupportedChip *chip = lookupSupportedChip(options.chip);
  if (!chip) {
    SmallVector<StringRef> names = llvm::map_to_vector(
        getSupportedChips(),
        [](const SupportedChip &c) -> StringRef { return c.name; });
    emitError("chip", "\"" + options.chip + "\" is not a supported target (" +
                          llvm::join(names, ", ") + ")");
    return failure();
  }
  auto error = [&](StringRef option) {
    return [&emitError, option](const Twine &message) {
      emitError(option, message);
    };
  };
  if (failed(verifyFeatures(options.features, *chip, error("features"))) ||
      failed(verifySMCount(options.smCount, error("sm-count"))) ||
      failed(verifyAttentionRingStages(options.attentionRingStages,
                                       error("attention-ring-stages"))))
    return failure();
  if (options.optLevel > 3) {
    emitError("opt-level", Twine(options.optLevel) + " is not 0, 1, 2 or 3");
    return failure();
  }
  StringRef format = options.format;
  if (format != "isa" && format != "bin" && format != "fatbin") {
    emitError("format", "\"" + options.format +
                            "\" is not isa (PTX text), bin or fatbin");
    return failure();
  }
  return success();
}

void mlir::fusion::buildFusionToPTXPipeline(
    OpPassManager &pm, const FusionToPTXPipelineOptions &options) {
  ConvertFusionToGPUPassOptions convertOptions;
  convertOptions.smCount = options.smCount;
  convertOptions.warpSpecializedGemm = options.warpSpecializedGemm;
  convertOptions.clusterKSplit = options.clusterKSplit;
  convertOptions.attentionCtaRing = options.attentionCtaRing;
  convertOptions.attentionRingStages = options.attentionRingStages;
  // What the kernels may use follows the chip ("sm_90a" -> 90).
  if (const SupportedChip *chip = lookupSupportedChip(options.chip)) {
    convertOptions.targetSM = chip->sm;
    convertOptions.archSpecific = chip->archSpecific;
  }
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
  // NVVM ops without an LLVM intrinsic (mbarrier.try_wait.parity) as inline
  // PTX.
  lower.addPass(createConvertNVVMToLLVMPass());
  lower.addPass(createReconcileUnrealizedCastsPass());

  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::fusion::registerFusionToPTXPipeline() {
  // PassPipelineRegistration<Options> cannot reject parsed options: register
  // the parse, the check and the build by hand.
  registerPassPipeline(
      "fusion-to-ptx",
      "Lower fusion.kernel regions to PTX: convert-fusion-to-gpu, "
      "convert-gpu-to-nvvm (bare-pointer memrefs), convert-nvvm-to-llvm, "
      "nvvm-attach-target, gpu-module-to-binary",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        FusionToPTXPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        bool valid = succeeded(verifyFusionToPTXOptions(
            options, [&](StringRef option, const Twine &message) {
              (void)errorHandler("fusion-to-ptx option " + option + ": " +
                                 message);
            }));
        if (!valid)
          return failure();
        buildFusionToPTXPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(FusionToPTXPipelineOptions());
      });
}
