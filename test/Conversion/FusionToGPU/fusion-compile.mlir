// fusion-compile writes <prefix>.ptx and <prefix>.manifest.json: kernels in
// launch order with their entries, parameters (kind, role, dtype, shape),
// launch geometry, schedule, the ops they compute, and the buffer bindings
// (function argument, or an earlier kernel's result) a runtime needs to
// chain them. On failure it writes nothing.
// RUN: rm -rf %t && mkdir -p %t
// A temporary a killed run left behind is removed by the next run.
// RUN: touch %t/layer.ptx.tmp %t/layer.manifest.json.tmp
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT fusion-compile %s -o %t/layer | FileCheck %s --check-prefix=WROTE
// WROTE: fusion-compile: wrote {{.*}}layer.ptx (2 kernels, 6 entries) and {{.*}}layer.manifest.json
// RUN: not ls %t/layer.ptx.tmp
// RUN: not ls %t/layer.manifest.json.tmp
// RUN: FileCheck %s --input-file=%t/layer.manifest.json
// RUN: FileCheck %s --input-file=%t/layer.ptx --check-prefix=PTX
// The GEMM-shaped variants' pipeline depth follows the chip's shared memory
// per CTA (Llama-3-8B, 64 tokens: 128 + 2 x 64 + 1 rows of 144 bytes =
// 37008 bytes per stage): 3 stages (111024 bytes) in 163 KiB (sm_80), 2
// (74016) in 99 KiB (sm_86). On sm_90 the 128 weight rows come by TMA
// unpadded (128 bytes): 16384 + 129 x 144 = 34960, slots at 1 KiB
// boundaries (35840), 3 stages + 1 KiB to align = 108544 in 227 KiB; the
// 16- and 32-token variants' TMA rings are deeper at two CTAs per SM:
// 5 x 21504 + 1024 = 108544 and 4 x 26624 + 1024 = 107520.
// RUN: fusion-compile %S/../../../examples/llama3_8b.mlir -o %t/l90
// RUN: FileCheck %s --input-file=%t/l90.manifest.json --check-prefix=SMEM90
// RUN: fusion-compile %S/../../../examples/llama3_8b.mlir --chip=sm_80 -o %t/l80
// RUN: FileCheck %s --input-file=%t/l80.manifest.json --check-prefix=SMEM80
// RUN: fusion-compile %S/../../../examples/llama3_8b.mlir --chip=sm_86 -o %t/l86
// RUN: FileCheck %s --input-file=%t/l86.manifest.json --check-prefix=SMEM86
// SMEM90: "dynamic_shared_bytes": 108544,
// SMEM90-NEXT: "entry": "decode_layer_k0_fused_gemm16",
// SMEM90: "dynamic_shared_bytes": 107520,
// SMEM90-NEXT: "entry": "decode_layer_k0_fused_gemm32",
// SMEM90: "dynamic_shared_bytes": 108544,
// SMEM90-NEXT: "entry": "decode_layer_k0_fused_gemm64",
// SMEM80: "dynamic_shared_bytes": 111024,
// SMEM80-NEXT: "entry": "decode_layer_k0_fused_gemm64",
// SMEM86: "dynamic_shared_bytes": 74016,
// SMEM86-NEXT: "entry": "decode_layer_k0_fused_gemm64",
// The tensor-core attention variant: 4 warps x 3 stages x K and V x 16 rows
// x (128 + 8) f16 of staging ring; sm_86's 99 KiB cannot hold it.
// SMEM90: "dynamic_shared_bytes": 104448,
// SMEM90-NEXT: "entry": "decode_layer_k1_decode_attention_mma",
// SMEM80: "dynamic_shared_bytes": 104448,
// SMEM80-NEXT: "entry": "decode_layer_k1_decode_attention_mma",
// SMEM86-NOT: decode_attention_mma
// RUN: not fusion-compile %S/invalid.mlir --strategy=none -o %t/bad 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not ls %t/bad.ptx
// RUN: not ls %t/bad.manifest.json
// RUN: not fusion-compile %s --strategy=bogus -o %t/bad 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not ls %t/bad.ptx

