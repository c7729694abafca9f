//===- FusionSchedules.td - typed kernel schedules ---------*- tablegen -*-===//
//
// The schedule a fusion.kernel (or a #fusion.variant) was compiled with: one
// attribute per kernel kind, written by --convert-fusion-to-gpu from the
// choosers of lib/Conversion/FusionToGPU/Schedule/ and exported to the
// manifest's `schedule` objects (docs/abi.md section 3.2).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_SCHEDULES
#define FUSION_SCHEDULES

include "fusion/Dialect/Fusion/IR/FusionDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Fusion_ScheduleAttrInterface : AttrInterface<"ScheduleAttrInterface"> {
  let cppNamespace = "::mlir::fusion";
  let description = [{
    A kernel schedule: the typed `schedule` of a fusion.kernel or of a
    #fusion.variant, one attribute per kernel kind; each has `threads`.
  }];
  let methods = [
    InterfaceMethod<"The kind as the manifest names it (`projection`, ...).",
                    "::llvm::StringRef", "getKindName">,
    InterfaceMethod<"Threads of the kernel's 1-D block.", "int64_t",
                    "getThreads">,
  ];
}

class Fusion_ScheduleAttr<string name, string attrMnemonic>
    : AttrDef<Fusion_Dialect, name,
              [DeclareAttrInterfaceMethods<Fusion_ScheduleAttrInterface>]> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Fusion_ProjectionScheduleAttr
    : Fusion_ScheduleAttr<"ProjectionSchedule", "projection_schedule"> {
  let summary = "schedule of the CUDA-core projection kernel";
  let description = [{
    Kind `projection`: `warps` warps per CTA (`threads` = 32 x `warps`), each
    computing `pairs_per_warp` pairs of `rows_per_warp` output rows per grid
    step over `grid` CTAs; activations read in vectors of `vector_width`
    elements, `k_unroll` chunks per loop step, `batch_tile` tokens normalised
    into shared memory per tile; `min_ctas_per_sm` is the `.minnctapersm`
    hint; `preload_chunks` (0 or more) 256-element chunks of a pair of rows
    that each lane holds in registers (only with one-token tiles): the warp's
    first pair loaded before `griddepcontrol.wait`, each next one while the
    previous one is reduced.

    ```mlir
    #fusion.projection_schedule<threads = 256, warps = 8, grid = 384,
        rows_per_warp = 2, pairs_per_warp = 1, vector_width = 8, k_unroll = 2,
        batch_tile = 1, min_ctas_per_sm = 3, preload_chunks = 0>
    ```
  }];
  let parameters = (ins "int64_t":$threads, "int64_t":$warps, "int64_t":$grid,
                        "int64_t":$rows_per_warp, "int64_t":$pairs_per_warp,
                        "int64_t":$vector_width, "int64_t":$k_unroll,
                        "int64_t":$batch_tile, "int64_t":$min_ctas_per_sm,
                        "int64_t":$preload_chunks);
}

def Fusion_ProjectionMmaScheduleAttr
    : Fusion_ScheduleAttr<"ProjectionMmaSchedule", "projection_mma_schedule"> {
  let summary = "schedule of the tensor-core projection variant";
  let description = [{
    Kind `projection_mma` (the schedule of a #fusion.variant, launched from
    its `min_batch`): `warps` warps per CTA (`threads` = 32 x `warps`) over
    `grid` CTAs, each warp computing blocks of `rows_per_warp` rows for
    tiles of `tile_tokens` tokens (a multiple of 8), reading `k_vectors`
    16-byte weight vectors per lane and loop step; `k_split` warps (a
    divisor of `warps`) share one row block, each taking 1/`k_split` of the
    reduction.

    ```mlir
    #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 132,
        rows_per_warp = 16, tile_tokens = 24, k_vectors = 8, k_split = 2>
    ```
  }];
  let parameters = (ins "int64_t":$threads, "int64_t":$warps, "int64_t":$grid,
                        "int64_t":$rows_per_warp, "int64_t":$tile_tokens,
                        "int64_t":$k_vectors, "int64_t":$k_split);
}

