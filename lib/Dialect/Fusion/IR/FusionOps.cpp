//===- FusionOps.cpp - fusion dialect operations --------------------------===//
//
// Verifiers reject every inconsistent combination of shapes, element types
// and attributes with a message naming the values involved, and the custom
// assembly of fusion.kernel.
//
//===----------------------------------------------------------------------===//

#include "fusion/Dialect/Fusion/IR/FusionOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fusion;

//===----------------------------------------------------------------------===//
// Shape-checking helpers
//===----------------------------------------------------------------------===//

namespace {
/// Checks the shapes and element types of one op's operands and results
/// against each other, reporting the first mismatch on `op`.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  /// `role` must have rank `rank`.
  LogicalResult rank(StringRef role, ShapedType type, int64_t rank) {
    if (type.getRank() == rank)
      return success();
    return op->emitOpError()
           << role << " must have rank " << rank << ", got " << type;
  }

  /// Dimension `dim` of `role` is a model dimension: static and positive.
  LogicalResult modelDim(StringRef role, ShapedType type, unsigned dim,
                         StringRef what) {
    if (!type.isDynamicDim(dim) && type.getDimSize(dim) > 0)
      return success();
    return op->emitOpError() << role << " dimension " << dim << " (" << what
                             << ") must be static and positive, got " << type;
  }

  /// Dimension `dim` of `role` is a run-time size (the batch, the pages of
  /// a cache), which the kernels take as an i32: dynamic, or a static value
  /// in [1, 2^31 - 1].
  LogicalResult runtimeDim(StringRef role, ShapedType type, unsigned dim,
                           StringRef what) {
    int64_t size = type.getDimSize(dim);
    if (ShapedType::isDynamic(size) ||
        (size >= 1 && size <= std::numeric_limits<int32_t>::max()))
      return success();
    return op->emitOpError()
           << role << " dimension " << dim << " (" << what
           << ") is a run-time size the kernels take as an i32: it must be "
              "dynamic or in [1, 2147483647], got "
           << type;
  }

  /// Dimension 0 (the batch) of every `(role, type)` must agree wherever it
  /// is static; the first static one is the reference.
  LogicalResult batch(ArrayRef<std::pair<StringRef, ShapedType>> operands) {
    const std::pair<StringRef, ShapedType> *reference = nullptr;
    for (const auto &operand : operands) {
      if (failed(runtimeDim(operand.first, operand.second, 0, "batch")))
        return failure();
      if (operand.second.isDynamicDim(0))
        continue;
      if (!reference) {
        reference = &operand;
        continue;
      }
      if (failed(dimEquals(
              operand.first, operand.second, 0, reference->second.getDimSize(0),
              (Twine("the batch size of ") + reference->first).str())))
        return failure();
    }
    return success();
  }

  /// Dimension `dim` of `role` must equal `expected` (the size of `what`),
  /// unless either is dynamic.
  LogicalResult dimEquals(StringRef role, ShapedType type, unsigned dim,
                          int64_t expected, StringRef what) {
    int64_t actual = type.getDimSize(dim);
    if (ShapedType::isDynamic(actual) || ShapedType::isDynamic(expected) ||
        actual == expected)
      return success();
    return op->emitOpError() << role << " dimension " << dim << " is " << actual
                             << " but " << what << " is " << expected;
  }

  /// `role` must have element type `expected` (that of `what`).
  LogicalResult elementType(StringRef role, ShapedType type, Type expected,
                            StringRef what) {
    if (type.getElementType() == expected)
      return success();
    return op->emitOpError()
           << role << " element type " << type.getElementType()
           << " does not match " << what << " element type " << expected;
  }

  /// `role` must have exactly type `expected` (that of `what`).
  LogicalResult sameType(StringRef role, Type type, Type expected,
                         StringRef what) {
    if (type == expected)
      return success();
    return op->emitOpError() << role << " type " << type << " does not match "
                             << what << " type " << expected;
  }

private:
  Operation *op;
};
} // namespace

