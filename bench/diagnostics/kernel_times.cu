// Diagnostic driver (docs/performance.md, "Where the time goes"): times the two
// kernels of the FUSED Llama-3-8B f16 front half (examples/llama3_8b.mlir,
// pages of 16) separately and together, over 8 rotated layer copies in one CUDA
// graph, CUDA events, median of ITERS (default 100) replays. The kernel
// parameters are hard-coded in the manifest's order for that module (projection
// k0: x, norm weight, residual, qkv weight, positions, K/V caches, block table,
// residual_out, q, batch, max_pages; attention k1: q, K/V caches, block table,
// seq_lens, output, partials, stats, counters, batch, max_pages, num_splits):
// check the manifest before using it on another build. Not a correctness check.
//   nvcc -O2 -std=c++17 -I../../runtime/include kernel_times.cu -lcuda \
//     -o kernel_times
//   ./kernel_times llama3_8b.decode.ptx BATCH KV_LEN [NUM_SPLITS
//   [ENTRY_PREFIX]] (env: ITERS=N replays; k0 launch: PROJ_ENTRY=suffix of its
//   entry, e.g. "_fused_mma" for the tensor-core variant (default "_fused"),
//   PROJ_GRID / PROJ_BLOCK (default 384 / 256: the manifest's numbers for the
//   primary), SMEM=bytes of dynamic shared memory)
#include "fusion/contract/Contract.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_fp16.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#define CK(x)                                                                  \
  do {                                                                         \
    CUresult e = (x);                                                          \
    if (e) {                                                                   \
      const char *s;                                                           \
      cuGetErrorString(e, &s);                                                 \
      printf("err %s line %d\n", s, __LINE__);                                 \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
static CUdeviceptr alloc(size_t bytes, unsigned seed) {
  CUdeviceptr p;
  CK(cuMemAlloc(&p, bytes));
  std::vector<__half> h(bytes / 2);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = __float2half((float)(((i + seed) * 2654435761u) % 2001) / 2000.f -
                        0.5f);
  CK(cuMemcpyHtoD(p, h.data(), bytes));
  return p;
}
int main(int argc, char **argv) {
  std::ifstream f(argv[1]);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string ptx = ss.str();
  int B = atoi(argv[2]), L = atoi(argv[3]);
  const char *pre = argc > 5 ? argv[5] : "decode_layer";
  CK(cuInit(0));
  CUdevice d;
  CK(cuDeviceGet(&d, 0));
  CUcontext c;
  CK(cuCtxCreate(&c, nullptr, 0, d));
  CUmodule m;
  CK(cuModuleLoadData(&m, ptx.c_str()));
  CUfunction proj, attn;
  const char *projEntry =
      getenv("PROJ_ENTRY") ? getenv("PROJ_ENTRY") : "_fused";
  const unsigned projGrid =
      getenv("PROJ_GRID") ? atoi(getenv("PROJ_GRID")) : 384;
  const unsigned projBlock =
      getenv("PROJ_BLOCK") ? atoi(getenv("PROJ_BLOCK")) : 256;
  CK(cuModuleGetFunction(&proj, m,
                         (std::string(pre) + "_k0" + projEntry).c_str()));
  CK(cuModuleGetFunction(&attn, m,
                         (std::string(pre) + "_k1_decode_attention").c_str()));
  const int H = 4096, HQ = 32, HKV = 8, D = 128, P = 16, R = 6144;
  int maxPages = (L + P - 1) / P, numPages = B * maxPages;
  // Default: the contract's policy with the compiler's default schedule
  // (grid y = HKV: one head block per KV head for this model).
  int splits = argc > 4 ? atoi(argv[4])
                        : static_cast<int>(fusion::contract::chooseNumSplits(
                              fusion::contract::SplitPolicy(), B, HKV, L));
  const int NL = 8;
  struct Layer {
    CUdeviceptr x, res, g, w, pos, kc, vc, bt, sl, rout, q, out, po, ps, cnt;
  };
  std::vector<Layer> ls(NL);
  for (int l = 0; l < NL; ++l) {
    Layer &y = ls[l];
    y.x = alloc(B * H * 2, l);
    y.res = alloc(B * H * 2, l + 7);
    y.g = alloc(H * 2, l + 3);
    y.w = alloc((size_t)R * H * 2, l + 11);
    size_t cb = (size_t)numPages * P * HKV * D * 2;
    y.kc = alloc(cb, l + 13);
    y.vc = alloc(cb, l + 17);
    std::vector<int> pos(B, L - 1), sl(B, L), bt(B * maxPages);
    for (int i = 0; i < B * maxPages; ++i)
      bt[i] = i;
    CK(cuMemAlloc(&y.pos, B * 4));
    CK(cuMemcpyHtoD(y.pos, pos.data(), B * 4));
    CK(cuMemAlloc(&y.sl, B * 4));
    CK(cuMemcpyHtoD(y.sl, sl.data(), B * 4));
    CK(cuMemAlloc(&y.bt, B * maxPages * 4));
    CK(cuMemcpyHtoD(y.bt, bt.data(), B * maxPages * 4));
    CK(cuMemAlloc(&y.rout, B * H * 2));
    CK(cuMemAlloc(&y.q, B * HQ * D * 2));
    CK(cuMemAlloc(&y.out, B * HQ * D * 2));
    CK(cuMemAlloc(&y.po, (size_t)B * HQ * 64 * D * 4));
    CK(cuMemAlloc(&y.ps, (size_t)B * HQ * 64 * 2 * 4));
    CK(cuMemAlloc(&y.cnt, B * HKV * 4));
    CK(cuMemsetD8(y.cnt, 0, B * HKV * 4));
  }
  int projSmem = getenv("SMEM") ? atoi(getenv("SMEM")) : 0;
  if (projSmem)
    CK(cuFuncSetAttribute(proj, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                          projSmem));
  CUstream s;
  CK(cuStreamCreate(&s, 0));
  auto launchProj = [&](Layer &y) {
    void *a[] = {&y.x,  &y.g,  &y.res,  &y.w, &y.pos, &y.kc,
                 &y.vc, &y.bt, &y.rout, &y.q, &B,     &maxPages};
    CK(cuLaunchKernel(proj, projGrid, 1, 1, projBlock, 1, 1, projSmem, s, a,
                      nullptr));
  };
  auto launchAttn = [&](Layer &y) {
    void *a[] = {&y.q,  &y.kc, &y.vc,  &y.bt, &y.sl,     &y.out,
                 &y.po, &y.ps, &y.cnt, &B,    &maxPages, &splits};
    CK(cuLaunchKernel(attn, splits, HKV, B, 256, 1, 1, 0, s, a, nullptr));
  };
  auto time = [&](const char *name, int which) {
    CUgraph g;
    CUgraphExec ge;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (auto &y : ls) {
      if (which & 1)
        launchProj(y);
      if (which & 2)
        launchAttn(y);
    }
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < (getenv("ITERS") ? 1 : 5); ++i)
      CK(cuGraphLaunch(ge, s));
    CUevent a, b;
    cuEventCreate(&a, 0);
    cuEventCreate(&b, 0);
    std::vector<float> t;
    int iters = getenv("ITERS") ? atoi(getenv("ITERS")) : 100;
    for (int i = 0; i < iters; ++i) {
      cuEventRecord(a, s);
      cuGraphLaunch(ge, s);
      cuEventRecord(b, s);
      CK(cuEventSynchronize(b));
      float ms;
      cuEventElapsedTime(&ms, a, b);
      t.push_back(ms * 1000 / NL);
    }
    std::sort(t.begin(), t.end());
    printf("  %-12s B=%-3d L=%-6d splits=%-3d %8.2f us (p10 %.2f p90 %.2f)\n",
           name, B, L, splits, t[t.size() / 2], t[t.size() / 10],
           t[t.size() * 9 / 10]);
  };
  time("projection", 1);
  time("attention", 2);
  time("front-half", 3);
  return 0;
}
