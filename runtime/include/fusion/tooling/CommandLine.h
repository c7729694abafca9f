//===- CommandLine.h - the runtime tools' option parsing --------*- C++ -*-===//
//
// What fusion-run and fusion-generate share when they parse their command
// lines (Options.h, GenerateOptions.h): `--flag value` and `--flag=value`,
// integer values with their range, and usage errors that point at --help
// (InvalidArgumentError); and how their main() reports errors.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_COMMANDLINE_H
#define FUSION_TOOLING_COMMANDLINE_H

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace fusion::tooling {

/// Throws InvalidArgumentError "<message> (<tool> --help lists the
/// options)".
[[noreturn]] void usageError(std::string_view tool, const std::string &message);

/// `value` of `flag` as a decimal integer in [lo, hi]; otherwise
/// usageError "<flag> expects an integer in [lo, hi], got "<value>"".
int64_t parseIntOption(std::string_view tool, const std::string &flag,
                       const std::string &value, int64_t lo, int64_t hi);

/// Sets one option: `flag` ("--batch") and, for flags that take one, a
/// function returning its value; returns false if `flag` is not an option.
using OptionSetter = std::function<bool(
    const std::string &flag, const std::function<std::string()> &value)>;

/// Calls `set` for each option of `args` (the command line without the
/// program name): `--flag value` or `--flag=value`; calling the value
/// function consumes the next argument (usageError "<flag> needs a value"
/// at the end). Returns true, without reading further, at `--help` or `-h`.
/// usageError "unknown argument "<arg>"" when `set` returns false.
bool parseArguments(std::string_view tool, const std::vector<std::string> &args,
                    const OptionSetter &set);

/// The runtime tools' exit statuses besides 0: an error, and "skipped" (no
/// CUDA device; ctest's SKIP_RETURN_CODE).
inline constexpr int kExitError = 2;
inline constexpr int kExitSkipped = 77;

/// A tool's main() around `body`: its result; kExitSkipped after "no CUDA
/// device: skipped (<why>)" on stdout for DeviceUnavailableError;
/// kExitError after "<tool>: CUDA error: <what>" (CudaError) or
/// "<tool>: <what>" (any other exception) on stderr.
int runToolMain(std::string_view tool, const std::function<int()> &body);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_COMMANDLINE_H
