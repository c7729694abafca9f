//===- fusion-compile.cpp - model.mlir -> model.ptx + model.manifest.json -===//
//
// Runs --fusion-form-kernels{strategy} and the fusion-to-ptx pipeline on a
// module of fusion ops and writes
//
//   <prefix>.ptx            every kernel of the module (one PTX module)
//   <prefix>.manifest.json  kernels in launch order, their parameters, launch
//                           geometry, schedules and buffer bindings
//
// (format: docs/abi.md) and prints one line saying so. Nothing is written if
// anything fails: both files are written to temporaries (<file>.tmp, removed
// at the start of the next run if a killed run left them) and renamed at the
// end.
//
//===----------------------------------------------------------------------===//

#include "fusion/Conversion/FusionToGPU/Emitters.h"
#include "fusion/Conversion/Passes.h"
#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "fusion/Dialect/Fusion/IR/FusionOps.h"
#include "fusion/Support/ParseModule.h"
#include "fusion/Support/ToolInput.h"
#include "fusion/Target/Manifest.h"
#include "fusion/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fusion;
namespace cl = llvm::cl;

static cl::OptionCategory category("fusion-compile options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"),
                                      cl::init("-"), cl::cat(category));
static cl::opt<std::string>
    outputPrefix("o",
                 cl::desc("Output prefix: writes <prefix>.ptx and "
                          "<prefix>.manifest.json"),
                 cl::value_desc("prefix"), cl::Required, cl::cat(category));
static cl::opt<FusionStrategy> strategy(
    "strategy", cl::desc("Fusion strategy"),
    cl::values(clEnumValN(FusionStrategy::decode, "decode",
                          "front half + attention (default)"),
               clEnumValN(FusionStrategy::none, "none", "one kernel per op")),
    cl::init(FusionStrategy::decode), cl::cat(category));
static cl::opt<int64_t> oProjPartialsMaxBytes(
    "o-proj-partials-max-bytes",
    cl::desc("--fusion-form-kernels rule 6: the largest o_proj weight, in "
             "bytes, that the attention kernel projects itself (0: never)"),
    cl::init(FusionFormKernelsPassOptions().oProjPartialsMaxBytes),
    cl::cat(category));
static cl::opt<std::string>
    chip("chip",
         cl::desc("Target SM (sm_90, sm_80; sm_90a adds "
                  "warpgroup MMA, for compute "
                  "capability 9.0 only)"),
         cl::init("sm_90"), cl::cat(category));
static cl::opt<std::string> features("features", cl::desc("PTX feature string"),
                                     cl::init("+ptx80"), cl::cat(category));
static cl::opt<int64_t> smCount("sm-count",
                                cl::desc("SMs the grids should fill"),
                                cl::init(132), cl::cat(category));
