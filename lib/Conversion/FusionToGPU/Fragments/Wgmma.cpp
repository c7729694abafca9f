//===- Wgmma.cpp - warpgroup tensor-core MMA (sm_90a) ---------------------===//

#include "Wgmma.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <string>

using namespace mlir;
using namespace mlir::fusion;

Value mlir::fusion::getSwizzled128Descriptor(ImplicitLocOpBuilder &b,
                                             Value address) {
  // Bits 0-13: the start address >> 4 (18 address bits); 16-29: the leading
  // byte offset >> 4 (unused by a K-major swizzled operand: 1); 32-45: the
  // stride byte offset >> 4, 1024 bytes from one group of 8 rows to the
  // next; 49-51: base offset 0 (groups are 1 KiB-aligned); 62-63: 1, the
  // 128-byte swizzle.
  constexpr uint64_t kFields =
      (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
  Value start = arith::ShRUIOp::create(
      b, andI(b, address, constI32(b, 0x3FFFF)), constI32(b, 4));
  Value start64 = arith::ExtUIOp::create(b, b.getI64Type(), start);
  return orI(b, start64, constI64(b, static_cast<int64_t>(kFields)));
}

SmallVector<Value> mlir::fusion::warpgroupMmaM64K16(ImplicitLocOpBuilder &b,
                                                    Type elementType,
                                                    ArrayRef<Value> a,
                                                    Value descriptorB,
                                                    ArrayRef<Value> acc) {
  const int64_t n = 2 * static_cast<int64_t>(acc.size());
  assert(a.size() == 4 && n % 8 == 0 && n >= 8 && n <= 256);
  // Inline PTX: nvvm.wgmma.mma_async takes A only by descriptor. Operands:
  // $0 .. $(m-1) the accumulators out, $m .. $(2m-1) in (tied), then the
  // four A registers, the descriptor and the scale-d flag (1: accumulate).
  const int64_t m = n / 2;
  std::string asmText =
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $" + std::to_string(2 * m + 5) +
      ", 0;\n\t" + "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
      "k16.f32." + (elementType.isBF16() ? "bf16.bf16" : "f16.f16") + " {";
  std::string constraints;
  for (int64_t i = 0; i < m; ++i) {
    asmText += (i ? ", $" : "$") + std::to_string(i);
    constraints += (i ? ",=f" : "=f");
  }
  asmText += "}, {$" + std::to_string(2 * m) + ", $" +
             std::to_string(2 * m + 1) + ", $" + std::to_string(2 * m + 2) +
             ", $" + std::to_string(2 * m + 3) + "}, $" +
             std::to_string(2 * m + 4) + ", p, 1, 1, 0;\n\t}";
  for (int64_t i = 0; i < m; ++i)
    constraints += "," + std::to_string(i);
  constraints += ",r,r,r,r,l,r,~{memory}";

  SmallVector<Value> operands(acc);
  for (Value reg : a)
    operands.push_back(LLVM::BitcastOp::create(b, b.getI32Type(), reg));
  operands.push_back(descriptorB);
  operands.push_back(constI32(b, 1));
  SmallVector<Type> fields(m, b.getF32Type());
  auto resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  auto mma = LLVM::InlineAsmOp::create(
      b, resultType, operands, asmText, constraints,
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
  SmallVector<Value> d;
  for (int64_t i = 0; i < m; ++i)
    d.push_back(LLVM::ExtractValueOp::create(b, mma.getResult(0), i));
  return d;
}

void mlir::fusion::fenceWarpgroupMma(ImplicitLocOpBuilder &b) {
  NVVM::WgmmaFenceAlignedOp::create(b);
}

SmallVector<Value> mlir::fusion::pinWarpgroupOperands(ImplicitLocOpBuilder &b,
                                                      ValueRange values) {
  const int64_t n = static_cast<int64_t>(values.size());
  SmallVector<Value> operands;
  SmallVector<Type> types;
  std::string constraints;
  for (Value v : values) {
    const bool f32 = v.getType().isF32();
    operands.push_back(
        f32 ? v : LLVM::BitcastOp::create(b, b.getI32Type(), v).getResult());
    types.push_back(operands.back().getType());
    constraints +=
        std::string(constraints.empty() ? "" : ",") + (f32 ? "=f" : "=r");
  }
  for (int64_t i = 0; i < n; ++i)
    constraints += "," + std::to_string(i);
  auto pin = LLVM::InlineAsmOp::create(
      b, LLVM::LLVMStructType::getLiteral(b.getContext(), types), operands, "",
      constraints, /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
  SmallVector<Value> pinned;
  for (auto [i, v] : llvm::enumerate(values)) {
    Value out = LLVM::ExtractValueOp::create(b, pin.getResult(0), i);
    pinned.push_back(
        v.getType() == out.getType()
            ? out
            : LLVM::BitcastOp::create(b, v.getType(), out).getResult());
  }
  return pinned;
}

void mlir::fusion::commitAndWaitWarpgroupMma(ImplicitLocOpBuilder &b,
                                             int64_t pending) {
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, pending);
}
