//===- AttentionMma.h - tensor-core main loop of decode attention -*- C++
//-*-===//
//
// The main loop of the attention kernel's tensor-core variant
// (AttentionKernel.cpp emits it as `<entry>_mma` for batches from
// kAttentionMmaMinBatch): the FlashAttention-2 decode structure measured in
// bench/diagnostics/decode_attention.cu (docs/performance.md entry 16).
//
// Each warp of the CTA takes every `warps`-th 16-token tile of the CTA's
// split [start, end) (a tile lies in one page: P % 16 == 0 and tiles start
// at multiples of 16) and streams its K and V rows through its own
// `stages`-deep ring in dynamic shared memory with 16-byte `cp.async`
// (rows padded by 16 bytes, so the 8 rows an ldmatrix reads hit 8 bank
// groups; each tile's block-table entry loaded one iteration before its
// copies are issued, so that they never wait for it); tokens at or past
// `end` are zero-filled, never read. Per tile:
//   S = Q K^T   mma.m16n8k16, A = the CTA's Gc query heads as rows 0..Gc-1
//               (rows Gc..15 zero), B = K rows via ldmatrix;
//   p = 2^(S * scale * log2(e) - m)  online softmax per head in fp32, tokens
//               at or past `end` masked to -inf;
//   O += P V    A = p rounded to the element type (the S accumulators in
//               the A layout), B = V rows via ldmatrix.trans.
// The warp's (m, l, O) per head then go to the CTA's merge buffer in the
// layout the CUDA-core loop writes (AttentionKernel::writeWarpState), so
// the merge, split partials and combine are shared.
//
// With the CTA-wide ring (SplitKvAttentionMmaSchedule's cta_ring, opt-in;
// bench/diagnostics/decode_attention_ring.cu's `tma S16 W4`,
// docs/performance.md entries 47, 50 and 51) the warps share one ring of
// `stages` tiles instead: lane 0 of warp `warps` (the producer) issues each
// tile of the split as TMA boxes of 16 token slots x 64 columns of the
// caches' tensor maps (key_cache_map, value_cache_map: the cache viewed as
// [num_pages * P, Hkv * D], 128-byte swizzle), counted on the slot's `full`
// mbarrier; consumer warp w takes the split's tiles w, w + warps, ...
// (stages % warps == 0: each slot has one consumer, so a parity wait never
// aliases an older phase), waits `full`, attends with the V fragments of
// tokens past `end` zeroed (the boxes copy whole tiles, stale or NaN slots
// included), and releases the slot on its `empty` mbarrier. No block-table
// load waits in a consumer; the producer's lanes hold the entries.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_ATTENTIONMMA_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_ATTENTIONMMA_H

#include "../KernelBuilder.h"
#include "../Schedule/AttentionSchedule.h"

namespace mlir::fusion {

/// What the tensor-core loop reads and where it leaves its state.
struct MmaAttentionInputs {
  AttentionShape shape;
  /// f16 or bf16; `scale` is the op's softmax scale.
  Type elementType;
  double scale = 0.0;
  /// Query heads per CTA (Gc <= 8), the warps that attend (consumers) and
  /// ring stages per warp, or with `ctaRing` per CTA (then one more warp,
  /// the producer, fills them).
  int64_t headsPerCta = 0, warps = 0, stages = 0;
  bool ctaRing = false;
  /// The kernel (the CTA ring's mbarriers are its workgroup buffers).
  gpu::GPUFuncOp func;
  /// Kernel arguments: q [B, Hq, D], the caches [pages, P, Hkv, D], the
  /// block table [B, max_pages] (i32) and max_pages (i32); with `ctaRing`
  /// the caches' tensor maps (else null).
  Value query, keyCache, valueCache, blockTable, maxPages;
  Value keyCacheMap, valueCacheMap;
  /// This CTA's sequence, KV head, first query head and thread (index), and
  /// its split's tokens [start, end) (i32).
  Value seq, kvHead, head0, tid, start, end;
  /// The merge buffer (f32, workgroup): [warps][Gc][D] accumulators, then
  /// [warps][Gc] maxima at `maxBase`, then [warps][Gc] sums at `sumBase`.
  Value merge;
  int64_t maxBase = 0, sumBase = 0;
};

/// The max an online softmax subtracts: `m`, or 0 when m = -inf (nothing
/// seen yet), so that 2^(-inf - safe) = 0 and never 2^(-inf + inf) = NaN.
/// Both attention loops and the split combine use it.
Value safeMax(ImplicitLocOpBuilder &b, Value m);

/// Emits the loop of every warp and its state written to `in.merge`,
/// followed by a CTA barrier. The ring takes the dynamic shared memory
/// chooseAttentionMmaSchedule sized (declared in `module`).
void emitMmaAttentionWarps(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module,
                           const MmaAttentionInputs &in);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_ATTENTIONMMA_H
