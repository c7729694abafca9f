//===- LogProbs.cpp - log-probabilities and perplexity from logits --------===//

#include "fusion/runtime/LogProbs.h"

#include "fusion/runtime/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fusion::runtime {

double tokenLogProb(DType dtype, const uint16_t *logits, int64_t vocab,
                    int32_t token) {
  if (vocab < 1 || !logits)
    throwInvalidArgument("tokenLogProb: a row of ", vocab,
                         " logits at address ", logits);
  if (token < 0 || token >= vocab)
    throwInvalidArgument("tokenLogProb: token ", token,
                         " is outside the vocabulary [0, ", vocab, ")");
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t v = 0; v < vocab; ++v) {
    double x = toFloat(dtype, logits[v]);
    nan |= std::isnan(x);
    m = std::max(m, x);
  }
  if (nan)
    return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(m))
    throwInvalidArgument("tokenLogProb: the row's largest logit is ", m,
                         "; softmax is undefined");
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    sum += std::exp(static_cast<double>(toFloat(dtype, logits[v])) - m);
  return static_cast<double>(toFloat(dtype, logits[token])) - m - std::log(sum);
}

double perplexity(const std::vector<double> &logProbs) {
  if (logProbs.empty())
    throwInvalidArgument("perplexity: no tokens scored");
  double sum = 0;
  for (double lp : logProbs)
    sum += lp;
  return std::exp(-sum / static_cast<double>(logProbs.size()));
}

} // namespace fusion::runtime
