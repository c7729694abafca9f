//===- Reduce.cpp - warp and CTA reductions -------------------------------===//

#include "Reduce.h"

#include <limits>

using namespace mlir;
using namespace mlir::fusion;

static Value combine(ImplicitLocOpBuilder &b, Value lhs, Value rhs,
                     ReduceKind kind) {
  if (kind == ReduceKind::Sum)
    return addF(b, lhs, rhs);
  return maxNumF(b, lhs, rhs);
}

Value mlir::fusion::warpReduce(ImplicitLocOpBuilder &b, Value value,
                               ReduceKind kind, int64_t width) {
  for (int32_t offset = width / 2; offset >= 1; offset /= 2)
    value = combine(b, value, shuffleXor(b, value, offset), kind);
  return value;
}

void mlir::fusion::warpReduceEach(ImplicitLocOpBuilder &b,
                                  MutableArrayRef<Value> values,
                                  ReduceKind kind, int64_t width) {
  for (int32_t offset = width / 2; offset >= 1; offset /= 2)
    for (Value &value : values)
      value = combine(b, value, shuffleXor(b, value, offset), kind);
}

Value mlir::fusion::blockReduce(ImplicitLocOpBuilder &b, Value value,
                                ReduceKind kind, Value scratch,
                                int64_t blockSize) {
  int64_t numWarps = blockSize / 32;
  value = warpReduce(b, value, kind);
  if (numWarps == 1)
    return value;
  Value lane = laneId(b);
  Value warp = warpId(b);
  Value isLane0 = cmpI(b, CmpIPredicate::eq, lane, constIndex(b, 0));
  ifThen(b, isLane0, [&](ImplicitLocOpBuilder &tb) {
    storeScalar(tb, value, scratch, warp);
  });
  barrier(b);
  Value inRange = cmpI(b, CmpIPredicate::ult, lane, constIndex(b, numWarps));
  Value slot = select(b, inRange, lane, constIndex(b, 0));
  Value partial = loadScalar(b, scratch, slot);
  Value identity = constF32(b, kind == ReduceKind::Sum
                                   ? 0.0
                                   : -std::numeric_limits<double>::infinity());
  partial = select(b, inRange, partial, identity);
  Value result = warpReduce(b, partial, kind);
  barrier(b);
  return result;
}

std::pair<Value, Value> mlir::fusion::argmaxCombine(ImplicitLocOpBuilder &b,
                                                    Value value, Value index,
                                                    Value otherValue,
                                                    Value otherIndex) {
  Value otherIsNumber = cmpF(b, CmpFPredicate::ORD, otherValue, otherValue);
  Value valueIsNaN = cmpF(b, CmpFPredicate::UNO, value, value);
  // ugt: other > value, or one of them NaN (then value, as other is not).
  Value greater =
      andI(b, otherIsNumber, cmpF(b, CmpFPredicate::UGT, otherValue, value));
  Value bothNaN = andI(b, notI1(b, otherIsNumber), valueIsNaN);
  Value equal = orI(b, cmpF(b, CmpFPredicate::OEQ, otherValue, value), bothNaN);
  Value lower = cmpI(b, CmpIPredicate::ult, otherIndex, index);
  Value take = orI(b, greater, andI(b, equal, lower));
  return {select(b, take, otherValue, value),
          select(b, take, otherIndex, index)};
}

/// argmaxCombine over each group of 32 lanes; every lane gets the result.
static std::pair<Value, Value> warpArgmax(ImplicitLocOpBuilder &b, Value value,
                                          Value index) {
  for (int32_t offset = 16; offset >= 1; offset /= 2) {
    Value otherValue = shuffleXor(b, value, offset);
    Value otherIndex = shuffleXor(b, index, offset);
    std::tie(value, index) =
        argmaxCombine(b, value, index, otherValue, otherIndex);
  }
  return {value, index};
}

std::pair<Value, Value> mlir::fusion::blockArgmax(ImplicitLocOpBuilder &b,
                                                  Value value, Value index,
                                                  Value values, Value indices,
                                                  int64_t blockSize) {
  int64_t numWarps = blockSize / 32;
  std::tie(value, index) = warpArgmax(b, value, index);
  if (numWarps == 1)
    return {value, index};
  Value lane = laneId(b);
  Value warp = warpId(b);
  ifThen(b, cmpI(b, CmpIPredicate::eq, lane, constIndex(b, 0)),
         [&](ImplicitLocOpBuilder &tb) {
           storeScalar(tb, value, values, warp);
           storeScalar(tb, index, indices, warp);
         });
  barrier(b);
  Value inRange = cmpI(b, CmpIPredicate::ult, lane, constIndex(b, numWarps));
  Value slot = select(b, inRange, lane, constIndex(b, 0));
  // Lanes past the warps repeat warp 0's candidate: a duplicate changes no
  // argmax.
  Value warpValue = loadScalar(b, values, slot);
  Value warpIndex = loadScalar(b, indices, slot);
  std::tie(value, index) = warpArgmax(b, warpValue, warpIndex);
  barrier(b);
  return {value, index};
}

void mlir::fusion::countArrival(
    ImplicitLocOpBuilder &b, Value tid, Value counters,
    function_ref<Value(ImplicitLocOpBuilder &)> counterIndex, Value arrivals,
    Value lastFlag) {
  ifThen(b, cmpI(b, CmpIPredicate::eq, tid, constIndex(b, 0)),
         [&](ImplicitLocOpBuilder &tb) {
           Value at = counterIndex(tb);
           Value old = memref::AtomicRMWOp::create(
               tb, arith::AtomicRMWKind::addi, constI32(tb, 1), counters,
               ValueRange{at});
           Value last = cmpI(tb, CmpIPredicate::eq, old,
                             subI(tb, arrivals, constI32(tb, 1)));
           storeScalar(tb, arith::ExtUIOp::create(tb, tb.getI32Type(), last),
                       lastFlag, constIndex(tb, 0));
           ifThen(tb, last, [&](ImplicitLocOpBuilder &rb) {
             memref::AtomicRMWOp::create(rb, arith::AtomicRMWKind::assign,
                                         constI32(rb, 0), counters,
                                         ValueRange{at});
           });
         });
}
