//===- FusionOps.cpp - fusion dialect operations ---------------------------===//
//
// Verifiers reject every inconsistent combination of shapes, element types
// and attributes with a message naming the values involved, and the custom
// assembly of fusion.kernel.
//
//===----------------------------------------------------------------------===//

#include "fusion/Dialect/Fusion/IR/FusionOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

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
    return op->emitOpError() << role << " must have rank " << rank << ", got "
                             << type;
  }

  /// Dimension `dim` of `role` must be static (a model dimension).
  LogicalResult isStatic(StringRef role, ShapedType type, unsigned dim,
                         StringRef what) {
    if (!type.isDynamicDim(dim))
      return success();
    return op->emitOpError() << role << " dimension " << dim << " (" << what
                             << ") must be static, got " << type;
  }

  /// Dimension `dim` of `role` must equal `expected` (the size of `what`),
  /// unless either is dynamic.
  LogicalResult dimEquals(StringRef role, ShapedType type, unsigned dim,
                          int64_t expected, StringRef what) {
    int64_t actual = type.getDimSize(dim);
    if (ShapedType::isDynamic(actual) || ShapedType::isDynamic(expected) ||
        actual == expected)
      return success();
    return op->emitOpError() << role << " dimension " << dim << " is "
                             << actual << " but " << what << " is "
                             << expected;
  }

  /// `role` must have element type `expected` (that of `what`).
  LogicalResult elementType(StringRef role, ShapedType type, Type expected,
                            StringRef what) {
    if (type.getElementType() == expected)
      return success();
    return op->emitOpError() << role << " element type "
                             << type.getElementType() << " does not match "
                             << what << " element type " << expected;
  }

  /// `role` must have exactly type `expected` (that of `what`).
  LogicalResult sameType(StringRef role, Type type, Type expected,
                         StringRef what) {
    if (type == expected)
      return success();
    return op->emitOpError() << role << " type " << type
                             << " does not match " << what << " type "
                             << expected;
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
      failed(check.isStatic("input", input, 1, "hidden size")))
    return failure();
  if (!(epsilon > 0.0))
    return op->emitOpError() << "epsilon must be > 0, got " << epsilon;
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

/// Verifies a `[B, heads, D]` head tensor against the batch of `input`.
static LogicalResult verifyHeads(ShapeChecker &check, StringRef role,
                                 ShapedType type, ShapedType batchSource,
                                 StringRef batchRole, int64_t heads,
                                 StringRef headsWhat, int64_t headDim) {
  if (failed(check.rank(role, type, 3)) ||
      failed(check.dimEquals(role, type, 0, batchSource.getDimSize(0),
                             (Twine("the batch size of ") + batchRole).str())) ||
      failed(check.dimEquals(role, type, 1, heads, headsWhat)) ||
      failed(check.dimEquals(role, type, 2, headDim, "head_dim")))
    return failure();
  return check.elementType(role, type, batchSource.getElementType(),
                           batchRole);
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
  int64_t rows = (hq + 2 * hkv) * d;
  if (failed(check.rank("input", input, 2)) ||
      failed(check.isStatic("input", input, 1, "hidden size")) ||
      failed(check.rank("weight", weight, 2)) ||
      failed(check.elementType("weight", weight, input.getElementType(),
                               "input")))
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
        failed(check.elementType("bias", biasType, input.getElementType(),
                                 "input")) ||
        failed(check.dimEquals("bias", biasType, 0, rows,
                               "(num_heads + 2 * num_kv_heads) * head_dim")))
      return failure();
  }
  if (failed(verifyHeads(check, "query", getQuery().getType(), input, "input",
                         hq, "num_heads", d)) ||
      failed(verifyHeads(check, "key", getKey().getType(), input, "input", hkv,
                         "num_kv_heads", d)))
    return failure();
  return verifyHeads(check, "value", getValue().getType(), input, "input", hkv,
                     "num_kv_heads", d);
}

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

/// Verifies a rank-1 `[B]` i32 per-sequence vector against the batch of
/// `batchSource`.
static LogicalResult verifyPerSequence(ShapeChecker &check, StringRef role,
                                       ShapedType type, ShapedType batchSource,
                                       StringRef batchRole) {
  if (failed(check.rank(role, type, 1)))
    return failure();
  return check.dimEquals(role, type, 0, batchSource.getDimSize(0),
                         (Twine("the batch size of ") + batchRole).str());
}

int64_t RopeOp::getEffectiveRotaryDim() {
  if (auto rotaryDim = getRotaryDim())
    return *rotaryDim;
  return getQuery().getType().getDimSize(2);
}

