//===- FusionDialect.td - fusion dialect definition --------*- tablegen -*-===//
//
// The `fusion` dialect: the operators of an LLM decode step (RMSNorm,
// QKV projection, RoPE, paged KV-cache append, decode attention) and the
// `fusion.kernel` region op that holds the ops of one future GPU kernel.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_DIALECT
#define FUSION_DIALECT

include "mlir/IR/OpBase.td"

def Fusion_Dialect : Dialect {
  let name = "fusion";
  let summary = "Operators of an LLM decode step and fused-kernel regions";
  let description = [{
    The `fusion` dialect describes the attention front half of a decoder
    layer during decode: one new token per sequence per step.

    Activations and weights are ranked tensors of `f16` or `bf16` with
    value semantics; all arithmetic accumulates in fp32. Model dimensions
    (hidden size, heads, KV heads, head_dim) are static; the batch size and
    the per-sequence positions and lengths are run-time values, so one
    module serves every batch size.

    The paged KV cache is the one piece of state. Its K and V pages are
    memrefs `memref<?xPxHkvxDxT>` (`num_pages` dynamic, `P` = page size in
    tokens) addressed through a block table `tensor<?x?xi32>`
    (`[batch, max_pages_per_sequence]`, page index of each logical page).
    `fusion.kv_append` declares a write and `fusion.decode_attention` a read
    of the cache, so passes cannot move a read across the write it depends on.

    `fusion.kernel` is an isolated-from-above region holding the ops of one
    GPU kernel; the fusion pass forms these regions.
  }];
  let cppNamespace = "::mlir::fusion";
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::tensor::TensorDialect",
                           "::mlir::memref::MemRefDialect"];
}

class Fusion_Op<string mnemonic, list<Trait> traits = []>
    : Op<Fusion_Dialect, mnemonic, traits>;

#endif // FUSION_DIALECT
