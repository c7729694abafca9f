//===- Cuda.cpp - CUDA driver API wrappers --------------------------------===//

#include "fusion/runtime/Cuda.h"

#include "fusion/runtime/Error.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#if FUSION_RUNTIME_CUDA_DLOPEN
#include <dlfcn.h>
#endif

namespace fusion::runtime::cuda {

//===----------------------------------------------------------------------===//
// The driver entry points
//===----------------------------------------------------------------------===//

// Every driver function the runtime calls. cuda.h #defines most of these
// names to their current versioned symbols (cuMemAlloc -> cuMemAlloc_v2,
// cuEventElapsedTime -> cuEventElapsedTime_v2, ...); the member names and the
// dlsym names below go through the same macros, so they always match the
// prototypes the header declares.
#define FUSION_CUDA_FUNCTIONS(X)                                               \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceTotalMem)                                                          \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxSynchronize)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemGetInfo)                                                              \
  X(cuMemHostAlloc)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyDtoH)                                                              \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8)                                                                \
  X(cuMemsetD8Async)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiate)                                                        \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)                                                        \
  X(cuLaunchKernelEx)                                                          \
  X(cuOccupancyMaxActiveClusters)                                              \
  X(cuTensorMapEncodeTiled)

#define FUSION_STR_(x) #x
#define FUSION_STR(x) FUSION_STR_(x)

