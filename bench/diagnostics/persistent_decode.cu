// Diagnostic microbenchmark (not our kernel; it measures a design before it
// is emitted): one whole batch-1 decode step of SmolLM2-135M (Llama: hidden
// 576, 9 query and 3 KV heads of 64, MLP 1536, 30 layers, vocab 49152, tied
// embeddings, f16 storage, fp32 math, paged KV cache) as ONE persistent
// cooperative kernel, against a plain 16-byte read of the same weight bytes.
//
// Our compiled decode is about 153 latency-bound kernels per token (705 us on
// the H200). This asks how fast the step can be with grid-wide barriers
// between dependent phases instead of kernel boundaries, with every CTA
// prefetching into L2 (cp.async.bulk.prefetch) the weight rows (or K/V pages)
// that it will read one or two phases later before it waits at a barrier.
// Phases, each ended by a grid barrier (151 per step):
//   per layer: [RMSNorm + QKV + RoPE + KV append] [split-KV attention
//   partials] [combine + o_proj + residual] [RMSNorm + gate/up + silu*up]
//   [down + residual]; then [RMSNorm + LM head + per-CTA argmax] [argmax].
// GEMV rows go to warps (warp w of CTA c: units c*8 + w, + grid*8, ...; one
// 16-byte-load dot product per row and warp); every CTA that has rows in a
// phase recomputes the RMSNorm (or the attention combine) in shared memory,
// which saves a barrier. The residual ping-pongs between x0 and x1.
//
// Variants: CTAs per SM {1, 2} x prefetch {none, next phase, two phases
// ahead}, the barriers alone (same phases, no work), and the plain read.
// Each decode variant first runs once on NaN-poisoned workspaces and KV slot
// (slots past P and spare pages are NaN throughout), checked against a CPU
// reference (same f16 rounding points, double accumulation): every layer's
// k/v, attention output and residuals recomputed from the kernel's own
// inputs (tight bound), the logits from its final x, and the logits of the
// free-running reference (loose bound; see kBound). It is then timed as
// bench/README.md (8 steps in one CUDA graph, median of 100 replays, per
// step), and the replays must reproduce the checked logits bit for bit.
// About 15 s on an H200.
//   nvcc -O3 -arch=sm_90 -std=c++17 persistent_decode.cu -o persistent_decode
//   && ./persistent_decode [P (position of the new token, default 575)]
//      [S (KV splits, default 16)]
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cuda_fp16.h>
#include <string>
#include <vector>

constexpr int H = 576, NQ = 9, NKV = 3, G = NQ / NKV, D = 64, I = 1536;
constexpr int LAYERS = 30, V = 49152, PAGE = 16, KVROW = NKV * D;
constexpr float EPS = 1e-5f;
constexpr double THETA = 100000.0;
constexpr int WARPS = 8, THREADS = WARPS * 32, COPIES = 8;
constexpr unsigned FULL = 0xffffffffu;
// GEMV work units; warp gw = c * 8 + w takes units gw, gw + grid * 8, ...,
// so a CTA's units come in blocks of 8 (its prefetch ranges).
constexpr int Q_UNITS = NQ * D / 2, K_UNITS = NKV * D / 2; // RoPE row pairs
constexpr int QKV_UNITS = Q_UNITS + 2 * K_UNITS;           // + v row pairs
constexpr int LM_ROWS = 4, LM_UNITS = V / LM_ROWS;
constexpr int PH_LAYER = 5, PH_LM = LAYERS * PH_LAYER, NPH = PH_LM + 2;
constexpr int kMaxSplits = 64, PART = D + 4, kSparePages = 3, kMaxPos = 16383;
constexpr size_t kPrefetchCap = 16u << 20; // bytes per phase, whole grid
// The check's bounds (see check()). The reference rounds to f16 at the
// kernel's points, so the two differ only where fp32 accumulation (and
// rsqrtf, exp2f, sincosf) against double flips an f16 rounding (an ulp is
// 2^-11 to 2^-10 of |v|). Fed the kernel's own inputs, each layer's pieces
// differ by an ulp or two (a CPU emulation of this kernel: <= 1e-3 of the
// largest value): kBound = 1e-2, while dropping the new token from the
// attention costs ~3e-2 and a wrong rotation, split or head > 1e-1. Run free
// from the embedding, the flips compound through 30 random layers (the
// peaked softmax amplifies them; the emulation gives ~4.5e-2 on the logits,
// in max |d| / max(1, |ref|)), so that comparison has the loose kFreeBound.
constexpr double kBound = 1e-2, kFreeBound = 0.25;
// One layer's weights, contiguous (offsets in halves).
constexpr size_t OFF_Q = 0, OFF_K = OFF_Q + (size_t)H * H,
                 OFF_V = OFF_K + (size_t)KVROW * H,
                 OFF_O = OFF_V + (size_t)KVROW * H,
                 OFF_G = OFF_O + (size_t)H * H, OFF_U = OFF_G + (size_t)I * H,
                 OFF_D = OFF_U + (size_t)I * H, OFF_N1 = OFF_D + (size_t)H * I,
                 OFF_N2 = OFF_N1 + H, LAYER_ELEMS = OFF_N2 + H;

struct LayerW {
  const __half *wq, *wk, *wv, *wo, *wg, *wu, *wd, *g1, *g2; // [out, in], [H]
  __half *kc, *vc; // [pages, PAGE, NKV, D]
};
struct Args {
  const LayerW *layers;   // [LAYERS], device memory
  const __half *emb, *gF; // [V, H] (also the LM head), final norm [H]
  const int *blockTable;  // page of each 16 positions
  __half *x0, *x1, *q, *act, *logits;
  __half *dbgAttn, *dbgX; // copies for the check: [LAYERS, H], [LAYERS, 2, H]
  float *part;            // [NQ, splits, PART]: o[64], m, l (log2 domain)
  float *bestVal;         // [grid]
  int *bestIdx, *out;     // [grid], the token id
  unsigned *bar;          // grid barrier word
  int tokenIn, pos, splits, splitLen;
  int mode;    // 0: the decode step, 1: the barriers only
  int ahead;   // prefetch distance in phases (0: none)
  float scale; // log2(e) / sqrt(D)
};
struct __align__(16) Smem {
  __half vec[I]; // the phase's input vector
  float red[WARPS];
  float wo[WARPS][G][D], wm[WARPS][G], wl[WARPS][G]; // attention merge
  float fac[NQ * kMaxSplits];                        // combine weights
  float bv[WARPS];
  int bi[WARPS];
};
__constant__ float cInvFreq[D / 2];

__device__ __forceinline__ float2 h2f(uint32_t v) {
  return __half22float2(*reinterpret_cast<__half2 *>(&v));
}
__device__ __forceinline__ float dot8(uint4 w, uint4 x) {
  float2 a = h2f(w.x), b = h2f(x.x), s;
  s.x = a.x * b.x, s.y = a.y * b.y;
  a = h2f(w.y), b = h2f(x.y), s.x += a.x * b.x, s.y += a.y * b.y;
  a = h2f(w.z), b = h2f(x.z), s.x += a.x * b.x, s.y += a.y * b.y;
  a = h2f(w.w), b = h2f(x.w), s.x += a.x * b.x, s.y += a.y * b.y;
  return s.x + s.y;
}
__device__ __forceinline__ void unpack8(uint4 v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float2 p = h2f(w[e]);
    f[2 * e] = p.x, f[2 * e + 1] = p.y;
  }
}
__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(FULL, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
  return v;
}
__device__ __forceinline__ float roundHalf(float v) {
  return __half2float(__float2half_rn(v));
}
__device__ __forceinline__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/// L2 prefetch of [p, p + bytes) (16-byte aligned, bytes a multiple of 16).
__device__ __forceinline__ void prefetchL2(const void *p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
                   __cvta_generic_to_global(p)),
               "r"(bytes)
               : "memory");
}
/// Element offset of position t's row (KV head 0) in a layer's cache.
__device__ __forceinline__ size_t slotOffset(const Args &a, int t) {
  return ((size_t)__ldg(a.blockTable + t / PAGE) * PAGE + t % PAGE) * KVROW;
}

