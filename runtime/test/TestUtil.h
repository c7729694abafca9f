//===- TestUtil.h - helpers shared by the runtime unit tests ------*- C++
//-*-===//

#ifndef FUSION_RUNTIME_TEST_TESTUTIL_H
#define FUSION_RUNTIME_TEST_TESTUTIL_H

#include "fusion/contract/Contract.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>

#define EXPECT_CONTAINS(str, sub)                                              \
  EXPECT_NE(std::string(str).find(sub), std::string::npos)                     \
      << "expected \"" << (sub) << "\" in: " << (str)

/// Runs `fn`, expects it to throw `E`, and returns the message.
#define EXPECT_THROW_MSG(E, stmt)                                              \
  ([&]() -> std::string {                                                      \
    try {                                                                      \
      stmt;                                                                    \
    } catch (const E &e) {                                                     \
      return e.what();                                                         \
    } catch (const std::exception &e) {                                        \
      ADD_FAILURE() << "expected " #E ", got another exception: " << e.what(); \
      return "";                                                               \
    }                                                                          \
    ADD_FAILURE() << "expected " #E " from: " #stmt;                           \
    return "";                                                                 \
  }())

namespace fusion::runtime::test {

/// The test data directory (runtime/test/data).
inline std::string dataPath(const std::string &name) {
  return std::string(FUSION_RUNTIME_TEST_DATA) + "/" + name;
}

inline std::string readText(const std::string &path) {
  std::ifstream is(path, std::ios::binary);
  std::ostringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

inline void writeText(const std::string &path, const std::string &text) {
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  os << text;
}

/// The manifest's ptx_fnv1a64 for `ptx`: its FNV-1a hash as 16 lowercase hex
/// digits.
inline std::string ptxFingerprintHex(std::string_view ptx) {
  char hex[17];
  std::snprintf(
      hex, sizeof hex, "%016llx",
      static_cast<unsigned long long>(fusion::contract::ptxFingerprint(ptx)));
  return hex;
}

/// `ptx` plus a copy of its `.visible .entry from(...) {...}` renamed to
/// `to` (e.g. a variant entry with the same signature). Every occurrence of
/// `from` in the copy is renamed, so copy an entry whose name is no prefix
/// of a module-level symbol it uses (decode_layer_k0_fused is one of
/// decode_layer_k0_fused_inv_freq; decode_layer_k0_fused_mma is none) where
/// the copy must load.
inline std::string withEntryCopy(const std::string &ptx,
                                 const std::string &from,
                                 const std::string &to) {
  size_t begin = ptx.find(".visible .entry " + from + "(");
  size_t end = ptx.find("\n}\n", begin);
  if (begin == std::string::npos || end == std::string::npos)
    return ptx;
  std::string copy = ptx.substr(begin, end + 3 - begin);
  for (size_t p = 0; (p = copy.find(from, p)) != std::string::npos;
       p += to.size())
    copy.replace(p, from.size(), to);
  return ptx + "\n" + copy;
}

/// A fresh temporary directory, removed at the end of the test.
class TempDir {
public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "fusion-rt-XXXXXX").string();
    char *made = mkdtemp(pattern.data());
    if (made)
      path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

} // namespace fusion::runtime::test

#endif // FUSION_RUNTIME_TEST_TESTUTIL_H
