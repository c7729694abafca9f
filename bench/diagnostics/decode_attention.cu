// Diagnostic microbenchmark (docs/performance.md, "Tensor-core decode
// attention"): GQA decode attention over a paged KV cache (Llama-3-8B: 32
// query heads, 8 KV heads, head_dim 128, f16, 16-token pages scattered over
// the pool, layout [pages, 16, Hkv, D] as in docs/abi.md) written in CUDA C
// in the FlashAttention-2 decode structure: one CTA per (split, KV head,
// sequence), 4 warps, each warp owning every 4th page of its split with its
// own ST-stage cp.async ring of K and V pages (no block-wide barrier in the
// loop), S = Q K^T and O += P V on mma.sync m16n8k16 (the group's 4 query
// heads padded to 16 rows), online softmax in fp32 per row, the warps' (m, l,
// O) combined through shared memory at the end. Split s writes unnormalised
// partials (the combine kernel is not timed). Timed over 8 rotated cache
// copies in one CUDA graph against a plain 16-byte read of the same bytes,
// and checked against an fp32 reference. It measures the design's ceiling
// before it is emitted; it is not our kernel.
//   nvcc -O3 -arch=sm_90 -std=c++17 decode_attention.cu -o decode_attention &&
//   ./decode_attention
#include "graph_timing.cuh"
#include "ptx_ops.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
#include <numeric>
#include <random>
#include <vector>
constexpr int HQ = 32, HKV = 8, G = HQ / HKV, D = 128, P = 16, kCopies = 8;
constexpr int kRowBytes = D * 2, kPageBytes = P * kRowBytes;

__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}
// The 16-byte chunk c of a 256-byte row r, XOR-swizzled so that the 8 rows an
// ldmatrix reads (same chunk column) fall in 8 different bank groups.
__device__ __forceinline__ int swz(int r, int c) {
  return r * kRowBytes + ((c ^ (r & 7)) * 16);
}

struct Args {
  const __half *q;       // [B, HQ, D]
  const __half *k, *v;   // [pages, P, HKV, D]
  const int *blockTable; // [B, maxPages]
  float *o;              // [splits, B, HQ, D] unnormalised
  float *ml;             // [splits, B, HQ, 2]: running max (log2), sum
  int maxPages, pagesPerSplit;
};

