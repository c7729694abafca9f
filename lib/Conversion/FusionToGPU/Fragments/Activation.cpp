//===- Activation.cpp - the MLP activation fragment -----------------------===//

#include "Activation.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fusion;

Value mlir::fusion::emitSiluMul(ImplicitLocOpBuilder &b, Value gate, Value up) {
  const double log2e = 1.0 / std::log(2.0);
  Value negScaled = mulF(b, gate, constF32(b, -log2e));
  Value denominator = addF(b, constF32(b, 1.0), exp2F32(b, negScaled));
  return mulF(b, divF(b, gate, denominator), up);
}
