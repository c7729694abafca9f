//===- ActivationMaps.h - tiny front half, activation maps ------*- C++ -*-===//
//
// runtime/test/data/tiny_decode with kernel 0 also taking the TMA
// descriptors of its two activation inputs (docs/abi.md section 3.3), as a
// warp-specialised projection kernel does: an input_map of param 0 (x) and a
// residual_map of param 2 (the residual), both f16 ["batch", 64]. Shared by
// the manifest, model and mock-driver tests.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_TEST_ACTIVATIONMAPS_H
#define FUSION_RUNTIME_TEST_ACTIVATIONMAPS_H

#include "TensorMapParams.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace fusion::runtime::test {

/// The tiny manifest `j` with kernel 0's params 14 and 15 the input_map of
/// param 0 and the residual_map of param 2 (f16 ["batch", 64], boxes of
/// `boxRows` token rows by 64 columns, 128-byte swizzle), after its
/// weight_map (param 13) and before its scalars (now params 16 and 17).
inline nlohmann::json withActivationMaps(nlohmann::json j,
                                         int64_t boxRows = 16) {
  return withTensorMapParams(std::move(j), /*kernel=*/0, /*at=*/14,
                             nlohmann::json::array({"batch", 64}),
                             nlohmann::json::array({boxRows, 64}),
                             {"input_map", 0}, {"residual_map", 2});
}

/// `ptx` (the tiny model's) with each entry of kernel 0 (the primary entry
/// and its variants: those with a param 13) taking two more 64-bit params
/// after param 13, the maps of withActivationMaps.
inline std::string withActivationMapParams(std::string ptx) {
  const std::string param13 = "_param_13,\n";
  for (size_t p = 0; (p = ptx.find(param13, p)) != std::string::npos;) {
    const std::string extra =
        "\t.param .u64 input_map_param,\n\t.param .u64 residual_map_param,\n";
    ptx.insert(p + param13.size(), extra);
    p += param13.size() + extra.size();
  }
  return ptx;
}

} // namespace fusion::runtime::test

#endif // FUSION_RUNTIME_TEST_ACTIVATIONMAPS_H
