// RUN: fusion-opt %s --fusion-form-kernels=o-proj-partials-max-bytes=0 | FileCheck %s
// RUN: fusion-opt %s --fusion-form-kernels=strategy=none | FileCheck %s --check-prefix=NONE

// One decode step of a one-layer model: the embedding, the layer's front
// half and attention, its back half (o_proj from the [B, heads, head_dim]
// attention output, the post-attention norm with the residual add, gate/up,
// SwiGLU, down_proj), the final norm, the tied LM head and greedy sampling.
// Under `decode` the front half fuses, and so do the two linear chains of
// the back half (rule 1): the post-attention norm (with the residual add)
// with gate/up and SwiGLU, and the final norm with the LM head and argmax.
// The embedding joins the front half (rule 7), whose kernel also yields the
// embedded rows for the post-attention norm's residual. o_proj and
// down_proj take their input from another kernel and are kernels of their
// own.

// CHECK-LABEL: func.func @model_step(
//       CHECK:   %[[F:.+]]:2 = fusion.kernel @model_step_k0_fused (%[[TOK:.+]] = %arg0, %[[TAB:.+]] = %arg1,
//  CHECK-SAME:     -> (tensor<?x64xf16>, tensor<?x4x16xf16>) attributes {strategy = #fusion.strategy<decode>}
//  CHECK-NEXT:     %[[X:.+]] = fusion.embedding %[[TOK]], %[[TAB]]
//  CHECK-NEXT:     fusion.rmsnorm %[[X]],
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     %[[QR:.+]], %{{.+}} = fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield %[[X]], %[[QR]]
//       CHECK:   %[[A:.+]] = fusion.kernel @model_step_k1_decode_attention ({{.*}} = %[[F]]#1,
//  CHECK-NEXT:     fusion.decode_attention
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[O:.+]] = fusion.kernel @model_step_k2_linear ({{.*}} = %[[A]], {{.*}} = %arg9)
//  CHECK-SAME:     : (tensor<?x4x16xf16>, tensor<64x64xf16>) -> tensor<?x64xf16> attributes {strategy = #fusion.strategy<decode>}
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[M:.+]]:2 = fusion.kernel @model_step_k3_fused ({{.*}} = %[[O]], {{.*}} = %arg10, {{.*}} = %[[F]]#0, {{.*}} = %arg11)
//  CHECK-SAME:     -> (tensor<?x64xf16>, tensor<?x128xf16>)
//  CHECK-NEXT:     %{{.*}}, %[[RES:.+]] = fusion.rmsnorm
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     %[[ACT:.+]] = fusion.silu_mul
//  CHECK-NEXT:     fusion.yield %[[RES]], %[[ACT]]
//       CHECK:   %[[D:.+]] = fusion.kernel @model_step_k4_linear ({{.*}} = %[[M]]#1, {{.*}} = %arg12)
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[T:.+]] = fusion.kernel @model_step_k5_fused ({{.*}} = %[[D]], {{.*}} = %arg13, {{.*}} = %[[M]]#0, {{.*}} = %arg1)
//  CHECK-SAME:     -> tensor<?xi32>
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     %[[IDS:.+]] = fusion.argmax
//  CHECK-NEXT:     fusion.yield %[[IDS]] :
//  CHECK-NEXT:   }
//  CHECK-NEXT:   return %[[T]]
//   CHECK-NOT:   fusion.kernel

// The unfused baseline: all fourteen ops are kernels of their own.
// NONE-LABEL: func.func @model_step(
//       NONE:   fusion.kernel @model_step_k0_embedding
//  NONE-SAME:     attributes {strategy = #fusion.strategy<none>}
//  NONE-NEXT:     fusion.embedding
//       NONE:   fusion.kernel @model_step_k1_rmsnorm
//       NONE:   fusion.kernel @model_step_k2_qkv_proj
//       NONE:   fusion.kernel @model_step_k3_rope
//       NONE:   fusion.kernel @model_step_k4_kv_append
//       NONE:   fusion.kernel @model_step_k5_decode_attention
//       NONE:   fusion.kernel @model_step_k6_linear
//  NONE-SAME:     attributes {strategy = #fusion.strategy<none>}
//  NONE-NEXT:     fusion.linear
//  NONE-NEXT:     fusion.yield
//       NONE:   fusion.kernel @model_step_k7_rmsnorm
//       NONE:   fusion.kernel @model_step_k8_linear
//  NONE-NEXT:     fusion.linear
//       NONE:   fusion.kernel @model_step_k9_silu_mul
//  NONE-SAME:     attributes {strategy = #fusion.strategy<none>}
//  NONE-NEXT:     fusion.silu_mul
//  NONE-NEXT:     fusion.yield
//       NONE:   fusion.kernel @model_step_k10_linear
//  NONE-NEXT:     fusion.linear
//       NONE:   fusion.kernel @model_step_k11_rmsnorm
//       NONE:   fusion.kernel @model_step_k12_linear
//  NONE-NEXT:     fusion.linear
//       NONE:   %[[T:.+]] = fusion.kernel @model_step_k13_argmax
//  NONE-SAME:     attributes {strategy = #fusion.strategy<none>}
//  NONE-NEXT:     fusion.argmax
//  NONE-NEXT:     fusion.yield
//  NONE-NEXT:   }
//  NONE-NEXT:   return %[[T]]
//   NONE-NOT:   fusion.kernel
func.func @model_step(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %norm_w: tensor<64xf16>,
    %qkv_w: tensor<128x64xf16>, %pos: tensor<?xi32>, %seq_lens: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>,
    %o_w: tensor<64x64xf16>, %post_w: tensor<64xf16>, %gate_up_w: tensor<256x64xf16>,
    %down_w: tensor<64x128xf16>, %final_w: tensor<64xf16>) -> tensor<?xi32> {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y = fusion.rmsnorm %x, %norm_w {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %a = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.linear %a, %o_w : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %y2, %h2 = fusion.rmsnorm %o, %post_w residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %gu = fusion.linear %y2, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  %m = fusion.silu_mul %gu : tensor<?x256xf16> -> tensor<?x128xf16>
  %d = fusion.linear %m, %down_w : tensor<?x128xf16>, tensor<64x128xf16> -> tensor<?x64xf16>
  %f, %h3 = fusion.rmsnorm %d, %final_w residual(%h2 : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %logits = fusion.linear %f, %embed : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  %next = fusion.argmax %logits : tensor<?x256xf16> -> tensor<?xi32>
  return %next : tensor<?xi32>
}

