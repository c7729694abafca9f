//===- Safetensors.cpp - reading and writing .safetensors files -----------===//

#include "fusion/runtime/Safetensors.h"

#include "JsonUtil.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"
#include "fusion/runtime/Manifest.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

namespace fusion::runtime {

using jsonutil::json;
using jsonutil::Node;

namespace {

/// The reference implementation's limit on the header size.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string osError() { return std::strerror(errno); }

/// prod(shape) * elemSize, or -1 on a negative dimension or overflow.
int64_t checkedBytes(const std::vector<int64_t> &shape, int64_t elemSize) {
  int64_t n = elemSize;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return -1;
    n *= d;
  }
  return n;
}

} // namespace

int64_t safetensorsDTypeSize(std::string_view dtype) {
  static const std::pair<std::string_view, int64_t> sizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  for (const auto &[name, size] : sizes)
    if (name == dtype)
      return size;
  return 0;
}

std::string_view safetensorsDTypeName(DType dtype) {
  return dtype == DType::F16 ? "F16" : "BF16";
}

int64_t TensorInfo::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string TensorInfo::describe() const { return dtype + shapeString(shape); }

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

std::string
encodeSafetensors(const std::vector<TensorRef> &tensors,
                  const std::map<std::string, std::string> &metadata) {
  // Keep the header's members in the caller's order (nlohmann's default
  // object sorts keys, which would also be valid, but order helps humans).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto &[k, v] : metadata)
      meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> names;
  std::vector<uint64_t> sizes(tensors.size()), offsets(tensors.size());
  // Data in order of decreasing element size (stable), as the Python
  // library writes it, so that every tensor is aligned to its element size
  // (the data section starts 8-byte aligned).
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return safetensorsDTypeSize(tensors[a].dtype) >
           safetensorsDTypeSize(tensors[b].dtype);
  });
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef &t = tensors[i];
    if (t.name.empty())
      throwInvalidArgument("encodeSafetensors: a tensor has an empty name");
    if (t.name == "__metadata__")
      throwInvalidArgument(
          "encodeSafetensors: \"__metadata__\" is reserved, not a tensor name");
    if (!names.insert(t.name).second)
      throwInvalidArgument("encodeSafetensors: duplicate tensor name \"",
                           t.name, "\"");
    int64_t elem = safetensorsDTypeSize(t.dtype);
    if (elem == 0)
      throwInvalidArgument("encodeSafetensors: tensor \"", t.name,
                           "\": unknown dtype \"", t.dtype, "\"");
    int64_t bytes = checkedBytes(t.shape, elem);
    if (bytes < 0)
      throwInvalidArgument("encodeSafetensors: tensor \"", t.name,
                           "\": invalid shape ", shapeString(t.shape));
    if (bytes > 0 && !t.data)
      throwInvalidArgument("encodeSafetensors: tensor \"", t.name,
                           "\": null data for ", bytes, " bytes");
    sizes[i] = static_cast<uint64_t>(bytes);
  }
  uint64_t offset = 0;
  for (size_t i : order) {
    offsets[i] = offset;
    offset += sizes[i];
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    header[tensors[i].name] = {
        {"dtype", tensors[i].dtype},
        {"shape", tensors[i].shape},
        {"data_offsets", {offsets[i], offsets[i] + sizes[i]}}};
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (size_t i : order)
    if (sizes[i])
      out.append(static_cast<const char *>(tensors[i].data), sizes[i]);
  return out;
}

void writeSafetensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  std::string bytes = encodeSafetensors(tensors, metadata);
  std::string file = regularOutputFile(path, "safetensors output");
  std::string temp = file + ".tmp";
  {
    std::ofstream os(temp, std::ios::binary | std::ios::trunc);
    if (!os)
      throw Error("writeSafetensors: cannot create " + temp + ": " + osError());
    os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    os.close();
    if (!os) {
      std::remove(temp.c_str());
      throw Error("writeSafetensors: cannot write " + temp + ": " + osError());
    }
  }
  if (std::rename(temp.c_str(), file.c_str()) != 0) {
    std::string reason = osError();
    std::remove(temp.c_str());
    throw Error("writeSafetensors: cannot rename " + temp + " to " + file +
                ": " + reason);
  }
}

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

namespace {
uint64_t readLE64(const unsigned char *p) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | p[i];
  return n;
}
} // namespace

SafetensorsFile SafetensorsFile::open(const std::string &path) {
  std::ifstream is(path, std::ios::binary);
  if (!is)
    throw Error("cannot open safetensors file " + path + ": " + osError());
  is.seekg(0, std::ios::end);
  uint64_t fileSize = static_cast<uint64_t>(is.tellg());
  is.seekg(0);
  if (fileSize < 8)
    throwFormat(path, ": not a safetensors file (", fileSize,
                " bytes, less than the 8-byte header length)");
  unsigned char len[8];
  is.read(reinterpret_cast<char *>(len), 8);
  uint64_t n = readLE64(len);
  if (n > kMaxHeaderBytes)
    throwFormat(path, ": not a safetensors file (header length ", n,
                " exceeds the 100 MB limit)");
  if (8 + n > fileSize)
    throwFormat(path, ": truncated safetensors file (header length ", n,
                " but only ", fileSize - 8, " bytes follow)");
  std::string header(n, '\0');
  is.read(header.data(), static_cast<std::streamsize>(n));
  if (!is)
    throw Error("cannot read the header of " + path + ": " + osError());
  SafetensorsFile file;
  file.path_ = path;
  file.dataStart_ = 8 + n;
  file.parseHeader(header, fileSize - 8 - n);
  return file;
}

