//===- Manifest.cpp - the compiler's kernel manifest ----------------------===//

#include "fusion/runtime/Manifest.h"

#include "JsonUtil.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace fusion::runtime {

using jsonutil::json;
using jsonutil::Node;

//===----------------------------------------------------------------------===//
// Small types
//===----------------------------------------------------------------------===//

std::string_view elemTypeName(ElemType type) {
  switch (type) {
  case ElemType::F16:
    return "f16";
  case ElemType::BF16:
    return "bf16";
  case ElemType::F32:
    return "f32";
  case ElemType::I32:
    return "i32";
  }
  return "?";
}

int64_t elemTypeSize(ElemType type) {
  return type == ElemType::F16 || type == ElemType::BF16 ? 2 : 4;
}

std::optional<ElemType> parseElemType(std::string_view name) {
  if (name == "f16")
    return ElemType::F16;
  if (name == "bf16")
    return ElemType::BF16;
  if (name == "f32")
    return ElemType::F32;
  if (name == "i32")
    return ElemType::I32;
  return std::nullopt;
}

std::optional<int64_t> Symbols::lookup(std::string_view name) const {
  if (name == contract::dim::kBatch)
    return batch;
  if (name == contract::dim::kNumSplits)
    return num_splits;
  if (name == contract::dim::kMaxPages)
    return max_pages;
  if (name == contract::dim::kNumPages)
    return num_pages;
  return std::nullopt;
}

int64_t Dim::evaluate(const Symbols &symbols) const {
  if (!isSymbol())
    return value;
  std::optional<int64_t> v = symbols.lookup(symbol);
  if (!v)
    throwInvalidArgument("unknown run-time size \"", symbol, "\"");
  return *v;
}

std::string Dim::str() const {
  return isSymbol() ? symbol : std::to_string(value);
}

