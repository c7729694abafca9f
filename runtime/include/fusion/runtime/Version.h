//===- Version.h - the runtime library's version ----------------*- C++ -*-===//
//
// The version of libfusion, the runtime as an installed shared library
// (runtime/cmake/InstallRuntime.cmake; only that library defines version()):
// its SOVERSION is the major number, and fusionConfigVersion.cmake accepts
// the same major.minor.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_VERSION_H
#define FUSION_RUNTIME_VERSION_H

namespace fusion::runtime {

/// "major.minor.patch", e.g. "0.1.0": the version this library was built as.
const char *version();

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_VERSION_H
