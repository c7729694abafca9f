//===- AsyncCopy.cpp - cp.async global -> shared copies -------------------===//

#include "AsyncCopy.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::fusion;

Value mlir::fusion::getGlobalPointer(ImplicitLocOpBuilder &b, Value buffer) {
  Value address = arith::IndexCastOp::create(
      b, b.getI64Type(),
      memref::ExtractAlignedPointerAsIndexOp::create(b, buffer));
  Value generic = LLVM::IntToPtrOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext()), address);
  return LLVM::AddrSpaceCastOp::create(
      b,
      LLVM::LLVMPointerType::get(
          b.getContext(), static_cast<unsigned>(NVVM::NVVMMemorySpace::Global)),
      generic);
}

Value mlir::fusion::offsetPointer(ImplicitLocOpBuilder &b, Value pointer,
                                  Value byteOffset) {
  Value offset = arith::IndexCastOp::create(b, b.getI64Type(), byteOffset);
  return LLVM::GEPOp::create(b, pointer.getType(), b.getI8Type(), pointer,
                             ValueRange{offset});
}

void mlir::fusion::copyAsync16(ImplicitLocOpBuilder &b, Value shared,
                               Value sharedByte, Value global,
                               Value globalByte) {
  NVVM::CpAsyncOp::create(b, offsetPointer(b, shared, sharedByte),
                          offsetPointer(b, global, globalByte), /*size=*/16,
                          NVVM::LoadCacheModifierKind::CG,
                          /*cpSize=*/Value());
}

void mlir::fusion::commitAsyncCopies(ImplicitLocOpBuilder &b) {
  NVVM::CpAsyncCommitGroupOp::create(b);
}

void mlir::fusion::waitAsyncCopies(ImplicitLocOpBuilder &b, int64_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(b, static_cast<int32_t>(pending));
}
