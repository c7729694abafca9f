//===- EmitterUtils.cpp - shared pieces of the fusion.kernel emitters -----===//

#include "EmitterUtils.h"

#include "fusion/runtime/RopeFrequencies.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fusion;

//===----------------------------------------------------------------------===//
// ABI
//===----------------------------------------------------------------------===//

int64_t mlir::fusion::getSMCount(gpu::GPUModuleOp module) {
  if (auto attr = module->getAttrOfType<IntegerAttr>(kSMCountAttrName))
    return attr.getInt();
  return 132;
}

/// The module's target compute capability x 10 (90 if unrecorded).
static int64_t getTargetSM(gpu::GPUModuleOp module) {
  auto attr = module->getAttrOfType<IntegerAttr>(kTargetSMAttrName);
  return attr ? attr.getInt() : 90;
}

bool mlir::fusion::hasTensorCores(gpu::GPUModuleOp module) {
  return getTargetSM(module) >= 80;
}

int64_t mlir::fusion::getMaxSharedBytesPerCTA(gpu::GPUModuleOp module) {
  return contract::maxSharedBytesPerBlock(getTargetSM(module));
}

bool mlir::fusion::hasGridDependencyControl(gpu::GPUModuleOp module) {
  return getTargetSM(module) >= 90;
}

MemRefType mlir::fusion::getFlatBufferType(Type elementType) {
  return MemRefType::get({kFlatBufferExtent}, elementType);
}

std::string mlir::fusion::getDTypeName(Type type) {
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isF32())
    return "f32";
  if (type.isF64())
    return "f64";
  if (auto intType = dyn_cast<IntegerType>(type))
    return (Twine(intType.isUnsigned() ? "u" : "i") + Twine(intType.getWidth()))
        .str();
  std::string str;
  llvm::raw_string_ostream os(str);
  type.print(os);
  return str;
}

