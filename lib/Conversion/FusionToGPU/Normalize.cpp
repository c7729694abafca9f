//===- Normalize.cpp - one token's RMSNorm / LayerNorm on a CTA -----------===//

#include "EmitterUtils.h"

using namespace mlir;
using namespace mlir::fusion;

static Value splat(ImplicitLocOpBuilder &b, Value scalar, int64_t width) {
  return vector::BroadcastOp::create(
      b, VectorType::get({width}, scalar.getType()), scalar);
}

/// scf.for over this thread's 8-element chunks of the row with one
/// vector<8xf32> accumulator; returns its horizontal sum (0 if no body
/// accumulates).
static Value forEachChunk(
    ImplicitLocOpBuilder &b, int64_t hidden, Value thread, int64_t threads,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value, Value)> body) {
  constexpr int64_t kWidth = 8;
  Value start = mulIndex(b, thread, kWidth);
  Value zero = splat(b, constF32(b, 0.0), kWidth);
  auto loop = scf::ForOp::create(
      b, start, constIndex(b, hidden), constIndex(b, threads * kWidth),
      ValueRange{zero},
      [&](OpBuilder &nested, Location loc, Value i, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value acc = body(ib, i, args[0]);
        scf::YieldOp::create(ib, acc ? acc : args[0]);
      });
  return vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                     loop.getResult(0));
}

void mlir::fusion::emitNormalizeToken(ImplicitLocOpBuilder &b,
                                      const NormSpec &spec, Value token,
                                      Value row, Value rowBase,
                                      Value writeOutputs, Value scratch,
                                      int64_t blockSize, bool warpOnly) {
  constexpr int64_t kWidth = 8;
  // Who cooperates: the whole CTA (block reductions) or one warp (shuffles
  // only, no barrier).
  Value thread = warpOnly ? laneId(b) : threadIdX(b);
  int64_t threads = warpOnly ? 32 : blockSize;
  auto reduce = [&](Value v) {
    return warpOnly ? warpReduce(b, v, ReduceKind::Sum)
                    : blockReduce(b, v, ReduceKind::Sum, scratch, blockSize);
  };
  const int64_t hidden = spec.hidden;
  Type act = spec.elementType;
  Value xBase = mulIndex(b, token, hidden);
  auto rowIndex = [&](ImplicitLocOpBuilder &ib, Value i) {
    return addIndex(ib, rowBase, i);
  };

  // Pass 1: h = round(x + r) (or x) into the row; residual_out; the sum of
  // squares (rmsnorm) or the sum (layernorm).
  Value total = forEachChunk(
      b, hidden, thread, threads,
      [&](ImplicitLocOpBuilder &ib, Value i, Value acc) -> Value {
        Value global = addIndex(ib, xBase, i);
        Value h = loadVector(ib, spec.input, global, kWidth);
        if (spec.residual) {
          Value r = loadVector(ib, spec.residual, global, kWidth);
          h = truncFromF32(
              ib, arith::AddFOp::create(ib, extToF32(ib, h), extToF32(ib, r)),
              act);
        }
        storeVector(ib, h, row, rowIndex(ib, i));
        if (spec.residualOut)
          ifThen(ib, writeOutputs, [&](ImplicitLocOpBuilder &tb) {
            storeVector(tb, h, spec.residualOut, global);
          });
        if (spec.kind == NormSpec::Kind::None)
          return nullptr;
        Value h32 = extToF32(ib, h);
        if (spec.kind == NormSpec::Kind::RMS)
          return arith::AddFOp::create(ib, acc,
                                       arith::MulFOp::create(ib, h32, h32));
        return arith::AddFOp::create(ib, acc, h32);
      });
  if (spec.kind == NormSpec::Kind::None)
    return;

  Value invHidden = constF32(b, static_cast<double>(hidden));
  Value eps = constF32(b, spec.epsilon);
  total = reduce(total);
  Value mean, inv;
  if (spec.kind == NormSpec::Kind::RMS) {
    Value meanSquare = arith::DivFOp::create(b, total, invHidden);
    inv = rsqrtF32(b, arith::AddFOp::create(b, meanSquare, eps));
  } else {
    mean = arith::DivFOp::create(b, total, invHidden);
    Value meanV = splat(b, mean, kWidth);
    Value squares = forEachChunk(
        b, hidden, thread, threads,
        [&](ImplicitLocOpBuilder &ib, Value i, Value acc) -> Value {
          Value h32 =
              extToF32(ib, loadVector(ib, row, rowIndex(ib, i), kWidth));
          Value d = arith::SubFOp::create(ib, h32, meanV);
          return arith::AddFOp::create(ib, acc,
                                       arith::MulFOp::create(ib, d, d));
        });
    squares = reduce(squares);
    Value var = arith::DivFOp::create(b, squares, invHidden);
    inv = rsqrtF32(b, arith::AddFOp::create(b, var, eps));
  }

  // Pass 2: y = round(...) into the row and, if asked, the normed output.
  Value invV = splat(b, inv, kWidth);
  Value meanV = mean ? splat(b, mean, kWidth) : Value();
  Value one = splat(b, constF32(b, 1.0), kWidth);
  forEachChunk(
      b, hidden, thread, threads,
      [&](ImplicitLocOpBuilder &ib, Value i, Value) -> Value {
        Value h32 = extToF32(ib, loadVector(ib, row, rowIndex(ib, i), kWidth));
        Value w32 = extToF32(ib, loadVector(ib, spec.weight, i, kWidth));
        if (spec.unitOffset && spec.kind == NormSpec::Kind::RMS)
          w32 = arith::AddFOp::create(ib, w32, one);
        Value y32;
        if (spec.kind == NormSpec::Kind::RMS) {
          y32 = arith::MulFOp::create(ib, arith::MulFOp::create(ib, h32, invV),
                                      w32);
        } else {
          Value centred = arith::SubFOp::create(ib, h32, meanV);
          y32 = arith::MulFOp::create(
              ib, arith::MulFOp::create(ib, centred, invV), w32);
          if (spec.bias)
            y32 = arith::AddFOp::create(
                ib, y32, extToF32(ib, loadVector(ib, spec.bias, i, kWidth)));
        }
        Value y = truncFromF32(ib, y32, act);
        storeVector(ib, y, row, rowIndex(ib, i));
        if (spec.normedOut)
          ifThen(ib, writeOutputs, [&](ImplicitLocOpBuilder &tb) {
            storeVector(tb, y, spec.normedOut, addIndex(tb, xBase, i));
          });
        return nullptr;
      });
}
