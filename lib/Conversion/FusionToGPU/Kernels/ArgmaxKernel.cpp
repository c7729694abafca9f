//===- ArgmaxKernel.cpp - fusion.argmax alone -----------------------------===//
//
// Greedy sampling (`ref::argmax`): the index of the largest logit of each
// [V] row, exact and deterministic: values compare exactly (f16/bf16 widen
// to f32 without rounding, -0 == +0), ties go to the lowest index, NaN is
// never chosen and an all-NaN row gives 0.
//
// One CTA per row (grid [batch]). Thread t scans vectors t, t + T, ... of
// the row (T threads, vectors of 16 bytes when V % 8 == 0, else of the
// widest of 4, 2, 1 elements dividing V), issuing kArgmaxUnroll loads before
// it scans them. For each vector it takes the elements' max (maxnum: NaN
// only if all are NaN, packed f16x2/bf16x2 max on sm_80+) and keeps it with
// the vector's position when it is a number greater than the best so far
// (or the best is NaN). A thread visits its vectors in increasing order, so
// its best vector is the first holding its largest value; it then reloads
// that vector and takes the first element equal to the value. The CTA
// reduces the threads' (value, index) candidates with blockArgmax, whose
// order (largest value, then lowest index; NaN last) makes the result
// independent of the reduction order. A thread that saw only NaN offers
// (NaN, 0), so an all-NaN row gives 0.
//
//===----------------------------------------------------------------------===//

#include "../Fragments/Abi.h"
#include "../Fragments/Reduce.h"
#include "../KernelEmitter.h"
#include "../Schedule/ElementwiseSchedule.h"

#include <limits>

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// One row's scan: the shape, the logits and this thread's best (value,
/// vector) so far.
struct ArgmaxRow {
  int64_t width = 0, vectors = 0, threads = 0;
  Value logits, rowBase;
  /// f32 value (NaN until a number is seen) and its vector's position.
  Value best, bestVector;

  /// Vector `vec` of the row (`width` elements of the logits' type).
  Value load(ImplicitLocOpBuilder &b, Value vec) {
    return loadVector(b, logits, addI(b, rowBase, mulI(b, vec, width)), width);
  }
  Value vectorMax(ImplicitLocOpBuilder &b, Value vector);
  void update(ImplicitLocOpBuilder &b, Value max, Value vec);
  void emitScan(ImplicitLocOpBuilder &b, Value tid, int64_t unroll);
  Value locate(ImplicitLocOpBuilder &b);
};

} // namespace

/// The max of `vector`'s elements as f32 (maxnum halving the vector: packed
/// f16x2 / bf16x2 where the target has it); NaN only if all are NaN.
Value ArgmaxRow::vectorMax(ImplicitLocOpBuilder &b, Value vector) {
  for (int64_t n = width; n > 1; n /= 2) {
    auto half = [&](int64_t from) {
      return vector::ShuffleOp::create(
          b, vector, vector, llvm::to_vector(llvm::seq(from, from + n / 2)));
    };
    Value low = half(0);
    Value high = half(n / 2);
    vector = maxF32(b, low, high);
  }
  return extToF32(b, extract(b, vector, 0));
}

/// Takes (max, vec) as the best when max is a number and greater than the
/// best, or the best is NaN.
void ArgmaxRow::update(ImplicitLocOpBuilder &b, Value max, Value vec) {
  Value isNumber = cmpF(b, CmpFPredicate::ORD, max, max);
  Value better = andI(b, isNumber, cmpF(b, CmpFPredicate::UGT, max, best));
  best = select(b, better, max, best);
  bestVector = select(b, better, vec, bestVector);
}

