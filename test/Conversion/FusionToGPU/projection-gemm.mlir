// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu=target-sm=80 | FileCheck %s --check-prefix=SM80
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=none --convert-fusion-to-gpu | FileCheck %s --check-prefix=NONE
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu=cluster-k-split=false | FileCheck %s
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s -o %t/gemm
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t/gemm.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/gemm.ptx -o %t/gemm.cubin %}

// The GEMM-shaped projection variants (Kernels/ProjectionGemmKernel.cpp) of
// an RMSNorm + residual front half: hidden 512, 4 query heads over 2 KV
// heads of 64 (8 heads, 512 rows), f16. Expected values from the rules of
// chooseProjectionGemmSchedules (132 SMs; sm_80, where the weights come by
// cp.async like the other rows; sm_90's TMA-staged weights further below):
//   tile rows: 128 / 64 = 2 heads (8 % 2 == 0) -> 128 rows, 8 warps;
//   row tiles 512 / 128 = 4; k split: 4 x 8 = 32 <= 264 and 512 % (64 x 8)
//   == 0 -> 8 (one 64-element stage per CTA); grid 4 x 8 = 32;
//   pitch 64 x 2 + 16 = 144 bytes; stage rows 128 + 2T + 1 (x, residual,
//   norm weight): T = 16: 161 rows, 3 x 161 x 144 = 69552 bytes; T = 32:
//   193 rows, 83376; T = 64: 257 rows, 111024;
//   two CTAs per SM: 2 x (111024 + 64 + 1024) = 224224 <= 232448.
// The workspaces: partial_out [batch, 8, 512], partial_stats [batch, 4 x 8],
// split_counters [batch, 4] (zero_init); the primary kernel takes them too.
// The default checks run with cluster-k-split=false: the workspace combine,
// which a launch without a thread-block cluster takes; the cluster combine
// (the default from sm_90) is projection-gemm-cluster-k-split.mlir's.

// SM80-LABEL: func.func @layer(
// SM80: fusion.kernel @layer_k0_fused
// SM80-SAME: #fusion.param<kind = output, role = "query", dtype = f16, shape = [batch, 4, 64]>,
// SM80-SAME: #fusion.param<kind = workspace, role = "partial_out", dtype = f32, shape = [batch, 8, 512]>,
// SM80-SAME: #fusion.param<kind = workspace, role = "partial_stats", dtype = f32, shape = [batch, 32]>,
// SM80-SAME: #fusion.param<kind = workspace, role = "split_counters", dtype = i32, shape = [batch, 4], zero_init = true>,
// SM80-SAME: #fusion.param<kind = scalar, role = "batch", dtype = i32>, #fusion.param<kind = scalar, role = "max_pages", dtype = i32>]
// SM80-SAME: variants = [#fusion.variant<min_batch = 2, entry = "layer_k0_fused_gemm16", grid = [32, 1, 1], block = 256, smem = 69552, static_smem = 4,
// SM80-SAME: schedule = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 32, tile_rows = 128, tile_tokens = 16,
// SM80-SAME: k_split = 8, stage_k = 64, stages = 3, min_ctas_per_sm = 2>>,
// SM80-SAME: #fusion.variant<min_batch = 17, entry = "layer_k0_fused_gemm32", grid = [32, 1, 1], block = 256, smem = 83376,
// SM80-SAME: #fusion.variant<min_batch = 33, entry = "layer_k0_fused_gemm64", grid = [32, 1, 1], block = 256, smem = 111024,
// SM80-SAME: schedule = #fusion.projection_schedule<threads = 64, warps = 2,
// SM80: gpu.func @layer_k0_fused_gemm16(
// SM80-NOT: nvvm.mbarrier
// SM80: scf.for
// SM80: gpu.barrier
// SM80-COUNT-4: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg : !llvm.ptr<3>, !llvm.ptr<1>
// SM80-NOT: nvvm.cp.async.bulk.tensor
// SM80: gpu.return
// sm_90 (the checks below): the weight_map tensor map of the qkv_weight
// (params[3], [512, 512] f16) after the workspaces, boxes of the 128-row
// tile by 64 columns (128 bytes: the swizzle span). The slots: 128 weight
// rows of 128 bytes (unpadded) + the other rows at 144 bytes, rounded up to
// 1 KiB, 3 stages + 1 KiB to align them: T = 16: 16384 + 33 x 144 = 21136
// -> 21504, 65536 bytes; T = 32: 16384 + 65 x 144 = 25744 -> 26624, 80896;
// T = 64: 16384 + 129 x 144 = 34960 -> 35840, 108544. Static: the arrival
// flag and 3 mbarriers (4 + 24 bytes).
// CHECK-LABEL: func.func @layer(
// CHECK: fusion.kernel @layer_k0_fused
// CHECK-SAME: #fusion.param<kind = workspace, role = "split_counters", dtype = i32, shape = [batch, 4], zero_init = true>,
// CHECK-SAME: #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [512, 512], of = 3, box = [128, 64]>,
// CHECK-SAME: #fusion.param<kind = scalar, role = "batch", dtype = i32>, #fusion.param<kind = scalar, role = "max_pages", dtype = i32>]
// CHECK-SAME: variants = [#fusion.variant<min_batch = 2, entry = "layer_k0_fused_gemm16", grid = [32, 1, 1], block = 256, smem = 65536, static_smem = 28,
// CHECK-SAME: schedule = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 32, tile_rows = 128, tile_tokens = 16,
// CHECK-SAME: k_split = 8, stage_k = 64, stages = 3, min_ctas_per_sm = 2>>,
// CHECK-SAME: #fusion.variant<min_batch = 17, entry = "layer_k0_fused_gemm32", grid = [32, 1, 1], block = 256, smem = 80896,
// CHECK-SAME: #fusion.variant<min_batch = 33, entry = "layer_k0_fused_gemm64", grid = [32, 1, 1], block = 256, smem = 108544,
// CHECK-SAME: schedule = #fusion.projection_schedule<threads = 64, warps = 2,

