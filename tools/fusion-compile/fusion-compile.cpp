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
#include "fusion/Support/ToolInput.h"
#include "fusion/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fusion;
namespace cl = llvm::cl;
namespace json = llvm::json;

static cl::OptionCategory category("fusion-compile options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"),
                                      cl::init("-"), cl::cat(category));
static cl::opt<std::string>
    outputPrefix("o",
                 cl::desc("Output prefix: writes <prefix>.ptx and "
                          "<prefix>.manifest.json"),
                 cl::value_desc("prefix"), cl::Required, cl::cat(category));
static cl::opt<std::string> strategy("strategy",
                                     cl::desc("Fusion strategy: decode|none"),
                                     cl::init("decode"), cl::cat(category));
static cl::opt<std::string> chip("chip", cl::desc("Target SM (sm_90, sm_80)"),
                                 cl::init("sm_90"), cl::cat(category));
static cl::opt<std::string> features("features", cl::desc("PTX feature string"),
                                     cl::init("+ptx80"), cl::cat(category));
static cl::opt<int64_t> smCount("sm-count",
                                cl::desc("SMs the grids should fill"),
                                cl::init(132), cl::cat(category));
static cl::opt<std::string>
    dumpMLIR("dump-mlir",
             cl::desc("Also write the module after the pipeline (host "
                      "functions with fusion.launch attributes) to this file"),
             cl::init(""), cl::cat(category));

namespace {

/// A JSON value for an attribute of a schedule / launch dictionary.
json::Value toJSON(Attribute attr) {
  if (auto pairing = dyn_cast<RopePairingAttr>(attr))
    return stringifyRopePairing(pairing.getValue()).str();
  if (auto scaling = dyn_cast<Llama3RopeScalingAttr>(attr))
    return json::Object{
        {"type", "llama3"},
        {"factor", scaling.getFactor().convertToDouble()},
        {"low_freq_factor", scaling.getLowFreqFactor().convertToDouble()},
        {"high_freq_factor", scaling.getHighFreqFactor().convertToDouble()},
        {"original_max_position", scaling.getOriginalMaxPosition()}};
  if (auto s = dyn_cast<StringAttr>(attr))
    return s.getValue().str();
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getValue().getSExtValue();
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (isa<UnitAttr>(attr))
    return true;
  if (auto a = dyn_cast<ArrayAttr>(attr)) {
    json::Array out;
    for (Attribute e : a)
      out.push_back(toJSON(e));
    return out;
  }
  if (auto d = dyn_cast<DictionaryAttr>(attr)) {
    json::Object out;
    for (NamedAttribute e : d)
      out[e.getName().getValue()] = toJSON(e.getValue());
    return out;
  }
  std::string str;
  llvm::raw_string_ostream os(str);
  attr.print(os);
  return str;
}

/// "4096" -> 4096, "batch" -> "batch".
json::Value dimToJSON(StringRef dim) {
  int64_t value;
  if (!dim.getAsInteger(10, value))
    return value;
  return dim.str();
}

json::Array shapeToJSON(ArrayAttr shape) {
  json::Array out;
  for (Attribute a : shape)
    out.push_back(dimToJSON(cast<StringAttr>(a).getValue()));
  return out;
}

std::string dtypeOf(Type type) {
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isF32())
    return "f32";
  if (type.isInteger(32))
    return "i32";
  std::string str;
  llvm::raw_string_ostream os(str);
  type.print(os);
  return str;
}

json::Array typeShapeToJSON(ShapedType type, ArrayRef<StringRef> names) {
  json::Array out;
  unsigned next = 0;
  for (int64_t d : type.getShape()) {
    if (ShapedType::isDynamic(d))
      out.push_back(next < names.size() ? names[next++].str() : "dynamic");
    else
      out.push_back(d);
  }
  return out;
}