// Bad option values are errors naming the option, before anything runs,
// and a failed run removes stale temporaries too.
// RUN: touch %t/bad.ptx.tmp
// RUN: not fusion-compile %s --sm-count=0 -o %t/bad 2>&1 | FileCheck %s --check-prefix=SMCOUNT -DN=0
// RUN: not ls %t/bad.ptx.tmp
// RUN: not fusion-compile %s --sm-count=-1 -o %t/bad 2>&1 | FileCheck %s --check-prefix=SMCOUNT -DN=-1
// RUN: not fusion-compile %s --sm-count=1025 -o %t/bad 2>&1 | FileCheck %s --check-prefix=SMCOUNT -DN=1025
// RUN: not fusion-compile %s --sm-count=9223372036854775807 -o %t/bad 2>&1 | FileCheck %s --check-prefix=SMCOUNT -DN=9223372036854775807
// RUN: not fusion-compile %s --sm-count=-9223372036854775808 -o %t/bad 2>&1 | FileCheck %s --check-prefix=SMCOUNT -DN=-9223372036854775808
// RUN: not fusion-compile %s --attention-ring-stages=28 -o %t/bad 2>&1 | FileCheck %s --check-prefix=RINGSTAGES -DN=28
// RUN: not fusion-compile %s --attention-ring-stages=6 -o %t/bad 2>&1 | FileCheck %s --check-prefix=RINGSTAGES -DN=6
// RINGSTAGES: fusion-compile: invalid --attention-ring-stages: [[N]] is not a multiple of 4 in [4, 24] (the CTA-wide attention ring's stages: a multiple of its consumer warps, at most what fits at head_dim 128)
// SMCOUNT: fusion-compile: invalid --sm-count: [[N]] is outside [1, 1024] (the number of streaming multiprocessors the grids fill)
// RUN: not fusion-compile %s --chip=sm_1000 -o %t/bad 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=sm_1000
// RUN: not fusion-compile %s --chip=SM_90 -o %t/bad 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=SM_90
// RUN: not fusion-compile %s '--chip=sm_90 ' -o %t/bad 2>&1 | FileCheck %s --check-prefix=CHIP '-DCHIP=sm_90 '
// RUN: not fusion-compile %s --chip=sm_-1 -o %t/bad 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=sm_-1
// RUN: not fusion-compile %s --chip=garbage -o %t/bad 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=garbage
// RUN: not fusion-compile %s --chip= -o %t/bad 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=
// CHIP: fusion-compile: invalid --chip: "[[CHIP]]" is not a supported target (sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a)
// RUN: not fusion-compile %s --features=garbage -o %t/bad 2>&1 | FileCheck %s --check-prefix=FEATURES
// FEATURES: fusion-compile: invalid --features: "garbage" is not a PTX ISA version LLVM can emit for the supported chips; expected +ptxNN from +ptx63 to +ptx90 (e.g. +ptx80)
// RUN: not ls %t/bad.ptx
// RUN: not ls %t/bad.manifest.json

// Outputs are regular files: a symbolic link is written through; anything
// else that exists (a device, a directory) is refused, and so are an empty
// prefix and two outputs (or an output and the input) that are one file.
// --dump-mlir=- prints the compiled module on stdout.
// RUN: echo old > %t/real.ptx && ln -sf real.ptx %t/link.ptx
// RUN: fusion-compile %s -o %t/link
// RUN: test -L %t/link.ptx
// RUN: grep -q "^.visible .entry" %t/real.ptx
// RUN: not fusion-compile %s -o %t/dev --dump-mlir=/dev/null 2>&1 | FileCheck %s --check-prefix=DEVICE
// DEVICE: fusion-compile: --dump-mlir: /dev/null exists and is not a regular file
// RUN: mkdir -p %t/dir.ptx && not fusion-compile %s -o %t/dir 2>&1 | FileCheck %s --check-prefix=NOTFILE
// NOTFILE: fusion-compile: -o: {{.*}}dir.ptx exists and is not a regular file
// RUN: not fusion-compile %s -o '' 2>&1 | FileCheck %s --check-prefix=PREFIX -DPREFIX=
// RUN: not fusion-compile %s -o %t/ 2>&1 | FileCheck %s --check-prefix=PREFIX -DPREFIX=%t/
// PREFIX: fusion-compile: -o needs a file prefix (out/model gives out/model.ptx and out/model.manifest.json), got "[[PREFIX]]"
// RUN: not fusion-compile %s -o %t/same --dump-mlir=%t/same.ptx 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: fusion-compile: {{.*}}same.ptx would be written twice, or over the input
// RUN: not ls %t/same.ptx
// RUN: fusion-compile %s -o %t/dumped --dump-mlir=- | FileCheck %s --check-prefix=DUMPSTDOUT
// DUMPSTDOUT: gpu.binary
// DUMPSTDOUT: fusion-compile: wrote {{.*}}dumped.ptx (2 kernels, 6 entries) and {{.*}}dumped.manifest.json{{$}}
// RUN: fusion-compile %s -o %t/dumped --dump-mlir=%t/dumped.mlir | FileCheck %s --check-prefix=DUMPFILE
// DUMPFILE: fusion-compile: wrote {{.*}}dumped.ptx (2 kernels, 6 entries) and {{.*}}dumped.manifest.json, and the compiled module to {{.*}}dumped.mlir

