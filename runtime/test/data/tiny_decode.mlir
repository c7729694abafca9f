// The runtime tests' model: a decode-layer front half small enough to read
// in its manifest (hidden 64, 4 query heads and 2 KV heads of 16, 4 tokens
// per KV page, Llama-3.1 RoPE), f16. tiny_decode.ptx and
// tiny_decode.manifest.json are fusion-compile's output for it; the lit test
// test/Target/runtime-fixture.mlir fails when they are not, and says how to
// regenerate them:
//   fusion-compile runtime/test/data/tiny_decode.mlir -o runtime/test/data/tiny_decode
func.func @decode_layer(%x: tensor<?x64xf16>, %residual: tensor<?x64xf16>,
                        %norm_w: tensor<64xf16>, %qkv_w: tensor<128x64xf16>,
                        %positions: tensor<?xi32>, %seq_lens: tensor<?xi32>,
                        %block_table: tensor<?x?xi32>,
                        %k_cache: memref<?x4x2x16xf16>, %v_cache: memref<?x4x2x16xf16>)
    -> (tensor<?x4x16xf16>, tensor<?x64xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%residual : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16>
      -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %positions {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64,
      scaling = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
                                       original_max_position = 8192>}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %k_cache, %v_cache[%block_table, %seq_lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o, %h : tensor<?x4x16xf16>, tensor<?x64xf16>
}
