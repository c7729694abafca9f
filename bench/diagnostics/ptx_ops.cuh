// The PTX instructions the tensor-core diagnostics in this directory use,
// as CUDA C wrappers: shared-memory addresses, 16-byte cp.async (L2 only),
// ldmatrix .x4 (plain and transposed), mma.sync m16n8k16 (f16 in, fp32
// accumulate), mbarriers, named barriers and Hopper bulk copies
// (cp.async.bulk and 3D TMA boxes completing on an mbarrier); on the host,
// the f16 tensor maps those boxes read.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_fp16.h>

/// The tensor map of an f16 array of `rank` dims (`dims` innermost first,
/// `strides` in bytes of dims 1.., `box` in elements), 128-byte swizzled,
/// as every TMA diagnostic here reads it; exits on failure.
inline CUtensorMap encodeSwizzledF16(void *base, cuuint32_t rank,
                                     const cuuint64_t *dims,
                                     const cuuint64_t *strides,
                                     const cuuint32_t *box) {
  CUtensorMap map;
  const cuuint32_t unit[3] = {1, 1, 1};
  if (cuTensorMapEncodeTiled(
          &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank, base, dims, strides, box,
          unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
          CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    printf("cuTensorMapEncodeTiled failed\n");
    exit(1);
  }
  return map;
}

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cpAsync16(void *dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smemAddr(dst)),
               "l"(src)
               : "memory");
}
/// 16-byte cp.async of `bytes` (0 or 16) source bytes, the rest zero-filled.
__device__ __forceinline__ void cpAsync16Zfill(void *dst, const void *src,
                                               int bytes) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smemAddr(dst)),
      "l"(src), "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void ldmatrix4(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddr(p)));
}
__device__ __forceinline__ void ldmatrix4t(uint32_t (&r)[4], const void *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smemAddr(p)));
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mbarInit(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smemAddr(bar)),
               "r"(count));
}
/// Thread 0 initialises `n` mbarriers of one arrival each (a producer's
/// expect_tx) and fences the initialisation; the caller then synchronises
/// the block before any thread waits on them.
__device__ __forceinline__ void initStageBarriers(uint64_t *bars, int n) {
  if (threadIdx.x != 0)
    return;
  for (int i = 0; i < n; ++i)
    mbarInit(&bars[i], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbarExpectTx(uint64_t *bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   smemAddr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarArrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smemAddr(bar))
               : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t *bar, int parity) {
  asm volatile("{\n .reg .pred p;\n WAIT:\n"
               " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               " @!p bra WAIT;\n}" ::"r"(smemAddr(bar)),
               "r"(parity)
               : "memory");
}
__device__ __forceinline__ void bulkCopy(void *dst, const void *src, int bytes,
                                         uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];" ::"r"(smemAddr(dst)),
               "l"(src), "r"(bytes), "r"(smemAddr(bar))
               : "memory");
}
/// Asks L2 for `bytes` (a multiple of 16) at `src`; nothing lands in shared
/// memory and nothing waits.
__device__ __forceinline__ void prefetchL2(const void *src, int bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src),
               "r"(bytes)
               : "memory");
}
/// One TMA box of a 3D tensor map at element coordinates (x, y, z), inner
/// first, completing tx on `bar`. `map` is a __grid_constant__ parameter.
__device__ __forceinline__ void tma3d(void *dst, const void *map, int x, int y,
                                      int z, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(smemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z),
      "r"(smemAddr(bar))
      : "memory");
}
/// A gpu-scope acquire load (the waiting side of a release flag).
__device__ __forceinline__ unsigned ldAcquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
               : "=r"(v)
               : "l"(p)
               : "memory");
  return v;
}
/// Named barrier `id` (1-15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void namedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
