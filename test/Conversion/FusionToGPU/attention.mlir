// RUN: fusion-opt %s -split-input-file --convert-fusion-to-gpu | FileCheck %s

// Split-KV GQA decode attention (AttentionEmitter.cpp). Llama-3-8B shapes:
// Hq/Hkv = 32/8 (G = 4), D = 128, f16, page size 16.

// The launch: grid (num_splits, Hkv, batch), 256 threads, the ABI order
// inputs / output / workspace (partials, statistics, zero-initialised
// counters) / scalars, and the schedule.
// CHECK-LABEL: func.func @llama
// CHECK:       fusion.kernel @attn_g4
// CHECK-SAME:    launch = #fusion.launch<entry = "attn_g4", grid = [num_splits, 8, batch], block = 256, smem = 0, static_smem = 33284, params = [
// CHECK-SAME:    #fusion.param<kind = input, role = "query", dtype = f16, shape = [batch, 32, 128]>
// CHECK-SAME:    #fusion.param<kind = input, role = "key_cache", dtype = f16, shape = [num_pages, 16, 8, 128]>
// CHECK-SAME:    #fusion.param<kind = input, role = "value_cache", dtype = f16, shape = [num_pages, 16, 8, 128]>
// CHECK-SAME:    #fusion.param<kind = input, role = "block_table", dtype = i32, shape = [batch, max_pages]>
// CHECK-SAME:    #fusion.param<kind = input, role = "seq_lens", dtype = i32, shape = [batch]>
// CHECK-SAME:    #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 32, 128]>
// CHECK-SAME:    #fusion.param<kind = workspace, role = "partial_out", dtype = f32, shape = [batch, 32, 64, 128]>
// CHECK-SAME:    #fusion.param<kind = workspace, role = "partial_stats", dtype = f32, shape = [batch, 32, 64, 2]>
// CHECK-SAME:    #fusion.param<kind = workspace, role = "split_counters", dtype = i32, shape = [batch, 8], zero_init = true>
// CHECK-SAME:    #fusion.param<kind = scalar, role = "batch", dtype = i32>, #fusion.param<kind = scalar, role = "max_pages", dtype = i32>, #fusion.param<kind = scalar, role = "num_splits", dtype = i32>]
// The tensor-core variant has no cluster combine: its exchange buffer
// (16640 bytes) would take the CTA (ring 104448 + 8324 static) from 2 to 1
// per SM.
// CHECK-SAME:    entry = "attn_g4_mma", {{.*}} smem = 104448, static_smem = 8324, schedule = #fusion.split_kv_attention_mma_schedule<{{.*}} cluster_splits = 0>
// CHECK-SAME:    schedule = #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 4,
// CHECK-SAME:    head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 64,
// CHECK-SAME:    target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>, strategy = #fusion.strategy<decode>