int64_t mlir::fusion::getTypeBytes(Type type) {
  return (type.getIntOrFloatBitWidth() + 7) / 8;
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
      .Case<DecodeAttentionOp>([&](auto) { return role::kOutput; })
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

gpu::GPUFuncOp mlir::fusion::createKernelFunc(OpBuilder &builder, Location loc,
                                              gpu::GPUModuleOp module,
                                              StringRef name,
                                              ArrayRef<KernelParam> params,
                                              int64_t blockSize) {
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
  if (hasGridDependencyControl(module)) {
    // Programmatic dependent launch: the next kernel in the stream may be
    // scheduled once every CTA of this one has started, and this kernel's
    // reads wait until the previous kernel has finished and its writes are
    // visible. Without the launch attribute both are no-ops.
    NVVM::GriddepcontrolOp::create(builder, loc,
                                   NVVM::GridDepActionKind::launch_dependents);
    NVVM::GriddepcontrolOp::create(builder, loc, NVVM::GridDepActionKind::wait);
  }
  auto ret = gpu::ReturnOp::create(builder, loc);
  builder.setInsertionPoint(ret);
  return func;
}

Value mlir::fusion::addWorkgroupBuffer(gpu::GPUFuncOp func, Type elementType,
                                       int64_t count) {
  MLIRContext *context = func.getContext();
  auto space =
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
  auto type =
      MemRefType::get({count}, elementType, MemRefLayoutAttrInterface(), space);
  BlockArgument buffer = func.addWorkgroupAttribution(type, func.getLoc());
  // 16-byte alignment, so that vector<8xf16> accesses may be ld.shared.v4
  // (the default would be the element's alignment).
  func.setWorkgroupAttributionAttr(
      func.getNumWorkgroupAttributions() - 1,
      LLVM::LLVMDialect::getAlignAttrName(),
      IntegerAttr::get(IntegerType::get(context, 64), 16));
  return buffer;
}

Value mlir::fusion::getDynamicSharedBuffer(ImplicitLocOpBuilder &b,
                                           gpu::GPUModuleOp module,
                                           Type elementType, int64_t count) {
  MLIRContext *context = b.getContext();
  constexpr StringLiteral kSymbol = "__fusion_dynamic_shared";
  if (!module.lookupSymbol(kSymbol)) {
    // convert-gpu-to-nvvm reuses a zero-sized workgroup array global of the
    // module for gpu.dynamic_shared_memory.
    OpBuilder mb(context);
    mb.setInsertionPointToStart(module.getBody());
    auto arrayType = LLVM::LLVMArrayType::get(IntegerType::get(context, 8), 0);
    LLVM::GlobalOp::create(
        mb, b.getLoc(), arrayType, /*isConstant=*/false,
        LLVM::Linkage::External, kSymbol, Attribute(), /*alignment=*/16,
        static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared));
  }
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

/// Checks one entry of a launch: see verifyLaunchLimits.
static LogicalResult verifyEntryLimits(KernelOp kernel, StringRef entry,
                                       ArrayRef<std::string> grid,
                                       int64_t blockSize) {
  if (!isValidKernelName(entry))
    return kernel.emitOpError() << "entry name \"" << entry
                                << "\" is not a valid PTX entry name: expected "
                                << describeKernelNameRule();
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

LaunchAttr mlir::fusion::getLaunchAttr(const KernelLaunch &launch,
                                       gpu::GPUModuleOp module) {
  Builder b(module.getContext());
  SmallVector<Attribute> params;
  for (const KernelParam &param : launch.params) {
    ArrayAttr shape = param.kind == KernelParam::Kind::Scalar
                          ? ArrayAttr()
                          : getLaunchDims(b, param.shape);
    params.push_back(KernelParamAttr::get(b.getContext(), param.kind,
                                          param.role, param.elementType, shape,
                                          param.zeroInitialized));
  }
  SmallVector<Attribute> variants;
  for (const KernelVariant &v : launch.variants)
    variants.push_back(KernelVariantAttr::get(
        b.getContext(), v.minBatch, v.entry, getLaunchDims(b, v.grid),
        v.blockSize, v.dynamicSharedBytes,
        getStaticSharedBytes(module, v.entry),
        v.schedule ? v.schedule : b.getDictionaryAttr({})));
  return LaunchAttr::get(
      b.getContext(), launch.entry, getLaunchDims(b, launch.grid),
      launch.blockSize, launch.dynamicSharedBytes,
      getStaticSharedBytes(module, launch.entry), b.getArrayAttr(params),
      variants.empty() ? ArrayAttr() : b.getArrayAttr(variants),
      hasGridDependencyControl(module));
}

//===----------------------------------------------------------------------===//
// Scalars and index math
//===----------------------------------------------------------------------===//

Value mlir::fusion::constIndex(ImplicitLocOpBuilder &b, int64_t value) {
  return arith::ConstantIndexOp::create(b, value);
}
Value mlir::fusion::constI32(ImplicitLocOpBuilder &b, int32_t value) {
  return arith::ConstantIntOp::create(b, value, 32);
}
Value mlir::fusion::constF32(ImplicitLocOpBuilder &b, double value) {
  return arith::ConstantFloatOp::create(
      b, b.getF32Type(), llvm::APFloat(static_cast<float>(value)));
}
Value mlir::fusion::constF64(ImplicitLocOpBuilder &b, double value) {
  return arith::ConstantFloatOp::create(b, b.getF64Type(),
                                        llvm::APFloat(value));
}
Value mlir::fusion::i32ToIndex(ImplicitLocOpBuilder &b, Value value) {
  return arith::IndexCastOp::create(b, b.getIndexType(), value);
}
Value mlir::fusion::indexToI32(ImplicitLocOpBuilder &b, Value value) {
  return arith::IndexCastOp::create(b, b.getI32Type(), value);
}
Value mlir::fusion::addIndex(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::AddIOp::create(b, lhs, rhs);
}
Value mlir::fusion::mulIndex(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return arith::MulIOp::create(b, lhs, rhs);
}
Value mlir::fusion::addIndex(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs) {
  if (rhs == 0)
    return lhs;
  return addIndex(b, lhs, constIndex(b, rhs));
}
Value mlir::fusion::mulIndex(ImplicitLocOpBuilder &b, Value lhs, int64_t rhs) {
  if (rhs == 1)
    return lhs;
  return mulIndex(b, lhs, constIndex(b, rhs));
}

Value mlir::fusion::cmpI(ImplicitLocOpBuilder &b, arith::CmpIPredicate pred,
                         Value lhs, Value rhs) {
  return arith::CmpIOp::create(b, pred, lhs, rhs);
}

Value mlir::fusion::threadIdX(ImplicitLocOpBuilder &b) {
  return gpu::ThreadIdOp::create(b, gpu::Dimension::x);
}
Value mlir::fusion::blockIdX(ImplicitLocOpBuilder &b) {
  return gpu::BlockIdOp::create(b, gpu::Dimension::x);
}
Value mlir::fusion::blockIdY(ImplicitLocOpBuilder &b) {
  return gpu::BlockIdOp::create(b, gpu::Dimension::y);
}
Value mlir::fusion::gridDimX(ImplicitLocOpBuilder &b) {
  return gpu::GridDimOp::create(b, gpu::Dimension::x);
}
Value mlir::fusion::laneId(ImplicitLocOpBuilder &b) {
  return arith::RemUIOp::create(b, threadIdX(b), constIndex(b, 32));
}
Value mlir::fusion::warpId(ImplicitLocOpBuilder &b) {
  return arith::DivUIOp::create(b, threadIdX(b), constIndex(b, 32));
}

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

static Type withElementType(Type type, Type element) {
  if (auto vec = dyn_cast<VectorType>(type))
    return vec.clone(element);
  return element;
}

Value mlir::fusion::extToF32(ImplicitLocOpBuilder &b, Value value) {
  Type element = getElementTypeOrSelf(value.getType());
  if (element.isF32())
    return value;
  return arith::ExtFOp::create(
      b, withElementType(value.getType(), b.getF32Type()), value);
}

Value mlir::fusion::truncFromF32(ImplicitLocOpBuilder &b, Value value,
                                 Type elementType) {
  if (elementType.isF32())
    return value;
  return arith::TruncFOp::create(
      b, withElementType(value.getType(), elementType), value);
}

Value mlir::fusion::sqrtF32(ImplicitLocOpBuilder &b, Value value) {
  // convert-gpu-to-nvvm marks llvm.intr.sqrt illegal (it would become
  // __nv_sqrtf); the NVVM intrinsic is sqrt.rn.f32 with no libdevice.
  return LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                       b.getStringAttr("llvm.nvvm.sqrt.rn.f"),
                                       ValueRange{value})
      ->getResult(0);
}

Value mlir::fusion::rsqrtF32(ImplicitLocOpBuilder &b, Value value) {
  return arith::DivFOp::create(b, constF32(b, 1.0), sqrtF32(b, value));
}

Value mlir::fusion::fma(ImplicitLocOpBuilder &b, Value x, Value y, Value z) {
  return LLVM::FMAOp::create(b, x, y, z);
}

Value mlir::fusion::maxF32(ImplicitLocOpBuilder &b, Value lhs, Value rhs) {
  return LLVM::MaxNumOp::create(b, lhs, rhs);
}

std::pair<Value, Value> mlir::fusion::sinCosF32(ImplicitLocOpBuilder &b,
                                                Value angle) {
  // Quadrant reduction in f64: k = round(a * 2/pi), r = a - k*pi/2 with
  // pi/2 split in two doubles; |r| <= pi/4 (+ tiny), exact to ~1e-16*|k|.
  Type f32 = b.getF32Type(), f64 = b.getF64Type(), i64 = b.getI64Type();
  Value a = arith::ExtFOp::create(b, f64, angle);
  Value t = arith::MulFOp::create(b, a, constF64(b, 2.0 / M_PI));
  Value nonNegative =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, t, constF64(b, 0.0));
  Value half = arith::SelectOp::create(b, nonNegative, constF64(b, 0.5),
                                       constF64(b, -0.5));
  Value k = arith::FPToSIOp::create(b, i64, arith::AddFOp::create(b, t, half));
  Value kf = arith::SIToFPOp::create(b, f64, k);
  Value negK = arith::NegFOp::create(b, kf);
  constexpr double kPio2Hi = 1.5707963267948966;    // fl(pi/2)
  constexpr double kPio2Lo = 6.123233995736766e-17; // pi/2 - kPio2Hi
  Value r = fma(b, negK, constF64(b, kPio2Hi), a);
  r = fma(b, negK, constF64(b, kPio2Lo), r);
  Value x = arith::TruncFOp::create(b, f32, r);

  // Cephes sinf / cosf minimax polynomials on [-pi/4, pi/4].
  Value z = arith::MulFOp::create(b, x, x);
  Value ps =
      fma(b, z, constF32(b, -1.9515295891e-4), constF32(b, 8.3321608736e-3));
  ps = fma(b, z, ps, constF32(b, -1.6666654611e-1));
  Value sinR = fma(b, arith::MulFOp::create(b, z, x), ps, x);
  Value pc = fma(b, z, constF32(b, 2.443315711809948e-5),
                 constF32(b, -1.388731625493765e-3));
  pc = fma(b, z, pc, constF32(b, 4.166664568298827e-2));
  Value cosR = fma(b, arith::MulFOp::create(b, z, z), pc,
                   fma(b, z, constF32(b, -0.5), constF32(b, 1.0)));

  // Quadrant q = k mod 4: sin = [s, c, -s, -c][q], cos = [c, -s, -c, s][q].
  Value q = arith::AndIOp::create(b, k, arith::ConstantIntOp::create(b, 3, 64));
  auto bit = [&](Value v, int64_t mask) {
    Value m =
        arith::AndIOp::create(b, v, arith::ConstantIntOp::create(b, mask, 64));
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ne, m,
                                 arith::ConstantIntOp::create(b, 0, 64));
  };
  Value swap = bit(q, 1);
  Value sinV = arith::SelectOp::create(b, swap, cosR, sinR);
  Value cosV = arith::SelectOp::create(b, swap, sinR, cosR);
  Value sinNeg = bit(q, 2);
  Value cosNeg = bit(
      arith::AddIOp::create(b, q, arith::ConstantIntOp::create(b, 1, 64)), 2);
  sinV =
      arith::SelectOp::create(b, sinNeg, arith::NegFOp::create(b, sinV), sinV);
  cosV =
      arith::SelectOp::create(b, cosNeg, arith::NegFOp::create(b, cosV), cosV);
  return {sinV, cosV};
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