/// Grid barrier, the cooperative-groups algorithm: CTA 0 adds 0x80000000 -
/// (grid - 1), the others 1, so the last arrival flips bit 31 and the low
/// bits return to their value: the word needs no reset between barriers,
/// launches, graph replays or grid sizes. Thread 0 fences (the CTA's writes,
/// ordered by __syncthreads, before the arrival), arrives, polls with
/// acquire loads until the bit flips, fences again. Traps after 4 s.
__device__ void gridSync(unsigned *bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned inc = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    __threadfence();
    const unsigned old = atomicAdd(bar, inc);
    const uint64_t t0 = globalTimer();
    for (unsigned polls = 1; ((ldAcquire(bar) ^ old) & 0x80000000u) == 0;
         ++polls)
      if ((polls & 0xffff) == 0 && globalTimer() - t0 > 4000000000ull) {
        printf("persistent_decode: barrier stuck (block %d)\n", blockIdx.x);
        __trap();
      }
    __threadfence();
  }
  __syncthreads();
}

/// sm.vec = RMSNorm(x) * gamma, rounded as Hugging Face does: t = f16(x *
/// rsqrt(mean(x^2) + eps)), then f16(t * gamma). Whole CTA.
__device__ void normInto(const __half *x, const __half *gamma, Smem &sm) {
  const int tid = threadIdx.x;
  float xf[8] = {}, ss = 0.f;
  if (tid < H / 8) {
    unpack8(__ldcg(reinterpret_cast<const uint4 *>(x) + tid), xf);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      ss += xf[e] * xf[e];
  }
  ss = warpSum(ss);
  if (tid % 32 == 0)
    sm.red[tid / 32] = ss;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < WARPS; ++w)
    total += sm.red[w];
  const float rstd = rsqrtf(total / H + EPS);
  if (tid < H / 8) {
    float gf[8];
    unpack8(__ldg(reinterpret_cast<const uint4 *>(gamma) + tid), gf);
    __align__(16) __half o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      o[e] = __float2half_rn(roundHalf(xf[e] * rstd) * gf[e]);
    reinterpret_cast<uint4 *>(sm.vec)[tid] = *reinterpret_cast<uint4 *>(o);
  }
  __syncthreads();
}

/// acc[r] = dot(w[r][0..N), vec) for R rows, in every lane: all 16-byte
/// weight loads of the R rows issued before the FMAs (lane-strided), then a
/// shuffle reduction.
template <int N, int R>
__device__ __forceinline__ void dotRows(const __half *const (&w)[R],
                                        const __half *vec, int lane,
                                        float (&acc)[R]) {
  constexpr int CH = N / 8, K = (CH + 31) / 32;
  uint4 wv[R][K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = lane + 32 * k;
#pragma unroll
    for (int r = 0; r < R; ++r)
      wv[r][k] = (CH % 32 == 0 || i < CH)
                     ? __ldg(reinterpret_cast<const uint4 *>(w[r]) + i)
                     : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
    acc[r] = 0.f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = lane + 32 * k;
    if (CH % 32 == 0 || i < CH) {
      const uint4 xv = reinterpret_cast<const uint4 *>(vec)[i];
#pragma unroll
      for (int r = 0; r < R; ++r)
        acc[r] += dot8(wv[r][k], xv);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
    acc[r] = warpSum(acc[r]);
}

/// Phase 0 of a layer: h = RMSNorm(x) * g1, then the QKV GEMV in units of
/// row pairs: q and k units are the RoPE pair (i, i + 32) of a head, rotated
/// in registers; v units are rows (2j, 2j + 1). q goes to the workspace, k
/// and v straight into the cache slot of position P.
__device__ void qkvPhase(const Args &a, const LayerW &w, const __half *x,
                         Smem &sm) {
  if ((int)blockIdx.x * WARPS >= QKV_UNITS)
    return;
  normInto(x, w.g1, sm);
  const int lane = threadIdx.x % 32, nw = gridDim.x * WARPS;
  const size_t slot = slotOffset(a, a.pos);
  for (int u = blockIdx.x * WARPS + threadIdx.x / 32; u < QKV_UNITS; u += nw) {
    const __half *src;
    __half *dst;
    int i0, i1;
    const bool rope = u < Q_UNITS + K_UNITS;
    if (u < Q_UNITS) {
      const int h = u / (D / 2);
      i0 = u % (D / 2), i1 = i0 + D / 2;
      src = w.wq + (size_t)h * D * H, dst = a.q + h * D;
    } else if (rope) {
      const int h = (u - Q_UNITS) / (D / 2);
      i0 = (u - Q_UNITS) % (D / 2), i1 = i0 + D / 2;
      src = w.wk + (size_t)h * D * H, dst = w.kc + slot + h * D;
    } else {
      const int j = u - Q_UNITS - K_UNITS, h = j / (D / 2);
      i0 = 2 * (j % (D / 2)), i1 = i0 + 1;
      src = w.wv + (size_t)h * D * H, dst = w.vc + slot + h * D;
    }
    const __half *rows[2] = {src + (size_t)i0 * H, src + (size_t)i1 * H};
    float acc[2];
    dotRows<H, 2>(rows, sm.vec, lane, acc);
    if (lane == 0) {
      float ya = roundHalf(acc[0]), yb = roundHalf(acc[1]);
      if (rope) {
        float sn, cs;
        sincosf((float)a.pos * cInvFreq[i0], &sn, &cs);
        const float ra = ya * cs - yb * sn, rb = yb * cs + ya * sn;
        ya = ra, yb = rb;
      }
      dst[i0] = __float2half_rn(ya), dst[i1] = __float2half_rn(yb);
    }
  }
}

/// Online-softmax update of 3 heads' states with one token (k, v: this
/// lane's 8 dims; 8 lanes per token reduce the scores).
__device__ __forceinline__ void attendToken(const float (&qf)[G][8],
                                            float (&m)[G], float (&l)[G],
                                            float (&o)[G][8], uint4 kraw,
                                            uint4 vraw, bool valid) {
  float k[8], v[8];
  unpack8(kraw, k);
  unpack8(vraw, v);
#pragma unroll
  for (int h = 0; h < G; ++h) {
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      s += qf[h][e] * k[e];
    s += __shfl_xor_sync(FULL, s, 4);
    s += __shfl_xor_sync(FULL, s, 2);
    s += __shfl_xor_sync(FULL, s, 1);
    s = valid ? s : -INFINITY;
    const float mn = fmaxf(m[h], s), base = mn == -INFINITY ? 0.f : mn;
    const float corr = exp2f(m[h] - base), p = exp2f(s - base);
    l[h] = l[h] * corr + p;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      o[h][e] = o[h][e] * corr + p * v[e];
    m[h] = mn;
  }
}

/// Merges the online-softmax states of the lane groups `off` apart.
__device__ __forceinline__ void mergeLanes(float (&m)[G], float (&l)[G],
                                           float (&o)[G][8], int off) {
#pragma unroll
  for (int h = 0; h < G; ++h) {
    const float mo = __shfl_xor_sync(FULL, m[h], off);
    const float lo = __shfl_xor_sync(FULL, l[h], off);
    const float mn = fmaxf(m[h], mo), base = mn == -INFINITY ? 0.f : mn;
    const float fs = exp2f(m[h] - base), fo = exp2f(mo - base);
    l[h] = l[h] * fs + lo * fo;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float oo = __shfl_xor_sync(FULL, o[h][e], off);
      o[h][e] = o[h][e] * fs + oo * fo;
    }
    m[h] = mn;
  }
}

/// Phase 1: split-KV attention. CTA c < 3S takes KV head g = c / S and split
/// s = c % S (positions [s * len, min(P + 1, (s + 1) * len))) for its 3
/// query heads: 8 lanes per token (8 dims a lane), 4 tokens per warp, two
/// 32-token steps' loads in flight; the warps merge in shared memory and the
/// CTA writes one (o[64], m, l) partial per query head.
__device__ void attentionPhase(const Args &a, const LayerW &w, Smem &sm) {
  const int S = a.splits;
  if ((int)blockIdx.x >= NKV * S)
    return;
  const int g = blockIdx.x / S, s = blockIdx.x % S;
  const int t0 = s * a.splitLen, t1 = min(a.pos + 1, t0 + a.splitLen);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int grp = lane / 8, sub = lane % 8;
  float qf[G][8], m[G], l[G], o[G][8];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    unpack8(
        __ldcg(reinterpret_cast<const uint4 *>(a.q + (g * G + h) * D) + sub),
        qf[h]);
    m[h] = -INFINITY, l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      qf[h][e] *= a.scale, o[h][e] = 0.f;
  }
  for (int base = t0 + warp * 4; base < t1; base += 64) { // warp-uniform
    uint4 kv[2], vv[2];
    bool valid[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int t = base + 32 * u + grp;
      valid[u] = t < t1;
      kv[u] = vv[u] = make_uint4(0, 0, 0, 0);
      if (valid[u]) {
        const size_t off = slotOffset(a, t) + g * D + sub * 8;
        kv[u] = __ldcg(reinterpret_cast<const uint4 *>(w.kc + off));
        vv[u] = __ldcg(reinterpret_cast<const uint4 *>(w.vc + off));
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u)
      attendToken(qf, m, l, o, kv[u], vv[u], valid[u]);
  }
  mergeLanes(m, l, o, 8);
  mergeLanes(m, l, o, 16);
  if (grp == 0)
#pragma unroll
    for (int h = 0; h < G; ++h) {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        sm.wo[warp][h][sub * 8 + e] = o[h][e];
      if (sub == 0)
        sm.wm[warp][h] = m[h], sm.wl[warp][h] = l[h];
    }
  __syncthreads();
  if (threadIdx.x < G * D) {
    const int h = threadIdx.x / D, d = threadIdx.x % D;
    float mx = -INFINITY;
    for (int i = 0; i < WARPS; ++i)
      mx = fmaxf(mx, sm.wm[i][h]);
    const float b = mx == -INFINITY ? 0.f : mx;
    float os = 0.f, ls = 0.f;
    for (int i = 0; i < WARPS; ++i) {
      const float f = exp2f(sm.wm[i][h] - b);
      os += f * sm.wo[i][h][d], ls += f * sm.wl[i][h];
    }
    float *dst = a.part + ((size_t)(g * G + h) * S + s) * PART;
    dst[d] = os;
    if (d == 0)
      dst[D] = mx, dst[D + 1] = ls;
  }
}

/// sm.vec[0..576) = the f16 attention output: each query head's S partials
/// merged (a warp per head computes the split weights, then 144 threads
/// accumulate 4 dims each over the splits).
__device__ void combineInto(const Args &a, Smem &sm) {
  const int S = a.splits, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int qh = warp; qh < NQ; qh += WARPS) {
    const float *p = a.part + (size_t)qh * S * PART;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    if (lane < S)
      m0 = __ldcg(p + lane * PART + D), l0 = __ldcg(p + lane * PART + D + 1);
    if (lane + 32 < S)
      m1 = __ldcg(p + (lane + 32) * PART + D),
      l1 = __ldcg(p + (lane + 32) * PART + D + 1);
    const float mx = warpMax(fmaxf(m0, m1)), b = mx == -INFINITY ? 0.f : mx;
    const float e0 = exp2f(m0 - b), e1 = exp2f(m1 - b);
    const float inv = 1.f / warpSum(l0 * e0 + l1 * e1);
    if (lane < S)
      sm.fac[qh * S + lane] = e0 * inv;
    if (lane + 32 < S)
      sm.fac[qh * S + lane + 32] = e1 * inv;
  }
  __syncthreads();
  if (threadIdx.x < NQ * D / 4) {
    const int qh = threadIdx.x / (D / 4), d = threadIdx.x % (D / 4) * 4;
    const float *p = a.part + (size_t)qh * S * PART + d;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int s = 0; s < S; ++s) {
      const float f = sm.fac[qh * S + s];
      const float4 v = __ldcg(reinterpret_cast<const float4 *>(p + s * PART));
      acc.x += f * v.x, acc.y += f * v.y, acc.z += f * v.z, acc.w += f * v.w;
    }
    __half *dst = sm.vec + qh * D + d;
    dst[0] = __float2half_rn(acc.x), dst[1] = __float2half_rn(acc.y);
    dst[2] = __float2half_rn(acc.z), dst[3] = __float2half_rn(acc.w);
  }
  __syncthreads();
}

