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
                                      int64_t blockSize, bool warpOnly,
                                      int64_t maxRegisterChunks) {
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
  const bool rms = spec.kind == NormSpec::Kind::RMS;
  Value one = splat(b, constF32(b, 1.0), kWidth);

  // The element math, shared by both schedules below.
  // h = round(x + r) (or x).
  auto makeH = [&](ImplicitLocOpBuilder &ib, Value x, Value r) {
    if (!r)
      return x;
    return truncFromF32(
        ib, arith::AddFOp::create(ib, extToF32(ib, x), extToF32(ib, r)), act);
  };
  // Pass-1 sum term: h^2 (rmsnorm) or h (layernorm).
  auto sumTerm = [&](ImplicitLocOpBuilder &ib, Value h) -> Value {
    Value h32 = extToF32(ib, h);
    return rms ? arith::MulFOp::create(ib, h32, h32) : h32;
  };
  auto squaredDeviation = [&](ImplicitLocOpBuilder &ib, Value h, Value meanV) {
    Value d = arith::SubFOp::create(ib, extToF32(ib, h), meanV);
    return arith::MulFOp::create(ib, d, d);
  };
  // y = round(...) from h, the norm weight and bias.
  auto makeY = [&](ImplicitLocOpBuilder &ib, Value h, Value w, Value bias,
                   Value invV, Value meanV) {
    Value h32 = extToF32(ib, h);
    Value w32 = extToF32(ib, w);
    if (spec.unitOffset && rms)
      w32 = arith::AddFOp::create(ib, w32, one);
    Value y32;
    if (rms) {
      y32 =
          arith::MulFOp::create(ib, arith::MulFOp::create(ib, h32, invV), w32);
    } else {
      Value centred = arith::SubFOp::create(ib, h32, meanV);
      y32 = arith::MulFOp::create(ib, arith::MulFOp::create(ib, centred, invV),
                                  w32);
      if (bias)
        y32 = arith::AddFOp::create(ib, y32, extToF32(ib, bias));
    }
    return truncFromF32(ib, y32, act);
  };
  // Writes h (row, residual_out) or y (row, normed output) of chunk `i`.
  auto storeH = [&](ImplicitLocOpBuilder &ib, Value i, Value h) {
    storeVector(ib, h, row, rowIndex(ib, i));
    if (spec.residualOut)
      ifThen(ib, writeOutputs, [&](ImplicitLocOpBuilder &tb) {
        storeVector(tb, h, spec.residualOut, addIndex(tb, xBase, i));
      });
  };
  auto storeY = [&](ImplicitLocOpBuilder &ib, Value i, Value y) {
    storeVector(ib, y, row, rowIndex(ib, i));
    if (spec.normedOut)
      ifThen(ib, writeOutputs, [&](ImplicitLocOpBuilder &tb) {
        storeVector(tb, y, spec.normedOut, addIndex(tb, xBase, i));
      });
  };
  auto loadOptional = [&](ImplicitLocOpBuilder &ib, Value buffer, Value i) {
    return buffer ? loadVector(ib, buffer, i, kWidth) : Value();
  };
  auto statistics = [&](Value total, Value &inv, Value &mean,
                        llvm::function_ref<Value(Value)> sumSquares) {
    Value invHidden = constF32(b, static_cast<double>(hidden));
    Value eps = constF32(b, spec.epsilon);
    total = reduce(total);
    if (rms) {
      Value meanSquare = arith::DivFOp::create(b, total, invHidden);
      inv = rsqrtF32(b, arith::AddFOp::create(b, meanSquare, eps));
      return;
    }
    mean = arith::DivFOp::create(b, total, invHidden);
    Value squares = reduce(sumSquares(splat(b, mean, kWidth)));
    Value var = arith::DivFOp::create(b, squares, invHidden);
    inv = rsqrtF32(b, arith::AddFOp::create(b, var, eps));
  };
  Value inv, mean;

  const int64_t stride = threads * kWidth;
  if (hidden % stride == 0 && hidden / stride <= maxRegisterChunks) {
    // Every thread has the same few chunks: all loads (x, residual, norm
    // weight and bias) are issued at once, one memory round trip, and h
    // stays in registers between the passes.
    SmallVector<Value> at, xs, rs, ws, bs, hs;
    for (int64_t c = 0; c < hidden / stride; ++c) {
      at.push_back(addIndex(b, mulIndex(b, thread, kWidth), c * stride));
      Value global = addIndex(b, xBase, at.back());
      xs.push_back(loadVector(b, spec.input, global, kWidth));
      rs.push_back(loadOptional(b, spec.residual, global));
      if (spec.kind != NormSpec::Kind::None) {
        ws.push_back(loadVector(b, spec.weight, at.back(), kWidth));
        bs.push_back(loadOptional(b, spec.bias, at.back()));
      }
    }
    Value total = splat(b, constF32(b, 0.0), kWidth);
    for (size_t c = 0; c < at.size(); ++c) {
      hs.push_back(makeH(b, xs[c], rs[c]));
      storeH(b, at[c], hs[c]);
      total = arith::AddFOp::create(b, total, sumTerm(b, hs[c]));
    }
    if (spec.kind == NormSpec::Kind::None)
      return;
    auto horizontal = [&](Value v) {
      return vector::ReductionOp::create(b, vector::CombiningKind::ADD, v);
    };
    statistics(horizontal(total), inv, mean, [&](Value meanV) {
      Value squares = splat(b, constF32(b, 0.0), kWidth);
      for (Value h : hs)
        squares =
            arith::AddFOp::create(b, squares, squaredDeviation(b, h, meanV));
      return horizontal(squares);
    });
    Value invV = splat(b, inv, kWidth);
    Value meanV = mean ? splat(b, mean, kWidth) : Value();
    for (size_t c = 0; c < at.size(); ++c)
      storeY(b, at[c], makeY(b, hs[c], ws[c], bs[c], invV, meanV));
    return;
  }

  // General case: loops over the chunks; h goes through `row`.
  Value total =
      forEachChunk(b, hidden, thread, threads,
                   [&](ImplicitLocOpBuilder &ib, Value i, Value acc) -> Value {
                     Value global = addIndex(ib, xBase, i);
                     Value h =
                         makeH(ib, loadVector(ib, spec.input, global, kWidth),
                               loadOptional(ib, spec.residual, global));
                     storeH(ib, i, h);
                     if (spec.kind == NormSpec::Kind::None)
                       return nullptr;
                     return arith::AddFOp::create(ib, acc, sumTerm(ib, h));
                   });
  if (spec.kind == NormSpec::Kind::None)
    return;
  statistics(total, inv, mean, [&](Value meanV) {
    return forEachChunk(
        b, hidden, thread, threads,
        [&](ImplicitLocOpBuilder &ib, Value i, Value acc) -> Value {
          Value h = loadVector(ib, row, rowIndex(ib, i), kWidth);
          return arith::AddFOp::create(ib, acc, squaredDeviation(ib, h, meanV));
        });
  });
  Value invV = splat(b, inv, kWidth);
  Value meanV = mean ? splat(b, mean, kWidth) : Value();
  forEachChunk(b, hidden, thread, threads,
               [&](ImplicitLocOpBuilder &ib, Value i, Value) -> Value {
                 Value h = loadVector(ib, row, rowIndex(ib, i), kWidth);
                 storeY(ib, i,
                        makeY(ib, h, loadVector(ib, spec.weight, i, kWidth),
                              loadOptional(ib, spec.bias, i), invV, meanV));
                 return nullptr;
               });
}
