//===- Compare.cpp - errors of a tensor against a reference ---------------===//

#include "fusion/runtime/Compare.h"

#include <algorithm>
#include <cmath>

namespace fusion::runtime {

ErrorStats ErrorStats::worst(const ErrorStats &other) const {
  return {std::max(maxAbs, other.maxAbs), std::max(rel, other.rel),
          std::max(nonFinite, other.nonFinite)};
}

std::vector<double> toDoubles(DType dtype, const uint16_t *data, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[i] = toFloat(dtype, data[i]);
  return out;
}

ErrorStats compareValues(const double *out, const double *ref, int64_t n) {
  ErrorStats s;
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i]) && std::isfinite(ref[i])) {
      ++s.nonFinite;
      continue;
    }
    double e = std::fabs(out[i] - ref[i]);
    s.maxAbs = std::max(s.maxAbs, e);
    num += e * e;
    den += ref[i] * ref[i];
  }
  s.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

ErrorStats compareTensors(DType dtype, const uint16_t *out, const uint16_t *ref,
                          int64_t n) {
  std::vector<double> a = toDoubles(dtype, out, n),
                      b = toDoubles(dtype, ref, n);
  return compareValues(a.data(), b.data(), n);
}

std::vector<ErrorStats> compareRows(const double *out, const double *ref,
                                    int64_t rows, int64_t rowElems) {
  std::vector<ErrorStats> s;
  for (int64_t r = 0; r < rows; ++r)
    s.push_back(
        compareValues(out + r * rowElems, ref + r * rowElems, rowElems));
  return s;
}

ErrorStats worstRow(const std::vector<double> &out,
                    const std::vector<double> &ref, int64_t rows) {
  ErrorStats w;
  for (const ErrorStats &e :
       compareRows(out.data(), ref.data(), rows,
                   static_cast<int64_t>(out.size()) / rows))
    w = w.worst(e);
  return w;
}

} // namespace fusion::runtime
