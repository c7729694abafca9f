//===- ParseModule.cpp - parse a module, keeping argument names -----------===//

#include "fusion/Support/ParseModule.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Parser/Parser.h"

using namespace mlir;

/// Gives each argument of `func` without a NameLoc the name it has in the
/// source text, as recorded in `state` ("%x" -> "x").
static void nameArguments(func::FuncOp func, const AsmParserState &state) {
  if (func.isExternal())
    return;
  Block &entry = func.getBody().front();
  const AsmParserState::BlockDefinition *def = state.getBlockDef(&entry);
  if (!def)
    return;
  for (auto [arg, argDef] : llvm::zip(entry.getArguments(), def->arguments)) {
    if (isa<NameLoc>(arg.getLoc()) || !argDef.loc.isValid())
      continue;
    StringRef text(argDef.loc.Start.getPointer(),
                   argDef.loc.End.getPointer() - argDef.loc.Start.getPointer());
    if (!text.consume_front("%") || text.empty())
      continue;
    arg.setLoc(
        NameLoc::get(StringAttr::get(func.getContext(), text), arg.getLoc()));
  }
}

OwningOpRef<ModuleOp>
mlir::fusion::parseModuleNamingArguments(llvm::SourceMgr &sourceMgr,
                                         MLIRContext *context) {
  AsmParserState state;
  Block block;
  if (failed(
          parseAsmSourceFile(sourceMgr, &block, ParserConfig(context), &state)))
    return {};
  // The location parseSourceFile gives a module it creates: the start of the
  // main buffer.
  Location fileLoc =
      FileLineColLoc::get(context,
                          sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
                              ->getBufferIdentifier(),
                          0, 0);
  OwningOpRef<ModuleOp> module =
      detail::constructContainerOpForParserIfNecessary<ModuleOp>(
          &block, context, fileLoc);
  if (!module)
    return {};
  module->walk([&](func::FuncOp func) { nameArguments(func, state); });
  return module;
}
