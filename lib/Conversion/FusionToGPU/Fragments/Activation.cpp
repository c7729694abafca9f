//===- Activation.cpp - the MLP activation fragment -----------------------===//

#include "Activation.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fusion;

/// 2^x for an f32 or each element of a vector of f32: one ex2.approx each.
static Value exp2Elementwise(ImplicitLocOpBuilder &b, Value x) {
  auto vectorType = dyn_cast<VectorType>(x.getType());
  if (!vectorType)
    return exp2F32(b, x);
  SmallVector<Value> powers;
  for (int64_t i = 0; i < vectorType.getNumElements(); ++i)
    powers.push_back(exp2F32(b, extract(b, x, i)));
  return vector::FromElementsOp::create(b, vectorType, powers);
}

Value mlir::fusion::emitSiluMul(ImplicitLocOpBuilder &b, Value gate, Value up) {
  auto vectorType = dyn_cast<VectorType>(gate.getType());
  // An f32 constant, splat to gate's shape.
  auto constant = [&](double value) {
    Value c = constF32(b, value);
    return vectorType ? splat(b, c, vectorType.getNumElements()) : c;
  };
  const double log2e = 1.0 / std::log(2.0);
  Value negScaled = mulF(b, gate, constant(-log2e));
  Value powers = exp2Elementwise(b, negScaled);
  Value denominator = addF(b, constant(1.0), powers);
  return mulF(b, divF(b, gate, denominator), up);
}
