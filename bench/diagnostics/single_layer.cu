// Diagnostic microbenchmark (issue 13; docs/performance.md entry 48): the
// front half of one Llama-3-8B layer at batch B in ONE kernel, with the KV
// history streaming while the weights do. Gate for `strategy=single`: does
// it reach issue 13's targets (1 x 1024 <= 15.3 us, 1 x 4096 <= 18.8 per
// layer-step) where the two emitted kernels take 23.4 / 28.9?
//
// Entry 23's draft (warp-granular items from one queue) took 42 us at
// 1 x 1024: too few bytes in flight per warp, attention items holding warps
// that could stream. Here every CTA streams from its first cycle, by bulk
// copies, and waits only once its own weights are done:
//   - grid: 128 CTAs (one per SM; cooperative launch), each 8 consumer
//     warps and 1 producer warp. CTA c owns the 48 weight rows [48c, 48c +
//     48) of W [6144, 4096] (q rows 0-4095, k 4096-5119, v 5120-6143: one
//     contiguous 384 KB block) and one attention item: (sequence b, KV head
//     g, split s) with 16 / B splits per (b, g).
//   - the producer's lane 0 issues the first 5 of the 24 weight stages (16
//     KB = 2 rows each, one cp.async.bulk; a 5-stage ring, 80 KB), then the
//     item's first 16 K/V tiles (TMA boxes {64 d, 1 head, 16 rows}, 128-byte
//     swizzle, the tile layout of attention_tile.cuh) into a 16-slot ring
//     (128 KB), then the other weight stages, then the item's remaining
//     tiles as slots free.
//   - consumers: RMSNorm of x (each lane's 16 columns of every token, in
//     registers), the GEMV of each stage (warp w: columns [512 w, 512 w +
//     512)), the partials reduced through shared memory; the 48 rows x B to
//     the q/k/v buffer (f16), k/v also appended to the cache at position
//     lens[b]; then done[c] = epoch + 1 (release).
//   - attention: wait (acquire) for the <= 20 CTAs that own the group's q,
//     k and v rows, then the tiles from the ring (warp w: tiles w, w + 8,
//     ...; the per-tile math of attention_tile.cuh), the warps merged into
//     the split's partial; the last split of (b, g) to arrive adds the new
//     token (its q.k from the q/k/v buffer) and writes the output.
//   - counters: `done` compares against an epoch the last CTA to finish
//     increments, the arrival counters are reset by their last arrival: no
//     memset between steps or graph replays.
// Not modelled (the emitter's work, not the bytes): RoPE (the rotation
// pairs of a head must then sit in one CTA: rows permuted offline), bias,
// other shapes.
//
// Modes, each an 8-layer CUDA graph (8 copies of W and the caches, more
// than L2), us per layer-step, median of 100 replays:
//   single  the item's first 16 tiles issued with the weights
//   serial  the same kernel issuing the tiles only after its weights
//   proj    the projection alone (no attention)
//   single pfN pub / end, proj pf32  single (proj) in which each CTA asks
//           L2 for the first N of its 48 rows of the next layer's W once it
//           has published its rows / just before it exits (entry 50: DRAM
//           idles during the attention chain and the layer boundary; asked
//           by the producer once it had issued this layer's copies, the
//           prefetch slowed every step)
//   read    a plain 16-byte read of the same bytes, one launch per layer
// Checks: the q/k/v rows against float64 RMSNorm + GEMV from the f16
// inputs; the cache rows appended; the attention output against a float64
// softmax over the history and the new token (its q, k, v the kernel's
// f16 rows); unused cache slots NaN-poisoned; again after the timed replays
// (the counters reset). Each timed mode also prints its last launch's
// phases: per-CTA %globaltimer stamps (entry, normalised, GEMV done,
// published, rows ready, attended, combined, exit), min / median / max.
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 \
//     single_layer.cu -o single_layer -lcuda && ./single_layer
// nvcc-flags: -gencode arch=compute_90a,code=sm_90a -lcuda
#include "attention_tile.cuh"
#include "graph_timing.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

constexpr int H = 4096, N = (HQ + 2 * HKV) * D; // hidden size, q/k/v rows
constexpr int kCtas = 128, kRows = N / kCtas;   // 48 rows per CTA
constexpr int kWarps = 8, kThreads = (kWarps + 1) * 32;
constexpr int kStageRows = 2, kStages = kRows / kStageRows;
constexpr int kStageBytes = kStageRows * H * 2;   // 16 KB
constexpr int kWS = 5, kKS = 16;                  // weight stages, K/V slots
constexpr int kTile = 2 * tileBytes<kSwizzled>(); // K + V of a tile, 8 KB
constexpr int kLayers = 8;
constexpr float kEps = 1e-5f;
constexpr double kTolerance = 5e-3;
static_assert(N % kCtas == 0 && kRows % kStageRows == 0, "row blocks");
static_assert(kKS % kWarps == 0, "a slot's phases go to one warp");
/// Dynamic shared memory: 1 KiB alignment slack, the rings, the GEMV
/// partials [kWarps][kRows][B] (also normalise's [kWarps][B]).
constexpr size_t smemBytes(int B) {
  return 1024 + kKS * kTile + kWS * kStageBytes + kWarps * kRows * B * 4;
}
// With ~400 static bytes, within sm_90's 232448 per block at B = 8.
static_assert(smemBytes(8) + 512 <= 232448, "shared memory");