/// The rotary_dim/2 inverse frequencies, computed exactly as the CPU
/// reference does in fp32: both call fusion/runtime/RopeFrequencies.h.
SmallVector<float> mlir::fusion::computeRopeInvFreq(RopeOp rope,
                                                    int64_t rotaryDim) {
  std::optional<::fusion::runtime::Llama3RopeScaling> llama3;
  if (auto s = rope.getScalingAttr())
    llama3 = ::fusion::runtime::Llama3RopeScaling{
        s.getFactor().convertToDouble(), s.getLowFreqFactor().convertToDouble(),
        s.getHighFreqFactor().convertToDouble(), s.getOriginalMaxPosition()};
  std::vector<float> table = ::fusion::runtime::ropeInvFreqF32(
      rope.getTheta().convertToDouble(), rotaryDim, llama3);
  return SmallVector<float>(table.begin(), table.end());
}

/// Declares `memref.global "private" constant @<name> : memref<Nxf32>` in
/// the gpu.module and returns a `memref.get_global` of it.
Value mlir::fusion::getRopeInvFreqTable(ImplicitLocOpBuilder &b,
                                        gpu::GPUModuleOp module, RopeOp rope,
                                        StringRef name) {
  SmallVector<float> values =
      computeRopeInvFreq(rope, rope.getEffectiveRotaryDim());
  auto type =
      MemRefType::get({static_cast<int64_t>(values.size())}, b.getF32Type());
  if (!module.lookupSymbol(name)) {
    OpBuilder mb(module.getContext());
    mb.setInsertionPointToStart(module.getBody());
    auto tensorType = RankedTensorType::get(type.getShape(), b.getF32Type());
    memref::GlobalOp::create(
        mb, b.getLoc(), name, mb.getStringAttr("private"), type,
        DenseElementsAttr::get(tensorType, ArrayRef<float>(values)),
        /*constant=*/true,
        /*alignment=*/IntegerAttr());
  }
  return memref::GetGlobalOp::create(b, type, name);
}