/// out[r] = dbg[r] = residual[r] + round(W[r] . sm.vec) for the H rows of
/// W ([H, K] f16), a warp per row (o_proj and down_proj with their residual
/// adds; f16, rounded as the reference rounds).
template <int K>
__device__ void addRowsToResidual(const __half *W, const __half *residual,
                                  __half *out, __half *dbg, Smem &sm) {
  const int lane = threadIdx.x % 32, nw = gridDim.x * WARPS;
  for (int r = blockIdx.x * WARPS + threadIdx.x / 32; r < H; r += nw) {
    const __half *rows[1] = {W + (size_t)r * K};
    float acc[1];
    dotRows<K, 1>(rows, sm.vec, lane, acc);
    if (lane == 0)
      out[r] = dbg[r] = __float2half_rn(__half2float(__ldcg(residual + r)) +
                                        roundHalf(acc[0]));
  }
}

/// Phase 2: the combine (CTAs with o_proj rows, and CTA 0, which keeps a
/// copy of the attention output for the check), then o = attn Wo^T and
/// x1 = x + o (f16; a copy for the check).
__device__ void oProjPhase(const Args &a, const LayerW &w, int layer,
                           const __half *x, Smem &sm) {
  if ((int)blockIdx.x * WARPS >= H && blockIdx.x != 0)
    return;
  combineInto(a, sm);
  if (blockIdx.x == 0 && threadIdx.x < H / 8)
    reinterpret_cast<uint4 *>(a.dbgAttn + (size_t)layer * H)[threadIdx.x] =
        reinterpret_cast<const uint4 *>(sm.vec)[threadIdx.x];
  addRowsToResidual<H>(w.wo, x, a.x1, a.dbgX + (size_t)2 * layer * H, sm);
}

/// Phase 3: h2 = RMSNorm(x1) * g2, act = silu(h2 Wg^T) * (h2 Wu^T) (a unit
/// is row u of Wg and of Wu).
__device__ void gateUpPhase(const Args &a, const LayerW &w, Smem &sm) {
  if ((int)blockIdx.x * WARPS >= I)
    return;
  normInto(a.x1, w.g2, sm);
  const int lane = threadIdx.x % 32, nw = gridDim.x * WARPS;
  for (int u = blockIdx.x * WARPS + threadIdx.x / 32; u < I; u += nw) {
    const __half *rows[2] = {w.wg + (size_t)u * H, w.wu + (size_t)u * H};
    float acc[2];
    dotRows<H, 2>(rows, sm.vec, lane, acc);
    if (lane == 0) {
      const float gt = roundHalf(acc[0]), up = roundHalf(acc[1]);
      const float sg = roundHalf(gt / (1.f + expf(-gt)));
      a.act[u] = __float2half_rn(sg * up);
    }
  }
}

