//===- MockCudaDriver.cpp - a host-memory stand-in for libcuda ------------===//
//
// libfusion_mock_cuda.so: the driver functions the runtime loads
// (runtime/src/Cuda.cpp, FUSION_CUDA_FUNCTIONS), loaded instead of libcuda
// through FUSION_CUDA_DRIVER, so that the host side of the engine (its
// bindings, uploads, graph capture calls, downloads, errors) runs in CI
// without a GPU. Device memory is zeroed host memory, copies are memcpy,
// modules, kernels, streams, graphs and events do nothing: no kernel runs, so
// every output stays zero. It checks plumbing, never numerics (the GPU tests
// do that). Defined after <cuda.h>, each function gets the versioned symbol
// name and the prototype the header declares. Tests read the log of kernel
// launches through fusionMockLaunches (their cluster sizes through
// fusionMockClusters, the cluster queries through fusionMockClusterQueries,
// whose answer fusionMockClusterAnswer sets), that of graph launches and
// destructions through fusionMockGraphs, and that of the copies, events,
// graph launches and synchronizations, with their streams, through
// fusionMockOps (below).
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <vector>

namespace {
/// Per kernel launch: 1 if it asked for programmatic stream serialization.
std::vector<int> launchLog;
/// Per kernel launch: its cluster dimension x (1 without a cluster).
std::vector<int> clusterLog;
/// What cuOccupancyMaxActiveClusters answers (fusionMockClusterAnswer):
/// the number of clusters, or an error; with clusterCtas > 0
/// (fusionMockClusterCtas), clusterCtas / the cluster's x instead of
/// clusterAnswer, as a device with that many resident CTAs answers.
int clusterAnswer = 16;
int clusterCtas = 0;
CUresult clusterResult = CUDA_SUCCESS;
/// Per cuOccupancyMaxActiveClusters call: its cluster dimension x.
std::vector<int> clusterQueryLog;
/// Graph executables: each instantiation gets the next id (1, 2, ...);
/// a launch of graph i logs i, its destruction -i.
std::vector<int> graphLog;
int graphsMade = 0;
/// One call of the op log: its kind, argument and stream (0 for none).
struct Op {
  char kind;
  uintptr_t arg, stream;
};
/// In call order: 'p' cuMemHostAlloc (the pointer), 'h' cuMemcpyHtoDAsync
/// (the source), 'd' cuMemcpyDtoDAsync (the destination), 'r'
/// cuEventRecord, 'w' cuEventSynchronize and 'e' cuStreamWaitEvent (the
/// event's id; events are numbered 1, 2, ... as created), 'g' cuGraphLaunch
/// (the graph's id), 's' cuStreamSynchronize, 'm' cuMemsetD8 and
/// cuMemsetD8Async (the destination); with the stream of the stream-ordered
/// ones (streams are numbered 1, 2, ... as created).
std::vector<Op> opLog;
int eventsMade = 0, streamsMade = 0;
/// Per cuTensorMapEncodeTiled call, its arguments: data type, rank,
/// address, dims, strides, box, element strides, interleave, swizzle, L2
/// promotion, OOB fill (the layout of fusionMockTensorMaps).
std::vector<std::vector<uint64_t>> tensorMapLog;

/// The driver's rules for a portable cluster of `config`: (x, 1, 1) with x
/// in [1, 8] dividing grid x.
bool isPortableCluster(const CUlaunchConfig &config,
                       const CUlaunchAttribute &a) {
  const auto &c = a.value.clusterDim;
  return c.x >= 1 && c.y == 1 && c.z == 1 && c.x <= 8 &&
         config.gridDimX % c.x == 0;
}
} // namespace