/// Verifies the two rank-1 `[H]`-shaped parameters of a normalisation
/// (weight, bias) against the `[B, H]` input.
static LogicalResult verifyNormParam(ShapeChecker &check, StringRef role,
                                     ShapedType param, ShapedType input) {
  if (failed(check.rank(role, param, 1)) ||
      failed(check.modelDim(role, param, 0, "hidden size")) ||
      failed(check.elementType(role, param, input.getElementType(), "input")))
    return failure();
  return check.dimEquals(role, param, 0, input.getDimSize(1),
                         "the hidden size of input");
}

/// Verifies a `[B, H]` normalisation input with static `H` and a positive
/// epsilon.
static LogicalResult verifyNormInput(Operation *op, ShapeChecker &check,
                                     ShapedType input, double epsilon) {
  if (failed(check.rank("input", input, 2)) ||
      failed(check.runtimeDim("input", input, 0, "batch")) ||
      failed(check.modelDim("input", input, 1, "hidden size")))
    return failure();
  if (!isPositiveNormalF32(epsilon))
    return op->emitOpError() << "epsilon must be a positive normal float32 "
                                "(the kernels add it in fp32), got "
                             << epsilon;
  return success();
}

//===----------------------------------------------------------------------===//
// RMSNormOp / LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult RMSNormOp::verify() {
  ShapeChecker check(*this);
  auto input = getInput().getType();
  if (failed(verifyNormInput(*this, check, input,
                             getEpsilon().convertToDouble())) ||
      failed(verifyNormParam(check, "weight", getWeight().getType(), input)) ||
      failed(check.sameType("result", getResult().getType(), input, "input")))
    return failure();
  if (static_cast<bool>(getResidual()) != static_cast<bool>(getResidualOut()))
    return emitOpError() << "has " << (getResidual() ? "a" : "no")
                         << " residual operand but "
                         << (getResidualOut() ? "a" : "no")
                         << " residual_out result; both or neither";
  if (getResidual() &&
      (failed(check.sameType("residual", getResidual().getType(), input,
                             "input")) ||
       failed(check.sameType("residual_out", getResidualOut().getType(), input,
                             "input"))))
    return failure();
  return success();
}

LogicalResult LayerNormOp::verify() {
  ShapeChecker check(*this);
  auto input = getInput().getType();
  if (failed(verifyNormInput(*this, check, input,
                             getEpsilon().convertToDouble())) ||
      failed(verifyNormParam(check, "weight", getWeight().getType(), input)) ||
      failed(verifyNormParam(check, "bias", getBias().getType(), input)))
    return failure();
  return check.sameType("result", getResult().getType(), input, "input");
}

//===----------------------------------------------------------------------===//
// QKVProjOp
//===----------------------------------------------------------------------===//

/// Verifies a `[B, heads, D]` projection result: static heads and head_dim
/// equal to the attributes, the element type of `input`.
static LogicalResult verifyHeads(ShapeChecker &check, StringRef role,
                                 ShapedType type, ShapedType input,
                                 int64_t heads, StringRef headsWhat,
                                 int64_t headDim) {
  if (failed(check.rank(role, type, 3)) ||
      failed(check.modelDim(role, type, 1, headsWhat)) ||
      failed(check.modelDim(role, type, 2, "head_dim")) ||
      failed(check.dimEquals(role, type, 1, heads, headsWhat)) ||
      failed(check.dimEquals(role, type, 2, headDim, "head_dim")))
    return failure();
  return check.elementType(role, type, input.getElementType(), "input");
}

