//===- File.h - reading and writing the runtime's files --------*- C++ -*-===//
//
// Manifests, PTX, config.json files and checkpoint indexes are read whole;
// safetensors files and reports are written. One place says what such a
// path may be: a regular file (never a device or FIFO, which would never
// end or be replaced by a rename), of bounded size.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_FILE_H
#define FUSION_RUNTIME_FILE_H

#include <cstdint>
#include <string>
#include <string_view>

namespace fusion::runtime {

/// The contents of the regular file `path`, which `what` names in errors
/// ("manifest", "PTX", ...). Throws Error if it cannot be opened or read,
/// InvalidArgumentError if it is not a regular file (a device, FIFO or
/// directory), and CapacityError if it has more than `maxBytes` bytes.
std::string readFile(const std::string &path, std::string_view what,
                     uint64_t maxBytes);

/// The PTX file at `path` (fusion-compile's <prefix>.ptx): readFile with
/// what = "PTX" and at most 1 GiB.
std::string readPtx(const std::string &path);

/// The file to write for output `path` through a temporary and a rename:
/// `path` itself, or the file a symbolic link names (the rename would
/// replace the link). Throws InvalidArgumentError if it exists as anything
/// but a regular file (a device such as /dev/null, a directory).
std::string regularOutputFile(const std::string &path, std::string_view what);

/// Whether `a` and `b` name the same file (both existing and equivalent,
/// or the same normalised absolute path).
bool sameFile(const std::string &a, const std::string &b);

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_FILE_H
