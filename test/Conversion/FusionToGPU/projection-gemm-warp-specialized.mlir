// RUN: fusion-opt %s --fusion-form-kernels --convert-fusion-to-gpu="arch-specific=true warp-specialized-gemm=true cluster-k-split=false" | FileCheck %s
// RUN: fusion-opt %s --fusion-form-kernels --convert-fusion-to-gpu="arch-specific=true" | FileCheck %s --check-prefix=OFF
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s --chip=sm_90a --warp-specialized-gemm --cluster-k-split=false -o %t/ws
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/ws.manifest.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/ws.ptx -o %t/ws.cubin %}
// RUN: fusion-opt %s --fusion-form-kernels --convert-fusion-to-gpu="arch-specific=true warp-specialized-gemm=true" | FileCheck %s --check-prefix=WSCKS
// RUN: fusion-compile %s --chip=sm_90a --warp-specialized-gemm -o %t/wscks
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/wscks.ptx -o %t/wscks.cubin %}

// The warp-specialised GEMM variants (opt-in: warp-specialized-gemm;
// Kernels/ProjectionGemmKernel.cpp, docs/gemm-warp-specialized-plan.md).
// Front half of hidden 1024, 16 query and 8 KV heads of 128 (4096 rows:
// 32 row tiles of 128), RMSNorm with a residual, f16. The largest
// power-of-two k split whose grid fits 132 SMs once: 4 (128 CTAs; 8 would
// be 256), so 1024 / 64 / 4 = 4 steps per CTA and 4 stages (whole pairs of
// the two fold warps, at most the steps). A stage slot: 128 weight rows,
// 16 rows each of x, residual and h, the norm weight, 128 bytes each:
// 177 x 128 = 22656 -> 23552 bytes; 4 x 23552 + 1 KiB alignment = 95232.
// Static: 3 x 4 mbarriers (96) + the arrival flag (4, at 16-byte
// alignment) + the fold warps' sums (2 x 16 x 4 = 128) = 228. 8 consumer
// warps + the producer warp + 2 fold warps = 352 threads. The 32- and
// 64-token tiles likewise, with k split 4 (so the shared workspaces are
// sized for 4) and 4 stages: slots of 128 + 3 x 32 + 1 = 225 rows (28800
// -> 29696 bytes; 4 x 29696 + 1024 = 119808) and 128 + 3 x 64 + 1 = 321
// rows (41088 -> 41984; 168960), the fold warps' sums 256 and 512 bytes
// (static 356 and 612).
// CHECK-LABEL: func.func @ws(
// CHECK: fusion.kernel @ws_k0_fused
// CHECK-SAME: #fusion.param<kind = workspace, role = "partial_out", dtype = f32, shape = [batch, 4, 4096]>
// CHECK-SAME: #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [4096, 1024], of = 3, box = [128, 64]>
// CHECK-SAME: #fusion.param<kind = tensor_map, role = "input_map", dtype = f16, shape = [batch, 1024], of = 0, box = [16, 64]>
// CHECK-SAME: #fusion.param<kind = tensor_map, role = "residual_map", dtype = f16, shape = [batch, 1024], of = 2, box = [16, 64]>
// CHECK-SAME: #fusion.variant<min_batch = 2, entry = "ws_k0_fused_gemm16", grid = [128, 1, 1], block = 352, smem = 95232, static_smem = 228,
// CHECK-SAME: schedule = #fusion.projection_gemm_schedule<threads = 352, warps = 8, grid = 128, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 4, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true>>
// CHECK-SAME: #fusion.variant<min_batch = 17, entry = "ws_k0_fused_gemm32", grid = [128, 1, 1], block = 352, smem = 119808, static_smem = 356,
// CHECK-SAME: tile_tokens = 32, k_split = 4, stage_k = 64, stages = 4, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true>>
// CHECK-SAME: #fusion.variant<min_batch = 33, entry = "ws_k0_fused_gemm64", grid = [128, 1, 1], block = 352, smem = 168960, static_smem = 612,
// CHECK-SAME: tile_tokens = 64, k_split = 4, stage_k = 64, stages = 4, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true>>
// CHECK: gpu.func @ws_k0_fused_gemm16(
// CHECK-SAME: known_block_size = array<i32: 352, 1, 1>
// The stages' barriers: full (the weights' expect_tx and the stage's fold
// warp), empty (the 8 consumer warps), tokens (the producer's expect_tx).
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c2_i32
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c8_i32
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c1_i32
// Every slot's weight box before griddepcontrol.wait (16384 bytes each).
// CHECK-COUNT-4: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.bulk
// CHECK: griddepcontrol.wait
// The consumer warps (warp < 8): wait for the slot's full phase, the four
// scaled weight fragments, the wgmmas with h as B, all waited for, then
// each warp's lane 0 releases the slot on empty (after a warp sync; one
// predicated arrival, no branch).
// CHECK: scf.for
// CHECK: mbarrier.try_wait.parity
// CHECK-COUNT-4: nvvm.ldmatrix
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.bar.warp.sync
// CHECK: @p mbarrier.arrive.shared::cta.b64
// CHECK: scf.yield
// The producer's lane 0: from the fifth global step, the slot's empty
// phase; every step, the tokens barrier armed for x, the residual (2 x 16
// x 128) and the norm weight (128): 4224 bytes, two boxes of 16 rows from
// the maps and a 128-byte bulk copy; then (from the fifth step) the
// weight box.
// CHECK: arith.cmpi uge, %{{.*}}, %c4
// CHECK: mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c4224_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: nvvm.cp.async.bulk.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, %c128_i32
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// The fold warps: each takes the steps of its parity (its slots), waits
// for their token rows (the residual_out writer is row tile step % 32),
// h = round(x + residual) into the h rows, the proxy fence and lane 0's
// arrival on full; then residual_out and the sums of squares of all 4
// chunks; finally the per-token sums into shared memory.
// CHECK: arith.remui %{{.*}}, %c2
// CHECK: mbarrier.try_wait.parity
// CHECK: arith.remui %{{.*}}, %c32
// CHECK: vector.load
// CHECK: vector.load
// CHECK: arith.addf %{{.*}} : vector<8xf32>
// CHECK: vector.store
// CHECK-NOT: vector.reduction
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.bar.warp.sync
// CHECK: @p mbarrier.arrive.shared::cta.b64
// CHECK: vector.store
// CHECK-COUNT-4: vector.reduction <add>
// CHECK: memref.store %{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>
// Then the CTA barrier, the two fold warps' sums of each token added in
// order into partial_stats, the published partials and the reduction.
// CHECK: gpu.barrier
// CHECK: memref.load %{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: arith.addf
// CHECK: nvvm.memory.barrier <gpu>
// CHECK-NEXT: gpu.barrier
// CHECK: gpu.return