/// Cross-CTA state, shared by all layers (launches are serialised).
struct Sync {
  unsigned epoch, finished;
  unsigned done[kCtas];
  unsigned arrivals[8 * HKV]; // per (b, g)
};

/// Per-CTA %globaltimer stamps (ns) of the last launch, by thread 0: entry,
/// normalised, GEMV done, published, rows ready, attended, combined (for a
/// split that does not combine: arrived), exit.
constexpr int kPhases = 8;
__device__ unsigned long long gStamps[kCtas][kPhases];
__device__ __forceinline__ void stamp(int phase) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    gStamps[blockIdx.x][phase] = t;
  }
}

struct LayerArgs {
  const __half *x, *gamma; // [B, H], [H]
  const __half *w;         // [N, H]
  const __half *wNext;     // the next layer's W (the prefetch modes)
  __half *k, *v;           // [pool pages, P, HKV, D]
  const int *table, *lens; // [B, maxPages], [B] (the new token's position)
  __half *qkv;             // [B, N]
  float *po, *pml;         // [B, HKV, splits, G, D], [.., G, 2]
  float *out;              // [B, HQ, D]
  Sync *sync;
  int maxPages, preload, attention;
  int prefetchRows, prefetchAtExit; // next-layer rows asked of L2, and when
};

/// Spins until done[c] == want; traps after about 4 s (a hang becomes an
/// error instead of the command's time limit).
__device__ void waitFlag(const unsigned *p, unsigned want) {
  long long t0 = clock64();
  while (ldAcquire(p) != want) {
    __nanosleep(64);
    if (clock64() - t0 > 8000000000ll)
      __trap();
  }
}
__device__ __forceinline__ void stRelease(unsigned *p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v)
               : "memory");
}

/// This CTA's attention item: tiles [tile0, tile0 + n) of sequence b's
/// history in KV head g, split s of `splits`.
struct Item {
  int b, g, s, splits, tile0, n, len;
};
template <int B>
__device__ Item itemOf(const LayerArgs &a) {
  constexpr int splits = kCtas / (B * HKV);
  int c = blockIdx.x, b = c / (HKV * splits), g = c / splits % HKV;
  int s = c % splits, len = a.lens[b], tiles = (len + P - 1) / P;
  int tps = (tiles + splits - 1) / splits, tile0 = s * tps;
  return {b, g, s, splits, tile0, max(0, min(tiles, tile0 + tps) - tile0), len};
}

struct Smem {
  uint8_t *kv, *w; // the K/V ring (1 KiB aligned), the weight ring
  float *red;      // [kWarps][kRows][B] GEMV partials
  uint64_t *wFull, *wEmpty, *kFull, *kEmpty;
};

/// The producer warp (all lanes wait, lane 0 issues): the CTA's first kWS
/// weight stages, K/V tiles [0, first) of the item, the other weight
/// stages, then tiles [first, n).
__device__ void produce(const LayerArgs &a, const Item &it, const Smem &sm,
                        const CUtensorMap *kmap, const CUtensorMap *vmap) {
  int lane = threadIdx.x & 31;
  const int *table = a.table + it.b * a.maxPages + it.tile0;
  int n = a.attention ? it.n : 0, first = a.preload ? min(n, kKS) : 0;
  auto tiles = [&](int from, int to) {
    int cur = 0;
    for (int i = from; i < to; ++i) {
      if ((i - from) % 32 == 0) // block-table entries i..i+31, one per lane
        cur = i + lane < to ? table[i + lane] : 0;
      int page = __shfl_sync(~0u, cur, (i - from) % 32), slot = i % kKS;
      if (i >= kKS)
        mbarWait(&sm.kEmpty[slot], (i / kKS - 1) & 1);
      if (lane == 0) {
        uint8_t *dst = sm.kv + slot * kTile;
        mbarExpectTx(&sm.kFull[slot], kTile);
        for (int kv = 0; kv < 2; ++kv)
          for (int half = 0; half < 2; ++half)
            tma3d(dst + kv * tileBytes<kSwizzled>() + half * P * 128,
                  kv ? vmap : kmap, half * kBox, it.g, page * P,
                  &sm.kFull[slot]);
      }
    }
  };
  const uint8_t *w =
      reinterpret_cast<const uint8_t *>(a.w + (size_t)blockIdx.x * kRows * H);
  auto stages = [&](int from, int to) {
    for (int s = from; s < to; ++s) {
      int slot = s % kWS;
      if (s >= kWS)
        mbarWait(&sm.wEmpty[slot], (s / kWS - 1) & 1);
      if (lane == 0) {
        mbarExpectTx(&sm.wFull[slot], kStageBytes);
        bulkCopy(sm.w + slot * kStageBytes, w + (size_t)s * kStageBytes,
                 kStageBytes, &sm.wFull[slot]);
      }
    }
  };
  stages(0, kWS); // no waits: the weights start first
  tiles(0, first);
  stages(kWS, kStages);
  tiles(first, n);
}

