//===- Cuda.h - CUDA driver API wrappers --------------------------*- C++
//-*-===//
//
// Small RAII wrappers over the CUDA driver API (no CUDA runtime API, no
// nvcc): the primary context of a device, device memory, streams, events, a
// PTX module loaded with the JIT logs, and an instantiated CUDA graph.
//
// The driver library. By default (FUSION_RUNTIME_CUDA_DLOPEN=ON) the runtime
// does not link libcuda: it opens libcuda.so.1 with dlopen on first use (the
// environment variable FUSION_CUDA_DRIVER names another file) and resolves
// the versioned entry points the CUDA 13 headers name (cuMemAlloc_v2, ...).
// So binaries start on machines without a driver, and a missing driver is a
// DeviceUnavailableError instead of a loader failure. With
// FUSION_RUNTIME_CUDA_DLOPEN=OFF the library links CUDA::cuda_driver (the
// stub at build time) and calls the driver directly.
//
// Errors. Every failing call throws:
//  * DeviceUnavailableError when the driver cannot be used at all:
//    libcuda.so.1 missing, cuInit failing (CUDA_ERROR_NO_DEVICE,
//    CUDA_ERROR_INSUFFICIENT_DRIVER, CUDA_ERROR_STUB_LIBRARY, ...), a device
//    ordinal that does not exist;
//  * CudaError otherwise, with the message
//      "<operation>: CUDA_ERROR_<NAME> (<cuGetErrorString>)"
//    where the operation names the call and what it acted on (kernel entry,
//    buffer label, byte counts), e.g.
//      "cuLaunchKernelEx(decode_layer_kernel_1, grid [4, 8, 2], block [128, 1,
//       1], 0 bytes dynamic shared memory): CUDA_ERROR_INVALID_VALUE
//       (invalid argument)"
//    and, for cuModuleLoadDataEx, the JIT error log.
// Destructors never throw (errors while releasing are ignored).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_CUDA_H
#define FUSION_RUNTIME_CUDA_H

#include <cuda.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace fusion::runtime::cuda {

/// Loads the driver library and calls cuInit(0) once per process. Throws
/// DeviceUnavailableError (naming the library and the CUDA error) if that
/// fails; later calls rethrow the same error.
void initialize();

/// Number of CUDA devices (after initialize()).
int deviceCount();

/// "CUDA_ERROR_INVALID_VALUE" ("CUresult <n>" if the driver does not know).
std::string errorName(CUresult result);
/// cuGetErrorString's text ("unknown error" if none).
std::string errorString(CUresult result);

/// Throws CudaError "<operation>: <NAME> (<string>)" unless `result` is
/// CUDA_SUCCESS.
void check(CUresult result, std::string_view operation);

/// The primary context of a device, retained and made current on the
/// calling thread. Move-only.
class Context {
public:
  /// initialize(), then retain device `ordinal`'s primary context and make
  /// it current. Throws DeviceUnavailableError if there is no such device.
  static Context open(int ordinal = 0);
  Context(Context &&o) noexcept { swap(o); }
  Context &operator=(Context &&o) noexcept {
    swap(o);
    return *this;
  }
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;
  ~Context();

  CUcontext get() const { return context_; }
  CUdevice device() const { return device_; }
  int ordinal() const { return ordinal_; }
  /// Makes this context current on the calling thread.
  void makeCurrent() const;
  /// cuCtxSynchronize; `what` names the work waited for in messages.
  void synchronize(std::string_view what = "the device") const;

  std::string name() const;
  /// {major, minor}.
  std::pair<int, int> computeCapability() const;
  int multiprocessorCount() const;
  uint64_t totalMemory() const;
  /// Bytes of device memory free now (cuMemGetInfo; makes the context
  /// current).
  uint64_t freeMemory() const;
  /// cuDriverGetVersion, e.g. 13000.
  static int driverVersion();

private:
  Context() = default;
  void swap(Context &o) noexcept {
    std::swap(context_, o.context_);
    std::swap(device_, o.device_);
    std::swap(ordinal_, o.ordinal_);
  }
  CUcontext context_ = nullptr;
  CUdevice device_ = 0;
  int ordinal_ = -1;
};

