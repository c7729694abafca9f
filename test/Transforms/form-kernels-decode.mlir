// RUN: fusion-opt %s -split-input-file --fusion-form-kernels | FileCheck %s
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=decode | FileCheck %s

// The default decode strategy on one full layer front half: the norm (with
// its residual add), the projection, RoPE and the KV append form one kernel
// whose outputs are the residual stream and the rotated query; attention is
// the second kernel. Small shapes: hidden 64, 4 query heads, 2 KV heads,
// head_dim 16, pages of 4 tokens.

// CHECK-LABEL: func.func @layer(
//  CHECK-SAME:   %[[X:[a-z0-9]+]]: tensor<?x64xf16>, %[[R:[a-z0-9]+]]: tensor<?x64xf16>, %[[NW:[a-z0-9]+]]: tensor<64xf16>, %[[W:[a-z0-9]+]]: tensor<128x64xf16>,
//  CHECK-SAME:   %[[POS:[a-z0-9]+]]: tensor<?xi32>, %[[LENS:[a-z0-9]+]]: tensor<?xi32>, %[[BT:[a-z0-9]+]]: tensor<?x?xi32>, %[[KC:[a-z0-9]+]]: memref<?x4x2x16xf16>, %[[VC:[a-z0-9]+]]: memref<?x4x2x16xf16>)
//       CHECK:   %[[FRONT:.+]]:2 = fusion.kernel @layer_k0_fused
//  CHECK-SAME:     = %[[X]], {{.*}} = %[[NW]], {{.*}} = %[[R]], {{.*}} = %[[W]], {{.*}} = %[[POS]], {{.*}} = %[[KC]], {{.*}} = %[[VC]], {{.*}} = %[[BT]])
//  CHECK-SAME:     -> (tensor<?x64xf16>, tensor<?x4x16xf16>)
//  CHECK-SAME:     attributes {strategy = #fusion.strategy<decode>}
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield %{{.*}}, %{{.*}} : tensor<?x64xf16>, tensor<?x4x16xf16>
//  CHECK-NEXT:   }
//  CHECK-NEXT:   %[[O:.+]] = fusion.kernel @layer_k1_decode_attention ({{.*}} = %[[FRONT]]#1, {{.*}} = %[[KC]], {{.*}} = %[[VC]], {{.*}} = %[[BT]], {{.*}} = %[[LENS]])
//  CHECK-NEXT:     fusion.decode_attention
//  CHECK-NEXT:     fusion.yield
//  CHECK-NEXT:   }
//  CHECK-NEXT:   return %[[O]], %[[FRONT]]#0
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

// -----
// A layernorm front half with QKV bias, bf16 and GPT-J pairing fuses the same
// way; without a residual the kernel's only output is the rotated query.

// CHECK-LABEL: func.func @layernorm_layer(
//       CHECK:   %[[Q:.+]] = fusion.kernel @layernorm_layer_k0_fused
//  CHECK-SAME:     -> tensor<?x4x16xbf16>
//  CHECK-NEXT:     fusion.layernorm
//  CHECK-NEXT:     fusion.qkv_proj {{.*}} bias(
//  CHECK-NEXT:     fusion.rope {{.*}}gptj
//  CHECK-NEXT:     fusion.kv_append
//  CHECK-NEXT:     fusion.yield %{{.*}} : tensor<?x4x16xbf16>
//       CHECK:   fusion.kernel @layernorm_layer_k1_decode_attention ({{.*}} = %[[Q]],
func.func @layernorm_layer(%x: tensor<?x64xbf16>, %nw: tensor<64xbf16>, %nb: tensor<64xbf16>,
    %qkv_w: tensor<128x64xbf16>, %qkv_b: tensor<128xbf16>, %pos: tensor<?xi32>, %seq_lens: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x4x2x16xbf16>, %vc: memref<?x4x2x16xbf16>)
    -> tensor<?x4x16xbf16> {
  %y = fusion.layernorm %x, %nw, %nb {epsilon = 1.0e-05 : f64}
      : tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16> -> tensor<?x64xbf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w bias(%qkv_b : tensor<128xbf16>) {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xbf16>, tensor<128x64xbf16> -> tensor<?x4x16xbf16>, tensor<?x2x16xbf16>, tensor<?x2x16xbf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<gptj>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xbf16>, tensor<?x2x16xbf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x2x16xbf16> into memref<?x4x2x16xbf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x16xbf16>, memref<?x4x2x16xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o : tensor<?x4x16xbf16>
}
