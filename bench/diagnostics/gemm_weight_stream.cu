// Diagnostic microbenchmark (docs/performance.md entry 23): the weight stream
// of the GEMM-shaped projection variant by itself, without the mma. At B=16
// the Llama-3-8B shape's `_gemm16` kernels stream 2.2-3.1 TB/s, and a deeper
// cp.async ring made them slower, so the question is whether the access
// pattern itself is the ceiling: every CTA reads a tile of TR weight rows,
// SK k-elements of each row per stage (2 * SK contiguous bytes per row: 128
// bytes today), through an ST-stage ring of 16-byte cp.async with a block
// barrier per stage, as the emitted kernel does (Kernels/
// ProjectionGemmKernel.cpp). The weight is gate/up's (28672 x 4096 f16, 235
// MB, more than L2). Each configuration is timed like bench/ (4 launches in
// one CUDA graph, median of 100 replays), against a plain 16-byte read of the
// same bytes in the same run, and its sum is checked against that read's. It
// measures the pattern, not our kernel. The grids differ (N / TR x KS CTAs),
// so part of a difference between lines is the number of rounds of CTAs; the
// CTAs per SM printed are the occupancy calculator's.
//   nvcc -O3 -arch=sm_90 -std=c++17 gemm_weight_stream.cu \
//     -o gemm_weight_stream && ./gemm_weight_stream
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
#include <vector>
constexpr int N = 28672, K = 4096, kThreads = 256, kCopies = 4;
constexpr size_t kWords = size_t(N) * K / 2; // 32-bit words of W

/// Sum of every 32-bit word the thread consumes, as an integer (exact, so
/// any order of reading gives the same total).
__device__ __forceinline__ unsigned long long words(uint4 v) {
  return (unsigned long long)v.x + v.y + v.z + v.w;
}

/// A plain read of W: 16 bytes per thread and step, grid-stride.
__global__ void __launch_bounds__(kThreads)
    plainRead(const uint4 *__restrict__ w, unsigned long long *sum) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * size_t(kThreads) + threadIdx.x; i < kWords / 4;
       i += size_t(gridDim.x) * kThreads)
    s += words(__ldcs(w + i));
  atomicAdd(sum, s);
}

