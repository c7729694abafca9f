//===- ProjectionArgmax.cpp - argmax folded into the projection -----------===//
//
// A linear -> argmax kernel (FormKernels rule 1: the final norm, the LM head
// and greedy sampling in one kernel) finds each token's largest logit without
// a kernel of its own. The semantics are those of the lone argmax kernel
// (ArgmaxKernel.cpp, `ref::argmax`): the stored logits (the rounded outputs,
// widened to f32 without rounding) compare exactly, -0 == +0, ties go to the
// lowest index, NaN is never chosen and a row of NaN gives 0. They hold
// because candidates compare as packed 64-bit keys, unsigned:
//
//   key(v, i) = ordered(v) * 2^32 + (2^32 - 1 - i),   key(NaN, i) = 0,
//
// where ordered() maps the f32 bits of v (-0 taken as +0) to an unsigned code
// in the order of the values (negative: every bit flipped; otherwise: the
// sign bit set). A larger value, then a lower index, gives a larger key, and
// every number's key is above 0 (-inf's is 0x007fffff'ffffffff at most).
//
// Each pair epilogue takes the larger of its two keys into the token's slot
// in shared memory (atom.shared.max.u64; slot = token mod the function's
// token tile). After a token tile the CTA publishes each token's slot with
// one red.global.max.u64 into the argmax_keys workspace and zeroes the slot.
// After the last tile every CTA fences and counts its arrival; the last one
// to arrive reads each token's key, writes id = 2^32 - 1 - (key mod 2^32)
// (0 for key 0) and zeroes the key, and countArrival zeroes the counter: the
// zero_init workspaces are zero again for the next launch (docs/abi.md 1.2).
//
//===----------------------------------------------------------------------===//

#include "../Fragments/AsyncCopy.h"
#include "../Fragments/Reduce.h"
#include "Projection.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <limits>

using namespace mlir;
using namespace mlir::fusion;

/// key(v, i) (i64) of the rounded logit `value` (activation type) at output
/// column `column` (index).
static Value getArgmaxKey(ImplicitLocOpBuilder &b, Value value, Value column) {
  Value v = extToF32(b, value);
  Value isNumber = cmpF(b, CmpFPredicate::ORD, v, v);
  Value zero = constF32(b, 0.0);
  v = select(b, cmpF(b, CmpFPredicate::OEQ, v, zero), zero, v);
  Value bits = arith::BitcastOp::create(b, b.getI32Type(), v);
  Value negative = cmpI(b, CmpIPredicate::slt, bits, constI32(b, 0));
  Value ordered =
      select(b, negative, xorI(b, bits, constI32(b, -1)),
             orI(b, bits, constI32(b, std::numeric_limits<int32_t>::min())));
  auto widen = [&](Value i32) {
    return arith::ExtUIOp::create(b, b.getI64Type(), i32).getResult();
  };
  Value high = arith::ShLIOp::create(b, widen(ordered), constI64(b, 32));
  Value low = widen(xorI(b, indexToI32(b, column), constI32(b, -1)));
  return select(b, isNumber, orI(b, high, low), constI64(b, 0));
}

void mlir::fusion::appendArgmaxWorkspaces(SmallVectorImpl<KernelParam> &params,
                                          MLIRContext *context) {
  Type i32 = IntegerType::get(context, 32);
  SmallVector<KernelParam> workspaces{
      {KernelParam::Kind::Workspace,
       std::string(contract::role::kArgmaxKeys),
       i32,
       {std::string(contract::dim::kBatch), "2"},
       /*zeroInitialized=*/true},
      {KernelParam::Kind::Workspace,
       std::string(contract::role::kArgmaxArrivals),
       i32,
       {std::string(contract::dim::kBatch)},
       /*zeroInitialized=*/true},
  };
  auto end = llvm::find_if(params, [](const KernelParam &p) {
    return p.kind == KernelParam::Kind::TensorMap ||
           p.kind == KernelParam::Kind::Scalar;
  });
  params.insert(end, workspaces.begin(), workspaces.end());
}