/// Warp 0 asks L2 for the first a.prefetchRows of this CTA's rows of the
/// next layer's W (8 KB each, one per lane), to stream while the attention
/// chain and the layer boundary leave DRAM idle.
__device__ void prefetchNextRows(const LayerArgs &a) {
  const uint8_t *next = reinterpret_cast<const uint8_t *>(
      a.wNext + (size_t)blockIdx.x * kRows * H);
  if (threadIdx.x < 32)
    for (int r = threadIdx.x; r < a.prefetchRows; r += 32)
      prefetchL2(next + (size_t)r * H * 2, H * 2);
}

/// x[b] * gamma * rsqrt(mean(x[b]^2) + eps) at this lane's 16 columns
/// (8 from 512 warp + 8 lane, 8 from 256 further), all 256 consumers.
template <int B>
__device__ void normalise(const LayerArgs &a, float (&xg)[B][16], float *red) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint4 *g4 = reinterpret_cast<const uint4 *>(a.gamma);
  uint4 gw[2] = {__ldg(g4 + 64 * warp + lane),
                 __ldg(g4 + 64 * warp + 32 + lane)};
  float ss[B];
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const uint4 *x4 = reinterpret_cast<const uint4 *>(a.x + (size_t)b * H);
    ss[b] = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint4 xv = __ldg(x4 + 64 * warp + 32 * h + lane);
      const __half *xe = reinterpret_cast<const __half *>(&xv),
                   *ge = reinterpret_cast<const __half *>(&gw[h]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float xf = __half2float(xe[j]);
        ss[b] += xf * xf;
        xg[b][8 * h + j] = xf * __half2float(ge[j]);
      }
    }
    for (int o = 16; o > 0; o /= 2)
      ss[b] += __shfl_xor_sync(~0u, ss[b], o);
    if (lane == 0)
      red[warp * B + b] = ss[b];
  }
  namedBarrier(1, kWarps * 32);
#pragma unroll
  for (int b = 0; b < B; ++b) {
    float t = 0;
    for (int w = 0; w < kWarps; ++w)
      t += red[w * B + b];
    float r = rsqrtf(t / H + kEps);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      xg[b][j] *= r;
  }
  namedBarrier(1, kWarps * 32); // red is reused by the GEMV
}

/// The CTA's 48 rows x B tokens: stages from the weight ring, each warp's
/// lane partials reduced by shuffles into red[warp][row][b].
template <int B>
__device__ void gemv(const Smem &sm, const float (&xg)[B][16]) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int s = 0; s < kStages; ++s) {
    int slot = s % kWS;
    mbarWait(&sm.wFull[slot], (s / kWS) & 1);
    const uint4 *st =
        reinterpret_cast<const uint4 *>(sm.w + slot * kStageBytes);
    float acc[kStageRows][B] = {};
#pragma unroll
    for (int r = 0; r < kStageRows; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint4 wv = st[r * (H / 8) + 64 * warp + 32 * h + lane];
        const __half2 *we = reinterpret_cast<const __half2 *>(&wv);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          float2 wf = __half22float2(we[j]);
#pragma unroll
          for (int b = 0; b < B; ++b)
            acc[r][b] +=
                wf.x * xg[b][8 * h + 2 * j] + wf.y * xg[b][8 * h + 2 * j + 1];
        }
      }
    __syncwarp();
    if (lane == 0)
      mbarArrive(&sm.wEmpty[slot]);
#pragma unroll
    for (int r = 0; r < kStageRows; ++r)
#pragma unroll
      for (int b = 0; b < B; ++b) {
        float v = acc[r][b];
        for (int o = 16; o > 0; o /= 2)
          v += __shfl_xor_sync(~0u, v, o);
        if (lane == 0)
          sm.red[(warp * kRows + kStageRows * s + r) * B + b] = v;
      }
  }
  namedBarrier(1, kWarps * 32);
}

