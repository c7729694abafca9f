//===- Error.h - runtime error types ------------------------------*- C++
//-*-===//
//
// The fusion runtime reports every failure by throwing an exception derived
// from fusion::runtime::Error (itself a std::runtime_error). The message is
// complete on its own: it names the function, the object involved (sequence
// id, kernel, buffer), what was requested and what was available.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_ERROR_H
#define FUSION_RUNTIME_ERROR_H

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace fusion::runtime {

/// Base class of every exception the runtime throws.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

/// A caller passed an invalid argument: a bad shape, a null buffer, an
/// unknown or duplicate sequence id, an out-of-range position or page id.
class InvalidArgumentError : public Error {
public:
  using Error::Error;
};

/// A request exceeds a capacity: the KV-cache page pool is exhausted, a
/// sequence would exceed its maximum number of pages, or a decode step asks
/// for a larger batch / block table than the buffers were allocated for.
class CapacityError : public Error {
public:
  using Error::Error;
};

/// A file or document is malformed or inconsistent: a manifest, a
/// safetensors file, a config.json, a PTX module that does not match its
/// manifest. The message names the file and where in it (a JSON path such as
/// `kernels[1].params[3].shape`, a tensor name).
class FormatError : public Error {
public:
  using Error::Error;
};

/// An operation the runtime does not support (yet): an unknown dtype, a
/// rope_scaling type without a reference implementation, ...
class UnsupportedError : public Error {
public:
  using Error::Error;
};

/// The CUDA driver cannot be used at all: libcuda.so.1 is missing, cuInit
/// fails (no driver, CUDA_ERROR_NO_DEVICE, ...) or the device ordinal does
/// not exist. Tools map it to "skipped" (exit status 77) in tests.
class DeviceUnavailableError : public Error {
public:
  using Error::Error;
};

/// A CUDA driver call failed. The message names the CUDA error
/// (cuGetErrorName and cuGetErrorString), the operation and, for launches
/// and module loads, the kernel involved.
class CudaError : public Error {
public:
  CudaError(const std::string &message, int code, std::string errorName)
      : Error(message), code_(code), errorName_(std::move(errorName)) {}
  /// The CUresult value.
  int code() const { return code_; }
  /// "CUDA_ERROR_...".
  const std::string &errorName() const { return errorName_; }

private:
  int code_;
  std::string errorName_;
};

namespace detail {
/// Concatenates the arguments with operator<< into one string.
template <typename... Args>
std::string concat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
} // namespace detail

/// Throws an InvalidArgumentError whose message is the concatenation of
/// `args` (streamed with operator<<).
template <typename... Args>
[[noreturn]] void throwInvalidArgument(Args &&...args) {
  throw InvalidArgumentError(detail::concat(std::forward<Args>(args)...));
}

/// Throws a CapacityError whose message is the concatenation of `args`.
template <typename... Args>
[[noreturn]] void throwCapacity(Args &&...args) {
  throw CapacityError(detail::concat(std::forward<Args>(args)...));
}

/// Throws a FormatError whose message is the concatenation of `args`.
template <typename... Args>
[[noreturn]] void throwFormat(Args &&...args) {
  throw FormatError(detail::concat(std::forward<Args>(args)...));
}

/// Throws an UnsupportedError whose message is the concatenation of `args`.
template <typename... Args>
[[noreturn]] void throwUnsupported(Args &&...args) {
  throw UnsupportedError(detail::concat(std::forward<Args>(args)...));
}

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_ERROR_H
