//===- Passes.h - fusion conversion passes and pipelines ------*- C++ -*-===//

#ifndef FUSION_CONVERSION_PASSES_H
#define FUSION_CONVERSION_PASSES_H

#include "fusion/Conversion/AttentionRingStages.h"
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
  Option<bool> warpSpecializedGemm{
      *this, "warp-specialized-gemm",
      llvm::cl::desc("convert-fusion-to-gpu's warp-specialized-gemm"),
      llvm::cl::init(false)};
  Option<bool> clusterKSplit{
      *this, "cluster-k-split",
      llvm::cl::desc("convert-fusion-to-gpu's cluster-k-split"),
      llvm::cl::init(true)};
  Option<bool> attentionCtaRing{
      *this, "attention-cta-ring",
      llvm::cl::desc("convert-fusion-to-gpu's attention-cta-ring"),
      llvm::cl::init(false)};
  Option<int64_t> attentionRingStages{
      *this, "attention-ring-stages",
      llvm::cl::desc("convert-fusion-to-gpu's attention-ring-stages"),
      llvm::cl::init(kDefaultAttentionRingStages)};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu-module-to-binary format: isa (PTX text), bin, "
                     "fatbin"),
      llvm::cl::init("isa")};
};

/// A target the kernels are built for and tested on.
struct SupportedChip {
  /// The nvvm-attach-target chip, e.g. "sm_90a".
  llvm::StringLiteral name;
  /// Compute capability x 10: the `target-sm` of convert-fusion-to-gpu.
  int64_t sm;
  /// Oldest PTX ISA version (x 10) with this target.
  unsigned minPTXVersion;
  /// The architecture-specific target ("a" suffix): the `arch-specific`
  /// option of convert-fusion-to-gpu.
  bool archSpecific = false;
};

/// The chips fusion-to-ptx and fusion-compile accept, by exact spelling:
/// sm_75 (no tensor-core variants), sm_80, sm_86, sm_87, sm_89, sm_90 and
/// sm_90a (programmatic dependent launch from sm_90).
ArrayRef<SupportedChip> getSupportedChips();

/// The supported chip spelled `name`, or null.
const SupportedChip *lookupSupportedChip(StringRef name);

/// The largest `sm-count` accepted (the grids are sized from it).
inline constexpr int64_t kMaxSMCount = 1024;

/// Checks `value` of the `sm-count` option: in [1, kMaxSMCount]. Reports
/// the reason through `emitError`.
LogicalResult verifySMCount(int64_t value,
                            function_ref<void(const Twine &)> emitError);

/// Checks `value` of the `attention-ring-stages` option: a multiple of
/// kAttentionRingStagesMultiple in [kAttentionRingStagesMultiple,
/// kMaxAttentionRingStages]. Reports the reason through `emitError`.
LogicalResult
verifyAttentionRingStages(int64_t value,
                          function_ref<void(const Twine &)> emitError);

/// Checks the options of fusion-to-ptx before any pass runs: a supported
/// chip, features `+ptxNN` with a PTX ISA version LLVM 22 knows that has the
/// chip, an sm-count in [1, kMaxSMCount], attention-ring-stages as
/// verifyAttentionRingStages, opt-level 0-3 and format isa, bin or fatbin.
/// Reports the first bad option as (option name, message naming its value)
/// through `emitError`.
LogicalResult verifyFusionToPTXOptions(
    const FusionToPTXPipelineOptions &options,
    function_ref<void(StringRef option, const Twine &message)> emitError);

/// convert-fusion-to-gpu, then gpu.module(convert-scf-to-cf),
/// nvvm-attach-target{chip features O}, gpu.module(convert-gpu-to-nvvm with
/// bare-pointer memrefs, reconcile-unrealized-casts), gpu-module-to-binary.
/// `options` must pass verifyFusionToPTXOptions.
void buildFusionToPTXPipeline(OpPassManager &pm,
                              const FusionToPTXPipelineOptions &options);

/// Registers `fusion-to-ptx`, which rejects options that fail
/// verifyFusionToPTXOptions.
void registerFusionToPTXPipeline();

} // namespace fusion
} // namespace mlir

#endif // FUSION_CONVERSION_PASSES_H
