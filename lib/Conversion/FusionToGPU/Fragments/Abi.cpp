//===- Abi.cpp - kernel parameters, gpu.func creation, argument binding ---===//

#include "Abi.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fusion;

/// The PTX of createKernelFunc's grid-dependency wait.
static constexpr StringLiteral kGridDependencyWaitAsm = "griddepcontrol.wait;";

MemRefType mlir::fusion::getFlatBufferType(Type elementType) {
  return MemRefType::get({kFlatBufferExtent}, elementType);
}

SmallVector<std::string>
mlir::fusion::getABIShape(ShapedType type, ArrayRef<StringRef> dynamicNames) {
  SmallVector<std::string> shape;
  unsigned nextDynamic = 0;
  for (int64_t size : type.getShape()) {
    if (ShapedType::isDynamic(size)) {
      shape.push_back(nextDynamic < dynamicNames.size()
                          ? dynamicNames[nextDynamic].str()
                          : std::string("dynamic"));
      ++nextDynamic;
    } else {
      shape.push_back(std::to_string(size));
    }
  }
  return shape;
}

SmallVector<StringRef> mlir::fusion::getDynamicDimNames(Type type) {
  namespace dim = contract::dim;
  if (isa<MemRefType>(type))
    return {dim::kNumPages};
  auto shaped = dyn_cast<ShapedType>(type);
  if (shaped && shaped.getElementType().isInteger(32) && shaped.getRank() == 2)
    return {dim::kBatch, dim::kMaxPages};
  return {dim::kBatch};
}

/// The role of `use` (an operand of an op in a kernel body).
static StringRef getUseRole(OpOperand &use) {
  namespace role = contract::role;
  Operation *owner = use.getOwner();
  unsigned index = use.getOperandNumber();
  return llvm::TypeSwitch<Operation *, StringRef>(owner)
      .Case<RMSNormOp>([&](RMSNormOp op) -> StringRef {
        if (use.get() == op.getInput())
          return role::kInput;
        if (use.get() == op.getWeight())
          return role::kNormWeight;
        return role::kResidual;
      })
      .Case<LayerNormOp>([&](LayerNormOp op) -> StringRef {
        if (use.get() == op.getInput())
          return role::kInput;
        if (use.get() == op.getWeight())
          return role::kNormWeight;
        return role::kNormBias;
      })
      .Case<QKVProjOp>([&](QKVProjOp op) -> StringRef {
        if (use.get() == op.getInput())
          return role::kInput;
        if (use.get() == op.getWeight())
          return role::kQKVWeight;
        return role::kQKVBias;
      })
      .Case<RopeOp>([&](RopeOp op) -> StringRef {
        if (use.get() == op.getQuery())
          return role::kQuery;
        if (use.get() == op.getKey())
          return role::kKey;
        return role::kPositions;
      })
      .Case<KVAppendOp>([&](KVAppendOp op) -> StringRef {
        switch (index) {
        case 0:
          return role::kKey;
        case 1:
          return role::kValue;
        case 2:
          return role::kKeyCache;
        case 3:
          return role::kValueCache;
        case 4:
          return role::kBlockTable;
        default:
          return role::kPositions;
        }
      })
      .Case<DecodeAttentionOp>([&](DecodeAttentionOp op) -> StringRef {
        switch (index) {
        case 0:
          return role::kQuery;
        case 1:
          return role::kKeyCache;
        case 2:
          return role::kValueCache;
        case 3:
          return role::kBlockTable;
        default:
          return role::kSeqLens;
        }
      })
      .Case<LinearOp, LinearPartialsOp>([&](auto op) -> StringRef {
        return use.get() == op.getInput() ? role::kInput : role::kWeight;
      })
      .Case<SiluMulOp, SumPartialsOp>(
          [&](auto) -> StringRef { return role::kInput; })
      .Case<EmbeddingOp>([&](EmbeddingOp op) -> StringRef {
        return use.get() == op.getTokens() ? role::kTokens : role::kWeight;
      })
      .Case<ArgmaxOp>([&](auto) -> StringRef { return role::kLogits; })
      .Default([](Operation *) -> StringRef { return "operand"; });
}

