// RUN: fusion-opt %s | FileCheck %s
// RUN: fusion-opt %s | fusion-opt | FileCheck %s
// RUN: fusion-opt -mlir-print-op-generic %s | fusion-opt | FileCheck %s

// Round-trip of every fusion op and attribute: custom form, custom form
// re-parsed, and generic form re-parsed. Shapes are those of real models
// (named per function); the batch is dynamic unless the function says
// otherwise.

//===----------------------------------------------------------------------===//
// fusion.rmsnorm / fusion.layernorm
//===----------------------------------------------------------------------===//

// Llama-3-8B input norm, hidden 4096, no residual.
// CHECK-LABEL: func.func @rmsnorm_f16
// CHECK-SAME:    (%[[X:.*]]: tensor<?x4096xf16>, %[[W:.*]]: tensor<4096xf16>)
// CHECK:         %[[Y:.*]] = fusion.rmsnorm %[[X]], %[[W]] {epsilon = 1.000000e-05 : f64}
// CHECK-SAME:      : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
// CHECK:         return %[[Y]]
func.func @rmsnorm_f16(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) -> tensor<?x4096xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64}
      : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return %y : tensor<?x4096xf16>
}

// Qwen2-7B norm with the fused residual add, bf16, static batch 4.
// CHECK-LABEL: func.func @rmsnorm_residual_bf16
// CHECK-SAME:    (%[[X:.*]]: tensor<4x3584xbf16>, %[[W:.*]]: tensor<3584xbf16>, %[[R:.*]]: tensor<4x3584xbf16>)
// CHECK:         %[[Y:.*]], %[[H:.*]] = fusion.rmsnorm %[[X]], %[[W]] residual(%[[R]] : tensor<4x3584xbf16>) {epsilon = 9.9999999999999995E-7 : f64}
// CHECK-SAME:      : tensor<4x3584xbf16>, tensor<3584xbf16> -> tensor<4x3584xbf16>, tensor<4x3584xbf16>
// CHECK:         return %[[Y]], %[[H]]
func.func @rmsnorm_residual_bf16(%x: tensor<4x3584xbf16>, %w: tensor<3584xbf16>,
                                 %r: tensor<4x3584xbf16>)
    -> (tensor<4x3584xbf16>, tensor<4x3584xbf16>) {
  %y, %h = fusion.rmsnorm %x, %w residual(%r : tensor<4x3584xbf16>) {epsilon = 1.0e-06 : f64}
      : tensor<4x3584xbf16>, tensor<3584xbf16> -> tensor<4x3584xbf16>, tensor<4x3584xbf16>
  return %y, %h : tensor<4x3584xbf16>, tensor<4x3584xbf16>
}

// Gemma-2B norm: (1 + w) weight, hidden 2048, with and without residual.
// CHECK-LABEL: func.func @rmsnorm_unit_offset
// CHECK:         fusion.rmsnorm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64, unit_offset}
// CHECK-SAME:      : tensor<?x2048xbf16>, tensor<2048xbf16> -> tensor<?x2048xbf16>
// CHECK:         fusion.rmsnorm %{{.*}}, %{{.*}} residual(%{{.*}} : tensor<?x2048xbf16>) {epsilon = 9.9999999999999995E-7 : f64, unit_offset}
// CHECK-SAME:      -> tensor<?x2048xbf16>, tensor<?x2048xbf16>
func.func @rmsnorm_unit_offset(%x: tensor<?x2048xbf16>, %w: tensor<2048xbf16>,
                               %r: tensor<?x2048xbf16>)
    -> (tensor<?x2048xbf16>, tensor<?x2048xbf16>, tensor<?x2048xbf16>) {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-06 : f64, unit_offset}
      : tensor<?x2048xbf16>, tensor<2048xbf16> -> tensor<?x2048xbf16>
  %y2, %h = fusion.rmsnorm %x, %w residual(%r : tensor<?x2048xbf16>) {epsilon = 1.0e-06 : f64, unit_offset}
      : tensor<?x2048xbf16>, tensor<2048xbf16> -> tensor<?x2048xbf16>, tensor<?x2048xbf16>
  return %y, %y2, %h : tensor<?x2048xbf16>, tensor<?x2048xbf16>, tensor<?x2048xbf16>
}

