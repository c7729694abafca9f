// Llama-3-8B decode layer, front half: one new token per sequence.
//
// Model: Meta-Llama-3.1-8B (Hugging Face config.json; Meta-Llama-3-8B has the
// same shapes but no rope_scaling and max_position_embeddings 8192):
//   hidden_size               4096
//   num_attention_heads       32
//   num_key_value_heads       8      (GQA group size 4)
//   head_dim                  128    (hidden_size / num_attention_heads)
//   intermediate_size         14336  (MLP, not in this module)
//   num_hidden_layers         32
//   rms_norm_eps              1e-05
//   rope_theta                500000.0
//   rope_scaling              {rope_type: "llama3", factor: 8.0,
//                              low_freq_factor: 1.0, high_freq_factor: 4.0,
//                              original_max_position_embeddings: 8192}
//   max_position_embeddings   131072
//   attention_bias            false
//   vocab_size                128256
// The checkpoint is bfloat16; this example runs in f16.
//
// Ops: rmsnorm with the fused residual add -> qkv_proj -> rope (NeoX pairing,
// Llama-3.1 scaling) -> kv_append -> decode_attention. The output is taken
// before o_proj.
//
// @decode_layer arguments (B = batch size, dynamic; P = 16 tokens per page):
//   %x            tensor<?x4096xf16>         this layer's input activation [B, hidden]
//   %residual     tensor<?x4096xf16>         residual stream [B, hidden], added to %x
//                                            before the norm (h = x + residual)
//   %norm_w       tensor<4096xf16>           input_layernorm.weight [hidden]
//   %qkv_w        tensor<6144x4096xf16>      packed cat(q_proj, k_proj, v_proj).weight,
//                                            [(32 + 2*8) * 128, hidden] = [6144, 4096]
//   %positions    tensor<?xi32>              [B] position of the new token of each
//                                            sequence (RoPE angle and cache slot)
//   %seq_lens     tensor<?xi32>              [B] tokens attended per sequence,
//                                            normally positions + 1
//   %block_table  tensor<?x?xi32>            [B, max_pages] cache page of each logical
//                                            page of each sequence
//   %k_cache      memref<?x16x8x128xf16>     K pages [num_pages, P, num_kv_heads, head_dim]
//   %v_cache      memref<?x16x8x128xf16>     V pages, same shape
// Results:
//   tensor<?x32x128xf16>   attention output [B, num_heads, head_dim] (o_proj input)
//   tensor<?x4096xf16>     residual_out h = x + residual [B, hidden]
func.func @decode_layer(%x: tensor<?x4096xf16>, %residual: tensor<?x4096xf16>,
                        %norm_w: tensor<4096xf16>, %qkv_w: tensor<6144x4096xf16>,
                        %positions: tensor<?xi32>, %seq_lens: tensor<?xi32>,
                        %block_table: tensor<?x?xi32>,
                        %k_cache: memref<?x16x8x128xf16>, %v_cache: memref<?x16x8x128xf16>)
    -> (tensor<?x32x128xf16>, tensor<?x4096xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%residual : tensor<?x4096xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>, tensor<?x4096xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16>
      -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  %qr, %kr = fusion.rope %q, %k, %positions {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64,
      scaling = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
                                       original_max_position = 8192>}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %k_cache, %v_cache[%block_table, %seq_lens]
      : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o, %h : tensor<?x32x128xf16>, tensor<?x4096xf16>
}