std::string mlir::fusion::getOperandRole(KernelOp kernel,
                                         unsigned operandIndex) {
  BlockArgument arg = kernel.getBody().front().getArgument(operandIndex);
  // Prefer the first use in program order (e.g. the norm's "input" over the
  // projection's).
  OpOperand *first = nullptr;
  for (OpOperand &use : arg.getUses()) {
    if (isa<YieldOp>(use.getOwner()))
      continue;
    if (!first || use.getOwner()->isBeforeInBlock(first->getOwner()) ||
        (use.getOwner() == first->getOwner() &&
         use.getOperandNumber() < first->getOperandNumber()))
      first = &use;
  }
  if (!first)
    return std::string(contract::role::kUnused);
  return getUseRole(*first).str();
}

std::string mlir::fusion::getResultRole(KernelOp kernel, unsigned resultIndex) {
  namespace role = contract::role;
  Value yielded = kernel.getYield().getValues()[resultIndex];
  Operation *def = yielded.getDefiningOp();
  if (!def)
    return getOperandRole(kernel, cast<BlockArgument>(yielded).getArgNumber());
  unsigned number = cast<OpResult>(yielded).getResultNumber();
  return llvm::TypeSwitch<Operation *, StringRef>(def)
      .Case<RMSNormOp>([&](auto) {
        return number == 0 ? role::kNormed : role::kResidualOut;
      })
      .Case<LayerNormOp>([&](auto) { return role::kNormed; })
      .Case<QKVProjOp>([&](auto) {
        return number == 0   ? role::kQuery
               : number == 1 ? role::kKey
                             : role::kValue;
      })
      .Case<RopeOp>(
          [&](auto) { return number == 0 ? role::kQuery : role::kKey; })
      .Case<DecodeAttentionOp, LinearOp, LinearPartialsOp, SumPartialsOp,
            SiluMulOp, EmbeddingOp>([&](auto) { return role::kOutput; })
      .Case<ArgmaxOp>([&](auto) { return role::kTokens; })
      .Default([](Operation *) -> StringRef { return "result"; })
      .str();
}

SmallVector<KernelParam> mlir::fusion::getDefaultKernelParams(KernelOp kernel) {
  SmallVector<KernelParam> params;
  bool hasBlockTable = false;
  for (auto [index, operand] : llvm::enumerate(kernel.getInputs())) {
    auto shaped = cast<ShapedType>(operand.getType());
    KernelParam param;
    param.kind = KernelParam::Kind::Input;
    param.role = getOperandRole(kernel, index);
    param.elementType = shaped.getElementType();
    param.shape = getABIShape(shaped, getDynamicDimNames(shaped));
    hasBlockTable |= param.role == contract::role::kBlockTable;
    params.push_back(std::move(param));
  }
  for (auto [index, result] : llvm::enumerate(kernel.getResults())) {
    auto shaped = cast<ShapedType>(result.getType());
    KernelParam param;
    param.kind = KernelParam::Kind::Output;
    param.role = getResultRole(kernel, index);
    param.elementType = shaped.getElementType();
    param.shape = getABIShape(shaped, getDynamicDimNames(shaped));
    params.push_back(std::move(param));
  }
  Type i32 = IntegerType::get(kernel.getContext(), 32);
  params.push_back(
      {KernelParam::Kind::Scalar, std::string(contract::dim::kBatch), i32, {}});
  if (hasBlockTable)
    params.push_back({KernelParam::Kind::Scalar,
                      std::string(contract::dim::kMaxPages),
                      i32,
                      {}});
  return params;
}

int mlir::fusion::findParam(ArrayRef<KernelParam> params, StringRef role) {
  for (auto [index, param] : llvm::enumerate(params))
    if (param.role == role)
      return static_cast<int>(index);
  return -1;
}

void mlir::fusion::insertBeforeScalars(SmallVector<KernelParam> &params,
                                       ArrayRef<KernelParam> added) {
  auto firstScalar = llvm::find_if(params, [](const KernelParam &p) {
    return p.kind == KernelParam::Kind::Scalar;
  });
  params.insert(firstScalar, added.begin(), added.end());
}