/// The rows to the q/k/v buffer (k and v also into the cache at lens[b]),
/// then done[c] = epoch + 1.
template <int B>
__device__ void publish(const LayerArgs &a, const Smem &sm, unsigned epoch) {
  for (int t = threadIdx.x; t < kRows * B; t += kWarps * 32) {
    int row = t / B, b = t % B, n = blockIdx.x * kRows + row;
    float v = 0;
    for (int w = 0; w < kWarps; ++w)
      v += sm.red[(w * kRows + row) * B + b];
    __half h = __float2half_rn(v);
    a.qkv[(size_t)b * N + n] = h;
    if (n >= HQ * D) {
      int r = n - HQ * D, kv = r / (HKV * D), head = r / D % HKV, d = r % D;
      int pos = a.lens[b], page = a.table[b * a.maxPages + pos / P];
      (kv ? a.v : a.k)[(((size_t)page * P + pos % P) * HKV + head) * D + d] = h;
    }
  }
  namedBarrier(1, kWarps * 32);
  if (threadIdx.x == 0) {
    __threadfence();
    stRelease(&a.sync->done[blockIdx.x], epoch + 1);
  }
}

/// Warp 0 waits for the CTAs owning group g's q rows [512 g, 512 g + 512),
/// k rows and v rows; then all consumers may read them.
__device__ void waitForRows(const LayerArgs &a, int g, unsigned epoch) {
  if (threadIdx.x < 32) {
    int lo[3] = {G * D * g, HQ * D + D * g, (HQ + HKV) * D + D * g},
        len[3] = {G * D, D, D}, lane = threadIdx.x, idx = 0, want = -1;
    for (int r = 0; r < 3; ++r)
      for (int c = lo[r] / kRows; c <= (lo[r] + len[r] - 1) / kRows; ++c)
        want = idx++ == lane ? c : want;
    if (want >= 0)
      waitFlag(&a.sync->done[want], epoch + 1);
    __syncwarp();
  }
  namedBarrier(1, kWarps * 32);
}

/// The item's tiles from the K/V ring, merged into its split partial.
__device__ void attend(const LayerArgs &a, const Item &it, const Smem &sm,
                       size_t part) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  uint32_t qa[D / 16][4];
  loadQ(a.qkv + (size_t)it.b * N + it.g * G * D, qa);
  WarpState st;
  initState(st);
  for (int i = warp; i < it.n; i += kWarps) {
    int slot = i % kKS;
    mbarWait(&sm.kFull[slot], (i / kKS) & 1);
    const uint8_t *ks = sm.kv + slot * kTile;
    attendTile<kSwizzled>(ks, ks + tileBytes<kSwizzled>(), qa, st,
                          min(P, it.len - P * (it.tile0 + i)));
    __syncwarp();
    if (lane == 0)
      mbarArrive(&sm.kEmpty[slot]);
  }
  // The weight ring is free: every stage was consumed before publish.
  mergeWarps<kWarps>(st, reinterpret_cast<float *>(sm.w), a.po + part * D,
                     a.pml + part * 2);
}

/// The last split of (b, g) to arrive: the splits' partials and the new
/// token (q.k_new from the q/k/v buffer) into out[b, g G .. g G + G). Each
/// thread issues all its splits' loads before using them: one L2 round trip
/// (entries 49-50: 3.1 us a step faster than a loop per split at B = 1).
template <int B>
__device__ void combine(const LayerArgs &a, const Item &it, size_t part0,
                        float *snew) {
  const __half *q = a.qkv + (size_t)it.b * N + it.g * G * D,
               *kn = a.qkv + (size_t)it.b * N + HQ * D + it.g * D,
               *vn = kn + HKV * D;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < G) {
    float s = 0;
    for (int d = lane; d < D; d += 32)
      s +=
          __half2float(__ldcg(q + warp * D + d)) * __half2float(__ldcg(kn + d));
    for (int o = 16; o > 0; o /= 2)
      s += __shfl_xor_sync(~0u, s, o);
    if (lane == 0)
      snew[warp] = s * 1.4426950408889634f / sqrtf((float)D);
  }
  namedBarrier(1, kWarps * 32);
  constexpr int S = kCtas / (B * HKV); // the splits, known at compile time
  for (int i = threadIdx.x; i < G * D; i += kWarps * 32) {
    int h = i / D, d = i % D;
    float m[S], l[S], o[S];
#pragma unroll
    for (int s = 0; s < S; ++s) {
      size_t p = part0 + s * G + h;
      m[s] = __ldcg(a.pml + p * 2), l[s] = __ldcg(a.pml + p * 2 + 1);
      o[s] = __ldcg(a.po + p * D + d);
    }
    float vnew = __half2float(__ldcg(vn + d)), M = snew[h];
#pragma unroll
    for (int s = 0; s < S; ++s)
      M = fmaxf(M, m[s]);
    float wn = exp2f(snew[h] - M), L = wn, acc = wn * vnew;
#pragma unroll
    for (int s = 0; s < S; ++s)
      if (m[s] != -INFINITY) { // an empty split's o may be anything
        float w = exp2f(m[s] - M);
        L += w * l[s], acc += w * o[s];
      }
    a.out[((size_t)it.b * HQ + it.g * G + h) * D + d] = acc / L;
  }
}

