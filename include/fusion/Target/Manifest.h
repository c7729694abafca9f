//===- Manifest.h - compiled module -> launch manifest ----------*- C++ -*-===//
//
// The manifest exporter: reads a module compiled by the fusion-to-ptx
// pipeline (host functions of fusion.kernel ops carrying `#fusion.launch`,
// and the gpu.binary holding their PTX) and writes the JSON manifest that
// tells a launcher how to run it (format: docs/abi.md). Registered as the
// `fusion-to-manifest` translation of fusion-translate; fusion-compile calls
// it directly.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TARGET_MANIFEST_H
#define FUSION_TARGET_MANIFEST_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace mlir::fusion {

/// The PTX of compiled `module`: the assembly objects of its gpu.binary ops,
/// concatenated. Fails with a diagnostic on `module` if there is none or if
/// it calls libdevice (__nv_*), which the CUDA driver cannot resolve.
FailureOr<std::string> getModulePTX(ModuleOp module);

/// The manifest of compiled `module`, whose PTX (getModulePTX) is written as
/// the file `ptxName`. The chip and PTX features come from the gpu.binary's
/// #nvvm.target, the strategy from the kernels' schedules, and argument names
/// from NameLoc locations ("arg<i>" where an argument has none). Fails with
/// diagnostics on the ops the manifest cannot describe: a kernel without
/// launch, an operand or result computed outside the kernels, a
/// function argument bound with two roles.
FailureOr<llvm::json::Object> buildManifest(ModuleOp module, StringRef ptxName);

/// Writes buildManifest(module, ptxName) to `os`, two-space indented with a
/// final newline; writes nothing on failure.
LogicalResult exportManifest(ModuleOp module, raw_ostream &os,
                             StringRef ptxName);

/// Registers the `fusion-to-manifest` translation (option
/// `--fusion-ptx-name`, default "model.ptx").
void registerToManifestTranslation();

} // namespace mlir::fusion

#endif // FUSION_TARGET_MANIFEST_H
