//===- Safetensors.h - reading and writing .safetensors files -----*- C++
//-*-===//
//
// The safetensors format (https://github.com/huggingface/safetensors):
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   a JSON object (UTF-8, may be padded with trailing spaces):
//               "__metadata__": {"key": "value", ...}            (optional)
//               "<name>": {"dtype": "F16", "shape": [4096, 2],
//                          "data_offsets": [begin, end]}          (per tensor)
//   rest      the data section; tensor bytes are [begin, end) relative to
//             its start, row-major, little-endian.
//
// The reader follows the reference implementation's checks: the header is at
// most 100 MB, every offset pair lies in the data section and matches
// dtype size * prod(shape), and the tensors cover the data section exactly
// (no holes, no overlaps). It reads only the header when a file is opened and
// each tensor on request, so a multi-gigabyte checkpoint costs only the
// tensors asked for. The writer pads the header with spaces to a multiple of
// 8 bytes (so the data section is 8-byte aligned) and writes through a
// temporary file renamed at the end.
//
// Errors: FormatError (malformed file, unknown tensor: the message names the
// file and the tensor), InvalidArgumentError (bad writer arguments),
// Error (I/O failure, with the OS reason).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_SAFETENSORS_H
#define FUSION_RUNTIME_SAFETENSORS_H

#include "fusion/runtime/DType.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fusion::runtime {

/// Bytes per element of a safetensors dtype ("BOOL", "U8", "I8", "F8_E4M3",
/// "F8_E5M2", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "I64",
/// "U64", "F64"); 0 if the name is unknown.
int64_t safetensorsDTypeSize(std::string_view dtype);

/// "F16" or "BF16".
std::string_view safetensorsDTypeName(DType dtype);

/// One tensor of a file, as its header describes it.
struct TensorInfo {
  std::string name;
  /// Safetensors spelling: "F16", "BF16", "F32", "I32", ...
  std::string dtype;
  std::vector<int64_t> shape;
  /// Byte range [offset, offset + bytes) in the data section.
  uint64_t offset = 0;
  uint64_t bytes = 0;

  /// prod(shape) (1 for a scalar of shape []).
  int64_t numElements() const;
  /// "F16[6144, 4096]".
  std::string describe() const;
};

/// A tensor to write: `data` points at numElements * dtype-size bytes.
struct TensorRef {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// The bytes of a safetensors file holding `tensors` and `metadata`. The
/// header lists the tensors in the given order; their data is laid out by
/// decreasing element size (stable), so each is aligned to its element size.
/// Throws InvalidArgumentError for an empty, duplicate or reserved
/// ("__metadata__") name, an unknown dtype, a negative dimension or a null data
/// pointer of a non-empty tensor.
std::string
encodeSafetensors(const std::vector<TensorRef> &tensors,
                  const std::map<std::string, std::string> &metadata = {});

/// Writes encodeSafetensors(tensors, metadata) to `path` (through
/// `path`.tmp, renamed at the end, so a failed write leaves no partial
/// file). Throws as encodeSafetensors, or Error naming the path on an I/O
/// failure.
void writeSafetensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// A safetensors file opened for reading (header parsed, data read on
/// demand). Cheap to copy (the in-memory bytes, if any, are shared).
class SafetensorsFile {
public:
  /// Opens `path` and parses its header. Throws Error if the file cannot be
  /// opened, FormatError if it is not a valid safetensors file.
  static SafetensorsFile open(const std::string &path);
  /// Parses a file held in memory (`name` is used in messages).
  static SafetensorsFile fromBytes(std::string bytes,
                                   const std::string &name = "<memory>");

  /// The path given to open(), or the name given to fromBytes().
  const std::string &path() const { return path_; }
  /// Tensors in data order (ascending offset).
  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// The tensor called `name`, or null.
  const TensorInfo *find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  /// The tensor called `name`; throws FormatError naming the file (and the
  /// first few tensor names) if there is none.
  const TensorInfo &info(std::string_view name) const;

  /// The raw bytes of tensor `name`.
  std::vector<uint8_t> read(std::string_view name) const;
  /// Copies the raw bytes of `name` to `dst`, which holds `capacity` bytes;
  /// throws InvalidArgumentError if the tensor is larger.
  void readInto(std::string_view name, void *dst, uint64_t capacity) const;

private:
  SafetensorsFile() = default;
  void parseHeader(const std::string &header, uint64_t dataBytes);

  std::string path_;
  /// Offset of the data section in the file: 8 + N.
  uint64_t dataStart_ = 0;
  /// The whole file, for fromBytes(); null for files on disk.
  std::shared_ptr<const std::string> memory_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_SAFETENSORS_H
