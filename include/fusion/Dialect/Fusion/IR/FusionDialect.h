//===- FusionDialect.h - fusion dialect ---------------------------*- C++
//-*-===//
//
// The `fusion` dialect: LLM decode operators and fused-kernel regions.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_DIALECT_FUSION_IR_FUSIONDIALECT_H
#define FUSION_DIALECT_FUSION_IR_FUSIONDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "fusion/Dialect/Fusion/IR/FusionOpsDialect.h.inc"

namespace mlir::fusion {
/// Whether `value` is a positive, finite, normal float32: what a
/// floating-point attribute the kernels use in fp32 (epsilon, theta, scale,
/// the llama3 scaling factors) must be, so that it neither overflows to
/// infinity nor flushes to zero there.
bool isPositiveNormalF32(double value);
} // namespace mlir::fusion

#endif // FUSION_DIALECT_FUSION_IR_FUSIONDIALECT_H
