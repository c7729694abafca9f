//===- Reference.cpp - CPU reference of the fusion ops --------------------===//
//
// Every op is a template on the arithmetic type T (float for
// Precision::F32, double for Precision::F64). This file is compiled with
// -ffp-contract=off so that `a*b + c` is two roundings, as documented.
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Reference.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/KVCacheLayout.h"
#include "fusion/runtime/RopeFrequencies.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace fusion::runtime::ref {

namespace {

constexpr double kPi = 3.14159265358979323846;

//===-- Conversions for the arithmetic type -------------------------------===//

template <typename T>
T load(DType dtype, uint16_t bits) {
  return static_cast<T>(toFloat(dtype, bits));
}

inline uint16_t store(DType dtype, float value) {
  return fromFloat(dtype, value);
}
inline uint16_t store(DType dtype, double value) {
  return fromDouble(dtype, value);
}

//===-- Argument checks ---------------------------------------------------===//

void checkPositive(const char *op, const char *what, int64_t value) {
  if (value < 1)
    throwInvalidArgument(op, ": ", what, " must be >= 1, got ", value);
}

void checkNotNull(const char *op, const char *what, const void *ptr) {
  if (!ptr)
    throwInvalidArgument(op, ": ", what, " must not be null");
}

void checkDims(const char *op, const AttentionDims &dims) {
  checkPositive(op, "num_q_heads", dims.numQHeads);
  checkPositive(op, "num_kv_heads", dims.numKVHeads);
  checkPositive(op, "head_dim", dims.headDim);
  if (dims.numQHeads % dims.numKVHeads != 0)
    throwInvalidArgument(op, ": num_q_heads ", dims.numQHeads,
                         " is not a multiple of num_kv_heads ",
                         dims.numKVHeads);
}

void checkCache(const char *op, const PagedKVCache &cache) {
  checkNotNull(op, "key cache", cache.key);
  checkNotNull(op, "value cache", cache.value);
  checkPositive(op, "cache num_pages", cache.numPages);
  checkPositive(op, "cache page_size", cache.pageSize);
  checkPositive(op, "cache num_kv_heads", cache.numKVHeads);
  checkPositive(op, "cache head_dim", cache.headDim);
}

void checkTable(const char *op, const BlockTable &table) {
  checkNotNull(op, "block table", table.data);
  checkPositive(op, "block table max_pages", table.maxPages);
}

/// Checks that tokens [first, last] of row b map to pages in range.
void checkTokens(const char *op, int64_t b, int64_t first, int64_t last,
                 const BlockTable &table, const PagedKVCache &cache) {
  const int64_t lastPageIdx = last / cache.pageSize;
  if (lastPageIdx >= table.maxPages)
    throwInvalidArgument(op, ": row ", b, ": token ", last,
                         " needs page index ", lastPageIdx,
                         " but the block table has ", table.maxPages,
                         " pages per row (page size ", cache.pageSize, ")");
  for (int64_t p = first / cache.pageSize; p <= lastPageIdx; ++p) {
    const int32_t page = table.data[b * table.maxPages + p];
    if (page < 0 || page >= cache.numPages)
      throwInvalidArgument(op, ": row ", b, ": block_table[", b, ", ", p,
                           "] = ", page, " is outside [0, ", cache.numPages,
                           ")");
  }
}

void checkAppendRows(const char *op, int64_t batch, const int32_t *positions,
                     const BlockTable &table, const PagedKVCache &cache) {
  checkNotNull(op, "positions", positions);
  for (int64_t b = 0; b < batch; ++b) {
    if (positions[b] < 0)
      throwInvalidArgument(op, ": row ", b, ": negative position ",
                           positions[b]);
    checkTokens(op, b, positions[b], positions[b], table, cache);
  }
}

void checkAttentionRows(const char *op, int64_t batch, const int32_t *seqLens,
                        const BlockTable &table, const PagedKVCache &cache) {
  checkNotNull(op, "seq_lens", seqLens);
  for (int64_t b = 0; b < batch; ++b) {
    if (seqLens[b] < 0)
      throwInvalidArgument(op, ": row ", b, ": negative sequence length ",
                           seqLens[b]);
    if (seqLens[b] > 0)
      checkTokens(op, b, 0, seqLens[b] - 1, table, cache);
  }
}

void checkRopeOptions(const char *op, const RopeOptions &opts,
                      int64_t headDim) {
  checkPositive(op, "head_dim", headDim);
  const int64_t rd = opts.rotaryDim == 0 ? headDim : opts.rotaryDim;
  if (rd < 0 || rd > headDim || rd % 2 != 0)
    throwInvalidArgument(op, ": rotary_dim must be even and in [2, head_dim = ",
                         headDim, "] (0 = head_dim), got ", opts.rotaryDim);
  if (!(opts.theta > 0.0))
    throwInvalidArgument(op, ": theta must be > 0, got ", opts.theta);
  if (opts.llama3) {
    const Llama3RopeScaling &s = *opts.llama3;
    if (!(s.factor > 0.0) || !(s.lowFreqFactor > 0.0) ||
        !(s.highFreqFactor > s.lowFreqFactor) || s.originalMaxPosition < 1)
      throwInvalidArgument(
          op,
          ": llama3 scaling needs factor > 0, 0 < low_freq_factor < "
          "high_freq_factor and original_max_position >= 1, got factor ",
          s.factor, ", low_freq_factor ", s.lowFreqFactor,
          ", high_freq_factor ", s.highFreqFactor, ", original_max_position ",
          s.originalMaxPosition);
  }
}

//===-- Normalisation -----------------------------------------------------===//

/// Forms row `b` of the normalised input (h = round(x + r) with a
/// residual), writes its bits to `hBits` and its values to `h`.
template <typename T>
void loadNormRow(DType dtype, int64_t hidden, const uint16_t *x,
                 const uint16_t *residual, std::vector<uint16_t> &hBits,
                 std::vector<T> &h) {
  for (int64_t i = 0; i < hidden; ++i) {
    uint16_t bits = x[i];
    if (residual) // Exact sum in double, then one rounding.
      bits = fromDouble(dtype,
                        static_cast<double>(toFloat(dtype, x[i])) +
                            static_cast<double>(toFloat(dtype, residual[i])));
    hBits[i] = bits;
    h[i] = load<T>(dtype, bits);
  }
}

void checkNormArgs(const char *op, int64_t batch, int64_t hidden,
                   const uint16_t *x, const uint16_t *residual,
                   const uint16_t *y, const uint16_t *residualOut) {
  checkPositive(op, "batch", batch);
  checkPositive(op, "hidden", hidden);
  checkNotNull(op, "x", x);
  checkNotNull(op, "y", y);
  if (residualOut && !residual)
    throwInvalidArgument(op, ": residual_out given without a residual");
}

template <typename T>
void rmsnormImpl(DType dtype, int64_t batch, int64_t hidden, const uint16_t *x,
                 const uint16_t *residual, const uint16_t *weight, uint16_t *y,
                 uint16_t *residualOut, const NormOptions &opts) {
  std::vector<uint16_t> hBits(hidden);
  std::vector<T> h(hidden);
  const T eps = static_cast<T>(opts.eps);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t row = b * hidden;
    loadNormRow<T>(dtype, hidden, x + row, residual ? residual + row : nullptr,
                   hBits, h);
    T sumSq = 0;
    for (int64_t i = 0; i < hidden; ++i)
      sumSq += h[i] * h[i];
    const T meanSq = sumSq / static_cast<T>(hidden);
    const T inv = T(1) / std::sqrt(meanSq + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      T w = load<T>(dtype, weight[i]);
      if (opts.unit_offset)
        w = T(1) + w;
      y[row + i] = store(dtype, h[i] * inv * w);
    }
    if (residualOut)
      std::copy(hBits.begin(), hBits.end(), residualOut + row);
  }
}

