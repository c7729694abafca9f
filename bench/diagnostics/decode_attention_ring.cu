// Diagnostic microbenchmark (docs/performance.md entry 46's next step): does
// a CTA-wide shared-memory ring filled by TMA boxes (or per-row
// cp.async.bulk) bring the tensor-core paged decode attention closer to the
// KV-cache bandwidth floor than today's per-warp cp.async rings?
//
// Entry 46's ncu at 16 x 4096: 78.9% of DRAM bandwidth, 2 CTAs of 4 warps
// per SM, 61% of stall cycles on the warps' own cp.async.wait_group; each
// warp keeps two 8 KB tiles in flight while it computes a third (128 KB per
// SM). Here one producer warp keeps up to S tiles of the CTA in flight.
//
// Status: first run on the H200 in the twentieth session (entry 47: the
// TMA and bulk rings tie or lose, the CTA ring is not emitted). Entry 50
// (H100): per-warp rings with more tiles in flight per SM gain nothing, the
// TMA ring gains 4-5% from batch 16; variants() now times it with 8
// consumer warps against today's per-warp ring. Entry 51: `tma S16 W4` is
// emitted (opt-in, --attention-cta-ring; Kernels/AttentionMma.cpp). The
// bulk fill, the copy-only rings and the other per-warp shapes are kept
// for reruns of entries 47 and 50 (add them to variants()).
//
// Shape: Llama-3-8B (32 query heads, 8 KV heads, head_dim 128, f16), pages
// of 16 tokens, caches [pool pages, 16, HKV, D], block table [B, maxPages]
// i32 (a shuffled subset of the pool). One CTA per (split, KV head,
// sequence); a tile is 16 tokens = one page; split s takes tiles
// [s * tps, (s + 1) * tps). Each variant writes unnormalised split partials
// (o [splits, B, HQ, D], (m log2, l) [splits, B, HQ, 2]); the host combines
// them (not timed, as in decode_attention.cu). Variants:
//   warp ST3 W4  today's emitted kernel (AttentionMma.cpp): each of W warps
//                takes every W-th tile through its own ST-stage ring of
//                16-byte cp.async (rows padded to 272 bytes, rows past the
//                end zero-filled), the page loaded a tile ahead; separate
//                merge buffer (104.5 + 8.3 KB, 2 CTAs per SM)
//   tma S W      W consumer warps + 1 producer warp. Lane 0 of the producer
//                fills a CTA ring of S stages (K tile 4 KB, V tile 4 KB)
//                with 4 TMA boxes {64 d, 1 head, 16 rows} of a 3D map
//                {D, HKV, pool * 16} per tile (128-byte swizzle: two
//                128-byte halves of the rows), completing on full[slot];
//                consumer warp w takes tiles w, w + W, ... and releases each
//                on empty[slot]. The producer's 32 lanes hold the next 32-64
//                block-table entries in registers (loaded 32 tiles ahead).
//   bulk S W     the same ring, each tile by 32 cp.async.bulk of one 256-byte
//                row (one per producer lane), rows padded to 272 bytes
//   tma ... copy the tma ring with no math: consumers wait for each stage
//                and release it (the ring's own ceiling on this paged
//                pattern: 256-byte rows 2 KB apart; output not checked)
//   read         a plain 16-byte read of exactly the K/V bytes (the floor)
// The per-tile math is the same for all (FA2 decode, AttentionMma.cpp):
// S = Q K^T by mma.m16n8k16 with the group's G = 4 query heads as A rows
// 0..3 (rows 4..15 zero), K by ldmatrix; online softmax in fp32 in the log2
// domain, tokens past the end masked to -inf and their V fragments to 0
// (the ring variants read NaN-poisoned slots; 0 * NaN would be NaN);
// O += P V with P rounded to f16, V by ldmatrix.trans. The warps' (m, l, O)
// are merged in the CTA at the end.
//
// Checks: every variant's combined output against a float64 CPU softmax(q
// K^T / sqrt(D)) V over the paged cache, unused slots and unused pool pages
// NaN-poisoned; max over (sequence, head) of max|o - ref| / max|ref|, PASS
// under 5e-3. Timing as graph_timing.cuh: 8 launches per graph over 8
// copies of the cache (more than L2), median of 100 replays, against the
// plain read in the same run. Splits per variant: the runtime's num_splits
// policy (docs/abi.md) with target_ctas = the variant's resident CTAs per
// SM x SMs.
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 \
//     decode_attention_ring.cu -o decode_attention_ring -lcuda &&
//   ./decode_attention_ring
// (bench/session/run.sh diag decode_attention_ring reads the flags here:)
// nvcc-flags: -gencode arch=compute_90a,code=sm_90a -lcuda
#include "graph_timing.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cuda.h>
#include <cuda_fp16.h>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "attention_tile.cuh"

