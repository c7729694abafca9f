//===- Golden.h - Hugging Face decode-step goldens --------------*- C++ -*-===//
//
// The goldens of test/golden (docs/goldens.md): one decode step of the
// attention front half as Hugging Face transformers computes it, with its
// inputs (hidden_states, positions, history_lens, seq_lens, the K/V history
// of each sequence), every intermediate (normed, q, k, v, q_rot, k_rot,
// attn_output) and a float64 attn_output.
//
// GoldenDecodeStep reads a decode_step.safetensors. GoldenCacheLayout puts
// its history into a paged KV cache for a function whose kv_append slot is
// its RoPE position, as in the compiled @decode_layer (one `positions`
// argument for fusion.rope and fusion.kv_append).
//
// That matters for a golden sequence whose RoPE position is not its history
// length (sequence 3: RoPE at 100000, 3 history tokens, 4 attended). Such a
// function writes the new K/V at logical token 100000, page
// block_table[b, 100000 / P], slot 100000 % P, and attention reads logical
// tokens [0, seq_lens). The layout maps the logical page of the new token
// onto the page holding window slot j = position % P and puts the history
// in the other window slots, so attention reads exactly the golden's
// tokens, the new one at slot j instead of last. Softmax attention does not
// depend on the order of the tokens (only the rounding of its sums does), so
// the output is comparable with attn_output. This needs j < seq_lens: true
// for 100000 at page sizes 16 and 32 (j = 0), not at 64 (j = 32), where
// layoutGoldenCache throws UnsupportedError.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_GOLDEN_H
#define FUSION_RUNTIME_GOLDEN_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/Reference.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fusion::runtime {

/// One golden decode step (docs/goldens.md, "Tensor names and shapes").
struct GoldenDecodeStep {
  std::string path;
  /// The activation dtype (F16, or BF16).
  DType dtype = DType::F16;
  int64_t batch = 0;
  int64_t hidden = 0;
  ref::AttentionDims dims;
  std::vector<uint16_t> hiddenStates; ///< [B, H]
  std::vector<int32_t> positions;     ///< [B], RoPE positions
  std::vector<int32_t> historyLens;   ///< [B], cache length before the step
  std::vector<int32_t> seqLens;       ///< [B], history_lens + 1
  std::vector<std::vector<uint16_t>> kHistory; ///< [B][L_b * Hkv * D]
  std::vector<std::vector<uint16_t>> vHistory; ///< [B][L_b * Hkv * D]
  /// transformers' outputs by name: "normed" [B, H], "q", "q_rot",
  /// "attn_output" [B, Hq, D], "k", "v", "k_rot" [B, Hkv, D].
  std::map<std::string, std::vector<uint16_t>> expected;
  /// The float64 attention output (stored as F32) [B, Hq, D].
  std::vector<double> attnOutputF64;
  /// transformers' float32 rotary inv_freq [D/2].
  std::vector<double> invFreq;

  /// Reads `path`. Throws Error if it cannot be read and FormatError naming
  /// the file and tensor for a missing tensor, a wrong dtype or shape, or
  /// seq_lens != history_lens + 1.
  static GoldenDecodeStep load(const std::string &path);

  /// expected.at(name); throws FormatError naming the file if absent.
  const std::vector<uint16_t> &tensor(const std::string &name) const;
};

/// The golden's history in a paged KV cache for a function that appends at
/// its RoPE position (see the file comment).
struct GoldenCacheLayout {
  int64_t pageSize = 0;
  int64_t numPages = 0;
  /// Row length of the block table.
  int64_t maxPages = 0;
  std::vector<int32_t> blockTable; ///< [B, maxPages]
  std::vector<int32_t> positions;  ///< [B], the golden's
  std::vector<int32_t> seqLens;    ///< [B], the golden's
  /// [numPages, P, Hkv, D] each: the history; NaN in every other slot.
  std::vector<uint16_t> keyCache, valueCache;
  /// Per sequence: one line saying where its tokens are.
  std::vector<std::string> notes;

  /// Element offset of the new token of sequence `b` in either cache (where
  /// the function writes its K/V row).
  int64_t newTokenOffset(int64_t b, const ref::AttentionDims &dims) const;
};

/// Lays out `golden`'s history in pages of `pageSize` tokens, allocated by
/// a KVCacheManager and handed out a page at a time round-robin over the
/// sequences (so they are scattered); `numPages` pages in all (0: exactly
/// what is needed). Throws CapacityError if `numPages` is too small,
/// UnsupportedError for a RoPE position inside the history (positions <
/// history_lens) or one whose slot in its page is not in the window
/// (position % P > history_lens, see the file comment).
GoldenCacheLayout layoutGoldenCache(const GoldenDecodeStep &golden,
                                    int64_t pageSize, int64_t numPages = 0);

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_GOLDEN_H