template <int B>
__global__ void __launch_bounds__(kThreads, 1)
    singleLayer(LayerArgs a, const __grid_constant__ CUtensorMap kmap,
                const __grid_constant__ CUtensorMap vmap) {
  extern __shared__ uint8_t raw[];
  __shared__ uint64_t bars[2 * kWS + 2 * kKS];
  __shared__ unsigned epochS, lastS;
  __shared__ float snew[G];
  Smem sm;
  sm.kv = raw + ((0u - smemAddr(raw)) & 1023u);
  sm.w = sm.kv + kKS * kTile;
  sm.red = reinterpret_cast<float *>(sm.w + kWS * kStageBytes);
  sm.wFull = bars, sm.wEmpty = bars + kWS, sm.kFull = bars + 2 * kWS,
  sm.kEmpty = bars + 2 * kWS + kKS;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kWS; ++i) {
      mbarInit(&sm.wFull[i], 1);
      mbarInit(&sm.wEmpty[i], kWarps); // every consumer warp reads a stage
    }
    for (int i = 0; i < kKS; ++i) {
      mbarInit(&sm.kFull[i], 1);
      mbarInit(&sm.kEmpty[i], 1); // slot i's tiles go to warp i % kWarps
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) // phases this mode skips stay 0
    for (int ph = 1; ph < kPhases; ++ph)
      gStamps[blockIdx.x][ph] = 0;
  stamp(0);
  const Item it = itemOf<B>(a);
  if (threadIdx.x >= kWarps * 32) {
    produce(a, it, sm, &kmap, &vmap);
  } else {
    float xg[B][16];
    if (threadIdx.x == 0) // read by the consumers after normalise's barriers
      epochS = *(volatile unsigned *)&a.sync->epoch;
    normalise<B>(a, xg, sm.red);
    stamp(1);
    const unsigned epoch = epochS;
    gemv<B>(sm, xg);
    stamp(2);
    publish<B>(a, sm, epoch);
    stamp(3);
    if (!a.prefetchAtExit)
      prefetchNextRows(a);
    if (a.attention) {
      size_t part0 = ((size_t)(it.b * HKV + it.g) * it.splits) * G;
      waitForRows(a, it.g, epoch);
      stamp(4);
      attend(a, it, sm, part0 + it.s * G);
      stamp(5);
      namedBarrier(1, kWarps * 32);
      unsigned *arrivals = &a.sync->arrivals[it.b * HKV + it.g];
      if (threadIdx.x == 0) {
        __threadfence();
        lastS = atomicAdd(arrivals, 1) == (unsigned)it.splits - 1;
        if (lastS) {
          *arrivals = 0; // every split has arrived: ready for the next step
          __threadfence();
        }
      }
      namedBarrier(1, kWarps * 32);
      if (lastS)
        combine<B>(a, it, part0, snew);
      stamp(6);
    }
  }
  __syncthreads();
  if (a.prefetchAtExit)
    prefetchNextRows(a);
  if (threadIdx.x == 0) {
    __threadfence();
    stamp(7);
    if (atomicAdd(&a.sync->finished, 1) == gridDim.x - 1) {
      a.sync->finished = 0;
      __threadfence();
      atomicExch(&a.sync->epoch, epochS + 1);
    }
  }
}

//===-- Host --------------------------------------------------------------===//

/// Reads n uint4 of each of up to 3 arrays (the plain-read floor).
__global__ void readAll(const uint4 *a, size_t na, const uint4 *b, size_t nb,
                        const uint4 *c, uint4 *sink) {
  uint4 acc = {0, 0, 0, 0};
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < na + 2 * nb;
       i += (size_t)gridDim.x * blockDim.x) {
    uint4 x = i < na ? a[i] : i < na + nb ? b[i - na] : c[i - na - nb];
    acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
  }
  if (acc.x == 0x12345678 && acc.y == 7)
    *sink = acc;
}

__global__ void fillUniform(__half *p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2half(scale * hashUniform(i, seed));
}