constexpr int kCopies = 8;
constexpr double kTolerance = 5e-3;

struct Args {
  const __half *q;     // [B, HQ, D]
  const __half *k, *v; // [pool pages, P, HKV, D]
  const int *table;    // [B, maxPages]
  float *o, *ml;       // [splits, B, HQ, D]; [splits, B, HQ, 2]
  int len, maxPages, tilesPerSplit;
};

/// This CTA's tiles: [tile0, tile0 + n) of sequence blockIdx.z.
struct Split {
  int tile0, n;
};
__device__ __forceinline__ Split splitOf(const Args &a) {
  int tile0 = blockIdx.x * a.tilesPerSplit, tiles = (a.len + P - 1) / P;
  return {tile0, max(0, min(tiles, tile0 + a.tilesPerSplit) - tile0)};
}
/// The CTA's first partial row: [split, b, first head of the group].
__device__ __forceinline__ size_t partialRow(const Args &a) {
  return ((size_t)blockIdx.x * gridDim.z + blockIdx.z) * HQ + blockIdx.y * G;
}
/// Tokens of tile t before the sequence's end (1-16).
__device__ __forceinline__ int validTokens(const Args &a, int t) {
  return min(P, a.len - P * t);
}

//===-- Today's structure: a cp.async ring per warp -----------------------===//

