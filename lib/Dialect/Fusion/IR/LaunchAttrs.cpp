//===- LaunchAttrs.cpp - #fusion.launch, #fusion.param, #fusion.variant ---===//
//
// Parsing, printing and verification of the launch-contract attributes
// (FusionAttrs.td). The vocabulary they check against (kinds, roles,
// run-time dimension names, launch limits) is the contract header's.
//
//===----------------------------------------------------------------------===//

#include "fusion/Dialect/Fusion/IR/FusionAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::fusion;
namespace contract = ::fusion::contract;

FailureOr<contract::ParamKind> mlir::fusion::parseParamKind(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (std::optional<contract::ParamKind> kind =
          contract::parseParamKind({keyword.data(), keyword.size()}))
    return *kind;
  return parser.emitError(loc, "expected a parameter kind (input, output, "
                               "workspace or scalar), got '")
         << keyword << "'";
}

FailureOr<ArrayAttr> mlir::fusion::parseLaunchDims(AsmParser &parser) {
  SmallVector<Attribute> dims;
  Builder b(parser.getContext());
  auto parseDim = [&]() -> ParseResult {
    int64_t value;
    OptionalParseResult number = parser.parseOptionalInteger(value);
    if (number.has_value()) {
      if (failed(*number))
        return failure();
      dims.push_back(b.getI64IntegerAttr(value));
      return success();
    }
    StringRef name;
    if (parser.parseKeyword(&name))
      return failure();
    dims.push_back(b.getStringAttr(name));
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim))
    return failure();
  return b.getArrayAttr(dims);
}

void mlir::fusion::printLaunchDims(AsmPrinter &printer, ArrayAttr dims) {
  printer << '[';
  llvm::interleaveComma(dims, printer, [&](Attribute dim) {
    if (auto value = dyn_cast<IntegerAttr>(dim))
      printer << value.getInt();
    else
      printer << cast<StringAttr>(dim).getValue();
  });
  printer << ']';
}

LogicalResult
mlir::fusion::verifyLaunchDims(function_ref<InFlightDiagnostic()> emitError,
                               ArrayAttr dims, StringRef what,
                               int64_t minValue) {
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (auto value = dyn_cast<IntegerAttr>(dim)) {
      if (value.getInt() < minValue)
        return emitError() << what << " dimension " << i << " is "
                           << value.getInt() << "; expected at least "
                           << minValue;
      continue;
    }
    auto name = dyn_cast<StringAttr>(dim);
    if (!name || !llvm::is_contained(contract::kDimNames,
                                     std::string_view(name.getValue())))
      return emitError() << what << " dimension " << i
                         << " must be an integer or a run-time dimension "
                            "(batch, max_pages, num_pages, num_splits)";
  }
  return success();
}

/// Checks the geometry every launch has: three grid dimensions (>= 1 or
/// named), a block of 1..1024 threads, non-negative shared memory.
static LogicalResult
verifyGeometry(function_ref<InFlightDiagnostic()> emitError, StringRef entry,
               ArrayAttr grid, int64_t block, int64_t smem,
               int64_t staticSmem) {
  if (entry.empty())
    return emitError() << "entry must not be empty";
  if (grid.size() != 3)
    return emitError() << "grid has " << grid.size()
                       << " dimensions; expected 3 (x, y, z)";
  if (failed(verifyLaunchDims(emitError, grid, "grid", 1)))
    return failure();
  if (block < 1 || block > contract::kMaxThreadsPerBlock)
    return emitError() << "block of " << block << " threads; expected 1 to "
                       << contract::kMaxThreadsPerBlock;
  if (smem < 0 || staticSmem < 0)
    return emitError() << "shared memory sizes must be non-negative";
  return success();
}

/// A tensor_map's own fields (the input it names is checked by LaunchAttr):
/// `of` and `box` exactly on tensor maps, an f16/bf16 shape of the map's
/// kind (contract::TensorMapSpec): 2-D of constant columns, constant rows
/// for a weight_map and "batch" rows for the activations' maps; a KV cache
/// ["num_pages", P, Hkv, D] for the cache maps. A box of 1-256 rows by 128
/// bytes.
static LogicalResult
verifyTensorMap(function_ref<InFlightDiagnostic()> emitError,
                contract::ParamKind kind, StringRef role, Type dtype,
                ArrayAttr shape, int64_t of, DenseI64ArrayAttr box) {
  bool map = kind == contract::ParamKind::TensorMap;
  if (map != (of >= 0) || map != static_cast<bool>(box))
    return emitError() << "'of' and 'box' are given exactly on tensor_map "
                          "parameters";
  if (!map)
    return success();
  if (!dtype.isF16() && !dtype.isBF16())
    return emitError() << "a tensor_map maps an f16 or bf16 tensor";
  auto is = [&](std::string_view name) {
    return role == StringRef(name.data(), name.size());
  };
  auto isSymbol = [](Attribute a, std::string_view name) {
    auto symbol = dyn_cast_or_null<StringAttr>(a);
    return symbol && symbol.getValue() == StringRef(name.data(), name.size());
  };
  if (is(contract::role::kKeyCacheMap) || is(contract::role::kValueCacheMap)) {
    if (!shape || shape.size() != 4 ||
        !isSymbol(shape[0], contract::dim::kNumPages) ||
        !llvm::all_of(shape.getValue().drop_front(),
                      [](Attribute a) { return isa<IntegerAttr>(a); }))
      return emitError() << role
                         << " shape must be a KV cache [\"num_pages\", P, "
                            "Hkv, D] of constants after num_pages";
  } else {
    const bool weights = is(contract::role::kWeightMap);
    auto rowsOk = [&](Attribute a) {
      return weights ? isa<IntegerAttr>(a) : isSymbol(a, contract::dim::kBatch);
    };
    if (!shape || shape.size() != 2 || !rowsOk(shape[0]) ||
        !isa<IntegerAttr>(shape[1]))
      return emitError() << role << " shape must be 2-D: "
                         << (weights ? "constant" : "\"batch\"")
                         << " rows, constant columns";
  }
  const int64_t rowBytes = contract::TensorMapSpec().swizzleBytes;
  if (box.size() != 2 || box[0] < 1 || box[0] > 256 || box[1] * 2 != rowBytes)
    return emitError() << "a tensor_map's box is [1 to 256 rows, "
                       << rowBytes / 2 << " columns] (128-byte swizzle)";
  return success();
}

