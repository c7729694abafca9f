// Kernel formation on the decode step of a whole model as fusion-import
// --whole-model writes it (runtime/test/data/configs/tiny_model_bias_untied.json:
// qwen2, 3 layers, q/k/v bias, untied LM head, bf16).
//
// `decode` with rule 6 off: per layer the fused front half, attention,
// o_proj, the post-attention norm fused with gate/up and SwiGLU, down_proj
// (rule 1); then the final norm fused with the LM head and argmax: 16
// kernels. Layer 0's front half starts with the embedding (rule 7) and has
// no residual; it yields the embedded rows, which layer 0's post-attention
// norm takes as its residual. From layer 1 on every layer's kernels have
// the same operand and result types, so FusionToGPU emits them once
// (identical kernels share an entry).
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/tiny_model_bias_untied.json --whole-model | fusion-opt --fusion-form-kernels=o-proj-partials-max-bytes=0 | FileCheck %s

// CHECK-LABEL: func.func @decode_step(
//       CHECK:   %[[E:.+]]:2 = fusion.kernel @decode_step_k0_fused (%[[TOK:.+]] = %arg0, %[[TAB:.+]] = %arg1,
//  CHECK-SAME:     -> (tensor<?x64xbf16>, tensor<?x4x16xbf16>)
//  CHECK-NEXT:     %[[X:.+]] = fusion.embedding %[[TOK]], %[[TAB]]
//  CHECK-NEXT:     fusion.rmsnorm %[[X]], %{{[^ ]+}} {
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     %[[QR:.+]], %{{.+}} = fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield %[[X]], %[[QR]]
//       CHECK:   fusion.kernel @decode_step_k1_decode_attention {{.*}} : ([[ATTN:[^)]*]])
//       CHECK:   fusion.kernel @decode_step_k2_linear {{.*}} : ([[OPROJ:[^)]*]])
//       CHECK:   fusion.kernel @decode_step_k3_fused ({{.*}} = %[[E]]#0, {{.*}} : ([[MLP:[^)]*]]) -> (tensor<?x64xbf16>, tensor<?x80xbf16>)
//  CHECK-NEXT:     fusion.rmsnorm {{.*}} residual(
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.silu_mul
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @decode_step_k4_linear {{.*}} : ([[DOWN:[^)]*]])
// Layer 1: the front half with the residual stream (two results).
//       CHECK:   fusion.kernel @decode_step_k5_fused {{.*}} : ([[FRONT:[^)]*]]) -> (tensor<?x64xbf16>, tensor<?x4x16xbf16>)
//  CHECK-NEXT:     fusion.rmsnorm {{.*}} residual(
//  CHECK-NEXT:     fusion.qkv_proj {{.*}} bias(
//       CHECK:   fusion.kernel @decode_step_k6_decode_attention {{.*}} : ([[ATTN]])
//       CHECK:   fusion.kernel @decode_step_k7_linear {{.*}} : ([[OPROJ]])
//       CHECK:   fusion.kernel @decode_step_k8_fused {{.*}} : ([[MLP]])
//       CHECK:   fusion.kernel @decode_step_k9_linear {{.*}} : ([[DOWN]])
// Layer 2: the same kernels as layer 1.
//       CHECK:   fusion.kernel @decode_step_k10_fused {{.*}} : ([[FRONT]]) -> (tensor<?x64xbf16>, tensor<?x4x16xbf16>)
//       CHECK:   fusion.kernel @decode_step_k11_decode_attention {{.*}} : ([[ATTN]])
//       CHECK:   fusion.kernel @decode_step_k12_linear {{.*}} : ([[OPROJ]])
//       CHECK:   fusion.kernel @decode_step_k13_fused {{.*}} : ([[MLP]])
//       CHECK:   %[[D:.+]] = fusion.kernel @decode_step_k14_linear {{.*}} : ([[DOWN]])
// The final norm (its residual_out is not used) with the LM head and
// argmax; the logits are a result too (the function returns them).
//       CHECK:   %[[L:.+]]:2 = fusion.kernel @decode_step_k15_fused ({{.*}} = %[[D]],
//  CHECK-SAME:     tensor<200x64xbf16>) -> (tensor<?x200xbf16>, tensor<?xi32>)
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.argmax
//  CHECK-NEXT:     fusion.yield
//       CHECK:   return %[[L]]#1, %[[L]]#0 : tensor<?xi32>, tensor<?x200xbf16>
//   CHECK-NOT:   fusion.kernel

// `decode` as it is by default, with rule 6: per layer the fused front half,
// attention with the o_proj partials of its KV group (one: the config has
// one KV head), the partials' sum fused with the post-attention norm,
// gate/up and SwiGLU, then down_proj: 13 kernels (layer 0's front half
// again with the embedding). The kernels of layers 1 and 2 again have the
// same types.
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/tiny_model_bias_untied.json --whole-model | fusion-opt --fusion-form-kernels | FileCheck %s --check-prefix=FOLD

