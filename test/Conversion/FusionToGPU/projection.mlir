// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu="target-sm=75" | FileCheck %s
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu | FileCheck %s --check-prefix=MMA

// The fused front half (rmsnorm + residual -> qkv_proj -> rope -> kv_append)
// becomes one gpu.func: flat bare-pointer buffers in ABI order, 16-byte
// vector loads of the activations and weights, shuffle-xor reductions, the
// shared-memory rows of the batch tile, the fp32 inv_freq table, and the
// launch plan on the fusion.kernel. Without tensor cores (first RUN) this
// kernel serves every batch, in tiles of up to 4 tokens; with them (MMA) it
// serves batch 1 only, in tiles of 1, and batch variants the rest.

// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @layer(
// CHECK: fusion.kernel @layer_k0_fused
// CHECK-SAME: launch = #fusion.launch<entry = "layer_k0_fused", grid = [128, 1, 1], block = 64, smem = 0, static_smem = 4104,
// CHECK-SAME: params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 512]>,
// CHECK-SAME: #fusion.param<kind = input, role = "norm_weight", dtype = f16, shape = [512]>,
// CHECK-SAME: #fusion.param<kind = input, role = "residual", dtype = f16, shape = [batch, 512]>,
// CHECK-SAME: #fusion.param<kind = input, role = "qkv_weight", dtype = f16, shape = [512, 512]>,
// CHECK-SAME: #fusion.param<kind = input, role = "positions", dtype = i32, shape = [batch]>,
// CHECK-SAME: #fusion.param<kind = input, role = "key_cache", dtype = f16, shape = [num_pages, 16, 2, 64]>,
// CHECK-SAME: #fusion.param<kind = input, role = "value_cache", dtype = f16, shape = [num_pages, 16, 2, 64]>,
// CHECK-SAME: #fusion.param<kind = input, role = "block_table", dtype = i32, shape = [batch, max_pages]>,
// CHECK-SAME: #fusion.param<kind = output, role = "residual_out", dtype = f16, shape = [batch, 512]>,
// CHECK-SAME: #fusion.param<kind = output, role = "query", dtype = f16, shape = [batch, 4, 64]>,
// CHECK-SAME: #fusion.param<kind = scalar, role = "batch", dtype = i32>, #fusion.param<kind = scalar, role = "max_pages", dtype = i32>]>
// CHECK-SAME: schedule = #fusion.projection_schedule<threads = 64, warps = 2, grid = 128, rows_per_warp = 2,
// CHECK-SAME: pairs_per_warp = 1, vector_width = 8, k_unroll = 2, batch_tile = 4, min_ctas_per_sm = 3,
// CHECK-SAME: preload_chunks = 0>,
// CHECK-SAME: strategy = #fusion.strategy<decode>

