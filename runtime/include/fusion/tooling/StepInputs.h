//===- StepInputs.h - the inputs of fusion-run's decode steps ---*- C++ -*-===//
//
// What a run feeds the compiled step: reproducible random data, the page
// pool a run needs (checked before anything large is allocated), a random
// K/V history laid out round-robin over the pool, and each step's x,
// residual, positions, lengths and block table (random, or a golden's).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_STEPINPUTS_H
#define FUSION_TOOLING_STEPINPUTS_H

#include "fusion/runtime/DType.h"
#include "fusion/runtime/Golden.h"
#include "fusion/runtime/KVCacheManager.h"
#include "fusion/runtime/Model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fusion::tooling {

using runtime::DType;

/// Random numbers from splitmix64: the same on every platform.
class Random {
public:
  /// A generator whose sequence depends only on `seed`.
  explicit Random(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  /// The next 64 random bits.
  uint64_t next();
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi);
  /// `n` elements of `dtype`, uniform in [lo, hi) before rounding.
  std::vector<uint16_t> tensor(DType dtype, int64_t n, double lo, double hi);

private:
  uint64_t state_;
};

/// A quiet NaN of `dtype` (f16 or bf16), the value of cache slots that must
/// never be read.
uint16_t nanBits(DType dtype);

/// `a * b`, or a CapacityError saying `what` overflows 64-bit sizes.
uint64_t checkedMul(uint64_t a, uint64_t b, const std::string &what);

/// The page pool of a run with random histories.
struct CachePool {
  int64_t numPages = 0; ///< pages in the cache
  int64_t maxPages = 1; ///< the block-table width: most pages of a sequence
  int64_t maxLen = 0;   ///< the longest sequence after the last step
};

/// The pool for histories of `kvLens` tokens plus `steps` new ones each, in
/// pages of `pageSize` tokens: their pages plus one per sequence, or
/// `numPages` when nonzero (--num-pages). Throws CapacityError (naming the
/// options) for a sequence longer than int32 positions allow, more pages
/// than int32 page ids allow, or a `numPages` below what the run needs.
CachePool poolPages(const std::vector<int64_t> &kvLens, int64_t steps,
                    int64_t numPages, int64_t pageSize);

/// Throws CapacityError unless the host can hold the K and V caches of
/// `numPages` pages of `sig`'s geometry twice (the fp64 and the fp32
/// references evolve separately). `cause` names the options that set
/// numPages.
void checkHostCaches(int64_t numPages, const runtime::FrontHalfSignature &sig,
                     const std::string &cause);

/// The K/V history of a run with random histories.
struct RandomHistory {
  /// The pool's bookkeeping: sequence b (id b) holds its history.
  runtime::KVCacheManager kv;
  /// The sequence ids 0..B-1.
  std::vector<runtime::SeqId> ids;
  /// The K and V caches [numPages, pageSize, numKVHeads, headDim]: random
  /// in [-1, 1) in the history's slots, NaN everywhere else.
  std::vector<uint16_t> keyCache, valueCache;
};

/// Fills a pool of `numPages` pages with histories of `kvLens` tokens, a
/// page at a time round-robin over the sequences (so that every sequence's
/// pages are scattered over the pool), with K/V values from `rng`.
RandomHistory fillRandomHistory(const std::vector<int64_t> &kvLens,
                                int64_t numPages,
                                const runtime::FrontHalfSignature &sig,
                                Random &rng);

/// The host data of one decode step.
struct HostStep {
  std::vector<uint16_t> x;        ///< [B, hidden]
  std::vector<uint16_t> residual; ///< [B, hidden], empty without one
  runtime::BatchView view;        ///< positions, lengths, block table
};

/// The next step of a run with random histories: one new token per
/// sequence of `history` (appended), x and (with `hasResidual`) a residual
/// uniform in [-2, 2) from `rng`, a block table of `maxPages` columns.
HostStep randomStep(RandomHistory &history, Random &rng,
                    const runtime::FrontHalfSignature &sig, int64_t maxPages);

/// Throws InvalidArgumentError unless the golden `g` (read from `path`) has
/// the dtype and sizes of `sig`.
void checkGoldenFits(const runtime::GoldenDecodeStep &g,
                     const runtime::FrontHalfSignature &sig,
                     const std::string &path);

/// The golden's step over its cache layout; the residual (if the function
/// takes one) is zeros.
HostStep goldenStep(const runtime::GoldenDecodeStep &golden,
                    const runtime::GoldenCacheLayout &layout, bool hasResidual);

/// The host copies of a step's int32 inputs in `view`.
runtime::StepInputs stepInputs(const runtime::BatchView &view);

/// The K (or V) rows the step of `view` wrote into `cache` (one new token per
/// sequence, at its position): [B, numKVHeads, headDim].
std::vector<uint16_t> newTokenRows(const std::vector<uint16_t> &cache,
                                   const runtime::BatchView &view,
                                   const runtime::FrontHalfSignature &sig);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_STEPINPUTS_H
