//===- FusionDialect.cpp - fusion dialect and attributes ------------------===//

#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "fusion/Dialect/Fusion/IR/FusionOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

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

LogicalResult
Llama3RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              APFloat factorAttr, APFloat lowFreqFactorAttr,
                              APFloat highFreqFactorAttr,
                              int64_t originalMaxPosition) {
  double factor = factorAttr.convertToDouble();
  double lowFreqFactor = lowFreqFactorAttr.convertToDouble();
  double highFreqFactor = highFreqFactorAttr.convertToDouble();
  if (!(factor > 0.0))
    return emitError() << "llama3_scaling factor must be > 0, got " << factor;
  if (!(lowFreqFactor > 0.0))
    return emitError() << "llama3_scaling low_freq_factor must be > 0, got "
                       << lowFreqFactor;
  if (!(highFreqFactor > lowFreqFactor))
    return emitError() << "llama3_scaling high_freq_factor (" << highFreqFactor
                       << ") must be greater than low_freq_factor ("
                       << lowFreqFactor << ")";
  if (originalMaxPosition <= 0)
    return emitError()
           << "llama3_scaling original_max_position must be > 0, got "
           << originalMaxPosition;
  return success();
}
