// Diagnostic microbenchmark (docs/performance.md entries 42, 43): is the
// GEMM-shaped projection's per-stage latency chain what holds it at 2-3x its
// weight floor, and does a warp-specialised pipeline close the gap?
//
// Entry 40's ncu of the emitted sm_90a `_gemm16/64` variants: 20.9 us at
// B=4 and 37.0 us at B=64 for the Llama-3-8B q/k/v weight (50 MB; floor
// about 11 us), 30-53% of DRAM bandwidth, nothing saturated: every stage is
// a chain of the TMA/cp.async waits, two CTA barriers around the norm's
// pass and a wgmma wait, with 2 CTAs of 8 warps per SM to hide it.
//
// Y[B, N] = X[B, K] W^T for W = the 8B shape's q/k/v weight (N = 6144,
// K = 4096, f16, row-major), fp32 out, no norm. Variants:
//   cublas   cublasGemmEx (f16 in, fp32 compute and out)
//   read     a plain 16-byte read of W by every SM (the floor's kernel)
//   ws       warp-specialised: per CTA a tile of 128 weight rows and T
//            tokens over K / S of k (S CTAs split k, so 48 x S CTAs); one
//            producer warp issues per 64-k stage one TMA box of the weight
//            rows and one of the T token rows (128-byte swizzle) onto the
//            stage's full mbarrier; two consumer warpgroups (64 rows each)
//            wait on it, multiply by wgmma m64nTk16 (RS: the weight
//            fragments from registers by ldmatrix, as the emitted kernel;
//            SS: both operands by descriptor), keep one wgmma group in
//            flight and release the previous stage on its empty mbarrier
//            (one arrival per consumer warp): no CTA barrier in the loop.
//            The partial tiles go to Y by red.global.add.f32.
//   ws+norm  ws with the product's RMSNorm fold per stage done by the
//            consumers behind a named barrier and the token rows by the
//            producer's cp.async (wsNormGemm, below): 2-5x ws (entry 43)
//   ws+fold  the fold in fold warps of its own, the token rows by cp.async,
//            per-row bulk copies or TMA boxes (wsFoldGemm, below; entry 43:
//            the TMA boxes are what keeps it near ws)
// Each variant's outputs are compared with float64 sums on the CPU.
// Timed like bench/ (graph_timing.cuh): 8 launches per graph over 4 copies
// of W (200 MB, more than L2).
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 \
//     gemm_warp_specialized.cu -lcuda -lcublas
// (bench/session/run.sh diag gemm_warp_specialized reads the flags here:)
// nvcc-flags: -gencode arch=compute_90a,code=sm_90a -lcublas
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <cmath>
#include <cstdio>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <vector>

constexpr int N = 6144, K = 4096, kMaxTokens = 64, kCopies = 4;
constexpr int kRows = 128, kStageK = 64, kWBytes = kRows * kStageK * 2;
constexpr int kThreads = 288; // two consumer warpgroups + a producer warp

/// The wgmma descriptor of a K-major operand of 128-byte rows, 128-byte
/// swizzled, 8-row groups 1024 bytes apart (Fragments/Wgmma.cpp's).
__device__ __forceinline__ uint64_t desc128(uint32_t address) {
  return uint64_t((address & 0x3FFFF) >> 4) | (uint64_t(1) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ void tma2d(void *dst, const CUtensorMap *map, int x,
                                      int y, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(smemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smemAddr(bar))
      : "memory");
}
__device__ __forceinline__ void wgmmaRS8(float (&d)[4], const uint32_t (&a)[4],
                                         uint64_t descB) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
               "{%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(1)
               : "memory");
}
__device__ __forceinline__ void wgmmaSS8(float (&d)[4], uint64_t descA,
                                         uint64_t descB) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
               "{%0, %1, %2, %3}, "
               "%4, %5, p, 1, 1, 0, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "l"(descA), "l"(descB), "r"(1)
               : "memory");
}
__device__ __forceinline__ void wgmmaRS16(float (&d)[8], const uint32_t (&a)[4],
                                          uint64_t descB) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, "
               "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                 "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(1)
               : "memory");
}
__device__ __forceinline__ void wgmmaSS16(float (&d)[8], uint64_t descA,
                                          uint64_t descB) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, "
               "%8, %9, p, 1, 1, 0, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                 "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(descA), "l"(descB), "r"(1)
               : "memory");
}
__device__ __forceinline__ void
wgmmaRS64(float (&d)[32], const uint32_t (&a)[4], uint64_t descB) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
               "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, "
               "%26, %27, %28, %29, %30, %31}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                 "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                 "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                 "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                 "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                 "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
                 "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                 "+f"(d[30]), "+f"(d[31])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(1)
               : "memory");
}
__device__ __forceinline__ void wgmmaSS64(float (&d)[32], uint64_t descA,
                                          uint64_t descB) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
               "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, "
               "%26, %27, %28, %29, %30, %31}, "
               "%32, %33, p, 1, 1, 0, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                 "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                 "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                 "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                 "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                 "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
                 "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                 "+f"(d[30]), "+f"(d[31])
               : "l"(descA), "l"(descB), "r"(1)
               : "memory");
}

