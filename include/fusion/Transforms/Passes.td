//===- Passes.td - fusion transformation passes ------------*- tablegen -*-===//

#ifndef FUSION_TRANSFORMS_PASSES
#define FUSION_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FusionFormKernelsPass : Pass<"fusion-form-kernels", "::mlir::ModuleOp"> {
  let summary = "Group fusion ops into fusion.kernel regions, one per GPU kernel";
  let description = [{
    Groups the fusion ops of each function into `fusion.kernel` regions.
    Each region later becomes exactly one GPU kernel; values crossing its
    boundary become explicit operands and results (the region is isolated
    from above), so each can be compiled on its own.

    Strategies (`strategy=`):
    - `none`: every fusion op becomes its own kernel (the unfused baseline).
    - `decode` (default): the front half of a decoder layer,
      `rmsnorm`/`layernorm` -> `qkv_proj` -> `rope` -> `kv_append`, becomes
      one kernel and `decode_attention` (with its split-KV combine) the next,
      so a layer's attention is two launches. A linear layer with the norm
      before it and the SwiGLU activation after it, `rmsnorm`/`layernorm`
      -> `linear` -> `silu_mul`, becomes one kernel too (the post-attention
      norm with gate/up, the final norm with the LM head). Partial chains
      form the longest legal prefix group (e.g. `layernorm -> qkv_proj`); a
      lone op is its own kernel (o_proj, down_proj, `embedding`, `argmax`).

    Legality rules (checked in this order when an op would join a group):
    1. Only producer -> consumer edges of the two chains are fused:
       norm -> qkv_proj or linear (the normalised activations), qkv_proj ->
       rope (query and key), rope/qkv_proj -> kv_append (key and value),
       linear -> silu_mul (the packed [gate | up] rows). `decode_attention`,
       `embedding` and `argmax` always are kernels of their own.
    2. A fused intermediate that is also used outside the group: a
       normalised activation (the `result` of a norm) is recomputed, i.e. the
       group gets its own copy of the norm and the original stays, as its own
       kernel, for the outside users; any other such value cuts the group
       before its first consumer inside it (that value is then a real kernel
       output), and the rest is grouped again.
    3. The KV-cache write is never moved: ops keep their order, and the
       kernel is placed at its last op, so a read of the cache that follows
       the write stays after it.
    4. No cycles: an op joins only if every operand it takes from outside
       the group is defined before the group's first op.
    5. An op with side effects that is not a fusion op, or any non-fusion
       op between two members, ends the group.

    Running the pass twice changes nothing: ops already inside a
    `fusion.kernel` are left alone.
  }];
  let options = [
    Option<"strategy", "strategy", "::mlir::fusion::FusionStrategy",
           /*default=*/"::mlir::fusion::FusionStrategy::decode",
           "Fusion strategy: 'decode' (front half + attention) or 'none' "
           "(one kernel per op)",
           [{::llvm::cl::values(
               clEnumValN(::mlir::fusion::FusionStrategy::decode, "decode",
                          "front half + attention"),
               clEnumValN(::mlir::fusion::FusionStrategy::none, "none",
                          "one kernel per op"))}]>,
  ];
  let dependentDialects = ["::mlir::fusion::FusionDialect"];
}

#endif // FUSION_TRANSFORMS_PASSES
