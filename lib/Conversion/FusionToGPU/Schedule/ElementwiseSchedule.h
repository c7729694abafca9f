//===- ElementwiseSchedule.h - single-op kernel schedules -------*- C++ -*-===//
//
// The block sizes of the norm and head kernels (Kernels/NormKernel.cpp,
// Kernels/HeadKernel.cpp) and the row schedules of the embedding, argmax and
// silu_mul kernels (Kernels/EmbeddingKernel.cpp, ArgmaxKernel.cpp,
// SiluMulKernel.cpp): pure functions of the shape.
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

/// Vector loads of the argmax kernel each thread issues before it scans
/// them (loads in flight per thread).
inline constexpr int64_t kArgmaxUnroll = 4;

/// The widest vector (1, 2, 4 or 8 elements, at most 16 bytes of f16/bf16)
/// that divides a row of `rowElements`, so that every row starts on a whole
/// vector and no vector crosses a row.
inline int64_t chooseRowVectorWidth(int64_t rowElements) {
  int64_t width = 8;
  while (rowElements % width != 0)
    width /= 2;
  return width;
}

/// The CTAs of one token row of a copy-like row kernel (embedding,
/// silu_mul).
struct RowChunks {
  /// Threads per CTA, one vector each.
  int64_t threads;
  /// CTAs per row (the grid's y dimension).
  int64_t chunks;
};

/// The RowChunks of rows of `vectors` vectors: up to 256 threads (whole
/// warps), as many CTAs per row as that takes.
inline RowChunks chooseRowChunks(int64_t vectors) {
  int64_t threads =
      std::min<int64_t>(256, std::max<int64_t>(32, llvm::alignTo(vectors, 32)));
  return {threads, llvm::divideCeilSigned(vectors, threads)};
}

/// Threads of the argmax kernel (one CTA per row) for rows of `vectors`
/// vectors: kArgmaxUnroll vectors per thread and loop step, whole warps,
/// between 32 and 1024 (the most loads in flight one SM can have at batch
/// 1, where a single CTA reads the whole row).
inline int64_t chooseArgmaxBlockSize(int64_t vectors) {
  int64_t perStep = llvm::divideCeilSigned(vectors, kArgmaxUnroll);
  return std::min<int64_t>(1024,
                           std::max<int64_t>(32, llvm::alignTo(perStep, 32)));
}

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_SCHEDULE_ELEMENTWISESCHEDULE_H
