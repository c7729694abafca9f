//===- Cluster.cpp - thread-block clusters (sm_90+) -----------------------===//

#include "Cluster.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <string>

using namespace mlir;
using namespace mlir::fusion;

Value mlir::fusion::getClusterCtas(ImplicitLocOpBuilder &b) {
  return NVVM::ClusterDim::create(b, b.getI32Type());
}

Value mlir::fusion::getClustersX(ImplicitLocOpBuilder &b) {
  return NVVM::ClusterDimXOp::create(b, b.getI32Type());
}

void mlir::fusion::arriveCluster(ImplicitLocOpBuilder &b, bool relaxed) {
  if (relaxed)
    NVVM::ClusterArriveRelaxedOp::create(b, UnitAttr());
  else
    NVVM::ClusterArriveOp::create(b, UnitAttr());
}

void mlir::fusion::waitCluster(ImplicitLocOpBuilder &b) {
  NVVM::ClusterWaitOp::create(b, UnitAttr());
}

Value mlir::fusion::mapSharedToCta(ImplicitLocOpBuilder &b, Value shared,
                                   Value rank) {
  auto type = LLVM::LLVMPointerType::get(
      b.getContext(),
      static_cast<unsigned>(NVVM::NVVMMemorySpace::SharedCluster));
  return NVVM::MapaOp::create(b, type, shared, rank);
}

void mlir::fusion::storeToCluster(ImplicitLocOpBuilder &b, Value value,
                                  Value pointer, int64_t alignment) {
  LLVM::StoreOp::create(b, value, pointer, static_cast<unsigned>(alignment));
}

Value mlir::fusion::loadFromCluster(ImplicitLocOpBuilder &b, Value shared,
                                    int32_t rank) {
  Value address = LLVM::PtrToIntOp::create(b, b.getI32Type(), shared);
  std::string ptx = "{\n\t.reg .b32 a;\n\tmapa.shared::cluster.u32 a, $1, " +
                    std::to_string(rank) +
                    ";\n\tld.shared::cluster.f32 $0, [a];\n\t}";
  auto load = LLVM::InlineAsmOp::create(
      b, b.getF32Type(), ValueRange{address}, ptx, "=f,r,~{memory}",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
  return load.getResult(0);
}