std::string shapeString(const std::vector<Dim> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t tensorMapColumns(const std::vector<Dim> &shape) {
  int64_t cols = 1;
  for (size_t d = contract::tensorMapRowDims(shape.size()); d < shape.size();
       ++d)
    cols *= shape[d].value;
  return cols;
}

int64_t numElements(const std::vector<Dim> &shape, const Symbols &symbols) {
  int64_t n = 1;
  for (const Dim &d : shape) {
    int64_t v = d.evaluate(symbols);
    if (v != 0 && n > std::numeric_limits<int64_t>::max() / v)
      throwInvalidArgument("shape ", shapeString(shape),
                           " overflows 64-bit element counts");
    n *= v;
  }
  return n;
}

namespace {
/// `roles` as "\"a\"", "\"a\" or \"b\"", "\"a\", \"b\" or \"c\"", ...
std::string quotedRoles(contract::RoleList roles) {
  std::string s;
  for (size_t i = 0; i < roles.size(); ++i)
    s += std::string(i == 0                  ? ""
                     : i + 1 == roles.size() ? " or "
                                             : ", ") +
         "\"" + std::string(roles[i]) + "\"";
  return s;
}
} // namespace

std::string roleList(ParamKind kind) {
  return quotedRoles(contract::paramRoles(kind));
}

std::string Binding::str() const {
  switch (kind) {
  case Kind::None:
    return "none";
  case Kind::Argument:
    return "argument " + std::to_string(index);
  case Kind::KernelResult:
    return "result " + std::to_string(result) + " of kernel " +
           std::to_string(index) + (reshaped ? " (reshaped)" : "");
  case Kind::OwnResult:
    return "result " + std::to_string(result);
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// ManifestKernel
//===----------------------------------------------------------------------===//

std::array<int64_t, 3> LaunchGeometry::gridFor(const Symbols &symbols) const {
  return {grid[0].evaluate(symbols), grid[1].evaluate(symbols),
          grid[2].evaluate(symbols)};
}

int ManifestKernel::variantFor(int64_t batch) const {
  int chosen = -1;
  for (size_t v = 0; v < variants.size() && variants[v].minBatch <= batch; ++v)
    chosen = static_cast<int>(v);
  return chosen;
}

const LaunchGeometry &ManifestKernel::launchFor(int64_t batch) const {
  int v = variantFor(batch);
  if (v < 0)
    return *this;
  return variants[v];
}

bool ManifestKernel::usesNumSplits() const {
  auto gridUses = [](const LaunchGeometry &g) {
    for (const Dim &d : g.grid)
      if (d.symbol == contract::dim::kNumSplits)
        return true;
    return false;
  };
  if (gridUses(*this))
    return true;
  for (const ManifestVariant &v : variants)
    if (gridUses(v))
      return true;
  for (const ManifestParam &p : params)
    if (p.kind == ParamKind::Scalar && p.role == contract::dim::kNumSplits)
      return true;
  return false;
}

bool ManifestKernel::usesMaxPages() const {
  for (const ManifestParam &p : params)
    if (p.kind == ParamKind::Scalar && p.role == contract::dim::kMaxPages)
      return true;
  return false;
}

int64_t ManifestKernel::maxSplits() const {
  if (!usesNumSplits())
    return 1;
  auto it = scheduleInts.find(std::string(contract::schedule::kMaxSplits));
  return it == scheduleInts.end() ? 1 : it->second;
}

int64_t ManifestKernel::clusterXFor(int64_t batch, int64_t numSplits) const {
  const LaunchGeometry &launch = launchFor(batch);
  if (usesNumSplits())
    return contract::chooseClusterX(launch.clusterSplits(), numSplits);
  auto kSplit =
      launch.scheduleInts.find(std::string(contract::schedule::kKSplit));
  return contract::chooseKSplitClusterX(
      launch.clusterKSplit,
      kSplit == launch.scheduleInts.end() ? 1 : kSplit->second);
}

int64_t LaunchGeometry::clusterSplits() const {
  auto it = scheduleInts.find(std::string(contract::schedule::kClusterSplits));
  return it == scheduleInts.end() ? 0 : it->second;
}

int ManifestKernel::numOutputs() const {
  int n = 0;
  for (const ManifestParam &p : params)
    n += p.kind == ParamKind::Output;
  return n;
}

const ManifestParam *ManifestKernel::output(int r) const {
  for (const ManifestParam &p : params)
    if (p.kind == ParamKind::Output && p.binding.result == r)
      return &p;
  return nullptr;
}

std::string ManifestKernel::label() const {
  return "kernel " + std::to_string(index) + " (" + entry + ")";
}

std::string ManifestKernel::label(int v) const {
  if (v < 0)
    return label();
  return label() + " variant min_batch " +
         std::to_string(variants[v].minBatch) + " (" + variants[v].entry + ")";
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

/// Largest constant dimension (sizes are int32 in the kernels).
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

/// A dimension: an integer in [1, kMaxDim], its decimal string, or a known
/// size name (any of `allowed`).
Dim parseDim(const Node &n, const std::vector<std::string_view> &allowed) {
  Dim d;
  if (n.isInteger()) {
    d.value = n.asInt(1, kMaxDim);
    return d;
  }
  if (!n.isString())
    n.fail("expected an integer or a size name, got " +
           jsonutil::describe(n.raw()));
  std::string s = n.asString();
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
    if (s.size() > 10 || std::stoll(s) < 1 || std::stoll(s) > kMaxDim)
      n.fail("dimension " + s + " is outside [1, " + std::to_string(kMaxDim) +
             "]");
    d.value = std::stoll(s);
    return d;
  }
  for (std::string_view a : allowed)
    if (s == a) {
      d.symbol = s;
      return d;
    }
  std::string names;
  for (size_t i = 0; i < allowed.size(); ++i)
    names += std::string(i ? ", " : "") + "\"" + std::string(allowed[i]) + "\"";
  n.fail("unknown size \"" + s + "\" (expected an integer or one of " + names +
         ")");
}

ElemType parseDType(const Node &n) {
  std::string s = n.asString();
  std::optional<ElemType> t = parseElemType(s);
  if (!t)
    n.fail("unsupported dtype \"" + s + "\" (expected f16, bf16, f32 or i32)");
  return *t;
}

/// The "shape" of `n` (elements of dtype `dtype`): its constant dimensions
/// hold at most kMaxConstantBytes (each is below 2^31, so no product
/// overflows before the check).
std::vector<Dim> parseShape(const Node &n, ElemType dtype) {
  n.expectArray();
  std::vector<Dim> shape;
  int64_t bytes = elemTypeSize(dtype);
  for (size_t i = 0; i < n.size(); ++i) {
    shape.push_back(parseDim(
        n.at(i), {contract::kDimNames.begin(), contract::kDimNames.end()}));
    if (!shape.back().isSymbol()) {
      if (shape.back().value > kMaxConstantBytes / bytes)
        n.fail("the constant dimensions of " + shapeString(shape) + "... of " +
               std::string(elemTypeName(dtype)) +
               " alone hold more than 2^47 bytes (128 TiB, more than any "
               "GPU)");
      bytes *= shape.back().value;
    }
  }
  return shape;
}

Binding parseSource(const Node &n) {
  n.expectObject();
  Binding b;
  if (auto a = n.find("argument")) {
    b.kind = Binding::Kind::Argument;
    b.index = static_cast<int>(a->asInt(0, std::numeric_limits<int>::max()));
  } else if (auto k = n.find("kernel")) {
    b.kind = Binding::Kind::KernelResult;
    b.index = static_cast<int>(k->asInt(0, std::numeric_limits<int>::max()));
    b.result = static_cast<int>(
        n.at("result").asInt(0, std::numeric_limits<int>::max()));
  } else if (auto r = n.find("result")) {
    b.kind = Binding::Kind::OwnResult;
    b.result = static_cast<int>(r->asInt(0, std::numeric_limits<int>::max()));
  } else if (n.has("unknown")) {
    n.fail("the compiler could not trace this value to a function argument "
           "or a kernel result");
  } else {
    n.fail("expected {\"argument\": i}, {\"kernel\": k, \"result\": r} or "
           "{\"result\": r}");
  }
  if (auto r = n.find("reshaped"))
    b.reshaped = r->asBool();
  return b;
}

/// Largest TMA box dimension (elements): cuTensorMapEncodeTiled's bound.
constexpr int64_t kMaxTensorMapBox = 256;

/// Whether `shape` is one a tensor map reads (contract::TensorMapSpec): a
/// 2-D [rows, cols], rows a constant or "batch" and cols a constant, or a
/// KV cache ["num_pages", P, Hkv, D] of constants after num_pages.
bool isTensorMapShape(const std::vector<Dim> &shape) {
  if (shape.size() == 2)
    return !shape[1].isSymbol() &&
           (!shape[0].isSymbol() || shape[0].symbol == contract::dim::kBatch);
  if (shape.size() != 4 || shape[0].symbol != contract::dim::kNumPages)
    return false;
  return std::none_of(shape.begin() + 1, shape.end(),
                      [](const Dim &d) { return d.isSymbol(); });
}

/// The "tensor_map" object `n` of a tensor_map parameter of `dtype` and
/// `shape` (its "of" and role are checked against the kernel by
/// checkTensorMapOf): a box of [1..256] x [1..256] elements whose row is the
/// swizzle span (box_cols * element bytes == swizzle_bytes == 128), over an
/// f16/bf16 shape isTensorMapShape accepts, whose 2-D view's row bytes are
/// a multiple of 16 (TMA's global stride rule).
contract::TensorMapSpec parseTensorMap(const Node &n, ElemType dtype,
                                       const std::vector<Dim> &shape) {
  n.expectObject();
  const int64_t elem = elemTypeSize(dtype);
  if (dtype != ElemType::F16 && dtype != ElemType::BF16)
    n.fail("tensor maps describe f16 or bf16 tensors, not " +
           std::string(elemTypeName(dtype)));
  if (!isTensorMapShape(shape))
    n.fail("tensor maps describe a 2-D [rows, cols] tensor, rows a constant "
           "or \"batch\" and cols a constant, or a KV cache [\"num_pages\", "
           "P, Hkv, D] of constants, not " +
           shapeString(shape));
  const int64_t cols = tensorMapColumns(shape);
  if (cols * elem % 16 != 0)
    n.fail("rows of " + shapeString(shape) + " " +
           std::string(elemTypeName(dtype)) + " are " +
           std::to_string(cols * elem) +
           " bytes, not a multiple of 16 (TMA's global stride rule)");
  contract::TensorMapSpec spec;
  spec.of = n.at("of").asInt(0, std::numeric_limits<int>::max());
  Node box = n.at("box");
  box.expectArray();
  if (box.size() != 2)
    box.fail("expected [box_rows, box_cols], got " +
             std::to_string(box.size()) + " values");
  spec.boxRows = box.at(0).asInt(1, kMaxTensorMapBox);
  spec.boxCols = box.at(1).asInt(1, kMaxTensorMapBox);
  Node swizzle = n.at("swizzle_bytes");
  spec.swizzleBytes = swizzle.asInt();
  if (spec.swizzleBytes != 128)
    swizzle.fail("swizzle_bytes " + std::to_string(spec.swizzleBytes) +
                 " (the runtime encodes 128-byte swizzled maps only)");
  if (spec.boxCols * elem != spec.swizzleBytes)
    box.fail("box_cols " + std::to_string(spec.boxCols) + " x " +
             std::to_string(elem) + " bytes (" +
             std::string(elemTypeName(dtype)) + ") is not the " +
             std::to_string(spec.swizzleBytes) + "-byte swizzle span");
  return spec;
}

ManifestParam parseParam(const Node &n, size_t position) {
  ManifestParam p;
  p.index = static_cast<int>(position);
  if (auto i = n.find("index"))
    if (i->asInt() != static_cast<int64_t>(position))
      i->fail("index " + std::to_string(i->asInt()) + " at position " +
              std::to_string(position));
  std::string kind = n.at("kind").asString();
  if (std::optional<ParamKind> k = contract::parseParamKind(kind))
    p.kind = *k;
  else
    n.at("kind").fail("unknown parameter kind \"" + kind +
                      "\" (expected input, output, workspace, tensor_map "
                      "or scalar)");
  p.role = n.at("role").asString();
  if (!contract::paramRoles(p.kind).contains(p.role))
    n.at("role").fail(
        p.kind == ParamKind::Scalar
            ? "unknown scalar \"" + p.role +
                  "\" (the runtime supplies batch, max_pages and num_splits)"
            : "unknown role \"" + p.role + "\" for an " + kind +
                  " parameter (expected " + roleList(p.kind) + ")");
  p.dtype = parseDType(n.at("dtype"));
  if (p.kind == ParamKind::Scalar) {
    if (p.dtype != ElemType::I32)
      n.at("dtype").fail("scalar parameters are i32");
    if (n.has("shape"))
      n.at("shape").fail("scalar parameters have no shape");
  } else {
    p.shape = parseShape(n.at("shape"), p.dtype);
  }
  if (auto z = n.find("zero_init")) {
    p.zeroInit = z->asBool();
    if (p.kind != ParamKind::Workspace)
      z->fail("only workspaces are zero-initialised by the runtime");
  }
  // Workspaces are sized per batch row (docs/abi.md section 3.3).
  if (p.kind == ParamKind::Workspace &&
      (p.shape.empty() || p.shape[0].symbol != contract::dim::kBatch))
    n.at("shape").fail("workspace shape " + shapeString(p.shape) +
                       " does not start with the batch dimension \"batch\"");
  if (auto tm = n.find("tensor_map")) {
    if (p.kind != ParamKind::TensorMap)
      tm->fail("only tensor_map parameters describe a tensor map");
    p.tensorMap = parseTensorMap(*tm, p.dtype, p.shape);
  } else if (p.kind == ParamKind::TensorMap) {
    n.fail("tensor_map parameter without its \"tensor_map\" object");
  }
  if (auto b = n.find("binding"))
    p.binding = parseSource(*b);
  return p;
}

/// Adds the members of the attribute object `n` to `op` under `prefix`.
void flattenAttributes(const Node &n, const std::string &prefix,
                       ManifestOp &op) {
  n.expectObject();
  for (auto it = n.raw().begin(); it != n.raw().end(); ++it) {
    std::string key = prefix + it.key();
    if (it->is_number())
      op.numbers[key] = it->get<double>();
    else if (it->is_boolean())
      op.flags[key] = it->get<bool>();
    else if (it->is_string())
      op.strings[key] = it->get<std::string>();
    else if (it->is_object())
      flattenAttributes(Node(*it, n.source(), n.path() + "." + it.key()),
                        key + ".", op);
  }
}

/// One attribute of an op that the runtime reads (FrontHalfSignature).
struct AttrRule {
  const char *key;
  enum Type { Number, Integer, Bool, String } type;
  bool required;
  /// Numbers: the value must be > `min` (or >= with `minInclusive`);
  /// integers: >= 1.
  double min = 0;
  bool minInclusive = false;
};

/// The attributes the runtime reads, by op ("scaling" is rope's optional
/// llama3 scaling object).
const std::map<std::string, std::vector<AttrRule>> &opAttributeRules() {
  using T = AttrRule;
  static const std::map<std::string, std::vector<AttrRule>> rules = {
      {"rmsnorm",
       {{"epsilon", T::Number, true, 0, true},
        {"residual", T::Bool, true},
        {"unit_offset", T::Bool, false}}},
      {"layernorm",
       {{"epsilon", T::Number, true, 0, true},
        {"unit_offset", T::Bool, false}}},
      {"qkv_proj",
       {{"num_heads", T::Integer, true},
        {"num_kv_heads", T::Integer, true},
        {"head_dim", T::Integer, true},
        {"bias", T::Bool, true}}},
      {"rope",
       {{"pairing", T::String, true},
        {"theta", T::Number, true},
        {"rotary_dim", T::Integer, true}}},
      {"scaling",
       {{"type", T::String, true},
        {"factor", T::Number, true},
        {"low_freq_factor", T::Number, true},
        {"high_freq_factor", T::Number, true},
        {"original_max_position", T::Integer, true}}},
      {"decode_attention", {{"scale", T::Number, true}}},
  };
  return rules;
}

/// Checks the attributes `attrs` of an op against `rules`.
void checkAttributes(const Node &attrs, const std::vector<AttrRule> &rules,
                     const std::string &op) {
  for (const AttrRule &r : rules) {
    std::optional<Node> v = attrs.find(r.key);
    if (!v) {
      if (r.required)
        attrs.fail("missing attribute \"" + std::string(r.key) + "\" of " + op +
                   " (required)");
      continue;
    }
    switch (r.type) {
    case AttrRule::Number: {
      double d = v->asNumber();
      if (!std::isfinite(d) || (r.minInclusive ? d < r.min : d <= r.min))
        v->fail("expected a finite number " +
                std::string(r.minInclusive ? ">= " : "> ") +
                std::to_string(static_cast<int>(r.min)) + ", got " +
                jsonutil::describe(v->raw()));
      break;
    }
    case AttrRule::Integer:
      v->asInt(1, kMaxDim);
      break;
    case AttrRule::Bool:
      v->asBool();
      break;
    case AttrRule::String:
      v->asString();
      break;
    }
  }
}

/// One entry of a kernel's "ops": its name and attributes, those the
/// runtime reads checked (opAttributeRules), nested objects flattened.
ManifestOp parseOp(const Node &on) {
  ManifestOp op;
  op.name = on.at("op").asString();
  std::optional<Node> attrs = on.find("attributes");
  auto rules = opAttributeRules().find(op.name);
  if (rules != opAttributeRules().end()) {
    if (!attrs)
      on.fail("missing member \"attributes\" of " + op.name + " (required)");
    checkAttributes(*attrs, rules->second, op.name);
    if (op.name == "rope")
      if (auto scaling = attrs->find("scaling")) {
        scaling->expectObject();
        checkAttributes(*scaling, opAttributeRules().at("scaling"),
                        "rope scaling");
        if (!(scaling->at("high_freq_factor").asNumber() >
              scaling->at("low_freq_factor").asNumber()))
          scaling->at("high_freq_factor")
              .fail("must be greater than low_freq_factor");
      }
  }
  if (attrs)
    flattenAttributes(*attrs, "", op);
  return op;
}

/// The launch members of `n` (a kernel or one of its variants): entry, grid,
/// block, dynamic_shared_bytes, static_shared_bytes, schedule.
/// Checks a launch `g` (node `n`) whose schedule sets cluster_k_split: a
/// projection_gemm schedule whose k_split (contract::isValidClusterKSplit)
/// divides a constant grid [x, 1, 1], and dynamic shared memory that holds
/// the exchange (contract::clusterExchangeBytes of its tile_tokens and
/// tile_rows).
void checkClusterKSplit(const Node &n, const LaunchGeometry &g) {
  if (!g.clusterKSplit)
    return;
  auto kind = g.scheduleStrings.find("kind");
  auto integer = [&](std::string_view key) -> int64_t {
    auto it = g.scheduleInts.find(std::string(key));
    return it == g.scheduleInts.end() ? 0 : it->second;
  };
  const int64_t kSplit = integer(contract::schedule::kKSplit);
  if (kind == g.scheduleStrings.end() || kind->second != "projection_gemm" ||
      !contract::isValidClusterKSplit(kSplit))
    n.at("schedule")
        .fail(
            "cluster_k_split needs a projection_gemm schedule with k_split in "
            "[2, " +
            std::to_string(contract::kMaxClusterSplits) + "]");
  if (g.grid[0].isSymbol() || g.grid[0].value % kSplit != 0 ||
      !(g.grid[1] == Dim{1, ""}) || !(g.grid[2] == Dim{1, ""}))
    n.at("grid").fail("a launch with cluster_k_split needs a constant grid "
                      "[x, 1, 1] with x a multiple of k_split (" +
                      std::to_string(kSplit) + ")");
  const int64_t exchange = contract::clusterExchangeBytes(
      integer("tile_tokens"), integer("tile_rows"));
  if (g.dynamicSharedBytes < exchange)
    n.at("schedule")
        .fail("cluster_k_split needs " + std::to_string(exchange) +
              " bytes of dynamic shared memory for its exchange, "
              "got " +
              std::to_string(g.dynamicSharedBytes));
}

void parseLaunch(const Node &n, LaunchGeometry &g) {
  g.entry = n.at("entry").asString();
  if (g.entry.empty())
    n.at("entry").fail("empty entry name");
  // docs/abi.md section 1: grid [x, y, z], block [threads, 1, 1].
  Node grid = n.at("grid");
  grid.expectArray();
  if (grid.size() != 3)
    grid.fail("expected 3 dimensions [x, y, z], got " +
              std::to_string(grid.size()));
  for (size_t i = 0; i < 3; ++i) {
    g.grid[i] = parseDim(grid.at(i),
                         {contract::dim::kBatch, contract::dim::kNumSplits});
    const int64_t limit = contract::kMaxGridDims[i];
    if (!g.grid[i].isSymbol() && g.grid[i].value > limit)
      grid.at(i).fail("grid dimension " + std::to_string(g.grid[i].value) +
                      " is outside the CUDA limit [1, " +
                      std::to_string(limit) + "]");
  }
  Node block = n.at("block");
  block.expectArray();
  if (block.size() != 3)
    block.fail("expected 3 dimensions [threads, 1, 1], got " +
               std::to_string(block.size()));
  g.block[0] = block.at(0).asInt(1, contract::kMaxThreadsPerBlock);
  for (size_t i = 1; i < 3; ++i)
    if ((g.block[i] = block.at(i).asInt()) != 1)
      block.at(i).fail("thread blocks are 1-D ([threads, 1, 1]), got " +
                       std::to_string(g.block[i]));
  if (auto s = n.find("static_shared_bytes"))
    g.staticSharedBytes = s->asInt(0, contract::kMaxStaticSharedBytes);
  if (auto s = n.find("dynamic_shared_bytes")) {
    g.dynamicSharedBytes = s->asInt(0, std::numeric_limits<int64_t>::max());
    if (g.dynamicSharedBytes >
        contract::kMaxSharedBytesPerBlock - g.staticSharedBytes)
      s->fail(std::to_string(g.dynamicSharedBytes) +
              " bytes of dynamic shared memory plus " +
              std::to_string(g.staticSharedBytes) + " static exceed the " +
              std::to_string(contract::kMaxSharedBytesPerBlock) +
              " bytes (227 KiB, sm_90) a thread block can have");
  }
  if (auto s = n.find("schedule")) {
    s->expectObject();
    g.scheduleJson = s->raw().dump();
    for (auto it = s->raw().begin(); it != s->raw().end(); ++it) {
      if (it->is_number_integer())
        g.scheduleInts[it.key()] = it->get<int64_t>();
      else if (it->is_string())
        g.scheduleStrings[it.key()] = it->get<std::string>();
    }
    if (auto c = s->find(std::string(contract::schedule::kClusterKSplit)))
      g.clusterKSplit = c->asBool();
  }
  checkClusterKSplit(n, g);
}

/// The parameter of `k` with `role`, or null.
const ManifestParam *paramWithRole(const ManifestKernel &k,
                                   std::string_view role) {
  for (const ManifestParam &p : k.params)
    if (p.role == role)
      return &p;
  return nullptr;
}

/// Checks the schedule's cluster_splits of a launch `g` (node `n`) of a
/// split-KV attention kernel: 0 (or absent), or in [2,
/// contract::kMaxClusterSplits] with grid x = num_splits (a cluster holds
/// the splits of one sequence and head).
void checkClusterSplits(const LaunchGeometry &g, const Node &n) {
  const int64_t c = g.clusterSplits();
  if (!contract::isValidClusterSplits(c))
    n.at("schedule")
        .fail("cluster_splits must be 0 or in [2, " +
              std::to_string(contract::kMaxClusterSplits) + "], got " +
              std::to_string(c));
  if (c > 0 && g.grid[0].symbol != contract::dim::kNumSplits)
    n.at("grid").fail("a launch with cluster_splits needs grid x = "
                      "num_splits, got " +
                      g.grid[0].str());
}

/// Checks what a split-KV attention kernel `k` (node `n`) indexes with
/// constants the manifest must state consistently: its grid is
/// [num_splits, num_kv_heads * head_blocks, batch], its workspaces are
/// partial_out [batch, Hq, max_splits, D], partial_stats
/// [batch, Hq, max_splits, 2] and split_counters [batch, grid y] (zero
/// before the first launch), and its chunking parameters are positive.
void checkSplitKV(const ManifestKernel &k, const Node &n) {
  const ManifestParam *query = paramWithRole(k, contract::role::kQuery);
  const ManifestParam *cache = paramWithRole(k, contract::role::kKeyCache);
  if (!query || query->shape.size() != 3 || !cache || cache->shape.size() != 4)
    n.fail("a split-KV attention kernel needs a query [batch, Hq, D] and a "
           "key_cache [num_pages, P, Hkv, D] parameter");
  auto scheduleInt = [&](std::string_view key) {
    auto it = k.scheduleInts.find(std::string(key));
    if (it == k.scheduleInts.end() || it->second < 1)
      n.at("schedule")
          .fail("split-KV attention needs a positive integer \"" +
                std::string(key) + "\"");
    return it->second;
  };
  for (std::string_view key :
       {contract::schedule::kTargetCtas, contract::schedule::kMinChunkTokens,
        std::string_view("chunk_multiple")})
    scheduleInt(key);
  const Dim batch{0, std::string(contract::dim::kBatch)};
  const Dim splits{k.maxSplits(), ""};
  const Dim gridY{cache->shape[2].value * scheduleInt("head_blocks"), ""};
  const std::vector<std::pair<std::string_view, std::vector<Dim>>> expected = {
      {contract::role::kPartialOut,
       {batch, query->shape[1], splits, query->shape[2]}},
      {contract::role::kPartialStats,
       {batch, query->shape[1], splits, Dim{2, ""}}},
      {contract::role::kSplitCounters, {batch, gridY}}};
  for (const auto &[role, shape] : expected) {
    const ManifestParam *p = paramWithRole(k, role);
    if (!p || p->shape != shape || p->kind != ParamKind::Workspace)
      n.at("params").fail("split-KV attention needs a workspace \"" +
                          std::string(role) + "\" of shape " +
                          shapeString(shape));
  }
  if (!paramWithRole(k, contract::role::kSplitCounters)->zeroInit)
    n.at("params").fail("split_counters must be zero_init (the kernel "
                        "counts arrivals in it and leaves it zero)");
  const LaunchGeometry &g = k;
  if (g.grid[0].symbol != contract::dim::kNumSplits || !(g.grid[1] == gridY) ||
      g.grid[2].symbol != contract::dim::kBatch)
    n.at("grid").fail("split-KV attention runs on a grid [num_splits, " +
                      std::to_string(gridY.value) +
                      " (num_kv_heads * head_blocks), batch]");
  checkClusterSplits(k, n);
  for (size_t i = 0; i < k.variants.size(); ++i)
    checkClusterSplits(k.variants[i], n.at("variants").at(i));
}

/// The kernel's `variants` (n["variants"], if any), in strictly ascending
/// min_batch >= 2.
void parseVariants(const Node &n, ManifestKernel &k) {
  auto variants = n.find("variants");
  if (!variants)
    return;
  variants->expectArray();
  for (size_t i = 0; i < variants->size(); ++i) {
    Node vn = variants->at(i);
    vn.expectObject();
    ManifestVariant v;
    Node minBatch = vn.at("min_batch");
    v.minBatch = minBatch.asInt(std::numeric_limits<int64_t>::min(),
                                std::numeric_limits<int32_t>::max());
    if (v.minBatch < 2)
      minBatch.fail("min_batch " + std::to_string(v.minBatch) +
                    " is below 2 (a batch of 1 launches the kernel's own "
                    "entry)");
    if (!k.variants.empty() && v.minBatch <= k.variants.back().minBatch)
      minBatch.fail("min_batch " + std::to_string(v.minBatch) +
                    " after min_batch " +
                    std::to_string(k.variants.back().minBatch) +
                    " (variants are in strictly ascending min_batch)");
    parseLaunch(vn, v);
    k.variants.push_back(std::move(v));
  }
}

/// Checks the binding of parameter `p` (at `pn`) for its kind: inputs are
/// bound to an argument or an earlier kernel's result, outputs to the
/// kernel's own results in order (`outputs` counts them), workspaces and
/// scalars to nothing.
void checkParamBinding(const Node &pn, ManifestParam &p, int &outputs) {
  switch (p.kind) {
  case ParamKind::Input:
    if (p.binding.kind != Binding::Kind::Argument &&
        p.binding.kind != Binding::Kind::KernelResult)
      pn.fail("input \"" + p.role +
              "\" has no binding to a function argument or an earlier "
              "kernel's result");
    break;
  case ParamKind::Output:
    if (p.binding.kind == Binding::Kind::None) {
      p.binding.kind = Binding::Kind::OwnResult;
      p.binding.result = outputs;
    }
    if (p.binding.kind != Binding::Kind::OwnResult ||
        p.binding.result != outputs)
      pn.at("binding").fail("output parameter should be result " +
                            std::to_string(outputs) + " of its kernel");
    ++outputs;
    break;
  case ParamKind::Workspace:
  case ParamKind::TensorMap:
  case ParamKind::Scalar:
    if (p.binding.kind != Binding::Kind::None)
      pn.at("binding").fail(
          "workspaces, tensor maps and scalars have no binding");
    break;
  }
}

/// Checks that tensor map `p` (at `pn`) of kernel `k` describes an input of
/// `k` whose role its own role names (contract::tensorMapTargetRoles:
/// weight_map a weight or qkv_weight, input_map the input, residual_map the
/// residual, key_cache_map / value_cache_map the cache) and has the map's
/// dtype and shape.
void checkTensorMapOf(const Node &pn, const ManifestKernel &k,
                      const ManifestParam &p) {
  Node of = pn.at("tensor_map").at("of");
  const int64_t i = p.tensorMap->of;
  if (i >= static_cast<int64_t>(k.params.size()) ||
      k.params[i].kind != ParamKind::Input)
    of.fail("tensor map of " + k.label() + " describes parameter " +
            std::to_string(i) + ", which is not an input of the kernel");
  const ManifestParam &target = k.params[i];
  if (!contract::tensorMapTargetRoles(p.role).contains(target.role)) {
    std::string pairs;
    for (std::string_view map : contract::kTensorMapRoles)
      pairs += std::string(pairs.empty() ? "" : "; ") + std::string(map) +
               ": " + quotedRoles(contract::tensorMapTargetRoles(map));
    of.fail("tensor map \"" + p.role + "\" of " + k.label() +
            " describes input " + std::to_string(i) + " \"" + target.role +
            "\"; each map role describes inputs of its roles (" + pairs + ")");
  }
  if (target.dtype != p.dtype || !(target.shape == p.shape))
    of.fail("tensor map \"" + p.role + "\" of " + k.label() + " is " +
            std::string(elemTypeName(p.dtype)) + shapeString(p.shape) +
            " but input " + std::to_string(i) + " \"" + target.role + "\" is " +
            std::string(elemTypeName(target.dtype)) +
            shapeString(target.shape));
}

/// The kernel's `params`, in ABI order, each bound as its kind requires,
/// with no scalar twice.
void parseParams(const Node &n, ManifestKernel &k) {
  Node params = n.at("params");
  params.expectArray();
  int outputs = 0;
  ParamKind last = ParamKind::Input;
  for (size_t i = 0; i < params.size(); ++i) {
    Node pn = params.at(i);
    ManifestParam p = parseParam(pn, i);
    if (static_cast<int>(p.kind) < static_cast<int>(last))
      pn.at("kind").fail(
          "parameter of kind " + std::string(paramKindName(p.kind)) +
          " after one of kind " + std::string(paramKindName(last)) +
          " (the ABI order is inputs, outputs, workspaces, tensor maps, "
          "scalars)");
    last = p.kind;
    checkParamBinding(pn, p, outputs);
    k.params.push_back(std::move(p));
  }
  for (const ManifestParam &p : k.params)
    if (p.tensorMap)
      checkTensorMapOf(params.at(static_cast<size_t>(p.index)), k, p);
  std::set<std::string> scalars;
  for (const ManifestParam &p : k.params)
    if (p.kind == ParamKind::Scalar && !scalars.insert(p.role).second)
      params.fail("scalar \"" + p.role + "\" appears twice");
}

/// Checks that the kernel's and its variants' entries are distinct.
void checkDistinctEntries(const Node &n, const ManifestKernel &k) {
  std::set<std::string> entries{k.entry};
  for (size_t v = 0; v < k.variants.size(); ++v)
    if (!entries.insert(k.variants[v].entry).second)
      n.at("variants")
          .at(v)
          .at("entry")
          .fail("variant entry \"" + k.variants[v].entry +
                "\" is the kernel's or another variant's: a variant is "
                "another PTX entry");
}

ManifestKernel parseKernel(const Node &n, size_t position) {
  n.expectObject();
  ManifestKernel k;
  k.index = static_cast<int>(position);
  if (auto i = n.find("index"))
    if (i->asInt() != static_cast<int64_t>(position))
      i->fail("kernel index " + std::to_string(i->asInt()) + " at position " +
              std::to_string(position));
  if (auto f = n.find("function"))
    k.function = f->asString();
  parseLaunch(n, k);
  k.name = k.entry;
  if (auto nm = n.find("name"))
    k.name = nm->asString();
  parseVariants(n, k);
  if (auto pdl = n.find("programmatic_dependent_launch"))
    k.programmaticDependentLaunch = pdl->asBool();
  if (auto ops = n.find("ops")) {
    ops->expectArray();
    for (size_t i = 0; i < ops->size(); ++i)
      k.ops.push_back(parseOp(ops->at(i)));
  }
  parseParams(n, k);
  if (k.usesNumSplits()) {
    auto it = k.scheduleInts.find(std::string(contract::schedule::kMaxSplits));
    if (it == k.scheduleInts.end() || it->second < 1 || it->second > kMaxDim)
      n.fail("the kernel uses num_splits but its schedule has no "
             "max_splits in [1, 2147483647] (the workspace bound; num_splits "
             "is an i32 scalar)");
    checkSplitKV(k, n);
  }
  checkDistinctEntries(n, k);
  return k;
}

/// `n` if it has an "index" member equal to `position` (or none); `what`
/// names the list in the message.
void checkIndex(const Node &n, size_t position, const char *what) {
  if (auto idx = n.find("index"))
    if (idx->asInt() != static_cast<int64_t>(position))
      idx->fail(std::string(what) + " index " + std::to_string(idx->asInt()) +
                " at position " + std::to_string(position));
}

ManifestArgument parseArgument(const Node &an, size_t position) {
  ManifestArgument arg;
  arg.index = static_cast<int>(position);
  checkIndex(an, position, "argument");
  arg.name = "arg" + std::to_string(position);
  if (auto nm = an.find("name"))
    arg.name = nm->asString();
  Node kind = an.at("kind");
  arg.kind = kind.asString();
  if (arg.kind != contract::argument::kTensor &&
      arg.kind != contract::argument::kBuffer)
    kind.fail("unknown argument kind \"" + arg.kind +
              "\" (expected \"tensor\" or \"buffer\")");
  Node role = an.at("role");
  arg.role = role.asString();
  if (arg.role != contract::role::kUnused &&
      !contract::paramRoles(ParamKind::Input).contains(arg.role))
    role.fail("unknown argument role \"" + arg.role + "\" (expected " +
              roleList(ParamKind::Input) + " or \"" +
              std::string(contract::role::kUnused) + "\")");
  arg.dtype = parseDType(an.at("dtype"));
  arg.shape = parseShape(an.at("shape"), arg.dtype);
  return arg;
}

ManifestFunction parseFunction(const Node &fn) {
  ManifestFunction f;
  f.name = fn.at("name").asString();
  Node args = fn.at("arguments");
  args.expectArray();
  std::set<std::string> argNames;
  for (size_t a = 0; a < args.size(); ++a) {
    f.arguments.push_back(parseArgument(args.at(a), a));
    if (!argNames.insert(f.arguments.back().name).second)
      args.at(a).at("name").fail("duplicate argument name \"" +
                                 f.arguments.back().name + "\"");
  }
  Node ks = fn.at("kernels");
  ks.expectArray();
  for (size_t k = 0; k < ks.size(); ++k)
    f.kernels.push_back(
        static_cast<int>(ks.at(k).asInt(0, std::numeric_limits<int>::max())));
  if (auto rs = fn.find("results")) {
    rs->expectArray();
    for (size_t r = 0; r < rs->size(); ++r) {
      Node rn = rs->at(r);
      checkIndex(rn, r, "result");
      ManifestResult res;
      res.index = static_cast<int>(r);
      res.dtype = parseDType(rn.at("dtype"));
      res.shape = parseShape(rn.at("shape"), res.dtype);
      res.source = parseSource(rn.at("source"));
      f.results.push_back(std::move(res));
    }
  }
  return f;
}

/// Element counts of two shapes agree for a few assignments of the sizes
/// (a symbolic test of "same number of elements").
bool sameElementCount(const std::vector<Dim> &a, const std::vector<Dim> &b) {
  const Symbols samples[] = {{3, 2, 5, 7}, {11, 4, 13, 17}};
  for (const Symbols &s : samples)
    if (numElements(a, s) != numElements(b, s))
      return false;
  return true;
}

/// The source of input `p` of kernel `k` (launch position `i` of `f`):
/// checks that it is a real argument (whose role, if given, is p's) or a
/// A value of `dtype` and `shape` (node `n`) bound to `source`, which has
/// `srcType` and `srcShape`: the same dtype and element count (a reshape
/// may change the shape).
void checkLikeSource(const Node &n, ElemType dtype,
                     const std::vector<Dim> &shape, const Binding &source,
                     ElemType srcType, const std::vector<Dim> &srcShape) {
  if (srcType != dtype)
    n.fail("dtype " + std::string(elemTypeName(dtype)) + " but its source (" +
           source.str() + ") is " + std::string(elemTypeName(srcType)));
  if (!sameElementCount(srcShape, shape))
    n.fail("shape " + shapeString(shape) + " but its source (" + source.str() +
           ") has shape " + shapeString(srcShape));
}

/// result of an earlier kernel of `f`, with p's dtype and element count.
void checkInput(const Manifest &m, const ManifestFunction &f,
                const std::vector<int> &position, size_t i,
                const ManifestParam &p, const Node &pn) {
  const std::vector<Dim> *srcShape = nullptr;
  ElemType srcType{};
  if (p.binding.kind == Binding::Kind::Argument) {
    if (p.binding.index >= static_cast<int>(f.arguments.size()))
      pn.at("binding").fail("function \"" + f.name + "\" has only " +
                            std::to_string(f.arguments.size()) + " arguments");
    const ManifestArgument &arg = f.arguments[p.binding.index];
    if (!arg.role.empty() && arg.role != p.role)
      pn.at("role").fail("role \"" + p.role + "\" but its source, argument " +
                         std::to_string(arg.index) + " (\"" + arg.name +
                         "\"), has role \"" + arg.role + "\"");
    srcShape = &arg.shape;
    srcType = arg.dtype;
  } else {
    int src = p.binding.index;
    if (src >= static_cast<int>(m.kernels.size()) || position[src] < 0 ||
        position[src] >= static_cast<int>(i))
      pn.at("binding").fail("kernel " + std::to_string(src) +
                            " is not an earlier kernel of \"" + f.name + "\"");
    const ManifestParam *out = m.kernels[src].output(p.binding.result);
    if (!out)
      pn.at("binding").fail("kernel " + std::to_string(src) +
                            " has no result " +
                            std::to_string(p.binding.result));
    srcShape = &out->shape;
    srcType = out->dtype;
  }
  checkLikeSource(pn, p.dtype, p.shape, p.binding, srcType, *srcShape);
}

/// Result `r` of `f` is an argument or a result of a kernel `f` launches,
/// with the same dtype and element count.
void checkResult(const Manifest &m, const ManifestFunction &f,
                 const std::vector<int> &position, const ManifestResult &r,
                 const Node &rn) {
  const std::vector<Dim> *srcShape = nullptr;
  ElemType srcType{};
  if (r.source.kind == Binding::Kind::Argument) {
    if (r.source.index >= static_cast<int>(f.arguments.size()))
      rn.at("source").fail("no argument " + std::to_string(r.source.index));
    srcShape = &f.arguments[r.source.index].shape;
    srcType = f.arguments[r.source.index].dtype;
  } else if (r.source.kind == Binding::Kind::KernelResult) {
    int src = r.source.index;
    if (src >= static_cast<int>(m.kernels.size()) || position[src] < 0)
      rn.at("source").fail("kernel " + std::to_string(src) +
                           " is not launched by \"" + f.name + "\"");
    const ManifestParam *out = m.kernels[src].output(r.source.result);
    if (!out)
      rn.at("source").fail("kernel " + std::to_string(src) + " has no result " +
                           std::to_string(r.source.result));
    srcShape = &out->shape;
    srcType = out->dtype;
  } else {
    rn.at("source").fail("expected {\"argument\": i} or {\"kernel\": k, "
                         "\"result\": r}");
  }
  checkLikeSource(rn, r.dtype, r.shape, r.source, srcType, *srcShape);
}

/// Cross-references: each kernel is launched by one function, which it
/// names; bindings and results point at real arguments / earlier kernels
/// of the same function, with matching dtypes, element counts and roles.
void validate(Manifest &m, const json &doc) {
  Node root(doc, m.source);
  std::set<std::string> names;
  std::vector<int> owner(m.kernels.size(), -1);
  for (size_t fi = 0; fi < m.functions.size(); ++fi) {
    ManifestFunction &f = m.functions[fi];
    Node fn = root.at("functions").at(fi);
    if (!names.insert(f.name).second)
      fn.at("name").fail("duplicate function \"" + f.name + "\"");
    std::vector<int> position(m.kernels.size(), -1);
    for (size_t i = 0; i < f.kernels.size(); ++i) {
      int k = f.kernels[i];
      Node kn = fn.at("kernels").at(i);
      if (k < 0 || k >= static_cast<int>(m.kernels.size()))
        kn.fail("no kernel " + std::to_string(k) + " (" +
                std::to_string(m.kernels.size()) + " kernels)");
      if (owner[k] != -1)
        kn.fail("kernel " + std::to_string(k) +
                " is launched twice or by two functions");
      owner[k] = static_cast<int>(fi);
      position[k] = static_cast<int>(i);
    }
    for (size_t i = 0; i < f.kernels.size(); ++i) {
      const ManifestKernel &k = m.kernels[f.kernels[i]];
      Node kn = root.at("kernels").at(static_cast<size_t>(k.index));
      if (!k.function.empty() && k.function != f.name)
        kn.at("function")
            .fail("kernel belongs to \"" + k.function +
                  "\" but is launched by \"" + f.name + "\"");
      for (const ManifestParam &p : k.params)
        if (p.kind == ParamKind::Input)
          checkInput(m, f, position, i, p,
                     kn.at("params").at(static_cast<size_t>(p.index)));
    }
    for (size_t i = 0; i < f.results.size(); ++i)
      checkResult(m, f, position, f.results[i], fn.at("results").at(i));
  }
}

} // namespace

Manifest Manifest::parse(std::string_view text, const std::string &source) {
  json doc = jsonutil::parse(text, source);
  Node root(doc, source);
  root.expectObject();
  Manifest m;
  m.source = source;
  Node format = root.at("format");
  if (format.asString() != contract::kManifestFormat)
    format.fail("not a fusion manifest (format \"" + format.asString() + "\")");
  Node version = root.at("version");
  m.version = version.asInt();
  if (m.version != contract::kManifestVersion)
    throwUnsupported(version.where(), ": manifest version ", m.version,
                     " (this runtime reads version ",
                     contract::kManifestVersion, ")");
  if (auto p = root.find("ptx"))
    m.ptx = p->asString();
  Node fingerprint = root.at(std::string(contract::kPtxFingerprintKey));
  m.ptxFingerprint = fingerprint.asString();
  if (m.ptxFingerprint.size() != 16 ||
      m.ptxFingerprint.find_first_not_of("0123456789abcdef") !=
          std::string::npos)
    fingerprint.fail("expected 16 lowercase hex digits (the FNV-1a hash of "
                     "the PTX), got \"" +
                     m.ptxFingerprint + "\"");
  if (auto c = root.find("chip"))
    m.chip = c->asString();
  if (auto s = root.find("strategy"))
    m.strategy = s->asString();

  Node kernels = root.at("kernels");
  kernels.expectArray();
  std::map<std::string, size_t> entries;
  for (size_t i = 0; i < kernels.size(); ++i) {
    m.kernels.push_back(parseKernel(kernels.at(i), i));
    // Kernels sharing an entry (their own or a variant's) must agree on its
    // signature.
    const ManifestKernel &k = m.kernels.back();
    auto claim = [&](const std::string &entry, const Node &where) {
      auto [it, inserted] = entries.emplace(entry, i);
      if (inserted || it->second == i)
        return;
      const ManifestKernel &first = m.kernels[it->second];
      bool same = first.params.size() == k.params.size();
      for (size_t p = 0; same && p < k.params.size(); ++p)
        same = first.params[p].kind == k.params[p].kind &&
               first.params[p].dtype == k.params[p].dtype;
      if (!same)
        where.fail("entry \"" + entry + "\" is shared with kernel " +
                   std::to_string(it->second) + " but the parameters differ");
    };
    Node kn = kernels.at(i);
    claim(k.entry, kn.at("entry"));
    for (size_t v = 0; v < k.variants.size(); ++v)
      claim(k.variants[v].entry, kn.at("variants").at(v).at("entry"));
  }

  Node functions = root.at("functions");
  functions.expectArray();
  if (functions.size() == 0)
    functions.fail("no functions");
  for (size_t i = 0; i < functions.size(); ++i)
    m.functions.push_back(parseFunction(functions.at(i)));
  validate(m, doc);
  return m;
}

Manifest Manifest::load(const std::string &path) {
  // A manifest of a whole model has a few hundred kilobytes.
  return parse(readFile(path, "manifest", kMaxJsonFileBytes), path);
}

const ManifestFunction &Manifest::function(std::string_view name) const {
  if (name.empty() && functions.size() == 1)
    return functions.front();
  for (const ManifestFunction &f : functions)
    if (f.name == name)
      return f;
  std::string list;
  for (size_t i = 0; i < functions.size(); ++i)
    list += (i ? ", " : "") + functions[i].name;
  if (name.empty())
    throwInvalidArgument(source, ": ", functions.size(), " functions (", list,
                         "); name the one to run");
  throwInvalidArgument(source, ": no function \"", name,
                       "\" (functions: ", list, ")");
}

//===----------------------------------------------------------------------===//
// PTX entries
//===----------------------------------------------------------------------===//

namespace {

/// `ptx` with // and /* */ comments replaced by spaces.
std::string stripComments(std::string_view ptx) {
  std::string out(ptx);
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '"') { // skip string literals (e.g. in .file)
      size_t j = out.find('"', i + 1);
      if (j == std::string::npos)
        break;
      i = j;
    } else if (out[i] == '/' && out[i + 1] == '/') {
      size_t j = out.find('\n', i);
      if (j == std::string::npos)
        j = out.size();
      std::fill(out.begin() + i, out.begin() + j, ' ');
      i = j;
    } else if (out[i] == '/' && out[i + 1] == '*') {
      size_t j = out.find("*/", i + 2);
      j = j == std::string::npos ? out.size() : j + 2;
      std::fill(out.begin() + i, out.begin() + j, ' ');
      i = j - 1;
    }
  }
  return out;
}

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

std::vector<std::string> tokens(const std::string &s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  std::string t;
  while (is >> t)
    out.push_back(t);
  return out;
}

} // namespace

