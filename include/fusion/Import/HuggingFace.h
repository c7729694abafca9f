//===- HuggingFace.h - decode-layer modules from config.json --*- C++ -*-===//
//
// Reads a Hugging Face `config.json` of the LLaMA family (Llama, Mistral,
// Mixtral, Qwen2, Qwen2-MoE) with the runtime's reader, ModelConfig (the one
// reader of config.json; the compiler may depend on the runtime, never the
// reverse), and builds a module of fusion ops with the model's shapes and
// attributes: either the decode-layer front half, the @decode_layer function
// of examples/llama3_8b.mlir (rmsnorm -> qkv_proj -> rope -> kv_append ->
// decode_attention), or one decode step of the whole model (@decode_step:
// embedding, every decoder layer, final norm, LM head, argmax).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_IMPORT_HUGGINGFACE_H
#define FUSION_IMPORT_HUGGINGFACE_H

#include "fusion/runtime/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mlir::fusion {

/// Parses config.json `text` with the one config.json reader,
/// fusion::runtime::ModelConfig (runtime/include/fusion/runtime/ModelConfig.h:
/// the fields read, transformers' semantics, the model_types accepted);
/// `source` names it in messages. Its errors become llvm::Errors naming the
/// config and the field, e.g. `config.json: field
/// "rope_parameters.rope_type": RoPE type "yarn" is not supported ...`.
/// Every config it accepts passes the fusion op verifiers: sizes whose
/// products fit in 64 bits, an even rotary dimension, rms_norm_eps > 0,
/// rope_theta > 1.
llvm::Expected<::fusion::runtime::ModelConfig>
parseHFDecoderConfig(llvm::StringRef text, llvm::StringRef source);

/// Options of the built module.
struct DecodeLayerOptions {
  /// "f16" or "bf16"; empty: the config's dtype.
  std::string dtype;
  /// Tokens per KV-cache page (dimension 1 of the caches).
  int64_t pageSize = 16;
  /// With the fused residual add (arguments x and residual, results
  /// attention output and residual_out), as in examples/; without it the
  /// norm reads x alone and the only result is the attention output.
  bool residual = true;
  /// Must satisfy isValidKernelName: the kernels are named after it.
  std::string functionName = "decode_layer";
};

/// Builds a module holding the decode-layer function of `config`. The
/// function arguments carry NameLocs (x, residual, norm_w, qkv_w, qkv_b,
/// positions, seq_lens, block_table, k_cache, v_cache), so printing with
/// OpPrintingFlags::printNameLocAsPrefix gives the argument names of
/// examples/llama3_8b.mlir, which fusion-compile records in the manifest.
/// Returns null (after emitting a diagnostic at `loc`) for invalid options,
/// a config without an f16/bf16 dtype when options.dtype is empty, or a
/// module that does not verify.
OwningOpRef<ModuleOp>
buildDecodeLayerModule(MLIRContext *context,
                       const ::fusion::runtime::ModelConfig &config,
                       const DecodeLayerOptions &options, Location loc);

/// Options of the whole-model module.
struct DecodeModelOptions {
  /// "f16" or "bf16"; empty: the config's dtype.
  std::string dtype;
  /// Tokens per KV-cache page (dimension 1 of every layer's caches).
  int64_t pageSize = 16;
  /// Must satisfy isValidKernelName: the kernels are named after it.
  std::string functionName = "decode_step";
};

/// Builds a module holding one decode step of the whole model of `config`
/// (H = hidden, V = vocab, I = intermediate_size, Hq/Hkv/D the heads, R =
/// (Hq + 2 Hkv) D, P = options.pageSize, T the element type; `l<l>_` for
/// l in [0, num_hidden_layers)):
///
///   func.func @decode_step(
///       %tokens: tensor<?xi32>, %embed_w: tensor<VxHxT>,
///       per layer: %l<l>_norm_w: [H], %l<l>_qkv_w: [R, H],
///         %l<l>_qkv_b: [R] (attention bias only), %l<l>_o_w: [H, Hq*D],
///         %l<l>_post_norm_w: [H], %l<l>_gate_up_w: [2I, H],
///         %l<l>_down_w: [H, I], %l<l>_k_cache, %l<l>_v_cache:
///         memref<?xPxHkvxDxT>,
///       %final_norm_w: [H], %lm_head_w: [V, H] (untied embeddings only),
///       %positions: tensor<?xi32>, %seq_lens: tensor<?xi32>,
///       %block_table: tensor<?x?xi32>)
///     -> (next_tokens tensor<?xi32>, logits tensor<?xVxT>)
///
/// with the residual stream carried as vLLM does (ref::decoderLayer,
/// fusion::tooling::ModelReference): x = embedding(tokens); layer 0 norms x
/// alone and the stream is x; every later layer norms its input with the
/// stream as residual; after attention, o_proj, the post-attention norm with
/// the residual add, gate/up, silu_mul and down_proj; the final norm adds
/// the stream, the LM head (embed_w when tied) gives the logits and argmax
/// the next tokens. Every layer shares positions, seq_lens and block_table.
/// Arguments carry NameLocs as in buildDecodeLayerModule. Returns null
/// (after a diagnostic at `loc`) as buildDecodeLayerModule does, and for a
/// config outside the whole model (ModelConfig::wholeModelProblem: mixture
/// of experts, a hidden_act other than silu, MLP biases, missing
/// intermediate_size / vocab_size / num_hidden_layers).
OwningOpRef<ModuleOp>
buildDecodeModelModule(MLIRContext *context,
                       const ::fusion::runtime::ModelConfig &config,
                       const DecodeModelOptions &options, Location loc);

} // namespace mlir::fusion

#endif // FUSION_IMPORT_HUGGINGFACE_H
