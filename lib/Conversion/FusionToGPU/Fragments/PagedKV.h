//===- PagedKV.h - paged KV-cache addressing --------------------*- C++ -*-===//
//
// The paged KV cache (FusionOps.td, docs/abi.md; runtime KVCacheLayout.h):
// a cache is [num_pages, P, Hkv, D] elements, token t of sequence b lives in
// page block_table[b, t / P], slot t % P, and its entry for KV head h starts
// at element ((page * P + t % P) * Hkv + h) * D. Offsets are 64-bit.
//
// Two address computations, the same formula in two precisions:
//  * appending (getAppendCacheSlot, the projection and head kernels): one
//    position per token, straight from the host's positions (i32, not
//    checked), so in 64-bit `index` arithmetic with signed division;
//  * reading (PagedKVReader, attention's inner loop): token indices already
//    clamped to [0, len), so the page and slot come from unsigned 32-bit
//    division (cheaper than 64-bit in the loop) and the in-page offset stays
//    32-bit (the attention kernel checks P * Hkv * D < 2^31); only
//    page * (P * Hkv * D) is 64-bit.
// Both give the same element offset for every valid position.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_PAGEDKV_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_PAGEDKV_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

/// The static shape of one cache: P slots per page, Hkv heads of D elements.
struct PagedKVLayout {
  int64_t pageSize = 0, numKvHeads = 0, headDim = 0;
};

/// The cache slot `page * P + position % P` (index) of the new entry of
/// `token` (index), whose i32 position is positions[token]: page =
/// blockTable[token * maxPages + position / P] (`maxPages` an i32 scalar).
Value getAppendCacheSlot(ImplicitLocOpBuilder &b, const PagedKVLayout &layout,
                         Value positions, Value blockTable, Value maxPages,
                         Value token);

/// Element offset of KV head `kvHead` (index) of cache slot `slot` (index):
/// (slot * Hkv + kvHead) * D.
Value getCacheEntryOffset(ImplicitLocOpBuilder &b, const PagedKVLayout &layout,
                          Value slot, Value kvHead);

/// Reads of one sequence's K/V rows (see the file comment).
class PagedKVReader {
public:
  /// For sequence `seq` (index) of `blockTable` (rows of `maxPages` i32
  /// entries): builds the loop invariant block-table row at `b`.
  PagedKVReader(ImplicitLocOpBuilder &b, const PagedKVLayout &layout,
                Value blockTable, Value maxPages, Value seq);
  /// Element offset (index) of element `laneOffset` (i32, < Hkv * D) of the
  /// entry of token `token` (i32, in [0, len)).
  Value getOffset(ImplicitLocOpBuilder &b, Value token, Value laneOffset) const;

private:
  PagedKVLayout layout;
  Value blockTable, tableRow;
};

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_PAGEDKV_H
