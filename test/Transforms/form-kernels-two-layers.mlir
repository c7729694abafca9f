// RUN: fusion-opt %s --fusion-form-kernels | FileCheck %s
// RUN: fusion-opt %s --fusion-form-kernels=strategy=none | FileCheck %s --check-prefix=NONE

// Two layers chained through the residual stream (o_proj and the MLP are
// elided): each layer gets the same two kernels; the second layer's front
// half consumes the first layer's attention output and residual.

// CHECK-LABEL: func.func @two_layers(
//       CHECK:   %[[F0:.+]]:2 = fusion.kernel @two_layers_k0_fused
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[A0:.+]] = fusion.kernel @two_layers_k1_decode_attention ({{.*}} = %[[F0]]#1,
//       CHECK:   %[[C0:.+]] = tensor.collapse_shape %[[A0]]
//       CHECK:   %[[F1:.+]]:2 = fusion.kernel @two_layers_k2_fused ({{.*}} = %[[F0]]#0, {{.*}}, {{.*}} = %[[C0]],
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[A1:.+]] = fusion.kernel @two_layers_k3_decode_attention ({{.*}} = %[[F1]]#1,
//       CHECK:   return %[[A1]], %[[F1]]#0
//   CHECK-NOT:   fusion.kernel

// NONE-LABEL: func.func @two_layers(
// NONE-COUNT-10: fusion.kernel @two_layers_k
//     NONE-NOT: fusion.kernel
func.func @two_layers(%x: tensor<?x64xf16>, %res: tensor<?x64xf16>,
    %nw0: tensor<64xf16>, %w0: tensor<128x64xf16>, %kc0: memref<?x4x2x16xf16>, %vc0: memref<?x4x2x16xf16>,
    %nw1: tensor<64xf16>, %w1: tensor<128x64xf16>, %kc1: memref<?x4x2x16xf16>, %vc1: memref<?x4x2x16xf16>,
    %pos: tensor<?xi32>, %lens: tensor<?xi32>, %bt: tensor<?x?xi32>)
    -> (tensor<?x4x16xf16>, tensor<?x64xf16>) {
  %y0, %h0 = fusion.rmsnorm %x, %nw0 residual(%res : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %q0, %k0, %v0 = fusion.qkv_proj %y0, %w0 {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr0, %kr0 = fusion.rope %q0, %k0, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr0, %v0 into %kc0, %vc0[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o0 = fusion.decode_attention %qr0, %kc0, %vc0[%bt, %lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %r1 = tensor.collapse_shape %o0 [[0], [1, 2]] : tensor<?x4x16xf16> into tensor<?x64xf16>
  %y1, %h1 = fusion.rmsnorm %h0, %nw1 residual(%r1 : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %q1, %k1, %v1 = fusion.qkv_proj %y1, %w1 {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr1, %kr1 = fusion.rope %q1, %k1, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr1, %v1 into %kc1, %vc1[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o1 = fusion.decode_attention %qr1, %kc1, %vc1[%bt, %lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o1, %h1 : tensor<?x4x16xf16>, tensor<?x64xf16>
}