static cl::opt<bool> warpSpecializedGemm(
    "warp-specialized-gemm",
    cl::desc("With --chip=sm_90a: the warp-specialised projection variants "
             "(opt-in; not yet faster, docs/performance.md entry 44)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> clusterKSplit(
    "cluster-k-split",
    cl::desc("With an sm_90 chip: the GEMM-shaped projection variants "
             "combine their split-K partials through a thread-block cluster "
             "(docs/abi.md section 3.4; on by default, "
             "--cluster-k-split=false turns it off)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> attentionCtaRing(
    "attention-cta-ring",
    cl::desc("With an sm_90 chip: the tensor-core attention variant streams "
             "K/V through one CTA-wide ring filled by TMA boxes of the "
             "caches (head_dim a multiple of 64; else the per-warp rings)"),
    cl::init(false), cl::cat(category));
static cl::opt<int64_t> attentionRingStages(
    "attention-ring-stages",
    cl::desc("With --attention-cta-ring: the ring's stages, a multiple of 4 "
             "from 4 to 24 (default 16: 1 CTA per SM at head_dim 128; 8: 2); "
             "checked always, used only where the ring is"),
    cl::init(mlir::fusion::kDefaultAttentionRingStages), cl::cat(category));
static cl::opt<std::string> dumpMLIR(
    "dump-mlir",
    cl::desc("Also write the module after the pipeline (host "
             "functions with each kernel's #fusion.launch) to this file"),
    cl::init(""), cl::cat(category));

namespace {

/// The files fusion-compile writes.
struct OutputPaths {
  std::string ptx, manifest;
  std::string dump; ///< --dump-mlir: empty for none, "-" for stdout
};

/// The regular file to write for output `path`: `path` itself, or the file
/// a symbolic link names (a rename into place would replace the link).
/// Fails, naming `option`, when it exists as anything else (a device, a
/// FIFO, a directory), which a rename would replace.
FailureOr<std::string> regularOutputFile(StringRef option, StringRef path) {
  SmallString<256> real(path);
  if (llvm::sys::fs::is_symlink_file(path) &&
      llvm::sys::fs::real_path(path, real)) {
    llvm::errs() << "fusion-compile: " << option << ": " << path
                 << " is a symbolic link to nothing\n";
    return failure();
  }
  llvm::sys::fs::make_absolute(real);
  llvm::sys::path::remove_dots(real, /*remove_dot_dot=*/true);
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(real, status) &&
      status.type() != llvm::sys::fs::file_type::regular_file) {
    llvm::errs() << "fusion-compile: " << option << ": " << path
                 << " exists and is not a regular file\n";
    return failure();
  }
  return std::string(real);
}

/// The output files of `prefix` (-o) and --dump-mlir `dump`, checked: a
/// non-empty prefix that names a file, regular files only, no two outputs
/// (or an output and the input) the same file.
FailureOr<OutputPaths> resolveOutputPaths(StringRef input, StringRef prefix,
                                          StringRef dump) {
  if (prefix.empty() || llvm::sys::path::filename(prefix).empty() ||
      llvm::sys::path::is_separator(prefix.back())) {
    llvm::errs() << "fusion-compile: -o needs a file prefix (out/model gives "
                    "out/model.ptx and out/model.manifest.json), got \""
                 << prefix << "\"\n";
    return failure();
  }
  OutputPaths out;
  FailureOr<std::string> ptx = regularOutputFile("-o", prefix.str() + ".ptx");
  FailureOr<std::string> manifest =
      regularOutputFile("-o", prefix.str() + ".manifest.json");
  if (failed(ptx) || failed(manifest))
    return failure();
  out.ptx = *ptx;
  out.manifest = *manifest;
  if (!dump.empty() && dump != "-") {
    FailureOr<std::string> file = regularOutputFile("--dump-mlir", dump);
    if (failed(file))
      return failure();
    out.dump = *file;
  } else {
    out.dump = dump.str();
  }
  SmallVector<StringRef> paths = {out.ptx, out.manifest};
  if (!out.dump.empty() && out.dump != "-")
    paths.push_back(out.dump);
  llvm::StringSet<> seen;
  for (StringRef path : paths)
    if (!seen.insert(path).second || llvm::sys::fs::equivalent(path, input)) {
      llvm::errs() << "fusion-compile: " << path
                   << " would be written twice, or over the input\n";
      return failure();
    }
  return out;
}

/// Where `path` is written before it is renamed into place. The name is
/// fixed, so a later run replaces or removes what a killed run left.
std::string tempPath(StringRef path) { return (path + ".tmp").str(); }

/// Writes `contents` to tempPath(path), creating missing parent
/// directories; the caller renames it once every output is written.
LogicalResult writeTemp(StringRef path, StringRef contents) {
  StringRef dir = llvm::sys::path::parent_path(path);
  if (!dir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
      llvm::errs() << "fusion-compile: cannot create directory " << dir << ": "
                   << ec.message() << "\n";
      return failure();
    }
  std::string temp = tempPath(path);
  std::error_code ec;
  llvm::raw_fd_ostream os(temp, ec);
  if (!ec) {
    os << contents;
    os.close();
    ec = os.error();
    os.clear_error();
  }
  if (ec) {
    llvm::errs() << "fusion-compile: cannot write " << temp << ": "
                 << ec.message() << "\n";
    llvm::sys::fs::remove(temp);
    return failure();
  }
  return success();
}

/// Renames tempPath(path) to `path`.
LogicalResult commitTemp(StringRef path) {
  if (std::error_code ec = llvm::sys::fs::rename(tempPath(path), path)) {
    llvm::errs() << "fusion-compile: cannot write " << path << ": "
                 << ec.message() << "\n";
    return failure();
  }
  return success();
}

/// Writes `ptx` and `manifest` to their paths, both or neither (each
/// through its temporary; the temporaries are removed on failure).
LogicalResult writeOutputs(StringRef ptxPath, StringRef ptx,
                           StringRef manifestPath, StringRef manifest) {
  auto removeTemps = [&] {
    llvm::sys::fs::remove(tempPath(ptxPath));
    llvm::sys::fs::remove(tempPath(manifestPath));
  };
  if (failed(writeTemp(ptxPath, ptx)) ||
      failed(writeTemp(manifestPath, manifest)) ||
      failed(commitTemp(ptxPath))) {
    removeTemps();
    return failure();
  }
  if (failed(commitTemp(manifestPath))) {
    llvm::sys::fs::remove(ptxPath);
    removeTemps();
    return failure();
  }
  return success();
}

/// Checks that the input `module` holds functions only: fusion-compile
/// makes the GPU modules and kernels itself, and anything else at the top
/// level would be compiled into the PTX beside them.
LogicalResult verifyTopLevel(ModuleOp module) {
  for (Operation &op : module.getBody()->getOperations())
    if (!isa<func::FuncOp>(op))
      return op.emitError("fusion-compile takes a module of func.func ops; '")
             << op.getName() << "' cannot appear at its top level";
  return success();
}

/// Prints the compiled `module` to `path` (--dump-mlir): nowhere if empty,
/// stdout for "-", otherwise through a temporary.
LogicalResult writeDump(ModuleOp module, StringRef path) {
  if (path.empty())
    return success();
  // Arguments print under their names (%x), which fusion-translate
  // --fusion-to-manifest reads back.
  OpPrintingFlags flags;
  flags.printNameLocAsPrefix();
  if (path == "-") {
    module.print(llvm::outs(), flags);
    return success();
  }
  std::string dumped;
  llvm::raw_string_ostream os(dumped);
  module.print(os, flags);
  return success(succeeded(writeTemp(path, dumped)) &&
                 succeeded(commitTemp(path)));
}

/// The number of fusion.kernel launches in `module` and of the distinct PTX
/// entries they use (variants included).
std::pair<unsigned, unsigned> countKernelsAndEntries(ModuleOp module) {
  unsigned kernels = 0;
  llvm::StringSet<> entries;
  module.walk([&](KernelOp kernel) {
    ++kernels;
    LaunchAttr launch = kernel.getLaunchAttr();
    if (!launch)
      return;
    entries.insert(launch.getEntry());
    if (ArrayAttr variants = launch.getVariants())
      for (auto variant : variants.getAsRange<KernelVariantAttr>())
        entries.insert(variant.getEntry());
  });
  return {kernels, static_cast<unsigned>(entries.size())};
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "fusion-compile: fusion-op module -> <prefix>.ptx + "
      "<prefix>.manifest.json\n");
  FailureOr<OutputPaths> out =
      resolveOutputPaths(inputFile, outputPrefix, dumpMLIR);
  if (failed(out))
    return 1;
  // Temporaries a killed run may have left.
  for (StringRef path :
       {StringRef(out->ptx), StringRef(out->manifest), StringRef(out->dump)})
    if (!path.empty() && path != "-")
      llvm::sys::fs::remove(tempPath(path));
  FusionToPTXPipelineOptions pipeline;
  pipeline.chip = chip;
  pipeline.features = features;
  pipeline.smCount = smCount;
  pipeline.warpSpecializedGemm = warpSpecializedGemm;
  pipeline.clusterKSplit = clusterKSplit;
  pipeline.attentionCtaRing = attentionCtaRing;
  pipeline.attentionRingStages = attentionRingStages;
  pipeline.format = "isa";
  if (failed(verifyFusionToPTXOptions(
          pipeline, [](StringRef option, const Twine &message) {
            llvm::errs() << "fusion-compile: invalid --" << option << ": "
                         << message << "\n";
          })))
    return 1;

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registry.insert<FusionDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics carry source locations; a dump of the (half-lowered) op
  // after each error only buries the message.
  context.printOpOnDiagnostic(false);

  // Modules hold no weights: a 32-layer model is tens of kilobytes.
  if (llvm::Error e = checkToolInput(inputFile, 256 << 20)) {
    llvm::errs() << "fusion-compile: " << llvm::toString(std::move(e)) << "\n";
    return 1;
  }
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "fusion-compile: " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseModuleNamingArguments(sourceMgr, &context);
  if (!module || failed(verifyTopLevel(*module)))
    return 1;

  PassManager pm(&context);
  FusionFormKernelsPassOptions formOptions;
  formOptions.strategy = strategy;
  formOptions.oProjPartialsMaxBytes = oProjPartialsMaxBytes;
  pm.addPass(createFusionFormKernelsPass(formOptions));
  buildFusionToPTXPipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return 1;

  FailureOr<std::string> ptx = getModulePTX(*module);
  std::string manifest;
  llvm::raw_string_ostream manifestStream(manifest);
  if (failed(ptx) ||
      failed(exportManifest(*module, manifestStream,
                            llvm::sys::path::filename(out->ptx))))
    return 1;

  if (failed(writeDump(*module, out->dump)) ||
      failed(writeOutputs(out->ptx, *ptx, out->manifest, manifest)))
    return 1;
  auto [kernels, entries] = countKernelsAndEntries(*module);
  llvm::outs() << "fusion-compile: wrote " << outputPrefix << ".ptx ("
               << kernels << (kernels == 1 ? " kernel, " : " kernels, ")
               << entries << (entries == 1 ? " entry" : " entries") << ") and "
               << outputPrefix << ".manifest.json";
  if (!out->dump.empty() && out->dump != "-")
    llvm::outs() << ", and the compiled module to " << dumpMLIR;
  llvm::outs() << "\n";
  return 0;
}
