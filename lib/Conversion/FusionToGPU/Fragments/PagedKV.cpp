//===- PagedKV.cpp - addressing of the paged KV cache ---------------------===//

#include "PagedKV.h"

using namespace mlir;
using namespace mlir::fusion;

Value mlir::fusion::getAppendCacheSlot(ImplicitLocOpBuilder &b,
                                       const PagedKVLayout &layout,
                                       Value positions, Value blockTable,
                                       Value maxPages, Value token) {
  Value pos = i32ToIndex(b, loadScalar(b, positions, token));
  Value pageIndex = divSI(b, pos, constIndex(b, layout.pageSize));
  Value inPage = remSI(b, pos, constIndex(b, layout.pageSize));
  Value tableIndex =
      addI(b, mulI(b, token, i32ToIndex(b, maxPages)), pageIndex);
  Value page = i32ToIndex(b, loadScalar(b, blockTable, tableIndex));
  return addI(b, mulI(b, page, layout.pageSize), inPage);
}

Value mlir::fusion::getCacheEntryOffset(ImplicitLocOpBuilder &b,
                                        const PagedKVLayout &layout, Value slot,
                                        Value kvHead) {
  return mulI(b, addI(b, mulI(b, slot, layout.numKvHeads), kvHead),
              layout.headDim);
}

PagedKVReader::PagedKVReader(ImplicitLocOpBuilder &b,
                             const PagedKVLayout &layout, Value blockTable,
                             Value maxPages, Value seq)
    : layout(layout), blockTable(blockTable) {
  tableRow = mulI(b, seq, i32ToIndex(b, maxPages));
}

Value PagedKVReader::getOffset(ImplicitLocOpBuilder &b, Value token,
                               Value laneOffset) const {
  const int64_t p = layout.pageSize;
  const int64_t rowElements = layout.numKvHeads * layout.headDim;
  Value pageIndex = divUI(b, token, constI32(b, p));
  Value slot = remUI(b, token, constI32(b, p));
  Value page =
      loadScalar(b, blockTable, addI(b, tableRow, i32ToIndex(b, pageIndex)));
  Value inPage = addI(b, mulI(b, slot, constI32(b, rowElements)), laneOffset);
  return addI(b, mulI(b, i32ToIndex(b, page), constIndex(b, p * rowElements)),
              i32ToIndex(b, inPage));
}
