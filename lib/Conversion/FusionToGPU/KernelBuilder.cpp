//===- KernelBuilder.cpp - the vocabulary of the kernel emitters ----------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <limits>

using namespace mlir;
using namespace mlir::fusion;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

Value mlir::fusion::constIndex(ImplicitLocOpBuilder &b, int64_t value) {
  return arith::ConstantIndexOp::create(b, value);
}
Value mlir::fusion::constI32(ImplicitLocOpBuilder &b, int32_t value) {
  return arith::ConstantIntOp::create(b, value, 32);
}
Value mlir::fusion::constI64(ImplicitLocOpBuilder &b, int64_t value) {
  return arith::ConstantIntOp::create(b, value, 64);
}
Value mlir::fusion::constBool(ImplicitLocOpBuilder &b, bool value) {
  return arith::ConstantIntOp::create(b, value ? 1 : 0, 1);
}
Value mlir::fusion::constF32(ImplicitLocOpBuilder &b, double value) {
  return arith::ConstantFloatOp::create(
      b, b.getF32Type(), llvm::APFloat(static_cast<float>(value)));
}
Value mlir::fusion::constF64(ImplicitLocOpBuilder &b, double value) {
  return arith::ConstantFloatOp::create(b, b.getF64Type(),
                                        llvm::APFloat(value));
}
Value mlir::fusion::negInfF32(ImplicitLocOpBuilder &b) {
  return constF32(b, -std::numeric_limits<double>::infinity());
}
Value mlir::fusion::splat(ImplicitLocOpBuilder &b, Value scalar,
                          int64_t width) {
  return vector::BroadcastOp::create(
      b, VectorType::get({width}, scalar.getType()), scalar);
}

//===----------------------------------------------------------------------===//
// Integer and index arithmetic
//===----------------------------------------------------------------------===//

Value mlir::fusion::addI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::AddIOp::create(b, lhs, rhs);
}
Value mlir::fusion::addI(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs) {
  if (rhs == 0)
    return lhs;
  return addI(b, lhs, constIndex(b, rhs));
}
Value mlir::fusion::subI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::SubIOp::create(b, lhs, rhs);
}
Value mlir::fusion::mulI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MulIOp::create(b, lhs, rhs);
}
Value mlir::fusion::mulI(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs) {
  if (rhs == 1)
    return lhs;
  return mulI(b, lhs, constIndex(b, rhs));
}
Value mlir::fusion::divUI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::DivUIOp::create(b, lhs, rhs);
}
Value mlir::fusion::remUI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::RemUIOp::create(b, lhs, rhs);
}
Value mlir::fusion::divSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::DivSIOp::create(b, lhs, rhs);
}
Value mlir::fusion::remSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::RemSIOp::create(b, lhs, rhs);
}
Value mlir::fusion::minSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MinSIOp::create(b, lhs, rhs);
}
Value mlir::fusion::maxSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MaxSIOp::create(b, lhs, rhs);
}
Value mlir::fusion::minUI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MinUIOp::create(b, lhs, rhs);
}
Value mlir::fusion::andI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::AndIOp::create(b, lhs, rhs);
}
Value mlir::fusion::orI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::OrIOp::create(b, lhs, rhs);
}
Value mlir::fusion::xorI(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::XOrIOp::create(b, lhs, rhs);
}
Value mlir::fusion::notI1(ImplicitLocOpBuilder &b, Value cond) {
  return xorI(b, cond, constBool(b, true));
}
Value mlir::fusion::cmpI(ImplicitLocOpBuilder &b, CmpIPredicate pred, Value lhs,
                         Value rhs) {
  return arith::CmpIOp::create(b, pred, lhs, rhs);
}
Value mlir::fusion::cmpI(ImplicitLocOpBuilder &b, CmpIPredicate pred, Value lhs,
                         int64_t rhs) {
  return cmpI(b, pred, lhs, constIndex(b, rhs));
}
Value mlir::fusion::select(ImplicitLocOpBuilder &b, Value cond, Value lhs,
                           Value rhs) {
  return arith::SelectOp::create(b, cond, lhs, rhs);
}
Value mlir::fusion::i32ToIndex(ImplicitLocOpBuilder &b, Value value) {
  return arith::IndexCastOp::create(b, b.getIndexType(), value);
}
Value mlir::fusion::indexToI32(ImplicitLocOpBuilder &b, Value value) {
  return arith::IndexCastOp::create(b, b.getI32Type(), value);
}

