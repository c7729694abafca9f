//===- SafetensorsTest.cpp - safetensors reader/writer --------------------===//

#include "fusion/runtime/Safetensors.h"
#include "fusion/runtime/Error.h"

#include "TestUtil.h"

#include <cstring>
#include <filesystem>

using namespace fusion::runtime;
using namespace fusion::runtime::test;

namespace {

std::string withHeader(const std::string &header, const std::string &data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

uint64_t headerLength(const std::string &bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return n;
}

} // namespace

TEST(Safetensors, DTypeSizes) {
  EXPECT_EQ(safetensorsDTypeSize("F16"), 2);
  EXPECT_EQ(safetensorsDTypeSize("BF16"), 2);
  EXPECT_EQ(safetensorsDTypeSize("F32"), 4);
  EXPECT_EQ(safetensorsDTypeSize("I32"), 4);
  EXPECT_EQ(safetensorsDTypeSize("F64"), 8);
  EXPECT_EQ(safetensorsDTypeSize("BOOL"), 1);
  EXPECT_EQ(safetensorsDTypeSize("f16"), 0); // case matters
  EXPECT_EQ(safetensorsDTypeName(DType::F16), "F16");
  EXPECT_EQ(safetensorsDTypeName(DType::BF16), "BF16");
}

TEST(Safetensors, RoundTripInMemory) {
  std::vector<uint16_t> a = {1, 2, 3, 4, 5, 0xffff};
  std::vector<int32_t> b = {-1, 7, 1 << 30, 0};
  float scalar = 3.5f;
  std::vector<TensorRef> tensors = {
      {"layer.a", "F16", {2, 3}, a.data()},
      {"b", "I32", {4}, b.data()},
      {"scalar", "F32", {}, &scalar},
      {"empty", "BF16", {0, 5}, nullptr},
  };
  std::string bytes = encodeSafetensors(tensors, {{"format", "pt"}});
  // The data section is 8-byte aligned and the header is JSON padded with
  // spaces.
  uint64_t n = headerLength(bytes);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 12 + 16 + 4);

  SafetensorsFile f = SafetensorsFile::fromBytes(bytes, "mem");
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  // Data in order of decreasing element size, so every tensor is aligned
  // to its element size: b (I32), scalar (F32), layer.a (F16), empty.
  EXPECT_EQ(f.tensors()[0].name, "b");
  EXPECT_EQ(f.tensors()[1].name, "scalar");
  EXPECT_EQ(f.tensors()[2].name, "layer.a");
  for (const TensorInfo &t : f.tensors())
    EXPECT_EQ(t.offset % safetensorsDTypeSize(t.dtype), 0u) << t.name;
  const TensorInfo &ta = f.info("layer.a");
  EXPECT_EQ(ta.dtype, "F16");
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta.numElements(), 6);
  EXPECT_EQ(ta.describe(), "F16[2, 3]");
  std::vector<uint8_t> ra = f.read("layer.a");
  ASSERT_EQ(ra.size(), 12u);
  EXPECT_EQ(std::memcmp(ra.data(), a.data(), 12), 0);
  std::vector<int32_t> rb(4);
  f.readInto("b", rb.data(), 16);
  EXPECT_EQ(rb, b);
  float rs = 0;
  f.readInto("scalar", &rs, 4);
  EXPECT_EQ(rs, 3.5f);
  EXPECT_EQ(f.info("scalar").numElements(), 1);
  EXPECT_EQ(f.read("empty").size(), 0u);
  EXPECT_FALSE(f.contains("missing"));
}

TEST(Safetensors, RoundTripThroughAFile) {
  TempDir dir;
  std::vector<uint16_t> w(4096);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<uint16_t>(i * 7919);
  std::string path = dir.file("w.safetensors");
  writeSafetensors(path, {{"w", "BF16", {64, 64}, w.data()}});
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  std::vector<uint8_t> r = f.read("w");
  ASSERT_EQ(r.size(), w.size() * 2);
  EXPECT_EQ(std::memcmp(r.data(), w.data(), r.size()), 0);
  std::vector<uint16_t> small(10);
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, f.readInto("w", small.data(), 20));
  EXPECT_CONTAINS(msg, "does not fit in 20 bytes");
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // As written by the Python library: keys sorted, offsets explicit.
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2],)"
      R"("data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1,1],)"
      R"("data_offsets":[4,8]}})";
  std::string data("\x00\x3c\x00\xc0\x2a\x00\x00\x00", 8);
  SafetensorsFile f = SafetensorsFile::fromBytes(withHeader(header, data));
  std::vector<uint16_t> a(2);
  f.readInto("a", a.data(), 4);
  EXPECT_EQ(a[0], 0x3c00); // 1.0 in f16
  EXPECT_EQ(a[1], 0xc000); // -2.0
  int32_t b = 0;
  f.readInto("b", &b, 4);
  EXPECT_EQ(b, 42);
}

