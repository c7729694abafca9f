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