/// Phase 4: x0 = x1 + act Wd^T (f16; a copy for the check).
__device__ void downPhase(const Args &a, const LayerW &w, int layer, Smem &sm) {
  if ((int)blockIdx.x * WARPS >= H)
    return;
  if (threadIdx.x < I / 8)
    reinterpret_cast<uint4 *>(sm.vec)[threadIdx.x] =
        __ldcg(reinterpret_cast<const uint4 *>(a.act) + threadIdx.x);
  __syncthreads();
  addRowsToResidual<I>(w.wd, a.x1, a.x0, a.dbgX + (size_t)(2 * layer + 1) * H,
                       sm);
}

/// (v, i) better than (bv, bi): larger, or equal with the lower index.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

/// Phase LM: final RMSNorm, logits = h Wemb^T (units of 4 rows), and each
/// CTA's best (logit, index) to bestVal / bestIdx.
__device__ void lmHeadPhase(const Args &a, Smem &sm) {
  normInto(a.x0, a.gF, sm);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int nw = gridDim.x * WARPS;
  float bv = -INFINITY;
  int bi = INT_MAX;
  for (int u = blockIdx.x * WARPS + warp; u < LM_UNITS; u += nw) {
    const __half *rows[LM_ROWS];
#pragma unroll
    for (int r = 0; r < LM_ROWS; ++r)
      rows[r] = a.emb + (size_t)(u * LM_ROWS + r) * H;
    float acc[LM_ROWS];
    dotRows<H, LM_ROWS>(rows, sm.vec, lane, acc);
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < LM_ROWS; ++r) {
        const __half lg = __float2half_rn(acc[r]);
        a.logits[u * LM_ROWS + r] = lg;
        if (__half2float(lg) > bv) // rows ascend: the first max stays
          bv = __half2float(lg), bi = u * LM_ROWS + r;
      }
  }
  if (lane == 0)
    sm.bv[warp] = bv, sm.bi[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < WARPS; ++i)
      if (better(sm.bv[i], sm.bi[i], bv, bi))
        bv = sm.bv[i], bi = sm.bi[i];
    a.bestVal[blockIdx.x] = bv, a.bestIdx[blockIdx.x] = bi;
  }
}

/// Last phase: CTA 0's warp 0 reduces the CTAs' bests into the token id.
__device__ void argmaxPhase(const Args &a) {
  if (blockIdx.x != 0 || threadIdx.x >= 32)
    return;
  float bv = -INFINITY;
  int bi = INT_MAX;
  for (int c = threadIdx.x; c < (int)gridDim.x; c += 32) {
    const float v = __ldcg(a.bestVal + c);
    const int i = __ldcg(a.bestIdx + c);
    if (better(v, i, bv, bi))
      bv = v, bi = i;
  }
  for (int o = 16; o > 0; o /= 2) {
    const float v = __shfl_xor_sync(FULL, bv, o);
    const int i = __shfl_xor_sync(FULL, bi, o);
    if (better(v, i, bv, bi))
      bv = v, bi = i;
  }
  if (threadIdx.x == 0)
    *a.out = bi;
}

/// Prefetch of this CTA's blocks of 8 units (unitElems contiguous halves
/// each) of a phase, one bulk prefetch per block, from `lane` of warp 0;
/// at most `cap` bytes (at least the first block).
__device__ void prefetchUnits(const __half *w, int nUnits, int unitElems,
                              size_t cap, int lane) {
  const int nw = gridDim.x * WARPS;
  const size_t blockBytes = (size_t)WARPS * unitElems * 2;
  for (int k = lane;; k += 32) {
    const int u0 = k * nw + blockIdx.x * WARPS;
    if (u0 >= nUnits || (k > 0 && (size_t)(k + 1) * blockBytes > cap))
      break;
    const int n = min(WARPS, nUnits - u0);
    prefetchL2(w + (size_t)u0 * unitElems, (uint32_t)n * unitElems * 2);
  }
}

/// The QKV phase's blocks: q/k blocks are two runs of 8 rows (i0.. and
/// i0 + 32..) of one head, v blocks 16 consecutive rows.
__device__ void prefetchQkv(const LayerW &w, int lane) {
  const int nw = gridDim.x * WARPS;
  for (int k = lane;; k += 32) {
    const int u0 = k * nw + blockIdx.x * WARPS;
    if (u0 >= QKV_UNITS)
      break;
    if (u0 < Q_UNITS + K_UNITS) {
      const bool isQ = u0 < Q_UNITS;
      const int v = isQ ? u0 : u0 - Q_UNITS;
      const int row = v / (D / 2) * D + v % (D / 2);
      const __half *p = (isQ ? w.wq : w.wk) + (size_t)row * H;
      prefetchL2(p, WARPS * H * 2);
      prefetchL2(p + (size_t)(D / 2) * H, WARPS * H * 2);
    } else {
      const int row = 2 * (u0 - Q_UNITS - K_UNITS);
      prefetchL2(w.wv + (size_t)row * H, 2 * WARPS * H * 2);
    }
  }
}

/// Warp 0 prefetches into L2 what this CTA reads in phase ph: its weight
/// blocks, or for attention the K and V pages (all 3 heads) of its split.
__device__ void prefetchPhase(const Args &a, int ph) {
  if (threadIdx.x >= 32 || ph > PH_LM)
    return; // the argmax phase reads no weights
  const int lane = threadIdx.x;
  const size_t cap = kPrefetchCap / gridDim.x;
  if (ph == PH_LM)
    return prefetchUnits(a.emb, LM_UNITS, LM_ROWS * H, cap, lane);
  const LayerW w = a.layers[ph / PH_LAYER];
  switch (ph % PH_LAYER) {
  case 0:
    return prefetchQkv(w, lane);
  case 1: {
    if ((int)blockIdx.x >= NKV * a.splits)
      return;
    const int t0 = blockIdx.x % a.splits * a.splitLen;
    const int t1 = min(a.pos + 1, t0 + a.splitLen);
    for (int pg = t0 / PAGE + lane; pg <= (t1 - 1) / PAGE; pg += 32) {
      const size_t off = (size_t)__ldg(a.blockTable + pg) * PAGE * KVROW;
      prefetchL2(w.kc + off, PAGE * KVROW * 2);
      prefetchL2(w.vc + off, PAGE * KVROW * 2);
    }
    return;
  }
  case 2:
    return prefetchUnits(w.wo, H, H, cap, lane);
  case 3:
    prefetchUnits(w.wg, I, H, cap, lane);
    return prefetchUnits(w.wu, I, H, cap, lane);
  default:
    return prefetchUnits(w.wd, H, I, cap, lane);
  }
}

/// Runs phase ph of the step (layer 0 reads x straight from the embedding
/// row, so x0 needs no initialisation and replays are idempotent).
__device__ void runPhase(const Args &a, int ph, Smem &sm) {
  if (ph == PH_LM)
    return lmHeadPhase(a, sm);
  if (ph == PH_LM + 1)
    return argmaxPhase(a);
  const int layer = ph / PH_LAYER;
  const LayerW w = a.layers[layer];
  const __half *x = layer == 0 ? a.emb + (size_t)a.tokenIn * H : a.x0;
  switch (ph % PH_LAYER) {
  case 0:
    return qkvPhase(a, w, x, sm);
  case 1:
    return attentionPhase(a, w, sm);
  case 2:
    return oProjPhase(a, w, layer, x, sm);
  case 3:
    return gateUpPhase(a, w, sm);
  default:
    return downPhase(a, w, layer, sm);
  }
}

/// The whole decode step: NPH phases, a grid barrier between consecutive
/// ones; at the start of phase ph, the prefetch of phase ph + ahead (and at
/// ph = 0 of phases 1..ahead). Launched cooperatively (co-resident grid).
template <int CTAS>
__global__ void __launch_bounds__(THREADS, CTAS) decodeStep(Args a) {
  __shared__ Smem sm;
  for (int ph = 0; ph < NPH; ++ph) {
    if (a.ahead > 0)
      for (int d = ph == 0 ? 1 : a.ahead; d <= a.ahead; ++d)
        prefetchPhase(a, ph + d);
    if (a.mode == 0)
      runPhase(a, ph, sm);
    if (ph + 1 < NPH)
      gridSync(a.bar);
  }
}