/// Issues tile t's K and V rows of this KV head (page `page`) into `stage`
/// (padded rows) by the warp's lanes, as one cp.async group; rows past the
/// end zero-filled from row 0 (as AttentionMma.cpp::issueTile).
__device__ void copyTile(const Args &a, uint8_t *stage, int page, int t) {
  int lane = threadIdx.x & 31, valid = validTokens(a, t);
  size_t head = ((size_t)page * P * HKV + blockIdx.y) * D;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int c = lane + 32 * i, r = c >> 4, ch = c & 15;
    size_t src = head + (size_t)(r < valid ? r : 0) * HKV * D + ch * 8;
    int bytes = r < valid ? 16 : 0;
    cpAsync16Zfill(stage + chunkAt<kPadded>(r, ch), a.k + src, bytes);
    cpAsync16Zfill(stage + tileBytes<kPadded>() + chunkAt<kPadded>(r, ch),
                   a.v + src, bytes);
  }
}
__device__ __forceinline__ void commitGroup() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int ST, int W>
__global__ void __launch_bounds__(W * 32)
    warpRing(Args a, const __grid_constant__ CUtensorMap,
             const __grid_constant__ CUtensorMap) {
  constexpr int kStage = 2 * tileBytes<kPadded>();
  extern __shared__ __align__(128) uint8_t smem[];
  int warp = threadIdx.x >> 5;
  uint8_t *ring = smem + warp * ST * kStage;
  Split sp = splitOf(a);
  const int *table = a.table + (size_t)blockIdx.z * a.maxPages;
  // This warp's tiles: split tiles warp, warp + W, ...
  int mine = warp < sp.n ? (sp.n - warp + W - 1) / W : 0;
  auto tileOf = [&](int i) { return sp.tile0 + warp + i * W; };
  auto pageOf = [&](int i) { return i < mine ? table[tileOf(i)] : 0; };
  for (int i = 0; i + 1 < ST; ++i) {
    if (i < mine)
      copyTile(a, ring + i * kStage, pageOf(i), tileOf(i));
    commitGroup();
  }
  int page = pageOf(ST - 1); // the next tile's page, a tile ahead
  uint32_t qa[D / 16][4];
  loadQ(a.q + ((size_t)blockIdx.z * HQ + blockIdx.y * G) * D, qa);
  WarpState st;
  initState(st);
  for (int i = 0; i < mine; ++i) {
    asm volatile("cp.async.wait_group %0;" ::"n"(ST - 2) : "memory");
    __syncwarp();
    int next = i + ST - 1;
    if (next < mine)
      copyTile(a, ring + next % ST * kStage, page, tileOf(next));
    commitGroup();
    page = pageOf(next + 1);
    const uint8_t *ks = ring + i % ST * kStage;
    attendTile<kPadded>(ks, ks + tileBytes<kPadded>(), qa, st,
                        validTokens(a, tileOf(i)));
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  mergeWarps<W>(st, reinterpret_cast<float *>(smem + W * ST * kStage),
                a.o + partialRow(a) * D, a.ml + partialRow(a) * 2);
}

//===-- The CTA-wide ring: a producer warp, W consumer warps --------------===//
//
// Barrier invariant. Tile i of the split goes to slot i % S and to consumer
// warp i % W. With S % W == 0 every use of slot k is by the one warp k % W,
// which waits full[k]'s phases 0, 1, 2, ... in order (parity (i / S) & 1)
// and arrives once on empty[k] (count 1) after each; the producer waits
// empty[k]'s phase (i / S - 1) before refilling slot k for tile i >= S and
// arms full[k] (count 1: its arrive.expect_tx, plus the copies' bytes). A
// slot's barrier can therefore never be more than one phase ahead of any
// warp waiting on it, so a parity never aliases an older phase. With
// S % W != 0 two warps would share a slot's phases and one could pass a
// wait on a phase two rounds old (gemm_warp_specialized.cu's fold warps).

enum Fill { kTma, kBulk };

/// Lane 0 (kTma) or all lanes (kBulk) of the producer warp: tiles 0..n-1 of
/// the split into the ring. The block-table entries of tiles 32j..32j+31
/// sit one per lane, loaded while tiles 32(j-1).. are issued.
template <int F, int S>
__device__ void produce(const Args &a, const CUtensorMap *kmap,
                        const CUtensorMap *vmap, uint8_t *ring, uint64_t *full,
                        uint64_t *empty, Split sp) {
  constexpr int L = F == kTma ? kSwizzled : kPadded,
                kStage = 2 * tileBytes<L>();
  int lane = threadIdx.x & 31, kvh = blockIdx.y;
  const int *table = a.table + (size_t)blockIdx.z * a.maxPages + sp.tile0;
  auto entry = [&](int i) { return i < sp.n ? table[i] : 0; };
  int cur = entry(lane), nxt = entry(32 + lane);
  for (int i = 0; i < sp.n; ++i) {
    if (i % 32 == 0 && i > 0) {
      cur = nxt;
      nxt = entry(i + 32 + lane);
    }
    int page = __shfl_sync(~0u, cur, i % 32), slot = i % S;
    if (i >= S)
      mbarWait(&empty[slot], (i / S - 1) & 1);
    uint8_t *dst = ring + slot * kStage;
    if constexpr (F == kTma) {
      if (lane == 0) {
        mbarExpectTx(&full[slot], kStage);
        for (int kv = 0; kv < 2; ++kv)
          for (int half = 0; half < 2; ++half)
            tma3d(dst + kv * tileBytes<L>() + half * P * 128, kv ? vmap : kmap,
                  half * kBox, kvh, page * P, &full[slot]);
      }
    } else {
      if (lane == 0)
        mbarExpectTx(&full[slot], 2 * P * kRowBytes);
      __syncwarp();
      int r = lane & 15;
      const __half *src =
          (lane < 16 ? a.k : a.v) + (((size_t)page * P + r) * HKV + kvh) * D;
      bulkCopy(dst + (lane >> 4) * tileBytes<L>() + r * kPitch, src, kRowBytes,
               &full[slot]);
    }
  }
}

template <int F, int S, int W, bool Math>
__global__ void __launch_bounds__((W + 1) * 32)
    ctaRing(Args a, const __grid_constant__ CUtensorMap kmap,
            const __grid_constant__ CUtensorMap vmap) {
  static_assert(S % W == 0, "a slot's phases must all go to one warp");
  constexpr int L = F == kTma ? kSwizzled : kPadded,
                kStage = 2 * tileBytes<L>();
  static_assert(S * kStage >= W * (G * D + 2 * G) * 4, "merge in ring");
  extern __shared__ uint8_t raw[];
  // 1 KiB-aligned by its shared-window address (the 128-byte swizzle).
  uint8_t *ring = raw + ((0u - smemAddr(raw)) & 1023u);
  __shared__ uint64_t full[S], empty[S];
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) {
      mbarInit(&full[i], 1);
      mbarInit(&empty[i], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  Split sp = splitOf(a);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp == W) {
    produce<F, S>(a, &kmap, &vmap, ring, full, empty, sp);
    return;
  }
  uint32_t qa[D / 16][4];
  loadQ(a.q + ((size_t)blockIdx.z * HQ + blockIdx.y * G) * D, qa);
  WarpState st;
  initState(st);
  for (int i = warp; i < sp.n; i += W) {
    int slot = i % S;
    mbarWait(&full[slot], (i / S) & 1);
    const uint8_t *ks = ring + slot * kStage;
    if constexpr (Math)
      attendTile<L>(ks, ks + tileBytes<L>(), qa, st,
                    validTokens(a, sp.tile0 + i));
    __syncwarp();
    if (lane == 0)
      mbarArrive(&empty[slot]);
  }
  // Every tile issued was waited for by some consumer: after this barrier
  // no copy is in flight and no warp reads the ring, which takes the merge.
  namedBarrier(1, W * 32);
  mergeWarps<W>(st, reinterpret_cast<float *>(ring), a.o + partialRow(a) * D,
                a.ml + partialRow(a) * 2);
}

//===-- Host --------------------------------------------------------------===//

/// Reads every K and V byte of the step with 16-byte loads.
__global__ void readAll(const uint4 *k, const uint4 *v, size_t n, uint4 *sink) {
  uint4 acc = {0, 0, 0, 0};
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint4 x = k[i], y = v[i];
    acc.x ^= x.x ^ y.x;
    acc.w ^= x.w ^ y.w;
  }
  if (acc.x == 0x12345678)
    *sink = acc;
}

