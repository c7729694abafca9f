// RUN: fusion-opt %s | FileCheck %s
// RUN: fusion-opt %s | fusion-opt | FileCheck %s

// The typed kernel schedules (FusionSchedules.td) and the strategy attribute
// print as they parse; the members keep their declared order.

// CHECK-LABEL: func.func private @projection()
// CHECK-SAME:    #fusion.projection_schedule<threads = 256, warps = 8, grid = 384, rows_per_warp = 2, pairs_per_warp = 1, vector_width = 8, k_unroll = 2, batch_tile = 1, min_ctas_per_sm = 3, preload_chunks = 2>
func.func private @projection() attributes {s = #fusion.projection_schedule<threads = 256, warps = 8, grid = 384, rows_per_warp = 2, pairs_per_warp = 1, vector_width = 8, k_unroll = 2, batch_tile = 1, min_ctas_per_sm = 3, preload_chunks = 2>}

// Preloaded rows with several pairs per warp (SmolLM2's LM head).
// CHECK-LABEL: func.func private @projection_preload_pairs()
// CHECK-SAME:    #fusion.projection_schedule<threads = 256, warps = 8, grid = 264, rows_per_warp = 2, pairs_per_warp = 12, vector_width = 8, k_unroll = 2, batch_tile = 1, min_ctas_per_sm = 2, preload_chunks = 3>
func.func private @projection_preload_pairs() attributes {s = #fusion.projection_schedule<threads = 256, warps = 8, grid = 264, rows_per_warp = 2, pairs_per_warp = 12, vector_width = 8, k_unroll = 2, batch_tile = 1, min_ctas_per_sm = 2, preload_chunks = 3>}

// CHECK-LABEL: func.func private @projection_mma()
// CHECK-SAME:    #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 132, rows_per_warp = 16, tile_tokens = 24, k_vectors = 8, k_split = 2>
func.func private @projection_mma() attributes {s = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 132, rows_per_warp = 16, tile_tokens = 24, k_vectors = 8, k_split = 2>}

// CHECK-LABEL: func.func private @projection_gemm()
// CHECK-SAME:    #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2>
func.func private @projection_gemm() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2>}

// warpgroup_mma prints only when true.
// CHECK-LABEL: func.func private @projection_gemm_wgmma()
// CHECK-SAME:    #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 64, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2, warpgroup_mma = true>
func.func private @projection_gemm_wgmma() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 64, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2, warpgroup_mma = true>}

// A producer warp and two fold warps besides the 8 that multiply.
// CHECK-LABEL: func.func private @projection_gemm_warp_specialized()
// CHECK-SAME:    #fusion.projection_gemm_schedule<threads = 352, warps = 8, grid = 96, tile_rows = 128, tile_tokens = 16, k_split = 2, stage_k = 64, stages = 8, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true>
func.func private @projection_gemm_warp_specialized() attributes {s = #fusion.projection_gemm_schedule<threads = 352, warps = 8, grid = 96, tile_rows = 128, tile_tokens = 16, k_split = 2, stage_k = 64, stages = 8, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true>}

// CHECK-LABEL: func.func private @projection_gemm_cluster_k_split()
// CHECK-SAME:    #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2, cluster_k_split = true>
func.func private @projection_gemm_cluster_k_split() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2, cluster_k_split = true>}

