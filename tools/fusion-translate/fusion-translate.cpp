//===- fusion-translate.cpp - translations out of compiled modules --------===//
//
// MlirTranslateMain with the fusion translations: `--fusion-to-manifest`
// writes the launch manifest of a module compiled by the fusion-to-ptx
// pipeline (e.g. `fusion-compile --dump-mlir` output), the same manifest
// fusion-compile writes.
//
//===----------------------------------------------------------------------===//

#include "fusion/Target/Manifest.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::fusion::registerToManifestTranslation();
  return mlir::failed(
             mlir::mlirTranslateMain(argc, argv, "fusion translation driver\n"))
             ? 1
             : 0;
}
