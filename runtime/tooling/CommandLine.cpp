//===- CommandLine.cpp - the runtime tools' option parsing ----------------===//

#include "fusion/tooling/CommandLine.h"

#include "fusion/runtime/Error.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <optional>

namespace fusion::tooling {

void usageError(std::string_view tool, const std::string &message) {
  throw runtime::InvalidArgumentError(message + " (" + std::string(tool) +
                                      " --help lists the options)");
}

int64_t parseIntOption(std::string_view tool, const std::string &flag,
                       const std::string &value, int64_t lo, int64_t hi) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || errno || v < lo || v > hi)
    usageError(tool, flag + " expects an integer in [" + std::to_string(lo) +
                         ", " + std::to_string(hi) + "], got \"" + value +
                         "\"");
  return v;
}

bool parseArguments(std::string_view tool, const std::vector<std::string> &args,
                    const OptionSetter &set) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inlineValue; // --flag=value
    if (size_t eq = arg.find('=');
        arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inlineValue = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inlineValue)
        return *inlineValue;
      if (i + 1 >= args.size())
        usageError(tool, arg + " needs a value");
      return args[++i];
    };
    if (arg == "--help" || arg == "-h")
      return true;
    if (!set(arg, value))
      usageError(tool, "unknown argument \"" + arg + "\"");
  }
  return false;
}

int runToolMain(std::string_view tool, const std::function<int()> &body) {
  try {
    return body();
  } catch (const runtime::DeviceUnavailableError &e) {
    std::cout << "no CUDA device: skipped (" << e.what() << ")\n";
    return kExitSkipped;
  } catch (const runtime::CudaError &e) {
    std::cerr << tool << ": CUDA error: " << e.what() << "\n";
    return kExitError;
  } catch (const std::exception &e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return kExitError;
  }
}

} // namespace fusion::tooling
