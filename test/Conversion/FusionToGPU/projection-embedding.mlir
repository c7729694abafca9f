// RUN: fusion-opt %s -split-input-file --convert-fusion-to-gpu | FileCheck %s
// RUN: fusion-opt %s -split-input-file --convert-fusion-to-gpu="target-sm=75" | FileCheck %s --check-prefix=SM75
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s -o %t/e
// RUN: FileCheck %s --input-file=%t/e.manifest.json --check-prefix=MANIFEST
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/e.ptx -o %t/e.cubin %}

// A projection kernel that starts with the token embedding (layer 0's
// front half of a whole model, as --fusion-form-kernels forms it): the norm
// reads token t's x row from the table, row clamp(tokens[t], 0, V - 1)
// (V = 1000: the clamp's bound is 999), instead of an input buffer, and the
// kernel writes those rows where it yields the embedding (here a function
// result; in a whole model the residual stream of layer 0), from the
// threads that would write residual_out. Hidden 512, 4 query heads over 2
// KV heads of 64, f16 (the shapes of projection.mlir and
// projection-gemm.mlir).
// Parameters in ABI order: tokens (%arg0), the table (%arg1), the norm
// weight, the QKV weight (params[3]), positions, caches, block table, then
// the outputs: the embedded rows (%arg8) and the query.
//
// The weight_map of the GEMM-shaped variants describes the QKV weight
// (params[3]), not the table, the first input with role "weight".
// CHECK-LABEL: func.func @layer0(
// CHECK: fusion.kernel @layer0_k0_fused
// CHECK-SAME: params = [#fusion.param<kind = input, role = "tokens", dtype = i32, shape = [batch]>,
// CHECK-SAME: #fusion.param<kind = input, role = "weight", dtype = f16, shape = [1000, 512]>,
// CHECK-SAME: #fusion.param<kind = input, role = "norm_weight", dtype = f16, shape = [512]>,
// CHECK-SAME: #fusion.param<kind = input, role = "qkv_weight", dtype = f16, shape = [512, 512]>,
// CHECK-SAME: #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 512]>,
// CHECK-SAME: #fusion.param<kind = output, role = "query", dtype = f16, shape = [batch, 4, 64]>,
// CHECK-SAME: #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [512, 512], of = 3, box = [128, 64]>,
// CHECK-SAME: variants = [#fusion.variant<min_batch = 2, entry = "layer0_k0_fused_gemm16",
// CHECK-SAME: preload_chunks = 2>

// The batch-1 CUDA-core kernel (sm_90). Before griddepcontrol.wait it
// preloads its weight rows and token 0's position and page, but reads
// neither the tokens nor the table: the previous step's argmax may still be
// writing the tokens (docs/abi.md).
// CHECK: gpu.func @layer0_k0_fused(%arg0: memref<1099511627776xi32>, %arg1: memref<1099511627776xf16>,
// CHECK-NEXT: nvvm.griddepcontrol  launch_dependents
// CHECK-NOT: %arg0[
// CHECK-NOT: %arg1[
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// After it, the CTA normalises token t: its id, clamped to [0, 999] before
// the row offset is formed, selects the table row x comes from; CTA 0
// writes x to the embedded rows at row t.
// CHECK: %[[CTA0:.+]] = arith.cmpi eq, %block_id_x{{.*}}, %c0{{.*}} : index
// CHECK: scf.for %[[T:.+]] = %{{.+}} to %{{.+}} step
// CHECK: %[[OUTROW:.+]] = arith.muli %[[T]], %c512{{.*}} : index
// CHECK-NEXT: %[[ID:.+]] = memref.load %arg0[%[[T]]] : memref<1099511627776xi32>
// CHECK-NEXT: %[[IDX:.+]] = arith.index_cast %[[ID]] : i32 to index
// CHECK-NEXT: %[[ZERO:.+]] = arith.constant 0 : index
// CHECK-NEXT: %[[LO:.+]] = arith.maxsi %[[IDX]], %[[ZERO]] : index
// CHECK-NEXT: %[[LAST:.+]] = arith.constant 999 : index
// CHECK-NEXT: %[[CL:.+]] = arith.minsi %[[LO]], %[[LAST]] : index
// CHECK-NEXT: %[[H:.+]] = arith.constant 512 : index
// CHECK-NEXT: %[[ROW:.+]] = arith.muli %[[CL]], %[[H]] : index
// CHECK: %[[E:.+]] = arith.muli %thread_id_x{{.*}}, %c8{{.*}} : index
// CHECK: %[[AT:.+]] = arith.addi %[[ROW]], %[[E]] : index
// CHECK-NEXT: %[[X:.+]] = vector.load %arg1[%[[AT]]] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: scf.if %[[CTA0]] {
// CHECK-NEXT: %[[OAT:.+]] = arith.addi %[[OUTROW]], %[[E]] : index
// CHECK-NEXT: vector.store %[[X]], %arg8[%[[OAT]]] {alignment = 16 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: arith.addi
// CHECK-NEXT: vector.store %[[X]], %{{.+}} : memref<512xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: gpu.return

