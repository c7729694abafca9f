// Diagnostic microbenchmark (docs/performance.md entry 24): does a packed
// weight layout pay once the stages are consumed by tensor cores, and what
// does it cost the batch-1 GEMV that reads the same weights?
//
// gemm_weight_stream.cu measured the read pattern alone: the GEMM variant's
// row segments (128 rows x 128 B per stage) stream 3.57 TB/s, the same bytes
// packed so that each stage is one contiguous 16 KiB block 4.30 TB/s. But
// longer row segments, which that file measured +4-6% faster, bought the
// real `_gemm16` kernel nothing (entry 24, `--gemm-stage-k`), so the pattern
// alone does not decide. Here each stage is consumed as the emitted kernel
// consumes it (Kernels/ProjectionGemmKernel.cpp): 16 tokens' activations
// staged with the weights, ldmatrix, mma.sync m16n8k16, fp32 accumulators,
// one block barrier per stage, 8 warps of 16 weight rows, 2 CTAs per SM.
// The weight is gate/up's of Llama-3-8B (28672 x 4096 f16, 235 MB: more
// than L2). Variants:
//   row-major   today: each stage row r's 128 B at W[r][k0 .. k0 + 64)
//   packed      W repacked as [N/128][K/64][128][64] tiles, each 16 KiB
//               block's rows 128-byte swizzled (16-byte chunk c of row r at
//               c ^ (r % 8)); 16-byte cp.async into the padded layout
//   packed+bulk the block by one cp.async.bulk per stage on an mbarrier, into
//               a swizzled slot that ldmatrix reads conflict-free
// and the batch-1 GEMV (one warp per row pair, 16-byte loads, x in shared
// memory, 4 steps in flight per lane) on row-major W and on the packed W.
// Every variant's output is compared bit for bit with the row-major one's
// (same products in the same order), and a few outputs with a float64 CPU
// sum. Timed like bench/ (graph_timing.cuh).
//   nvcc -O3 -arch=sm_90 -std=c++17 gemm_packed_mma.cu -o gemm_packed_mma
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_fp16.h>
#include <vector>

constexpr int N = 28672, K = 4096, T = 16; // weight rows, k, tokens
constexpr int kRows = 128, kStageK = 64, kStages = 3, kThreads = 256;
constexpr int kSteps = K / kStageK, kTiles = N / kRows;
constexpr int kPitch = kStageK + 8; // halves per padded staged row
constexpr int kCopies = 4;

/// Element offset of W[row][k] (k a multiple of 8 with the 8 after it) in
/// the packed layout.
__host__ __device__ inline size_t packedAt(int row, int k) {
  const int tile = row / kRows, r = row % kRows, s = k / kStageK;
  const int c = (k % kStageK) / 8;
  return ((size_t(tile) * kSteps + s) * kRows + r) * kStageK +
         ((c ^ (r % 8)) * 8);
}

__global__ void pack(const __half *w, __half *p) {
  const size_t chunk = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (chunk >= size_t(N) * K / 8)
    return;
  const int row = chunk / (K / 8), k = (chunk % (K / 8)) * 8;
  *reinterpret_cast<uint4 *>(p + packedAt(row, k)) =
      *reinterpret_cast<const uint4 *>(w + size_t(row) * K + k);
}

enum Layout { RowMajor, RowMajorBulk, RowMajorTma, Packed, PackedBulk };

/// Bytes of one stage slot: the weight rows (a swizzled 16 KiB block, or
/// padded rows) then the T padded token rows; TMA's slots 1 KiB-aligned.
__host__ __device__ constexpr int slotBytes(Layout l) {
  const int act = T * kPitch * 2;
  if (l == RowMajorTma)
    return (kRows * kStageK * 2 + act + 1023) / 1024 * 1024;
  return (l == PackedBulk ? kRows * kStageK * 2 : kRows * kPitch * 2) + act;
}

