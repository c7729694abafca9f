//===- FusionOps.td - fusion dialect operations ------------*- tablegen -*-===//
//
// Semantics are those of the project brief (design.md section 2.1); the CPU
// reference in runtime/ implements exactly these and is checked against
// Hugging Face transformers.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_OPS
#define FUSION_OPS

include "fusion/Dialect/Fusion/IR/FusionDialect.td"
include "fusion/Dialect/Fusion/IR/FusionAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Fusion_HalfTensor : RankedTensorOf<[F16, BF16]>;
def Fusion_I32Tensor : RankedTensorOf<[I32]>;
def Fusion_CachePages : MemRefOf<[F16, BF16]>;

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

def Fusion_RMSNormOp : Fusion_Op<"rmsnorm", [Pure]> {
  let summary = "RMSNorm, optionally with a fused residual add";
  let description = [{
    Root-mean-square layer normalisation (Zhang & Sennrich 2019; Hugging Face
    `LlamaRMSNorm`). For each row of `input` (`[B, H]`):

    `y = cast((x32 * rsqrt(mean(x32^2) + epsilon)) * w32)`

    with the sum of squares in fp32. With `unit_offset` the weight is
    `(1 + w32)` (Gemma). With a `residual` operand the op first forms
    `h = cast(x + residual)` in the activation type, normalises `h`, and
    also returns `h` as `residual_out` (the fused residual add of a
    pre-norm transformer).

    ```mlir
    %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64}
        : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
    %y2, %h = fusion.rmsnorm %x, %w residual(%r : tensor<?x4096xf16>)
        {epsilon = 1.0e-05 : f64}
        : tensor<?x4096xf16>, tensor<4096xf16>
        -> tensor<?x4096xf16>, tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$input, Fusion_HalfTensor:$weight,
                       Optional<Fusion_HalfTensor>:$residual,
                       F64Attr:$epsilon, UnitAttr:$unit_offset);
  let results = (outs Fusion_HalfTensor:$result,
                      Optional<Fusion_HalfTensor>:$residual_out);
  let assemblyFormat = [{
    $input `,` $weight (`residual` `(` $residual^ `:` type($residual) `)`)?
    attr-dict `:` type($input) `,` type($weight) `->` type(results)
  }];
  let hasVerifier = 1;
}

def Fusion_LayerNormOp : Fusion_Op<"layernorm", [Pure]> {
  let summary = "LayerNorm with weight and bias";
  let description = [{
    Layer normalisation (Ba et al. 2016; `torch.nn.LayerNorm`) of each row of
    `input` (`[B, H]`) with fp32 statistics:

    `y = cast((x32 - mean(x32)) * rsqrt(var(x32) + epsilon) * w32 + b32)`

    where `var` is the biased (population) variance.

    ```mlir
    %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
        : tensor<?x2048xf16>, tensor<2048xf16>, tensor<2048xf16>
        -> tensor<?x2048xf16>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$input, Fusion_HalfTensor:$weight,
                       Fusion_HalfTensor:$bias, F64Attr:$epsilon);
  let results = (outs Fusion_HalfTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` type($input) `,` type($weight)
    `,` type($bias) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// QKV projection
//===----------------------------------------------------------------------===//

def Fusion_QKVProjOp : Fusion_Op<"qkv_proj", [Pure]> {
  let summary = "Packed Q/K/V projection";
  let description = [{
    `[B, H] x [(Hq + 2*Hkv) * D, H]^T (+ bias) -> q [B, Hq, D], k [B, Hkv, D],
    v [B, Hkv, D]` with fp32 accumulation, each output rounded once to the
    activation type.

    Packed weight layout (row-major, `H` contiguous): rows
    `[0, Hq*D)` are Hugging Face's `q_proj.weight`, rows
    `[Hq*D, (Hq+Hkv)*D)` are `k_proj.weight` and rows
    `[(Hq+Hkv)*D, (Hq+2*Hkv)*D)` are `v_proj.weight`, i.e.
    `torch.cat([q_proj.weight, k_proj.weight, v_proj.weight], dim=0)`; the
    optional bias (Qwen2) is the concatenation of the three biases. Row
    `h*D + d` of the q part is element `d` of query head `h`.

    ```mlir
    %q, %k, %v = fusion.qkv_proj %x, %w
        {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
        : tensor<?x4096xf16>, tensor<6144x4096xf16>
        -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$input, Fusion_HalfTensor:$weight,
                       Optional<Fusion_HalfTensor>:$bias,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim);
  let results = (outs Fusion_HalfTensor:$query, Fusion_HalfTensor:$key,
                      Fusion_HalfTensor:$value);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `:` type($input) `,` type($weight)
    `->` type($query) `,` type($key) `,` type($value)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

def Fusion_RopeOp : Fusion_Op<"rope", [Pure,
    AllTypesMatch<["query", "query_out"]>,
    AllTypesMatch<["key", "key_out"]>]> {
  let summary = "Rotary position embedding of query and key";
  let description = [{
    Rotary position embedding (Su et al. 2021, RoFormer) of `query`
    (`[B, Hq, D]`) and `key` (`[B, Hkv, D]`) at each sequence's position
    `positions[b]` (`tensor<?xi32>`, `[B]`).

    For `i` in `[0, rotary_dim/2)`, in fp32:
    `inv_freq[i] = theta ^ (-2i / rotary_dim)` (then adjusted by `scaling`
    if present), `angle = positions[b] * inv_freq[i]`, and the pair `(a, b)`
    becomes `(a*cos - b*sin, b*cos + a*sin)`. `pairing = neox` pairs
    `x[i]` with `x[i + rotary_dim/2]` (Hugging Face `rotate_half`);
    `pairing = gptj` pairs `x[2i]` with `x[2i+1]`. Elements at and past
    `rotary_dim` (partial rotary) pass through unchanged. `rotary_dim`
    defaults to `head_dim`.

    ```mlir
    %qr, %kr = fusion.rope %q, %k, %pos
        {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64}
        : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$query, Fusion_HalfTensor:$key,
                       Fusion_I32Tensor:$positions,
                       Fusion_RopePairingAttr:$pairing, F64Attr:$theta,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$rotary_dim,
                       OptionalAttr<Fusion_Llama3RopeScalingAttr>:$scaling);
  let results = (outs Fusion_HalfTensor:$query_out,
                      Fusion_HalfTensor:$key_out);
  let assemblyFormat = [{
    $query `,` $key `,` $positions attr-dict `:` type($query) `,` type($key)
    `,` type($positions)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of leading elements of each head that are rotated.
    int64_t getEffectiveRotaryDim();
  }];
}

//===----------------------------------------------------------------------===//
// Paged KV cache
//===----------------------------------------------------------------------===//

def Fusion_KVAppendOp : Fusion_Op<"kv_append", [
    AllTypesMatch<["key", "value"]>,
    AllTypesMatch<["key_cache", "value_cache"]>]> {
  let summary = "Append this step's K and V to the paged KV cache";
  let description = [{
    Writes `key[b]` and `value[b]` (`[B, Hkv, D]`) at logical token index
    `positions[b]` of sequence `b`: with page size `P` (dimension 1 of the
    cache), page `block_table[b, positions[b] / P]`, slot
    `positions[b] % P`:

    `key_cache[page, slot, h, :] = key[b, h, :]` (likewise for value).

    The caches are `[num_pages, P, Hkv, D]` with `num_pages` dynamic. The
    op declares a write to both caches; offsets are 64-bit.

    ```mlir
    fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
        : tensor<?x8x128xf16> into memref<?x16x8x128xf16>,
          tensor<?x?xi32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$key, Fusion_HalfTensor:$value,
                       Arg<Fusion_CachePages, "K pages", [MemWrite]>:$key_cache,
                       Arg<Fusion_CachePages, "V pages", [MemWrite]>:$value_cache,
                       Fusion_I32Tensor:$block_table,
                       Fusion_I32Tensor:$positions);
  let assemblyFormat = [{
    $key `,` $value `into` $key_cache `,` $value_cache
    `[` $block_table `,` $positions `]` attr-dict
    `:` type($key) `into` type($key_cache) `,` type($block_table) `,`
    type($positions)
  }];
  let hasVerifier = 1;
}

def Fusion_DecodeAttentionOp : Fusion_Op<"decode_attention", [
    AllTypesMatch<["query", "result"]>,
    AllTypesMatch<["key_cache", "value_cache"]>]> {
  let summary = "GQA decode attention over the paged KV cache";
  let description = [{
    Scaled dot-product attention (Vaswani et al. 2017) of one query token per
    sequence over its cached keys and values, with grouped-query attention
    (Ainslie et al. 2023):

    `o[b, h] = softmax(q[b, h] . K[b, 0..len_b)^T * scale) V[b, 0..len_b)`

    with `len_b = seq_lens[b]`, `kv_head = h / (Hq / Hkv)`, token `t` of
    sequence `b` at page `block_table[b, t / P]`, slot `t % P`. `scale`
    defaults to `1/sqrt(head_dim)`. Only tokens below `len_b` contribute
    (whatever the slots past it hold, NaN included); `len_b = 0` gives
    zeros. Softmax statistics are fp32. The op reads both
    caches (declared), so it stays after a `fusion.kv_append` to them.

    ```mlir
    %o = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>,
          tensor<?xi32>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$query,
                       Arg<Fusion_CachePages, "K pages", [MemRead]>:$key_cache,
                       Arg<Fusion_CachePages, "V pages", [MemRead]>:$value_cache,
                       Fusion_I32Tensor:$block_table,
                       Fusion_I32Tensor:$seq_lens,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Fusion_HalfTensor:$result);
  let assemblyFormat = [{
    $query `,` $key_cache `,` $value_cache `[` $block_table `,` $seq_lens `]`
    attr-dict `:` type($query) `,` type($key_cache) `,` type($block_table)
    `,` type($seq_lens)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The softmax scale: `scale` if set, else 1/sqrt(head_dim).
    double getEffectiveScale();
  }];
}

//===----------------------------------------------------------------------===//
// Linear layers and the gated MLP
//===----------------------------------------------------------------------===//

def Fusion_LinearOp : Fusion_Op<"linear", [Pure]> {
  let summary = "Linear layer without bias (nn.Linear)";
  let description = [{
    `torch.nn.Linear` without bias: `[B, K] x [N, K]^T -> [B, N]`, each
    output rounded once to the activation type. The CPU reference
    (`ref::linear`, runtime/include/fusion/runtime/Reference.h):

    `y[b, n] = round(sum_k x32[b, k] * W32[n, k])`

    accumulated in fp32 (the reference sums in order of `k`; a kernel may
    sum in another order, which changes only the fp32 rounding of the
    sum), the same arithmetic as `fusion.qkv_proj`. `weight` is Hugging
    Face's `[out_features, in_features]` weight, row-major with `K`
    contiguous. `input`, `weight` and `result` have one element type, `f16`
    or `bf16`; the batch `B` is dynamic or static, the same in `input` and
    `result`.

    The linear layers of a Llama decoder (Hugging Face `LlamaAttention`,
    `LlamaMLP`, `LlamaForCausalLM`):
    - `o_proj`: `[B, Hq*D] -> [B, H]`;
    - `gate_proj` and `up_proj` as one op over the packed weight
      `torch.cat([gate_proj.weight, up_proj.weight], dim=0)` (`N = 2*I`),
      whose result row is `[gate | up]`, the input of `fusion.silu_mul`;
    - `down_proj`: `[B, I] -> [B, H]`;
    - `lm_head`: `[B, H] -> [B, V]` (with tied embeddings its weight is the
      embedding table).

    The input may also be `[B, Hq, D]` (the result of
    `fusion.decode_attention`), read as `[B, Hq*D]` in row-major order:
    element `(h, d)` is feature `h*D + d`, as in Hugging Face's
    `attn_output.reshape(B, 1, Hq*D)` before `o_proj`. Then `K = Hq*D`.

    ```mlir
    %o = fusion.linear %attn, %o_w
        : tensor<?x32x128xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
    %gu = fusion.linear %y, %gate_up_w
        : tensor<?x4096xf16>, tensor<28672x4096xf16> -> tensor<?x28672xf16>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$input, Fusion_HalfTensor:$weight);
  let results = (outs Fusion_HalfTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Fusion_LinearPartialsOp : Fusion_Op<"linear_partials", [Pure]> {
  let summary = "Per-head-block fp32 partial sums of the attention's output projection";
  let description = [{
    The output projection (`o_proj`) of `[B, Hq, D]` attention heads split
    into `P` blocks of `Hq / P` consecutive heads, each block's sum left
    unrounded in fp32:

    `p[b, g, n] = sum_{h in block g} sum_{d < D} x32[b, h, d] * W32[n, h*D + d]`

    with block `g` holding heads `[g*Hq/P, (g+1)*Hq/P)`. `weight` is
    `[H, Hq*D]` (Hugging Face's `o_proj.weight`), `result` is
    `[B, P, H]` f32. `fusion.sum_partials` of the result is
    `fusion.linear(x, W)` up to the fp32 order of the sum, which `linear`
    leaves to the kernel. `--fusion-form-kernels` (strategy `decode`)
    rewrites `o_proj` into this pair where its weight is small, so that the
    attention kernel, whose CTAs each hold the heads of one KV group, also
    projects them (one block per KV group, `P = Hkv`) and the next kernel
    sums the blocks; see Passes.td rule 6. Not meant to be written by hand.

    ```mlir
    %p = fusion.linear_partials %attn, %o_w
        : tensor<?x9x64xf16>, tensor<576x576xf16> -> tensor<?x3x576xf32>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$input, Fusion_HalfTensor:$weight);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Fusion_SumPartialsOp : Fusion_Op<"sum_partials", [Pure]> {
  let summary = "Fixed-order sum of fp32 partials, rounded once";
  let description = [{
    `y[b, n] = round(((p[b, 0, n] + p[b, 1, n]) + ...) + p[b, P-1, n])`:
    the `P` fp32 partials of `fusion.linear_partials` (`[B, P, H]`) added
    in fp32 in order of the block, then rounded once to the result's
    element type (`f16` or `bf16`, `[B, H]`).

    ```mlir
    %o = fusion.sum_partials %p : tensor<?x3x576xf32> -> tensor<?x576xf16>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input);
  let results = (outs Fusion_HalfTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Fusion_SiluMulOp : Fusion_Op<"silu_mul", [Pure]> {
  let summary = "SwiGLU activation of a packed [gate | up] row";
  let description = [{
    The gated activation of a SwiGLU MLP (Shazeer 2020; Hugging Face
    `LlamaMLP`: `act_fn(gate_proj(x)) * up_proj(x)` with `act_fn` = SiLU).
    Each row of `input` (`[B, 2*I]`) is the gate projection followed by the
    up projection, the output of a `fusion.linear` over
    `torch.cat([gate_proj.weight, up_proj.weight], dim=0)`. The CPU
    reference (`ref::siluMul`):

    `y[b, i] = round(silu(g32) * u32)`, `silu(g) = g / (1 + exp(-g))`

    with `g = input[b, i]`, `u = input[b, I + i]`, in fp32, rounded once.
    Hugging Face rounds `silu(g)` to the activation type before the product
    (at most about one ulp apart). The result is `[B, I]` with the element
    type of `input`. The GPU kernel takes `exp(-g)` from `ex2.approx` (within
    `(4 + |g|) * 2^-24` relative, Kernels/SiluMulKernel.cpp), so `y` may
    differ from the rounded reference by one ulp where that lies within a
    few 1e-6 of a rounding boundary.

    ```mlir
    %act = fusion.silu_mul %gu : tensor<?x28672xf16> -> tensor<?x14336xf16>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$input);
  let results = (outs Fusion_HalfTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Token embedding and greedy sampling
//===----------------------------------------------------------------------===//

def Fusion_EmbeddingOp : Fusion_Op<"embedding", [Pure]> {
  let summary = "Token embedding: a row gather from the table";
  let description = [{
    `torch.nn.Embedding` (Hugging Face `LlamaModel.embed_tokens`): row `b`
    of the result (`[B, H]`) is row `tokens[b]` of `table` (`[V, H]`), a
    bit copy. `tokens` is `tensor<?xi32>` (`[B]`); the result has the
    element type of `table`. The CPU reference (`ref::embedding`) is the
    same copy and rejects a token outside `[0, V)` before writing anything.

    A token outside `[0, V)` is an error of the caller, not a value the op
    defines a result for: the runtime checks the token ids it is given
    against `[0, V)` before launching (as `ref::embedding` does), and the
    ids `fusion.argmax` produces are in range by construction. The kernel
    does not rely on that check for memory safety: its lowering clamps each
    id to `[0, V - 1]` before forming the row's (64-bit) offset, so a bad
    id copies some row of the table and never reads outside it.

    ```mlir
    %x = fusion.embedding %tokens, %table
        : tensor<?xi32>, tensor<128256x4096xbf16> -> tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins Fusion_I32Tensor:$tokens, Fusion_HalfTensor:$table);
  let results = (outs Fusion_HalfTensor:$result);
  let assemblyFormat = [{
    $tokens `,` $table attr-dict `:` type($tokens) `,` type($table) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Fusion_ArgmaxOp : Fusion_Op<"argmax", [Pure]> {
  let summary = "Greedy sampling: the index of each row's largest logit";
  let description = [{
    Greedy decoding (Hugging Face `generate` with `do_sample=False`:
    `torch.argmax(next_token_logits, dim=-1)` over the `lm_head` output of
    `LlamaForCausalLM`): for each row of `logits` (`[B, V]`, `f16` or
    `bf16`), the index of its largest value, as `i32` (`[B]`).

    - Values are compared exactly (f16/bf16 widen to fp32 without
      rounding); `-0.0` equals `+0.0`, `+inf` is larger than every finite
      value and `-inf` smaller.
    - Ties pick the lowest index, as `torch.argmax` ("the indices of the
      first maximal value"). The result is therefore independent of the
      order in which a kernel reduces the row.
    - NaN is never chosen: it is skipped, and the largest non-NaN value
      wins. A row that is all NaN gives index 0. Here the op differs from
      `torch.argmax`, which treats NaN as the largest value and returns the
      index of the first NaN; the two agree on every row without NaN.

    `V` must be at most 2^31 so that every index fits in an `i32`; the
    result is the token id `fusion.embedding` takes at the next step. The
    CPU reference is `ref::argmax` (runtime/include/fusion/runtime/Reference.h).

    ```mlir
    %next = fusion.argmax %logits : tensor<?x128256xbf16> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins Fusion_HalfTensor:$logits);
  let results = (outs Fusion_I32Tensor:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel regions
//===----------------------------------------------------------------------===//

def Fusion_KernelOp : Fusion_Op<"kernel", [IsolatedFromAbove, SingleBlock,
    RecursiveMemoryEffects]> {
  let summary = "The ops of one GPU kernel";
  let description = [{
    A region holding the ops that code generation turns into exactly one GPU
    kernel. It is isolated from above: every value the body uses enters as
    an operand, bound to the block argument of the same position, and every
    value used after it leaves through `fusion.yield`. `sym_name` is the
    kernel's entry name; `strategy` (written by `--fusion-form-kernels`)
    the strategy the region was formed by; `schedule` (a
    `#fusion.*_schedule`, written by `--convert-fusion-to-gpu`) the schedule
    it was compiled with, and `launch` (a `#fusion.launch`, written by the
    same pass) how to launch the kernel it was compiled to. The strategy is
    an attribute of its own rather than a member of the schedule: it is set
    when the region is formed, before any schedule is chosen, and it is the
    same for every kind of kernel.

    ```mlir
    %y = fusion.kernel @layer0_norm (%a = %x, %b = %w)
        : (tensor<?x4096xf16>, tensor<4096xf16>) -> tensor<?x4096xf16> {
      %0 = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64}
          : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
      fusion.yield %0 : tensor<?x4096xf16>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, SymbolNameAttr:$sym_name,
                       OptionalAttr<Fusion_StrategyAttr>:$strategy,
                       OptionalAttr<Fusion_ScheduleAttrInterface>:$schedule,
                       OptionalAttr<Fusion_LaunchAttr>:$launch);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The yield that ends the body.
    YieldOp getYield();
  }];
}

def Fusion_YieldOp : Fusion_Op<"yield", [Pure, ReturnLike, Terminator,
    HasParent<"KernelOp">]> {
  let summary = "Ends a fusion.kernel body, naming its results";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
}

#endif // FUSION_OPS
