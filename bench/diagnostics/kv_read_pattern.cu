// Diagnostic microbenchmark (docs/performance.md entries 47-48): why does
// even a copy-only ring over the paged KV cache reach only 89-91% of a plain
// read of the same bytes? Two candidates, separated here with copy-only
// kernels (no math, so only the fetch differs):
//   - the pattern: a KV head's tile is 16 rows of 256 bytes lying 2 KB apart
//     in the [page, token, head, d] cache (Llama-3-8B: 8 KV heads, head_dim
//     128, f16, pages of 16 tokens); the plain read streams whole pages;
//   - the tail: one CTA per (split, KV head, sequence) at the num_splits
//     policy (512 CTAs in 264 slots at B = 64); the plain read is a
//     grid-stride loop with none.
// Variants (each reads every K and V byte of the step, checked by a sum):
//   plain          grid-stride 16-byte loads over the used pages in pool
//                  order (the floor; decode_attention_ring.cu's read)
//   head grid      CTA (split, head, seq), splits fastest, as the emitted
//                  attention (AttentionMma.cpp): 16 rows of 256 bytes a tile
//   head adjacent  the same, the 8 heads of a (split, seq) in consecutive
//                  CTAs, so the CTAs reading one page run side by side
//   page grid      CTA (split, seq): whole pages (16 tokens x 8 heads, 32 KB
//                  of K then 32 KB of V, contiguous)
//   head/page balanced  the resident CTAs only, each a contiguous 1/grid of
//                  the flattened (seq, head or page, tile) space (stream-K:
//                  no tail; an attention would combine across CTAs)
//   page bulk Sn   page grid through a ring of n (8, 12) 8 KB stages, each a
//                  quarter of a K or V page by one cp.async.bulk (one
//                  producer thread), four consumer warps waiting on each
//                  stage and releasing it (the ring's mechanics without the
//                  per-head pattern)
// Each load variant runs at 2 CTAs per SM (dynamic shared memory padding, as
// the attention's 112 KB ring) and unpadded. Loads: 16 per thread in flight,
// the page ids of a CTA's tiles staged in shared memory first.
// Timing as graph_timing.cuh: 8 launches per graph over 8 copies of the
// cache (more than L2), median of 100 replays.
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 \
//     kv_read_pattern.cu -o kv_read_pattern && ./kv_read_pattern
// nvcc-flags: -gencode arch=compute_90a,code=sm_90a
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

constexpr int HKV = 8, D = 128, P = 16, kCopies = 8, kThreads = 128, kU = 16;
constexpr int kRow = D * 2 / 16;          // uint4 per (token, head) row
constexpr int kPageHalf = P * HKV * kRow; // uint4 of a K (or V) page
constexpr int kIdsCap = 2048;             // page ids staged per segment
// K and V seeds differ in high bits: low-bit seeds only permute a page's
// words, so a variant reading K twice would pass.
constexpr uint32_t kSeedK = 0x9E3779B9u, kSeedV = 0x85EBCA6Bu;
constexpr int kPadOcc2 = 100 * 1024; // 2 CTAs per SM, as the attention

enum Pattern { kHead, kPage };

struct Args {
  const uint4 *k, *v;
  const int *bt; // [B, maxPages]
  int B, maxPages, splits;
  unsigned long long *sum; // sum of the words read, against the host's
};

/// All four words of a load (so that no load narrows to one word).
__device__ __forceinline__ uint32_t words(uint4 x) {
  return x.x + x.y + x.z + x.w;
}

