//===- File.cpp - reading and writing the runtime's files ----------------===//

#include "fusion/runtime/File.h"

#include "fusion/runtime/Error.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace fusion::runtime {

std::string readFile(const std::string &path, std::string_view what,
                     uint64_t maxBytes) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec)
    throw Error("cannot open " + std::string(what) + " " + path + ": " +
                ec.message());
  if (!fs::is_regular_file(status))
    throw InvalidArgumentError(std::string(what) + " " + path +
                               " is not a regular file (a device, FIFO or "
                               "directory cannot be read as one)");
  uint64_t size = fs::file_size(path, ec);
  if (!ec && size > maxBytes)
    throw CapacityError(std::string(what) + " " + path + " has " +
                        std::to_string(size) + " bytes, more than the " +
                        std::to_string(maxBytes) + " a " + std::string(what) +
                        " may have");
  std::ifstream is(path, std::ios::binary);
  if (!is)
    throw Error("cannot open " + std::string(what) + " " + path + ": " +
                std::strerror(errno));
  std::ostringstream ss;
  ss << is.rdbuf();
  if (is.bad())
    throw Error("cannot read " + std::string(what) + " " + path);
  return ss.str();
}

std::string regularOutputFile(const std::string &path, std::string_view what) {
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(fs::symlink_status(path, ec)))
    target = fs::weakly_canonical(path, ec);
  fs::file_status status = fs::status(target, ec);
  if (!ec && fs::exists(status) && !fs::is_regular_file(status))
    throw InvalidArgumentError(std::string(what) + " " + path +
                               " exists and is not a regular file");
  return target.string();
}

bool sameFile(const std::string &a, const std::string &b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec))
    return true;
  fs::path pa = fs::weakly_canonical(a, ec), pb = fs::weakly_canonical(b, ec);
  return !pa.empty() && pa == pb;
}

std::string readPtx(const std::string &path) {
  return readFile(path, "PTX", uint64_t{1} << 30);
}

} // namespace fusion::runtime
