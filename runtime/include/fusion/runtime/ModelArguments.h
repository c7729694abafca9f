//===- ModelArguments.h - whole-model arguments -> weights ------*- C++ -*-===//
//
// The arguments of the decode step of a whole model, as `fusion-import
// --whole-model` names them (lib/Import/HuggingFace.cpp,
// buildDecodeModelModule), mapped to what an engine binds to each: a tensor
// of ModelWeights (Checkpoint.h, loadModelWeights), a KV cache of one layer,
// or a per-step input. Found by name, then checked against the config: kind,
// role, dtype and shape of every argument, the two results, and the size of
// every host tensor. Pure host code (no GPU), so the mapping and its errors
// are unit-tested on the CPU.
//
//   argument (H hidden, V vocab, I intermediate, R = (Hq + 2 Hkv) D,
//             P page size)                role         ModelWeights
//   tokens [batch] i32                    tokens       (step input)
//   embed_w [V, H]                        weight       embedTokens
//   l<l>_norm_w [H]                       norm_weight
//   layers[l].front.normWeight l<l>_qkv_w [R, H]                     qkv_weight
//   layers[l].front.qkvWeight l<l>_qkv_b [R] (attention bias)       qkv_bias
//   layers[l].front.qkvBias l<l>_o_w [H, Hq D]                    weight
//   layers[l].oProj l<l>_post_norm_w [H]                  norm_weight
//   layers[l].postNorm l<l>_gate_up_w [2 I, H]               weight
//   layers[l].gateUp l<l>_down_w [H, I]                    weight
//   layers[l].down l<l>_k_cache, l<l>_v_cache            key_cache,   (the
//   engine's pools)
//     [num_pages, P, Hkv, D] buffers      value_cache
//   final_norm_w [H]                      norm_weight  finalNorm
//   lm_head_w [V, H] (untied only)        weight       lmHead
//   positions, seq_lens [batch] i32,      positions,   (step inputs)
//   block_table [batch, max_pages] i32    seq_lens, block_table
//   results: next tokens [batch] i32 (role tokens), logits [batch, V]
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_MODELARGUMENTS_H
#define FUSION_RUNTIME_MODELARGUMENTS_H

#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Manifest.h"
#include "fusion/runtime/ModelConfig.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fusion::runtime {

/// What one argument of the whole-model step holds.
enum class ModelArgumentKind {
  Weight,     ///< a tensor of ModelWeights, uploaded once
  Tokens,     ///< the step's token ids
  Positions,  ///< the step's positions
  SeqLens,    ///< the step's sequence lengths
  BlockTable, ///< the step's block table
  KeyCache,   ///< one layer's K pages
  ValueCache, ///< one layer's V pages
};

/// One argument of the step and what to bind to it.
struct ModelArgumentBinding {
  /// Its index in the function's arguments.
  int argument = 0;
  /// Its name ("l3_qkv_w").
  std::string name;
  ModelArgumentKind kind = ModelArgumentKind::Weight;
  /// The host tensor of a Weight (a member of the ModelWeights given to
  /// mapModelArguments, which must outlive this), its element count equal
  /// to the argument's shape; null otherwise.
  const std::vector<uint16_t> *weight = nullptr;
  /// The layer of a per-layer weight or cache; -1 otherwise.
  int64_t layer = -1;
};

/// Every argument and result of a compiled whole-model step, resolved.
struct ModelArgumentMap {
  /// One per function argument, in argument order.
  std::vector<ModelArgumentBinding> arguments;
  /// Argument indices of the step inputs.
  int tokens = -1, positions = -1, seqLens = -1, blockTable = -1;
  /// Argument indices of each layer's caches.
  std::vector<int> keyCaches, valueCaches;
  /// Result indices: the argmax tokens ([batch] i32) and the logits
  /// ([batch, V]).
  int nextTokens = -1, logits = -1;
  /// Tokens per KV-cache page (dimension 1 of the caches).
  int64_t pageSize = 0;
};

/// Maps every argument of `function` (the manifest function of a model
/// compiled from `fusion-import --whole-model` of `config`) to its tensor of
/// `weights` (loadModelWeights(config, dtype)) or its role in a step, by
/// name, and checks the function against both: each argument's kind
/// (tensor / buffer), role, dtype (the weights' dtype; i32 for the step
/// inputs) and shape (the file comment's table; the caches' page size is
/// read from l0_k_cache and must be the same in every cache), the results
/// (next tokens [batch] i32 with role tokens, then logits [batch, V]), and
/// that every host tensor holds exactly its argument's elements. Throws
/// FormatError whose message names the manifest, the function and the
/// argument: an argument the whole model does not have (e.g. lm_head_w
/// with tied embeddings) or has twice, one it lacks (the first missing, in
/// declaration order), a mismatched kind, role, dtype or shape (both
/// given), a host tensor of the wrong size, or a config outside the whole
/// model (ModelConfig::wholeModelProblem, as an UnsupportedError).
ModelArgumentMap mapModelArguments(const Manifest &manifest,
                                   const ManifestFunction &function,
                                   const ModelConfig &config,
                                   const ModelWeights &weights);

/// The activation dtype `function` (a whole-model step of `manifest`) was
/// compiled for: that of its embedding table `embed_w`, f16 or bf16. Throws
/// FormatError naming the manifest and the function when there is no
/// `embed_w` or its dtype is neither.
DType getModelDType(const Manifest &manifest, const ManifestFunction &function);

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_MODELARGUMENTS_H