TEST(Safetensors, RejectsMalformedFiles) {
  auto parse = [](const std::string &bytes) {
    return SafetensorsFile::fromBytes(bytes, "bad.safetensors");
  };
  std::string msg;
  msg = EXPECT_THROW_MSG(FormatError, parse("abc"));
  EXPECT_CONTAINS(msg, "bad.safetensors: not a safetensors file");
  msg = EXPECT_THROW_MSG(FormatError,
                         parse(std::string("\xff\xff\xff\xff\0\0\0\0", 8)));
  EXPECT_CONTAINS(msg, "100 MB");
  msg = EXPECT_THROW_MSG(FormatError,
                         parse(std::string("\x40\0\0\0\0\0\0\0{}", 10)));
  EXPECT_CONTAINS(msg, "truncated");
  msg = EXPECT_THROW_MSG(FormatError, parse(withHeader("{not json", "")));
  EXPECT_CONTAINS(msg, "invalid JSON");
  msg = EXPECT_THROW_MSG(FormatError, parse(withHeader("[1,2]", "")));
  EXPECT_CONTAINS(msg, "not a JSON object");
  // Offsets that do not match the shape.
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(withHeader(
          R"({"a":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}})",
          "1234")));
  EXPECT_CONTAINS(msg, "\"a\".data_offsets");
  EXPECT_CONTAINS(msg, "do not match F16[3]");
  // Past the end of the data.
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(withHeader(
          R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})",
          "1234")));
  EXPECT_CONTAINS(msg, "invalid range [0, 8)");
  // A hole and an overlap.
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(withHeader(
          R"({"a":{"dtype":"F16","shape":[1],"data_offsets":[2,4]}})",
          "1234")));
  EXPECT_CONTAINS(msg, "(hole)");
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(
          withHeader(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"F16","shape":[1],"data_offsets":[2,4]}})",
                     "1234")));
  EXPECT_CONTAINS(msg, "(overlap)");
  // Trailing data no tensor covers.
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(withHeader(
          R"({"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})",
          "1234")));
  EXPECT_CONTAINS(msg, "cover 2 bytes but the data section has 4");
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(withHeader(
          R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,2]}})", "12")));
  EXPECT_CONTAINS(msg, "unknown safetensors dtype \"Q4\"");
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(withHeader(
          R"({"a":{"dtype":"F16","shape":[-1],"data_offsets":[0,2]}})", "12")));
  EXPECT_CONTAINS(msg, "\"a\".shape[0]");
  // A shape whose byte count overflows: "too large", not "-1 bytes".
  msg = EXPECT_THROW_MSG(
      FormatError,
      parse(withHeader(R"({"a":{"dtype":"F16","shape":[2147483648,)"
                       R"(2147483648,4],"data_offsets":[0,2]}})",
                       "12")));
  EXPECT_CONTAINS(msg, "\"a\".shape: F16[2147483648, 2147483648, 4] is too "
                       "large: its byte count overflows 64 bits");
  msg = EXPECT_THROW_MSG(
      FormatError, parse(withHeader("{\"a\": " + std::string(40000, '['), "")));
  EXPECT_CONTAINS(msg, "invalid JSON: arrays and objects nested more than 64");
  msg = EXPECT_THROW_MSG(FormatError,
                         parse(withHeader(R"({"__metadata__":{"k":1}})", "")));
  EXPECT_CONTAINS(msg, "__metadata__.k: expected a string");
  msg = EXPECT_THROW_MSG(FormatError,
                         parse(withHeader(R"({"a":{"dtype":"F16"}})", "")));
  EXPECT_CONTAINS(msg, "missing member \"shape\"");
}

TEST(Safetensors, UnknownTensorNamesTheFileAndSomeTensors) {
  uint16_t v = 0;
  SafetensorsFile f = SafetensorsFile::fromBytes(
      encodeSafetensors({{"alpha", "F16", {1}, &v}, {"beta", "F16", {1}, &v}}),
      "ckpt.safetensors");
  std::string msg = EXPECT_THROW_MSG(FormatError, f.info("gamma"));
  EXPECT_CONTAINS(msg, "ckpt.safetensors: no tensor \"gamma\"");
  EXPECT_CONTAINS(msg, "alpha, beta");
}

TEST(Safetensors, WriterRejectsBadArguments) {
  uint16_t v = 0;
  std::string msg;
  msg = EXPECT_THROW_MSG(
      InvalidArgumentError,
      encodeSafetensors({{"a", "F16", {1}, &v}, {"a", "F16", {1}, &v}}));
  EXPECT_CONTAINS(msg, "duplicate tensor name \"a\"");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         encodeSafetensors({{"__metadata__", "F16", {1}, &v}}));
  EXPECT_CONTAINS(msg, "reserved");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         encodeSafetensors({{"a", "F17", {1}, &v}}));
  EXPECT_CONTAINS(msg, "unknown dtype \"F17\"");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         encodeSafetensors({{"a", "F16", {2}, nullptr}}));
  EXPECT_CONTAINS(msg, "null data");
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         encodeSafetensors({{"", "F16", {1}, &v}}));
  EXPECT_CONTAINS(msg, "empty name");
  // A directory under a regular file can be created by no one (root
  // included), unlike a missing directory at the root.
  TempDir dir;
  writeText(dir.file("file"), "");
  std::string target = dir.file("file") + "/dir/x";
  msg = EXPECT_THROW_MSG(Error, writeSafetensors(target, {}));
  EXPECT_CONTAINS(msg, "cannot create " + target + ".tmp");
}

TEST(Safetensors, OpenReportsMissingFiles) {
  std::string msg = EXPECT_THROW_MSG(
      Error, SafetensorsFile::open("/nonexistent/model.safetensors"));
  EXPECT_CONTAINS(msg, "cannot open safetensors file "
                       "/nonexistent/model.safetensors");
}
