//===- JsonUtil.h - checked access to JSON documents (internal) ---*- C++
//-*-===//
//
// A thin layer over nlohmann::json for the runtime's readers (manifest,
// safetensors header, config.json): every access knows the document's name
// and the JSON path it is at, so a malformed document gives a FormatError such
// as
//
//   model.manifest.json: kernels[1].params[3].shape[0]: expected an integer
//   or a name, got true
//
// Not installed; only the runtime's .cpp files include it.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_SRC_JSONUTIL_H
#define FUSION_RUNTIME_SRC_JSONUTIL_H

#include "fusion/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace fusion::runtime {
/// The largest JSON file the runtime reads (manifests, config.json,
/// checkpoint indexes: kilobytes to a few megabytes in practice).
constexpr uint64_t kMaxJsonFileBytes = uint64_t{64} << 20;
} // namespace fusion::runtime

namespace fusion::runtime::jsonutil {

using json = nlohmann::json;

/// The JSON type name of `v` for messages, with a short rendering of scalars.
inline std::string describe(const json &v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::object:
    return "an object";
  case json::value_t::array:
    return "an array";
  case json::value_t::string: {
    std::string s = v.get<std::string>();
    if (s.size() > 40)
      s = s.substr(0, 40) + "...";
    return "the string \"" + s + "\"";
  }
  case json::value_t::boolean:
    return v.get<bool>() ? "true" : "false";
  default:
    return v.dump();
  }
}

/// Arrays and objects nested deeper than this are rejected. The runtime's
/// documents nest at most 5 levels; the bound keeps hostile input from
/// exhausting the stack in code that walks the tree recursively.
constexpr int kMaxNesting = 64;

/// Parses `text`; throws FormatError "<source>: invalid JSON: ..." on a
/// syntax error or when arrays and objects nest more than kMaxNesting deep.
inline json parse(std::string_view text, const std::string &source) {
  auto limitDepth = [&](int depth, json::parse_event_t event, json &) {
    // `depth` counts the containers around the one that starts.
    if ((event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        depth >= kMaxNesting)
      throwFormat(source,
                  ": invalid JSON: arrays and objects nested more "
                  "than ",
                  kMaxNesting, " levels deep");
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limitDepth);
  } catch (const json::exception &e) {
    throwFormat(source, ": invalid JSON: ", e.what());
  }
}

/// A value inside a document together with its name and path.
class Node {
public:
  Node(const json &value, const std::string &source, std::string path = "")
      : value_(&value), source_(&source), path_(std::move(path)) {}

  const json &raw() const { return *value_; }
  const std::string &path() const { return path_; }
  const std::string &source() const { return *source_; }
  /// "<source>: <path>" (or just the source at the root).
  std::string where() const {
    return path_.empty() ? *source_ : *source_ + ": " + path_;
  }

  bool isNull() const { return value_->is_null(); }
  bool isObject() const { return value_->is_object(); }
  bool isArray() const { return value_->is_array(); }
  bool isString() const { return value_->is_string(); }
  bool isInteger() const { return value_->is_number_integer(); }
  bool isNumber() const { return value_->is_number(); }
  bool isBool() const { return value_->is_boolean(); }

  [[noreturn]] void fail(const std::string &what) const {
    throwFormat(where(), ": ", what);
  }

  void expectObject() const {
    if (!isObject())
      fail("expected an object, got " + describe(*value_));
  }
  void expectArray() const {
    if (!isArray())
      fail("expected an array, got " + describe(*value_));
  }

  /// Member `key` of an object; throws if this is not an object or the
  /// member is missing.
  Node at(const std::string &key) const {
    expectObject();
    auto it = value_->find(key);
    if (it == value_->end())
      fail("missing member \"" + key + "\"");
    return Node(*it, *source_, child(key));
  }
  /// Member `key`, or nothing if absent (a null member counts as absent
  /// when `nullIsAbsent`).
  std::optional<Node> find(const std::string &key,
                           bool nullIsAbsent = true) const {
    expectObject();
    auto it = value_->find(key);
    if (it == value_->end() || (nullIsAbsent && it->is_null()))
      return std::nullopt;
    return Node(*it, *source_, child(key));
  }
  bool has(const std::string &key) const {
    return isObject() && value_->contains(key) && !(*value_)[key].is_null();
  }
  /// Element `i` of an array.
  Node at(size_t i) const {
    expectArray();
    if (i >= value_->size())
      fail("index " + std::to_string(i) + " out of range");
    return Node((*value_)[i], *source_, path_ + "[" + std::to_string(i) + "]");
  }
  size_t size() const {
    if (!isArray() && !isObject())
      fail("expected an array or object, got " + describe(*value_));
    return value_->size();
  }

  int64_t asInt() const {
    if (value_->is_number_integer()) {
      if (value_->is_number_unsigned() &&
          value_->get<uint64_t>() >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("integer " + value_->dump() + " is too large");
      return value_->get<int64_t>();
    }
    // 4096.0 is accepted as 4096 (some writers emit floats).
    if (value_->is_number_float()) {
      double d = value_->get<double>();
      if (d == static_cast<double>(static_cast<int64_t>(d)))
        return static_cast<int64_t>(d);
    }
    fail("expected an integer, got " + describe(*value_));
  }
  /// asInt() checked to lie in [lo, hi].
  int64_t asInt(int64_t lo, int64_t hi) const {
    int64_t v = asInt();
    if (v < lo || v > hi)
      fail("value " + std::to_string(v) + " is outside [" + std::to_string(lo) +
           ", " + std::to_string(hi) + "]");
    return v;
  }
  uint64_t asUInt() const {
    if (value_->is_number_unsigned())
      return value_->get<uint64_t>();
    if (value_->is_number_integer() && value_->get<int64_t>() >= 0)
      return static_cast<uint64_t>(value_->get<int64_t>());
    fail("expected a non-negative integer, got " + describe(*value_));
  }
  double asNumber() const {
    if (!value_->is_number())
      fail("expected a number, got " + describe(*value_));
    return value_->get<double>();
  }
  std::string asString() const {
    if (!value_->is_string())
      fail("expected a string, got " + describe(*value_));
    return value_->get<std::string>();
  }
  bool asBool() const {
    if (!value_->is_boolean())
      fail("expected true or false, got " + describe(*value_));
    return value_->get<bool>();
  }

private:
  std::string child(const std::string &key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  const json *value_;
  const std::string *source_;
  std::string path_;
};

} // namespace fusion::runtime::jsonutil

#endif // FUSION_RUNTIME_SRC_JSONUTIL_H
