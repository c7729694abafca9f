//===- TensorCall.cpp - checks of a call on caller tensors ----------------===//

#include "fusion/runtime/TensorCall.h"

#include "fusion/runtime/Error.h"
#include "fusion/runtime/Model.h"

#include <map>
#include <string>

namespace fusion::runtime {

namespace {

/// One tensor checked against its manifest dtype and shape; symbol values
/// are taken from (or checked against) `symbols`.
void checkTensor(
    const std::string &what, const DeviceTensor &t, ElemType dtype,
    const std::vector<Dim> &shape,
    std::map<std::string, std::pair<int64_t, std::string>> &symbols,
    int device) {
  if (t.dtype != dtype)
    throwInvalidArgument(what, ": dtype ", elemTypeName(t.dtype),
                         ", the compiled function takes ", elemTypeName(dtype));
  if (t.shape.size() != shape.size() || t.strides.size() != t.shape.size())
    throwInvalidArgument(what, ": shape ", shapeString(t.shape), " with ",
                         t.strides.size(),
                         " strides; the compiled function "
                         "takes ",
                         shapeString(shape));
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t size = t.shape[d];
    if (!shape[d].isSymbol()) {
      if (size != shape[d].value)
        throwInvalidArgument(what, ": shape ", shapeString(t.shape),
                             "; the compiled function takes ",
                             shapeString(shape), " (dimension ", d, ")");
      continue;
    }
    auto [it, first] = symbols.try_emplace(shape[d].symbol, size, what);
    if (size < 1 || (!first && it->second.first != size))
      throwInvalidArgument(what, ": shape ", shapeString(t.shape), " gives ",
                           shape[d].symbol, " = ", size,
                           first ? " (must be >= 1)"
                                 : "; " + it->second.second + " gave " +
                                       std::to_string(it->second.first));
  }
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.strides[d] != expected)
      throwInvalidArgument(what, ": strides ", shapeString(t.strides),
                           " for shape ", shapeString(t.shape),
                           " are not row-major contiguous (dimension ", d,
                           " has stride ", t.strides[d], ", expected ",
                           expected, "); pass a contiguous tensor or view");
    expected *= t.shape[d];
  }
  if (t.address == 0 || t.address % 16 != 0)
    throwInvalidArgument(what, ": device address ", t.address,
                         t.address ? " is not 16-byte aligned" : " is null");
  if (t.device != device)
    throwInvalidArgument(what, ": on CUDA device ", t.device,
                         "; the compiled function was loaded on device ",
                         device);
}

} // namespace

Symbols checkCallTensors(const Model &model,
                         const std::vector<DeviceTensor> &arguments,
                         const std::vector<DeviceTensor> &results, int device) {
  const std::string fn = "\"" + model.function().name + "\"";
  if (arguments.size() != model.arguments().size() ||
      results.size() != model.results().size())
    throwInvalidArgument("call of ", fn, ": ", arguments.size(),
                         " argument and ", results.size(),
                         " result tensors; the function has ",
                         model.arguments().size(), " arguments and ",
                         model.results().size(), " results");
  std::map<std::string, std::pair<int64_t, std::string>> symbols;
  for (const ManifestArgument &a : model.arguments())
    checkTensor("argument \"" + a.name + "\" (" + model.argumentRole(a.index) +
                    ") of " + fn,
                arguments[a.index], a.dtype, a.shape, symbols, device);
  for (size_t r = 0; r < results.size(); ++r) {
    const int ri = static_cast<int>(r);
    checkTensor("result " + std::to_string(r) + " (" + model.resultRole(ri) +
                    ") of " + fn,
                results[r], model.results()[r].dtype, model.results()[r].shape,
                symbols, device);
  }
  Symbols out{1, 1, 1, 1};
  auto take = [&](std::string_view name, int64_t &value) {
    if (auto it = symbols.find(std::string(name)); it != symbols.end())
      value = it->second.first;
  };
  take(contract::dim::kBatch, out.batch);
  take(contract::dim::kMaxPages, out.max_pages);
  take(contract::dim::kNumPages, out.num_pages);
  if (symbols.count(std::string(contract::dim::kNumSplits)))
    throwInvalidArgument("call of ", fn,
                         ": a tensor is sized by num_splits, "
                         "which the caller does not choose through shapes");
  return out;
}

} // namespace fusion::runtime
