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

/// A request exceeds a capacity: the KV-cache page pool is exhausted or a
/// sequence would exceed its maximum number of pages.
class CapacityError : public Error {
public:
  using Error::Error;
};

namespace detail {
/// Concatenates the arguments with operator<< into one string.
template <typename... Args> std::string concat(Args &&...args) {
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
template <typename... Args> [[noreturn]] void throwCapacity(Args &&...args) {
  throw CapacityError(detail::concat(std::forward<Args>(args)...));
}

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_ERROR_H
