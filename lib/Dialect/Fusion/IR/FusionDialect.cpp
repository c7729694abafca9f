//===- FusionDialect.cpp - fusion dialect and attributes ------------------===//

#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "fusion/Dialect/Fusion/IR/FusionOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::fusion;

#include "fusion/Dialect/Fusion/IR/FusionEnums.cpp.inc"
#include "fusion/Dialect/Fusion/IR/FusionOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fusion/Dialect/Fusion/IR/FusionAttrs.cpp.inc"

void FusionDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fusion/Dialect/Fusion/IR/FusionOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fusion/Dialect/Fusion/IR/FusionAttrs.cpp.inc"
      >();
}

bool mlir::fusion::isPositiveNormalF32(double value) {
  return value >= std::numeric_limits<float>::min() &&
         value <= std::numeric_limits<float>::max();
}

LogicalResult
Llama3RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              APFloat factorAttr, APFloat lowFreqFactorAttr,
                              APFloat highFreqFactorAttr,
                              int64_t originalMaxPosition) {
  double factor = factorAttr.convertToDouble();
  double lowFreqFactor = lowFreqFactorAttr.convertToDouble();
  double highFreqFactor = highFreqFactorAttr.convertToDouble();
  for (auto [name, value] : {std::pair<StringRef, double>{"factor", factor},
                             {"low_freq_factor", lowFreqFactor},
                             {"high_freq_factor", highFreqFactor}})
    if (!isPositiveNormalF32(value))
      return emitError() << "llama3_scaling " << name
                         << " must be a positive normal float32 (the scaling "
                            "is computed in fp32), got "
                         << value;
  if (!(highFreqFactor > lowFreqFactor))
    return emitError() << "llama3_scaling high_freq_factor (" << highFreqFactor
                       << ") must be greater than low_freq_factor ("
                       << lowFreqFactor << ")";
  if (originalMaxPosition <= 0 ||
      originalMaxPosition > std::numeric_limits<int32_t>::max())
    return emitError() << "llama3_scaling original_max_position must be in "
                          "[1, 2147483647], got "
                       << originalMaxPosition;
  return success();
}
