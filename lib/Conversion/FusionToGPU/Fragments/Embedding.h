//===- Embedding.h - the token embedding's row gather -----------*- C++ -*-===//
//
// The one place of the embedding's addressing rule (FusionOps.td,
// docs/abi.md section 1.1, item 5): the id is clamped to [0, V - 1] before
// the 64-bit row offset is formed, so a bad id copies some row of the table
// and never reads outside it. The lone embedding kernel
// (Kernels/EmbeddingKernel.cpp) and the norms that gather their input rows
// themselves (Fragments/Norm.cpp, Kernels/ProjectionGemmKernel.cpp) use it.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_EMBEDDING_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_EMBEDDING_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

/// Element offset (index, 64-bit) of the first element of the table row that
/// `token` (index) embeds: clamp(ids[token], 0, vocab - 1) * hidden, where
/// `ids` is the flat i32 token-id buffer and the table is [vocab, hidden].
/// Reads `ids`, which the previous step's argmax may write: call it only
/// after griddepcontrol.wait (docs/abi.md, `programmatic_dependent_launch`).
Value getEmbeddingRowOffset(ImplicitLocOpBuilder &b, Value ids, Value token,
                            int64_t vocab, int64_t hidden);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_EMBEDDING_H
