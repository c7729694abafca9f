// RUN: fusion-opt %fusion_src_root/examples/qwen2_7b.mlir | FileCheck %s
// RUN: fusion-opt %fusion_src_root/examples/qwen2_7b.mlir | fusion-opt | FileCheck %s

// examples/qwen2_7b.mlir parses and verifies. Qwen2-7B: hidden 3584,
// 28/4 heads (group size 7), head_dim 128 -> (28 + 2*4) * 128 = 4608 packed
// QKV rows and bias elements; theta 1e6, no scaling; eps 1e-6; bf16; page
// size 16.

// CHECK-LABEL: func.func @decode_layer
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<?x3584xbf16>, %[[R:[^:]*]]: tensor<?x3584xbf16>, %[[NW:[^:]*]]: tensor<3584xbf16>, %[[QW:[^:]*]]: tensor<4608x3584xbf16>, %[[QB:[^:]*]]: tensor<4608xbf16>,
// CHECK-SAME:     %[[POS:[^:]*]]: tensor<?xi32>, %[[LENS:[^:]*]]: tensor<?xi32>, %[[BT:[^:]*]]: tensor<?x?xi32>, %[[KC:[^:]*]]: memref<?x16x4x128xbf16>, %[[VC:[^:]*]]: memref<?x16x4x128xbf16>)
// CHECK-SAME:    -> (tensor<?x28x128xbf16>, tensor<?x3584xbf16>)
// CHECK:         %[[Y:.*]], %[[H:.*]] = fusion.rmsnorm %[[X]], %[[NW]] residual(%[[R]] : tensor<?x3584xbf16>) {epsilon = 9.9999999999999995E-7 : f64}
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = fusion.qkv_proj %[[Y]], %[[QW]] bias(%[[QB]] : tensor<4608xbf16>) {head_dim = 128 : i64, num_heads = 28 : i64, num_kv_heads = 4 : i64}
// CHECK-SAME:      -> tensor<?x28x128xbf16>, tensor<?x4x128xbf16>, tensor<?x4x128xbf16>
// CHECK:         %[[QR:.*]], %[[KR:.*]] = fusion.rope %[[Q]], %[[K]], %[[POS]] {pairing = #fusion.rope_pairing<neox>, theta = 1.000000e+06 : f64}
// CHECK:         fusion.kv_append %[[KR]], %[[V]] into %[[KC]], %[[VC]][%[[BT]], %[[POS]]] : tensor<?x4x128xbf16> into memref<?x16x4x128xbf16>
// CHECK:         %[[O:.*]] = fusion.decode_attention %[[QR]], %[[KC]], %[[VC]][%[[BT]], %[[LENS]]] : tensor<?x28x128xbf16>, memref<?x16x4x128xbf16>
// CHECK:         return %[[O]], %[[H]] : tensor<?x28x128xbf16>, tensor<?x3584xbf16>
