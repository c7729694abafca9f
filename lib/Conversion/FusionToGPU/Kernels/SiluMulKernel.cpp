//===- SiluMulKernel.cpp - fusion.silu_mul alone --------------------------===//
//
// The SwiGLU activation of the `none` strategy, and of a silu_mul that no
// linear epilogue absorbs (`ref::siluMul`): row b of the [B, 2I] input is
// [gate | up], and y[b, i] = round(silu(g32) * u32) with
// silu(g) = g / (1 + exp(-g)) in fp32. Grid [batch, chunks]: each thread
// reads one vector of the gate and the vector of the up half at the same
// columns and writes one vector of y; vectors are 16 bytes (8 elements)
// when I % 8 == 0, else the widest of 4, 2, 1 elements that divides I.
//
// exp(-g) is ex2.approx.ftz.f32(t), t = -g * log2(e) rounded to fp32 (no
// libdevice call). ex2.approx has a relative error of about 2^-22 (PTX ISA),
// and rounding t moves 2^t by at most |t| * 2^-24 * ln 2 = |g| * 2^-24
// relative, so exp(-g) is within (4 + |g|) * 2^-24 relative of the exact
// value: 7e-7 for |g| <= 8, 5.5e-6 at |g| = 88, past which exp(-g) is +inf
// or below 2^-127 and silu(g) is -0 or g as in the fp32 reference.
// silu(g) = g / (1 + e) inherits at most that relative error (its factor
// e / (1 + e) is at most 1); the division is div.rn.f32 and the product one
// fp32 multiply. Against the f16 (2^-11) or bf16 (2^-8) rounding of y, y
// can differ from the rounded fp32 reference only where that lies within
// those few 1e-6 of a rounding boundary, and then by one ulp.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/Abi.h"
#include "../KernelEmitter.h"
#include "../Schedule/ElementwiseSchedule.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fusion;

/// silu(g) * u for vectors of f32: g / (1 + 2^(-g * log2(e))) * u.
static Value emitSiluMul(ImplicitLocOpBuilder &b, Value g, Value u) {
  const int64_t width = cast<VectorType>(g.getType()).getNumElements();
  Value t = mulF(b, g, splat(b, constF32(b, -M_LOG2E), width));
  SmallVector<Value> powers;
  for (int64_t i = 0; i < width; ++i)
    powers.push_back(exp2F32(b, extract(b, t, i)));
  Value e = vector::FromElementsOp::create(b, t.getType(), powers);
  Value one = splat(b, constF32(b, 1.0), width);
  Value silu = divF(b, g, addF(b, one, e));
  return mulF(b, silu, u);
}

FailureOr<KernelLaunch>
mlir::fusion::emitSiluMulKernel(KernelOp kernel, const TargetInfo &target,
                                gpu::GPUModuleOp module) {
  auto op = cast<SiluMulOp>(kernel.getBody().front().front());
  auto resultType = cast<ShapedType>(op.getResult().getType());
  const int64_t inter = resultType.getDimSize(1);
  Type act = resultType.getElementType();
  const int64_t width = chooseRowVectorWidth(inter);
  const RowChunks rows = chooseRowChunks(inter / width);

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
  KernelArgs args(kernel, func, launch.params);
  Value input = args.input(op.getInput());
  Value out = args.output(op.getResult());
  if (!input || !out)
    return kernel.emitOpError("silu_mul: the input must be a kernel operand "
                              "and the result a kernel result");

  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
  Value token = blockIdX(b);
  Value chunkStart = mulI(b, blockIdY(b), rows.threads);
  Value vec = addI(b, chunkStart, threadIdX(b));
  ifThen(b, cmpI(b, CmpIPredicate::ult, vec, inter / width),
         [&](ImplicitLocOpBuilder &tb) {
           Value column = mulI(tb, vec, width);
           Value gateAt = addI(tb, mulI(tb, token, 2 * inter), column);
           Value g = extToF32(tb, loadVector(tb, input, gateAt, width));
           Value u = extToF32(
               tb, loadVector(tb, input, addI(tb, gateAt, inter), width));
           Value y = truncFromF32(tb, emitSiluMul(tb, g, u), act);
           storeVector(tb, y, out, addI(tb, mulI(tb, token, inter), column));
         });
  launch.schedule =
      RowScheduleAttr::get(kernel.getContext(), RowKind::silu_mul, rows.threads,
                           rows.chunks, width, /*unroll=*/1);
  return launch;
}