//===----------------------------------------------------------------------===//
// Floating point
//===----------------------------------------------------------------------===//

Value mlir::fusion::addF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::AddFOp::create(b, lhs, rhs);
}
Value mlir::fusion::subF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::SubFOp::create(b, lhs, rhs);
}
Value mlir::fusion::mulF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MulFOp::create(b, lhs, rhs);
}
Value mlir::fusion::divF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::DivFOp::create(b, lhs, rhs);
}
Value mlir::fusion::negF(ImplicitLocOpBuilder &b, Value value) {
  return arith::NegFOp::create(b, value);
}
Value mlir::fusion::cmpF(ImplicitLocOpBuilder &b, CmpFPredicate pred, Value lhs,
                         Value rhs) {
  return arith::CmpFOp::create(b, pred, lhs, rhs);
}
Value mlir::fusion::maxNumF(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MaxNumFOp::create(b, lhs, rhs);
}
Value mlir::fusion::maxF32(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return LLVM::MaxNumOp::create(b, lhs, rhs);
}
Value mlir::fusion::fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z) {
  return LLVM::FMAOp::create(b, x, y, z);
}
Value mlir::fusion::sqrtF32(ImplicitLocOpBuilder &b, Value value) {
  // convert-gpu-to-nvvm marks llvm.intr.sqrt illegal (it would become
  // __nv_sqrtf); the NVVM intrinsic is sqrt.rn.f32 with no libdevice.
  return LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                       b.getStringAttr("llvm.nvvm.sqrt.rn.f"),
                                       ValueRange{value})
      ->getResult(0);
}
Value mlir::fusion::rsqrtF32(ImplicitLocOpBuilder &b, Value value) {
  return divF(b, constF32(b, 1.0), sqrtF32(b, value));
}
Value mlir::fusion::exp2F32(ImplicitLocOpBuilder &b, Value x) {
  auto call = LLVM::CallIntrinsicOp::create(
      b, b.getF32Type(), b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
      ValueRange{x});
  return call.getResult(0);
}

static Type withElementType(Type type, Type element) {
  if (auto vec = dyn_cast<VectorType>(type))
    return vec.clone(element);
  return element;
}

Value mlir::fusion::extToF32(ImplicitLocOpBuilder &b, Value value) {
  Type element = getElementTypeOrSelf(value.getType());
  if (element.isF32())
    return value;
  return arith::ExtFOp::create(
      b, withElementType(value.getType(), b.getF32Type()), value);
}
Value mlir::fusion::truncFromF32(ImplicitLocOpBuilder &b, Value value,
                                 Type elementType) {
  if (elementType.isF32())
    return value;
  return arith::TruncFOp::create(
      b, withElementType(value.getType(), elementType), value);
}
Value mlir::fusion::extract(ImplicitLocOpBuilder &b, Value vector,
                            int64_t index) {
  return vector::ExtractOp::create(b, vector, index);
}

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

