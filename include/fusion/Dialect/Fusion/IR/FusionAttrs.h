//===- FusionAttrs.h - fusion attributes and enums ----------------*- C++
//-*-===//

#ifndef FUSION_DIALECT_FUSION_IR_FUSIONATTRS_H
#define FUSION_DIALECT_FUSION_IR_FUSIONATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

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
} // namespace mlir

#include "fusion/Dialect/Fusion/IR/FusionEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fusion/Dialect/Fusion/IR/FusionAttrs.h.inc"

#endif // FUSION_DIALECT_FUSION_IR_FUSIONATTRS_H
