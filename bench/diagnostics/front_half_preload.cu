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
//   nvcc -O3 -arch=sm_90 -std=c++17 front_half_preload.cu -o front_half_preload
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <cstdint>
#include <cstdio>

constexpr int kLayers = 30, kThreads = 256, kCopyChunks = 4;
constexpr size_t kGateUp = 3538944, kDown = 1769472, kQkv = 1105920,
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

enum Rows { None, Pre, Post };

/// Thread 0 issues the copy of `bytes` at `src` into `dst` in kCopyChunks
/// bulk copies completing on `bar`.
__device__ __forceinline__ void copyRows(void *dst, const char *src,
                                         int bytes, uint64_t *bar) {
  if (threadIdx.x != 0)
    return;
  mbarExpectTx(bar, bytes);
  const int chunk = bytes / kCopyChunks;
  for (int c = 0; c < kCopyChunks; ++c)
    bulkCopy(static_cast<char *>(dst) + c * chunk, src + c * chunk, chunk,
             bar);
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
  CK(cudaFuncSetAttribute(attention<Pre>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize, maxSmem));
  CK(cudaFuncSetAttribute(attention<Post>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize, maxSmem));
  printf("%d SMs, %d layers of %.2f MB (A 3.5 MB / 396 CTAs, P 1.77 / 144, "
         "F 1.1 / 240, C: KV 0.44 MB / N CTAs)\n",
         prop.multiProcessorCount, kLayers, layerBytes / 1e6);
  bool ok = true;
  // One layer's kernels: A, P, optionally F, then C with `rows` mode on n
  // CTAs; returns us per layer.
  auto run = [&](const char *name, bool separate, Rows rows, int n) {
    const int perLayer = separate ? 4 : 3;
    auto kernelOf = [&](Rows r) {
      return r == Pre ? attention<Pre>
                      : r == Post ? attention<Post> : attention<None>;
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
          cudaLaunchAttribute attr;
          attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attr.val.programmaticStreamSerializationAllowed = 1;
          auto launch = [&](auto kernel, int grid, int smem, auto... args) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = grid;
            cfg.blockDim = kThreads;
            cfg.dynamicSmemBytes = smem;
            cfg.stream = s;
            cfg.attrs = &attr;
            cfg.numAttrs = index > 0 ? 1 : 0;
            CK(cudaLaunchKernelEx(&cfg, kernel, args..., chain, index, sink));
            ++index;
          };
          launch(stream, 396, 0, gateUp, kGateUp);
          launch(stream, 144, 0, down, kDown);
          if (separate)
            launch(stream, 240, 0, qkv, kQkv);
          launch(kernelOf(rows), n, rows == None ? 0 : rowBytes, kv,
                 (const char *)qkv, rowBytes);
        },
        kLayers);
    int last = 0;
    CK(cudaMemcpy(&last, chain + perLayer * kLayers, sizeof(int),
                  cudaMemcpyDeviceToHost));
    const bool complete = last == perLayer * kLayers;
    printf("%-9s C on %2d CTAs (%5.1f KiB of rows each): %6.2f us/layer%s\n",
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
  }
  printf(ok ? "all chains complete\n" : "CHAIN BROKEN\n");
  return ok ? 0 : 1;
}