// The GEMM-shaped variant (tiles of 16 tokens): before the wait its
// prologue prefetches and copies weights only; after it, each stage's copy
// of a token row (tile row r, token min(tile + r, last)) starts at the
// table row of the token's clamped id, and the CTAs of row tile 0 write the
// staged x of the tile's tokens to the embedded rows (the predicate of
// residual_out).
// CHECK: gpu.func @layer0_k0_fused_gemm16(%arg0: memref<1099511627776xi32>, %arg1: memref<1099511627776xf16>,
// CHECK-NEXT: nvvm.griddepcontrol  launch_dependents
// CHECK-NOT: %arg0[
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK: %[[TABLEADDR:.+]] = memref.extract_aligned_pointer_as_index %arg1
// CHECK-NEXT: %[[TABLEI:.+]] = arith.index_cast %[[TABLEADDR]] : index to i64
// CHECK-NEXT: %[[TABLE:.+]] = llvm.inttoptr %[[TABLEI]] : i64 to !llvm.ptr<1>
// CHECK: scf.for %[[TILE:[^ ]+]] =
// CHECK: %[[TOKEN:.+]] = arith.minui %{{.+}}, %{{.+}} : index
// CHECK-NEXT: %[[GID:.+]] = memref.load %arg0[%[[TOKEN]]] : memref<1099511627776xi32>
// CHECK-NEXT: %[[GIDX:.+]] = arith.index_cast %[[GID]] : i32 to index
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: %[[GLO:.+]] = arith.maxsi %[[GIDX]], %{{.+}} : index
// CHECK-NEXT: %[[GLAST:.+]] = arith.constant 999 : index
// CHECK-NEXT: %[[GCL:.+]] = arith.minsi %[[GLO]], %[[GLAST]] : index
// CHECK-NEXT: arith.constant 512 : index
// CHECK-NEXT: arith.muli %[[GCL]], %{{.+}} : index
// CHECK: %[[SRC:.+]] = llvm.getelementptr %[[TABLE]][%{{.+}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// CHECK: nvvm.cp.async.shared.global %{{.+}}, %[[SRC]], 16, cache =  cg
// CHECK: %[[SX:.+]] = vector.load %view[%{{.+}}] {alignment = 16 : i64} : memref<{{[0-9]+}}xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK-NEXT: %[[INTILE:.+]] = arith.cmpi ult, %{{.+}}, %{{.+}} : index
// CHECK-NEXT: %[[WRITES:.+]] = arith.andi %{{.+}}, %[[INTILE]] : i1
// CHECK-NEXT: scf.if %[[WRITES]] {
// CHECK: vector.store %[[SX]], %arg8[%{{.+}}] {alignment = 16 : i64}
// CHECK: gpu.return
// CHECK: gpu.func @layer0_k0_fused_gemm32(
// CHECK: gpu.func @layer0_k0_fused_gemm64(