std::vector<PtxEntry> scanPtxEntries(std::string_view ptxText,
                                     const std::string &source) {
  std::string ptx = stripComments(ptxText);
  std::vector<PtxEntry> entries;
  size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
    // A whole-word directive.
    bool wordStart = pos == 0 || !isIdentChar(ptx[pos - 1]);
    size_t after = pos + 6;
    if (!wordStart || (after < ptx.size() && isIdentChar(ptx[after]))) {
      pos = after;
      continue;
    }
    size_t nameBegin = ptx.find_first_not_of(" \t\r\n", after);
    size_t nameEnd = nameBegin;
    while (nameEnd < ptx.size() && isIdentChar(ptx[nameEnd]) &&
           ptx[nameEnd] != '.')
      ++nameEnd;
    PtxEntry e;
    e.name = ptx.substr(nameBegin, nameEnd - nameBegin);
    size_t open = ptx.find_first_not_of(" \t\r\n", nameEnd);
    if (open != std::string::npos && ptx[open] == '(') {
      size_t close = ptx.find(')', open);
      if (close == std::string::npos)
        throwFormat(source, ": .entry ", e.name,
                    ": unterminated parameter list");
      std::string list = ptx.substr(open + 1, close - open - 1);
      std::stringstream ss(list);
      std::string item;
      while (std::getline(ss, item, ',')) {
        std::vector<std::string> t = tokens(item);
        if (t.empty())
          continue;
        if (t[0] != ".param" || t.size() < 2)
          throwFormat(source, ": .entry ", e.name, ": unexpected parameter \"",
                      item, "\"");
        // .param [.align N] .type [.ptr ...] name[...]
        size_t ti = 1;
        if (t[ti] == ".align" && ti + 2 < t.size())
          ti += 2;
        std::string type = t[ti];
        const std::string &name = t.back();
        size_t bracket = name.find('[');
        if (bracket != std::string::npos)
          type += name.substr(bracket);
        e.paramTypes.push_back(type);
      }
      pos = close;
    } else {
      pos = nameEnd;
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

namespace {

/// Checks that `entries` has `entry` with the parameters of `k`; `what`
/// names the kernel (and variant) in messages.
void checkPtxEntry(const std::vector<PtxEntry> &entries,
                   const std::string &entry, const ManifestKernel &k,
                   const std::string &what, const std::string &ptxName,
                   const Manifest &manifest) {
  const PtxEntry *e = nullptr;
  for (const PtxEntry &c : entries)
    if (c.name == entry)
      e = &c;
  if (!e) {
    std::string list;
    for (size_t i = 0; i < entries.size() && i < 8; ++i)
      list += (i ? ", " : "") + entries[i].name;
    throwFormat(ptxName, ": no .entry ", entry, " for ", what, " of ",
                manifest.source, " (the PTX has ", entries.size(), " entries",
                entries.empty() ? "" : ": ", list, ")");
  }
  if (e->paramTypes.size() != k.params.size())
    throwFormat(ptxName, ": .entry ", entry, " has ", e->paramTypes.size(),
                " parameters but ", manifest.source, " lists ", k.params.size(),
                " for ", what);
  for (size_t i = 0; i < k.params.size(); ++i) {
    const ManifestParam &p = k.params[i];
    const std::string &t = e->paramTypes[i];
    bool ok = p.isBuffer() ? (t == ".u64" || t == ".b64" || t == ".s64")
                           : (t == ".u32" || t == ".b32" || t == ".s32");
    if (!ok)
      throwFormat(ptxName, ": .entry ", entry, " parameter ", i, " is ", t,
                  " but ", manifest.source, " says ", paramKindName(p.kind),
                  " \"", p.role, "\" (",
                  p.isBuffer() ? "a 64-bit pointer" : "a 32-bit i32", ") for ",
                  what);
  }
}

} // namespace

void checkPtxFingerprint(std::string_view ptx, const std::string &ptxName,
                         const Manifest &manifest) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(contract::ptxFingerprint(ptx)));
  if (manifest.ptxFingerprint != hex)
    throwFormat(ptxName, ": not the PTX ", manifest.source,
                " was written with (its FNV-1a hash is ", hex,
                ", the "
                "manifest's ",
                contract::kPtxFingerprintKey, " is ", manifest.ptxFingerprint,
                "): compile them together");
}

