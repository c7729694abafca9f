// Diagnostic microbenchmark (docs/performance.md, "Why each configuration
// misses", status of entry 34): can the front half of a SmolLM2 layer (its
// q/k/v weight rows, 1.1 MB) move into the attention kernel's few CTAs,
// with those rows copied into shared memory before griddepcontrol.wait, and
// still arrive before the previous kernel ends? A CUDA graph of kLayers
// layers, each a chain of dependent PDL kernels modelled on SmolLM2's batch-1
// step (distinct buffers per layer, 200 MB in all: streamed from HBM):
//   A  gate/up-like: 396 CTAs read 3.5 MB (L2 prefetch before the wait)
//   P  down_proj-like: 144 CTAs read 1.77 MB (the same)
//   F  the front half as its own kernel: 240 CTAs read 1.1 MB (the same)
//   C  attention-like: N CTAs (splits x 3 KV heads), each reads its share of
//      0.44 MB of KV history (L2 prefetch before the wait) and, where the
//      front half is folded in, sums its share S = 1.1 MB / N of the q/k/v
//      rows from shared memory, copied there by cp.async.bulk either before
//      the wait (pre) or after it (post).
// Per layer: "separate" = A, P, F, C (today's 4 kernels: C without weights),
// "pre N" / "post N" = A, P, C with the rows (3 kernels), "none N" = A, P, C
// without them (what the fold could reach at best). The fold pays where
// "pre N" is below "separate". Every kernel reads the counter the previous
// one wrote after its wait and its CTA 0 writes the next (the final value
// is checked). Timed like bench/ (graph_timing.cuh), us per layer.
//
// Closer to the kernel docs/front-half-in-attention-plan.md describes (added
// after the first run; performance.md entry 35's table has the modes above):
// "folded N" launches C in clusters of N / 3 CTAs (one per KV head) and,
// after the wait, normalises x (576 f16, RMSNorm), takes the dot products of
// its rows (staged before the wait) with it, 8 lanes per row, and sends its
// results to every CTA of its cluster through distributed shared memory
// (one cluster barrier); "separate, clusters" is today's four kernels with C
// launched in the same clusters.
//   nvcc -O3 -arch=sm_90 -std=c++17 front_half_preload.cu -o front_half_preload
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdio>

namespace cg = cooperative_groups;

constexpr int kLayers = 30, kThreads = 256, kCopyChunks = 4;
constexpr size_t
    kGateUp = 3538944,
    kDown = 1769472, kQkv = 1105920,
    kKv = 442368; // SmolLM2-135M bytes per layer (f16; KV at 576 tokens)

__device__ __forceinline__ unsigned long long words(uint4 v) {
  return (unsigned long long)v.x + v.y + v.z + v.w;
}

/// Thread 0: one L2 prefetch of `bytes` at `p` (a multiple of 16).
__device__ __forceinline__ void prefetchL2(const void *p, size_t bytes) {
  if (threadIdx.x == 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p),
                 "r"(unsigned(bytes))
                 : "memory");
}

/// The chain step: read the previous kernel's counter, CTA 0 writes ours;
/// `s` keeps the loads alive.
__device__ __forceinline__ void chainStep(int *chain, int index,
                                          unsigned long long s,
                                          unsigned long long *sink) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const int v = *(volatile int *)&chain[index];
    if (s == 0x5eed) // never true for the data below
      atomicAdd(sink, s);
    if (blockIdx.x == 0)
      chain[index + 1] = v + 1;
  }
}

/// A, P, F: every CTA reads its share of `bytes` at `buf`, prefetched to L2
/// before the wait.
__global__ void __launch_bounds__(kThreads)
    stream(const uint4 *__restrict__ buf, size_t bytes, int *chain, int index,
           unsigned long long *sink) {
  const size_t per = bytes / 16 / gridDim.x, first = blockIdx.x * per;
  prefetchL2(buf + first, per * 16);
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned long long s = 0;
#pragma unroll 8
  for (size_t i = threadIdx.x; i < per; i += kThreads)
    s += words(__ldcs(buf + first + i));
  chainStep(chain, index, s, sink);
}

enum Rows { None, Pre, Post, Folded };

/// Thread 0 issues the copy of `bytes` at `src` into `dst` in kCopyChunks
/// bulk copies completing on `bar`.
__device__ __forceinline__ void copyRows(void *dst, const char *src, int bytes,
                                         uint64_t *bar) {
  if (threadIdx.x != 0)
    return;
  mbarExpectTx(bar, bytes);
  const int chunk = bytes / kCopyChunks;
  for (int c = 0; c < kCopyChunks; ++c)
    bulkCopy(static_cast<char *>(dst) + c * chunk, src + c * chunk, chunk, bar);
}