/// The SSA name (without '%') a function argument had in the source, read
/// back from its location; "arg<i>" if unknown.
std::string argumentName(BlockArgument arg, const llvm::SourceMgr &sourceMgr) {
  std::string fallback = "arg" + std::to_string(arg.getArgNumber());
  auto loc = dyn_cast<FileLineColLoc>(arg.getLoc());
  if (!loc || sourceMgr.getNumBuffers() == 0)
    return fallback;
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  StringRef text = buffer->getBuffer();
  unsigned line = loc.getLine(), col = loc.getColumn();
  size_t pos = 0;
  for (unsigned l = 1; l < line && pos != StringRef::npos; ++l) {
    pos = text.find('\n', pos);
    if (pos != StringRef::npos)
      ++pos;
  }
  if (pos == StringRef::npos || pos + col - 1 >= text.size())
    return fallback;
  StringRef rest = text.drop_front(pos + col - 1);
  if (!rest.consume_front("%"))
    return fallback;
  size_t end = rest.find_if_not([](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.' || c == '-';
  });
  StringRef name = rest.take_front(end);
  return name.empty() ? fallback : name.str();
}

/// Where a value used by a kernel comes from, looking through reshapes.
struct Source {
  enum Kind { Argument, KernelResult, Unknown } kind = Unknown;
  unsigned index = 0;  // argument index, or kernel index
  unsigned result = 0; // kernel result index
  bool reshaped = false;
};

class ManifestBuilder {
public:
  ManifestBuilder(ModuleOp module, const llvm::SourceMgr &sourceMgr)
      : module(module), sourceMgr(sourceMgr) {}

  /// The manifest of the compiled module, whose PTX is `ptx` (written as
  /// `ptxName`); fails with diagnostics on the ops it cannot describe.
  FailureOr<json::Object> build(StringRef ptxName, StringRef ptx) {
    json::Array functions, kernelsJSON;
    bool ok = true;
    module.walk([&](func::FuncOp func) {
      if (func.isExternal())
        return;
      json::Object fn;
      fn["name"] = func.getSymName().str();
      argumentRoles.clear();
      DenseMap<Operation *, unsigned> kernelIndex;
      json::Array fnKernels;
      func.walk([&](KernelOp kernel) {
        auto launch = kernel->getAttrOfType<DictionaryAttr>("fusion.launch");
        if (!launch) {
          kernel.emitOpError("has no fusion.launch (not compiled)");
          ok = false;
          return;
        }
        unsigned index = kernelCount++;
        kernelIndex[kernel] = index;
        fnKernels.push_back(index);
        kernelsJSON.push_back(kernelToJSON(kernel, launch, index,
                                           func.getSymName(), kernelIndex, ok));
      });
      fn["kernels"] = std::move(fnKernels);
      fn["arguments"] = argumentsToJSON(func);

      json::Array results;
      func.walk([&](func::ReturnOp ret) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          json::Object r{{"index", i}};
          auto shaped = dyn_cast<ShapedType>(v.getType());
          if (shaped) {
            r["dtype"] = dtypeOf(shaped.getElementType());
            r["shape"] = typeShapeToJSON(shaped, getDynamicDimNames(shaped));
          }
          Source source = traceSource(v, kernelIndex);
          if (source.kind == Source::Unknown) {
            ret.emitOpError("result #")
                << i
                << " is computed outside the fusion.kernel ops (neither a "
                   "function argument nor a kernel result, nor a reshape of "
                   "one); the manifest cannot say where it comes from";
            ok = false;
          }
          r["source"] = sourceToJSON(source);
          results.push_back(std::move(r));
        }
      });
      fn["results"] = std::move(results);
      functions.push_back(std::move(fn));
    });
    if (!ok)
      return failure();
    json::Object manifest{
        {"format", StringRef(contract::kManifestFormat)},
        {"version", contract::kManifestVersion},
        {"ptx", ptxName.str()},
        {StringRef(contract::kPtxFingerprintKey),
         llvm::formatv("{0:x-16}", contract::ptxFingerprint(ptx)).str()},
        {"chip", chip.getValue()},
        {"features", features.getValue()},
        {"strategy", strategy.getValue()},
        {"abi",
         json::Object{{"buffer", "one .u64 device pointer per buffer (dense, "
                                 "row-major, no offset)"},
                      {"scalar", "i32 by value"},
                      {"order", "kernel operands, outputs, workspaces, scalars "
                                "(params lists them in order)"},
                      {"block", "1-D: block = [threads, 1, 1]"}}},
        {"functions", std::move(functions)},
        {"kernels", std::move(kernelsJSON)},
    };
    return manifest;
  }