/// This thread's vectors tid, tid + threads, ... in increasing order: first
/// in steps of `unroll` vectors loaded before they are scanned, then the
/// rest one at a time.
void ArgmaxRow::emitScan(ImplicitLocOpBuilder &b, Value tid, int64_t unroll) {
  const int64_t step = threads * unroll;
  const int64_t unrolled = vectors / step * step;
  auto scan = [&](ImplicitLocOpBuilder &ib, Value first, int64_t count,
                  ValueRange args) -> SmallVector<Value> {
    best = args[0];
    bestVector = args[1];
    SmallVector<Value> vecs, loaded;
    for (int64_t u = 0; u < count; ++u) {
      vecs.push_back(addI(ib, first, u * threads));
      loaded.push_back(load(ib, vecs.back()));
    }
    for (int64_t u = 0; u < count; ++u)
      update(ib, vectorMax(ib, loaded[u]), vecs[u]);
    return {best, bestVector};
  };
  // Loops over [lb, ub) in steps of `stride` vectors, `count` per step.
  auto loop = [&](Value lb, int64_t ub, int64_t stride, int64_t count,
                  ValueRange init) {
    Value upper = constIndex(b, ub);
    Value strideValue = constIndex(b, stride);
    return forLoopWithValues(
        b, lb, upper, strideValue, init,
        [&](ImplicitLocOpBuilder &ib, Value v, ValueRange args) {
          return scan(ib, v, count, args);
        });
  };
  SmallVector<Value> state{best, bestVector};
  if (unrolled > 0)
    state = loop(tid, unrolled, step, unroll, state);
  if (unrolled < vectors)
    state = loop(addI(b, tid, unrolled), vectors, threads, 1, state);
  best = state[0];
  bestVector = state[1];
}

/// The index (i32) of the first element of the best vector equal to the
/// best value; 0 when the best is NaN (the vector is then vector 0).
Value ArgmaxRow::locate(ImplicitLocOpBuilder &b) {
  Value values = extToF32(b, load(b, bestVector));
  Value first = constIndex(b, 0);
  for (int64_t i = width - 1; i >= 0; --i) {
    Value equal = cmpF(b, CmpFPredicate::OEQ, extract(b, values, i), best);
    first = select(b, equal, constIndex(b, i), first);
  }
  return indexToI32(b, addI(b, mulI(b, bestVector, width), first));
}

FailureOr<KernelLaunch>
mlir::fusion::emitArgmaxKernel(KernelOp kernel, const TargetInfo &target,
                               gpu::GPUModuleOp module) {
  auto op = cast<ArgmaxOp>(kernel.getBody().front().front());
  const int64_t vocab =
      cast<ShapedType>(op.getLogits().getType()).getDimSize(1);
  ArgmaxRow row;
  row.width = chooseRowVectorWidth(vocab);
  row.vectors = vocab / row.width;
  row.threads = chooseArgmaxBlockSize(row.vectors);

  KernelLaunch launch;
  launch.entry = kernel.getSymName().str();
  launch.params = getDefaultKernelParams(kernel);
  launch.blockSize = row.threads;
  launch.grid = {std::string(contract::dim::kBatch), "1", "1"};
  OpBuilder builder(kernel.getContext());
  gpu::GPUFuncOp func =
      createKernelFunc(builder, kernel.getLoc(), module, launch.entry,
                       launch.params, row.threads, target);
  KernelArgs args(kernel, func, launch.params);
  row.logits = args.input(op.getLogits());
  Value out = args.output(op.getResult());
  if (!row.logits || !out)
    return kernel.emitOpError("argmax: the logits must be a kernel operand "
                              "and the result a kernel result");

  ImplicitLocOpBuilder b(kernel.getLoc(), builder);
  // The per-warp candidates (none with a single warp).
  Value scratchValues, scratchIndices;
  if (row.threads > 32) {
    scratchValues = addWorkgroupBuffer(func, b.getF32Type(), row.threads / 32);
    scratchIndices = addWorkgroupBuffer(func, b.getI32Type(), row.threads / 32);
  }
  Value token = blockIdX(b);
  Value tid = threadIdX(b);
  row.rowBase = mulI(b, token, vocab);
  row.best = constF32(b, std::numeric_limits<double>::quiet_NaN());
  row.bestVector = constIndex(b, 0);
  row.emitScan(b, tid, kArgmaxUnroll);
  Value index = blockArgmax(b, row.best, row.locate(b), scratchValues,
                            scratchIndices, row.threads)
                    .second;
  ifThen(b, cmpI(b, CmpIPredicate::eq, tid, 0),
         [&](ImplicitLocOpBuilder &tb) { storeScalar(tb, index, out, token); });
  FailureOr<RowScheduleAttr> schedule = getCheckedSchedule<RowScheduleAttr>(
      kernel, RowKind::argmax, row.threads, /*chunks=*/int64_t(1), row.width,
      kArgmaxUnroll);
  if (failed(schedule))
    return failure();
  launch.schedule = *schedule;
  return launch;
}
