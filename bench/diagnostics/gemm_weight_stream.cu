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
// CTAs per SM printed are the occupancy calculator's. The last lines read W
// as if the runtime had packed it so that every stage of every CTA is one
// contiguous block, fetched either by 16-byte cp.async or by one Hopper bulk
// copy (cp.async.bulk + mbarrier) per stage: issue 14's design, which the
// per-row bulk copies of gemm_projection.cu could not feed (issue-bound).
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

/// Adds each warp's sums to *sum with one atomic per warp. One atomic per
/// thread on one address serialises (about 1 ns each, 57K per launch at grid
/// 224): the first run of this file timed those atomics, not the reads.
__device__ __forceinline__ void addToSum(unsigned long long *sum,
                                         unsigned long long s) {
  for (int o = 16; o > 0; o /= 2)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0)
    atomicAdd(sum, s);
}

/// A plain read of W: 16 bytes per thread and step, grid-stride.
__global__ void __launch_bounds__(kThreads)
    plainRead(const uint4 *__restrict__ w, unsigned long long *sum) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * size_t(kThreads) + threadIdx.x; i < kWords / 4;
       i += size_t(gridDim.x) * kThreads)
    s += words(__ldcs(w + i));
  addToSum(sum, s);
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
  addToSum(sum, acc);
}

/// The same tiles with W pre-packed by the runtime so that each stage of
/// each CTA is one contiguous block of SB bytes (TR rows x SK k-elements:
/// CTA t then owns bytes [t, t + 1) x N * K * 2 / grid of W, whatever the
/// permutation inside a block, which a packing pass would choose to suit
/// ldmatrix). BULK: one thread issues one cp.async.bulk of SB bytes per stage
/// completing on the stage's mbarrier; otherwise every thread issues 16-byte
/// cp.async as ringRead does. One block barrier per stage (the slot reused).
template <int SB, int ST, bool BULK>
__global__ void __launch_bounds__(kThreads)
    packedRead(const __half *__restrict__ w, unsigned long long *sum) {
  constexpr int kVecs = SB / 16;
  extern __shared__ __align__(128) uint4 slots[];
  __shared__ uint64_t full[ST];
  const size_t perCta = kWords * 4 / gridDim.x; // bytes; grids divide W
  const char *base = reinterpret_cast<const char *>(w) + blockIdx.x * perCta;
  const int steps = static_cast<int>(perCta / SB);
  if (BULK && threadIdx.x == 0) {
    for (int i = 0; i < ST; ++i)
      mbarInit(&full[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int step) {
    if (step < steps) {
      uint4 *slot = slots + (step % ST) * kVecs;
      const char *src = base + size_t(step) * SB;
      if (BULK) {
        if (threadIdx.x == 0) {
          mbarExpectTx(&full[step % ST], SB);
          bulkCopy(slot, src, SB, &full[step % ST]);
        }
      } else {
        for (int v = threadIdx.x; v < kVecs; v += kThreads)
          cpAsync16(slot + v, src + size_t(v) * 16);
      }
    }
    if (!BULK)
      asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int i = 0; i + 1 < ST; ++i)
    issue(i);
  unsigned long long acc = 0;
  for (int step = 0; step < steps; ++step) {
    if (BULK)
      mbarWait(&full[step % ST], (step / ST) & 1);
    else
      asm volatile("cp.async.wait_group %0;" ::"n"(ST - 2) : "memory");
    __syncthreads(); // stage `step` visible; slot (step - 1) % ST free
    issue(step + ST - 1);
    const uint4 *slot = slots + (step % ST) * kVecs;
    for (int v = threadIdx.x; v < kVecs; v += kThreads)
      acc += words(slot[v]);
  }
  addToSum(sum, acc);
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
  // W pre-packed: each stage one contiguous block (16-byte cp.async by all
  // threads, or one cp.async.bulk per stage).
#define PACKED(SB, ST, BULK, GRID, CTAS, NAME)                                 \
  do {                                                                         \
    const int cap = (228 * 1024) / CTAS - 1024 - 16 - 8 * ST;                  \
    const int smem = SB * ST > cap ? SB * ST : (cap / 16) * 16;                \
    Result r = run(packedRead<SB, ST, BULK>, GRID, smem, w, dSum);             \
    printf("packed %2d KiB x %d %s grid %4d  %d/SM  %7.1f us  %.2f TB/s  "     \
           "%s%s\n",                                                           \
           SB / 1024, ST, BULK ? "bulk   " : "cp.async", GRID,                 \
           r.residentPerSM, r.us, bytes / r.us / 1e6, NAME,                    \
           r.sum == want ? "" : "  SUM MISMATCH");                             \
    ok = ok && r.sum == want;                                                  \
  } while (0)
  // Grids divide W (N * K * 2 = 224 MiB) into whole stages: 224 tiles (gate/
  // up's row tiles of 128), 256, 448.
  PACKED(16384, 3, false, 224, 2, "today's tiles, packed, cp.async");
  PACKED(16384, 3, true, 224, 2, "today's tiles, packed, bulk");
  PACKED(16384, 4, true, 224, 2, "packed, bulk, 4 stages");
  PACKED(32768, 3, true, 224, 2, "packed, bulk, 32 KiB stages");
  PACKED(16384, 4, true, 256, 2, "packed, bulk, grid 256");
  PACKED(16384, 4, true, 448, 4, "packed, bulk, grid 448 (k split 2)");
  PACKED(32768, 4, true, 448, 2, "packed, bulk, 32 KiB x 4, grid 448");
  printf(ok ? "all sums match\n" : "SUM MISMATCH\n");
  return ok ? 0 : 1;
}
