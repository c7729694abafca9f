//===- FileTest.cpp - which paths the runtime reads and writes ------------===//

#include "fusion/runtime/File.h"

#include "fusion/runtime/Error.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace fusion::runtime;
using namespace fusion::runtime::test;

namespace {

TEST(File, ReadsRegularFilesUpToTheLimit) {
  TempDir dir;
  writeText(dir.file("m.json"), "0123456789");
  EXPECT_EQ(readFile(dir.file("m.json"), "manifest", 10), "0123456789");
  std::string msg = EXPECT_THROW_MSG(
      CapacityError, readFile(dir.file("m.json"), "manifest", 9));
  EXPECT_CONTAINS(msg, "manifest " + dir.file("m.json") +
                           " has 10 bytes, more than the 9 a manifest may "
                           "have");
}

TEST(File, RefusesWhatIsNotARegularFile) {
  // /dev/zero never ends: reading it whole would exhaust memory.
  std::string msg = EXPECT_THROW_MSG(InvalidArgumentError,
                                     readFile("/dev/zero", "PTX", 1 << 20));
  EXPECT_CONTAINS(msg, "PTX /dev/zero is not a regular file");
  TempDir dir;
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         readFile(dir.path(), "config", 1 << 20));
  EXPECT_CONTAINS(msg, "is not a regular file");
  msg = EXPECT_THROW_MSG(Error, readFile(dir.file("missing"), "config", 1));
  EXPECT_CONTAINS(msg, "cannot open config " + dir.file("missing"));
}

TEST(File, OutputsAreRegularFilesOrLinksToThem) {
  TempDir dir;
  EXPECT_EQ(regularOutputFile(dir.file("new.safetensors"), "output"),
            dir.file("new.safetensors"));
  writeText(dir.file("real"), "x");
  std::filesystem::create_symlink("real", dir.file("link"));
  EXPECT_TRUE(std::filesystem::equivalent(
      regularOutputFile(dir.file("link"), "output"), dir.file("real")));
  std::string msg = EXPECT_THROW_MSG(InvalidArgumentError,
                                     regularOutputFile("/dev/null", "--out"));
  EXPECT_CONTAINS(msg, "--out /dev/null exists and is not a regular file");
}

TEST(File, SameFile) {
  TempDir dir;
  writeText(dir.file("a"), "x");
  std::filesystem::create_symlink("a", dir.file("b"));
  EXPECT_TRUE(sameFile(dir.file("a"), dir.file("b")));
  EXPECT_TRUE(sameFile(dir.file("a"), dir.path() + "/./a"));
  EXPECT_TRUE(sameFile(dir.file("new"), dir.path() + "/sub/../new"));
  EXPECT_FALSE(sameFile(dir.file("a"), dir.file("new")));
}

} // namespace
