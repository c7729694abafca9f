// RUN: fusion-opt %s --fusion-form-kernels --convert-fusion-to-gpu="arch-specific=true" | FileCheck %s
// RUN: fusion-opt %s --fusion-form-kernels --convert-fusion-to-gpu="arch-specific=true cluster-k-split=false" | FileCheck %s --check-prefix=OFF
// RUN: fusion-opt %s --fusion-form-kernels --convert-fusion-to-gpu="target-sm=80" | FileCheck %s --check-prefix=OFF
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s --chip=sm_90a -o %t/cks
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/cks.manifest.json
// RUN: fusion-compile %s --chip=sm_90 -o %t/cks90
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/cks.ptx -o %t/cks.cubin %}
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/cks90.ptx -o %t/cks90.cubin %}

// Split-K through a thread-block cluster (the default from sm_90;
// cluster-k-split=false turns it off;
// Kernels/ProjectionGemmKernel.cpp, docs/abi.md section 3.4). Front half of
// hidden 1024, 16 query and 8 KV heads of 128 (32 row tiles of 128 rows),
// RMSNorm with a residual, f16: k split 8 (256 CTAs <= 2 x 132), so the 8
// CTAs of a row tile are one cluster and each reduces 64 / 8 = 8 of the
// tile's row pairs. The exchange (16 tokens x 132 floats + 16 sums of
// squares = 8512 bytes) fits the 3-stage ring of the 16-token variant.
// CHECK-LABEL: func.func @cks(
// CHECK: #fusion.variant<min_batch = 2, entry = "cks_k0_fused_gemm16", grid = [256, 1, 1]
// CHECK-SAME: k_split = 8, {{[^>]*}}, warpgroup_mma = true, cluster_k_split = true>>
// CHECK-SAME: entry = "cks_k0_fused_gemm32", {{[^>]*}} cluster_k_split = true>>
// CHECK-SAME: entry = "cks_k0_fused_gemm64", {{[^>]*}} cluster_k_split = true>>
// CHECK: gpu.func @cks_k0_fused_gemm16(
// After the k loop (every copy landed): launched in a cluster of k_split
// CTAs, the cluster path; else the workspaces.
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: %[[NCTA:.*]] = nvvm.read.ptx.sreg.cluster.nctarank : i32
// CHECK: %[[CLUSTERED:.*]] = arith.cmpi eq, %[[NCTA]], %c8_i32
// CHECK: scf.if %[[CLUSTERED]] {
// The ring is free (proxy fence, CTA barrier); the 8 accumulators of each
// lane and the sums of squares into this CTA's shared memory, no
// workspace; then the cluster barrier publishes them.
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: memref.store
// CHECK-COUNT-8: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// CHECK-NOT: memref.store
// With TMA weights each thread fences its exchange stores for the async
// proxy: the next token tile's weight copies overwrite the ring.
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// Every CTA's exchange by DSMEM: each thread's (token, row pair) of this
// CTA's share (rank x 8 + i of the tile's 64), each load one side-effecting
// asm block (mapa and ld.shared::cluster on this CTA's 32-bit shared
// address of the exchange, so no mapped address is hoisted out of the
// loop): rank 0's partials of both rows and its sum of squares first, then
// summed in rank order up to rank 7 (the workspace path's order).
// CHECK-NOT: nvvm.mapa
// CHECK: scf.for
// CHECK: %[[X0:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[A0:.*]] = llvm.inline_asm has_side_effects "{\0A\09.reg .b32 a;\0A\09mapa.shared::cluster.u32 a, $1, 0;\0A\09ld.shared::cluster.f32 $0, [a];\0A\09}", "=f,r,~{memory}" %[[X0]] : (i32) -> f32
// CHECK: %[[B0:.*]] = llvm.inline_asm {{.*}}mapa.shared::cluster.u32 a, $1, 0;
// CHECK: %[[S0:.*]] = llvm.inline_asm {{.*}}mapa.shared::cluster.u32 a, $1, 0;
// CHECK: %[[A1:.*]] = llvm.inline_asm {{.*}}mapa.shared::cluster.u32 a, $1, 1;
// CHECK: %[[B1:.*]] = llvm.inline_asm {{.*}}mapa.shared::cluster.u32 a, $1, 1;
// CHECK-NEXT: arith.addf %[[A0]], %[[A1]] : f32
// CHECK-NEXT: arith.addf %[[B0]], %[[B1]] : f32
// CHECK: %[[S1:.*]] = llvm.inline_asm {{.*}}mapa.shared::cluster.u32 a, $1, 1;
// CHECK-NEXT: arith.addf %[[S0]], %[[S1]] : f32
// CHECK-COUNT-3: mapa.shared::cluster.u32 a, $1, 2;{{.*}} -> f32
// CHECK-COUNT-3: mapa.shared::cluster.u32 a, $1, 3;{{.*}} -> f32
// CHECK-COUNT-3: mapa.shared::cluster.u32 a, $1, 4;{{.*}} -> f32
// CHECK-COUNT-3: mapa.shared::cluster.u32 a, $1, 5;{{.*}} -> f32
// CHECK-COUNT-3: mapa.shared::cluster.u32 a, $1, 6;{{.*}} -> f32
// CHECK-COUNT-3: mapa.shared::cluster.u32 a, $1, 7;{{.*}} -> f32
// CHECK-NOT: ld.shared::cluster
// CHECK: llvm.nvvm.sqrt.rn.f
// The last cluster barrier: no CTA reuses or leaves its ring while the
// cluster reads it.
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NEXT: } else {
// The workspace path, unchanged: membar.gl, the arrival counter, the last
// CTA's reduction.
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.return

// Off by default, and on a target without clusters.
// OFF-NOT: cluster_k_split
// OFF-NOT: nvvm.read.ptx.sreg.cluster.nctarank
// OFF-NOT: mapa.shared::cluster

// MANIFEST: "entry": "cks_k0_fused_gemm16"
// MANIFEST: "cluster_k_split": true,
// MANIFEST: "kind": "projection_gemm"
func.func @cks(%x: tensor<?x1024xf16>, %res: tensor<?x1024xf16>, %norm_w: tensor<1024xf16>,
    %qkv_w: tensor<4096x1024xf16>, %pos: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>)
    -> (tensor<?x16x128xf16>, tensor<?x1024xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%res : tensor<?x1024xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x1024xf16>, tensor<1024xf16> -> tensor<?x1024xf16>, tensor<?x1024xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 16 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x1024xf16>, tensor<4096x1024xf16> -> tensor<?x16x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64}
      : tensor<?x16x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %h : tensor<?x16x128xf16>, tensor<?x1024xf16>
}
