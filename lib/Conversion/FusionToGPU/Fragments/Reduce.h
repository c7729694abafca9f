//===- Reduce.h - warp and CTA reductions -----------------------*- C++ -*-===//
//
// Butterfly reductions with `gpu.shuffle xor` over groups of `width` lanes
// (a power of two up to 32: 32 is the whole warp, smaller widths reduce each
// aligned group of lanes on its own, e.g. the row groups of attention), and
// the CTA-wide reduction through shared memory. Every lane of the warp must
// execute them (no divergence). Across CTAs: the arrival counter by which
// the last of the CTAs that wrote partial results finds that it is last.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_REDUCE_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_REDUCE_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

enum class ReduceKind { Sum, Max };

/// Reduces `value` over each group of `width` lanes (offsets width/2, ...,
/// 1); every lane gets its group's result.
Value warpReduce(ImplicitLocOpBuilder &b, Value value, ReduceKind kind,
                 int64_t width = 32);

/// Reduces every value of `values` in place as warpReduce does, one offset
/// at a time for all values (the shuffles of one step are independent).
void warpReduceEach(ImplicitLocOpBuilder &b, MutableArrayRef<Value> values,
                    ReduceKind kind, int64_t width = 32);

/// Reduction of an f32 over the whole CTA (`blockSize` threads, a multiple
/// of 32): warp reduce, lane 0 of each warp writes `scratch[warp]`
/// (a workgroup buffer of at least blockSize/32 f32), barrier, every warp
/// reduces the per-warp partials, barrier (so `scratch` may be reused).
/// Every thread gets the result. Must be called by every thread of the CTA.
Value blockReduce(ImplicitLocOpBuilder &b, Value value, ReduceKind kind,
                  Value scratch, int64_t blockSize);

/// The better of two argmax candidates (f32 value, i32 index) in
/// fusion.argmax's order: a non-NaN value beats NaN, a larger value a
/// smaller one, and of equal values (-0 == +0, or both NaN) the lower index
/// wins. A total order on distinct indices, so the result of a reduction
/// does not depend on the order it combines in. Returns (value, index).
std::pair<Value, Value> argmaxCombine(ImplicitLocOpBuilder &b, Value value,
                                      Value index, Value otherValue,
                                      Value otherIndex);

/// The best (value, index) of the CTA by argmaxCombine (`blockSize`
/// threads, a multiple of 32): warp shuffles, lane 0 of each warp writes
/// `values[warp]` / `indices[warp]` (workgroup buffers of at least
/// blockSize/32 f32 and i32; unused, and may be null, when blockSize is
/// 32), barrier, every warp reduces the per-warp partials, barrier. Every
/// thread gets the result. Must be called by every thread of the CTA.
std::pair<Value, Value> blockArgmax(ImplicitLocOpBuilder &b, Value value,
                                    Value index, Value values, Value indices,
                                    int64_t blockSize);

/// Thread 0 of the CTA (`tid`, an index) counts the CTA's arrival: an atomic
/// add of 1 to the i32 `counters[counterIndex()]` (the index is built in
/// thread 0's branch). The CTA that sees `arrivals` - 1 (`arrivals`: how
/// many CTAs share the counter, i32) arrived last: it resets the counter to
/// 0, so a zero-initialised workspace is zero again for the next launch.
/// Thread 0 stores whether it was last (i32 1 or 0) to `lastFlag[0]` (i32
/// workgroup memory). The caller publishes its partials before (fence,
/// barrier) and reads `lastFlag` after a barrier.
void countArrival(ImplicitLocOpBuilder &b, Value tid, Value counters,
                  function_ref<Value(ImplicitLocOpBuilder &)> counterIndex,
                  Value arrivals, Value lastFlag);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_REDUCE_H
