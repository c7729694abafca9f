//===- Norm.cpp - one token's RMSNorm / LayerNorm on a CTA or warp --------===//

#include "Norm.h"
#include "Abi.h"
#include "Embedding.h"
#include "Reduce.h"

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// scf.for over this thread's 8-element chunks of the row with one
/// vector<8xf32> accumulator; returns its horizontal sum (0 if no body
/// accumulates).
Value forEachChunk(
    ImplicitLocOpBuilder &b, int64_t hidden, Value thread, int64_t threads,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value, Value)> body) {
  Value start = mulI(b, thread, kVectorWidth);
  Value zero = splat(b, constF32(b, 0.0), kVectorWidth);
  SmallVector<Value> sum =
      forLoopWithValues(b, start, constIndex(b, hidden),
                        constIndex(b, threads * kVectorWidth), ValueRange{zero},
                        [&](ImplicitLocOpBuilder &ib, Value i,
                            ValueRange args) -> SmallVector<Value> {
                          Value acc = body(ib, i, args[0]);
                          return {acc ? acc : args[0]};
                        });
  return vector::ReductionOp::create(b, vector::CombiningKind::ADD, sum[0]);
}

/// Builds emitNormalizeToken: the element math shared by its two schedules
/// (all chunks in registers, or loops through `row`).
class NormRowEmitter {
public:
  NormRowEmitter(ImplicitLocOpBuilder &b, const NormSpec &spec, Value token,
                 Value row, Value rowBase, Value writeOutputs, Value scratch,
                 int64_t blockSize, bool warpOnly)
      : b(b), spec(spec), row(row), rowBase(rowBase),
        writeOutputs(writeOutputs), scratch(scratch), blockSize(blockSize),
        warpOnly(warpOnly), rms(spec.kind == NormSpec::Kind::RMS) {
    // Who cooperates: the whole CTA (block reductions) or one warp
    // (shuffles only, no barrier).
    thread = warpOnly ? laneId(b) : threadIdX(b);
    threads = warpOnly ? 32 : blockSize;
    xBase = mulI(b, token, spec.hidden);
    inputBase = spec.table ? getEmbeddingRowOffset(b, spec.ids, token,
                                                   spec.vocab, spec.hidden)
                           : xBase;
  }

  int64_t getThreads() const { return threads; }
  void emitInRegisters();
  void emitLooped();

private:
  ImplicitLocOpBuilder &b;
  const NormSpec &spec;
  Value row, rowBase, writeOutputs, scratch;
  int64_t blockSize;
  bool warpOnly, rms;
  /// Element offsets of the token's row in the outputs (and `input`,
  /// `residual`) and in the buffer x is read from (`input` or `table`).
  Value thread, xBase, inputBase;
  int64_t threads;
  /// 1 / sqrt(variance + eps) and (layernorm) the mean.
  Value inv, mean;

