//===- TensorCall.cpp - checks of a call on caller tensors ----------------===//

#include "fusion/runtime/TensorCall.h"

#include "fusion/contract/Contract.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/Model.h"

#include <algorithm>
#include <string>

namespace fusion::runtime {

namespace {

/// The tensors of one call with their manifest descriptions; labels are
/// built only for messages.
struct CallCheck {
  const Model &model;
  const std::vector<DeviceTensor> &arguments, &results;
  int device;
  /// Each symbol's value and the index of the tensor that gave it
  /// (arguments first, then results).
  struct Seen {
    std::string symbol;
    int64_t value;
    size_t tensor;
  };
  std::vector<Seen> symbols;

  size_t count() const { return arguments.size() + results.size(); }
  const DeviceTensor &tensor(size_t i) const {
    return i < arguments.size() ? arguments[i] : results[i - arguments.size()];
  }
  /// "argument \"x\" (input) of \"decode_layer\"" / "result 1 (...) of ...".
  std::string label(size_t i) const {
    const std::string fn = " of \"" + model.function().name + "\"";
    if (i < arguments.size())
      return "argument \"" + model.arguments()[i].name + "\" (" +
             model.argumentRole(static_cast<int>(i)) + ")" + fn;
    const int r = static_cast<int>(i - arguments.size());
    return "result " + std::to_string(r) + " (" + model.resultRole(r) + ")" +
           fn;
  }
  uint64_t bytes(size_t i) const {
    const DeviceTensor &t = tensor(i);
    int64_t n = elemTypeSize(t.dtype);
    for (int64_t d : t.shape)
      n *= d;
    return static_cast<uint64_t>(n);
  }

  void checkDims(size_t i, const std::vector<Dim> &shape);
  void checkLayout(size_t i);
  void check(size_t i, ElemType dtype, const std::vector<Dim> &shape);
  void checkResultOverlaps();
  int64_t value(std::string_view symbol) const;
};

void CallCheck::checkDims(size_t i, const std::vector<Dim> &shape) {
  const DeviceTensor &t = tensor(i);
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t size = t.shape[d];
    if (!shape[d].isSymbol()) {
      if (size != shape[d].value)
        throwInvalidArgument(label(i), ": shape ", shapeString(t.shape),
                             "; the compiled function takes ",
                             shapeString(shape), " (dimension ", d, ")");
      continue;
    }
    auto it = std::find_if(symbols.begin(), symbols.end(), [&](const Seen &s) {
      return s.symbol == shape[d].symbol;
    });
    if (size < 1)
      throwInvalidArgument(label(i), ": shape ", shapeString(t.shape),
                           " gives ", shape[d].symbol, " = ", size,
                           " (must be >= 1)");
    if (it == symbols.end())
      symbols.push_back({shape[d].symbol, size, i});
    else if (it->value != size)
      throwInvalidArgument(label(i), ": shape ", shapeString(t.shape),
                           " gives ", shape[d].symbol, " = ", size, "; ",
                           label(it->tensor), " gave ", it->value);
  }
}

void CallCheck::checkLayout(size_t i) {
  const DeviceTensor &t = tensor(i);
  int64_t expected = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.strides[d] != expected)
      throwInvalidArgument(label(i), ": strides ", shapeString(t.strides),
                           " for shape ", shapeString(t.shape),
                           " are not row-major contiguous (dimension ", d,
                           " has stride ", t.strides[d], ", expected ",
                           expected, "); pass a contiguous tensor or view");
    expected *= t.shape[d];
  }
  if (t.address == 0 || t.address % contract::kBufferAlignment != 0)
    throwInvalidArgument(
        label(i), ": device address ", t.address,
        t.address ? " is not " : " is null",
        t.address ? std::to_string(contract::kBufferAlignment) + "-byte aligned"
                  : "");
  if (t.device != device)
    throwInvalidArgument(label(i), ": on CUDA device ", t.device,
                         "; the compiled function was loaded on device ",
                         device);
}

void CallCheck::check(size_t i, ElemType dtype, const std::vector<Dim> &shape) {
  const DeviceTensor &t = tensor(i);
  if (t.dtype != dtype)
    throwInvalidArgument(label(i), ": dtype ", elemTypeName(t.dtype),
                         ", the compiled function takes ", elemTypeName(dtype));
  if (t.shape.size() != shape.size() || t.strides.size() != t.shape.size())
    throwInvalidArgument(
        label(i), ": shape ", shapeString(t.shape), " with ", t.strides.size(),
        " strides; the compiled function takes ", shapeString(shape));
  checkDims(i, shape);
  checkLayout(i);
}

/// The kernels write the results: none may share a byte with an argument or
/// another result.
void CallCheck::checkResultOverlaps() {
  for (size_t r = arguments.size(); r < count(); ++r)
    for (size_t j = 0; j < count(); ++j) {
      if (j == r)
        continue;
      const uint64_t a = tensor(r).address, b = tensor(j).address;
      if (a < b + bytes(j) && b < a + bytes(r))
        throwInvalidArgument(label(r), " overlaps ", label(j),
                             ": the kernels write the results, so each needs "
                             "memory of its own");
    }
}

int64_t CallCheck::value(std::string_view symbol) const {
  for (const Seen &s : symbols)
    if (s.symbol == symbol)
      return s.value;
  return 1;
}

} // namespace

Symbols checkCallTensors(const Model &model,
                         const std::vector<DeviceTensor> &arguments,
                         const std::vector<DeviceTensor> &results, int device) {
  if (arguments.size() != model.arguments().size() ||
      results.size() != model.results().size())
    throwInvalidArgument("call of \"", model.function().name,
                         "\": ", arguments.size(), " argument and ",
                         results.size(), " result tensors; the function has ",
                         model.arguments().size(), " arguments and ",
                         model.results().size(), " results");
  CallCheck c{model, arguments, results, device, {}};
  for (size_t i = 0; i < arguments.size(); ++i)
    c.check(i, model.arguments()[i].dtype, model.arguments()[i].shape);
  for (size_t r = 0; r < results.size(); ++r)
    c.check(arguments.size() + r, model.results()[r].dtype,
            model.results()[r].shape);
  c.checkResultOverlaps();
  if (std::any_of(c.symbols.begin(), c.symbols.end(), [](const auto &s) {
        return s.symbol == contract::dim::kNumSplits;
      }))
    throwInvalidArgument("call of \"", model.function().name,
                         "\": a tensor is sized by num_splits, which the "
                         "caller chooses as a number, not through shapes");
  return Symbols{c.value(contract::dim::kBatch), 1,
                 c.value(contract::dim::kMaxPages),
                 c.value(contract::dim::kNumPages)};
}

} // namespace fusion::runtime