/// Streams tiles [t0, t1) of sequence `seq` (of KV head `head` for kHead):
/// 16 uint4 loads per thread in flight, page ids staged in `ids` first.
template <Pattern Pt>
__device__ uint32_t readTiles(const Args &a, int seq, int head, int t0, int t1,
                              int *ids) {
  __syncthreads(); // the previous segment's ids are no longer read
  for (int t = t0 + threadIdx.x; t < t1; t += kThreads)
    ids[t - t0] = a.bt[seq * a.maxPages + t];
  __syncthreads();
  constexpr int tileElems = Pt == kHead ? 2 * P * kRow : 2 * kPageHalf;
  constexpr int half = tileElems / 2;
  const int n = (t1 - t0) * tileElems; // at most kIdsCap * 4096
  uint32_t acc = 0;
  for (int base = 0; base < n; base += kThreads * kU) {
    uint4 r[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      int e = base + threadIdx.x + kThreads * u;
      r[u] = make_uint4(0, 0, 0, 0);
      if (e < n) {
        int tile = e / tileElems, w = e % tileElems;
        const uint4 *src = w < half ? a.k : a.v;
        w %= half;
        long page = ids[tile];
        long off = Pt == kHead
                       ? ((page * P + w / kRow) * HKV + head) * kRow + w % kRow
                       : page * kPageHalf + w;
        r[u] = __ldg(src + off);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u)
      acc += words(r[u]);
  }
  return acc;
}

/// One atomic per warp (the sum is compared mod 2^32): per-thread
/// atomics on one address would cost more than the reads.
__device__ void addSum(unsigned long long *sum, uint32_t acc) {
  acc = __reduce_add_sync(~0u, acc);
  if ((threadIdx.x & 31) == 0)
    atomicAdd(sum, (unsigned long long)acc);
}

/// One CTA per (split, unit, seq): unit = KV head (kHead) or all (kPage).
/// `HeadsFastest` puts the 8 heads of a (split, seq) in consecutive CTAs.
template <Pattern Pt, bool HeadsFastest>
__global__ void __launch_bounds__(kThreads) gridRead(Args a) {
  __shared__ int ids[kIdsCap];
  int split, head;
  if (HeadsFastest) {
    head = blockIdx.x % HKV;
    split = blockIdx.x / HKV;
  } else {
    split = blockIdx.x;
    head = blockIdx.y;
  }
  int tps = (a.maxPages + a.splits - 1) / a.splits;
  int t0 = split * tps, t1 = min(t0 + tps, a.maxPages);
  uint32_t acc = t0 < t1 ? readTiles<Pt>(a, blockIdx.z, head, t0, t1, ids) : 0;
  addSum(a.sum, acc);
}

/// The resident CTAs only, CTA c reading tiles [c T / grid, (c + 1) T /
/// grid) of the flattened (seq, unit, tile) space.
template <Pattern Pt>
__global__ void __launch_bounds__(kThreads) balancedRead(Args a) {
  __shared__ int ids[kIdsCap];
  const int units = Pt == kHead ? HKV : 1;
  const long total = (long)a.B * units * a.maxPages;
  long i = total * blockIdx.x / gridDim.x,
       end = total * (blockIdx.x + 1) / gridDim.x;
  uint32_t acc = 0;
  while (i < end) {
    long su = i / a.maxPages;
    int t0 = i % a.maxPages;
    int t1 = (int)min((long)a.maxPages, t0 + (end - i));
    t1 = min(t1, t0 + kIdsCap);
    acc += readTiles<Pt>(a, su / units, su % units, t0, t1, ids);
    i += t1 - t0;
  }
  addSum(a.sum, acc);
}

/// page grid through an S-stage ring of 16 KB bulk copies (a quarter of a K
/// or V page each): warp 4's lane 0 produces, warps 0-3 consume stage i of
/// 4 by i % 4 and release it.
template <int S>
__global__ void __launch_bounds__(kThreads + 32) pageBulk(Args a) {
  static_assert(S % 4 == 0, "a slot's phases must all go to one warp");
  constexpr int kChunk = kPageHalf / 4; // uint4 per stage (16 KB)
  extern __shared__ uint4 ring[];
  __shared__ uint64_t full[S], empty[S];
  __shared__ int ids[kIdsCap];
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) {
      mbarInit(&full[i], 1);
      mbarInit(&empty[i], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  int tps = (a.maxPages + a.splits - 1) / a.splits;
  int t0 = blockIdx.x * tps, t1 = min(t0 + tps, a.maxPages);
  for (int t = t0 + threadIdx.x; t < t1; t += blockDim.x)
    ids[t - t0] = a.bt[blockIdx.z * a.maxPages + t];
  __syncthreads();
  int n = max(0, t1 - t0) * 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t acc = 0;
  if (warp == 4) {
    for (int i = 0; lane == 0 && i < n; ++i) {
      int slot = i % S;
      if (i >= S)
        mbarWait(&empty[slot], (i / S - 1) & 1);
      int c = i % 8;
      const uint4 *src =
          (c < 4 ? a.k : a.v) + (long)ids[i / 8] * kPageHalf + (c % 4) * kChunk;
      mbarExpectTx(&full[slot], kChunk * 16);
      bulkCopy(ring + slot * kChunk, src, kChunk * 16, &full[slot]);
    }
  } else {
    for (int i = warp; i < n; i += 4) {
      int slot = i % S;
      mbarWait(&full[slot], (i / S) & 1);
      for (int j = lane; j < kChunk; j += 32)
        acc += words(ring[slot * kChunk + j]);
      __syncwarp();
      if (lane == 0)
        mbarArrive(&empty[slot]);
    }
  }
  addSum(a.sum, acc);
}

__global__ void plainRead(const uint4 *k, const uint4 *v, const int *pages,
                          long nPages, unsigned long long *sum) {
  uint32_t acc = 0;
  const long n = nPages * kPageHalf;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    long off = (long)pages[i / kPageHalf] * kPageHalf + i % kPageHalf;
    acc += words(__ldg(k + off)) + words(__ldg(v + off));
  }
  addSum(sum, acc);
}

__global__ void fill(uint32_t *c, long n, uint32_t seed) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    c[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

/// The pool (B * maxPages used pages, shuffled, plus B unused), kCopies
/// copies of K and V, and the expected sum of the used pages' low words.
struct Problem {
  int B, maxPages, pool;
  std::vector<int> table;
  int *bt, *sorted;
  uint4 *k[kCopies], *v[kCopies];
  unsigned long long *sum, expect = 0;

  Problem(int B, int len) : B(B), maxPages((len + P - 1) / P) {
    pool = B * maxPages + B;
    std::vector<int> perm(pool);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(B * 7 + len));
    table.assign(perm.begin(), perm.begin() + B * maxPages);
    std::vector<int> sortedH = table;
    std::sort(sortedH.begin(), sortedH.end());
    CK(cudaMalloc(&bt, table.size() * 4));
    CK(cudaMemcpy(bt, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&sorted, table.size() * 4));
    CK(cudaMemcpy(sorted, sortedH.data(), table.size() * 4,
                  cudaMemcpyHostToDevice));
    long words = (long)pool * kPageHalf * 4;
    for (int c = 0; c < kCopies; ++c) {
      CK(cudaMalloc(&k[c], words * 4));
      CK(cudaMalloc(&v[c], words * 4));
      fill<<<1024, 256>>>((uint32_t *)k[c], words, kSeedK);
      fill<<<1024, 256>>>((uint32_t *)v[c], words, kSeedV);
    }
    CK(cudaMalloc(&sum, 8));
    for (int page : table) // every word of a used page, K and V
      for (long i = (long)page * kPageHalf * 4; i < (page + 1l) * kPageHalf * 4;
           ++i)
        expect += (uint32_t)((uint32_t)(i * 2654435761u) ^ kSeedK) +
                  (uint32_t)((uint32_t)(i * 2654435761u) ^ kSeedV);
    CK(cudaDeviceSynchronize());
  }
  ~Problem() {
    for (int c = 0; c < kCopies; ++c) {
      cudaFree(k[c]);
      cudaFree(v[c]);
    }
    cudaFree(bt);
    cudaFree(sorted);
    cudaFree(sum);
  }
  Args args(int c, int splits) const {
    return {k[c], v[c], bt, B, maxPages, splits, sum};
  }
};

static int failures = 0;

/// Runs `launch` once on copy 0 and checks the sum of the words read
/// (uint32 partial sums wrap; compared modulo 2^32, the same in any order),
/// then times it (median us, returned).
template <class Launch>
static float run(const Problem &p, const char *name, int ctas, int occ,
                 float readUs, Launch launch) {
  CK(cudaMemset(p.sum, 0, 8));
  launch(0, (cudaStream_t)0);
  CK(cudaGetLastError());
  unsigned long long got;
  CK(cudaMemcpy(&got, p.sum, 8, cudaMemcpyDeviceToHost));
  bool ok = (uint32_t)got == (uint32_t)p.expect;
  failures += !ok;
  float us = timeGraph(launch, kCopies);
  double bytes = 2.0 * p.table.size() * kPageHalf * 16;
  printf("B=%3d L=%5d %-18s ctas %5d occ %d: %s %8.2f us %5.2f TB/s %5.1f%% "
         "of plain\n",
         p.B, p.maxPages * P, name, ctas, occ, ok ? "ok  " : "FAIL", us,
         bytes / us / 1e6, readUs > 0 ? 100 * readUs / us : 100.0);
  return us;
}

template <class K>
static int occupancy(K fn, int threads, int smem) {
  CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          smem));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, threads, smem));
  return occ;
}

