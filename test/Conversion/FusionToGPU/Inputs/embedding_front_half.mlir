// Layer 0's front half with the token embedding folded in
// (--fusion-form-kernels rule 7), for test/gpu/check_kernels.py
// (scripts/snapshot.sh compiles this file) and compile-examples.mlir.
// @smollm2: SmolLM2-135M's layer 0 in f16 (vocab 49152, hidden 576, 9
// query heads over 3 KV heads of 64, NeoX RoPE), the embedded rows also
// yielded (in the whole model they are layer 0's residual stream); the
// batch-1 kernel preloads its weights and the GEMM-shaped variants stage
// the gathered rows. @layernorm: a LayerNorm front half in bf16 (vocab
// 1001, hidden 512, 8 heads of 64, GPT-J RoPE), the rows not yielded; its
// batch variant is the tensor-core one.
func.func @smollm2(%tokens: tensor<?xi32>, %embed: tensor<49152x576xf16>,
                   %norm_w: tensor<576xf16>, %qkv_w: tensor<960x576xf16>,
                   %positions: tensor<?xi32>, %block_table: tensor<?x?xi32>,
                   %k_cache: memref<?x16x3x64xf16>, %v_cache: memref<?x16x3x64xf16>)
    -> (tensor<?x9x64xf16>, tensor<?x576xf16>) {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<49152x576xf16> -> tensor<?x576xf16>
  %y = fusion.rmsnorm %x, %norm_w {epsilon = 1.0e-05 : f64}
      : tensor<?x576xf16>, tensor<576xf16> -> tensor<?x576xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 9 : i64, num_kv_heads = 3 : i64, head_dim = 64 : i64}
      : tensor<?x576xf16>, tensor<960x576xf16>
      -> tensor<?x9x64xf16>, tensor<?x3x64xf16>, tensor<?x3x64xf16>
  %qr, %kr = fusion.rope %q, %k, %positions {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+05 : f64}
      : tensor<?x9x64xf16>, tensor<?x3x64xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x3x64xf16> into memref<?x16x3x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %x : tensor<?x9x64xf16>, tensor<?x576xf16>
}

func.func @layernorm(%tokens: tensor<?xi32>, %embed: tensor<1001x512xbf16>,
                     %ln_w: tensor<512xbf16>, %ln_b: tensor<512xbf16>,
                     %qkv_w: tensor<1536x512xbf16>,
                     %positions: tensor<?xi32>, %block_table: tensor<?x?xi32>,
                     %k_cache: memref<?x16x8x64xbf16>, %v_cache: memref<?x16x8x64xbf16>)
    -> tensor<?x8x64xbf16> {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<1001x512xbf16> -> tensor<?x512xbf16>
  %y = fusion.layernorm %x, %ln_w, %ln_b {epsilon = 1.0e-05 : f64}
      : tensor<?x512xbf16>, tensor<512xbf16>, tensor<512xbf16> -> tensor<?x512xbf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 8 : i64, num_kv_heads = 8 : i64, head_dim = 64 : i64}
      : tensor<?x512xbf16>, tensor<1536x512xbf16>
      -> tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>
  %qr, %kr = fusion.rope %q, %k, %positions {pairing = #fusion.rope_pairing<gptj>, theta = 1.0e+04 : f64}
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x8x64xbf16> into memref<?x16x8x64xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x8x64xbf16>
}