/// Device memory (cuMemAlloc). Move-only; freed on destruction.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  /// Allocates `bytes` (>= 1; 0 is rounded up to 1 so the pointer is never
  /// null). `label` names the buffer in messages.
  DeviceBuffer(uint64_t bytes, std::string label);
  DeviceBuffer(DeviceBuffer &&o) noexcept { swap(o); }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
    swap(o);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  CUdeviceptr get() const { return ptr_; }
  uint64_t bytes() const { return bytes_; }
  const std::string &label() const { return label_; }
  explicit operator bool() const { return ptr_ != 0; }

  /// Copies of `bytes` at byte `offset` (checked against the size:
  /// InvalidArgumentError) that are complete on the device when they
  /// return. They are not ordered with other streams: synchronize the
  /// stream that wrote the buffer before download().
  void upload(const void *src, uint64_t bytes, uint64_t offset = 0);
  void download(void *dst, uint64_t bytes, uint64_t offset = 0) const;
  /// Copies ordered on `stream` (the host memory must stay valid until the
  /// stream reaches them).
  void uploadAsync(const void *src, uint64_t bytes, CUstream stream,
                   uint64_t offset = 0);
  void downloadAsync(void *dst, uint64_t bytes, CUstream stream,
                     uint64_t offset = 0) const;
  /// Copies all of `src` (at most bytes() bytes, else InvalidArgumentError)
  /// to the start of this buffer, ordered on `stream` (cuMemcpyDtoDAsync).
  void copyFrom(const DeviceBuffer &src, CUstream stream);
  /// Copies `bytes` of device memory at `src` (`what` names it in messages)
  /// to byte `offset` of this buffer, ordered on `stream`.
  void copyFrom(CUdeviceptr src, uint64_t bytes, std::string_view what,
                CUstream stream, uint64_t offset = 0);
  /// Sets the first `bytes` (default: all) to `value`: cuMemsetD8Async on
  /// `stream`, or, when stream is null, cuMemsetD8 waited for.
  void fill(uint8_t value, CUstream stream = nullptr, uint64_t bytes = ~0ull);

private:
  void swap(DeviceBuffer &o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(label_, o.label_);
  }
  void checkRange(const char *op, uint64_t bytes, uint64_t offset) const;
  CUdeviceptr ptr_ = 0;
  uint64_t bytes_ = 0;
  std::string label_;
};

/// Page-locked host memory (cuMemHostAlloc), zeroed: the source of copies
/// that must not wait for the stream (an asynchronous copy from pageable
/// memory may synchronize with it). Move-only; freed on destruction.
class PinnedHostBuffer {
public:
  PinnedHostBuffer() = default;
  /// Allocates `bytes` (0 is rounded up to 1). `label` names it in messages.
  PinnedHostBuffer(uint64_t bytes, std::string label);
  PinnedHostBuffer(PinnedHostBuffer &&o) noexcept { swap(o); }
  PinnedHostBuffer &operator=(PinnedHostBuffer &&o) noexcept {
    swap(o);
    return *this;
  }
  PinnedHostBuffer(const PinnedHostBuffer &) = delete;
  PinnedHostBuffer &operator=(const PinnedHostBuffer &) = delete;
  ~PinnedHostBuffer();

  void *data() const { return ptr_; }
  uint64_t bytes() const { return bytes_; }

private:
  void swap(PinnedHostBuffer &o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(label_, o.label_);
  }
  void *ptr_ = nullptr;
  uint64_t bytes_ = 0;
  std::string label_;
};