/// The runtime's num_splits policy (docs/abi.md) for `units` CTAs per
/// split: about one wave, at least 32 KB of K/V per CTA (4 tiles of a head,
/// half a page of all heads), at most 512 CTAs per sequence.
static int policySplits(const Problem &p, int units, int occ, int sms) {
  int minTiles = units == 1 ? 1 : 4;
  return std::max(1, std::min({64 * HKV / units, occ * sms / (p.B * units),
                               (p.maxPages + minTiles - 1) / minTiles}));
}

static void loadVariants(const Problem &p, int sms, int pad, float readUs) {
  const char *tag = pad ? "occ2" : "free";
  char name[32];
  auto grid = [&](auto fn, const char *what, int units,
                  dim3 (*shape)(int, int)) {
    int occ = occupancy(fn, kThreads, pad);
    int splits = policySplits(p, units, occ, sms);
    dim3 g = shape(splits, p.B);
    snprintf(name, sizeof name, "%s %s", what, tag);
    run(p, name, g.x * g.y * g.z, occ, readUs, [&](int c, cudaStream_t s) {
      fn<<<g, kThreads, pad, s>>>(p.args(c, splits));
    });
  };
  grid(gridRead<kHead, false>, "head grid", HKV,
       [](int sp, int B) { return dim3(sp, HKV, B); });
  grid(gridRead<kHead, true>, "head adjacent", HKV,
       [](int sp, int B) { return dim3(sp * HKV, 1, B); });
  grid(gridRead<kPage, false>, "page grid", 1,
       [](int sp, int B) { return dim3(sp, 1, B); });
  auto balanced = [&](auto fn, const char *what) {
    int occ = occupancy(fn, kThreads, pad);
    snprintf(name, sizeof name, "%s %s", what, tag);
    run(p, name, occ * sms, occ, readUs, [&](int c, cudaStream_t s) {
      fn<<<occ * sms, kThreads, pad, s>>>(p.args(c, 1));
    });
  };
  balanced(balancedRead<kHead>, "head balanced");
  balanced(balancedRead<kPage>, "page balanced");
}

