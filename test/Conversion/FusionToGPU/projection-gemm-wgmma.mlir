// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu="arch-specific=true" | FileCheck %s
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s --chip=sm_90a -o %t/wgmma
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t/wgmma.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/wgmma.manifest.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/wgmma.ptx -o %t/wgmma.cubin %}
// RUN: fusion-compile %s --chip=sm_90 -o %t/mma
// RUN: FileCheck %s --check-prefix=SM90 --input-file=%t/mma.ptx
// RUN: not fusion-opt %s -split-input-file --convert-fusion-to-gpu="target-sm=80 arch-specific=true" 2>&1 | FileCheck %s --check-prefix=ERR

// The GEMM-shaped projection variants by warpgroup MMA (sm_90a,
// Kernels/ProjectionGemmKernel.cpp, Fragments/Wgmma.h); the same front half
// as projection-gemm.mlir's first case (hidden 512, 8 heads of 64, RMSNorm
// with a residual, f16; 128-row tiles, k split 8, one 64-element step per
// CTA). What changes against sm_90: every staged row is 128 bytes, unpadded
// (the token, residual and norm-weight rows 128-byte swizzled like the TMA
// weight boxes, which wgmma's descriptor reads), so the slots are
// 128 x 128 + (2T + 1) x 128 bytes, rounded up to 1 KiB: T = 16: 16384 +
// 4224 = 20608 -> 21504, 3 x 21504 + 1024 = 65536 bytes; T = 32: 16384 +
// 8320 = 24704 -> 25600, 77824; T = 64: 16384 + 16512 = 32896 -> 33792,
// 102400.
// CHECK-LABEL: func.func @layer(
// CHECK: fusion.kernel @layer_k0_fused
// CHECK-SAME: variants = [#fusion.variant<min_batch = 2, entry = "layer_k0_fused_gemm16", grid = [32, 1, 1], block = 256, smem = 65536, static_smem = 28,
// CHECK-SAME: schedule = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 32, tile_rows = 128, tile_tokens = 16,
// CHECK-SAME: k_split = 8, stage_k = 64, stages = 3, min_ctas_per_sm = 2, warpgroup_mma = true, cluster_k_split = true>>,
// CHECK-SAME: #fusion.variant<min_batch = 17, entry = "layer_k0_fused_gemm32", grid = [32, 1, 1], block = 256, smem = 77824,
// CHECK-SAME: #fusion.variant<min_batch = 33, entry = "layer_k0_fused_gemm64", grid = [32, 1, 1], block = 256, smem = 102400,
// The 16-token variant's stage: after the copies land, the async-proxy
// fence (cp.async wrote the token rows; wgmma reads them through the async
// proxy), the CTA barrier; the norm's pass rewrites h = x + residual in
// place, so a second fence before its barrier; then the four A fragments
// (ldmatrix, times the norm weight), one wgmma.fence, and per k step of 16
// the descriptor of the token rows (slot + 128 x 128 bytes, + 32 bytes per
// k step; start address bits 0-17 >> 4, or'd with 1 << 16 (leading byte
// offset), 64 << 32 (1024-byte stride between 8-row groups) and 1 << 62
// (128-byte swizzle): 4611686293305360384) and an m64n16k16 wgmma with the
// fragment registers, the descriptor and the accumulate flag; one commit
// and a wait for all before the ring reuses the slot.
// CHECK: gpu.func @layer_k0_fused_gemm16(
// CHECK: nvvm.cp.async.wait.group 1
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: gpu.barrier
// CHECK: vector.reduction <add>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: nvvm.ldmatrix
// CHECK-NOT: nvvm.ldmatrix
// The 8 accumulators and the 16 fragment registers pinned (an empty asm)
// before the fence, so that none is set after it.
// CHECK: llvm.inline_asm has_side_effects "", "=f,=f,=f,=f,=f,=f,=f,=f,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,0,1,2,
// CHECK-NOT: nvvm.ldmatrix
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: %[[TOKENS:.*]] = arith.addi %{{.*}}, %c16384 : index
// CHECK: %[[BASE:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i32
// CHECK: %[[AT:.*]] = arith.index_cast %[[TOKENS]] : index to i32
// CHECK: %[[B0:.*]] = arith.addi %[[BASE]], %[[AT]] : i32
// CHECK: arith.andi %{{.*}}, %c262143_i32 : i32
// CHECK: arith.constant 4611686293305360384 : i64
// CHECK: llvm.inline_asm has_side_effects "{{.*}}wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7}, {$16, $17, $18, $19}, $20, p, 1, 1, 0;{{.*}}", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,r,r,r,r,l,r,~{memory}"
// CHECK: arith.addi %[[B0]], %c32_i32{{.*}} : i32
// CHECK: wgmma.mma_async
// CHECK: arith.addi %[[B0]], %c64_i32{{.*}} : i32
// CHECK: wgmma.mma_async
// CHECK: arith.addi %[[B0]], %c96_i32{{.*}} : i32
// CHECK: wgmma.mma_async
// CHECK-NOT: wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: llvm.inline_asm has_side_effects "", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7"
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.return
// The 64-token variant: m64n64k16 with 32 accumulators.
// CHECK: gpu.func @layer_k0_fused_gemm64(
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, {$64, $65, $66, $67}, $68, p, 1, 1, 0;

