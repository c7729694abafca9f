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

#endif // FUSION_DIALECT_FUSION_IR_FUSIONDIALECT_H