template <class T>
static T *devAlloc(size_t n) {
  T *p;
  CK(cudaMalloc(&p, n * sizeof(T)));
  return p;
}
template <class T>
static std::vector<T> download(const T *p, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/// What a launch does: `single` (the item's first tiles issued with the
/// weights), `serial` (issued after them), `proj` (no attention); `pfN pub`
/// / `pfN end`:
/// the CTA asks L2 for the first N of its 48 rows of the next layer's W once
/// it has published its rows / before it exits.
struct Mode {
  const char *name;
  int preload, attention, prefetchRows, prefetchAtExit;
};
constexpr Mode kSingle{"single", 1, 1, 0, 0}, kSerial{"serial", 0, 1, 0, 0},
    kProj{"proj", 1, 0, 0, 0}, kPf16Pub{"single pf16 pub", 1, 1, 16, 0},
    kPf32Pub{"single pf32 pub", 1, 1, 32, 0},
    kPf16End{"single pf16 end", 1, 1, 16, 1},
    kPf32End{"single pf32 end", 1, 1, 32, 1},
    kProjPf32{"proj pf32", 1, 0, 32, 0};

/// One (B, lens) problem: kLayers copies of W and the caches (pool of the
/// used pages shuffled, plus B spare), shared x, gamma and scratch.
struct Problem {
  int B, maxPages, pool;
  std::vector<int> lens, table;
  __half *x, *gamma, *w[kLayers], *k[kLayers], *v[kLayers], *qkv;
  CUtensorMap kmap[kLayers], vmap[kLayers];
  int *dTable, *dLens;
  float *po, *pml, *out;
  Sync *sync;

  Problem(int B, std::vector<int> lensIn) : B(B), lens(std::move(lensIn)) {
    int maxLen = *std::max_element(lens.begin(), lens.end());
    maxPages = maxLen / P + 1; // the new token's page too
    pool = B * maxPages + B;
    std::vector<int> perm(pool), used(pool, 0);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(B * 131 + maxLen));
    table.assign(perm.begin(), perm.begin() + B * maxPages);
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < maxPages; ++j)
        used[table[b * maxPages + j]] = std::clamp(lens[b] - P * j, 0, P);
    dTable = devAlloc<int>(table.size());
    CK(cudaMemcpy(dTable, table.data(), table.size() * 4,
                  cudaMemcpyHostToDevice));
    dLens = devAlloc<int>(B);
    CK(cudaMemcpy(dLens, lens.data(), B * 4, cudaMemcpyHostToDevice));
    int *dUsed = devAlloc<int>(pool);
    CK(cudaMemcpy(dUsed, used.data(), pool * 4, cudaMemcpyHostToDevice));
    x = devAlloc<__half>((size_t)B * H);
    gamma = devAlloc<__half>(H);
    fillUniform<<<64, 256>>>(x, (size_t)B * H, 11, 2.0f);
    fillUniform<<<64, 256>>>(gamma, H, 12, 1.0f);
    size_t cacheElems = (size_t)pool * P * HKV * D;
    for (int l = 0; l < kLayers; ++l) {
      w[l] = devAlloc<__half>((size_t)N * H);
      fillUniform<<<1024, 256>>>(w[l], (size_t)N * H, 100 + l, 0.05f);
      k[l] = devAlloc<__half>(cacheElems);
      v[l] = devAlloc<__half>(cacheElems);
      fillCache<<<1024, 256>>>(k[l], cacheElems, 200 + l, dUsed);
      fillCache<<<1024, 256>>>(v[l], cacheElems, 300 + l, dUsed);
      kmap[l] = encodeCache(k[l], pool);
      vmap[l] = encodeCache(v[l], pool);
    }
    qkv = devAlloc<__half>((size_t)B * N);
    po = devAlloc<float>((size_t)kCtas * G * D);
    pml = devAlloc<float>((size_t)kCtas * G * 2);
    out = devAlloc<float>((size_t)B * HQ * D);
    sync = devAlloc<Sync>(1);
    CK(cudaMemset(sync, 0, sizeof(Sync)));
    CK(cudaDeviceSynchronize());
    cudaFree(dUsed);
  }
  ~Problem() {
    for (int l = 0; l < kLayers; ++l)
      cudaFree(w[l]), cudaFree(k[l]), cudaFree(v[l]);
    for (void *p :
         {(void *)x, (void *)gamma, (void *)qkv, (void *)dTable, (void *)dLens,
          (void *)po, (void *)pml, (void *)out, (void *)sync})
      cudaFree(p);
  }
  LayerArgs args(int l, const Mode &m) const {
    return {x,
            gamma,
            w[l],
            w[(l + 1) % kLayers],
            k[l],
            v[l],
            dTable,
            dLens,
            qkv,
            po,
            pml,
            out,
            sync,
            maxPages,
            m.preload,
            m.attention,
            m.prefetchRows,
            m.prefetchAtExit};
  }
  size_t cacheBytesRead() const { // the history's K and V bytes
    size_t t = 0;
    for (int len : lens)
      t += (size_t)len * HKV * D * 2 * 2;
    return t;
  }
};

template <int B>
static cudaError_t launch(const Problem &p, int layer, const Mode &m,
                          cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kCtas), cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smemBytes(B), cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative; // refused if not co-resident
  attr[0].val.cooperative = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, singleLayer<B>, p.args(layer, m),
                            p.kmap[layer], p.vmap[layer]);
}

static int failures = 0;

