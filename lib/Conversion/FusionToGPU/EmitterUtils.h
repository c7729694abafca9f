//===- EmitterUtils.h - shared pieces of the fusion.kernel emitters -*- C++
//-*-===//
//
// Building blocks every emitter uses: the kernel ABI (parameter lists, the
// gpu.func with its flat buffers), index math, f16/bf16 <-> f32, 16-byte
// vector loads, warp and block reductions, and libdevice-free math
// (sqrt/rsqrt, sin/cos with a correct range reduction).
//
// Everything here emits upstream dialects only (arith, scf, memref, vector,
// gpu, plus a few `llvm.intr.*` ops for math that must not become libdevice
// calls); the emitters need not include the LLVM or NVVM dialect headers.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_EMITTERUTILS_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_EMITTERUTILS_H

#include "fusion/Conversion/FusionToGPU/Emitters.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace mlir::fusion {

//===----------------------------------------------------------------------===//
// ABI
//===----------------------------------------------------------------------===//

/// Symbol name of the gpu.module that holds every emitted kernel.
inline constexpr llvm::StringLiteral kKernelModuleName = "fusion_kernels";

/// Nominal extent of the flat 1-D buffer memrefs of a gpu.func.
///
/// The ABI passes every buffer as one bare device pointer. MLIR 22's
/// bare-pointer convention (convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv})
/// only accepts statically shaped memrefs, so a buffer is typed
/// `memref<1099511627776 x T>` (2^40 elements) instead of `memref<?xT>`. The
/// extent is nominal: nothing is bounds-checked or derived from it; the true
/// size of each buffer is in its KernelParam::shape.
inline constexpr int64_t kFlatBufferExtent = int64_t(1) << 40;

/// Attribute on the gpu.module: the SM count the grids should fill (set by
/// the pass from its `sm-count` option).
inline constexpr llvm::StringLiteral kSMCountAttrName = "fusion.sm_count";

/// The SM count recorded on `module` (132, an H100/H200 SXM, if absent).
int64_t getSMCount(gpu::GPUModuleOp module);

/// Attribute on the gpu.module: the compute capability x 10 the kernels may
/// use (set by the pass from its `target-sm` option).
inline constexpr llvm::StringLiteral kTargetSMAttrName = "fusion.target_sm";

/// Whether `module`'s target has f16/bf16 mma.sync (sm_80+; an unrecorded
/// target counts as sm_90).
bool hasTensorCores(gpu::GPUModuleOp module);

/// The most shared memory (static + dynamic) one CTA may use on `module`'s
/// target, in bytes (contract::maxSharedBytesPerBlock).
int64_t getMaxSharedBytesPerCTA(gpu::GPUModuleOp module);

/// Whether `module`'s target has griddepcontrol (sm_90+): then every kernel
/// starts with `griddepcontrol.launch_dependents` and `griddepcontrol.wait`
/// (createKernelFunc) and may be launched with programmatic dependent launch.
bool hasGridDependencyControl(gpu::GPUModuleOp module);

/// `memref<kFlatBufferExtent x elementType>`.
MemRefType getFlatBufferType(Type elementType);

/// "f16", "bf16", "f32", "i32", ... (the manifest's dtype spelling).
std::string getDTypeName(Type type);

/// Size in bytes of a scalar type.
int64_t getTypeBytes(Type type);

/// The ABI shape of a shaped value: static sizes in decimal, dynamic ones
/// named by `dynamicNames` in order (e.g. {"batch"} for tensor<?x4096xf16>,
/// {"num_pages"} for a cache, {"batch", "max_pages"} for a block table).
SmallVector<std::string> getABIShape(ShapedType type,
                                     ArrayRef<StringRef> dynamicNames);

/// The role of a kernel operand, from the op in the body that uses it (one
/// of contract::kInputRoles; contract::role::kUnused if nothing uses it).
std::string getOperandRole(KernelOp kernel, unsigned operandIndex);

/// The role of a kernel result, from the op that yields it (one of
/// contract::kOutputRoles).
std::string getResultRole(KernelOp kernel, unsigned resultIndex);

