//===- EmbeddingKernel.cpp - fusion.embedding alone -----------------------===//
//
// The token embedding (`ref::embedding`): row b of the result is row
// tokens[b] of the [V, H] table, a bit copy in 16-byte vectors. Grid
// [batch, chunks]: CTA (b, c) copies vectors c * threads ... of token b's
// row, one per thread. The id is clamped to [0, V - 1] before the 64-bit row
// offset is formed (the op's memory-safety rule, getEmbeddingRowOffset): a
// bad id copies some row of the table and never reads outside it. Under
// `decode` an embedding that layer 0's norm normalises is not this kernel
// but the first op of that norm's projection kernel (--fusion-form-kernels
// rule 7), which gathers the rows the same way.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/Embedding.h"
#include "RowKernel.h"

using namespace mlir;
using namespace mlir::fusion;

/// Copies vector `vec` (< H / 8) of row clamp(tokens[token], 0, V - 1) of
/// `table` to row `token` of `out`.
static void emitCopyVector(ImplicitLocOpBuilder &b, Value tokens, Value table,
                           Value out, Value token, Value vec, int64_t vocab,
                           int64_t hidden) {
  Value rowBase = getEmbeddingRowOffset(b, tokens, token, vocab, hidden);
  Value column = mulI(b, vec, kVectorWidth);
  Value row = loadVector(b, table, addI(b, rowBase, column), kVectorWidth);
  storeVector(b, row, out, addI(b, mulI(b, token, hidden), column));
}

FailureOr<KernelLaunch>
mlir::fusion::emitEmbeddingKernel(KernelOp kernel, const TargetInfo &target,
                                  gpu::GPUModuleOp module) {
  auto op = cast<EmbeddingOp>(kernel.getBody().front().front());
  auto tableType = cast<ShapedType>(op.getTable().getType());
  const int64_t vocab = tableType.getDimSize(0);
  const int64_t hidden = tableType.getDimSize(1);
  if (hidden % kVectorWidth != 0)
    return kernel.emitOpError("embedding: hidden size ")
           << hidden
           << " is not a multiple of 8 (rows are copied in 16-byte vectors of "
              "8 elements)";
  Value tokens, table, out;
  return emitRowKernel(
      kernel, module, target, RowKind::embedding, hidden / kVectorWidth,
      kVectorWidth,
      [&](const KernelArgs &args) -> LogicalResult {
        tokens = args.input(op.getTokens());
        table = args.input(op.getTable());
        out = args.output(op.getResult());
        if (!tokens || !table || !out)
          return kernel.emitOpError(
              "embedding: the tokens and the table must be kernel operands "
              "and the result a kernel result");
        return success();
      },
      [&](ImplicitLocOpBuilder &b, Value token, Value vec) {
        emitCopyVector(b, tokens, table, out, token, vec, vocab, hidden);
      });
}