// The kernel: bare flat buffers, then the i32 scalars; aligned shared memory
// for the cross-warp merge, the last-CTA flag and the cluster combine's
// exchange buffer (8 splits x 4 heads x (128 + 2) floats).
// CHECK:       gpu.module @fusion_kernels
// CHECK:       gpu.func @attn_g4(%[[Q:.*]]: memref<1099511627776xf16>, %[[KC:.*]]: memref<1099511627776xf16>, %[[VC:.*]]: memref<1099511627776xf16>, %[[BT:.*]]: memref<1099511627776xi32>, %[[SL:.*]]: memref<1099511627776xi32>, %[[O:.*]]: memref<1099511627776xf16>, %[[PO:.*]]: memref<1099511627776xf32>, %[[PS:.*]]: memref<1099511627776xf32>, %[[CNT:.*]]: memref<1099511627776xi32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// CHECK-SAME:    workgroup(%[[SMEM:.*]] : memref<4160xf32, #gpu.address_space<workgroup>> {llvm.align = 32 : i64}, %[[FLAG:.*]] : memref<1xi32, #gpu.address_space<workgroup>>{{.*}}, %[[EXCH:.*]] : memref<4160xf32, #gpu.address_space<workgroup>> {llvm.align = 32 : i64})
// CHECK-SAME:    kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// Before griddepcontrol.wait (step inputs no kernel writes): the split's
// tokens from seq_lens and, where it has any, the block-table pages of the
// first iteration's K/V entries (4 per row group); then, where the split has
// at most one token per thread and fits the grid's share of the 8 MiB
// prefetch budget, thread t asks L2 for the K and V entries of token start +
// t (128 x 2 = 256 bytes each).
// The first phase of the cluster barrier comes first: this CTA has started.
// CHECK-NEXT:  nvvm.griddepcontrol  launch_dependents
// CHECK-NEXT:  nvvm.cluster.arrive.relaxed
// CHECK:       %[[SETUP:.*]]:6 = scf.if %{{.*}} -> (i32, i32, index, index, index, index) {
// CHECK:         memref.load %[[SL]]
// CHECK:         scf.if %{{.*}} -> (index, index, index, index) {
// CHECK-COUNT-4:   memref.load %[[BT]]
// CHECK:       arith.cmpi ule
// CHECK:       memref.load %[[BT]]
// CHECK:       memref.extract_aligned_pointer_as_index %[[KC]]
// CHECK:       nvvm.cp.async.bulk.prefetch %{{.*}}, %c256_i32 : <1>
// CHECK:       memref.extract_aligned_pointer_as_index %[[VC]]
// CHECK:       nvvm.cp.async.bulk.prefetch %{{.*}}, %c256_i32_{{[0-9]+}} : <1>
// CHECK:       llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// CHECK-NOT:   memref.load %[[SL]]
// The first iteration, peeled (where the split has one): its K/V loads
// (16-byte vectors, at the offsets from before the wait) come before the
// query's, so both are in flight at once; the query is loaded once, one
// 16-byte vector per head of the group.
// CHECK:       scf.if %{{.*}} -> (f32,
// CHECK-NOT:     memref.load %[[BT]]
// CHECK:         vector.load %[[KC]][%[[SETUP]]#2] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK-NEXT:    vector.load %[[VC]][%[[SETUP]]#2] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK-COUNT-3: vector.load %[[VC]]
// CHECK-NOT:     vector.load %[[KC]]
// CHECK-COUNT-4: vector.load %[[Q]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK:         llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// The token loop from the second iteration: 64-bit page addressing from the
// block table, then all K/V loads of the iteration before the arithmetic.
// CHECK:       scf.for %{{.*}} = %c1{{.*}} to
// CHECK-NOT:     vector.load %[[Q]]
// CHECK:         %[[PAGE:.*]] = memref.load %[[BT]]
// CHECK:         %[[PAGE64:.*]] = arith.index_cast %[[PAGE]] : i32 to index
// CHECK:         arith.muli %[[PAGE64]], %{{.*}} : index
// CHECK:         vector.load %[[KC]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK-NEXT:    vector.load %[[VC]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK-COUNT-3: vector.load %[[VC]]
// Row-group sums of q.k by butterfly shuffles (16 lanes per row: 8, 4, 2, 1).
// CHECK:         gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// Online softmax in the log2 domain with the NVVM ex2 intrinsic.
// CHECK:         llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK:         scf.yield
// Cross-warp merge through shared memory.
// CHECK:       vector.store %{{.*}}, %[[SMEM]]
// CHECK:       gpu.barrier
// Single split: normalised output written directly, in f16.
// CHECK:       scf.if
// CHECK:         arith.truncf %{{.*}} : vector<8xf32> to vector<8xf16>
// CHECK:         vector.store %{{.*}}, %[[O]]
// CHECK:       } else {
// Several splits launched as one cluster of num_splits (<= 8) CTAs: wait for
// every CTA to have started, store the unnormalised fp32 partial and (m, l)
// into CTA 0's exchange buffer, arrive (release) after the stores; CTA 0
// (split 0) waits (acquire) and combines from its own shared memory.
// CHECK:         arith.cmpi sle, %{{.*}}, %c8_i32 : i32
// CHECK:         nvvm.read.ptx.sreg.nclusterid.x : i32
// CHECK:         nvvm.read.ptx.sreg.cluster.nctarank : i32
// CHECK:         scf.if
// CHECK-NEXT:      nvvm.cluster.wait
// CHECK:           %[[REMOTE:.*]] = nvvm.mapa %{{.*}}, %c0_i32{{.*}} : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK:           scf.if
// CHECK:             llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf32>, !llvm.ptr<7>
// CHECK:             scf.if
// CHECK-COUNT-2:       llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<7>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:      nvvm.cluster.arrive
// CHECK-NEXT:      arith.constant 0 : index
// CHECK-NEXT:      arith.cmpi eq, %block_id_x, %{{.*}} : index
// CHECK-NEXT:      scf.if
// CHECK-NEXT:        nvvm.cluster.wait
// CHECK:             scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c8
// CHECK-COUNT-8:       vector.load %[[EXCH]]
// CHECK:             arith.truncf %{{.*}} : vector<8xf32> to vector<8xf16>
// CHECK:             vector.store %{{.*}}, %[[O]]
// CHECK:         } else {
// Otherwise: unnormalised fp32 partial and (m, l), fence, barrier, the
// arrival counter, and the last CTA combines and resets the counter.
// CHECK:         vector.store %{{.*}}, %[[PO]][%{{.*}}] {alignment = 32 : i64} : memref<1099511627776xf32>, vector<8xf32>
// CHECK:         memref.store %{{.*}}, %[[PS]]
// CHECK:         nvvm.memory.barrier <gpu>
// CHECK-NEXT:    gpu.barrier
// CHECK:         memref.atomic_rmw addi %{{.*}}, %[[CNT]][%{{.*}}] : (i32, memref<1099511627776xi32>) -> i32
// CHECK:         memref.store %{{.*}}, %[[FLAG]]
// CHECK:         memref.atomic_rmw assign %{{.*}}, %[[CNT]][%{{.*}}] : (i32, memref<1099511627776xi32>) -> i32
// CHECK:         gpu.barrier
// CHECK:         memref.load %[[FLAG]]
// CHECK:         nvvm.memory.barrier <gpu>
// The combine: one pass over rounds of 8 splits, every load of a round
// (m, l and the 8 partial elements of each split) before the first use.
// CHECK:         scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c8
// CHECK-COUNT-8:   vector.load %[[PO]]
// CHECK-NOT:       llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK:           llvm.intr.maxnum
// CHECK-COUNT-9:   llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK:           scf.yield
// CHECK:         arith.truncf %{{.*}} : vector<8xf32> to vector<8xf16>
// CHECK:         vector.store %{{.*}}, %[[O]]
// CHECK:       gpu.return
// The tensor-core variant: each warp's loop carries the cache page of the
// next tile it issues (AttentionMma.cpp): the iteration waits for its tile,
// issues the copies of the tile 2 stages ahead from the carried page (no
// block-table load before them), then loads the page of the tile after.
// CHECK:       gpu.func @attn_g4_mma(%{{.*}}: memref<1099511627776xf16>, %{{.*}}: memref<1099511627776xf16>, %{{.*}}: memref<1099511627776xf16>, %[[MBT:[^:]*]]: memref<1099511627776xi32>
// CHECK:         memref.load %[[MBT]]
// CHECK:         scf.for {{.*}} -> ({{.*}}f32, i64)
// CHECK-NEXT:      nvvm.cp.async.wait.group 1
// CHECK-NOT:       memref.load %[[MBT]]
// CHECK:           nvvm.cp.async.shared.global
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           memref.load %[[MBT]]
// CHECK:           nvvm.ldmatrix
// CHECK:           scf.yield {{.*}} : {{.*}}f32, i64
func.func @llama(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x128xf16> {
  %o = fusion.kernel @attn_g4 (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> attributes {strategy = #fusion.strategy<decode>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}

// -----

// G = 7 (28/4), bf16, D = 128: one CTA holds all seven heads of a group
// (2 tokens per row group per iteration); bf16 loads and stores.
// CHECK-LABEL: func.func @group7_bf16
// CHECK:       grid = [num_splits, 4, batch]
// CHECK-SAME:    #fusion.param<kind = workspace, role = "split_counters", dtype = i32, shape = [batch, 4], zero_init = true>
// CHECK-SAME:    schedule = #fusion.split_kv_attention_schedule<threads = 128, max_splits = 64, heads_per_cta = 7,
// CHECK-SAME:    kv_unroll = 2,
// CHECK:       gpu.func @attn_g7
// CHECK-COUNT-7: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK:       scf.for
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK:       arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK:       gpu.shuffle  xor
// CHECK:       arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
func.func @group7_bf16(%q: tensor<?x28x128xbf16>, %kc: memref<?x16x4x128xbf16>, %vc: memref<?x16x4x128xbf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x28x128xbf16> {
  %o = fusion.kernel @attn_g7 (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x28x128xbf16>, memref<?x16x4x128xbf16>, memref<?x16x4x128xbf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x28x128xbf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x28x128xbf16>, memref<?x16x4x128xbf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x28x128xbf16>
  }
  return %o : tensor<?x28x128xbf16>
}

// -----

// D = 64, G = 8 (32/4): 8 lanes per row, 4 rows per warp; the row groups of a
// warp are merged with shuffles at distances 8 and 16.
// CHECK-LABEL: func.func @d64
// CHECK:       #fusion.split_kv_attention_schedule<threads = 128, max_splits = 64, heads_per_cta = 8, head_blocks = 1,
// CHECK-SAME:    vector_width = 8, lanes_per_row = 8, kv_unroll = 2,
// CHECK:       gpu.func @attn_d64
// CHECK:       scf.for
// CHECK:       gpu.shuffle  xor %{{.*}}, %c4_i32{{[_0-9]*}},
// CHECK:       gpu.shuffle  xor %{{.*}}, %c2_i32{{[_0-9]*}},
// CHECK:       gpu.shuffle  xor %{{.*}}, %c1_i32{{[_0-9]*}},
// CHECK:       scf.yield
// CHECK:       gpu.shuffle  xor %{{.*}}, %c8_i32{{[_0-9]*}},
// CHECK:       gpu.shuffle  xor %{{.*}}, %c16_i32{{[_0-9]*}},
func.func @d64(%q: tensor<?x32x64xf16>, %kc: memref<?x16x4x64xf16>, %vc: memref<?x16x4x64xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x64xf16> {
  %o = fusion.kernel @attn_d64 (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x64xf16>, memref<?x16x4x64xf16>, memref<?x16x4x64xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x64xf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x64xf16>, memref<?x16x4x64xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x64xf16>
  }
  return %o : tensor<?x32x64xf16>
}

// -----

// D = 80 (10 vectors of 8: 16 lanes per row, 6 idle lanes that re-read the
// last vector with a zero query), page size 12 (not a power of two), and an
// explicit scale.
// CHECK-LABEL: func.func @d80
// CHECK:       heads_per_cta = 3, head_blocks = 1, vector_width = 8, lanes_per_row = 16,
// CHECK:       gpu.func @attn_d80
// CHECK:       %[[LANE:.*]] = arith.remui %{{.*}}, %c16 : index
// CHECK:       arith.minui %[[LANE]], %c9 : index
// CHECK:       arith.cmpi ult, %[[LANE]], %c10 : index
// CHECK:       scf.for
// CHECK:       arith.divui %{{.*}}, %c12_i32{{[_0-9]*}} : i32
// CHECK:       arith.remui %{{.*}}, %c12_i32{{[_0-9]*}} : i32
func.func @d80(%q: tensor<?x12x80xf16>, %kc: memref<?x12x4x80xf16>, %vc: memref<?x12x4x80xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x12x80xf16> {
  %o = fusion.kernel @attn_d80 (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x12x80xf16>, memref<?x12x4x80xf16>, memref<?x12x4x80xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x12x80xf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e] {scale = 0.125 : f64}
        : tensor<?x12x80xf16>, memref<?x12x4x80xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x12x80xf16>
  }
  return %o : tensor<?x12x80xf16>
}

// -----

// G = 16 (32/2): two blocks of 8 heads per KV head (grid y = Hkv * 2), one
// arrival counter per (sequence, kv head, head block).
// CHECK-LABEL: func.func @group16
// CHECK:       grid = [num_splits, 4, batch]
// CHECK-SAME:    role = "split_counters", dtype = i32, shape = [batch, 4], zero_init = true
// CHECK-SAME:    heads_per_cta = 8, head_blocks = 2,
func.func @group16(%q: tensor<?x32x128xf16>, %kc: memref<?x16x2x128xf16>, %vc: memref<?x16x2x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x128xf16> {
  %o = fusion.kernel @attn_g16 (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x128xf16>, memref<?x16x2x128xf16>, memref<?x16x2x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x128xf16>, memref<?x16x2x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}

// -----

// A kernel that carries a schedule is compiled with its choices and keeps it:
// 2 of the 4 heads of a group per CTA (head_blocks 4 / 2 = 2, grid y 8 x 2),
// 128 threads in row groups of 16 lanes (128 / 8 vectors of D = 128), 2
// tokens each: chunks of 128 / 16 x 2 = 16 tokens; max_splits 16 sizes the
// workspaces; cluster_splits 0: no cluster combine (no exchange buffer, no
// cluster barrier).
// CHECK-LABEL: func.func @carried
// CHECK:       grid = [num_splits, 16, batch], block = 128,
// CHECK-SAME:    role = "partial_out", dtype = f32, shape = [batch, 32, 16, 128]
// CHECK-SAME:    schedule = #fusion.split_kv_attention_schedule<threads = 128, max_splits = 16, heads_per_cta = 2, head_blocks = 2, vector_width = 8, lanes_per_row = 16, kv_unroll = 2, chunk_multiple = 16, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 0>
// CHECK:       gpu.func @attn_carried
// CHECK-NOT:     nvvm.cluster
// CHECK-NOT:     nvvm.mapa
// CHECK:         gpu.return
func.func @carried(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x128xf16> {
  %o = fusion.kernel @attn_carried (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> attributes {schedule = #fusion.split_kv_attention_schedule<threads = 128, max_splits = 16, heads_per_cta = 2, head_blocks = 2, vector_width = 8, lanes_per_row = 16, kv_unroll = 2, chunk_multiple = 16, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 0>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}
