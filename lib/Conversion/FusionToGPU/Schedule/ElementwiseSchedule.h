//===- ElementwiseSchedule.h - single-op kernel schedules -------*- C++ -*-===//
//
// The block sizes of the norm and head kernels (Kernels/NormKernel.cpp,
// Kernels/HeadKernel.cpp): pure functions of the shape.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ELEMENTWISESCHEDULE_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ELEMENTWISESCHEDULE_H

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cstdint>

namespace mlir::fusion {

/// Threads of the norm kernel (one CTA per token) for rows of `hidden`
/// elements: one 8-element vector per thread, rounded up to whole warps,
/// between 32 and 256.
inline int64_t chooseNormBlockSize(int64_t hidden) {
  return std::min<int64_t>(
      256, std::max<int64_t>(32, llvm::alignTo(hidden / 8, 32)));
}

/// Threads of the head kernel (one CTA per head slot and token) for heads
/// of `headDim` elements: one element pair per thread, whole warps.
inline int64_t chooseHeadBlockSize(int64_t headDim) {
  return std::max<int64_t>(32, llvm::alignTo(headDim / 2, 32));
}

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ELEMENTWISESCHEDULE_H
