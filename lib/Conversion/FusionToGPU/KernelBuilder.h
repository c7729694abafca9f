//===- KernelBuilder.h - the kernel emitters' vocabulary --------*- C++ -*-===//
//
// One spelling for every op the kernels are built from: free functions on an
// ImplicitLocOpBuilder for constants, integer/index and f32 arithmetic,
// conversions, thread and block ids, loads and stores, shuffles, barriers and
// structured control flow (scf.if / scf.for). Emitters call these instead of
// `arith::...Op::create`, so that `(token * Hq + head) * D` reads
// `mulI(b, addI(b, mulI(b, token, Hq), head), D)` everywhere.
//
// Integer ops take any integer type or `index` (64-bit: `index` lowers to
// i64); the overloads with an int64_t right-hand side build an `index`
// constant and fold the identities (x + 0, x * 1) away.
//
// Everything here emits arith, scf, memref, vector and gpu ops, plus the few
// `llvm.intr.*` / NVVM ops that keep math off libdevice (sqrt, fma, maxnum,
// ex2) and the GPU-scope fence. The LLVM and NVVM dialect headers (slow to
// compile) are included by KernelBuilder.cpp, Fragments/Abi.cpp,
// Fragments/Mma.cpp and the pass only; Kernels/ includes neither.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELBUILDER_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::fusion {

/// Elements of one 16-byte vector load or store of f16/bf16 data, the width
/// the norm and projection kernels read activations and weights in.
inline constexpr int64_t kVectorWidth = 8;

using arith::CmpFPredicate;
using arith::CmpIPredicate;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

Value constIndex(ImplicitLocOpBuilder &b, int64_t value);
Value constI32(ImplicitLocOpBuilder &b, int32_t value);
Value constI64(ImplicitLocOpBuilder &b, int64_t value);
/// An i1 constant.
Value constBool(ImplicitLocOpBuilder &b, bool value);
Value constF32(ImplicitLocOpBuilder &b, double value);
Value constF64(ImplicitLocOpBuilder &b, double value);
/// -inf as f32.
Value negInfF32(ImplicitLocOpBuilder &b);
/// `vector<width x T>` with every element `scalar` (vector.broadcast).
Value splat(ImplicitLocOpBuilder &b, Value scalar, int64_t width);

//===----------------------------------------------------------------------===//
// Integer and index arithmetic
//===----------------------------------------------------------------------===//

