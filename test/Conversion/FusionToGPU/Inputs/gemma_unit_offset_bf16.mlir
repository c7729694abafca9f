// Gemma-style front half: RMSNorm with the (1 + w) weight and no residual,
// head_dim 256, 16 query heads over 2 KV heads (group 8); bf16, hidden 3072,
// pages of 32 tokens. No attention.
func.func @front(%x: tensor<?x3072xbf16>, %norm_w: tensor<3072xbf16>,
                 %qkv_w: tensor<5120x3072xbf16>,
                 %positions: tensor<?xi32>, %block_table: tensor<?x?xi32>,
                 %k_cache: memref<?x32x2x256xbf16>, %v_cache: memref<?x32x2x256xbf16>)
    -> tensor<?x16x256xbf16> {
  %y = fusion.rmsnorm %x, %norm_w {epsilon = 1.0e-06 : f64, unit_offset}
      : tensor<?x3072xbf16>, tensor<3072xbf16> -> tensor<?x3072xbf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w
      {num_heads = 16 : i64, num_kv_heads = 2 : i64, head_dim = 256 : i64}
      : tensor<?x3072xbf16>, tensor<5120x3072xbf16>
      -> tensor<?x16x256xbf16>, tensor<?x2x256xbf16>, tensor<?x2x256xbf16>
  %qr, %kr = fusion.rope %q, %k, %positions
      {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x16x256xbf16>, tensor<?x2x256xbf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x2x256xbf16> into memref<?x32x2x256xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x16x256xbf16>
}
