//===- AttentionRingStages.h - the attention ring's stage count -*- C++ -*-===//
//
// The stages of the tensor-core attention's CTA-wide ring (the
// attention-ring-stages option of convert-fusion-to-gpu, fusion-to-ptx and
// fusion-compile; Kernels/AttentionMma.h), kept free of MLIR so that the
// schedule's unit tests can use it.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_CONVERSION_ATTENTIONRINGSTAGES_H
#define FUSION_CONVERSION_ATTENTIONRINGSTAGES_H

#include <cstdint>

namespace mlir::fusion {

/// The default: bench/diagnostics/decode_attention_ring.cu's `tma S16 W4`
/// (docs/performance.md entry 50; 1 CTA per SM at head_dim 128).
inline constexpr int64_t kDefaultAttentionRingStages = 16;
/// The accepted range (verifyAttentionRingStages).
inline constexpr int64_t kMinAttentionRingStages = 2;
inline constexpr int64_t kMaxAttentionRingStages = 32;

} // namespace mlir::fusion

#endif // FUSION_CONVERSION_ATTENTIONRINGSTAGES_H