SafetensorsFile SafetensorsFile::fromBytes(std::string bytes,
                                           const std::string &name) {
  if (bytes.size() < 8)
    throwFormat(name, ": not a safetensors file (", bytes.size(),
                " bytes, less than the 8-byte header length)");
  uint64_t n = readLE64(reinterpret_cast<const unsigned char *>(bytes.data()));
  if (n > kMaxHeaderBytes)
    throwFormat(name, ": not a safetensors file (header length ", n,
                " exceeds the 100 MB limit)");
  if (8 + n > bytes.size())
    throwFormat(name, ": truncated safetensors file (header length ", n,
                " but only ", bytes.size() - 8, " bytes follow)");
  SafetensorsFile file;
  file.path_ = name;
  file.dataStart_ = 8 + n;
  file.parseHeader(bytes.substr(8, n), bytes.size() - 8 - n);
  file.memory_ = std::make_shared<const std::string>(std::move(bytes));
  return file;
}

void SafetensorsFile::parseHeader(const std::string &header,
                                  uint64_t dataBytes) {
  json doc = jsonutil::parse(header, path_ + " (safetensors header)");
  std::string source = path_;
  Node root(doc, source, "");
  if (!root.isObject())
    root.fail("the safetensors header is not a JSON object");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string &name = it.key();
    Node node(it.value(), source, "\"" + name + "\"");
    if (name == "__metadata__") {
      node.expectObject();
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        Node value(m.value(), source, "__metadata__." + m.key());
        metadata_[m.key()] = value.asString();
      }
      continue;
    }
    TensorInfo t;
    t.name = name;
    t.dtype = node.at("dtype").asString();
    int64_t elem = safetensorsDTypeSize(t.dtype);
    if (elem == 0)
      node.at("dtype").fail("unknown safetensors dtype \"" + t.dtype + "\"");
    Node shape = node.at("shape");
    shape.expectArray();
    for (size_t i = 0; i < shape.size(); ++i)
      t.shape.push_back(
          shape.at(i).asInt(0, std::numeric_limits<int64_t>::max()));
    Node offsets = node.at("data_offsets");
    offsets.expectArray();
    if (offsets.size() != 2)
      offsets.fail("expected [begin, end]");
    uint64_t begin = offsets.at(size_t(0)).asUInt();
    uint64_t end = offsets.at(size_t(1)).asUInt();
    if (begin > end || end > dataBytes)
      offsets.fail("invalid range [" + std::to_string(begin) + ", " +
                   std::to_string(end) + ") for a data section of " +
                   std::to_string(dataBytes) + " bytes");
    int64_t bytes = checkedBytes(t.shape, elem);
    if (bytes < 0)
      shape.fail(t.describe() + " is too large: its byte count " +
                 "overflows 64 bits");
    if (static_cast<uint64_t>(bytes) != end - begin)
      offsets.fail(std::to_string(end - begin) + " bytes do not match " +
                   t.describe() + " (" + std::to_string(bytes) + " bytes)");
    t.offset = begin;
    t.bytes = end - begin;
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo &a, const TensorInfo &b) {
              return a.offset != b.offset ? a.offset < b.offset
                                          : a.bytes < b.bytes;
            });
  // The tensors must tile the data section exactly (the reference
  // implementation's "InvalidOffset").
  uint64_t expected = 0;
  for (const TensorInfo &t : tensors_) {
    if (t.offset != expected)
      throwFormat(path_, ": tensor \"", t.name, "\" starts at byte ", t.offset,
                  " of the data section but the previous tensors end at ",
                  expected, t.offset < expected ? " (overlap)" : " (hole)");
    expected = t.offset + t.bytes;
  }
  if (expected != dataBytes)
    throwFormat(path_, ": the tensors cover ", expected, " bytes but the data ",
                "section has ", dataBytes, " bytes");
  for (size_t i = 0; i < tensors_.size(); ++i)
    index_.emplace(tensors_[i].name, i);
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo &SafetensorsFile::info(std::string_view name) const {
  if (const TensorInfo *t = find(name))
    return *t;
  std::string some;
  size_t shown = 0;
  for (const auto &[n, i] : index_) {
    if (shown == 8) {
      some += ", ...";
      break;
    }
    some += (shown++ ? ", " : "") + n;
  }
  throwFormat(path_, ": no tensor \"", name, "\" (", tensors_.size(),
              " tensors", tensors_.empty() ? "" : ": ", some, ")");
}

std::vector<uint8_t> SafetensorsFile::read(std::string_view name) const {
  const TensorInfo &t = info(name);
  std::vector<uint8_t> out(t.bytes);
  readInto(name, out.data(), out.size());
  return out;
}

void SafetensorsFile::readInto(std::string_view name, void *dst,
                               uint64_t capacity) const {
  const TensorInfo &t = info(name);
  if (t.bytes > capacity)
    throwInvalidArgument("SafetensorsFile::readInto: tensor \"", name, "\" (",
                         t.describe(), ", ", t.bytes,
                         " bytes) does not fit in ", capacity, " bytes");
  if (t.bytes == 0)
    return;
  if (memory_) {
    std::memcpy(dst, memory_->data() + dataStart_ + t.offset, t.bytes);
    return;
  }
  std::ifstream is(path_, std::ios::binary);
  if (!is)
    throw Error("cannot open safetensors file " + path_ + ": " + osError());
  is.seekg(static_cast<std::streamoff>(dataStart_ + t.offset));
  is.read(static_cast<char *>(dst), static_cast<std::streamsize>(t.bytes));
  if (!is)
    throw Error("cannot read tensor \"" + std::string(name) + "\" from " +
                path_ + " (file changed or truncated?)");
}

} // namespace fusion::runtime
