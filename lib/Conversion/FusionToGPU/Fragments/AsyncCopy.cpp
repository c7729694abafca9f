//===- AsyncCopy.cpp - cp.async global -> shared copies -------------------===//

#include "AsyncCopy.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::fusion;

Value mlir::fusion::getGlobalPointer(ImplicitLocOpBuilder &b, Value buffer) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, buffer);
  Value address = arith::IndexCastOp::create(b, b.getI64Type(), index);
  return LLVM::IntToPtrOp::create(
      b,
      LLVM::LLVMPointerType::get(
          b.getContext(), static_cast<unsigned>(NVVM::NVVMMemorySpace::Global)),
      address);
}

Value mlir::fusion::offsetPointer(ImplicitLocOpBuilder &b, Value pointer,
                                  Value offset, Type elementType) {
  if (offset.getType().isIndex())
    offset = arith::IndexCastOp::create(b, b.getI64Type(), offset);
  return LLVM::GEPOp::create(b, pointer.getType(),
                             elementType ? elementType : b.getI8Type(), pointer,
                             ValueRange{offset});
}

void mlir::fusion::copyAsync16(ImplicitLocOpBuilder &b, Value shared,
                               Value global, Value srcBytes) {
  NVVM::CpAsyncOp::create(b, shared, global, /*size=*/16,
                          NVVM::LoadCacheModifierKind::CG, srcBytes);
}

void mlir::fusion::commitAsyncCopies(ImplicitLocOpBuilder &b) {
  NVVM::CpAsyncCommitGroupOp::create(b);
}

void mlir::fusion::waitAsyncCopies(ImplicitLocOpBuilder &b, int64_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(b, static_cast<int32_t>(pending));
}

void mlir::fusion::prefetchToL2(ImplicitLocOpBuilder &b, Value global,
                                int64_t bytes) {
  assert(bytes > 0 && bytes % 16 == 0 && "bulk prefetch of whole 16 bytes");
  NVVM::CpAsyncBulkPrefetchOp::create(
      b, global, constI32(b, static_cast<int32_t>(bytes)), Value());
}