// sm_75: no griddepcontrol and no batch variants; the kernel serves every
// batch in tiles of up to 4 tokens, one token normalised by the whole CTA
// or, in a larger tile, each by one warp: both gather their rows.
// SM75-LABEL: func.func @layer0(
// SM75: gpu.func @layer0_k0_fused(%arg0: memref<1099511627776xi32>, %arg1: memref<1099511627776xf16>,
// SM75-NOT: griddepcontrol
// SM75: scf.if %{{.+}} {
// SM75: memref.load %arg0[%{{.+}}] : memref<1099511627776xi32>
// SM75: arith.minsi %{{.+}}, %c999 : index
// SM75: vector.load %arg1[%{{.+}}]
// SM75: vector.store %{{.+}}, %arg8[%{{.+}}]
// SM75: } else {
// SM75: memref.load %arg0[%{{.+}}] : memref<1099511627776xi32>
// SM75: arith.minsi %{{.+}}, %c999{{.*}} : index
// SM75: vector.load %arg1[%{{.+}}]
// SM75: vector.store %{{.+}}, %arg8[%{{.+}}]
// SM75: gpu.return

// The manifest lists the embedding among the kernel's ops; its tokens and
// table are the kernel's first parameters, bound to the function's
// arguments, and the embedded rows its result 0.
// MANIFEST: "entry": "layer0_k0_fused",
// MANIFEST: "ops": [
// MANIFEST-NEXT: {
// MANIFEST-NEXT: "attributes": {},
// MANIFEST-NEXT: "op": "embedding"
// MANIFEST-NEXT: },
// MANIFEST-NEXT: {
// MANIFEST: "op": "rmsnorm"
// MANIFEST: "op": "qkv_proj"
// MANIFEST: "params": [
// MANIFEST-NEXT: {
// MANIFEST-NEXT: "binding": {
// MANIFEST-NEXT: "argument": 0
// MANIFEST-NEXT: },
// MANIFEST-NEXT: "dtype": "i32",
// MANIFEST-NEXT: "index": 0,
// MANIFEST-NEXT: "kind": "input",
// MANIFEST-NEXT: "role": "tokens",
// MANIFEST: "role": "weight",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: 1000,
// MANIFEST: "result": 0
// MANIFEST-NEXT: },
// MANIFEST-NEXT: "dtype": "f16",
// MANIFEST-NEXT: "index": 8,
// MANIFEST-NEXT: "kind": "output",
// MANIFEST-NEXT: "role": "output",
// MANIFEST: "kind": "tensor_map",
// MANIFEST: "tensor_map": {
// MANIFEST: "of": 3,
func.func @layer0(%tokens: tensor<?xi32>, %embed: tensor<1000x512xf16>, %norm_w: tensor<512xf16>,
    %qkv_w: tensor<512x512xf16>, %pos: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x2x64xf16>, %vc: memref<?x16x2x64xf16>)
    -> (tensor<?x4x64xf16>, tensor<?x512xf16>) {
  %k:2 = fusion.kernel @layer0_k0_fused (%t = %tokens, %e = %embed, %w = %norm_w, %qw = %qkv_w,
      %p = %pos, %c0 = %kc, %c1 = %vc, %bt = %block_table)
      : (tensor<?xi32>, tensor<1000x512xf16>, tensor<512xf16>, tensor<512x512xf16>, tensor<?xi32>,
         memref<?x16x2x64xf16>, memref<?x16x2x64xf16>, tensor<?x?xi32>)
      -> (tensor<?x512xf16>, tensor<?x4x64xf16>) attributes {strategy = #fusion.strategy<decode>} {
    %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<1000x512xf16> -> tensor<?x512xf16>
    %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64}
        : tensor<?x512xf16>, tensor<512xf16> -> tensor<?x512xf16>
    %q, %kk, %v = fusion.qkv_proj %y, %qw {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
        : tensor<?x512xf16>, tensor<512x512xf16> -> tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>
    %qr, %kr = fusion.rope %q, %kk, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
        : tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?xi32>
    fusion.kv_append %kr, %v into %c0, %c1[%bt, %p]
        : tensor<?x2x64xf16> into memref<?x16x2x64xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %x, %qr : tensor<?x512xf16>, tensor<?x4x64xf16>
  }
  return %k#1, %k#0 : tensor<?x4x64xf16>, tensor<?x512xf16>
}

// -----

