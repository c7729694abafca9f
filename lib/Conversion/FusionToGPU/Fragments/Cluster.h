//===- Cluster.h - thread-block clusters (sm_90+) ---------------*- C++ -*-===//
//
// The pieces of a Hopper thread-block cluster a kernel uses to exchange
// data between its CTAs through distributed shared memory (PTX ISA,
// "barrier.cluster", "mapa", state spaces ".shared::cluster"): the cluster's
// shape, its barrier, and loads from and stores into another CTA's shared
// memory. A launch without a cluster dimension runs every CTA as a cluster
// of one.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_CLUSTER_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_CLUSTER_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

/// `%cluster_nctarank` (i32): CTAs in this CTA's cluster.
Value getClusterCtas(ImplicitLocOpBuilder &b);
/// `%nclusterid.x` (i32): clusters along the grid's x dimension.
Value getClustersX(ImplicitLocOpBuilder &b);

/// `barrier.cluster.arrive` (release; `.relaxed` with `relaxed`: no memory
/// ordering): this thread's arrival on the cluster barrier's current phase.
/// Every thread of every CTA of the cluster arrives once per phase and
/// waits (waitCluster) before it arrives again; a thread may exit after
/// arriving.
void arriveCluster(ImplicitLocOpBuilder &b, bool relaxed = false);
/// `barrier.cluster.wait` (acquire): waits until every non-exited thread of
/// the cluster has arrived on the current phase.
void waitCluster(ImplicitLocOpBuilder &b);

/// `mapa.shared::cluster`: the address (`!llvm.ptr<7>`) of the shared memory
/// at `shared` (an `!llvm.ptr<3>` of this CTA) in the CTA of cluster rank
/// `rank` (i32).
Value mapSharedToCta(ImplicitLocOpBuilder &b, Value shared, Value rank);
/// `st.shared::cluster` of `value` (f32 or a vector of f32) at `pointer`
/// (an `!llvm.ptr<7>`, `alignment` bytes aligned).
void storeToCluster(ImplicitLocOpBuilder &b, Value value, Value pointer,
                    int64_t alignment);
/// The f32 at `shared` (an `!llvm.ptr<3>` of this CTA, 4 bytes aligned) in
/// the shared memory of the CTA of cluster rank `rank`: `mapa.shared::cluster`
/// then `ld.shared::cluster.f32`, as one side-effecting inline asm block on
/// the 32-bit shared address. One block rather than nvvm.mapa and an
/// llvm.load so that the mapped address lives only inside it: LLVM hoists a
/// separate mapa (and every address derived from it) to the kernel entry,
/// where a kernel that reads kSplit remote buffers after a long loop keeps
/// them live across the loop (ProjectionGemmKernel: up to 24 64-bit values,
/// spills at the 128-register cap); the block, side-effecting and clobbering
/// memory, stays where it is emitted and is neither hoisted nor merged.
Value loadFromCluster(ImplicitLocOpBuilder &b, Value shared, int32_t rank);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_CLUSTER_H
