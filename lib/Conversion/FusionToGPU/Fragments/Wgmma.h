//===- Wgmma.h - warpgroup tensor-core MMA (sm_90a) --------------*- C++
//-*-===//
//
// Hopper's asynchronous warpgroup MMA (PTX ISA "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Instructions", sm_90a only): the four warps of
// a warpgroup (warps 4i .. 4i + 3 of the CTA) multiply a 64-row A with an
// N-column B. A comes from registers, warp w % 4 holding rows
// 16 (w % 4) .. +15 in mma.m16n8k16's A layout (Fragments/Mma.h); B from
// shared memory through a matrix descriptor; the f32 accumulators of warp
// w % 4 are those rows in mma.m16n8k16's C layout, n-tile j (columns
// 8j .. 8j + 7) in accumulators 4j .. 4j + 3. Issued wgmmas run
// asynchronously: a warpgroup fences before them (its registers were
// written by other instructions), commits them as a group and waits for
// the group before it touches their registers or overwrites their shared
// memory; shared memory that the generic proxy wrote (st.shared, cp.async)
// must be fenced for the async proxy first (fenceSharedForBulkCopies).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_WGMMA_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_WGMMA_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

/// The 64-bit shared-memory matrix descriptor (PTX ISA "Matrix Descriptor
/// Format") of a K-major operand whose rows are 128 bytes of k, stored
/// 128-byte swizzled (16-byte chunk c of row r at chunk c ^ (r % 8), as
/// TMA's CU_TENSOR_MAP_SWIZZLE_128B writes them) in 1 KiB groups of 8 rows.
/// `address` (i32) is the shared-memory byte address of the operand's first
/// element: a 1 KiB-aligned group plus 32 bytes per k step of 16 elements.
Value getSwizzled128Descriptor(ImplicitLocOpBuilder &b, Value address);

/// `wgmma.mma_async.sync.aligned.m64n<n>k16.f32.<elementType>`: D = A B + C
/// with A (64 x 16) from this warp's four registers `a` (vector<2 x
/// elementType> each, mma.m16n8k16's A fragment of its 16 rows), B (16 x n,
/// K-major) from shared memory at `descriptorB`, C = `acc` (n / 2 f32).
/// Returns D (to be waited for). f16 or bf16; n a multiple of 8 up to 256.
/// Every thread of the warpgroup must execute it.
SmallVector<Value> warpgroupMmaM64K16(ImplicitLocOpBuilder &b, Type elementType,
                                      ArrayRef<Value> a, Value descriptorB,
                                      ArrayRef<Value> acc);

/// `wgmma.fence.sync.aligned`: orders this warpgroup's earlier register
/// writes before the wgmmas that read them.
void fenceWarpgroupMma(ImplicitLocOpBuilder &b);

/// An empty side-effecting inline asm that takes and returns `values` (f32
/// accumulators as "+f", 32-bit fragment registers such as vector<2xf16>
/// as "+r"): every value is materialised in its register before it (so
/// before a fenceWarpgroupMma that follows; a zero-initialised accumulator
/// would otherwise be set after the fence, which the PTX ISA leaves
/// undefined), and the returned values are defined at it. CUTLASS's
/// warpgroup_fence_operand.
SmallVector<Value> pinWarpgroupOperands(ImplicitLocOpBuilder &b,
                                        ValueRange values);

/// `wgmma.commit_group.sync.aligned`, then `wgmma.wait_group.sync.aligned
/// pending`: closes the group of this warpgroup's issued wgmmas and waits
/// until at most `pending` groups are in flight.
void commitAndWaitWarpgroupMma(ImplicitLocOpBuilder &b, int64_t pending);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_WGMMA_H