// A LayerNorm front half (no GEMM-shaped variant: the tensor-core variant
// serves batches from 2). Parameters: tokens, table, norm weight and bias,
// QKV weight, ...; outputs from %arg9: the embedded rows, the query.
// CHECK-LABEL: func.func @layer0_ln(
// CHECK: fusion.kernel @layer0_ln_k0_fused
// CHECK-SAME: variants = [#fusion.variant<min_batch = 2, entry = "layer0_ln_k0_fused_mma",
// The batch-1 kernel gathers as above.
// CHECK: gpu.func @layer0_ln_k0_fused(%arg0: memref<1099511627776xi32>, %arg1: memref<1099511627776xf16>,
// CHECK-NOT: %arg0[
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK: memref.load %arg0[%{{.+}}] : memref<1099511627776xi32>
// CHECK: arith.minsi %{{.+}}, %c999 : index
// CHECK: vector.load %arg1[%{{.+}}]
// CHECK: vector.store %{{.+}}, %arg9[%{{.+}}]
// CHECK: gpu.return
// The tensor-core variant: warp w normalises tokens w, w + 8, ... of each
// tile of 32 (whole-warp rows of 2 chunks: 512 = 2 x 32 x 8), gathering
// both chunks from the token's table row; CTA 0 writes them.
// CHECK: gpu.func @layer0_ln_k0_fused_mma(%arg0: memref<1099511627776xi32>, %arg1: memref<1099511627776xf16>,
// CHECK-NEXT: nvvm.griddepcontrol  launch_dependents
// CHECK-NEXT: memref.get_global @layer0_ln_k0_fused_inv_freq
// CHECK-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK: %[[CTA0:.+]] = arith.cmpi eq, %block_id_x{{.*}}, %c0{{.*}} : index
// CHECK: scf.for %[[TILE:[^ ]+]] =
// CHECK: scf.for %[[W:[^ ]+]] =
// CHECK: %[[TOK:.+]] = arith.addi %[[TILE]], %[[W]] : index
// CHECK: %[[ID:.+]] = memref.load %arg0[%[[TOK]]] : memref<1099511627776xi32>
// CHECK-NEXT: %[[IDX:.+]] = arith.index_cast %[[ID]] : i32 to index
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: %[[LO:.+]] = arith.maxsi %[[IDX]], %{{.+}} : index
// CHECK-NEXT: %[[LAST:.+]] = arith.constant 999 : index
// CHECK-NEXT: %[[CL:.+]] = arith.minsi %[[LO]], %[[LAST]] : index
// CHECK-NEXT: arith.constant 512 : index
// CHECK-NEXT: %[[ROW:.+]] = arith.muli %[[CL]], %{{.+}} : index
// CHECK: %[[AT0:.+]] = arith.addi %[[ROW]], %[[E0:.+]] : index
// CHECK-NEXT: %[[X0:.+]] = vector.load %arg1[%[[AT0]]]
// CHECK: %[[E1:.+]] = arith.addi %[[E0]], %c256{{.*}} : index
// CHECK: %[[AT1:.+]] = arith.addi %[[ROW]], %[[E1]] : index
// CHECK-NEXT: %[[X1:.+]] = vector.load %arg1[%[[AT1]]]
// CHECK: scf.if %[[CTA0]] {
// CHECK: vector.store %[[X0]], %arg9[
// CHECK: scf.if %[[CTA0]] {
// CHECK: vector.store %[[X1]], %arg9[
// CHECK: gpu.return
func.func @layer0_ln(%tokens: tensor<?xi32>, %embed: tensor<1000x512xf16>, %norm_w: tensor<512xf16>,
    %norm_b: tensor<512xf16>, %qkv_w: tensor<512x512xf16>, %pos: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x2x64xf16>, %vc: memref<?x16x2x64xf16>)
    -> (tensor<?x4x64xf16>, tensor<?x512xf16>) {
  %k:2 = fusion.kernel @layer0_ln_k0_fused (%t = %tokens, %e = %embed, %w = %norm_w, %b = %norm_b,
      %qw = %qkv_w, %p = %pos, %c0 = %kc, %c1 = %vc, %bt = %block_table)
      : (tensor<?xi32>, tensor<1000x512xf16>, tensor<512xf16>, tensor<512xf16>, tensor<512x512xf16>,
         tensor<?xi32>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>, tensor<?x?xi32>)
      -> (tensor<?x512xf16>, tensor<?x4x64xf16>) attributes {strategy = #fusion.strategy<decode>} {
    %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<1000x512xf16> -> tensor<?x512xf16>
    %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
        : tensor<?x512xf16>, tensor<512xf16>, tensor<512xf16> -> tensor<?x512xf16>
    %q, %kk, %v = fusion.qkv_proj %y, %qw {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
        : tensor<?x512xf16>, tensor<512x512xf16> -> tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>
    %qr, %kr = fusion.rope %q, %kk, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
        : tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?xi32>
    fusion.kv_append %kr, %v into %c0, %c1[%bt, %p]
        : tensor<?x2x64xf16> into memref<?x16x2x64xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %x, %qr : tensor<?x512xf16>, tensor<?x4x64xf16>
  }
  return %k#1, %k#0 : tensor<?x4x64xf16>, tensor<?x512xf16>
}

// -----

// A wide LayerNorm front half (hidden 4096, V = 32000): the tensor-core
// variant's warps normalise a token in a loop over its 16 chunks (more than
// the 8 a LayerNorm keeps in registers): the first pass reads x from the
// token's table row at each chunk and CTA 0 writes it to the embedded rows
// (%arg9) there.
// CHECK-LABEL: func.func @layer0_wide(
// CHECK: gpu.func @layer0_wide_k0_fused_mma(%arg0: memref<1099511627776xi32>, %arg1: memref<1099511627776xf16>,
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK: %[[CTA0:.+]] = arith.cmpi eq, %block_id_x{{.*}}, %c0{{.*}} : index
// CHECK: %[[TOK:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK: %[[OUTROW:.+]] = arith.muli %[[TOK]], %c4096{{.*}} : index
// CHECK-NEXT: %[[ID:.+]] = memref.load %arg0[%[[TOK]]] : memref<1099511627776xi32>
// CHECK: %[[CL:.+]] = arith.minsi %{{.+}}, %c31999 : index
// CHECK: %[[ROW:.+]] = arith.muli %[[CL]], %{{.+}} : index
// CHECK: scf.for %[[E:[^ ]+]] = %{{.+}} to %{{.+}} step %c256
// CHECK: %[[AT:.+]] = arith.addi %[[ROW]], %[[E]] : index
// CHECK-NEXT: %[[X:.+]] = vector.load %arg1[%[[AT]]]
// CHECK-NEXT: scf.if %[[CTA0]] {
// CHECK-NEXT: %[[OAT:.+]] = arith.addi %[[OUTROW]], %[[E]] : index
// CHECK-NEXT: vector.store %[[X]], %arg9[%[[OAT]]] {alignment = 16 : i64}
// CHECK: gpu.return
func.func @layer0_wide(%tokens: tensor<?xi32>, %embed: tensor<32000x4096xf16>, %norm_w: tensor<4096xf16>,
    %norm_b: tensor<4096xf16>, %qkv_w: tensor<6144x4096xf16>, %pos: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>)
    -> (tensor<?x32x128xf16>, tensor<?x4096xf16>) {
  %k:2 = fusion.kernel @layer0_wide_k0_fused (%t = %tokens, %e = %embed, %w = %norm_w, %b = %norm_b,
      %qw = %qkv_w, %p = %pos, %c0 = %kc, %c1 = %vc, %bt = %block_table)
      : (tensor<?xi32>, tensor<32000x4096xf16>, tensor<4096xf16>, tensor<4096xf16>, tensor<6144x4096xf16>,
         tensor<?xi32>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>)
      -> (tensor<?x4096xf16>, tensor<?x32x128xf16>) attributes {strategy = #fusion.strategy<decode>} {
    %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<32000x4096xf16> -> tensor<?x4096xf16>
    %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
        : tensor<?x4096xf16>, tensor<4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
    %q, %kk, %v = fusion.qkv_proj %y, %qw {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
        : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
    %qr, %kr = fusion.rope %q, %kk, %p {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64}
        : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
    fusion.kv_append %kr, %v into %c0, %c1[%bt, %p]
        : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %x, %qr : tensor<?x4096xf16>, tensor<?x32x128xf16>
  }
  return %k#1, %k#0 : tensor<?x32x128xf16>, tensor<?x4096xf16>
}
