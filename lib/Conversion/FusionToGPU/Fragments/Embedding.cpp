//===- Embedding.cpp - the token embedding's row gather -------------------===//

#include "Embedding.h"

using namespace mlir;
using namespace mlir::fusion;

Value mlir::fusion::getEmbeddingRowOffset(ImplicitLocOpBuilder &b, Value ids,
                                          Value token, int64_t vocab,
                                          int64_t hidden) {
  Value id = i32ToIndex(b, loadScalar(b, ids, token));
  id = maxSI(b, id, constIndex(b, 0));
  id = minSI(b, id, constIndex(b, vocab - 1));
  return mulI(b, id, hidden);
}