using Kernel = void (*)(Args, CUtensorMap, CUtensorMap);
struct Variant {
  const char *name;
  Kernel fn;
  int threads, smem;
  bool checked = true;
};
template <int ST, int W>
Variant warpVariant(const char *name) {
  return {name, warpRing<ST, W>, W * 32,
          W * ST * 2 * tileBytes<kPadded>() + W * (G * D + 2 * G) * 4};
}
template <int F, int S, int W, bool Math = true>
Variant ringVariant(const char *name) {
  constexpr int L = F == kTma ? kSwizzled : kPadded;
  return {name, ctaRing<F, S, W, Math>, (W + 1) * 32,
          S * 2 * tileBytes<L>() + 1024, Math};
}

/// One (B, len) problem: the pool (B * maxPages used pages + B poisoned
/// ones, shuffled), kCopies copies of K and V, q, and the float64 reference.
struct Problem {
  int B, len, maxPages, pool;
  size_t cacheElems;
  std::vector<int> table;
  std::vector<double> ref; // [B, HQ, D]
  int *bt, *used;
  __half *q, *k[kCopies], *v[kCopies];
  CUtensorMap kmap[kCopies], vmap[kCopies];
  float *o, *ml;
  static constexpr int kMaxSplits = 64;

  Problem(int B, int len) : B(B), len(len), maxPages((len + P - 1) / P) {
    pool = B * maxPages + B;
    cacheElems = (size_t)pool * P * HKV * D;
    std::vector<int> perm(pool), usedH(pool, 0);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(B * 7 + len));
    table.assign(perm.begin(), perm.begin() + B * maxPages);
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < maxPages; ++j)
        usedH[table[b * maxPages + j]] = std::min(P, len - P * j);
    CK(cudaMalloc(&bt, table.size() * 4));
    CK(cudaMemcpy(bt, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&used, pool * 4));
    CK(cudaMemcpy(used, usedH.data(), pool * 4, cudaMemcpyHostToDevice));
    std::vector<__half> qh((size_t)B * HQ * D);
    for (size_t i = 0; i < qh.size(); ++i)
      qh[i] = __float2half(3 * hashUniform(i, 7)); // scores of std ~1
    CK(cudaMalloc(&q, qh.size() * 2));
    CK(cudaMemcpy(q, qh.data(), qh.size() * 2, cudaMemcpyHostToDevice));
    for (int c = 0; c < kCopies; ++c) {
      CK(cudaMalloc(&k[c], cacheElems * 2));
      CK(cudaMalloc(&v[c], cacheElems * 2));
      fillCache<<<1024, 256>>>(k[c], cacheElems, 1, used);
      fillCache<<<1024, 256>>>(v[c], cacheElems, 2, used);
      kmap[c] = encodeCache(k[c], pool);
      vmap[c] = encodeCache(v[c], pool);
    }
    CK(cudaMalloc(&o, (size_t)kMaxSplits * B * HQ * D * 4));
    CK(cudaMalloc(&ml, (size_t)kMaxSplits * B * HQ * 2 * 4));
    CK(cudaDeviceSynchronize());
    reference(qh);
  }
  ~Problem() {
    for (int c = 0; c < kCopies; ++c) {
      cudaFree(k[c]);
      cudaFree(v[c]);
    }
    cudaFree(q);
    cudaFree(bt);
    cudaFree(used);
    cudaFree(o);
    cudaFree(ml);
  }
  Args args(int c, int splits) const {
    return {q,   k[c],     v[c],
            bt,  o,        ml,
            len, maxPages, (maxPages + splits - 1) / splits};
  }
  /// softmax(q k / sqrt(D)) v in float64 from copy 0's f16 values, one
  /// thread per sequence group.
  void reference(const std::vector<__half> &qh) {
    std::vector<__half> kh(cacheElems), vh(cacheElems);
    CK(cudaMemcpy(kh.data(), k[0], cacheElems * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(vh.data(), v[0], cacheElems * 2, cudaMemcpyDeviceToHost));
    ref.assign((size_t)B * HQ * D, 0);
    int threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        std::vector<double> s(len), qd(D);
        for (int bh = t; bh < B * HQ; bh += threads) {
          int b = bh / HQ, kvh = bh % HQ / G;
          for (int d = 0; d < D; ++d)
            qd[d] = __half2float(qh[(size_t)bh * D + d]);
          auto row = [&](int tok) {
            return ((size_t)table[b * maxPages + tok / P] * P + tok % P) * HKV *
                       D +
                   (size_t)kvh * D;
          };
          double mx = -INFINITY, sum = 0;
          for (int tok = 0; tok < len; ++tok) {
            double acc = 0;
            for (int d = 0; d < D; ++d)
              acc += qd[d] * __half2float(kh[row(tok) + d]);
            s[tok] = acc / std::sqrt((double)D);
            mx = std::max(mx, s[tok]);
          }
          double *out = &ref[(size_t)bh * D];
          for (int tok = 0; tok < len; ++tok) {
            double p = std::exp(s[tok] - mx);
            sum += p;
            for (int d = 0; d < D; ++d)
              out[d] += p * __half2float(vh[row(tok) + d]);
          }
          for (int d = 0; d < D; ++d)
            out[d] /= sum;
        }
      });
    for (auto &th : workers)
      th.join();
  }
  /// The splits combined in float64 against the reference: max over
  /// (sequence, head) of max|o - ref| / max|ref| (NaN if any output is).
  double check(int splits) const {
    std::vector<float> oh((size_t)splits * B * HQ * D),
        mlh((size_t)splits * B * HQ * 2);
    CK(cudaMemcpy(oh.data(), o, oh.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(mlh.data(), ml, mlh.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int bh = 0; bh < B * HQ; ++bh) {
      double M = -INFINITY, L = 0, err = 0, mag = 1e-30;
      for (int s = 0; s < splits; ++s)
        M = std::max(M, (double)mlh[((size_t)s * B * HQ + bh) * 2]);
      std::vector<double> w(splits);
      for (int s = 0; s < splits; ++s) {
        double m = mlh[((size_t)s * B * HQ + bh) * 2];
        w[s] = m == -INFINITY ? 0 : std::exp2(m - M); // an empty split
        L += w[s] * mlh[((size_t)s * B * HQ + bh) * 2 + 1];
      }
      for (int d = 0; d < D; ++d) {
        double x = 0, r = ref[(size_t)bh * D + d];
        for (int s = 0; s < splits; ++s)
          x += w[s] ? w[s] * oh[((size_t)s * B * HQ + bh) * D + d] : 0;
        err = std::max(err, std::fabs(x / L - r));
        if (std::isnan(x / L))
          err = NAN;
        mag = std::max(mag, std::fabs(r));
      }
      worst = std::isnan(err) || std::isnan(worst) ? NAN
                                                   : std::max(worst, err / mag);
    }
    return worst;
  }
};

/// The runtime's num_splits policy (docs/abi.md) for `ctasPerSM` resident
/// CTAs per SM: about one wave, at most one split per 64 tokens.
static int policySplits(int B, int len, int ctasPerSM, int sms) {
  return std::max(1,
                  std::min({64, ctasPerSM * sms / (B * HKV), (len + 63) / 64}));
}

static int failures = 0;

/// Runs `v` once on copy 0 with `splits` (0: the policy) and checks it;
/// with `timed`, also its median µs over the copies.
static void runVariant(const Problem &p, const Variant &v, int splits,
                       bool timed, int sms, float readUs) {
  CK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          v.smem));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v.fn, v.threads,
                                                   v.smem));
  if (occ == 0) {
    printf("%-14s does not fit (%d bytes)\n", v.name, v.smem);
    ++failures;
    return;
  }
  if (splits == 0)
    splits = policySplits(p.B, p.len, occ, sms);
  dim3 grid(splits, HKV, p.B);
  auto launch = [&](int c, cudaStream_t s) {
    v.fn<<<grid, v.threads, v.smem, s>>>(p.args(c, splits), p.kmap[c],
                                         p.vmap[c]);
  };
  // o and (m, l) NaN: a split partial the variant does not write fails the
  // check instead of reusing the previous variant's values.
  CK(cudaMemset(p.o, 0xFF, (size_t)splits * p.B * HQ * D * 4));
  CK(cudaMemset(p.ml, 0xFF, (size_t)splits * p.B * HQ * 2 * 4));
  launch(0, 0);
  // A launch error is not sticky: report this variant and go on (left in
  // cudaGetLastError it would end the run at the next timeGraph).
  if (cudaError_t e = cudaGetLastError()) {
    printf("%-14s launch failed: %s\n", v.name, cudaGetErrorString(e));
    ++failures;
    return;
  }
  CK(cudaDeviceSynchronize());
  if (!v.checked && !timed)
    return;
  double err = v.checked ? p.check(splits) : 0;
  bool pass = !v.checked || err <= kTolerance;
  failures += !pass;
  printf("B=%3d L=%5d %-14s splits %2d grid %5d occ %d smem %6d: err %.1e %s",
         p.B, p.len, v.name, splits, splits * HKV * p.B, occ, v.smem, err,
         !v.checked ? "----"
         : pass     ? "PASS"
                    : "FAIL");
  if (timed) {
    float us = timeGraph(launch, kCopies);
    double bytes = 2.0 * p.B * p.maxPages * P * HKV * kRowBytes;
    printf("  %8.2f us %5.2f TB/s  %5.1f%% of read", us, bytes / us / 1e6,
           100 * readUs / us);
  }
  printf("\n");
}