namespace {

struct Api {
#define FUSION_MEMBER(name) decltype(&::name) name = nullptr;
  FUSION_CUDA_FUNCTIONS(FUSION_MEMBER)
#undef FUSION_MEMBER
};

struct Driver {
  Api api;
  bool loaded = false;
  bool initialized = false;
  /// Why the driver cannot be used (empty if it can).
  std::string failure;
  std::string library;
};

Driver &driverState() {
  static Driver d;
  return d;
}

#if FUSION_RUNTIME_CUDA_DLOPEN
/// Older names to try when a driver lacks the current versioned symbol.
const char *fallbackName(const char *name) {
  std::string_view n(name);
  if (n == "cuEventElapsedTime_v2")
    return "cuEventElapsedTime";
  return nullptr;
}

void loadLibrary(Driver &d) {
  const char *env = std::getenv("FUSION_CUDA_DRIVER");
  d.library = env && *env ? env : "libcuda.so.1";
  void *handle = dlopen(d.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    d.failure = "no CUDA driver: cannot load " + d.library + " (" +
                (why ? why : "unknown reason") +
                "); install the NVIDIA driver or set FUSION_CUDA_DRIVER";
    return;
  }
  std::string missing;
#define FUSION_RESOLVE(name)                                                   \
  {                                                                            \
    const char *sym = FUSION_STR(name);                                        \
    void *p = dlsym(handle, sym);                                              \
    if (!p && fallbackName(sym))                                               \
      p = dlsym(handle, fallbackName(sym));                                    \
    if (!p)                                                                    \
      missing += std::string(missing.empty() ? "" : ", ") + sym;               \
    d.api.name = reinterpret_cast<decltype(d.api.name)>(p);                    \
  }
  FUSION_CUDA_FUNCTIONS(FUSION_RESOLVE)
#undef FUSION_RESOLVE
  if (!missing.empty()) {
    d.failure = "the CUDA driver " + d.library + " is too old (missing " +
                missing +
                "); CUDA 12.8 or newer "
                "is required";
    return;
  }
  d.loaded = true;
}
#else
void loadLibrary(Driver &d) {
  d.library = "libcuda (linked)";
#define FUSION_DIRECT(name) d.api.name = &::name;
  FUSION_CUDA_FUNCTIONS(FUSION_DIRECT)
#undef FUSION_DIRECT
  d.loaded = true;
}
#endif

const Api &api() {
  initialize();
  return driverState().api;
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

} // namespace

void initialize() {
  static std::once_flag once;
  Driver &d = driverState();
  std::call_once(once, [&d] {
    loadLibrary(d);
    if (!d.loaded)
      return;
    CUresult r = d.api.cuInit(0);
    if (r != CUDA_SUCCESS) {
      d.failure = "no CUDA device: cuInit failed with " + errorName(r) + " (" +
                  errorString(r) + ") using " + d.library;
      return;
    }
    d.initialized = true;
  });
  if (!d.initialized)
    throw DeviceUnavailableError(d.failure);
}

namespace {
/// Names of the errors a driver that cannot name them (a stub, one that
/// failed to initialise) typically returns.
const char *fallbackErrorName(CUresult result) {
  switch (result) {
  case CUDA_ERROR_NOT_INITIALIZED:
    return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_STUB_LIBRARY:
    return "CUDA_ERROR_STUB_LIBRARY";
  case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
  case CUDA_ERROR_NO_DEVICE:
    return "CUDA_ERROR_NO_DEVICE";
  case CUDA_ERROR_INVALID_DEVICE:
    return "CUDA_ERROR_INVALID_DEVICE";
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
  case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
  case CUDA_ERROR_OPERATING_SYSTEM:
    return "CUDA_ERROR_OPERATING_SYSTEM";
  default:
    // 35, CUDA_ERROR_INSUFFICIENT_DRIVER before CUDA 13.
    return static_cast<int>(result) == 35 ? "CUDA_ERROR_INSUFFICIENT_DRIVER"
                                          : nullptr;
  }
}
} // namespace

std::string errorName(CUresult result) {
  Driver &d = driverState();
  const char *name = nullptr;
  if (d.loaded && d.api.cuGetErrorName &&
      d.api.cuGetErrorName(result, &name) == CUDA_SUCCESS && name)
    return name;
  if (const char *fallback = fallbackErrorName(result))
    return fallback;
  return "CUresult " + std::to_string(static_cast<int>(result));
}

std::string errorString(CUresult result) {
  Driver &d = driverState();
  const char *text = nullptr;
  if (d.loaded && d.api.cuGetErrorString &&
      d.api.cuGetErrorString(result, &text) == CUDA_SUCCESS && text)
    return text;
  if (result == CUDA_ERROR_STUB_LIBRARY)
    return "the CUDA driver is a stub library, not the real driver";
  if (result == CUDA_ERROR_NO_DEVICE)
    return "no CUDA-capable device is detected";
  return "the driver gives no description";
}

void check(CUresult result, std::string_view operation) {
  if (result == CUDA_SUCCESS)
    return;
  std::string name = errorName(result);
  throw CudaError(std::string(operation) + ": " + name + " (" +
                      errorString(result) + ")",
                  static_cast<int>(result), name);
}

int deviceCount() {
  int n = 0;
  check(api().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

Context Context::open(int ordinal) {
  initialize();
  int count = deviceCount();
  if (count == 0)
    throw DeviceUnavailableError(
        "no CUDA device: the driver reports 0 devices");
  if (ordinal < 0 || ordinal >= count)
    throw DeviceUnavailableError("no CUDA device " + std::to_string(ordinal) +
                                 " (" + std::to_string(count) +
                                 " device(s) present)");
  Context c;
  c.ordinal_ = ordinal;
  check(api().cuDeviceGet(&c.device_, ordinal),
        "cuDeviceGet(" + std::to_string(ordinal) + ")");
  check(api().cuDevicePrimaryCtxRetain(&c.context_, c.device_),
        "cuDevicePrimaryCtxRetain(device " + std::to_string(ordinal) + ")");
  c.makeCurrent();
  return c;
}

Context::~Context() {
  if (context_)
    driverState().api.cuDevicePrimaryCtxRelease(device_);
}

void Context::makeCurrent() const {
  check(api().cuCtxSetCurrent(context_),
        "cuCtxSetCurrent(device " + std::to_string(ordinal_) + ")");
}

void Context::synchronize(std::string_view what) const {
  check(api().cuCtxSynchronize(),
        "cuCtxSynchronize (waiting for " + std::string(what) + ")");
}

std::string Context::name() const {
  char buf[256] = {};
  check(api().cuDeviceGetName(buf, sizeof(buf) - 1, device_),
        "cuDeviceGetName");
  return buf;
}

std::pair<int, int> Context::computeCapability() const {
  int major = 0, minor = 0;
  check(api().cuDeviceGetAttribute(
            &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  check(api().cuDeviceGetAttribute(
            &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  return {major, minor};
}

int Context::multiprocessorCount() const {
  int n = 0;
  check(api().cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                   device_),
        "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  return n;
}

uint64_t Context::totalMemory() const {
  size_t bytes = 0;
  check(api().cuDeviceTotalMem(&bytes, device_), "cuDeviceTotalMem");
  return bytes;
}

uint64_t Context::freeMemory() const {
  makeCurrent();
  size_t free = 0, total = 0;
  check(api().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return free;
}

int Context::driverVersion() {
  int v = 0;
  check(api().cuDriverGetVersion(&v), "cuDriverGetVersion");
  return v;
}

//===----------------------------------------------------------------------===//
// DeviceBuffer
//===----------------------------------------------------------------------===//

DeviceBuffer::DeviceBuffer(uint64_t bytes, std::string label)
    : bytes_(bytes), label_(std::move(label)) {
  check(api().cuMemAlloc(&ptr_, bytes ? bytes : 1),
        "cuMemAlloc(" + std::to_string(bytes) + " bytes for " + label_ + ")");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_)
    driverState().api.cuMemFree(ptr_);
}

void DeviceBuffer::checkRange(const char *op, uint64_t bytes,
                              uint64_t offset) const {
  if (!ptr_)
    throwInvalidArgument(op, ": buffer \"", label_, "\" is not allocated");
  if (offset > bytes_ || bytes > bytes_ - offset)
    throwInvalidArgument(op, ": ", bytes, " bytes at offset ", offset,
                         " exceed buffer \"", label_, "\" of ", bytes_,
                         " bytes");
}

void DeviceBuffer::upload(const void *src, uint64_t bytes, uint64_t offset) {
  checkRange("DeviceBuffer::upload", bytes, offset);
  if (!bytes)
    return;
  std::string op =
      "cuMemcpyHtoD(" + std::to_string(bytes) + " bytes to " + label_ + ")";
  check(api().cuMemcpyHtoD(ptr_ + offset, src, bytes), op);
  // From pageable memory the call may return before the DMA lands, and it
  // is ordered on the legacy stream only: wait, so that work on any stream
  // sees the data.
  check(api().cuStreamSynchronize(nullptr), op);
}

void DeviceBuffer::download(void *dst, uint64_t bytes, uint64_t offset) const {
  checkRange("DeviceBuffer::download", bytes, offset);
  if (bytes)
    check(api().cuMemcpyDtoH(dst, ptr_ + offset, bytes),
          "cuMemcpyDtoH(" + std::to_string(bytes) + " bytes from " + label_ +
              ")");
}

void DeviceBuffer::uploadAsync(const void *src, uint64_t bytes, CUstream stream,
                               uint64_t offset) {
  checkRange("DeviceBuffer::uploadAsync", bytes, offset);
  if (bytes)
    check(api().cuMemcpyHtoDAsync(ptr_ + offset, src, bytes, stream),
          "cuMemcpyHtoDAsync(" + std::to_string(bytes) + " bytes to " + label_ +
              ")");
}

void DeviceBuffer::downloadAsync(void *dst, uint64_t bytes, CUstream stream,
                                 uint64_t offset) const {
  checkRange("DeviceBuffer::downloadAsync", bytes, offset);
  if (bytes)
    check(api().cuMemcpyDtoHAsync(dst, ptr_ + offset, bytes, stream),
          "cuMemcpyDtoHAsync(" + std::to_string(bytes) + " bytes from " +
              label_ + ")");
}

void DeviceBuffer::copyFrom(const DeviceBuffer &src, CUstream stream) {
  if (!src.ptr_)
    throwInvalidArgument("DeviceBuffer::copyFrom: source buffer \"", src.label_,
                         "\" is not allocated");
  copyFrom(src.ptr_, src.bytes_, src.label_, stream);
}

void DeviceBuffer::copyFrom(CUdeviceptr src, uint64_t bytes,
                            std::string_view what, CUstream stream,
                            uint64_t offset) {
  checkRange("DeviceBuffer::copyFrom", bytes, offset);
  if (bytes)
    check(api().cuMemcpyDtoDAsync(ptr_ + offset, src, bytes, stream),
          "cuMemcpyDtoDAsync(" + std::to_string(bytes) + " bytes from " +
              std::string(what) + " to " + label_ + ")");
}

void DeviceBuffer::fill(uint8_t value, CUstream stream, uint64_t bytes) {
  if (bytes == ~0ull)
    bytes = bytes_;
  checkRange("DeviceBuffer::fill", bytes, 0);
  if (!bytes)
    return;
  std::string op = "cuMemsetD8(" + std::to_string(bytes) + " bytes of " +
                   label_ + " to " + hex(value) + ")";
  if (stream) {
    check(api().cuMemsetD8Async(ptr_, value, bytes, stream), op);
  } else {
    // cuMemsetD8 is asynchronous to the host for device memory: wait.
    check(api().cuMemsetD8(ptr_, value, bytes), op);
    check(api().cuStreamSynchronize(nullptr), op);
  }
}

PinnedHostBuffer::PinnedHostBuffer(uint64_t bytes, std::string label)
    : bytes_(bytes), label_(std::move(label)) {
  check(
      api().cuMemHostAlloc(&ptr_, bytes ? bytes : 1, CU_MEMHOSTALLOC_PORTABLE),
      "cuMemHostAlloc(" + std::to_string(bytes) + " bytes for " + label_ + ")");
  std::memset(ptr_, 0, bytes ? bytes : 1);
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (ptr_)
    driverState().api.cuMemFreeHost(ptr_);
}

//===----------------------------------------------------------------------===//
// Stream, Event
//===----------------------------------------------------------------------===//

Stream Stream::create() {
  Stream s;
  check(api().cuStreamCreate(&s.stream_, CU_STREAM_NON_BLOCKING),
        "cuStreamCreate");
  return s;
}

Stream::~Stream() {
  if (stream_)
    driverState().api.cuStreamDestroy(stream_);
}

void Stream::synchronize(std::string_view what) const {
  check(api().cuStreamSynchronize(stream_),
        "cuStreamSynchronize (waiting for " + std::string(what) + ")");
}

Event Event::create(bool timing) {
  Event e;
  check(api().cuEventCreate(&e.event_, timing ? CU_EVENT_DEFAULT
                                              : CU_EVENT_DISABLE_TIMING),
        "cuEventCreate");
  return e;
}

Event::~Event() {
  if (event_)
    driverState().api.cuEventDestroy(event_);
}

void Event::record(CUstream stream) {
  check(api().cuEventRecord(event_, stream), "cuEventRecord");
}

void Event::enqueueWait(CUstream stream) const {
  check(api().cuStreamWaitEvent(stream, event_, 0), "cuStreamWaitEvent");
}

void Event::synchronize() const {
  check(api().cuEventSynchronize(event_), "cuEventSynchronize");
}

float Event::elapsedMs(const Event &start, const Event &end) {
  float ms = 0;
  check(api().cuEventElapsedTime(&ms, start.event_, end.event_),
        "cuEventElapsedTime");
  return ms;
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

Module Module::loadPtx(const std::string &ptx, const std::string &name) {
  const Api &a = api();
  constexpr size_t kLogBytes = 64 * 1024;
  std::vector<char> errorLog(kLogBytes, 0), infoLog(kLogBytes, 0);
  CUjit_option options[] = {
      CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
      CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
      CU_JIT_LOG_VERBOSE};
  void *values[] = {
      errorLog.data(),
      reinterpret_cast<void *>(static_cast<uintptr_t>(kLogBytes - 1)),
      infoLog.data(),
      reinterpret_cast<void *>(static_cast<uintptr_t>(kLogBytes - 1)),
      reinterpret_cast<void *>(static_cast<uintptr_t>(1))};
  Module m;
  m.name_ = name;
  CUresult r = a.cuModuleLoadDataEx(&m.module_, ptx.c_str(),
                                    sizeof(options) / sizeof(options[0]),
                                    options, values);
  m.infoLog_ = infoLog.data();
  if (r != CUDA_SUCCESS) {
    m.module_ = nullptr;
    std::string log = errorLog.data();
    std::string op = "cuModuleLoadDataEx(" + name + ", " +
                     std::to_string(ptx.size()) + " bytes of PTX)";
    std::string nameStr = errorName(r);
    std::string message = op + ": " + nameStr + " (" + errorString(r) + ")";
    message += log.empty() ? std::string("; the JIT error log is empty")
                           : "; JIT error log:\n" + log;
    throw CudaError(message, static_cast<int>(r), nameStr);
  }
  return m;
}

Module::~Module() {
  if (module_)
    driverState().api.cuModuleUnload(module_);
}

CUfunction Module::function(const std::string &entry) const {
  CUfunction f = nullptr;
  check(api().cuModuleGetFunction(&f, module_, entry.c_str()),
        "cuModuleGetFunction(" + entry + " in " + name_ + ")");
  return f;
}

//===----------------------------------------------------------------------===//
// Graphs and launches
//===----------------------------------------------------------------------===//

GraphExec::~GraphExec() {
  if (exec_)
    driverState().api.cuGraphExecDestroy(exec_);
}

void GraphExec::beginCapture(CUstream stream, std::string_view what) {
  if (!stream)
    throwInvalidArgument("GraphExec::capture(", what,
                         "): cannot capture the legacy default stream");
  check(api().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture(" + std::string(what) + ")");
}

void GraphExec::abortCapture(CUstream stream) noexcept {
  CUgraph graph = nullptr;
  const Api &a = driverState().api;
  if (a.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS && graph)
    a.cuGraphDestroy(graph);
}

GraphExec GraphExec::endCapture(CUstream stream, std::string_view what) {
  const Api &a = api();
  CUgraph graph = nullptr;
  check(a.cuStreamEndCapture(stream, &graph),
        "cuStreamEndCapture(" + std::string(what) + ")");
  GraphExec exec;
  CUresult r = a.cuGraphInstantiate(&exec.exec_, graph, 0);
  a.cuGraphDestroy(graph);
  check(r, "cuGraphInstantiate(" + std::string(what) + ")");
  return exec;
}

void GraphExec::launch(CUstream stream, std::string_view what) const {
  if (!exec_)
    throwInvalidArgument("GraphExec::launch(", what, "): no graph");
  check(api().cuGraphLaunch(exec_, stream),
        "cuGraphLaunch(" + std::string(what) + ")");
}

void copyToHost(void *dst, CUdeviceptr src, uint64_t bytes,
                std::string_view what) {
  if (bytes)
    check(api().cuMemcpyDtoH(dst, src, bytes),
          "cuMemcpyDtoH(" + std::to_string(bytes) + " bytes of " +
              std::string(what) + ")");
}

void copyToDevice(CUdeviceptr dst, const void *src, uint64_t bytes,
                  std::string_view what) {
  if (!bytes)
    return;
  std::string op = "cuMemcpyHtoD(" + std::to_string(bytes) + " bytes of " +
                   std::string(what) + ")";
  check(api().cuMemcpyHtoD(dst, src, bytes), op);
  check(api().cuStreamSynchronize(nullptr), op);
}

void synchronize(CUstream stream, std::string_view what) {
  check(api().cuStreamSynchronize(stream),
        "cuStreamSynchronize (waiting for " + std::string(what) + ")");
}

namespace {
/// "<call>(<entry>, grid [x, y, z], block [x, y, z], <n> bytes dynamic
/// shared memory[, programmatic stream serialization][, clusters of <c>
/// CTAs])": the operation that launch and occupancy errors name.
std::string launchOperation(std::string_view call, const std::string &entry,
                            const unsigned grid[3], const unsigned block[3],
                            unsigned sharedBytes, bool programmatic,
                            unsigned clusterX) {
  std::ostringstream op;
  op << call << "(" << entry << ", grid [" << grid[0] << ", " << grid[1] << ", "
     << grid[2] << "], block [" << block[0] << ", " << block[1] << ", "
     << block[2] << "], " << sharedBytes << " bytes dynamic shared memory"
     << (programmatic ? ", programmatic stream serialization" : "");
  if (clusterX > 1)
    op << ", clusters of " << clusterX << " CTAs";
  op << ")";
  return op.str();
}

/// The launch configuration of `grid`, `block` and `sharedBytes` on
/// `stream` with the `count` launch attributes at `attributes`.
CUlaunchConfig launchConfig(const unsigned grid[3], const unsigned block[3],
                            unsigned sharedBytes, CUstream stream,
                            CUlaunchAttribute *attributes, unsigned count) {
  CUlaunchConfig config{};
  config.gridDimX = grid[0];
  config.gridDimY = grid[1];
  config.gridDimZ = grid[2];
  config.blockDimX = block[0];
  config.blockDimY = block[1];
  config.blockDimZ = block[2];
  config.sharedMemBytes = sharedBytes;
  config.hStream = stream;
  config.attrs = count ? attributes : nullptr;
  config.numAttrs = count;
  return config;
}

/// The launch attribute for thread-block clusters of (clusterX, 1, 1) CTAs.
CUlaunchAttribute clusterAttribute(unsigned clusterX) {
  CUlaunchAttribute a{};
  a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  a.value.clusterDim = {clusterX, 1, 1};
  return a;
}
} // namespace

void launchKernel(CUfunction function, const std::string &entry,
                  const unsigned grid[3], const unsigned block[3],
                  unsigned sharedBytes, CUstream stream, void **params,
                  bool programmatic, unsigned clusterX) {
  CUlaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (programmatic) {
    attributes[count].id =
        CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[count++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (clusterX > 1)
    attributes[count++] = clusterAttribute(clusterX);
  CUlaunchConfig config =
      launchConfig(grid, block, sharedBytes, stream, attributes, count);
  CUresult r = api().cuLaunchKernelEx(&config, function, params, nullptr);
  if (r != CUDA_SUCCESS)
    check(r, launchOperation("cuLaunchKernelEx", entry, grid, block,
                             sharedBytes, programmatic, clusterX));
}

int maxActiveClusters(CUfunction function, const std::string &entry,
                      const unsigned grid[3], const unsigned block[3],
                      unsigned sharedBytes, unsigned clusterX) {
  // The driver rejects a grid x that is not a multiple of the cluster's.
  const unsigned clusterGrid[3] = {
      (grid[0] + clusterX - 1) / clusterX * clusterX, grid[1], grid[2]};
  CUlaunchAttribute cluster = clusterAttribute(clusterX);
  CUlaunchConfig config =
      launchConfig(clusterGrid, block, sharedBytes, nullptr, &cluster, 1);
  int clusters = 0;
  CUresult r = api().cuOccupancyMaxActiveClusters(&clusters, function, &config);
  if (r == CUDA_ERROR_INVALID_CLUSTER_SIZE || r == CUDA_ERROR_NOT_SUPPORTED)
    return 0;
  if (r != CUDA_SUCCESS)
    check(r, launchOperation("cuOccupancyMaxActiveClusters", entry, clusterGrid,
                             block, sharedBytes,
                             /*programmatic=*/false, clusterX));
  return clusters;
}

CUtensorMap encodeTensorMap(const TiledTensor2D &t, std::string_view what) {
  CUtensorMap map{};
  const cuuint64_t globalDim[2] = {t.cols, t.rows};
  const cuuint64_t globalStrides[1] = {t.rowBytes};
  const cuuint32_t boxDim[2] = {t.boxCols, t.boxRows};
  const cuuint32_t elementStrides[2] = {1, 1};
  CUresult r = api().cuTensorMapEncodeTiled(
      &map, t.dataType, 2, reinterpret_cast<void *>(t.address), globalDim,
      globalStrides, boxDim, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      t.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::ostringstream op;
    op << "cuTensorMapEncodeTiled(" << what << ": data type " << t.dataType
       << " at " << hex(t.address) << ", [" << t.rows << ", " << t.cols
       << "] elements, rows of " << t.rowBytes << " bytes, box [" << t.boxRows
       << ", " << t.boxCols << "], swizzle " << t.swizzle << ")";
    check(r, op.str());
  }
  return map;
}

void setMaxDynamicSharedMemory(CUfunction function, const std::string &entry,
                               int bytes) {
  check(api().cuFuncSetAttribute(
            function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
        "cuFuncSetAttribute(" + entry + ", MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
            std::to_string(bytes) + ")");
}

} // namespace fusion::runtime::cuda