// Inputs: a regular file holding functions only, each result of which
// comes from a kernel or an argument.
// RUN: not fusion-compile /dev/zero -o %t/zero 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: fusion-compile: /dev/zero is not a regular file (a device, FIFO or directory cannot be read as input)
// RUN: not fusion-compile %S/Inputs/top_level_gpu_module.mlir -o %t/top 2>&1 | FileCheck %s --check-prefix=TOP
// TOP: top_level_gpu_module.mlir:7:1: error: fusion-compile takes a module of func.func ops; 'gpu.module' cannot appear at its top level
// RUN: not fusion-compile %S/Inputs/result_outside_kernels.mlir -o %t/outside 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// OUTSIDE: result_outside_kernels.mlir:6:3: error: 'func.return' op result #0 is computed outside the fusion.kernel ops (neither a function argument nor a kernel result, nor a reshape of one); the manifest cannot say where it comes from
// RUN: not ls %t/top.ptx %t/outside.ptx

// Kernels are named after their function, so its name must be a PTX
// identifier.
// RUN: not fusion-compile %S/Inputs/function_name_space.mlir -o %t/bad 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: error: 'func.func' op name "a b" cannot prefix the names of its fusion.kernel ops (PTX entries <name>_k<N>_...): expected a PTX identifier [a-zA-Z_][a-zA-Z0-9_$]* of at most 255 characters
// RUN: not ls %t/bad.ptx

// Each function argument has one role in the manifest: the parameters bound
// to it must agree.
// RUN: not fusion-compile %S/Inputs/argument_role_conflict.mlir --strategy=none -o %t/bad 2>&1 | FileCheck %s --check-prefix=ROLE
// ROLE: error: 'fusion.kernel' op parameter 2 binds function argument #0 as 'residual', but kernel conflict_k0_rmsnorm parameter 0 binds it as 'input'; the manifest gives each argument one role
// RUN: not ls %t/bad.manifest.json