/// CTA (tile t, k-split part p) streams rows [t TR, (t + 1) TR) x k-range p
/// of K / KS elements in stages of SK, ST-stage ring, one barrier per stage;
/// `pad` bytes of dynamic shared memory on top cap the CTAs per SM.
template <int TR, int SK, int ST, int KS>
__global__ void __launch_bounds__(kThreads)
    ringRead(const __half *__restrict__ w, unsigned long long *sum) {
  constexpr int kChunks = SK / 8; // 16-byte chunks per row and stage
  constexpr int kPitch = SK + 8;  // halves: rows padded by 16 bytes
  constexpr int kSteps = K / KS / SK;
  extern __shared__ __align__(16) __half ring[];
  const int tile = blockIdx.x / KS, part = blockIdx.x % KS;
  const __half *base = w + size_t(tile) * TR * K + size_t(part) * (K / KS);
  auto issue = [&](int step) {
    if (step < kSteps) {
      __half *stage = ring + (step % ST) * TR * kPitch;
      for (int c = threadIdx.x; c < TR * kChunks; c += kThreads) {
        const int row = c / kChunks, chunk = c % kChunks;
        cpAsync16(stage + row * kPitch + chunk * 8,
                  base + size_t(row) * K + step * SK + chunk * 8);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int s = 0; s + 1 < ST; ++s)
    issue(s);
  unsigned long long acc = 0;
  for (int step = 0; step < kSteps; ++step) {
    asm volatile("cp.async.wait_group %0;" ::"n"(ST - 2) : "memory");
    __syncthreads();
    issue(step + ST - 1);
    const __half *stage = ring + (step % ST) * TR * kPitch;
    for (int c = threadIdx.x; c < TR * kChunks; c += kThreads)
      acc += words(*reinterpret_cast<const uint4 *>(
          stage + (c / kChunks) * kPitch + (c % kChunks) * 8));
  }
  atomicAdd(sum, acc);
}

struct Result {
  float us;
  unsigned long long sum;
  int residentPerSM; // as the occupancy calculator reports it
};

template <class Kernel>
Result run(Kernel kernel, int grid, int smem, const void *w,
           unsigned long long *dSum) {
  if (smem > 48 * 1024)
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smem));
  CK(cudaFuncSetAttribute(kernel,
                          cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaMemset(dSum, 0, 8));
  kernel<<<grid, kThreads, smem>>>(static_cast<const __half *>(w), dSum);
  CK(cudaDeviceSynchronize());
  Result r{0, 0, 0};
  CK(cudaMemcpy(&r.sum, dSum, 8, cudaMemcpyDeviceToHost));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.residentPerSM, kernel,
                                                   kThreads, smem));
  r.us = timeGraph(
      [&](int, cudaStream_t s) {
        kernel<<<grid, kThreads, smem, s>>>(static_cast<const __half *>(w),
                                            dSum);
      },
      kCopies);
  return r;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const double bytes = double(N) * K * 2;
  void *w;
  unsigned long long *dSum;
  CK(cudaMalloc(&w, size_t(bytes)));
  CK(cudaMalloc(&dSum, 8));
  // Deterministic words: w[i] = i * 2654435761 (mod 2^32).
  {
    std::vector<uint32_t> host(kWords);
    for (size_t i = 0; i < kWords; ++i)
      host[i] = uint32_t(i * 2654435761u);
    CK(cudaMemcpy(w, host.data(), size_t(bytes), cudaMemcpyHostToDevice));
  }
  CK(cudaMemset(dSum, 0, 8));
  plainRead<<<sms * 8, kThreads>>>(static_cast<const uint4 *>(w), dSum);
  CK(cudaDeviceSynchronize());
  unsigned long long want;
  CK(cudaMemcpy(&want, dSum, 8, cudaMemcpyDeviceToHost));
  const float plainUs = timeGraph(
      [&](int, cudaStream_t s) {
        plainRead<<<sms * 8, kThreads, 0, s>>>(static_cast<const uint4 *>(w),
                                               dSum);
      },
      kCopies);
  printf("%d SMs; W %d x %d f16 (%.1f MB)\n", sms, N, K, bytes / 1e6);
  printf("plain 16-byte read: %7.1f us  %.2f TB/s\n", plainUs,
         bytes / plainUs / 1e6);
  bool ok = true;
  auto report = [&](const char *name, int tr, int sk, int st, int ks,
                    int ctasPerSM, Result r) {
    const int grid = N / tr * ks;
    printf("TR %3d SK %3d (%3d B/row) ST %d KS %d  grid %4d  %d/SM  %7.1f us  "
           "%.2f TB/s  %s%s%s\n",
           tr, sk, 2 * sk, st, ks, grid, r.residentPerSM, r.us,
           bytes / r.us / 1e6, name, r.sum == want ? "" : "  SUM MISMATCH",
           r.residentPerSM == ctasPerSM ? "" : "  (not the intended CTAs/SM)");
    ok = ok && r.sum == want;
  };
  // `ctas` CTAs per SM by shared memory: the ring, padded up to
  // (228 KiB / ctas - 1 KiB reserved) when that is larger.
#define RING(TR, SK, ST, KS, CTAS, NAME)                                       \
  do {                                                                         \
    const int ring = ST * TR * (SK + 8) * 2;                                   \
    const int cap = (228 * 1024) / CTAS - 1024 - 16;                           \
    const int smem = ring > cap ? ring : (cap / 16) * 16;                      \
    if (ring > 227 * 1024 || ring > cap)                                       \
      printf("TR %d SK %d ST %d: %d B does not fit %d per SM\n", TR, SK, ST,   \
             ring, CTAS);                                                      \
    else                                                                       \
      report(NAME, TR, SK, ST, KS, CTAS,                                       \
             run(ringRead<TR, SK, ST, KS>, N / TR * KS, smem, w, dSum));       \
  } while (0)
  // Today's gate/up _gemm16 pattern and its neighbours.
  RING(128, 64, 3, 1, 2, "today's gate/up (2/SM)");
  RING(128, 64, 4, 1, 2, "deeper ring");
  RING(128, 64, 3, 1, 1, "1/SM");
  RING(128, 64, 3, 2, 2, "k split 2");
  RING(128, 64, 3, 8, 2, "k split 8 (today's o_proj/down_proj)");
  // Longer row segments per stage.
  RING(128, 128, 3, 1, 2, "256 B per row");
  RING(128, 128, 2, 1, 2, "256 B per row, 2 stages");
  RING(64, 128, 4, 1, 3, "256 B per row, 64-row tiles");
  RING(64, 256, 3, 1, 2, "512 B per row, 64-row tiles");
  RING(128, 256, 2, 1, 1, "512 B per row, 1/SM");
  RING(32, 256, 4, 1, 3, "512 B per row, 32-row tiles");
  RING(32, 512, 3, 1, 2, "1 KiB per row, 32-row tiles");
  RING(16, 512, 3, 1, 4, "1 KiB per row, 16-row tiles");
  printf(ok ? "all sums match\n" : "SUM MISMATCH\n");
  return ok ? 0 : 1;
}