// The 16-token variant. Before griddepcontrol.wait, as nothing there
// depends on the previous kernel: the thread and tile indices, the first
// 1 KiB boundary of the dynamic shared memory (it starts the slots),
// thread r < 128's L2 prefetch of the CTA's k range of its staged row: row
// (cta / 8) * 128 + r, elements from (cta % 8) * 64, 64 x 2 = 128 bytes
// (shouldPrefetchWeights: the 512 x 512 f16 weight, 512 KiB, fits the
// 8 MiB budget), the weight_map as a generic pointer, the 3 stage mbarriers
// (thread 0 inits them, one arrival each) and, where batch > 0, the TMA
// copy of the first token tile's only weight step (thread 0: proxy fence,
// the barrier armed for 128 x 128 = 16384 bytes, the box at (k, row tile x
// 128)).
// CHECK: gpu.func @layer_k0_fused_gemm16(
// CHECK-SAME: workgroup(%{{.*}} : memref<3xi64, #gpu.address_space<workgroup>> {llvm.align = 8 : i64}, %{{.*}} : memref<1xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 2 : i32}
// CHECK-NEXT: nvvm.griddepcontrol  launch_dependents
// CHECK-NEXT: memref.get_global @layer_k0_fused_inv_freq
// CHECK-NEXT: %[[TID:.*]] = gpu.thread_id  x
// CHECK: arith.remui %block_id_x, %c8
// CHECK: arith.divui %block_id_x{{.*}}, %c8
// CHECK: llvm.mlir.addressof @__fusion_dynamic_shared : !llvm.ptr<3>
// CHECK: llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i32
// CHECK: arith.remui %{{.*}}, %c1024
// CHECK: arith.cmpi ult, %[[TID]], %c128
// CHECK: arith.muli %{{.*}}, %c512
// CHECK: nvvm.cp.async.bulk.prefetch %{{.*}}, %c128_i32 : <1>
// CHECK: llvm.addrspacecast %{{.*}} : !llvm.ptr<1> to !llvm.ptr
// CHECK: llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<3>
// CHECK-COUNT-3: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK: gpu.barrier
// CHECK: arith.cmpi sgt, %arg14, %c0_i32 : i32
// CHECK: arith.cmpi eq, %[[TID]], %c0
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// Then the pointers to the staged global buffers and, per token tile, the
// prologue's two stages: the weights' TMA copy only in tiles after the
// first (the same copy as above); 16-byte cp.async.cg of x and the
// residual: 16 x 8 = 128 chunks, threads < 128, and of the norm weight: 8
// chunks; one commit group per stage.
// CHECK: memref.view {{.*}} to memref<32768xf16, #gpu.address_space<workgroup>>
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK: scf.for %[[TILE:[^ ]+]] =
// CHECK: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TILE]], %c0
// CHECK: %[[LATER:.*]] = arith.xori %[[FIRST]], %true
// CHECK-NEXT: scf.if %[[LATER]] {
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: arith.cmpi ult, %{{.*}}, %c128
// CHECK: nvvm.cp.async.shared.global
// CHECK: arith.cmpi ult, %{{.*}}, %c128
// CHECK: nvvm.cp.async.shared.global
// CHECK: arith.cmpi ult, %{{.*}}, %c8
// CHECK: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// With one step per CTA the second prologue stage is an empty group.
// CHECK-NEXT: nvvm.cp.async.commit.group
// The pipelined loop over the steps: 8 accumulators (two 8-token n-tiles)
// and this thread's sum of h^2; wait for the step's group and for the
// phase of its stage's barrier, barrier, issue the step two ahead (or an
// empty group).
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-NEXT: nvvm.cp.async.wait.group 1
// CHECK: llvm.inline_asm has_side_effects {{.*}}mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;{{.*}}@!p bra WAIT
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.cp.async.commit.group
// CHECK: } else {
// CHECK-NEXT: nvvm.cp.async.commit.group
// The folded norm: h = round(x + residual) in place of x (threads < 128:
// 16 tokens x 8 chunks), residual_out from row tile 0, h^2 summed; a
// barrier before the mma reads the rewritten rows.
// CHECK: arith.cmpi ult, %[[TID]], %c128
// CHECK: arith.addf %{{.*}} : vector<8xf32>
// CHECK-NEXT: arith.truncf %{{.*}} : vector<8xf32> to vector<8xf16>
// CHECK-NEXT: vector.store %{{.*}} : memref<32768xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: vector.store %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: vector.reduction <add>
// CHECK: gpu.barrier
// The stage's mma: per 16-element k step one ldmatrix.x4 of the warp's 16
// weight rows, scaled by the norm weight of its columns 2q, 2q + 1 and
// 2q + 8, 2q + 9 (round(W32 * w32)), one ldmatrix.x4 of the 16 tokens, two
// m16n8k16 (tokens 0-7, 8-15).
// CHECK: nvvm.ldmatrix {{.*}}num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK: vector.load %{{.*}} {alignment = 4 : i64} : memref<32768xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK: arith.mulf %{{.*}} : vector<2xf32>
// CHECK-NEXT: arith.truncf %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: nvvm.ldmatrix
// CHECK: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK: nvvm.mma.sync
// CHECK-COUNT-6: nvvm.ldmatrix
// CHECK: nvvm.cp.async.wait.group 0
// Partials: the accumulators to partial_out, the sums of squares reduced
// over the 8 lanes of a token to partial_stats; fence, barrier, thread 0
// counts the arrival, the last CTA resets the counter.
// CHECK: memref.store %{{.*}} : memref<1099511627776xf32>
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK: memref.store %{{.*}} : memref<1099511627776xf32>
// CHECK: nvvm.memory.barrier <gpu>
// CHECK-NEXT: gpu.barrier
// CHECK: memref.atomic_rmw addi %{{.*}} : (i32, memref<1099511627776xi32>) -> i32
// CHECK: %[[LAST:.*]] = arith.subi %c8_i32, %{{.*}} : i32
// CHECK: arith.cmpi eq, %{{.*}}, %[[LAST]] : i32
// CHECK: memref.atomic_rmw assign %{{.*}} : (i32, memref<1099511627776xi32>) -> i32
// CHECK: gpu.barrier
// The last CTA: acquire fence, then per (token, pair) the 8 partials, the
// sums of squares, the correctly rounded 1/sqrt, RoPE and the stores.
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: scf.for
// CHECK: memref.load %{{.*}} : memref<1099511627776xf32>
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"
// CHECK: arith.fptosi %{{.*}} : f64 to i64
// CHECK: gpu.return