template <typename T>
void layernormImpl(DType dtype, int64_t batch, int64_t hidden,
                   const uint16_t *x, const uint16_t *residual,
                   const uint16_t *weight, const uint16_t *bias, uint16_t *y,
                   uint16_t *residualOut, const NormOptions &opts) {
  std::vector<uint16_t> hBits(hidden);
  std::vector<T> h(hidden);
  const T eps = static_cast<T>(opts.eps);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t row = b * hidden;
    loadNormRow<T>(dtype, hidden, x + row, residual ? residual + row : nullptr,
                   hBits, h);
    T sum = 0;
    for (int64_t i = 0; i < hidden; ++i)
      sum += h[i];
    const T mean = sum / static_cast<T>(hidden);
    T sumSq = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      const T d = h[i] - mean;
      sumSq += d * d;
    }
    const T var = sumSq / static_cast<T>(hidden);
    const T inv = T(1) / std::sqrt(var + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      const T w = weight ? load<T>(dtype, weight[i]) : T(1);
      const T bi = bias ? load<T>(dtype, bias[i]) : T(0);
      y[row + i] = store(dtype, (h[i] - mean) * inv * w + bi);
    }
    if (residualOut)
      std::copy(hBits.begin(), hBits.end(), residualOut + row);
  }
}

