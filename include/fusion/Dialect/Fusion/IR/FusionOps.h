//===- FusionOps.h - fusion dialect operations --------------------*- C++
//-*-===//

#ifndef FUSION_DIALECT_FUSION_IR_FUSIONOPS_H
#define FUSION_DIALECT_FUSION_IR_FUSIONOPS_H

#include "fusion/Dialect/Fusion/IR/FusionAttrs.h"
#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <string>

#define GET_OP_CLASSES
#include "fusion/Dialect/Fusion/IR/FusionOps.h.inc"

namespace mlir::fusion {

/// The longest name a fusion.kernel (and each PTX entry or global derived
/// from it) may have.
inline constexpr size_t kMaxKernelNameLength = 255;

/// Whether `name` may name a PTX entry: an identifier
/// `[a-zA-Z_][a-zA-Z0-9_$]*` of at most kMaxKernelNameLength characters.
/// fusion.kernel names, the names fusion-form-kernels derives from the
/// enclosing function and the entries the lowering derives from a kernel's
/// name must satisfy it.
bool isValidKernelName(llvm::StringRef name);

/// The rule isValidKernelName checks, in words, for diagnostics.
std::string describeKernelNameRule();

} // namespace mlir::fusion

#endif // FUSION_DIALECT_FUSION_IR_FUSIONOPS_H
