//===- Mma.cpp - m16n8k16 tensor-core fragments ---------------------------===//

#include "Mma.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::fusion;

SmallVector<Value, 4> mlir::fusion::mmaM16N8K16(ImplicitLocOpBuilder &b,
                                                Type elementType,
                                                ArrayRef<Value> a,
                                                ArrayRef<Value> bFrag,
                                                ArrayRef<Value> c) {
  assert(a.size() == 4 && bFrag.size() == 2 && c.size() == 4);
  Type f32 = b.getF32Type();
  auto resultType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes multiplicand =
      elementType.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  // The bf16 form takes its registers as i32.
  auto operand = [&](Value v) -> Value {
    if (!elementType.isBF16())
      return v;
    return vector::ExtractOp::create(
        b,
        vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), v),
        0);
  };
  SmallVector<Value> aOps = llvm::map_to_vector(a, operand);
  SmallVector<Value> bOps = llvm::map_to_vector(bFrag, operand);
  auto mma = NVVM::MmaOp::create(
      b, resultType, aOps, bOps, c, /*shape=*/{16, 8, 16},
      /*b1Op=*/std::nullopt, /*intOverflow=*/std::nullopt,
      std::array<NVVM::MMATypes, 2>{multiplicand, multiplicand},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value, 4> d;
  for (int64_t i = 0; i < 4; ++i)
    d.push_back(LLVM::ExtractValueOp::create(b, mma, i));
  return d;
}

Value mlir::fusion::getFragmentPair(ImplicitLocOpBuilder &b, Value v,
                                    int64_t at) {
  return vector::ShuffleOp::create(b, v, v, ArrayRef<int64_t>{at, at + 1});
}

SmallVector<Value, 4> mlir::fusion::loadMatrixX4(ImplicitLocOpBuilder &b,
                                                 Value address,
                                                 Type elementType,
                                                 bool transpose) {
  Type i32 = b.getI32Type();
  auto resultType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32, i32, i32});
  Value matrices = NVVM::LdMatrixOp::create(
      b, resultType, address, /*num=*/4,
      transpose ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8),
      NVVM::LdStMatrixEltType::B16);
  auto pairType = VectorType::get({2}, elementType);
  SmallVector<Value, 4> pairs;
  for (int64_t i = 0; i < 4; ++i)
    pairs.push_back(LLVM::BitcastOp::create(
        b, pairType, LLVM::ExtractValueOp::create(b, matrices, i)));
  return pairs;
}
