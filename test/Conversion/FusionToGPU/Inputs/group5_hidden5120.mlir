// Hidden 5120, 40 query heads over 8 KV heads (group 5), head_dim 128 with
// NeoX RoPE on the first 64 elements (partial rotary) and Llama-3.1
// frequency scaling; RMSNorm with the fused residual add; f16, pages of 16.
// No attention; returns the rotated query and residual_out.
func.func @front(%x: tensor<?x5120xf16>, %residual: tensor<?x5120xf16>, %norm_w: tensor<5120xf16>,
                 %qkv_w: tensor<7168x5120xf16>,
                 %positions: tensor<?xi32>, %block_table: tensor<?x?xi32>,
                 %k_cache: memref<?x16x8x128xf16>, %v_cache: memref<?x16x8x128xf16>)
    -> (tensor<?x40x128xf16>, tensor<?x5120xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%residual : tensor<?x5120xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x5120xf16>, tensor<5120xf16> -> tensor<?x5120xf16>, tensor<?x5120xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w
      {num_heads = 40 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x5120xf16>, tensor<7168x5120xf16>
      -> tensor<?x40x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  %qr, %kr = fusion.rope %q, %k, %positions
      {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64, rotary_dim = 64 : i64,
       scaling = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>}
      : tensor<?x40x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %h : tensor<?x40x128xf16>, tensor<?x5120xf16>
}