//===-- QKV projection ----------------------------------------------------===//

/// y[b, n] = round(sum_k x[b, k] * W[n, k] + bias[n]) in T, in order of k.
template <typename T>
void linearImpl(DType dtype, int64_t batch, int64_t in, int64_t out,
                const uint16_t *x, const uint16_t *weight, const uint16_t *bias,
                uint16_t *y) {
  std::vector<T> xs(static_cast<size_t>(batch * in));
  for (int64_t i = 0; i < batch * in; ++i)
    xs[i] = load<T>(dtype, x[i]);
  std::vector<T> w(static_cast<size_t>(in));
  for (int64_t n = 0; n < out; ++n) {
    const uint16_t *wRow = weight + n * in;
    for (int64_t i = 0; i < in; ++i)
      w[i] = load<T>(dtype, wRow[i]);
    const T bn = bias ? load<T>(dtype, bias[n]) : T(0);
    for (int64_t b = 0; b < batch; ++b) {
      const T *xRow = xs.data() + b * in;
      T acc = 0;
      for (int64_t i = 0; i < in; ++i)
        acc += xRow[i] * w[i];
      y[b * out + n] = store(dtype, acc + bn);
    }
  }
}

/// The packed projection, then its rows split into q, k and v.
template <typename T>
void qkvProjImpl(DType dtype, int64_t batch, int64_t hidden,
                 const AttentionDims &dims, const uint16_t *x,
                 const uint16_t *weight, const uint16_t *bias, uint16_t *q,
                 uint16_t *k, uint16_t *v) {
  const int64_t rows = dims.qkvRows();
  const int64_t qRows = dims.numQHeads * dims.headDim;
  const int64_t kvRows = dims.numKVHeads * dims.headDim;
  std::vector<uint16_t> all(static_cast<size_t>(batch * rows));
  linearImpl<T>(dtype, batch, hidden, rows, x, weight, bias, all.data());
  for (int64_t b = 0; b < batch; ++b) {
    const uint16_t *row = all.data() + b * rows;
    std::copy(row, row + qRows, q + b * qRows);
    std::copy(row + qRows, row + qRows + kvRows, k + b * kvRows);
    std::copy(row + qRows + kvRows, row + rows, v + b * kvRows);
  }
}

template <typename T>
void siluMulImpl(DType dtype, int64_t batch, int64_t inter,
                 const uint16_t *gateUp, uint16_t *y) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < inter; ++i) {
      const T g = load<T>(dtype, gateUp[b * 2 * inter + i]);
      const T u = load<T>(dtype, gateUp[b * 2 * inter + inter + i]);
      const T silu = g / (T(1) + std::exp(-g));
      y[b * inter + i] = store(dtype, silu * u);
    }
}

//===-- RoPE --------------------------------------------------------------===//

/// The fp32 table shared with the compiler's emitters (RopeFrequencies.h),
/// returned exactly as doubles.
std::vector<double> invFreqF32(const RopeOptions &opts, int64_t rd) {
  std::vector<float> table = ropeInvFreqF32(opts.theta, rd, opts.llama3);
  return std::vector<double>(table.begin(), table.end());
}

