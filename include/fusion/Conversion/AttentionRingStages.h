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
/// The accepted values (verifyAttentionRingStages): multiples of the ring's
/// 4 consumer warps (each slot's phases belong to one warp, which waits on
/// them in order; Kernels/AttentionMma.h), up to the most that fit one CTA's
/// 227 KiB at head_dim 128 (24 x 8192 + 1024 bytes; 28 do not).
inline constexpr int64_t kAttentionRingStagesMultiple = 4;
inline constexpr int64_t kMaxAttentionRingStages = 24;

} // namespace mlir::fusion

#endif // FUSION_CONVERSION_ATTENTIONRINGSTAGES_H
