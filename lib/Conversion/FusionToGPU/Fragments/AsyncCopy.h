//===- AsyncCopy.h - cp.async global -> shared copies -----------*- C++ -*-===//
//
// The Ampere-style asynchronous copy pipeline (sm_80+, PTX ISA "cp.async"):
// 16-byte copies from global to shared memory that bypass the registers
// (`.cg`: cached in L2 only), committed in groups and waited for by group
// count. The copies address memory through LLVM pointers: global buffers
// through getGlobalPointer, shared memory through getDynamicSharedPointer
// (Abi.h). Also the Hopper bulk prefetch into L2, by which a kernel starts
// its weight stream before griddepcontrol.wait, and the Hopper bulk copy
// (sm_90+, "cp.async.bulk"): one thread copies a whole contiguous block,
// whose arrival an mbarrier counts in bytes (a stage's "full" barrier).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ASYNCCOPY_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ASYNCCOPY_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

/// The device address of the flat buffer `buffer` (a gpu.func argument) as a
/// global-space pointer (`!llvm.ptr<1>`): its generic address, taken as is
/// (CUDA maps global memory at the same addresses in both spaces).
Value getGlobalPointer(ImplicitLocOpBuilder &b, Value buffer);

/// The address of the workgroup buffer `buffer` (addWorkgroupBuffer) as a
/// shared-space pointer (`!llvm.ptr<3>`).
Value getSharedPointer(ImplicitLocOpBuilder &b, Value buffer);

/// `pointer + offset` elements of `elementType` (bytes when null), in
/// pointer's address space. An `index` offset is taken as i64, an integer
/// one as it is.
Value offsetPointer(ImplicitLocOpBuilder &b, Value pointer, Value offset,
                    Type elementType = Type());

/// `cp.async.cg.shared.global [shared], [global], 16, srcBytes`: this
/// thread's copy of 16 bytes from `global` (a `!llvm.ptr<1>`) to `shared` (a
/// `!llvm.ptr<3>`), both 16-byte aligned. With `srcBytes` (i32, 0 to 16)
/// only that many bytes are read and the rest of the 16 are zero-filled.
void copyAsync16(ImplicitLocOpBuilder &b, Value shared, Value global,
                 Value srcBytes = Value());

/// `cp.async.commit_group`: closes the group of this thread's copies issued
/// since the last commit (an empty group is allowed).
void commitAsyncCopies(ImplicitLocOpBuilder &b);

/// `cp.async.wait_group pending`: waits until at most `pending` of this
/// thread's committed groups are still in flight. Other threads' copies need
/// a barrier after it before they are read.
void waitAsyncCopies(ImplicitLocOpBuilder &b, int64_t pending);

/// `cp.async.bulk.prefetch.L2.global [global], bytes` (sm_90+): asks the
/// memory system to bring `bytes` (a constant multiple of 16) from `global`
/// (a 16-byte aligned `!llvm.ptr<1>`) into L2, without waiting for them and
/// without touching registers or shared memory: a hint, never a fault
/// source for in-bounds addresses.
void prefetchToL2(ImplicitLocOpBuilder &b, Value global, int64_t bytes);

/// `count` mbarriers in `func`'s static shared memory, 8 bytes each, every
/// one initialised by thread 0 (`tid`) with `arrivals` expected arrivals
/// and published to the CTA (fence.mbarrier_init, CTA barrier): e.g. the
/// "full" barriers of a ring of stages that bulk copies fill (one arrival:
/// the copies' expect_tx). Returns the address (`!llvm.ptr<3>`) of barrier
/// 0; barrier i is 8 * i bytes further (stageBarrier).
Value createStageBarriers(ImplicitLocOpBuilder &b, gpu::GPUFuncOp func,
                          Value tid, int64_t count, int64_t arrivals = 1);

/// The address of barrier `index` (index) of createStageBarriers' `first`.
Value stageBarrier(ImplicitLocOpBuilder &b, Value first, Value index);

/// `mbarrier.arrive.expect_tx`: this thread's arrival on `barrier`, whose
/// current phase then also waits for `bytes` bytes of bulk copies.
void arriveExpectingBytes(ImplicitLocOpBuilder &b, Value barrier,
                          int64_t bytes);

/// `mbarrier.arrive`: this thread's arrival on `barrier` (release: its
/// earlier memory accesses happen before the phase completes for the
/// threads that wait on it); with `onlyIf` (i1), only where it holds, as
/// one predicated instruction rather than a branch (ptxas serialises
/// wgmmas in flight across a divergent branch, advisory C7520).
void arriveOnBarrier(ImplicitLocOpBuilder &b, Value barrier,
                     Value onlyIf = Value());

/// `fence.proxy.async.shared::cta`: orders this thread's earlier shared
/// memory accesses (and, after a CTA barrier, the CTA's) before its later
/// bulk copies into shared memory (PTX ISA, "Proxies"), so a bulk copy may
/// overwrite a stage that ldmatrix read.
void fenceSharedForBulkCopies(ImplicitLocOpBuilder &b);

/// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`: an
/// asynchronous copy of `bytes` (a constant multiple of 16) from `global` to
/// `shared` (both 16-byte aligned), counted on `barrier` as it lands.
void copyBulk(ImplicitLocOpBuilder &b, Value shared, Value global,
              int64_t bytes, Value barrier);

/// The device address of the flat buffer `buffer` as a generic pointer
/// (`!llvm.ptr`), as cp.async.bulk.tensor takes its descriptor.
Value getGenericPointer(ImplicitLocOpBuilder &b, Value buffer);

/// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::
/// complete_tx::bytes`: an asynchronous copy of the box at element
/// coordinates `coords` = {column, row} (index values) of the 2-D tensor
/// that the TMA descriptor `map` (a generic pointer to a CUtensorMap)
/// describes, to `shared` (aligned as the descriptor's swizzle needs: 1 KiB
/// for 128 bytes), counted on `barrier` as it lands (sm_90+).
void copyTensorBox(ImplicitLocOpBuilder &b, Value shared, Value map,
                   ArrayRef<Value> coords, Value barrier);

/// Waits (`mbarrier.try_wait.parity`, retried until it succeeds) for the
/// phase of `barrier` with parity `parity` (i32, 0 or 1) to complete; then
/// the bulk copies it counted are visible to this thread.
void waitBarrierPhase(ImplicitLocOpBuilder &b, Value barrier, Value parity);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ASYNCCOPY_H
