//===- Mma.h - m16n8k16 tensor-core fragments -------------------*- C++ -*-===//
//
// Warp-wide `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` (sm_80+) and
// the register fragments it takes, laid out as the PTX ISA's "Matrix
// Fragments for mma.m16n8k16" says: with g = lane / 4 (groupID) and
// q = lane % 4 (threadID_in_group), a lane holds elements of rows g and g + 8
// and of columns 2q, 2q + 1, 2q + 8, 2q + 9.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_MMA_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_MMA_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

/// One warp-wide m16n8k16 mma: D = A(16x16) B(16x8) + C in fp32. This lane
/// passes `a` = four 2-element registers {A[g][2q..2q+1], A[g+8][2q..2q+1],
/// A[g][2q+8..2q+9], A[g+8][2q+8..2q+9]}, `b` = two {B[2q..2q+1][g],
/// B[2q+8..2q+9][g]} and `c` = four f32 {C[g][2q], C[g][2q+1], C[g+8][2q],
/// C[g+8][2q+1]}; the registers are vector<2xf16> / vector<2xbf16> of
/// `elementType`. Returns D in c's layout. Every lane of the warp must
/// execute it.
SmallVector<Value, 4> mmaM16N8K16(ImplicitLocOpBuilder &b, Type elementType,
                                  ArrayRef<Value> a, ArrayRef<Value> bFrag,
                                  ArrayRef<Value> c);

/// `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`: four 8x8 matrices of
/// 16-bit elements from shared memory, lanes 8i..8i+7 giving the addresses
/// of matrix i's rows (`address`, this lane's `!llvm.ptr<3>`, 16-byte
/// aligned). Returns this lane's element pair of each matrix, as
/// mmaM16N8K16 takes them: row lane / 4, columns 2 (lane % 4) and
/// 2 (lane % 4) + 1 (of the transposed matrix with `transpose`), a
/// vector<2 x elementType>. Every lane of the warp must execute it.
SmallVector<Value, 4> loadMatrixX4(ImplicitLocOpBuilder &b, Value address,
                                   Type elementType, bool transpose = false);

/// The 2-element fragment register made of elements [at, at + 2) of the
/// vector `v` (e.g. of a 16-byte vector of 8 elements).
Value getFragmentPair(ImplicitLocOpBuilder &b, Value v, int64_t at);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_MMA_H