/// The default parameter list of a kernel in ABI order: one Input per
/// operand, one Output per result, then the i32 scalar `batch`, then
/// `max_pages` when a block table is an operand. Emitters append workspace
/// buffers before the scalars and scalars after them as they need.
SmallVector<KernelParam> getDefaultKernelParams(KernelOp kernel);

/// Index of the first parameter with `role` (-1 if none).
int findParam(ArrayRef<KernelParam> params, StringRef role);

/// Creates `gpu.func @name(...) kernel` at the end of `module` with one
/// argument per parameter (a flat buffer memref for buffers, the scalar type
/// for scalars) and `known_block_size = [blockSize, 1, 1]`. The builder is
/// left at the start of the body, which holds only `gpu.return`.
gpu::GPUFuncOp createKernelFunc(OpBuilder &builder, Location loc,
                                gpu::GPUModuleOp module, StringRef name,
                                ArrayRef<KernelParam> params,
                                int64_t blockSize);

/// Adds a workgroup (shared memory) attribution
/// `memref<count x elementType, #gpu.address_space<workgroup>>` to `func`,
/// 16-byte aligned (`llvm.align = 16`, so 16-byte vector accesses are legal).
Value addWorkgroupBuffer(gpu::GPUFuncOp func, Type elementType, int64_t count);

/// A `memref<count x elementType, workgroup>` view of the kernel's dynamic
/// shared memory (offset 0, 16-byte aligned); the launch must pass at least
/// count * sizeof(elementType) bytes of dynamic shared memory. Declares the
/// module's extern `.shared` array the lowering reuses (the lowering's own
/// global is internal, and the NVPTX backend demotes it to a one-byte static
/// `.shared` variable).
Value getDynamicSharedBuffer(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module,
                             Type elementType, int64_t count);

/// Checks `launch` (and its variants) against what CUDA can launch: entry
/// names that are PTX identifiers (isValidKernelName), 1 to
/// contract::kMaxThreadsPerBlock threads, and numeric grid dimensions in
/// [1, contract::kMaxGridDims]; run-time dimensions ("batch", "num_splits") are
/// the launcher's to check. Reports the first violation on `kernel`.
LogicalResult verifyLaunchLimits(KernelOp kernel, const KernelLaunch &launch);

/// The `#fusion.launch` of `launch`, whose gpu.funcs are in `module`: with
/// each entry's `static_smem` (the bytes of its workgroup attributions) and,
/// for a target with griddepcontrol, `programmatic_dependent_launch`
/// (createKernelFunc's prologue).
LaunchAttr getLaunchAttr(const KernelLaunch &launch,
                             gpu::GPUModuleOp module);

//===----------------------------------------------------------------------===//
// Scalars and index math (64-bit: `index` lowers to i64)
//===----------------------------------------------------------------------===//

Value constIndex(ImplicitLocOpBuilder &b, int64_t value);
Value constI32(ImplicitLocOpBuilder &b, int32_t value);
Value constF32(ImplicitLocOpBuilder &b, double value);
Value constF64(ImplicitLocOpBuilder &b, double value);
/// i32 -> index, sign-extending (a 64-bit offset from then on).
Value i32ToIndex(ImplicitLocOpBuilder &b, Value value);
Value indexToI32(ImplicitLocOpBuilder &b, Value value);
Value addIndex(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value mulIndex(ImplicitLocOpBuilder &b, Value lhs, Value rhs);
Value addIndex(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs);
Value mulIndex(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs);
/// `arith.cmpi pred, lhs, rhs` (any integer or index type).
Value cmpI(ImplicitLocOpBuilder &b, arith::CmpIPredicate pred, Value lhs,
           Value rhs);

Value threadIdX(ImplicitLocOpBuilder &b);
Value blockIdX(ImplicitLocOpBuilder &b);
Value blockIdY(ImplicitLocOpBuilder &b);
Value gridDimX(ImplicitLocOpBuilder &b);
/// threadIdx.x % 32 and threadIdx.x / 32 (as index).
Value laneId(ImplicitLocOpBuilder &b);
Value warpId(ImplicitLocOpBuilder &b);

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

/// f16/bf16 (or f32), scalar or vector -> f32 (exact).
Value extToF32(ImplicitLocOpBuilder &b, Value value);
/// f32 (scalar or vector) -> `elementType` (f16/bf16), round to nearest
/// even. A no-op for f32.
Value truncFromF32(ImplicitLocOpBuilder &b, Value value, Type elementType);

/// Correctly rounded sqrt (`llvm.intr.sqrt` -> `sqrt.rn.f32`, no libdevice).
Value sqrtF32(ImplicitLocOpBuilder &b, Value value);
/// 1 / sqrt(x) with a correctly rounded sqrt and division.
Value rsqrtF32(ImplicitLocOpBuilder &b, Value value);
/// `llvm.intr.fma` (fma.rn.f32 / .f64).
Value fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z);
/// max / min that do not become libdevice calls (`llvm.intr.maxnum`).
Value maxF32(ImplicitLocOpBuilder &b, Value lhs, Value rhs);