// CHECK-LABEL: func.func private @projection_gemm_ws_cluster_k_split()
// CHECK-SAME:    #fusion.projection_gemm_schedule<threads = 352, warps = 8, grid = 96, tile_rows = 128, tile_tokens = 16, k_split = 2, stage_k = 64, stages = 8, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true, cluster_k_split = true>
func.func private @projection_gemm_ws_cluster_k_split() attributes {s = #fusion.projection_gemm_schedule<threads = 352, warps = 8, grid = 96, tile_rows = 128, tile_tokens = 16, k_split = 2, stage_k = 64, stages = 8, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true, cluster_k_split = true>}

// CHECK-LABEL: func.func private @split_kv_attention()
// CHECK-SAME:    #fusion.split_kv_attention_schedule<threads = 128, max_splits = 32, heads_per_cta = 7, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 2, chunk_multiple = 16, target_ctas = 216, min_chunk_tokens = 64, cluster_splits = 8>
func.func private @split_kv_attention() attributes {s = #fusion.split_kv_attention_schedule<threads = 128, max_splits = 32, heads_per_cta = 7, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 2, chunk_multiple = 16, target_ctas = 216, min_chunk_tokens = 64, cluster_splits = 8>}

// CHECK-LABEL: func.func private @split_kv_attention_mma()
// CHECK-SAME:    #fusion.split_kv_attention_mma_schedule<threads = 128, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 3, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>
func.func private @split_kv_attention_mma() attributes {s = #fusion.split_kv_attention_mma_schedule<threads = 128, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 3, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>}

// CHECK-LABEL: func.func private @split_kv_attention_mma_cta_ring()
// CHECK-SAME:    #fusion.split_kv_attention_mma_schedule<threads = 160, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 12, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 0, cta_ring = true>
func.func private @split_kv_attention_mma_cta_ring() attributes {s = #fusion.split_kv_attention_mma_schedule<threads = 160, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 12, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 0, cta_ring = true>}

// CHECK-LABEL: func.func private @norm_row()
// CHECK-SAME:    #fusion.norm_row_schedule<threads = 32, vector_width = 8, tokens_per_cta = 1>
func.func private @norm_row() attributes {s = #fusion.norm_row_schedule<threads = 32, vector_width = 8, tokens_per_cta = 1>}

// The head schedule's three kinds.
// CHECK-LABEL: func.func private @head()
// CHECK-SAME:    #fusion.head_schedule<kind = rope, threads = 64, head_slots = 40, elements_per_thread = 2>
// CHECK-SAME:    #fusion.head_schedule<kind = kv_append, threads = 64, head_slots = 16, elements_per_thread = 2>
// CHECK-SAME:    #fusion.head_schedule<kind = rope_kv_append, threads = 32, head_slots = 12, elements_per_thread = 2>
func.func private @head() attributes {
  a = #fusion.head_schedule<kind = rope, threads = 64, head_slots = 40, elements_per_thread = 2>,
  b = #fusion.head_schedule<kind = kv_append, threads = 64, head_slots = 16, elements_per_thread = 2>,
  c = #fusion.head_schedule<kind = rope_kv_append, threads = 32, head_slots = 12, elements_per_thread = 2>}

// The row schedule's three kinds.
// CHECK-LABEL: func.func private @row()
// CHECK-SAME:    #fusion.row_schedule<kind = embedding, threads = 256, chunks = 2, vector_width = 8, unroll = 1>
// CHECK-SAME:    #fusion.row_schedule<kind = argmax, threads = 1024, chunks = 1, vector_width = 8, unroll = 4>
// CHECK-SAME:    #fusion.row_schedule<kind = silu_mul, threads = 32, chunks = 7, vector_width = 1, unroll = 1>
func.func private @row() attributes {
  a = #fusion.row_schedule<kind = embedding, threads = 256, chunks = 2, vector_width = 8, unroll = 1>,
  b = #fusion.row_schedule<kind = argmax, threads = 1024, chunks = 1, vector_width = 8, unroll = 4>,
  c = #fusion.row_schedule<kind = silu_mul, threads = 32, chunks = 7, vector_width = 1, unroll = 1>}

// A variant's schedule, and a kernel's strategy and schedule.
// CHECK-LABEL: func.func private @variant()
// CHECK-SAME:    #fusion.variant<min_batch = 2, entry = "k_mma", grid = [8, 1, 1], block = 256, smem = 0, static_smem = 0, schedule = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 32, k_vectors = 2, k_split = 8>>
func.func private @variant() attributes {v = #fusion.variant<min_batch = 2, entry = "k_mma", grid = [8, 1, 1], block = 256, smem = 0, static_smem = 0, schedule = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 32, k_vectors = 2, k_split = 8>>}

// CHECK-LABEL: func.func @kernel
// CHECK:         fusion.kernel @k
// CHECK-SAME:      attributes {schedule = #fusion.norm_row_schedule<threads = 32, vector_width = 8, tokens_per_cta = 1>, strategy = #fusion.strategy<decode>}
func.func @kernel(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
      attributes {strategy = #fusion.strategy<decode>, schedule = #fusion.norm_row_schedule<threads = 32, vector_width = 8, tokens_per_cta = 1>} {
    %0 = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
    fusion.yield %0 : tensor<?x64xf16>
  }
  return %y : tensor<?x64xf16>
}