  Value reduce(Value v) {
    return warpOnly ? warpReduce(b, v, ReduceKind::Sum)
                    : blockReduce(b, v, ReduceKind::Sum, scratch, blockSize);
  }
  Value rowIndex(ImplicitLocOpBuilder &ib, Value i) {
    return addI(ib, rowBase, i);
  }
  /// h = round(x + r) (or x).
  Value makeH(ImplicitLocOpBuilder &ib, Value x, Value r) {
    if (!r)
      return x;
    return truncFromF32(ib, addF(ib, extToF32(ib, x), extToF32(ib, r)),
                        spec.elementType);
  }
  /// Pass-1 sum term: h^2 (rmsnorm) or h (layernorm).
  Value sumTerm(ImplicitLocOpBuilder &ib, Value h) {
    Value h32 = extToF32(ib, h);
    return rms ? mulF(ib, h32, h32) : h32;
  }
  Value squaredDeviation(ImplicitLocOpBuilder &ib, Value h, Value meanV) {
    Value d = subF(ib, extToF32(ib, h), meanV);
    return mulF(ib, d, d);
  }
  Value makeY(ImplicitLocOpBuilder &ib, Value h, Value w, Value bias,
              Value invV, Value meanV);
  void storeH(ImplicitLocOpBuilder &ib, Value i, Value h) {
    storeRowAndOutput(ib, i, h, spec.residualOut);
  }
  void storeY(ImplicitLocOpBuilder &ib, Value i, Value y) {
    storeRowAndOutput(ib, i, y, spec.normedOut);
  }
  /// The gathered embedding rows: x itself.
  void storeX(ImplicitLocOpBuilder &ib, Value i, Value x) {
    storeOutput(ib, i, x, spec.gatheredOut);
  }
  /// Writes `v` to `row` and, when `writeOutputs`, to `output` (if any).
  void storeRowAndOutput(ImplicitLocOpBuilder &ib, Value i, Value v,
                         Value output) {
    storeVector(ib, v, row, rowIndex(ib, i));
    storeOutput(ib, i, v, output);
  }
  /// Writes `v` to `output` (if any) when `writeOutputs`.
  void storeOutput(ImplicitLocOpBuilder &ib, Value i, Value v, Value output) {
    if (output)
      ifThen(ib, writeOutputs, [&](ImplicitLocOpBuilder &tb) {
        storeVector(tb, v, output, addI(tb, xBase, i));
      });
  }
  /// x of chunk `i` (element offset in the row): the input or the token's
  /// table row, or the rounded in-order sum of the partials.
  Value loadX(ImplicitLocOpBuilder &ib, Value i) {
    if (!spec.partials)
      return loadVector(ib, spec.table ? spec.table : spec.input,
                        addI(ib, inputBase, i), kVectorWidth);
    Value sum;
    for (int64_t g = 0; g < spec.numPartials; ++g) {
      Value at = addI(ib, mulI(ib, xBase, spec.numPartials),
                      addI(ib, i, g * spec.hidden));
      Value p = loadVector(ib, spec.partials, at, kVectorWidth);
      sum = sum ? addF(ib, sum, p) : p;
    }
    return truncFromF32(ib, sum, spec.elementType);
  }
  Value loadOptional(ImplicitLocOpBuilder &ib, Value buffer, Value i) {
    return buffer ? loadVector(ib, buffer, i, kVectorWidth) : Value();
  }
  void statistics(Value total, llvm::function_ref<Value(Value)> sumSquares);
};

} // namespace

/// y = round(...) from h, the norm weight and bias.
Value NormRowEmitter::makeY(ImplicitLocOpBuilder &ib, Value h, Value w,
                            Value bias, Value invV, Value meanV) {
  Value h32 = extToF32(ib, h);
  Value w32 = getNormWeightF32(ib, spec, w);
  Value y32;
  if (rms) {
    y32 = mulF(ib, mulF(ib, h32, invV), w32);
  } else {
    Value centred = subF(ib, h32, meanV);
    y32 = mulF(ib, mulF(ib, centred, invV), w32);
    if (bias)
      y32 = addF(ib, y32, extToF32(ib, bias));
  }
  return truncFromF32(ib, y32, spec.elementType);
}

/// Sets `inv` (and `mean`) from the row's sum `total` (of h^2 or h) and,
/// for layernorm, the sum of squared deviations `sumSquares(mean)`.
void NormRowEmitter::statistics(Value total,
                                llvm::function_ref<Value(Value)> sumSquares) {
  Value hidden = constF32(b, static_cast<double>(spec.hidden));
  Value eps = constF32(b, spec.epsilon);
  total = reduce(total);
  if (rms) {
    inv = getRMSInverse(b, spec, total);
    return;
  }
  mean = divF(b, total, hidden);
  Value squares = reduce(sumSquares(splat(b, mean, kVectorWidth)));
  Value var = divF(b, squares, hidden);
  inv = rsqrtF32(b, addF(b, var, eps));
}