template <int T>
__device__ __forceinline__ void wgmmaRS(float (&d)[T / 2],
                                        const uint32_t (&a)[4], uint64_t b) {
  if constexpr (T == 8)
    wgmmaRS8(d, a, b);
  else if constexpr (T == 16)
    wgmmaRS16(d, a, b);
  else
    wgmmaRS64(d, a, b);
}
template <int T>
__device__ __forceinline__ void wgmmaSS(float (&d)[T / 2], uint64_t a,
                                        uint64_t b) {
  if constexpr (T == 8)
    wgmmaSS8(d, a, b);
  else if constexpr (T == 16)
    wgmmaSS16(d, a, b);
  else
    wgmmaSS64(d, a, b);
}

template <int T>
__host__ __device__ constexpr int slotBytes() {
  return kWBytes + T * 128;
}

/// Commits the stage's wgmmas, leaves that group in flight and releases the
/// stage before (its group is done) on its empty mbarrier, one arrival per
/// consumer warp (`lane` 0). (The lane comes from the caller: computed here
/// from threadIdx.x, ptxas serialised the wgmmas, advisory C7515.)
template <int ST>
__device__ __forceinline__ void commitAndRelease(int s, uint64_t *empty,
                                                 int lane) {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  if (s > 0 && lane == 0)
    mbarArrive(&empty[(s - 1) % ST]);
}

/// After the last stage: waits for every wgmma and adds this warp's
/// accumulators to y. Warp w: rows 16w + g (+ 8), tokens 8j + 2q (+ 1) in
/// acc[4j .. 4j + 3].
template <int T>
__device__ void addTile(const float (&acc)[T / 2], float *y, int tile,
                        int batch) {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4, row = tile * kRows + 16 * warp + g;
  for (int j = 0; j < T / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int t = 8 * j + 2 * q + (e & 1);
      if (t < batch)
        atomicAdd(&y[size_t(t) * N + row + 8 * (e >> 1)], acc[4 * j + e]);
    }
}

/// The producer warp's lane 0: the
/// stages' TMA boxes, each slot refilled once the consumers released its
/// previous step.
template <int T, int ST>
__device__ void produce(unsigned char *smem, uint64_t *full, uint64_t *empty,
                        const CUtensorMap *wmap, const CUtensorMap *xmap,
                        int steps, int k0, int row0) {
  for (int s = 0; s < steps; ++s) {
    const int slot = s % ST;
    if (s >= ST)
      mbarWait(&empty[slot], (s / ST - 1) & 1);
    unsigned char *dst = smem + slot * slotBytes<T>();
    mbarExpectTx(&full[slot], slotBytes<T>());
    tma2d(dst, wmap, k0 + s * kStageK, row0, &full[slot]);
    tma2d(dst + kWBytes, xmap, k0 + s * kStageK, 0, &full[slot]);
  }
}

template <int T, bool RS, int ST>
__global__ void __launch_bounds__(kThreads, 2)
    wsGemm(const __grid_constant__ CUtensorMap wmap,
           const __grid_constant__ CUtensorMap xmap, float *y, int batch,
           int split) {
  extern __shared__ unsigned char raw[];
  // 1 KiB-aligned by its shared-window address (a generic-pointer round
  // up would hide the space: generic loads and stores in the fold).
  unsigned char *smem = raw + ((0u - smemAddr(raw)) & 1023u);
  __shared__ uint64_t full[ST], empty[ST];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tile = blockIdx.x / split, rank = blockIdx.x % split;
  const int steps = K / split / kStageK, k0 = rank * (K / split);
  if (tid == 0) {
    for (int i = 0; i < ST; ++i) {
      mbarInit(&full[i], 1);
      mbarInit(&empty[i], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 8) {
    if (lane == 0)
      produce<T, ST>(smem, full, empty, &wmap, &xmap, steps, k0, tile * kRows);
    return;
  }
  float acc[T / 2] = {};
  for (int s = 0; s < steps; ++s) {
    const int slot = s % ST;
    mbarWait(&full[slot], (s / ST) & 1);
    unsigned char *st = smem + slot * slotBytes<T>();
    const uint32_t tokens = smemAddr(st + kWBytes);
    uint32_t a[4][4];
    if constexpr (RS)
      for (int kk = 0; kk < 4; ++kk) {
        const int row = 16 * warp + lane % 16;
        const int chunk = (lane / 16 + 2 * kk) ^ (lane % 8);
        ldmatrix4(a[kk], st + row * 128 + chunk * 16);
      }
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    for (int kk = 0; kk < 4; ++kk) {
      if constexpr (RS)
        wgmmaRS<T>(acc, a[kk], desc128(tokens + kk * 32));
      else
        wgmmaSS<T>(acc, desc128(smemAddr(st + warp / 4 * 64 * 128) + kk * 32),
                   desc128(tokens + kk * 32));
    }
    commitAndRelease<ST>(s, empty, lane);
  }
  addTile<T>(acc, y, tile, batch);
}

__global__ void readW(const uint4 *w, size_t n, uint32_t *sink) {
  uint32_t x = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = w[i];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x12345678u)
    *sink = x;
}

static CUtensorMap encode(void *base, int rows, int boxRows) {
  const cuuint64_t dims[2] = {K, cuuint64_t(rows)}, strides[1] = {K * 2};
  const cuuint32_t box[2] = {kStageK, cuuint32_t(boxRows)};
  return encodeSwizzledF16(base, 2, dims, strides, box);
}

// The norm fold (docs/gemm-warp-specialized-plan.md, "Measure before
// emitting"): wsNorm is ws (both operands by descriptor) plus what the
// product's kernel does per stage. The producer warp's 32 lanes copy the T
// token rows of x and of the residual and the stage's 64 norm-weight
// elements by 16-byte cp.async (rows past the batch repeat its last token)
// and arrive on the stage's full mbarrier as they land
// (cp.async.mbarrier.arrive.noinc: full counts lane 0's expect_tx for the
// weight box and 32 such arrivals). The consumers replace x by
// h = round(x + r), sum h^2 per token, write h to hout from the CTAs of row
// tile 0 (the product's residual_out) and scale it by the norm weight,
// round(h g) (the norm weight folded into the B operand), then a
// consumer-only named barrier after the async-proxy fence, then the wgmmas.
// The sums of squares go to `stats` (row tile 0's CTAs); y is the unscaled
// sum, which the product scales by rsqrt(sum / K + eps) in its last CTA.
template <int T>
__host__ __device__ constexpr int normSlotBytes() {
  return kWBytes + 2 * T * 128 + 1024; // weights, x, residual, norm weight
}
/// Byte offset of 16-byte chunk `chunk` of row `row` in 128-byte rows,
/// 128-byte swizzled.
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * 128 + ((chunk ^ (row % 8)) * 16);
}
__device__ __forceinline__ void cpAsyncArriveNoinc(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                   smemAddr(bar))
               : "memory");
}

