//===- FusionToGPU.cpp - fusion.kernel -> gpu.func + launch plan ----------===//
//
// Implements --convert-fusion-to-gpu (see Passes.td): one gpu.func per
// distinct fusion.kernel, built by the first emitter of the registry
// (KernelEmitter.h) that matches it, and the launch description recorded on
// the kernel as its `#fusion.launch`.
//
//===----------------------------------------------------------------------===//

#include "Fragments/Abi.h"
#include "KernelEmitter.h"
#include "TargetInfo.h"
#include "fusion/Conversion/Passes.h"
#include "fusion/Dialect/Fusion/IR/FusionOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::fusion {
#define GEN_PASS_DEF_CONVERTFUSIONTOGPUPASS
#include "fusion/Conversion/Passes.h.inc"
} // namespace mlir::fusion

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// Returns the module's `gpu.module @fusion_kernels`, creating it (and
/// marking the module `gpu.container_module`) if needed.
static gpu::GPUModuleOp getOrCreateKernelModule(ModuleOp module) {
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(module.getContext()));
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName))
    return existing;
  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
  return gpu::GPUModuleOp::create(builder, module.getLoc(), kKernelModuleName);
}

/// Records the emitter's schedule on `kernel`. A schedule the kernel
/// already carries is kept: it must be the one the emitter chose (the
/// attention emitter takes its choices from it).
static LogicalResult recordSchedule(KernelOp kernel,
                                    ScheduleAttrInterface chosen) {
  ScheduleAttrInterface carried = kernel.getScheduleAttr();
  if (carried && carried != chosen)
    return kernel.emitOpError("carries the schedule ")
           << carried << ", but the kernel it describes has " << chosen;
  kernel.setScheduleAttr(chosen);
  return success();
}

/// A kernel as the deduplication compares it: its attributes but its name
/// (taken before the pass records its schedule and launch), its signature
/// and its body.
struct KernelKey {
  /// Mutable: the op accessors are not const.
  mutable KernelOp kernel;
  DictionaryAttr attrs;

  explicit KernelKey(KernelOp kernel) : kernel(kernel) {
    NamedAttrList list(kernel->getAttrDictionary());
    list.erase(SymbolTable::getSymbolAttrName());
    attrs = list.getDictionary(kernel.getContext());
  }

  /// Structural hash: attributes, signature, and every body op (name,
  /// attributes, types; not locations or value identities).
  llvm::hash_code hash() const {
    llvm::hash_code h = llvm::hash_combine(
        attrs, llvm::hash_combine_range(kernel->getOperandTypes()),
        llvm::hash_combine_range(kernel->getResultTypes()));
    kernel.getBody().walk([&](Operation *op) {
      h = llvm::hash_combine(h, OperationEquivalence::computeHash(
                                    op, OperationEquivalence::ignoreHashValue,
                                    OperationEquivalence::ignoreHashValue,
                                    OperationEquivalence::IgnoreLocations));
    });
    return h;
  }

  /// Identical kernels (e.g. the layers of a model): equal attributes and
  /// signature, and equivalent bodies (OperationEquivalence, locations
  /// ignored).
  bool isEquivalentTo(const KernelKey &other) const {
    return attrs == other.attrs &&
           kernel->getOperandTypes() == other.kernel->getOperandTypes() &&
           kernel->getResultTypes() == other.kernel->getResultTypes() &&
           OperationEquivalence::isRegionEquivalentTo(
               &kernel.getBody(), &other.kernel.getBody(),
               OperationEquivalence::IgnoreLocations);
  }
};

/// A kernel already emitted, and what its duplicates get.
struct EmittedKernel {
  KernelKey key;
  ScheduleAttrInterface schedule;
  LaunchAttr launchAttr;
};

/// The first emitter of the registry that matches `kernel`.
static const KernelEmitter &getEmitter(KernelOp kernel) {
  for (const KernelEmitter &emitter : getKernelEmitters())
    if (emitter.matches(kernel))
      return emitter;
  llvm_unreachable("the last emitter matches every kernel");
}