static std::vector<Variant> variants() {
  // Entry 50 (H100): per-warp rings with more tiles in flight per SM (ST4
  // W2 at 3 per SM, ST6 W2, ST4 W3) gained nothing, the TMA ring at 1 per SM
  // 4-5% from B = 16, where on the H200 (entry 47) it tied or lost: timed
  // now with twice the consumer warps, in case the H200's consumers are
  // what limits it.
  return {
      warpVariant<3, 4>("warp ST3 W4"),
      ringVariant<kTma, 16, 4>("tma S16 W4"),
      ringVariant<kTma, 16, 8>("tma S16 W8"),
      ringVariant<kTma, 24, 8>("tma S24 W8"),
  };
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0); // lines survive a timeout
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint4 *sink;
  CK(cudaMalloc(&sink, 16));
  auto all = variants();
  // Timed: the bench's batches at 4096 tokens, each variant at its policy
  // splits, against the plain read of the same bytes.
  for (int B : {4, 16, 64}) {
    Problem p(B, 4096);
    size_t n = (size_t)B * p.maxPages * P * HKV * D * 2 / 16;
    float readUs = timeGraph(
        [&](int c, cudaStream_t s) {
          readAll<<<sms * 4, 512, 0, s>>>((const uint4 *)p.k[c],
                                          (const uint4 *)p.v[c], n, sink);
        },
        kCopies);
    printf("B=%3d L=%5d plain read %8.2f us %5.2f TB/s (%d SMs)\n", B, p.len,
           readUs, n * 32.0 / readUs / 1e6, sms);
    for (const Variant &v : all)
      runVariant(p, v, 0, true, sms, readUs);
  }
  // Correctness only: lengths off the tile, empty splits (17 tokens in 2
  // tiles over 4 splits), one token, a split per tile.
  const int cases[][3] = {{3, 1000, 0}, {3, 1000, 7}, {5, 17, 0},    {5, 17, 4},
                          {2, 1, 0},    {2, 1, 3},    {16, 1000, 63}};
  for (auto &c : cases) {
    Problem p(c[0], c[1]);
    for (const Variant &v : all)
      runVariant(p, v, c[2], false, sms, 0);
  }
  printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