// CHECK: gpu.module @fusion_kernels
// CHECK: memref.global "private" constant @layer_k0_fused_inv_freq : memref<32xf32> = dense<[1.000000e+00, 0.749894201,
// CHECK: gpu.func @layer_k0_fused(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<1099511627776xf16>, %{{[a-z0-9]+}}: memref<1099511627776xf16>, %{{[a-z0-9]+}}: memref<1099511627776xf16>, %{{[a-z0-9]+}}: memref<1099511627776xf16>,
// CHECK-SAME: %{{[a-z0-9]+}}: memref<1099511627776xi32>, %{{[a-z0-9]+}}: memref<1099511627776xf16>, %{{[a-z0-9]+}}: memref<1099511627776xf16>, %{{[a-z0-9]+}}: memref<1099511627776xi32>,
// CHECK-SAME: %{{[a-z0-9]+}}: memref<1099511627776xf16>, %{{[a-z0-9]+}}: memref<1099511627776xf16>, %{{[a-z0-9]+}}: i32, %{{[a-z0-9]+}}: i32)
// CHECK-SAME: workgroup(%{{.*}} : memref<2048xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64},
// CHECK-SAME: %{{.*}} : memref<2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.minctasm = 3 : i32}
// sm_75 has no griddepcontrol, so nothing runs ahead of the previous kernel.
// CHECK-NOT: nvvm.cp.async.bulk.prefetch
// CHECK: memref.get_global @layer_k0_fused_inv_freq
// Normalisation: x and r as 16-byte vectors, h into shared memory, the sum
// of squares reduced across the warp and through shared memory.
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<2048xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: gpu.barrier
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"
// The epilogue's positions and block-table entry are loaded before the pair
// loop, lanes >= T reading the sub-tile's last token (first sub-tile: T = 4).
// CHECK: arith.minui %{{.*}}, %c3 : index
// CHECK: memref.load %{{.*}} : memref<1099511627776xi32>
// CHECK: memref.load %{{.*}} : memref<1099511627776xi32>
// CHECK: scf.for
// Projection: weights and normalised rows as 16-byte vectors, fp32 fma;
// software-pipelined: the first step's weights are loaded before the loop,
// which carries the next step's (clamped to the last step) in iter_args.
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> ({{(f32, )+}}vector<8xf16>, vector<8xf16>)
// CHECK: arith.minui
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<2048xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: llvm.intr.fma
// CHECK: gpu.shuffle xor
// RoPE: fp32 angle from the table, f64 quadrant reduction.
// CHECK: arith.sitofp %{{.*}} : i32 to f32
// CHECK: arith.fptosi %{{.*}} : f64 to i64
// CHECK: gpu.return
// MMA-LABEL: func.func @layer(
// MMA: fusion.kernel @layer_k0_fused
// MMA-SAME: smem = 0, static_smem = 1032,
// With an RMSNorm the batch variants are the GEMM-shaped ones
// (projection-gemm.mlir checks them).
// MMA-SAME: variants = [#fusion.variant<min_batch = 2, entry = "layer_k0_fused_gemm16",
// MMA-SAME: schedule = #fusion.projection_schedule<threads = 64, warps = 2, grid = 128, rows_per_warp = 2,
// MMA-SAME: pairs_per_warp = 1, vector_width = 8, k_unroll = 2, batch_tile = 1,
// MMA-SAME: min_ctas_per_sm = 3, preload_chunks = 2>
// MMA: gpu.func @layer_k0_fused(
// MMA-SAME: workgroup(%{{.*}} : memref<512xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64},
// Before griddepcontrol.wait (sm_90), with one pair per warp (256 pairs over
// 128 CTAs x 2 warps) and rows of 512 = 2 chunks of 256 elements, each lane
// loads its 2 x 2 weight vectors (elements 8 lane and 256 + 8 lane of both
// rows of its warp's pair) into registers (schedule preloadChunks) instead
// of an L2 prefetch; after the wait the pair's dot products start from them.
// The pair's RoPE inverse frequency, and token 0's position and cache slot
// (positions, then the block table: step inputs no kernel writes) are read
// before the wait too, so the epilogue after it waits on no load.
// MMA-NEXT: nvvm.griddepcontrol  launch_dependents
// MMA-NEXT: %[[FREQS:.*]] = memref.get_global @layer_k0_fused_inv_freq : memref<32xf32>
// MMA-NOT: nvvm.cp.async.bulk.prefetch
// MMA: arith.cmpi ult, %{{.*}}, %c256 : index
// MMA-NOT: nvvm.cp.async.bulk.prefetch
// MMA: %[[FREQ:.*]] = memref.load %[[FREQS]][%{{.*}}] : memref<32xf32>
// MMA: %[[W0:.*]] = vector.load %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// MMA-COUNT-3: vector.load %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// MMA-NOT: vector.load
// MMA: %[[TOKEN0:.*]]:2 = scf.if %{{.*}} -> (i32, index) {
// MMA: %[[POS0:.*]] = memref.load %[[POSITIONS:.*]][%c0{{.*}}] : memref<1099511627776xi32>
// MMA: memref.load %[[TABLE:.*]][%{{.*}}] : memref<1099511627776xi32>
// MMA-NOT: nvvm.cp.async.bulk.prefetch
// MMA: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// MMA-NOT: memref.get_global
// After it, token 0 takes the preloaded values, a later token loads its own.
// MMA: scf.if %{{.*}} -> (i32, index) {
// MMA-NEXT: scf.yield %[[TOKEN0]]#0, %[[TOKEN0]]#1 : i32, index
// MMA-NEXT: } else {
// MMA: memref.load %[[POSITIONS]]
// MMA: memref.load %[[TABLE]]
// MMA: arith.extf %[[W0]] : vector<8xf16> to vector<8xf32>
// MMA: arith.sitofp %{{.*}} : i32 to f32
// MMA-NEXT: arith.mulf %{{.*}}, %[[FREQ]] : f32
// MMA-NOT: gpu.func @layer_k0_fused_mma(
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

// bf16 LayerNorm (+bias) -> qkv_proj with bias -> GPT-J partial RoPE ->
// kv_append; group size 3; hidden 768 is not a multiple of the 512 elements
// a warp reads per step, so a guarded remainder loop follows the main loop.

