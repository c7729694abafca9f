// The tensor-core decode attention's per-tile math, shared by the
// diagnostics that model it (decode_attention_ring.cu, single_layer.cu):
// Llama-3-8B's attention shape, the K/V tile layouts in shared memory, the
// FA2 decode step of one 16-token tile (AttentionMma.cpp's math: S = Q K^T
// by mma.m16n8k16 with the group's G = 4 query heads as A rows 0..3, online
// softmax in fp32 in the log2 domain, O += P V), the merge of the warps'
// states, the host's tensor map of a paged cache for TMA tiles, and the
// test data (hash-uniform values, NaN-poisoned unused cache slots).
#pragma once
#include "ptx_ops.cuh"
#include <cmath>
#include <cstdint>
#include <cuda.h>
#include <cuda_fp16.h>

constexpr int HQ = 32, HKV = 8, G = HQ / HKV, D = 128, P = 16;
constexpr int kRowBytes = D * 2;       // one token's K (or V) row of a head
constexpr int kPitch = kRowBytes + 16; // a padded ring row (cp.async, bulk)
constexpr int kBox = 64;               // TMA box width (elements): 128 bytes
static_assert(P == 16, "a tile is one page");

// How a 16-row K or V tile lies in a stage: rows padded to kPitch bytes, or
// (TMA, 128-byte swizzle) as two 2 KB halves of d (0-63, 64-127), each 16
// rows of 128 bytes whose 16-byte chunk c sits at c ^ (row % 8).
enum Layout { kPadded, kSwizzled };
template <int L>
__host__ __device__ constexpr int tileBytes() {
  return P * (L == kPadded ? kPitch : kRowBytes);
}
/// Byte offset of 16-byte chunk c (0-15: d 8c..8c+7) of row r in a tile.
template <int L>
__device__ __forceinline__ int chunkAt(int r, int c) {
  if constexpr (L == kPadded)
    return r * kPitch + c * 16;
  else
    return (c >> 3) * (P * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

/// One warp's running softmax state for row g (its head): O[d] for
/// d = 8 nb + 2 q4 + e in o[nb][e], max m (log2 domain) and sum l.
struct WarpState {
  float o[D / 8][2], m, l;
};

/// Q as the A operand: row g < G is query head g of the group at `q` (G
/// rows of D f16, unscaled; read through L2: a kernel may have written it).
__device__ void loadQ(const __half *q, uint32_t (&qa)[D / 16][4]) {
  int lane = threadIdx.x & 31, g = lane >> 2, q4 = lane & 3;
  const unsigned *qr =
      reinterpret_cast<const unsigned *>(q + min(g, G - 1) * D + 2 * q4);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    qa[kk][0] = g < G ? __ldcg(qr + 8 * kk) : 0;     // d 16kk + 2q4, +1
    qa[kk][1] = 0;                                   // rows g + 8
    qa[kk][2] = g < G ? __ldcg(qr + 8 * kk + 4) : 0; // d 16kk + 8 + 2q4, +1
    qa[kk][3] = 0;
  }
}

__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

/// S = Q K^T of one tile: s[n][e] is token 8n + 2 q4 + e of row g, in the
/// log2 domain (times log2(e) / sqrt(D)), -inf at or past `valid`.
template <int L>
__device__ __forceinline__ void scores(float (&x)[4], const uint8_t *ks,
                                       const uint32_t (&qa)[D / 16][4],
                                       int valid) {
  int lane = threadIdx.x & 31, q4 = lane & 3;
  float s[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t kb[4]; // tokens 0-7 / 8-15 x d chunks 2kk, 2kk + 1
    ldmatrix4(kb, ks + chunkAt<L>((lane & 7) + (lane >> 4) * 8,
                                  2 * kk + ((lane >> 3) & 1)));
    mma(s[0], qa[kk], kb[0], kb[1]);
    mma(s[1], qa[kk], kb[2], kb[3]);
  }
  const float scale = 1.4426950408889634f / sqrtf((float)D);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    x[i] = 8 * (i >> 1) + 2 * q4 + (i & 1) < valid ? s[i >> 1][i & 1] * scale
                                                   : -INFINITY;
}

/// One tile of the online softmax: K at `ks`, V at `vs` (layout L), the
/// first `valid` tokens real (the rest may be NaN or zeros: masked).
template <int L>
__device__ __forceinline__ void attendTile(const uint8_t *ks, const uint8_t *vs,
                                           const uint32_t (&qa)[D / 16][4],
                                           WarpState &st, int valid) {
  int lane = threadIdx.x & 31, q4 = lane & 3;
  float x[4];
  scores<L>(x, ks, qa, valid);
  // The 4 lanes of row g hold its 16 tokens; token 0 is valid, so mNew is
  // finite and 2^(-inf - mNew) = 0.
  float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
  mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
  float mNew = fmaxf(st.m, mx), corr = exp2f(st.m - mNew);
  float e[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    e[i] = exp2f(x[i] - mNew);
  float rs = e[0] + e[1] + e[2] + e[3];
  rs += __shfl_xor_sync(~0u, rs, 1);
  rs += __shfl_xor_sync(~0u, rs, 2);
  st.l = st.l * corr + rs;
  st.m = mNew;
  uint32_t pa[4] = {pack(e[0], e[1]), 0, pack(e[2], e[3]), 0};
  // V fragments of tokens (2q4, 2q4 + 1) and (8 + 2q4, 9 + 2q4): halves at
  // or past `valid` cleared.
  uint32_t lo = ~0u, hi = ~0u;
  if (valid < P) {
    lo = (2 * q4 < valid ? 0xFFFFu : 0) | (2 * q4 + 1 < valid ? ~0xFFFFu : 0);
    hi = (8 + 2 * q4 < valid ? 0xFFFFu : 0) |
         (9 + 2 * q4 < valid ? ~0xFFFFu : 0);
  }
#pragma unroll
  for (int db = 0; db < D / 16; ++db) {
    uint32_t vb[4]; // tokens 0-15 x d 16db..16db+15, transposed
    ldmatrix4t(vb, vs + chunkAt<L>((lane & 7) + ((lane >> 3) & 1) * 8,
                                   2 * db + (lane >> 4)));
    vb[0] &= lo, vb[1] &= hi, vb[2] &= lo, vb[3] &= hi;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float c[4] = {st.o[2 * db + h][0] * corr, st.o[2 * db + h][1] * corr, 0,
                    0};
      mma(c, pa, vb[2 * h], vb[2 * h + 1]);
      st.o[2 * db + h][0] = c[0];
      st.o[2 * db + h][1] = c[1];
    }
  }
}

/// The W warps' states through `buf` ([W][G][D] O, [W][G] m, [W][G] l;
/// W (G D + 2 G) floats) into the CTA's split partial: unnormalised O at
/// `o` [G][D], (m log2, l) at `ml` [G][2]. Threads 0..32W-1 take part
/// (named barrier 1); nobody else may still use `buf`.
template <int W>
__device__ void mergeWarps(const WarpState &st, float *buf, float *o,
                           float *ml) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2,
      q4 = lane & 3;
  float *wo = buf, *wm = buf + W * G * D, *wl = wm + W * G;
  if (g < G) {
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
      *reinterpret_cast<float2 *>(&wo[(warp * G + g) * D + 8 * nb + 2 * q4]) =
          make_float2(st.o[nb][0], st.o[nb][1]);
    if (q4 == 0) {
      wm[warp * G + g] = st.m;
      wl[warp * G + g] = st.l;
    }
  }
  namedBarrier(1, W * 32);
  for (int i = threadIdx.x; i < G * D; i += W * 32) {
    int h = i / D;
    float M = -INFINITY, acc = 0;
    for (int w = 0; w < W; ++w)
      M = fmaxf(M, wm[w * G + h]);
    for (int w = 0; w < W; ++w)
      if (wm[w * G + h] != -INFINITY) // a warp without tiles
        acc += wo[(w * G + h) * D + i % D] * exp2f(wm[w * G + h] - M);
    o[i] = acc;
  }
  if (threadIdx.x < G) {
    float M = -INFINITY, L = 0;
    for (int w = 0; w < W; ++w)
      M = fmaxf(M, wm[w * G + threadIdx.x]);
    for (int w = 0; w < W; ++w)
      if (wm[w * G + threadIdx.x] != -INFINITY)
        L += wl[w * G + threadIdx.x] * exp2f(wm[w * G + threadIdx.x] - M);
    ml[threadIdx.x * 2] = M;
    ml[threadIdx.x * 2 + 1] = L;
  }
}