LogicalResult RopeOp::verify() {
  ShapeChecker check(*this);
  auto query = getQuery().getType();
  auto key = getKey().getType();
  if (failed(check.rank("query", query, 3)) ||
      failed(check.isStatic("query", query, 1, "num_heads")) ||
      failed(check.isStatic("query", query, 2, "head_dim")) ||
      failed(verifyHeads(check, "key", key, query, "query", key.getDimSize(1),
                         "", query.getDimSize(2))) ||
      failed(check.isStatic("key", key, 1, "num_kv_heads")) ||
      failed(verifyPerSequence(check, "positions", getPositions().getType(),
                               query, "query")))
    return failure();
  int64_t headDim = query.getDimSize(2);
  int64_t rotaryDim = getEffectiveRotaryDim();
  if (rotaryDim % 2 != 0 || rotaryDim > headDim)
    return emitOpError() << "rotary_dim (" << rotaryDim
                         << ") must be even and <= head_dim (" << headDim
                         << ")";
  double theta = getTheta().convertToDouble();
  if (!(theta > 1.0))
    return emitOpError() << "theta must be > 1, got " << theta;
  return success();
}

//===----------------------------------------------------------------------===//
// KVAppendOp / DecodeAttentionOp
//===----------------------------------------------------------------------===//

/// Verifies paged K/V caches `[num_pages, P, Hkv, D]` (static P > 0, Hkv, D)
/// and the `[B, max_pages]` block table against a `[B, heads, D]` tensor.
static LogicalResult verifyCache(Operation *op, ShapeChecker &check,
                                 MemRefType cache, ShapedType heads,
                                 StringRef headsRole, ShapedType blockTable) {
  if (failed(check.rank("key_cache", cache, 4)) ||
      failed(check.isStatic("key_cache", cache, 1, "page size")) ||
      failed(check.isStatic("key_cache", cache, 2, "num_kv_heads")) ||
      failed(check.isStatic("key_cache", cache, 3, "head_dim")))
    return failure();
  if (cache.getDimSize(1) <= 0)
    return op->emitOpError() << "page size (key_cache dimension 1) must be "
                                "> 0, got "
                             << cache.getDimSize(1);
  if (failed(check.elementType("key_cache", cache, heads.getElementType(),
                               headsRole)) ||
      failed(check.dimEquals("key_cache", cache, 3, heads.getDimSize(2),
                             (Twine("the head_dim of ") + headsRole).str())) ||
      failed(check.rank("block_table", blockTable, 2)))
    return failure();
  return check.dimEquals("block_table", blockTable, 0, heads.getDimSize(0),
                         (Twine("the batch size of ") + headsRole).str());
}

LogicalResult KVAppendOp::verify() {
  ShapeChecker check(*this);
  auto key = getKey().getType();
  auto cache = getKeyCache().getType();
  if (failed(check.rank("key", key, 3)) ||
      failed(verifyCache(*this, check, cache, key, "key",
                         getBlockTable().getType())) ||
      failed(check.dimEquals("key_cache", cache, 2, key.getDimSize(1),
                             "the num_kv_heads of key")))
    return failure();
  return verifyPerSequence(check, "positions", getPositions().getType(), key,
                           "key");
}

double DecodeAttentionOp::getEffectiveScale() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(
                   getQuery().getType().getDimSize(2)));
}

LogicalResult DecodeAttentionOp::verify() {
  ShapeChecker check(*this);
  auto query = getQuery().getType();
  auto cache = getKeyCache().getType();
  if (failed(check.rank("query", query, 3)) ||
      failed(check.isStatic("query", query, 1, "num_heads")) ||
      failed(check.isStatic("query", query, 2, "head_dim")) ||
      failed(verifyCache(*this, check, cache, query, "query",
                         getBlockTable().getType())) ||
      failed(verifyPerSequence(check, "seq_lens", getSeqLens().getType(),
                               query, "query")))
    return failure();
  int64_t hq = query.getDimSize(1), hkv = cache.getDimSize(2);
  if (hq % hkv != 0)
    return emitOpError() << "num_heads of query (" << hq
                         << ") must be a multiple of num_kv_heads of key_cache ("
                         << hkv << ")";
  if (auto scale = getScale(); scale && !(scale->convertToDouble() > 0.0))
    return emitOpError() << "scale must be > 0, got "
                         << scale->convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

YieldOp KernelOp::getYield() {
  return cast<YieldOp>(getBody().front().getTerminator());
}

LogicalResult KernelOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments()
                         << " arguments but the kernel has "
                         << getInputs().size() << " inputs";
  for (auto [i, arg, input] : llvm::enumerate(body.getArguments(),
                                              getInputs().getTypes()))
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
                         << ") but the kernel has results ("
                         << getResultTypes() << ")";
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
  llvm::interleaveComma(llvm::zip(body.getArguments(), getInputs()), p,
                        [&](auto pair) {
                          p << std::get<0>(pair) << " = " << std::get<1>(pair);
                        });
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

  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  return parser.parseRegion(*body, args);
}

#define GET_OP_CLASSES
#include "fusion/Dialect/Fusion/IR/FusionOps.cpp.inc"