LogicalResult QKVProjOp::verify() {
  ShapeChecker check(*this);
  auto input = getInput().getType();
  auto weight = getWeight().getType();
  int64_t hq = getNumHeads(), hkv = getNumKvHeads(), d = getHeadDim();
  if (hq % hkv != 0)
    return emitOpError() << "num_heads (" << hq
                         << ") must be a multiple of num_kv_heads (" << hkv
                         << ")";
  std::optional<int64_t> kvRows = llvm::checkedMul(int64_t{2}, hkv);
  std::optional<int64_t> heads =
      kvRows ? llvm::checkedAdd(hq, *kvRows) : std::nullopt;
  std::optional<int64_t> packedRows =
      heads ? llvm::checkedMul(*heads, d) : std::nullopt;
  if (!packedRows)
    return emitOpError() << "(num_heads + 2 * num_kv_heads) * head_dim = ("
                         << hq << " + 2 * " << hkv << ") * " << d
                         << " overflows a 64-bit size";
  int64_t rows = *packedRows;
  if (failed(check.rank("input", input, 2)) ||
      failed(check.modelDim("input", input, 1, "hidden size")) ||
      failed(check.rank("weight", weight, 2)) ||
      failed(
          check.elementType("weight", weight, input.getElementType(), "input")))
    return failure();
  if (weight.getShape() != ArrayRef<int64_t>{rows, input.getDimSize(1)})
    return emitOpError() << "weight shape must be [(num_heads + 2 * "
                            "num_kv_heads) * head_dim, hidden] = [("
                         << hq << " + 2 * " << hkv << ") * " << d << ", "
                         << input.getDimSize(1) << "] = [" << rows << ", "
                         << input.getDimSize(1) << "], got " << weight;
  if (auto bias = getBias()) {
    auto biasType = bias.getType();
    if (failed(check.rank("bias", biasType, 1)) ||
        failed(check.modelDim("bias", biasType, 0, "packed rows")) ||
        failed(check.elementType("bias", biasType, input.getElementType(),
                                 "input")) ||
        failed(check.dimEquals("bias", biasType, 0, rows,
                               "(num_heads + 2 * num_kv_heads) * head_dim")))
      return failure();
  }
  if (failed(verifyHeads(check, "query", getQuery().getType(), input, hq,
                         "num_heads", d)) ||
      failed(verifyHeads(check, "key", getKey().getType(), input, hkv,
                         "num_kv_heads", d)) ||
      failed(verifyHeads(check, "value", getValue().getType(), input, hkv,
                         "num_kv_heads", d)))
    return failure();
  return check.batch({{"input", input},
                      {"query", getQuery().getType()},
                      {"key", getKey().getType()},
                      {"value", getValue().getType()}});
}

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

int64_t RopeOp::getEffectiveRotaryDim() {
  if (auto rotaryDim = getRotaryDim())
    return *rotaryDim;
  return getQuery().getType().getDimSize(2);
}

LogicalResult RopeOp::verify() {
  ShapeChecker check(*this);
  auto query = getQuery().getType();
  auto key = getKey().getType();
  auto positions = getPositions().getType();
  if (failed(check.rank("query", query, 3)) ||
      failed(check.modelDim("query", query, 1, "num_heads")) ||
      failed(check.modelDim("query", query, 2, "head_dim")) ||
      failed(check.rank("key", key, 3)) ||
      failed(check.modelDim("key", key, 1, "num_kv_heads")) ||
      failed(check.modelDim("key", key, 2, "head_dim")) ||
      failed(check.dimEquals("key", key, 2, query.getDimSize(2),
                             "the head_dim of query")) ||
      failed(check.elementType("key", key, query.getElementType(), "query")) ||
      failed(check.rank("positions", positions, 1)) ||
      failed(check.batch(
          {{"query", query}, {"key", key}, {"positions", positions}})))
    return failure();
  if (query.getDimSize(1) % key.getDimSize(1) != 0)
    return emitOpError() << "num_heads of query (" << query.getDimSize(1)
                         << ") must be a multiple of num_kv_heads of key ("
                         << key.getDimSize(1) << ")";
  int64_t headDim = query.getDimSize(2);
  int64_t rotaryDim = getEffectiveRotaryDim();
  if (rotaryDim % 2 != 0 || rotaryDim > headDim)
    return emitOpError() << "rotary_dim (" << rotaryDim
                         << ") must be even and <= head_dim (" << headDim
                         << ")";
  double theta = getTheta().convertToDouble();
  if (!(theta > 1.0) || !isPositiveNormalF32(theta))
    return emitOpError() << "theta must be > 1 and finite in float32 (the "
                            "frequencies are computed in fp32), got "
                         << theta;
  return success();
}

