// Qwen2-7B decode layer, front half: one new token per sequence.
//
// Model: Qwen/Qwen2-7B (Hugging Face config.json):
//   hidden_size               3584
//   num_attention_heads       28
//   num_key_value_heads       4      (GQA group size 7)
//   head_dim                  128    (hidden_size / num_attention_heads)
//   intermediate_size         18944  (MLP, not in this module)
//   num_hidden_layers         28
//   rms_norm_eps              1e-06
//   rope_theta                1000000.0
//   rope_scaling              none
//   max_position_embeddings   131072 (Qwen2-7B-Instruct: 32768)
//   q/k/v projection bias     yes (Qwen2Attention: q_proj, k_proj, v_proj have
//                             bias=True; o_proj has none)
//   vocab_size                152064
//   torch_dtype               bfloat16 (this example runs in bf16)
//
// Ops: rmsnorm with the fused residual add -> qkv_proj with bias -> rope
// (NeoX pairing) -> kv_append -> decode_attention. The output is taken before
// o_proj.
//
// @decode_layer arguments (B = batch size, dynamic; P = 16 tokens per page):
//   %x            tensor<?x3584xbf16>        this layer's input activation [B, hidden]
//   %residual     tensor<?x3584xbf16>        residual stream [B, hidden], added to %x
//                                            before the norm (h = x + residual)
//   %norm_w       tensor<3584xbf16>          input_layernorm.weight [hidden]
//   %qkv_w        tensor<4608x3584xbf16>     packed cat(q_proj, k_proj, v_proj).weight,
//                                            [(28 + 2*4) * 128, hidden] = [4608, 3584]
//   %qkv_b        tensor<4608xbf16>          packed cat(q_proj, k_proj, v_proj).bias
//                                            [(28 + 2*4) * 128] = [4608]
//   %positions    tensor<?xi32>              [B] position of the new token of each
//                                            sequence (RoPE angle and cache slot)
//   %seq_lens     tensor<?xi32>              [B] tokens attended per sequence,
//                                            normally positions + 1
//   %block_table  tensor<?x?xi32>            [B, max_pages] cache page of each logical
//                                            page of each sequence
//   %k_cache      memref<?x16x4x128xbf16>    K pages [num_pages, P, num_kv_heads, head_dim]
//   %v_cache      memref<?x16x4x128xbf16>    V pages, same shape
// Results:
//   tensor<?x28x128xbf16>  attention output [B, num_heads, head_dim] (o_proj input)
//   tensor<?x3584xbf16>    residual_out h = x + residual [B, hidden]
func.func @decode_layer(%x: tensor<?x3584xbf16>, %residual: tensor<?x3584xbf16>,
                        %norm_w: tensor<3584xbf16>, %qkv_w: tensor<4608x3584xbf16>,
                        %qkv_b: tensor<4608xbf16>,
                        %positions: tensor<?xi32>, %seq_lens: tensor<?xi32>,
                        %block_table: tensor<?x?xi32>,
                        %k_cache: memref<?x16x4x128xbf16>, %v_cache: memref<?x16x4x128xbf16>)
    -> (tensor<?x28x128xbf16>, tensor<?x3584xbf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%residual : tensor<?x3584xbf16>) {epsilon = 1.0e-06 : f64}
      : tensor<?x3584xbf16>, tensor<3584xbf16> -> tensor<?x3584xbf16>, tensor<?x3584xbf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w bias(%qkv_b : tensor<4608xbf16>)
      {num_heads = 28 : i64, num_kv_heads = 4 : i64, head_dim = 128 : i64}
      : tensor<?x3584xbf16>, tensor<4608x3584xbf16>
      -> tensor<?x28x128xbf16>, tensor<?x4x128xbf16>, tensor<?x4x128xbf16>
  %qr, %kr = fusion.rope %q, %k, %positions {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+06 : f64}
      : tensor<?x28x128xbf16>, tensor<?x4x128xbf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %k_cache, %v_cache[%block_table, %positions]
      : tensor<?x4x128xbf16> into memref<?x16x4x128xbf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %k_cache, %v_cache[%block_table, %seq_lens]
      : tensor<?x28x128xbf16>, memref<?x16x4x128xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o, %h : tensor<?x28x128xbf16>, tensor<?x3584xbf16>
}