private:
  /// The role a kernel parameter bound to a function argument gives it.
  struct ArgumentRole {
    std::string role;
    std::string boundBy; // "kernel <name> parameter <index>", for messages
  };

  /// `functions[].arguments`: index, name, role, kind, dtype, shape. The role
  /// is that of the kernel parameters bound to the argument ("unused" if
  /// none is).
  json::Array argumentsToJSON(func::FuncOp func) {
    json::Array args;
    for (BlockArgument arg : func.getArguments()) {
      json::Object a{{"index", arg.getArgNumber()},
                     {"name", argumentName(arg, sourceMgr)}};
      auto role = argumentRoles.find(arg.getArgNumber());
      a["role"] = role == argumentRoles.end()
                      ? std::string(contract::role::kUnused)
                      : role->second.role;
      if (auto shaped = dyn_cast<ShapedType>(arg.getType())) {
        a["kind"] =
            StringRef(isa<MemRefType>(shaped) ? contract::argument::kBuffer
                                              : contract::argument::kTensor);
        a["dtype"] = dtypeOf(shaped.getElementType());
        a["shape"] = typeShapeToJSON(shaped, getDynamicDimNames(shaped));
      }
      args.push_back(std::move(a));
    }
    return args;
  }

  /// Records that parameter `param` of `kernel`, with `role`, is bound to
  /// function argument `argument`; fails (with a diagnostic on `kernel`) if
  /// an earlier parameter gave the argument another role.
  LogicalResult bindArgument(unsigned argument, StringRef role, KernelOp kernel,
                             unsigned param) {
    std::string boundBy =
        llvm::formatv("kernel {0} parameter {1}", kernel.getSymName(), param);
    auto [it, inserted] =
        argumentRoles.try_emplace(argument, ArgumentRole{role.str(), boundBy});
    if (inserted || it->second.role == role)
      return success();
    return kernel.emitOpError("parameter ")
           << param << " binds function argument #" << argument << " as '"
           << role << "', but " << it->second.boundBy << " binds it as '"
           << it->second.role << "'; the manifest gives each argument one role";
  }

  Source traceSource(Value v, const DenseMap<Operation *, unsigned> &kernels) {
    Source s;
    while (true) {
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (isa<func::FuncOp>(arg.getOwner()->getParentOp())) {
          s.kind = Source::Argument;
          s.index = arg.getArgNumber();
        }
        return s;
      }
      Operation *def = v.getDefiningOp();
      if (auto kernel = dyn_cast<KernelOp>(def)) {
        auto it = kernels.find(kernel);
        if (it == kernels.end())
          return s;
        s.kind = Source::KernelResult;
        s.index = it->second;
        s.result = cast<OpResult>(v).getResultNumber();
        return s;
      }
      if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp>(
              def)) {
        s.reshaped = true;
        v = def->getOperand(0);
        continue;
      }
      return s;
    }
  }

  json::Value sourceToJSON(const Source &s) {
    json::Object o;
    switch (s.kind) {
    case Source::Argument:
      o["argument"] = s.index;
      break;
    case Source::KernelResult:
      o["kernel"] = s.index;
      o["result"] = s.result;
      break;
    case Source::Unknown: // an error, reported where it is traced
      break;
    }
    if (s.reshaped)
      o["reshaped"] = true;
    return o;
  }

  /// Writes the launch of `launch` (a fusion.launch dictionary or one of its
  /// variants) into `out`: entry, grid, block, dynamic_shared_bytes,
  /// static_shared_bytes and `schedule` (when non-null).
  static void launchToJSON(DictionaryAttr launch, DictionaryAttr schedule,
                           json::Object &out) {
    out["entry"] = cast<StringAttr>(launch.get("entry")).getValue().str();
    json::Array grid;
    for (Attribute g : cast<ArrayAttr>(launch.get("grid")))
      grid.push_back(dimToJSON(cast<StringAttr>(g).getValue()));
    out["grid"] = std::move(grid);
    int64_t block = cast<IntegerAttr>(launch.get("block")).getInt();
    out["block"] = json::Array{block, 1, 1};
    out["dynamic_shared_bytes"] =
        cast<IntegerAttr>(launch.get("smem")).getInt();
    if (auto s = launch.getAs<IntegerAttr>("static_smem"))
      out["static_shared_bytes"] = s.getInt();
    if (schedule)
      out["schedule"] = toJSON(schedule);
  }

  json::Object kernelToJSON(KernelOp kernel, DictionaryAttr launch,
                            unsigned index, StringRef function,
                            const DenseMap<Operation *, unsigned> &kernels,
                            bool &ok) {
    json::Object k;
    k["index"] = index;
    k["function"] = function.str();
    k["name"] = kernel.getSymName().str();
    launchToJSON(launch, kernel.getScheduleAttr(), k);
    if (auto variants = launch.getAs<ArrayAttr>("variants")) {
      json::Array out;
      for (Attribute a : variants) {
        auto variant = cast<DictionaryAttr>(a);
        json::Object v{{"min_batch",
                        cast<IntegerAttr>(variant.get("min_batch")).getInt()}};
        launchToJSON(variant, variant.getAs<DictionaryAttr>("schedule"), v);
        out.push_back(std::move(v));
      }
      k["variants"] = std::move(out);
    }
    if (launch.get("programmatic_dependent_launch"))
      k["programmatic_dependent_launch"] = true;
    // The ops the kernel computes, with their attributes (for references
    // and for users who want to know the math without reading MLIR).
    json::Array ops;
    for (Operation &op : kernel.getBody().front().without_terminator()) {
      json::Object o{{"op", op.getName().stripDialect().str()}};
      json::Object attrs;
      for (NamedAttribute a : op.getAttrs())
        attrs[a.getName().getValue()] = toJSON(a.getValue());
      if (auto rope = dyn_cast<RopeOp>(op))
        attrs["rotary_dim"] = rope.getEffectiveRotaryDim();
      if (auto attn = dyn_cast<DecodeAttentionOp>(op))
        attrs["scale"] = attn.getEffectiveScale();
      if (auto norm = dyn_cast<RMSNormOp>(op))
        attrs["residual"] = static_cast<bool>(norm.getResidual());
      if (auto qkv = dyn_cast<QKVProjOp>(op))
        attrs["bias"] = static_cast<bool>(qkv.getBias());
      o["attributes"] = std::move(attrs);
      ops.push_back(std::move(o));
    }
    k["ops"] = std::move(ops);

    unsigned numInputs = kernel.getInputs().size();
    json::Array params;
    unsigned outputIndex = 0;
    for (auto [i, p] : llvm::enumerate(cast<ArrayAttr>(launch.get("params")))) {
      auto param = cast<DictionaryAttr>(p);
      json::Object o;
      o["index"] = i;
      StringRef kindName = cast<StringAttr>(param.get("kind")).getValue();
      std::optional<contract::ParamKind> kind =
          contract::parseParamKind(kindName);
      o["kind"] = kindName.str();
      StringRef role = cast<StringAttr>(param.get("role")).getValue();
      o["role"] = role.str();
      o["dtype"] = cast<StringAttr>(param.get("dtype")).getValue().str();
      if (auto shape = param.getAs<ArrayAttr>("shape"))
        o["shape"] = shapeToJSON(shape);
      if (param.get("zero_init"))
        o["zero_init"] = true;
      if (kind == contract::ParamKind::Input && i < numInputs) {
        Source s = traceSource(kernel.getInputs()[i], kernels);
        if (s.kind == Source::Unknown) {
          kernel.emitOpError("operand #")
              << i
              << " is neither a function argument nor a kernel result (nor a "
                 "reshape of one); the manifest cannot bind it";
          ok = false;
        }
        if (s.kind == Source::Argument &&
            failed(bindArgument(s.index, role, kernel, i)))
          ok = false;
        o["binding"] = sourceToJSON(s);
      } else if (kind == contract::ParamKind::Output) {
        o["binding"] = json::Object{{"result", outputIndex++}};
      }
      params.push_back(std::move(o));
    }
    k["params"] = std::move(params);
    return k;
  }

  ModuleOp module;
  const llvm::SourceMgr &sourceMgr;
  unsigned kernelCount = 0;
  /// Function argument index -> its role, for the function being built.
  DenseMap<unsigned, ArgumentRole> argumentRoles;
};

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
  if (path == "-") {
    module.print(llvm::outs());
    return success();
  }
  std::string dumped;
  llvm::raw_string_ostream os(dumped);
  module.print(os);
  return success(succeeded(writeTemp(path, dumped)) &&
                 succeeded(commitTemp(path)));
}