//===----------------------------------------------------------------------===//
// KVAppendOp / DecodeAttentionOp
//===----------------------------------------------------------------------===//

/// Verifies paged K/V caches `[num_pages, P, Hkv, D]` (static P, Hkv, D > 0;
/// identity layout in the default memory space; two distinct buffers) and the
/// rank of the `[B, max_pages]` block table against a `[B, heads, D]` tensor.
static LogicalResult verifyCache(Operation *op, ShapeChecker &check,
                                 Value keyCache, Value valueCache,
                                 ShapedType heads, StringRef headsRole,
                                 ShapedType blockTable) {
  auto cache = cast<MemRefType>(keyCache.getType());
  if (failed(check.rank("key_cache", cache, 4)) ||
      failed(check.runtimeDim("key_cache", cache, 0, "num_pages")) ||
      failed(check.modelDim("key_cache", cache, 1, "page size")) ||
      failed(check.modelDim("key_cache", cache, 2, "num_kv_heads")) ||
      failed(check.modelDim("key_cache", cache, 3, "head_dim")))
    return failure();
  if (!cache.getLayout().isIdentity() || cache.getMemorySpace())
    return op->emitOpError() << "key_cache must have the identity layout in "
                                "the default memory space, got "
                             << cache;
  if (keyCache == valueCache)
    return op->emitOpError()
           << "key_cache and value_cache must be distinct buffers";
  if (failed(check.elementType("key_cache", cache, heads.getElementType(),
                               headsRole)) ||
      failed(check.dimEquals("key_cache", cache, 3, heads.getDimSize(2),
                             (Twine("the head_dim of ") + headsRole).str())))
    return failure();
  return check.rank("block_table", blockTable, 2);
}

LogicalResult KVAppendOp::verify() {
  ShapeChecker check(*this);
  auto key = getKey().getType();
  auto cache = getKeyCache().getType();
  auto positions = getPositions().getType();
  if (failed(check.rank("key", key, 3)) ||
      failed(check.modelDim("key", key, 1, "num_kv_heads")) ||
      failed(check.modelDim("key", key, 2, "head_dim")) ||
      failed(verifyCache(*this, check, getKeyCache(), getValueCache(), key,
                         "key", getBlockTable().getType())) ||
      failed(check.dimEquals("key_cache", cache, 2, key.getDimSize(1),
                             "the num_kv_heads of key")) ||
      failed(check.rank("positions", positions, 1)))
    return failure();
  return check.batch({{"key", key},
                      {"block_table", getBlockTable().getType()},
                      {"positions", positions}});
}

double DecodeAttentionOp::getEffectiveScale() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 /
         std::sqrt(static_cast<double>(getQuery().getType().getDimSize(2)));
}