// FOLD-LABEL: func.func @decode_step(
//       FOLD:   %[[E:.+]]:2 = fusion.kernel @decode_step_k0_fused (%[[TOK:.+]] = %arg0, %[[TAB:.+]] = %arg1,
//  FOLD-SAME:     -> (tensor<?x64xbf16>, tensor<?x4x16xbf16>)
//  FOLD-NEXT:     %[[X:.+]] = fusion.embedding %[[TOK]], %[[TAB]]
//  FOLD-NEXT:     fusion.rmsnorm %[[X]], %{{[^ ]+}} {
//  FOLD-NEXT:     fusion.qkv_proj
//  FOLD-NEXT:     %[[QR:.+]], %{{.+}} = fusion.rope
//  FOLD-NEXT:     fusion.kv_append
//  FOLD-NEXT:     fusion.yield %[[X]], %[[QR]]
//       FOLD:   fusion.kernel @decode_step_k1_fused {{.*}} : ([[ATTN:[^)]*]]) -> tensor<?x1x64xf32>
//  FOLD-NEXT:     fusion.decode_attention
//  FOLD-NEXT:     fusion.linear_partials
//  FOLD-NEXT:     fusion.yield
//       FOLD:   fusion.kernel @decode_step_k2_fused ({{.*}} = %[[E]]#0, {{.*}} : ([[MLP:[^)]*]]) -> (tensor<?x64xbf16>, tensor<?x80xbf16>)
//  FOLD-NEXT:     fusion.sum_partials
//  FOLD-NEXT:     fusion.rmsnorm {{.*}} residual(
//  FOLD-NEXT:     fusion.linear
//  FOLD-NEXT:     fusion.silu_mul
//  FOLD-NEXT:     fusion.yield
//       FOLD:   fusion.kernel @decode_step_k3_linear {{.*}} : ([[DOWN:[^)]*]])
// Layer 1: the front half with the residual stream (two results).
//       FOLD:   fusion.kernel @decode_step_k4_fused {{.*}} : ([[FRONT:[^)]*]]) -> (tensor<?x64xbf16>, tensor<?x4x16xbf16>)
//  FOLD-NEXT:     fusion.rmsnorm {{.*}} residual(
//  FOLD-NEXT:     fusion.qkv_proj {{.*}} bias(
//       FOLD:   fusion.kernel @decode_step_k5_fused {{.*}} : ([[ATTN]])
//       FOLD:   fusion.kernel @decode_step_k6_fused {{.*}} : ([[MLP]])
//       FOLD:   fusion.kernel @decode_step_k7_linear {{.*}} : ([[DOWN]])
// Layer 2: the same kernels as layer 1.
//       FOLD:   fusion.kernel @decode_step_k8_fused {{.*}} : ([[FRONT]]) -> (tensor<?x64xbf16>, tensor<?x4x16xbf16>)
//       FOLD:   fusion.kernel @decode_step_k9_fused {{.*}} : ([[ATTN]])
//       FOLD:   fusion.kernel @decode_step_k10_fused {{.*}} : ([[MLP]])
//       FOLD:   %[[D:.+]] = fusion.kernel @decode_step_k11_linear {{.*}} : ([[DOWN]])
// The final norm (its residual_out is not used) with the LM head and
// argmax; the logits are a result too (the function returns them).
//       FOLD:   %[[L:.+]]:2 = fusion.kernel @decode_step_k12_fused ({{.*}} = %[[D]],
//  FOLD-SAME:     tensor<200x64xbf16>) -> (tensor<?x200xbf16>, tensor<?xi32>)
//  FOLD-NEXT:     fusion.rmsnorm
//  FOLD-NEXT:     fusion.linear
//  FOLD-NEXT:     fusion.argmax
//  FOLD-NEXT:     fusion.yield
//       FOLD:   return %[[L]]#1, %[[L]]#0 : tensor<?xi32>, tensor<?x200xbf16>
//  FOLD-NOT:   fusion.kernel

// `none`: one op per kernel, 1 + 10 per layer + 3 = 34 kernels of 34 ops.
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/tiny_model_bias_untied.json --whole-model | fusion-opt --fusion-form-kernels=strategy=none > %t.none.mlir
// RUN: FileCheck %s --check-prefix=NONE --input-file=%t.none.mlir
// RUN: grep -c -E '^ +(%[^=]+= )?fusion\.(embedding|rmsnorm|qkv_proj|rope|kv_append|decode_attention|linear|silu_mul|argmax) ' %t.none.mlir | FileCheck %s --check-prefix=OPS
// NONE-LABEL: func.func @decode_step(
//       NONE:   fusion.kernel @decode_step_k0_embedding
//  NONE-SAME:     attributes {strategy = #fusion.strategy<none>}
//  NONE-NEXT:     fusion.embedding
//  NONE-NEXT:     fusion.yield
// NONE-COUNT-33:   fusion.kernel @decode_step_k{{[0-9]+}}_{{[a-z_]+}} ({{.*}}strategy<none>
//   NONE-NOT:   fusion.kernel
//        OPS: {{^}}34{{$}}