// The 64-token variant: 32 accumulators, two folded chunks per thread.
// CHECK: gpu.func @layer_k0_fused_gemm64(
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> ({{(f32, )+}}f32)
// CHECK-COUNT-2: nvvm.mma.sync

// Unfused: the qkv_proj kernel has no norm: no partial_stats, no fold pass;
// 128 weight rows of 128 bytes (TMA) + 16 token rows of 144 = 18688 ->
// 19456 (1 KiB), 3 x 19456 + 1024 = 59392 bytes.
// NONE-LABEL: func.func @layer(
// NONE: fusion.kernel @layer_k1_qkv_proj
// NONE-SAME: #fusion.param<kind = workspace, role = "partial_out", dtype = f32, shape = [batch, 8, 512]>,
// NONE-SAME: #fusion.param<kind = workspace, role = "split_counters", dtype = i32, shape = [batch, 4], zero_init = true>,
// NONE-SAME: entry = "layer_k1_qkv_proj_gemm16", grid = [32, 1, 1], block = 256, smem = 59392,
// NONE: gpu.func @layer_k1_qkv_proj_gemm16(
// NONE: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// NONE-NOT: vector.reduction
// NONE: nvvm.ldmatrix
// NONE: gpu.return

// PTX: .entry layer_k0_fused_gemm16(
// PTX: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX: cp.async.cg.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16;
// PTX: cp.async.commit_group;
// PTX: cp.async.wait_group 1;
// PTX: mbarrier.try_wait.parity.shared::cta.b64 p, [%r{{[0-9]+}}], %r{{[0-9]+}};
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX: atom.global.add.u32
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

