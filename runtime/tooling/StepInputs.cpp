//===- StepInputs.cpp - the inputs of fusion-run's decode steps -----------===//

#include "fusion/tooling/StepInputs.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"

#include <algorithm>
#include <limits>
#include <unistd.h>

namespace fusion::tooling {

using namespace fusion::runtime;

uint64_t Random::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Random::uniform(double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
}

std::vector<uint16_t> Random::tensor(DType dtype, int64_t n, double lo,
                                     double hi) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t &e : v)
    e = fromDouble(dtype, uniform(lo, hi));
  return v;
}

uint16_t nanBits(DType dtype) { return dtype == DType::F16 ? 0x7E00 : 0x7FC0; }

/// a * b, or a CapacityError saying `what` overflows 64-bit sizes.
uint64_t checkedMul(uint64_t a, uint64_t b, const std::string &what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throwCapacity(what, ": the byte count overflows 64 bits");
  return r;
}

CachePool poolPages(const std::vector<int64_t> &kvLens, int64_t steps,
                    int64_t numPages, int64_t P) {
  // KVCacheManager: a sequence holds at most INT32_MAX / P pages.
  const int64_t maxTokens = std::numeric_limits<int32_t>::max() / P * P;
  CachePool pool;
  int64_t needed = 0;
  for (size_t b = 0; b < kvLens.size(); ++b) {
    const int64_t len = kvLens[b] + steps;
    if (len > maxTokens)
      throwCapacity("sequence ", b, ": a history of ", kvLens[b],
                    " tokens (--kv-len/--kv-lens) plus --steps ", steps, " = ",
                    len, " tokens exceeds the ", maxTokens,
                    " a sequence can hold (positions are int32; pages of ", P,
                    " tokens)");
    const int64_t pages = KVCacheManager::pagesForTokens(len, P);
    pool.maxPages = std::max(pool.maxPages, pages);
    pool.maxLen = std::max(pool.maxLen, len);
    needed += pages;
  }
  needed += static_cast<int64_t>(kvLens.size());
  if (numPages && numPages < needed)
    throwCapacity("--num-pages ", numPages, " holds fewer pages than the ",
                  needed, " of ", P,
                  " tokens the run needs (the histories plus --steps, plus "
                  "one per sequence)");
  if (!numPages && needed > std::numeric_limits<int32_t>::max())
    throwCapacity("the run needs ", needed, " pages of ", P,
                  " tokens for --batch ", kvLens.size(),
                  " histories of --kv-len(s) plus --steps; page ids "
                  "are int32 (at most 2147483647 pages)");
  pool.numPages = numPages ? numPages : needed;
  return pool;
}

void checkHostCaches(int64_t numPages, const FrontHalfSignature &sig,
                     const std::string &cause) {
  const uint64_t pageBytes = static_cast<uint64_t>(
      kvPageBytes(sig.pageSize, sig.dims.numKVHeads, sig.dims.headDim, 2));
  const uint64_t bytes =
      checkedMul(2 * pageBytes, static_cast<uint64_t>(numPages), cause);
  const uint64_t memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  if (bytes / 2 > memory / 2) // bytes > memory, without overflow
    throwCapacity(cause, ": ", numPages, " pages of K and V cache (", pageBytes,
                  " bytes per page) held twice on the host for the "
                  "fp64 and fp32 references take ",
                  bytes, " bytes, more than this machine's ", memory,
                  " bytes of memory");
}

/// Throws CapacityError unless the device has room for the run: every

