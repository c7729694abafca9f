//===- Rope.cpp - rotary position embedding fragments ---------------------===//

#include "Rope.h"

#include "fusion/runtime/RopeFrequencies.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fusion;

std::pair<Value, Value> mlir::fusion::sinCosF32(ImplicitLocOpBuilder &b,
                                                Value angle) {
  // Quadrant reduction in f64: k = round(a * 2/pi), r = a - k*pi/2 with
  // pi/2 split in two doubles; |r| <= pi/4 (+ tiny), exact to ~1e-16*|k|.
  Type f32 = b.getF32Type(), f64 = b.getF64Type(), i64 = b.getI64Type();
  Value a = arith::ExtFOp::create(b, f64, angle);
  Value t = mulF(b, a, constF64(b, 2.0 / M_PI));
  Value nonNegative = cmpF(b, CmpFPredicate::OGE, t, constF64(b, 0.0));
  Value half = select(b, nonNegative, constF64(b, 0.5), constF64(b, -0.5));
  Value k = arith::FPToSIOp::create(b, i64, addF(b, t, half));
  Value kf = arith::SIToFPOp::create(b, f64, k);
  Value negK = negF(b, kf);
  constexpr double kPio2Hi = 1.5707963267948966;    // fl(pi/2)
  constexpr double kPio2Lo = 6.123233995736766e-17; // pi/2 - kPio2Hi
  Value r = fma(b, negK, constF64(b, kPio2Hi), a);
  r = fma(b, negK, constF64(b, kPio2Lo), r);
  Value x = arith::TruncFOp::create(b, f32, r);

  // Cephes sinf / cosf minimax polynomials on [-pi/4, pi/4].
  Value z = mulF(b, x, x);
  Value ps =
      fma(b, z, constF32(b, -1.9515295891e-4), constF32(b, 8.3321608736e-3));
  ps = fma(b, z, ps, constF32(b, -1.6666654611e-1));
  Value sinR = fma(b, mulF(b, z, x), ps, x);
  Value pc = fma(b, z, constF32(b, 2.443315711809948e-5),
                 constF32(b, -1.388731625493765e-3));
  pc = fma(b, z, pc, constF32(b, 4.166664568298827e-2));
  Value cosR =
      fma(b, mulF(b, z, z), pc, fma(b, z, constF32(b, -0.5), constF32(b, 1.0)));

  // Quadrant q = k mod 4: sin = [s, c, -s, -c][q], cos = [c, -s, -c, s][q].
  Value q = andI(b, k, constI64(b, 3));
  auto bit = [&](Value v, int64_t mask) {
    Value m = andI(b, v, constI64(b, mask));
    return cmpI(b, CmpIPredicate::ne, m, constI64(b, 0));
  };
  Value swap = bit(q, 1);
  Value sinV = select(b, swap, cosR, sinR);
  Value cosV = select(b, swap, sinR, cosR);
  Value sinNeg = bit(q, 2);
  Value cosNeg = bit(addI(b, q, constI64(b, 1)), 2);
  sinV = select(b, sinNeg, negF(b, sinV), sinV);
  cosV = select(b, cosNeg, negF(b, cosV), cosV);
  return {sinV, cosV};
}

SmallVector<float> mlir::fusion::computeRopeInvFreq(RopeOp rope,
                                                    int64_t rotaryDim) {
  std::optional<::fusion::runtime::Llama3RopeScaling> llama3;
  if (auto s = rope.getScalingAttr())
    llama3 = ::fusion::runtime::Llama3RopeScaling{
        s.getFactor().convertToDouble(), s.getLowFreqFactor().convertToDouble(),
        s.getHighFreqFactor().convertToDouble(), s.getOriginalMaxPosition()};
  std::vector<float> table = ::fusion::runtime::ropeInvFreqF32(
      rope.getTheta().convertToDouble(), rotaryDim, llama3);
  return SmallVector<float>(table.begin(), table.end());
}

/// Declares `memref.global "private" constant @<name> : memref<Nxf32>` in
/// the gpu.module and returns a `memref.get_global` of it.
Value mlir::fusion::getRopeInvFreqTable(ImplicitLocOpBuilder &b,
                                        gpu::GPUModuleOp module, RopeOp rope,
                                        StringRef name) {
  SmallVector<float> values =
      computeRopeInvFreq(rope, rope.getEffectiveRotaryDim());
  auto type =
      MemRefType::get({static_cast<int64_t>(values.size())}, b.getF32Type());
  if (!module.lookupSymbol(name)) {
    OpBuilder mb(module.getContext());
    mb.setInsertionPointToStart(module.getBody());
    auto tensorType = RankedTensorType::get(type.getShape(), b.getF32Type());
    memref::GlobalOp::create(
        mb, b.getLoc(), name, mb.getStringAttr("private"), type,
        DenseElementsAttr::get(tensorType, ArrayRef<float>(values)),
        /*constant=*/true,
        /*alignment=*/IntegerAttr());
  }
  return memref::GetGlobalOp::create(b, type, name);
}

std::pair<Value, Value> mlir::fusion::emitRopeRotation(ImplicitLocOpBuilder &b,
                                                       Value a, Value c,
                                                       Value position,
                                                       Value invFreq,
                                                       Type elementType) {
  Value angle =
      mulF(b, arith::SIToFPOp::create(b, b.getF32Type(), position), invFreq);
  auto [sinV, cosV] = sinCosF32(b, angle);
  Value a32 = extToF32(b, a), c32 = extToF32(b, c);
  Value rotA = subF(b, mulF(b, a32, cosV), mulF(b, c32, sinV));
  Value rotC = addF(b, mulF(b, c32, cosV), mulF(b, a32, sinV));
  return {truncFromF32(b, rotA, elementType),
          truncFromF32(b, rotC, elementType)};
}

Value mlir::fusion::loadRopeInvFreq(ImplicitLocOpBuilder &b, Value table,
                                    Value j, Value rotated) {
  return loadScalar(b, table, select(b, rotated, j, constIndex(b, 0)));
}

std::pair<Value, Value>
mlir::fusion::getRopePairOffsets(ImplicitLocOpBuilder &b, Value j,
                                 Value rotated, bool neoxPairs,
                                 int64_t halfRotaryDim) {
  Value twoJ = mulI(b, j, 2);
  Value da = twoJ;
  Value db = addI(b, twoJ, 1);
  if (neoxPairs) {
    da = select(b, rotated, j, twoJ);
    db = select(b, rotated, addI(b, j, halfRotaryDim), addI(b, twoJ, 1));
  }
  return {da, db};
}

std::pair<Value, Value>
mlir::fusion::emitRopePair(ImplicitLocOpBuilder &b, Value a, Value c,
                           Value position, Value invFreq, Value rotated,
                           Type elementType, bool selectSecondFirst) {
  auto [rotA, rotC] = emitRopeRotation(b, a, c, position, invFreq, elementType);
  if (selectSecondFirst) {
    Value outC = select(b, rotated, rotC, c);
    return {select(b, rotated, rotA, a), outC};
  }
  Value outA = select(b, rotated, rotA, a);
  return {outA, select(b, rotated, rotC, c)};
}
