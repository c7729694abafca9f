// An awkward shape: hidden 1000 (a multiple of 8 but not of 256, so the
// last 16-byte chunk of a row is partial per warp), 12 query heads over 2 KV
// heads (group 6), head_dim 96, bf16, pages of 16. RMSNorm with residual,
// the projection also yields the unrotated value. No attention.
func.func @front(%x: tensor<?x1000xbf16>, %residual: tensor<?x1000xbf16>, %norm_w: tensor<1000xbf16>,
                 %qkv_w: tensor<1536x1000xbf16>,
                 %positions: tensor<?xi32>, %block_table: tensor<?x?xi32>,
                 %k_cache: memref<?x16x2x96xbf16>, %v_cache: memref<?x16x2x96xbf16>)
    -> (tensor<?x12x96xbf16>, tensor<?x1000xbf16>, tensor<?x2x96xbf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%residual : tensor<?x1000xbf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x1000xbf16>, tensor<1000xbf16> -> tensor<?x1000xbf16>, tensor<?x1000xbf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w
      {num_heads = 12 : i64, num_kv_heads = 2 : i64, head_dim = 96 : i64}
      : tensor<?x1000xbf16>, tensor<1536x1000xbf16>
      -> tensor<?x12x96xbf16>, tensor<?x2x96xbf16>, tensor<?x2x96xbf16>
  %qr, %kr = fusion.rope %q, %k, %positions
      {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x12x96xbf16>, tensor<?x2x96xbf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x2x96xbf16> into memref<?x16x2x96xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %h, %v : tensor<?x12x96xbf16>, tensor<?x1000xbf16>, tensor<?x2x96xbf16>
}
