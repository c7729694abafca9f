//===- ManifestExport.cpp - compiled module -> launch manifest ------------===//
//
// Implements include/fusion/Target/Manifest.h: walks the host functions of a
// module compiled by the fusion-to-ptx pipeline and writes, per function, its
// arguments (name, role, dtype, shape), its results and where they come
// from, and per kernel its launch (entry, grid, block, shared memory,
// variants), schedule, ops and parameter bindings (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#include "fusion/Target/Manifest.h"

#include "fusion/Conversion/FusionToGPU/Emitters.h"
#include "fusion/Dialect/Fusion/IR/FusionDialect.h"
#include "fusion/Dialect/Fusion/IR/FusionOps.h"
#include "fusion/Support/ParseModule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::fusion;
namespace json = llvm::json;

namespace {

/// What the module was compiled for: the manifest's chip, features and
/// strategy.
struct CompiledFor {
  std::string chip, features, strategy;
};

/// The chip and features of the gpu.binary objects' #nvvm.target and the
/// strategy recorded on the kernels; fails with a diagnostic if
/// either is missing or they disagree within the module.
FailureOr<CompiledFor> getCompiledFor(ModuleOp module) {
  std::optional<CompiledFor> out;
  bool consistent = true;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects()) {
      auto target =
          dyn_cast<NVVM::NVVMTargetAttr>(cast<gpu::ObjectAttr>(a).getTarget());
      if (!target)
        continue;
      CompiledFor next{target.getChip().str(), target.getFeatures().str(), ""};
      if (out && (out->chip != next.chip || out->features != next.features))
        consistent = false;
      out = next;
    }
  });
  if (!out || !consistent)
    return module.emitError(
        "the manifest needs a gpu.binary whose objects all have the same "
        "#nvvm.target (chip and features)");
  module.walk([&](KernelOp kernel) {
    std::optional<FusionStrategy> strategy = kernel.getStrategy();
    std::string name =
        strategy ? stringifyFusionStrategy(*strategy).str() : std::string();
    if (!strategy || (!out->strategy.empty() && out->strategy != name))
      consistent = false;
    else
      out->strategy = name;
  });
  if (!consistent || out->strategy.empty())
    return module.emitError("the manifest needs every fusion.kernel to record "
                            "the same strategy (set by "
                            "--fusion-form-kernels)");
  return *out;
}

/// A JSON value for an attribute of an op.
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
  std::string str;
  llvm::raw_string_ostream os(str);
  attr.print(os);
  return str;
}

/// The members both split-KV attention schedules (CUDA-core and tensor-core)
/// share: heads, workspaces, the chunk and num_splits policies (the contract
/// header's formulas), how the partials are left and the most splits a
/// cluster combines (docs/abi.md 3.4).
template <typename SplitKVSchedule>
void writeSplitKV(json::Object &o, SplitKVSchedule s) {
  o[StringRef(contract::schedule::kMaxSplits)] = s.getMaxSplits();
  o["heads_per_cta"] = s.getHeadsPerCta();
  o["head_blocks"] = s.getHeadBlocks();
  o["chunk_multiple"] = s.getChunkMultiple();
  o["chunk_policy"] = StringRef(contract::kChunkPolicyFormula);
  o[StringRef(contract::schedule::kTargetCtas)] = s.getTargetCtas();
  o[StringRef(contract::schedule::kMinChunkTokens)] = s.getMinChunkTokens();
  o[StringRef(contract::schedule::kNumSplitsPolicy)] =
      StringRef(contract::kNumSplitsPolicyFormula);
  o["partials"] = "unnormalized";
  o[StringRef(contract::schedule::kClusterSplits)] = s.getClusterSplits();
}