/// C: the CTA's KV share (prefetched before the wait) and, unless None, its
/// share of the q/k/v rows through shared memory.
template <Rows R>
__global__ void __launch_bounds__(kThreads)
    attention(const uint4 *__restrict__ kv, const char *__restrict__ rows,
              int rowBytes, int *chain, int index, unsigned long long *sink) {
  extern __shared__ __align__(128) uint4 smem[];
  __shared__ uint64_t bar;
  const size_t per = kKv / 16 / gridDim.x, first = blockIdx.x * per;
  const char *mine = rows + size_t(blockIdx.x) * rowBytes;
  initStageBarriers(&bar, 1);
  __syncthreads();
  prefetchL2(kv + first, per * 16);
  if (R == Pre)
    copyRows(smem, mine, rowBytes, &bar);
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (R == Post)
    copyRows(smem, mine, rowBytes, &bar);
  unsigned long long s = 0;
  for (size_t i = threadIdx.x; i < per; i += kThreads)
    s += words(__ldcs(kv + first + i));
  if (R != None) {
    mbarWait(&bar, 0);
    for (int i = threadIdx.x; i < rowBytes / 16; i += kThreads)
      s += words(smem[i]);
  }
  chainStep(chain, index, s, sink);
}

constexpr int kHidden = 576, kRowVectors = kHidden / 8,
              kMaxRowsPerCluster = 320;

/// The sum of `v` over the CTA (every thread gets it).
__device__ float blockSum(float v, float *scratch) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0)
    scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w)
    total += scratch[w];
  return total;
}