__device__ __forceinline__ void initState(WarpState &st) {
  for (int nb = 0; nb < D / 8; ++nb)
    st.o[nb][0] = st.o[nb][1] = 0;
  st.m = -INFINITY;
  st.l = 0;
}

/// Uniform in [-1, 1): a hash of (i, seed), the same on host and device.
__host__ __device__ inline float hashUniform(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (float)(x >> 40) / (float)(1 << 24) * 2 - 1; // [-1, 1)
}

/// Cache values uniform in [-1, 1); slots at or past `used[page]` NaN.
__global__ void fillCache(__half *c, size_t n, uint32_t seed, const int *used) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    size_t row = i / (HKV * D);
    c[i] = (int)(row % P) < used[row / P] ? __float2half(hashUniform(i, seed))
                                          : __float2half(NAN);
  }
}

/// The 3D tensor map {D, HKV, pool pages * P} of a paged f16 cache [pool
/// pages, P, HKV, D] whose boxes are one head's {64 d, 1, 16 rows} (128-byte
/// swizzle: a tile is two boxes, layout kSwizzled).
inline CUtensorMap encodeCache(void *base, size_t poolPages) {
  const cuuint64_t dims[3] = {D, HKV, poolPages * P};
  const cuuint64_t strides[2] = {kRowBytes, (cuuint64_t)HKV * kRowBytes};
  const cuuint32_t box[3] = {kBox, 1, P};
  return encodeSwizzledF16(base, 3, dims, strides, box);
}
