//===- Reference.h - CPU reference of the fusion ops --------------*- C++
//-*-===//
//
// A straightforward CPU implementation of every fusion op with the reference
// semantics of design.md section 2.1 (also the op descriptions in
// FusionOps.td). GPU results are checked against it, and it is itself
// checked against golden tensors from Hugging Face transformers.
//
// Conventions for every function here:
//  * Activations, weights and caches are arrays of uint16_t holding f16 or
//    bf16 bit patterns (DType), row-major, innermost dimension contiguous.
//    Integer inputs (positions, seq_lens, block tables) are int32.
//  * Inputs are read exactly (f16/bf16 -> fp32/fp64 is exact); each op's
//    outputs are rounded once, round-to-nearest-even, to the dtype.
//  * Precision::F32 (the default) does all arithmetic in fp32, as the GPU
//    kernels do: sums accumulate sequentially in fp32, products are rounded
//    to fp32 (no fused multiply-add). Precision::F64 does the same math in
//    double and rounds once from double; it is the "float64 computation"
//    that golden files are cross-checked against.
//  * Outputs may alias inputs of the same shape exactly (in-place update),
//    never partially.
//  * Invalid arguments (null required pointers, non-positive sizes,
//    inconsistent head counts, out-of-range positions or page ids, a length
//    past the block table) throw InvalidArgumentError naming the op, the
//    batch row and the offending value. Nothing is written before the
//    checks pass, except where a function says otherwise.
//
// The option and configuration structs (RopeOptions, FrontHalfConfig, ...)
// are in ReferenceConfig.h.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_REFERENCE_H
#define FUSION_RUNTIME_REFERENCE_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/ReferenceConfig.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace fusion::runtime::ref {

/// Arithmetic precision of a reference op (see the file comment).
enum class Precision { F32, F64 };

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// RMSNorm (Zhang & Sennrich 2019; Hugging Face LlamaRMSNorm) of each row of
/// `x` [batch, hidden] with weight `weight` [hidden]:
///
///   y = round(x32 * (1 / sqrt(sum(x32^2) / hidden + eps)) * w32)
///
/// with w32 = w, or 1 + w when opts.unit_offset (GemmaRMSNorm). The sum of
/// squares is accumulated in fp32 (fp64 under Precision::F64), never in the
/// input type, so rows whose squares overflow f16 normalise correctly.
///
/// With `residual` [batch, hidden] (nullable), the fused residual add of a
/// pre-norm block (vLLM fused_add_rms_norm): h = round(x + residual) is
/// normalised in place of x and written to `residualOut` [batch, hidden]
/// (nullable; may be `residual` or `x` itself).
///
/// Differences from Hugging Face eager: LlamaRMSNorm rounds
/// x32 * rsqrt(...) to the dtype before multiplying by w in the dtype (two
/// roundings); here the product is rounded once (GemmaRMSNorm also rounds
/// once). The results differ by at most about one ulp.
///
/// Throws InvalidArgumentError for batch < 1, hidden < 1, a null x, weight
/// or y, or a residualOut without residual.
void rmsnorm(DType dtype, int64_t batch, int64_t hidden, const uint16_t *x,
             const uint16_t *residual, const uint16_t *weight, uint16_t *y,
             uint16_t *residualOut, const NormOptions &opts = {},
             Precision precision = Precision::F32);

/// LayerNorm (Ba et al. 2016; torch.nn.LayerNorm) of each row of `x`
/// [batch, hidden]:
///
///   mean = sum(x32) / hidden,  var = sum((x32 - mean)^2) / hidden (biased)
///   y = round((x32 - mean) * (1 / sqrt(var + eps)) * w32 + b32)
///
/// in fp32 (two passes over the row; fp64 under Precision::F64). `weight`
/// and `bias` [hidden] may each be null (1 and 0). `residual` and
/// `residualOut` work as in rmsnorm; opts.unit_offset is ignored.
/// Throws InvalidArgumentError as rmsnorm.
void layernorm(DType dtype, int64_t batch, int64_t hidden, const uint16_t *x,
               const uint16_t *residual, const uint16_t *weight,
               const uint16_t *bias, uint16_t *y, uint16_t *residualOut,
               const NormOptions &opts = {},
               Precision precision = Precision::F32);

//===----------------------------------------------------------------------===//
// QKV projection
//===----------------------------------------------------------------------===//

