//===- ModelReference.cpp - a whole decoder model on the CPU --------------===//

#include "fusion/tooling/ModelReference.h"

#include "fusion/runtime/Error.h"

#include <algorithm>

namespace fusion::tooling {

using namespace fusion::runtime;

ModelReference::ModelReference(const ModelConfig &config, ModelWeights weights,
                               int64_t numPages, int64_t pageSize,
                               ref::Precision precision)
    : config_(config), weights_(std::move(weights)),
      decoder_(config.decoder(weights_.dtype)), precision_(precision),
      cache_(numPages, pageSize) {
  config_.checkWholeModel();
  if (static_cast<int64_t>(weights_.layers.size()) != config.numHiddenLayers)
    throwInvalidArgument("ModelReference: ", weights_.layers.size(),
                         " layers of weights for a config of ",
                         config.numHiddenLayers);
  const size_t pageElems =
      static_cast<size_t>(pageSize * config.numKeyValueHeads * config.headDim);
  kv_.assign(static_cast<size_t>(config.numHiddenLayers),
             std::vector<uint16_t>(2 * pageElems * numPages));
}

ref::PagedKVCache ModelReference::layerCache(int64_t layer) {
  std::vector<uint16_t> &pages = kv_[static_cast<size_t>(layer)];
  return {pages.data(),      pages.data() + pages.size() / 2, cache_.numPages(),
          cache_.pageSize(), config_.numKeyValueHeads,        config_.headDim};
}

std::vector<uint16_t> ModelReference::step(const std::vector<SeqId> &seqs,
                                           const std::vector<int32_t> &tokens,
                                           ModelStepTaps *taps) {
  const int64_t B = static_cast<int64_t>(seqs.size());
  const int64_t H = config_.hiddenSize, V = config_.vocabSize;
  const DType dt = weights_.dtype;
  if (tokens.size() != seqs.size())
    throwInvalidArgument("ModelReference::step: ", tokens.size(),
                         " tokens for ", seqs.size(), " sequences");
  std::vector<uint16_t> x(static_cast<size_t>(B * H));
  ref::embedding(B, V, H, weights_.embedTokens.data(), tokens.data(), x.data());
  BatchView view = cache_.appendBatch(seqs);
  ref::BlockTable table{view.block_table.data(), view.max_pages};

  std::vector<uint16_t> residual, xOut(x.size()), residualOut(x.size());
  if (taps)
    taps->layerOutputs.assign(weights_.layers.size(), {});
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    const DecoderLayerWeights &lw = weights_.layers[l];
    ref::DecoderLayerRefWeights w{
        lw.front.normWeight.data(),
        lw.front.qkvWeight.data(),
        lw.front.qkvBias.empty() ? nullptr : lw.front.qkvBias.data(),
        lw.oProj.data(),
        lw.postNorm.data(),
        lw.gateUp.data(),
        lw.down.data()};
    ref::decoderLayer(decoder_, B, w, x.data(),
                      residual.empty() ? nullptr : residual.data(),
                      view.positions.data(), view.seq_lens.data(), table,
                      layerCache(static_cast<int64_t>(l)), xOut.data(),
                      residualOut.data(), precision_);
    x.swap(xOut);
    residual = residualOut;
    if (taps) {
      std::vector<uint16_t> &out = taps->layerOutputs[l];
      out.resize(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        out[i] = fromDouble(dt, static_cast<double>(toFloat(dt, x[i])) +
                                    toFloat(dt, residual[i]));
    }
  }
  std::vector<uint16_t> normed(x.size()), logits(static_cast<size_t>(B * V));
  ref::rmsnorm(dt, B, H, x.data(), residual.data(), weights_.finalNorm.data(),
               normed.data(), nullptr, decoder_.frontHalf.normOptions,
               precision_);
  ref::linear(dt, B, H, V, normed.data(), weights_.lmHeadWeight().data(),
              logits.data(), precision_);
  if (taps)
    taps->finalNorm = std::move(normed);
  return logits;
}

} // namespace fusion::tooling
