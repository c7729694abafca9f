//===- AsyncCopy.h - cp.async global -> shared copies -----------*- C++ -*-===//
//
// The Ampere-style asynchronous copy pipeline (sm_80+, PTX ISA "cp.async"):
// 16-byte copies from global to shared memory that bypass the registers
// (`.cg`: cached in L2 only), committed in groups and waited for by group
// count. The copies address memory through LLVM pointers: global buffers
// through getGlobalPointer, shared memory through getDynamicSharedPointer
// (Abi.h). Also the Hopper bulk prefetch into L2, by which a kernel starts
// its weight stream before griddepcontrol.wait.
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

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ASYNCCOPY_H