extern "C" {
/// Test hook: copies up to `capacity` entries of the launch log (1: the
/// launch had programmatic stream serialization, 0: not) to `out`, returns
/// the number of launches so far and, with `clear`, empties the log.
int fusionMockLaunches(int *out, int capacity, int clear) {
  const int n = static_cast<int>(launchLog.size());
  for (int i = 0; i < n && i < capacity; ++i)
    out[i] = launchLog[i];
  if (clear)
    launchLog.clear();
  return n;
}
/// The cluster log (see clusterLog), as fusionMockLaunches.
int fusionMockClusters(int *out, int capacity, int clear) {
  const int n = static_cast<int>(clusterLog.size());
  for (int i = 0; i < n && i < capacity; ++i)
    out[i] = clusterLog[i];
  if (clear)
    clusterLog.clear();
  return n;
}
/// The cluster-query log (see clusterQueryLog), as fusionMockLaunches.
int fusionMockClusterQueries(int *out, int capacity, int clear) {
  const int n = static_cast<int>(clusterQueryLog.size());
  for (int i = 0; i < n && i < capacity; ++i)
    out[i] = clusterQueryLog[i];
  if (clear)
    clusterQueryLog.clear();
  return n;
}
/// Test hook: later cuOccupancyMaxActiveClusters calls return `result` and,
/// when it is CUDA_SUCCESS, `clusters` (initially 16, CUDA_SUCCESS).
void fusionMockClusterAnswer(int clusters, int result) {
  clusterAnswer = clusters;
  clusterResult = static_cast<CUresult>(result);
}
/// Test hook: later successful cuOccupancyMaxActiveClusters calls answer
/// `ctas` / the cluster's x (0: fusionMockClusterAnswer's clusters again).
void fusionMockClusterCtas(int ctas) { clusterCtas = ctas; }
/// The graph log (see graphLog), as fusionMockLaunches.
int fusionMockGraphs(int *out, int capacity, int clear) {
  const int n = static_cast<int>(graphLog.size());
  for (int i = 0; i < n && i < capacity; ++i)
    out[i] = graphLog[i];
  if (clear)
    graphLog.clear();
  return n;
}
/// The op log (see opLog): up to `capacity` kinds, arguments and streams,
/// as fusionMockLaunches.
int fusionMockOps(char *kinds, uintptr_t *args, uintptr_t *streams,
                  int capacity, int clear) {
  const int n = static_cast<int>(opLog.size());
  for (int i = 0; i < n && i < capacity; ++i) {
    kinds[i] = opLog[i].kind;
    args[i] = opLog[i].arg;
    streams[i] = opLog[i].stream;
  }
  if (clear)
    opLog.clear();
  return n;
}
/// The tensor-map log (see tensorMapLog): up to `capacity` calls of 16
/// values each (data type, rank, address, dims[2], strides[1], box[2],
/// element strides[2], interleave, swizzle, L2 promotion, OOB fill, 0, 0),
/// as fusionMockLaunches.
int fusionMockTensorMaps(uint64_t *out, int capacity, int clear) {
  const int n = static_cast<int>(tensorMapLog.size());
  for (int i = 0; i < n && i < capacity; ++i)
    for (int j = 0; j < 16; ++j)
      out[i * 16 + j] = tensorMapLog[i][j];
  if (clear)
    tensorMapLog.clear();
  return n;
}
CUresult CUDAAPI cuGetErrorName(CUresult, const char **s) {
  *s = "MOCK";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, const char **s) {
  *s = "mock";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int *c) {
  *c = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int o) {
  *d = o;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char *n, int len, CUdevice) {
  std::snprintf(n, len, "Mock GPU");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *v = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *v = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *v = 132;
    break;
  default:
    *v = 1 << 20;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t *b, CUdevice) {
  *b = size_t(1) << 36;
  return CUDA_SUCCESS;
}
static int ctxDummy;
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice) {
  *c = (CUcontext)&ctxDummy;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }
static int modDummy, funcDummy, graphDummy;
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *, unsigned int,
                                    CUjit_option *, void **) {
  *m = (CUmodule)&modDummy;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule, const char *) {
  *f = (CUfunction)&funcDummy;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t b) {
  // 256-byte aligned and zeroed, as cuMemAlloc's memory (the runtime checks
  // alignments, e.g. of the tensor-map table).
  const size_t bytes = (b ? b + 255 : 256) / 256 * 256;
  void *m = std::aligned_alloc(256, bytes);
  std::memset(m, 0, bytes);
  *p = (CUdeviceptr)m;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  std::free((void *)p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostAlloc(void **p, size_t b, unsigned int) {
  *p = std::calloc(1, b ? b : 1);
  opLog.push_back({'p', (uintptr_t)*p, 0});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFreeHost(void *p) {
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t *f, size_t *t) {
  *f = *t = size_t(1) << 36;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t b) {
  std::memcpy((void *)d, s, b);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t b) {
  std::memcpy(d, (void *)s, b);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t b,
                                   CUstream st) {
  std::memcpy((void *)d, s, b);
  opLog.push_back({'h', (uintptr_t)s, (uintptr_t)st});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t b, CUstream) {
  std::memcpy(d, (void *)s, b);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t b,
                                   CUstream st) {
  std::memcpy((void *)d, (void *)s, b);
  opLog.push_back({'d', (uintptr_t)d, (uintptr_t)st});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  std::memset((void *)d, v, n);
  opLog.push_back({'m', (uintptr_t)d, 0});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n,
                                 CUstream st) {
  std::memset((void *)d, v, n);
  opLog.push_back({'m', (uintptr_t)d, (uintptr_t)st});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int) {
  // A distinct handle per stream: its id, never dereferenced.
  *s = (CUstream)(uintptr_t)(++streamsMade);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamSynchronize(CUstream st) {
  opLog.push_back({'s', 0, (uintptr_t)st});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream st, CUevent e, unsigned int) {
  opLog.push_back({'e', (uintptr_t)e, (uintptr_t)st});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream, CUstreamCaptureMode) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream, CUgraph *g) {
  *g = (CUgraph)&graphDummy;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *e, CUgraph,
                                    unsigned long long) {
  // A distinct handle per executable: its id, never dereferenced.
  *e = (CUgraphExec)(uintptr_t)(++graphsMade);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream st) {
  graphLog.push_back(static_cast<int>((uintptr_t)e));
  opLog.push_back({'g', (uintptr_t)e, (uintptr_t)st});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
  graphLog.push_back(-static_cast<int>((uintptr_t)e));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphDestroy(CUgraph) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int) {
  // A distinct handle per event: its id, never dereferenced.
  *e = (CUevent)(uintptr_t)(++eventsMade);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream st) {
  opLog.push_back({'r', (uintptr_t)e, (uintptr_t)st});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  opLog.push_back({'w', (uintptr_t)e, 0});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent, CUevent) {
  *ms = 1.0f;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction,
                                  void **, void **) {
  int programmatic = 0;
  unsigned clusterX = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute &a = config->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      programmatic = a.value.programmaticStreamSerializationAllowed;
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      if (!isPortableCluster(*config, a))
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      clusterX = a.value.clusterDim.x;
    }
  }
  launchLog.push_back(programmatic);
  clusterLog.push_back(static_cast<int>(clusterX));
  return CUDA_SUCCESS;
}
/// Logs the cluster size and answers as fusionMockClusterAnswer and
/// fusionMockClusterCtas set; a configuration without exactly one attribute,
/// a portable cluster (isPortableCluster), is CUDA_ERROR_INVALID_CLUSTER_SIZE.
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *clusters, CUfunction,
                                              const CUlaunchConfig *config) {
  if (config->numAttrs != 1 ||
      config->attrs[0].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION ||
      !isPortableCluster(*config, config->attrs[0]))
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  const int x = static_cast<int>(config->attrs[0].value.clusterDim.x);
  clusterQueryLog.push_back(x);
  if (clusterResult == CUDA_SUCCESS)
    *clusters = clusterCtas > 0 ? clusterCtas / x : clusterAnswer;
  return clusterResult;
}
/// Logs its arguments (a rank-2 call; any other rank is
/// CUDA_ERROR_INVALID_VALUE) and fills the descriptor with them: word i of
/// the 16 is the log's value i, so a test can tell which descriptor lies
/// where. An address of 0xBAD000 is rejected (CUDA_ERROR_INVALID_VALUE), to
/// test the error path.
CUresult CUDAAPI cuTensorMapEncodeTiled(
    CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *address,
    const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
    const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
    CUtensorMapFloatOOBfill oob) {
  if (rank != 2 || (uintptr_t)address == 0xBAD000)
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<uint64_t> args = {uint64_t(type),
                                rank,
                                (uintptr_t)address,
                                dims[0],
                                dims[1],
                                strides[0],
                                box[0],
                                box[1],
                                elementStrides[0],
                                elementStrides[1],
                                uint64_t(interleave),
                                uint64_t(swizzle),
                                uint64_t(l2),
                                uint64_t(oob),
                                0,
                                0};
  tensorMapLog.push_back(args);
  static_assert(sizeof(CUtensorMap) == 16 * sizeof(uint64_t));
  std::memcpy(map, args.data(), sizeof(CUtensorMap));
  return CUDA_SUCCESS;
}
}