/// Packed Q/K/V projection (Hugging Face LlamaAttention's q_proj, k_proj,
/// v_proj, nn.Linear semantics):
///
///   out[b, n] = round(sum_k x32[b, k] * W32[n, k] + bias32[n])
///
/// for n in [0, dims.qkvRows()), accumulated in fp32 in order of k (fp64
/// under Precision::F64), the bias added after the sum. `x` is
/// [batch, hidden]; `weight` is [(Hq + 2*Hkv) * D, hidden] row-major with
/// rows [0, Hq*D) = q_proj.weight, [Hq*D, (Hq+Hkv)*D) = k_proj.weight,
/// [(Hq+Hkv)*D, (Hq+2*Hkv)*D) = v_proj.weight, i.e.
/// torch.cat([q_proj.weight, k_proj.weight, v_proj.weight]); `bias`
/// (nullable; Qwen2) is the matching concatenation of the three biases.
/// Row h*D + d of each part is element d of head h, so the outputs are
/// q [batch, Hq, D], k [batch, Hkv, D], v [batch, Hkv, D] (q, k, v must not
/// alias x). Throws InvalidArgumentError for bad sizes or null buffers.
void qkvProj(DType dtype, int64_t batch, int64_t hidden,
             const AttentionDims &dims, const uint16_t *x,
             const uint16_t *weight, const uint16_t *bias, uint16_t *q,
             uint16_t *k, uint16_t *v, Precision precision = Precision::F32);

//===----------------------------------------------------------------------===//
// The rest of the decoder layer: linear layers, SwiGLU, embedding
//===----------------------------------------------------------------------===//

/// A linear layer without bias (torch.nn.Linear; Hugging Face o_proj,
/// gate_proj/up_proj, down_proj, lm_head):
///
///   y[b, n] = round(sum_k x32[b, k] * W32[n, k])
///
/// for `x` [batch, in], `weight` [out, in] row-major, `y` [batch, out] (must
/// not alias x), accumulated in fp32 in order of k (fp64 under F64), the same
/// arithmetic as qkvProj. Throws InvalidArgumentError for sizes < 1 or null
/// buffers.
void linear(DType dtype, int64_t batch, int64_t in, int64_t out,
            const uint16_t *x, const uint16_t *weight, uint16_t *y,
            Precision precision = Precision::F32);

/// The SwiGLU activation of a gated MLP (Shazeer 2020; Hugging Face LlamaMLP
/// act_fn(gate_proj(x)) * up_proj(x) with act_fn = SiLU):
///
///   y[b, i] = round(silu(g32) * u32),  silu(g) = g / (1 + exp(-g))
///
/// with g = gateUp[b, i] and u = gateUp[b, inter + i]: `gateUp`
/// [batch, 2 * inter] is each row's gate projection followed by its up
/// projection (the output of a linear over cat([gate_proj.weight,
/// up_proj.weight])). `y` is [batch, inter]. fp32 math (fp64 under F64).
/// Hugging Face rounds silu(g) to the dtype before the product; here the
/// product is rounded once (at most about one ulp apart). Throws
/// InvalidArgumentError for sizes < 1 or null buffers.
void siluMul(DType dtype, int64_t batch, int64_t inter, const uint16_t *gateUp,
             uint16_t *y, Precision precision = Precision::F32);

/// Token embedding (torch.nn.Embedding): row b of `y` [batch, hidden] is row
/// tokens[b] of `table` [vocab, hidden] (a bit copy). Throws
/// InvalidArgumentError, before writing, for a token outside [0, vocab).
void embedding(int64_t batch, int64_t vocab, int64_t hidden,
               const uint16_t *table, const int32_t *tokens, uint16_t *y);

/// Greedy sampling (fusion.argmax; torch.argmax over the LM head's logits):
/// out[b] = the index of the largest value of row b of `logits`
/// [batch, vocab], compared exactly; ties pick the lowest index; NaN is
/// never chosen (an all-NaN row gives 0; torch.argmax would return its
/// first NaN). Throws InvalidArgumentError for sizes < 1 or null buffers.
void argmax(DType dtype, int64_t batch, int64_t vocab, const uint16_t *logits,
            int32_t *out);

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

/// The rotary_dim/2 inverse frequencies (radians per position) rope uses.
///
/// Precision::F32 is ropeInvFreqF32 (RopeFrequencies.h), the table the
/// compiled kernels embed: Hugging Face's fp32 computation step by step,
/// Llama-3.1 scaling included.
/// Precision::F64 does the same math in double (inv_freq = theta^(-2i/rd)).
/// The F32 values are returned exactly (as doubles).
/// Throws InvalidArgumentError for headDim < 1, an odd or out-of-range
/// rotary_dim, theta <= 0 or inconsistent scaling factors.
std::vector<double> ropeInvFreq(const RopeOptions &opts, int64_t headDim,
                                Precision precision = Precision::F32);

