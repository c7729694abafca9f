//===- CacheMaps.h - tiny front half, KV-cache tensor maps ------*- C++ -*-===//
//
// runtime/test/data/tiny_decode with kernel 1 (the attention) also taking
// the TMA descriptors of its two caches (docs/abi.md section 3.3), as an
// attention kernel whose tensor-core variant streams the caches through
// the CTA-wide ring does: a key_cache_map of param 1 and a value_cache_map
// of param 2, both f16 ["num_pages", 4, 2, 16] (pages of 4 token slots, 2
// KV heads of 16), read as [num_pages * 4, 32] in boxes of 16 token slots
// by 64 columns. Shared by the manifest, model and mock-driver tests.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_TEST_CACHEMAPS_H
#define FUSION_RUNTIME_TEST_CACHEMAPS_H

#include "TensorMapParams.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

namespace fusion::runtime::test {

/// The tiny manifest `j` with kernel 1's params 9 and 10 the
/// key_cache_map of param 1 and the value_cache_map of param 2, after its
/// workspaces and before its scalars (now params 11-13).
inline nlohmann::json withCacheMaps(nlohmann::json j) {
  return withTensorMapParams(std::move(j), /*kernel=*/1, /*at=*/9,
                             nlohmann::json::array({"num_pages", 4, 2, 16}),
                             nlohmann::json::array({16, 64}),
                             {"key_cache_map", 1}, {"value_cache_map", 2});
}

/// `ptx` (the tiny model's) with kernel 1's entry taking two more 64-bit
/// params after its param 8, the maps of withCacheMaps.
inline std::string withCacheMapParams(std::string ptx) {
  const std::string param8 = "decode_layer_k1_decode_attention_param_8,\n";
  const size_t p = ptx.find(param8);
  if (p != std::string::npos)
    ptx.insert(p + param8.size(), "\t.param .u64 key_cache_map_param,\n"
                                  "\t.param .u64 value_cache_map_param,\n");
  return ptx;
}

} // namespace fusion::runtime::test

#endif // FUSION_RUNTIME_TEST_CACHEMAPS_H
