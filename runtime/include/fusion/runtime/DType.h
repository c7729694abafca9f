//===- DType.h - f16 / bf16 storage types and conversions ---------*- C++
//-*-===//
//
// Activations, weights and KV caches are stored as 16-bit patterns in
// uint16_t arrays; DType says how to read them. The conversions here are
// exact (to float/double) or correctly rounded (from float/double:
// IEEE 754 round-to-nearest, ties-to-even), handle signed zeros,
// subnormals, infinities and NaN, and do not depend on the host having
// _Float16 or __bf16 support.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_DTYPE_H
#define FUSION_RUNTIME_DTYPE_H

#include <cstdint>
#include <string_view>

namespace fusion::runtime {

/// The 16-bit floating-point storage types.
///  - F16: IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits; max
///    65504, smallest subnormal 2^-24).
///  - BF16: bfloat16 (1 sign, 8 exponent, 7 mantissa bits; the top half of
///    an IEEE binary32).
enum class DType { F16, BF16 };

/// "f16" or "bf16" (the MLIR element-type spelling).
std::string_view dtypeName(DType dtype);

/// Size in bytes of one element (2 for both types).
constexpr int64_t dtypeSize(DType) { return 2; }

/// Exact value of an f16 bit pattern (subnormals, +-inf and NaN included).
float f16ToFloat(uint16_t bits);
/// Exact value of a bf16 bit pattern.
float bf16ToFloat(uint16_t bits);

/// Rounds a double to f16, round-to-nearest-even. Values with magnitude
/// >= 65520 become +-inf; magnitudes <= 2^-25 become +-0; NaN stays a
/// quiet NaN with the sign and the top payload bits kept.
uint16_t doubleToF16(double value);
/// Rounds a double to bf16, round-to-nearest-even (overflow to +-inf,
/// underflow through subnormals to +-0, NaN stays a quiet NaN).
uint16_t doubleToBF16(double value);

/// Rounds a float to f16 (single rounding: float -> double is exact).
inline uint16_t floatToF16(float value) {
  return doubleToF16(static_cast<double>(value));
}
/// Rounds a float to bf16 (single rounding).
inline uint16_t floatToBF16(float value) {
  return doubleToBF16(static_cast<double>(value));
}

/// Exact value of `bits` read as `dtype`.
inline float toFloat(DType dtype, uint16_t bits) {
  return dtype == DType::F16 ? f16ToFloat(bits) : bf16ToFloat(bits);
}
/// `value` rounded (nearest-even) to `dtype`, as a bit pattern.
inline uint16_t fromFloat(DType dtype, float value) {
  return dtype == DType::F16 ? floatToF16(value) : floatToBF16(value);
}
/// `value` rounded (nearest-even) to `dtype` in one step, as a bit pattern
/// (no intermediate rounding to float).
inline uint16_t fromDouble(DType dtype, double value) {
  return dtype == DType::F16 ? doubleToF16(value) : doubleToBF16(value);
}
/// `value` rounded to `dtype` and read back as a float: the cast
/// `round_to_dtype` of the reference semantics.
inline float roundToDType(DType dtype, float value) {
  return toFloat(dtype, fromFloat(dtype, value));
}

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_DTYPE_H