std::vector<double> invFreqF64(const RopeOptions &opts, int64_t rd) {
  std::vector<double> out(static_cast<size_t>(rd / 2));
  for (int64_t i = 0; i < rd / 2; ++i) {
    double inv = 1.0 / std::pow(opts.theta, static_cast<double>(2 * i) /
                                                static_cast<double>(rd));
    if (opts.llama3) {
      const Llama3RopeScaling &s = *opts.llama3;
      const double orig = static_cast<double>(s.originalMaxPosition);
      const double wavelen = 2.0 * kPi / inv;
      if (wavelen > orig / s.lowFreqFactor) {
        inv = inv / s.factor;
      } else if (!(wavelen < orig / s.highFreqFactor)) {
        const double smooth = (orig / wavelen - s.lowFreqFactor) /
                              (s.highFreqFactor - s.lowFreqFactor);
        inv = (1.0 - smooth) * inv / s.factor + smooth * inv;
      }
    }
    out[i] = inv;
  }
  return out;
}

/// Rotates the first `rd` elements of one head (`in` -> `out`, may alias)
/// with per-frequency cos/sin, copying the rest.
template <typename T>
void rotateHead(DType dtype, int64_t D, int64_t rd, RopePairing pairing,
                const T *cosv, const T *sinv, const uint16_t *in,
                uint16_t *out) {
  const int64_t half = rd / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t ia = pairing == RopePairing::NeoX ? i : 2 * i;
    const int64_t ib = pairing == RopePairing::NeoX ? i + half : 2 * i + 1;
    const T a = load<T>(dtype, in[ia]);
    const T b = load<T>(dtype, in[ib]);
    const T c = cosv[i], s = sinv[i];
    out[ia] = store(dtype, a * c - b * s);
    out[ib] = store(dtype, b * c + a * s);
  }
  if (out != in)
    std::copy(in + rd, in + D, out + rd);
}

template <typename T>
void ropeImpl(DType dtype, int64_t batch, const AttentionDims &dims,
              const uint16_t *q, const uint16_t *k, const int32_t *positions,
              uint16_t *qOut, uint16_t *kOut, const RopeOptions &opts,
              Precision precision) {
  const int64_t D = dims.headDim;
  const int64_t rd = opts.rotaryDim == 0 ? D : opts.rotaryDim;
  const std::vector<double> invD = ropeInvFreq(opts, D, precision);
  std::vector<T> inv(invD.begin(), invD.end()); // exact for F32
  std::vector<T> cosv(inv.size()), sinv(inv.size());
  for (int64_t b = 0; b < batch; ++b) {
    const T pos = static_cast<T>(positions[b]);
    for (size_t i = 0; i < inv.size(); ++i) {
      const T angle = pos * inv[i];
      cosv[i] = static_cast<T>(std::cos(static_cast<double>(angle)));
      sinv[i] = static_cast<T>(std::sin(static_cast<double>(angle)));
    }
    for (int64_t h = 0; h < dims.numQHeads; ++h) {
      const int64_t off = (b * dims.numQHeads + h) * D;
      rotateHead<T>(dtype, D, rd, opts.pairing, cosv.data(), sinv.data(),
                    q + off, qOut + off);
    }
    if (k) {
      for (int64_t h = 0; h < dims.numKVHeads; ++h) {
        const int64_t off = (b * dims.numKVHeads + h) * D;
        rotateHead<T>(dtype, D, rd, opts.pairing, cosv.data(), sinv.data(),
                      k + off, kOut + off);
      }
    }
  }
}

//===-- Attention ---------------------------------------------------------===//

