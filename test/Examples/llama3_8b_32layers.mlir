// RUN: fusion-opt %fusion_src_root/examples/llama3_8b_32layers.mlir | FileCheck %s

// examples/llama3_8b_32layers.mlir (written by examples/gen_layers.py)
// parses and verifies. Arguments: x, residual, positions, seq_lens,
// block_table, then (norm_w, qkv_w, k_cache, v_cache) per layer:
// 5 + 4 * 32 = 133, so layer 31's caches are %arg131 and %arg132.

// CHECK-LABEL: func.func @decode_layers
// CHECK-SAME:    (%[[X:arg0]]: tensor<?x4096xf16>, %[[R:arg1]]: tensor<?x4096xf16>, %[[POS:arg2]]: tensor<?xi32>, %[[LENS:arg3]]: tensor<?xi32>, %[[BT:arg4]]: tensor<?x?xi32>,
// CHECK-SAME:     %[[NW0:arg5]]: tensor<4096xf16>, %[[QW0:arg6]]: tensor<6144x4096xf16>, %[[KC0:arg7]]: memref<?x16x8x128xf16>, %[[VC0:arg8]]: memref<?x16x8x128xf16>,
// CHECK-SAME:     %[[NW1:arg9]]: tensor<4096xf16>,
// CHECK-SAME:     %[[KC31:arg131]]: memref<?x16x8x128xf16>, %[[VC31:arg132]]: memref<?x16x8x128xf16>)
// CHECK-SAME:    -> (tensor<?x32x128xf16>, tensor<?x4096xf16>)

// Layer 0 takes the function's x and residual.
// CHECK:         %[[Y0:.*]], %[[H0:.*]] = fusion.rmsnorm %[[X]], %[[NW0]] residual(%[[R]] : tensor<?x4096xf16>) {epsilon = 1.000000e-05 : f64}
// CHECK:         %[[Q0:.*]], %[[K0:.*]], %[[V0:.*]] = fusion.qkv_proj %[[Y0]], %[[QW0]] {head_dim = 128 : i64, num_heads = 32 : i64, num_kv_heads = 8 : i64}
// CHECK:         %[[QR0:.*]], %[[KR0:.*]] = fusion.rope %[[Q0]], %[[K0]], %[[POS]] {pairing = #fusion.rope_pairing<neox>,
// CHECK-SAME:      scaling = #fusion.llama3_scaling<factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position = 8192>,
// CHECK-SAME:      theta = 5.000000e+05 : f64}
// CHECK:         fusion.kv_append %[[KR0]], %[[V0]] into %[[KC0]], %[[VC0]][%[[BT]], %[[POS]]]
// CHECK:         %[[O0:.*]] = fusion.decode_attention %[[QR0]], %[[KC0]], %[[VC0]][%[[BT]], %[[LENS]]]
// CHECK:         %[[F0:.*]] = tensor.collapse_shape %[[O0]] {{\[\[}}0], [1, 2]] : tensor<?x32x128xf16> into tensor<?x4096xf16>

// Layer 1: x is layer 0's residual_out, residual is layer 0's flattened
// attention output.
// CHECK:         fusion.rmsnorm %[[H0]], %[[NW1]] residual(%[[F0]] : tensor<?x4096xf16>)

// Layers 1..31 each append once; layer 31 reads its own caches and is last.
// CHECK-COUNT-31: fusion.kv_append
// CHECK:         %[[OL:.*]] = fusion.decode_attention %{{[^,]*}}, %[[KC31]], %[[VC31]][%[[BT]], %[[LENS]]]
// CHECK-NOT:     fusion.
// CHECK:         return %[[OL]], %{{.*}} : tensor<?x32x128xf16>, tensor<?x4096xf16>