Value addI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
/// lhs + rhs with an index constant `rhs` (lhs itself when rhs == 0).
Value addI(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs);
Value subI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value mulI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
/// lhs * rhs with an index constant `rhs` (lhs itself when rhs == 1).
Value mulI(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs);
Value divUI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value remUI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value divSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value remSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value minSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value maxSI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value minUI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
/// Bitwise and / or / xor (also of i1 conditions).
Value andI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value orI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value xorI(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
/// !cond for an i1 (xor with true).
Value notI1(ImplicitLocOpBuilder &b, Value cond);
/// `arith.cmpi pred, lhs, rhs` (any integer or index type).
Value cmpI(ImplicitLocOpBuilder &b, CmpIPredicate pred, Value lhs, Value rhs);
/// `arith.cmpi pred, lhs, rhs` with an index constant `rhs`.
Value cmpI(ImplicitLocOpBuilder &b, CmpIPredicate pred, Value lhs, int64_t rhs);
/// `arith.select cond, lhs, rhs`.
Value select(ImplicitLocOpBuilder &b, Value cond, Value lhs, Value rhs);
/// i32 -> index, sign-extending (a 64-bit offset from then on).
Value i32ToIndex(ImplicitLocOpBuilder &b, Value value);
Value indexToI32(ImplicitLocOpBuilder &b, Value value);

//===----------------------------------------------------------------------===//
// Floating point (f32 scalars or vectors unless stated)
//===----------------------------------------------------------------------===//

Value addF(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value subF(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value mulF(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value divF(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value negF(ImplicitLocOpBuilder &b, Value value);
Value cmpF(ImplicitLocOpBuilder &b, CmpFPredicate pred, Value lhs, Value rhs);
/// `arith.maxnumf` (the reductions' max).
Value maxNumF(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
/// max that does not become a libdevice call (`llvm.intr.maxnum`).
Value maxF32(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
/// `llvm.intr.fma` (fma.rn.f32 / .f64).
Value fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z);
/// Correctly rounded sqrt (`llvm.nvvm.sqrt.rn.f`, no libdevice).
Value sqrtF32(ImplicitLocOpBuilder &b, Value value);
/// 1 / sqrt(x) with a correctly rounded sqrt and division.
Value rsqrtF32(ImplicitLocOpBuilder &b, Value value);
/// 2^x with `ex2.approx.ftz.f32` (the NVVM intrinsic: no libdevice call);
/// 2^-inf = +0.
Value exp2F32(ImplicitLocOpBuilder &b, Value x);
/// f16/bf16 (or f32), scalar or vector -> f32 (exact).
Value extToF32(ImplicitLocOpBuilder &b, Value value);
/// f32 (scalar or vector) -> `elementType` (f16/bf16), round to nearest
/// even. A no-op for f32.
Value truncFromF32(ImplicitLocOpBuilder &b, Value value, Type elementType);
/// Element `index` of a 1-D vector.
Value extract(ImplicitLocOpBuilder &b, Value vector, int64_t index);

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

Value threadIdX(ImplicitLocOpBuilder &b);
Value blockIdX(ImplicitLocOpBuilder &b);
Value blockIdY(ImplicitLocOpBuilder &b);
Value blockIdZ(ImplicitLocOpBuilder &b);
Value gridDimX(ImplicitLocOpBuilder &b);
/// threadIdx.x % 32 and threadIdx.x / 32 (as index).
Value laneId(ImplicitLocOpBuilder &b);
Value warpId(ImplicitLocOpBuilder &b);
/// `gpu.shuffle xor value, offset` over the 32 lanes of a warp.
Value shuffleXor(ImplicitLocOpBuilder &b, Value value, int32_t offset);
/// `gpu.shuffle idx value, lane`: lane `lane`'s (i32) `value`, for every
/// lane of the warp.
Value shuffleIdx(ImplicitLocOpBuilder &b, Value value, Value lane);
/// gpu.barrier (bar.sync 0 across the CTA).
void barrier(ImplicitLocOpBuilder &b);
/// membar.gl (fence.sc.gpu): orders this thread's memory accesses at GPU
/// scope.
void fenceGPU(ImplicitLocOpBuilder &b);

//===----------------------------------------------------------------------===//
// Memory (flat 1-D buffers)
//===----------------------------------------------------------------------===//

/// Size in bytes of a scalar type.
int64_t getTypeBytes(Type type);
/// `vector.load` of `width` elements at element offset `index` with the
/// alignment of the whole vector (16 bytes for vector<8xf16>: this is what
/// makes LLVM emit `ld.global.v4.b32`). The offset must be a multiple of
/// `width`.
Value loadVector(ImplicitLocOpBuilder &b, Value buffer, Value index,
                 int64_t width);
/// `vector.store` with the alignment of the whole vector.
void storeVector(ImplicitLocOpBuilder &b, Value value, Value buffer,
                 Value index);
Value loadScalar(ImplicitLocOpBuilder &b, Value buffer, Value index);
void storeScalar(ImplicitLocOpBuilder &b, Value value, Value buffer,
                 Value index);

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

using BodyBuilder = llvm::function_ref<void(ImplicitLocOpBuilder &)>;
using ValuesBuilder =
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)>;

/// `scf.if cond { thenBuilder() }` with no results.
void ifThen(ImplicitLocOpBuilder &b, Value cond, BodyBuilder thenBuilder);
/// `scf.if cond { thenBuilder() } else { elseBuilder() }` with no results.
void ifThenElse(ImplicitLocOpBuilder &b, Value cond, BodyBuilder thenBuilder,
                BodyBuilder elseBuilder);
/// `scf.if cond -> (types)`: yields thenValues() or elseValues(); returns the
/// results.
SmallVector<Value> ifThenElseValues(ImplicitLocOpBuilder &b, TypeRange types,
                                    Value cond, ValuesBuilder thenValues,
                                    ValuesBuilder elseValues);
/// `scf.for %i = lb to ub step s` with no iter_args.
void forLoop(ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
             llvm::function_ref<void(ImplicitLocOpBuilder &, Value)> body);
/// `scf.for %i = lb to ub step s iter_args(init)`: `body(b, i, args)`
/// returns the values to yield; returns the loop's results.
SmallVector<Value>
forLoopWithValues(ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
                  ValueRange init,
                  llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &,
                                                        Value, ValueRange)>
                      body);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELBUILDER_H