template <typename T>
void decodeAttentionImpl(DType dtype, int64_t batch, int64_t numQHeads,
                         const uint16_t *q, const PagedKVCache &cache,
                         const BlockTable &table, const int32_t *seqLens,
                         uint16_t *out, const AttentionOptions &opts) {
  const int64_t D = cache.headDim;
  const int64_t P = cache.pageSize;
  const int64_t Hkv = cache.numKVHeads;
  const int64_t group = numQHeads / Hkv;
  const T scale = static_cast<T>(
      opts.scale.value_or(1.0 / std::sqrt(static_cast<double>(D))));
  std::vector<T> qv(D), acc(D), scores;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = seqLens[b];
    scores.resize(static_cast<size_t>(len));
    for (int64_t h = 0; h < numQHeads; ++h) {
      const int64_t kvHead = h / group;
      const int64_t qOff = (b * numQHeads + h) * D;
      for (int64_t d = 0; d < D; ++d)
        qv[d] = load<T>(dtype, q[qOff + d]);
      auto offsetOf = [&](int64_t t) {
        const int64_t page = table.data[b * table.maxPages + t / P];
        return kvCacheOffset(page, t % P, kvHead, P, Hkv, D);
      };
      T maxScore = -std::numeric_limits<T>::infinity();
      for (int64_t t = 0; t < len; ++t) {
        const uint16_t *kRow = cache.key + offsetOf(t);
        T dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += qv[d] * load<T>(dtype, kRow[d]);
        scores[t] = dot * scale;
        maxScore = std::max(maxScore, scores[t]);
      }
      std::fill(acc.begin(), acc.end(), T(0));
      T denom = 0;
      for (int64_t t = 0; t < len; ++t) {
        const T p = std::exp(scores[t] - maxScore);
        denom += p;
        const uint16_t *vRow = cache.value + offsetOf(t);
        for (int64_t d = 0; d < D; ++d)
          acc[d] += p * load<T>(dtype, vRow[d]);
      }
      for (int64_t d = 0; d < D; ++d)
        out[qOff + d] =
            len == 0 ? store(dtype, T(0)) : store(dtype, acc[d] / denom);
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

void rmsnorm(DType dtype, int64_t batch, int64_t hidden, const uint16_t *x,
             const uint16_t *residual, const uint16_t *weight, uint16_t *y,
             uint16_t *residualOut, const NormOptions &opts,
             Precision precision) {
  const char *op = "rmsnorm";
  checkNormArgs(op, batch, hidden, x, residual, y, residualOut);
  checkNotNull(op, "weight", weight);
  if (precision == Precision::F32)
    rmsnormImpl<float>(dtype, batch, hidden, x, residual, weight, y,
                       residualOut, opts);
  else
    rmsnormImpl<double>(dtype, batch, hidden, x, residual, weight, y,
                        residualOut, opts);
}

void layernorm(DType dtype, int64_t batch, int64_t hidden, const uint16_t *x,
               const uint16_t *residual, const uint16_t *weight,
               const uint16_t *bias, uint16_t *y, uint16_t *residualOut,
               const NormOptions &opts, Precision precision) {
  checkNormArgs("layernorm", batch, hidden, x, residual, y, residualOut);
  if (precision == Precision::F32)
    layernormImpl<float>(dtype, batch, hidden, x, residual, weight, bias, y,
                         residualOut, opts);
  else
    layernormImpl<double>(dtype, batch, hidden, x, residual, weight, bias, y,
                          residualOut, opts);
}

void qkvProj(DType dtype, int64_t batch, int64_t hidden,
             const AttentionDims &dims, const uint16_t *x,
             const uint16_t *weight, const uint16_t *bias, uint16_t *q,
             uint16_t *k, uint16_t *v, Precision precision) {
  const char *op = "qkv_proj";
  checkPositive(op, "batch", batch);
  checkPositive(op, "hidden", hidden);
  checkDims(op, dims);
  checkNotNull(op, "x", x);
  checkNotNull(op, "weight", weight);
  checkNotNull(op, "q", q);
  checkNotNull(op, "k", k);
  checkNotNull(op, "v", v);
  if (precision == Precision::F32)
    qkvProjImpl<float>(dtype, batch, hidden, dims, x, weight, bias, q, k, v);
  else
    qkvProjImpl<double>(dtype, batch, hidden, dims, x, weight, bias, q, k, v);
}

void linear(DType dtype, int64_t batch, int64_t in, int64_t out,
            const uint16_t *x, const uint16_t *weight, uint16_t *y,
            Precision precision) {
  const char *op = "linear";
  checkPositive(op, "batch", batch);
  checkPositive(op, "in", in);
  checkPositive(op, "out", out);
  checkNotNull(op, "x", x);
  checkNotNull(op, "weight", weight);
  checkNotNull(op, "y", y);
  if (precision == Precision::F32)
    linearImpl<float>(dtype, batch, in, out, x, weight, nullptr, y);
  else
    linearImpl<double>(dtype, batch, in, out, x, weight, nullptr, y);
}

void siluMul(DType dtype, int64_t batch, int64_t inter, const uint16_t *gateUp,
             uint16_t *y, Precision precision) {
  const char *op = "silu_mul";
  checkPositive(op, "batch", batch);
  checkPositive(op, "inter", inter);
  checkNotNull(op, "gate_up", gateUp);
  checkNotNull(op, "y", y);
  if (precision == Precision::F32)
    siluMulImpl<float>(dtype, batch, inter, gateUp, y);
  else
    siluMulImpl<double>(dtype, batch, inter, gateUp, y);
}

void embedding(int64_t batch, int64_t vocab, int64_t hidden,
               const uint16_t *table, const int32_t *tokens, uint16_t *y) {
  const char *op = "embedding";
  checkPositive(op, "batch", batch);
  checkPositive(op, "vocab", vocab);
  checkPositive(op, "hidden", hidden);
  checkNotNull(op, "table", table);
  checkNotNull(op, "tokens", tokens);
  checkNotNull(op, "y", y);
  for (int64_t b = 0; b < batch; ++b)
    if (tokens[b] < 0 || tokens[b] >= vocab)
      throwInvalidArgument(op, ": row ", b, ": token ", tokens[b],
                           " is outside [0, ", vocab, ")");
  for (int64_t b = 0; b < batch; ++b)
    std::copy(table + tokens[b] * hidden, table + (tokens[b] + 1) * hidden,
              y + b * hidden);
}

void argmax(DType dtype, int64_t batch, int64_t vocab, const uint16_t *logits,
            int32_t *out) {
  const char *op = "argmax";
  checkPositive(op, "batch", batch);
  checkPositive(op, "vocab", vocab);
  checkNotNull(op, "logits", logits);
  checkNotNull(op, "out", out);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t best = 0;
    float bestValue = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = toFloat(dtype, logits[b * vocab + i]);
      if (!std::isnan(v) && (std::isnan(bestValue) || v > bestValue)) {
        best = i;
        bestValue = v;
      }
    }
    out[b] = static_cast<int32_t>(best);
  }
}