/// sin and cos of an f32 angle, accurate to a few f32 ulps for any |angle|
/// up to 2^31: the quadrant reduction `angle - k*pi/2` is done in f64 (exact
/// enough for k < 2^31), the polynomials (Cephes sinf/cosf) in f32. No
/// libdevice calls, no `sin.approx` (which is wrong for large angles).
std::pair<Value, Value> sinCosF32(ImplicitLocOpBuilder &b, Value angle);

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

/// The rotary_dim/2 inverse frequencies of `rope`, computed exactly as the
/// CPU reference does in fp32 (runtime/src/Reference.cpp invFreqF32, which
/// mirrors Hugging Face's fp32 arithmetic, Llama-3.1 scaling included).
SmallVector<float> computeRopeInvFreq(RopeOp rope, int64_t rotaryDim);

/// The table of computeRopeInvFreq as a private constant `memref.global`
/// `@name` in `module` (created once), returned through memref.get_global.
Value getRopeInvFreqTable(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module,
                          RopeOp rope, StringRef name);

/// One RoPE rotation as the reference does it: angle = float(position) *
/// invFreq[freqIndex] (one fp32 multiply; position is i32), sin/cos by
/// sinCosF32, (a, c) -> (round(a*cos - c*sin), round(c*cos + a*sin)) in fp32
/// from the activation-type values `a`, `c`.
std::pair<Value, Value> emitRopeRotation(ImplicitLocOpBuilder &b, Value a,
                                         Value c, Value position, Value invFreq,
                                         Value freqIndex, Type elementType);

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// `vector.load` of `width` elements at element offset `index` with the
/// alignment of the whole vector (16 bytes for vector<8xf16>: this is what
/// makes LLVM emit `ld.global.v4.b32`). The offset must be a multiple of
/// `width`.
Value loadVector(ImplicitLocOpBuilder &b, Value buffer, Value index,
                 int64_t width);
void storeVector(ImplicitLocOpBuilder &b, Value value, Value buffer,
                 Value index);
Value loadScalar(ImplicitLocOpBuilder &b, Value buffer, Value index);
void storeScalar(ImplicitLocOpBuilder &b, Value value, Value buffer,
                 Value index);

/// gpu.barrier (bar.sync 0 across the CTA).
void barrier(ImplicitLocOpBuilder &b);

//===----------------------------------------------------------------------===//
// Tensor cores
//===----------------------------------------------------------------------===//

