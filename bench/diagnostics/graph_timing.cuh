// What the diagnostics in this directory share: the CUDA error check and the
// harness's timing method (bench/README.md): `copies` launches captured in
// one CUDA graph, 10 warm-up replays, then the median of 100 replays, each
// timed with events, divided by `copies` (µs per launch).
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>
#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e) {                                                                   \
      printf("err %s line %d\n", cudaGetErrorString(e), __LINE__);             \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/// `launch(c, stream)` for c in [0, copies) captured in one graph; returns
/// the median µs per copy over 100 replays.
template <class Launch>
float timeGraph(Launch launch, int copies) {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaGraph_t gr;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int c = 0; c < copies; ++c)
    launch(c, s);
  CK(cudaStreamEndCapture(s, &gr));
  CK(cudaGraphInstantiate(&ge, gr, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 10; ++i)
    CK(cudaGraphLaunch(ge, s));
  std::vector<float> t;
  for (int i = 0; i < 100; ++i) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000 / copies);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(gr);
  cudaStreamDestroy(s);
  return t[50];
}