/// A non-blocking stream. Move-only.
class Stream {
public:
  /// Creates a stream (CU_STREAM_NON_BLOCKING).
  static Stream create();
  Stream(Stream &&o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream &operator=(Stream &&o) noexcept {
    std::swap(stream_, o.stream_);
    return *this;
  }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();
  CUstream get() const { return stream_; }
  /// cuStreamSynchronize; `what` names the work waited for in messages
  /// (kernel faults surface here).
  void synchronize(std::string_view what = "the stream") const;

private:
  Stream() = default;
  CUstream stream_ = nullptr;
};

/// An event: a point in a stream to time or to wait for. Move-only.
class Event {
public:
  /// With `timing` false (CU_EVENT_DISABLE_TIMING) it cannot be timed but
  /// costs less to record and to wait for.
  static Event create(bool timing = true);
  Event(Event &&o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event &operator=(Event &&o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();
  CUevent get() const { return event_; }
  void record(CUstream stream);
  /// Makes later work on `stream` wait, on the device, for the work before
  /// the event's last record (cuStreamWaitEvent; nothing to wait for if it
  /// was never recorded).
  void enqueueWait(CUstream stream) const;
  void synchronize() const;
  /// Milliseconds between `start` and `end` (both recorded and complete).
  static float elapsedMs(const Event &start, const Event &end);

private:
  Event() = default;
  CUevent event_ = nullptr;
};

/// A module loaded from PTX text (JIT-compiled by the driver). Move-only.
class Module {
public:
  /// cuModuleLoadDataEx with the JIT error and info logs. On failure the
  /// CudaError message names `name` and contains the JIT error log.
  static Module loadPtx(const std::string &ptx, const std::string &name);
  Module(Module &&o) noexcept { swap(o); }
  Module &operator=(Module &&o) noexcept {
    swap(o);
    return *this;
  }
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();
  CUmodule get() const { return module_; }
  const std::string &name() const { return name_; }
  /// The JIT info log (may be empty).
  const std::string &infoLog() const { return infoLog_; }
  /// cuModuleGetFunction; the error names the entry and the module.
  CUfunction function(const std::string &entry) const;

private:
  Module() = default;
  void swap(Module &o) noexcept {
    std::swap(module_, o.module_);
    std::swap(name_, o.name_);
    std::swap(infoLog_, o.infoLog_);
  }
  CUmodule module_ = nullptr;
  std::string name_;
  std::string infoLog_;
};

/// Stream capture into a CUDA graph and its executable instance.
class GraphExec {
public:
  GraphExec() = default;
  GraphExec(GraphExec &&o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  GraphExec &operator=(GraphExec &&o) noexcept {
    std::swap(exec_, o.exec_);
    return *this;
  }
  GraphExec(const GraphExec &) = delete;
  GraphExec &operator=(const GraphExec &) = delete;
  ~GraphExec();

  /// Captures the work `record(stream)` enqueues on `stream` (which must
  /// not be the legacy default stream) and instantiates it. If `record`
  /// throws, the capture is ended and discarded and the exception
  /// propagates. `what` names the work in messages.
  template <typename Fn>
  static GraphExec capture(CUstream stream, std::string_view what,
                           Fn &&record) {
    beginCapture(stream, what);
    try {
      record(stream);
    } catch (...) {
      abortCapture(stream);
      throw;
    }
    return endCapture(stream, what);
  }

  explicit operator bool() const { return exec_ != nullptr; }
  /// cuGraphLaunch on `stream`.
  void launch(CUstream stream, std::string_view what) const;

private:
  static void beginCapture(CUstream stream, std::string_view what);
  static void abortCapture(CUstream stream) noexcept;
  static GraphExec endCapture(CUstream stream, std::string_view what);
  CUgraphExec exec_ = nullptr;
};

/// Copies between host memory and a device address, complete when they
/// return (not ordered with other streams); `what` names the data in
/// messages.
void copyToHost(void *dst, CUdeviceptr src, uint64_t bytes,
                std::string_view what);
void copyToDevice(CUdeviceptr dst, const void *src, uint64_t bytes,
                  std::string_view what);
/// cuStreamSynchronize(stream); `what` names the work waited for.
void synchronize(CUstream stream, std::string_view what);

/// Launches `function` (cuLaunchKernelEx); with `programmatic`, with
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so that it may start
/// before the previous kernel in `stream` finishes (the kernel must wait with
/// griddepcontrol.wait before touching that kernel's data; CUDA graphs keep
/// it as a programmatic edge); with `clusterX` > 1, in thread-block clusters
/// of (clusterX, 1, 1) CTAs (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; grid x a
/// multiple of it, sm_90+). The error names `entry` and the geometry.
void launchKernel(CUfunction function, const std::string &entry,
                  const unsigned grid[3], const unsigned block[3],
                  unsigned sharedBytes, CUstream stream, void **params,
                  bool programmatic = false, unsigned clusterX = 1);

/// How many thread-block clusters of (clusterX, 1, 1) CTAs of `function`,
/// each CTA with `block` threads and `sharedBytes` of dynamic shared memory,
/// the current context's device can run at once
/// (cuOccupancyMaxActiveClusters for a grid of `grid`, x rounded up to a
/// multiple of clusterX >= 1). Set the function's dynamic shared memory limit
/// first (setMaxDynamicSharedMemory), as for the launch. 0 means such
/// clusters cannot be scheduled (too many resources per cluster, an MPS
/// client or MIG slice with too few SMs, a device without clusters), so the
/// launch must go without one: the driver's answer 0,
/// CUDA_ERROR_INVALID_CLUSTER_SIZE (this cluster shape is not supported for
/// this function or device) or CUDA_ERROR_NOT_SUPPORTED (not on this device
/// or platform). Any other error (CUDA_ERROR_INVALID_VALUE,
/// CUDA_ERROR_INVALID_CONTEXT, ...: a bad handle, configuration or context)
/// throws CudaError naming `entry` and the configuration.
int maxActiveClusters(CUfunction function, const std::string &entry,
                      const unsigned grid[3], const unsigned block[3],
                      unsigned sharedBytes, unsigned clusterX);

/// A 2-D row-major tensor in device memory read by TMA in boxes
/// (contract::TensorMapSpec): what encodeTensorMap encodes.
struct TiledTensor2D {
  CUtensorMapDataType dataType = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  /// Its first element (16-byte aligned).
  CUdeviceptr address = 0;
  /// Rows and columns (elements); a row is cols * element bytes, a multiple
  /// of 16.
  uint64_t rows = 0, cols = 0;
  uint64_t rowBytes = 0;
  /// The box (elements, each in [1, 256]).
  uint32_t boxRows = 0, boxCols = 0;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
};

/// The descriptor cuTensorMapEncodeTiled writes for `t`: rank 2, globalDim
/// {cols, rows}, globalStrides {rowBytes}, boxDim {boxCols, boxRows},
/// elementStrides {1, 1}, no interleave, t.swizzle, L2 promotion 256B, no
/// OOB fill. Throws CudaError naming `what` (the kernel and parameter), the
/// tensor and the CUresult when the driver rejects it.
CUtensorMap encodeTensorMap(const TiledTensor2D &t, std::string_view what);

/// Allows `function` to use `bytes` of dynamic shared memory (needed above
/// 48 KiB).
void setMaxDynamicSharedMemory(CUfunction function, const std::string &entry,
                               int bytes);

} // namespace fusion::runtime::cuda

#endif // FUSION_RUNTIME_CUDA_H