/// Issues the copies of one K page and one V page (16 rows of 256 bytes of
/// this KV head each) into `stage` by the warp's 32 lanes, as one group.
__device__ void loadPage(const Args &a, uint8_t *stage, int page, int kvh) {
  int lane = threadIdx.x & 31;
  const char *kp =
      reinterpret_cast<const char *>(a.k + ((size_t)page * P * HKV + kvh) * D);
  const char *vp =
      reinterpret_cast<const char *>(a.v + ((size_t)page * P * HKV + kvh) * D);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int c = lane + 32 * i, r = c >> 4, ch = c & 15;
    cpAsync16(stage + swz(r, ch), kp + (size_t)r * HKV * kRowBytes + ch * 16);
    cpAsync16(stage + kPageBytes + swz(r, ch),
              vp + (size_t)r * HKV * kRowBytes + ch * 16);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int ST, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) attention(Args a) {
  extern __shared__ __align__(128) uint8_t smem[];
  int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2,
      q4 = lane & 3;
  uint8_t *ring = smem + warp * ST * 2 * kPageBytes;
  int p0 = split * a.pagesPerSplit;
  int p1 = min(a.maxPages, p0 + a.pagesPerSplit);
  const int *table = a.blockTable + (size_t)b * a.maxPages;
  int n = p0 + warp < p1 ? (p1 - p0 - warp + kWarps - 1) / kWarps : 0;
  for (int i = 0; i < ST - 1; ++i)
    if (i < n)
      loadPage(a, ring + i * 2 * kPageBytes, table[p0 + warp + i * kWarps],
               kvh);
    else
      asm volatile("cp.async.commit_group;" ::: "memory");
  // Q as the A operand: rows g < G are the group's heads, scaled by
  // log2(e) / sqrt(D) so the softmax uses exp2.
  uint32_t qa[D / 16][4];
  const float scale = 1.4426950408889634f / sqrtf((float)D);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    float v[4] = {0, 0, 0, 0};
    const __half *qr =
        a.q + ((size_t)b * HQ + kvh * G + g) * D + kk * 16 + 2 * q4;
    if (g < G) {
      v[0] = __half2float(qr[0]) * scale;
      v[1] = __half2float(qr[1]) * scale;
      v[2] = __half2float(qr[8]) * scale;
      v[3] = __half2float(qr[9]) * scale;
    }
    qa[kk][0] = pack(v[0], v[1]);
    qa[kk][1] = 0;
    qa[kk][2] = pack(v[2], v[3]);
    qa[kk][3] = 0;
  }
  float o[D / 8][4] = {}, m = -INFINITY, l = 0;
  for (int i = 0; i < n; ++i) {
    asm volatile("cp.async.wait_group %0;" ::"n"(ST - 2) : "memory");
    __syncwarp();
    if (i + ST - 1 < n)
      loadPage(a, ring + (i + ST - 1) % ST * 2 * kPageBytes,
               table[p0 + warp + (i + ST - 1) * kWarps], kvh);
    else
      asm volatile("cp.async.commit_group;" ::: "memory");
    const uint8_t *ks = ring + i % ST * 2 * kPageBytes, *vs = ks + kPageBytes;
    float s[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t kb[4]; // tokens 0-7 / 8-15, d chunks 2kk, 2kk+1
      int r = (lane & 7) + (lane >> 4) * 8, c = 2 * kk + ((lane >> 3) & 1);
      ldmatrix4(kb, ks + swz(r, c));
      mma(s[0], qa[kk], kb[0], kb[1]);
      mma(s[1], qa[kk], kb[2], kb[3]);
    }
    // Online softmax of row g (c0, c1 of each token block; rows g+8 unused).
    float mx = fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]));
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
    float mNew = fmaxf(m, mx), corr = exp2f(m - mNew);
    float e[4] = {exp2f(s[0][0] - mNew), exp2f(s[0][1] - mNew),
                  exp2f(s[1][0] - mNew), exp2f(s[1][1] - mNew)};
    float rs = e[0] + e[1] + e[2] + e[3];
    rs += __shfl_xor_sync(~0u, rs, 1);
    rs += __shfl_xor_sync(~0u, rs, 2);
    l = l * corr + rs;
    m = mNew;
    uint32_t pa[4] = {pack(e[0], e[1]), 0, pack(e[2], e[3]), 0};
#pragma unroll
    for (int db = 0; db < D / 16; ++db) {
      uint32_t vb[4]; // tokens 0-15 x d 16db..16db+15, transposed
      int r = (lane & 7) + ((lane >> 3) & 1) * 8, c = 2 * db + (lane >> 4);
      ldmatrix4t(vb, vs + swz(r, c));
      for (int e2 = 0; e2 < 2; ++e2) {
        o[2 * db][e2] *= corr;
        o[2 * db + 1][e2] *= corr;
      }
      mma(o[2 * db], pa, vb[0], vb[1]);
      mma(o[2 * db + 1], pa, vb[2], vb[3]);
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  // Combine the warps: per head, m and l, then O rescaled and summed.
  __syncthreads();
  float *wm = reinterpret_cast<float *>(smem); // [warps][G]
  float *wl = wm + kWarps * G;                 // [warps][G]
  float *wo = wl + kWarps * G;                 // [G][D]
  if (q4 == 0 && g < G) {
    wm[warp * G + g] = m;
    wl[warp * G + g] = l;
  }
  for (int i = threadIdx.x; i < G * D; i += blockDim.x)
    wo[i] = 0;
  __syncthreads();
  if (g < G) {
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w)
      M = fmaxf(M, wm[w * G + g]);
    float f = m == -INFINITY ? 0 : exp2f(m - M);
    for (int db = 0; db < D / 8; ++db) {
      atomicAdd(&wo[g * D + db * 8 + 2 * q4], o[db][0] * f);
      atomicAdd(&wo[g * D + db * 8 + 2 * q4 + 1], o[db][1] * f);
    }
  }
  __syncthreads();
  size_t base = ((size_t)split * gridDim.z + b) * HQ + kvh * G;
  for (int i = threadIdx.x; i < G * D; i += blockDim.x)
    a.o[base * D + i] = wo[i];
  if (threadIdx.x < G) {
    float M = -INFINITY, L = 0;
    for (int w = 0; w < kWarps; ++w)
      M = fmaxf(M, wm[w * G + threadIdx.x]);
    for (int w = 0; w < kWarps; ++w)
      if (wm[w * G + threadIdx.x] != -INFINITY)
        L += wl[w * G + threadIdx.x] * exp2f(wm[w * G + threadIdx.x] - M);
    a.ml[(base + threadIdx.x) * 2] = M;
    a.ml[(base + threadIdx.x) * 2 + 1] = L;
  }
}

