//===- TensorMapParams.h - tiny manifest tensor maps -------*- C++ -*-===//
//-*-===//
//
// Inserts two tensor_map params (docs/abi.md section 3.3) into a kernel of
// runtime/test/data/tiny_decode's manifest: the one way ActivationMaps.h
// and CacheMaps.h describe their maps.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_TEST_TENSORMAPPARAMS_H
#define FUSION_RUNTIME_TEST_TENSORMAPPARAMS_H

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

namespace fusion::runtime::test {

/// A tensor map's role and the param it describes (its "of").
using MapOf = std::pair<std::string, int>;

/// Manifest `j` with kernel `kernel`'s params `at` and `at + 1` the f16
/// tensor maps `first` and `second`, of `shape`, in boxes `box` with the
/// 128-byte swizzle; the params after them move up by 2 and every param of
/// the kernel is renumbered.
inline nlohmann::json withTensorMapParams(nlohmann::json j, int kernel, int at,
                                          const nlohmann::json &shape,
                                          const nlohmann::json &box,
                                          const MapOf &first,
                                          const MapOf &second) {
  nlohmann::json &params = j["kernels"][kernel]["params"];
  auto map = [&](const MapOf &m) {
    return nlohmann::json{
        {"kind", "tensor_map"},
        {"role", m.first},
        {"dtype", "f16"},
        {"shape", shape},
        {"tensor_map",
         {{"of", m.second}, {"box", box}, {"swizzle_bytes", 128}}}};
  };
  params.insert(params.begin() + at, {map(first), map(second)});
  for (size_t i = 0; i < params.size(); ++i)
    params[i]["index"] = i;
  return j;
}

} // namespace fusion::runtime::test

#endif // FUSION_RUNTIME_TEST_TENSORMAPPARAMS_H
