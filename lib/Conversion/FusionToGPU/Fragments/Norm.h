//===- Norm.h - one token's RMSNorm / LayerNorm -----------------*- C++ -*-===//
//
// The normalisation of one token row shared by the projection kernels and
// the norm kernel (design.md 2.1 numerics: fp32 sums, the output rounded to
// the activation type).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_NORM_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_NORM_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

class KernelArgs;

/// One token's normalisation as the ops define it (design.md 2.1):
/// rmsnorm `y = round((h32 * (1 / sqrt(sum(h32^2) / H + eps))) * w32)`
/// (w32 + 1 with unit_offset), layernorm
/// `y = round((h32 - mean) * (1 / sqrt(var + eps)) * w32 + b32)` with a
/// two-pass variance, where `h = round(x + residual)` with a residual and
/// `h = x` otherwise; `None` only copies x. Sums in fp32. x is row `token`
/// of `input`, the sum of `partials`, or a row of an embedding `table`.
struct NormSpec {
  enum class Kind { None, RMS, Layer };
  Kind kind = Kind::None;
  double epsilon = 0.0;
  bool unitOffset = false;
  int64_t hidden = 0;
  Type elementType;
  /// Flat buffers (gpu.func arguments); residual and bias may be null.
  Value input, residual, weight, bias;
  /// Instead of `input` (then null): x = round(sum of the `numPartials` f32
  /// rows partials[token, 0..numPartials), [B, numPartials, hidden], added in
  /// order), the fusion.sum_partials the norm takes its input from.
  Value partials;
  int64_t numPartials = 0;
  /// Instead of `input` (then null): x of token t = row clamp(ids[t], 0,
  /// vocab - 1) of `table` ([vocab, hidden]; `ids` [B] i32), the
  /// fusion.embedding the norm takes its input from
  /// (getEmbeddingRowOffset: `ids` is read after griddepcontrol.wait only).
  Value ids, table;
  int64_t vocab = 0;
  /// Outputs written when `writeOutputs` holds (may be null): `gatheredOut`
  /// is the embedding's result (x itself, a bit copy of the table row).
  Value residualOut, normedOut, gatheredOut;
};

/// Normalises row `token` (index) of `spec.input` with the whole CTA
/// (`blockSize` threads, 8 elements per thread and step; needs
/// hidden % 8 == 0), or with the calling warp alone if `warpOnly` (then
/// `scratch` is unused and no barrier is emitted), into `row` (a buffer of the
/// activation type, e.g. shared memory) at element offset `rowBase`. Each
/// thread reads back only the elements it wrote, so `row` needs no barrier for
/// this thread's later use; other threads need a barrier. `scratch` is a
/// workgroup f32 buffer of blockSize/32 elements. Must be called by every
/// thread of the CTA (of the warp if `warpOnly`). When a thread has at most
/// `maxRegisterChunks` 8-element chunks (the last one may be partial: the
/// threads past the row's end skip it), they are unrolled and all loaded at
/// once (one memory round trip; 4 chunks cost about 40 registers); otherwise
/// a loop goes through `row`.
void emitNormalizeToken(ImplicitLocOpBuilder &b, const NormSpec &spec,
                        Value token, Value row, Value rowBase,
                        Value writeOutputs, Value scratch, int64_t blockSize,
                        bool warpOnly = false, int64_t maxRegisterChunks = 4);

/// The RMSNorm scale `1 / sqrt(sumSquares / H + eps)` (f32) of a token from
/// the fp32 sum of its h^2, with a correctly rounded sqrt and division.
Value getRMSInverse(ImplicitLocOpBuilder &b, const NormSpec &spec,
                    Value sumSquares);

/// The norm weight `w` (activation type, scalar or vector) as the f32 factor
/// the normalised row is multiplied by: w32, or w32 + 1 for an RMSNorm with
/// unit_offset.
Value getNormWeightF32(ImplicitLocOpBuilder &b, const NormSpec &spec, Value w);

/// The NormSpec of `norm` (a fusion.rmsnorm or fusion.layernorm; null: a
/// `None` spec) with its buffers bound to `args` (null where a value is not
/// a kernel operand or result; `partials` where the norm's input is a
/// fusion.sum_partials of a kernel operand, `ids` and `table` where it is a
/// fusion.embedding of kernel operands); `hidden` and `elementType` are the
/// caller's.
NormSpec getNormSpec(Operation *norm, const KernelArgs &args);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_NORM_H