// CHECK:      "chip": "sm_90",
// CHECK:      "format": "fusion-manifest",
// CHECK:      "functions": [
// Each argument has the role of the kernel parameters bound to it.
// CHECK:          "arguments": [
// CHECK:              "index": 0,
// CHECK-NEXT:         "kind": "tensor",
// CHECK-NEXT:         "name": "x",
// CHECK-NEXT:         "role": "input",
// CHECK:              "name": "res",
// CHECK-NEXT:         "role": "residual",
// CHECK:              "name": "norm_w",
// CHECK-NEXT:         "role": "norm_weight",
// CHECK:              "name": "qkv_w",
// CHECK-NEXT:         "role": "qkv_weight",
// CHECK:              "name": "pos",
// CHECK-NEXT:         "role": "positions",
// CHECK:              "name": "seq_lens",
// CHECK-NEXT:         "role": "seq_lens",
// CHECK:              "name": "block_table",
// CHECK-NEXT:         "role": "block_table",
// CHECK:              "index": 7,
// CHECK-NEXT:         "kind": "buffer",
// CHECK-NEXT:         "name": "kc",
// CHECK-NEXT:         "role": "key_cache",
// CHECK-NEXT:         "shape": [
// CHECK-NEXT:           "num_pages",
// CHECK-NEXT:           16,
// CHECK-NEXT:           2,
// CHECK-NEXT:           64
// CHECK:          "kernels": [
// CHECK-NEXT:       0,
// CHECK-NEXT:       1
// CHECK-NEXT:     ],
// CHECK-NEXT:     "name": "layer",
// CHECK-NEXT:     "results": [
// CHECK:              "source": {
// CHECK-NEXT:           "kernel": 1,
// CHECK-NEXT:           "result": 0
// CHECK:              "source": {
// CHECK-NEXT:           "kernel": 0,
// CHECK-NEXT:           "result": 0
// CHECK:      "kernels": [
// The fused front half.
// CHECK:          "block": [
// CHECK-NEXT:       64,
// CHECK-NEXT:       1,
// CHECK-NEXT:       1
// CHECK-NEXT:     ],
// CHECK-NEXT:     "dynamic_shared_bytes": 0,
// CHECK-NEXT:     "entry": "layer_k0_fused",
// CHECK-NEXT:     "function": "layer",
// CHECK-NEXT:     "grid": [
// CHECK-NEXT:       128,
// CHECK-NEXT:       1,
// CHECK-NEXT:       1
// CHECK-NEXT:     ],
// CHECK-NEXT:     "index": 0,
// CHECK-NEXT:     "name": "layer_k0_fused",
// CHECK-NEXT:     "ops": [
// CHECK:              "epsilon": 1.0000000000000001e-05,
// CHECK:            "op": "rmsnorm"
// CHECK:            "op": "qkv_proj"
// CHECK:              "pairing": "neox",
// CHECK-NEXT:         "rotary_dim": 64,
// CHECK-NEXT:         "theta": 10000
// CHECK:            "op": "rope"
// CHECK:            "op": "kv_append"
// CHECK:          "params": [
// CHECK-NEXT:       {
// CHECK-NEXT:         "binding": {
// CHECK-NEXT:           "argument": 0
// CHECK-NEXT:         },
// CHECK-NEXT:         "dtype": "f16",
// CHECK-NEXT:         "index": 0,
// CHECK-NEXT:         "kind": "input",
// CHECK-NEXT:         "role": "input",
// CHECK-NEXT:         "shape": [
// CHECK-NEXT:           "batch",
// CHECK-NEXT:           512
// CHECK:                "result": 1
// CHECK-NEXT:         },
// CHECK-NEXT:         "dtype": "f16",
// CHECK-NEXT:         "index": 9,
// CHECK-NEXT:         "kind": "output",
// CHECK-NEXT:         "role": "query",
// The GEMM-shaped variants' workspaces, before the scalars.
// CHECK:              "dtype": "f32",
// CHECK-NEXT:         "index": 10,
// CHECK-NEXT:         "kind": "workspace",
// CHECK-NEXT:         "role": "partial_out",
// CHECK:              "dtype": "f32",
// CHECK-NEXT:         "index": 11,
// CHECK-NEXT:         "kind": "workspace",
// CHECK-NEXT:         "role": "partial_stats",
// CHECK:              "dtype": "i32",
// CHECK-NEXT:         "index": 12,
// CHECK-NEXT:         "kind": "workspace",
// CHECK-NEXT:         "role": "split_counters",
// CHECK:              "zero_init": true
// On sm_90 the variants read the weights by TMA: the qkv_weight's
// (params[3], [512, 512] f16) descriptor, boxes of one 128-row tile by 64
// columns (128 bytes, the swizzle span), after the workspaces.
// CHECK:              "dtype": "f16",
// CHECK-NEXT:         "index": 13,
// CHECK-NEXT:         "kind": "tensor_map",
// CHECK-NEXT:         "role": "weight_map",
// CHECK-NEXT:         "shape": [
// CHECK-NEXT:           512,
// CHECK-NEXT:           512
// CHECK-NEXT:         ],
// CHECK-NEXT:         "tensor_map": {
// CHECK-NEXT:           "box": [
// CHECK-NEXT:             128,
// CHECK-NEXT:             64
// CHECK-NEXT:           ],
// CHECK-NEXT:           "of": 3,
// CHECK-NEXT:           "swizzle_bytes": 128
// CHECK:              "dtype": "i32",
// CHECK-NEXT:         "index": 14,
// CHECK-NEXT:         "kind": "scalar",
// CHECK-NEXT:         "role": "batch"
// CHECK:              "dtype": "i32",
// CHECK-NEXT:         "index": 15,
// CHECK-NEXT:         "kind": "scalar",
// CHECK-NEXT:         "role": "max_pages"
// sm_90: the kernel starts with griddepcontrol (docs/abi.md).
// CHECK:          "programmatic_dependent_launch": true,
// CHECK-NEXT:     "schedule": {
// CHECK:            "kind": "projection",
// CHECK:            "strategy": "decode",
// CHECK:            "threads": 64,
// CHECK:          "static_shared_bytes": 1032,
// The GEMM-shaped variants launched instead from batch 2, 17 and 33
// (docs/abi.md): their own entries and geometry, the kernel's parameters.
// Shared memory at 16 tokens: 128 weight rows of 128 bytes (TMA, unpadded)
// + (16 x + 16 residual + 1 norm weight) rows of 144 bytes = 21136 bytes,
// slots at 1 KiB boundaries (21504), 3 stages + 1 KiB to align = 65536;
// static: the arrival flag (4 bytes) and 3 stage mbarriers (24).
// CHECK-NEXT:     "variants": [
// CHECK-NEXT:       {
// CHECK-NEXT:         "block": [
// CHECK-NEXT:           256,
// CHECK:              "dynamic_shared_bytes": 65536,
// CHECK-NEXT:         "entry": "layer_k0_fused_gemm16",
// CHECK-NEXT:         "grid": [
// CHECK-NEXT:           32,
// CHECK:              "min_batch": 2,
// CHECK:                "kind": "projection_gemm",
// CHECK:              "static_shared_bytes": 28
// CHECK:              "entry": "layer_k0_fused_gemm32",
// CHECK:              "min_batch": 17,
// CHECK:              "entry": "layer_k0_fused_gemm64",
// CHECK:              "min_batch": 33,
// The attention kernel reads the rotated query the first kernel wrote.
// CHECK:          "entry": "layer_k1_decode_attention",
// CHECK:              "binding": {
// CHECK-NEXT:           "kernel": 0,
// CHECK-NEXT:           "result": 1
// CHECK-NEXT:         },
// CHECK-NEXT:         "dtype": "f16",
// CHECK-NEXT:         "index": 0,
// CHECK-NEXT:         "kind": "input",
// CHECK-NEXT:         "role": "query",
// Its tensor-core variant.
// CHECK:              "entry": "layer_k1_decode_attention_mma",
// CHECK:              "min_batch": 4,
// CHECK:                "kind": "split_kv_attention_mma",
// CHECK:      "ptx": "layer.ptx",
// CHECK:      "strategy": "decode",