void mlir::fusion::insertTensorMap(SmallVector<KernelParam> &params,
                                   int64_t index, StringRef role,
                                   int64_t boxRows, int64_t boxCols) {
  const KernelParam &target = params[index];
  KernelParam map{KernelParam::Kind::TensorMap, role.str(), target.elementType,
                  target.shape};
  map.tensorMap = contract::TensorMapSpec{index, boxRows, boxCols};
  insertBeforeScalars(params, {map});
}

Value KernelArgs::input(Value bodyValue) const {
  auto blockArg = dyn_cast_or_null<BlockArgument>(bodyValue);
  if (!blockArg || blockArg.getOwner() != &kernel.getBody().front())
    return nullptr;
  return func.getArgument(blockArg.getArgNumber());
}

Value KernelArgs::output(Value bodyValue) const {
  if (!bodyValue)
    return nullptr;
  for (auto [index, yielded] : llvm::enumerate(kernel.getYield().getValues()))
    if (yielded == bodyValue)
      return func.getArgument(kernel.getInputs().size() + index);
  return nullptr;
}

Value KernelArgs::param(StringRef role) const {
  int index = findParam(params, role);
  return index < 0 ? Value() : func.getArgument(index);
}

gpu::GPUFuncOp mlir::fusion::createKernelFunc(
    OpBuilder &builder, Location loc, gpu::GPUModuleOp module, StringRef name,
    ArrayRef<KernelParam> params, int64_t blockSize, const TargetInfo &target) {
  SmallVector<Type> argTypes;
  for (const KernelParam &param : params)
    argTypes.push_back(param.kind == KernelParam::Kind::Scalar
                           ? param.elementType
                           : Type(getFlatBufferType(param.elementType)));
  builder.setInsertionPointToEnd(module.getBody());
  auto func = gpu::GPUFuncOp::create(builder, loc, name,
                                     builder.getFunctionType(argTypes, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  func.setKnownBlockSizeAttr(
      builder.getDenseI32ArrayAttr({static_cast<int32_t>(blockSize), 1, 1}));
  Block &entry = func.getBody().front();
  builder.setInsertionPointToEnd(&entry);
  if (target.hasGridDependencyControl()) {
    // Programmatic dependent launch: the next kernel in the stream may be
    // scheduled once every CTA of this one has started, and this kernel's
    // reads wait until the previous kernel has finished and its writes are
    // visible. Without the launch attribute both are no-ops.
    NVVM::GriddepcontrolOp::create(builder, loc,
                                   NVVM::GridDepActionKind::launch_dependents);
    // The wait as inline PTX with a memory clobber, as CUDA's
    // cudaGridDependencySynchronize(): LLVM's nvvm.griddepcontrol.wait
    // intrinsic is IntrNoMem, so loads could move across it (a weight
    // preload below it, a load of the previous kernel's output above it).
    LLVM::InlineAsmOp::create(builder, loc, TypeRange(), ValueRange(),
                              kGridDependencyWaitAsm, "~{memory}",
                              /*has_side_effects=*/true,
                              /*is_align_stack=*/false,
                              LLVM::TailCallKind::None, LLVM::AsmDialectAttr(),
                              ArrayAttr());
  }
  auto ret = gpu::ReturnOp::create(builder, loc);
  builder.setInsertionPoint(ret);
  return func;
}

void mlir::fusion::emitBeforeGridDependencyWait(
    ImplicitLocOpBuilder &b,
    llvm::function_ref<void(ImplicitLocOpBuilder &)> body) {
  Operation *parent = b.getInsertionBlock()->getParentOp();
  auto func = isa<gpu::GPUFuncOp>(parent)
                  ? cast<gpu::GPUFuncOp>(parent)
                  : parent->getParentOfType<gpu::GPUFuncOp>();
  assert(func && "building a gpu.func");
  Block &entry = func.getBody().front();
  if (entry.empty() || !isa<NVVM::GriddepcontrolOp>(entry.front()))
    return; // no prologue
  // The wait, after what earlier calls placed before it.
  for (Operation &op : entry) {
    auto wait = dyn_cast<LLVM::InlineAsmOp>(op);
    if (!wait || wait.getAsmString() != kGridDependencyWaitAsm)
      continue;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(wait);
    body(b);
    return;
  }
}

Value mlir::fusion::addWorkgroupBuffer(gpu::GPUFuncOp func, Type elementType,
                                       int64_t count, int64_t alignment) {
  MLIRContext *context = func.getContext();
  auto space =
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
  auto type =
      MemRefType::get({count}, elementType, MemRefLayoutAttrInterface(), space);
  BlockArgument buffer = func.addWorkgroupAttribution(type, func.getLoc());
  // E.g. 16-byte alignment, so that vector<8xf16> accesses may be
  // ld.shared.v4 (the default would be the element's alignment).
  func.setWorkgroupAttributionAttr(
      func.getNumWorkgroupAttributions() - 1,
      LLVM::LLVMDialect::getAlignAttrName(),
      IntegerAttr::get(IntegerType::get(context, 64), alignment));
  return buffer;
}

/// The module's extern, zero-sized, 16-byte aligned `.shared` array (created
/// on first use): convert-gpu-to-nvvm reuses it for gpu.dynamic_shared_memory.
static constexpr StringLiteral kDynamicSharedSymbol = "__fusion_dynamic_shared";
static void declareDynamicShared(Location loc, gpu::GPUModuleOp module) {
  if (module.lookupSymbol(kDynamicSharedSymbol))
    return;
  MLIRContext *context = module.getContext();
  OpBuilder mb(context);
  mb.setInsertionPointToStart(module.getBody());
  auto arrayType = LLVM::LLVMArrayType::get(IntegerType::get(context, 8), 0);
  LLVM::GlobalOp::create(mb, loc, arrayType, /*isConstant=*/false,
                         LLVM::Linkage::External, kDynamicSharedSymbol,
                         Attribute(), /*alignment=*/16,
                         static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared));
}

Value mlir::fusion::getDynamicSharedBuffer(ImplicitLocOpBuilder &b,
                                           gpu::GPUModuleOp module,
                                           Type elementType, int64_t count) {
  MLIRContext *context = b.getContext();
  declareDynamicShared(b.getLoc(), module);
  auto space =
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
  Value bytes = gpu::DynamicSharedMemoryOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                         MemRefLayoutAttrInterface(), space));
  return memref::ViewOp::create(
      b,
      MemRefType::get({count}, elementType, MemRefLayoutAttrInterface(), space),
      bytes, constIndex(b, 0), ValueRange{});
}