// bf16, RMSNorm with unit_offset and no residual, head_dim 256 (one head per
// tile: 256 rows, 16 warps, 512 threads), 2 query heads over 1 KV head
// (4 heads, 1024 rows, 4 row tiles), hidden 1024: k split 8 (4 x 8 <= 264,
// 1024 % 512 == 0), two 64-element steps per CTA; stage rows 256 + T + 1;
// T = 64 (sm_90, TMA): 256 weight rows of 128 bytes + 65 rows of 144 =
// 42128 -> 43008 (1 KiB), 3 x 43008 + 1024 = 130048 bytes; one CTA per SM
// (512 threads); boxes of the whole 256-row tile.
// CHECK-LABEL: func.func @bf16_unit_offset(
// CHECK: fusion.kernel @bf16_unit_offset_k0_fused
// CHECK-SAME: #fusion.param<kind = workspace, role = "partial_out", dtype = f32, shape = [batch, 8, 1024]>,
// CHECK-SAME: #fusion.param<kind = workspace, role = "partial_stats", dtype = f32, shape = [batch, 32]>,
// CHECK-SAME: #fusion.param<kind = workspace, role = "split_counters", dtype = i32, shape = [batch, 4], zero_init = true>,
// CHECK-SAME: #fusion.param<kind = tensor_map, role = "weight_map", dtype = bf16, shape = [1024, 1024], of = 2, box = [256, 64]>,
// CHECK-SAME: #fusion.variant<min_batch = 33, entry = "bf16_unit_offset_k0_fused_gemm64", grid = [32, 1, 1], block = 512, smem = 130048,
// CHECK-SAME: stages = 3, min_ctas_per_sm = 1>>]
// The weight fragments times w + 1 (in fp32); the bf16 fragments go to
// mma.sync as i32 registers.
// Two k steps per CTA (1024 / 8 / 64): before griddepcontrol.wait both
// weight boxes of the first token tile go out, stage 0's at the CTA's
// first k (rank x 128) and stage 1's at k + 64, each arming its own
// barrier (8 bytes apart) for 256 rows x 128 bytes = 32768.
// CHECK: gpu.func @bf16_unit_offset_k0_fused_gemm16(
// (every check up to the wait stays before this kernel's wait)
// CHECK-NEXT: nvvm.griddepcontrol  launch_dependents
// CHECK-NOT: griddepcontrol.wait
// CHECK: %[[K0:.*]] = arith.muli %{{.*}}, %c128 : index
// CHECK-NOT: griddepcontrol.wait
// CHECK: arith.addi %[[K0]], %c0
// CHECK-NOT: griddepcontrol.wait
// CHECK: arith.muli %c0{{.*}}, %c8
// CHECK-NOT: griddepcontrol.wait
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// CHECK-NOT: griddepcontrol.wait
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: griddepcontrol.wait
// CHECK: arith.addi %[[K0]], %c64
// CHECK-NOT: griddepcontrol.wait
// CHECK: arith.muli %c1, %c8
// CHECK-NOT: griddepcontrol.wait
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// CHECK-NOT: griddepcontrol.wait
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK: nvvm.ldmatrix
// CHECK: llvm.bitcast %{{.*}} : i32 to vector<2xbf16>
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK: arith.addf %{{.*}} : vector<2xf32>
// CHECK: arith.mulf %{{.*}} : vector<2xf32>
// CHECK: nvvm.mma.sync {{.*}} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
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

// A norm whose output the kernel also yields cannot be folded (the pass
// recomputes such a norm instead, so the kernel is written out here): the
// tensor-core variant, no workspaces.
// CHECK-LABEL: func.func @normed_output_used(
// CHECK: fusion.kernel @normed_output_used_k0
// CHECK-NOT: role = "partial_out"
// CHECK-SAME: entry = "normed_output_used_k0_mma"
// CHECK-NOT: gpu.func @normed_output_used_k0_gemm
func.func @normed_output_used(%x: tensor<?x512xf16>, %norm_w: tensor<512xf16>,
    %qkv_w: tensor<512x512xf16>) -> (tensor<?x4x64xf16>, tensor<?x512xf16>) {
  %0:2 = fusion.kernel @normed_output_used_k0 (%a = %x, %b = %norm_w, %c = %qkv_w)
      : (tensor<?x512xf16>, tensor<512xf16>, tensor<512x512xf16>)
      -> (tensor<?x512xf16>, tensor<?x4x64xf16>) attributes {strategy = #fusion.strategy<decode>} {
    %y = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64}
        : tensor<?x512xf16>, tensor<512xf16> -> tensor<?x512xf16>
    %q, %k, %v = fusion.qkv_proj %y, %c {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
        : tensor<?x512xf16>, tensor<512x512xf16> -> tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>
    fusion.yield %y, %q : tensor<?x512xf16>, tensor<?x4x64xf16>
  }
  return %0#1, %0#0 : tensor<?x4x64xf16>, tensor<?x512xf16>
}