/// fp32 reference: one block per (head, sequence), softmax(q k / sqrt(D)) v.
__global__ void reference(Args a, int len, float *out) {
  int h = blockIdx.x, b = blockIdx.y, kvh = h / G;
  extern __shared__ float sc[];
  const __half *q = a.q + ((size_t)b * HQ + h) * D;
  const int *table = a.blockTable + (size_t)b * a.maxPages;
  for (int t = threadIdx.x; t < len; t += blockDim.x) {
    const __half *k =
        a.k + (((size_t)table[t / P] * P + t % P) * HKV + kvh) * D;
    float s = 0;
    for (int d = 0; d < D; ++d)
      s += __half2float(q[d]) * __half2float(k[d]);
    sc[t] = s / sqrtf((float)D);
  }
  __syncthreads();
  __shared__ float mx, sum;
  if (threadIdx.x == 0) {
    mx = -INFINITY;
    sum = 0;
    for (int t = 0; t < len; ++t)
      mx = fmaxf(mx, sc[t]);
    for (int t = 0; t < len; ++t)
      sum += expf(sc[t] - mx);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0;
    for (int t = 0; t < len; ++t) {
      const __half *v =
          a.v + (((size_t)table[t / P] * P + t % P) * HKV + kvh) * D;
      acc += expf(sc[t] - mx) * __half2float(v[d]);
    }
    out[((size_t)b * HQ + h) * D + d] = acc / sum;
  }
}

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

