//===- NormKernel.cpp - rmsnorm / layernorm alone -------------------------===//
//
// The norm kernel of the `none` strategy, with the numerics of the fused
// kernel (the same fragment builds both): one CTA per token (grid =
// [batch]); the row is normalised by emitNormalizeToken (fp32 sums, warp
// shuffles + shared memory) and written to the outputs.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/Abi.h"
#include "../Fragments/Norm.h"
#include "../KernelEmitter.h"
#include "../Schedule/ElementwiseSchedule.h"

using namespace mlir;
using namespace mlir::fusion;

FailureOr<KernelLaunch> mlir::fusion::emitNormKernel(KernelOp kernel,
                                                     const TargetInfo &target,
                                                     gpu::GPUModuleOp module) {
  Operation *op = &kernel.getBody().front().front();
  auto inputType = cast<ShapedType>(op->getOperand(0).getType());
  const int64_t hidden = inputType.getDimSize(1);
  Type act = inputType.getElementType();
  if (hidden % 8 != 0)
    return kernel.emitOpError("hidden size ")
           << hidden
           << " is not a multiple of 8 (the norm reads 16-byte vectors of 8 "
              "elements)";
  const int64_t budget = target.getStaticSharedBudget();
  const int64_t elemBytes = getTypeBytes(act);
  if (hidden > budget / elemBytes)
    return kernel.emitOpError("hidden size ")
           << hidden << " needs more shared memory per token row than the "
           << budget << " bytes available (" << elemBytes
           << " bytes per element)";
  int64_t blockSize = chooseNormBlockSize(hidden);

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = blockSize;
  launch.grid = {std::string(contract::dim::kBatch), "1", "1"};
  OpBuilder builder(kernel.getContext());
  gpu::GPUFuncOp func =
      createKernelFunc(builder, kernel.getLoc(), module, launch.entry,
                       launch.params, blockSize, target);
  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
  NormSpec spec = getNormSpec(op, KernelArgs(kernel, func, launch.params));
  spec.hidden = hidden;
  spec.elementType = act;
  if (auto rms = dyn_cast<RMSNormOp>(op);
      rms && rms.getResidual() && !spec.residual)
    return kernel.emitOpError("the residual must be a kernel operand");
  if (!spec.input || !spec.weight)
    return kernel.emitOpError("norm operands must be kernel operands");

  Value row = addWorkgroupBuffer(func, act, hidden);
  Value scratch = addWorkgroupBuffer(func, b.getF32Type(), blockSize / 32);
  Value token = blockIdX(b);
  emitNormalizeToken(b, spec, token, row, constIndex(b, 0), constBool(b, true),
                     scratch, blockSize);
  FailureOr<NormRowScheduleAttr> schedule =
      getCheckedSchedule<NormRowScheduleAttr>(kernel, blockSize, kVectorWidth,
                                              /*tokensPerCta=*/int64_t(1));
  if (failed(schedule))
    return failure();
  launch.schedule = *schedule;
  return launch;
}