/// Every thread has at most a few chunks: all loads (x, residual, norm
/// weight and bias) are issued at once, one memory round trip, and h stays in
/// registers between the passes. Where the row is not a whole number of
/// strides, the last chunk is guarded: a thread past the row's end reads the
/// row's first chunk instead (always inside the buffers), adds zeros and
/// stores nothing.
void NormRowEmitter::emitInRegisters() {
  const int64_t stride = threads * kVectorWidth;
  const int64_t chunks = llvm::divideCeil(spec.hidden, stride);
  SmallVector<Value> at, inRow, xs, rs, ws, bs, hs;
  Value first = mulI(b, thread, kVectorWidth);
  for (int64_t c = 0; c < chunks; ++c) {
    at.push_back(addI(b, first, c * stride));
    inRow.push_back((c + 1) * stride <= spec.hidden
                        ? Value()
                        : cmpI(b, CmpIPredicate::ult, at.back(),
                               constIndex(b, spec.hidden)));
    Value read = inRow.back()
                     ? select(b, inRow.back(), at.back(), constIndex(b, 0))
                     : at.back();
    Value global = addI(b, xBase, read);
    xs.push_back(loadX(b, read));
    rs.push_back(loadOptional(b, spec.residual, global));
    if (spec.kind != NormSpec::Kind::None) {
      ws.push_back(loadVector(b, spec.weight, read, kVectorWidth));
      bs.push_back(loadOptional(b, spec.bias, read));
    }
  }
  // Stores of chunk c, only where it is inside the row.
  auto guarded = [&](size_t c,
                     llvm::function_ref<void(ImplicitLocOpBuilder &)> body) {
    if (inRow[c])
      ifThen(b, inRow[c], body);
    else
      body(b);
  };
  Value zero = splat(b, constF32(b, 0.0), kVectorWidth);
  // A sum term of chunk c, zero past the row's end.
  auto masked = [&](size_t c, Value term) {
    return inRow[c] ? select(b, inRow[c], term, zero) : term;
  };
  Value total = zero;
  for (size_t c = 0; c < at.size(); ++c) {
    hs.push_back(makeH(b, xs[c], rs[c]));
    guarded(c, [&](ImplicitLocOpBuilder &gb) {
      storeX(gb, at[c], xs[c]);
      storeH(gb, at[c], hs[c]);
    });
    if (spec.kind != NormSpec::Kind::None)
      total = addF(b, total, masked(c, sumTerm(b, hs[c])));
  }
  if (spec.kind == NormSpec::Kind::None)
    return;
  auto horizontal = [&](Value v) -> Value {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD, v);
  };
  statistics(horizontal(total), [&](Value meanV) {
    Value squares = zero;
    for (size_t c = 0; c < hs.size(); ++c)
      squares = addF(b, squares, masked(c, squaredDeviation(b, hs[c], meanV)));
    return horizontal(squares);
  });
  Value invV = splat(b, inv, kVectorWidth);
  Value meanV = mean ? splat(b, mean, kVectorWidth) : Value();
  for (size_t c = 0; c < at.size(); ++c)
    guarded(c, [&](ImplicitLocOpBuilder &gb) {
      storeY(gb, at[c], makeY(gb, hs[c], ws[c], bs[c], invV, meanV));
    });
}

/// The general case: loops over the chunks; h goes through `row`.
void NormRowEmitter::emitLooped() {
  const int64_t hidden = spec.hidden;
  Value total = forEachChunk(
      b, hidden, thread, threads,
      [&](ImplicitLocOpBuilder &ib, Value i, Value acc) -> Value {
        Value global = addI(ib, xBase, i);
        Value x = loadX(ib, i);
        storeX(ib, i, x);
        Value h = makeH(ib, x, loadOptional(ib, spec.residual, global));
        storeH(ib, i, h);
        if (spec.kind == NormSpec::Kind::None)
          return nullptr;
        return addF(ib, acc, sumTerm(ib, h));
      });
  if (spec.kind == NormSpec::Kind::None)
    return;
  statistics(total, [&](Value meanV) {
    return forEachChunk(
        b, hidden, thread, threads,
        [&](ImplicitLocOpBuilder &ib, Value i, Value acc) -> Value {
          Value h = loadVector(ib, row, rowIndex(ib, i), kVectorWidth);
          return addF(ib, acc, squaredDeviation(ib, h, meanV));
        });
  });
  Value invV = splat(b, inv, kVectorWidth);
  Value meanV = mean ? splat(b, mean, kVectorWidth) : Value();
  forEachChunk(b, hidden, thread, threads,
               [&](ImplicitLocOpBuilder &ib, Value i, Value) -> Value {
                 Value h = loadVector(ib, row, rowIndex(ib, i), kVectorWidth);
                 storeY(ib, i,
                        makeY(ib, h,
                              loadVector(ib, spec.weight, i, kVectorWidth),
                              loadOptional(ib, spec.bias, i), invV, meanV));
                 return nullptr;
               });
}