/// One warp-wide `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` (sm_80+,
/// PTX ISA "Matrix Fragments for mma.m16n8k16"): D = A(16x16) B(16x8) + C in
/// fp32. With g = lane / 4 and q = lane % 4, this lane passes `a` = four
/// 2-element registers {A[g][2q..2q+1], A[g+8][2q..2q+1], A[g][2q+8..2q+9],
/// A[g+8][2q+8..2q+9]}, `b` = two {B[2q..2q+1][g], B[2q+8..2q+9][g]} and
/// `c` = four f32 {C[g][2q], C[g][2q+1], C[g+8][2q], C[g+8][2q+1]}; the
/// registers are vector<2xf16> / vector<2xbf16> of `elementType`. Returns D
/// in c's layout. Every lane of the warp must execute it.
SmallVector<Value, 4> mmaM16N8K16(ImplicitLocOpBuilder &b, Type elementType,
                                  ArrayRef<Value> a, ArrayRef<Value> bFrag,
                                  ArrayRef<Value> c);

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class ReduceKind { Sum, Max };

/// Butterfly reduction over the 32 lanes of a warp with `gpu.shuffle xor`
/// (offsets 16, 8, 4, 2, 1); every lane gets the result. Must be called by
/// all 32 lanes (no divergence).
Value warpReduce(ImplicitLocOpBuilder &b, Value value, ReduceKind kind);

/// Reduction of an f32 over the whole CTA (`blockSize` threads, a multiple
/// of 32): warp reduce, lane 0 of each warp writes `scratch[warp]`
/// (a workgroup buffer of at least blockSize/32 f32), barrier, every warp
/// reduces the per-warp partials, barrier (so `scratch` may be reused).
/// Every thread gets the result. Must be called by every thread of the CTA.
Value blockReduce(ImplicitLocOpBuilder &b, Value value, ReduceKind kind,
                  Value scratch, int64_t blockSize);

/// Builds `scf.if cond { thenBuilder() }` with no results.
void ifThen(ImplicitLocOpBuilder &b, Value cond,
            llvm::function_ref<void(ImplicitLocOpBuilder &)> thenBuilder);

/// Builds `scf.for %i = lb to ub step s` with no iter_args.
void forLoop(ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
             llvm::function_ref<void(ImplicitLocOpBuilder &, Value)> body);

//===----------------------------------------------------------------------===//
// Normalisation of one token row (Normalize.cpp)
//===----------------------------------------------------------------------===//

/// One token's normalisation as the ops define it (design.md 2.1):
/// rmsnorm `y = round((h32 * (1 / sqrt(sum(h32^2) / H + eps))) * w32)`
/// (w32 + 1 with unit_offset), layernorm
/// `y = round((h32 - mean) * (1 / sqrt(var + eps)) * w32 + b32)` with a
/// two-pass variance, where `h = round(x + residual)` with a residual and
/// `h = x` otherwise; `None` only copies x. Sums in fp32.
struct NormSpec {
  enum class Kind { None, RMS, Layer };
  Kind kind = Kind::None;
  double epsilon = 0.0;
  bool unitOffset = false;
  int64_t hidden = 0;
  Type elementType;
  /// Flat buffers (gpu.func arguments); residual and bias may be null.
  Value input, residual, weight, bias;
  /// Outputs written when `writeOutputs` holds (may be null).
  Value residualOut, normedOut;
};

/// Normalises row `token` (index) of `spec.input` with the whole CTA
/// (`blockSize` threads, 8 elements per thread and step; needs
/// hidden % 8 == 0), or with the calling warp alone if `warpOnly` (then
/// `scratch` is unused and no barrier is emitted), into `row` (a buffer of the
/// activation type, e.g. shared memory) at element offset `rowBase`. Each
/// thread reads back only the elements it wrote, so `row` needs no barrier for
/// this thread's later use; other threads need a barrier. `scratch` is a
/// workgroup f32 buffer of blockSize/32 elements. Must be called by every
/// thread of the CTA (of the warp if `warpOnly`). When every thread has the
/// same number of 8-element chunks, at most `maxRegisterChunks`, they are
/// unrolled and all loaded at once (one memory round trip; 4 chunks cost
/// about 40 registers); otherwise a loop goes through `row`.
void emitNormalizeToken(ImplicitLocOpBuilder &b, const NormSpec &spec,
                        Value token, Value row, Value rowBase,
                        Value writeOutputs, Value scratch, int64_t blockSize,
                        bool warpOnly = false, int64_t maxRegisterChunks = 4);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_EMITTERUTILS_H