std::vector<double> ropeInvFreq(const RopeOptions &opts, int64_t headDim,
                                Precision precision) {
  checkRopeOptions("rope", opts, headDim);
  const int64_t rd = opts.rotaryDim == 0 ? headDim : opts.rotaryDim;
  return precision == Precision::F32 ? invFreqF32(opts, rd)
                                     : invFreqF64(opts, rd);
}

void rope(DType dtype, int64_t batch, const AttentionDims &dims,
          const uint16_t *q, const uint16_t *k, const int32_t *positions,
          uint16_t *qOut, uint16_t *kOut, const RopeOptions &opts,
          Precision precision) {
  const char *op = "rope";
  checkPositive(op, "batch", batch);
  checkPositive(op, "num_q_heads", dims.numQHeads);
  checkRopeOptions(op, opts, dims.headDim);
  checkNotNull(op, "q", q);
  checkNotNull(op, "q_out", qOut);
  checkNotNull(op, "positions", positions);
  if (!k != !kOut)
    throwInvalidArgument(op, ": k and k_out must both be given or both null");
  if (k)
    checkPositive(op, "num_kv_heads", dims.numKVHeads);
  for (int64_t b = 0; b < batch; ++b)
    if (positions[b] < 0)
      throwInvalidArgument(op, ": row ", b, ": negative position ",
                           positions[b]);
  if (precision == Precision::F32)
    ropeImpl<float>(dtype, batch, dims, q, k, positions, qOut, kOut, opts,
                    precision);
  else
    ropeImpl<double>(dtype, batch, dims, q, k, positions, qOut, kOut, opts,
                     precision);
}