/// One CTA: weight rows [tile * 128, +128) against T tokens over all of k.
/// Stage slot = 128 weight rows then T activation rows; padded (pitch 72
/// halves) except the weight rows of PackedBulk (the swizzled 16 KiB block).
template <Layout L>
__global__ void __launch_bounds__(kThreads, 2)
    gemm(const __half *__restrict__ w, const __half *__restrict__ x,
         float *__restrict__ y, const __grid_constant__ CUtensorMap tmap) {
  // Swizzled 16 KiB weight blocks (PackedBulk, RowMajorTma) or padded rows.
  constexpr bool kSwizzled = L == PackedBulk || L == RowMajorTma;
  constexpr int kWBytes = kSwizzled ? kRows * kStageK * 2 : kRows * kPitch * 2;
  constexpr int kSlot = slotBytes(L);
  extern __shared__ __align__(128) unsigned char dynSmem[];
  // TMA's 128-byte swizzle is a function of the shared address: 1 KiB-align
  // the slots so that it is the c ^ (r % 8) the A fragments read.
  unsigned char *smem =
      dynSmem +
      (L == RowMajorTma ? (1024 - smemAddr(dynSmem) % 1024) % 1024 : 0);
  __shared__ uint64_t full[kStages];
  const int tile = blockIdx.x, tid = threadIdx.x, warp = tid / 32,
            lane = tid % 32;
  constexpr bool kBulk = L != RowMajor && L != Packed;
  if (kBulk)
    initStageBarriers(full, kStages);
  __syncthreads();
  auto issue = [&](int s) {
    if (s < kSteps) {
      unsigned char *slot = smem + (s % kStages) * kSlot;
      if (L == PackedBulk) {
        if (tid == 0) {
          // The slot's last ldmatrix reads (generic proxy) before the bulk
          // copy (async proxy) overwrites it.
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          mbarExpectTx(&full[s % kStages], kWBytes);
          bulkCopy(slot, w + packedAt(tile * kRows, s * kStageK), kWBytes,
                   &full[s % kStages]);
        }
      } else if (L == RowMajorTma) {
        if (tid == 0) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          mbarExpectTx(&full[s % kStages], kWBytes);
          asm volatile(
              "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
              "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                  smemAddr(slot)),
              "l"(reinterpret_cast<uint64_t>(&tmap)), "r"(s * kStageK),
              "r"(tile * kRows), "r"(smemAddr(&full[s % kStages]))
              : "memory");
        }
      } else if (L == RowMajorBulk) {
        // Warp 0: one 128-byte bulk copy per weight row, into the padded
        // rows that today's ldmatrix addressing reads.
        if (warp == 0) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          if (lane == 0)
            mbarExpectTx(&full[s % kStages], kRows * kStageK * 2);
          __syncwarp();
          for (int r = lane; r < kRows; r += 32)
            bulkCopy(slot + r * kPitch * 2,
                     w + size_t(tile * kRows + r) * K + s * kStageK,
                     kStageK * 2, &full[s % kStages]);
        }
      } else {
        for (int c = tid; c < kRows * 8; c += kThreads) {
          const int r = c / 8, row = tile * kRows + r,
                    k = s * kStageK + c % 8 * 8;
          cpAsync16(slot + (r * kPitch + c % 8 * 8) * 2,
                    L == RowMajor ? w + size_t(row) * K + k
                                  : w + packedAt(row, k));
        }
      }
      if (tid < T * 8) // the tokens' 16-byte chunks of this stage
        cpAsync16(slot + kWBytes + (tid / 8 * kPitch + tid % 8 * 8) * 2,
                  x + size_t(tid / 8) * K + s * kStageK + tid % 8 * 8);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int s = 0; s + 1 < kStages; ++s)
    issue(s);
  float acc[2][4] = {};
  for (int s = 0; s < kSteps; ++s) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");
    if (kBulk)
      mbarWait(&full[s % kStages], (s / kStages) & 1);
    __syncthreads(); // stage s visible; slot (s - 1) % kStages free
    issue(s + kStages - 1);
    const unsigned char *slot = smem + (s % kStages) * kSlot;
    for (int kk = 0; kk < kStageK / 16; ++kk) {
      const int r = warp * 16 + lane % 16, c = kk * 2 + lane / 16;
      const unsigned char *aAt = kSwizzled
                                     ? slot + r * 128 + ((c ^ (r % 8)) * 16)
                                     : slot + (r * kPitch + c * 8) * 2;
      // Tokens 0-7 k 0-7, tokens 0-7 k 8-15, tokens 8-15 k 0-7, 8-15 k 8-15.
      const int tok = lane % 8 + lane / 16 * 8, kc = kk * 2 + lane / 8 % 2;
      const unsigned char *bAt = slot + kWBytes + (tok * kPitch + kc * 8) * 2;
      uint32_t a[4], b[4];
      ldmatrix4(a, aAt);
      ldmatrix4(b, bAt);
      mma(acc[0], a, b[0], b[1]);
      mma(acc[1], a, b[2], b[3]);
    }
  }
  const int g = lane / 4, q = lane % 4;
  for (int n = 0; n < 2; ++n)
    for (int e = 0; e < 4; ++e) {
      const int row = tile * kRows + warp * 16 + g + 8 * (e / 2);
      const int tok = n * 8 + q * 2 + e % 2;
      y[size_t(tok) * N + row] = acc[n][e];
    }
}