/// "folded": C with the front half's arithmetic (see the file comment).
/// `x` is the layer input (kHidden f16); the CTA's rows (rowBytes / 2 /
/// kHidden of them) are copied before the wait.
__global__ void __launch_bounds__(kThreads)
    folded(const uint4 *__restrict__ kv, const char *__restrict__ rows,
           int rowBytes, const uint4 *__restrict__ x, int *chain, int index,
           unsigned long long *sink) {
  extern __shared__ __align__(128) uint4 smem[];
  __shared__ uint64_t bar;
  __shared__ float scratch[kThreads / 32];
  __shared__ __align__(16) __half xs[kHidden];
  __shared__ float results[kMaxRowsPerCluster];
  cg::cluster_group cluster = cg::this_cluster();
  const int rowCount = rowBytes / (2 * kHidden);
  const size_t per = kKv / 16 / gridDim.x, first = blockIdx.x * per;
  initStageBarriers(&bar, 1);
  __syncthreads();
  prefetchL2(kv + first, per * 16);
  copyRows(smem, rows + size_t(blockIdx.x) * rowBytes, rowBytes, &bar);
  // The cluster barrier's first phase: arrived at here, waited for before
  // the first store into another CTA's shared memory (which must have
  // started), as the emitted attention kernel does.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // RMSNorm of x: one 16-byte vector per thread of the first kRowVectors.
  uint4 v = threadIdx.x < kRowVectors ? x[threadIdx.x] : make_uint4(0, 0, 0, 0);
  const __half *h = reinterpret_cast<const __half *>(&v);
  float squares = 0;
  for (int e = 0; e < 8; ++e)
    squares += __half2float(h[e]) * __half2float(h[e]);
  const float inv = rsqrtf(blockSum(squares, scratch) / kHidden + 1e-5f);
  if (threadIdx.x < kRowVectors)
    for (int e = 0; e < 8; ++e)
      xs[threadIdx.x * 8 + e] = __float2half(__half2float(h[e]) * inv);
  unsigned long long s = 0;
  for (size_t i = threadIdx.x; i < per; i += kThreads)
    s += words(__ldcs(kv + first + i));
  __syncthreads();
  mbarWait(&bar, 0);
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  // The rows' dot products: 8 lanes per row, 9 vectors each, shuffles.
  const int lane8 = threadIdx.x % 8, group = threadIdx.x / 8;
  const __half *w = reinterpret_cast<const __half *>(smem);
  for (int r = group; r < rowCount; r += kThreads / 8) {
    float acc = 0;
    for (int c = lane8; c < kRowVectors; c += 8)
      for (int e = 0; e < 8; ++e)
        acc += __half2float(w[r * kHidden + c * 8 + e]) *
               __half2float(xs[c * 8 + e]);
    for (int o = 4; o > 0; o /= 2)
      acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane8 == 0)
      for (unsigned rank = 0; rank < cluster.num_blocks(); ++rank)
        cluster.map_shared_rank(
            results, rank)[cluster.block_rank() * rowCount + r] = acc;
  }
  cluster.sync();
  for (int i = threadIdx.x; i < rowCount * int(cluster.num_blocks());
       i += kThreads)
    s += results[i] == 12345.f;
  chainStep(chain, index, s, sink);
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t layerBytes = kGateUp + kDown + kQkv + kKv;
  char *buf;
  int *chain;
  unsigned long long *sink;
  CK(cudaMalloc(&buf, kLayers * layerBytes));
  CK(cudaMemset(buf, 1, kLayers * layerBytes));
  CK(cudaMalloc(&chain, (4 * kLayers + 1) * sizeof(int)));
  CK(cudaMalloc(&sink, 8));
  const int maxSmem = 80 << 10;
  CK(cudaFuncSetAttribute(
      attention<Pre>, cudaFuncAttributeMaxDynamicSharedMemorySize, maxSmem));
  CK(cudaFuncSetAttribute(
      attention<Post>, cudaFuncAttributeMaxDynamicSharedMemorySize, maxSmem));
  CK(cudaFuncSetAttribute(folded, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          maxSmem));
  printf("%d SMs, %d layers of %.2f MB (A 3.5 MB / 396 CTAs, P 1.77 / 144, "
         "F 1.1 / 240, C: KV 0.44 MB / N CTAs)\n",
         prop.multiProcessorCount, kLayers, layerBytes / 1e6);
  bool ok = true;
  // One layer's kernels: A, P, optionally F, then C with `rows` mode on n
  // CTAs, in clusters of n / 3 where `clusters`; prints us per layer.
  auto run = [&](const char *name, bool separate, Rows rows, int n,
                 bool clusters = false) {
    const int perLayer = separate ? 4 : 3;
    auto kernelOf = [&](Rows r) {
      return r == Pre    ? attention<Pre>
             : r == Post ? attention<Post>
                         : attention<None>;
    };
    const int rowBytes = int(kQkv / n) / (16 * kCopyChunks) * 16 * kCopyChunks;
    const float us = timeGraph(
        [&](int layer, cudaStream_t s) {
          if (layer == 0)
            cudaMemsetAsync(chain, 0, sizeof(int), s);
          char *base = buf + layer * layerBytes;
          const uint4 *gateUp = (const uint4 *)base,
                      *down = (const uint4 *)(base + kGateUp),
                      *qkv = (const uint4 *)(base + kGateUp + kDown),
                      *kv = (const uint4 *)(base + kGateUp + kDown + kQkv);
          int index = layer * perLayer;
          cudaLaunchAttribute attrs[2];
          attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attrs[0].val.programmaticStreamSerializationAllowed = 1;
          attrs[1].id = cudaLaunchAttributeClusterDimension;
          attrs[1].val.clusterDim.x = n / 3;
          attrs[1].val.clusterDim.y = attrs[1].val.clusterDim.z = 1;
          // `inClusters`: the launch of C where `clusters`.
          auto launch = [&](auto kernel, int grid, int smem, bool inClusters,
                            auto... args) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = grid;
            cfg.blockDim = kThreads;
            cfg.dynamicSmemBytes = smem;
            cfg.stream = s;
            cfg.attrs = attrs;
            cfg.numAttrs = inClusters ? 2 : index > 0 ? 1 : 0;
            CK(cudaLaunchKernelEx(&cfg, kernel, args..., chain, index, sink));
            ++index;
          };
          launch(stream, 396, 0, false, gateUp, kGateUp);
          launch(stream, 144, 0, false, down, kDown);
          if (separate)
            launch(stream, 240, 0, false, qkv, kQkv);
          if (rows == Folded)
            launch(folded, n, rowBytes, true, kv, (const char *)qkv, rowBytes,
                   down);
          else
            launch(kernelOf(rows), n, rows == None ? 0 : rowBytes, clusters, kv,
                   (const char *)qkv, rowBytes);
        },
        kLayers);
    int last = 0;
    CK(cudaMemcpy(&last, chain + perLayer * kLayers, sizeof(int),
                  cudaMemcpyDeviceToHost));
    const bool complete = last == perLayer * kLayers;
    printf("%-18s C on %2d CTAs (%5.1f KiB of rows each): %6.2f us/layer%s\n",
           name, n, rows == None ? 0.0 : rowBytes / 1024.0, us,
           complete ? "" : "  CHAIN BROKEN");
    ok = ok && complete;
  };
  for (int rep = 0; rep < 2; ++rep) {
    run("separate", true, None, 15);
    for (int n : {15, 24, 48}) {
      run("none", false, None, n);
      run("pre", false, Pre, n);
      run("post", false, Post, n);
    }
    for (int n : {15, 24}) { // portable clusters of 5 and 8
      run("separate, clusters", true, None, n, true);
      run("folded", false, Folded, n);
    }
  }
  printf(ok ? "all chains complete\n" : "CHAIN BROKEN\n");
  return ok ? 0 : 1;
}
