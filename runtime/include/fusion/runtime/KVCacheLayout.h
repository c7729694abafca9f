//===- KVCacheLayout.h - paged KV-cache addressing ----------------*- C++
//-*-===//
//
// The paged KV-cache layout shared by the KV-cache manager, the CPU
// reference and the GPU kernels (design.md section 2.1):
//
//   key_cache, value_cache : [num_pages, page_size, num_kv_heads, head_dim]
//                            row-major, head_dim contiguous;
//   block_table            : int32 [batch, max_pages] row-major;
//
// token t of batch row b lives in page block_table[b * max_pages + t / P],
// slot t % P. A contiguous cache is the degenerate case of one page per
// sequence (page_size = maximum length, block_table[b] = {b}). All offsets
// are 64-bit: a cache routinely holds more than 2^31 elements.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_KVCACHELAYOUT_H
#define FUSION_RUNTIME_KVCACHELAYOUT_H

#include <cstdint>

namespace fusion::runtime {

/// Element offset of cache[page][slot][kvHead][0] in a
/// [num_pages, pageSize, numKVHeads, headDim] cache.
constexpr int64_t kvCacheOffset(int64_t page, int64_t slot, int64_t kvHead,
                                int64_t pageSize, int64_t numKVHeads,
                                int64_t headDim) {
  return ((page * pageSize + slot) * numKVHeads + kvHead) * headDim;
}

/// Elements in one page of K (or of V): pageSize * numKVHeads * headDim.
constexpr int64_t kvPageElements(int64_t pageSize, int64_t numKVHeads,
                                 int64_t headDim) {
  return pageSize * numKVHeads * headDim;
}

/// Bytes of K plus V in one page of one layer:
/// 2 * pageSize * numKVHeads * headDim * elemSize.
constexpr int64_t kvPageBytes(int64_t pageSize, int64_t numKVHeads,
                              int64_t headDim, int64_t elemSize) {
  return 2 * kvPageElements(pageSize, numKVHeads, headDim) * elemSize;
}

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_KVCACHELAYOUT_H