/// Batch 1: warp per row pair (rows 2p, 2p + 1), x staged once per CTA.
template <bool PACKED>
__global__ void __launch_bounds__(kThreads)
    gemv(const __half *__restrict__ w, const __half *__restrict__ x,
         float *__restrict__ y, const __grid_constant__ CUtensorMap) {
  __shared__ __align__(16) __half xs[K];
  for (int i = threadIdx.x; i < K / 8; i += kThreads)
    reinterpret_cast<uint4 *>(xs)[i] = reinterpret_cast<const uint4 *>(x)[i];
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int warps = gridDim.x * (kThreads / 32);
  for (int p = blockIdx.x * (kThreads / 32) + threadIdx.x / 32; p < N / 2;
       p += warps) {
    float sum[2] = {0, 0};
    for (int c0 = 0; c0 < K / 8; c0 += 4 * 32) {
      uint4 v[4][2];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        for (int h = 0; h < 2; ++h) {
          const int row = 2 * p + h, k = (c0 + u * 32 + lane) * 8;
          v[u][h] = __ldcs(reinterpret_cast<const uint4 *>(
              PACKED ? w + packedAt(row, k) : w + size_t(row) * K + k));
        }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const uint4 xv =
            reinterpret_cast<const uint4 *>(xs)[c0 + u * 32 + lane];
        const __half2 *xh = reinterpret_cast<const __half2 *>(&xv);
        for (int h = 0; h < 2; ++h) {
          const __half2 *wh = reinterpret_cast<const __half2 *>(&v[u][h]);
          for (int j = 0; j < 4; ++j) {
            const float2 a = __half22float2(wh[j]), b = __half22float2(xh[j]);
            sum[h] += a.x * b.x + a.y * b.y;
          }
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      for (int o = 16; o > 0; o /= 2)
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], o);
      if (lane == 0)
        y[2 * p + h] = sum[h];
    }
  }
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const double wBytes = double(N) * K * 2;
  // Deterministic values in [-1, 1): w from one LCG, x from another.
  std::vector<__half> hw(size_t(N) * K), hx(size_t(T) * K);
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) / float(1 << 24) * 2 - 1;
  };
  for (auto &v : hw)
    v = __float2half(next());
  for (auto &v : hx)
    v = __float2half(next());
  __half *w, *p, *x;
  float *y;
  CK(cudaMalloc(&w, size_t(wBytes)));
  CK(cudaMalloc(&p, size_t(wBytes)));
  CK(cudaMalloc(&x, hx.size() * 2));
  CK(cudaMalloc(&y, size_t(T) * N * 4));
  CK(cudaMemcpy(w, hw.data(), size_t(wBytes), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  pack<<<(size_t(N) * K / 8 + 255) / 256, 256>>>(w, p);
  CK(cudaDeviceSynchronize());
  // W as a 2D tensor [N][K] for TMA: boxes of 128 rows x 64 k (128 B), the
  // 128-byte swizzle.
  const cuuint64_t dims[2] = {K, N}, strides[1] = {K * 2};
  const cuuint32_t box[2] = {kStageK, kRows};
  const CUtensorMap tmap = encodeSwizzledF16(w, 2, dims, strides, box);
  printf("%d SMs; W %d x %d f16 (%.1f MB), %d tokens\n", sms, N, K,
         wBytes / 1e6, T);

  // float64 sums of a few (token, row) outputs.
  auto cpu = [&](int tok, int row) {
    double s = 0;
    for (int k = 0; k < K; ++k)
      s += double(__half2float(hw[size_t(row) * K + k])) *
           __half2float(hx[size_t(tok) * K + k]);
    return s;
  };
  bool ok = true;
  std::vector<float> want(size_t(T) * N), got(size_t(T) * N);
  auto check = [&](const char *name, const float *dev, int tokens, bool ref) {
    CK(cudaMemcpy(ref ? want.data() : got.data(), dev, size_t(tokens) * N * 4,
                  cudaMemcpyDeviceToHost));
    const std::vector<float> &v = ref ? want : got;
    double worst = 0;
    for (int i = 0; i < 8; ++i) {
      // i * 3 spreads the 8 checks over tokens 0-15 (both n-tiles: acc[1]).
      const int tok = i * 3 % tokens, row = (i * 7919) % N;
      const double d = std::fabs(v[size_t(tok) * N + row] - cpu(tok, row));
      if (!(d <= worst)) // a NaN must fail the bound, std::max drops it
        worst = d;
    }
    const bool same =
        ref || !std::memcmp(want.data(), got.data(), size_t(tokens) * N * 4);
    printf("  %-28s |y - float64| <= %.2e on 8 outputs%s\n", name, worst,
           ref    ? " (reference)"
           : same ? ", bit-identical to row-major"
                  : ", DIFFERS from row-major");
    ok = ok && same && worst < 5e-2;
  };
  auto time = [&](const char *name, auto kernel, int grid, int smem,
                  const __half *wp, double bytes) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smem));
    // NaN-fill y, so an output a variant leaves unwritten cannot pass as the
    // previous variant's (bit-identical) value.
    CK(cudaMemset(y, 0xff, size_t(T) * N * 4));
    int perSM = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSM, kernel, kThreads,
                                                     smem));
    const float us = timeGraph(
        [&](int, cudaStream_t s) {
          kernel<<<grid, kThreads, smem, s>>>(wp, x, y, tmap);
        },
        kCopies);
    printf("%-34s grid %4d  %d/SM  %7.1f us  %.2f TB/s\n", name, grid, perSM,
           us, bytes / us / 1e6);
  };
  const double gemmBytes = wBytes; // TB/s of the weights (x is L2-resident)
  time("gemm16 row-major (today)", gemm<RowMajor>, kTiles,
       kStages * slotBytes(RowMajor), w, gemmBytes);
  check("row-major", y, T, true);
  time("gemm16 row-major, bulk per row", gemm<RowMajorBulk>, kTiles,
       kStages * slotBytes(RowMajorBulk), w, gemmBytes);
  check("row-major, bulk per row", y, T, false);
  time("gemm16 row-major, TMA 2D swizzle", gemm<RowMajorTma>, kTiles,
       kStages * slotBytes(RowMajorTma) + 1024, w, gemmBytes);
  check("row-major, TMA", y, T, false);
  time("gemm16 packed, cp.async", gemm<Packed>, kTiles,
       kStages * slotBytes(Packed), p, gemmBytes);
  check("packed, cp.async", y, T, false);
  time("gemm16 packed, bulk + mbarrier", gemm<PackedBulk>, kTiles,
       kStages * slotBytes(PackedBulk), p, gemmBytes);
  check("packed, bulk", y, T, false);
  const int gemvGrid = sms * 3;
  time("gemv B=1 row-major (today)", gemv<false>, gemvGrid, 0, w, wBytes);
  check("gemv row-major", y, 1, true);
  time("gemv B=1 packed", gemv<true>, gemvGrid, 0, p, wBytes);
  check("gemv packed", y, 1, false);
  printf(ok ? "all checks pass\n" : "CHECK FAILED\n");
  return ok ? 0 : 1;
}
