// Diagnostic microbenchmark (docs/performance.md entry 36): what a decode
// step of `Engine::generate` costs on the GPU outside its CUDA graph. Per
// step the engine enqueues (runtime/src/Engine.cpp, launch and generate):
// the step inputs uploaded from a page-locked staging slot (host to device,
// tokens + positions + lengths + block table), the next tokens copied from
// the previous step's argmax into the inputs (device to device, 4 B per
// sequence), an event, the graph, and the step's tokens copied into the
// [steps, batch] result (device to device). The graph here stands for
// SmolLM2's batch-1 step with its work removed: kKernels dependent kernels
// with programmatic dependent launch (264 CTAs of 256 threads, each reading
// the counter the previous one wrote after griddepcontrol.wait; the last
// counter is checked), so every difference between the modes is the copies:
//   graph         kSteps graph launches back to back (the floor)
//   engine        the engine's sequence, as above
//   upload        the graph and the upload only
//   d2d           the graph and the two device copies only
//   in-graph      the graph with the two device copies as kernels inside it
//                 (the first kernel copies the last argmax into the inputs,
//                 the last writes the result row of a device step counter),
//                 and the upload
//   side-wait     the engine's sequence with the upload moved to a second
//                 stream, into two input buffers used in turn (after an
//                 event behind the graph of the step before last, which read
//                 that buffer): the compute stream waits for the upload's
//                 event, copies the tokens, runs the graph, copies the result
//   side-host     the same, but the host waits for the upload's event before
//                 it enqueues the step (no wait on the GPU)
//   overlap       two input buffers used in turn, each with its own graph
//                 whose last kernel writes the next tokens into the other
//                 buffer; the upload on a second stream into the buffer the
//                 step before last read (an event after that step's graph),
//                 the result copy on a third; the compute stream waits for
//                 the upload's event and for the result copy of the step
//                 before last (which read the tokens the graph overwrites)
// Prints us per step (mean of kSteps after a warm-up of kSteps, best of 5).
//   nvcc -O3 -arch=sm_90 -std=c++17 step_overhead.cu -o step_overhead
#include "graph_timing.cuh"
#include <cstdint>
#include <cstdio>
#include <cstring>

constexpr int kKernels = 123, kThreads = 256, kGrid = 264, kSteps = 128;
constexpr size_t kInputBytes = 1056; // B=1: 4 int32 + a 260-page block table

__global__ void __launch_bounds__(kThreads) link(int *chain, int index) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (blockIdx.x == 0 && threadIdx.x == 0)
    chain[index + 1] = *(volatile int *)&chain[index] + 1;
}

/// The in-graph copies: `first` copies the last argmax into the inputs,
/// otherwise the argmax goes to row `*stepCounter` of the result.
__global__ void copyTokens(int *chain, int index, const int *argmax,
                           int *inputs, int *result, int *stepCounter,
                           bool first) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) {
    if (first) {
      inputs[0] = *argmax;
    } else {
      result[*stepCounter] = *argmax;
      ++*stepCounter;
    }
    chain[index + 1] = *(volatile int *)&chain[index] + 1;
  }
}

static void launchLink(cudaStream_t s, int *chain, int i) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = kGrid;
  cfg.blockDim = kThreads;
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, link, chain, i));
}

struct Buffers {
  int *chain, *argmax, *inputs, *result, *stepCounter;
  void *staging;
};

/// The overlap mode's last kernel: the step's argmax into `next`.
__global__ void writeNext(int *chain, int index, int *next) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) {
    *next = index;
    chain[index + 1] = *(volatile int *)&chain[index] + 1;
  }
}

/// The graph of a step: kKernels links; with `copies` the first and last
/// are copyTokens, with `next` the last is writeNext.
static cudaGraphExec_t capture(cudaStream_t s, const Buffers &b, bool copies,
                               int *next = nullptr) {
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  int i = 0;
  if (copies)
    copyTokens<<<1, 32, 0, s>>>(b.chain, i++, b.argmax, b.inputs, b.result,
                                b.stepCounter, true);
  for (; i < kKernels - (copies || next ? 1 : 0); ++i)
    launchLink(s, b.chain, i);
  if (next)
    writeNext<<<1, 32, 0, s>>>(b.chain, i++, next);
  if (copies)
    copyTokens<<<1, 32, 0, s>>>(b.chain, i++, b.argmax, b.inputs, b.result,
                                b.stepCounter, false);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&exec, g, 0));
  cudaGraphDestroy(g);
  return exec;
}

enum Mode {
  GraphOnly,
  Engine,
  Upload,
  DeviceCopies,
  InGraph,
  SideWait,
  SideHost,
  Overlap
};

static void enqueueStep(Mode m, cudaStream_t s, cudaGraphExec_t plain,
                        cudaGraphExec_t withCopies, const Buffers &b,
                        cudaEvent_t ev, int t) {
  if (m == Engine || m == Upload || m == InGraph)
    CK(cudaMemcpyAsync(b.inputs + 64, b.staging, kInputBytes,
                       cudaMemcpyHostToDevice, s));
  if (m == Engine || m == DeviceCopies)
    CK(cudaMemcpyAsync(b.inputs, b.argmax, 4, cudaMemcpyDeviceToDevice, s));
  if (m == Engine)
    CK(cudaEventRecord(ev, s));
  CK(cudaGraphLaunch(m == InGraph ? withCopies : plain, s));
  if (m == Engine || m == DeviceCopies)
    CK(cudaMemcpyAsync(b.result + t, b.argmax, 4, cudaMemcpyDeviceToDevice, s));
}