LogicalResult
KernelParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        contract::ParamKind kind, StringRef role, Type dtype,
                        ArrayAttr shape, bool zeroInit, int64_t of,
                        DenseI64ArrayAttr box) {
  StringRef kindName(contract::paramKindName(kind).data(),
                     contract::paramKindName(kind).size());
  if (!contract::paramRoles(kind).contains({role.data(), role.size()}))
    return emitError() << "'" << role << "' is not a role of " << kindName
                       << " parameters (docs/abi.md section 3.3)";
  if (!dtype.isF16() && !dtype.isBF16() && !dtype.isF32() &&
      !dtype.isInteger(32))
    return emitError() << "dtype " << dtype << " is not f16, bf16, f32 or i32";
  bool scalar = kind == contract::ParamKind::Scalar;
  if (scalar != !shape)
    return emitError() << (scalar ? "a scalar has no shape"
                                  : "a buffer parameter needs a shape");
  if (scalar && !dtype.isInteger(32))
    return emitError() << "scalars are i32";
  if (zeroInit && kind != contract::ParamKind::Workspace)
    return emitError() << "only a workspace can be zero_init";
  if (failed(verifyTensorMap(emitError, kind, role, dtype, shape, of, box)))
    return failure();
  return shape ? verifyLaunchDims(emitError, shape, "shape", 1) : success();
}

LogicalResult
KernelVariantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          int64_t minBatch, StringRef entry, ArrayAttr grid,
                          int64_t block, int64_t smem, int64_t staticSmem,
                          ScheduleAttrInterface schedule) {
  if (minBatch < 2)
    return emitError() << "min_batch " << minBatch
                       << "; a variant replaces its kernel from batch 2 on";
  auto gemm = dyn_cast_or_null<ProjectionGemmScheduleAttr>(schedule);
  const int64_t exchange = gemm && gemm.getClusterKSplit()
                               ? contract::clusterExchangeBytes(
                                     gemm.getTileTokens(), gemm.getTileRows())
                               : 0;
  if (smem < exchange)
    return emitError() << "smem " << smem
                       << " cannot hold the cluster_k_split exchange of "
                       << exchange << " bytes";
  return verifyGeometry(emitError, entry, grid, block, smem, staticSmem);
}

/// Tensor map `i` names an input of a role its own role describes
/// (contract::tensorMapTargetRoles), of its dtype and shape.
static LogicalResult
verifyMappedInput(function_ref<InFlightDiagnostic()> emitError,
                  ArrayAttr params, size_t i, KernelParamAttr map) {
  auto input = map.getOf() < static_cast<int64_t>(params.size())
                   ? dyn_cast<KernelParamAttr>(params[map.getOf()])
                   : KernelParamAttr();
  const contract::RoleList targets = contract::tensorMapTargetRoles(
      {map.getRole().data(), map.getRole().size()});
  if (!input || input.getKind() != contract::ParamKind::Input ||
      !targets.contains({input.getRole().data(), input.getRole().size()}))
    return emitError() << "params[" << i << "] (" << map.getRole()
                       << ") maps params[" << map.getOf()
                       << "], which is not an input it describes";
  if (input.getDtype() != map.getDtype() || input.getShape() != map.getShape())
    return emitError() << "params[" << i << "] maps params[" << map.getOf()
                       << "] with another dtype or shape";
  return success();
}

LogicalResult LaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef entry, ArrayAttr grid, int64_t block,
                                 int64_t smem, int64_t staticSmem,
                                 ArrayAttr params, ArrayAttr variants,
                                 bool programmaticDependentLaunch) {
  if (failed(verifyGeometry(emitError, entry, grid, block, smem, staticSmem)))
    return failure();
  std::optional<contract::ParamKind> last;
  for (auto [i, a] : llvm::enumerate(params)) {
    auto param = dyn_cast<KernelParamAttr>(a);
    if (!param)
      return emitError() << "params[" << i << "] is not a #fusion.param";
    if (last && param.getKind() < *last)
      return emitError() << "params[" << i
                         << "] is out of ABI order (inputs, outputs, "
                            "workspaces, tensor maps, scalars)";
    last = param.getKind();
    if (param.getKind() == contract::ParamKind::TensorMap &&
        failed(verifyMappedInput(emitError, params, i, param)))
      return failure();
  }
  int64_t lastMinBatch = 0;
  for (auto [i, a] : llvm::enumerate(variants ? variants.getValue()
                                              : ArrayRef<Attribute>())) {
    auto variant = dyn_cast<KernelVariantAttr>(a);
    if (!variant)
      return emitError() << "variants[" << i << "] is not a #fusion.variant";
    if (variant.getMinBatch() <= lastMinBatch)
      return emitError() << "variants must have ascending min_batch";
    if (variant.getEntry() == entry)
      return emitError() << "variants[" << i << "] has the kernel's entry";
    lastMinBatch = variant.getMinBatch();
  }
  return success();
}
