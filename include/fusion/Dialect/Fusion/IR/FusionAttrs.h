//===- FusionAttrs.h - fusion attributes and enums ----------------*- C++
//-*-===//

#ifndef FUSION_DIALECT_FUSION_IR_FUSIONATTRS_H
#define FUSION_DIALECT_FUSION_IR_FUSIONATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "fusion/contract/Contract.h"

namespace mlir {
/// Parses an `APFloat` (double precision) field of a declarative attribute
/// format; MLIR provides field parsers for integers and strings only.
template <>
struct FieldParser<llvm::APFloat> {
  static FailureOr<llvm::APFloat> parse(AsmParser &parser) {
    double value;
    if (parser.parseFloat(value))
      return failure();
    return llvm::APFloat(value);
  }
};
namespace fusion {
/// Parses a kernel parameter kind keyword (`input`, `output`, `workspace`,
/// `scalar`: contract::paramKindName) of #fusion.param.
FailureOr<::fusion::contract::ParamKind> parseParamKind(AsmParser &parser);

/// Parses `[d0, d1, ...]`, each an integer or a run-time dimension name
/// (contract::kDimNames), into an ArrayAttr of i64 IntegerAttrs and
/// StringAttrs (a grid or a parameter shape of the launch attributes).
FailureOr<ArrayAttr> parseLaunchDims(AsmParser &parser);

/// Prints what parseLaunchDims parses.
void printLaunchDims(AsmPrinter &printer, ArrayAttr dims);

/// Checks launch dims: each an i64 IntegerAttr >= `minValue` or a StringAttr
/// naming a run-time dimension; `what` names them in the error.
LogicalResult verifyLaunchDims(function_ref<InFlightDiagnostic()> emitError,
                               ArrayAttr dims, StringRef what,
                               int64_t minValue);
} // namespace fusion
} // namespace mlir

#include "fusion/Dialect/Fusion/IR/FusionEnums.h.inc"

#include "fusion/Dialect/Fusion/IR/FusionAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fusion/Dialect/Fusion/IR/FusionAttrs.h.inc"

#endif // FUSION_DIALECT_FUSION_IR_FUSIONATTRS_H
