// RUN: fusion-opt %fusion_src_root/examples/llama3_8b.mlir | FileCheck %s
// RUN: fusion-opt %fusion_src_root/examples/llama3_8b.mlir | fusion-opt | FileCheck %s

// examples/llama3_8b.mlir parses and verifies. Llama-3-8B: hidden 4096,
// 32/8 heads, head_dim 128 -> (32 + 2*8) * 128 = 6144 packed QKV rows;
// theta 500000 with Llama-3.1 scaling; eps 1e-5; f16; page size 16.

// CHECK-LABEL: func.func @decode_layer
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<?x4096xf16>, %[[R:[^:]*]]: tensor<?x4096xf16>, %[[NW:[^:]*]]: tensor<4096xf16>, %[[QW:[^:]*]]: tensor<6144x4096xf16>,
// CHECK-SAME:     %[[POS:[^:]*]]: tensor<?xi32>, %[[LENS:[^:]*]]: tensor<?xi32>, %[[BT:[^:]*]]: tensor<?x?xi32>, %[[KC:[^:]*]]: memref<?x16x8x128xf16>, %[[VC:[^:]*]]: memref<?x16x8x128xf16>)
// CHECK-SAME:    -> (tensor<?x32x128xf16>, tensor<?x4096xf16>)
// CHECK:         %[[Y:.*]], %[[H:.*]] = fusion.rmsnorm %[[X]], %[[NW]] residual(%[[R]] : tensor<?x4096xf16>) {epsilon = 1.000000e-05 : f64}
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = fusion.qkv_proj %[[Y]], %[[QW]] {head_dim = 128 : i64, num_heads = 32 : i64, num_kv_heads = 8 : i64}
// CHECK-SAME:      -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
// CHECK:         %[[QR:.*]], %[[KR:.*]] = fusion.rope %[[Q]], %[[K]], %[[POS]] {pairing = #fusion.rope_pairing<neox>,
// CHECK-SAME:      scaling = #fusion.llama3_scaling<factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position = 8192>,
// CHECK-SAME:      theta = 5.000000e+05 : f64}
// CHECK:         fusion.kv_append %[[KR]], %[[V]] into %[[KC]], %[[VC]][%[[BT]], %[[POS]]] : tensor<?x8x128xf16> into memref<?x16x8x128xf16>
// CHECK:         %[[O:.*]] = fusion.decode_attention %[[QR]], %[[KC]], %[[VC]][%[[BT]], %[[LENS]]] : tensor<?x32x128xf16>, memref<?x16x8x128xf16>
// CHECK:         return %[[O]], %[[H]] : tensor<?x32x128xf16>, tensor<?x4096xf16>
