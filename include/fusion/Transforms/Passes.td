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
      norm with gate/up), and so does `rmsnorm`/`layernorm` -> `linear` ->
      `argmax` (the final norm, the LM head and greedy sampling: each CTA
      reduces its logits, the last one to finish writes the ids). Partial
      chains form the longest legal prefix group (e.g. `layernorm ->
      qkv_proj`); a lone op is its own kernel (o_proj, down_proj, an
      `argmax` of logits no linear of its block computes, an `embedding`
      that rule 7 does not fold). The token embedding that layer 0's norm
      normalises joins that norm's kernel (rule 7), so a whole-model step
      starts with layer 0's front half.

    Legality rules (checked in this order when an op would join a group):
    1. Only producer -> consumer edges of the two chains are fused:
       norm -> qkv_proj or linear (the normalised activations), qkv_proj ->
       rope (query and key), rope/qkv_proj -> kv_append (key and value),
       linear -> silu_mul (the packed [gate | up] rows), linear -> argmax
       (the logits). `decode_attention` and `embedding` always are kernels
       of their own (but see rules 6 and 7).
    2. A fused intermediate that is also used outside the group: a
       normalised activation (the `result` of a norm) is recomputed, i.e. the
       group gets its own copy of the norm and the original stays, as its own
       kernel, for the outside users; any other such value cuts the group
       before its first consumer inside it (that value is then a real kernel
       output), and the rest is grouped again. The exception: logits that
       the group's `argmax` reads and others use too (a function result)
       stay in the group as a kernel result, since the kernel writes them
       anyway.
    3. The KV-cache write is never moved: ops keep their order, and the
       kernel is placed at its last op, so a read of the cache that follows
       the write stays after it.
    4. No cycles: an op joins only if every operand it takes from outside
       the group is defined before the group's first op.
    5. An op with side effects that is not a fusion op, or any non-fusion
       op between two members, ends the group.
    6. Under `decode`, before grouping, an output projection
       `linear(decode_attention(...), W_o)` whose only user is the `input`
       of an `rmsnorm` with a `residual` (whose normalised result feeds
       one `linear`), the four ops one after the other with their other
       operands defined before them (so that rules 1, 4 and 5 group both
       halves), becomes
       `sum_partials(linear_partials(attention, W_o))` with one block of
       heads per KV group, when the query heads per KV head are at most 8
       and W_o has at most `o-proj-partials-max-bytes` bytes (default 1
       MiB: SmolLM2-135M's 648 KiB, not TinyLlama's 8 MiB; 0: never). For
       SmolLM2-135M on the H200 (docs/performance.md entry 33) it makes the
       decode step 6% faster at batch 3, 5% at batch 16 and 0.5% slower at
       batch 1.
       Two more chain edges then apply: `decode_attention ->
       linear_partials` (the attention kernel also projects its heads, one
       fp32 partial per KV group) and `sum_partials -> rmsnorm` (the next
       kernel sums the partials in its norm's prologue), which removes the
       o_proj kernel of every layer of a small model. Only the fp32 order
       of o_proj's sum changes (`fusion.linear` leaves it to the kernel).
    7. Under `decode`, an `embedding` whose result is the `input` (not the
       residual) of the `rmsnorm` or `layernorm` right after it, whose
       normalised result is the input of the `qkv_proj` or `linear` right
       after the norm (a norm that heads a projection chain), the other
       operands of both defined before the embedding, joins the norm's
       kernel as its first op: one more chain edge, `embedding -> norm`,
       which removes the lone embedding kernel of a whole-model step
       (layer 0's front half gathers its token rows from the table itself).
       Where the embedding's rows have other users (layer 0's
       post-attention `rmsnorm` takes them as its `residual`), rule 2 does
       not cut the group: the rows become a kernel result, which the kernel
       writes (a bit copy, as the lone kernel's), and those users read it.
       Under `none` the embedding stays a kernel of its own.

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
    Option<"oProjPartialsMaxBytes", "o-proj-partials-max-bytes", "int64_t",
           /*default=*/"1048576",
           "Rule 6: the largest o_proj weight, in bytes, that the attention "
           "kernel projects itself under 'decode' (0: never)">,
  ];
  let dependentDialects = ["::mlir::fusion::FusionDialect"];
}

#endif // FUSION_TRANSFORMS_PASSES
