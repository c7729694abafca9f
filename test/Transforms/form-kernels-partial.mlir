// RUN: fusion-opt %s -split-input-file --fusion-form-kernels | FileCheck %s

// Partial chains get the longest legal group.

// layernorm -> qkv_proj without RoPE: one kernel yielding q, k and v.
// CHECK-LABEL: func.func @norm_proj(
//       CHECK:   %[[K:.+]]:3 = fusion.kernel @norm_proj_k0_fused
//  CHECK-SAME:     -> (tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>)
//  CHECK-NEXT:     fusion.layernorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.yield
//       CHECK:   return %[[K]]#0, %[[K]]#1, %[[K]]#2
func.func @norm_proj(%x: tensor<?x64xf16>, %w: tensor<64xf16>, %b: tensor<64xf16>, %qkv_w: tensor<128x64xf16>)
    -> (tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>) {
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  return %q, %k, %v : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
}

// -----
// An rmsnorm alone is its own kernel.
// CHECK-LABEL: func.func @norm_alone(
//       CHECK:   %[[K:.+]] = fusion.kernel @norm_alone_k0_rmsnorm
//  CHECK-NEXT:     fusion.rmsnorm {{.*}} unit_offset
//  CHECK-NEXT:     fusion.yield
//       CHECK:   return %[[K]]
func.func @norm_alone(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-06 : f64, unit_offset}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}

// -----
// Attention alone is its own kernel.
// CHECK-LABEL: func.func @attention_alone(
//       CHECK:   fusion.kernel @attention_alone_k0_decode_attention
//  CHECK-NEXT:     fusion.decode_attention
//   CHECK-NOT:   fusion.kernel
func.func @attention_alone(%q: tensor<?x4x16xf16>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x4x16xf16> {
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %lens] {scale = 1.250000e-01 : f64}
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o : tensor<?x4x16xf16>
}

// -----
// qkv_proj -> rope -> kv_append without a norm (the input is already
// normalised): one kernel.
// CHECK-LABEL: func.func @proj_rope_append(
//       CHECK:   fusion.kernel @proj_rope_append_k0_fused
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield
//   CHECK-NOT:   fusion.kernel
func.func @proj_rope_append(%y: tensor<?x64xf16>, %qkv_w: tensor<128x64xf16>, %pos: tensor<?xi32>,
    %bt: tensor<?x?xi32>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>) -> tensor<?x4x16xf16> {
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64, rotary_dim = 8 : i64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x4x16xf16>
}

// -----
// RoPE then KV append with no projection: rope does not start a front-half
// chain on its own, but the append consumes its key, so they fuse.
// CHECK-LABEL: func.func @rope_append(
//       CHECK:   fusion.kernel @rope_append_k0_fused
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield
func.func @rope_append(%q: tensor<?x4x16xf16>, %k: tensor<?x2x16xf16>, %v: tensor<?x2x16xf16>, %pos: tensor<?xi32>,
    %bt: tensor<?x?xi32>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>) -> tensor<?x4x16xf16> {
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x4x16xf16>
}