template <int S>
static void bulkVariant(const Problem &p, int sms, float readUs) {
  int smem = S * kPageHalf / 4 * 16;
  int occ = occupancy(pageBulk<S>, kThreads + 32, smem);
  int splits = policySplits(p, 1, occ, sms);
  char name[32];
  snprintf(name, sizeof name, "page bulk S%d", S);
  run(p, name, splits * p.B, occ, readUs, [&](int c, cudaStream_t s) {
    pageBulk<S>
        <<<dim3(splits, 1, p.B), kThreads + 32, smem, s>>>(p.args(c, splits));
  });
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0); // lines survive a timeout
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int shapes[][2] = {{1, 4096},  {4, 4096},   {16, 4096},
                           {64, 4096}, {128, 2048}, {1, 32768}};
  for (auto &sh : shapes) {
    Problem p(sh[0], sh[1]);
    float readUs = run(p, "plain", sms * 4, 4, 0, [&](int c, cudaStream_t s) {
      plainRead<<<sms * 4, 512, 0, s>>>(p.k[c], p.v[c], p.sorted,
                                        (long)p.table.size(), p.sum);
    });
    loadVariants(p, sms, kPadOcc2, readUs);
    loadVariants(p, sms, 0, readUs);
    bulkVariant<8>(p, sms, readUs);
    bulkVariant<12>(p, sms, readUs);
  }
  printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
