//===- AsyncCopy.cpp - cp.async global -> shared copies -------------------===//

#include "AsyncCopy.h"
#include "Abi.h"

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

Value mlir::fusion::getSharedPointer(ImplicitLocOpBuilder &b, Value buffer) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, buffer);
  Value address = arith::IndexCastOp::create(b, b.getI64Type(), index);
  return LLVM::IntToPtrOp::create(
      b,
      LLVM::LLVMPointerType::get(
          b.getContext(), static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared)),
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

Value mlir::fusion::createStageBarriers(ImplicitLocOpBuilder &b,
                                        gpu::GPUFuncOp func, Value tid,
                                        int64_t count, int64_t arrivals) {
  Value first =
      getSharedPointer(b, addWorkgroupBuffer(func, b.getI64Type(), count, 8));
  ifThen(b, cmpI(b, arith::CmpIPredicate::eq, tid, constIndex(b, 0)),
         [&](ImplicitLocOpBuilder &tb) {
           for (int64_t i = 0; i < count; ++i)
             NVVM::MBarrierInitOp::create(
                 tb, stageBarrier(tb, first, constIndex(tb, i)),
                 constI32(tb, static_cast<int32_t>(arrivals)), Value());
           NVVM::FenceMbarrierInitOp::create(tb);
         });
  barrier(b);
  return first;
}

Value mlir::fusion::stageBarrier(ImplicitLocOpBuilder &b, Value first,
                                 Value index) {
  return offsetPointer(b, first, mulI(b, index, constIndex(b, 8)));
}

void mlir::fusion::arriveExpectingBytes(ImplicitLocOpBuilder &b, Value barrier,
                                        int64_t bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(
      b, Type(), barrier, constI32(b, static_cast<int32_t>(bytes)),
      NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
}

void mlir::fusion::arriveOnBarrier(ImplicitLocOpBuilder &b, Value barrier,
                                   Value onlyIf) {
  if (!onlyIf) {
    NVVM::MBarrierArriveOp::create(b, Type(), barrier, /*count=*/Value(),
                                   NVVM::MemScopeKind::CTA, /*relaxed=*/false);
    return;
  }
  Value address = LLVM::PtrToIntOp::create(b, b.getI32Type(), barrier);
  Value flag = arith::ExtUIOp::create(b, b.getI32Type(), onlyIf);
  LLVM::InlineAsmOp::create(b, TypeRange(), ValueRange{address, flag},
                            "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $1, 0;\n\t"
                            "@p mbarrier.arrive.shared::cta.b64 _, [$0];\n\t}",
                            "r,r,~{memory}", /*has_side_effects=*/true,
                            /*is_align_stack=*/false, LLVM::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}

void mlir::fusion::fenceSharedForBulkCopies(ImplicitLocOpBuilder &b) {
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

/// `shared` (this CTA's shared memory) as a shared::cluster pointer, the
/// destination the bulk copies take on every PTX version we target (the
/// .shared::cta form needs PTX 8.6): this CTA's shared memory is part of
/// its cluster's (a launch without clusters is a cluster of one CTA).
static Value toSharedCluster(ImplicitLocOpBuilder &b, Value shared) {
  return LLVM::AddrSpaceCastOp::create(
      b,
      LLVM::LLVMPointerType::get(
          b.getContext(),
          static_cast<unsigned>(NVVM::NVVMMemorySpace::SharedCluster)),
      shared);
}

void mlir::fusion::copyBulk(ImplicitLocOpBuilder &b, Value shared, Value global,
                            int64_t bytes, Value barrier) {
  assert(bytes > 0 && bytes % 16 == 0 && "bulk copy of whole 16 bytes");
  NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
      b, toSharedCluster(b, shared), global, barrier,
      constI32(b, static_cast<int32_t>(bytes)), Value(), Value());
}

void mlir::fusion::waitBarrierPhase(ImplicitLocOpBuilder &b, Value barrier,
                                    Value parity) {
  // Inline PTX rather than nvvm.mbarrier.try_wait.parity, whose lowering
  // loops with `bra.uni` on each thread's own try_wait result; a plain
  // `bra` (as bench/diagnostics/ptx_ops.cuh's mbarWait, measured) is safe
  // when the lanes of a warp see the phase complete at different times.
  Value address = LLVM::PtrToIntOp::create(b, b.getI32Type(), barrier);
  LLVM::InlineAsmOp::create(
      b, TypeRange(), ValueRange{address, parity},
      "{\n\t.reg .pred p;\n\tWAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n\t"
      "@!p bra WAIT;\n\t}",
      "r,r,~{memory}", /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
}

Value mlir::fusion::getGenericPointer(ImplicitLocOpBuilder &b, Value buffer) {
  return LLVM::AddrSpaceCastOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext()),
      getGlobalPointer(b, buffer));
}

void mlir::fusion::copyTensorBox(ImplicitLocOpBuilder &b, Value shared,
                                 Value map, ArrayRef<Value> coords,
                                 Value barrier) {
  SmallVector<Value> i32Coords;
  for (Value c : coords)
    i32Coords.push_back(arith::IndexCastOp::create(b, b.getI32Type(), c));
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      b, toSharedCluster(b, shared), map, i32Coords, barrier,
      /*im2colOffsets=*/ValueRange(),
      /*multicastMask=*/Value(), /*l2CacheHint=*/Value(),
      NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false, /*group=*/nullptr,
      /*predicate=*/Value());
}
