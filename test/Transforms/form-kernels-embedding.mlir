// Rule 7 of --fusion-form-kernels: under `decode` the token embedding joins
// the kernel of the norm whose input it is when that norm heads a
// projection chain (the lone embedding kernel of a whole-model step goes).
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels | FileCheck %s
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels=strategy=none | FileCheck %s --check-prefix=NONE
// A second run changes nothing (the kernels are left alone).
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels > %t.once
// RUN: fusion-opt %t.once --split-input-file --fusion-form-kernels > %t.twice
// RUN: diff %t.once %t.twice

// Layer 0's front half as fusion-import --whole-model writes it: the
// embedding feeds the norm alone, so the kernel starts with the gather and
// yields only the rotated query (no kernel of its own for the embedding).
// CHECK-LABEL: func.func @front_half(
//       CHECK:   %[[Q:.+]] = fusion.kernel @front_half_k0_fused (%[[T:.+]] = %arg0, %[[E:.+]] = %arg1, %{{.+}} = %arg2, %{{.+}} = %arg3, %{{.+}} = %arg4, %{{.+}} = %arg6, %{{.+}} = %arg7, %{{.+}} = %arg5)
//  CHECK-SAME:     -> tensor<?x4x16xf16> attributes {strategy = #fusion.strategy<decode>}
//  CHECK-NEXT:     %[[X:.+]] = fusion.embedding %[[T]], %[[E]]
//  CHECK-NEXT:     fusion.rmsnorm %[[X]], %{{[^ ]+}} {
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield %{{[^ ]+}} : tensor<?x4x16xf16>
//  CHECK-NEXT:   }
//  CHECK-NEXT:   return %[[Q]]
//   CHECK-NOT:   fusion.kernel
// Unfused: the embedding is a kernel of its own, as every op.
// NONE-LABEL: func.func @front_half(
//       NONE:   fusion.kernel @front_half_k0_embedding
//  NONE-NEXT:     fusion.embedding
//  NONE-NEXT:     fusion.yield
//       NONE:   fusion.kernel @front_half_k1_rmsnorm
//       NONE:   fusion.kernel @front_half_k2_qkv_proj
func.func @front_half(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %nw: tensor<64xf16>,
    %w: tensor<128x64xf16>, %pos: tensor<?xi32>, %bt: tensor<?x?xi32>,
    %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>) -> tensor<?x4x16xf16> {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x4x16xf16>
}

// -----

