// Diagnostic microbenchmark (docs/performance.md, "The GEMV access pattern by
// itself"): the projection kernel's B=1 weight stream written in CUDA C, in 17
// schedules (warps per CTA, rows per warp, split-K across warps, 16-byte loads
// in flight, software pipelining, with or without an RMS norm in front), over
// 8 rotated copies of a 6144 x 4096 f16 weight in one CUDA graph. It measures
// the ceiling of the emitter's structure, not our kernel.
//   nvcc -O3 -arch=sm_90 -std=c++17 gemv_patterns.cu -o gemv_patterns &&
//   ./gemv_patterns
#include "graph_timing.cuh"
#include <algorithm>
#include <cstdio>
#include <cuda_fp16.h>
#include <vector>
constexpr int H = 4096, R = 6144;
__device__ __forceinline__ void fma8(float &acc, uint4 w, uint4 x) {
  const __half2 *wh = reinterpret_cast<const __half2 *>(&w);
  const __half2 *xh = reinterpret_cast<const __half2 *>(&x);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 a = __half22float2(wh[i]), b = __half22float2(xh[i]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
}
// Each warp: RPW rows (pairs), K split KS ways across warps of the CTA. U 16B
// loads per row in flight. PIPE: prefetch next step.
template <int WARPS, int RPW, int KS, int U, bool PIPE, bool NORM>
__global__ void __launch_bounds__(WARPS * 32)
    gemv(const __half *__restrict__ W, const __half *__restrict__ x,
         const __half *__restrict__ g, __half *__restrict__ y) {
  __shared__ __align__(16) __half xs[H];
  __shared__ float red[WARPS][RPW];
  __shared__ float ssq[WARPS];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (NORM) {
    float s = 0;
    for (int i = threadIdx.x * 8; i < H; i += WARPS * 256) {
      uint4 v = *(const uint4 *)(x + i);
      const __half *h = (const __half *)&v;
      for (int e = 0; e < 8; ++e) {
        float f = __half2float(h[e]);
        s += f * f;
      }
    }
    for (int o = 16; o; o >>= 1)
      s += __shfl_xor_sync(~0u, s, o);
    if (lane == 0)
      ssq[warp] = s;
    __syncthreads();
    float t = 0;
    for (int w = 0; w < WARPS; ++w)
      t += ssq[w];
    float r = rsqrtf(t / H + 1e-5f);
    for (int i = threadIdx.x * 8; i < H; i += WARPS * 256) {
      uint4 v = *(const uint4 *)(x + i), gv = *(const uint4 *)(g + i);
      __half o[8];
      const __half *h = (const __half *)&v, *gg = (const __half *)&gv;
      for (int e = 0; e < 8; ++e)
        o[e] = __float2half(__half2float(h[e]) * r * __half2float(gg[e]));
      *(uint4 *)(xs + i) = *(uint4 *)o;
    }
  } else {
    for (int i = threadIdx.x * 8; i < H; i += WARPS * 256)
      *(uint4 *)(xs + i) = *(const uint4 *)(x + i);
  }
  __syncthreads();
  constexpr int GROUPS = WARPS / KS; // row groups per CTA
  int group = warp / KS, ks = warp % KS;
  int row0 = (blockIdx.x * GROUPS + group) * RPW;
  if (row0 >= R)
    return;
  constexpr int KLEN = H / KS;
  int kbeg = ks * KLEN;
  float acc[RPW] = {};
  constexpr int STEP = 256 * U;
  uint4 wv[RPW][U], nx[RPW][U];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int u = 0; u < U; ++u)
      wv[r][u] = *(const uint4 *)(W + (size_t)(row0 + r) * H + kbeg + u * 256 +
                                  lane * 8);
  for (int k = 0; k < KLEN; k += STEP) {
    if (PIPE) {
      int kn = min(k + STEP, KLEN - STEP);
#pragma unroll
      for (int r = 0; r < RPW; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u)
          nx[r][u] = *(const uint4 *)(W + (size_t)(row0 + r) * H + kbeg + kn +
                                      u * 256 + lane * 8);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      uint4 xv = *(const uint4 *)(xs + kbeg + k + u * 256 + lane * 8);
#pragma unroll
      for (int r = 0; r < RPW; ++r)
        fma8(acc[r], wv[r][u], xv);
    }
    if (PIPE) {
#pragma unroll
      for (int r = 0; r < RPW; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u)
          wv[r][u] = nx[r][u];
    } else if (k + STEP < KLEN) {
#pragma unroll
      for (int r = 0; r < RPW; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u)
          wv[r][u] = *(const uint4 *)(W + (size_t)(row0 + r) * H + kbeg + k +
                                      STEP + u * 256 + lane * 8);
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r)
    for (int o = 16; o; o >>= 1)
      acc[r] += __shfl_xor_sync(~0u, acc[r], o);
  if (KS == 1) {
    if (lane < RPW) {
      float v = acc[0];
      for (int r = 1; r < RPW; ++r)
        if (lane == r)
          v = acc[r];
      y[row0 + lane] = __float2half(v);
    }
    return;
  }
  if (lane == 0)
    for (int r = 0; r < RPW; ++r)
      red[warp][r] = acc[r];
  __syncthreads();
  if (ks == 0 && lane < RPW) {
    float v = 0;
    for (int s = 0; s < KS; ++s)
      v += red[group * KS + s][lane];
    y[row0 + lane] = __float2half(v);
  }
}
template <int WARPS, int RPW, int KS, int U, bool PIPE, bool NORM>
void bench(const char *name, std::vector<__half *> &Ws, __half *x, __half *g,
           __half *y) {
  auto k = gemv<WARPS, RPW, KS, U, PIPE, NORM>;
  int rowsPerCta = (WARPS / KS) * RPW;
  int grid = (R + rowsPerCta - 1) / rowsPerCta;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaGraph_t gr;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (auto *W : Ws)
    k<<<grid, WARPS * 32, 0, s>>>(W, x, g, y);
  CK(cudaStreamEndCapture(s, &gr));
  CK(cudaGraphInstantiate(&ge, gr, 0));
  for (int i = 0; i < 5; ++i)
    cudaGraphLaunch(ge, s);
  std::vector<float> t;
  for (int i = 0; i < 50; ++i) {
    cudaEventRecord(a, s);
    cudaGraphLaunch(ge, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000 / Ws.size());
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  cudaFuncAttributes fa;
  cudaFuncGetAttributes(&fa, k);
  int occ;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, WARPS * 32, 0);
  printf("%-34s grid %5d  %7.2f us  %5.2f TB/s  regs %d occ %d\n", name, grid,
         t[25], (double)R * H * 2 / t[25] / 1e6, fa.numRegs, occ);
}
int main() {
  std::vector<__half *> Ws(8);
  std::vector<__half> h((size_t)R * H);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = __float2half(((i * 2654435761u) % 1000) / 1000.f - 0.5f);
  for (auto &W : Ws) {
    CK(cudaMalloc(&W, h.size() * 2));
    CK(cudaMemcpy(W, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  __half *x, *g, *y;
  cudaMalloc(&x, H * 2);
  cudaMalloc(&g, H * 2);
  cudaMalloc(&y, R * 2);
  cudaMemcpy(x, h.data(), H * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(g, h.data() + H, H * 2, cudaMemcpyHostToDevice);
#define B(W_, RPW, KS, U, P, N)                                                \
  bench<W_, RPW, KS, U, P, N>("w" #W_ " rpw" #RPW " ks" #KS " u" #U " pipe" #P \
                              " norm" #N,                                      \
                              Ws, x, g, y)
  B(8, 2, 1, 2, false, true); // current emitter schedule
  B(8, 2, 1, 2, false, false);
  B(8, 2, 1, 2, true, true);
  B(8, 2, 1, 4, false, true);
  B(8, 2, 1, 4, true, true);
  B(8, 2, 2, 2, true, true);
  B(8, 2, 4, 2, true, true);
  B(8, 2, 8, 2, true, true);
  B(8, 4, 4, 1, true, true);
  B(8, 4, 8, 1, true, true);
  B(8, 2, 4, 4, false, true);
  B(8, 2, 8, 2, false, true);
  B(4, 2, 4, 2, true, true);
  B(16, 2, 8, 2, true, true);
  B(16, 2, 16, 1, true, true);
  B(8, 8, 8, 1, true, true);
  B(8, 4, 2, 2, true, true);
  return 0;
}