/// The largest |ours - ref| over copy 0 (splits combined on the host).
double check(const Args &a, int B, int len, int splits) {
  float *ref;
  CK(cudaMalloc(&ref, (size_t)B * HQ * D * 4));
  CK(cudaFuncSetAttribute(
      reference, cudaFuncAttributeMaxDynamicSharedMemorySize, len * 4));
  reference<<<dim3(HQ, B), 128, len * 4>>>(a, len, ref);
  CK(cudaDeviceSynchronize());
  std::vector<float> r((size_t)B * HQ * D), o((size_t)splits * B * HQ * D),
      ml((size_t)splits * B * HQ * 2);
  CK(cudaMemcpy(r.data(), ref, r.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(o.data(), a.o, o.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ml.data(), a.ml, ml.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(ref);
  double err = 0;
  for (int bh = 0; bh < B * HQ; ++bh) {
    float M = -INFINITY, L = 0;
    for (int s = 0; s < splits; ++s)
      M = std::max(M, ml[((size_t)s * B * HQ + bh) * 2]);
    for (int s = 0; s < splits; ++s)
      L += ml[((size_t)s * B * HQ + bh) * 2 + 1] *
           exp2f(ml[((size_t)s * B * HQ + bh) * 2] - M);
    for (int d = 0; d < D; ++d) {
      double v = 0;
      for (int s = 0; s < splits; ++s)
        v += o[((size_t)s * B * HQ + bh) * D + d] *
             exp2f(ml[((size_t)s * B * HQ + bh) * 2] - M);
      err = std::max(err, std::abs(v / L - r[(size_t)bh * D + d]));
    }
  }
  return err;
}

template <int ST, int kWarps = 4>
void run(int B, int len, int splits) {
  int maxPages = (len + P - 1) / P, pages = B * maxPages;
  size_t cacheElems = (size_t)pages * P * HKV * D;
  std::vector<int> table(pages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(B * 7 + len));
  std::vector<__half> h(cacheElems);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < std::min(h.size(), (size_t)1 << 24); ++i)
    h[i] = __float2half(nd(rng));
  for (size_t i = (size_t)1 << 24; i < h.size(); ++i)
    h[i] = h[i % ((size_t)1 << 24)];
  std::vector<Args> args(kCopies);
  int *bt;
  CK(cudaMalloc(&bt, pages * 4));
  CK(cudaMemcpy(bt, table.data(), pages * 4, cudaMemcpyHostToDevice));
  float *o, *ml;
  CK(cudaMalloc(&o, (size_t)splits * B * HQ * D * 4));
  CK(cudaMalloc(&ml, (size_t)splits * B * HQ * 2 * 4));
  for (auto &a : args) {
    __half *q, *k, *v;
    CK(cudaMalloc(&q, (size_t)B * HQ * D * 2));
    CK(cudaMalloc(&k, cacheElems * 2));
    CK(cudaMalloc(&v, cacheElems * 2));
    CK(cudaMemcpy(q, h.data() + 12345, (size_t)B * HQ * D * 2,
                  cudaMemcpyHostToDevice));
    CK(cudaMemcpy(k, h.data(), cacheElems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(v, 0, cacheElems * 2));
    CK(cudaMemcpy(v, h.data() + 777, (cacheElems - 777) * 2,
                  cudaMemcpyHostToDevice));
    a = Args{q, k, v, bt, o, ml, maxPages, (maxPages + splits - 1) / splits};
  }
  int smemBytes = kWarps * ST * 2 * kPageBytes;
  auto kern = attention<ST, kWarps>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          smemBytes));
  dim3 grid(splits, HKV, B);
  auto launch = [&](int c, cudaStream_t s) {
    kern<<<grid, kWarps * 32, smemBytes, s>>>(args[c]);
  };
  launch(0, 0);
  double err = check(args[0], B, maxPages * P, splits);
  float us = timeGraph(launch, kCopies);
  uint4 *sink;
  CK(cudaMalloc(&sink, 16));
  float floorUs = timeGraph(
      [&](int c, cudaStream_t s) {
        readAll<<<132 * 4, 512, 0, s>>>((const uint4 *)args[c].k,
                                        (const uint4 *)args[c].v,
                                        cacheElems * 2 / 16, sink);
      },
      kCopies);
  int occ;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, kWarps * 32,
                                                smemBytes);
  double bytes = 2.0 * cacheElems * 2;
  printf(
      "B=%3d L=%6d splits %2d st%d w%d grid %5d occ %d: %8.2f us (%.2f TB/s), "
      "plain read %8.2f us (%.2f TB/s), %5.1f%%  err %.1e\n",
      B, len, splits, ST, kWarps, splits * HKV * B, occ, us, bytes / us / 1e6,
      floorUs, bytes / floorUs / 1e6, 100 * floorUs / us, err);
  for (auto &a : args) {
    cudaFree((void *)a.q);
    cudaFree((void *)a.k);
    cudaFree((void *)a.v);
  }
  cudaFree(bt);
  cudaFree(o);
  cudaFree(ml);
  cudaFree(sink);
}

int main() {
  run<3>(64, 4096, 1);
  run<2>(64, 4096, 1);
  run<2, 8>(64, 4096, 1);
  run<3, 2>(64, 4096, 1);
  run<3>(16, 4096, 2);
  run<2>(16, 4096, 2);
  run<2>(16, 4096, 4);
  run<3, 2>(16, 4096, 4);
  run<3>(4, 4096, 8);
  run<2>(4, 4096, 16);
  run<3>(1, 32768, 32);
  run<2>(1, 32768, 64);
  run<2, 8>(1, 32768, 32);
  run<3>(1, 1024, 16);
  run<2, 2>(1, 1024, 32);
  run<3>(128, 2048, 1);
  run<2>(128, 2048, 1);
  run<3>(256, 1024, 1);
  run<2>(256, 1024, 1);
  return 0;
}
