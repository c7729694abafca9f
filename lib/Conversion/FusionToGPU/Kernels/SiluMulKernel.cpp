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

#include "../Fragments/Activation.h"
#include "../Schedule/ElementwiseSchedule.h"
#include "RowKernel.h"

using namespace mlir;
using namespace mlir::fusion;

FailureOr<KernelLaunch>
mlir::fusion::emitSiluMulKernel(KernelOp kernel, const TargetInfo &target,
                                gpu::GPUModuleOp module) {
  auto op = cast<SiluMulOp>(kernel.getBody().front().front());
  auto resultType = cast<ShapedType>(op.getResult().getType());
  const int64_t inter = resultType.getDimSize(1);
  Type act = resultType.getElementType();
  const int64_t width = chooseRowVectorWidth(inter);
  Value input, out;
  return emitRowKernel(
      kernel, module, target, RowKind::silu_mul, inter / width, width,
      [&](const KernelArgs &args) -> LogicalResult {
        input = args.input(op.getInput());
        out = args.output(op.getResult());
        if (!input || !out)
          return kernel.emitOpError("silu_mul: the input must be a kernel "
                                    "operand and the result a kernel result");
        return success();
      },
      [&](ImplicitLocOpBuilder &b, Value token, Value vec) {
        Value column = mulI(b, vec, width);
        Value gateAt = addI(b, mulI(b, token, 2 * inter), column);
        Value g = extToF32(b, loadVector(b, input, gateAt, width));
        Value u =
            extToF32(b, loadVector(b, input, addI(b, gateAt, inter), width));
        Value y = truncFromF32(b, emitSiluMul(b, g, u), act);
        storeVector(b, y, out, addI(b, mulI(b, token, inter), column));
      });
}
