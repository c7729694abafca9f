// TinyLlama-1.1B decode layer, front half: one new token per sequence.
//
// Model: TinyLlama/TinyLlama-1.1B-Chat-v1.0 (Hugging Face config.json,
// LlamaForCausalLM):
//   hidden_size               2048
//   num_attention_heads       32
//   num_key_value_heads       4      (GQA group size 8)
//   head_dim                  64     (hidden_size / num_attention_heads)
//   intermediate_size         5632   (MLP, not in this module)
//   num_hidden_layers         22
//   rms_norm_eps              1e-05
//   rope_theta                10000.0
//   rope_scaling              none
//   max_position_embeddings   2048
//   attention_bias            false
//   vocab_size                32000
// The checkpoint is bfloat16; this example runs in f16.
//
// Ops: rmsnorm with the fused residual add -> qkv_proj -> rope (NeoX pairing)
// -> kv_append -> decode_attention. The output is taken before o_proj.
//
// @decode_layer arguments (B = batch size, dynamic; P = 16 tokens per page):
//   %x            tensor<?x2048xf16>         this layer's input activation [B, hidden]
//   %residual     tensor<?x2048xf16>         residual stream [B, hidden], added to %x
//                                            before the norm (h = x + residual)
//   %norm_w       tensor<2048xf16>           input_layernorm.weight [hidden]
//   %qkv_w        tensor<2560x2048xf16>      packed cat(q_proj, k_proj, v_proj).weight,
//                                            [(32 + 2*4) * 64, hidden] = [2560, 2048]
//   %positions    tensor<?xi32>              [B] position of the new token of each
//                                            sequence (RoPE angle and cache slot)
//   %seq_lens     tensor<?xi32>              [B] tokens attended per sequence,
//                                            normally positions + 1
//   %block_table  tensor<?x?xi32>            [B, max_pages] cache page of each logical
//                                            page of each sequence
//   %k_cache      memref<?x16x4x64xf16>      K pages [num_pages, P, num_kv_heads, head_dim]
//   %v_cache      memref<?x16x4x64xf16>      V pages, same shape
// Results:
//   tensor<?x32x64xf16>    attention output [B, num_heads, head_dim] (o_proj input)
//   tensor<?x2048xf16>     residual_out h = x + residual [B, hidden]
func.func @decode_layer(%x: tensor<?x2048xf16>, %residual: tensor<?x2048xf16>,
                        %norm_w: tensor<2048xf16>, %qkv_w: tensor<2560x2048xf16>,
                        %positions: tensor<?xi32>, %seq_lens: tensor<?xi32>,
                        %block_table: tensor<?x?xi32>,
                        %k_cache: memref<?x16x4x64xf16>, %v_cache: memref<?x16x4x64xf16>)
    -> (tensor<?x32x64xf16>, tensor<?x2048xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%residual : tensor<?x2048xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x2048xf16>, tensor<2048xf16> -> tensor<?x2048xf16>, tensor<?x2048xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 32 : i64, num_kv_heads = 4 : i64, head_dim = 64 : i64}
      : tensor<?x2048xf16>, tensor<2560x2048xf16>
      -> tensor<?x32x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>
  %qr, %kr = fusion.rope %q, %k, %positions {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x64xf16>, tensor<?x4x64xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x4x64xf16> into memref<?x16x4x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %k_cache, %v_cache[%block_table, %seq_lens]
      : tensor<?x32x64xf16>, memref<?x16x4x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o, %h : tensor<?x32x64xf16>, tensor<?x2048xf16>
}