struct NormArgs {
  const __half *x, *r, *g;
  __half *hout;
  float *stats, *y;
  int batch, split;
};

/// Lane `lane`'s share of a stage's token rows: x and r (rows past the
/// batch repeat its last token, 128-byte swizzled) and the stage's 64
/// norm-weight elements, by 16-byte cp.async behind the weight box at `dst`.
template <int T>
__device__ void copyTokenRows(unsigned char *dst, const NormArgs &a, int k,
                              int lane) {
  for (int c = lane; c < 2 * T * 8 + 8; c += 32) {
    const int which = c / (T * 8), t = (c % (T * 8)) / 8, chunk = c % 8;
    if (which < 2) {
      const __half *src =
          (which ? a.r : a.x) + size_t(min(t, a.batch - 1)) * K + k + chunk * 8;
      cpAsync16(dst + which * T * 128 + swizzled(t, chunk), src);
    } else {
      cpAsync16(dst + 2 * T * 128 + chunk * 16, a.g + k + chunk * 8);
    }
  }
}

template <int T, int ST>
__device__ void produceNorm(unsigned char *smem, uint64_t *full,
                            uint64_t *empty, const CUtensorMap *wmap,
                            const NormArgs &a, int steps, int k0, int row0) {
  const int lane = threadIdx.x % 32;
  for (int s = 0; s < steps; ++s) {
    const int slot = s % ST, k = k0 + s * kStageK;
    if (s >= ST)
      mbarWait(&empty[slot], (s / ST - 1) & 1);
    unsigned char *dst = smem + slot * normSlotBytes<T>();
    if (lane == 0) {
      mbarExpectTx(&full[slot], kWBytes);
      tma2d(dst, wmap, k, row0, &full[slot]);
    }
    copyTokenRows<T>(dst + kWBytes, a, k, lane);
    cpAsyncArriveNoinc(&full[slot]);
  }
  // The consumers' full waits count on these copies' arrivals: none still
  // in flight when the warp exits.
  asm volatile("cp.async.wait_all;" ::: "memory");
}

/// The consumers' pass over a landed slot (see above); returns nothing, adds
/// this thread's h^2 to `sums`.
template <int T>
__device__ void foldNorm(unsigned char *xs, const NormArgs &a, int k, int tile,
                         float (&sums)[(T * 8 + 255) / 256]) {
  for (int it = 0; it < (T * 8 + 255) / 256; ++it) {
    const int c = threadIdx.x + 256 * it, t = c / 8, chunk = c % 8;
    if (c >= T * 8)
      continue;
    uint4 xv = *reinterpret_cast<uint4 *>(xs + swizzled(t, chunk));
    const uint4 rv =
        *reinterpret_cast<const uint4 *>(xs + T * 128 + swizzled(t, chunk));
    const uint4 gv =
        *reinterpret_cast<const uint4 *>(xs + 2 * T * 128 + chunk * 16);
    __half *xh = reinterpret_cast<__half *>(&xv);
    const __half *rh = reinterpret_cast<const __half *>(&rv);
    const __half *gh = reinterpret_cast<const __half *>(&gv);
    uint4 hv;
    __half *h = reinterpret_cast<__half *>(&hv);
    for (int e = 0; e < 8; ++e) {
      h[e] = __float2half(__half2float(xh[e]) + __half2float(rh[e]));
      const float h32 = __half2float(h[e]);
      sums[it] += h32 * h32;
      xh[e] = __float2half(h32 * __half2float(gh[e]));
    }
    if (tile == 0 && t < a.batch)
      *reinterpret_cast<uint4 *>(a.hout + size_t(t) * K + k + chunk * 8) = hv;
    *reinterpret_cast<uint4 *>(xs + swizzled(t, chunk)) = xv;
  }
}

