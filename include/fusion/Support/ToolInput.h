//===- ToolInput.h - checks on a command-line tool's input file -*- C++ -*-===//
//
// The compiler's tools read their input whole into memory (llvm::MemoryBuffer).
// A path that is not a regular file (/dev/zero, a FIFO) or a file far larger
// than any module or config would then exhaust memory instead of failing.
//
//===----------------------------------------------------------------------===//
#ifndef FUSION_SUPPORT_TOOLINPUT_H
#define FUSION_SUPPORT_TOOLINPUT_H

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::fusion {

/// Checks that `path` ("-" for stdin, which is not checked) is a regular
/// file of at most `maxBytes` bytes. Errors name the path, what it is, or
/// its size and the limit.
inline llvm::Error checkToolInput(llvm::StringRef path, uint64_t maxBytes) {
  if (path == "-")
    return llvm::Error::success();
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return llvm::createStringError(ec, "cannot open %s: %s", path.str().c_str(),
                                   ec.message().c_str());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return llvm::createStringError(
        std::errc::invalid_argument,
        "%s is not a regular file (a device, FIFO or directory cannot be read "
        "as input)",
        path.str().c_str());
  if (status.getSize() > maxBytes)
    return llvm::createStringError(
        std::errc::file_too_large, "%s",
        llvm::formatv("{0} has {1} bytes, more than the {2} an input may have",
                      path, status.getSize(), maxBytes)
            .str()
            .c_str());
  return llvm::Error::success();
}

} // namespace mlir::fusion

#endif // FUSION_SUPPORT_TOOLINPUT_H