void kvAppend(int64_t batch, const uint16_t *k, const uint16_t *v,
              const int32_t *positions, const BlockTable &table,
              const PagedKVCache &cache) {
  const char *op = "kv_append";
  checkPositive(op, "batch", batch);
  checkCache(op, cache);
  checkTable(op, table);
  checkNotNull(op, "k", k);
  checkNotNull(op, "v", v);
  checkAppendRows(op, batch, positions, table, cache);
  const int64_t P = cache.pageSize, Hkv = cache.numKVHeads, D = cache.headDim;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t pos = positions[b];
    const int64_t page = table.data[b * table.maxPages + pos / P];
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t dst = kvCacheOffset(page, pos % P, h, P, Hkv, D);
      const int64_t src = (b * Hkv + h) * D;
      std::memcpy(cache.key + dst, k + src, sizeof(uint16_t) * D);
      std::memcpy(cache.value + dst, v + src, sizeof(uint16_t) * D);
    }
  }
}

void decodeAttention(DType dtype, int64_t batch, int64_t numQHeads,
                     const uint16_t *q, const PagedKVCache &cache,
                     const BlockTable &table, const int32_t *seqLens,
                     uint16_t *out, const AttentionOptions &opts,
                     Precision precision) {
  const char *op = "decode_attention";
  checkPositive(op, "batch", batch);
  checkCache(op, cache);
  checkDims(op, AttentionDims{numQHeads, cache.numKVHeads, cache.headDim});
  checkTable(op, table);
  checkNotNull(op, "q", q);
  checkNotNull(op, "out", out);
  checkAttentionRows(op, batch, seqLens, table, cache);
  if (precision == Precision::F32)
    decodeAttentionImpl<float>(dtype, batch, numQHeads, q, cache, table,
                               seqLens, out, opts);
  else
    decodeAttentionImpl<double>(dtype, batch, numQHeads, q, cache, table,
                                seqLens, out, opts);
}

void decodeLayerFrontHalf(const FrontHalfConfig &config, int64_t batch,
                          const FrontHalfInputs &in, const PagedKVCache &cache,
                          const FrontHalfOutputs &outs, Precision precision) {
  const char *op = "decode_layer_front_half";
  const AttentionDims &dims = config.dims;
  const int64_t H = config.hidden;
  // Validate everything up front so that nothing is written on error.
  checkPositive(op, "batch", batch);
  checkPositive(op, "hidden", H);
  checkDims(op, dims);
  checkCache(op, cache);
  if (cache.numKVHeads != dims.numKVHeads || cache.headDim != dims.headDim)
    throwInvalidArgument(op, ": the cache has ", cache.numKVHeads,
                         " kv heads of dim ", cache.headDim,
                         " but the layer has ", dims.numKVHeads, " of dim ",
                         dims.headDim);
  checkTable(op, in.blockTable);
  checkNotNull(op, "x", in.x);
  if (config.norm == NormKind::RMSNorm)
    checkNotNull(op, "norm weight", in.normWeight);
  checkNotNull(op, "qkv weight", in.qkvWeight);
  checkNotNull(op, "attn_out", outs.attnOut);
  if (outs.residualOut && !in.residual)
    throwInvalidArgument(op, ": residual_out given without a residual");
  checkRopeOptions(op, config.rope, dims.headDim);
  checkAppendRows(op, batch, in.positions, in.blockTable, cache);
  checkAttentionRows(op, batch, in.seqLens, in.blockTable, cache);
  // The appended token must be one of the tokens attention reads: the
  // last one (seq_lens = positions + 1), or, for a block table that maps
  // its logical page onto a page of the window, the token at that slot.
  const int64_t P = cache.pageSize;
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t *row = in.blockTable.data + b * in.blockTable.maxPages;
    const int64_t pos = in.positions[b], len = in.seqLens[b];
    bool attended = false;
    for (int64_t t = pos % P; t < len && !attended; t += P)
      attended = row[t / P] == row[pos / P];
    if (!attended)
      throwInvalidArgument(op, ": row ", b, ": the token appended at position ",
                           pos, " (page ", row[pos / P], ", slot ", pos % P,
                           ") is not among the seq_lens = ", len,
                           " tokens attention reads (one decode token per "
                           "row: seq_lens is normally positions + 1)");
  }

  const DType dt = config.dtype;
  const int64_t D = dims.headDim;
  std::vector<uint16_t> normed(static_cast<size_t>(batch * H));
  std::vector<uint16_t> resid(in.residual ? static_cast<size_t>(batch * H) : 0);
  if (config.norm == NormKind::RMSNorm)
    rmsnorm(dt, batch, H, in.x, in.residual, in.normWeight, normed.data(),
            in.residual ? resid.data() : nullptr, config.normOptions,
            precision);
  else
    layernorm(dt, batch, H, in.x, in.residual, in.normWeight, in.normBias,
              normed.data(), in.residual ? resid.data() : nullptr,
              config.normOptions, precision);

  std::vector<uint16_t> q(static_cast<size_t>(batch * dims.numQHeads * D));
  std::vector<uint16_t> k(static_cast<size_t>(batch * dims.numKVHeads * D));
  std::vector<uint16_t> v(k.size());
  qkvProj(dt, batch, H, dims, normed.data(), in.qkvWeight, in.qkvBias, q.data(),
          k.data(), v.data(), precision);
  if (outs.qProj)
    std::copy(q.begin(), q.end(), outs.qProj);
  if (outs.kProj)
    std::copy(k.begin(), k.end(), outs.kProj);
  rope(dt, batch, dims, q.data(), k.data(), in.positions, q.data(), k.data(),
       config.rope, precision);
  kvAppend(batch, k.data(), v.data(), in.positions, in.blockTable, cache);
  decodeAttention(dt, batch, dims.numQHeads, q.data(), cache, in.blockTable,
                  in.seqLens, outs.attnOut, config.attention, precision);

  if (outs.residualOut)
    std::copy(resid.begin(), resid.end(), outs.residualOut);
  if (outs.normed)
    std::copy(normed.begin(), normed.end(), outs.normed);
  if (outs.q)
    std::copy(q.begin(), q.end(), outs.q);
  if (outs.k)
    std::copy(k.begin(), k.end(), outs.k);
  if (outs.v)
    std::copy(v.begin(), v.end(), outs.v);
}