/// Rotary position embedding (Su et al. 2021; Hugging Face
/// apply_rotary_pos_emb with rotate_half for NeoX pairing) of `q`
/// [batch, Hq, D] and `k` [batch, Hkv, D] at position `positions[b]`
/// (int32 [batch], >= 0), into `qOut` / `kOut` (same shapes; may be q / k).
/// For each pair (a, b) and frequency i, in fp32:
///
///   angle = float(pos) * inv_freq[i]             (one fp32 multiply)
///   c = float(cos(double(angle))), s = float(sin(double(angle)))
///   (a, b) -> round(a*c - b*s), round(b*c + a*s)
///
/// (everything in double under Precision::F64, where the angle is
/// pos * inv_freq in double). NeoX pairs x[i] with x[i + rd/2] for
/// i < rd/2; GPT-J pairs x[2i] with x[2i+1]; elements >= rd are copied.
/// Hugging Face instead rounds cos/sin and every product to the activation
/// dtype; this reference is the more accurate single rounding.
/// `k`/`kOut` may both be null to rotate q only (then dims.numKVHeads is
/// not used). Throws InvalidArgumentError as ropeInvFreq, for null buffers
/// or a negative position.
void rope(DType dtype, int64_t batch, const AttentionDims &dims,
          const uint16_t *q, const uint16_t *k, const int32_t *positions,
          uint16_t *qOut, uint16_t *kOut, const RopeOptions &opts = {},
          Precision precision = Precision::F32);

//===----------------------------------------------------------------------===//
// Paged KV cache
//===----------------------------------------------------------------------===//

/// A paged K/V cache pair: `key` and `value` are each
/// [numPages, pageSize, numKVHeads, headDim] (see KVCacheLayout.h).
struct PagedKVCache {
  uint16_t *key = nullptr;
  uint16_t *value = nullptr;
  int64_t numPages = 0;
  int64_t pageSize = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
};

/// A block table: int32 [batch, maxPages], row b = the pages of batch row b
/// in token order (token t at page data[b*maxPages + t/pageSize], slot
/// t % pageSize).
struct BlockTable {
  const int32_t *data = nullptr;
  int64_t maxPages = 0;
};

/// KV append: for each row b, with pos = positions[b], page =
/// table[b, pos / P] and slot = pos % P,
///   cache.key[page, slot, h, :] = k[b, h, :], cache.value[...] = v[b, h, :]
/// for every kv head h (bit copies; k, v are [batch, Hkv, D]). Offsets are
/// 64-bit. Throws InvalidArgumentError (before writing anything) for a
/// negative position, pos / P >= maxPages, or a page id outside
/// [0, numPages).
void kvAppend(int64_t batch, const uint16_t *k, const uint16_t *v,
              const int32_t *positions, const BlockTable &table,
              const PagedKVCache &cache);

/// GQA decode attention (Vaswani et al. 2017; Ainslie et al. 2023; Hugging
/// Face eager_attention_forward with repeat_kv) of one query token per row:
///
///   kv_head = h / (Hq / Hkv)
///   s[t]    = scale * sum_d q32[b,h,d] * K32[b,t,kv_head,d],  t < len_b
///   o[b,h]  = round(sum_t exp(s[t] - max s) V32[b,t,kv_head] /
///                   sum_t exp(s[t] - max s))
///
/// with len_b = seqLens[b], token t read from page table[b, t / P], slot
/// t % P. Scores, softmax and the weighted sum are fp32 (fp64 under F64).
/// Only tokens t < len_b are read, so whatever the cache holds past them
/// (even NaN) cannot reach the output; len_b = 0 gives zeros. `q` and `out`
/// are [batch, numQHeads, D] (out may be q). Throws InvalidArgumentError
/// for Hq not a multiple of Hkv, a negative length, a length needing more
/// than maxPages pages, or a page id outside [0, numPages).
void decodeAttention(DType dtype, int64_t batch, int64_t numQHeads,
                     const uint16_t *q, const PagedKVCache &cache,
                     const BlockTable &table, const int32_t *seqLens,
                     uint16_t *out, const AttentionOptions &opts = {},
                     Precision precision = Precision::F32);

//===----------------------------------------------------------------------===//
// Front half of a decoder layer
//===----------------------------------------------------------------------===//

