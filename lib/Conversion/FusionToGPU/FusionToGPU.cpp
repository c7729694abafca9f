//===- FusionToGPU.cpp - fusion.kernel -> gpu.func + launch plan ----------===//
//
// Implements --convert-fusion-to-gpu (see Passes.td): one gpu.func per
// fusion.kernel, built by the emitter of its kind, and the launch
// description recorded on the kernel as its `#fusion.launch`.
//
//===----------------------------------------------------------------------===//

#include "EmitterUtils.h"
#include "fusion/Conversion/FusionToGPU/Emitters.h"
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
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

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

/// Merges the emitter's schedule into the kernel's, keeping `strategy`.
static void recordSchedule(KernelOp kernel, DictionaryAttr chosen) {
  NamedAttrList merged;
  if (DictionaryAttr old = kernel.getScheduleAttr())
    merged.append(old.getValue());
  if (chosen)
    for (NamedAttribute entry : chosen)
      if (entry.getName() != "strategy")
        merged.set(entry.getName(), entry.getValue());
  kernel.setScheduleAttr(merged.getDictionary(kernel.getContext()));
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
    gpuModule->setAttr(kSMCountAttrName,
                       IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                        smCount.getValue()));
    gpuModule->setAttr(kTargetSMAttrName,
                       IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                        targetSM.getValue()));

    bool failed = false;
    // Kernels with identical bodies (e.g. the layers of a model) share one
    // gpu.func: the key is the body printed without the kernel's name.
    llvm::StringMap<std::pair<KernelLaunch, LaunchAttr>> emitted;
    for (KernelOp kernel : kernels) {
      std::string key;
      {
        llvm::raw_string_ostream os(key);
        OpPrintingFlags flags;
        flags.printGenericOpForm().useLocalScope();
        kernel->print(os, flags);
      }
      std::string quotedName = ("\"" + kernel.getSymName() + "\"").str();
      for (size_t at = key.find(quotedName); at != std::string::npos;
           at = key.find(quotedName))
        key.erase(at, quotedName.size());
      if (auto it = emitted.find(key); it != emitted.end()) {
        recordSchedule(kernel, it->second.first.schedule);
        kernel.setLaunchAttr(it->second.second);
        continue;
      }
      if (gpuModule.lookupSymbol(kernel.getSymName())) {
        kernel.emitOpError("kernel '")
            << kernel.getSymName() << "' is already in the gpu.module";
        failed = true;
        continue;
      }
      bool hasProjection = false, hasAttention = false;
      kernel.getBody().walk([&](Operation *op) {
        hasProjection |= isa<QKVProjOp>(op);
        hasAttention |= isa<DecodeAttentionOp>(op);
      });
      FailureOr<KernelLaunch> launch =
          hasProjection  ? emitProjectionKernel(kernel, gpuModule)
          : hasAttention ? emitAttentionKernel(kernel, gpuModule)
                         : emitElementwiseKernel(kernel, gpuModule);
      if (llvm::failed(launch) ||
          llvm::failed(verifyLaunchLimits(kernel, *launch))) {
        failed = true;
        continue;
      }
      recordSchedule(kernel, launch->schedule);
      LaunchAttr finalAttr = getLaunchAttr(*launch, gpuModule);
      kernel.setLaunchAttr(finalAttr);
      emitted[key] = {*launch, finalAttr};
    }
    if (failed)
      signalPassFailure();
  }

private:
  /// Checks sm-count and target-sm (those of a supported chip).
  LogicalResult verifyOptions() {
    auto error = [&](StringRef option) {
      return [this, option](const Twine &message) {
        getOperation().emitError()
            << "convert-fusion-to-gpu option " << option << ": " << message;
      };
    };
    if (failed(verifySMCount(smCount, error("sm-count"))))
      return failure();
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