/// The PTX of the compiled `module` (its gpu.binary); fails with a message
/// if there is none or it calls libdevice.
FailureOr<std::string> extractPTX(ModuleOp module) {
  std::string ptx;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(a);
      if (object.getFormat() == gpu::CompilationTarget::Assembly)
        ptx += object.getObject().getValue().str();
    }
  });
  if (ptx.empty()) {
    llvm::errs() << "fusion-compile: the module has no kernels (no PTX)\n";
    return failure();
  }
  if (StringRef(ptx).contains("__nv_")) {
    llvm::errs() << "fusion-compile: the PTX calls libdevice (__nv_*), which "
                    "the CUDA driver cannot resolve\n";
    return failure();
  }
  return ptx;
}

/// The number of fusion.kernel launches in `module` and of the distinct PTX
/// entries they use (variants included).
std::pair<unsigned, unsigned> countKernelsAndEntries(ModuleOp module) {
  unsigned kernels = 0;
  llvm::StringSet<> entries;
  module.walk([&](KernelOp kernel) {
    ++kernels;
    auto launch = kernel->getAttrOfType<DictionaryAttr>("fusion.launch");
    if (!launch)
      return;
    entries.insert(cast<StringAttr>(launch.get("entry")).getValue());
    if (auto variants = launch.getAs<ArrayAttr>("variants"))
      for (Attribute v : variants)
        entries.insert(
            cast<StringAttr>(cast<DictionaryAttr>(v).get("entry")).getValue());
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
  if (strategy != "decode" && strategy != "none") {
    llvm::errs() << "fusion-compile: unknown --strategy '" << strategy
                 << "'; expected decode or none\n";
    return 1;
  }
  FusionToPTXPipelineOptions pipeline;
  pipeline.chip = chip;
  pipeline.features = features;
  pipeline.smCount = smCount;
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
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module || failed(verifyTopLevel(*module)))
    return 1;

  PassManager pm(&context);
  FusionFormKernelsPassOptions formOptions;
  formOptions.strategy = strategy;
  pm.addPass(createFusionFormKernelsPass(formOptions));
  buildFusionToPTXPipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return 1;

  FailureOr<std::string> ptx = extractPTX(*module);
  if (failed(ptx))
    return 1;

  ManifestBuilder manifestBuilder(*module, sourceMgr);
  FailureOr<json::Object> manifest =
      manifestBuilder.build(llvm::sys::path::filename(out->ptx), *ptx);
  if (failed(manifest))
    return 1;
  std::string manifestText;
  {
    llvm::raw_string_ostream os(manifestText);
    os << llvm::formatv("{0:2}", json::Value(std::move(*manifest))) << "\n";
  }

  if (failed(writeDump(*module, out->dump)) ||
      failed(writeOutputs(out->ptx, *ptx, out->manifest, manifestText)))
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
