//===- HuggingFace.h - decode-layer modules from config.json --*- C++ -*-===//
//
// Reads the attention fields of a Hugging Face `config.json` of the LLaMA
// family (Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE) and builds the
// decode-layer front half as a module of fusion ops: the @decode_layer
// function of examples/llama3_8b.mlir (rmsnorm -> qkv_proj -> rope ->
// kv_append -> decode_attention) with the model's shapes and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_IMPORT_HUGGINGFACE_H
#define FUSION_IMPORT_HUGGINGFACE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::fusion {

/// Llama-3.1 RoPE frequency scaling (`rope_type: "llama3"`).
struct HFLlama3Scaling {
  double factor = 0;
  double lowFreqFactor = 0;
  double highFreqFactor = 0;
  int64_t originalMaxPosition = 0;
};

/// What the front half of one decoder layer needs from a config.json.
struct HFDecoderConfig {
  /// The config's name in messages (the `source` given to the parser).
  std::string source;
  std::string modelType;
  int64_t hiddenSize = 0;
  int64_t numHeads = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  /// Rotated leading elements of each head (head_dim unless
  /// partial_rotary_factor < 1).
  int64_t rotaryDim = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  std::optional<HFLlama3Scaling> llama3Scaling;
  /// Packed q/k/v bias (attention_bias; always for Qwen2).
  bool attentionBias = false;
  /// "f16" or "bf16" from torch_dtype / dtype; another value (e.g.
  /// "float32") is kept as written; empty if absent.
  std::string dtype;
  /// The field dtype came from ("torch_dtype" or "dtype"), for messages.
  std::string dtypeField;
  /// Fields read but not modelled (e.g. an active sliding_window).
  std::vector<std::string> warnings;
};

/// The `model_type`s parseHFDecoderConfig accepts, whose attention block is
/// the Llama one (RMSNorm, packed q/k/v, NeoX RoPE, GQA softmax attention
/// with scale 1/sqrt(head_dim)): llama, mistral, mixtral, qwen2, qwen2_moe.
/// Any other model_type is an error.
llvm::ArrayRef<llvm::StringLiteral> getSupportedHFModelTypes();

/// Parses config.json `text`; `source` names it in messages. Errors name
/// the field, e.g. `field "rope_parameters.rope_type": RoPE type "yarn" is
/// not supported ...`. Every value it accepts passes the fusion op
/// verifiers: sizes whose products fit in 64 bits, an even rotary
/// dimension, rms_norm_eps > 0, rope_theta > 1.
llvm::Expected<HFDecoderConfig> parseHFDecoderConfig(llvm::StringRef text,
                                                     llvm::StringRef source);

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
OwningOpRef<ModuleOp> buildDecodeLayerModule(MLIRContext *context,
                                             const HFDecoderConfig &config,
                                             const DecodeLayerOptions &options,
                                             Location loc);

} // namespace mlir::fusion

#endif // FUSION_IMPORT_HUGGINGFACE_H