void decoderLayer(const DecoderConfig &config, int64_t batch,
                  const DecoderLayerRefWeights &weights, const uint16_t *x,
                  const uint16_t *residual, const int32_t *positions,
                  const int32_t *seqLens, const BlockTable &table,
                  const PagedKVCache &cache, uint16_t *xOut,
                  uint16_t *residualOut, Precision precision) {
  const char *op = "decoder_layer";
  const FrontHalfConfig &fh = config.frontHalf;
  const int64_t H = fh.hidden, I = config.intermediate;
  const int64_t qWidth = fh.dims.numQHeads * fh.dims.headDim;
  checkPositive(op, "intermediate", I);
  for (const auto &[what, ptr] :
       {std::pair<const char *, const void *>{"o_proj weight", weights.oProj},
        {"post-attention norm weight", weights.postNorm},
        {"gate/up weight", weights.gateUp},
        {"down weight", weights.down},
        {"x_out", xOut},
        {"residual_out", residualOut}})
    checkNotNull(op, what, ptr);
  const size_t rows = static_cast<size_t>(batch);
  std::vector<uint16_t> attn(rows * qWidth), h(rows * H);
  FrontHalfInputs in{x,         residual,    weights.inputNorm,
                     nullptr,   weights.qkv, weights.qkvBias,
                     positions, seqLens,     table};
  FrontHalfOutputs outs;
  outs.attnOut = attn.data();
  outs.residualOut = residual ? h.data() : nullptr;
  decodeLayerFrontHalf(fh, batch, in, cache, outs, precision);
  if (!residual)
    std::copy(x, x + rows * H, h.begin());

  std::vector<uint16_t> o(rows * H), y2(rows * H);
  linear(fh.dtype, batch, qWidth, H, attn.data(), weights.oProj, o.data(),
         precision);
  rmsnorm(fh.dtype, batch, H, o.data(), h.data(), weights.postNorm, y2.data(),
          residualOut, fh.normOptions, precision);
  std::vector<uint16_t> gateUp(rows * 2 * I), act(rows * I);
  linear(fh.dtype, batch, H, 2 * I, y2.data(), weights.gateUp, gateUp.data(),
         precision);
  siluMul(fh.dtype, batch, I, gateUp.data(), act.data(), precision);
  linear(fh.dtype, batch, I, H, act.data(), weights.down, xOut, precision);
}

} // namespace fusion::runtime::ref