// LayerNorm with bias (GPT-NeoX / Pythia-1B, hidden 2048), f16 dynamic and
// bf16 at static batch 1.
// CHECK-LABEL: func.func @layernorm
// CHECK-SAME:    (%[[X:.*]]: tensor<?x2048xf16>, %[[W:.*]]: tensor<2048xf16>, %[[B:.*]]: tensor<2048xf16>, %[[X1:.*]]: tensor<1x2048xbf16>, %[[W1:.*]]: tensor<2048xbf16>, %[[B1:.*]]: tensor<2048xbf16>)
// CHECK:         fusion.layernorm %[[X]], %[[W]], %[[B]] {epsilon = 1.000000e-05 : f64}
// CHECK-SAME:      : tensor<?x2048xf16>, tensor<2048xf16>, tensor<2048xf16> -> tensor<?x2048xf16>
// CHECK:         fusion.layernorm %[[X1]], %[[W1]], %[[B1]] {epsilon = 1.000000e-05 : f64}
// CHECK-SAME:      : tensor<1x2048xbf16>, tensor<2048xbf16>, tensor<2048xbf16> -> tensor<1x2048xbf16>
func.func @layernorm(%x: tensor<?x2048xf16>, %w: tensor<2048xf16>, %b: tensor<2048xf16>,
                     %x1: tensor<1x2048xbf16>, %w1: tensor<2048xbf16>, %b1: tensor<2048xbf16>)
    -> (tensor<?x2048xf16>, tensor<1x2048xbf16>) {
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
      : tensor<?x2048xf16>, tensor<2048xf16>, tensor<2048xf16> -> tensor<?x2048xf16>
  %y1 = fusion.layernorm %x1, %w1, %b1 {epsilon = 1.0e-05 : f64}
      : tensor<1x2048xbf16>, tensor<2048xbf16>, tensor<2048xbf16> -> tensor<1x2048xbf16>
  return %y, %y1 : tensor<?x2048xf16>, tensor<1x2048xbf16>
}

//===----------------------------------------------------------------------===//
// fusion.qkv_proj
//===----------------------------------------------------------------------===//

// Llama-3-8B: 32 query heads, 8 KV heads, head_dim 128, hidden 4096:
// (32 + 2 * 8) * 128 = 6144 packed rows, no bias.
// CHECK-LABEL: func.func @qkv_proj_llama3_8b
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<?x4096xf16>, %[[W:[^:]*]]: tensor<6144x4096xf16>)
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = fusion.qkv_proj %[[X]], %[[W]] {head_dim = 128 : i64, num_heads = 32 : i64, num_kv_heads = 8 : i64}
// CHECK-SAME:      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
// CHECK:         return %[[Q]], %[[K]], %[[V]]
func.func @qkv_proj_llama3_8b(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>)
    -> (tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>) {
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16>
      -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return %q, %k, %v : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
}

// Qwen2-7B with QKV bias, bf16, static batch 2: 28/4 heads, head_dim 128,
// hidden 3584: (28 + 2 * 4) * 128 = 4608 rows and bias elements.
// CHECK-LABEL: func.func @qkv_proj_bias_qwen2_7b
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3584xbf16>, %[[W:.*]]: tensor<4608x3584xbf16>, %[[B:.*]]: tensor<4608xbf16>)
// CHECK:         fusion.qkv_proj %[[X]], %[[W]] bias(%[[B]] : tensor<4608xbf16>) {head_dim = 128 : i64, num_heads = 28 : i64, num_kv_heads = 4 : i64}
// CHECK-SAME:      : tensor<2x3584xbf16>, tensor<4608x3584xbf16> -> tensor<2x28x128xbf16>, tensor<2x4x128xbf16>, tensor<2x4x128xbf16>
func.func @qkv_proj_bias_qwen2_7b(%x: tensor<2x3584xbf16>, %w: tensor<4608x3584xbf16>,
                                  %b: tensor<4608xbf16>)
    -> (tensor<2x28x128xbf16>, tensor<2x4x128xbf16>, tensor<2x4x128xbf16>) {
  %q, %k, %v = fusion.qkv_proj %x, %w bias(%b : tensor<4608xbf16>)
      {num_heads = 28 : i64, num_kv_heads = 4 : i64, head_dim = 128 : i64}
      : tensor<2x3584xbf16>, tensor<4608x3584xbf16>
      -> tensor<2x28x128xbf16>, tensor<2x4x128xbf16>, tensor<2x4x128xbf16>
  return %q, %k, %v : tensor<2x28x128xbf16>, tensor<2x4x128xbf16>, tensor<2x4x128xbf16>
}