// PTX: .target sm_90a
// One k step per CTA here: the accumulators' zeros and the scaled
// fragments (mul.rn.f16x2) are set before the pin and the fence, nothing
// of them between the fence and the wgmmas.
// PTX: .entry layer_k0_fused_gemm16(
// PTX: fence.proxy.async.shared::cta;
// PTX: mul.rn.f16x2
// PTX: mov.b32 %r{{[0-9]+}}, 0;
// PTX: // begin inline asm
// PTX-NEXT: // end inline asm
// PTX-NEXT: wgmma.fence.sync.aligned;
// PTX-NOT: mul.rn
// PTX-NOT: mov.b32 %r{{[0-9]+}}, 0;
// PTX: wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: .entry layer_k0_fused_gemm64(
// PTX: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16

// MANIFEST: "entry": "layer_k0_fused_gemm16"
// MANIFEST: "warpgroup_mma": true

// sm_90 (not arch-specific) keeps mma.sync.
// SM90: .target sm_90
// SM90-NOT: wgmma
// SM90: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// SM90-NOT: wgmma

// ERR: error: convert-fusion-to-gpu option arch-specific: no supported chip of target-sm 80 has architecture-specific features (sm_90a)
func.func @layer(%x: tensor<?x512xf16>, %res: tensor<?x512xf16>, %norm_w: tensor<512xf16>,
    %qkv_w: tensor<512x512xf16>, %pos: tensor<?xi32>,
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
  return %qr, %h : tensor<?x4x64xf16>, tensor<?x512xf16>
}

// -----

// bf16 with unit_offset, head_dim 256 (one head per 256-row tile: 16 warps,
// four warpgroups): bf16 wgmma; the fragments scaled by w + 1 as with
// mma.sync.
// CHECK-LABEL: func.func @bf16_unit_offset(
// CHECK: fusion.kernel @bf16_unit_offset_k0_fused
// CHECK-SAME: block = 512, smem = {{[0-9]+}}, static_smem = {{[0-9]+}},
// CHECK-SAME: warpgroup_mma = true, cluster_k_split = true>>
// CHECK: gpu.func @bf16_unit_offset_k0_fused_gemm32(
// CHECK: arith.addf %{{.*}} : vector<2xf32>
// CHECK: arith.mulf %{{.*}} : vector<2xf32>
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {$0, {{.*}}, $15}, {$32, $33, $34, $35}, $36, p, 1, 1, 0;
// PTX: .entry bf16_unit_offset_k0_fused_gemm32(
// PTX: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
func.func @bf16_unit_offset(%x: tensor<?x1024xbf16>, %norm_w: tensor<1024xbf16>,
    %qkv_w: tensor<1024x1024xbf16>, %pos: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x1x256xbf16>, %vc: memref<?x16x1x256xbf16>)
    -> tensor<?x2x256xbf16> {
  %y = fusion.rmsnorm %x, %norm_w {epsilon = 1.0e-06 : f64, unit_offset}
      : tensor<?x1024xbf16>, tensor<1024xbf16> -> tensor<?x1024xbf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 256 : i64}
      : tensor<?x1024xbf16>, tensor<1024x1024xbf16> -> tensor<?x2x256xbf16>, tensor<?x1x256xbf16>, tensor<?x1x256xbf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<gptj>, theta = 1.0e+04 : f64}
      : tensor<?x2x256xbf16>, tensor<?x1x256xbf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x1x256xbf16> into memref<?x16x1x256xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x2x256xbf16>
}

// -----

// No warpgroup MMA where a row tile is not whole warpgroups: an LM head of
// 16 x 67 = 1072 rows gets row tiles of 16 (one warp), so mma.sync.
// CHECK-LABEL: func.func @rows_1072(
// CHECK-NOT: warpgroup_mma
// CHECK: gpu.func @rows_1072_k0_fused_gemm16(
// CHECK-NOT: wgmma
// CHECK: nvvm.mma.sync
// CHECK: gpu.return
func.func @rows_1072(%x: tensor<?x512xf16>, %norm_w: tensor<512xf16>,
    %w: tensor<1072x512xf16>) -> tensor<?x1072xf16> {
  %y = fusion.rmsnorm %x, %norm_w {epsilon = 1.0e-05 : f64}
      : tensor<?x512xf16>, tensor<512xf16> -> tensor<?x512xf16>
  %logits = fusion.linear %y, %w : tensor<?x512xf16>, tensor<1072x512xf16> -> tensor<?x1072xf16>
  return %logits : tensor<?x1072xf16>
}