// The embedded rows have another user (a later norm's residual, as layer
// 0's post-attention norm in a real model; and the function result): rule
// 2 does not cut the group, the rows become the kernel's first result and
// both users read it. The layernorm front half folds the same way.
// CHECK-LABEL: func.func @rows_used_later(
//       CHECK:   %[[K:.+]]:2 = fusion.kernel @rows_used_later_k0_fused
//  CHECK-SAME:     -> (tensor<?x64xf16>, tensor<?x4x16xf16>)
//  CHECK-NEXT:     %[[X:.+]] = fusion.embedding
//  CHECK-NEXT:     fusion.layernorm %[[X]],
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     %[[QR:.+]], %{{.+}} = fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield %[[X]], %[[QR]] : tensor<?x64xf16>, tensor<?x4x16xf16>
//       CHECK:   %[[N:.+]]:2 = fusion.kernel @rows_used_later_k1_fused (%{{.+}} = %arg9, %{{.+}} = %arg10, %{{.+}} = %[[K]]#0, %{{.+}} = %arg11)
//  CHECK-NEXT:     fusion.rmsnorm {{.*}} residual(
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.yield
//       CHECK:   return %[[K]]#0, %[[N]]#0, %[[N]]#1, %[[K]]#1
//   CHECK-NOT:   fusion.kernel
// NONE-LABEL: func.func @rows_used_later(
//       NONE:   fusion.kernel @rows_used_later_k0_embedding
//       NONE:   fusion.kernel @rows_used_later_k1_layernorm
func.func @rows_used_later(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %nw: tensor<64xf16>,
    %nb: tensor<64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>, %bt: tensor<?x?xi32>,
    %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>, %attn: tensor<?x64xf16>,
    %post_w: tensor<64xf16>, %up_w: tensor<128x64xf16>)
    -> (tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x128xf16>, tensor<?x4x16xf16>) {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y = fusion.layernorm %x, %nw, %nb {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o:2 = fusion.rmsnorm %attn, %post_w residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %u = fusion.linear %o#0, %up_w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  return %x, %o#1, %u, %qr : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x128xf16>, tensor<?x4x16xf16>
}

// -----

// A linear layer heads the chain (norm -> linear -> silu_mul, e.g. a model
// without decoder layers whose final norm normalises the embedding): the
// embedding folds too.
// CHECK-LABEL: func.func @linear_chain(
//       CHECK:   fusion.kernel @linear_chain_k0_fused
//  CHECK-SAME:     -> tensor<?x64xf16>
//  CHECK-NEXT:     fusion.embedding
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.silu_mul
//  CHECK-NEXT:     fusion.yield
//   CHECK-NOT:   fusion.kernel
func.func @linear_chain(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %nw: tensor<64xf16>,
    %gate_up_w: tensor<128x64xf16>) -> tensor<?x64xf16> {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %gu = fusion.linear %y, %gate_up_w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  %m = fusion.silu_mul %gu : tensor<?x128xf16> -> tensor<?x64xf16>
  return %m : tensor<?x64xf16>
}

// -----

// The normalised rows are also returned: rule 2 recomputes the norm, whose
// copy joins the group after the embedding; the norm itself stays, as its
// own kernel, for the function result and reads the embedded rows the
// fused kernel yields.
// CHECK-LABEL: func.func @normed_returned(
//       CHECK:   %[[K:.+]]:2 = fusion.kernel @normed_returned_k0_fused
//  CHECK-NEXT:     %[[X:.+]] = fusion.embedding
//  CHECK-NEXT:     fusion.rmsnorm %[[X]],
//  CHECK-NEXT:     %[[P:.+]] = fusion.linear
//  CHECK-NEXT:     fusion.yield %[[X]], %[[P]]
//       CHECK:   %[[N:.+]] = fusion.kernel @normed_returned_k1_rmsnorm ({{.*}} = %[[K]]#0,
//  CHECK-NEXT:     fusion.rmsnorm
//       CHECK:   return %[[N]], %[[K]]#1
//   CHECK-NOT:   fusion.kernel
func.func @normed_returned(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %nw: tensor<64xf16>,
    %w: tensor<128x64xf16>) -> (tensor<?x64xf16>, tensor<?x128xf16>) {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %p = fusion.linear %y, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  return %y, %p : tensor<?x64xf16>, tensor<?x128xf16>
}

// -----

// No fold where the embedding does not feed the input of a norm that heads
// a projection chain: a norm whose result is only returned (no emitter
// takes an embedding with a norm alone), ...
// CHECK-LABEL: func.func @norm_alone(
//       CHECK:   fusion.kernel @norm_alone_k0_embedding
//  CHECK-NEXT:     fusion.embedding
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @norm_alone_k1_rmsnorm
func.func @norm_alone(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %nw: tensor<64xf16>)
    -> tensor<?x64xf16> {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}

// -----

// ... a projection without a norm (the embedding is its input), ...
// CHECK-LABEL: func.func @no_norm(
//       CHECK:   fusion.kernel @no_norm_k0_embedding
//  CHECK-NEXT:     fusion.embedding
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @no_norm_k1_linear
func.func @no_norm(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %w: tensor<128x64xf16>)
    -> tensor<?x128xf16> {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %p = fusion.linear %x, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  return %p : tensor<?x128xf16>
}

// -----

// ... the embedding as the norm's residual rather than its input, ...
// CHECK-LABEL: func.func @residual_only(
//       CHECK:   fusion.kernel @residual_only_k0_embedding
//  CHECK-NEXT:     fusion.embedding
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @residual_only_k1_fused
//  CHECK-NEXT:     fusion.rmsnorm {{.*}} residual(
//  CHECK-NEXT:     fusion.linear
func.func @residual_only(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %h: tensor<?x64xf16>,
    %nw: tensor<64xf16>, %w: tensor<128x64xf16>) -> (tensor<?x64xf16>, tensor<?x128xf16>) {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y, %r = fusion.rmsnorm %h, %nw residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %p = fusion.linear %y, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  return %r, %p : tensor<?x64xf16>, tensor<?x128xf16>
}

// -----

// ... an op between the embedding and its norm (rule 5: the norm's kernel
// could not start at the embedding) ...
// CHECK-LABEL: func.func @op_between(
//       CHECK:   fusion.kernel @op_between_k0_embedding
//  CHECK-NEXT:     fusion.embedding
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @op_between_k1_argmax
//       CHECK:   fusion.kernel @op_between_k2_fused
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.linear
func.func @op_between(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %nw: tensor<64xf16>,
    %w: tensor<128x64xf16>, %logits: tensor<?x256xf16>) -> (tensor<?xi32>, tensor<?x128xf16>) {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %n = fusion.argmax %logits : tensor<?x256xf16> -> tensor<?xi32>
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %p = fusion.linear %y, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  return %n, %p : tensor<?xi32>, tensor<?x128xf16>
}

// -----

// ... and a projection that does not follow the norm (its weight defined
// in between: rule 4 keeps it out of the norm's group, which would be an
// embedding with a norm alone).
// CHECK-LABEL: func.func @weight_between(
//       CHECK:   fusion.kernel @weight_between_k0_embedding
//  CHECK-NEXT:     fusion.embedding
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @weight_between_k1_rmsnorm
//       CHECK:   tensor.empty
//       CHECK:   fusion.kernel @weight_between_k2_linear
func.func @weight_between(%tokens: tensor<?xi32>, %embed: tensor<256x64xf16>, %nw: tensor<64xf16>)
    -> tensor<?x128xf16> {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %w = tensor.empty() : tensor<128x64xf16>
  %p = fusion.linear %y, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  return %p : tensor<?x128xf16>
}