/// The overlap mode's streams, events and per-slot graphs and buffers.
struct OverlapState {
  cudaStream_t upload, results;
  cudaEvent_t uploaded[2], done[2], copied[2];
  cudaGraphExec_t graph[2];
  int *inputs[2];
};

static void enqueueOverlapStep(OverlapState &o, cudaStream_t s,
                               const Buffers &b, int t) {
  const int slot = t & 1;
  CK(cudaStreamWaitEvent(o.upload, o.done[slot], 0));
  CK(cudaMemcpyAsync(o.inputs[slot] + 4, b.staging, kInputBytes,
                     cudaMemcpyHostToDevice, o.upload));
  CK(cudaEventRecord(o.uploaded[slot], o.upload));
  CK(cudaStreamWaitEvent(s, o.uploaded[slot], 0));
  CK(cudaStreamWaitEvent(s, o.copied[slot], 0));
  CK(cudaGraphLaunch(o.graph[slot], s));
  CK(cudaEventRecord(o.done[slot], s));
  CK(cudaStreamWaitEvent(o.results, o.done[slot], 0));
  CK(cudaMemcpyAsync(b.result + t, o.inputs[1 - slot], 4,
                     cudaMemcpyDeviceToDevice, o.results));
  CK(cudaEventRecord(o.copied[slot], o.results));
}

/// side-wait and side-host: the upload on o.upload, the rest as the engine.
static void enqueueSideStep(OverlapState &o, cudaStream_t s, const Buffers &b,
                            int t, bool hostWaits) {
  const int slot = t & 1;
  CK(cudaStreamWaitEvent(o.upload, o.done[slot], 0));
  CK(cudaMemcpyAsync(o.inputs[slot] + 4, b.staging, kInputBytes,
                     cudaMemcpyHostToDevice, o.upload));
  CK(cudaEventRecord(o.uploaded[slot], o.upload));
  if (hostWaits)
    CK(cudaEventSynchronize(o.uploaded[slot]));
  else
    CK(cudaStreamWaitEvent(s, o.uploaded[slot], 0));
  CK(cudaMemcpyAsync(o.inputs[slot], b.argmax, 4, cudaMemcpyDeviceToDevice, s));
  CK(cudaGraphLaunch(o.graph[slot], s));
  CK(cudaEventRecord(o.done[slot], s));
  CK(cudaMemcpyAsync(b.result + t, b.argmax, 4, cudaMemcpyDeviceToDevice, s));
}

int main() {
  Buffers b{};
  CK(cudaMalloc(&b.chain, (kKernels + 1) * sizeof(int)));
  CK(cudaMalloc(&b.argmax, 4));
  CK(cudaMalloc(&b.inputs, 64 * 4 + kInputBytes));
  CK(cudaMalloc(&b.result, 4 * kSteps * 64));
  CK(cudaMalloc(&b.stepCounter, 4));
  CK(cudaMallocHost(&b.staging, kInputBytes));
  memset(b.staging, 0, kInputBytes);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraphExec_t plain = capture(s, b, false),
                  withCopies = capture(s, b, true);
  OverlapState o{};
  CK(cudaStreamCreateWithFlags(&o.upload, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&o.results, cudaStreamNonBlocking));
  for (int k = 0; k < 2; ++k) {
    CK(cudaMalloc(&o.inputs[k], 16 + kInputBytes));
    for (cudaEvent_t *ev : {&o.uploaded[k], &o.done[k], &o.copied[k]}) {
      CK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
      CK(cudaEventRecord(*ev, s));
    }
  }
  for (int k = 0; k < 2; ++k)
    o.graph[k] = capture(s, b, false, o.inputs[1 - k]);
  cudaEvent_t ev, e0, e1;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const char *names[] = {"graph",    "engine",    "upload",    "d2d",
                         "in-graph", "side-wait", "side-host", "overlap"};
  for (int rep = 0; rep < 3; ++rep)
    for (int m = GraphOnly; m <= Overlap; ++m) {
      float best = 1e30f;
      for (int trial = 0; trial < 5; ++trial) {
        CK(cudaMemset(b.chain, 0, sizeof(int)));
        CK(cudaMemset(b.stepCounter, 0, sizeof(int)));
        auto step = [&](int t) {
          if (m == Overlap)
            enqueueOverlapStep(o, s, b, t % 64);
          else if (m == SideWait || m == SideHost)
            enqueueSideStep(o, s, b, t % 64, m == SideHost);
          else
            enqueueStep(Mode(m), s, plain, withCopies, b, ev, t % 64);
        };
        for (int t = 0; t < kSteps; ++t) // warm-up, and fills the queue
          step(t);
        CK(cudaEventRecord(e0, s));
        for (int t = 0; t < kSteps; ++t)
          step(t);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        best = std::min(best, ms * 1000 / kSteps);
        int last;
        CK(cudaMemcpy(&last, b.chain + kKernels, 4, cudaMemcpyDeviceToHost));
        if (last != kKernels) {
          printf("FAIL %s: chain %d, want %d\n", names[m], last, kKernels);
          return 1;
        }
        CK(cudaMemset(b.chain + 1, 0, kKernels * sizeof(int)));
      }
      printf("%-9s %d kernels x %d CTAs, %d steps: %7.2f us/step\n", names[m],
             kKernels, kGrid, kSteps, best);
    }
  printf("all chains complete\n");
  return 0;
}