/// Whether layer 0's cache `c` (filled by fillCache with `seed`) still holds
/// its fill everywhere but the new tokens' rows, so a stray append cannot
/// corrupt the kernel's input and the reference alike.
static bool cacheUntouched(const Problem &p, const std::vector<__half> &c,
                           uint32_t seed) {
  std::vector<int> used(p.pool, 0), fresh(p.pool * P, 0);
  for (int b = 0; b < p.B; ++b) {
    for (int j = 0; j < p.maxPages; ++j)
      used[p.table[b * p.maxPages + j]] = std::clamp(p.lens[b] - P * j, 0, P);
    int pos = p.lens[b];
    fresh[p.table[b * p.maxPages + pos / P] * P + pos % P] = 1;
  }
  for (size_t i = 0; i < c.size(); ++i) {
    size_t row = i / (HKV * D);
    if (fresh[row])
      continue;
    bool filled = (int)(row % P) < used[row / P];
    float want = hashUniform(i, seed), got = __half2float(c[i]);
    if (filled ? got != __half2float(__float2half(want)) : !std::isnan(got))
      return false;
  }
  return true;
}

/// Layer 0's outputs against float64: the q/k/v rows (RMSNorm + GEMV), the
/// appended cache rows, the attention (from the kernel's own q, k, v rows).
static void check(const Problem &p, const char *what) {
  auto xh = download(p.x, (size_t)p.B * H), gh = download(p.gamma, H),
       wh = download(p.w[0], (size_t)N * H),
       qkv = download(p.qkv, (size_t)p.B * N);
  size_t cacheElems = (size_t)p.pool * P * HKV * D;
  auto kh = download(p.k[0], cacheElems), vh = download(p.v[0], cacheElems);
  auto out = download(p.out, (size_t)p.B * HQ * D);
  auto f = [](__half h) { return (double)__half2float(h); };
  double projErr = 0, attnErr = 0;
  bool appended = true;
  for (int b = 0; b < p.B; ++b) {
    double ss = 0;
    for (int i = 0; i < H; ++i)
      ss += f(xh[(size_t)b * H + i]) * f(xh[(size_t)b * H + i]);
    double r = 1 / std::sqrt(ss / H + kEps), mag = 1e-30, err = 0;
    std::vector<double> ref(N);
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int i = 0; i < H; ++i)
        acc +=
            f(wh[(size_t)n * H + i]) * f(xh[(size_t)b * H + i]) * r * f(gh[i]);
      ref[n] = acc;
      mag = std::max(mag, std::fabs(acc));
    }
    for (int n = 0; n < N; ++n) {
      double e = std::fabs(f(qkv[(size_t)b * N + n]) - ref[n]);
      err = std::isnan(e) ? INFINITY : std::max(err, e);
    }
    projErr = std::max(projErr, err / mag);
    int pos = p.lens[b];
    auto row = [&](int tok, int g) {
      return ((size_t)p.table[b * p.maxPages + tok / P] * P + tok % P) * HKV *
                 D +
             (size_t)g * D;
    };
    for (int g = 0; g < HKV; ++g)
      for (int d = 0; d < D; ++d)
        appended &=
            kh[row(pos, g) + d] == qkv[(size_t)b * N + HQ * D + g * D + d] &&
            vh[row(pos, g) + d] ==
                qkv[(size_t)b * N + (HQ + HKV) * D + g * D + d];
    for (int h = 0; h < HQ; ++h) {
      int g = h / G;
      std::vector<double> s(pos + 1);
      double mx = -INFINITY, sum = 0, omag = 1e-30, oerr = 0;
      for (int t = 0; t <= pos; ++t) {
        double acc = 0;
        for (int d = 0; d < D; ++d)
          acc += f(qkv[(size_t)b * N + h * D + d]) * f(kh[row(t, g) + d]);
        s[t] = acc / std::sqrt((double)D);
        mx = std::max(mx, s[t]);
      }
      std::vector<double> o(D, 0);
      for (int t = 0; t <= pos; ++t) {
        double e = std::exp(s[t] - mx);
        sum += e;
        for (int d = 0; d < D; ++d)
          o[d] += e * f(vh[row(t, g) + d]);
      }
      for (int d = 0; d < D; ++d) {
        double got = out[((size_t)b * HQ + h) * D + d];
        omag = std::max(omag, std::fabs(o[d] / sum));
        oerr = std::isnan(got) ? INFINITY
                               : std::max(oerr, std::fabs(got - o[d] / sum));
      }
      attnErr = std::max(attnErr, oerr / omag);
    }
  }
  bool untouched = cacheUntouched(p, kh, 200) && cacheUntouched(p, vh, 300);
  bool pass =
      projErr <= kTolerance && attnErr <= kTolerance && appended && untouched;
  failures += !pass;
  printf("B=%d lens %d..%d %-14s q/k/v err %.1e, append %s, rest of cache "
         "%s, attention err %.1e: %s\n",
         p.B, p.lens.back(), p.lens.front(), what, projErr,
         appended ? "ok" : "WRONG", untouched ? "as filled" : "CHANGED",
         attnErr, pass ? "PASS" : "FAIL");
}

