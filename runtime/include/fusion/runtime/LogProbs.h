//===- LogProbs.h - log-probabilities, perplexity ---------------*- C++ -*-===//
//
// The scoring arithmetic of Engine::score and fusion-generate --score, on the
// host in float64: the log-softmax of one row of logits at a token, and the
// perplexity of a sequence of such log-probabilities (as transformers'
// cross_entropy over the shifted logits, then exp; test/golden/smollm2/
// reference.json holds its numbers for the real checkpoint).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_LOGPROBS_H
#define FUSION_RUNTIME_LOGPROBS_H

#include "fusion/runtime/DType.h"

#include <cstdint>
#include <vector>

namespace fusion::runtime {

/// log(softmax(logits)[token]) in float64: logits[token] - (m + log(sum_v
/// exp(logits[v] - m))) with m the largest logit, so that no exp overflows.
/// `logits` holds `vocab` values as `dtype` bit patterns (f16 / bf16). A NaN
/// logit makes the result NaN; -inf logits contribute nothing (a -inf
/// logit at `token` gives -inf). Throws InvalidArgumentError for vocab < 1,
/// a null row, a token outside [0, vocab), or a row whose largest value is
/// +inf or that is all -inf (no distribution).
double tokenLogProb(DType dtype, const uint16_t *logits, int64_t vocab,
                    int32_t token);

/// exp(-mean(logProbs)): the perplexity of the tokens scored (log-probs in
/// nats, each <= 0). Throws InvalidArgumentError if `logProbs` is empty.
double perplexity(const std::vector<double> &logProbs);

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_LOGPROBS_H