Value mlir::fusion::threadIdX(ImplicitLocOpBuilder &b) {
  return gpu::ThreadIdOp::create(b, gpu::Dimension::x);
}
Value mlir::fusion::blockIdX(ImplicitLocOpBuilder &b) {
  return gpu::BlockIdOp::create(b, gpu::Dimension::x);
}
Value mlir::fusion::blockIdY(ImplicitLocOpBuilder &b) {
  return gpu::BlockIdOp::create(b, gpu::Dimension::y);
}
Value mlir::fusion::blockIdZ(ImplicitLocOpBuilder &b) {
  return gpu::BlockIdOp::create(b, gpu::Dimension::z);
}
Value mlir::fusion::gridDimX(ImplicitLocOpBuilder &b) {
  return gpu::GridDimOp::create(b, gpu::Dimension::x);
}
Value mlir::fusion::laneId(ImplicitLocOpBuilder &b) {
  return remUI(b, threadIdX(b), constIndex(b, 32));
}
Value mlir::fusion::warpId(ImplicitLocOpBuilder &b) {
  return divUI(b, threadIdX(b), constIndex(b, 32));
}
Value mlir::fusion::shuffleXor(ImplicitLocOpBuilder &b, Value value,
                               int32_t offset) {
  return gpu::ShuffleOp::create(b, value, offset, 32, gpu::ShuffleMode::XOR)
      .getShuffleResult();
}
Value mlir::fusion::shuffleIdx(ImplicitLocOpBuilder &b, Value value,
                               Value lane) {
  return gpu::ShuffleOp::create(b, value, lane, constI32(b, 32),
                                gpu::ShuffleMode::IDX)
      .getShuffleResult();
}
void mlir::fusion::barrier(ImplicitLocOpBuilder &b) {
  gpu::BarrierOp::create(b);
}
void mlir::fusion::fenceGPU(ImplicitLocOpBuilder &b) {
  NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

int64_t mlir::fusion::getTypeBytes(Type type) {
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

Value mlir::fusion::loadVector(ImplicitLocOpBuilder &b, Value buffer,
                               Value index, int64_t width) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  auto type = VectorType::get({width}, element);
  auto load = vector::LoadOp::create(b, type, buffer, ValueRange{index});
  load.setAlignment(width * getTypeBytes(element));
  return load;
}
void mlir::fusion::storeVector(ImplicitLocOpBuilder &b, Value value,
                               Value buffer, Value index) {
  auto type = cast<VectorType>(value.getType());
  auto store = vector::StoreOp::create(b, value, buffer, ValueRange{index});
  store.setAlignment(type.getNumElements() *
                     getTypeBytes(type.getElementType()));
}
Value mlir::fusion::loadScalar(ImplicitLocOpBuilder &b, Value buffer,
                               Value index) {
  return memref::LoadOp::create(b, buffer, ValueRange{index});
}
void mlir::fusion::storeScalar(ImplicitLocOpBuilder &b, Value value,
                               Value buffer, Value index) {
  memref::StoreOp::create(b, value, buffer, ValueRange{index});
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

void mlir::fusion::ifThen(ImplicitLocOpBuilder &b, Value cond,
                          BodyBuilder thenBuilder) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  ImplicitLocOpBuilder inner(b.getLoc(), b.getContext());
  inner.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  thenBuilder(inner);
}

void mlir::fusion::ifThenElse(ImplicitLocOpBuilder &b, Value cond,
                              BodyBuilder thenBuilder,
                              BodyBuilder elseBuilder) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/true);
  ImplicitLocOpBuilder thenB(b.getLoc(), b.getContext());
  thenB.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  thenBuilder(thenB);
  ImplicitLocOpBuilder elseB(b.getLoc(), b.getContext());
  elseB.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  elseBuilder(elseB);
}

SmallVector<Value> mlir::fusion::ifThenElseValues(ImplicitLocOpBuilder &b,
                                                  TypeRange types, Value cond,
                                                  ValuesBuilder thenValues,
                                                  ValuesBuilder elseValues) {
  auto ifOp = scf::IfOp::create(b, types, cond, /*withElseRegion=*/true);
  ImplicitLocOpBuilder inner(b.getLoc(), b.getContext());
  inner.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(inner, thenValues(inner));
  inner.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(inner, elseValues(inner));
  return SmallVector<Value>(ifOp.getResults());
}

void mlir::fusion::forLoop(
    ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
  auto loop = scf::ForOp::create(b, lb, ub, step);
  ImplicitLocOpBuilder inner(b.getLoc(), b.getContext());
  inner.setInsertionPoint(loop.getBody()->getTerminator());
  body(inner, loop.getInductionVar());
}

SmallVector<Value> mlir::fusion::forLoopWithValues(
    ImplicitLocOpBuilder &b, Value lb, Value ub, Value step, ValueRange init,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value,
                                          ValueRange)>
        body) {
  auto loop = scf::ForOp::create(
      b, lb, ub, step, init,
      [&](OpBuilder &nested, Location loc, Value iv, ValueRange args) {
        ImplicitLocOpBuilder inner(loc, nested);
        scf::YieldOp::create(inner, body(inner, iv, args));
      });
  return SmallVector<Value>(loop.getResults());
}