struct Segment {
  const uint4 *p;
  size_t n;
};
/// The plain read: every 16-byte word of the segments once (the floor's
/// kernel: the weight bytes of one step in one launch).
__global__ void readAll(const Segment *segs, int nSegs, float *sink) {
  float acc = 0.f;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (int k = 0; k < nSegs; ++k) {
    const Segment s = segs[k];
#pragma unroll 4
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < s.n;
         i += stride) {
      const uint4 v = __ldg(s.p + i);
      acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
    }
  }
  if (acc == 12345.f)
    *sink = acc;
}

/// Deterministic uniform value in [-1, 1) from (seed, index).
__host__ __device__ inline float hashUnit(uint32_t seed, size_t i) {
  uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 32) * 40503u ^
               seed * 2246822519u;
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
  return (h & 0xffffff) / 8388608.f - 1.f;
}
/// p[i] = f16(offset + scale * hashUnit(seed, i)).
__global__ void fillHalf(__half *p, size_t n, uint32_t seed, float scale,
                         float offset) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2half_rn(offset + scale * hashUnit(seed, i));
}

// ---------------------------------------------------------------- host ----

static float gLut[65536]; // f16 bits -> float
static float hf(__half h) { return gLut[__half_as_ushort(h)]; }
static float f16r(double v) { return __half2float(__float2half_rn((float)v)); }
static const __half kNaN = __ushort_as_half(0xffff);

/// The model, the cache and the workspaces, on the device and (for the
/// reference) on the host.
struct Model {
  int P = 575, pagesUsed = 0, pages = 0;
  std::vector<int> bt;
  std::vector<__half *> dL, dK, dV;
  std::vector<std::vector<__half>> hL, hK, hV;
  __half *dEmb, *dGF;
  std::vector<__half> hEmb, hGF;
  std::vector<float> invFreq;
  LayerW *dTable;
  int *dBT;
  // Workspaces.
  __half *x0, *x1, *q, *act, *logits, *dbg, *dbgX;
  float *part, *bestVal, *sink;
  int *bestIdx, *out;
  unsigned *bar;
};

static std::vector<__half> toHost(const __half *p, size_t n) {
  std::vector<__half> h(n);
  CK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
  return h;
}
static void fill(__half *p, size_t n, uint32_t seed, float scale,
                 float offset) {
  fillHalf<<<2048, 256>>>(p, n, seed, scale, offset);
  CK(cudaGetLastError());
}