void mlir::fusion::emitNormalizeToken(ImplicitLocOpBuilder &b,
                                      const NormSpec &spec, Value token,
                                      Value row, Value rowBase,
                                      Value writeOutputs, Value scratch,
                                      int64_t blockSize, bool warpOnly,
                                      int64_t maxRegisterChunks) {
  NormRowEmitter emitter(b, spec, token, row, rowBase, writeOutputs, scratch,
                         blockSize, warpOnly);
  const int64_t stride = emitter.getThreads() * kVectorWidth;
  if (static_cast<int64_t>(llvm::divideCeil(spec.hidden, stride)) <=
      maxRegisterChunks)
    emitter.emitInRegisters();
  else
    emitter.emitLooped();
}

Value mlir::fusion::getRMSInverse(ImplicitLocOpBuilder &b, const NormSpec &spec,
                                  Value sumSquares) {
  Value meanSquare =
      divF(b, sumSquares, constF32(b, static_cast<double>(spec.hidden)));
  return rsqrtF32(b, addF(b, meanSquare, constF32(b, spec.epsilon)));
}

Value mlir::fusion::getNormWeightF32(ImplicitLocOpBuilder &b,
                                     const NormSpec &spec, Value w) {
  Value w32 = extToF32(b, w);
  if (!spec.unitOffset || spec.kind != NormSpec::Kind::RMS)
    return w32;
  Value one = constF32(b, 1.0);
  if (auto vector = dyn_cast<VectorType>(w32.getType()))
    one = splat(b, one, vector.getNumElements());
  return addF(b, w32, one);
}

/// Binds x of `spec` to `args`: the norm's `input` where it is a kernel
/// operand, else the operands of the op that makes it in the kernel (a
/// fusion.sum_partials or fusion.embedding).
static void bindNormInput(NormSpec &spec, Value input, const KernelArgs &args) {
  spec.input = args.input(input);
  if (auto sum = input.getDefiningOp<SumPartialsOp>()) {
    spec.partials = args.input(sum.getInput());
    spec.numPartials = sum.getInput().getType().getDimSize(1);
  }
  if (auto embedding = input.getDefiningOp<EmbeddingOp>()) {
    spec.ids = args.input(embedding.getTokens());
    spec.table = args.input(embedding.getTable());
    spec.vocab = embedding.getTable().getType().getDimSize(0);
    spec.gatheredOut = args.output(embedding.getResult());
  }
}

NormSpec mlir::fusion::getNormSpec(Operation *norm, const KernelArgs &args) {
  NormSpec spec;
  if (auto rms = dyn_cast_or_null<RMSNormOp>(norm)) {
    spec.kind = NormSpec::Kind::RMS;
    spec.epsilon = rms.getEpsilon().convertToDouble();
    spec.unitOffset = rms.getUnitOffset();
    bindNormInput(spec, rms.getInput(), args);
    spec.residual = args.input(rms.getResidual());
    spec.weight = args.input(rms.getWeight());
    spec.residualOut = args.output(rms.getResidualOut());
    spec.normedOut = args.output(rms.getResult());
  } else if (auto layer = dyn_cast_or_null<LayerNormOp>(norm)) {
    spec.kind = NormSpec::Kind::Layer;
    spec.epsilon = layer.getEpsilon().convertToDouble();
    bindNormInput(spec, layer.getInput(), args);
    spec.weight = args.input(layer.getWeight());
    spec.bias = args.input(layer.getBias());
    spec.normedOut = args.output(layer.getResult());
  }
  return spec;
}