def Fusion_ProjectionGemmScheduleAttr
    : Fusion_ScheduleAttr<"ProjectionGemmSchedule",
                          "projection_gemm_schedule"> {
  let summary = "schedule of the GEMM-shaped projection variant";
  let description = [{
    Kind `projection_gemm` (the schedule of a #fusion.variant, launched from
    its `min_batch`): `warps` warps per CTA (`threads` = 32 x `warps`), each
    computing 16 of the CTA's `tile_rows` weight rows (whole heads; `warps`
    = `tile_rows` / 16) for a tile of `tile_tokens` tokens (a multiple of
    16); `k_split` CTAs share a row tile, each taking 1/`k_split` of the
    reduction in pipeline stages of `stage_k` elements (a multiple of 16)
    through a ring of `stages` shared-memory stages, so `grid` is the row
    tiles times `k_split`; `min_ctas_per_sm` is the `.minnctapersm` hint.
    `warpgroup_mma` (sm_90a; printed only when true): each group of four
    warps multiplies its 64 rows by `wgmma.mma_async` (`tile_rows` then a
    multiple of 64, `stage_k` 64) instead of `mma.sync`.
    `warp_specialized` (with `warpgroup_mma`; printed only when true): the
    `warps` warps only multiply; one producer warp issues each stage's TMA
    copies (the weights, and the token and residual rows through the
    kernel's `input_map` / `residual_map`) and two fold warps run the norm's
    pass, synchronised by mbarriers with no CTA barrier in the loop, so
    `threads` = 32 x (`warps` + 3) (docs/gemm-warp-specialized-plan.md).
    `cluster_k_split` (sm_90; printed only when true; `k_split` in [2, 8],
    dividing `tile_rows` / 2): launched with the
    `k_split` CTAs of a row tile as one thread-block cluster (docs/abi.md
    section 3.4), the CTAs combine their partial tiles through distributed
    shared memory instead of the workspaces; the variant's dynamic shared
    memory then holds the exchange (contract::clusterExchangeBytes). Launched
    without such a cluster it takes the workspaces, bit-identically.

    ```mlir
    #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192,
        tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64,
        stages = 3, min_ctas_per_sm = 2, warpgroup_mma = true>
    ```
  }];
  let parameters = (ins "int64_t":$threads, "int64_t":$warps, "int64_t":$grid,
                        "int64_t":$tile_rows, "int64_t":$tile_tokens,
                        "int64_t":$k_split, "int64_t":$stage_k,
                        "int64_t":$stages, "int64_t":$min_ctas_per_sm,
                        DefaultValuedParameter<"bool", "false">:$warpgroup_mma,
                        DefaultValuedParameter<"bool", "false">:$warp_specialized,
                        DefaultValuedParameter<"bool", "false">:$cluster_k_split);
}

def Fusion_SplitKvAttentionScheduleAttr
    : Fusion_ScheduleAttr<"SplitKvAttentionSchedule",
                          "split_kv_attention_schedule"> {
  let summary = "schedule of the split-KV decode attention kernel";
  let description = [{
    Kind `split_kv_attention`: `threads` threads per CTA, each CTA holding
    `heads_per_cta` query heads of one KV head (`head_blocks` CTAs per KV
    head) and one split of the sequence; row groups of `lanes_per_row` lanes
    (a power of two up to 32) read a head in vectors of `vector_width`
    elements, `kv_unroll` tokens per iteration; split chunks are multiples of
    `chunk_multiple` tokens. `max_splits`, `target_ctas` and
    `min_chunk_tokens` parameterise the launcher's num_splits policy
    (docs/abi.md section 3.4). `cluster_splits` (0, or 2 to 8) is the most
    splits the kernel combines through distributed shared memory when they
    are launched as one thread-block cluster (the launch rule: docs/abi.md
    section 3.4); 0: never.

    A kernel that carries this schedule before --convert-fusion-to-gpu is
    compiled with its `threads`, `max_splits`, `kv_unroll`, `heads_per_cta`
    and `cluster_splits`; the other members must be those these imply.

    ```mlir
    #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64,
        heads_per_cta = 4, head_blocks = 1, vector_width = 8,
        lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 64,
        target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>
    ```
  }];
  let parameters = (ins "int64_t":$threads, "int64_t":$max_splits,
                        "int64_t":$heads_per_cta, "int64_t":$head_blocks,
                        "int64_t":$vector_width, "int64_t":$lanes_per_row,
                        "int64_t":$kv_unroll, "int64_t":$chunk_multiple,
                        "int64_t":$target_ctas, "int64_t":$min_chunk_tokens,
                        "int64_t":$cluster_splits);
}