std::pair<Value, Value>
mlir::fusion::emitRopeRotation(ImplicitLocOpBuilder &b, Value a, Value c,
                               Value position, Value invFreq, Value freqIndex,
                               Type elementType) {
  Value angle = arith::MulFOp::create(
      b, arith::SIToFPOp::create(b, b.getF32Type(), position),
      loadScalar(b, invFreq, freqIndex));
  auto [sinV, cosV] = sinCosF32(b, angle);
  Value a32 = extToF32(b, a), c32 = extToF32(b, c);
  Value rotA = arith::SubFOp::create(b, arith::MulFOp::create(b, a32, cosV),
                                     arith::MulFOp::create(b, c32, sinV));
  Value rotC = arith::AddFOp::create(b, arith::MulFOp::create(b, c32, cosV),
                                     arith::MulFOp::create(b, a32, sinV));
  return {truncFromF32(b, rotA, elementType),
          truncFromF32(b, rotC, elementType)};
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

Value mlir::fusion::loadVector(ImplicitLocOpBuilder &b, Value buffer,
                               Value index, int64_t width) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  auto type = VectorType::get({width}, element);
  auto load = vector::LoadOp::create(b, type, buffer, ValueRange{index});
  load.setAlignment(width * getTypeBytes(element));
  return load;
}

void mlir::fusion::storeVector(ImplicitLocOpBuilder &b, Value value,
                               Value buffer, Value index) {
  auto type = cast<VectorType>(value.getType());
  auto store = vector::StoreOp::create(b, value, buffer, ValueRange{index});
  store.setAlignment(type.getNumElements() *
                     getTypeBytes(type.getElementType()));
}

