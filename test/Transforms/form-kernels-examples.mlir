// Both strategies on every bundled example. A decode layer is two kernels
// with `decode` (front half + attention) and five with `none`; the 32-layer
// module gets the same grouping for every layer.
//
// RUN: fusion-opt %fusion_src_root/examples/llama3_8b.mlir --fusion-form-kernels | FileCheck %s --check-prefix=DECODE
// RUN: fusion-opt %fusion_src_root/examples/qwen2_7b.mlir --fusion-form-kernels | FileCheck %s --check-prefixes=DECODE,BIAS
// RUN: fusion-opt %fusion_src_root/examples/tinyllama_1_1b.mlir --fusion-form-kernels | FileCheck %s --check-prefix=DECODE
// RUN: fusion-opt %fusion_src_root/examples/llama3_8b.mlir --fusion-form-kernels=strategy=none | FileCheck %s --check-prefix=NONE
// RUN: fusion-opt %fusion_src_root/examples/qwen2_7b.mlir --fusion-form-kernels=strategy=none | FileCheck %s --check-prefix=NONE
// RUN: fusion-opt %fusion_src_root/examples/tinyllama_1_1b.mlir --fusion-form-kernels=strategy=none | FileCheck %s --check-prefix=NONE
// The kernel names of the 32-layer module, the layer index stripped, one line
// per layer (paste), counted (uniq -c): 32 identical layers.
// RUN: fusion-opt %fusion_src_root/examples/llama3_8b_32layers.mlir --fusion-form-kernels \
// RUN:   | grep -o 'fusion.kernel @[a-z0-9_]*' | sed -E 's/_k[0-9]+_/ /' | paste -d ' ' - - | uniq -c \
// RUN:   | FileCheck %s --check-prefix=LAYERS
// RUN: fusion-opt %fusion_src_root/examples/llama3_8b_32layers.mlir --fusion-form-kernels=strategy=none \
// RUN:   | grep -o 'fusion.kernel @[a-z0-9_]*' | sed -E 's/_k[0-9]+_/ /' | paste -d ' ' - - - - - | uniq -c \
// RUN:   | FileCheck %s --check-prefix=LAYERS-NONE

// DECODE-LABEL: func.func @decode_layer(
//       DECODE:   %[[F:.+]]:2 = fusion.kernel @decode_layer_k0_fused
//  DECODE-NEXT:     fusion.rmsnorm
//  DECODE-NEXT:     fusion.qkv_proj
//    BIAS-SAME:       bias(
//  DECODE-NEXT:     fusion.rope
//  DECODE-NEXT:     fusion.kv_append
//  DECODE-NEXT:     fusion.yield
//  DECODE-NEXT:   }
//  DECODE-NEXT:   %[[A:.+]] = fusion.kernel @decode_layer_k1_decode_attention ({{.*}} = %[[F]]#1,
//  DECODE-NEXT:     fusion.decode_attention
//  DECODE-NEXT:     fusion.yield
//  DECODE-NEXT:   }
//  DECODE-NEXT:   return %[[A]], %[[F]]#0

//   NONE-LABEL: func.func @decode_layer(
//         NONE:   fusion.kernel @decode_layer_k0_rmsnorm
//         NONE:   fusion.kernel @decode_layer_k1_qkv_proj
//         NONE:   fusion.kernel @decode_layer_k2_rope
//         NONE:   fusion.kernel @decode_layer_k3_kv_append
//         NONE:   fusion.kernel @decode_layer_k4_decode_attention
//     NONE-NOT:   fusion.kernel

//      LAYERS: {{^ *}}32 fusion.kernel @decode_layers fused fusion.kernel @decode_layers decode_attention{{$}}
//  LAYERS-NOT: {{.}}
// LAYERS-NONE: {{^ *}}32 fusion.kernel @decode_layers rmsnorm fusion.kernel @decode_layers qkv_proj fusion.kernel @decode_layers rope fusion.kernel @decode_layers kv_append fusion.kernel @decode_layers decode_attention{{$}}
// LAYERS-NONE-NOT: {{.}}
