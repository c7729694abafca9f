// RUN: fusion-opt %fusion_src_root/examples/tinyllama_1_1b.mlir | FileCheck %s
// RUN: fusion-opt %fusion_src_root/examples/tinyllama_1_1b.mlir | fusion-opt | FileCheck %s

// examples/tinyllama_1_1b.mlir parses and verifies. TinyLlama-1.1B: hidden
// 2048, 32/4 heads (group size 8), head_dim 64 -> (32 + 2*4) * 64 = 2560
// packed QKV rows; theta 10000; eps 1e-5; f16; page size 16.

// CHECK-LABEL: func.func @decode_layer
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<?x2048xf16>, %[[R:[^:]*]]: tensor<?x2048xf16>, %[[NW:[^:]*]]: tensor<2048xf16>, %[[QW:[^:]*]]: tensor<2560x2048xf16>,
// CHECK-SAME:     %[[POS:[^:]*]]: tensor<?xi32>, %[[LENS:[^:]*]]: tensor<?xi32>, %[[BT:[^:]*]]: tensor<?x?xi32>, %[[KC:[^:]*]]: memref<?x16x4x64xf16>, %[[VC:[^:]*]]: memref<?x16x4x64xf16>)
// CHECK-SAME:    -> (tensor<?x32x64xf16>, tensor<?x2048xf16>)
// CHECK:         %[[Y:.*]], %[[H:.*]] = fusion.rmsnorm %[[X]], %[[NW]] residual(%[[R]] : tensor<?x2048xf16>) {epsilon = 1.000000e-05 : f64}
// CHECK:         %[[Q:.*]], %[[K:.*]], %[[V:.*]] = fusion.qkv_proj %[[Y]], %[[QW]] {head_dim = 64 : i64, num_heads = 32 : i64, num_kv_heads = 4 : i64}
// CHECK-SAME:      -> tensor<?x32x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>
// CHECK:         %[[QR:.*]], %[[KR:.*]] = fusion.rope %[[Q]], %[[K]], %[[POS]] {pairing = #fusion.rope_pairing<neox>, theta = 1.000000e+04 : f64}
// CHECK:         fusion.kv_append %[[KR]], %[[V]] into %[[KC]], %[[VC]][%[[BT]], %[[POS]]] : tensor<?x4x64xf16> into memref<?x16x4x64xf16>
// CHECK:         %[[O:.*]] = fusion.decode_attention %[[QR]], %[[KC]], %[[VC]][%[[BT]], %[[LENS]]] : tensor<?x32x64xf16>, memref<?x16x4x64xf16>
// CHECK:         return %[[O]], %[[H]] : tensor<?x32x64xf16>, tensor<?x2048xf16>