SmallVector<Value, 4> mlir::fusion::mmaM16N8K16(ImplicitLocOpBuilder &b,
                                                Type elementType,
                                                ArrayRef<Value> a,
                                                ArrayRef<Value> bFrag,
                                                ArrayRef<Value> c) {
  assert(a.size() == 4 && bFrag.size() == 2 && c.size() == 4);
  Type f32 = b.getF32Type();
  auto resultType =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes multiplicand =
      elementType.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  // The bf16 form takes its registers as i32.
  auto operand = [&](Value v) -> Value {
    if (!elementType.isBF16())
      return v;
    return vector::ExtractOp::create(
        b,
        vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), v),
        0);
  };
  SmallVector<Value> aOps = llvm::map_to_vector(a, operand);
  SmallVector<Value> bOps = llvm::map_to_vector(bFrag, operand);
  auto mma = NVVM::MmaOp::create(
      b, resultType, aOps, bOps, c, /*shape=*/{16, 8, 16},
      /*b1Op=*/std::nullopt, /*intOverflow=*/std::nullopt,
      std::array<NVVM::MMATypes, 2>{multiplicand, multiplicand},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value, 4> d;
  for (int64_t i = 0; i < 4; ++i)
    d.push_back(LLVM::ExtractValueOp::create(b, mma, i));
  return d;
}

Value mlir::fusion::loadScalar(ImplicitLocOpBuilder &b, Value buffer,
                               Value index) {
  return memref::LoadOp::create(b, buffer, ValueRange{index});
}

void mlir::fusion::storeScalar(ImplicitLocOpBuilder &b, Value value,
                               Value buffer, Value index) {
  memref::StoreOp::create(b, value, buffer, ValueRange{index});
}

void mlir::fusion::barrier(ImplicitLocOpBuilder &b) {
  gpu::BarrierOp::create(b);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static Value combine(ImplicitLocOpBuilder &b, Value lhs, Value rhs,
                     ReduceKind kind) {
  if (kind == ReduceKind::Sum)
    return arith::AddFOp::create(b, lhs, rhs);
  return arith::MaxNumFOp::create(b, lhs, rhs);
}

Value mlir::fusion::warpReduce(ImplicitLocOpBuilder &b, Value value,
                               ReduceKind kind) {
  for (int32_t offset = 16; offset >= 1; offset /= 2) {
    auto shuffle =
        gpu::ShuffleOp::create(b, value, offset, 32, gpu::ShuffleMode::XOR);
    value = combine(b, value, shuffle.getShuffleResult(), kind);
  }
  return value;
}

Value mlir::fusion::blockReduce(ImplicitLocOpBuilder &b, Value value,
                                ReduceKind kind, Value scratch,
                                int64_t blockSize) {
  int64_t numWarps = blockSize / 32;
  value = warpReduce(b, value, kind);
  if (numWarps == 1)
    return value;
  Value lane = laneId(b);
  Value warp = warpId(b);
  Value isLane0 = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                                        constIndex(b, 0));
  ifThen(b, isLane0, [&](ImplicitLocOpBuilder &t) {
    storeScalar(t, value, scratch, warp);
  });
  barrier(b);
  Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, lane,
                                        constIndex(b, numWarps));
  Value slot = arith::SelectOp::create(b, inRange, lane, constIndex(b, 0));
  Value partial = loadScalar(b, scratch, slot);
  Value identity = constF32(b, kind == ReduceKind::Sum
                                   ? 0.0
                                   : -std::numeric_limits<double>::infinity());
  partial = arith::SelectOp::create(b, inRange, partial, identity);
  Value result = warpReduce(b, partial, kind);
  barrier(b);
  return result;
}

void mlir::fusion::ifThen(
    ImplicitLocOpBuilder &b, Value cond,
    llvm::function_ref<void(ImplicitLocOpBuilder &)> thenBuilder) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  ImplicitLocOpBuilder inner(b.getLoc(), b.getContext());
  inner.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  thenBuilder(inner);
}

void mlir::fusion::forLoop(
    ImplicitLocOpBuilder &b, Value lb, Value ub, Value step,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
  auto loop = scf::ForOp::create(b, lb, ub, step);
  ImplicitLocOpBuilder inner(b.getLoc(), b.getContext());
  inner.setInsertionPoint(loop.getBody()->getTerminator());
  body(inner, loop.getInductionVar());
}