Value mlir::fusion::getDynamicSharedPointer(ImplicitLocOpBuilder &b,
                                            gpu::GPUModuleOp module) {
  declareDynamicShared(b.getLoc(), module);
  return LLVM::AddressOfOp::create(
      b,
      LLVM::LLVMPointerType::get(
          b.getContext(), static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared)),
      kDynamicSharedSymbol);
}

/// Bytes of the workgroup attributions of the gpu.func `entry` of `module`.
static int64_t getStaticSharedBytes(gpu::GPUModuleOp module, StringRef entry) {
  int64_t bytes = 0;
  if (auto func = module.lookupSymbol<gpu::GPUFuncOp>(entry))
    for (BlockArgument buffer : func.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(buffer.getType());
      bytes += type.getNumElements() * getTypeBytes(type.getElementType());
    }
  return bytes;
}

/// Whether the gpu.func `entry` of `module` starts with createKernelFunc's
/// griddepcontrol prologue (then it may be launched with programmatic
/// dependent launch).
static bool hasGridDependencyPrologue(gpu::GPUModuleOp module,
                                      StringRef entry) {
  auto func = module.lookupSymbol<gpu::GPUFuncOp>(entry);
  return func && !func.getBody().empty() &&
         isa<NVVM::GriddepcontrolOp>(func.getBody().front().front());
}