struct ConvertFusionToGPUPass
    : mlir::fusion::impl::ConvertFusionToGPUPassBase<ConvertFusionToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyOptions()))
      return signalPassFailure();
    SmallVector<KernelOp> kernels;
    module.walk([&](KernelOp kernel) { kernels.push_back(kernel); });
    if (kernels.empty())
      return;
    gpu::GPUModuleOp gpuModule = getOrCreateKernelModule(module);
    TargetInfo target(targetSM, smCount, archSpecific, warpSpecializedGemm,
                      clusterKSplit, attentionCtaRing, attentionRingStages);

    bool failed = false;
    // Kernels with identical bodies (e.g. the layers of a model) share one
    // gpu.func, found by structural hash + equivalence.
    llvm::DenseMap<llvm::hash_code, SmallVector<EmittedKernel, 1>> emitted;
    for (KernelOp kernel : kernels) {
      KernelKey key(kernel);
      SmallVector<EmittedKernel, 1> &bucket = emitted[key.hash()];
      auto same = llvm::find_if(bucket, [&](const EmittedKernel &e) {
        return e.key.isEquivalentTo(key);
      });
      if (same != bucket.end()) {
        // Equal attributes: a carried schedule is the one recorded.
        kernel.setScheduleAttr(same->schedule);
        kernel.setLaunchAttr(same->launchAttr);
        continue;
      }
      if (!emitKernel(kernel, key, target, gpuModule, bucket))
        failed = true;
    }
    if (failed)
      signalPassFailure();
  }

private:
  /// Emits `kernel` with its emitter and records its schedule and launch;
  /// false on failure.
  bool emitKernel(KernelOp kernel, const KernelKey &key,
                  const TargetInfo &target, gpu::GPUModuleOp gpuModule,
                  SmallVector<EmittedKernel, 1> &bucket) {
    if (gpuModule.lookupSymbol(kernel.getSymName())) {
      kernel.emitOpError("kernel '")
          << kernel.getSymName() << "' is already in the gpu.module";
      return false;
    }
    FailureOr<KernelLaunch> launch =
        getEmitter(kernel).emit(kernel, target, gpuModule);
    if (llvm::failed(launch) ||
        llvm::failed(verifyLaunchLimits(kernel, *launch)))
      return false;
    FailureOr<LaunchAttr> launchAttr =
        getLaunchAttr(kernel, *launch, gpuModule);
    if (llvm::failed(launchAttr) ||
        llvm::failed(recordSchedule(kernel, launch->schedule)))
      return false;
    kernel.setLaunchAttr(*launchAttr);
    bucket.push_back({key, launch->schedule, *launchAttr});
    return true;
  }

  /// Checks sm-count, attention-ring-stages (verifyAttentionRingStages) and
  /// target-sm (those of a supported chip).
  LogicalResult verifyOptions() {
    auto error = [&](StringRef option) {
      return [this, option](const Twine &message) {
        getOperation().emitError()
            << "convert-fusion-to-gpu option " << option << ": " << message;
      };
    };
    if (failed(verifySMCount(smCount, error("sm-count"))) ||
        failed(verifyAttentionRingStages(attentionRingStages,
                                         error("attention-ring-stages"))))
      return failure();
    if (archSpecific &&
        !llvm::any_of(getSupportedChips(), [&](const SupportedChip &chip) {
          return chip.sm == targetSM && chip.archSpecific;
        })) {
      error("arch-specific")("no supported chip of target-sm " +
                             Twine(targetSM) +
                             " has architecture-specific features (sm_90a)");
      return failure();
    }
    if (llvm::any_of(getSupportedChips(), [&](const SupportedChip &chip) {
          return chip.sm == targetSM;
        }))
      return success();
    SmallVector<std::string> sms;
    for (const SupportedChip &chip : getSupportedChips())
      if (sms.empty() || sms.back() != std::to_string(chip.sm))
        sms.push_back(std::to_string(chip.sm));
    error("target-sm")(Twine(targetSM) +
                       " is not the compute capability x 10 of a supported "
                       "chip (" +
                       llvm::join(sms, ", ") + ")");
    return failure();
  }
};

} // namespace
