// RUN: fusion-opt %s -split-input-file --fusion-form-kernels | FileCheck %s

// A producer whose result is consumed inside the group and also outside it.

// The normalised activation is cheap to recompute: the group gets its own
// copy of the norm, and the original norm stays, as its own kernel, for the
// outside user. Nothing but the group's real outputs is yielded.
// CHECK-LABEL: func.func @norm_used_outside(
//       CHECK:   %[[G:.+]] = fusion.kernel @norm_used_outside_k0_fused
//  CHECK-SAME:     -> tensor<?x4x16xf16>
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield %{{.*}} : tensor<?x4x16xf16>
//       CHECK:   %[[N:.+]] = fusion.kernel @norm_used_outside_k1_rmsnorm
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.yield
//       CHECK:   return %[[G]], %[[N]]
func.func @norm_used_outside(%x: tensor<?x64xf16>, %nw: tensor<64xf16>, %qkv_w: tensor<128x64xf16>,
    %pos: tensor<?xi32>, %bt: tensor<?x?xi32>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>)
    -> (tensor<?x4x16xf16>, tensor<?x64xf16>) {
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %y : tensor<?x4x16xf16>, tensor<?x64xf16>
}

// -----
// The un-rotated key is also returned: recomputing a projection is not
// cheap, so the chain is left unfused at RoPE (norm + projection form one
// kernel that yields the key; RoPE and the append form the next).
// CHECK-LABEL: func.func @key_used_outside(
//       CHECK:   %[[P:.+]]:3 = fusion.kernel @key_used_outside_k0_fused
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[R:.+]] = fusion.kernel @key_used_outside_k1_fused ({{.*}} = %[[P]]#0, {{.*}} = %[[P]]#1,
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield
//       CHECK:   return %[[R]], %[[P]]#1
func.func @key_used_outside(%x: tensor<?x64xf16>, %nw: tensor<64xf16>, %qkv_w: tensor<128x64xf16>,
    %pos: tensor<?xi32>, %bt: tensor<?x?xi32>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>)
    -> (tensor<?x4x16xf16>, tensor<?x2x16xf16>) {
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %k : tensor<?x4x16xf16>, tensor<?x2x16xf16>
}