template <int B>
static void runChecks(int len) {
  std::vector<int> lens(B);
  for (int b = 0; b < B; ++b)
    lens[b] = std::max(0, len - 5 * b);
  Problem p(B, lens);
  // single twice: the counters reset.
  for (const Mode *m : {&kSingle, &kSingle, &kSerial, &kPf32Pub, &kPf32End}) {
    CK(cudaMemset(p.out, 0xFF, (size_t)B * HQ * D * 4));
    CK(launch<B>(p, 0, *m, 0));
    CK(cudaDeviceSynchronize());
    check(p, m->name);
  }
}

/// The last launch's phases: min / median / max over CTAs of each stamp, us
/// after the earliest entry (phases a mode skips are left out).
static void printPhases(const char *mode) {
  unsigned long long h[kCtas][kPhases];
  CK(cudaMemcpyFromSymbol(h, gStamps, sizeof(h)));
  unsigned long long t0 = ~0ull;
  for (auto &c : h)
    t0 = std::min(t0, c[0]);
  static const char *names[kPhases] = {"entry",    "normed", "gemv",
                                       "publish",  "rows",   "attended",
                                       "combined", "exit"};
  printf("  %s phases (us after the first entry: min / median / max):", mode);
  for (int ph = 0; ph < kPhases; ++ph) {
    std::vector<double> t;
    for (auto &c : h)
      if (c[ph])
        t.push_back((c[ph] - t0) / 1e3);
    if (t.empty())
      continue;
    std::sort(t.begin(), t.end());
    printf("%s %s %.1f/%.1f/%.1f", ph ? "," : "", names[ph], t[0],
           t[t.size() / 2], t.back());
  }
  printf("\n");
}

template <int B>
static void runTimed(int len, int sms) {
  Problem p(B, std::vector<int>(B, len));
  uint4 *sink = devAlloc<uint4>(1);
  size_t nw = (size_t)N * H * 2 / 16, nkv = p.cacheBytesRead() / 2 / 16;
  float readUs = timeGraph(
      [&](int l, cudaStream_t s) {
        readAll<<<sms * 4, 512, 0, s>>>((const uint4 *)p.w[l], nw,
                                        (const uint4 *)p.k[l], nkv,
                                        (const uint4 *)p.v[l], sink);
      },
      kLayers);
  double bytes = nw * 16.0 + nkv * 32.0;
  printf("B=%d L=%5d read   %7.2f us %5.2f TB/s\n", B, len, readUs,
         bytes / readUs / 1e6);
  float readWUs = timeGraph(
      [&](int l, cudaStream_t s) {
        readAll<<<sms * 4, 512, 0, s>>>((const uint4 *)p.w[l], nw, nullptr, 0,
                                        nullptr, sink);
      },
      kLayers);
  printf("B=%d L=%5d read W %7.2f us %5.2f TB/s (the proj mode's floor)\n", B,
         len, readWUs, nw * 16.0 / readWUs / 1e6);
  for (const Mode &m : {kSingle, kSerial, kProj, kPf16Pub, kPf32Pub, kPf16End,
                        kPf32End, kProjPf32}) {
    float us = timeGraph(
        [&](int l, cudaStream_t s) { CK(launch<B>(p, l, m, s)); }, kLayers);
    printf("B=%d L=%5d %-12s %7.2f us %5.2f TB/s %5.1f%% of read\n", B, len,
           m.name, us, bytes / us / 1e6, 100 * readUs / us);
    printPhases(m.name);
  }
  CK(cudaMemset(p.out, 0xFF, (size_t)B * HQ * D * 4));
  CK(launch<B>(p, 0, kSingle, 0));
  CK(cudaDeviceSynchronize());
  check(p, "after replays");
  cudaFree(sink);
}

template <int B>
static void setSmem() {
  CK(cudaFuncSetAttribute(singleLayer<B>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                          (int)smemBytes(B)));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, singleLayer<B>,
                                                   kThreads, smemBytes(B)));
  printf("B=%d: %zu bytes of shared memory, %d CTA per SM\n", B, smemBytes(B),
         occ);
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0); // lines survive a timeout
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (sms < kCtas) {
    printf("needs %d SMs, has %d\n", kCtas, sms);
    return 1;
  }
  setSmem<1>(), setSmem<2>(), setSmem<4>(), setSmem<8>();
  // Correctness: lengths off the tile, empty splits, no history at all.
  // 8191 and B=8 at 2000: more tiles per split than the ring's 16 slots.
  for (int len : {0, 1, 17, 1000, 4095, 8191})
    runChecks<1>(len);
  runChecks<2>(33);
  runChecks<4>(1000);
  runChecks<8>(257);
  runChecks<8>(2000);
  for (int len : {1024, 4096, 8192})
    runTimed<1>(len, sms);
  runTimed<2>(4096, sms);
  runTimed<4>(4096, sms);
  runTimed<8>(4096, sms);
  printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
