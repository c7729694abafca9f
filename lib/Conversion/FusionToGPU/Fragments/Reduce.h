//===- Reduce.h - warp and CTA reductions -----------------------*- C++ -*-===//
//
// Butterfly reductions with `gpu.shuffle xor` over groups of `width` lanes
// (a power of two up to 32: 32 is the whole warp, smaller widths reduce each
// aligned group of lanes on its own, e.g. the row groups of attention), and
// the CTA-wide reduction through shared memory. Every lane of the warp must
// execute them (no divergence).
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

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_REDUCE_H
