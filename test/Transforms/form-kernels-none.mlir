// RUN: fusion-opt %s --fusion-form-kernels=strategy=none | FileCheck %s

// The unfused baseline: every op is its own kernel, in program order, and
// every intermediate crosses a kernel boundary (goes through memory).

// CHECK-LABEL: func.func @layer(
//       CHECK:   %[[N:.+]]:2 = fusion.kernel @layer_k0_rmsnorm
//  CHECK-SAME:     attributes {strategy = #fusion.strategy<none>}
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[P:.+]]:3 = fusion.kernel @layer_k1_qkv_proj ({{.*}} = %[[N]]#0,
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[R:.+]]:2 = fusion.kernel @layer_k2_rope ({{.*}} = %[[P]]#0, {{.*}} = %[[P]]#1,
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @layer_k3_kv_append ({{.*}} = %[[R]]#1, {{.*}} = %[[P]]#2,
//  CHECK-SAME:     -> () attributes
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield
//  CHECK-NEXT:   }
//  CHECK-NEXT:   %[[O:.+]] = fusion.kernel @layer_k4_decode_attention ({{.*}} = %[[R]]#0,
//  CHECK-NEXT:     fusion.decode_attention
//  CHECK-NEXT:     fusion.yield
//  CHECK-NEXT:   }
//  CHECK-NEXT:   return %[[O]], %[[N]]#1
//   CHECK-NOT:   fusion.kernel
func.func @layer(%x: tensor<?x64xf16>, %res: tensor<?x64xf16>, %norm_w: tensor<64xf16>,
    %qkv_w: tensor<128x64xf16>, %pos: tensor<?xi32>, %seq_lens: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>)
    -> (tensor<?x4x16xf16>, tensor<?x64xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%res : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o, %h : tensor<?x4x16xf16>, tensor<?x64xf16>
}