template <int T, int ST>
__global__ void __launch_bounds__(kThreads, 2)
    wsNormGemm(const __grid_constant__ CUtensorMap wmap, const NormArgs a) {
  extern __shared__ unsigned char raw[];
  // 1 KiB-aligned by its shared-window address (a generic-pointer round
  // up would hide the space: generic loads and stores in the fold).
  unsigned char *smem = raw + ((0u - smemAddr(raw)) & 1023u);
  __shared__ uint64_t full[ST], empty[ST];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tile = blockIdx.x / a.split, rank = blockIdx.x % a.split;
  const int steps = K / a.split / kStageK, k0 = rank * (K / a.split);
  if (tid == 0) {
    for (int i = 0; i < ST; ++i) {
      mbarInit(&full[i], 1 + 32);
      mbarInit(&empty[i], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 8) {
    produceNorm<T, ST>(smem, full, empty, &wmap, a, steps, k0, tile * kRows);
    return;
  }
  float acc[T / 2] = {};
  float sums[(T * 8 + 255) / 256] = {};
  for (int s = 0; s < steps; ++s) {
    const int slot = s % ST;
    mbarWait(&full[slot], (s / ST) & 1);
    unsigned char *st = smem + slot * normSlotBytes<T>();
    foldNorm<T>(st + kWBytes, a, k0 + s * kStageK, tile, sums);
    // The wgmmas read the rewritten rows through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n\tbar.sync 1, 256;" ::
                     : "memory");
    const uint32_t tokens = smemAddr(st + kWBytes);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    for (int kk = 0; kk < 4; ++kk)
      wgmmaSS<T>(acc, desc128(smemAddr(st + warp / 4 * 64 * 128) + kk * 32),
                 desc128(tokens + kk * 32));
    // All of the stage's wgmmas waited for, then the stage itself released:
    // with a group left in flight here ptxas serialised them (C7515).
    asm volatile("wgmma.commit_group.sync.aligned;\n\t"
                 "wgmma.wait_group.sync.aligned 0;" ::
                     : "memory");
    if (lane == 0)
      mbarArrive(&empty[slot]);
  }
  addTile<T>(acc, a.y, tile, a.batch);
  // A token's 8 chunks are 8 consecutive lanes.
  for (int it = 0; it < (T * 8 + 255) / 256; ++it) {
    float v = sums[it];
    for (int m = 4; m >= 1; m /= 2)
      v += __shfl_xor_sync(0xffffffffu, v, m);
    const int c = tid + 256 * it, t = c / 8;
    if (tile == 0 && c % 8 == 0 && c < T * 8 && t < a.batch)
      atomicAdd(&a.stats[t], v);
  }
}

// wsFold's token-row source (the second run: with the fold warps off the
// consumers' chain ws+fold stayed at ws+norm's 30 / 91 us, so the
// producer's cp.async rows are suspect):
//   kCpAsync  the producer's lanes, 16-byte cp.async, .noinc on tok
//   kBulk     the producer's lanes, one 128-byte cp.async.bulk per row
//             (TMA unit, no tensor map) completing tx on tok
//   kTma      lane 0, one TMA box of the T rows of x and one of r (tensor
//             maps of the step buffers; rows past the batch are whatever
//             the buffer holds, which only reaches those tokens' columns)
enum FoldSource { kCpAsync, kBulk, kTma };
/// A wsFold slot: the weight box, x and r rows (swizzled for kCpAsync,
/// plain for kBulk), the norm weight (1 KiB), h swizzled.
template <int T>
__host__ __device__ constexpr int foldSlotBytes() {
  return kWBytes + 3 * T * 128 + 1024;
}
template <int T>
__host__ __device__ constexpr int hOffset() {
  return kWBytes + 2 * T * 128 + 1024;
}

/// wsFold's producer warp: lane 0 the weight box and the norm weight on
/// `full`; the token rows per `M` on `tok`.
template <int T, int ST, int M>
__device__ void produceFold(unsigned char *smem, uint64_t *full,
                            uint64_t *empty, uint64_t *tok,
                            const CUtensorMap *wmap, const CUtensorMap *xmap,
                            const CUtensorMap *rmap, const NormArgs &a,
                            int steps, int k0, int row0) {
  const int lane = threadIdx.x % 32;
  for (int s = 0; s < steps; ++s) {
    const int slot = s % ST, k = k0 + s * kStageK;
    if (s >= ST)
      mbarWait(&empty[slot], (s / ST - 1) & 1);
    unsigned char *dst = smem + slot * foldSlotBytes<T>();
    if (M == kTma && lane == 0) {
      mbarExpectTx(&tok[slot], 2 * T * 128);
      tma2d(dst + kWBytes, xmap, k, 0, &tok[slot]);
      tma2d(dst + kWBytes + T * 128, rmap, k, 0, &tok[slot]);
    }
    if (lane == 0) {
      mbarExpectTx(&full[slot], kWBytes + 128);
      tma2d(dst, wmap, k, row0, &full[slot]);
      bulkCopy(dst + kWBytes + 2 * T * 128, a.g + k, 128, &full[slot]);
      if (M == kBulk)
        mbarExpectTx(&tok[slot], 2 * T * 128);
    }
    if (M == kCpAsync) {
      copyTokenRows<T>(dst + kWBytes, a, k, lane); // its g copy is unused
      cpAsyncArriveNoinc(&tok[slot]);
    } else if (M == kBulk) {
      __syncwarp(); // the expect_tx before any copy completes
      for (int c = lane; c < 2 * T; c += 32) {
        const int t = c % T;
        bulkCopy(dst + kWBytes + c * 128,
                 (c < T ? a.x : a.r) + size_t(min(t, a.batch - 1)) * K + k, 128,
                 &tok[slot]);
      }
    }
  }
  if (M == kCpAsync)
    asm volatile("cp.async.wait_all;" ::: "memory");
}

/// Chunk `chunk` of token `t`'s x and r rows for stage k0 + `k`.
template <int T, int M>
__device__ __forceinline__ void tokenChunk(const unsigned char *xs,
                                           const NormArgs &a, int k, int t,
                                           int chunk, uint4 &xv, uint4 &rv) {
  const int off = M == kBulk ? t * 128 + chunk * 16 : swizzled(t, chunk);
  xv = *reinterpret_cast<const uint4 *>(xs + off);
  rv = *reinterpret_cast<const uint4 *>(xs + T * 128 + off);
}

/// wsFold's fold warp `f`: stages f, f + FW, ...: h = round(x + r) into the
/// slot's h rows; from the stage's owner tile (s mod tiles) h^2 summed per
/// token and h to hout; then the async-proxy fence and the warp's arrival
/// on `full`. At the end the per-token sums go to stats.
template <int T, int ST, int FW, int M, bool NoFold>
__device__ void foldStages(unsigned char *smem, uint64_t *full, uint64_t *tok,
                           const NormArgs &a, int steps, int k0, int tile,
                           int f) {
  constexpr int kGroup = T / 4 < 8 ? T / 4 : 8; // chunks in registers at once
  const int lane = threadIdx.x % 32;
  float sums[T / 4] = {};
  for (int s = f; s < steps; s += FW) {
    const int slot = s % ST, k = k0 + s * kStageK;
    mbarWait(&tok[slot], (s / ST) & 1);
    unsigned char *st = smem + slot * foldSlotBytes<T>();
    // The row tiles take turns at a stage's h and sums (the third run: with
    // row tile 0 writing every stage, T = 64 took 38 us, twice "no fold").
    const bool owner = s % (gridDim.x / a.split) == tile;
    for (int i0 = 0; i0 < (NoFold ? 0 : T / 4); i0 += kGroup) {
      uint4 xv[kGroup], rv[kGroup];
      for (int i = 0; i < kGroup; ++i) {
        const int c = lane + 32 * (i0 + i);
        tokenChunk<T, M>(st + kWBytes, a, k, c / 8, c % 8, xv[i], rv[i]);
      }
      for (int i = 0; i < kGroup; ++i) {
        const int c = lane + 32 * (i0 + i), t = c / 8, chunk = c % 8;
        __half *xh = reinterpret_cast<__half *>(&xv[i]);
        const __half *rh = reinterpret_cast<const __half *>(&rv[i]);
        for (int e = 0; e < 8; ++e) {
          xh[e] = __float2half(__half2float(xh[e]) + __half2float(rh[e]));
          const float h32 = __half2float(xh[e]);
          sums[i0 + i] += owner ? h32 * h32 : 0.f;
        }
        *reinterpret_cast<uint4 *>(st + hOffset<T>() + swizzled(t, chunk)) =
            xv[i];
        if (owner && t < a.batch)
          *reinterpret_cast<uint4 *>(a.hout + size_t(t) * K + k + chunk * 8) =
              xv[i];
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if (lane == 0)
      mbarArrive(&full[slot]);
  }
  // Token lane / 8 + 4 i's 8 chunks are 8 consecutive lanes.
  for (int i = 0; i < T / 4; ++i) {
    float v = sums[i];
    for (int m = 4; m >= 1; m /= 2)
      v += __shfl_xor_sync(0xffffffffu, v, m);
    const int t = lane / 8 + 4 * i;
    if (tile < steps && lane % 8 == 0 && t < a.batch)
      atomicAdd(&a.stats[t], v);
  }
}

// The fold warps (wsFold, after the wsNorm run: its consumers folding each
// stage themselves, behind a named barrier, took 30 us at B=4 and 92 at
// B=64, 2-5x ws). Here the fold is a third role, off the consumers' chain:
// FW fold warps, warp f taking the stages s = f mod FW whole (no barrier
// between fold warps); the token rows per FoldSource. The consumers take
// the product's numerics: A = round(W g) (ldmatrix, then scaled by the norm
// weight in registers), B = h by descriptor.
template <int T, int ST, int FW, int M, bool NoFold>
__global__ void __launch_bounds__(32 * (9 + FW), T == 64 ? 1 : 2)
    wsFoldGemm(const __grid_constant__ CUtensorMap wmap,
               const __grid_constant__ CUtensorMap xmap,
               const __grid_constant__ CUtensorMap rmap, const NormArgs a) {
  // Every use of a slot goes to one fold warp, which waits on the slot's
  // tok phases in order: a phase parity can then not alias the phase before
  // (the first run, with 5 slots over 2 or 4 fold warps, hung).
  static_assert(ST % FW == 0, "a slot's stages must share their fold warp");
  extern __shared__ unsigned char raw[];
  unsigned char *smem = raw + ((0u - smemAddr(raw)) & 1023u);
  __shared__ uint64_t full[ST], empty[ST], tok[ST];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tile = blockIdx.x / a.split, rank = blockIdx.x % a.split;
  const int steps = K / a.split / kStageK, k0 = rank * (K / a.split);
  if (tid == 0) {
    for (int i = 0; i < ST; ++i) {
      mbarInit(&full[i], 2);
      mbarInit(&empty[i], 8);
      mbarInit(&tok[i], M == kCpAsync ? 32 : 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 8) {
    produceFold<T, ST, M>(smem, full, empty, tok, &wmap, &xmap, &rmap, a, steps,
                          k0, tile * kRows);
    return;
  }
  if (warp > 8) {
    foldStages<T, ST, FW, M, NoFold>(smem, full, tok, a, steps, k0, tile,
                                     warp - 9);
    return;
  }
  float acc[T / 2] = {};
  for (int s = 0; s < steps; ++s) {
    const int slot = s % ST;
    mbarWait(&full[slot], (s / ST) & 1);
    unsigned char *st = smem + slot * foldSlotBytes<T>();
    const uint32_t tokens = smemAddr(st + hOffset<T>());
    const __half2 *g2 =
        reinterpret_cast<const __half2 *>(st + kWBytes + 2 * T * 128);
    uint32_t w[4][4];
    for (int kk = 0; kk < 4; ++kk) {
      const int row = 16 * warp + lane % 16;
      const int chunk = (lane / 16 + 2 * kk) ^ (lane % 8);
      ldmatrix4(w[kk], st + row * 128 + chunk * 16);
      // a0, a1: k = 16 kk + 2q (+1); a2, a3: 8 more (mma.sync's A layout).
      const __half2 lo = g2[8 * kk + lane % 4], hi = g2[8 * kk + 4 + lane % 4];
      for (int e = 0; e < 4; ++e) {
        __half2 v = *reinterpret_cast<__half2 *>(&w[kk][e]);
        v = __hmul2(v, e < 2 ? lo : hi);
        w[kk][e] = *reinterpret_cast<uint32_t *>(&v);
      }
    }
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    for (int kk = 0; kk < 4; ++kk)
      wgmmaRS<T>(acc, w[kk], desc128(tokens + kk * 32));
    commitAndRelease<ST>(s, empty, lane);
  }
  addTile<T>(acc, a.y, tile, a.batch);
}

struct Problem {
  std::vector<__half> hw, hx, hr, hg;
  __half *w[kCopies], *x, *r, *g, *hout;
  float *y, *stats;
  CUtensorMap wmap[kCopies];
  /// Max |y - ref| / (|ref| + 1) over sampled outputs of the first `batch`
  /// tokens (y for weight copy 0, all copies hold the same values).
  double check(int batch) const {
    std::vector<float> out(size_t(batch) * N);
    CK(cudaMemcpy(out.data(), y, out.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int t = 0; t < batch; ++t)
      for (int r = t * 37 % 97; r < N; r += 97) {
        double ref = 0;
        for (int k = 0; k < K; ++k)
          ref += double(__half2float(hw[size_t(r) * K + k])) *
                 __half2float(hx[size_t(t) * K + k]);
        worst = std::max(worst, std::fabs(out[size_t(t) * N + r] - ref) /
                                    (std::fabs(ref) + 1));
      }
    return worst;
  }
  /// wsNorm's outputs against float64 sums of the same rounded terms:
  /// y = sum_k round(round(x + r) g) W, stats = sum_k round(x + r)^2, hout =
  /// round(x + r); the largest relative error of the three. With
  /// `scaledWeights` (wsFold, the product's numerics) y = sum_k round(W g)
  /// round(x + r) instead.
  double checkNorm(int batch, bool scaledWeights = false) const {
    std::vector<float> out(size_t(batch) * N), st(batch);
    std::vector<__half> h(size_t(batch) * K);
    CK(cudaMemcpy(out.data(), y, out.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(st.data(), stats, st.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.data(), hout, h.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int t = 0; t < batch; ++t) {
      std::vector<float> hh(K), scaled(K);
      double squares = 0;
      for (int k = 0; k < K; ++k) {
        const size_t at = size_t(t) * K + k;
        hh[k] = __half2float(
            __float2half(__half2float(hx[at]) + __half2float(hr[at])));
        scaled[k] =
            scaledWeights
                ? hh[k]
                : __half2float(__float2half(hh[k] * __half2float(hg[k])));
        squares += double(hh[k]) * hh[k];
        worst = std::max(worst, double(std::fabs(__half2float(h[at]) - hh[k])));
      }
      worst = std::max(worst, std::fabs(st[t] - squares) / (squares + 1));
      for (int r = t * 37 % 97; r < N; r += 97) {
        double ref = 0;
        for (int k = 0; k < K; ++k)
          ref += double(__half2float(scaledWeights
                                         ? __hmul(hw[size_t(r) * K + k], hg[k])
                                         : hw[size_t(r) * K + k])) *
                 scaled[k];
        worst = std::max(worst, std::fabs(out[size_t(t) * N + r] - ref) /
                                    (std::fabs(ref) + 1));
      }
    }
    return worst;
  }
};

template <int T, bool RS, int ST>
void runWs(Problem &p, int batch, int split) {
  const int smem = ST * slotBytes<T>() + 1024;
  auto kernel = wsGemm<T, RS, ST>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          smem));
  const CUtensorMap xmap = encode(p.x, kMaxTokens, T);
  const int grid = N / kRows * split;
  CK(cudaMemset(p.y, 0, size_t(kMaxTokens) * N * 4));
  kernel<<<grid, kThreads, smem>>>(p.wmap[0], xmap, p.y, batch, split);
  CK(cudaDeviceSynchronize());
  const double err = p.check(batch);
  const float us = timeGraph(
      [&](int c, cudaStream_t s) {
        kernel<<<grid, kThreads, smem, s>>>(p.wmap[c % kCopies], xmap, p.y,
                                            batch, split);
      },
      8);
  printf("B=%-3d ws T=%-2d %s S=%d stages %d (%3d CTAs) %7.2f us  %5.2f TB/s"
         "  err %.1e\n",
         batch, T, RS ? "RS" : "SS", split, ST, grid, us,
         N * double(K) * 2 / us / 1e6, err);
}

template <int T, int ST>
void runWsNorm(Problem &p, int batch, int split) {
  const int smem = ST * normSlotBytes<T>() + 1024;
  auto kernel = wsNormGemm<T, ST>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          smem));
  const int grid = N / kRows * split;
  NormArgs a{p.x, p.r, p.g, p.hout, p.stats, p.y, batch, split};
  CK(cudaMemset(p.y, 0, size_t(kMaxTokens) * N * 4));
  CK(cudaMemset(p.stats, 0, kMaxTokens * 4));
  kernel<<<grid, kThreads, smem>>>(p.wmap[0], a);
  CK(cudaDeviceSynchronize());
  const double err = p.checkNorm(batch);
  const float us = timeGraph(
      [&](int c, cudaStream_t s) {
        kernel<<<grid, kThreads, smem, s>>>(p.wmap[c % kCopies], a);
      },
      8);
  printf("B=%-3d ws+norm T=%-2d SS S=%d stages %d (%3d CTAs) %7.2f us  %5.2f "
         "TB/s  err %.1e\n",
         batch, T, split, ST, grid, us, N * double(K) * 2 / us / 1e6, err);
}

template <int T, int ST, int FW, int M, bool NoFold = false>
void runWsFold(Problem &p, int batch, int split) {
  const int smem = ST * foldSlotBytes<T>() + 1024;
  auto kernel = wsFoldGemm<T, ST, FW, M, NoFold>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          smem));
  const int grid = N / kRows * split, threads = 32 * (9 + FW);
  NormArgs a{p.x, p.r, p.g, p.hout, p.stats, p.y, batch, split};
  const CUtensorMap xmap = encode(p.x, kMaxTokens, T),
                    rmap = encode(p.r, kMaxTokens, T);
  CK(cudaMemset(p.y, 0, size_t(kMaxTokens) * N * 4));
  CK(cudaMemset(p.stats, 0, kMaxTokens * 4));
  kernel<<<grid, threads, smem>>>(p.wmap[0], xmap, rmap, a);
  CK(cudaDeviceSynchronize());
  const double err = p.checkNorm(batch, true);
  const float us = timeGraph(
      [&](int c, cudaStream_t s) {
        kernel<<<grid, threads, smem, s>>>(p.wmap[c % kCopies], xmap, rmap, a);
      },
      8);
  printf("B=%-3d ws+fold%s %s T=%-2d RS FW=%d S=%d stages %d (%3d CTAs) %7.2f "
         "us  %5.2f TB/s  err %.1e\n",
         batch, NoFold ? "(no fold)" : "",
         M == kCpAsync ? "cpasync"
         : M == kBulk  ? "bulk"
                       : "tma",
         T, FW, split, ST, grid, us, N * double(K) * 2 / us / 1e6, err);
}

void runCublas(Problem &p, cublasHandle_t h, int batch) {
  const float one = 1, zero = 0;
  auto gemm = [&](int c, cudaStream_t s) {
    cublasSetStream(h, s);
    // Y^T [N x B] (column-major) = W [K x N]^T X^T [K x B].
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, batch, K, &one,
                 p.w[c % kCopies], CUDA_R_16F, K, p.x, CUDA_R_16F, K, &zero,
                 p.y, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  gemm(0, 0);
  CK(cudaDeviceSynchronize());
  const double err = p.check(batch);
  const float us = timeGraph(gemm, 8);
  printf("B=%-3d cublas                           %7.2f us  %5.2f TB/s  err "
         "%.1e\n",
         batch, us, N * double(K) * 2 / us / 1e6, err);
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0); // lines survive a timeout
  Problem p;
  p.hw.resize(size_t(N) * K);
  p.hx.assign(size_t(kMaxTokens) * K, __float2half(0.f));
  uint32_t seed = 12345;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return (int(seed >> 9) % 2001 - 1000) / 16000.f;
  };
  for (auto &v : p.hw)
    v = __float2half(next());
  for (auto &v : p.hx)
    v = __float2half(next() * 16);
  for (int c = 0; c < kCopies; ++c) {
    CK(cudaMalloc(&p.w[c], p.hw.size() * 2));
    CK(cudaMemcpy(p.w[c], p.hw.data(), p.hw.size() * 2,
                  cudaMemcpyHostToDevice));
    p.wmap[c] = encode(p.w[c], N, kRows);
  }
  CK(cudaMalloc(&p.x, p.hx.size() * 2));
  CK(cudaMemcpy(p.x, p.hx.data(), p.hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&p.y, size_t(kMaxTokens) * N * 4));
  // The norm fold's residual rows and norm weight (around 1).
  p.hr.resize(p.hx.size());
  for (auto &v : p.hr)
    v = __float2half(next() * 16);
  p.hg.resize(K);
  for (auto &v : p.hg)
    v = __float2half(1 + next() * 8);
  CK(cudaMalloc(&p.r, p.hr.size() * 2));
  CK(cudaMemcpy(p.r, p.hr.data(), p.hr.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&p.g, p.hg.size() * 2));
  CK(cudaMemcpy(p.g, p.hg.data(), p.hg.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&p.hout, p.hx.size() * 2));
  CK(cudaMalloc(&p.stats, kMaxTokens * 4));
  uint32_t *sink;
  CK(cudaMalloc(&sink, 4));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t vectors = size_t(N) * K * 2 / 16;
  const float readUs = timeGraph(
      [&](int c, cudaStream_t s) {
        readW<<<sms * 4, 512, 0, s>>>(
            reinterpret_cast<const uint4 *>(p.w[c % kCopies]), vectors, sink);
      },
      8);
  printf("%d SMs; W %d x %d f16 (%.1f MB); read %.2f us (%.2f TB/s)\n", sms, N,
         K, N * double(K) * 2 / 1e6, readUs, N * double(K) * 2 / readUs / 1e6);
  cublasHandle_t h;
  cublasCreate(&h);
  for (int batch : {4, 16, 64}) {
    // The tokens past the batch are zero rows of X (the TMA box reads T).
    std::vector<__half> keep(p.hx);
    for (size_t i = size_t(batch) * K; i < p.hx.size(); ++i)
      p.hx[i] = __float2half(0.f);
    CK(cudaMemcpy(p.x, p.hx.data(), p.hx.size() * 2, cudaMemcpyHostToDevice));
    runCublas(p, h, batch);
    if (batch <= 16) {
      runWsNorm<16, 5>(p, batch, 2);
      runWsFold<16, 4, 2, kCpAsync>(p, batch, 2);
      runWsFold<16, 4, 2, kBulk>(p, batch, 2);
      runWsFold<16, 8, 2, kTma>(p, batch, 2);
      runWsFold<16, 8, 2, kTma, true>(p, batch, 2);
      runWsFold<16, 4, 2, kTma>(p, batch, 4);
    } else {
      runWsNorm<64, 3>(p, batch, 2);
      runWsFold<64, 4, 2, kCpAsync>(p, batch, 2);
      runWsFold<64, 4, 2, kTma>(p, batch, 2);
      runWsFold<64, 4, 4, kTma>(p, batch, 2);
      runWsFold<64, 4, 2, kTma, true>(p, batch, 2);
      runWsFold<64, 4, 2, kTma>(p, batch, 4);
    }
    for (int split : {2, 4, 8}) {
      if (batch <= 16) {
        if (batch <= 8)
          runWs<8, true, 6>(p, batch, split);
        runWs<16, true, 6>(p, batch, split);
        runWs<16, false, 6>(p, batch, split);
      } else {
        runWs<64, true, 4>(p, batch, split);
        runWs<64, false, 4>(p, batch, split);
      }
    }
    p.hx = keep;
  }
  return 0;
}