LogicalResult DecodeAttentionOp::verify() {
  ShapeChecker check(*this);
  auto query = getQuery().getType();
  auto cache = getKeyCache().getType();
  auto seqLens = getSeqLens().getType();
  if (failed(check.rank("query", query, 3)) ||
      failed(check.modelDim("query", query, 1, "num_heads")) ||
      failed(check.modelDim("query", query, 2, "head_dim")) ||
      failed(verifyCache(*this, check, getKeyCache(), getValueCache(), query,
                         "query", getBlockTable().getType())) ||
      failed(check.rank("seq_lens", seqLens, 1)) ||
      failed(check.batch({{"query", query},
                          {"block_table", getBlockTable().getType()},
                          {"seq_lens", seqLens}})))
    return failure();
  int64_t hq = query.getDimSize(1), hkv = cache.getDimSize(2);
  if (hq % hkv != 0)
    return emitOpError()
           << "num_heads of query (" << hq
           << ") must be a multiple of num_kv_heads of key_cache (" << hkv
           << ")";
  if (auto scale = getScale();
      scale && !isPositiveNormalF32(scale->convertToDouble()))
    return emitOpError() << "scale must be a positive normal float32 (the "
                            "kernels apply it in fp32), got "
                         << scale->convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp / SiluMulOp
//===----------------------------------------------------------------------===//

/// Verifies a `[B, F]` activation: rank 2, a run-time batch and static
/// features (`what`).
static LogicalResult verifyRows(ShapeChecker &check, StringRef role,
                                ShapedType type, StringRef what) {
  if (failed(check.rank(role, type, 2)) ||
      failed(check.runtimeDim(role, type, 0, "batch")))
    return failure();
  return check.modelDim(role, type, 1, what);
}

/// Verifies the `[B, N]` result of an op producing rows: rank 2, a run-time
/// batch, `N` (`what`) static and equal to `size` (`sizeWhat`), and the
/// element type of `source`, a (role, type) pair.
static LogicalResult verifyResultRows(ShapeChecker &check, ShapedType result,
                                      StringRef what, int64_t size,
                                      StringRef sizeWhat,
                                      std::pair<StringRef, ShapedType> source) {
  if (failed(verifyRows(check, "result", result, what)) ||
      failed(check.elementType("result", result, source.second.getElementType(),
                               source.first)))
    return failure();
  return check.dimEquals("result", result, 1, size, sizeWhat);
}

/// Verifies the input of a linear layer, `[B, K]` or `[B, heads, head_dim]`
/// read as `[B, heads * head_dim]`, and returns its K in `features` and a
/// description of it in `what`.
static LogicalResult verifyLinearInput(Operation *op, ShapeChecker &check,
                                       ShapedType input, int64_t &features,
                                       std::string &what) {
  if (input.getRank() == 2) {
    if (failed(verifyRows(check, "input", input, "in features")))
      return failure();
    features = input.getDimSize(1);
    what = "the in features of input";
    return success();
  }
  if (input.getRank() != 3)
    return op->emitOpError()
           << "input must have rank 2 ([B, K]) or 3 ([B, heads, head_dim], "
              "read as [B, heads * head_dim]), got "
           << input;
  if (failed(check.runtimeDim("input", input, 0, "batch")) ||
      failed(check.modelDim("input", input, 1, "heads")) ||
      failed(check.modelDim("input", input, 2, "head_dim")))
    return failure();
  int64_t heads = input.getDimSize(1), headDim = input.getDimSize(2);
  std::optional<int64_t> product = llvm::checkedMul(heads, headDim);
  if (!product)
    return op->emitOpError() << "input features heads * head_dim = " << heads
                             << " * " << headDim << " overflow a 64-bit size";
  features = *product;
  what = ("the in features of input (" + Twine(heads) + " * " + Twine(headDim) +
          ")")
             .str();
  return success();
}

LogicalResult LinearOp::verify() {
  ShapeChecker check(*this);
  auto input = getInput().getType();
  auto weight = getWeight().getType();
  auto result = getResult().getType();
  int64_t features = 0;
  std::string featuresWhat;
  if (failed(verifyLinearInput(*this, check, input, features, featuresWhat)) ||
      failed(check.rank("weight", weight, 2)) ||
      failed(check.modelDim("weight", weight, 0, "out features")) ||
      failed(check.modelDim("weight", weight, 1, "in features")) ||
      failed(check.elementType("weight", weight, input.getElementType(),
                               "input")) ||
      failed(check.dimEquals("weight", weight, 1, features, featuresWhat)) ||
      failed(verifyResultRows(check, result, "out features",
                              weight.getDimSize(0),
                              "the out features of weight", {"input", input})))
    return failure();
  return check.batch({{"input", input}, {"result", result}});
}

LogicalResult LinearPartialsOp::verify() {
  ShapeChecker check(*this);
  auto input = getInput().getType();
  auto weight = getWeight().getType();
  auto result = getResult().getType();
  int64_t features = 0;
  std::string featuresWhat;
  if (input.getRank() != 3)
    return emitOpError()
           << "input must have rank 3 ([B, heads, head_dim]), got " << input;
  if (failed(verifyLinearInput(*this, check, input, features, featuresWhat)) ||
      failed(check.rank("weight", weight, 2)) ||
      failed(check.modelDim("weight", weight, 0, "out features")) ||
      failed(check.elementType("weight", weight, input.getElementType(),
                               "input")) ||
      failed(check.dimEquals("weight", weight, 1, features, featuresWhat)) ||
      failed(check.rank("result", result, 3)) ||
      failed(check.runtimeDim("result", result, 0, "batch")) ||
      failed(check.modelDim("result", result, 1, "head blocks")) ||
      failed(check.modelDim("result", result, 2, "out features")) ||
      failed(check.dimEquals("result", result, 2, weight.getDimSize(0),
                             "the out features of weight")))
    return failure();
  int64_t heads = input.getDimSize(1), blocks = result.getDimSize(1);
  if (heads % blocks != 0)
    return emitOpError() << "result dimension 1 (head blocks) must divide the "
                         << heads << " heads of input, got " << blocks;
  return check.batch({{"input", input}, {"result", result}});
}

LogicalResult SumPartialsOp::verify() {
  ShapeChecker check(*this);
  auto input = getInput().getType();
  auto result = getResult().getType();
  if (failed(check.rank("input", input, 3)) ||
      failed(check.runtimeDim("input", input, 0, "batch")) ||
      failed(check.modelDim("input", input, 1, "partials")) ||
      failed(check.modelDim("input", input, 2, "features")) ||
      failed(verifyRows(check, "result", result, "features")) ||
      failed(check.dimEquals("result", result, 1, input.getDimSize(2),
                             "the features of input")))
    return failure();
  return check.batch({{"input", input}, {"result", result}});
}

LogicalResult SiluMulOp::verify() {
  ShapeChecker check(*this);
  auto input = getInput().getType();
  auto result = getResult().getType();
  if (failed(verifyRows(check, "input", input, "2 * intermediate size")))
    return failure();
  int64_t packed = input.getDimSize(1);
  if (packed % 2 != 0)
    return emitOpError() << "input dimension 1 (2 * intermediate size) must "
                            "be even, each row being [gate | up] with halves "
                            "of one size, got "
                         << input;
  if (failed(verifyResultRows(check, result, "intermediate size", packed / 2,
                              "half the features of input ([gate | up])",
                              {"input", input})))
    return failure();
  return check.batch({{"input", input}, {"result", result}});
}

//===----------------------------------------------------------------------===//
// EmbeddingOp / ArgmaxOp
//===----------------------------------------------------------------------===//

/// Verifies that dimension `dim` of `role` is a vocabulary size: static,
/// positive, and at most 2^31 so that every token id fits in an i32.
static LogicalResult verifyVocabDim(Operation *op, ShapeChecker &check,
                                    StringRef role, ShapedType type,
                                    unsigned dim) {
  constexpr int64_t kMaxVocab = int64_t{1} << 31;
  if (failed(check.modelDim(role, type, dim, "vocab size")))
    return failure();
  if (type.getDimSize(dim) <= kMaxVocab)
    return success();
  return op->emitOpError() << role << " dimension " << dim
                           << " (vocab size) must be at most " << kMaxVocab
                           << " (token ids are i32), got " << type;
}

LogicalResult EmbeddingOp::verify() {
  ShapeChecker check(*this);
  auto tokens = getTokens().getType();
  auto table = getTable().getType();
  auto result = getResult().getType();
  if (failed(check.rank("tokens", tokens, 1)) ||
      failed(check.rank("table", table, 2)) ||
      failed(verifyVocabDim(*this, check, "table", table, 0)) ||
      failed(check.modelDim("table", table, 1, "hidden size")) ||
      failed(verifyResultRows(check, result, "hidden size", table.getDimSize(1),
                              "the hidden size of table", {"table", table})))
    return failure();
  return check.batch({{"tokens", tokens}, {"result", result}});
}

LogicalResult ArgmaxOp::verify() {
  ShapeChecker check(*this);
  auto logits = getLogits().getType();
  auto result = getResult().getType();
  if (failed(check.rank("logits", logits, 2)) ||
      failed(check.runtimeDim("logits", logits, 0, "batch")) ||
      failed(verifyVocabDim(*this, check, "logits", logits, 1)) ||
      failed(check.rank("result", result, 1)))
    return failure();
  return check.batch({{"logits", logits}, {"result", result}});
}

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

bool mlir::fusion::isValidKernelName(StringRef name) {
  if (name.empty() || name.size() > kMaxKernelNameLength ||
      !(llvm::isAlpha(name.front()) || name.front() == '_'))
    return false;
  return llvm::all_of(
      name, [](char c) { return llvm::isAlnum(c) || c == '_' || c == '$'; });
}

std::string mlir::fusion::describeKernelNameRule() {
  return ("a PTX identifier [a-zA-Z_][a-zA-Z0-9_$]* of at most " +
          Twine(kMaxKernelNameLength) + " characters")
      .str();
}

YieldOp KernelOp::getYield() {
  return cast<YieldOp>(getBody().front().getTerminator());
}

LogicalResult KernelOp::verifyRegions() {
  if ((*this)->getParentOfType<KernelOp>())
    return emitOpError() << "cannot be nested in another fusion.kernel";
  if (!isValidKernelName(getSymName()))
    return emitOpError() << "name \"" << getSymName()
                         << "\" is not a valid PTX entry name: expected "
                         << describeKernelNameRule();
  // Entry names are unique by construction in --fusion-form-kernels;
  // --convert-fusion-to-gpu, which turns each into a PTX entry, rejects a
  // name that two different kernels share (a module-wide walk here would
  // make verifying N kernels O(N^2)).
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments()
                         << " arguments but the kernel has "
                         << getInputs().size() << " inputs";
  for (auto [i, arg, input] :
       llvm::enumerate(body.getArguments(), getInputs().getTypes()))
    if (arg.getType() != input)
      return emitOpError() << "body argument #" << i << " has type "
                           << arg.getType() << " but input #" << i
                           << " has type " << input;
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end with fusion.yield";
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values of types (" << yield.getValues().getTypes()
                         << ") but the kernel has results (" << getResultTypes()
                         << ")";
  return success();
}

// Custom form:
//   fusion.kernel @name (%arg = %input, ...) : (input types) -> result types
//       (attributes {...})? { body }
void KernelOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << " (";
  Block &body = getBody().front();
  llvm::interleaveComma(
      llvm::zip(body.getArguments(), getInputs()), p,
      [&](auto pair) { p << std::get<0>(pair) << " = " << std::get<1>(pair); });
  p << ") : ";
  p.printFunctionalType(getInputs().getTypes(), getResultTypes());
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                     {getSymNameAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

ParseResult KernelOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();

  SmallVector<OpAsmParser::Argument> args;
  SmallVector<OpAsmParser::UnresolvedOperand> inputs;
  auto parseBinding = [&]() -> ParseResult {
    if (parser.parseArgument(args.emplace_back()) || parser.parseEqual() ||
        parser.parseOperand(inputs.emplace_back()))
      return failure();
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren,
                                     parseBinding))
    return failure();

  FunctionType type;
  SMLoc typeLoc = parser.getCurrentLocation();
  if (parser.parseColonType(type))
    return failure();
  if (type.getNumInputs() != inputs.size())
    return parser.emitError(typeLoc)
           << "kernel binds " << inputs.size() << " inputs but its type has "
           << type.getNumInputs();
  for (auto [arg, t] : llvm::zip(args, type.getInputs()))
    arg.type = t;
  if (parser.resolveOperands(inputs, type.getInputs(), typeLoc,
                             result.operands))
    return failure();
  result.addTypes(type.getResults());

  // Checked here: an inherent attribute of the wrong kind (a dictionary as
  // `schedule`) would otherwise be dropped when the op is created.
  SMLoc attrLoc = parser.getCurrentLocation();
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes) ||
      failed(verifyInherentAttrs(result.name, result.attributes, [&] {
        return parser.emitError(attrLoc) << "'" << result.name << "' op ";
      })))
    return failure();
  Region *body = result.addRegion();
  return parser.parseRegion(*body, args);
}

#define GET_OP_CLASSES
#include "fusion/Dialect/Fusion/IR/FusionOps.cpp.inc"
