// Diagnostic microbenchmark (docs/performance.md entry 24): what one kernel
// boundary costs in a CUDA graph of dependent kernels, the floor under
// SmolLM2's batch-1 step (153 kernels in 572 us: 3.7 us each, each kernel
// moving 0.7-3.5 MB). A graph of kChain kernels, each depending on the
// previous one (kernel i reads the counter kernel i - 1 wrote, after
// griddepcontrol.wait; the final counter is checked), with or without
// programmatic dependent launch (PDL), and per kernel:
//   empty     nothing but the dependency
//   read      every CTA reads its share of the kernel's own S-byte buffer
//             (distinct buffers, kChain x S > L2: streamed from HBM)
//   prefetch  read, with the CTA's share prefetched to L2 before
//             griddepcontrol.wait (as the emitted kernels do, Abi.cpp)
// at grids of one and two CTAs per SM (256 threads), and at a grid of 9 CTAs
// reading 72 KiB each (the attention tail of docs/o-proj-partials-plan.md:
// its cost is that line's excess over the 9-CTA empty kernel's). Timed like
// bench/ (graph_timing.cuh); prints us per kernel and the excess over S at the
// plain-read bandwidth of the same run.
//   nvcc -O3 -arch=sm_90 -std=c++17 kernel_chain.cu -o kernel_chain
#include "graph_timing.cuh"
#include <cstdint>
#include <cstdio>

constexpr int kChain = 150, kThreads = 256;

enum Mode { Empty, Read, Prefetch };

__device__ __forceinline__ unsigned long long words(uint4 v) {
  return (unsigned long long)v.x + v.y + v.z + v.w;
}

template <Mode M>
__global__ void __launch_bounds__(kThreads)
    step(const uint4 *__restrict__ buf, size_t vecs, int *chain, int index,
         unsigned long long *sink) {
  const size_t per = vecs / gridDim.x, first = blockIdx.x * per;
  if (M == Prefetch && threadIdx.x == 0)
    asm volatile(
        "cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(buf + first),
        "r"(unsigned(per * 16))
        : "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned long long s = 0;
  if (M != Empty)
#pragma unroll 8 // loads of several iterations in flight per thread
    for (size_t i = threadIdx.x; i < per; i += kThreads)
      s += words(__ldcs(buf + first + i));
  __syncthreads();
  if (threadIdx.x == 0) {
    const int v = *(volatile int *)&chain[index];
    if (s == 0x5eed) // never true for the data below; keeps the loads
      atomicAdd(sink, s);
    if (blockIdx.x == 0)
      chain[index + 1] = v + 1;
  }
}

/// Sums every 16-byte vector of `buf`, grid-stride: the plain-read bandwidth.
__global__ void plainRead(const uint4 *__restrict__ buf, size_t vecs,
                          unsigned long long *sink) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * size_t(kThreads) + threadIdx.x; i < vecs;
       i += size_t(gridDim.x) * kThreads)
    s += words(__ldcs(buf + i));
  if (s == 0x5eed)
    atomicAdd(sink, s);
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const size_t maxBytes = size_t(4) << 20;
  uint4 *buf;
  int *chain;
  unsigned long long *sink;
  CK(cudaMalloc(&buf, kChain * maxBytes));
  CK(cudaMemset(buf, 1, kChain * maxBytes));
  CK(cudaMalloc(&chain, (kChain + 1) * sizeof(int)));
  CK(cudaMalloc(&sink, 8));
  const size_t allVecs = kChain * maxBytes / 16;
  const float plainUs = timeGraph(
      [&](int, cudaStream_t s) {
        plainRead<<<sms * 8, kThreads, 0, s>>>(buf, allVecs, sink);
      },
      1);
  const double bw = kChain * maxBytes / plainUs / 1e6; // TB/s
  printf("%d SMs; plain read of %.0f MB: %.2f TB/s; %d dependent kernels per "
         "graph\n",
         sms, kChain * maxBytes / 1e6, bw, kChain);
  bool ok = true;
  auto run = [&](const char *name, auto kernel, bool pdl, int grid,
                 size_t bytes) {
    const size_t vecs = bytes / 16;
    const float us = timeGraph(
        [&](int i, cudaStream_t s) {
          if (i == 0)
            cudaMemsetAsync(chain, 0, sizeof(int), s);
          cudaLaunchConfig_t cfg = {};
          cfg.gridDim = grid;
          cfg.blockDim = kThreads;
          cfg.stream = s;
          cudaLaunchAttribute attr;
          attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attr.val.programmaticStreamSerializationAllowed = 1;
          cfg.attrs = &attr;
          cfg.numAttrs = pdl && i > 0 ? 1 : 0;
          CK(cudaLaunchKernelEx(&cfg, kernel, buf + i * (maxBytes / 16), vecs,
                                chain, i, sink));
        },
        kChain);
    int last = 0;
    CK(cudaMemcpy(&last, chain + kChain, sizeof(int), cudaMemcpyDeviceToHost));
    const double floorUs = bytes / bw / 1e6;
    printf("%-9s %-6s grid %3d  %4.1f MB  %6.2f us/kernel  (read floor %5.2f, "
           "excess %5.2f)%s\n",
           name, pdl ? "PDL" : "no PDL", grid, bytes / 1e6, us, floorUs,
           us - floorUs, last == kChain ? "" : "  CHAIN BROKEN");
    ok = ok && last == kChain;
  };
  for (int perSM : {1, 2})
    for (bool pdl : {false, true}) {
      const int grid = sms * perSM;
      run("empty", step<Empty>, pdl, grid, size_t(grid) * 16);
      for (size_t mb : {1, 2, 4}) {
        run("read", step<Read>, pdl, grid, mb << 20);
        run("prefetch", step<Prefetch>, pdl, grid, mb << 20);
      }
    }
  // docs/o-proj-partials-plan.md's attention tail: 9 CTAs (SmolLM2's query
  // heads) each reading one head's W_o slice (576 x 64 f16 = 72 KiB).
  for (bool pdl : {false, true}) {
    run("empty", step<Empty>, pdl, 9, 9 * 16);
    run("read", step<Read>, pdl, 9, 9 * 73728);
    run("prefetch", step<Prefetch>, pdl, 9, 9 * 73728);
  }
  printf(ok ? "all chains complete\n" : "CHAIN BROKEN\n");
  return ok ? 0 : 1;
}