/// Weights (uniform in +-s/sqrt(fan_in): s = 3 for Wq and 2 for Wk, so the
/// scores q.k/8 have a std of about 2 and the softmax is not flat; 1
/// elsewhere; norm weights 1 +- 0.2; embedding +-0.1), the cache history
/// (K uniform +-2, V +-1, like the projected k and v), NaN in every slot at
/// or after P and in the spare pages, a shuffled block table.
static void buildModel(Model &m) {
  const float r576 = 1.f / std::sqrt(576.f), r1536 = 1.f / std::sqrt(1536.f);
  m.pagesUsed = m.P / PAGE + 1, m.pages = m.pagesUsed + kSparePages;
  std::vector<int> perm(m.pages);
  for (int i = 0; i < m.pages; ++i)
    perm[i] = i;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = m.pages - 1; i > 0; --i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(perm[i], perm[(s >> 33) % (i + 1)]);
  }
  m.bt.assign(perm.begin(), perm.begin() + m.pagesUsed);
  const size_t cacheElems = (size_t)m.pages * PAGE * KVROW;
  std::vector<LayerW> table(LAYERS);
  for (int l = 0; l < LAYERS; ++l) {
    __half *w, *kc, *vc;
    CK(cudaMalloc(&w, LAYER_ELEMS * 2));
    CK(cudaMalloc(&kc, cacheElems * 2));
    CK(cudaMalloc(&vc, cacheElems * 2));
    const uint32_t sd = 1000 + 16 * l;
    fill(w + OFF_Q, (size_t)H * H, sd + 0, 3 * r576, 0.f);
    fill(w + OFF_K, (size_t)KVROW * H, sd + 1, 2 * r576, 0.f);
    fill(w + OFF_V, (size_t)KVROW * H, sd + 2, r576, 0.f);
    fill(w + OFF_O, (size_t)H * H, sd + 3, r576, 0.f);
    fill(w + OFF_G, (size_t)I * H, sd + 4, r576, 0.f);
    fill(w + OFF_U, (size_t)I * H, sd + 5, r576, 0.f);
    fill(w + OFF_D, (size_t)H * I, sd + 6, r1536, 0.f);
    fill(w + OFF_N1, H, sd + 7, 0.2f, 1.f);
    fill(w + OFF_N2, H, sd + 8, 0.2f, 1.f);
    std::vector<__half> hk(cacheElems, kNaN), hv(cacheElems, kNaN);
    for (int t = 0; t < m.P; ++t) {
      const size_t base = ((size_t)m.bt[t / PAGE] * PAGE + t % PAGE) * KVROW;
      for (int j = 0; j < KVROW; ++j) {
        const size_t i = (size_t)t * KVROW + j;
        hk[base + j] = __float2half_rn(2.f * hashUnit(sd + 9, i));
        hv[base + j] = __float2half_rn(hashUnit(sd + 10, i));
      }
    }
    CK(cudaMemcpy(kc, hk.data(), cacheElems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(vc, hv.data(), cacheElems * 2, cudaMemcpyHostToDevice));
    table[l] = {w + OFF_Q,  w + OFF_K, w + OFF_V, w + OFF_O,
                w + OFF_G,  w + OFF_U, w + OFF_D, w + OFF_N1,
                w + OFF_N2, kc,        vc};
    m.dL.push_back(w), m.dK.push_back(kc), m.dV.push_back(vc);
    m.hK.push_back(std::move(hk)), m.hV.push_back(std::move(hv));
  }
  CK(cudaMalloc(&m.dEmb, (size_t)V * H * 2));
  CK(cudaMalloc(&m.dGF, H * 2));
  fill(m.dEmb, (size_t)V * H, 7, 0.1f, 0.f);
  fill(m.dGF, H, 8, 0.2f, 1.f);
  CK(cudaMalloc(&m.dTable, LAYERS * sizeof(LayerW)));
  CK(cudaMemcpy(m.dTable, table.data(), LAYERS * sizeof(LayerW),
                cudaMemcpyHostToDevice));
  CK(cudaMalloc(&m.dBT, m.pagesUsed * sizeof(int)));
  CK(cudaMemcpy(m.dBT, m.bt.data(), m.pagesUsed * sizeof(int),
                cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());
  for (int l = 0; l < LAYERS; ++l)
    m.hL.push_back(toHost(m.dL[l], LAYER_ELEMS));
  m.hEmb = toHost(m.dEmb, (size_t)V * H), m.hGF = toHost(m.dGF, H);
  m.invFreq.resize(D / 2);
  for (int i = 0; i < D / 2; ++i)
    m.invFreq[i] = (float)std::pow(THETA, -2.0 * i / D);
  CK(cudaMemcpyToSymbol(cInvFreq, m.invFreq.data(), D / 2 * 4));
}

/// The workspaces, and the barrier word (zeroed once, never again).
static void allocWork(Model &m, int maxGrid) {
  CK(cudaMalloc(&m.x0, H * 2));
  CK(cudaMalloc(&m.x1, H * 2));
  CK(cudaMalloc(&m.q, H * 2));
  CK(cudaMalloc(&m.act, I * 2));
  CK(cudaMalloc(&m.logits, (size_t)V * 2));
  CK(cudaMalloc(&m.dbg, (size_t)LAYERS * H * 2));
  CK(cudaMalloc(&m.dbgX, (size_t)LAYERS * 2 * H * 2));
  CK(cudaMalloc(&m.part, (size_t)NQ * kMaxSplits * PART * 4));
  CK(cudaMalloc(&m.bestVal, maxGrid * 4));
  CK(cudaMalloc(&m.bestIdx, maxGrid * 4));
  CK(cudaMalloc(&m.out, 4));
  CK(cudaMalloc(&m.sink, 4));
  CK(cudaMalloc(&m.bar, 128));
  CK(cudaMemset(m.bar, 0, 128));
}

/// NaN (f16 and f32) into every workspace and the KV slot of position P,
/// so that a read before its producer shows.
static void poison(const Model &m, int maxGrid) {
  for (auto [p, n] : {std::pair<void *, size_t>{m.x0, H * 2},
                      {m.x1, H * 2},
                      {m.q, H * 2},
                      {m.act, I * 2},
                      {m.logits, (size_t)V * 2},
                      {m.dbg, (size_t)LAYERS * H * 2},
                      {m.dbgX, (size_t)LAYERS * 2 * H * 2},
                      {m.part, (size_t)NQ * kMaxSplits * PART * 4},
                      {m.bestVal, (size_t)maxGrid * 4},
                      {m.bestIdx, (size_t)maxGrid * 4},
                      {m.out, 4}})
    CK(cudaMemset(p, 0xff, n));
  const size_t slot = ((size_t)m.bt[m.P / PAGE] * PAGE + m.P % PAGE) * KVROW;
  for (int l = 0; l < LAYERS; ++l) {
    CK(cudaMemset(m.dK[l] + slot, 0xff, KVROW * 2));
    CK(cudaMemset(m.dV[l] + slot, 0xff, KVROW * 2));
  }
  CK(cudaDeviceSynchronize());
}

/// dot(w[0..n), x) in double (four chains).
static double dotRef(const __half *w, const float *x, int n) {
  double s[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; i += 4)
    for (int j = 0; j < 4; ++j)
      s[j] += (double)hf(w[i + j]) * x[i + j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}
static std::vector<float> rmsNormRef(const std::vector<float> &x,
                                     const __half *g) {
  double ss = 0;
  for (float v : x)
    ss += (double)v * v;
  const double rstd = 1.0 / std::sqrt(ss / H + EPS);
  std::vector<float> h(H);
  for (int i = 0; i < H; ++i)
    h[i] = f16r(f16r(x[i] * rstd) * hf(g[i]));
  return h;
}

/// Softmax attention of one query head over positions 0..P (the new k, v
/// at P), f16 output.
static void attentionRef(const Model &m, int l, int qh, const float *q,
                         const float *kN, const float *vN, float *out) {
  const int g = qh / G, P = m.P;
  std::vector<double> sc(P + 1);
  double mx = -1e300;
  auto row = [&](const std::vector<__half> &c, int t) {
    return &c[((size_t)m.bt[t / PAGE] * PAGE + t % PAGE) * KVROW + g * D];
  };
  for (int t = 0; t <= P; ++t) {
    double s = 0;
    for (int d = 0; d < D; ++d)
      s += (double)q[d] * (t == P ? kN[g * D + d] : hf(row(m.hK[l], t)[d]));
    sc[t] = s / 8.0, mx = std::max(mx, sc[t]);
  }
  double sum = 0, o[D] = {};
  for (int t = 0; t <= P; ++t) {
    const double p = std::exp(sc[t] - mx);
    sum += p;
    for (int d = 0; d < D; ++d)
      o[d] += p * (t == P ? vN[g * D + d] : hf(row(m.hV[l], t)[d]));
  }
  for (int d = 0; d < D; ++d)
    out[d] = f16r(o[d] / sum);
}

// The reference, one piece at a time (f16 rounding at the kernel's points,
// double accumulation), so that the check can also feed each piece the
// kernel's own inputs.

/// From x entering layer l: the appended k and v ([192] each, after RoPE)
/// and the attention output [576].
static void qkvAttentionRef(const Model &m, int l, const std::vector<float> &x,
                            float *kN, float *vN, float *attn) {
  const __half *w = m.hL[l].data();
  const std::vector<float> h = rmsNormRef(x, w + OFF_N1);
  std::vector<float> q(H);
  for (int i = 0; i < H; ++i)
    q[i] = f16r(dotRef(w + OFF_Q + (size_t)i * H, h.data(), H));
  for (int i = 0; i < KVROW; ++i) {
    kN[i] = f16r(dotRef(w + OFF_K + (size_t)i * H, h.data(), H));
    vN[i] = f16r(dotRef(w + OFF_V + (size_t)i * H, h.data(), H));
  }
  for (int hd = 0; hd < NQ + NKV; ++hd) { // RoPE, NeoX pairs (i, i + 32)
    float *v = hd < NQ ? &q[hd * D] : &kN[(hd - NQ) * D];
    for (int i = 0; i < D / 2; ++i) {
      const double ang = (double)((float)m.P * m.invFreq[i]);
      const double c = std::cos(ang), s = std::sin(ang), y0 = v[i],
                   y1 = v[i + D / 2];
      v[i] = f16r(y0 * c - y1 * s), v[i + D / 2] = f16r(y1 * c + y0 * s);
    }
  }
  for (int qh = 0; qh < NQ; ++qh)
    attentionRef(m, l, qh, &q[qh * D], kN, vN, attn + qh * D);
}
/// x1 = x + attn Wo^T (f16).
static std::vector<float> oResidualRef(const Model &m, int l,
                                       const std::vector<float> &x,
                                       const float *attn) {
  std::vector<float> x1(H);
  for (int i = 0; i < H; ++i)
    x1[i] = f16r((double)x[i] +
                 f16r(dotRef(m.hL[l].data() + OFF_O + (size_t)i * H, attn, H)));
  return x1;
}
/// x0 = x1 + (silu(h2 Wg^T) * (h2 Wu^T)) Wd^T, h2 = RMSNorm(x1) * g2 (f16).
static std::vector<float> mlpRef(const Model &m, int l,
                                 const std::vector<float> &x1) {
  const __half *w = m.hL[l].data();
  const std::vector<float> h = rmsNormRef(x1, w + OFF_N2);
  std::vector<float> a(I), x0(H);
  for (int i = 0; i < I; ++i) {
    const double gt = f16r(dotRef(w + OFF_G + (size_t)i * H, h.data(), H));
    const double up = f16r(dotRef(w + OFF_U + (size_t)i * H, h.data(), H));
    a[i] = f16r(f16r(gt / (1 + std::exp(-gt))) * up);
  }
  for (int i = 0; i < H; ++i)
    x0[i] = f16r((double)x1[i] +
                 f16r(dotRef(w + OFF_D + (size_t)i * I, a.data(), I)));
  return x0;
}
/// logits = (RMSNorm(x) * gF) Wemb^T (f16).
static std::vector<float> logitsRef(const Model &m,
                                    const std::vector<float> &x) {
  const std::vector<float> h = rmsNormRef(x, m.hGF.data());
  std::vector<float> lg(V);
  for (int v = 0; v < V; ++v)
    lg[v] = f16r(dotRef(&m.hEmb[(size_t)v * H], h.data(), H));
  return lg;
}
/// Index of the maximum, the lowest on ties.
static int argmaxOf(const std::vector<float> &v) {
  int best = 0;
  for (int i = 1; i < (int)v.size(); ++i)
    best = v[i] > v[best] ? i : best;
  return best;
}
static std::vector<float> embRow(const Model &m, int token) {
  std::vector<float> x(H);
  for (int i = 0; i < H; ++i)
    x[i] = hf(m.hEmb[(size_t)token * H + i]);
  return x;
}

/// The free-running reference of the whole step: logits [V], their argmax,
/// max |x| of the final residual.
struct Ref {
  std::vector<float> logits;
  int argmax = 0;
  double xMax = 0;
};
static Ref reference(const Model &m, int token) {
  Ref r;
  std::vector<float> x = embRow(m, token), k(KVROW), v(KVROW), attn(H);
  for (int l = 0; l < LAYERS; ++l) {
    qkvAttentionRef(m, l, x, k.data(), v.data(), attn.data());
    x = mlpRef(m, l, oResidualRef(m, l, x, attn.data()));
  }
  for (float e : x)
    r.xMax = std::max(r.xMax, (double)std::fabs(e));
  r.logits = logitsRef(m, x), r.argmax = argmaxOf(r.logits);
  return r;
}

/// max |got - ref| / max(1, |ref|) over the logits; infinity if any value
/// is not finite.
static double logitErr(const std::vector<float> &got,
                       const std::vector<float> &ref) {
  double err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i]))
      return INFINITY;
    err = std::max(err, std::fabs((double)got[i] - ref[i]) /
                            std::max(1.0, (double)std::fabs(ref[i])));
  }
  return err;
}
/// max |got - ref| / max |ref| of one quantity over all layers (infinity if
/// the device's values are not all finite).
struct ErrAcc {
  double diff = 0, ref = 0;
  bool finite = true;
  void add(const float *got, const float *want, int n) {
    for (int i = 0; i < n; ++i) {
      finite = finite && std::isfinite(got[i]);
      diff = std::max(diff, std::fabs((double)got[i] - want[i]));
      ref = std::max(ref, (double)std::fabs(want[i]));
    }
  }
  double err() const { return finite ? diff / std::max(ref, 1e-30) : INFINITY; }
};
static std::vector<float> fetch(const __half *p, size_t n) {
  const std::vector<__half> h = toHost(p, n);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i)
    f[i] = __half2float(h[i]);
  return f;
}