// CHECK-LABEL: func.func @bf16_layernorm(
// CHECK: fusion.kernel @bf16_layernorm_k0_fused
// CHECK-SAME: role = "norm_bias"
// CHECK-SAME: role = "qkv_bias", dtype = bf16, shape = [1280]
// CHECK-SAME: schedule = #fusion.projection_schedule<
// CHECK: gpu.func @bf16_layernorm_k0_fused(
// CHECK-SAME: memref<1099511627776xbf16>
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// The guarded remainder of the K loop.
// CHECK: scf.for
// CHECK: arith.cmpi ult
// CHECK: scf.if %{{.*}} -> (f32, f32)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// A LayerNorm keeps the tensor-core variant for batch >= 2: 640 pairs in
// blocks of 8 -> 80 CTAs of 8 warps, all 8 on one row block (k split 8
// ways: 96 elements, one 16-byte vector per lane and step); 32 token rows of
// 768 + 32 bf16 in dynamic shared memory; 7 parts x 32 lanes x 16 registers
// of f32 partial sums.
// MMA-LABEL: func.func @bf16_layernorm(
// MMA: fusion.kernel @bf16_layernorm_k0_fused
// MMA-NOT: role = "partial_out"
// MMA-SAME: variants = [#fusion.variant<min_batch = 2, entry = "bf16_layernorm_k0_fused_mma", grid = [80, 1, 1], block = 256, smem = 51200, static_smem = 14336,
// MMA-SAME: schedule = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 80, rows_per_warp = 16,
// MMA-SAME: tile_tokens = 32, k_vectors = 1, k_split = 8>>]
// The tensor-core variant: the tile's normalised rows in dynamic shared
// memory (32 tokens, rows padded to 800 elements), the software-pipelined k
// loop over this warp's 96 elements carrying the 16 accumulators of the four
// 8-token column blocks and the next step's 16-byte weight vectors of rows
// g and g + 8, one 16-byte shared-memory vector per column block and step,
// mma.m16n8k16 in bf16 (registers passed as i32) with fp32 accumulators,
// then the partial sums of the k parts added through shared memory.
// MMA: gpu.func @bf16_layernorm_k0_fused_mma(
// MMA-SAME: workgroup(%{{.*}} : memref<3584xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// MMA-SAME: kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// MMA: gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// MMA: memref.view {{.*}} to memref<25600xbf16, #gpu.address_space<workgroup>>
// MMA: gpu.barrier
// MMA: vector.store %{{.*}} : memref<25600xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// MMA: gpu.barrier
// MMA: scf.for {{.*}} step %c32{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, vector<8xbf16>, vector<8xbf16>)
// MMA: vector.load %{{.*}} : memref<1099511627776xbf16>, vector<8xbf16>
// MMA: vector.load %{{.*}} : memref<25600xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// MMA: vector.shuffle
// MMA: nvvm.mma.sync {{.*}} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// MMA: memref.store %{{.*}} : memref<3584xf32, #gpu.address_space<workgroup>>
// MMA: gpu.barrier
// MMA: memref.load %{{.*}} : memref<3584xf32, #gpu.address_space<workgroup>>
// MMA: gpu.barrier
// MMA: arith.fptosi %{{.*}} : f64 to i64
// MMA: gpu.return
func.func @bf16_layernorm(%x: tensor<?x768xbf16>, %w: tensor<768xbf16>, %b: tensor<768xbf16>,
    %qkv_w: tensor<1280x768xbf16>, %qkv_b: tensor<1280xbf16>, %pos: tensor<?xi32>,
    %bt: tensor<?x?xi32>, %kc: memref<?x8x2x128xbf16>, %vc: memref<?x8x2x128xbf16>)
    -> tensor<?x6x128xbf16> {
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
      : tensor<?x768xbf16>, tensor<768xbf16>, tensor<768xbf16> -> tensor<?x768xbf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w bias(%qkv_b : tensor<1280xbf16>)
      {num_heads = 6 : i64, num_kv_heads = 2 : i64, head_dim = 128 : i64}
      : tensor<?x768xbf16>, tensor<1280x768xbf16> -> tensor<?x6x128xbf16>, tensor<?x2x128xbf16>, tensor<?x2x128xbf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<gptj>, theta = 1.0e+04 : f64, rotary_dim = 64 : i64}
      : tensor<?x6x128xbf16>, tensor<?x2x128xbf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x128xbf16> into memref<?x8x2x128xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr : tensor<?x6x128xbf16>
}

// -----