/// The manifest's `schedule` object of `schedule` (empty if null): `kind`
/// and the members of the #fusion.*_schedule under their names in the IR;
/// for attention also the num_splits and chunk policies (the contract
/// header's formulas) and how the partials are left (docs/abi.md 3.4).
json::Object scheduleToJSON(ScheduleAttrInterface schedule) {
  if (!schedule)
    return {};
  json::Object o{{"kind", schedule.getKindName().str()},
                 {"threads", schedule.getThreads()}};
  TypeSwitch<Attribute>(schedule)
      .Case([&](ProjectionScheduleAttr s) {
        o["warps"] = s.getWarps();
        o["grid"] = s.getGrid();
        o["rows_per_warp"] = s.getRowsPerWarp();
        o["pairs_per_warp"] = s.getPairsPerWarp();
        o["vector_width"] = s.getVectorWidth();
        o["k_unroll"] = s.getKUnroll();
        o["batch_tile"] = s.getBatchTile();
        o["min_ctas_per_sm"] = s.getMinCtasPerSm();
        o["preload_chunks"] = s.getPreloadChunks();
      })
      .Case([&](ProjectionMmaScheduleAttr s) {
        o["warps"] = s.getWarps();
        o["grid"] = s.getGrid();
        o["rows_per_warp"] = s.getRowsPerWarp();
        o["tile_tokens"] = s.getTileTokens();
        o["k_vectors"] = s.getKVectors();
        o["k_split"] = s.getKSplit();
      })
      .Case([&](ProjectionGemmScheduleAttr s) {
        o["warps"] = s.getWarps();
        o["grid"] = s.getGrid();
        o["tile_rows"] = s.getTileRows();
        o["tile_tokens"] = s.getTileTokens();
        o["k_split"] = s.getKSplit();
        o["stage_k"] = s.getStageK();
        o["stages"] = s.getStages();
        o["min_ctas_per_sm"] = s.getMinCtasPerSm();
        if (s.getWarpgroupMma())
          o["warpgroup_mma"] = true;
        if (s.getWarpSpecialized())
          o["warp_specialized"] = true;
        if (s.getClusterKSplit())
          o[StringRef(contract::schedule::kClusterKSplit)] = true;
      })
      .Case([&](SplitKvAttentionScheduleAttr s) {
        writeSplitKV(o, s);
        o["vector_width"] = s.getVectorWidth();
        o["lanes_per_row"] = s.getLanesPerRow();
        o["kv_unroll"] = s.getKvUnroll();
      })
      .Case([&](SplitKvAttentionMmaScheduleAttr s) {
        writeSplitKV(o, s);
        o["stages"] = s.getStages();
        if (s.getCtaRing())
          o["cta_ring"] = true;
      })
      .Case([&](NormRowScheduleAttr s) {
        o["vector_width"] = s.getVectorWidth();
        o["tokens_per_cta"] = s.getTokensPerCta();
      })
      .Case([&](HeadScheduleAttr s) {
        o["head_slots"] = s.getHeadSlots();
        o["elements_per_thread"] = s.getElementsPerThread();
      })
      .Case([&](RowScheduleAttr s) {
        o["chunks"] = s.getChunks();
        o["vector_width"] = s.getVectorWidth();
        o["unroll"] = s.getUnroll();
      });
  return o;
}

/// The manifest's dtype spelling of `type`: f16, bf16, f32, i32, or the
/// type as MLIR prints it.
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

