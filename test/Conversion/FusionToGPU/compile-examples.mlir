// REQUIRES: ptxas
// Every example model and every input here compiles with fusion-compile
// under both strategies into PTX that ptxas assembles for sm_90 (and sm_80
// for the Llama-3-8B layer), with no libdevice calls even without a CUDA
// toolkit in the environment, and a manifest whose kernels are all in the
// PTX with every input bound.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/compile_examples.py --fusion-compile %fusion_bin/fusion-compile --ptxas %ptxas --out %t %fusion_src_root/examples/llama3_8b.mlir %fusion_src_root/examples/qwen2_7b.mlir %fusion_src_root/examples/tinyllama_1_1b.mlir %fusion_src_root/examples/llama3_8b_32layers.mlir %S/Inputs/gptj_partial_layernorm.mlir %S/Inputs/gemma_unit_offset_bf16.mlir %S/Inputs/group5_hidden5120.mlir %S/Inputs/group6_hidden1000_bf16.mlir %S/Inputs/embed_argmax_swiglu.mlir %S/Inputs/embedding_front_half.mlir | FileCheck %s
// RUN: %python %S/Inputs/compile_examples.py --chip sm_80 --fusion-compile %fusion_bin/fusion-compile --ptxas %ptxas --out %t/sm80 %fusion_src_root/examples/llama3_8b.mlir | FileCheck %s --check-prefix=SM80

// CHECK-DAG: OK embed_argmax_swiglu decode: 8 kernels, 8 entries
// CHECK-DAG: OK embed_argmax_swiglu none: 8 kernels, 8 entries
// CHECK-DAG: OK embedding_front_half decode: 2 kernels, 2 entries
// CHECK-DAG: OK embedding_front_half none: 10 kernels, 10 entries
// CHECK-DAG: OK gemma_unit_offset_bf16 decode: 1 kernels
// CHECK-DAG: OK gemma_unit_offset_bf16 none: 4 kernels
// CHECK-DAG: OK gptj_partial_layernorm decode: 1 kernels
// CHECK-DAG: OK gptj_partial_layernorm none: 4 kernels
// CHECK-DAG: OK group5_hidden5120 decode: 1 kernels
// CHECK-DAG: OK group6_hidden1000_bf16 decode: 2 kernels
// CHECK-DAG: OK llama3_8b decode: 2 kernels, 2 entries
// CHECK-DAG: OK llama3_8b none: 5 kernels, 5 entries
// CHECK-DAG: OK llama3_8b_32layers decode: 64 kernels, 2 entries
// CHECK-DAG: OK llama3_8b_32layers none: 160 kernels, 5 entries
// CHECK-DAG: OK qwen2_7b decode: 2 kernels
// CHECK-DAG: OK qwen2_7b none: 5 kernels
// CHECK-DAG: OK tinyllama_1_1b decode: 2 kernels
// CHECK-DAG: OK tinyllama_1_1b none: 5 kernels
// CHECK-NOT: FAIL

// SM80: OK llama3_8b decode
// SM80: OK llama3_8b none