/// The check of one launch. Layer by layer, from the kernel's own input to
/// each piece (teacher forcing): the appended k/v and the attention output
/// from the x entering the layer, x1 from that x and the kernel's attention
/// output, x0 from the kernel's x1, the logits from the kernel's final x
/// (bound kBound); then the logits against the free-running reference
/// (kFreeBound) and the token: the argmax of the kernel's own logits, and
/// that of the logits from its x or within twice their max error (a near
/// tie). Returns whether it passed; `line` gets the numbers.
static bool check(const Model &m, const Ref &r, int tokenIn,
                  std::vector<__half> &logits, int &token, std::string &line) {
  logits = toHost(m.logits, V);
  CK(cudaMemcpy(&token, m.out, 4, cudaMemcpyDeviceToHost));
  std::vector<float> lg(V);
  for (int v = 0; v < V; ++v)
    lg[v] = __half2float(logits[v]);
  const std::vector<float> at = fetch(m.dbg, (size_t)LAYERS * H);
  const std::vector<float> xs = fetch(m.dbgX, (size_t)LAYERS * 2 * H);
  const size_t slot = ((size_t)m.bt[m.P / PAGE] * PAGE + m.P % PAGE) * KVROW;
  ErrAcc eKV, eAttn, eX;
  std::vector<float> x = embRow(m, tokenIn), k(KVROW), v(KVROW), attn(H);
  for (int l = 0; l < LAYERS; ++l) {
    qkvAttentionRef(m, l, x, k.data(), v.data(), attn.data());
    eKV.add(fetch(m.dK[l] + slot, KVROW).data(), k.data(), KVROW);
    eKV.add(fetch(m.dV[l] + slot, KVROW).data(), v.data(), KVROW);
    eAttn.add(&at[(size_t)l * H], attn.data(), H);
    const float *dx = xs.data() + (size_t)2 * l * H; // x1, then x0
    const std::vector<float> x1(dx, dx + H);
    eX.add(x1.data(), oResidualRef(m, l, x, &at[(size_t)l * H]).data(), H);
    x.assign(dx + H, dx + 2 * H);
    eX.add(x.data(), mlpRef(m, l, x1).data(), H);
  }
  const std::vector<float> lgRef = logitsRef(m, x);
  const double eL = logitErr(lg, lgRef), eFree = logitErr(lg, r.logits);
  double absErr = 0;
  for (int i = 0; i < V; ++i)
    absErr = std::max(absErr, std::fabs((double)lg[i] - lgRef[i]));
  const int own = argmaxOf(lg), want = argmaxOf(lgRef);
  const bool tokOk =
      token == own && (own == want || lgRef[own] >= lgRef[want] - 2 * absErr);
  const double errs[] = {eKV.err(), eAttn.err(), eX.err(), eL};
  bool pass = tokOk && eFree < kFreeBound;
  for (double e : errs)
    pass = pass && e < kBound;
  char buf[400];
  snprintf(buf, sizeof buf,
           "from the kernel's inputs: k/v %.1e, attention %.1e, x %.1e, "
           "logits %.1e (bound %.0e); free-running logits %.1e (bound %.2f); "
           "token %d (own argmax %d, from its x %d, free-running %d) %s",
           errs[0], errs[1], errs[2], eL, kBound, eFree, kFreeBound, token, own,
           want, r.argmax, pass ? "PASS" : "FAIL");
  line = buf;
  return pass;
}

using LaunchFn = void (*)(const Args &, int, cudaStream_t, bool);
/// One launch of the step with cudaLaunchKernelEx; `coop`: with
/// cudaLaunchAttributeCooperative (the runtime then refuses a grid that is
/// not co-resident; stream capture makes it a cooperative graph node).
template <int CTAS>
static cudaError_t launchStepEx(const Args &a, int grid, cudaStream_t s,
                                bool coop) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid), cfg.blockDim = dim3(THREADS), cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr, cfg.numAttrs = coop ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, decodeStep<CTAS>, a);
}
template <int CTAS>
static void launchStep(const Args &a, int grid, cudaStream_t s, bool coop) {
  CK(launchStepEx<CTAS>(a, grid, s, coop));
}

/// Whether a cooperative launch captures into a CUDA graph and runs from it
/// (CUDA 12+: it should); tried with `a` (a barriers-only step). If not, the
/// timed graphs launch without the attribute: the grid is still co-resident (it
/// is the occupancy query's, checked by the cooperative launch of the check,
/// and nothing else runs on the device).
static bool coopCaptures(const Args &a, int grid) {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const cudaError_t e1 = launchStepEx<1>(a, grid, s, true);
  cudaError_t e = cudaStreamEndCapture(s, &g);
  if (e1 == cudaSuccess && e == cudaSuccess)
    e = cudaGraphInstantiate(&ge, g, 0);
  if (e1 == cudaSuccess && e == cudaSuccess)
    e = cudaGraphLaunch(ge, s);
  if (e1 == cudaSuccess && e == cudaSuccess)
    e = cudaStreamSynchronize(s);
  const bool ok = e1 == cudaSuccess && e == cudaSuccess;
  if (!ok)
    printf("note: a cooperative launch does not capture (%s); the timed "
           "graphs launch without the attribute\n",
           cudaGetErrorString(e1 ? e1 : e));
  cudaGetLastError();
  if (ge)
    cudaGraphExecDestroy(ge);
  if (g)
    cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  return ok;
}

/// The kernel's arguments for the model's buffers.
static Args makeArgs(const Model &m, int token, int splits, int splitLen,
                     int mode, int ahead) {
  Args a;
  a.layers = m.dTable, a.emb = m.dEmb, a.gF = m.dGF, a.blockTable = m.dBT;
  a.x0 = m.x0, a.x1 = m.x1, a.q = m.q, a.act = m.act, a.logits = m.logits;
  a.dbgAttn = m.dbg, a.dbgX = m.dbgX, a.part = m.part, a.bestVal = m.bestVal;
  a.bestIdx = m.bestIdx, a.out = m.out, a.bar = m.bar;
  a.tokenIn = token, a.pos = m.P, a.splits = splits, a.splitLen = splitLen;
  a.mode = mode, a.ahead = ahead;
  a.scale = (float)(1.4426950408889634 / std::sqrt((double)D));
  return a;
}