void checkPtxEntries(std::string_view ptx, const std::string &ptxName,
                     const Manifest &manifest) {
  std::vector<PtxEntry> entries = scanPtxEntries(ptx, ptxName);
  for (const ManifestKernel &k : manifest.kernels) {
    checkPtxEntry(entries, k.entry, k, k.label(), ptxName, manifest);
    for (size_t v = 0; v < k.variants.size(); ++v)
      checkPtxEntry(entries, k.variants[v].entry, k,
                    k.label(static_cast<int>(v)), ptxName, manifest);
  }
}

void checkChipRuns(const Manifest &manifest,
                   std::pair<int, int> computeCapability) {
  const auto [major, minor] = computeCapability;
  const std::string &chip = manifest.chip;
  if (chip.empty())
    return;
  const bool archSpecific = chip.back() == 'a';
  const std::string digits =
      chip.size() > 3 ? chip.substr(3, chip.size() - 3 - archSpecific) : "";
  if (chip.rfind("sm_", 0) != 0 || digits.size() < 2 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](unsigned char c) { return std::isdigit(c); }))
    throwFormat(manifest.source, ": chip \"", chip,
                "\" is not sm_<compute capability>[a]");
  const int target = std::stoi(digits), device = 10 * major + minor;
  if (archSpecific ? device == target : device >= target)
    return;
  const std::string capability =
      std::to_string(target / 10) + "." + std::to_string(target % 10);
  throw UnsupportedError(
      manifest.source + " was compiled for " + chip +
      (archSpecific ? " (architecture-specific PTX: compute capability " +
                          capability + " only)"
                    : " (compute capability " + capability + " or later)") +
      "; this GPU has compute capability " + std::to_string(major) + "." +
      std::to_string(minor) + ": compile with --chip=sm_" +
      std::to_string(device > target ? target : device));
}

void checkPtxAgainstManifest(std::string_view ptx, const std::string &ptxName,
                             const Manifest &manifest) {
  checkPtxFingerprint(ptx, ptxName, manifest);
  checkPtxEntries(ptx, ptxName, manifest);
}

} // namespace fusion::runtime
