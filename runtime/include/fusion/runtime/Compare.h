//===- Compare.h - errors of a tensor against a reference -------*- C++ -*-===//
//
// The error measures the checks of design.md section 3 use: the relative L2
// error ||out - ref|| / ||ref|| and max |out - ref|, over a whole tensor or
// per batch row (per sequence), plus a count of non-finite outputs where
// the reference is finite (an unwritten, NaN-poisoned element).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_COMPARE_H
#define FUSION_RUNTIME_COMPARE_H

#include "fusion/runtime/DType.h"

#include <cstdint>
#include <vector>

namespace fusion::runtime {

/// Errors of `out` against `ref`.
struct ErrorStats {
  /// max |out - ref| over the elements where `out` is finite.
  double maxAbs = 0;
  /// ||out - ref|| / ||ref|| (||out - ref|| when ref is all zero) over the
  /// elements where `out` is finite.
  double rel = 0;
  /// Elements where `out` is NaN or infinite but `ref` is finite.
  int64_t nonFinite = 0;

  /// The worse of two (largest maxAbs, rel and nonFinite).
  ErrorStats worst(const ErrorStats &other) const;
};

/// The exact values of `n` f16/bf16 elements.
std::vector<double> toDoubles(DType dtype, const uint16_t *data, int64_t n);

/// Errors of `out` against `ref`, `n` elements each.
ErrorStats compareValues(const double *out, const double *ref, int64_t n);
/// Errors of two f16/bf16 tensors of `n` elements.
ErrorStats compareTensors(DType dtype, const uint16_t *out, const uint16_t *ref,
                          int64_t n);

/// Errors of each of `rows` consecutive rows of `rowElems` elements (one per
/// sequence of a batch).
std::vector<ErrorStats> compareRows(const double *out, const double *ref,
                                    int64_t rows, int64_t rowElems);

/// The worst of compareRows over `rows` equal rows of `out` against `ref`
/// (the error of the worst sequence of a batch).
ErrorStats worstRow(const std::vector<double> &out,
                    const std::vector<double> &ref, int64_t rows);

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_COMPARE_H