struct Variant {
  const char *name;
  int ctas, ahead, mode;
};
struct Result {
  float us;
  bool pass;
};

/// One variant: the co-residency check, (decode variants) one checked
/// cooperative launch on poisoned workspaces, the timing, then the replays'
/// logits and token compared bit for bit with the checked launch.
static Result runVariant(const Model &m, const Ref &ref, const Variant &v,
                         int sms, int token, int userSplits, double floorUs,
                         bool coopGraph) {
  LaunchFn launch = v.ctas == 1 ? launchStep<1> : launchStep<2>;
  int perSM = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &perSM, v.ctas == 1 ? decodeStep<1> : decodeStep<2>, THREADS, 0));
  if (perSM < v.ctas) {
    printf("refused: %s needs %d co-resident CTAs per SM, the occupancy "
           "query allows %d\n",
           v.name, v.ctas, perSM);
    exit(1);
  }
  const int grid = sms * v.ctas, n = m.P + 1;
  int S = std::min({userSplits > 0 ? userSplits : 16, grid / NKV, n});
  const int len = (n + S - 1) / S;
  S = (n + len - 1) / len; // every split non-empty
  const Args a = makeArgs(m, token, S, len, v.mode, v.ahead);
  Result res{0.f, true};
  std::vector<__half> first;
  int tok = -1, tokAgain = -2;
  std::string line;
  if (v.mode == 0) {
    poison(m, grid);
    launch(a, grid, nullptr, true);
    CK(cudaDeviceSynchronize());
    res.pass = check(m, ref, token, first, tok, line);
  }
  res.us = timeGraph(
      [&](int, cudaStream_t s) { launch(a, grid, s, coopGraph); }, COPIES);
  if (v.mode == 0) {
    const std::vector<__half> again = toHost(m.logits, V);
    CK(cudaMemcpy(&tokAgain, m.out, 4, cudaMemcpyDeviceToHost));
    const bool same =
        tokAgain == tok && std::memcmp(first.data(), again.data(), V * 2) == 0;
    line += same ? "; replays identical" : "; replays DIFFER: FAIL";
    res.pass = res.pass && same;
  }
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, v.ctas == 1 ? decodeStep<1> : decodeStep<2>));
  printf("  %-32s grid %3d (%d regs), %2d splits of %3d: %8.2f us/step = "
         "%5.1f%% of the floor\n",
         v.name, grid, fa.numRegs, S, len, res.us, 100 * floorUs / res.us);
  if (v.mode == 0)
    printf("    check: %s\n", line.c_str());
  else
    printf("    %.2f us per barrier (%d barriers)\n", res.us / (NPH - 1),
           NPH - 1);
  return res;
}

/// The plain read of one step's weight bytes (all layers, then the LM head)
/// in one launch; returns us.
static float plainRead(const Model &m, int sms) {
  std::vector<Segment> segs;
  for (int l = 0; l < LAYERS; ++l)
    segs.push_back({reinterpret_cast<const uint4 *>(m.dL[l]), LAYER_ELEMS / 8});
  segs.push_back({reinterpret_cast<const uint4 *>(m.dEmb), (size_t)V * H / 8});
  Segment *dSegs;
  CK(cudaMalloc(&dSegs, segs.size() * sizeof(Segment)));
  CK(cudaMemcpy(dSegs, segs.data(), segs.size() * sizeof(Segment),
                cudaMemcpyHostToDevice));
  const int nSegs = (int)segs.size();
  float us = timeGraph(
      [&](int, cudaStream_t s) {
        readAll<<<sms * 4, 512, 0, s>>>(dSegs, nSegs, m.sink);
      },
      COPIES);
  CK(cudaFree(dSegs));
  return us;
}

int main(int argc, char **argv) {
  Model m;
  const int userSplits = argc > 2 ? std::atoi(argv[2]) : 0;
  if (argc > 1)
    m.P = std::atoi(argv[1]);
  if (m.P < 0 || m.P > kMaxPos || userSplits < 0 || userSplits > kMaxSplits) {
    printf("usage: persistent_decode [P in 0..%d] [S in 1..%d]\n", kMaxPos,
           kMaxSplits);
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int coop = 0;
  CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
  if (!coop) {
    printf("refused: %s has no cooperative launch\n", prop.name);
    return 1;
  }
  const int sms = prop.multiProcessorCount;
  for (int i = 0; i < 65536; ++i)
    gLut[i] = __half2float(__ushort_as_half((unsigned short)i));
  buildModel(m);
  allocWork(m, 2 * sms);
  const int token = 4242;
  auto c0 = std::chrono::steady_clock::now();
  const Ref ref = reference(m, token);
  const double refS =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - c0)
          .count();
  const double wBytes = (double)LAYERS * LAYER_ELEMS * 2 + (double)V * H * 2;
  const double kvBytes = (double)LAYERS * (m.P + 1) * KVROW * 2 * 2;
  printf("persistent_decode: %s, %d SMs, L2 %d MB; SmolLM2-135M step, token "
         "%d at position P=%d (%d attended); bytes per step: weights %.1f MB "
         "+ K/V %.1f MB = %.1f MB\n",
         prop.name, sms, prop.l2CacheSize >> 20, token, m.P, m.P + 1,
         wBytes / 1e6, kvBytes / 1e6, (wBytes + kvBytes) / 1e6);
  const auto mm = std::minmax_element(ref.logits.begin(), ref.logits.end());
  printf("CPU reference (%.2f s): logits in [%.3f, %.3f], argmax %d, final "
         "max |x| %.3f; check bound %.0e (about 20 f16 ulps of a logit)\n",
         refS, *mm.first, *mm.second, ref.argmax, ref.xMax, kBound);
  const Args probe = makeArgs(m, token, 1, m.P + 1, 1, 0);
  const bool coopGraph = coopCaptures(probe, sms);
  const float readUs = plainRead(m, sms);
  const double tbps = wBytes / (readUs * 1e-6) / 1e12;
  const double floorUs = (wBytes + kvBytes) / (tbps * 1e12) * 1e6;
  printf("plain read of the weights (1 launch): %.2f us = %.2f TB/s; floor "
         "per step at that bandwidth (weights + K/V): %.2f us\n",
         readUs, tbps, floorUs);
  const Variant variants[] = {{"1 CTA/SM, no prefetch", 1, 0, 0},
                              {"1 CTA/SM, prefetch next phase", 1, 1, 0},
                              {"1 CTA/SM, prefetch 2 phases on", 1, 2, 0},
                              {"1 CTA/SM, barriers only", 1, 0, 1},
                              {"2 CTAs/SM, no prefetch", 2, 0, 0},
                              {"2 CTAs/SM, prefetch next phase", 2, 1, 0},
                              {"2 CTAs/SM, prefetch 2 phases on", 2, 2, 0},
                              {"2 CTAs/SM, barriers only", 2, 0, 1}};
  int failures = 0, best = -1;
  float bestUs = 0.f, barrierUs[3] = {};
  for (int i = 0; i < (int)(sizeof variants / sizeof variants[0]); ++i) {
    const Variant &v = variants[i];
    const Result r =
        runVariant(m, ref, v, sms, token, userSplits, floorUs, coopGraph);
    failures += !r.pass;
    if (v.mode == 1)
      barrierUs[v.ctas] = r.us;
    else if (r.pass && (best < 0 || r.us < bestUs))
      best = i, bestUs = r.us;
  }
  if (best < 0) {
    printf("FAIL: no decode variant passed its check\n");
    return 1;
  }
  printf("best: %s, %.2f us/step (floor %.2f us, barriers alone %.2f / "
         "%.2f us at 1 / 2 CTAs per SM; compiled decode today 705 us, "
         "target <= 330 us) %s\n",
         variants[best].name, bestUs, floorUs, barrierUs[1], barrierUs[2],
         failures ? "FAIL" : "all checks PASS");
  return failures ? 1 : 0;
}