// PTX: .visible .entry layer_k0_fused(
// PTX: .visible .entry layer_k0_fused_gemm16(
// PTX: .visible .entry layer_k0_fused_gemm32(
// PTX: .visible .entry layer_k0_fused_gemm64(
// PTX: .visible .entry layer_k1_decode_attention(
// PTX: .visible .entry layer_k1_decode_attention_mma(
// PTX-NOT: __nv_

// ERR: hidden size 100 is not a multiple of 8
// STRATEGY: fusion-compile: for the --strategy option: Cannot find option named 'bogus'!
func.func @layer(%x: tensor<?x512xf16>, %res: tensor<?x512xf16>, %norm_w: tensor<512xf16>,
    %qkv_w: tensor<512x512xf16>, %pos: tensor<?xi32>, %seq_lens: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x2x64xf16>, %vc: memref<?x16x2x64xf16>)
    -> (tensor<?x4x64xf16>, tensor<?x512xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%res : tensor<?x512xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x512xf16>, tensor<512xf16> -> tensor<?x512xf16>, tensor<?x512xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
      : tensor<?x512xf16>, tensor<512x512xf16> -> tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x2x64xf16> into memref<?x16x2x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x64xf16>, memref<?x16x2x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o, %h : tensor<?x4x64xf16>, tensor<?x512xf16>
}