def Fusion_SplitKvAttentionMmaScheduleAttr
    : Fusion_ScheduleAttr<"SplitKvAttentionMmaSchedule",
                          "split_kv_attention_mma_schedule"> {
  let summary = "schedule of the tensor-core split-KV attention variant";
  let description = [{
    Kind `split_kv_attention_mma` (the schedule of a #fusion.variant of a
    split-KV attention kernel): `threads` / 32 warps per CTA, each streaming
    every warp-th 16-token tile of its split through its own `stages`-deep
    cp.async ring and running Q K^T and P V on mma.sync; the CTA's heads,
    head blocks, workspaces, num_splits policy (`max_splits`,
    `target_ctas`, `min_chunk_tokens`) and `cluster_splits` are those of the
    kernel it varies; split chunks are multiples of `chunk_multiple` tokens.
    `cta_ring` (sm_90; printed only when true): the last warp is a producer
    that fills one CTA-wide ring of `stages` tiles by TMA boxes of the
    kernel's `key_cache_map` and `value_cache_map` and the other `threads` /
    32 - 1 warps take every tile of theirs from it under mbarriers (`stages`
    a multiple of those warps, so that each slot has one consumer;
    Kernels/AttentionMma.h).

    ```mlir
    #fusion.split_kv_attention_mma_schedule<threads = 128, max_splits = 64,
        heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 3,
        target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>
    ```
  }];
  let parameters = (ins "int64_t":$threads, "int64_t":$max_splits,
                        "int64_t":$heads_per_cta, "int64_t":$head_blocks,
                        "int64_t":$chunk_multiple, "int64_t":$stages,
                        "int64_t":$target_ctas, "int64_t":$min_chunk_tokens,
                        "int64_t":$cluster_splits,
                        DefaultValuedParameter<"bool", "false">:$cta_ring);
}

def Fusion_NormRowScheduleAttr
    : Fusion_ScheduleAttr<"NormRowSchedule", "norm_row_schedule"> {
  let summary = "schedule of the standalone norm kernel";
  let description = [{
    Kind `norm_row`: `tokens_per_cta` token rows per CTA of `threads`
    threads, read in vectors of `vector_width` elements.

    ```mlir
    #fusion.norm_row_schedule<threads = 256, vector_width = 8,
        tokens_per_cta = 1>
    ```
  }];
  let parameters = (ins "int64_t":$threads, "int64_t":$vector_width,
                        "int64_t":$tokens_per_cta);
}

def Fusion_HeadKindRope : I32EnumAttrCase<"rope", 0>;
def Fusion_HeadKindKvAppend : I32EnumAttrCase<"kv_append", 1>;
def Fusion_HeadKindRopeKvAppend : I32EnumAttrCase<"rope_kv_append", 2>;
def Fusion_HeadKind : I32EnumAttr<"HeadKind",
    "what a per-head kernel computes",
    [Fusion_HeadKindRope, Fusion_HeadKindKvAppend,
     Fusion_HeadKindRopeKvAppend]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::fusion";
}

def Fusion_HeadScheduleAttr
    : Fusion_ScheduleAttr<"HeadSchedule", "head_schedule"> {
  let summary = "schedule of the per-head RoPE / KV-append kernel";
  let description = [{
    Kind `rope`, `kv_append` or `rope_kv_append` (`kind`: what the kernel
    computes): one CTA of `threads` threads per head slot (`head_slots`
    slots over the query and key heads it rotates and the value heads it
    appends) and token, `elements_per_thread` elements of a head per thread.

    ```mlir
    #fusion.head_schedule<kind = rope, threads = 64, head_slots = 40,
        elements_per_thread = 2>
    ```
  }];
  let parameters = (ins EnumParameter<Fusion_HeadKind>:$kind,
                        "int64_t":$threads, "int64_t":$head_slots,
                        "int64_t":$elements_per_thread);
}

def Fusion_RowKindEmbedding : I32EnumAttrCase<"embedding", 0>;
def Fusion_RowKindArgmax : I32EnumAttrCase<"argmax", 1>;
def Fusion_RowKindSiluMul : I32EnumAttrCase<"silu_mul", 2>;
def Fusion_RowKind : I32EnumAttr<"RowKind",
    "what a per-token-row kernel computes",
    [Fusion_RowKindEmbedding, Fusion_RowKindArgmax, Fusion_RowKindSiluMul]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::fusion";
}

def Fusion_RowScheduleAttr
    : Fusion_ScheduleAttr<"RowSchedule", "row_schedule"> {
  let summary = "schedule of the embedding, argmax and silu_mul kernels";
  let description = [{
    Kind `embedding`, `argmax` or `silu_mul` (`kind`: what the kernel
    computes), a kernel over the rows of one token each: `chunks` CTAs of
    `threads` threads per token row (grid `[batch, chunks, 1]`), reading
    and writing vectors of `vector_width` elements (1, 2, 4 or 8: 16 bytes
    of f16/bf16 at 8), `unroll` vector loads per thread in flight per loop
    step. An argmax row is reduced by one CTA (`chunks` = 1).

    ```mlir
    #fusion.row_schedule<kind = argmax, threads = 1024, chunks = 1,
        vector_width = 8, unroll = 4>
    ```
  }];
  let parameters = (ins EnumParameter<Fusion_RowKind>:$kind,
                        "int64_t":$threads, "int64_t":$chunks,
                        "int64_t":$vector_width, "int64_t":$unroll);
}

#endif // FUSION_SCHEDULES
