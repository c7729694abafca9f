//===- Passes.td - fusion conversion passes ----------------*- tablegen -*-===//

#ifndef FUSION_CONVERSION_PASSES
#define FUSION_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertFusionToGPUPass
    : Pass<"convert-fusion-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Emit one gpu.func per fusion.kernel and record its launch";
  let description = [{
    Builds the body of every `fusion.kernel` as a `gpu.func` (a `gpu.kernel`
    with a known block size) in the module's `gpu.module @fusion_kernels`
    (created if missing; the module gets `gpu.container_module`). One emitter
    per kernel kind, the first of the registry in
    lib/Conversion/FusionToGPU/KernelEmitter.h that matches:

    - a kernel containing an op that has no GPU lowering yet (`linear`): an
      error at each such op (`'fusion.linear' op has no GPU lowering yet`),
      and the pass fails;
    - a kernel containing `fusion.qkv_proj`: the projection emitter (the
      fused front half `[embedding ->] [rmsnorm|layernorm] -> qkv_proj ->
      [rope] -> [kv_append]`, or the projection alone; with an embedding the
      norm gathers its rows from the table itself, ids clamped as below);
    - a kernel containing `fusion.decode_attention`: the split-KV attention
      emitter;
    - one `rmsnorm` or `layernorm` alone: the norm emitter;
    - one `embedding`, `argmax` or `silu_mul` alone: the embedding (a row
      gather in 16-byte vectors, ids clamped to the table), argmax (one CTA
      per row) and silu_mul emitters;
    - anything else (`rope`, `kv_append`, `rope -> kv_append`): the head
      emitter.

    Identical kernels (equal attributes but the name, equivalent bodies by
    `OperationEquivalence`) share one `gpu.func`.

    The `fusion.kernel` ops stay in the host function: each gets its chosen
    schedule as its typed `schedule` (a `#fusion.*_schedule`; a kernel that
    already carries one keeps it, and it must be the one chosen: the
    attention emitter takes its `threads`, `max_splits`, `kv_unroll` and
    `heads_per_cta` from it) and how to launch it as its typed `launch`
    attribute (`#fusion.launch`, verified
    against the contract header's roles, dimension names and limits):

    ```mlir
    launch = #fusion.launch<entry = "layer_k0_fused", grid = [48, batch, 1],
        block = 256, smem = 0, static_smem = 0,
        params = [#fusion.param<kind = input, role = "input", dtype = f16,
                                shape = [batch, 4096]>, ...],
        programmatic_dependent_launch = true>
    ```

    An emitter may add batch-specialised gpu.funcs with the same parameters:
    they are listed, by strictly ascending `min_batch` (>= 2), as
    `variants = [#fusion.variant<min_batch = 2, entry = ..., grid = [...],
    block = ..., smem = ..., static_smem = ..., schedule = #fusion...>]`, and a
    runtime launches the last one whose `min_batch` <= batch instead of
    `entry`. Two different kernels with the same name are an error.

    The kernel ABI (one bare device pointer per buffer, then i32 scalars) is
    described in docs/abi.md.
  }];
  let options = [
    Option<"smCount", "sm-count", "int64_t", /*default=*/"132",
           "Streaming multiprocessors the grid should fill at batch 1 "
           "(H100/H200 SXM: 132)">,
    Option<"targetSM", "target-sm", "int64_t", /*default=*/"90",
           "Compute capability x 10 the kernels may use: >= 80 adds the "
           "tensor-core (mma.sync) variants for larger batches, >= 90 "
           "programmatic dependent launch (griddepcontrol) and the attention "
           "combine through thread-block clusters">,
    Option<"archSpecific", "arch-specific", "bool", /*default=*/"false",
           "The PTX targets the architecture-specific features of the chip "
           "(sm_90a, with target-sm 90): the GEMM-shaped projection "
           "variants multiply by warpgroup MMA (wgmma.mma_async)">,
    Option<"warpSpecializedGemm", "warp-specialized-gemm", "bool",
           /*default=*/"false",
           "With arch-specific: the GEMM-shaped variants of an RMSNorm over "
           "TMA-readable rows are warp-specialised (producer, "
           "fold and consumer warps; docs/gemm-warp-specialized-plan.md). "
           "Off by default: on the H200 it is not yet faster "
           "(docs/performance.md entry 44)">,
    Option<"clusterKSplit", "cluster-k-split", "bool", /*default=*/"true",
           "With target-sm >= 90: the GEMM-shaped projection variants with "
           "k split 2 to 8 combine their split-K "
           "partials through a thread-block cluster of the row tile's CTAs "
           "(distributed shared memory, no workspace round trip) when "
           "launched in one (cluster_k_split, docs/abi.md section 3.4). On "
           "by default: 1-20 us per 8B layer-step faster on the H200 from "
           "batch 4 (docs/performance.md entry 47)">,
    Option<"attentionCtaRing", "attention-cta-ring", "bool",
           /*default=*/"false",
           "With target-sm >= 90 and head_dim a multiple of 64: the "
           "tensor-core attention variant streams its K/V tiles through one "
           "CTA-wide ring (attention-ring-stages) that a producer lane fills by TMA "
           "boxes of the caches' tensor maps, consumed by 4 warps under "
           "mbarriers (Kernels/AttentionMma.h), instead of a cp.async ring "
           "per warp">,
    Option<"attentionRingStages", "attention-ring-stages", "int64_t",
           /*default=*/"kDefaultAttentionRingStages",
           "The CTA-wide ring's stages, a multiple of 4 from 4 to 24 (default "
           "16: 1 CTA per SM at head_dim 128; 8 fit 2): fewer stages, more "
           "resident CTAs and consumer warps per SM, and the split policy's "
           "target_ctas follows. Checked always, used only where the ring "
           "is (attention-cta-ring)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // FUSION_CONVERSION_PASSES
