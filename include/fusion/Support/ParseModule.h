//===- ParseModule.h - parse a module, keeping argument names --*- C++ -*-===//
//
// The textual parser drops SSA names, but the manifest names each function
// argument after the source (`%x` -> "x"), so launchers can bind tensors by
// name. This parses a module and records those names as NameLoc locations
// (what fusion-import writes), which the manifest exporter reads.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_SUPPORT_PARSEMODULE_H
#define FUSION_SUPPORT_PARSEMODULE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

namespace mlir::fusion {

/// Parses the main buffer of `sourceMgr` as a module (diagnostics go to the
/// context's handler; null on error). Every argument of a function defined
/// in the text whose location is not already named gets
/// NameLoc("<ssa name>", <its location>), the name from the parser's own
/// record of where each argument is defined (AsmParserState).
OwningOpRef<ModuleOp> parseModuleNamingArguments(llvm::SourceMgr &sourceMgr,
                                                 MLIRContext *context);

} // namespace mlir::fusion

#endif // FUSION_SUPPORT_PARSEMODULE_H