/// The name of function argument `arg`: the first NameLoc in its location
/// (fusion-import writes them; fusion-compile attaches the source's SSA names
/// when it parses), or "arg<i>" if it has none.
std::string argumentName(BlockArgument arg) {
  std::string name;
  arg.getLoc()->walk([&](Location loc) {
    if (auto named = dyn_cast<NameLoc>(loc)) {
      name = named.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name.empty() ? "arg" + std::to_string(arg.getArgNumber()) : name;
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
  explicit ManifestBuilder(ModuleOp module) : module(module) {}

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
        unsigned index = kernelCount++;
        kernelIndex[kernel] = index;
        fnKernels.push_back(index);
        LaunchAttr launch = kernel.getLaunchAttr();
        if (!launch) {
          kernel.emitOpError("has no launch (not compiled)");
          ok = false;
          return;
        }
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
    FailureOr<CompiledFor> target = getCompiledFor(module);
    if (!ok || failed(target))
      return failure();
    json::Object manifest{
        {"format", StringRef(contract::kManifestFormat)},
        {"version", contract::kManifestVersion},
        {"ptx", ptxName.str()},
        {StringRef(contract::kPtxFingerprintKey),
         llvm::formatv("{0:x-16}", contract::ptxFingerprint(ptx)).str()},
        {"chip", target->chip},
        {"features", target->features},
        {"strategy", target->strategy},
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
                     {"name", argumentName(arg)}};
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

  /// The JSON of launch dims: integers and dimension names.
  static json::Array dimsToJSON(ArrayAttr dims) {
    json::Array out;
    for (Attribute dim : dims) {
      if (auto value = dyn_cast<IntegerAttr>(dim))
        out.push_back(value.getInt());
      else
        out.push_back(cast<StringAttr>(dim).getValue().str());
    }
    return out;
  }

  /// Writes a launch geometry into `out`: entry, grid, block,
  /// dynamic_shared_bytes, static_shared_bytes.
  static void launchToJSON(StringRef entry, ArrayAttr grid, int64_t block,
                           int64_t smem, int64_t staticSmem,
                           json::Object &out) {
    out["entry"] = entry.str();
    out["grid"] = dimsToJSON(grid);
    out["block"] = json::Array{block, 1, 1};
    out["dynamic_shared_bytes"] = smem;
    out["static_shared_bytes"] = staticSmem;
  }

  /// A kernel's `schedule` object: its #fusion.*_schedule and its strategy
  /// (getCompiledFor checks that every kernel has one).
  static json::Object kernelScheduleToJSON(KernelOp kernel) {
    json::Object schedule = scheduleToJSON(kernel.getScheduleAttr());
    if (std::optional<FusionStrategy> strategy = kernel.getStrategy())
      schedule["strategy"] = stringifyFusionStrategy(*strategy).str();
    return schedule;
  }

  json::Object kernelToJSON(KernelOp kernel, LaunchAttr launch, unsigned index,
                            StringRef function,
                            const DenseMap<Operation *, unsigned> &kernels,
                            bool &ok) {
    json::Object k;
    k["index"] = index;
    k["function"] = function.str();
    k["name"] = kernel.getSymName().str();
    launchToJSON(launch.getEntry(), launch.getGrid(), launch.getBlock(),
                 launch.getSmem(), launch.getStaticSmem(), k);
    k["schedule"] = kernelScheduleToJSON(kernel);
    if (ArrayAttr variants = launch.getVariants()) {
      json::Array out;
      for (auto variant : variants.getAsRange<KernelVariantAttr>()) {
        json::Object v{{"min_batch", variant.getMinBatch()}};
        launchToJSON(variant.getEntry(), variant.getGrid(), variant.getBlock(),
                     variant.getSmem(), variant.getStaticSmem(), v);
        json::Object schedule = scheduleToJSON(variant.getSchedule());
        schedule["min_batch"] = variant.getMinBatch();
        v["schedule"] = std::move(schedule);
        out.push_back(std::move(v));
      }
      k["variants"] = std::move(out);
    }
    if (launch.getProgrammaticDependentLaunch())
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
    for (auto [i, param] :
         llvm::enumerate(launch.getParams().getAsRange<KernelParamAttr>())) {
      json::Object o;
      o["index"] = i;
      contract::ParamKind kind = param.getKind();
      o["kind"] = std::string(contract::paramKindName(kind));
      StringRef role = param.getRole();
      o["role"] = role.str();
      o["dtype"] = dtypeOf(param.getDtype());
      if (ArrayAttr shape = param.getShape())
        o["shape"] = dimsToJSON(shape);
      if (param.getZeroInit())
        o["zero_init"] = true;
      if (DenseI64ArrayAttr box = param.getBox())
        o["tensor_map"] = json::Object{
            {"of", param.getOf()},
            {"box", json::Array{box[0], box[1]}},
            {"swizzle_bytes", contract::TensorMapSpec().swizzleBytes}};
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
  unsigned kernelCount = 0;
  /// Function argument index -> its role, for the function being built.
  DenseMap<unsigned, ArgumentRole> argumentRoles;
};

} // namespace

FailureOr<std::string> mlir::fusion::getModulePTX(ModuleOp module) {
  std::string ptx;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(a);
      if (object.getFormat() == gpu::CompilationTarget::Assembly)
        ptx += object.getObject().getValue().str();
    }
  });
  if (ptx.empty())
    return module.emitError("the module has no kernels (no PTX)");
  if (StringRef(ptx).contains("__nv_"))
    return module.emitError("the PTX calls libdevice (__nv_*), which the CUDA "
                            "driver cannot resolve");
  return ptx;
}

FailureOr<json::Object> mlir::fusion::buildManifest(ModuleOp module,
                                                    StringRef ptxName) {
  FailureOr<std::string> ptx = getModulePTX(module);
  if (failed(ptx))
    return failure();
  return ManifestBuilder(module).build(ptxName, *ptx);
}

LogicalResult mlir::fusion::exportManifest(ModuleOp module, raw_ostream &os,
                                           StringRef ptxName) {
  FailureOr<json::Object> manifest = buildManifest(module, ptxName);
  if (failed(manifest))
    return failure();
  os << llvm::formatv("{0:2}", json::Value(std::move(*manifest))) << "\n";
  return success();
}

void mlir::fusion::registerToManifestTranslation() {
  static llvm::cl::opt<std::string> ptxName(
      "fusion-ptx-name",
      llvm::cl::desc("fusion-to-manifest: the PTX file name the manifest "
                     "names"),
      llvm::cl::init("model.ptx"));
  TranslateRegistration registration(
      "fusion-to-manifest",
      "the launch manifest (JSON) of a module compiled by fusion-to-ptx "
      "(argument names from the source's SSA names or NameLocs)",
      [](const std::shared_ptr<llvm::SourceMgr> &sourceMgr, raw_ostream &os,
         MLIRContext *context) -> LogicalResult {
        DialectRegistry registry;
        registerAllDialects(registry);
        registry.insert<FusionDialect>();
        context->appendDialectRegistry(registry);
        OwningOpRef<ModuleOp> module =
            parseModuleNamingArguments(*sourceMgr, context);
        return success(module &&
                       succeeded(exportManifest(*module, os, ptxName)));
      });
}
