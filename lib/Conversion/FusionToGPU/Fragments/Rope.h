//===- Rope.h - rotary embedding fragments ----------------------*- C++ -*-===//
//
// RoPE as the reference does it (design.md 2.1, runtime/src/Reference.cpp):
// the fp32 inverse-frequency table computed at compile time, the mapping of
// a thread's element pair to the pair of head offsets it rotates (neox:
// (j, j + rd/2); gptj and unrotated elements: (2j, 2j + 1)), and the
// rotation itself with libdevice-free sin/cos.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ROPE_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ROPE_H

#include "../KernelBuilder.h"
#include "fusion/Dialect/Fusion/IR/FusionOps.h"

#include <utility>

namespace mlir::fusion {

/// The rotary_dim/2 inverse frequencies of `rope` in fp32, Llama-3.1 scaling
/// included: ropeInvFreqF32 of fusion/runtime/RopeFrequencies.h, the same
/// function the CPU reference calls.
SmallVector<float> computeRopeInvFreq(RopeOp rope, int64_t rotaryDim);

/// The table of computeRopeInvFreq as a private constant `memref.global`
/// `@name` in `module` (created once), returned through memref.get_global.
Value getRopeInvFreqTable(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module,
                          RopeOp rope, StringRef name);

/// sin and cos of an f32 angle, accurate to a few f32 ulps for any |angle|
/// up to 2^31: the quadrant reduction `angle - k*pi/2` is done in f64 (exact
/// enough for k < 2^31), the polynomials (Cephes sinf/cosf) in f32. No
/// libdevice calls, no `sin.approx` (which is wrong for large angles).
std::pair<Value, Value> sinCosF32(ImplicitLocOpBuilder &b, Value angle);

/// One RoPE rotation as the reference does it: angle = float(position) *
/// invFreq (one fp32 multiply; position is i32, invFreq the f32 inverse
/// frequency of the pair, loadRopeInvFreq), sin/cos by sinCosF32, (a, c) ->
/// (round(a*cos - c*sin), round(c*cos + a*sin)) in fp32 from the
/// activation-type values `a`, `c`.
std::pair<Value, Value> emitRopeRotation(ImplicitLocOpBuilder &b, Value a,
                                         Value c, Value position, Value invFreq,
                                         Type elementType);

/// The inverse frequency of pair `j` (index) from the table `table`
/// (getRopeInvFreqTable): table[j] when `rotated`, else table[0] (unused).
Value loadRopeInvFreq(ImplicitLocOpBuilder &b, Value table, Value j,
                      Value rotated);

/// Element pair `j` of a head (index, 0 <= j < D/2) rotated if `rotated`
/// (i1): with `rotatedPairs` (rope with neox pairing) the offsets inside the
/// head are (j, j + halfRotaryDim) when rotated and (2j, 2j + 1) otherwise;
/// without, always (2j, 2j + 1). Returns {da, db}.
std::pair<Value, Value> getRopePairOffsets(ImplicitLocOpBuilder &b, Value j,
                                           Value rotated, bool neoxPairs,
                                           int64_t halfRotaryDim);

/// (a, c) rotated by emitRopeRotation with inverse frequency `invFreq`
/// (loadRopeInvFreq) when `rotated`, else unchanged (a pair of a head at
/// `position`, an i32). `selectSecondFirst`
/// builds the select of c before that of a: the two orders give the same
/// values but different PTX instruction orders, and the head kernel keeps the
/// order it always had (so its PTX stays byte-identical).
std::pair<Value, Value> emitRopePair(ImplicitLocOpBuilder &b, Value a, Value c,
                                     Value position, Value invFreq,
                                     Value rotated, Type elementType,
                                     bool selectSecondFirst = false);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ROPE_H
