// Importing the real configs of runtime/test/data/configs reproduces the
// hand-written examples op for op, attribute for attribute (compared after
// fusion-opt, which prints both the same way). The checkpoints are bf16;
// examples/llama3_8b.mlir and tinyllama_1_1b.mlir run in f16 (--dtype).

// RUN: fusion-opt %fusion_src_root/examples/llama3_8b.mlir -o %t.llama3_8b.expected
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/llama3_8b.json --dtype=f16 | fusion-opt -o %t.llama3_8b.imported
// RUN: diff %t.llama3_8b.expected %t.llama3_8b.imported

// RUN: fusion-opt %fusion_src_root/examples/qwen2_7b.mlir -o %t.qwen2_7b.expected
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/qwen2_7b.json | fusion-opt -o %t.qwen2_7b.imported
// RUN: diff %t.qwen2_7b.expected %t.qwen2_7b.imported

// RUN: fusion-opt %fusion_src_root/examples/tinyllama_1_1b.mlir -o %t.tinyllama.expected
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/tinyllama_1_1b.json --dtype=f16 | fusion-opt -o %t.tinyllama.imported
// RUN: diff %t.tinyllama.expected %t.tinyllama.imported

// Llama-3-8B (transformers 4 layout: top-level rope_theta + rope_scaling)
// as printed: the argument names of the example.
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/llama3_8b.json --dtype=f16 | FileCheck %s --check-prefix=LLAMA
// LLAMA:      //   llama: hidden 4096, heads 32/8, head_dim 128, rms_norm_eps 1e-05, rope_theta 500000 (llama3 factor 8, low 1, high 4, original 8192), no bias
// LLAMA:      func.func @decode_layer(%x: tensor<?x4096xf16>, %residual: tensor<?x4096xf16>, %norm_w: tensor<4096xf16>, %qkv_w: tensor<6144x4096xf16>, %positions: tensor<?xi32>, %seq_lens: tensor<?xi32>, %block_table: tensor<?x?xi32>, %k_cache: memref<?x16x8x128xf16>, %v_cache: memref<?x16x8x128xf16>) -> (tensor<?x32x128xf16>, tensor<?x4096xf16>)

// Mistral 7B v0.3: no attention_bias field (no bias), theta 1e6, bf16,
// sliding_window null (no warning).
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/mistral_7b_v0_3.json 2>&1 | FileCheck %s --check-prefix=MISTRAL
// RUN: fusion-import %fusion_src_root/runtime/test/data/configs/mistral_7b_v0_3.json | fusion-opt --verify-roundtrip | FileCheck %s --check-prefix=MISTRAL-RT
// MISTRAL-RT: func.func @decode_layer(%arg0: tensor<?x4096xbf16>, %arg1: tensor<?x4096xbf16>, %arg2: tensor<4096xbf16>, %arg3: tensor<6144x4096xbf16>
// MISTRAL-RT: fusion.rope {{.*}} {pairing = #fusion.rope_pairing<neox>, theta = 1.000000e+06 : f64}
// MISTRAL-NOT:  warning
// MISTRAL:      //   mistral: hidden 4096, heads 32/8, head_dim 128, rms_norm_eps 1e-05, rope_theta 1e+06, no bias
// MISTRAL:      func.func @decode_layer(%x: tensor<?x4096xbf16>, %residual: tensor<?x4096xbf16>, %norm_w: tensor<4096xbf16>, %qkv_w: tensor<6144x4096xbf16>, %positions
// MISTRAL-SAME:   %k_cache: memref<?x16x8x128xbf16>
// MISTRAL:      fusion.rope {{.*}} {pairing = #fusion.rope_pairing<neox>, theta = 1.000000e+06 : f64}
// MISTRAL-NOT:  scaling

// The tiny checkpoint of the runtime tests: head_dim 16, llama3 scaling.
// RUN: fusion-import %fusion_src_root/runtime/test/data/tiny_checkpoint/config.json | fusion-opt --verify-roundtrip | FileCheck %s --check-prefix=TINY
// TINY:      func.func @decode_layer(%arg0: tensor<?x64xbf16>, %arg1: tensor<?x64xbf16>, %arg2: tensor<64xbf16>, %arg3: tensor<128x64xbf16>
// TINY-SAME:   memref<?x16x2x16xbf16>
// TINY:      fusion.qkv_proj {{.*}} {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64}
// TINY:      fusion.rope {{.*}} scaling = #fusion.llama3_scaling<factor = 8.000000e+00
