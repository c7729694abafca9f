//===- RowKernel.cpp - one vector of a token's row per thread -------------===//

#include "RowKernel.h"

#include "../Schedule/ElementwiseSchedule.h"

using namespace mlir;
using namespace mlir::fusion;

FailureOr<KernelLaunch> mlir::fusion::emitRowKernel(
    KernelOp kernel, gpu::GPUModuleOp module, const TargetInfo &target,
    RowKind kind, int64_t vectors, int64_t width,
    llvm::function_ref<LogicalResult(const KernelArgs &)> bind,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value token, Value vec)>
        body) {
  const RowChunks rows = chooseRowChunks(vectors);
  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = rows.threads;
  launch.grid = {std::string(contract::dim::kBatch),
                 std::to_string(rows.chunks), "1"};
  OpBuilder builder(kernel.getContext());
  gpu::GPUFuncOp func =
      createKernelFunc(builder, kernel.getLoc(), module, launch.entry,
                       launch.params, rows.threads, target);
  if (failed(bind(KernelArgs(kernel, func, launch.params))))
    return failure();

  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
  Value token = blockIdX(b);
  Value chunkStart = mulI(b, blockIdY(b), rows.threads);
  Value vec = addI(b, chunkStart, threadIdX(b));
  ifThen(b, cmpI(b, CmpIPredicate::ult, vec, vectors),
         [&](ImplicitLocOpBuilder &tb) { body(tb, token, vec); });
  FailureOr<RowScheduleAttr> schedule = getCheckedSchedule<RowScheduleAttr>(
      kernel, kind, rows.threads, rows.chunks, width, /*unroll=*/int64_t(1));
  if (failed(schedule))
    return failure();
  launch.schedule = *schedule;
  return launch;
}