// A projection with no norm, RoPE or append (what the `none` strategy makes
// of qkv_proj): the input row is copied into shared memory and all three
// outputs are written.

// CHECK-LABEL: func.func @qkv_alone(
// CHECK: fusion.kernel @qkv_alone_k0_qkv_proj
// CHECK-SAME: role = "query"
// CHECK-SAME: role = "key"
// CHECK-SAME: role = "value"
// CHECK-SAME: #fusion.param<kind = scalar, role = "batch", dtype = i32>]
// CHECK: gpu.func @qkv_alone_k0_qkv_proj(
// CHECK-NOT: memref.global
// CHECK: gpu.return
func.func @qkv_alone(%x: tensor<?x256xf16>, %w: tensor<768x256xf16>)
    -> (tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>) {
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 4 : i64, num_kv_heads = 4 : i64, head_dim = 64 : i64}
      : tensor<?x256xf16>, tensor<768x256xf16> -> tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>
  return %q, %k, %v : tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>
}

// -----

// Hidden 576 (SmolLM2's) on sm_90: one pair per warp, rows of 3 chunks, the
// last one partial (576 = 2 x 256 + 64). Before the wait the lanes past the
// row's end (8 lane + 512 >= 576) load the row's first vector instead (the
// clamped offset feeds the fifth and sixth loads); after it only the lanes
// inside the row add the third chunk, from those two vectors.

// MMA-LABEL: func.func @partial_chunk(
// MMA: gpu.func @partial_chunk_k0_qkv_proj(
// MMA-NEXT: nvvm.griddepcontrol  launch_dependents
// MMA: %[[E:.*]] = arith.addi %{{.*}}, %c512 : index
// MMA: %[[IN:.*]] = arith.cmpi ult, %[[E]], %c576{{.*}} : index
// MMA: %[[SEL:.*]] = arith.select %[[IN]], %[[E]], %c0{{.*}} : index
// MMA-COUNT-4: vector.load %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// MMA: %[[A:.*]] = arith.addi %{{.*}}, %[[SEL]] : index
// MMA-NEXT: %[[WA:.*]] = vector.load %{{.*}}[%[[A]]] {{.*}} : memref<1099511627776xf16>, vector<8xf16>
// MMA-NEXT: %[[B:.*]] = arith.addi %{{.*}}, %[[SEL]] : index
// MMA-NEXT: %[[WB:.*]] = vector.load %{{.*}}[%[[B]]] {{.*}} : memref<1099511627776xf16>, vector<8xf16>
// MMA-NOT: vector.load
// MMA: llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// x goes to shared memory in one round trip: both of the thread's chunks
// are loaded (the second at a clamped offset) before either is stored, the
// second only inside the row.
// MMA: %[[X0:.*]] = vector.load %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// MMA: %[[XE:.*]] = arith.addi %{{.*}}, %c512{{.*}} : index
// MMA: %[[XIN:.*]] = arith.cmpi ult, %[[XE]], %c576{{.*}} : index
// MMA: arith.select %[[XIN]], %[[XE]], %c0{{.*}} : index
// MMA: %[[X1:.*]] = vector.load %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// MMA-NOT: vector.load
// MMA: vector.store %[[X0]], %{{.*}} : memref<576xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// MMA-NEXT: scf.if %[[XIN]] {
// MMA: vector.store %[[X1]], %{{.*}} : memref<576xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// MMA: gpu.barrier
// MMA: %[[E2:.*]] = arith.addi %{{.*}}, %c512{{.*}} : index
// MMA: %[[IN2:.*]] = arith.cmpi ult, %[[E2]], %c576{{.*}} : index
// MMA-NEXT: scf.if %[[IN2]] -> (f32, f32)
// MMA-NEXT: arith.extf %[[WA]] : vector<8xf16> to vector<8xf32>
// MMA-NEXT: arith.extf %[[WB]] : vector<8xf16> to vector<8xf32>
// MMA: gpu.return
func.func @partial_chunk(%x: tensor<?x576xf16>, %w: tensor<960x576xf16>)
    -> (tensor<?x9x64xf16>, tensor<?x3x64xf16>, tensor<?x3x64xf16>) {
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 9 : i64, num_kv_heads = 3 : i64, head_dim = 64 : i64}
      : tensor<?x576xf16>, tensor<960x576xf16> -> tensor<?x9x64xf16>, tensor<?x3x64xf16>, tensor<?x3x64xf16>
  return %q, %k, %v : tensor<?x9x64xf16>, tensor<?x3x64xf16>, tensor<?x3x64xf16>
}
