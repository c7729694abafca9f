//===- TensorCall.h - a compiled function called on caller tensors -*- C++
//-*-===//
//
// What a framework's custom op (the PyTorch op of python/fusion/ops.py, or
// any C++ caller with its own tensors) passes to DecodeStep::runOnTensors:
// one tensor per function argument and per function result, in the caller's
// memory, described as DLPack describes them. The sizes of the call (batch,
// max_pages, num_pages) are read from the tensors' shapes, and every tensor
// is checked against the manifest before anything is launched.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_RUNTIME_TENSORCALL_H
#define FUSION_RUNTIME_TENSORCALL_H

#include "fusion/runtime/Manifest.h"

#include <cstdint>
#include <vector>

namespace fusion::runtime {

class Model;

/// A tensor in device memory its caller owns: its address, element type,
/// sizes and strides (in elements, as torch.Tensor.stride() gives them)
/// and the CUDA device ordinal it lives on.
struct DeviceTensor {
  uint64_t address = 0;
  ElemType dtype = ElemType::F16;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int device = 0;
};

/// Reads the run-time sizes of a call of `model` from its tensors and
/// checks them: `arguments[i]` is function argument i, `results[r]` the
/// memory result r is written to. Each tensor must have the manifest's
/// dtype and rank, every constant dimension, and for a symbolic dimension
/// (batch, max_pages, num_pages) a value >= 1, the same as the first tensor
/// with that symbol gave it; row-major contiguous strides (a dimension of
/// size 1 may have any stride); a non-null address aligned to
/// contract::kBufferAlignment; and device `device`. A result may share no
/// byte with an argument or another result (the kernels write it). The
/// symbols no tensor names are 1; no tensor may be sized by num_splits (the
/// caller chooses it as a number). Throws InvalidArgumentError naming the
/// tensor ("argument \"x\" (input) of \"decode_layer\"", "result 1
/// (residual_out) of ...") and what differs, or for counts that differ from
/// the function's arguments and results.
Symbols checkCallTensors(const Model &model,
                         const std::vector<DeviceTensor> &arguments,
                         const std::vector<DeviceTensor> &results, int device);

} // namespace fusion::runtime

#endif // FUSION_RUNTIME_TENSORCALL_H