RandomHistory fillRandomHistory(const std::vector<int64_t> &kvLens,
                                int64_t numPages, const FrontHalfSignature &sig,
                                Random &rng) {
  const int64_t B = static_cast<int64_t>(kvLens.size()), P = sig.pageSize;
  const int64_t Hkv = sig.dims.numKVHeads, D = sig.dims.headDim;
  RandomHistory h{KVCacheManager(numPages, P), {}, {}, {}};
  for (int64_t b = 0; b < B; ++b) {
    h.ids.push_back(b);
    h.kv.addSequence(b);
  }
  // A page at a time round-robin, so that every sequence's pages are
  // scattered over the pool.
  for (int64_t done = 0;; done += P) {
    bool any = false;
    for (int64_t b = 0; b < B; ++b) {
      int64_t n = std::min<int64_t>(P, kvLens[b] - done);
      if (n > 0) {
        h.kv.appendTokens(b, n);
        any = true;
      }
    }
    if (!any)
      break;
  }
  // Random K/V for the history, NaN everywhere else (must never be read).
  const int64_t cacheElems = numPages * P * Hkv * D;
  h.keyCache.assign(cacheElems, nanBits(sig.dtype));
  h.valueCache.assign(cacheElems, nanBits(sig.dtype));
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t> &pages = h.kv.pages(b);
    for (int64_t t = 0; t < kvLens[b]; ++t) {
      int64_t off = kvCacheOffset(pages[t / P], t % P, 0, P, Hkv, D);
      for (int64_t e = 0; e < Hkv * D; ++e) {
        h.keyCache[off + e] = fromDouble(sig.dtype, rng.uniform(-1, 1));
        h.valueCache[off + e] = fromDouble(sig.dtype, rng.uniform(-1, 1));
      }
    }
  }
  return h;
}

HostStep randomStep(RandomHistory &history, Random &rng,
                    const FrontHalfSignature &sig, int64_t maxPages) {
  const int64_t B = static_cast<int64_t>(history.ids.size());
  HostStep s;
  s.view = history.kv.appendBatch(history.ids, 1, maxPages);
  s.x = rng.tensor(sig.dtype, B * sig.hidden, -2, 2);
  if (sig.residual >= 0)
    s.residual = rng.tensor(sig.dtype, B * sig.hidden, -2, 2);
  return s;
}

void checkGoldenFits(const GoldenDecodeStep &g, const FrontHalfSignature &sig,
                     const std::string &path) {
  const int64_t H = sig.hidden, Hq = sig.dims.numQHeads,
                Hkv = sig.dims.numKVHeads, D = sig.dims.headDim;
  if (g.dtype != sig.dtype || g.hidden != H || g.dims.numQHeads != Hq ||
      g.dims.numKVHeads != Hkv || g.dims.headDim != D)
    throw InvalidArgumentError(
        path + " is " + std::string(dtypeName(g.dtype)) + ", hidden " +
        std::to_string(g.hidden) + ", heads " +
        std::to_string(g.dims.numQHeads) + "/" +
        std::to_string(g.dims.numKVHeads) + ", head_dim " +
        std::to_string(g.dims.headDim) + "; the compiled model is " +
        std::string(dtypeName(sig.dtype)) + ", " + std::to_string(H) + ", " +
        std::to_string(Hq) + "/" + std::to_string(Hkv) + ", " +
        std::to_string(D));
}

HostStep goldenStep(const GoldenDecodeStep &golden,
                    const GoldenCacheLayout &layout, bool hasResidual) {
  HostStep s;
  s.view = BatchView{golden.batch, layout.maxPages, layout.blockTable,
                     layout.positions, layout.seqLens};
  s.x = golden.hiddenStates;
  if (hasResidual)
    s.residual.assign(static_cast<size_t>(golden.batch * golden.hidden), 0);
  return s;
}

StepInputs stepInputs(const BatchView &v) {
  return {v.positions.data(), v.seq_lens.data(), v.block_table.data()};
}

std::vector<uint16_t> newTokenRows(const std::vector<uint16_t> &cache,
                                   const BatchView &view,
                                   const FrontHalfSignature &sig) {
  const int64_t P = sig.pageSize, Hkv = sig.dims.numKVHeads,
                D = sig.dims.headDim;
  std::vector<uint16_t> rows(static_cast<size_t>(view.batch * Hkv * D));
  for (int64_t b = 0; b < view.batch; ++b) {
    int32_t pos = view.positions[b];
    int32_t page = view.block_table[b * view.max_pages + pos / P];
    int64_t off = kvCacheOffset(page, pos % P, 0, P, Hkv, D);
    std::copy_n(cache.begin() + off, Hkv * D, rows.begin() + b * Hkv * D);
  }
  return rows;
}

} // namespace fusion::tooling