/// Checks one entry of a launch: see verifyLaunchLimits.
static LogicalResult verifyEntryLimits(KernelOp kernel, StringRef entry,
                                       ArrayRef<std::string> grid,
                                       int64_t blockSize) {
  if (!isValidKernelName(entry))
    return kernel.emitOpError() << "entry name \"" << entry
                                << "\" is not a valid PTX entry name: expected "
                                << describeKernelNameRule();
  // A safety net: the emitters' schedules (getCheckedSchedule) already
  // reject threads outside [32, 1024], so this fires only for an emitter
  // whose block differs from its schedule's threads.
  if (blockSize < 1 || blockSize > contract::kMaxThreadsPerBlock)
    return kernel.emitOpError()
           << "entry " << entry << " needs blocks of " << blockSize
           << " threads; a CTA has 1 to " << contract::kMaxThreadsPerBlock;
  for (auto [axis, dim] : llvm::enumerate(grid)) {
    int64_t size;
    if (StringRef(dim).getAsInteger(10, size))
      continue;
    if (size < 1 || size > contract::kMaxGridDims[axis])
      return kernel.emitOpError()
             << "entry " << entry << " needs a grid of " << size << " CTAs in "
             << "xyz"[axis] << "; CUDA allows 1 to "
             << contract::kMaxGridDims[axis];
  }
  return success();
}

LogicalResult mlir::fusion::verifyLaunchLimits(KernelOp kernel,
                                               const KernelLaunch &launch) {
  if (failed(verifyEntryLimits(kernel, launch.entry, launch.grid,
                               launch.blockSize)))
    return failure();
  for (const KernelVariant &variant : launch.variants)
    if (failed(verifyEntryLimits(kernel, variant.entry, variant.grid,
                                 variant.blockSize)))
      return failure();
  return success();
}

/// Launch dims from the emitters' strings: decimal sizes become i64
/// IntegerAttrs, run-time names StringAttrs.
static ArrayAttr getLaunchDims(Builder &b, ArrayRef<std::string> dims) {
  return b.getArrayAttr(llvm::map_to_vector(dims, [&](const std::string &d) {
    int64_t value;
    if (!StringRef(d).getAsInteger(10, value))
      return Attribute(b.getI64IntegerAttr(value));
    return Attribute(b.getStringAttr(d));
  }));
}

FailureOr<LaunchAttr> mlir::fusion::getLaunchAttr(KernelOp kernel,
                                                  const KernelLaunch &launch,
                                                  gpu::GPUModuleOp module) {
  Builder b(module.getContext());
  auto emitError = [&] { return kernel.emitOpError("launch: "); };
  SmallVector<Attribute> params;
  for (const KernelParam &param : launch.params) {
    ArrayAttr shape = param.kind == KernelParam::Kind::Scalar
                          ? ArrayAttr()
                          : getLaunchDims(b, param.shape);
    const std::optional<contract::TensorMapSpec> &map = param.tensorMap;
    auto attr = KernelParamAttr::getChecked(
        emitError, b.getContext(), param.kind, StringRef(param.role),
        param.elementType, shape, param.zeroInitialized, map ? map->of : -1,
        map ? b.getDenseI64ArrayAttr({map->boxRows, map->boxCols})
            : DenseI64ArrayAttr());
    if (!attr)
      return failure();
    params.push_back(attr);
  }
  SmallVector<Attribute> variants;
  for (const KernelVariant &v : launch.variants) {
    auto attr = KernelVariantAttr::getChecked(
        emitError, b.getContext(), v.minBatch, StringRef(v.entry),
        getLaunchDims(b, v.grid), v.blockSize, v.dynamicSharedBytes,
        getStaticSharedBytes(module, v.entry), v.schedule);
    if (!attr)
      return failure();
    variants.push_back(attr);
  }
  auto attr = LaunchAttr::getChecked(
      emitError, b.getContext(), StringRef(launch.entry),
      getLaunchDims(b, launch.grid), launch.blockSize,
      launch.dynamicSharedBytes, getStaticSharedBytes(module, launch.entry),
      b.getArrayAttr(params),
      variants.empty() ? ArrayAttr() : b.getArrayAttr(variants),
      hasGridDependencyPrologue(module, launch.entry));
  if (!attr)
    return failure();
  return attr;
}