// Qwen2-0.5B: group size 7 (14/2 heads), head_dim 64, hidden 896:
// (14 + 2 * 2) * 64 = 1152 rows.
// CHECK-LABEL: func.func @qkv_proj_group7
// CHECK:         fusion.qkv_proj %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<1152xbf16>) {head_dim = 64 : i64, num_heads = 14 : i64, num_kv_heads = 2 : i64}
// CHECK-SAME:      : tensor<?x896xbf16>, tensor<1152x896xbf16> -> tensor<?x14x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>
func.func @qkv_proj_group7(%x: tensor<?x896xbf16>, %w: tensor<1152x896xbf16>, %b: tensor<1152xbf16>)
    -> (tensor<?x14x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>) {
  %q, %k, %v = fusion.qkv_proj %x, %w bias(%b : tensor<1152xbf16>)
      {num_heads = 14 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
      : tensor<?x896xbf16>, tensor<1152x896xbf16>
      -> tensor<?x14x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>
  return %q, %k, %v : tensor<?x14x64xbf16>, tensor<?x2x64xbf16>, tensor<?x2x64xbf16>
}

//===----------------------------------------------------------------------===//
// fusion.rope and #fusion.llama3_scaling
//===----------------------------------------------------------------------===//

// NeoX pairing over the whole head (TinyLlama: theta 10000, head_dim 64).
// CHECK-LABEL: func.func @rope_neox
// CHECK-SAME:    (%[[Q:.*]]: tensor<?x32x64xf16>, %[[K:.*]]: tensor<?x4x64xf16>, %[[P:.*]]: tensor<?xi32>)
// CHECK:         %[[QR:.*]], %[[KR:.*]] = fusion.rope %[[Q]], %[[K]], %[[P]] {pairing = #fusion.rope_pairing<neox>, theta = 1.000000e+04 : f64}
// CHECK-SAME:      : tensor<?x32x64xf16>, tensor<?x4x64xf16>, tensor<?xi32>
// CHECK:         return %[[QR]], %[[KR]] : tensor<?x32x64xf16>, tensor<?x4x64xf16>
func.func @rope_neox(%q: tensor<?x32x64xf16>, %k: tensor<?x4x64xf16>, %pos: tensor<?xi32>)
    -> (tensor<?x32x64xf16>, tensor<?x4x64xf16>) {
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x64xf16>, tensor<?x4x64xf16>, tensor<?xi32>
  return %qr, %kr : tensor<?x32x64xf16>, tensor<?x4x64xf16>
}

// GPT-J-6B: interleaved pairing, partial rotary (64 of head_dim 256), 16
// heads without GQA, static batch 8.
// CHECK-LABEL: func.func @rope_gptj_partial
// CHECK:         fusion.rope %{{.*}}, %{{.*}}, %{{.*}} {pairing = #fusion.rope_pairing<gptj>, rotary_dim = 64 : i64, theta = 1.000000e+04 : f64}
// CHECK-SAME:      : tensor<8x16x256xf16>, tensor<8x16x256xf16>, tensor<8xi32>
func.func @rope_gptj_partial(%q: tensor<8x16x256xf16>, %k: tensor<8x16x256xf16>, %pos: tensor<8xi32>)
    -> (tensor<8x16x256xf16>, tensor<8x16x256xf16>) {
  %qr, %kr = fusion.rope %q, %k, %pos
      {pairing = #fusion.rope_pairing<gptj>, theta = 1.0e+04 : f64, rotary_dim = 64 : i64}
      : tensor<8x16x256xf16>, tensor<8x16x256xf16>, tensor<8xi32>
  return %qr, %kr : tensor<8x16x256xf16>, tensor<8x16x256xf16>
}

// Phi-2: NeoX pairing, partial rotary (32 of head_dim 80), bf16.
// CHECK-LABEL: func.func @rope_neox_partial
// CHECK:         fusion.rope %{{.*}}, %{{.*}}, %{{.*}} {pairing = #fusion.rope_pairing<neox>, rotary_dim = 32 : i64, theta = 1.000000e+04 : f64}
// CHECK-SAME:      : tensor<?x32x80xbf16>, tensor<?x32x80xbf16>, tensor<?xi32>
func.func @rope_neox_partial(%q: tensor<?x32x80xbf16>, %k: tensor<?x32x80xbf16>, %pos: tensor<?xi32>)
    -> (tensor<?x32x80xbf16>, tensor<?x32x80xbf16>) {
  %qr, %kr = fusion.rope %q, %k, %pos
      {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64, rotary_dim = 32 : i64}
      : tensor<?x32x80xbf16>, tensor<?x32x80xbf16>, tensor<?xi32>
  return %qr, %kr : tensor<?x32x80xbf16>, tensor<?x32x80xbf16>
}

// Llama-3.1-8B: theta 500000 with Llama-3.1 frequency scaling.
// CHECK-LABEL: func.func @rope_llama3_scaling
// CHECK:         fusion.rope %{{.*}}, %{{.*}}, %{{.*}} {pairing = #fusion.rope_pairing<neox>,
// CHECK-SAME:      scaling = #fusion.llama3_scaling<factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position = 8192>,
// CHECK-SAME:      theta = 5.000000e+05 : f64}
// CHECK-SAME:      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
func.func @rope_llama3_scaling(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %pos: tensor<?xi32>)
    -> (tensor<?x32x128xf16>, tensor<?x8x128xf16>) {
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64,
      scaling = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return %qr, %kr : tensor<?x32x128xf16>, tensor<?x8x128xf16>
}

// The attributes on their own (non-default values round-trip exactly).
// CHECK-LABEL: func.func @attributes
// CHECK-SAME:    pairing = #fusion.rope_pairing<gptj>
// CHECK-SAME:    scaling = #fusion.llama3_scaling<factor = 3.200000e+01, low_freq_factor = 5.000000e-01, high_freq_factor = 2.500000e+00, original_max_position = 131072>
func.func @attributes() attributes {
    pairing = #fusion.rope_pairing<gptj>,
    scaling = #fusion.llama3_scaling<factor = 32.0, low_freq_factor = 0.5, high_freq_factor = 2.5, original_max_position = 131072>} {
  return
}

//===----------------------------------------------------------------------===//
// fusion.kv_append / fusion.decode_attention
//===----------------------------------------------------------------------===//

// Llama-3-8B caches, page size 16.
// CHECK-LABEL: func.func @kv_append_f16
// CHECK-SAME:    (%[[K:.*]]: tensor<?x8x128xf16>, %[[V:.*]]: tensor<?x8x128xf16>, %[[KC:.*]]: memref<?x16x8x128xf16>, %[[VC:.*]]: memref<?x16x8x128xf16>, %[[BT:.*]]: tensor<?x?xi32>, %[[P:.*]]: tensor<?xi32>)
// CHECK:         fusion.kv_append %[[K]], %[[V]] into %[[KC]], %[[VC]][%[[BT]], %[[P]]]
// CHECK-SAME:      : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
func.func @kv_append_f16(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>,
                         %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
                         %bt: tensor<?x?xi32>, %pos: tensor<?xi32>) {
  fusion.kv_append %k, %v into %kc, %vc[%bt, %pos]
      : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// bf16, static batch 3, page size 32, contiguous-cache shape (one page of
// 32 tokens per sequence: block table [3, 1]).
// CHECK-LABEL: func.func @kv_append_bf16_static
// CHECK:         fusion.kv_append %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}]
// CHECK-SAME:      : tensor<3x4x128xbf16> into memref<3x32x4x128xbf16>, tensor<3x1xi32>, tensor<3xi32>
func.func @kv_append_bf16_static(%k: tensor<3x4x128xbf16>, %v: tensor<3x4x128xbf16>,
                                 %kc: memref<3x32x4x128xbf16>, %vc: memref<3x32x4x128xbf16>,
                                 %bt: tensor<3x1xi32>, %pos: tensor<3xi32>) {
  fusion.kv_append %k, %v into %kc, %vc[%bt, %pos]
      : tensor<3x4x128xbf16> into memref<3x32x4x128xbf16>, tensor<3x1xi32>, tensor<3xi32>
  return
}

// Default scale (1/sqrt(128)) and no `scale` attribute.
// CHECK-LABEL: func.func @decode_attention_default_scale
// CHECK-SAME:    (%[[Q:.*]]: tensor<?x32x128xf16>, %[[KC:.*]]: memref<?x16x8x128xf16>, %[[VC:.*]]: memref<?x16x8x128xf16>, %[[BT:.*]]: tensor<?x?xi32>, %[[L:.*]]: tensor<?xi32>)
// CHECK:         %[[O:.*]] = fusion.decode_attention %[[Q]], %[[KC]], %[[VC]][%[[BT]], %[[L]]] : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>{{$}}
// CHECK:         return %[[O]] : tensor<?x32x128xf16>
func.func @decode_attention_default_scale(%q: tensor<?x32x128xf16>,
                                          %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
                                          %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
    -> tensor<?x32x128xf16> {
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %lens]
      : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o : tensor<?x32x128xf16>
}

// Explicit scale (Gemma-2-9B: query_pre_attn_scalar 256 -> 1/16), 16/8
// heads, head_dim 256, bf16, static batch 1.
// CHECK-LABEL: func.func @decode_attention_scale
// CHECK:         fusion.decode_attention %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {scale = 6.250000e-02 : f64}
// CHECK-SAME:      : tensor<1x16x256xbf16>, memref<?x16x8x256xbf16>, tensor<1x?xi32>, tensor<1xi32>
func.func @decode_attention_scale(%q: tensor<1x16x256xbf16>,
                                  %kc: memref<?x16x8x256xbf16>, %vc: memref<?x16x8x256xbf16>,
                                  %bt: tensor<1x?xi32>, %lens: tensor<1xi32>)
    -> tensor<1x16x256xbf16> {
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %lens] {scale = 0.0625 : f64}
      : tensor<1x16x256xbf16>, memref<?x16x8x256xbf16>, tensor<1x?xi32>, tensor<1xi32>
  return %o : tensor<1x16x256xbf16>
}

//===----------------------------------------------------------------------===//
// fusion.linear / fusion.silu_mul
//===----------------------------------------------------------------------===//

// The linear layers of a Llama-3-8B layer (hidden 4096, intermediate 14336,
// 32 heads of 128) and its LM head (vocabulary 128256): o_proj straight from
// the attention output [B, 32, 128], gate/up packed (N = 2 * 14336),
// down_proj, lm_head.
// CHECK-LABEL: func.func @linear_llama3
// CHECK-SAME:    (%[[A:.*]]: tensor<?x32x128xf16>, %[[OW:.*]]: tensor<4096x4096xf16>, %[[Y:.*]]: tensor<?x4096xf16>, %[[GUW:.*]]: tensor<28672x4096xf16>, %[[M:.*]]: tensor<?x14336xf16>, %[[DW:.*]]: tensor<4096x14336xf16>, %[[HW:.*]]: tensor<128256x4096xf16>)
// CHECK:         %[[O:.*]] = fusion.linear %[[A]], %[[OW]] : tensor<?x32x128xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
// CHECK:         %[[GU:.*]] = fusion.linear %[[Y]], %[[GUW]] : tensor<?x4096xf16>, tensor<28672x4096xf16> -> tensor<?x28672xf16>
// CHECK:         %[[D:.*]] = fusion.linear %[[M]], %[[DW]] : tensor<?x14336xf16>, tensor<4096x14336xf16> -> tensor<?x4096xf16>
// CHECK:         %[[L:.*]] = fusion.linear %[[Y]], %[[HW]] : tensor<?x4096xf16>, tensor<128256x4096xf16> -> tensor<?x128256xf16>
// CHECK:         return %[[O]], %[[GU]], %[[D]], %[[L]]
func.func @linear_llama3(%attn: tensor<?x32x128xf16>, %o_w: tensor<4096x4096xf16>,
                         %y: tensor<?x4096xf16>, %gate_up_w: tensor<28672x4096xf16>,
                         %m: tensor<?x14336xf16>, %down_w: tensor<4096x14336xf16>,
                         %head_w: tensor<128256x4096xf16>)
    -> (tensor<?x4096xf16>, tensor<?x28672xf16>, tensor<?x4096xf16>, tensor<?x128256xf16>) {
  %o = fusion.linear %attn, %o_w : tensor<?x32x128xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  %gu = fusion.linear %y, %gate_up_w : tensor<?x4096xf16>, tensor<28672x4096xf16> -> tensor<?x28672xf16>
  %d = fusion.linear %m, %down_w : tensor<?x14336xf16>, tensor<4096x14336xf16> -> tensor<?x4096xf16>
  %logits = fusion.linear %y, %head_w : tensor<?x4096xf16>, tensor<128256x4096xf16> -> tensor<?x128256xf16>
  return %o, %gu, %d, %logits : tensor<?x4096xf16>, tensor<?x28672xf16>, tensor<?x4096xf16>, tensor<?x128256xf16>
}

// SmolLM2-135M's o_proj as fp32 partials of its 3 KV groups (3 heads each)
// and their rounded sum (rule 6 of --fusion-form-kernels).
// CHECK-LABEL: func.func @o_proj_partials
// CHECK:         %[[P:.*]] = fusion.linear_partials %{{.*}}, %{{.*}} : tensor<?x9x64xf16>, tensor<576x576xf16> -> tensor<?x3x576xf32>
// CHECK:         %[[S:.*]] = fusion.sum_partials %[[P]] : tensor<?x3x576xf32> -> tensor<?x576xf16>
// CHECK:         return %[[S]]
func.func @o_proj_partials(%attn: tensor<?x9x64xf16>, %o_w: tensor<576x576xf16>) -> tensor<?x576xf16> {
  %p = fusion.linear_partials %attn, %o_w : tensor<?x9x64xf16>, tensor<576x576xf16> -> tensor<?x3x576xf32>
  %o = fusion.sum_partials %p : tensor<?x3x576xf32> -> tensor<?x576xf16>
  return %o : tensor<?x576xf16>
}

// SmolLM2-135M o_proj (9 heads of 64 -> 576) in bf16 at static batch 2; a
// static batch may meet a dynamic one.
// CHECK-LABEL: func.func @linear_bf16_static
// CHECK:         fusion.linear %{{.*}}, %{{.*}} : tensor<2x9x64xbf16>, tensor<576x576xbf16> -> tensor<2x576xbf16>
// CHECK:         fusion.linear %{{.*}}, %{{.*}} : tensor<2x576xbf16>, tensor<1536x576xbf16> -> tensor<?x1536xbf16>
func.func @linear_bf16_static(%attn: tensor<2x9x64xbf16>, %o_w: tensor<576x576xbf16>,
                              %gate_up_w: tensor<1536x576xbf16>) -> tensor<?x1536xbf16> {
  %o = fusion.linear %attn, %o_w : tensor<2x9x64xbf16>, tensor<576x576xbf16> -> tensor<2x576xbf16>
  %gu = fusion.linear %o, %gate_up_w : tensor<2x576xbf16>, tensor<1536x576xbf16> -> tensor<?x1536xbf16>
  return %gu : tensor<?x1536xbf16>
}

// SwiGLU of Llama-3-8B's packed [gate | up] row (2 * 14336), f16, and of
// SmolLM2-135M's (2 * 1536), bf16 at static batch 2.
// CHECK-LABEL: func.func @silu_mul
// CHECK-SAME:    (%[[GU:.*]]: tensor<?x28672xf16>, %[[GU2:.*]]: tensor<2x3072xbf16>)
// CHECK:         %[[M:.*]] = fusion.silu_mul %[[GU]] : tensor<?x28672xf16> -> tensor<?x14336xf16>
// CHECK:         %[[M2:.*]] = fusion.silu_mul %[[GU2]] : tensor<2x3072xbf16> -> tensor<2x1536xbf16>
// CHECK:         return %[[M]], %[[M2]]
func.func @silu_mul(%gu: tensor<?x28672xf16>, %gu2: tensor<2x3072xbf16>)
    -> (tensor<?x14336xf16>, tensor<2x1536xbf16>) {
  %m = fusion.silu_mul %gu : tensor<?x28672xf16> -> tensor<?x14336xf16>
  %m2 = fusion.silu_mul %gu2 : tensor<2x3072xbf16> -> tensor<2x1536xbf16>
  return %m, %m2 : tensor<?x14336xf16>, tensor<2x1536xbf16>
}

//===----------------------------------------------------------------------===//
// fusion.embedding / fusion.argmax
//===----------------------------------------------------------------------===//

// Llama-3-8B token embedding (vocabulary 128256, hidden 4096), bf16, and
// SmolLM2-135M's (49152 x 576), f16 at static batch 4.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME:    (%[[T:.*]]: tensor<?xi32>, %[[E:.*]]: tensor<128256x4096xbf16>, %[[T2:.*]]: tensor<4xi32>, %[[E2:.*]]: tensor<49152x576xf16>)
// CHECK:         %[[X:.*]] = fusion.embedding %[[T]], %[[E]] : tensor<?xi32>, tensor<128256x4096xbf16> -> tensor<?x4096xbf16>
// CHECK:         %[[X2:.*]] = fusion.embedding %[[T2]], %[[E2]] : tensor<4xi32>, tensor<49152x576xf16> -> tensor<4x576xf16>
// CHECK:         return %[[X]], %[[X2]]
func.func @embedding(%tokens: tensor<?xi32>, %table: tensor<128256x4096xbf16>,
                     %tokens2: tensor<4xi32>, %table2: tensor<49152x576xf16>)
    -> (tensor<?x4096xbf16>, tensor<4x576xf16>) {
  %x = fusion.embedding %tokens, %table : tensor<?xi32>, tensor<128256x4096xbf16> -> tensor<?x4096xbf16>
  %x2 = fusion.embedding %tokens2, %table2 : tensor<4xi32>, tensor<49152x576xf16> -> tensor<4x576xf16>
  return %x, %x2 : tensor<?x4096xbf16>, tensor<4x576xf16>
}

// Greedy sampling over Llama-3-8B's logits (bf16), over SmolLM2's (f16,
// static batch 4), and at the largest vocabulary an i32 indexes (2^31).
// CHECK-LABEL: func.func @argmax
// CHECK-SAME:    (%[[L:.*]]: tensor<?x128256xbf16>, %[[L2:.*]]: tensor<4x49152xf16>, %[[L3:.*]]: tensor<1x2147483648xf16>)
// CHECK:         %[[T:.*]] = fusion.argmax %[[L]] : tensor<?x128256xbf16> -> tensor<?xi32>
// CHECK:         %[[T2:.*]] = fusion.argmax %[[L2]] : tensor<4x49152xf16> -> tensor<4xi32>
// CHECK:         %[[T3:.*]] = fusion.argmax %[[L3]] : tensor<1x2147483648xf16> -> tensor<?xi32>
// CHECK:         return %[[T]], %[[T2]], %[[T3]]
func.func @argmax(%logits: tensor<?x128256xbf16>, %logits2: tensor<4x49152xf16>,
                  %logits3: tensor<1x2147483648xf16>)
    -> (tensor<?xi32>, tensor<4xi32>, tensor<?xi32>) {
  %t = fusion.argmax %logits : tensor<?x128256xbf16> -> tensor<?xi32>
  %t2 = fusion.argmax %logits2 : tensor<4x49152xf16> -> tensor<4xi32>
  %t3 = fusion.argmax %logits3 : tensor<1x2147483648xf16> -> tensor<?xi32>
  return %t, %t2, %t3 : tensor<?xi32>, tensor<4xi32>, tensor<?xi32>
}

// The back half of a SmolLM2-135M decoder layer and the model's head, as
// the CPU reference's decoderLayer and ModelReference chain them: o_proj,
// the post-attention norm with the residual add, gate/up, SwiGLU, down_proj,
// the final norm, the tied LM head and greedy sampling of the next token,
// whose embedding starts the next step.
// CHECK-LABEL: func.func @decoder_back_half
// CHECK:         fusion.linear
// CHECK:         fusion.rmsnorm
// CHECK:         fusion.linear
// CHECK:         fusion.silu_mul
// CHECK:         fusion.linear
// CHECK:         fusion.rmsnorm
// CHECK:         fusion.linear
// CHECK:         fusion.argmax
// CHECK:         fusion.embedding
func.func @decoder_back_half(%attn: tensor<?x9x64xbf16>, %h: tensor<?x576xbf16>,
                             %o_w: tensor<576x576xbf16>, %post_w: tensor<576xbf16>,
                             %gate_up_w: tensor<3072x576xbf16>, %down_w: tensor<576x1536xbf16>,
                             %final_w: tensor<576xbf16>, %embed: tensor<49152x576xbf16>)
    -> tensor<?x576xbf16> {
  %o = fusion.linear %attn, %o_w : tensor<?x9x64xbf16>, tensor<576x576xbf16> -> tensor<?x576xbf16>
  %y2, %h2 = fusion.rmsnorm %o, %post_w residual(%h : tensor<?x576xbf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x576xbf16>, tensor<576xbf16> -> tensor<?x576xbf16>, tensor<?x576xbf16>
  %gu = fusion.linear %y2, %gate_up_w : tensor<?x576xbf16>, tensor<3072x576xbf16> -> tensor<?x3072xbf16>
  %m = fusion.silu_mul %gu : tensor<?x3072xbf16> -> tensor<?x1536xbf16>
  %d = fusion.linear %m, %down_w : tensor<?x1536xbf16>, tensor<576x1536xbf16> -> tensor<?x576xbf16>
  %f, %h3 = fusion.rmsnorm %d, %final_w residual(%h2 : tensor<?x576xbf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x576xbf16>, tensor<576xbf16> -> tensor<?x576xbf16>, tensor<?x576xbf16>
  %logits = fusion.linear %f, %embed : tensor<?x576xbf16>, tensor<49152x576xbf16> -> tensor<?x49152xbf16>
  %next = fusion.argmax %logits : tensor<?x49152xbf16> -> tensor<?xi32>
  %x = fusion.embedding %next, %embed : tensor<?xi32>, tensor<49152x576xbf16> -> tensor<?x576xbf16>
  return %x : tensor<?x576xbf16>
}

//===----------------------------------------------------------------------===//
// fusion.kernel / fusion.yield
//===----------------------------------------------------------------------===//

// A kernel with two results and a schedule: the norm of the front half.
// CHECK-LABEL: func.func @kernel_results
// CHECK-SAME:    (%[[X:.*]]: tensor<?x4096xf16>, %[[W:.*]]: tensor<4096xf16>, %[[R:.*]]: tensor<?x4096xf16>)
// CHECK:         %[[RES:.*]]:2 = fusion.kernel @layer0_norm (%[[A:.*]] = %[[X]], %[[B:.*]] = %[[W]], %[[C:.*]] = %[[R]])
// CHECK-SAME:      : (tensor<?x4096xf16>, tensor<4096xf16>, tensor<?x4096xf16>) -> (tensor<?x4096xf16>, tensor<?x4096xf16>)
// CHECK-SAME:      attributes {schedule = #fusion.norm_row_schedule<threads = 256, vector_width = 8, tokens_per_cta = 1>} {
// CHECK:           %[[Y:.*]], %[[H:.*]] = fusion.rmsnorm %[[A]], %[[B]] residual(%[[C]] : tensor<?x4096xf16>)
// CHECK:           fusion.yield %[[Y]], %[[H]] : tensor<?x4096xf16>, tensor<?x4096xf16>
// CHECK-NEXT:    }
// CHECK:         return %[[RES]]#0, %[[RES]]#1
func.func @kernel_results(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>, %r: tensor<?x4096xf16>)
    -> (tensor<?x4096xf16>, tensor<?x4096xf16>) {
  %y, %h = fusion.kernel @layer0_norm (%a = %x, %b = %w, %c = %r)
      : (tensor<?x4096xf16>, tensor<4096xf16>, tensor<?x4096xf16>) -> (tensor<?x4096xf16>, tensor<?x4096xf16>)
      attributes {schedule = #fusion.norm_row_schedule<threads = 256, vector_width = 8, tokens_per_cta = 1>} {
    %0, %1 = fusion.rmsnorm %a, %b residual(%c : tensor<?x4096xf16>) {epsilon = 1.0e-05 : f64}
        : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>, tensor<?x4096xf16>
    fusion.yield %0, %1 : tensor<?x4096xf16>, tensor<?x4096xf16>
  }
  return %y, %h : tensor<?x4096xf16>, tensor<?x4096xf16>
}

// A kernel with one result and no schedule (no `attributes` keyword).
// CHECK-LABEL: func.func @kernel_one_result
// CHECK-SAME:    (%[[Q:[^:]*]]: {{.*}}, %[[KC:[^:]*]]: {{.*}}, %[[VC:[^:]*]]: {{.*}}, %[[BT:[^:]*]]: {{.*}}, %[[L:[^:]*]]: {{.*}})
// CHECK:         %[[O:.*]] = fusion.kernel @layer0_attention (%[[Q0:[^ ]*]] = %[[Q]], %[[K0:[^ ]*]] = %[[KC]], %[[V0:[^ ]*]] = %[[VC]], %[[B0:[^ ]*]] = %[[BT]], %[[L0:[^ ]*]] = %[[L]])
// CHECK-SAME:      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>) -> tensor<?x32x128xf16> {
// CHECK:           %[[A:.*]] = fusion.decode_attention %[[Q0]], %[[K0]], %[[V0]][%[[B0]], %[[L0]]]
// CHECK:           fusion.yield %[[A]] : tensor<?x32x128xf16>
// CHECK:         return %[[O]]
func.func @kernel_one_result(%q: tensor<?x32x128xf16>,
                             %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
                             %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xf16> {
  %o = fusion.kernel @layer0_attention (%q0 = %q, %k0 = %kc, %v0 = %vc, %b0 = %bt, %l0 = %lens)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> {
    %0 = fusion.decode_attention %q0, %k0, %v0[%b0, %l0]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}

// A kernel with no results (only the cache write) ends with an empty yield;
// one with a strategy but no inputs at all.
// CHECK-LABEL: func.func @kernel_no_results
// CHECK-SAME:    (%[[K:[^:]*]]: {{.*}}, %[[V:[^:]*]]: {{.*}}, %[[KC:[^:]*]]: {{.*}}, %[[VC:[^:]*]]: {{.*}}, %[[BT:[^:]*]]: {{.*}}, %[[P:[^:]*]]: {{.*}})
// CHECK:         fusion.kernel @layer0_append (%[[K0:[^ ]*]] = %[[K]], %[[V0:[^ ]*]] = %[[V]], %[[KC0:[^ ]*]] = %[[KC]], %[[VC0:[^ ]*]] = %[[VC]], %[[BT0:[^ ]*]] = %[[BT]], %[[P0:[^ ]*]] = %[[P]])
// CHECK-SAME:      : (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> () {
// CHECK:           fusion.kv_append %[[K0]], %[[V0]] into %[[KC0]], %[[VC0]][%[[BT0]], %[[P0]]]
// CHECK-NEXT:      fusion.yield{{$}}
// CHECK-NEXT:    }
// CHECK:         fusion.kernel @empty () : () -> () attributes {strategy = #fusion.strategy<none>} {
// CHECK-NEXT:      fusion.yield{{$}}
// CHECK-NEXT:    }
func.func @kernel_no_results(%k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
                             %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
                             %bt: tensor<?x?xi32>, %pos: tensor<?xi32>) {
  fusion.kernel @layer0_append (%k0 = %k, %v0 = %v, %kc0 = %kc, %vc0 = %vc, %bt0 = %bt, %p0 = %pos)
      : (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> () {
    fusion.kv_append %k0, %v0 into %kc0, %vc0[%bt0, %p0]
        : tensor<?x8x128xbf16> into memref<?x16x8x128xbf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield
  }
  fusion.kernel @empty () : () -> () attributes {strategy = #fusion.strategy<none>} {
    fusion.yield
  }
  return
}
