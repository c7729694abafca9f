// Front half with LayerNorm (+bias), QKV bias, GPT-J (interleaved) RoPE on
// the first 32 of 80 head elements (partial rotary), group size 1; f16,
// hidden 2560, 32 heads of 80, pages of 16 tokens. No attention.
func.func @front(%x: tensor<?x2560xf16>, %ln_w: tensor<2560xf16>, %ln_b: tensor<2560xf16>,
                 %qkv_w: tensor<7680x2560xf16>, %qkv_b: tensor<7680xf16>,
                 %positions: tensor<?xi32>, %block_table: tensor<?x?xi32>,
                 %k_cache: memref<?x16x32x80xf16>, %v_cache: memref<?x16x32x80xf16>)
    -> tensor<?x32x80xf16> {
  %y = fusion.layernorm %x, %ln_w, %ln_b {epsilon = 1.0e-05 : f64}
      : tensor<?x2560xf16>, tensor<2560xf16>, tensor<2560xf16> -> tensor<?x2560xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w bias(%qkv_b : tensor<7680xf16>)
      {num_heads = 32 : i64, num_kv_heads = 32 : i64, head_dim = 80 : i64}
      : tensor<?x2560xf16>, tensor<7680x2560xf16>
      -> tensor<?x32x80xf16>, tensor<?x32x80xf16>, tensor<?x32x80xf16>
  %qr, %kr = fusion.rope %q, %k, %positions
      {pairing = #fusion.rope_pairing<gptj>, theta = 1.0e+04 : f64, rotary_dim = 32 : i64}
      : tensor<?x32x80xf16>, tensor<?x32x80xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x32x80xf16> into memref<?x16x32x80xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x32x80xf16>
}