void mlir::fusion::bindProjectionArgmax(ImplicitLocOpBuilder &b,
                                        ProjectionPlan &p, gpu::GPUFuncOp func,
                                        const KernelArgs &args,
                                        int64_t tileTokens, int64_t blockSize) {
  p.argmaxTile = tileTokens;
  p.argmaxThreads = blockSize;
  p.argmaxGlobalKeys =
      getGlobalPointer(b, args.param(contract::role::kArgmaxKeys));
  p.argmaxArrivals = args.param(contract::role::kArgmaxArrivals);
  // The schedules budget these two buffers as getArgmaxSharedBytes.
  p.argmaxKeys =
      addWorkgroupBuffer(func, b.getI64Type(), tileTokens, /*alignment=*/8);
  p.argmaxLast = addWorkgroupBuffer(func, b.getI32Type(), 1);
  // Ordered before the first tile's atomics by forEachTokenTile's barrier.
  forLoop(b, threadIdX(b), constIndex(b, tileTokens), constIndex(b, blockSize),
          [&](ImplicitLocOpBuilder &lb, Value slot) {
            storeScalar(lb, constI64(lb, 0), p.argmaxKeys, slot);
          });
}

void mlir::fusion::emitArgmaxCandidates(ImplicitLocOpBuilder &b,
                                        const ProjectionPlan &p,
                                        const PairRows &rows, Value token,
                                        Value rawA, Value rawB) {
  Value key = arith::MaxUIOp::create(b, getArgmaxKey(b, rawA, rows.rowA),
                                     getArgmaxKey(b, rawB, rows.rowB));
  Value slot = remUI(b, token, constIndex(b, p.argmaxTile));
  memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::maxu, key, p.argmaxKeys,
                              ValueRange{slot});
}

void mlir::fusion::publishArgmaxTile(ImplicitLocOpBuilder &b,
                                     const ProjectionPlan &p, Value tileStart,
                                     Value count) {
  barrier(b);
  // A thread per slot; a tile may have more tokens than the CTA threads
  // (a GEMM-shaped variant of 32 threads with tiles of 64).
  forLoop(
      b, threadIdX(b), count, constIndex(b, p.argmaxThreads),
      [&](ImplicitLocOpBuilder &lb, Value slot) {
        Value key = loadScalar(lb, p.argmaxKeys, slot);
        storeScalar(lb, constI64(lb, 0), p.argmaxKeys, slot);
        ifThen(lb, cmpI(lb, CmpIPredicate::ne, key, constI64(lb, 0)),
               [&](ImplicitLocOpBuilder &kb) {
                 Value at = offsetPointer(kb, p.argmaxGlobalKeys,
                                          addI(kb, tileStart, slot),
                                          kb.getI64Type());
                 LLVM::AtomicRMWOp::create(kb, LLVM::AtomicBinOp::umax, at, key,
                                           LLVM::AtomicOrdering::monotonic);
               });
      });
}

void mlir::fusion::finishArgmax(ImplicitLocOpBuilder &b,
                                const ProjectionPlan &p) {
  // Release: this CTA's reds before its arrival.
  fenceGPU(b);
  barrier(b);
  Value tid = threadIdX(b);
  countArrival(
      b, tid, p.argmaxArrivals,
      [](ImplicitLocOpBuilder &tb) { return constIndex(tb, 0); },
      indexToI32(b, gridDimX(b)), p.argmaxLast);
  barrier(b);
  Value last = loadScalar(b, p.argmaxLast, constIndex(b, 0));
  ifThen(
      b, cmpI(b, CmpIPredicate::ne, last, constI32(b, 0)),
      [&](ImplicitLocOpBuilder &lb) {
        // Acquire: every CTA's reds are read after the counter.
        fenceGPU(lb);
        forLoop(
            lb, tid, p.batch, constIndex(lb, p.argmaxThreads),
            [&](ImplicitLocOpBuilder &ib, Value token) {
              Value at =
                  offsetPointer(ib, p.argmaxGlobalKeys, token, ib.getI64Type());
              Value key = LLVM::LoadOp::create(ib, ib.getI64Type(), at,
                                               /*alignment=*/8);
              LLVM::StoreOp::create(ib, constI64(ib, 0), at, /*alignment=*/8);
              Value low = arith::TruncIOp::create(ib, ib.getI32Type(), key);
              Value id =
                  select(ib, cmpI(ib, CmpIPredicate::eq, key, constI64(ib, 0)),
                         constI32(ib, 0), xorI(ib, low, constI32(ib, -1)));
              storeScalar(ib, id, p.tokensOut, token);
            });
      });
}