/// Inputs of decodeLayerFrontHalf (shapes with B = batch).
struct FrontHalfInputs {
  const uint16_t *x = nullptr;          ///< [B, hidden]
  const uint16_t *residual = nullptr;   ///< [B, hidden] or null
  const uint16_t *normWeight = nullptr; ///< [hidden]
  const uint16_t *normBias = nullptr;   ///< [hidden], LayerNorm only, or null
  const uint16_t *qkvWeight = nullptr;  ///< [(Hq + 2*Hkv) * D, hidden]
  const uint16_t *qkvBias = nullptr;    ///< [(Hq + 2*Hkv) * D] or null
  const int32_t *positions = nullptr;   ///< [B]: RoPE position and slot
  const int32_t *seqLens = nullptr;     ///< [B]: normally positions[b] + 1
  BlockTable blockTable;                ///< [B, maxPages]
};

/// Outputs of decodeLayerFrontHalf; all but attnOut are optional.
struct FrontHalfOutputs {
  uint16_t *attnOut = nullptr;     ///< [B, Hq, D], attention output
  uint16_t *residualOut = nullptr; ///< [B, hidden], h = x + residual
  uint16_t *normed = nullptr;      ///< [B, hidden], the norm's output
  uint16_t *q = nullptr;           ///< [B, Hq, D], after RoPE
  uint16_t *k = nullptr;           ///< [B, Hkv, D], after RoPE
  uint16_t *v = nullptr;           ///< [B, Hkv, D]
  uint16_t *qProj = nullptr;       ///< [B, Hq, D], before RoPE
  uint16_t *kProj = nullptr;       ///< [B, Hkv, D], before RoPE
};

/// The unfused front half of a decoder layer, one decode token per row:
/// rmsnorm or layernorm (with the residual add if inputs.residual) ->
/// qkvProj -> rope (at positions) -> kvAppend (rotated k and v at
/// positions) -> decodeAttention (over seqLens), each step rounding its
/// outputs to the dtype exactly as the separate ops above do. `cache`
/// (head geometry equal to config.dims) is updated in place. Throws
/// InvalidArgumentError if the appended token is not one of the seqLens[b]
/// tokens attention reads (normally seqLens[b] = positions[b] + 1; a block
/// table may also map the token's logical page onto a page of the window,
/// see GoldenCacheLayout) or as the individual ops; nothing is written if
/// the arguments are invalid.
void decodeLayerFrontHalf(const FrontHalfConfig &config, int64_t batch,
                          const FrontHalfInputs &inputs,
                          const PagedKVCache &cache,
                          const FrontHalfOutputs &outputs,
                          Precision precision = Precision::F32);

//===----------------------------------------------------------------------===//
// A whole decoder layer
//===----------------------------------------------------------------------===//

/// The weights of one decoder layer (shapes with H = hidden, I =
/// intermediate, Hq/Hkv/D the head geometry).
struct DecoderLayerRefWeights {
  const uint16_t *inputNorm = nullptr; ///< [H] input_layernorm
  const uint16_t *qkv = nullptr;       ///< [(Hq + 2*Hkv) * D, H], packed
  const uint16_t *qkvBias = nullptr;   ///< [(Hq + 2*Hkv) * D] or null
  const uint16_t *oProj = nullptr;     ///< [H, Hq * D] o_proj
  const uint16_t *postNorm = nullptr;  ///< [H] post_attention_layernorm
  const uint16_t *gateUp = nullptr;    ///< [2 * I, H] cat([gate, up])
  const uint16_t *down = nullptr;      ///< [H, I] down_proj
};

/// One Hugging Face LlamaDecoderLayer for one decode token per row, with the
/// residual stream carried as vLLM does (the layer's input is x + residual,
/// its output xOut + residualOut; residual may be null for the first layer,
/// where the input is x alone):
///
///   (y, h)   = rmsnorm(x, residual)        h = round(x + residual)
///   a        = attention of y at positions (decodeLayerFrontHalf; K/V of
///              the token appended to `cache`)
///   (y2, h2) = rmsnorm(linear(a, oProj), h, postNorm)
///   xOut     = linear(siluMul(linear(y2, gateUp)), down),  residualOut = h2
///
/// Hugging Face's layer output is round(xOut + residualOut). `xOut` and
/// `residualOut` are [B, H] and must not alias the inputs. Throws as
/// decodeLayerFrontHalf and the ops it calls.
void decoderLayer(const DecoderConfig &config, int64_t batch,
                  const DecoderLayerRefWeights &weights, const uint16_t *x,
                  const uint16_t *residual, const int32_t *positions,
                  const int32_t *seqLens, const BlockTable &table,
                  const PagedKVCache &cache, uint16_t *xOut,
                  uint16_t *residualOut, Precision precision = Precision::F32);

} // namespace fusion::runtime::ref

#endif // FUSION_RUNTIME_REFERENCE_H
