//===- DType.cpp - f16 / bf16 conversions ---------------------------------===//

#include "fusion/runtime/DType.h"

#include <cstring>

namespace fusion::runtime {

std::string_view dtypeName(DType dtype) {
  return dtype == DType::F16 ? "f16" : "bf16";
}

namespace {

template <typename To, typename From>
To bitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

/// Rounds `value` to a binary format with `ExpBits` exponent bits and
/// `MantBits` stored mantissa bits (1 + ExpBits + MantBits = 16), ties to
/// even. Works on the double's bit pattern, so no intermediate rounding.
template <int ExpBits, int MantBits>
uint16_t roundDouble(double value) {
  static_assert(1 + ExpBits + MantBits == 16);
  constexpr int bias = (1 << (ExpBits - 1)) - 1;
  constexpr int minNormalExp = 1 - bias;
  constexpr uint32_t expAllOnes = (1u << ExpBits) - 1;
  constexpr uint32_t infBits = expAllOnes << MantBits;

  const uint64_t bits = bitCast<uint64_t>(value);
  const uint32_t sign = static_cast<uint32_t>(bits >> 63) << 15;
  const int exp = static_cast<int>((bits >> 52) & 0x7FF);
  const uint64_t mant = bits & ((uint64_t{1} << 52) - 1);

  if (exp == 0x7FF) {
    if (mant == 0)
      return static_cast<uint16_t>(sign | infBits);
    // NaN: keep the top payload bits and force the quiet bit.
    const uint32_t payload = static_cast<uint32_t>(mant >> (52 - MantBits));
    return static_cast<uint16_t>(sign | infBits | payload |
                                 (1u << (MantBits - 1)));
  }
  if (exp == 0) // Zero or a double subnormal (< 2^-1022): rounds to zero.
    return static_cast<uint16_t>(sign);

  // value = sig * 2^(e - 52) with sig a 53-bit integer.
  const int e = exp - 1023;
  const uint64_t sig = mant | (uint64_t{1} << 52);
  if (e > bias) // Beyond the largest finite exponent.
    return static_cast<uint16_t>(sign | infBits);

  // Bits of `sig` to drop: the normal case keeps MantBits fraction bits;
  // below the normal range the target's exponent is fixed at minNormalExp.
  int shift = 52 - MantBits;
  if (e < minNormalExp)
    shift += minNormalExp - e;
  if (shift > 54) // Below half the smallest subnormal.
    return static_cast<uint16_t>(sign);

  uint64_t rounded = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (rounded & 1)))
    ++rounded;

  uint32_t result;
  if (e < minNormalExp) {
    // Subnormal encoding is the integer itself; rounding up to 2^MantBits
    // gives exactly the smallest normal's encoding.
    result = static_cast<uint32_t>(rounded);
  } else {
    // rounded is in [2^MantBits, 2^(MantBits+1)]; a carry out of the
    // mantissa increments the exponent field, possibly up to infinity.
    result = (static_cast<uint32_t>(e + bias) << MantBits) +
             static_cast<uint32_t>(rounded - (uint64_t{1} << MantBits));
    if (result >= infBits)
      result = infBits;
  }
  return static_cast<uint16_t>(sign | result);
}

} // namespace

float f16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exp = (bits >> 10) & 0x1F;
  const uint32_t mant = bits & 0x3FF;
  uint32_t out;
  if (exp == 0x1F) {
    out = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    out = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  } else if (mant == 0) {
    out = sign;
  } else {
    // Subnormal: mant * 2^-24, exactly representable as a normal float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return bitCast<float>(out);
}

float bf16ToFloat(uint16_t bits) {
  return bitCast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t doubleToF16(double value) { return roundDouble<5, 10>(value); }
uint16_t doubleToBF16(double value) { return roundDouble<8, 7>(value); }

} // namespace fusion::runtime