// The 64-token tile: m64n64k16 wgmmas; the producer arms the tokens
// barrier for 2 x 64 x 128 + 128 = 16512 bytes and copies the x and
// residual rows in four boxes of 16 rows each (one map serves every
// variant); each fold warp finishes 12 of its 16 chunks (residual_out, the
// sums of squares) before its arrival on full and the last 4 after it.
// CHECK: gpu.func @ws_k0_fused_gemm64(
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16512_i32
// CHECK-COUNT-8: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: nvvm.cp.async.bulk.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, %c128_i32
// CHECK: mbarrier.try_wait.parity
// CHECK-COUNT-12: vector.reduction <add>
// CHECK-NOT: vector.reduction
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: @p mbarrier.arrive.shared::cta.b64
// CHECK-COUNT-4: vector.reduction <add>
// CHECK-NOT: vector.reduction
// CHECK: gpu.return

// With cluster-k-split too: the 4 CTAs of a row tile are one cluster. After
// the loops (the consumer warps yield their accumulators) and a CTA
// barrier, the cluster path: the consumer warps' (warp < 8) 8 accumulators
// and the fold warps' per-token sums (thread t < 16 adds the two) into this
// CTA's exchange, the async-proxy fence, the cluster barrier, then 4 remote
// reads per partial (ranks 0-3 in order); else the workspaces.
// WSCKS: gpu.func @ws_k0_fused_gemm16(
// WSCKS: %[[CONSUMER:.*]] = arith.cmpi ult, %{{.*}}, %c8
// WSCKS-NEXT: scf.if %[[CONSUMER]] -> (f32, f32, f32, f32, f32, f32, f32, f32)
// WSCKS: scf.yield %cst, %cst, %cst, %cst, %cst, %cst, %cst, %cst : f32, f32, f32, f32, f32, f32, f32, f32
// WSCKS: gpu.barrier
// WSCKS: nvvm.read.ptx.sreg.cluster.nctarank
// WSCKS: gpu.barrier
// WSCKS: scf.if %[[CONSUMER]] {
// WSCKS-COUNT-8: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// WSCKS: arith.cmpi ult, %thread_id_x, %c16
// WSCKS: memref.load %{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>
// WSCKS: memref.load %{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>
// WSCKS: llvm.store %{{.*}} : f32, !llvm.ptr<3>
// WSCKS: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// WSCKS-NEXT: nvvm.cluster.arrive
// WSCKS-NEXT: nvvm.cluster.wait
// WSCKS: mapa.shared::cluster.u32 a, $1, 0;
// WSCKS: mapa.shared::cluster.u32 a, $1, 3;
// WSCKS: gpu.return

// Off by default: the same module keeps the CTA-barrier pipeline.
// OFF-NOT: warp_specialized
// OFF-NOT: input_map

// MANIFEST: "role": "input_map"
// MANIFEST: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 1024
// MANIFEST: "box": [
// MANIFEST-NEXT: 16,
// MANIFEST-NEXT: 64
// MANIFEST: "role": "residual_map"
// MANIFEST: "entry": "ws_k0_fused_gemm16"
// MANIFEST: "warp_specialized": true
func.func @ws(%x: tensor<?x1024xf16>, %res: tensor<?x1024xf16>, %norm_w: tensor<1024xf16>,
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
